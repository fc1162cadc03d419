//! Where a SNAP stream ends on the quorum port. After the SNAP packet the leader writes
//! ZooKeeper's DataTree serialization (ZAB-WIRE.md §4.4: sessions, the ACL cache, the
//! znodes in pre-order, ended by the path `"/"`) and the string `"BenWasHere"`, with no
//! length in front: a reader finds the end only by walking the stream's own lengths.
//! [`SnapScan`] does that over bytes as they arrive, remembering how far it got, so a
//! stream of any size is walked once; it checks lengths and the signature, nothing of
//! what the records mean (that is the snapshot reader's).

use super::packet::Limits;
use super::quorum::SNAP_SIGNATURE;
use super::WireError;

/// StatPersisted: czxid, mzxid, ctime, mtime (longs), version, cversion, aversion
/// (ints), ephemeralOwner, pzxid (longs).
const STAT_PERSISTED_BYTES: usize = 4 * 8 + 3 * 4 + 2 * 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    SessionCount,
    Sessions(u32),
    AclCount,
    Acls(u32),
    Nodes,
    Signature,
}

/// A walk over one SNAP stream, fed the stream's bytes from its first one on.
#[derive(Clone, Debug)]
pub struct SnapScan {
    at: usize,
    stage: Stage,
    limits: Limits,
    max_stream: usize,
}

/// A SNAP stream that has fully arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapEnd {
    /// The DataTree serialization's length, its `"/"` included (what
    /// [`crate::zab::message::Message::Snap`] carries as `snapshot`).
    pub stream_len: usize,
    /// The bytes it took with the signature after it.
    pub used: usize,
}

/// The bytes `buf[at..]` hold a whole item of `len` bytes from `at`.
fn has(buf: &[u8], at: usize, len: usize) -> bool {
    buf.len() >= at.saturating_add(len)
}

fn int_at(buf: &[u8], at: usize) -> Option<i32> {
    buf.get(at..at + 4)
        .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

impl SnapScan {
    /// A walk whose buffers and strings are bounded by `limits.max_buffer` and whose
    /// whole stream by `max_stream` bytes (a member buffers the snapshot in memory).
    pub fn new(limits: Limits, max_stream: usize) -> SnapScan {
        SnapScan {
            at: 0,
            stage: Stage::SessionCount,
            limits,
            max_stream,
        }
    }

    /// Walks on over `buf`, the stream's bytes so far (always from its first byte):
    /// `Ok(None)` until the stream and the signature are in.
    ///
    /// Errors: a negative count, a length past the bounds (at once, before the bytes
    /// arrive), a stream past `max_stream`, a signature other than `"BenWasHere"`.
    pub fn scan(&mut self, buf: &[u8]) -> Result<Option<SnapEnd>, WireError> {
        loop {
            let Some(len) = self.item_len(buf)? else {
                return Ok(None);
            };
            let end = self.at + len;
            if end > self.max_stream {
                return Err(WireError::TooLarge {
                    what: "SNAP stream",
                    len: end as i64,
                    max: self.max_stream,
                });
            }
            if !has(buf, self.at, len) {
                return Ok(None);
            }
            let start = self.at;
            self.at = end;
            self.stage = match self.stage {
                Stage::SessionCount => Stage::Sessions(self.count(buf, start)?),
                Stage::Sessions(n) => Stage::Sessions(n - 1),
                Stage::AclCount => Stage::Acls(self.count(buf, start)?),
                Stage::Acls(n) => Stage::Acls(n - 1),
                Stage::Nodes if buf[start..end] == [0, 0, 0, 1, b'/'] => Stage::Signature,
                Stage::Nodes => Stage::Nodes,
                Stage::Signature => {
                    if &buf[start + 4..end] != SNAP_SIGNATURE.as_bytes() {
                        return Err(WireError::PacketData {
                            name: "SNAP",
                            what: format!(
                                "signature {:?}, not {SNAP_SIGNATURE:?}",
                                String::from_utf8_lossy(&buf[start + 4..end])
                            ),
                        });
                    }
                    return Ok(Some(SnapEnd {
                        stream_len: start,
                        used: end,
                    }));
                }
            };
            self.stage = match self.stage {
                Stage::Sessions(0) => Stage::AclCount,
                Stage::Acls(0) => Stage::Nodes,
                s => s,
            };
        }
    }

    fn count(&self, buf: &[u8], at: usize) -> Result<u32, WireError> {
        let n = int_at(buf, at).unwrap_or_default();
        u32::try_from(n).map_err(|_| WireError::PacketData {
            name: "SNAP",
            what: format!("count {n} at stream byte {at}"),
        })
    }

    /// The length of the string or buffer whose length int is at `at`, its int
    /// included (`None` until the int is in).
    fn sized(&self, buf: &[u8], at: usize, what: &'static str) -> Result<Option<usize>, WireError> {
        let Some(len) = int_at(buf, at) else {
            return Ok(None);
        };
        if len == -1 {
            return Ok(Some(4));
        }
        if len < 0 || len as usize > self.limits.max_buffer {
            return Err(WireError::TooLarge {
                what,
                len: i64::from(len),
                max: self.limits.max_buffer,
            });
        }
        Ok(Some(4 + len as usize))
    }

    /// The length of the next item from `self.at`, once enough of it is in to tell.
    fn item_len(&self, buf: &[u8]) -> Result<Option<usize>, WireError> {
        let at = self.at;
        match self.stage {
            Stage::SessionCount | Stage::AclCount => Ok(Some(4)),
            // long sessionId, int timeout.
            Stage::Sessions(_) => Ok(Some(12)),
            Stage::Acls(_) => {
                // long aclRef, then vector<ACL{int perms; Id{ustring; ustring}}>.
                let Some(count) = int_at(buf, at + 8) else {
                    return Ok(None);
                };
                let mut len = 12;
                if count == -1 {
                    return Ok(Some(len));
                }
                if count < 0 || (count as usize).saturating_mul(12) > self.max_stream {
                    return Err(WireError::TooLarge {
                        what: "SNAP ACL list",
                        len: i64::from(count),
                        max: self.max_stream / 12,
                    });
                }
                for _ in 0..count {
                    len += 4;
                    for what in ["SNAP ACL scheme", "SNAP ACL id"] {
                        match self.sized(buf, at + len, what)? {
                            Some(n) => len += n,
                            None => return Ok(None),
                        }
                    }
                }
                Ok(Some(len))
            }
            Stage::Nodes => {
                let Some(path) = self.sized(buf, at, "SNAP znode path")? else {
                    return Ok(None);
                };
                if !has(buf, at, path) {
                    return Ok(None);
                }
                if &buf[at + 4..at + path] == b"/" {
                    return Ok(Some(path));
                }
                let Some(data) = self.sized(buf, at + path, "SNAP znode data")? else {
                    return Ok(None);
                };
                Ok(Some(path + data + 8 + STAT_PERSISTED_BYTES))
            }
            Stage::Signature => self.sized(buf, at, "SNAP signature"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{BufMut, BytesMut};

    fn ustring(b: &mut BytesMut, s: &str) {
        b.put_i32(s.len() as i32);
        b.put_slice(s.as_bytes());
    }

    /// One session, one ACL list, the root and `/a` with data, then "/" and the
    /// signature.
    fn stream() -> (BytesMut, usize) {
        let mut b = BytesMut::new();
        b.put_i32(1);
        b.put_i64(0x100);
        b.put_i32(30_000);
        b.put_i32(1);
        b.put_i64(1);
        b.put_i32(1);
        b.put_i32(31);
        ustring(&mut b, "world");
        ustring(&mut b, "anyone");
        for (path, data) in [("", &b""[..]), ("/a", &b"xyz"[..])] {
            ustring(&mut b, path);
            b.put_i32(data.len() as i32);
            b.put_slice(data);
            b.put_i64(-1);
            b.put_slice(&[0; STAT_PERSISTED_BYTES]);
        }
        ustring(&mut b, "/");
        let stream_len = b.len();
        ustring(&mut b, SNAP_SIGNATURE);
        (b, stream_len)
    }

    #[test]
    fn finds_the_end_however_the_bytes_arrive() {
        let (b, stream_len) = stream();
        let want = SnapEnd {
            stream_len,
            used: b.len(),
        };
        let mut whole = SnapScan::new(Limits::default(), 1 << 20);
        assert_eq!(whole.scan(&b).unwrap(), Some(want));
        let mut bytewise = SnapScan::new(Limits::default(), 1 << 20);
        for cut in 0..b.len() {
            assert_eq!(bytewise.scan(&b[..cut]).unwrap(), None, "{cut}");
        }
        assert_eq!(bytewise.scan(&b).unwrap(), Some(want));
    }

    #[test]
    fn refuses_bad_lengths_and_signatures() {
        let (b, _) = stream();
        let mut small = SnapScan::new(Limits::default(), 40);
        assert!(matches!(
            small.scan(&b),
            Err(WireError::TooLarge {
                what: "SNAP stream",
                ..
            })
        ));
        let mut bad = b.to_vec();
        let n = bad.len();
        bad[n - 1] = b'X';
        assert!(SnapScan::new(Limits::default(), 1 << 20)
            .scan(&bad)
            .is_err());
        let mut negative = BytesMut::new();
        negative.put_i32(-5);
        assert!(SnapScan::new(Limits::default(), 1 << 20)
            .scan(&negative)
            .is_err());
        let mut huge_path = BytesMut::new();
        huge_path.put_i32(0);
        huge_path.put_i32(0);
        huge_path.put_i32(i32::MAX);
        assert!(matches!(
            SnapScan::new(Limits::default(), 1 << 20).scan(&huge_path),
            Err(WireError::TooLarge { .. })
        ));
    }
}

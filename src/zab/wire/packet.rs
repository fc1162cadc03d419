//! The quorum port's unit: jute's `QuorumPacket{int type; long zxid; buffer data;
//! vector<Id> authinfo}` (zookeeper.jute, ZAB-WIRE.md §3), written raw on the TCP
//! stream with no length prefix: a reader learns a packet's end by walking its lengths.
//! [`QuorumPacket::decode`] does that on buffered bytes and asks for more until a whole
//! packet is in, refusing lengths past the bound at once so a hostile length never
//! makes the caller buffer without end.

use bytes::{BufMut, Bytes, BytesMut};
use jute::{Id, Record};

use super::reader::Input;
use super::{max_buffer_bytes, WireError, DEFAULT_JUTE_MAXBUFFER};

/// One QuorumPacket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumPacket {
    /// The packet type (`Leader.java` constants: PROPOSAL 2, ACK 3 ...).
    pub kind: i32,
    /// The zxid field; its meaning depends on the type.
    pub zxid: i64,
    /// The data buffer; `None` is jute's null (-1).
    pub data: Option<Bytes>,
    /// The auth Ids (REQUEST, echoed by PING replies); `None` is jute's null (-1).
    pub authinfo: Option<Vec<Id>>,
}

/// Size bounds on a packet being read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The longest data buffer or Id string (BinaryInputArchive's `jute.maxbuffer` +
    /// extrasize, [`max_buffer_bytes`]).
    pub max_buffer: usize,
    /// The longest whole packet, bytes.
    pub max_packet: usize,
}

impl Default for Limits {
    /// ZooKeeper's defaults: 2 MiB - 2 per buffer; a whole packet at most twice that
    /// (ZooKeeper bounds only each buffer; authinfo is a few short Ids).
    fn default() -> Limits {
        let max_buffer = max_buffer_bytes(DEFAULT_JUTE_MAXBUFFER);
        Limits {
            max_buffer,
            max_packet: 2 * max_buffer,
        }
    }
}

impl QuorumPacket {
    /// A packet with no authinfo.
    pub fn new(kind: i32, zxid: i64, data: Option<Bytes>) -> QuorumPacket {
        QuorumPacket {
            kind,
            zxid,
            data,
            authinfo: None,
        }
    }

    /// Appends the packet's jute form to `out`.
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_i32(self.kind);
        out.put_i64(self.zxid);
        self.data.encode(out);
        match &self.authinfo {
            None => out.put_i32(-1),
            Some(ids) => ids.encode(out),
        }
    }

    /// The packet's jute form.
    pub fn to_bytes(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(24 + self.data.as_ref().map_or(0, Bytes::len));
        self.encode(&mut b);
        b.freeze()
    }

    /// Reads the packet at the front of `buf`: `Ok(None)` until all of it has arrived,
    /// else the packet and the bytes it took.
    ///
    /// Errors: a length or count below -1, a buffer or string past
    /// `limits.max_buffer`, a packet past `limits.max_packet`, an Id string that is not
    /// UTF-8.
    pub fn decode(buf: &[u8], limits: Limits) -> Result<Option<(QuorumPacket, usize)>, WireError> {
        let Some(end) = packet_len(buf, limits)? else {
            return Ok(None);
        };
        let mut r = Input::new(&buf[..end]);
        let kind = r.int("packet type")?;
        let zxid = r.long("packet zxid")?;
        let data = r.buffer("packet data")?.map(Bytes::copy_from_slice);
        let authinfo = match r.int("packet authinfo count")? {
            -1 => None,
            n => {
                let mut ids = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    let scheme = r.ustring("authinfo scheme")?;
                    let id = r.ustring("authinfo id")?;
                    ids.push(Id { scheme, id });
                }
                Some(ids)
            }
        };
        Ok(Some((
            QuorumPacket {
                kind,
                zxid,
                data,
                authinfo,
            },
            end,
        )))
    }
}

/// The length of the packet at the front of `buf` once it is all there, walking its
/// lengths (`None`: more bytes needed).
fn packet_len(buf: &[u8], limits: Limits) -> Result<Option<usize>, WireError> {
    let int_at = |at: usize| -> Option<i32> {
        buf.get(at..at + 4)
            .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    let within = |end: usize, what: &'static str| -> Result<(), WireError> {
        if end > limits.max_packet {
            return Err(WireError::TooLarge {
                what,
                len: end as i64,
                max: limits.max_packet,
            });
        }
        Ok(())
    };
    // A buffer or string at `at`: the offset after it, None if its length is not in.
    let skip = |at: usize, what: &'static str| -> Result<Option<usize>, WireError> {
        let Some(len) = int_at(at) else {
            return Ok(None);
        };
        if len == -1 {
            return Ok(Some(at + 4));
        }
        if len < 0 || len as usize > limits.max_buffer {
            return Err(WireError::TooLarge {
                what,
                len: i64::from(len),
                max: limits.max_buffer,
            });
        }
        let end = at + 4 + len as usize;
        within(end, "packet")?;
        Ok(Some(end))
    };
    let Some(mut at) = skip(12, "packet data")? else {
        return Ok(None);
    };
    let Some(count) = int_at(at) else {
        return Ok(None);
    };
    at += 4;
    if count != -1 {
        // Each Id is at least two string lengths.
        if count < 0 || (count as usize).saturating_mul(8) > limits.max_packet {
            return Err(WireError::TooLarge {
                what: "authinfo count",
                len: i64::from(count),
                max: limits.max_packet / 8,
            });
        }
        for _ in 0..count {
            for what in ["authinfo scheme", "authinfo id"] {
                match skip(at, what)? {
                    Some(next) => at = next,
                    None => return Ok(None),
                }
            }
        }
    }
    if buf.len() < at {
        return Ok(None);
    }
    Ok(Some(at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// ZAB-WIRE.md §3: a leader PING is `00000005 <zxid> FFFFFFFF FFFFFFFF`.
    #[test]
    fn leader_ping_golden_bytes() {
        let p = QuorumPacket::new(5, 0x1_0000_0002, None);
        let want: Vec<u8> = [
            &[0, 0, 0, 5][..],
            &0x1_0000_0002i64.to_be_bytes(),
            &[0xff; 8],
        ]
        .concat();
        assert_eq!(&p.to_bytes()[..], &want[..]);
        assert_eq!(
            QuorumPacket::decode(&want, Limits::default()).unwrap(),
            Some((p, 20))
        );
    }

    #[test]
    fn a_partial_packet_needs_more_bytes() {
        let p = QuorumPacket {
            kind: 1,
            zxid: -1,
            data: Some(Bytes::from_static(b"request")),
            authinfo: Some(vec![Id {
                scheme: "digest".into(),
                id: "u:p".into(),
            }]),
        };
        let mut b = p.to_bytes().to_vec();
        for cut in 0..b.len() {
            assert_eq!(
                QuorumPacket::decode(&b[..cut], Limits::default()).unwrap(),
                None,
                "{cut}"
            );
        }
        let len = b.len();
        b.extend_from_slice(&[9, 9]);
        assert_eq!(
            QuorumPacket::decode(&b, Limits::default()).unwrap(),
            Some((p, len)),
            "the next packet's bytes are left alone"
        );
    }

    #[test]
    fn oversized_and_negative_lengths_are_refused_at_once() {
        let limits = Limits {
            max_buffer: 100,
            max_packet: 150,
        };
        let head = |len: i32| {
            let mut b = vec![0, 0, 0, 2];
            b.extend_from_slice(&0i64.to_be_bytes());
            b.extend_from_slice(&len.to_be_bytes());
            b
        };
        assert!(matches!(
            QuorumPacket::decode(&head(101), limits),
            Err(WireError::TooLarge { len: 101, .. })
        ));
        assert!(QuorumPacket::decode(&head(-2), limits).is_err());
        assert_eq!(QuorumPacket::decode(&head(100), limits).unwrap(), None);
        // Data of 100, then Ids that would pass 150 bytes in all.
        let mut b = head(100);
        b.extend_from_slice(&[0; 100]);
        b.extend_from_slice(&3i32.to_be_bytes());
        b.extend_from_slice(&40i32.to_be_bytes());
        assert!(matches!(
            QuorumPacket::decode(&b, limits),
            Err(WireError::TooLarge { what: "packet", .. })
        ));
        let mut b = head(-1);
        b.extend_from_slice(&i32::MAX.to_be_bytes());
        assert!(QuorumPacket::decode(&b, limits).is_err());
        let mut b = head(-1);
        b.extend_from_slice(&(-7i32).to_be_bytes());
        assert!(QuorumPacket::decode(&b, limits).is_err());
    }

    fn id() -> impl Strategy<Value = Id> {
        ("[a-z]{0,8}", "\\PC{0,12}").prop_map(|(scheme, id)| Id { scheme, id })
    }

    proptest! {
        #[test]
        fn packets_round_trip(
            kind: i32, zxid: i64,
            data in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..300)),
            authinfo in proptest::option::of(proptest::collection::vec(id(), 0..4)),
        ) {
            let p = QuorumPacket { kind, zxid, data: data.map(Bytes::from), authinfo };
            let b = p.to_bytes();
            prop_assert_eq!(QuorumPacket::decode(&b, Limits::default()).unwrap(), Some((p, b.len())));
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = QuorumPacket::decode(&b, Limits::default());
        }
    }
}

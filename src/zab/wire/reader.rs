//! A bounds-checked reader over jute bytes (ZooKeeper's BinaryInputArchive) that knows
//! its offset, so a refusal names the byte where a record went wrong: in a file (the
//! importer), a QuorumPacket or a txn.
//!
//! Encodings are jute's (shared/PROTOCOL.md "Framing", ZAB-WIRE.md "Jute encoding"):
//! int = 4 bytes big-endian, long = 8, byte = 1, buffer/ustring = int length then the
//! bytes (-1 = null), vector = int count (-1 = null) then the items.

use jute::{Acl, Id};

/// Why bytes did not decode: the offset (from the start of the file) of the item that
/// failed, and what was expected there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at byte {offset}: {what}")]
pub struct Malformed {
    /// Byte offset in the file.
    pub offset: u64,
    pub what: String,
}

impl Malformed {
    /// A failure at `offset`.
    pub fn at(offset: usize, what: impl Into<String>) -> Malformed {
        Malformed {
            offset: offset as u64,
            what: what.into(),
        }
    }
}

/// A cursor over `bytes`, whose first byte is at file offset `base`.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    bytes: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> Input<'a> {
    /// A reader over a whole file.
    pub fn new(bytes: &'a [u8]) -> Input<'a> {
        Input::at(bytes, 0)
    }

    /// A reader over a slice that starts at file offset `base` (a log record's payload).
    pub fn at(bytes: &'a [u8], base: usize) -> Input<'a> {
        Input {
            bytes,
            pos: 0,
            base,
        }
    }

    /// File offset of the next byte.
    pub fn offset(&self) -> usize {
        self.base + self.pos
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// Every byte before the next one (what a checksum written here covers).
    pub fn consumed(&self) -> &'a [u8] {
        &self.bytes[..self.pos]
    }

    /// The next `n` bytes.
    ///
    /// Errors: fewer than `n` are left (the message says what was being read).
    #[inline(always)]
    pub fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], Malformed> {
        match self.bytes.get(self.pos..self.pos.saturating_add(n)) {
            Some(out) => {
                self.pos += n;
                Ok(out)
            }
            None => Err(self.truncated(n, what)),
        }
    }

    /// [`Input::take`]'s error, out of line: every field of every packet takes bytes,
    /// and the inlined fast path stays a bounds check (issue 16: `int` was 2 % of a
    /// write's instructions as a call).
    #[cold]
    #[inline(never)]
    fn truncated(&self, n: usize, what: &str) -> Malformed {
        Malformed::at(
            self.offset(),
            format!(
                "{what}: needs {n} bytes, only {} left (truncated)",
                self.remaining()
            ),
        )
    }

    /// One byte.
    #[inline(always)]
    pub fn byte(&mut self, what: &str) -> Result<u8, Malformed> {
        Ok(self.take(1, what)?[0])
    }

    /// A jute boolean (one byte, non-zero = true, as Java's DataInput reads it).
    #[inline]
    pub fn boolean(&mut self, what: &str) -> Result<bool, Malformed> {
        Ok(self.byte(what)? != 0)
    }

    /// A 4-byte big-endian int.
    #[inline(always)]
    pub fn int(&mut self, what: &str) -> Result<i32, Malformed> {
        let b = self.take(4, what)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// An 8-byte big-endian long.
    #[inline(always)]
    pub fn long(&mut self, what: &str) -> Result<i64, Malformed> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }

    /// A length-prefixed buffer; `None` for null (-1).
    ///
    /// Errors: a negative length other than -1, or one past the end of the bytes.
    #[inline(always)]
    pub fn buffer(&mut self, what: &str) -> Result<Option<&'a [u8]>, Malformed> {
        let at = self.offset();
        let len = self.int(what)?;
        if len == -1 {
            return Ok(None);
        }
        match usize::try_from(len) {
            Ok(n) if n <= self.remaining() => self.take(n, what).map(Some),
            _ => Err(self.bad_length(at, len, what)),
        }
    }

    /// [`Input::buffer`]'s error, out of line (see [`Input::truncated`]).
    #[cold]
    #[inline(never)]
    fn bad_length(&self, at: usize, len: i32, what: &str) -> Malformed {
        Malformed::at(
            at,
            format!(
                "{what}: length {len} does not fit the {} bytes left",
                self.remaining()
            ),
        )
    }

    /// A UTF-8 string; null reads as empty (as keel's codec reads it).
    pub fn ustring(&mut self, what: &str) -> Result<String, Malformed> {
        let at = self.offset();
        let bytes = self.buffer(what)?.unwrap_or_default();
        String::from_utf8(bytes.to_vec())
            .map_err(|_| Malformed::at(at, format!("{what}: not valid UTF-8")))
    }

    /// A znode path: a non-null string.
    ///
    /// Errors: null, or not UTF-8.
    pub fn path(&mut self, what: &str) -> Result<String, Malformed> {
        self.path_ref(what).map(str::to_owned)
    }

    /// A znode path borrowed from the input: [`Input::path`] without the copy.
    ///
    /// Errors: null, or not UTF-8.
    #[inline]
    pub fn path_ref(&mut self, what: &str) -> Result<&'a str, Malformed> {
        let at = self.offset();
        match self.buffer(what)? {
            None => Err(Malformed::at(at, format!("{what}: null path"))),
            Some(b) => std::str::from_utf8(b)
                .map_err(|_| Malformed::at(at, format!("{what}: not valid UTF-8"))),
        }
    }

    /// A vector count (null = 0), checked against the bytes left so a damaged count
    /// cannot make us allocate: every item takes at least `min_item_bytes`.
    pub fn count(&mut self, what: &str, min_item_bytes: usize) -> Result<usize, Malformed> {
        let at = self.offset();
        let n = self.int(what)?;
        if n == -1 {
            return Ok(0);
        }
        if n < 0 || (n as usize).saturating_mul(min_item_bytes.max(1)) > self.remaining() {
            return Err(Malformed::at(
                at,
                format!(
                    "{what}: count {n} does not fit the {} bytes left",
                    self.remaining()
                ),
            ));
        }
        Ok(n as usize)
    }

    /// A vector of ACLs (ZooKeeper's `vector<org.apache.zookeeper.data.ACL>`: perms,
    /// scheme, id).
    pub fn acl_list(&mut self, what: &str) -> Result<Vec<Acl>, Malformed> {
        // perms (4) + two string lengths (4 + 4).
        let n = self.count(what, 12)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let perms = self.int(what)?;
            let scheme = self.ustring(what)?;
            let id = self.ustring(what)?;
            out.push(Acl {
                perms,
                id: Id { scheme, id },
            });
        }
        Ok(out)
    }

    /// A vector of strings.
    pub fn string_list(&mut self, what: &str) -> Result<Vec<String>, Malformed> {
        let n = self.count(what, 4)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(self.ustring(what)?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_jute_primitives_with_offsets() {
        let mut b = Vec::new();
        b.extend_from_slice(&7i32.to_be_bytes());
        b.extend_from_slice(&(-2i64).to_be_bytes());
        b.extend_from_slice(&(-1i32).to_be_bytes());
        b.extend_from_slice(&2i32.to_be_bytes());
        b.extend_from_slice(b"hi");
        let mut r = Input::new(&b);
        assert_eq!(r.int("a").unwrap(), 7);
        assert_eq!(r.long("b").unwrap(), -2);
        assert_eq!(r.buffer("c").unwrap(), None);
        assert_eq!(r.offset(), 16);
        assert_eq!(r.ustring("d").unwrap(), "hi");
        let e = r.int("e").unwrap_err();
        assert_eq!(e.offset, 22);
        assert!(e.what.contains("truncated"), "{e:?}");
    }

    #[test]
    fn hostile_lengths_are_refused_without_allocating() {
        let b = 0x7fff_ffffi32.to_be_bytes();
        assert!(Input::new(&b).buffer("x").is_err());
        assert!(Input::new(&b).acl_list("x").is_err());
        let b = (-5i32).to_be_bytes();
        assert!(Input::new(&b).buffer("x").is_err());
    }
}

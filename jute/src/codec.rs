//! Primitive jute encodings and the [`Record`] trait.
//!
//! Encodings (shared/PROTOCOL.md, "Framing"): int = 4 bytes big-endian, long = 8 bytes
//! big-endian, bool = 1 byte, buffer/ustring = int length then bytes (-1 = null),
//! vector = int count (-1 = null) then the items. Null buffers and vectors decode as
//! empty; ZooKeeper's server treats both the same for every client request.

use bytes::{BufMut, BytesMut};
use nom::number::complete::{be_i32, be_i64, be_u8};

/// Why a record could not be decoded. Every variant means the packet is malformed and
/// the connection that sent it must be closed (shared/DESIGN.md, "Rules of thumb").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JuteError {
    /// The input ended before the record did.
    #[error("record truncated: needed more bytes than the packet holds")]
    Truncated,
    /// A length or count was negative (other than -1) or larger than the bytes left.
    #[error("invalid length {0}")]
    BadLength(i32),
    /// A record carried a type tag this protocol does not define here (e.g. a read op
    /// inside multi).
    #[error("unexpected record type {0}")]
    BadType(i32),
    /// Bytes were left over after the record.
    #[error("{0} trailing bytes after the record")]
    Trailing(usize),
}

/// A cursor over a packet's bytes; each read consumes from the front.
///
/// Built on nom's big-endian number parsers; all reads are bounds-checked.
pub struct Decoder<'a> {
    input: &'a [u8],
}

fn lift<T>(r: nom::IResult<&[u8], T>) -> Result<(&[u8], T), JuteError> {
    r.map_err(|_: nom::Err<nom::error::Error<&[u8]>>| JuteError::Truncated)
}

impl<'a> Decoder<'a> {
    /// A decoder over `input`.
    pub fn new(input: &'a [u8]) -> Self {
        Decoder { input }
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> &'a [u8] {
        self.input
    }

    /// Whether every byte has been consumed.
    pub fn is_empty(&self) -> bool {
        self.input.is_empty()
    }

    /// A 4-byte big-endian int.
    pub fn int(&mut self) -> Result<i32, JuteError> {
        let (rest, v) = lift(be_i32(self.input))?;
        self.input = rest;
        Ok(v)
    }

    /// An 8-byte big-endian long.
    pub fn long(&mut self) -> Result<i64, JuteError> {
        let (rest, v) = lift(be_i64(self.input))?;
        self.input = rest;
        Ok(v)
    }

    /// Skips `n` bytes.
    ///
    /// Errors: [`JuteError::Truncated`] if fewer are left.
    pub fn skip(&mut self, n: usize) -> Result<(), JuteError> {
        if n > self.input.len() {
            return Err(JuteError::Truncated);
        }
        self.input = &self.input[n..];
        Ok(())
    }

    /// One raw byte.
    pub fn bool_byte(&mut self) -> Result<u8, JuteError> {
        let (rest, v) = lift(be_u8(self.input))?;
        self.input = rest;
        Ok(v)
    }

    /// A one-byte bool (any non-zero byte is true, as in Java's DataInput).
    pub fn bool(&mut self) -> Result<bool, JuteError> {
        let (rest, v) = lift(be_u8(self.input))?;
        self.input = rest;
        Ok(v != 0)
    }

    /// A length-prefixed byte buffer; null (-1) decodes as empty.
    pub fn buffer(&mut self) -> Result<&'a [u8], JuteError> {
        let len = self.int()?;
        if len == -1 {
            return Ok(&[]);
        }
        if len < 0 || len as usize > self.input.len() {
            return Err(JuteError::BadLength(len));
        }
        let (head, rest) = self.input.split_at(len as usize);
        self.input = rest;
        Ok(head)
    }

    /// A length-prefixed byte buffer; null (-1) decodes as `None`.
    pub fn buffer_opt(&mut self) -> Result<Option<&'a [u8]>, JuteError> {
        if self.input.len() >= 4 && self.input[..4] == [0xff; 4] {
            self.input = &self.input[4..];
            return Ok(None);
        }
        self.buffer().map(Some)
    }

    /// A length-prefixed UTF-8 string; null (-1) decodes as empty. Bytes that are not
    /// UTF-8 become U+FFFD as ZooKeeper's BinaryInputArchive reads them (see
    /// [`java_string`]), never an error: such a path is then refused for its U+FFFD,
    /// and a digest id keeps it.
    pub fn ustring(&mut self) -> Result<String, JuteError> {
        Ok(java_string(self.buffer()?))
    }

    /// Like [`Decoder::ustring`], with null (-1) as `None`: ZooKeeper keeps a null
    /// string null, and some requests answer it apart from the empty string.
    pub fn ustring_opt(&mut self) -> Result<Option<String>, JuteError> {
        Ok(self.buffer_opt()?.map(java_string))
    }

    /// A vector: int count (-1 = null, decoded as empty) then `count` items.
    ///
    /// The count is checked against the bytes left (every item takes at least one
    /// byte), so a hostile count cannot make us allocate.
    pub fn vector<T>(
        &mut self,
        mut item: impl FnMut(&mut Self) -> Result<T, JuteError>,
    ) -> Result<Vec<T>, JuteError> {
        let count = self.int()?;
        if count == -1 {
            return Ok(Vec::new());
        }
        if count < 0 || count as usize > self.input.len() {
            return Err(JuteError::BadLength(count));
        }
        let mut out = Vec::with_capacity(count as usize);
        for _ in 0..count {
            out.push(item(self)?);
        }
        Ok(out)
    }

    /// A vector of ustrings.
    pub fn string_vector(&mut self) -> Result<Vec<String>, JuteError> {
        self.vector(|d| d.ustring())
    }

    /// A nested record.
    pub fn record<R: Record>(&mut self) -> Result<R, JuteError> {
        R::decode(self)
    }
}

/// Bytes decoded as Java's `new String(bytes, UTF_8)` decodes them (JDK 17): each
/// invalid sequence becomes one U+FFFD, split where Rust's `from_utf8_lossy` splits it,
/// except that the three-byte form of a UTF-16 surrogate (`ED A0..BF 80..BF`, as
/// CESU-8 writes half a supplementary character) is one U+FFFD for all three bytes.
pub fn java_string(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    let mut rest = bytes;
    loop {
        match std::str::from_utf8(rest) {
            Ok(valid) => {
                out.push_str(valid);
                return out;
            }
            Err(e) => {
                let (valid, bad) = rest.split_at(e.valid_up_to());
                out.push_str(&String::from_utf8_lossy(valid));
                out.push('\u{fffd}');
                let surrogate = bad.len() >= 3
                    && bad[0] == 0xed
                    && (0xa0..=0xbf).contains(&bad[1])
                    && (0x80..=0xbf).contains(&bad[2]);
                let skip = if surrogate {
                    3
                } else {
                    e.error_len().unwrap_or(bad.len())
                };
                rest = &bad[skip..];
            }
        }
    }
}

/// Encoding helpers on the output buffer.
pub trait Encoder {
    /// Appends a 4-byte big-endian int.
    fn int(&mut self, v: i32);
    /// Appends an 8-byte big-endian long.
    fn long(&mut self, v: i64);
    /// Appends a one-byte bool.
    fn bool(&mut self, v: bool);
    /// Appends a length-prefixed buffer.
    fn buffer(&mut self, v: &[u8]);
    /// Appends a length-prefixed UTF-8 string.
    fn ustring(&mut self, v: &str);
    /// Appends a vector of strings.
    fn string_vector(&mut self, v: &[String]);
}

impl Encoder for BytesMut {
    fn int(&mut self, v: i32) {
        self.put_i32(v);
    }
    fn long(&mut self, v: i64) {
        self.put_i64(v);
    }
    fn bool(&mut self, v: bool) {
        self.put_u8(v as u8);
    }
    fn buffer(&mut self, v: &[u8]) {
        self.put_i32(v.len() as i32);
        self.put_slice(v);
    }
    fn ustring(&mut self, v: &str) {
        self.buffer(v.as_bytes());
    }
    fn string_vector(&mut self, v: &[String]) {
        self.put_i32(v.len() as i32);
        for s in v {
            self.ustring(s);
        }
    }
}

/// A jute record: encodes to and decodes from its wire form.
pub trait Record: Sized {
    /// Appends the record's wire form to `out`.
    fn encode(&self, out: &mut BytesMut);
    /// Reads the record from the front of `d`.
    fn decode(d: &mut Decoder<'_>) -> Result<Self, JuteError>;
}

/// Decodes one record that must span all of `input`.
///
/// Errors: any [`JuteError`]; [`JuteError::Trailing`] when bytes are left over.
pub fn decode_all<R: Record>(input: &[u8]) -> Result<R, JuteError> {
    let mut d = Decoder::new(input);
    let r = R::decode(&mut d)?;
    if !d.is_empty() {
        return Err(JuteError::Trailing(d.remaining().len()));
    }
    Ok(r)
}

//! ZooKeeper's txn log file, `log.<first zxid in hex>` (FileTxnLog, Util.readTxnBytes,
//! SerializeUtils.deserializeTxn, the `org.apache.zookeeper.txn` records of
//! zookeeper.jute).
//!
//! Layout, every number big-endian jute:
//! - FileHeader: int magic `ZKLG`, int version (2), long dbid.
//! - Records: long Adler-32 of the payload, int payload length, the payload, the byte
//!   `B` (0x42). The payload is a TxnHeader (long sessionId, int cxid, long zxid,
//!   long time, int type), the txn record of that type, and on 3.6+ a TxnDigest (int
//!   version, long tree digest).
//! - Zero padding to the end of the file: ZooKeeper preallocates log files, so a
//!   record whose length is 0 ends the log.
//!
//! What ends a file and what is refused: zero padding is the normal end. A record cut
//! short (its bytes run past the end of the file, or its `B` is missing) is a write
//! that a crash interrupted, accepted as the end only if nothing but zeros follows it
//! (ZooKeeper stops at such a record too; a later log file must then continue the zxids,
//! which the importer checks). A length outside [1, limit], an Adler-32 mismatch on a
//! complete record, non-zero bytes after the end, or a payload that does not decode
//! are refused, naming the byte offset.

use super::input::{adler32, Input, Malformed};
/// The payload decoding is the server wire's: one reader of ZooKeeper's txn records.
pub use crate::zab::wire::txn::{parse_payload, TxnDigest, TxnHeader, ZkTxn as Txn};
pub use crate::zab::wire::DEFAULT_JUTE_MAXBUFFER;

/// `ZKLG` as ZooKeeper's FileTxnLog.TXNLOG_MAGIC.
pub const LOG_MAGIC: i32 = i32::from_be_bytes(*b"ZKLG");
/// The log format version every ZooKeeper 3.x writes.
pub const LOG_VERSION: i32 = 2;
/// The byte that ends every record.
const END_OF_RECORD: u8 = b'B';

/// The largest record payload ZooKeeper reads back with this `jute.maxbuffer`: a
/// record is one jute buffer ([`crate::zab::wire::max_buffer_bytes`]).
pub fn max_record_bytes(jute_maxbuffer: usize) -> usize {
    crate::zab::wire::max_buffer_bytes(jute_maxbuffer)
}

/// One log record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnRecord {
    /// Byte offset of the record in its file.
    pub offset: u64,
    pub header: TxnHeader,
    pub txn: Txn,
    pub digest: Option<TxnDigest>,
}

/// How a log file's records ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogEnd {
    /// Zero padding (or the end of the file) at this offset.
    Clean { offset: u64 },
    /// A record cut short at this offset, only zeros after it.
    Torn { offset: u64, what: String },
}

/// A reader over one log file's records.
#[derive(Debug)]
pub struct LogFile<'a> {
    bytes: &'a [u8],
    pos: usize,
    max_record: usize,
    /// The FileHeader's dbid.
    pub dbid: i64,
    end: Option<LogEnd>,
}

impl<'a> LogFile<'a> {
    /// Checks the file header. `max_record` bounds a record's payload length (see
    /// [`max_record_bytes`]).
    ///
    /// Errors: a short header, a magic other than `ZKLG`, a version other than 2.
    pub fn open(bytes: &'a [u8], max_record: usize) -> Result<LogFile<'a>, Malformed> {
        let mut r = Input::new(bytes);
        let magic = r.int("file header magic")?;
        if magic != LOG_MAGIC {
            return Err(Malformed::at(
                0,
                format!(
                    "magic 0x{magic:08x} is not ZKLG (0x{LOG_MAGIC:08x}): not a ZooKeeper txn log"
                ),
            ));
        }
        let version = r.int("file header version")?;
        if version != LOG_VERSION {
            return Err(Malformed::at(
                4,
                format!("txn log format version {version}; ZooKeeper 3.x writes {LOG_VERSION}"),
            ));
        }
        let dbid = r.long("file header dbid")?;
        Ok(LogFile {
            bytes,
            pos: r.offset(),
            max_record,
            dbid,
            end: None,
        })
    }

    /// How the records ended, once [`LogFile::next`] returned `None`.
    pub fn end(&self) -> Option<&LogEnd> {
        self.end.as_ref()
    }

    /// The next record, or `None` at the end of the file's records.
    ///
    /// Errors: see the module documentation.
    pub fn next_record(&mut self) -> Result<Option<TxnRecord>, Malformed> {
        if self.end.is_some() {
            return Ok(None);
        }
        let start = self.pos;
        let rest = &self.bytes[start..];
        if rest.len() < 12 {
            let end = if rest.iter().all(|&b| b == 0) {
                LogEnd::Clean {
                    offset: start as u64,
                }
            } else {
                LogEnd::Torn {
                    offset: start as u64,
                    what: format!("record header cut short ({} bytes)", rest.len()),
                }
            };
            self.end = Some(end);
            return Ok(None);
        }
        let mut r = Input::at(rest, start);
        let crc = r.long("record checksum")?;
        let len = r.int("record length")?;
        if len == 0 {
            self.finish(
                start + 12,
                LogEnd::Clean {
                    offset: start as u64,
                },
            )?;
            return Ok(None);
        }
        if len < 0 || len as usize > self.max_record {
            return Err(Malformed::at(
                start + 8,
                format!(
                    "record length {len} is outside 1..={} (raise --jute-maxbuffer if ZooKeeper ran with a larger jute.maxbuffer)",
                    self.max_record
                ),
            ));
        }
        let body = start + 12;
        let marker = body + len as usize;
        if marker >= self.bytes.len() {
            self.end = Some(LogEnd::Torn {
                offset: start as u64,
                what: format!("record of {len} bytes runs past the end of the file"),
            });
            return Ok(None);
        }
        if self.bytes[marker] != END_OF_RECORD {
            self.finish(
                marker + 1,
                LogEnd::Torn {
                    offset: start as u64,
                    what: format!("record of {len} bytes lacks its end-of-record byte"),
                },
            )?;
            return Ok(None);
        }
        let payload = &self.bytes[body..marker];
        let computed = adler32(payload);
        if computed != crc {
            return Err(Malformed::at(
                start,
                format!(
                    "record checksum mismatch (stored 0x{crc:x}, Adler-32 of the {len} byte payload 0x{computed:x}): the log is damaged"
                ),
            ));
        }
        self.pos = marker + 1;
        let (header, txn, digest) = parse_payload(payload, body)?;
        Ok(Some(TxnRecord {
            offset: start as u64,
            header,
            txn,
            digest,
        }))
    }

    /// Ends the file at `end` after checking that only zeros follow `from`.
    fn finish(&mut self, from: usize, end: LogEnd) -> Result<(), Malformed> {
        let from = from.min(self.bytes.len());
        if let Some(i) = self.bytes[from..].iter().position(|&b| b != 0) {
            let at = match &end {
                LogEnd::Clean { offset } | LogEnd::Torn { offset, .. } => *offset,
            };
            return Err(Malformed::at(
                from + i,
                format!(
                    "non-zero bytes after the log ends at offset {at}: not a clean end (if ZooKeeper still starts on this dataDir, start it once so it writes a new snapshot, stop it, and import again)"
                ),
            ));
        }
        self.end = Some(end);
        Ok(())
    }
}

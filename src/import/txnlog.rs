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
use super::ImportError;
/// The payload decoding is the server wire's: one reader of ZooKeeper's txn records.
pub use crate::zab::wire::txn::{parse_payload, TxnDigest, TxnHeader, ZkTxn as Txn};
pub use crate::zab::wire::DEFAULT_JUTE_MAXBUFFER;
use std::path::{Path, PathBuf};

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

/// A reader over one log file's records. `B` holds the file's bytes: borrowed
/// (`&[u8]`) or owned (`Vec<u8>`, as [`RecordsAfter`] reads file after file).
#[derive(Debug)]
pub struct LogFile<B: AsRef<[u8]>> {
    bytes: B,
    pos: usize,
    max_record: usize,
    /// The FileHeader's dbid.
    pub dbid: i64,
    end: Option<LogEnd>,
}

impl<B: AsRef<[u8]>> LogFile<B> {
    /// Checks the file header. `max_record` bounds a record's payload length (see
    /// [`max_record_bytes`]).
    ///
    /// Errors: a short header, a magic other than `ZKLG`, a version other than 2.
    pub fn open(bytes: B, max_record: usize) -> Result<LogFile<B>, Malformed> {
        let mut r = Input::new(bytes.as_ref());
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
        let pos = r.offset();
        Ok(LogFile {
            bytes,
            pos,
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
        let rest = &self.bytes.as_ref()[start..];
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
        if marker >= self.bytes.as_ref().len() {
            self.end = Some(LogEnd::Torn {
                offset: start as u64,
                what: format!("record of {len} bytes runs past the end of the file"),
            });
            return Ok(None);
        }
        if self.bytes.as_ref()[marker] != END_OF_RECORD {
            self.finish(
                marker + 1,
                LogEnd::Torn {
                    offset: start as u64,
                    what: format!("record of {len} bytes lacks its end-of-record byte"),
                },
            )?;
            return Ok(None);
        }
        let payload = &self.bytes.as_ref()[body..marker];
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
        let from = from.min(self.bytes.as_ref().len());
        if let Some(i) = self.bytes.as_ref()[from..].iter().position(|&b| b != 0) {
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

/// The logged records after a snapshot at zxid `after`, file after file, as ZooKeeper
/// replays them at start-up (FileTxnSnapLog.fastForwardFromEdits over a
/// FileTxnIterator): the newest log file that starts at or before `after + 1` and
/// every later one, oldest first; records at or below `after` are skipped. What the
/// zxids of the records must do (rise without a gap, within an epoch) is the caller's
/// rule: the importer and the member conversion word their refusals apart.
///
/// An empty file is skipped only when it is the last one: ZooKeeper deletes an empty
/// last log (one created just before a crash, before its header was written) and
/// refuses any other file without a header; so is one here, as damaged.
#[derive(Debug)]
pub struct RecordsAfter<'p> {
    after: i64,
    /// The chosen files not opened yet, oldest first.
    pending: &'p [(i64, PathBuf)],
    current: Option<(&'p Path, LogFile<Vec<u8>>)>,
    max_record: usize,
    chosen: usize,
}

impl<'p> RecordsAfter<'p> {
    /// `logs`: (first zxid from the file name, path) of every `log.*` file, oldest
    /// first; `max_record` bounds a record's payload (see [`max_record_bytes`]).
    pub fn new(after: i64, logs: &'p [(i64, PathBuf)], max_record: usize) -> RecordsAfter<'p> {
        let first_needed = after.wrapping_add(1);
        let start = logs
            .iter()
            .rposition(|(z, _)| *z <= first_needed)
            .unwrap_or(0);
        let pending = &logs[start..];
        RecordsAfter {
            after,
            pending,
            current: None,
            max_record,
            chosen: pending.len(),
        }
    }

    /// How many log files were chosen (read so far or still to read).
    pub fn files(&self) -> usize {
        self.chosen
    }

    /// The next record above `after` and the file it is in, or `None` after the last
    /// file. `report` gets a line for each file opened; a torn tail (see the module
    /// documentation) ends its file with a line to both `report` and `warnings`.
    ///
    /// Errors: a file that cannot be read, a damaged header or record
    /// ([`ImportError::Corrupt`], naming the file and byte offset).
    pub fn next_record(
        &mut self,
        report: &mut dyn FnMut(&str),
        warnings: &mut Vec<String>,
    ) -> Result<Option<(&'p Path, TxnRecord)>, ImportError> {
        loop {
            if let Some((path, log)) = &mut self.current {
                let path: &'p Path = path;
                match log
                    .next_record()
                    .map_err(|m| ImportError::corrupt(path, m))?
                {
                    Some(rec) if rec.header.zxid <= self.after => continue,
                    Some(rec) => return Ok(Some((path, rec))),
                    None => {
                        if let Some(LogEnd::Torn { offset, what }) = log.end() {
                            let text = format!(
                                "{}: at byte offset {offset}: {what}; treated as the end of this log (a write cut short by a crash, as ZooKeeper treats it)",
                                path.display()
                            );
                            report(&text);
                            warnings.push(text);
                        }
                        self.current = None;
                    }
                }
            }
            let Some(((_, path), rest)) = self.pending.split_first() else {
                return Ok(None);
            };
            self.pending = rest;
            let bytes = super::read(path)?;
            if bytes.is_empty() && rest.is_empty() {
                continue;
            }
            report(&format!(
                "reading {} ({} bytes)",
                path.display(),
                bytes.len()
            ));
            let log =
                LogFile::open(bytes, self.max_record).map_err(|m| ImportError::corrupt(path, m))?;
            self.current = Some((path.as_path(), log));
        }
    }
}

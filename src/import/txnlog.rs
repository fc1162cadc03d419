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
use crate::proto::opcode as op;
use crate::tree::znode::{CONTAINER_OWNER, MAX_TTL_MS, TTL_MASK};
use bytes::Bytes;
use jute::Acl;

/// `ZKLG` as ZooKeeper's FileTxnLog.TXNLOG_MAGIC.
pub const LOG_MAGIC: i32 = i32::from_be_bytes(*b"ZKLG");
/// The log format version every ZooKeeper 3.x writes.
pub const LOG_VERSION: i32 = 2;
/// ZooKeeper's default `jute.maxbuffer`.
pub const DEFAULT_JUTE_MAXBUFFER: usize = 0xfffff;
/// The byte that ends every record.
const END_OF_RECORD: u8 = b'B';

/// The largest record payload ZooKeeper reads back with this `jute.maxbuffer`
/// (BinaryInputArchive allows the buffer size plus as much again, at least 1024).
pub fn max_record_bytes(jute_maxbuffer: usize) -> usize {
    jute_maxbuffer.saturating_add(jute_maxbuffer.max(1024))
}

/// A txn's header (zookeeper.jute TxnHeader).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnHeader {
    /// The session that asked for it (clientId).
    pub session_id: i64,
    pub cxid: i32,
    pub zxid: i64,
    /// ms since the epoch; becomes ctime/mtime.
    pub time_ms: i64,
    /// The opcode (shared/PROTOCOL.md "Opcodes").
    pub kind: i32,
}

/// The tree digest ZooKeeper 3.6+ logs with a txn: its DataTree's digest after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnDigest {
    pub version: i32,
    pub tree_digest: i64,
}

/// A txn as ZooKeeper logs it, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Txn {
    CreateSession {
        timeout_ms: i32,
    },
    /// `paths` are the ephemerals to delete (CloseSessionTxn, 3.6+); `None` when the
    /// record has no body (older logs, or closeSessionTxn disabled).
    CloseSession {
        paths: Option<Vec<String>>,
    },
    /// create, create2, createContainer or createTTL (`kind` says which).
    Create {
        kind: i32,
        path: String,
        data: Option<Bytes>,
        acl: Vec<Acl>,
        /// Raw ephemeralOwner: the session for an ephemeral, 0, or the container/TTL
        /// encoding.
        owner: i64,
        /// The parent's cversion (create count) after this create; -1 in the oldest
        /// create records, meaning "one more than now".
        parent_cversion: i32,
    },
    /// delete or deleteContainer.
    Delete {
        path: String,
    },
    /// setData, or reconfig (which sets /zookeeper/config).
    SetData {
        path: String,
        data: Option<Bytes>,
        version: i32,
    },
    SetAcl {
        path: String,
        acl: Vec<Acl>,
        version: i32,
    },
    Check {
        path: String,
        version: i32,
    },
    Error {
        err: i32,
    },
    /// The ops of a multi. A failed multi's ops are all `Error`.
    Multi(Vec<Txn>),
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

/// Decodes one record payload whose first byte is at file offset `base`.
///
/// Errors: an unknown txn type, a record that does not decode, or bytes left after it
/// other than a 12-byte digest.
pub fn parse_payload(
    payload: &[u8],
    base: usize,
) -> Result<(TxnHeader, Txn, Option<TxnDigest>), Malformed> {
    let mut r = Input::at(payload, base);
    let header = TxnHeader {
        session_id: r.long("txn header sessionId")?,
        cxid: r.int("txn header cxid")?,
        zxid: r.long("txn header zxid")?,
        time_ms: r.long("txn header time")?,
        kind: r.int("txn header type")?,
    };
    let txn = if header.kind == op::CLOSE_SESSION {
        close_session(&mut r)?
    } else {
        body(&mut r, header.kind, header.session_id, true)?
    };
    let digest = match r.remaining() {
        0 => None,
        12 => Some(TxnDigest {
            version: r.int("txn digest version")?,
            tree_digest: r.long("txn digest")?,
        }),
        n => {
            return Err(Malformed::at(
                r.offset(),
                format!("{n} unexpected bytes after the txn record"),
            ))
        }
    };
    Ok((header, txn, digest))
}

/// closeSession's body is optional (CloseSessionTxn, 3.6+): it is there if it decodes
/// and leaves nothing or exactly a digest.
fn close_session(r: &mut Input<'_>) -> Result<Txn, Malformed> {
    if r.remaining() > 0 {
        let mut t = r.clone();
        if let Ok(paths) = t.string_list("closeSession paths") {
            if t.remaining() == 0 || t.remaining() == 12 {
                *r = t;
                return Ok(Txn::CloseSession { paths: Some(paths) });
            }
        }
    }
    Ok(Txn::CloseSession { paths: None })
}

fn data(r: &mut Input<'_>) -> Result<Option<Bytes>, Malformed> {
    Ok(r.buffer("data")?.map(Bytes::copy_from_slice))
}

/// Decodes the txn record of type `kind`. `top` is false inside a multi.
fn body(r: &mut Input<'_>, kind: i32, session_id: i64, top: bool) -> Result<Txn, Malformed> {
    let at = r.offset();
    Ok(match kind {
        op::CREATE_SESSION if top => Txn::CreateSession {
            timeout_ms: r.int("createSession timeout")?,
        },
        op::CREATE | op::CREATE2 => {
            let path = r.path("create path")?;
            let data = data(r)?;
            let acl = r.acl_list("create ACL")?;
            let ephemeral = r.boolean("create ephemeral")?;
            // The oldest create record (CreateTxnV0) has no parentCVersion; ZooKeeper
            // reads it as -1.
            let parent_cversion = if kind == op::CREATE && r.remaining() < 4 {
                -1
            } else {
                r.int("create parentCVersion")?
            };
            Txn::Create {
                kind,
                path,
                data,
                acl,
                owner: if ephemeral { session_id } else { 0 },
                parent_cversion,
            }
        }
        op::CREATE_CONTAINER => Txn::Create {
            kind,
            path: r.path("createContainer path")?,
            data: data(r)?,
            acl: r.acl_list("createContainer ACL")?,
            owner: CONTAINER_OWNER,
            parent_cversion: r.int("createContainer parentCVersion")?,
        },
        op::CREATE_TTL => {
            let path = r.path("createTTL path")?;
            let data = data(r)?;
            let acl = r.acl_list("createTTL ACL")?;
            let parent_cversion = r.int("createTTL parentCVersion")?;
            let ttl_at = r.offset();
            let ttl = r.long("createTTL ttl")?;
            // EphemeralType.TTL.toEphemeralOwner refuses these, which would stop
            // ZooKeeper's own replay.
            if ttl <= 0 || ttl > MAX_TTL_MS {
                return Err(Malformed::at(
                    ttl_at,
                    format!("createTTL ttl {ttl} ms is outside 1..={MAX_TTL_MS}"),
                ));
            }
            Txn::Create {
                kind,
                path,
                data,
                acl,
                owner: TTL_MASK | ttl,
                parent_cversion,
            }
        }
        op::DELETE | op::DELETE_CONTAINER => Txn::Delete {
            path: r.path("delete path")?,
        },
        op::SET_DATA | op::RECONFIG if top || kind == op::SET_DATA => Txn::SetData {
            path: r.path("setData path")?,
            data: data(r)?,
            version: r.int("setData version")?,
        },
        op::SET_ACL if top => Txn::SetAcl {
            path: r.path("setACL path")?,
            acl: r.acl_list("setACL ACL")?,
            version: r.int("setACL version")?,
        },
        op::CHECK => Txn::Check {
            path: r.path("check path")?,
            version: r.int("check version")?,
        },
        op::ERROR => Txn::Error {
            err: r.int("error code")?,
        },
        op::MULTI if top => multi(r, session_id)?,
        other => {
            let place = if top { "txn" } else { "op inside a multi" };
            return Err(Malformed::at(at, format!("unknown {place} type {other}")));
        }
    })
}

/// A MultiTxn: vector of (int type, buffer record). As DataTree.processTxn does, a
/// multi with any error op is a failed multi: every op is then an error (0 before the
/// failure, RUNTIMEINCONSISTENCY after it) and the other records are not read.
fn multi(r: &mut Input<'_>, session_id: i64) -> Result<Txn, Malformed> {
    let n = r.count("multi op count", 8)?;
    let mut raw = Vec::with_capacity(n);
    for _ in 0..n {
        let kind = r.int("multi op type")?;
        let at = r.offset();
        let bytes = r
            .buffer("multi op record")?
            .ok_or_else(|| Malformed::at(at, "multi op with a null record"))?;
        raw.push((kind, bytes, at + 4));
    }
    let failed = raw.iter().any(|(k, _, _)| *k == op::ERROR);
    let mut ops = Vec::with_capacity(n);
    let mut after_failure = false;
    for (kind, bytes, base) in raw {
        let mut inner = Input::at(bytes, base);
        let txn = if failed && kind != op::ERROR {
            let code = if after_failure {
                crate::proto::ErrorCode::RuntimeInconsistency.code()
            } else {
                0
            };
            Txn::Error { err: code }
        } else {
            if kind == op::ERROR {
                after_failure = true;
            }
            let t = body(&mut inner, kind, session_id, false)?;
            if inner.remaining() != 0 {
                return Err(Malformed::at(
                    inner.offset(),
                    format!("{} unexpected bytes after a multi op", inner.remaining()),
                ));
            }
            t
        };
        ops.push(txn);
    }
    Ok(Txn::Multi(ops))
}

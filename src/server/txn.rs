//! Txns: the deterministic result of prep, the unit the log orders and every member
//! applies (shared/DESIGN.md, "One write, end to end").
//!
//! Everything a member needs to apply a write the same way is in the txn: zxid, time,
//! the new versions, the sequential name and the parent's new child-create count.

use bytes::Bytes;
use jute::Acl;

use crate::proto::ErrorCode;

/// One committed state change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Txn {
    /// (epoch << 32) | counter.
    pub zxid: i64,
    /// Leader's wall-clock time at prep, ms since the epoch; becomes ctime/mtime.
    pub time_ms: i64,
    /// The session that asked for it (0 for the server's own container reaping).
    pub session_id: i64,
    /// The client's xid.
    pub cxid: i32,
    pub op: TxnOp,
}

/// What a txn does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnOp {
    CreateSession {
        timeout_ms: i32,
        passwd: [u8; 16],
    },
    /// Ends a session; `ephemerals` are deleted, in this order.
    CloseSession {
        ephemerals: Vec<String>,
    },
    Create {
        /// The create opcode the client used; decides the reply record.
        opcode: i32,
        /// Final path, sequential suffix included.
        path: String,
        data: Option<Bytes>,
        acl: Vec<Acl>,
        /// Raw ephemeralOwner (session, container or TTL encoding).
        owner: i64,
        /// The parent's child-create count after this create.
        parent_creates: i32,
    },
    Delete {
        path: String,
    },
    SetData {
        path: String,
        data: Option<Bytes>,
        /// The new dataVersion.
        version: i32,
    },
    SetAcl {
        path: String,
        acl: Vec<Acl>,
        /// The new aclVersion.
        aversion: i32,
    },
    /// A version check that passed (inside multi, or alone).
    Check {
        path: String,
        /// The znode's dataVersion + 1, as ZooKeeper's CheckVersionTxn records it
        /// (PrepRequestProcessor.checkAndIncVersion); no applier reads it. -1 in checks
        /// logged before keel kept it.
        version: i32,
    },
    /// A reconfig that passed prep (opcode 16): sets `/zookeeper/config` to `data`,
    /// the new configuration's text ([`crate::zab::quorum::QuorumVerifier::text`],
    /// whose version is this txn's zxid), at dataVersion -1 as ZooKeeper's reconfig
    /// SetDataTxn leaves it (PrepRequestProcessor, DataTree.processTxn).
    Reconfig {
        data: Bytes,
    },
    /// All ops of a multi that passed prep; a failed multi is an `Error` list instead.
    Multi(Vec<TxnOp>),
    /// A failed multi: per-op error codes (0 before the failure, the failure's code,
    /// RUNTIMEINCONSISTENCY after it), as ZooKeeper reports them.
    MultiError(Vec<ErrorCode>),
    /// A write that failed prep: it still takes a zxid, as in ZooKeeper.
    Error(ErrorCode),
}

/// Version tag of the txn encoding below; stored with every log entry.
const TXN_ENCODING: u8 = 1;

mod tag {
    pub const CREATE_SESSION: u8 = 1;
    pub const CLOSE_SESSION: u8 = 2;
    pub const CREATE: u8 = 3;
    pub const DELETE: u8 = 4;
    pub const SET_DATA: u8 = 5;
    pub const SET_ACL: u8 = 6;
    pub const CHECK: u8 = 7;
    pub const MULTI: u8 = 8;
    pub const MULTI_ERROR: u8 = 9;
    pub const ERROR: u8 = 10;
    /// A check with its version (tag 7 is the older form without it).
    pub const CHECK_VERSION: u8 = 11;
    pub const RECONFIG: u8 = 12;
}

fn encode_op(op: &TxnOp, b: &mut bytes::BytesMut) {
    use bytes::BufMut;
    use jute::Record;
    match op {
        TxnOp::CreateSession { timeout_ms, passwd } => {
            b.put_u8(tag::CREATE_SESSION);
            b.put_i32(*timeout_ms);
            b.put_slice(passwd);
        }
        TxnOp::CloseSession { ephemerals } => {
            b.put_u8(tag::CLOSE_SESSION);
            ephemerals.encode(b);
        }
        TxnOp::Create {
            opcode,
            path,
            data,
            acl,
            owner,
            parent_creates,
        } => {
            b.put_u8(tag::CREATE);
            b.put_i32(*opcode);
            path.encode(b);
            data.encode(b);
            acl.encode(b);
            b.put_i64(*owner);
            b.put_i32(*parent_creates);
        }
        TxnOp::Delete { path } => {
            b.put_u8(tag::DELETE);
            path.encode(b);
        }
        TxnOp::SetData {
            path,
            data,
            version,
        } => {
            b.put_u8(tag::SET_DATA);
            path.encode(b);
            data.encode(b);
            b.put_i32(*version);
        }
        TxnOp::SetAcl {
            path,
            acl,
            aversion,
        } => {
            b.put_u8(tag::SET_ACL);
            path.encode(b);
            acl.encode(b);
            b.put_i32(*aversion);
        }
        TxnOp::Check { path, version } => {
            b.put_u8(tag::CHECK_VERSION);
            path.encode(b);
            b.put_i32(*version);
        }
        TxnOp::Reconfig { data } => {
            b.put_u8(tag::RECONFIG);
            data.encode(b);
        }
        TxnOp::Multi(ops) => {
            b.put_u8(tag::MULTI);
            b.put_i32(ops.len() as i32);
            for o in ops {
                encode_op(o, b);
            }
        }
        TxnOp::MultiError(codes) => {
            b.put_u8(tag::MULTI_ERROR);
            b.put_i32(codes.len() as i32);
            for c in codes {
                b.put_i32(c.code());
            }
        }
        TxnOp::Error(code) => {
            b.put_u8(tag::ERROR);
            b.put_i32(code.code());
        }
    }
}

fn code_of(v: i32) -> Result<ErrorCode, jute::JuteError> {
    ErrorCode::from_code(v).ok_or(jute::JuteError::BadType(v))
}

fn decode_op(d: &mut jute::Decoder<'_>, depth: u32) -> Result<TxnOp, jute::JuteError> {
    let tag_byte = d.bool_byte()?;
    Ok(match tag_byte {
        tag::CREATE_SESSION => {
            let timeout_ms = d.int()?;
            let mut passwd = [0u8; 16];
            for p in passwd.iter_mut() {
                *p = d.bool_byte()?;
            }
            TxnOp::CreateSession { timeout_ms, passwd }
        }
        tag::CLOSE_SESSION => TxnOp::CloseSession {
            ephemerals: d.record()?,
        },
        tag::CREATE => TxnOp::Create {
            opcode: d.int()?,
            path: d.record()?,
            data: d.record()?,
            acl: d.record()?,
            owner: d.long()?,
            parent_creates: d.int()?,
        },
        tag::DELETE => TxnOp::Delete { path: d.record()? },
        tag::SET_DATA => TxnOp::SetData {
            path: d.record()?,
            data: d.record()?,
            version: d.int()?,
        },
        tag::SET_ACL => TxnOp::SetAcl {
            path: d.record()?,
            acl: d.record()?,
            aversion: d.int()?,
        },
        tag::CHECK => TxnOp::Check {
            path: d.record()?,
            version: -1,
        },
        tag::CHECK_VERSION => TxnOp::Check {
            path: d.record()?,
            version: d.int()?,
        },
        tag::RECONFIG if depth == 0 => TxnOp::Reconfig { data: d.record()? },
        tag::MULTI if depth == 0 => {
            let n = d.int()?;
            if n < 0 || n as usize > d.remaining().len() {
                return Err(jute::JuteError::BadLength(n));
            }
            let mut ops = Vec::with_capacity(n as usize);
            for _ in 0..n {
                ops.push(decode_op(d, depth + 1)?);
            }
            TxnOp::Multi(ops)
        }
        tag::MULTI_ERROR => {
            let n = d.int()?;
            if n < 0 || n as usize > d.remaining().len() {
                return Err(jute::JuteError::BadLength(n));
            }
            let mut codes = Vec::with_capacity(n as usize);
            for _ in 0..n {
                codes.push(code_of(d.int()?)?);
            }
            TxnOp::MultiError(codes)
        }
        tag::ERROR => TxnOp::Error(code_of(d.int()?)?),
        other => return Err(jute::JuteError::BadType(other as i32)),
    })
}

impl Txn {
    /// The txn's stored form: encoding version, zxid, time, session, cxid, op.
    pub fn encode(&self) -> Vec<u8> {
        use bytes::BufMut;
        // Sized up front: a txn is written once per write, regrowing costs copies.
        let mut b = bytes::BytesMut::with_capacity(64 + size_hint(&self.op));
        b.put_u8(TXN_ENCODING);
        b.put_i64(self.zxid);
        b.put_i64(self.time_ms);
        b.put_i64(self.session_id);
        b.put_i32(self.cxid);
        encode_op(&self.op, &mut b);
        // Takes the buffer over without copying (it is not shared).
        Vec::from(b.freeze())
    }

    /// Reads a txn written by [`Txn::encode`].
    ///
    /// Errors: an unknown encoding version or op tag, or truncated bytes.
    pub fn decode(bytes: &[u8]) -> Result<Txn, jute::JuteError> {
        let mut d = jute::Decoder::new(bytes);
        let version = d.bool_byte()?;
        if version != TXN_ENCODING {
            return Err(jute::JuteError::BadType(version as i32));
        }
        let txn = Txn {
            zxid: d.long()?,
            time_ms: d.long()?,
            session_id: d.long()?,
            cxid: d.int()?,
            op: decode_op(&mut d, 0)?,
        };
        if !d.is_empty() {
            return Err(jute::JuteError::Trailing(d.remaining().len()));
        }
        Ok(txn)
    }
}

/// Roughly the encoded size of `op` beyond the fixed header, bytes: enough that
/// [`Txn::encode`] rarely regrows its buffer.
fn size_hint(op: &TxnOp) -> usize {
    let data = |d: &Option<Bytes>| d.as_ref().map_or(0, Bytes::len);
    match op {
        TxnOp::Create {
            path, data: d, acl, ..
        } => 32 + path.len() + data(d) + 48 * acl.len(),
        TxnOp::SetData { path, data: d, .. } => 32 + path.len() + data(d),
        TxnOp::Reconfig { data } => 32 + data.len(),
        TxnOp::Delete { path } | TxnOp::Check { path, .. } => 16 + path.len(),
        TxnOp::SetAcl { path, acl, .. } => 16 + path.len() + 48 * acl.len(),
        TxnOp::Multi(ops) => ops.iter().map(|o| 8 + size_hint(o)).sum(),
        TxnOp::CloseSession { ephemerals } => ephemerals.iter().map(|p| 4 + p.len()).sum(),
        _ => 32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_logged_before_its_version_was_kept_still_reads() {
        let mut b = vec![TXN_ENCODING];
        for v in [1i64, 2, 3] {
            b.extend_from_slice(&v.to_be_bytes());
        }
        b.extend_from_slice(&4i32.to_be_bytes());
        b.push(tag::CHECK);
        b.extend_from_slice(&[0, 0, 0, 2, b'/', b'x']);
        assert_eq!(
            Txn::decode(&b).unwrap().op,
            TxnOp::Check {
                path: "/x".into(),
                version: -1
            }
        );
    }

    #[test]
    fn every_op_round_trips() {
        let acl = crate::tree::acl::open_acl();
        let ops = vec![
            TxnOp::CreateSession {
                timeout_ms: 30000,
                passwd: [7; 16],
            },
            TxnOp::CloseSession {
                ephemerals: vec!["/a".into(), "/b".into()],
            },
            TxnOp::Create {
                opcode: 15,
                path: "/x".into(),
                data: None,
                acl: acl.clone(),
                owner: -5,
                parent_creates: 3,
            },
            TxnOp::Delete { path: "/x".into() },
            TxnOp::SetData {
                path: "/x".into(),
                data: Some(Bytes::from_static(b"v")),
                version: 4,
            },
            TxnOp::SetAcl {
                path: "/x".into(),
                acl,
                aversion: 2,
            },
            TxnOp::Check {
                path: "/x".into(),
                version: 5,
            },
            TxnOp::MultiError(vec![ErrorCode::Ok, ErrorCode::NoNode]),
            TxnOp::Error(ErrorCode::NodeExists),
        ];
        let mut all = ops.clone();
        all.push(TxnOp::Multi(ops));
        all.push(TxnOp::Reconfig {
            data: Bytes::from_static(b"server.1=a:1:2:participant;0.0.0.0:2181\nversion=100000001"),
        });
        for (i, op) in all.into_iter().enumerate() {
            let t = Txn {
                zxid: 0x1_0000_0000 + i as i64,
                time_ms: 99,
                session_id: 42,
                cxid: 7,
                op,
            };
            let bytes = t.encode();
            assert_eq!(Txn::decode(&bytes).unwrap(), t);
            for cut in 0..bytes.len() {
                assert!(Txn::decode(&bytes[..cut]).is_err());
            }
        }
    }
}

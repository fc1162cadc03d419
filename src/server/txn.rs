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
    },
    /// All ops of a multi that passed prep; a failed multi is an `Error` list instead.
    Multi(Vec<TxnOp>),
    /// A failed multi: per-op error codes (0 before the failure, the failure's code,
    /// RUNTIMEINCONSISTENCY after it), as ZooKeeper reports them.
    MultiError(Vec<ErrorCode>),
    /// A write that failed prep: it still takes a zxid, as in ZooKeeper.
    Error(ErrorCode),
}

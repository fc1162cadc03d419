//! Opcodes, reserved xids, event types and states (shared/PROTOCOL.md, "Opcodes",
//! "Requests and replies", "Watches").

pub const NOTIFICATION: i32 = 0;
pub const CREATE: i32 = 1;
pub const DELETE: i32 = 2;
pub const EXISTS: i32 = 3;
pub const GET_DATA: i32 = 4;
pub const SET_DATA: i32 = 5;
pub const GET_ACL: i32 = 6;
pub const SET_ACL: i32 = 7;
pub const GET_CHILDREN: i32 = 8;
pub const SYNC: i32 = 9;
pub const PING: i32 = 11;
pub const GET_CHILDREN2: i32 = 12;
pub const CHECK: i32 = 13;
pub const MULTI: i32 = 14;
pub const CREATE2: i32 = 15;
pub const RECONFIG: i32 = 16;
pub const CHECK_WATCHES: i32 = 17;
pub const REMOVE_WATCHES: i32 = 18;
pub const CREATE_CONTAINER: i32 = 19;
pub const DELETE_CONTAINER: i32 = 20;
pub const CREATE_TTL: i32 = 21;
pub const MULTI_READ: i32 = 22;
pub const AUTH: i32 = 100;
pub const SET_WATCHES: i32 = 101;
pub const SASL: i32 = 102;
pub const GET_EPHEMERALS: i32 = 103;
pub const GET_ALL_CHILDREN_NUMBER: i32 = 104;
pub const SET_WATCHES2: i32 = 105;
pub const ADD_WATCH: i32 = 106;
pub const WHO_AM_I: i32 = 107;
pub const CREATE_SESSION: i32 = -10;
pub const CLOSE_SESSION: i32 = -11;
/// The op type of a failed op's result inside a multi reply.
pub const ERROR: i32 = -1;

/// xid of a watch notification (server -> client).
pub const XID_NOTIFICATION: i32 = -1;
/// xid of a ping and its reply.
pub const XID_PING: i32 = -2;
/// xid of an auth packet and its reply.
pub const XID_AUTH: i32 = -4;
/// xid of a setWatches packet and its reply.
pub const XID_SET_WATCHES: i32 = -8;

/// Watch event types.
pub mod event {
    pub const NONE: i32 = -1;
    pub const NODE_CREATED: i32 = 1;
    pub const NODE_DELETED: i32 = 2;
    pub const NODE_DATA_CHANGED: i32 = 3;
    pub const NODE_CHILDREN_CHANGED: i32 = 4;
    pub const DATA_WATCH_REMOVED: i32 = 5;
    pub const CHILD_WATCH_REMOVED: i32 = 6;
    pub const PERSISTENT_WATCH_REMOVED: i32 = 7;
}

/// Keeper states carried in watch events.
pub mod state {
    pub const DISCONNECTED: i32 = 0;
    pub const SYNC_CONNECTED: i32 = 3;
    pub const AUTH_FAILED: i32 = 4;
    pub const EXPIRED: i32 = -112;
    pub const CLOSED: i32 = 7;
}

/// ACL permission bits (shared/PROTOCOL.md, "ACLs").
pub mod perm {
    pub const READ: i32 = 1;
    pub const WRITE: i32 = 2;
    pub const CREATE: i32 = 4;
    pub const DELETE: i32 = 8;
    pub const ADMIN: i32 = 16;
    pub const ALL: i32 = 31;
}

/// A short name for an opcode, as ZooKeeper's `cons` prints it as lastOperation.
pub fn short_name(op: i32) -> &'static str {
    match op {
        CREATE | CREATE2 | CREATE_CONTAINER | CREATE_TTL => "CREA",
        DELETE | DELETE_CONTAINER => "DELE",
        EXISTS => "EXIS",
        GET_DATA => "GETD",
        SET_DATA => "SETD",
        GET_ACL => "GETA",
        SET_ACL => "SETA",
        GET_CHILDREN => "GETC",
        GET_CHILDREN2 => "GETC",
        SYNC => "SYNC",
        PING => "PING",
        CHECK => "CHEC",
        MULTI => "MULT",
        MULTI_READ => "MLTR",
        RECONFIG => "RECO",
        CHECK_WATCHES => "CHKW",
        REMOVE_WATCHES => "REMW",
        AUTH => "AUTH",
        SET_WATCHES | SET_WATCHES2 => "SETW",
        GET_EPHEMERALS => "GETE",
        GET_ALL_CHILDREN_NUMBER => "GETACN",
        ADD_WATCH => "ADDW",
        WHO_AM_I => "HOMI",
        CREATE_SESSION => "SESS",
        CLOSE_SESSION => "CLOS",
        _ => "NA",
    }
}

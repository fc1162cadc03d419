//! Error codes carried in `ReplyHeader.err` (shared/PROTOCOL.md, "Error codes").

/// A ZooKeeper error code. The discriminant is the wire value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[repr(i32)]
pub enum ErrorCode {
    #[error("ok")]
    Ok = 0,
    #[error("system error")]
    SystemError = -1,
    #[error("runtime inconsistency")]
    RuntimeInconsistency = -2,
    #[error("data inconsistency")]
    DataInconsistency = -3,
    #[error("connection loss")]
    ConnectionLoss = -4,
    #[error("marshalling error")]
    MarshallingError = -5,
    #[error("unimplemented")]
    Unimplemented = -6,
    #[error("operation timeout")]
    OperationTimeout = -7,
    #[error("bad arguments")]
    BadArguments = -8,
    #[error("unknown session")]
    UnknownSession = -12,
    #[error("new config has no quorum")]
    NewConfigNoQuorum = -13,
    #[error("reconfig in progress")]
    ReconfigInProgress = -14,
    #[error("api error")]
    ApiError = -100,
    #[error("no node")]
    NoNode = -101,
    #[error("not authenticated")]
    NoAuth = -102,
    #[error("bad version")]
    BadVersion = -103,
    #[error("ephemerals cannot have children")]
    NoChildrenForEphemerals = -108,
    #[error("node exists")]
    NodeExists = -110,
    #[error("directory not empty")]
    NotEmpty = -111,
    #[error("session expired")]
    SessionExpired = -112,
    #[error("invalid callback")]
    InvalidCallback = -113,
    #[error("invalid ACL")]
    InvalidAcl = -114,
    #[error("authentication failed")]
    AuthFailed = -115,
    #[error("session moved")]
    SessionMoved = -118,
    #[error("not a read-only call")]
    NotReadOnly = -119,
    #[error("ephemeral on local session")]
    EphemeralOnLocalSession = -120,
    #[error("no watcher")]
    NoWatcher = -121,
    #[error("request timeout")]
    RequestTimeout = -122,
    #[error("reconfig disabled")]
    ReconfigDisabled = -123,
    #[error("session closed, requires SASL auth")]
    SessionClosedRequireSaslAuth = -124,
    #[error("quota exceeded")]
    QuotaExceeded = -125,
    #[error("throttled op")]
    ThrottledOp = -127,
}

impl ErrorCode {
    /// The wire value.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The code for a wire value, if it is one of ZooKeeper's.
    pub fn from_code(v: i32) -> Option<ErrorCode> {
        use ErrorCode::*;
        const ALL: [ErrorCode; 32] = [
            Ok,
            SystemError,
            RuntimeInconsistency,
            DataInconsistency,
            ConnectionLoss,
            MarshallingError,
            Unimplemented,
            OperationTimeout,
            BadArguments,
            UnknownSession,
            NewConfigNoQuorum,
            ReconfigInProgress,
            ApiError,
            NoNode,
            NoAuth,
            BadVersion,
            NoChildrenForEphemerals,
            NodeExists,
            NotEmpty,
            SessionExpired,
            InvalidCallback,
            InvalidAcl,
            AuthFailed,
            SessionMoved,
            NotReadOnly,
            EphemeralOnLocalSession,
            NoWatcher,
            RequestTimeout,
            ReconfigDisabled,
            SessionClosedRequireSaslAuth,
            QuotaExceeded,
            ThrottledOp,
        ];
        ALL.into_iter().find(|c| c.code() == v)
    }
}

/// Result of a state-machine step that can fail with a wire error code.
pub type KResult<T> = Result<T, ErrorCode>;

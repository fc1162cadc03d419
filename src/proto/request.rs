//! Typed client requests, decoded from a request header's opcode and the body bytes.

use super::opcode as op;
use super::ErrorCode;
use bytes::Bytes;
use jute::{
    Acl, AddWatchRequest, AuthPacket, CheckVersionRequest, CreateRequest, CreateTtlRequest,
    Decoder, DeleteRequest, JuteError, MultiHeader, PathRequest, PathWatchRequest, ReconfigRequest,
    Record, SetAclRequest, SetDataRequest, SetWatches, SetWatches2, WatchesRequest,
};

/// A create mode (shared/PROTOCOL.md, "Create modes"); the discriminant is the flag value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateMode {
    Persistent = 0,
    Ephemeral = 1,
    PersistentSequential = 2,
    EphemeralSequential = 3,
    Container = 4,
    PersistentWithTtl = 5,
    PersistentSequentialWithTtl = 6,
}

impl CreateMode {
    /// The mode for a wire flag value, or `None` for an unknown one.
    pub fn from_flags(flags: i32) -> Option<CreateMode> {
        Some(match flags {
            0 => CreateMode::Persistent,
            1 => CreateMode::Ephemeral,
            2 => CreateMode::PersistentSequential,
            3 => CreateMode::EphemeralSequential,
            4 => CreateMode::Container,
            5 => CreateMode::PersistentWithTtl,
            6 => CreateMode::PersistentSequentialWithTtl,
            _ => return None,
        })
    }
    pub fn is_ephemeral(self) -> bool {
        matches!(
            self,
            CreateMode::Ephemeral | CreateMode::EphemeralSequential
        )
    }
    pub fn is_sequential(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentSequential
                | CreateMode::EphemeralSequential
                | CreateMode::PersistentSequentialWithTtl
        )
    }
    pub fn is_container(self) -> bool {
        self == CreateMode::Container
    }
    pub fn is_ttl(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentWithTtl | CreateMode::PersistentSequentialWithTtl
        )
    }
}

/// Any of create (1), create2 (15), createContainer (19), createTTL (21).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateOp {
    /// The create opcode as ZooKeeper sees it; it decides the node type and the reply
    /// record. A request's own opcode; inside a multi the one ZooKeeper's Op.create
    /// derives from the flags (see [`CreateOp::in_multi`]).
    pub opcode: i32,
    pub path: String,
    /// `None` = null data, kept apart from empty as ZooKeeper does.
    pub data: Option<Bytes>,
    pub acl: Vec<Acl>,
    /// Raw create flags; validated by the server (an unknown value is BADARGUMENTS).
    pub flags: i32,
    /// Time to live in ms from a createTTL record; `None` for the records of the other
    /// create opcodes, which carry none.
    pub ttl_ms: Option<i64>,
}

impl CreateOp {
    fn from_create(opcode: i32, r: CreateRequest) -> Self {
        CreateOp {
            opcode,
            path: r.path,
            data: r.data,
            acl: r.acl,
            flags: r.flags,
            ttl_ms: None,
        }
    }
    fn from_ttl(r: CreateTtlRequest) -> Self {
        CreateOp {
            opcode: op::CREATE_TTL,
            path: r.path,
            data: r.data,
            acl: r.acl,
            flags: r.flags,
            ttl_ms: Some(r.ttl_ms),
        }
    }

    /// A create inside a multi, as ZooKeeper's MultiOperationRecord reads it: the wire
    /// opcode is dropped and Op.create takes it from the flags (createTTL for the TTL
    /// modes, createContainer for CONTAINER, create for the rest, unknown flags
    /// included). A createTTL record keeps its TTL only for a TTL mode. A TTL mode sent
    /// as a create, create2 or createContainer record so becomes a createTTL without a
    /// TTL, which ZooKeeper cannot prep (see `server::prep`).
    fn in_multi(mut self) -> Self {
        self.opcode = match CreateMode::from_flags(self.flags) {
            Some(m) if m.is_ttl() => op::CREATE_TTL,
            Some(CreateMode::Container) => op::CREATE_CONTAINER,
            _ => op::CREATE,
        };
        if self.opcode != op::CREATE_TTL {
            self.ttl_ms = None;
        }
        self
    }
}

/// One op inside multi (14) or multiRead (22).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiOp {
    Create(CreateOp),
    Delete(DeleteRequest),
    SetData(SetDataRequest),
    Check(CheckVersionRequest),
    GetChildren(PathRequest),
    GetData(PathRequest),
}

impl MultiOp {
    /// The op's opcode as the multi header carries it.
    pub fn opcode(&self) -> i32 {
        match self {
            MultiOp::Create(c) => c.opcode,
            MultiOp::Delete(_) => op::DELETE,
            MultiOp::SetData(_) => op::SET_DATA,
            MultiOp::Check(_) => op::CHECK,
            MultiOp::GetChildren(_) => op::GET_CHILDREN,
            MultiOp::GetData(_) => op::GET_DATA,
        }
    }
    /// Whether the op is a read (multiRead's kind) rather than a write (multi's).
    pub fn is_read(&self) -> bool {
        matches!(self, MultiOp::GetChildren(_) | MultiOp::GetData(_))
    }
    /// The path the op acts on.
    pub fn path(&self) -> &str {
        match self {
            MultiOp::Create(c) => &c.path,
            MultiOp::Delete(d) => &d.path,
            MultiOp::SetData(s) => &s.path,
            MultiOp::Check(c) => &c.path,
            MultiOp::GetChildren(p) | MultiOp::GetData(p) => &p.path,
        }
    }
}

/// A decoded client request (everything after the request header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Create(CreateOp),
    Delete(DeleteRequest),
    DeleteContainer(PathRequest),
    Exists(PathWatchRequest),
    GetData(PathWatchRequest),
    SetData(SetDataRequest),
    GetAcl(PathRequest),
    SetAcl(SetAclRequest),
    GetChildren(PathWatchRequest),
    GetChildren2(PathWatchRequest),
    Sync(PathRequest),
    Ping,
    Check(CheckVersionRequest),
    Multi(Vec<MultiOp>),
    /// multiRead with ops of one kind: all reads, or all writes (which ZooKeeper reads
    /// and then refuses).
    MultiRead(Vec<MultiOp>),
    /// multiRead whose ops ZooKeeper's MultiOperationRecord cannot read: a truncated
    /// record, an unknown op type, or reads mixed with writes. Answered
    /// MARSHALLINGERROR; the connection stays open.
    MultiReadMalformed,
    Reconfig(ReconfigRequest),
    CheckWatches(WatchesRequest),
    RemoveWatches(WatchesRequest),
    Auth(AuthPacket),
    /// setWatches (101) is carried as setWatches2 with no persistent watches.
    SetWatches(SetWatches2),
    /// sasl (102): GetSASLRequest's token, the client's next SASL message.
    Sasl(Vec<u8>),
    /// sasl (102) on a Kerberos server: never decoded from the wire, but what the
    /// connection task made of the token with its GSSAPI context (see `net::gss`).
    SaslGssapi(Result<crate::sasl::gssapi::Step, crate::sasl::gssapi::GssapiError>),
    GetEphemerals(PathRequest),
    GetAllChildrenNumber(PathRequest),
    AddWatch(AddWatchRequest),
    WhoAmI,
    CloseSession,
    /// createSession (-10) sent after the handshake, with the timeout its body starts
    /// with: ZooKeeper logs a createSession txn for the same session and sends the
    /// ConnectResponse again (see `proto::wire`).
    CreateSession {
        timeout_ms: i32,
    },
    /// A request ZooKeeper answers with an error before it reaches the tree (a record
    /// that does not decode, a null path or ACL id); see `proto::wire`.
    Rejected(Rejection),
    /// An opcode ZooKeeper does not know: UNIMPLEMENTED with zxid -1, then the
    /// connection is closed.
    Unknown(i32),
}

/// How ZooKeeper answers a [`Request::Rejected`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The reply's error code.
    pub code: ErrorCode,
    /// Whether it becomes an error txn (a zxid used): ZooKeeper's PrepRequestProcessor
    /// failed on it.
    pub txn: bool,
    /// What follows the reply header.
    pub body: RejectionBody,
}

/// The body of a [`Rejection`]'s reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectionBody {
    /// Nothing: the header alone.
    Empty,
    /// An empty multi result list (its end marker): ZooKeeper had started the
    /// MultiResponse when the request failed.
    MultiEnd,
    /// A null string (-1): sync echoing a null path.
    NullString,
}

impl Request {
    /// The operation's name as ZooKeeper's logs spell it (`create`, `setData`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Request::Create(_) => "create",
            Request::Delete(_) => "delete",
            Request::DeleteContainer(_) => "deleteContainer",
            Request::Exists(_) => "exists",
            Request::GetData(_) => "getData",
            Request::SetData(_) => "setData",
            Request::GetAcl(_) => "getACL",
            Request::SetAcl(_) => "setACL",
            Request::GetChildren(_) => "getChildren",
            Request::GetChildren2(_) => "getChildren2",
            Request::Sync(_) => "sync",
            Request::Ping => "ping",
            Request::Check(_) => "check",
            Request::Multi(_) => "multi",
            Request::MultiRead(_) | Request::MultiReadMalformed => "multiRead",
            Request::Reconfig(_) => "reconfig",
            Request::CheckWatches(_) => "checkWatches",
            Request::RemoveWatches(_) => "removeWatches",
            Request::Auth(_) => "auth",
            Request::SetWatches(_) => "setWatches",
            Request::Sasl(_) | Request::SaslGssapi(_) => "sasl",
            Request::GetEphemerals(_) => "getEphemerals",
            Request::GetAllChildrenNumber(_) => "getAllChildrenNumber",
            Request::AddWatch(_) => "addWatch",
            Request::WhoAmI => "whoAmI",
            Request::CloseSession => "closeSession",
            Request::CreateSession { .. } => "createSession",
            Request::Rejected(_) => "rejected",
            Request::Unknown(_) => "unknown",
        }
    }

    /// The znode path the request names, for logs; `None` for requests without one
    /// (ping, auth, setWatches, multi, whoAmI, closeSession, ...).
    pub fn path(&self) -> Option<&str> {
        Some(match self {
            Request::Create(c) => &c.path,
            Request::Delete(d) => &d.path,
            Request::Exists(r)
            | Request::GetData(r)
            | Request::GetChildren(r)
            | Request::GetChildren2(r) => &r.path,
            Request::SetData(s) => &s.path,
            Request::SetAcl(s) => &s.path,
            Request::Check(c) => &c.path,
            Request::DeleteContainer(r)
            | Request::GetAcl(r)
            | Request::Sync(r)
            | Request::GetEphemerals(r)
            | Request::GetAllChildrenNumber(r) => &r.path,
            Request::CheckWatches(w) | Request::RemoveWatches(w) => &w.path,
            Request::AddWatch(a) => &a.path,
            _ => return None,
        })
    }

    /// Decodes the body of a request with opcode `opcode`.
    ///
    /// Errors: any [`JuteError`] when the body does not hold the op's record; the caller
    /// closes the connection (a malformed packet closes only that connection).
    pub fn decode(opcode: i32, body: &[u8]) -> Result<Request, JuteError> {
        let mut d = Decoder::new(body);
        let d = &mut d;
        let req = match opcode {
            op::CREATE | op::CREATE2 | op::CREATE_CONTAINER => {
                Request::Create(CreateOp::from_create(opcode, d.record()?))
            }
            op::CREATE_TTL => Request::Create(CreateOp::from_ttl(d.record()?)),
            op::DELETE => Request::Delete(d.record()?),
            op::DELETE_CONTAINER => {
                // ZooKeeper's prep reads the path as the request's raw bytes from the
                // request header on (new String(request.request.array())), not as a
                // jute string, so the opcode's NUL bytes are always part of it and the
                // request is refused (BADARGUMENTS), whatever the body holds.
                let mut raw = op::DELETE_CONTAINER.to_be_bytes().to_vec();
                raw.extend_from_slice(body);
                Request::DeleteContainer(PathRequest {
                    path: String::from_utf8_lossy(&raw).into_owned(),
                })
            }
            op::EXISTS => Request::Exists(d.record()?),
            op::GET_DATA => Request::GetData(d.record()?),
            op::SET_DATA => Request::SetData(d.record()?),
            op::GET_ACL => Request::GetAcl(d.record()?),
            op::SET_ACL => Request::SetAcl(d.record()?),
            op::GET_CHILDREN => Request::GetChildren(d.record()?),
            op::GET_CHILDREN2 => Request::GetChildren2(d.record()?),
            op::SYNC => Request::Sync(d.record()?),
            op::PING => Request::Ping,
            op::CHECK => Request::Check(d.record()?),
            op::MULTI => Request::Multi(decode_multi(d)?),
            op::MULTI_READ => decode_multi_read(d),
            op::RECONFIG => Request::Reconfig(d.record()?),
            op::CHECK_WATCHES => Request::CheckWatches(d.record()?),
            op::REMOVE_WATCHES => Request::RemoveWatches(d.record()?),
            op::AUTH => Request::Auth(d.record()?),
            op::SET_WATCHES => {
                let w: SetWatches = d.record()?;
                Request::SetWatches(SetWatches2 {
                    relative_zxid: w.relative_zxid,
                    data_watches: w.data_watches,
                    exist_watches: w.exist_watches,
                    child_watches: w.child_watches,
                    persistent_watches: Vec::new(),
                    persistent_recursive_watches: Vec::new(),
                })
            }
            op::SET_WATCHES2 => Request::SetWatches(d.record()?),
            op::SASL => return Ok(Request::Sasl(d.buffer()?.to_vec())),
            op::GET_EPHEMERALS => Request::GetEphemerals(d.record()?),
            op::GET_ALL_CHILDREN_NUMBER => Request::GetAllChildrenNumber(d.record()?),
            op::ADD_WATCH => Request::AddWatch(d.record()?),
            op::WHO_AM_I => Request::WhoAmI,
            op::CLOSE_SESSION => Request::CloseSession,
            other => return Ok(Request::Unknown(other)),
        };
        Ok(req)
    }

    /// Whether the request changes state and so becomes a txn with its own zxid.
    pub fn is_write(&self) -> bool {
        matches!(
            self,
            Request::Create(_)
                | Request::Delete(_)
                | Request::DeleteContainer(_)
                | Request::SetData(_)
                | Request::SetAcl(_)
                | Request::Check(_)
                | Request::Multi(_)
                | Request::Reconfig(_)
                | Request::CloseSession
                | Request::CreateSession { .. }
                | Request::Rejected(Rejection { txn: true, .. })
        )
    }
}

/// Reads multi ops until the terminating header (`done` = true).
///
/// A read op inside multi is malformed, as in ZooKeeper's MultiOperationRecord.
fn decode_multi(d: &mut Decoder<'_>) -> Result<Vec<MultiOp>, JuteError> {
    let mut ops = Vec::new();
    loop {
        let h: MultiHeader = d.record()?;
        if h.done {
            return Ok(ops);
        }
        match decode_multi_op(d, h.op_type)? {
            Some(item) if !item.is_read() => ops.push(item),
            _ => return Err(JuteError::BadType(h.op_type)),
        }
    }
}

/// Reads a multiRead as ZooKeeper's MultiOperationRecord does: any known op, all of
/// one kind (a read's watch flag is read and dropped, as Op.getData/getChildren
/// drop it). Never an error: what ZooKeeper cannot read is
/// [`Request::MultiReadMalformed`].
fn decode_multi_read(d: &mut Decoder<'_>) -> Request {
    let mut ops: Vec<MultiOp> = Vec::new();
    loop {
        let Ok(h) = d.record::<MultiHeader>() else {
            return Request::MultiReadMalformed;
        };
        if h.done {
            return Request::MultiRead(ops);
        }
        match decode_multi_op(d, h.op_type) {
            Ok(Some(item)) if ops.first().is_none_or(|o| o.is_read() == item.is_read()) => {
                ops.push(item)
            }
            _ => return Request::MultiReadMalformed,
        }
    }
}

/// One op of a multi or multiRead with type `op_type`; `None` for a type neither
/// holds.
fn decode_multi_op(d: &mut Decoder<'_>, op_type: i32) -> Result<Option<MultiOp>, JuteError> {
    Ok(Some(match op_type {
        op::CREATE | op::CREATE2 | op::CREATE_CONTAINER => {
            MultiOp::Create(CreateOp::from_create(op_type, d.record()?).in_multi())
        }
        op::CREATE_TTL => MultiOp::Create(CreateOp::from_ttl(d.record()?).in_multi()),
        op::DELETE => MultiOp::Delete(d.record()?),
        op::SET_DATA => MultiOp::SetData(d.record()?),
        op::CHECK => MultiOp::Check(d.record()?),
        op::GET_CHILDREN | op::GET_DATA => {
            let r: PathWatchRequest = d.record()?;
            let p = PathRequest { path: r.path };
            if op_type == op::GET_DATA {
                MultiOp::GetData(p)
            } else {
                MultiOp::GetChildren(p)
            }
        }
        _ => return Ok(None),
    }))
}

/// Reads a record and nothing else from `body`; a helper for records decoded outside
/// [`Request::decode`].
pub fn decode_record<R: Record>(body: &[u8]) -> Result<R, JuteError> {
    let mut d = Decoder::new(body);
    R::decode(&mut d)
}

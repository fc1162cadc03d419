//! The client protocol records, field for field in wire order.
//!
//! Source: ZooKeeper's `zookeeper.jute` schema as summarised in shared/PROTOCOL.md
//! ("Session handshake", "Requests and replies", "Stat", "ACLs", "Watches"). Primitive
//! fields are records too (`i32` = int, `i64` = long, `bool`, `String` = ustring,
//! `Bytes` = buffer, `Vec<T>` = vector), so every record is a plain list of fields.

use crate::codec::{Decoder, Encoder, JuteError, Record};
use bytes::{Bytes, BytesMut};

impl Record for i32 {
    fn encode(&self, out: &mut BytesMut) {
        out.int(*self)
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, JuteError> {
        d.int()
    }
}

impl Record for i64 {
    fn encode(&self, out: &mut BytesMut) {
        out.long(*self)
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, JuteError> {
        d.long()
    }
}

impl Record for bool {
    fn encode(&self, out: &mut BytesMut) {
        Encoder::bool(out, *self)
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, JuteError> {
        d.bool()
    }
}

impl Record for String {
    fn encode(&self, out: &mut BytesMut) {
        out.ustring(self)
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, JuteError> {
        d.ustring()
    }
}

impl Record for Bytes {
    fn encode(&self, out: &mut BytesMut) {
        out.buffer(self)
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, JuteError> {
        d.buffer().map(Bytes::copy_from_slice)
    }
}

impl Record for Option<Bytes> {
    fn encode(&self, out: &mut BytesMut) {
        match self {
            Some(b) => out.buffer(b),
            None => out.int(-1),
        }
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, JuteError> {
        d.buffer_opt().map(|b| b.map(Bytes::copy_from_slice))
    }
}

impl Record for Option<String> {
    fn encode(&self, out: &mut BytesMut) {
        match self {
            Some(s) => out.ustring(s),
            None => out.int(-1),
        }
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, JuteError> {
        d.ustring_opt()
    }
}

impl<T: Record> Record for Vec<T> {
    fn encode(&self, out: &mut BytesMut) {
        out.int(self.len() as i32);
        for item in self {
            item.encode(out);
        }
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, JuteError> {
        d.vector(T::decode)
    }
}

/// Declares a record struct whose fields are encoded and decoded in declaration order.
macro_rules! record {
    ($(#[$m:meta])* pub struct $name:ident { $($(#[$fm:meta])* pub $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
        pub struct $name { $($(#[$fm])* pub $field: $ty),* }

        impl Record for $name {
            #[allow(unused_variables)]
            fn encode(&self, out: &mut BytesMut) {
                $(self.$field.encode(out);)*
            }
            #[allow(unused_variables)]
            fn decode(d: &mut Decoder<'_>) -> Result<Self, JuteError> {
                Ok($name { $($field: <$ty as Record>::decode(d)?),* })
            }
        }
    };
}

record! {
    /// The first packet of a connection (no request header). `read_only` is absent from
    /// very old clients; see [`ConnectRequest::decode_lenient`].
    pub struct ConnectRequest {
        pub protocol_version: i32,
        /// The newest zxid this client has seen; a server behind it must refuse it.
        pub last_zxid_seen: i64,
        /// Requested session timeout, ms.
        pub time_out_ms: i32,
        /// 0 for a new session, else the session to resume.
        pub session_id: i64,
        pub passwd: Bytes,
        pub read_only: bool,
    }
}

impl ConnectRequest {
    /// Decodes a ConnectRequest whose trailing `readOnly` byte may be missing, as from
    /// clients older than ZooKeeper 3.4.
    pub fn decode_lenient(input: &[u8]) -> Result<Self, JuteError> {
        let mut d = Decoder::new(input);
        let protocol_version = d.int()?;
        let last_zxid_seen = d.long()?;
        let time_out_ms = d.int()?;
        let session_id = d.long()?;
        let passwd = Bytes::copy_from_slice(d.buffer()?);
        let read_only = if d.is_empty() { false } else { d.bool()? };
        Ok(ConnectRequest {
            protocol_version,
            last_zxid_seen,
            time_out_ms,
            session_id,
            passwd,
            read_only,
        })
    }

    /// Whether a ConnectRequest packet carries the trailing `readOnly` byte (false for
    /// clients older than ZooKeeper 3.4, whose ConnectResponse must lack it too).
    pub fn has_read_only(input: &[u8]) -> bool {
        let mut d = Decoder::new(input);
        let fixed = d.skip(4 + 8 + 4 + 8).is_ok() && d.buffer().is_ok();
        fixed && !d.is_empty()
    }
}

record! {
    /// The server's answer to a ConnectRequest. `time_out_ms` 0 and `session_id` 0 mean
    /// the session is expired or unknown.
    pub struct ConnectResponse {
        pub protocol_version: i32,
        pub time_out_ms: i32,
        pub session_id: i64,
        pub passwd: Bytes,
        pub read_only: bool,
    }
}

record! {
    /// Precedes every request after the handshake.
    pub struct RequestHeader {
        /// Client-chosen id echoed in the reply; -2 ping, -4 auth, -8 setWatches.
        pub xid: i32,
        /// The opcode (shared/PROTOCOL.md, "Opcodes").
        pub op_type: i32,
    }
}

record! {
    /// Precedes every reply and watch notification.
    pub struct ReplyHeader {
        /// The request's xid; -1 for a watch notification, -2 for a ping reply.
        pub xid: i32,
        /// The server's last committed zxid (or the write's own zxid).
        pub zxid: i64,
        /// Error code (shared/PROTOCOL.md, "Error codes"); 0 = OK.
        pub err: i32,
    }
}

record! {
    /// A watch notification body (xid -1).
    pub struct WatcherEvent {
        pub event_type: i32,
        pub state: i32,
        pub path: String,
    }
}

record! {
    /// An ACL identity: scheme (world, auth, digest, ip, super, x509) and id.
    pub struct Id {
        pub scheme: String,
        pub id: String,
    }
}

record! {
    /// One ACL entry: a permission bit mask (READ 1, WRITE 2, CREATE 4, DELETE 8,
    /// ADMIN 16) granted to an identity.
    pub struct Acl {
        pub perms: i32,
        pub id: Id,
    }
}

record! {
    /// A znode's metadata (shared/PROTOCOL.md, "Stat"). Times are ms since the epoch.
    pub struct Stat {
        pub czxid: i64,
        pub mzxid: i64,
        pub ctime: i64,
        pub mtime: i64,
        pub version: i32,
        pub cversion: i32,
        pub aversion: i32,
        pub ephemeral_owner: i64,
        pub data_length: i32,
        pub num_children: i32,
        pub pzxid: i64,
    }
}

record! {
    /// create (1), create2 (15), createContainer (19).
    pub struct CreateRequest {
        pub path: String,
        /// `None` is a null buffer (length -1), which ZooKeeper keeps apart from empty.
        pub data: Option<Bytes>,
        pub acl: Vec<Acl>,
        /// Create mode (shared/PROTOCOL.md, "Create modes").
        pub flags: i32,
    }
}

record! {
    /// createTTL (21).
    pub struct CreateTtlRequest {
        pub path: String,
        /// `None` is a null buffer (length -1), which ZooKeeper keeps apart from empty.
        pub data: Option<Bytes>,
        pub acl: Vec<Acl>,
        pub flags: i32,
        /// Time to live, ms.
        pub ttl_ms: i64,
    }
}

record! {
    /// Reply to create (1).
    pub struct CreateResponse {
        pub path: String,
    }
}

record! {
    /// Reply to create2, createContainer, createTTL.
    pub struct Create2Response {
        pub path: String,
        pub stat: Stat,
    }
}

record! {
    /// delete (2), deleteContainer uses [`PathRequest`].
    pub struct DeleteRequest {
        pub path: String,
        /// Expected dataVersion, -1 = any.
        pub version: i32,
    }
}

record! {
    /// A request that is a path and a watch flag: exists (3), getData (4),
    /// getChildren (8), getChildren2 (12).
    pub struct PathWatchRequest {
        pub path: String,
        pub watch: bool,
    }
}

record! {
    /// A request that is only a path: getACL (6), sync (9), deleteContainer (20),
    /// getEphemerals (103), getAllChildrenNumber (104).
    pub struct PathRequest {
        pub path: String,
    }
}

record! {
    /// Reply that is only a Stat: exists, setData, setACL.
    pub struct StatResponse {
        pub stat: Stat,
    }
}

record! {
    /// Reply to getData (4).
    pub struct GetDataResponse {
        /// `None` is a null buffer (length -1), which ZooKeeper keeps apart from empty.
        pub data: Option<Bytes>,
        pub stat: Stat,
    }
}

record! {
    /// setData (5).
    pub struct SetDataRequest {
        pub path: String,
        /// `None` is a null buffer (length -1), which ZooKeeper keeps apart from empty.
        pub data: Option<Bytes>,
        pub version: i32,
    }
}

record! {
    /// Reply to getACL (6).
    pub struct GetAclResponse {
        pub acl: Vec<Acl>,
        pub stat: Stat,
    }
}

record! {
    /// setACL (7).
    pub struct SetAclRequest {
        pub path: String,
        pub acl: Vec<Acl>,
        /// Expected aclVersion, -1 = any.
        pub version: i32,
    }
}

record! {
    /// Reply to getChildren (8).
    pub struct GetChildrenResponse {
        pub children: Vec<String>,
    }
}

record! {
    /// Reply to getChildren2 (12).
    pub struct GetChildren2Response {
        pub children: Vec<String>,
        pub stat: Stat,
    }
}

record! {
    /// check (13), inside multi.
    pub struct CheckVersionRequest {
        pub path: String,
        pub version: i32,
    }
}

record! {
    /// Precedes each op of a multi request and each result of a multi reply; a header
    /// with `op_type` -1 and `done` true ends the list.
    pub struct MultiHeader {
        pub op_type: i32,
        pub done: bool,
        pub err: i32,
    }
}

record! {
    /// A failed op's result inside a multi reply.
    pub struct ErrorResponse {
        pub err: i32,
    }
}

record! {
    /// checkWatches (17) and removeWatches (18). `watcher_type`: 1 children, 2 data,
    /// 3 any (ZooKeeper's WatcherType).
    pub struct WatchesRequest {
        pub path: String,
        pub watcher_type: i32,
    }
}

record! {
    /// reconfig (16). A `None` string is null (length -1): ZooKeeper's
    /// PrepRequestProcessor takes a null `new_members` as an incremental reconfig and
    /// a null joining or leaving list as none, while an empty `new_members` is a
    /// (non-incremental) configuration without servers.
    pub struct ReconfigRequest {
        /// Comma-separated `server.N=...` lines to add or change.
        pub joining_servers: Option<String>,
        /// Comma-separated server ids to remove.
        pub leaving_servers: Option<String>,
        /// The whole new membership (`server.N=...` lines, commas or newlines).
        pub new_members: Option<String>,
        /// The config version the client expects (-1: any).
        pub cur_config_id: i64,
    }
}

record! {
    /// auth (100), sent with xid -4.
    pub struct AuthPacket {
        pub auth_type: i32,
        pub scheme: String,
        pub auth: Bytes,
    }
}

record! {
    /// setWatches (101), sent with xid -8 on reconnect.
    pub struct SetWatches {
        pub relative_zxid: i64,
        pub data_watches: Vec<String>,
        pub exist_watches: Vec<String>,
        pub child_watches: Vec<String>,
    }
}

record! {
    /// setWatches2 (105): setWatches plus persistent and recursive watches.
    pub struct SetWatches2 {
        pub relative_zxid: i64,
        pub data_watches: Vec<String>,
        pub exist_watches: Vec<String>,
        pub child_watches: Vec<String>,
        pub persistent_watches: Vec<String>,
        pub persistent_recursive_watches: Vec<String>,
    }
}

record! {
    /// Reply to getEphemerals (103).
    pub struct GetEphemeralsResponse {
        pub ephemerals: Vec<String>,
    }
}

record! {
    /// Reply to getAllChildrenNumber (104).
    pub struct GetAllChildrenNumberResponse {
        pub total_number: i32,
    }
}

record! {
    /// addWatch (106). `mode`: 0 persistent, 1 persistent recursive.
    pub struct AddWatchRequest {
        pub path: String,
        pub mode: i32,
    }
}

record! {
    /// One authenticated identity in a whoAmI reply.
    pub struct ClientInfo {
        pub auth_scheme: String,
        pub user: String,
    }
}

record! {
    /// Reply to whoAmI (107).
    pub struct WhoAmIResponse {
        pub client_info: Vec<ClientInfo>,
    }
}

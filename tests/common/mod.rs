//! Helpers shared by the process-level tests (`tests/crash.rs`, `tests/restart.rs`):
//! - [`Client`]: a small blocking ZooKeeper client over a std `TcpStream`, speaking the
//!   raw protocol with `jute` (shared/PROTOCOL.md, "Framing", "Session handshake",
//!   "Requests and replies"). Errors are ZooKeeper error codes; a broken or timed-out
//!   connection is [`CONNECTIONLOSS`], after which the client answers nothing else.
//! - [`Keel`]: a keel process on a temp dataDir that can be started, killed with
//!   SIGKILL, stopped with SIGTERM and started again on the same dataDir. Dropping it
//!   kills the process and removes the directory.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use bytes::{BufMut, Bytes, BytesMut};
use jute::{
    Acl, CheckVersionRequest, ConnectRequest, ConnectResponse, Create2Response, CreateRequest,
    CreateResponse, Decoder, DeleteRequest, ErrorResponse, GetChildrenResponse, GetDataResponse,
    Id, MultiHeader, PathWatchRequest, Record, ReplyHeader, RequestHeader, SetDataRequest,
    SetWatches, Stat, StatResponse, WatcherEvent,
};
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Error codes (shared/PROTOCOL.md, "Error codes").
pub const CONNECTIONLOSS: i32 = -4;
pub const RUNTIMEINCONSISTENCY: i32 = -2;
pub const NONODE: i32 = -101;
pub const BADVERSION: i32 = -103;
pub const NODEEXISTS: i32 = -110;
pub const SESSIONEXPIRED: i32 = -112;

/// Watch event types (shared/PROTOCOL.md, "Watches").
pub const NODE_CREATED: i32 = 1;
pub const NODE_DELETED: i32 = 2;

/// Opcodes (shared/PROTOCOL.md, "Opcodes").
mod op {
    pub const DELETE: i32 = 2;
    pub const EXISTS: i32 = 3;
    pub const GET_DATA: i32 = 4;
    pub const SET_DATA: i32 = 5;
    pub const GET_CHILDREN: i32 = 8;
    pub const PING: i32 = 11;
    pub const CHECK: i32 = 13;
    pub const MULTI: i32 = 14;
    pub const CREATE: i32 = 1;
    pub const CREATE2: i32 = 15;
    pub const CLOSE_SESSION: i32 = -11;
    pub const SET_WATCHES: i32 = 101;
    pub const ERROR: i32 = -1;
}

/// Reserved xids.
const NOTIFICATION_XID: i32 = -1;
const PING_XID: i32 = -2;
const SET_WATCHES_XID: i32 = -8;

/// How long a reply may take before the connection counts as lost.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// A frame larger than this is a protocol error in these tests, not a reply.
const FRAME_BYTES_MAX: usize = 64 << 20;

/// Replies are read back after this many pipelined reads at most.
const PIPELINE_DEPTH: usize = 128;

/// A ZooKeeper error code; 0 never appears here.
pub type ZkResult<T> = Result<T, i32>;

/// What getData returns: the data (`None` = null) and the Stat.
pub type NodeRead = (Option<Vec<u8>>, Stat);

/// Create modes (shared/PROTOCOL.md, "Create modes").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateMode {
    Persistent = 0,
    Ephemeral = 1,
    PersistentSequential = 2,
    EphemeralSequential = 3,
}

/// One op of a multi.
#[derive(Debug, Clone)]
pub enum Op {
    Create {
        path: String,
        data: Option<Vec<u8>>,
        mode: CreateMode,
    },
    SetData {
        path: String,
        data: Option<Vec<u8>>,
        version: i32,
    },
    Check {
        path: String,
        version: i32,
    },
    Delete {
        path: String,
        version: i32,
    },
}

/// One result of a multi, in op order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    /// A create's path, and its Stat when the result is type 15 (a createContainer or
    /// createTTL in a multi); ZooKeeper answers other creates in a multi, create2
    /// included, with type 1 and the path only.
    Create {
        path: String,
        stat: Option<Stat>,
    },
    SetData(Stat),
    Check,
    Delete,
    /// The op's error code; 0 for an op that would have succeeded in a failed multi,
    /// -2 (RUNTIMEINCONSISTENCY) for one after the failing op.
    Error(i32),
}

/// The first real error of a failed multi's results (not 0, not RUNTIMEINCONSISTENCY).
pub fn multi_error(results: &[OpResult]) -> Option<i32> {
    let mut fallback = None;
    for r in results {
        if let OpResult::Error(code) = r {
            if *code != 0 && *code != RUNTIMEINCONSISTENCY {
                return Some(*code);
            }
            fallback.get_or_insert(*code);
        }
    }
    fallback
}

fn open_acl() -> Vec<Acl> {
    vec![Acl {
        perms: 31,
        id: Id {
            scheme: "world".into(),
            id: "anyone".into(),
        },
    }]
}

/// One framed packet: the optional request header, then what `body` writes.
pub fn frame(header: Option<&RequestHeader>, body: &dyn Fn(&mut BytesMut)) -> Vec<u8> {
    let mut payload = BytesMut::new();
    if let Some(h) = header {
        h.encode(&mut payload);
    }
    body(&mut payload);
    let mut out = Vec::with_capacity(payload.len() + 4);
    out.put_i32(payload.len() as i32);
    out.extend_from_slice(&payload);
    out
}

/// A ConnectRequest for session `session_id` (0: a new one) with nothing seen yet.
pub fn connect_request(session_id: i64, passwd: Bytes, timeout_ms: i32) -> ConnectRequest {
    ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 0,
        time_out_ms: timeout_ms,
        session_id,
        passwd,
        read_only: false,
    }
}

/// Reads one frame's payload (without its length).
pub fn read_frame(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let len = i32::from_be_bytes(len);
    if len < 0 || len as usize > FRAME_BYTES_MAX {
        return Err(std::io::Error::other(format!("frame length {len}")));
    }
    let mut body = vec![0u8; len as usize];
    s.read_exact(&mut body)?;
    Ok(body)
}

fn decode<R: Record>(d: &mut Decoder<'_>) -> R {
    R::decode(d).unwrap_or_else(|e| panic!("undecodable reply: {e:?}"))
}

/// A blocking ZooKeeper client: one session, one connection, requests one at a time
/// (or pipelined reads through [`Client::get_data_many`]).
pub struct Client {
    stream: TcpStream,
    pub session_id: i64,
    pub passwd: Bytes,
    /// The negotiated session timeout, ms.
    pub timeout_ms: i32,
    next_xid: i32,
    /// The zxid in the newest reply header.
    last_zxid: i64,
    /// Watch notifications read while waiting for replies, oldest first.
    events: VecDeque<WatcherEvent>,
    /// Set once the connection failed; every later call is CONNECTIONLOSS.
    broken: bool,
}

impl Client {
    /// A new session on 127.0.0.1:`port` asking for `timeout_ms`.
    pub fn connect(port: u16, timeout_ms: i32) -> ZkResult<Client> {
        Client::handshake(port, timeout_ms, 0, Bytes::from_static(&[0; 16]))
    }

    /// Resumes session `session_id` with its password. An unknown or expired session
    /// is SESSIONEXPIRED.
    pub fn resume(port: u16, timeout_ms: i32, session_id: i64, passwd: &Bytes) -> ZkResult<Client> {
        Client::handshake(port, timeout_ms, session_id, passwd.clone())
    }

    fn handshake(port: u16, timeout_ms: i32, session_id: i64, passwd: Bytes) -> ZkResult<Client> {
        let lost = |_| CONNECTIONLOSS;
        let mut stream = TcpStream::connect(("127.0.0.1", port)).map_err(lost)?;
        stream.set_read_timeout(Some(READ_TIMEOUT)).map_err(lost)?;
        stream.set_nodelay(true).map_err(lost)?;
        let req = connect_request(session_id, passwd, timeout_ms);
        stream
            .write_all(&frame(None, &|b| req.encode(b)))
            .map_err(lost)?;
        let body = read_frame(&mut stream).map_err(lost)?;
        let resp: ConnectResponse = decode(&mut Decoder::new(&body));
        if resp.session_id == 0 || resp.time_out_ms <= 0 {
            return Err(SESSIONEXPIRED);
        }
        Ok(Client {
            stream,
            session_id: resp.session_id,
            passwd: resp.passwd,
            timeout_ms: resp.time_out_ms,
            next_xid: 1,
            last_zxid: 0,
            events: VecDeque::new(),
            broken: false,
        })
    }

    /// The zxid carried by the newest reply (a write's own zxid, or the server's last
    /// committed zxid for a read).
    pub fn last_zxid(&self) -> i64 {
        self.last_zxid
    }

    fn lost<T>(&mut self) -> ZkResult<T> {
        self.broken = true;
        Err(CONNECTIONLOSS)
    }

    fn send(&mut self, xid: i32, op_type: i32, body: &dyn Fn(&mut BytesMut)) -> ZkResult<()> {
        if self.broken {
            return Err(CONNECTIONLOSS);
        }
        let bytes = frame(Some(&RequestHeader { xid, op_type }), body);
        if self.stream.write_all(&bytes).is_err() {
            return self.lost();
        }
        Ok(())
    }

    /// Reads frames until the reply to `xid`, keeping watch notifications aside.
    /// Returns the reply's body after its header.
    fn receive(&mut self, xid: i32) -> ZkResult<(ReplyHeader, Vec<u8>)> {
        if self.broken {
            return Err(CONNECTIONLOSS);
        }
        loop {
            let Ok(body) = read_frame(&mut self.stream) else {
                return self.lost();
            };
            let mut d = Decoder::new(&body);
            let header: ReplyHeader = decode(&mut d);
            if header.xid == NOTIFICATION_XID {
                self.events.push_back(decode(&mut d));
                continue;
            }
            if header.xid == PING_XID && xid != PING_XID {
                continue;
            }
            assert_eq!(
                header.xid, xid,
                "reply out of order for session 0x{:x}",
                self.session_id
            );
            self.last_zxid = header.zxid;
            let rest = d.remaining().to_vec();
            return Ok((header, rest));
        }
    }

    /// One request, one reply; a nonzero reply error is returned as the error.
    pub fn call(&mut self, op_type: i32, body: &dyn Fn(&mut BytesMut)) -> ZkResult<Vec<u8>> {
        let xid = self.next_xid;
        self.next_xid += 1;
        self.send(xid, op_type, body)?;
        let (header, rest) = self.receive(xid)?;
        if header.err != 0 {
            return Err(header.err);
        }
        Ok(rest)
    }

    /// create2: returns the created path (with its sequential suffix) and its Stat.
    pub fn create(
        &mut self,
        path: &str,
        data: Option<&[u8]>,
        mode: CreateMode,
    ) -> ZkResult<(String, Stat)> {
        let req = CreateRequest {
            path: path.into(),
            data: data.map(Bytes::copy_from_slice),
            acl: open_acl(),
            flags: mode as i32,
        };
        let body = self.call(op::CREATE2, &|b| req.encode(b))?;
        let resp: Create2Response = decode(&mut Decoder::new(&body));
        Ok((resp.path, resp.stat))
    }

    pub fn set_data(&mut self, path: &str, data: Option<&[u8]>, version: i32) -> ZkResult<Stat> {
        let req = SetDataRequest {
            path: path.into(),
            data: data.map(Bytes::copy_from_slice),
            version,
        };
        let body = self.call(op::SET_DATA, &|b| req.encode(b))?;
        Ok(decode::<StatResponse>(&mut Decoder::new(&body)).stat)
    }

    /// getData: the data (`None` = null) and Stat; NONODE when absent.
    pub fn get_data(&mut self, path: &str, watch: bool) -> ZkResult<NodeRead> {
        let req = PathWatchRequest {
            path: path.into(),
            watch,
        };
        let body = self.call(op::GET_DATA, &|b| req.encode(b))?;
        let resp: GetDataResponse = decode(&mut Decoder::new(&body));
        Ok((resp.data.map(|d| d.to_vec()), resp.stat))
    }

    /// getData of every path, pipelined. The outer error is a lost connection; the inner
    /// results are per path (NONODE when absent).
    pub fn get_data_many(&mut self, paths: &[String]) -> ZkResult<Vec<ZkResult<NodeRead>>> {
        let mut out = Vec::with_capacity(paths.len());
        for batch in paths.chunks(PIPELINE_DEPTH) {
            let first = self.next_xid;
            let mut bytes = Vec::new();
            for (i, path) in batch.iter().enumerate() {
                let req = PathWatchRequest {
                    path: path.clone(),
                    watch: false,
                };
                let header = RequestHeader {
                    xid: first + i as i32,
                    op_type: op::GET_DATA,
                };
                bytes.extend_from_slice(&frame(Some(&header), &|b| req.encode(b)));
            }
            self.next_xid += batch.len() as i32;
            if self.broken || self.stream.write_all(&bytes).is_err() {
                return self.lost();
            }
            for i in 0..batch.len() {
                let (header, rest) = self.receive(first + i as i32)?;
                if header.err != 0 {
                    out.push(Err(header.err));
                } else {
                    let resp: GetDataResponse = decode(&mut Decoder::new(&rest));
                    out.push(Ok((resp.data.map(|d| d.to_vec()), resp.stat)));
                }
            }
        }
        Ok(out)
    }

    /// exists: the Stat, or `None` when absent (a watch is then an exists watch).
    pub fn exists(&mut self, path: &str, watch: bool) -> ZkResult<Option<Stat>> {
        let req = PathWatchRequest {
            path: path.into(),
            watch,
        };
        match self.call(op::EXISTS, &|b| req.encode(b)) {
            Ok(body) => Ok(Some(decode::<StatResponse>(&mut Decoder::new(&body)).stat)),
            Err(NONODE) => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub fn get_children(&mut self, path: &str, watch: bool) -> ZkResult<Vec<String>> {
        let req = PathWatchRequest {
            path: path.into(),
            watch,
        };
        let body = self.call(op::GET_CHILDREN, &|b| req.encode(b))?;
        Ok(decode::<GetChildrenResponse>(&mut Decoder::new(&body)).children)
    }

    pub fn delete(&mut self, path: &str, version: i32) -> ZkResult<()> {
        let req = DeleteRequest {
            path: path.into(),
            version,
        };
        self.call(op::DELETE, &|b| req.encode(b)).map(|_| ())
    }

    /// multi: the per-op results. A multi that failed as a whole is still `Ok`, with
    /// [`OpResult::Error`] results (see [`multi_error`]); `Err` is a reply without
    /// results (e.g. a lost connection).
    pub fn multi(&mut self, ops: &[Op]) -> ZkResult<Vec<OpResult>> {
        let encode = |b: &mut BytesMut| {
            for o in ops {
                let header = |op_type| MultiHeader {
                    op_type,
                    done: false,
                    err: -1,
                };
                match o {
                    Op::Create { path, data, mode } => {
                        header(op::CREATE2).encode(b);
                        CreateRequest {
                            path: path.clone(),
                            data: data.as_deref().map(Bytes::copy_from_slice),
                            acl: open_acl(),
                            flags: *mode as i32,
                        }
                        .encode(b);
                    }
                    Op::SetData {
                        path,
                        data,
                        version,
                    } => {
                        header(op::SET_DATA).encode(b);
                        SetDataRequest {
                            path: path.clone(),
                            data: data.as_deref().map(Bytes::copy_from_slice),
                            version: *version,
                        }
                        .encode(b);
                    }
                    Op::Check { path, version } => {
                        header(op::CHECK).encode(b);
                        CheckVersionRequest {
                            path: path.clone(),
                            version: *version,
                        }
                        .encode(b);
                    }
                    Op::Delete { path, version } => {
                        header(op::DELETE).encode(b);
                        DeleteRequest {
                            path: path.clone(),
                            version: *version,
                        }
                        .encode(b);
                    }
                }
            }
            MultiHeader {
                op_type: -1,
                done: true,
                err: -1,
            }
            .encode(b);
        };
        let body = self.call(op::MULTI, &encode)?;
        let mut d = Decoder::new(&body);
        let mut results = Vec::new();
        loop {
            let h: MultiHeader = decode(&mut d);
            if h.done {
                break;
            }
            results.push(match h.op_type {
                op::CREATE2 => {
                    let r: Create2Response = decode(&mut d);
                    OpResult::Create {
                        path: r.path,
                        stat: Some(r.stat),
                    }
                }
                op::CREATE => OpResult::Create {
                    path: decode::<CreateResponse>(&mut d).path,
                    stat: None,
                },
                op::SET_DATA => OpResult::SetData(decode::<StatResponse>(&mut d).stat),
                op::CHECK => OpResult::Check,
                op::DELETE => OpResult::Delete,
                op::ERROR => OpResult::Error(decode::<ErrorResponse>(&mut d).err),
                other => panic!("multi result of unexpected type {other}"),
            });
        }
        assert_eq!(results.len(), ops.len(), "one result per multi op");
        Ok(results)
    }

    /// setWatches (xid -8), as a client sends after reconnecting: re-registers watches,
    /// and the server fires at once those whose change is newer than `relative_zxid`.
    pub fn set_watches(
        &mut self,
        relative_zxid: i64,
        data: &[&str],
        exist: &[&str],
        child: &[&str],
    ) -> ZkResult<()> {
        let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let req = SetWatches {
            relative_zxid,
            data_watches: owned(data),
            exist_watches: owned(exist),
            child_watches: owned(child),
        };
        self.send(SET_WATCHES_XID, op::SET_WATCHES, &|b| req.encode(b))?;
        let (header, _) = self.receive(SET_WATCHES_XID)?;
        if header.err != 0 {
            return Err(header.err);
        }
        Ok(())
    }

    /// A ping (xid -2) and its reply.
    pub fn ping(&mut self) -> ZkResult<()> {
        self.send(PING_XID, op::PING, &|_| {})?;
        self.receive(PING_XID).map(|_| ())
    }

    /// closeSession, then the connection is dropped.
    pub fn close(mut self) -> ZkResult<()> {
        self.call(op::CLOSE_SESSION, &|_| {}).map(|_| ())
    }

    /// The next watch notification, waiting up to `timeout` for one. Pings keep the
    /// session alive meanwhile.
    pub fn wait_event(&mut self, timeout: Duration) -> Option<WatcherEvent> {
        let deadline = Instant::now() + timeout;
        while self.events.is_empty() && !self.broken {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            // A ping round trip at least every second, reading any events on the way.
            let _ = self
                .stream
                .set_read_timeout(Some(left.min(Duration::from_secs(1))));
            match read_frame(&mut self.stream) {
                Ok(body) => {
                    let mut d = Decoder::new(&body);
                    let header: ReplyHeader = decode(&mut d);
                    if header.xid == NOTIFICATION_XID {
                        self.events.push_back(decode(&mut d));
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    let _ = self.stream.set_read_timeout(Some(READ_TIMEOUT));
                    let _ = self.ping();
                }
                Err(_) => self.broken = true,
            }
        }
        let _ = self.stream.set_read_timeout(Some(READ_TIMEOUT));
        self.events.pop_front()
    }

    /// Drops the connection without closing the session, as a crashed client would.
    pub fn abandon(self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind an ephemeral port")
        .local_addr()
        .expect("local addr")
        .port()
}

/// A directory under the system temp dir, removed when dropped.
pub struct TempDir {
    pub path: PathBuf,
}

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!(
            "keel-test-{tag}-{}-{}",
            std::process::id(),
            free_port()
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create temp dir");
        TempDir { path }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// How a [`Keel`] is configured; written to zoo.cfg on every start, so a field changed
/// between starts applies to the next one.
#[derive(Debug, Clone)]
pub struct KeelOptions {
    pub tick_time_ms: u32,
    /// `snapCount`; `None` leaves keel's default.
    pub snap_count: Option<u64>,
    /// Put `dataLogDir` apart from `dataDir`.
    pub separate_log_dir: bool,
    /// More zoo.cfg lines.
    pub extra: String,
}

impl Default for KeelOptions {
    fn default() -> Self {
        KeelOptions {
            tick_time_ms: 2000,
            snap_count: None,
            separate_log_dir: false,
            extra: String::new(),
        }
    }
}

/// A keel process and its directories. The process is killed (SIGKILL) and the
/// directories removed on drop.
pub struct Keel {
    child: Option<Child>,
    /// The client port of the current (or last) start; a new free port every start.
    pub port: u16,
    pub data_dir: PathBuf,
    pub log_dir: PathBuf,
    pub options: KeelOptions,
    starts: u32,
    /// Declared last: removed after the process is gone.
    pub dir: TempDir,
}

impl Drop for Keel {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// How long a start may take before the test fails.
const START_TIMEOUT: Duration = Duration::from_secs(60);

impl Keel {
    /// A keel on a fresh temp dir, not started yet.
    pub fn new(tag: &str, options: KeelOptions) -> Keel {
        let dir = TempDir::new(tag);
        let data_dir = dir.path.join("data");
        let log_dir = if options.separate_log_dir {
            dir.path.join("datalog")
        } else {
            data_dir.clone()
        };
        Keel {
            child: None,
            port: 0,
            data_dir,
            log_dir,
            options,
            starts: 0,
            dir,
        }
    }

    /// The zoo.cfg of the next start.
    pub fn cfg_path(&self) -> PathBuf {
        self.dir.path.join("zoo.cfg")
    }

    /// Where the stderr of start number `n` (from 1) goes.
    pub fn stderr_path(&self, n: u32) -> PathBuf {
        self.dir.path.join(format!("keel-{n}.stderr"))
    }

    /// The stderr of the current (or last) start.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.stderr_path(self.starts)).unwrap_or_default()
    }

    /// How many times keel was started.
    pub fn starts(&self) -> u32 {
        self.starts
    }

    fn spawn(&mut self) {
        assert!(self.child.is_none(), "keel is already running");
        self.port = free_port();
        let o = &self.options;
        let mut cfg = format!(
            "tickTime={}\ndataDir={}\ndataLogDir={}\nclientPort={}\nclientPortAddress=127.0.0.1\n\
             maxClientCnxns=0\n4lw.commands.whitelist=*\nadmin.enableServer=false\n",
            o.tick_time_ms,
            self.data_dir.display(),
            self.log_dir.display(),
            self.port
        );
        if let Some(n) = o.snap_count {
            cfg.push_str(&format!("snapCount={n}\n"));
        }
        cfg.push_str(&o.extra);
        std::fs::write(self.cfg_path(), cfg).expect("write zoo.cfg");
        self.starts += 1;
        let stderr = std::fs::File::create(self.stderr_path(self.starts)).expect("stderr file");
        let child = Command::new(env!("CARGO_BIN_EXE_keel"))
            .arg(self.cfg_path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn keel");
        self.child = Some(child);
    }

    /// Starts keel and waits until it answers `ruok`, or returns why not (its exit
    /// status and stderr) if it exits first.
    pub fn try_start(&mut self) -> Result<(), String> {
        self.spawn();
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            let child = self.child.as_mut().expect("spawned");
            if let Some(status) = child.try_wait().expect("try_wait") {
                self.child = None;
                return Err(format!("keel exited with {status}:\n{}", self.stderr()));
            }
            if ruok(self.port) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "keel did not answer within {START_TIMEOUT:?}; stderr:\n{}",
            self.stderr()
        );
    }

    /// Starts keel (again, on the same dataDir) and waits until it answers.
    pub fn start(&mut self) {
        if let Err(e) = self.try_start() {
            panic!("keel failed to start (start #{}): {e}", self.starts);
        }
    }

    /// Starts keel expecting it to refuse: waits for its exit and returns the status and
    /// stderr. Panics if it serves instead.
    pub fn start_expecting_exit(&mut self) -> (ExitStatus, String) {
        self.spawn();
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            let child = self.child.as_mut().expect("spawned");
            if let Some(status) = child.try_wait().expect("try_wait") {
                self.child = None;
                return (status, self.stderr());
            }
            if ruok(self.port) {
                panic!(
                    "keel started, but was expected to refuse; stderr:\n{}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("keel neither served nor exited within {START_TIMEOUT:?}");
    }

    /// SIGKILL, as a crash would stop it (the OS page cache survives, unlike in a power
    /// cut); waits until the process is gone. A process that already exited is only
    /// reaped.
    pub fn kill9(&mut self) {
        let mut child = self.child.take().expect("keel was started");
        let _ = child.kill();
        child.wait().expect("reap keel");
    }

    /// SIGTERM; returns the exit status (panics if keel takes over 10 s).
    pub fn terminate(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("keel is running");
        Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status()
            .expect("run kill -TERM");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("keel still running 10 s after SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => child.try_wait().expect("try_wait").is_none(),
            None => false,
        }
    }
}

/// Whether a server on `port` answers the four-letter word `ruok` with `imok`.
pub fn ruok(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"ruok").is_err() {
        return false;
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out == "imok"
}

/// Every regular file under `dir`, recursively, sorted.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The newest txn log segment (`keel-txnlog/log.<zxid>`, highest first zxid) under any
/// of `dirs`.
pub fn newest_txnlog_segment(dirs: &[&Path]) -> Option<PathBuf> {
    dirs.iter()
        .flat_map(|d| files_under(d))
        .filter(|p| {
            p.parent()
                .and_then(|d| d.file_name())
                .is_some_and(|n| n == keel::storage::txnlog::TXNLOG_DIR)
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("log."))
        })
        .max()
}

//! Session close and the ephemerals it owns (issue 14 items 1 and 2), on the sans-I/O
//! server with `durable` set, so every txn waits for `Input::Durable` as it does behind
//! real storage: requests pipelined around a closeSession (in one TCP write, a client
//! cannot tell them apart from these inputs), expiry with a create on its way to disk,
//! a session moved while its old connection has requests queued, and recovery from a
//! store that already holds an ephemeral of a dead session.

use bytes::{Bytes, BytesMut};
use jute::*;
use keel::proto::opcode as op;
use keel::proto::request::{CreateOp, MultiOp};
use keel::proto::Request;
use keel::server::txn::{Txn, TxnOp};
use keel::server::{recovery, Input, Outbound, Server, StorageOp};
use keel::session::SessionTracker;
use keel::storage::mem::MemStorage;
use keel::storage::{LogEntry, Storage};
use keel::tree::DataTree;
use std::collections::BTreeSet;
use std::path::Path;

mod common;
#[path = "support/sansio.rs"]
mod sansio;
use common::{connect_request, frame, read_frame, Client, CreateMode, Keel, KeelOptions};

const T0: i64 = 1_700_000_000_000;
const EPHEMERAL: i32 = 1;

/// What one connection received, as its client sees it.
#[derive(Debug, Clone, PartialEq)]
enum Got {
    Connected { session_id: i64 },
    Reply { xid: i32, zxid: i64, err: i32 },
    Event { path: String },
    Closed,
}

/// The server plus what the runtime would do with its output: packets in order per
/// connection, nothing after a Close (the connection is gone).
struct H {
    server: Server,
    now: i64,
    got: std::collections::BTreeMap<u64, Vec<Got>>,
}

impl H {
    fn new() -> H {
        H {
            server: Server::new(sansio::logged_settings(), 0, T0, 7),
            now: T0,
            got: Default::default(),
        }
    }

    fn input(&mut self, input: Input) {
        self.server.handle(self.now, input);
        for (conn, out) in self.server.drain_outbox() {
            let seen = self.got.entry(conn).or_default();
            if seen.last() == Some(&Got::Closed) {
                continue;
            }
            seen.push(match out {
                Outbound::Close => Got::Closed,
                Outbound::Packet(p) => decode(&p[4..]),
            });
        }
    }

    /// Everything `conn` received since the last call.
    fn take(&mut self, conn: u64) -> Vec<Got> {
        let seen = self.got.entry(conn).or_default();
        let closed = seen.last() == Some(&Got::Closed);
        let out = std::mem::take(seen);
        if closed {
            // Keep the connection closed for what comes later.
            seen.push(Got::Closed);
        }
        out
    }

    /// Reports every txn proposed so far durable; returns how many there were.
    fn durable_all(&mut self) -> usize {
        let appended: Vec<i64> = self
            .server
            .drain_storage()
            .into_iter()
            .filter_map(|op| match op {
                StorageOp::Append(t) => Some(t.zxid),
                _ => None,
            })
            .collect();
        if let Some(&zxid) = appended.last() {
            self.input(Input::Durable { zxid });
        }
        appended.len()
    }

    fn connected(&mut self, conn: u64) {
        self.input(Input::Connected {
            conn,
            addr: "127.0.0.1:5000".parse().unwrap(),
        });
    }

    fn handshake(&mut self, conn: u64, session_id: i64, passwd: Bytes, timeout_ms: i32) {
        let req = connect_request(session_id, passwd, timeout_ms);
        self.input(Input::Handshake { conn, req });
    }

    /// A new connection with a session, made durable; returns the session id and
    /// password.
    fn session(&mut self, conn: u64, timeout_ms: i32) -> (i64, Bytes) {
        self.connected(conn);
        self.handshake(conn, 0, Bytes::from_static(&[0; 16]), timeout_ms);
        self.durable_all();
        let id = match self.take(conn).as_slice() {
            [Got::Connected { session_id }] => *session_id,
            other => panic!("handshake: {other:?}"),
        };
        let passwd = self.server.sessions.get(id).expect("session").passwd;
        (id, Bytes::copy_from_slice(&passwd))
    }

    fn request(&mut self, conn: u64, xid: i32, req: Request) {
        let opcode = opcode_of(&req);
        self.input(Input::Request {
            conn,
            xid,
            opcode,
            req,
            body: Bytes::new(),
        });
    }

    fn ephemerals(&self) -> usize {
        self.server.tree.ephemeral_count()
    }
}

fn decode(body: &[u8]) -> Got {
    // A ConnectResponse is 4 + 4 + 8 + 4 + 16 + 1 = 37 bytes; a reply header is 16.
    if body.len() == 37 {
        if let Ok(r) = decode_all::<ConnectResponse>(body) {
            return Got::Connected {
                session_id: r.session_id,
            };
        }
    }
    let mut d = Decoder::new(body);
    let h = ReplyHeader::decode(&mut d).unwrap();
    if h.xid == -1 {
        return Got::Event {
            path: WatcherEvent::decode(&mut d).unwrap().path,
        };
    }
    Got::Reply {
        xid: h.xid,
        zxid: h.zxid,
        err: h.err,
    }
}

fn opcode_of(req: &Request) -> i32 {
    match req {
        Request::Create(c) => c.opcode,
        Request::SetData(_) => op::SET_DATA,
        Request::GetData(_) => op::GET_DATA,
        Request::GetChildren(_) => op::GET_CHILDREN,
        Request::Delete(_) => op::DELETE,
        Request::Multi(_) => op::MULTI,
        Request::CloseSession => op::CLOSE_SESSION,
        Request::Ping => op::PING,
        other => panic!("no opcode for {other:?} in this test"),
    }
}

fn create_op(path: &str, flags: i32) -> CreateOp {
    CreateOp {
        opcode: op::CREATE,
        path: path.into(),
        data: Some(Bytes::from_static(b"d")),
        acl: keel::tree::acl::open_acl(),
        flags,
        ttl_ms: None,
    }
}

fn create(path: &str, flags: i32) -> Request {
    Request::Create(create_op(path, flags))
}

fn set_data(path: &str, data: &'static [u8]) -> Request {
    Request::SetData(SetDataRequest {
        path: path.into(),
        data: Some(Bytes::from_static(data)),
        version: -1,
    })
}

fn get_data(path: &str) -> Request {
    Request::GetData(PathWatchRequest {
        path: path.into(),
        watch: false,
    })
}

/// Asserts `got` is one OK reply per xid in `xids`, in that order, with zxids from
/// `zxid0 + 1` up for the writes among them (a read carries the last one), then the
/// close.
fn assert_answered_in_order(got: &[Got], xids: &[i32], writes: &BTreeSet<i32>, zxid0: i64) {
    let mut want = Vec::new();
    let mut zxid = zxid0;
    for &xid in xids {
        if writes.contains(&xid) {
            zxid += 1;
        }
        want.push(Got::Reply { xid, zxid, err: 0 });
    }
    want.push(Got::Closed);
    assert_eq!(got.len(), want.len(), "replies: {got:?}");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "reply {i} of {}", want.len());
    }
}

#[test]
fn connect_close_and_ephemeral_create_in_one_write_leave_no_ephemeral() {
    // ZOOKEEPER-1208: the ConnectRequest, a closeSession and creates of ephemerals (one
    // alone, one in a multi) arrive before the session's createSession is durable.
    let mut h = H::new();
    h.connected(1);
    h.handshake(1, 0, Bytes::from_static(&[0; 16]), 30000);
    h.request(1, 1, Request::CloseSession);
    h.request(1, 2, create("/e", EPHEMERAL));
    h.request(
        1,
        3,
        Request::Multi(vec![MultiOp::Create(create_op("/m", EPHEMERAL))]),
    );
    h.request(1, 4, get_data("/"));
    assert_eq!(h.durable_all(), 2, "createSession and closeSession only");
    let got = h.take(1);
    let Some(Got::Connected { session_id }) = got.first().cloned() else {
        panic!("{got:?}")
    };
    // As ZooKeeper: the ConnectResponse, the close's reply, then the connection closes;
    // the requests after the close are dropped unanswered.
    assert_eq!(
        got,
        vec![
            Got::Connected { session_id },
            Got::Reply {
                xid: 1,
                zxid: 2,
                err: 0
            },
            Got::Closed
        ]
    );
    assert_eq!(h.ephemerals(), 0);
    assert!(h.server.tree.get("/e").is_none() && h.server.tree.get("/m").is_none());
    assert!(h.server.sessions.is_empty());
}

#[test]
fn every_request_before_a_close_is_answered_in_order_and_those_after_dropped() {
    let mut h = H::new();
    let (_, _) = h.session(1, 30000);
    h.request(1, 1, create("/x", 0));
    h.durable_all();
    h.take(1);
    // 500 setData, a read among them, ephemeral creates, the close, then more.
    let mut xids = Vec::new();
    let mut writes = BTreeSet::new();
    for xid in 2..=501 {
        h.request(1, xid, set_data("/x", b"v"));
        xids.push(xid);
        writes.insert(xid);
    }
    h.request(1, 502, get_data("/x"));
    h.request(1, 503, create("/e1", EPHEMERAL));
    h.request(
        1,
        504,
        Request::Multi(vec![MultiOp::Create(create_op("/e2", EPHEMERAL | 2))]),
    );
    h.request(1, 505, Request::CloseSession);
    xids.extend([502, 503, 504, 505]);
    writes.extend([503, 504, 505]);
    h.request(1, 506, get_data("/x"));
    h.request(1, 507, create("/late", EPHEMERAL));
    h.request(1, 508, Request::Ping);
    // Half becomes durable first, as a log sync would.
    let storage = h.server.drain_storage();
    let mid = storage.len() / 2;
    let zxid_of = |o: &StorageOp| match o {
        StorageOp::Append(t) => t.zxid,
        other => panic!("{other:?}"),
    };
    h.input(Input::Durable {
        zxid: zxid_of(&storage[mid]),
    });
    h.input(Input::Durable {
        zxid: zxid_of(storage.last().unwrap()),
    });
    assert_answered_in_order(&h.take(1), &xids, &writes, 2);
    let x = h.server.tree.get("/x").unwrap();
    assert_eq!(x.stat().version, 500);
    assert_eq!(
        h.ephemerals(),
        0,
        "the close removed the ephemerals before it"
    );
    assert!(h.server.sessions.is_empty());
    assert_eq!(h.server.pending_count(), 0);
}

#[test]
fn expiry_removes_an_ephemeral_whose_create_was_on_its_way_to_disk() {
    let mut h = H::new();
    let (sid, _) = h.session(1, 4000);
    // A watcher on another session sees the ephemeral come and go.
    h.session(2, 30000);
    h.request(
        2,
        1,
        Request::GetChildren(PathWatchRequest {
            path: "/".into(),
            watch: true,
        }),
    );
    h.take(2);
    h.request(1, 1, create("/e", EPHEMERAL));
    assert!(h.server.tree.get("/e").is_none(), "not durable yet");
    // The session expires while its create waits for the disk; a create sent after the
    // expiry is dropped.
    h.now += 10_000;
    h.input(Input::Tick);
    h.request(1, 2, create("/late", EPHEMERAL));
    h.request(1, 3, get_data("/"));
    h.durable_all();
    let got = h.take(1);
    assert_eq!(
        got,
        vec![
            Got::Reply {
                xid: 1,
                zxid: 3,
                err: 0
            },
            Got::Closed
        ],
        "the create is answered, then the expired session's connection closes"
    );
    assert_eq!(h.ephemerals(), 0);
    assert!(h.server.tree.get("/late").is_none());
    assert!(h.server.sessions.get(sid).is_none());
    assert_eq!(h.take(2), vec![Got::Event { path: "/".into() }]);
}

#[test]
fn a_session_moved_while_its_old_connection_has_requests_queued_leaks_nothing() {
    let mut h = H::new();
    let (sid, passwd) = h.session(1, 30000);
    // The old connection's create and read wait for the disk when the client
    // reconnects on a new connection.
    h.request(1, 1, create("/a", EPHEMERAL));
    h.request(1, 2, get_data("/"));
    h.connected(2);
    h.handshake(2, sid, passwd.clone(), 30000);
    assert_eq!(h.take(2), vec![Got::Connected { session_id: sid }]);
    // What the old connection still sends is not taken.
    h.request(1, 3, create("/b", EPHEMERAL));
    h.durable_all();
    assert_eq!(
        h.take(1),
        vec![Got::Closed],
        "the old connection was closed"
    );
    let a = h
        .server
        .tree
        .get("/a")
        .expect("a create of the live session applies");
    assert_eq!(a.stat().ephemeral_owner, sid);
    assert!(h.server.tree.get("/b").is_none());
    h.request(2, 1, create("/c", EPHEMERAL));
    h.request(2, 2, Request::CloseSession);
    h.durable_all();
    assert_eq!(
        h.take(2),
        vec![
            Got::Reply {
                xid: 1,
                zxid: 3,
                err: 0
            },
            Got::Reply {
                xid: 2,
                zxid: 4,
                err: 0
            },
            Got::Closed
        ]
    );
    assert_eq!(h.ephemerals(), 0);

    // A close queued on the old connection: the new one is told the session expired.
    let (sid, passwd) = h.session(3, 30000);
    h.request(3, 1, create("/d", EPHEMERAL));
    h.request(3, 2, Request::CloseSession);
    h.connected(4);
    h.handshake(4, sid, passwd, 30000);
    assert_eq!(
        h.take(4),
        vec![Got::Connected { session_id: 0 }, Got::Closed]
    );
    h.durable_all();
    assert_eq!(
        h.take(3),
        vec![
            Got::Reply {
                xid: 1,
                zxid: 6,
                err: 0
            },
            Got::Reply {
                xid: 2,
                zxid: 7,
                err: 0
            },
            Got::Closed
        ]
    );
    assert_eq!(h.ephemerals(), 0);
}

fn entry(txn: &Txn) -> LogEntry {
    LogEntry {
        zxid: txn.zxid,
        data: txn.encode(),
    }
}

fn create_txn(zxid: i64, path: &str, owner: i64) -> Txn {
    Txn {
        zxid,
        time_ms: T0,
        session_id: owner,
        cxid: 1,
        op: TxnOp::Create {
            opcode: op::CREATE,
            path: path.into(),
            data: None,
            acl: keel::tree::acl::open_acl(),
            owner,
            parent_creates: 1,
        },
    }
}

/// createSession of `sid` at `zxid`, then its closeSession.
fn open_close(sid: i64, zxid: i64) -> [Txn; 2] {
    [
        Txn {
            zxid,
            time_ms: T0,
            session_id: sid,
            cxid: 0,
            op: TxnOp::CreateSession {
                timeout_ms: 30000,
                passwd: [1; 16],
            },
        },
        Txn {
            zxid: zxid + 1,
            time_ms: T0,
            session_id: sid,
            cxid: 1,
            op: TxnOp::CloseSession { ephemerals: vec![] },
        },
    ]
}

fn recover(store: &MemStorage) -> (Server, recovery::RecoveryStats) {
    Server::recover(sansio::logged_settings(), store, Path::new("mem"), T0, 1).expect("recover")
}

/// Logs the server's queued txns in `store`, as the runtime does.
fn persist(server: &mut Server, store: &mut MemStorage) {
    let entries: Vec<LogEntry> = server
        .drain_storage()
        .iter()
        .filter_map(|o| match o {
            StorageOp::Append(t) => Some(entry(t)),
            _ => None,
        })
        .collect();
    if !entries.is_empty() {
        store.append(&entries, true).unwrap();
    }
}

#[test]
fn a_logged_create_behind_its_sessions_close_leaves_no_orphan() {
    // The log keel wrote before the fix: createSession, closeSession, then a create of
    // an ephemeral of that session.
    let sid = 0x1234;
    let mut store = MemStorage::new();
    let [open, close] = open_close(sid, 1);
    let txns = [open, close, create_txn(3, "/orphan", sid)];
    store
        .append(&txns.iter().map(entry).collect::<Vec<_>>(), true)
        .unwrap();
    let (mut server, _) = recover(&store);
    assert!(server.tree.get("/orphan").is_none());
    assert_eq!(server.tree.ephemeral_count(), 0);
    persist(&mut server, &mut store);
    let (server, _) = recover(&store);
    assert!(
        server.tree.get("/orphan").is_none(),
        "on the next start too"
    );
}

#[test]
fn an_orphan_in_the_snapshot_is_removed_at_start_and_stays_removed() {
    // A snapshot whose tree holds an ephemeral of session 0x99, which its session
    // table does not know, next to one of a live session.
    let (dead, live) = (0x99, 0x42);
    let mut sessions = SessionTracker::new(2000, 1);
    sessions.add(live, 30000, [2; 16], T0);
    let mut tree = DataTree::new();
    let acl = std::sync::Arc::new(keel::tree::acl::open_acl());
    tree.create("/locks", None, &acl, 0, 1, 1, T0).unwrap();
    tree.create("/locks/dead-1", None, &acl, dead, 1, 2, T0)
        .unwrap();
    tree.create("/locks/dead-2", None, &acl, dead, 2, 3, T0)
        .unwrap();
    tree.create("/locks/live", None, &acl, live, 3, 4, T0)
        .unwrap();
    let zxid = 4;
    let mut store = MemStorage::new();
    snapshot(zxid, &tree, &sessions, &mut store);

    let (mut server, _) = recover(&store);
    assert!(server.tree.get("/locks/dead-1").is_none());
    assert!(server.tree.get("/locks/dead-2").is_none());
    assert!(
        server.tree.get("/locks/live").is_some(),
        "a live session's stays"
    );
    assert_eq!(server.tree.get("/locks").unwrap().num_children(), 1);
    assert_eq!(server.last_zxid, zxid + 1, "the removal is a logged txn");
    persist(&mut server, &mut store);

    let (server, _) = recover(&store);
    assert!(server.tree.get("/locks/dead-1").is_none());
    assert_eq!(server.last_zxid, zxid + 1, "the log already removed them");
}

/// A real keel: a raw connection writes all `frames` in one write and reads until
/// keel closes it; returns the (xid, err) of every reply after the ConnectResponse.
fn one_write(port: u16, frames: &[Vec<u8>]) -> Vec<(i32, i32)> {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    s.write_all(&frames.concat()).unwrap();
    let first = read_frame(&mut s).expect("ConnectResponse");
    assert_ne!(decode_all::<ConnectResponse>(&first).unwrap().session_id, 0);
    let mut replies = Vec::new();
    loop {
        match read_frame(&mut s) {
            Ok(body) => {
                let h = ReplyHeader::decode(&mut Decoder::new(&body)).unwrap();
                replies.push((h.xid, h.err));
            }
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return replies,
            Err(e) => panic!("keel neither answered nor closed: {e}; got {replies:?}"),
        }
    }
}

fn connect_frame() -> Vec<u8> {
    let req = connect_request(0, Bytes::from_static(&[0; 16]), 30000);
    frame(None, &|b| req.encode(b))
}

fn request_frame<R: Record>(xid: i32, op_type: i32, body: &R) -> Vec<u8> {
    frame(Some(&RequestHeader { xid, op_type }), &|b| body.encode(b))
}

fn create_frame(xid: i32, path: &str, flags: i32) -> Vec<u8> {
    let req = CreateRequest {
        path: path.into(),
        data: None,
        acl: keel::tree::acl::open_acl(),
        flags,
    };
    request_frame(xid, op::CREATE, &req)
}

fn close_frame(xid: i32) -> Vec<u8> {
    frame(
        Some(&RequestHeader {
            xid,
            op_type: op::CLOSE_SESSION,
        }),
        &|_| {},
    )
}

#[test]
fn real_tcp_pipelined_close_answers_in_order_and_leaves_no_ephemeral() {
    let mut keel = Keel::new("session-close", KeelOptions::default());
    keel.start();
    let mut ctrl = Client::connect(keel.port, 30000).unwrap();
    ctrl.create("/q", None, CreateMode::Persistent).unwrap();

    // ZOOKEEPER-1208: ConnectRequest, closeSession, create of an ephemeral.
    let got = one_write(
        keel.port,
        &[
            connect_frame(),
            close_frame(1),
            create_frame(2, "/q/leak", 1),
        ],
    );
    assert_eq!(got, vec![(1, 0)]);

    // 500 writes (some of them ephemeral creates), the close, then more requests.
    let mut frames = vec![connect_frame()];
    for xid in 1..=500 {
        frames.push(if xid % 50 == 0 {
            create_frame(xid, &format!("/q/e{xid}"), 1)
        } else {
            let req = SetDataRequest {
                path: "/q".into(),
                data: Some(Bytes::from_static(b"v")),
                version: -1,
            };
            request_frame(xid, op::SET_DATA, &req)
        });
    }
    frames.push(close_frame(501));
    let read = PathWatchRequest {
        path: "/q".into(),
        watch: false,
    };
    frames.push(request_frame(502, op::GET_DATA, &read));
    frames.push(create_frame(503, "/q/late", 1));
    let got = one_write(keel.port, &frames);
    let want: Vec<(i32, i32)> = (1..=501).map(|xid| (xid, 0)).collect();
    assert_eq!(
        got, want,
        "every request before the close answered, in order"
    );

    assert_eq!(
        ctrl.get_children("/q", false).unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(ctrl.get_data("/q", false).unwrap().1.version, 490);
}

/// Writes a snapshot of `tree` and `sessions` at `zxid`.
fn snapshot(zxid: i64, tree: &DataTree, sessions: &SessionTracker, store: &mut dyn Storage) {
    let header = recovery::encode_snapshot_header(zxid, sessions);
    store.put_snapshot_chunk(zxid, 0, &header).unwrap();
    let (mut cursor, mut index) = (None, 1);
    loop {
        let mut chunk = BytesMut::new();
        cursor = keel::tree::snapshot::encode_nodes(tree, cursor.as_deref(), 1 << 20, &mut chunk);
        store.put_snapshot_chunk(zxid, index, &chunk).unwrap();
        index += 1;
        if cursor.is_none() {
            break;
        }
    }
    store.finish_snapshot(zxid, index).unwrap();
}

#[test]
fn real_process_removes_a_stored_orphan_at_start_and_logs_it() {
    let mut keel = Keel::new("orphan", KeelOptions::default());
    keel.start();
    let mut c = Client::connect(keel.port, 30000).unwrap();
    c.create("/locks", None, CreateMode::Persistent).unwrap();
    c.close().unwrap();
    keel.terminate();
    // A store as keel before issue 14 could leave it: session 0x5eed opened and
    // closed, a snapshot holding an ephemeral of it, and a logged create of another
    // after its close.
    {
        let mut store =
            keel::storage::rocks::RocksStorage::open(&keel.data_dir, &keel.log_dir, true).unwrap();
        let last = store.last_zxid().unwrap().unwrap();
        let sid = 0x5eed;
        store
            .append(
                &open_close(sid, last + 1)
                    .iter()
                    .map(entry)
                    .collect::<Vec<_>>(),
                true,
            )
            .unwrap();
        let (mut server, _) = Server::recover(
            sansio::logged_settings(),
            &store,
            Path::new("keel-db"),
            T0,
            1,
        )
        .unwrap();
        let acl = std::sync::Arc::new(keel::tree::acl::open_acl());
        server
            .tree
            .create("/locks/held", None, &acl, sid, 1, last + 2, T0)
            .unwrap();
        snapshot(server.last_zxid, &server.tree, &server.sessions, &mut store);
        store
            .append(&[entry(&create_txn(last + 3, "/locks/late", sid))], true)
            .unwrap();
        store.close().unwrap();
    }
    keel.start();
    let mut c = Client::connect(keel.port, 30000).unwrap();
    assert_eq!(
        c.get_children("/locks", false).unwrap(),
        Vec::<String>::new()
    );
    let log = keel.stderr();
    let line = log
        .lines()
        .find(|l| l.contains("removing ephemerals whose session no longer exists"))
        .unwrap_or_else(|| panic!("no removal line in:\n{log}"));
    assert!(
        line.contains("/locks/held") && line.contains("0x5eed"),
        "{line}"
    );
    drop(c);
    keel.terminate();
    keel.start();
    let mut c = Client::connect(keel.port, 30000).unwrap();
    assert_eq!(
        c.get_children("/locks", false).unwrap(),
        Vec::<String>::new(),
        "on the next start too"
    );
    assert!(
        !keel.stderr().contains("removing ephemerals"),
        "the removal was logged"
    );
}

#[test]
fn a_close_on_its_way_to_disk_frees_its_ephemerals_paths_for_later_requests() {
    // ZooKeeper's prep records the closeSession's deletions as outstanding changes, so
    // a request prepped after it sees the ephemerals gone (and their parent with fewer
    // children), whether or not the close has applied yet.
    let mut h = H::new();
    h.session(1, 30000);
    h.session(2, 30000);
    h.request(1, 1, create("/p", 0));
    h.request(1, 2, create("/p/e", EPHEMERAL));
    h.request(1, 3, create("/e", EPHEMERAL));
    h.durable_all();
    h.take(1);
    h.request(1, 4, Request::CloseSession);
    h.request(2, 1, create("/e", 0));
    h.request(
        2,
        2,
        Request::Delete(DeleteRequest {
            path: "/p/e".into(),
            version: -1,
        }),
    );
    h.request(
        2,
        3,
        Request::Delete(DeleteRequest {
            path: "/p".into(),
            version: -1,
        }),
    );
    h.durable_all();
    assert_eq!(
        h.take(2),
        vec![
            Got::Reply {
                xid: 1,
                zxid: 7,
                err: 0
            },
            Got::Reply {
                xid: 2,
                zxid: 8,
                err: -101
            },
            Got::Reply {
                xid: 3,
                zxid: 9,
                err: 0
            },
        ]
    );
    let e = h.server.tree.get("/e").expect("created by session 2");
    assert_eq!(e.stat().ephemeral_owner, 0);
    assert!(h.server.tree.get("/p").is_none());
    assert_eq!(h.ephemerals(), 0);
}

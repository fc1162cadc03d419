//! The sans-I/O server driven directly: sessions, writes, reads, watches and their
//! ordering, expiry and container reaping, with time as an input.

use bytes::{Bytes, BytesMut};
use jute::*;
use keel::proto::opcode as op;
use keel::proto::request::CreateOp;
use keel::proto::Request;
use keel::server::{Input, Server, StorageOp};
use proptest::prelude::*;

#[path = "support/sansio.rs"]
mod sansio;
use sansio::{connected, decode, logged_settings, new_session, settings, Got};

const T0: i64 = 1_700_000_000_000;

struct Harness {
    server: Server,
    now: i64,
}

impl Harness {
    fn new() -> Harness {
        Harness {
            server: Server::new(settings(), 0, T0, 7),
            now: T0,
        }
    }

    fn out(&mut self, conn: u64) -> Vec<Got> {
        let mut got = Vec::new();
        for (c, o) in self.server.drain_outbox() {
            assert_eq!(c, conn, "output for an unexpected connection");
            got.push(decode(o));
        }
        got
    }

    fn all_out(&mut self) -> Vec<(u64, Got)> {
        self.server
            .drain_outbox()
            .into_iter()
            .map(|(c, o)| (c, decode(o)))
            .collect()
    }

    /// Opens a connection and a new session on it.
    fn connect(&mut self, conn: u64, timeout_ms: i32) -> (i64, Bytes) {
        self.server.handle(self.now, connected(conn));
        self.server.handle(self.now, new_session(conn, timeout_ms));
        match self.out(conn).as_slice() {
            [Got::Connected {
                session_id, passwd, ..
            }] => (*session_id, passwd.clone()),
            other => panic!("unexpected handshake output {other:?}"),
        }
    }

    fn request(&mut self, conn: u64, xid: i32, opcode: i32, req: Request) {
        self.server.handle(
            self.now,
            Input::Request {
                conn,
                xid,
                opcode,
                req,
                body: Bytes::new(),
            },
        );
    }

    /// A create as the Java client sends it with a Stat: createContainer for the
    /// CONTAINER mode (the opcode makes the container), create2 otherwise.
    fn create(&mut self, conn: u64, xid: i32, path: &str, flags: i32) -> Vec<Got> {
        let opcode = if flags == 4 {
            op::CREATE_CONTAINER
        } else {
            op::CREATE2
        };
        let req = Request::Create(CreateOp {
            opcode,
            path: path.into(),
            data: Some(Bytes::from_static(b"d")),
            acl: keel::tree::acl::open_acl(),
            flags,
            ttl_ms: None,
        });
        self.request(conn, xid, opcode, req);
        self.out(conn)
    }
}

fn stat_of(body: &Bytes) -> Stat {
    decode_all::<StatResponse>(body).unwrap().stat
}

#[test]
fn zxids_and_stats_follow_zookeeper() {
    let mut h = Harness::new();
    let (sid, _) = h.connect(1, 30000);
    assert_ne!(sid, 0);
    assert_eq!(h.server.last_zxid, 1, "createSession is a txn");
    let got = h.create(1, 1, "/a", 0);
    let Got::Reply {
        zxid, err: 0, body, ..
    } = &got[0]
    else {
        panic!("{got:?}")
    };
    assert_eq!(*zxid, 2);
    let r = decode_all::<Create2Response>(body).unwrap();
    assert_eq!(
        (r.path.as_str(), r.stat.czxid, r.stat.version),
        ("/a", 2, 0)
    );
    // A failed write still takes a zxid.
    let got = h.create(1, 2, "/a", 0);
    assert!(
        matches!(
            got[0],
            Got::Reply {
                zxid: 3,
                err: -110,
                ..
            }
        ),
        "{got:?}"
    );
    // Sequential suffix counts creates only; cversion counts creates and deletes.
    let got = h.create(1, 3, "/a/s-", 2);
    let Got::Reply { body, .. } = &got[0] else {
        panic!()
    };
    assert_eq!(
        decode_all::<Create2Response>(body).unwrap().path,
        "/a/s-0000000000"
    );
    h.request(
        1,
        4,
        op::DELETE,
        Request::Delete(DeleteRequest {
            path: "/a/s-0000000000".into(),
            version: -1,
        }),
    );
    h.out(1);
    let got = h.create(1, 5, "/a/s-", 2);
    let Got::Reply { body, .. } = &got[0] else {
        panic!()
    };
    assert_eq!(
        decode_all::<Create2Response>(body).unwrap().path,
        "/a/s-0000000001"
    );
    h.request(
        1,
        6,
        op::EXISTS,
        Request::Exists(PathWatchRequest {
            path: "/a".into(),
            watch: false,
        }),
    );
    let got = h.out(1);
    let Got::Reply { body, zxid, .. } = &got[0] else {
        panic!()
    };
    let st = stat_of(body);
    assert_eq!(
        (st.cversion, st.num_children, st.pzxid, *zxid),
        (3, 1, 6, 6)
    );
}

#[test]
fn watch_event_precedes_the_reply_that_reflects_it() {
    let mut h = Harness::new();
    h.connect(1, 30000);
    h.create(1, 1, "/w", 0);
    h.request(
        1,
        2,
        op::GET_DATA,
        Request::GetData(PathWatchRequest {
            path: "/w".into(),
            watch: true,
        }),
    );
    h.out(1);
    h.request(
        1,
        3,
        op::SET_DATA,
        Request::SetData(SetDataRequest {
            path: "/w".into(),
            data: Some(Bytes::from_static(b"x")),
            version: 0,
        }),
    );
    let got = h.out(1);
    assert_eq!(
        got[0],
        Got::Event {
            event_type: 3,
            path: "/w".into()
        }
    );
    assert!(matches!(got[1], Got::Reply { xid: 3, err: 0, .. }));
    // One-shot: a second change fires nothing.
    h.request(
        1,
        4,
        op::SET_DATA,
        Request::SetData(SetDataRequest {
            path: "/w".into(),
            data: None,
            version: -1,
        }),
    );
    assert_eq!(h.out(1).len(), 1);
    // Bad version.
    h.request(
        1,
        5,
        op::SET_DATA,
        Request::SetData(SetDataRequest {
            path: "/w".into(),
            data: None,
            version: 0,
        }),
    );
    assert!(matches!(h.out(1)[0], Got::Reply { err: -103, .. }));
}

#[test]
fn session_expiry_removes_ephemerals_and_fires_watches() {
    let mut h = Harness::new();
    let (owner, _) = h.connect(1, 4000);
    h.connect(2, 30000);
    h.create(1, 1, "/e", 1);
    h.request(
        2,
        1,
        op::EXISTS,
        Request::Exists(PathWatchRequest {
            path: "/e".into(),
            watch: true,
        }),
    );
    h.out(2);
    // Connection 1 goes away; its session lives until the timeout.
    h.server.handle(h.now, Input::Disconnected { conn: 1 });
    h.now += 3000;
    h.server.handle(h.now, Input::Tick);
    assert!(h.server.tree.get("/e").is_some());
    h.now += 4000;
    h.server.handle(h.now, Input::Tick);
    assert!(
        h.server.tree.get("/e").is_none(),
        "ephemeral removed on expiry"
    );
    assert!(h.server.sessions.get(owner).is_none());
    let got = h.all_out();
    assert!(
        got.contains(&(
            2,
            Got::Event {
                event_type: 2,
                path: "/e".into()
            }
        )),
        "{got:?}"
    );
}

#[test]
fn reconnect_resumes_and_wrong_password_is_expired() {
    let mut h = Harness::new();
    let (sid, passwd) = h.connect(1, 30000);
    h.server.handle(h.now, Input::Disconnected { conn: 1 });
    h.server.handle(
        h.now,
        Input::Connected {
            conn: 2,
            addr: "127.0.0.1:5001".parse().unwrap(),
        },
    );
    let req = |p: Bytes| ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 1,
        time_out_ms: 30000,
        session_id: sid,
        passwd: p,
        read_only: false,
    };
    h.server.handle(
        h.now,
        Input::Handshake {
            conn: 2,
            req: req(passwd.clone()),
        },
    );
    assert!(
        matches!(h.out(2).as_slice(), [Got::Connected { session_id, .. }] if *session_id == sid)
    );
    h.server.handle(
        h.now,
        Input::Connected {
            conn: 3,
            addr: "127.0.0.1:5002".parse().unwrap(),
        },
    );
    h.server.handle(
        h.now,
        Input::Handshake {
            conn: 3,
            req: req(Bytes::from_static(&[9; 16])),
        },
    );
    assert_eq!(
        h.out(3),
        vec![
            Got::Connected {
                session_id: 0,
                timeout_ms: 0,
                passwd: Bytes::from_static(&[0; 16]),
                read_only: false,
            },
            Got::Close
        ]
    );
}

#[test]
fn acl_and_digest_auth() {
    let mut h = Harness::new();
    h.connect(1, 30000);
    h.request(
        1,
        -4,
        op::AUTH,
        Request::Auth(AuthPacket {
            auth_type: 0,
            scheme: "digest".into(),
            auth: Bytes::from_static(b"u:p"),
        }),
    );
    assert!(matches!(
        h.out(1)[0],
        Got::Reply {
            xid: -4,
            err: 0,
            ..
        }
    ));
    let auth_acl = vec![Acl {
        perms: 31,
        id: Id {
            scheme: "auth".into(),
            id: String::new(),
        },
    }];
    let req = Request::Create(CreateOp {
        opcode: op::CREATE,
        path: "/s".into(),
        data: None,
        acl: auth_acl,
        flags: 0,
        ttl_ms: None,
    });
    h.request(1, 1, op::CREATE, req);
    assert!(matches!(h.out(1)[0], Got::Reply { err: 0, .. }));
    h.connect(2, 30000);
    h.request(
        2,
        1,
        op::GET_DATA,
        Request::GetData(PathWatchRequest {
            path: "/s".into(),
            watch: false,
        }),
    );
    assert!(
        matches!(h.out(2)[0], Got::Reply { err: -102, .. }),
        "other session has no auth"
    );
    h.request(
        2,
        2,
        op::GET_ACL,
        Request::GetAcl(PathRequest { path: "/s".into() }),
    );
    assert!(matches!(h.out(2)[0], Got::Reply { err: -102, .. }));
    h.request(
        2,
        -4,
        op::AUTH,
        Request::Auth(AuthPacket {
            auth_type: 0,
            scheme: "digest".into(),
            auth: Bytes::from_static(b"super:test"),
        }),
    );
    h.out(2);
    h.request(
        2,
        3,
        op::GET_DATA,
        Request::GetData(PathWatchRequest {
            path: "/s".into(),
            watch: false,
        }),
    );
    assert!(
        matches!(h.out(2)[0], Got::Reply { err: 0, .. }),
        "super passes every check"
    );
}

#[test]
fn multi_is_atomic_with_zookeeper_error_codes() {
    use keel::proto::request::MultiOp;
    let mut h = Harness::new();
    h.connect(1, 30000);
    let mk = |p: &str| {
        MultiOp::Create(CreateOp {
            opcode: op::CREATE,
            path: p.into(),
            data: None,
            acl: keel::tree::acl::open_acl(),
            flags: 0,
            ttl_ms: None,
        })
    };
    h.request(
        1,
        1,
        op::MULTI,
        Request::Multi(vec![mk("/m"), mk("/m/x"), mk("/nope/y"), mk("/m/z")]),
    );
    let got = h.out(1);
    let Got::Reply {
        err: 0,
        body,
        zxid: 2,
        ..
    } = &got[0]
    else {
        panic!("{got:?}")
    };
    let mut d = Decoder::new(body);
    let mut codes = Vec::new();
    loop {
        let mh = MultiHeader::decode(&mut d).unwrap();
        if mh.done {
            break;
        }
        codes.push((mh.op_type, ErrorResponse::decode(&mut d).unwrap().err));
    }
    assert_eq!(codes, vec![(-1, 0), (-1, 0), (-1, -101), (-1, -2)]);
    assert!(h.server.tree.get("/m").is_none(), "nothing applied");
    h.request(1, 2, op::MULTI, Request::Multi(vec![mk("/m"), mk("/m/x")]));
    assert!(matches!(
        h.out(1)[0],
        Got::Reply {
            err: 0,
            zxid: 3,
            ..
        }
    ));
    assert_eq!(
        h.server.tree.get("/m/x").unwrap().czxid(),
        3,
        "one zxid for the whole multi"
    );
}

#[test]
fn containers_and_ttl_nodes_are_reaped() {
    let mut h = Harness::new();
    h.connect(1, 30000);
    h.create(1, 1, "/c", 4);
    h.create(1, 2, "/c/x", 0);
    h.create(1, 3, "/never", 4);
    let req = Request::Create(CreateOp {
        opcode: op::CREATE_TTL,
        path: "/t".into(),
        data: None,
        acl: keel::tree::acl::open_acl(),
        flags: 5,
        ttl_ms: Some(500),
    });
    h.request(1, 4, op::CREATE_TTL, req);
    h.out(1);
    h.request(
        1,
        5,
        op::DELETE,
        Request::Delete(DeleteRequest {
            path: "/c/x".into(),
            version: -1,
        }),
    );
    h.out(1);
    h.now += 1500;
    h.server.handle(h.now, Input::Tick);
    assert!(
        h.server.tree.get("/c").is_none(),
        "used empty container reaped"
    );
    assert!(h.server.tree.get("/t").is_none(), "expired TTL node reaped");
    assert!(
        h.server.tree.get("/never").is_some(),
        "never-used container kept"
    );
}

proptest! {
    #[test]
    fn malformed_request_bodies_never_panic(opcode in -12i32..110, body in proptest::collection::vec(any::<u8>(), 0..128)) {
        let _ = Request::decode(opcode, &body);
    }
}

#[test]
fn request_body_round_trip() {
    let mut buf = BytesMut::new();
    CreateRequest {
        path: "/x".into(),
        data: Some(Bytes::from_static(b"v")),
        acl: keel::tree::acl::open_acl(),
        flags: 3,
    }
    .encode(&mut buf);
    match Request::decode(op::CREATE, &buf).unwrap() {
        Request::Create(c) => {
            assert_eq!((c.path.as_str(), c.flags, c.opcode), ("/x", 3, op::CREATE))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn durable_writes_wait_for_storage_and_reads_wait_behind_writes() {
    let mut s = settings();
    s.durable = true;
    let mut h = Harness {
        server: Server::new(s, 0, T0, 7),
        now: T0,
    };
    // The handshake waits for createSession to be durable.
    h.server.handle(
        h.now,
        Input::Connected {
            conn: 1,
            addr: "127.0.0.1:5000".parse().unwrap(),
        },
    );
    h.server.handle(
        h.now,
        Input::Handshake {
            conn: 1,
            req: ConnectRequest {
                protocol_version: 0,
                last_zxid_seen: 0,
                time_out_ms: 30000,
                session_id: 0,
                passwd: Bytes::from_static(&[0; 16]),
                read_only: false,
            },
        },
    );
    assert!(
        h.out(1).is_empty(),
        "no ConnectResponse before the session is durable"
    );
    let ops = h.server.drain_storage();
    assert!(matches!(ops.as_slice(), [StorageOp::Append(t)] if t.zxid == 1));
    h.server.handle(h.now, Input::Durable { zxid: 1 });
    assert!(matches!(h.out(1).as_slice(), [Got::Connected { .. }]));
    // A create, then a read of the same node, then a second create: the read waits.
    let create = |p: &str| {
        Request::Create(CreateOp {
            opcode: op::CREATE,
            path: p.into(),
            data: None,
            acl: keel::tree::acl::open_acl(),
            flags: 0,
            ttl_ms: None,
        })
    };
    h.request(1, 1, op::CREATE, create("/d"));
    h.request(
        1,
        2,
        op::EXISTS,
        Request::Exists(PathWatchRequest {
            path: "/d".into(),
            watch: false,
        }),
    );
    h.request(1, 3, op::CREATE, create("/d/x"));
    assert!(h.out(1).is_empty(), "nothing answered before it is durable");
    assert!(
        h.server.tree.get("/d").is_none(),
        "nothing applied before it is durable"
    );
    assert_eq!(
        h.server.drain_storage().len(),
        2,
        "/d/x was prepped against the pending /d"
    );
    h.server.handle(h.now, Input::Durable { zxid: 2 });
    let got = h.out(1);
    assert!(
        matches!(
            got.as_slice(),
            [
                Got::Reply {
                    xid: 1,
                    zxid: 2,
                    ..
                },
                Got::Reply { xid: 2, err: 0, .. }
            ]
        ),
        "{got:?}"
    );
    h.server.handle(h.now, Input::Durable { zxid: 3 });
    assert!(matches!(
        h.out(1).as_slice(),
        [Got::Reply {
            xid: 3,
            zxid: 3,
            err: 0,
            ..
        }]
    ));
    assert!(h.server.tree.get("/d/x").is_some());
}

#[test]
fn failed_multi_leaves_no_outstanding_changes() {
    use keel::proto::request::MultiOp;
    let mut s = settings();
    s.durable = true;
    let mut h = Harness {
        server: Server::new(s, 0, T0, 7),
        now: T0,
    };
    h.server.handle(
        h.now,
        Input::Connected {
            conn: 1,
            addr: "127.0.0.1:5000".parse().unwrap(),
        },
    );
    h.server.handle(
        h.now,
        Input::Handshake {
            conn: 1,
            req: ConnectRequest {
                protocol_version: 0,
                last_zxid_seen: 0,
                time_out_ms: 30000,
                session_id: 0,
                passwd: Bytes::from_static(&[0; 16]),
                read_only: false,
            },
        },
    );
    h.server.handle(h.now, Input::Durable { zxid: 1 });
    h.out(1);
    let mk = |p: &str| {
        MultiOp::Create(CreateOp {
            opcode: op::CREATE,
            path: p.into(),
            data: None,
            acl: keel::tree::acl::open_acl(),
            flags: 0,
            ttl_ms: None,
        })
    };
    h.request(
        1,
        1,
        op::MULTI,
        Request::Multi(vec![mk("/m"), mk("/missing/x")]),
    );
    // The failed multi's "/m" must not be visible to the next prep.
    h.request(
        1,
        2,
        op::CREATE,
        Request::Create(CreateOp {
            opcode: op::CREATE,
            path: "/m".into(),
            data: None,
            acl: keel::tree::acl::open_acl(),
            flags: 0,
            ttl_ms: None,
        }),
    );
    h.server.handle(h.now, Input::Durable { zxid: 3 });
    let got = h.out(1);
    assert!(
        matches!(got[1], Got::Reply { xid: 2, err: 0, .. }),
        "{got:?}"
    );
}

/// Opens connection `conn` whose TLS client certificate gave it `ids`, then a session.
fn connect_with_certificate(h: &mut Harness, conn: u64, ids: Vec<Id>) {
    h.server.handle(
        h.now,
        Input::Connected {
            conn,
            addr: "127.0.0.1:5001".parse().unwrap(),
        },
    );
    h.server.handle(h.now, Input::Authenticated { conn, ids });
    h.server.handle(
        h.now,
        Input::Handshake {
            conn,
            req: ConnectRequest {
                protocol_version: 0,
                last_zxid_seen: 0,
                time_out_ms: 30000,
                session_id: 0,
                passwd: Bytes::from_static(&[0; 16]),
                read_only: false,
            },
        },
    );
    assert!(matches!(h.out(conn).as_slice(), [Got::Connected { .. }]));
}

fn x509(dn: &str) -> Id {
    Id {
        scheme: "x509".into(),
        id: dn.into(),
    }
}

fn get_data_err(h: &mut Harness, conn: u64, xid: i32, path: &str) -> i32 {
    h.request(
        conn,
        xid,
        op::GET_DATA,
        Request::GetData(PathWatchRequest {
            path: path.into(),
            watch: false,
        }),
    );
    match h.out(conn).as_slice() {
        [Got::Reply { err, .. }] => *err,
        other => panic!("unexpected getData output {other:?}"),
    }
}

fn x509_auth(h: &mut Harness, conn: u64) -> Vec<Got> {
    h.request(
        conn,
        -4,
        op::AUTH,
        Request::Auth(AuthPacket {
            auth_type: 0,
            scheme: "x509".into(),
            auth: Bytes::new(),
        }),
    );
    h.out(conn)
}

/// ZooKeeper's X509AuthenticationProvider: a verified client certificate makes the
/// connection `x509:<subject DN>` from connect time; an `x509` ACL matches that DN
/// exactly; the configured x509 super user passes every check.
#[test]
fn x509_acl_matches_the_certificate_subject() {
    let mut h = Harness::new();
    let alice = "CN=alice,O=keel";
    connect_with_certificate(&mut h, 1, vec![x509(alice)]);
    let acl = vec![Acl {
        perms: 31,
        id: x509(alice),
    }];
    let req = Request::Create(CreateOp {
        opcode: op::CREATE,
        path: "/x".into(),
        data: Some(Bytes::from_static(b"secret")),
        acl: acl.clone(),
        flags: 0,
        ttl_ms: None,
    });
    h.request(1, 1, op::CREATE, req);
    assert!(matches!(h.out(1).as_slice(), [Got::Reply { err: 0, .. }]));
    assert_eq!(
        get_data_err(&mut h, 1, 2, "/x"),
        0,
        "the certificate's DN reads"
    );
    h.request(
        1,
        3,
        op::GET_ACL,
        Request::GetAcl(PathRequest { path: "/x".into() }),
    );
    let got = h.out(1);
    let [Got::Reply { err: 0, body, .. }] = got.as_slice() else {
        panic!("getAcl failed");
    };
    assert_eq!(decode_all::<GetAclResponse>(body).unwrap().acl, acl);

    // Another certificate, a prefix of the DN, and no certificate: NOAUTH.
    connect_with_certificate(&mut h, 2, vec![x509("CN=mallory,O=keel")]);
    assert_eq!(get_data_err(&mut h, 2, 1, "/x"), -102);
    connect_with_certificate(&mut h, 3, vec![x509("CN=alice")]);
    assert_eq!(get_data_err(&mut h, 3, 1, "/x"), -102);
    h.connect(4, 30000);
    assert_eq!(get_data_err(&mut h, 4, 1, "/x"), -102);

    // addauth x509 succeeds only with a certificate; without one it fails and closes.
    assert!(matches!(
        x509_auth(&mut h, 1).as_slice(),
        [Got::Reply {
            xid: -4,
            err: 0,
            ..
        }]
    ));
    assert!(matches!(
        x509_auth(&mut h, 4).as_slice(),
        [Got::Reply { err: -115, .. }, Got::Close]
    ));

    // The x509 super user (X509AuthenticationProvider.superUser) passes every check.
    let root = "CN=root,O=keel";
    connect_with_certificate(
        &mut h,
        5,
        vec![
            Id {
                scheme: "super".into(),
                id: root.into(),
            },
            x509(root),
        ],
    );
    assert_eq!(get_data_err(&mut h, 5, 1, "/x"), 0);
}

// ---- Issue 14: watch ACLs, multiRead, create modes, sequential names, watch args.

/// A request as a client sends it: the body a record encodes, decoded by keel's
/// decoder (so these tests check the decoding too).
fn send_raw(h: &mut Harness, conn: u64, xid: i32, opcode: i32, body: &[u8]) {
    let req = Request::decode(opcode, body).expect("decodable request");
    h.request(conn, xid, opcode, req);
}

fn send(h: &mut Harness, conn: u64, xid: i32, opcode: i32, record: &impl Record) {
    let mut b = BytesMut::new();
    record.encode(&mut b);
    send_raw(h, conn, xid, opcode, &b);
}

fn create_req(path: &str, acl: Vec<Acl>, flags: i32) -> CreateRequest {
    CreateRequest {
        path: path.into(),
        data: None,
        acl,
        flags,
    }
}

/// Writes one op's record into a multi body.
type OpWriter<'a> = &'a dyn Fn(&mut BytesMut);

/// A multi or multiRead body: each op with its header, then the end header.
fn multi_body(ops: &[(i32, OpWriter<'_>)]) -> BytesMut {
    let mut b = BytesMut::new();
    for (op_type, body) in ops {
        MultiHeader {
            op_type: *op_type,
            done: false,
            err: -1,
        }
        .encode(&mut b);
        body(&mut b);
    }
    MultiHeader {
        op_type: -1,
        done: true,
        err: -1,
    }
    .encode(&mut b);
    b
}

fn errs(got: &[Got]) -> Vec<i32> {
    got.iter()
        .filter_map(|g| match g {
            Got::Reply { err, .. } => Some(*err),
            _ => None,
        })
        .collect()
}

fn events(got: &[(u64, Got)], conn: u64) -> Vec<(i32, String)> {
    got.iter()
        .filter_map(|(c, g)| match g {
            Got::Event { event_type, path } if *c == conn => Some((*event_type, path.clone())),
            _ => None,
        })
        .collect()
}

/// The result headers (type, err) of a multi reply body.
fn multi_types(body: &[u8]) -> Vec<(i32, i32)> {
    let mut d = Decoder::new(body);
    let mut out = Vec::new();
    loop {
        let h = MultiHeader::decode(&mut d).unwrap();
        if h.done {
            return out;
        }
        out.push((h.op_type, h.err));
        match h.op_type {
            1 => {
                String::decode(&mut d).unwrap();
            }
            15 => {
                Create2Response::decode(&mut d).unwrap();
            }
            5 => {
                Stat::decode(&mut d).unwrap();
            }
            4 => {
                GetDataResponse::decode(&mut d).unwrap();
            }
            8 => {
                GetChildrenResponse::decode(&mut d).unwrap();
            }
            -1 => {
                ErrorResponse::decode(&mut d).unwrap();
            }
            _ => {}
        }
    }
}

fn owner_acl() -> Vec<Acl> {
    vec![Acl {
        perms: 31,
        id: Id {
            scheme: "digest".into(),
            id: keel::tree::acl::digest_id("owner:pw"),
        },
    }]
}

/// CVE-2024-23944: every watch event is checked for READ on the changed znode (the
/// created, deleted or changed one; the parent for NodeChildrenChanged) against the
/// watcher connection's identities, as ZooKeeper's ServerCnxn.process does.
#[test]
fn watch_events_need_read_on_the_changed_znode() {
    let mut h = Harness::new();
    h.connect(1, 30000);
    let open = keel::tree::acl::open_acl;
    send(
        &mut h,
        1,
        -4,
        op::AUTH,
        &AuthPacket {
            auth_type: 0,
            scheme: "digest".into(),
            auth: Bytes::from_static(b"owner:pw"),
        },
    );
    send(&mut h, 1, 1, op::CREATE, &create_req("/p", open(), 0));
    send(&mut h, 1, 2, op::CREATE, &create_req("/p/n", open(), 0));
    send(&mut h, 1, 3, op::CREATE, &create_req("/p/open", open(), 0));
    assert_eq!(errs(&h.out(1)), [0, 0, 0, 0]);
    // The watcher has only its ip identity.
    h.connect(2, 30000);
    let watch = |path: &str| PathWatchRequest {
        path: path.into(),
        watch: true,
    };
    send(&mut h, 2, 1, op::GET_DATA, &watch("/p/n"));
    send(&mut h, 2, 2, op::GET_DATA, &watch("/p/open"));
    send(&mut h, 2, 3, op::GET_CHILDREN, &watch("/p"));
    send(
        &mut h,
        2,
        4,
        op::ADD_WATCH,
        &AddWatchRequest {
            path: "/p".into(),
            mode: 1,
        },
    );
    assert_eq!(errs(&h.out(2)), [0, 0, 0, 0]);
    // /p/n becomes unreadable for the watcher; setACL fires nothing.
    send(
        &mut h,
        1,
        4,
        op::SET_ACL,
        &SetAclRequest {
            path: "/p/n".into(),
            acl: owner_acl(),
            version: -1,
        },
    );
    send(
        &mut h,
        1,
        5,
        op::SET_DATA,
        &SetDataRequest {
            path: "/p/n".into(),
            data: Some(Bytes::from_static(b"x")),
            version: -1,
        },
    );
    send(
        &mut h,
        1,
        6,
        op::SET_DATA,
        &SetDataRequest {
            path: "/p/open".into(),
            data: Some(Bytes::from_static(b"x")),
            version: -1,
        },
    );
    // A child nobody else may read: NodeCreated is filtered, but the parent's
    // NodeChildrenChanged is checked against the parent (world) and delivered.
    send(
        &mut h,
        1,
        7,
        op::CREATE,
        &create_req("/p/hidden", owner_acl(), 0),
    );
    send(
        &mut h,
        1,
        8,
        op::DELETE,
        &DeleteRequest {
            path: "/p/n".into(),
            version: -1,
        },
    );
    let got = h.all_out();
    assert_eq!(
        events(&got, 2),
        [(3, "/p/open".to_string()), (4, "/p".to_string())],
        "the recursive and data watches say nothing of /p/n or /p/hidden; {got:?}"
    );
    // The filtered one-shot data watch on /p/n was consumed, as in ZooKeeper.
    assert!(!h
        .server
        .watches
        .contains(keel::watch::Table::Data, "/p/n", 2, keel::watch::STANDARD));
    // An ephemeral of a closing session: its NodeDeleted is checked against its ACL.
    h.connect(3, 30000);
    send(
        &mut h,
        3,
        -4,
        op::AUTH,
        &AuthPacket {
            auth_type: 0,
            scheme: "digest".into(),
            auth: Bytes::from_static(b"owner:pw"),
        },
    );
    send(
        &mut h,
        3,
        1,
        op::CREATE,
        &create_req("/p/e1", owner_acl(), 1),
    );
    send(&mut h, 3, 2, op::CREATE, &create_req("/p/e2", open(), 1));
    h.all_out();
    h.request(3, 3, op::CLOSE_SESSION, Request::CloseSession);
    let got = h.all_out();
    assert_eq!(
        events(&got, 2),
        [(2, "/p/e2".to_string())],
        "only the readable ephemeral's deletion reaches the recursive watcher; {got:?}"
    );
}

/// The Java client's multiRead sub-ops carry the watch byte (GetChildrenRequest,
/// GetDataRequest); every op is answered, errors inside as error results.
#[test]
fn multi_read_reads_java_client_sub_ops() {
    let mut h = Harness::new();
    h.connect(1, 30000);
    h.create(1, 1, "/a", 0);
    let read = |p: &'static str| {
        move |b: &mut BytesMut| {
            PathWatchRequest {
                path: p.into(),
                watch: false,
            }
            .encode(b)
        }
    };
    let (r1, r2, r3, r4) = (read("/"), read("/a"), read("/missing"), read("/a"));
    let body = multi_body(&[(8, &r1), (4, &r2), (4, &r3), (8, &r4)]);
    send_raw(&mut h, 1, 2, op::MULTI_READ, &body);
    let got = h.out(1);
    let Got::Reply { err: 0, body, .. } = &got[0] else {
        panic!("{got:?}")
    };
    assert_eq!(multi_types(body), [(8, 0), (4, 0), (-1, -101), (8, 0)]);
    // Writes read as a multiRead: MARSHALLINGERROR with the empty result list.
    let c = |b: &mut BytesMut| create_req("/w", keel::tree::acl::open_acl(), 0).encode(b);
    send_raw(&mut h, 1, 3, op::MULTI_READ, &multi_body(&[(1, &c)]));
    // Mixed kinds, and sub-ops without the watch byte: MARSHALLINGERROR alone.
    send_raw(
        &mut h,
        1,
        4,
        op::MULTI_READ,
        &multi_body(&[(4, &r2), (1, &c)]),
    );
    let short = |b: &mut BytesMut| "/a".to_string().encode(b);
    send_raw(&mut h, 1, 5, op::MULTI_READ, &multi_body(&[(4, &short)]));
    let got = h.out(1);
    assert_eq!(errs(&got), [-5, -5, -5], "{got:?}");
    let Got::Reply { body, .. } = &got[0] else {
        unreachable!()
    };
    assert_eq!(multi_types(body), []);
    assert_eq!(body.len(), 9, "the end of an empty result list");
    let Got::Reply { body, .. } = &got[1] else {
        unreachable!()
    };
    assert!(body.is_empty());
    assert!(h.server.tree.get("/w").is_none());
}

/// Inside a multi, ZooKeeper takes the create opcode from the flags, and its result
/// types are create (1, path only) and create2 (15): never 19 or 21. A TTL mode sent
/// as a plain create record fails the whole multi with MARSHALLINGERROR.
#[test]
fn multi_create_results_and_node_types_follow_the_flags() {
    let mut h = Harness::new();
    let (sid, _) = h.connect(1, 30000);
    let open = keel::tree::acl::open_acl;
    let c = |p: &'static str, flags: i32| {
        move |b: &mut BytesMut| create_req(p, open(), flags).encode(b)
    };
    let ttl = |b: &mut BytesMut| {
        CreateTtlRequest {
            path: "/ttl".into(),
            data: None,
            acl: open(),
            flags: 5,
            ttl_ms: 60_000,
        }
        .encode(b)
    };
    let (a, b2, cont, eph) = (c("/plain", 0), c("/c2", 0), c("/cont", 4), c("/eph", 1));
    let body = multi_body(&[(1, &a), (15, &b2), (19, &cont), (21, &ttl), (19, &eph)]);
    send_raw(&mut h, 1, 1, op::MULTI, &body);
    let got = h.out(1);
    let Got::Reply { err: 0, body, .. } = &got[0] else {
        panic!("{got:?}")
    };
    assert_eq!(
        multi_types(body),
        [(1, 0), (1, 0), (15, 0), (15, 0), (1, 0)]
    );
    let owner = |h: &Harness, p: &str| h.server.tree.get(p).unwrap().owner();
    use keel::tree::Owner;
    assert_eq!(owner(&h, "/cont"), Owner::Container);
    assert!(matches!(owner(&h, "/ttl"), Owner::Ttl(60_000)));
    assert_eq!(
        owner(&h, "/eph"),
        Owner::Session(sid),
        "createContainer flags 1 in a multi"
    );
    let (fine, bad) = (c("/fine", 0), c("/ttl_as_create", 5));
    let before = h.server.last_zxid;
    send_raw(
        &mut h,
        1,
        2,
        op::MULTI,
        &multi_body(&[(1, &fine), (1, &bad)]),
    );
    let got = h.out(1);
    assert!(
        matches!(&got[0], Got::Reply { err: -5, body, .. } if body.is_empty()),
        "{got:?}"
    );
    assert_eq!(h.server.last_zxid, before + 1, "it took a zxid");
    assert!(h.server.tree.get("/ttl_as_create").is_none());
    assert!(h.server.tree.get("/fine").is_none());
}

/// A single request takes the node type from its opcode: createContainer with any
/// non-TTL flags makes a container, create/create2 with the CONTAINER flag a
/// persistent znode.
#[test]
fn single_create_node_type_comes_from_the_opcode() {
    use keel::tree::Owner;
    let mut h = Harness::new();
    let (sid, _) = h.connect(1, 30000);
    let open = keel::tree::acl::open_acl;
    send(
        &mut h,
        1,
        1,
        op::CREATE_CONTAINER,
        &create_req("/c1", open(), 1),
    );
    send(
        &mut h,
        1,
        2,
        op::CREATE_CONTAINER,
        &create_req("/c0", open(), 0),
    );
    send(&mut h, 1, 3, op::CREATE, &create_req("/p4", open(), 4));
    send(&mut h, 1, 4, op::CREATE2, &create_req("/q4", open(), 4));
    send(&mut h, 1, 5, op::CREATE2, &create_req("/e", open(), 1));
    send(
        &mut h,
        1,
        6,
        op::CREATE_CONTAINER,
        &create_req("/t", open(), 5),
    );
    assert_eq!(errs(&h.out(1)), [0, 0, 0, 0, 0, -8]);
    let owner = |h: &Harness, p: &str| h.server.tree.get(p).unwrap().owner();
    assert_eq!(owner(&h, "/c1"), Owner::Container);
    assert_eq!(owner(&h, "/c0"), Owner::Container);
    assert_eq!(owner(&h, "/p4"), Owner::None);
    assert_eq!(owner(&h, "/q4"), Owner::None);
    assert_eq!(owner(&h, "/e"), Owner::Session(sid));
    // createTTL with a mode without a TTL and a negative TTL: ZooKeeper halts on it;
    // keel refuses it.
    for flags in 0..5 {
        send(
            &mut h,
            1,
            7,
            op::CREATE_TTL,
            &CreateTtlRequest {
                path: format!("/n{flags}"),
                data: None,
                acl: open(),
                flags,
                ttl_ms: -1,
            },
        );
    }
    assert_eq!(errs(&h.out(1)), [-8; 5]);
}

/// The sequential suffix is the parent's stored child-create count. At i32::MAX it
/// names ...2147483647 and stays there (the wrapped count is not larger, so the parent
/// keeps its count and pzxid), so the next sequential create is NODEEXISTS; inside one
/// multi the second create sees the wrapped count. Measured on ZooKeeper 3.8.0 with a
/// txn log whose create carried parentCVersion 2147483645 (issue 14 report).
#[test]
fn sequential_names_stop_at_int_max() {
    let mut h = Harness::new();
    h.connect(1, 30000);
    let open = keel::tree::acl::open_acl;
    send(&mut h, 1, 1, op::CREATE, &create_req("/q", open(), 0));
    h.out(1);
    let zxid = h.server.last_zxid;
    h.server
        .tree
        .create(
            "/q/x",
            None,
            &std::sync::Arc::new(open()),
            0,
            i32::MAX - 2,
            zxid,
            T0,
        )
        .unwrap();
    h.server.tree.delete("/q/x", zxid).unwrap();
    for xid in 2..6 {
        send(&mut h, 1, xid, op::CREATE, &create_req("/q/s-", open(), 2));
    }
    let got = h.out(1);
    let paths: Vec<String> = got
        .iter()
        .map(|g| match g {
            Got::Reply { err: 0, body, .. } => decode_all::<CreateResponse>(body).unwrap().path,
            Got::Reply { err, .. } => err.to_string(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        paths,
        [
            "/q/s-2147483645",
            "/q/s-2147483646",
            "/q/s-2147483647",
            "-110"
        ]
    );
    let q = h.server.tree.get("/q").unwrap();
    assert_eq!(q.child_creates(), i32::MAX);
    assert_eq!(
        q.stat().pzxid,
        4,
        "the create that named ...2147483647 left pzxid"
    );
    send(
        &mut h,
        1,
        6,
        op::DELETE,
        &DeleteRequest {
            path: "/q/s-2147483647".into(),
            version: -1,
        },
    );
    let delete_zxid = h.server.last_zxid;
    let m = |b: &mut BytesMut| create_req("/q/m-", open(), 2).encode(b);
    send_raw(&mut h, 1, 7, op::MULTI, &multi_body(&[(1, &m), (1, &m)]));
    let got = h.out(1);
    assert_eq!(errs(&got), [0, 0]);
    assert!(h.server.tree.get("/q/m-2147483647").is_some());
    assert!(h.server.tree.get("/q/m--2147483648").is_some());
    let q = h.server.tree.get("/q").unwrap();
    assert_eq!(q.child_creates(), i32::MAX, "the count never wraps");
    assert_eq!(q.stat().pzxid, delete_zxid, "only the delete moved pzxid");
}

/// checkWatches/removeWatches know the watcher types 1..3 of ZooKeeper 3.8 and addWatch
/// the modes 0 and 1; anything else is MARSHALLINGERROR. A recursive watch answers a
/// Children check, as 3.8 keeps it in both tables.
#[test]
fn watch_argument_checks() {
    let mut h = Harness::new();
    h.connect(1, 30000);
    h.create(1, 1, "/w", 0);
    send(
        &mut h,
        1,
        2,
        op::ADD_WATCH,
        &AddWatchRequest {
            path: "/w".into(),
            mode: 1,
        },
    );
    for mode in [-1, 2, 3] {
        send(
            &mut h,
            1,
            3,
            op::ADD_WATCH,
            &AddWatchRequest {
                path: "/w".into(),
                mode,
            },
        );
    }
    assert_eq!(errs(&h.out(1)), [0, -5, -5, -5]);
    let mut codes = Vec::new();
    for t in [-1, 0, 1, 2, 3, 4, 5, 100] {
        send(
            &mut h,
            1,
            4,
            op::CHECK_WATCHES,
            &WatchesRequest {
                path: "/w".into(),
                watcher_type: t,
            },
        );
        codes.extend(errs(&h.out(1)));
    }
    assert_eq!(codes, [-5, -5, 0, 0, 0, -5, -5, -5]);
    // Removing the Children part leaves the recursive watch's data part.
    send(
        &mut h,
        1,
        5,
        op::REMOVE_WATCHES,
        &WatchesRequest {
            path: "/w".into(),
            watcher_type: 1,
        },
    );
    send(
        &mut h,
        1,
        6,
        op::CHECK_WATCHES,
        &WatchesRequest {
            path: "/w".into(),
            watcher_type: 1,
        },
    );
    send(
        &mut h,
        1,
        7,
        op::CHECK_WATCHES,
        &WatchesRequest {
            path: "/w".into(),
            watcher_type: 2,
        },
    );
    assert_eq!(errs(&h.out(1)), [0, -121, 0]);
}

/// A client's deleteContainer is always BADARGUMENTS with a zxid used: ZooKeeper reads
/// its path from the raw request bytes, header included, whose opcode has NUL bytes.
#[test]
fn client_delete_container_is_badarguments() {
    let mut h = Harness::new();
    h.connect(1, 30000);
    h.create(1, 1, "/c", 4);
    h.create(1, 2, "/p", 0);
    h.create(1, 3, "/full", 0);
    h.create(1, 4, "/full/k", 0);
    for (xid, p) in [(5, "/c"), (6, "/p"), (7, "/full"), (8, "/missing")] {
        send(
            &mut h,
            1,
            xid,
            op::DELETE_CONTAINER,
            &PathRequest { path: p.into() },
        );
        send_raw(&mut h, 1, xid, op::DELETE_CONTAINER, p.as_bytes());
    }
    let before = h.server.last_zxid;
    assert_eq!(errs(&h.out(1)), [-8; 8]);
    assert_eq!(
        before, 13,
        "each took a zxid (after the session and four creates)"
    );
    assert!(h.server.tree.get("/c").is_some());
}

/// A hard count quota is checked against every proposed txn, not only the applied
/// ones: through a follower, a client's next create can reach the leader before the
/// leader applied the previous one (seen in CI: `create /hq/c` passed a countHardLimit
/// that ZooKeeper enforced). Pipelined here on one durable server: nothing applies
/// until `Durable`. A quota set or removed by a txn not yet applied counts too, and
/// earlier ops of the same multi do not (ZooKeeper checks each against the tree).
#[test]
fn hard_quota_counts_writes_proposed_but_not_applied() {
    use keel::proto::request::MultiOp;
    let mut s = logged_settings();
    s.prep.enforce_quota = true;
    let mut h = Harness {
        server: Server::new(s, 0, T0, 7),
        now: T0,
    };
    h.server.handle(h.now, connected(1));
    h.server.handle(h.now, new_session(1, 30000));
    let mut zxid = 1;
    h.server.handle(h.now, Input::Durable { zxid });
    h.out(1);
    let create_op = |p: &str, data: &str| CreateOp {
        opcode: op::CREATE,
        path: p.into(),
        data: Some(Bytes::copy_from_slice(data.as_bytes())),
        acl: keel::tree::acl::open_acl(),
        flags: 0,
        ttl_ms: None,
    };
    let mut xid = 0;
    let mut send = |h: &mut Harness, req: Request, opcode: i32| {
        xid += 1;
        h.request(1, xid, opcode, req);
    };
    // /hq with a hard count limit of 2 (itself and one child), all applied.
    for (p, d) in [
        ("/hq", ""),
        ("/zookeeper/quota/hq", ""),
        (
            "/zookeeper/quota/hq/zookeeper_limits",
            "count=-1,bytes=-1=;countHardLimit=2",
        ),
        ("/zookeeper/quota/hq/zookeeper_stats", "count=0,bytes=0"),
    ] {
        send(&mut h, Request::Create(create_op(p, d)), op::CREATE);
    }
    zxid += 4;
    h.server.handle(h.now, Input::Durable { zxid });
    assert!(
        h.out(1)
            .iter()
            .all(|g| matches!(g, Got::Reply { err: 0, .. })),
        "quota set up"
    );
    let errs = |got: Vec<Got>| -> Vec<i32> {
        got.into_iter()
            .filter_map(|g| match g {
                Got::Reply { err, .. } => Some(err),
                _ => None,
            })
            .collect()
    };
    // Two creates before either applies: the second is over the limit.
    send(&mut h, Request::Create(create_op("/hq/a", "")), op::CREATE);
    send(&mut h, Request::Create(create_op("/hq/b", "")), op::CREATE);
    // A refused write takes a zxid too (ZooKeeper's error txn).
    zxid += 2;
    h.server.handle(h.now, Input::Durable { zxid });
    assert_eq!(errs(h.out(1)), vec![0, -125], "/hq/b over the hard limit");
    // The limit removed (as zkCli's delquota -N writes it) and a create, before the
    // removal applies: the create passes.
    send(
        &mut h,
        Request::SetData(SetDataRequest {
            path: "/zookeeper/quota/hq/zookeeper_limits".into(),
            data: Some(Bytes::from_static(b"count=-1,bytes=-1=;countHardLimit=-1")),
            version: -1,
        }),
        op::SET_DATA,
    );
    send(&mut h, Request::Create(create_op("/hq/b", "")), op::CREATE);
    // The limit back at 3 (count now 3) and, before it applies, a multi of two
    // creates: each is checked against the applied count, as ZooKeeper checks them.
    send(
        &mut h,
        Request::SetData(SetDataRequest {
            path: "/zookeeper/quota/hq/zookeeper_limits".into(),
            data: Some(Bytes::from_static(b"count=-1,bytes=-1=;countHardLimit=4")),
            version: -1,
        }),
        op::SET_DATA,
    );
    send(
        &mut h,
        Request::Multi(vec![
            MultiOp::Create(create_op("/hq/m1", "")),
            MultiOp::Create(create_op("/hq/m2", "")),
        ]),
        op::MULTI,
    );
    send(&mut h, Request::Create(create_op("/hq/c", "")), op::CREATE);
    zxid += 5;
    h.server.handle(h.now, Input::Durable { zxid });
    assert_eq!(
        errs(h.out(1)),
        vec![0, 0, 0, 0, -125],
        "delquota seen before it applied; the multi within the limit op by op; /hq/c over it"
    );
    assert!(h.server.tree.get("/hq/b").is_some() && h.server.tree.get("/hq/m2").is_some());
    assert!(h.server.tree.get("/hq/c").is_none());
}

/// ZooKeeper's SyncRequestProcessor starts a snapshot once more than `snapCount / 2 +
/// randRoll` txns were logged since the last, `randRoll` drawn from `0 .. snapCount / 2`
/// after each, so the members of an ensemble (which apply the same txns) do not all
/// snapshot at once. The same rule from the server's seeded randomness: each snapshot
/// after 11 to 20 txns with `snapCount` 20, and the counts differ between seeds and
/// between one snapshot and the next.
#[test]
fn snapshots_start_after_a_drawn_number_of_txns_as_zookeepers() {
    let mut counts = Vec::new();
    for seed in 1..=6 {
        let mut s = settings();
        s.durable = true;
        s.snap_count = 20;
        let mut server = Server::new(s, 0, T0, seed);
        let mut zxid = 0;
        let mut since = 0;
        // Makes the txn just proposed durable; whether that started a snapshot.
        let durable = |server: &mut Server, since: &mut u32, zxid: &mut i64| -> bool {
            for op in server.drain_storage() {
                if let StorageOp::Append(t) = op {
                    *zxid = t.zxid;
                }
            }
            server.handle(T0, Input::Durable { zxid: *zxid });
            *since += 1;
            server
                .drain_storage()
                .iter()
                .any(|op| matches!(op, StorageOp::SnapshotChunk { index: 0, .. }))
        };
        server.handle(T0, connected(1));
        server.handle(T0, new_session(1, 30000));
        let mut seed_counts = Vec::new();
        if durable(&mut server, &mut since, &mut zxid) {
            seed_counts.push(since);
        }
        for xid in 1..=100 {
            server.handle(T0, create_on_conn_1(xid, None));
            if durable(&mut server, &mut since, &mut zxid) {
                seed_counts.push(since);
                since = 0;
                // Written whole before the next txn, as a runtime would between inputs.
                for _ in 0..10 {
                    server.snapshot_step();
                }
                server.drain_storage();
            }
        }
        server.drain_outbox();
        assert!(seed_counts.len() >= 5, "seed {seed}: {seed_counts:?}");
        for &n in &seed_counts {
            assert!((11..=20).contains(&n), "seed {seed}: {seed_counts:?}");
        }
        counts.push(seed_counts);
    }
    let firsts: std::collections::BTreeSet<u32> = counts.iter().map(|c| c[0]).collect();
    assert!(
        firsts.len() > 1,
        "every seed drew the same first count: {counts:?}"
    );
    assert!(
        counts.iter().any(|c| c.windows(2).any(|w| w[0] != w[1])),
        "every snapshot came after the same count: {counts:?}"
    );
}

/// A create of `/n<xid>` with `data` and an open ACL, from connection 1.
fn create_on_conn_1(xid: i32, data: Option<Bytes>) -> Input {
    Input::Request {
        conn: 1,
        xid,
        opcode: op::CREATE,
        req: Request::Create(CreateOp {
            opcode: op::CREATE,
            path: format!("/n{xid}"),
            data,
            acl: keel::tree::acl::open_acl(),
            flags: 0,
            ttl_ms: None,
        }),
        body: Bytes::new(),
    }
}

/// Handles `input` and makes every txn it logs durable at once (as a runtime whose
/// storage keeps up); returns every storage op it led to.
fn handle_durably(server: &mut Server, input: Input) -> Vec<StorageOp> {
    server.handle(T0, input);
    let mut ops = Vec::new();
    loop {
        let drained = server.drain_storage();
        if drained.is_empty() {
            return ops;
        }
        let last = drained.iter().rev().find_map(|op| match op {
            StorageOp::Append(t) => Some(t.zxid),
            _ => None,
        });
        ops.extend(drained);
        if let Some(zxid) = last {
            server.handle(T0, Input::Durable { zxid });
        }
    }
}

/// A member whose periodic snapshot is under way when a SNAP replaces its state
/// (`Server::restore`) drops that snapshot: its steps would otherwise go on over the
/// new tree and mark it complete, though the install deleted its first chunks.
#[test]
fn a_restore_stops_the_snapshot_under_way() {
    let mut s = settings();
    s.durable = true;
    s.snap_count = 40;
    let mut server = Server::new(s, 0, T0, 3);
    let mut ops = handle_durably(&mut server, connected(1));
    ops.extend(handle_durably(&mut server, new_session(1, 30000)));
    let big = Bytes::from(vec![b'd'; 100 << 10]);
    for xid in 1..=45 {
        ops.extend(handle_durably(
            &mut server,
            create_on_conn_1(xid, Some(big.clone())),
        ));
    }
    server.drain_outbox();
    let started = ops
        .iter()
        .find_map(|op| match op {
            StorageOp::SnapshotChunk { zxid, index: 0, .. } => Some(*zxid),
            _ => None,
        })
        .expect("a snapshot started within 40 txns");
    // One step of it, the tree being over 2 MB: not done.
    server.snapshot_step();
    let step = server.drain_storage();
    assert!(
        matches!(step.as_slice(), [StorageOp::SnapshotChunk { zxid, index: 1, .. }] if *zxid == started),
        "{step:?}"
    );
    server.restore(0x1_0000_0000, keel::tree::DataTree::new(), &[]);
    for _ in 0..10 {
        server.snapshot_step();
    }
    let after: Vec<String> = server
        .drain_storage()
        .iter()
        .map(|op| format!("{op:?}").chars().take(60).collect())
        .collect();
    assert!(after.is_empty(), "the old snapshot went on: {after:?}");
}

//! The sans-I/O server driven directly: sessions, writes, reads, watches and their
//! ordering, expiry and container reaping, with time as an input.

use bytes::{Bytes, BytesMut};
use jute::*;
use keel::proto::opcode as op;
use keel::proto::request::CreateOp;
use keel::proto::Request;
use keel::server::prep::PrepSettings;
use keel::server::{Input, Outbound, Server, Settings, StorageOp};
use proptest::prelude::*;

const T0: i64 = 1_700_000_000_000;

fn settings() -> Settings {
    Settings {
        tick_ms: 2000,
        min_session_timeout_ms: 4000,
        max_session_timeout_ms: 40000,
        super_digest: Some(keel::tree::acl::digest_id("super:test")),
        prep: PrepSettings {
            extended_types: true,
            enforce_quota: false,
        },
        container_check_interval_ms: 1000,
        reconfig_enabled: false,
        durable: false,
        snap_count: 0,
    }
}

/// A decoded packet the server sent.
#[derive(Debug, Clone, PartialEq)]
enum Got {
    Reply {
        xid: i32,
        zxid: i64,
        err: i32,
        body: Bytes,
    },
    Event {
        event_type: i32,
        path: String,
    },
    Connected {
        session_id: i64,
        timeout_ms: i32,
        passwd: Bytes,
    },
    Close,
}

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
            got.push(decode(o, &mut got.is_empty()));
        }
        got
    }

    fn all_out(&mut self) -> Vec<(u64, Got)> {
        self.server
            .drain_outbox()
            .into_iter()
            .map(|(c, o)| (c, decode(o, &mut false)))
            .collect()
    }

    /// Opens a connection and a new session on it.
    fn connect(&mut self, conn: u64, timeout_ms: i32) -> (i64, Bytes) {
        self.server.handle(
            self.now,
            Input::Connected {
                conn,
                addr: "127.0.0.1:5000".parse().unwrap(),
            },
        );
        self.server.handle(
            self.now,
            Input::Handshake {
                conn,
                req: ConnectRequest {
                    protocol_version: 0,
                    last_zxid_seen: 0,
                    time_out_ms: timeout_ms,
                    session_id: 0,
                    passwd: Bytes::from_static(&[0; 16]),
                    read_only: false,
                },
            },
        );
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
            },
        );
    }

    fn create(&mut self, conn: u64, xid: i32, path: &str, flags: i32) -> Vec<Got> {
        let req = Request::Create(CreateOp {
            opcode: op::CREATE2,
            path: path.into(),
            data: Some(Bytes::from_static(b"d")),
            acl: keel::tree::acl::open_acl(),
            flags,
            ttl_ms: 0,
        });
        self.request(conn, xid, op::CREATE2, req);
        self.out(conn)
    }
}

fn decode(o: Outbound, first: &mut bool) -> Got {
    let _ = first;
    let Outbound::Packet(p) = o else {
        return Got::Close;
    };
    let body = &p[4..];
    // A ConnectResponse is 4 + 4 + 8 + 4 + 16 + 1 = 37 bytes; a reply header is 16.
    if body.len() == 37 {
        if let Ok(r) = decode_all::<ConnectResponse>(body) {
            return Got::Connected {
                session_id: r.session_id,
                timeout_ms: r.time_out_ms,
                passwd: r.passwd,
            };
        }
    }
    let mut d = Decoder::new(body);
    let h = ReplyHeader::decode(&mut d).unwrap();
    if h.xid == -1 {
        let e = WatcherEvent::decode(&mut d).unwrap();
        return Got::Event {
            event_type: e.event_type,
            path: e.path,
        };
    }
    Got::Reply {
        xid: h.xid,
        zxid: h.zxid,
        err: h.err,
        body: Bytes::copy_from_slice(d.remaining()),
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
                passwd: Bytes::from_static(&[0; 16])
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
        ttl_ms: 0,
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
            ttl_ms: 0,
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
        ttl_ms: 500,
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
            ttl_ms: 0,
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
            ttl_ms: 0,
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
            ttl_ms: 0,
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
        ttl_ms: 0,
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

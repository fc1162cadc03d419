//! keel's server-to-server codec (`keel::zab::wire`) against a real 3-member ZooKeeper
//! 3.8 ensemble on loopback (ports 3150-3199), both directions:
//! - election port: a fake sid larger than every member connects and is kept; one
//!   smaller (0) is closed and dialled back, and ZooKeeper's own initial message is
//!   decoded; each member's reply to our observer-style notification decodes to the
//!   state, leader and epoch its `srvr` shows;
//! - quorum port: our FOLLOWERINFO and OBSERVERINFO take a fake follower and observer
//!   through LEADERINFO, ACKEPOCH, DIFF, NEWLEADER and UPTODATE; then client writes
//!   arrive as PROPOSAL + COMMIT and INFORM, whose txn bytes decode to keel txns that
//!   re-encode to ZooKeeper's own bytes (its tree digest aside).
//!
//! Skips, saying why, when ZooKeeper (/usr/share/java/zookeeper.jar) is not installed.

mod common;

use bytes::{Bytes, BytesMut};
use common::{Client, CreateMode, Op, TempDir};
use keel::proto::opcode as op;
use keel::server::txn::TxnOp;
use keel::zab::message::{Message, Notification, ServerState};
use keel::zab::wire::config::{quorum_config_text, ServerLine};
use keel::zab::wire::election::{
    decode_frame, decode_notification, encode_frame, encode_notification, incoming,
    initiator_keeps, ElectionAddress, Handshake, Incoming, InitialMessage,
};
use keel::zab::wire::packet::{Limits, QuorumPacket};
use keel::zab::wire::quorum::{encode_message, from_packet, Inbound, Side, PROTOCOL_VERSION};
use keel::zab::wire::txn::{decode_keel, encode_keel, parse_payload};
use keel::zab::{epoch_of, zxid};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";
const BASE: u16 = 3150;
const DIAL_BACK_PORT: u16 = 3198;

fn tools() -> PathBuf {
    PathBuf::from("/work/shared/tools")
}

fn client_port(i: u64) -> u16 {
    BASE + 10 * (i as u16 - 1) + 1
}

fn quorum_port(i: u64) -> u16 {
    client_port(i) + 1
}

fn election_port(i: u64) -> u16 {
    client_port(i) + 2
}

/// The ensemble, stopped when dropped.
struct Ensemble {
    dir: TempDir,
}

impl Ensemble {
    fn start() -> Ensemble {
        let dir = TempDir::new("zab-wire-zk");
        let out = Command::new(tools().join("ensemble.sh"))
            .arg("start")
            .arg(tools().join("realzk-exec.sh"))
            .arg(&dir.path)
            .arg(BASE.to_string())
            .output()
            .expect("run ensemble.sh");
        let e = Ensemble { dir };
        assert!(
            out.status.success(),
            "ensemble did not form: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        e
    }

    fn path(&self) -> &Path {
        &self.dir.path
    }
}

impl Drop for Ensemble {
    fn drop(&mut self) {
        let _ = Command::new(tools().join("ensemble.sh"))
            .arg("stop")
            .arg(self.path())
            .output();
    }
}

/// A member's `srvr`: its Mode and its Zxid.
fn srvr(i: u64) -> (String, u64) {
    let mut s = TcpStream::connect(("127.0.0.1", client_port(i))).expect("connect for srvr");
    s.write_all(b"srvr").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let field = |name: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in srvr: {out}"))
            .trim()
            .to_string()
    };
    let zxid = u64::from_str_radix(field("Zxid:").trim_start_matches("0x"), 16).unwrap();
    (field("Mode:"), zxid)
}

fn stream(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// Reads until `decode` finds a whole unit in the bytes buffered so far.
fn read_unit<T>(
    s: &mut TcpStream,
    buf: &mut Vec<u8>,
    decode: impl Fn(&[u8]) -> Option<(T, usize)>,
) -> T {
    loop {
        if let Some((t, used)) = decode(buf) {
            buf.drain(..used);
            return t;
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).expect("read from ZooKeeper");
        assert!(n > 0, "ZooKeeper closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn read_notification(s: &mut TcpStream, buf: &mut Vec<u8>) -> Notification {
    let body = read_unit(s, buf, |b| {
        decode_frame(b)
            .expect("a well-formed frame")
            .map(|(body, used)| (body.to_vec(), used))
    });
    decode_notification(&body).expect("ZooKeeper's notification decodes")
}

/// Our vote as an observer would send it: ZooKeeper's Long.MIN_VALUE triple.
fn observer_vote() -> Bytes {
    let n = Notification::non_voter(1);
    assert_eq!(n.leader as i64, i64::MIN);
    encode_frame(&encode_notification(&n, b"version=0")).unwrap()
}

/// What a member's reply must say, by its srvr.
fn check_reply(n: &Notification, member: u64, leader: u64, last_zxid: u64) {
    let (mode, _) = srvr(member);
    let want = if mode == "leader" {
        ServerState::Leading
    } else {
        ServerState::Following
    };
    assert_eq!(n.state, want, "member {member} is {mode}: {n:?}");
    assert_eq!(n.leader, leader, "{n:?}");
    // peerEpoch is the new epoch (updated after the sync, ZOOKEEPER-1732); the zxid is
    // the leader's last zxid when it was elected, so no later than its last now.
    assert_eq!(n.peer_epoch, u64::from(epoch_of(last_zxid)), "{n:?}");
    assert!(n.zxid <= last_zxid, "{n:?}");
    assert!(n.election_epoch >= 1, "{n:?}");
    assert_eq!(String::from_utf8_lossy(&n.config), config_text());
}

/// The ensemble's config as ZooKeeper writes it, from keel's codec.
fn config_text() -> String {
    let servers: Vec<ServerLine> = (1..=3)
        .map(|i| ServerLine {
            sid: i,
            host: "127.0.0.1".into(),
            quorum_port: quorum_port(i),
            election_port: election_port(i),
            observer: false,
            client: None,
        })
        .collect();
    quorum_config_text(&servers, 0)
}

fn election_port_checks(leader: u64, last_zxid: u64) {
    // A larger sid than the member's: kept, and a non-voter's vote is answered.
    assert!(initiator_keeps(9, 1) && incoming(1, 9) == Incoming::Keep);
    let mut a = stream(election_port(1));
    let hello = InitialMessage::v1(
        9,
        ElectionAddress {
            host: "127.0.0.1".into(),
            port: DIAL_BACK_PORT,
        },
    );
    a.write_all(&[&hello.encode().unwrap()[..], &observer_vote()[..]].concat())
        .unwrap();
    let n = read_notification(&mut a, &mut Vec::new());
    check_reply(&n, 1, leader, last_zxid);

    // A smaller sid: the member closes our connection and dials back the address we
    // sent, with its own initial message.
    assert_eq!(incoming(3, 0), Incoming::CloseAndConnectBack);
    assert!(initiator_keeps(3, 0));
    let listener = TcpListener::bind(("127.0.0.1", DIAL_BACK_PORT)).expect("bind dial-back port");
    let mut b = stream(election_port(3));
    let hello = InitialMessage::v1(
        0,
        ElectionAddress {
            host: "127.0.0.1".into(),
            port: DIAL_BACK_PORT,
        },
    );
    b.write_all(&hello.encode().unwrap()).unwrap();
    let mut rest = Vec::new();
    assert_eq!(b.read_to_end(&mut rest).unwrap(), 0, "member 3 closes it");
    let (mut back, _) = listener.accept().expect("member 3 dials back");
    back.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = Vec::new();
    let theirs = read_unit(&mut back, &mut buf, |b| {
        InitialMessage::decode(b).expect("ZooKeeper's initial message decodes")
    });
    assert_eq!(
        theirs,
        InitialMessage {
            handshake: Handshake::V1,
            sid: 3,
            addresses: vec![ElectionAddress {
                host: "127.0.0.1".into(),
                port: election_port(3),
            }],
        }
    );
    back.write_all(&observer_vote()).unwrap();
    let n = read_notification(&mut back, &mut buf);
    check_reply(&n, 3, leader, last_zxid);
    println!("election port: member 3 dialled back with {theirs:?}; its vote {n:?}");
}

/// One end of a quorum connection we play as a learner.
struct Learner {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Learner {
    fn send(&mut self, msg: &Message) {
        let mut b = BytesMut::new();
        encode_message(msg, Side::Learner, &mut b).unwrap();
        self.s.write_all(&b).unwrap();
    }

    fn packet(&mut self) -> QuorumPacket {
        read_unit(&mut self.s, &mut self.buf, |b| {
            QuorumPacket::decode(b, Limits::default()).expect("ZooKeeper's packet decodes")
        })
    }

    /// The next message that is not a PING (answered, as a learner does).
    fn message(&mut self) -> Message {
        loop {
            let p = self.packet();
            match from_packet(p.clone()).expect("ZooKeeper's packet is a message") {
                Inbound::Message(Message::Ping { zxid, .. }) => {
                    assert_eq!(p.data, None, "a leader's PING has null data");
                    self.send(&Message::Ping {
                        zxid,
                        touched: Vec::new(),
                    });
                }
                Inbound::Message(m) => return m,
                Inbound::Snap { zxid } => panic!("SNAP at {zxid:#x}, DIFF expected"),
            }
        }
    }

    /// FOLLOWERINFO or OBSERVERINFO through UPTODATE, at the leader's zxid so the leader
    /// picks DIFF. Returns the epoch.
    fn sync(port: u16, sid: u64, observer: bool, last_zxid: u64) -> (Learner, u32) {
        let mut l = Learner {
            s: stream(port),
            buf: Vec::new(),
        };
        let (accepted_epoch, protocol_version, config_version) = (0, PROTOCOL_VERSION, 0);
        l.send(&if observer {
            Message::ObserverInfo {
                accepted_epoch,
                sid,
                protocol_version,
                config_version,
            }
        } else {
            Message::FollowerInfo {
                accepted_epoch,
                sid,
                protocol_version,
                config_version,
            }
        });
        let Message::LeaderInfo {
            new_epoch,
            protocol_version,
        } = l.message()
        else {
            panic!("LEADERINFO expected")
        };
        assert_eq!(protocol_version, PROTOCOL_VERSION);
        assert_eq!(new_epoch, epoch_of(last_zxid));
        l.send(&Message::AckEpoch {
            last_logged_zxid: last_zxid,
            current_epoch: 0,
        });
        assert_eq!(l.message(), Message::Diff { zxid: last_zxid });
        let Message::NewLeader { epoch, config } = l.message() else {
            panic!("NEWLEADER expected")
        };
        assert_eq!(epoch, new_epoch);
        assert_eq!(String::from_utf8_lossy(&config), config_text());
        l.send(&Message::Ack {
            zxid: zxid(epoch, 0),
        });
        assert!(matches!(l.message(), Message::UpToDate { .. }));
        l.send(&Message::Ack {
            zxid: zxid(epoch, 0),
        });
        (l, epoch)
    }
}

/// A txn's bytes from ZooKeeper: decoded as keel's txn, re-encoded, equal to what
/// ZooKeeper sent but for its trailing tree digest.
fn check_txn(data: &Bytes, zxid: u64) -> keel::server::txn::Txn {
    let (header, _, digest) = parse_payload(data, 0).expect("ZooKeeper's txn parses");
    assert_eq!(header.zxid as u64, zxid);
    let t = decode_keel(data).expect("ZooKeeper's txn is a keel txn");
    let ours = encode_keel(&t).expect("and encodes back");
    let theirs = if digest.is_some() {
        &data[..data.len() - 12]
    } else {
        &data[..]
    };
    assert_eq!(&ours[..], theirs, "{t:?}");
    t
}

fn quorum_port_checks(leader: u64, last_zxid: u64) {
    let (mut follower, epoch) = Learner::sync(quorum_port(leader), 9, false, last_zxid);
    let (mut observer, _) = Learner::sync(quorum_port(leader), 10, true, last_zxid);
    let follower_port = (1..=3).find(|&i| i != leader).unwrap();
    let mut c = Client::connect(client_port(follower_port), 30_000).expect("client session");
    c.create("/wire", Some(b"x"), CreateMode::Persistent)
        .unwrap();
    c.create("/wire/e", None, CreateMode::EphemeralSequential)
        .unwrap();
    c.set_data("/wire", Some(b"yz"), 0).unwrap();
    c.multi(&[
        Op::Check {
            path: "/wire".into(),
            version: 1,
        },
        Op::Create {
            path: "/wire/m".into(),
            data: Some(b"m".to_vec()),
            mode: CreateMode::Persistent,
        },
    ])
    .unwrap();
    assert!(
        c.delete("/nothing", -1).is_err(),
        "a failed write still takes a zxid"
    );
    let session = c.session_id;
    let passwd = c.passwd.clone();
    c.close().unwrap();

    let mut kinds = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while kinds.len() < 7 {
        assert!(Instant::now() < deadline, "txns seen so far: {kinds:?}");
        let Message::Proposal { zxid, txn } = follower.message() else {
            panic!("PROPOSAL expected")
        };
        follower.send(&Message::Ack { zxid });
        assert_eq!(follower.message(), Message::Commit { zxid });
        let Message::Inform {
            zxid: iz,
            txn: itxn,
        } = observer.message()
        else {
            panic!("INFORM expected")
        };
        assert_eq!((iz, &itxn), (zxid, &txn), "INFORM carries PROPOSAL's bytes");
        assert_eq!(epoch_of(zxid), epoch);
        let t = check_txn(&txn, zxid);
        assert_eq!(t.session_id, session);
        match &t.op {
            TxnOp::CreateSession { passwd: p, .. } => {
                assert_eq!(
                    &p[..],
                    &passwd[..],
                    "the password is derived as ZooKeeper does"
                )
            }
            TxnOp::CloseSession { ephemerals } => {
                assert_eq!(ephemerals, &vec!["/wire/e0000000000".to_string()])
            }
            TxnOp::Create {
                opcode,
                owner,
                path,
                ..
            } => {
                assert_eq!(*opcode, op::CREATE2);
                assert_eq!(*owner != 0, path.starts_with("/wire/e"), "{t:?}");
            }
            _ => {}
        }
        kinds.push(match &t.op {
            TxnOp::CreateSession { .. } => "createSession",
            TxnOp::Create { .. } => "create",
            TxnOp::SetData { .. } => "setData",
            TxnOp::Multi(ops) => {
                assert!(
                    matches!(
                        ops[..],
                        [TxnOp::Check { version: 2, .. }, TxnOp::Create { .. }]
                    ),
                    "{ops:?}"
                );
                "multi"
            }
            TxnOp::Error(_) => "error",
            TxnOp::CloseSession { .. } => "closeSession",
            other => panic!("unexpected {other:?}"),
        });
    }
    assert_eq!(
        kinds,
        [
            "createSession",
            "create",
            "create",
            "setData",
            "multi",
            "error",
            "closeSession"
        ]
    );
    println!(
        "quorum port: synced as follower 9 and observer 10 in epoch {epoch}; txns {kinds:?} decoded and re-encoded to ZooKeeper's bytes"
    );
    drop(observer);
    request_checks(&mut follower, epoch);
}

/// A REQUEST of `opcode` with `record` as its body, from our fake follower's client.
fn forward(follower: &mut Learner, session_id: i64, cxid: i32, opcode: i32, body: Bytes) {
    follower.send(&Message::Request {
        session_id,
        cxid,
        opcode,
        body,
        auth: vec![jute::Id {
            scheme: "ip".into(),
            id: "127.0.0.1".into(),
        }],
    });
}

fn create_body(path: &str) -> Bytes {
    let mut b = BytesMut::new();
    jute::Record::encode(
        &jute::CreateRequest {
            path: path.into(),
            data: Some(Bytes::from_static(b"f")),
            acl: keel::tree::acl::open_acl(),
            flags: 0,
        },
        &mut b,
    );
    b.freeze()
}

/// Reads the leader's stream until `n` txns are committed (ACKing each PROPOSAL, which
/// ZooKeeper pipelines); returns them in zxid order.
fn committed_txns(follower: &mut Learner, epoch: u32, n: usize) -> Vec<keel::server::txn::Txn> {
    let mut proposed = std::collections::BTreeMap::new();
    let mut committed = Vec::new();
    while committed.len() < n {
        match follower.message() {
            Message::Proposal { zxid, txn } => {
                assert_eq!(epoch_of(zxid), epoch);
                follower.send(&Message::Ack { zxid });
                proposed.insert(zxid, check_txn(&txn, zxid));
            }
            Message::Commit { zxid } => {
                committed.push(proposed.remove(&zxid).expect("COMMIT of a proposed txn"))
            }
            other => panic!("PROPOSAL or COMMIT expected, got {other:?}"),
        }
    }
    committed
}

/// Our fake follower forwards a client's work as a learner does: REQUEST createSession
/// and create, REVALIDATE, REQUEST create and sync. ZooKeeper's leader must propose
/// the txns for our session, answer the revalidation, and send SYNC after the COMMIT
/// of the create before it.
fn request_checks(follower: &mut Learner, epoch: u32) {
    let session_id = (9i64 << 56) | 1;
    let timeout = Bytes::copy_from_slice(&30_000i32.to_be_bytes());
    forward(follower, session_id, 0, op::CREATE_SESSION, timeout);
    forward(
        follower,
        session_id,
        1,
        op::CREATE,
        create_body("/forwarded"),
    );
    let txns = committed_txns(follower, epoch, 2);
    assert!(txns.iter().all(|t| t.session_id == session_id), "{txns:?}");
    let TxnOp::CreateSession { timeout_ms, passwd } = txns[0].op.clone() else {
        panic!("createSession expected: {txns:?}")
    };
    assert_eq!(timeout_ms, 30_000);
    assert_eq!(passwd, keel::import::passwd::session_passwd(session_id));
    assert!(
        matches!(&txns[1].op, TxnOp::Create { path, .. } if path == "/forwarded"),
        "{txns:?}"
    );

    follower.send(&Message::Revalidate {
        session_id,
        timeout_ms: 30_000,
    });
    assert_eq!(
        follower.message(),
        Message::RevalidateReply {
            session_id,
            valid: true
        }
    );

    let mut sync = BytesMut::new();
    jute::Record::encode(&jute::PathRequest { path: "/".into() }, &mut sync);
    forward(
        follower,
        session_id,
        2,
        op::CREATE,
        create_body("/forwarded2"),
    );
    forward(follower, session_id, 3, op::SYNC, sync.freeze());
    let t = committed_txns(follower, epoch, 1);
    assert!(
        matches!(&t[0].op, TxnOp::Create { path, .. } if path == "/forwarded2"),
        "{t:?}"
    );
    assert_eq!(
        follower.message(),
        Message::Sync,
        "SYNC comes after the COMMIT of the create before it"
    );
    println!("quorum port: REQUEST createSession/create/sync and REVALIDATE from follower 9 were proposed, answered and synced by ZooKeeper's leader");
}

#[test]
fn the_codec_speaks_with_a_real_zookeeper_ensemble() {
    if !Path::new(ZOOKEEPER_JAR).exists() {
        println!("skipped: {ZOOKEEPER_JAR} is absent (apt-get install zookeeper)");
        return;
    }
    let _ensemble = Ensemble::start();
    let modes: Vec<(String, u64)> = (1..=3).map(srvr).collect();
    let leader = 1 + modes
        .iter()
        .position(|(m, _)| m == "leader")
        .expect("a leader") as u64;
    let last_zxid = modes[leader as usize - 1].1;
    assert!(epoch_of(last_zxid) >= 1, "{modes:?}");
    election_port_checks(leader, last_zxid);
    quorum_port_checks(leader, last_zxid);
}

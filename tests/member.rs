//! The state machine as ensemble members, without Zab: one leader server and two learner
//! servers, with the test standing in for the broadcast (every proposal of the leader is
//! committed at once and applied by every learner in zxid order). What it shows: a
//! learner forwards its clients' writes and session operations, the leader sequences
//! them, every member applies the same txns to the same tree, the learner answers its
//! own clients in request order with the txn's result, watches fire on the member
//! whose client set them, and only the leader expires sessions.

use bytes::{Bytes, BytesMut};
use jute::*;
use keel::proto::opcode as op;
use keel::proto::request::CreateOp;
use keel::proto::Request;
use keel::server::txn::Txn;
use keel::server::{Input, Role, Server, StorageOp};

#[path = "support/sansio.rs"]
mod sansio;
use sansio::{connected, decode, new_session, Got};

const T0: i64 = 1_700_000_000_000;
const EPOCH: u32 = 3;
const LEADER: usize = 0;

/// Member 0 leads epoch [`EPOCH`]; members 1 and 2 learn. Server ids are index + 1.
struct Ensemble {
    members: Vec<Server>,
    now: i64,
    /// Every txn committed, in order.
    committed: Vec<Txn>,
}

impl Ensemble {
    fn new() -> Ensemble {
        let mut members = Vec::new();
        for i in 0..3u8 {
            let mut s = Server::new(sansio::logged_settings(), 0, T0, u64::from(i));
            s.set_server_id(i + 1);
            let role = if usize::from(i) == LEADER {
                Role::Leader { epoch: EPOCH }
            } else {
                Role::Learner
            };
            s.handle(T0, Input::Role(role));
            members.push(s);
        }
        Ensemble {
            members,
            now: T0,
            committed: Vec::new(),
        }
    }

    /// Runs the broadcast until nothing moves: forwards to the leader, the leader's
    /// proposals committed, then applied by every learner.
    fn pump(&mut self) {
        self.run(true);
    }

    /// Moves forwarded requests to the leader (and lets it propose) but commits nothing.
    fn forward_only(&mut self) {
        self.run(false);
    }

    /// The leader's SYNC packets go to the learner that forwarded the sync,
    /// behind the commits before them.
    /// Revalidations go to the leader and its answers back to the learner that asked.
    fn route_sync_replies(&mut self) {
        for learner in self.members[LEADER].drain_sync_replies() {
            self.members[learner as usize - 1].handle(self.now, Input::SyncReply);
        }
        for i in 0..self.members.len() {
            for req in self.members[i].drain_revalidations() {
                let from = i as u64 + 1;
                self.members[LEADER].handle(self.now, Input::Revalidate { from, req });
            }
        }
        for (to, reply) in self.members[LEADER].drain_revalidate_replies() {
            self.members[to as usize - 1].handle(self.now, Input::RevalidateReply(reply));
        }
    }

    fn run(&mut self, commit: bool) {
        loop {
            self.route_sync_replies();
            if !commit {
                for i in 0..self.members.len() {
                    if i != LEADER {
                        for fwd in self.members[i].drain_forwards() {
                            self.members[LEADER].handle(
                                self.now,
                                Input::Remote {
                                    from: i as u64 + 1,
                                    fwd,
                                },
                            );
                        }
                    }
                }
                self.route_sync_replies();
                return;
            }
            let mut moved = false;
            for i in 0..self.members.len() {
                if i == LEADER {
                    continue;
                }
                for fwd in self.members[i].drain_forwards() {
                    self.members[LEADER].handle(
                        self.now,
                        Input::Remote {
                            from: i as u64 + 1,
                            fwd,
                        },
                    );
                    moved = true;
                }
                let touched = self.members[i].drain_touched();
                if !touched.is_empty() {
                    self.members[LEADER].handle(self.now, Input::Touched { sessions: touched });
                }
            }
            let txns: Vec<Txn> = self.members[LEADER]
                .drain_storage()
                .into_iter()
                .filter_map(|op| match op {
                    StorageOp::Append(t) => Some(t),
                    _ => None,
                })
                .collect();
            if let Some(last) = txns.last() {
                let zxid = last.zxid;
                self.members[LEADER].handle(self.now, Input::Durable { zxid });
                for i in 0..self.members.len() {
                    if i != LEADER {
                        for t in &txns {
                            self.members[i].handle(self.now, Input::Apply(t.clone()));
                        }
                    }
                }
                self.committed.extend(txns);
                moved = true;
            }
            if !moved {
                return;
            }
        }
    }

    fn out(&mut self, member: usize, conn: u64) -> Vec<Got> {
        let mut got = Vec::new();
        for (c, o) in self.members[member].drain_outbox() {
            assert_eq!(c, conn, "output for an unexpected connection");
            got.push(decode(o));
        }
        got
    }

    /// Reconnects session `session_id` on a new connection to `member`; returns what
    /// the handshake got.
    fn resume(&mut self, member: usize, conn: u64, session_id: i64, passwd: &[u8]) -> Vec<Got> {
        self.members[member].handle(self.now, connected(conn));
        let req = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            time_out_ms: 30000,
            session_id,
            passwd: Bytes::copy_from_slice(passwd),
            read_only: false,
        };
        self.members[member].handle(self.now, Input::Handshake { conn, req });
        self.pump();
        self.out(member, conn)
    }

    fn connect(&mut self, member: usize, conn: u64, timeout_ms: i32) -> (i64, Bytes) {
        self.members[member].handle(self.now, connected(conn));
        self.members[member].handle(self.now, new_session(conn, timeout_ms));
        self.pump();
        match self.out(member, conn).as_slice() {
            [Got::Connected {
                session_id, passwd, ..
            }] => (*session_id, passwd.clone()),
            other => panic!("unexpected handshake output {other:?}"),
        }
    }

    fn request(&mut self, member: usize, conn: u64, xid: i32, opcode: i32, req: Request) {
        self.members[member].handle(
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

    fn create(&mut self, member: usize, conn: u64, xid: i32, path: &str, flags: i32) {
        let req = Request::Create(CreateOp {
            opcode: op::CREATE,
            path: path.into(),
            data: Some(Bytes::copy_from_slice(path.as_bytes())),
            acl: keel::tree::acl::open_acl(),
            flags,
            ttl_ms: None,
        });
        self.request(member, conn, xid, op::CREATE, req);
    }

    fn get_data(&mut self, member: usize, conn: u64, xid: i32, path: &str, watch: bool) {
        let req = Request::GetData(PathWatchRequest {
            path: path.into(),
            watch,
        });
        self.request(member, conn, xid, op::GET_DATA, req);
    }

    /// Every member's whole tree (paths, data, ACLs, every Stat field) as the snapshot
    /// encodes it.
    fn trees(&self) -> Vec<BytesMut> {
        self.members
            .iter()
            .map(|s| {
                let mut b = BytesMut::new();
                keel::tree::snapshot::encode_nodes(&s.tree, None, usize::MAX, &mut b);
                b
            })
            .collect()
    }

    fn assert_same_state(&self) {
        let trees = self.trees();
        assert_eq!(trees[0], trees[1], "leader and learner 1 trees differ");
        assert_eq!(trees[0], trees[2], "leader and learner 2 trees differ");
        let last: Vec<i64> = self.members.iter().map(|s| s.last_zxid).collect();
        assert!(
            last.iter().all(|z| *z == last[0]),
            "applied zxids differ: {last:?}"
        );
        let sessions: Vec<Vec<i64>> = self
            .members
            .iter()
            .map(|s| {
                let mut ids: Vec<i64> = s.sessions.iter().map(|x| x.id).collect();
                ids.sort_unstable();
                ids
            })
            .collect();
        assert_eq!(sessions[0], sessions[1]);
        assert_eq!(sessions[0], sessions[2]);
    }
}

fn reply(got: &Got) -> (i32, i64, i32, Bytes) {
    match got {
        Got::Reply {
            xid,
            zxid,
            err,
            body,
        } => (*xid, *zxid, *err, body.clone()),
        other => panic!("expected a reply, got {other:?}"),
    }
}

fn zxid(counter: u32) -> i64 {
    (i64::from(EPOCH) << 32) | i64::from(counter)
}

#[test]
fn a_learner_forwards_writes_and_answers_its_client_with_the_committed_result() {
    let mut e = Ensemble::new();
    let (sid, passwd) = e.connect(1, 1, 30000);
    // Minted by the learner: its server id (2) in the high byte; the password is
    // ZooKeeper's, derived from the id, so any member can check it.
    assert_eq!(sid >> 56, 2, "session id 0x{sid:x}");
    assert_eq!(&passwd[..], &keel::import::passwd::session_passwd(sid)[..]);
    assert_eq!(e.committed.len(), 1, "createSession is one txn");
    assert_eq!(
        e.committed[0].zxid,
        zxid(1),
        "the leader's first zxid of its epoch"
    );

    // A create and a read of it pipelined: the read waits for the forwarded write.
    e.create(1, 1, 1, "/a", 0);
    e.get_data(1, 1, 2, "/a", false);
    assert!(
        e.out(1, 1).is_empty(),
        "nothing is answered before the leader commits"
    );
    e.pump();
    let got = e.out(1, 1);
    assert_eq!(got.len(), 2, "{got:?}");
    let (xid, z, err, body) = reply(&got[0]);
    assert_eq!((xid, z, err), (1, zxid(2), 0));
    assert_eq!(decode_all::<CreateResponse>(&body).unwrap().path, "/a");
    let (xid, _, err, body) = reply(&got[1]);
    assert_eq!((xid, err), (2, 0));
    let r = decode_all::<GetDataResponse>(&body).unwrap();
    assert_eq!(r.data.as_deref(), Some(&b"/a"[..]));
    assert_eq!(r.stat.czxid, zxid(2));
    e.assert_same_state();

    // A failing write still takes a zxid on every member and is answered with its error.
    e.create(1, 1, 3, "/a", 0);
    e.pump();
    let (xid, z, err, _) = reply(&e.out(1, 1)[0]);
    assert_eq!((xid, z, err), (3, zxid(3), -110), "NODEEXISTS");
    e.assert_same_state();
    assert_eq!(e.members[LEADER].last_zxid, zxid(3));
}

#[test]
fn a_watch_fires_on_the_member_whose_client_set_it() {
    let mut e = Ensemble::new();
    e.connect(1, 1, 30000);
    e.connect(2, 7, 30000);
    e.create(1, 1, 1, "/w", 0);
    e.pump();
    e.out(1, 1);
    // The client of learner 2 watches /w; the client of learner 1 changes it.
    e.get_data(2, 7, 1, "/w", true);
    e.out(2, 7);
    let set = Request::SetData(SetDataRequest {
        path: "/w".into(),
        data: Some(Bytes::from_static(b"new")),
        version: -1,
    });
    e.request(1, 1, 2, op::SET_DATA, set);
    e.pump();
    let (xid, _, err, body) = reply(&e.out(1, 1)[0]);
    assert_eq!((xid, err), (2, 0));
    assert_eq!(decode_all::<StatResponse>(&body).unwrap().stat.version, 1);
    assert_eq!(
        e.out(2, 7),
        vec![Got::Event {
            event_type: 3,
            path: "/w".into()
        }],
        "NodeDataChanged reaches the watcher on the other learner"
    );
    assert!(
        e.members[LEADER].drain_outbox().is_empty(),
        "the leader has no client here"
    );
    e.assert_same_state();
}

#[test]
fn a_close_through_a_learner_removes_the_ephemerals_everywhere() {
    let mut e = Ensemble::new();
    let (sid, _) = e.connect(2, 1, 30000);
    e.create(2, 1, 1, "/eph", 1);
    e.pump();
    e.out(2, 1);
    for s in &e.members {
        assert_eq!(s.tree.get("/eph").map(|n| n.ephemeral_owner()), Some(sid));
    }
    e.request(2, 1, 2, op::CLOSE_SESSION, Request::CloseSession);
    // Dropped: after an accepted closeSession, as on a standalone server.
    e.get_data(2, 1, 3, "/eph", false);
    e.pump();
    let got = e.out(2, 1);
    assert!(got.len() >= 2, "{got:?}");
    assert_eq!(
        reply(&got[0]).0,
        2,
        "the close is answered, the read after it is not"
    );
    assert!(got[1..].iter().all(|g| *g == Got::Close), "{got:?}");
    for s in &e.members {
        assert!(s.tree.get("/eph").is_none());
        assert!(s.sessions.get(sid).is_none());
    }
    e.assert_same_state();
}

#[test]
fn only_the_leader_expires_sessions_and_a_learner_reports_its_touches() {
    let mut e = Ensemble::new();
    let (kept, _) = e.connect(1, 1, 4000);
    let (lost, _) = e.connect(2, 2, 4000);
    e.create(1, 1, 1, "/kept", 1);
    e.create(2, 2, 1, "/lost", 1);
    e.pump();
    e.out(1, 1);
    e.out(2, 2);
    // 12 s in 1 s steps: the client of learner 1 pings every second, the other is
    // silent. Only the leader's tick expires, and only the silent session.
    for _ in 0..12 {
        e.now += 1000;
        e.members[1].handle(
            e.now,
            Input::Request {
                conn: 1,
                xid: -2,
                opcode: op::PING,
                req: Request::Ping,
                body: Bytes::new(),
            },
        );
        e.out(1, 1);
        for i in 0..3 {
            e.members[i].handle(e.now, Input::Tick);
        }
        e.pump();
    }
    for s in &e.members {
        assert!(
            s.sessions.get(kept).is_some(),
            "the pinging session is kept"
        );
        assert!(s.sessions.get(lost).is_none(), "the silent session expired");
        assert!(s.tree.get("/kept").is_some());
        assert!(
            s.tree.get("/lost").is_none(),
            "its ephemeral is gone everywhere"
        );
    }
    assert_eq!(
        e.out(2, 2),
        vec![Got::Close],
        "the learner closes the expired session's connection"
    );
    e.assert_same_state();
}

#[test]
fn a_member_not_serving_refuses_clients_and_a_role_change_closes_them() {
    let mut e = Ensemble::new();
    e.connect(1, 1, 30000);
    e.members[1].handle(e.now, Input::Role(Role::NotServing));
    assert_eq!(e.out(1, 1), vec![Got::Close], "clients reconnect elsewhere");
    e.members[1].handle(e.now, connected(2));
    e.members[1].handle(e.now, new_session(2, 30000));
    assert_eq!(e.out(1, 2), vec![Got::Close]);
    assert!(e.members[1].drain_forwards().is_empty());
}

#[test]
fn a_sync_through_a_learner_waits_for_what_the_leader_had_sequenced() {
    let mut e = Ensemble::new();
    e.connect(1, 1, 30000);
    e.connect(2, 2, 30000);
    // The client of learner 1 creates /s; the leader proposes it, nothing commits yet.
    e.create(1, 1, 1, "/s", 0);
    e.forward_only();
    // The client of learner 2 syncs, then reads /s: neither is answered yet.
    let sync = Request::Sync(PathRequest { path: "/".into() });
    e.request(2, 2, 1, op::SYNC, sync);
    e.get_data(2, 2, 2, "/s", false);
    e.forward_only();
    assert!(
        e.out(2, 2).is_empty(),
        "the sync waits for the leader's outstanding txn"
    );
    // Once the create commits, the learner applies it, gets the leader's answer to the
    // sync, answers it, and the read behind it sees /s.
    e.pump();
    let got = e.out(2, 2);
    assert_eq!(got.len(), 2, "{got:?}");
    let (xid, z, err, body) = reply(&got[0]);
    assert_eq!((xid, z, err), (1, zxid(3), 0));
    assert_eq!(decode_all::<PathRequest>(&body).unwrap().path, "/");
    let (xid, _, err, _) = reply(&got[1]);
    assert_eq!((xid, err), (2, 0), "the read after the sync sees /s");
    // A sync on the leader itself with nothing outstanding is answered at once.
    e.connect(LEADER, 9, 30000);
    let sync = Request::Sync(PathRequest { path: "/s".into() });
    e.request(LEADER, 9, 1, op::SYNC, sync);
    assert_eq!(reply(&e.out(LEADER, 9)[0]).0, 1);
    // With a learner's write outstanding, the leader's own client waits too.
    e.create(1, 1, 2, "/t", 0);
    e.forward_only();
    let sync = Request::Sync(PathRequest { path: "/t".into() });
    e.request(LEADER, 9, 2, op::SYNC, sync);
    assert!(e.out(LEADER, 9).is_empty());
    e.pump();
    let got = e.out(LEADER, 9);
    assert_eq!(reply(&got[0]).0, 2, "{got:?}");
    e.assert_same_state();
}

#[test]
fn a_session_moved_to_another_learner_is_revalidated_and_its_old_member_gets_sessionmoved() {
    let mut e = Ensemble::new();
    let (sid, passwd) = e.connect(1, 1, 30000);
    e.create(1, 1, 1, "/e", 1);
    e.pump();
    e.out(1, 1);
    // The client moves to learner 2: the leader revalidates it there.
    let got = e.resume(2, 5, sid, &passwd);
    match got.as_slice() {
        [Got::Connected { session_id, .. }] => assert_eq!(*session_id, sid),
        other => panic!("resume answered {other:?}"),
    }
    // A write still sent through learner 1 fails with SESSIONMOVED and takes a zxid.
    let set = |data: &'static [u8]| {
        Request::SetData(SetDataRequest {
            path: "/e".into(),
            data: Some(Bytes::from_static(data)),
            version: -1,
        })
    };
    e.request(1, 1, 2, op::SET_DATA, set(b"old"));
    e.pump();
    let (xid, _, err, _) = reply(&e.out(1, 1)[0]);
    assert_eq!((xid, err), (2, -118), "SESSIONMOVED");
    // Through learner 2 it works.
    e.request(2, 5, 2, op::SET_DATA, set(b"new"));
    e.pump();
    let (xid, _, err, _) = reply(&e.out(2, 5)[0]);
    assert_eq!((xid, err), (2, 0));
    for s in &e.members {
        assert_eq!(
            s.tree.get("/e").and_then(|n| n.data().map(|d| d.to_vec())),
            Some(b"new".to_vec())
        );
        assert_eq!(
            s.tree.get("/e").map(|n| n.ephemeral_owner()),
            Some(sid),
            "the ephemeral survives the move"
        );
    }
    // A wrong password is refused by the learner itself; a closed session by the leader.
    let got = e.resume(2, 6, sid, &[7; 16]);
    assert!(
        matches!(
            got.as_slice(),
            [Got::Connected { session_id: 0, .. }, Got::Close]
        ),
        "{got:?}"
    );
    e.request(2, 5, 3, op::CLOSE_SESSION, Request::CloseSession);
    e.pump();
    e.out(2, 5);
    assert_eq!(
        e.out(1, 1),
        vec![Got::Close],
        "the member the session left closes its old connection when the close commits"
    );
    let got = e.resume(1, 7, sid, &passwd);
    assert!(
        matches!(
            got.as_slice(),
            [Got::Connected { session_id: 0, .. }, Got::Close]
        ),
        "{got:?}"
    );
    e.assert_same_state();
}

/// A committed create of `path` with `data` at `zxid`, as the leader would send it.
fn create_txn(zxid: i64, path: &str, data: &[u8]) -> Txn {
    Txn {
        zxid,
        time_ms: T0 + zxid,
        session_id: 0x77,
        cxid: zxid as i32,
        op: keel::server::txn::TxnOp::Create {
            opcode: op::CREATE,
            path: path.to_string(),
            data: Some(Bytes::copy_from_slice(data)),
            acl: Vec::new(),
            owner: 0,
            parent_creates: zxid as i32,
        },
    }
}

#[test]
fn txns_up_to_the_lenient_bound_apply_over_what_the_tree_already_holds() {
    // A member that starts on a (fuzzy) ZooKeeper snapshot holds txns logged after it,
    // some of which the snapshot already reflects: up to `set_lenient_upto` they apply
    // as recovery replays them (a create over an existing znode replaces it, a delete
    // of a missing one is a no-op), not refused; above it a refusal stands.
    let mut s = Server::new(sansio::logged_settings(), 0, T0, 9);
    s.set_server_id(2);
    s.handle(T0, Input::Role(Role::Learner));
    s.handle(T0, Input::Apply(create_txn(1, "/a", b"v1")));
    s.set_lenient_upto(3);
    let a = |s: &Server| {
        let n = s.tree.get("/a").expect("/a exists");
        (n.data_bytes().to_vec(), n.mzxid())
    };
    // At the bound's side: /a exists (NodeExists strictly) and is replaced.
    s.handle(T0, Input::Apply(create_txn(2, "/a", b"fuzzy")));
    assert_eq!(
        a(&s),
        (b"fuzzy".to_vec(), 2),
        "a create at or below the bound applies"
    );
    let delete = Txn {
        op: keel::server::txn::TxnOp::Delete {
            path: "/missing".to_string(),
        },
        ..create_txn(3, "/missing", b"")
    };
    s.handle(T0, Input::Apply(delete));
    assert_eq!(s.last_zxid, 3);
    assert!(s.tree.get("/missing").is_none());
    // Above the bound: NodeExists stands, /a keeps what zxid 2 wrote.
    s.handle(T0, Input::Apply(create_txn(4, "/a", b"late")));
    assert_eq!(
        a(&s),
        (b"fuzzy".to_vec(), 2),
        "a create above the bound is refused"
    );
    assert_eq!(s.last_zxid, 4);
    s.handle(T0, Input::Apply(create_txn(5, "/b", b"b")));
    assert_eq!(s.tree.get("/b").map(|n| n.mzxid()), Some(5));
}

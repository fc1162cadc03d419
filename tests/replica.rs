//! Three [`Replica`]s (the Zab core and the state machine glued into ensemble members),
//! sans-I/O and deterministic: an in-test FIFO bus carries their messages, in-memory
//! storage executes their storage effects, and clients are server inputs. What it
//! shows, end to end through Zab: a follower's client's write is on every member with
//! the same Stat; a learner's sync makes its client's next read see what the leader
//! had sequenced; a session created on a follower moves to another member
//! (REVALIDATE) and stays alive through that member's PING echoes; a write
//! acknowledged before the leader crashed survives the re-election, and the old
//! leader restarts from its storage and catches up; a session the leader expires loses
//! its ephemerals on every member.

use bytes::{Bytes, BytesMut};
use jute::*;
use keel::member::replica::{Effect, Replica};
use keel::proto::opcode as op;
use keel::proto::wire::decode_request;
use keel::server::{Input, Role};
use keel::zab::message::{Channel, Message};
use keel::zab::quorum::QuorumVerifier;
use keel::zab::storage::{read_for_diff, MemStorage, ZabStorage};
use keel::zab::{Action, Config, Sid, Txn, Zxid};
use std::collections::{HashMap, HashSet, VecDeque};

#[path = "support/sansio.rs"]
mod sansio;
#[path = "support/zab_storage.rs"]
mod zab_storage;
use sansio::{connected, create_request, decode, new_session, Got};

const T0: u64 = 1_700_000_000_000;
/// Zab's tickTime, ms (the server's session buckets use sansio's 2 s).
const ZAB_TICK_MS: u64 = 100;
/// What `/zookeeper/config` holds on every member (`Config::membership`'s form).
const MEMBERSHIP: &str = "server.1=127.0.0.1:2888:3888:participant\n\
    server.2=127.0.0.1:2889:3889:participant\n\
    server.3=127.0.0.1:2890:3890:participant\nversion=0";
/// How far time moves per step of [`Cluster::advance`], ms.
const STEP_MS: u64 = 50;

enum Event {
    Msg {
        from: Sid,
        to: Sid,
        msg: Message,
    },
    Disconnected {
        sid: Sid,
        peer: Sid,
    },
    LogRead {
        sid: Sid,
        peer: Sid,
        after: Zxid,
        txns: Option<Vec<Txn>>,
    },
}

struct Node {
    replica: Option<Replica>,
    storage: MemStorage,
    /// What each client connection received, decoded.
    got: HashMap<u64, Vec<Got>>,
}

/// Members 1..=3 and the bus between them.
struct Cluster {
    nodes: Vec<Node>,
    now: u64,
    events: VecDeque<Event>,
    /// Open quorum connections, (learner, leader) or either way.
    conns: HashSet<(Sid, Sid)>,
    /// How learners were synced: DIFF, TRUNC, SNAP packets sent.
    syncs: HashMap<&'static str, usize>,
    /// Whether leaders SNAP every learner (no DIFF from memory or the log).
    snap_only: bool,
    /// Learners whose next SNAP is made fuzzy, as a ZooKeeper leader's can be: see
    /// [`Cluster::fuzz_snap`]. Counts the SNAPs rewritten.
    fuzzy_snap_to: HashSet<Sid>,
    fuzzed: usize,
    /// Read-only mode for members started from now on: `Some(local_sessions_enabled)`
    /// turns it on (`-Dreadonlymode.enabled=true`) with that zoo.cfg setting.
    read_only: Option<bool>,
}

fn key(a: Sid, b: Sid) -> (Sid, Sid) {
    (a.min(b), a.max(b))
}

fn config(sid: Sid, snap_only: bool) -> Config {
    let mut c = Config::new(sid, QuorumVerifier::new([1, 2, 3], []), ZAB_TICK_MS, 10, 5);
    if snap_only {
        // No in-memory window and no log reads: a learner behind gets SNAP.
        c.commit_log_count = 0;
        c.snapshot_size_factor = -1.0;
    }
    c
}

impl Cluster {
    fn new() -> Cluster {
        Cluster::with(false)
    }

    fn with(snap_only: bool) -> Cluster {
        Cluster::build(snap_only, None)
    }

    /// Members with read-only mode on, and `localSessionsEnabled` as given.
    fn read_only(local_sessions_enabled: bool) -> Cluster {
        Cluster::build(false, Some(local_sessions_enabled))
    }

    fn build(snap_only: bool, read_only: Option<bool>) -> Cluster {
        let mut c = Cluster {
            nodes: Vec::new(),
            now: T0,
            events: VecDeque::new(),
            conns: HashSet::new(),
            syncs: HashMap::new(),
            snap_only,
            fuzzy_snap_to: HashSet::new(),
            fuzzed: 0,
            read_only,
        };
        for _ in 1..=3 {
            c.nodes.push(Node {
                replica: None,
                storage: MemStorage::new(),
                got: HashMap::new(),
            });
        }
        for sid in 1..=3 {
            c.start(sid);
        }
        c
    }

    fn node(&mut self, sid: Sid) -> &mut Node {
        &mut self.nodes[sid as usize - 1]
    }

    fn replica(&self, sid: Sid) -> &Replica {
        self.nodes[sid as usize - 1]
            .replica
            .as_ref()
            .expect("member is up")
    }

    fn alive(&self, sid: Sid) -> bool {
        self.nodes[sid as usize - 1].replica.is_some()
    }

    /// Starts (or restarts) `sid` from what its storage holds.
    fn start(&mut self, sid: Sid) {
        let now = self.now;
        let snap_only = self.snap_only;
        let read_only = self.read_only;
        let node = self.node(sid);
        let recovered = node.storage.recover();
        let (_, snapshot) = node.storage.snapshot();
        let settings = keel::server::Settings {
            local_sessions_enabled: read_only.unwrap_or(false),
            local_sessions_upgrading_enabled: read_only.unwrap_or(false),
            ..sansio::logged_settings()
        };
        let (mut replica, effects) = Replica::new(
            config(sid, snap_only),
            settings,
            recovered,
            &snapshot,
            Bytes::from_static(MEMBERSHIP.as_bytes()),
            now,
            sid,
        )
        .expect("replica starts");
        if read_only.is_some() {
            replica.enable_read_only_mode(ZAB_TICK_MS);
        }
        node.replica = Some(replica);
        node.got.clear();
        self.execute(sid, effects);
    }

    /// Power loss of `sid`: its process is gone, unsynced appends are lost, and its
    /// peers see their connections to it break.
    fn crash(&mut self, sid: Sid) {
        let node = self.node(sid);
        node.replica = None;
        node.storage.crash();
        for peer in 1..=3 {
            if peer != sid {
                self.break_conn(sid, peer);
            }
        }
        self.events.retain(|e| match e {
            Event::Msg { to, .. } | Event::Disconnected { sid: to, .. } => *to != sid,
            Event::LogRead { sid: s, .. } => *s != sid,
        });
    }

    fn break_conn(&mut self, a: Sid, b: Sid) {
        if !self.conns.remove(&key(a, b)) {
            return;
        }
        self.events.retain(|e| match e {
            Event::Msg { from, to, msg } => {
                msg.channel() == Channel::Election || key(*from, *to) != key(a, b)
            }
            _ => true,
        });
        for (s, p) in [(a, b), (b, a)] {
            if self.alive(s) {
                self.events
                    .push_back(Event::Disconnected { sid: s, peer: p });
            }
        }
    }

    fn execute(&mut self, sid: Sid, effects: Vec<Effect>) {
        for e in effects {
            match e {
                Effect::Zab(a) => self.execute_action(sid, a),
                Effect::Client { conn, out } => self
                    .node(sid)
                    .got
                    .entry(conn)
                    .or_default()
                    .push(decode(out)),
                Effect::Storage(_) => {}
                Effect::Halt { reason } => panic!("member {sid} halted: {reason}"),
            }
        }
    }

    fn execute_action(&mut self, sid: Sid, a: Action) {
        let Err(a) = zab_storage::execute(&mut self.node(sid).storage, a) else {
            return;
        };
        match a {
            Action::Send { to, msg } => {
                let kind = match msg {
                    Message::Diff { .. } => Some("diff"),
                    Message::Trunc { .. } => Some("trunc"),
                    Message::Snap { .. } => Some("snap"),
                    _ => None,
                };
                if let Some(kind) = kind {
                    *self.syncs.entry(kind).or_default() += 1;
                }
                if msg.channel() == Channel::Election {
                    if self.alive(to) {
                        self.events.push_back(Event::Msg { from: sid, to, msg });
                    }
                    return;
                }
                if matches!(
                    msg,
                    Message::FollowerInfo { .. } | Message::ObserverInfo { .. }
                ) {
                    self.break_conn(sid, to);
                    if !self.alive(to) {
                        self.events.push_back(Event::Disconnected { sid, peer: to });
                        return;
                    }
                    self.conns.insert(key(sid, to));
                }
                if self.conns.contains(&key(sid, to)) {
                    for msg in self.fuzz_snap(sid, to, msg) {
                        self.events.push_back(Event::Msg { from: sid, to, msg });
                    }
                }
            }
            Action::CloseConnection { peer } => self.break_conn(sid, peer),
            Action::ReadLog {
                peer,
                after,
                upto,
                snapshot_size_factor,
            } => {
                let txns =
                    read_for_diff(&self.node(sid).storage, after, upto, snapshot_size_factor);
                self.events.push_back(Event::LogRead {
                    sid,
                    peer,
                    after,
                    txns,
                });
            }
            other => panic!("member {sid}: the replica returned {other:?}"),
        }
    }

    /// A SNAP at zxid Z from `leader` to a learner in `fuzzy_snap_to` becomes what a
    /// ZooKeeper leader can send (LearnerHandler serializes its tree while it applies
    /// txns): the same tree, labelled Z - 1, followed by the PROPOSAL and COMMIT of txn
    /// Z, which that tree already holds. Other messages pass unchanged.
    fn fuzz_snap(&mut self, leader: Sid, to: Sid, msg: Message) -> Vec<Message> {
        let Message::Snap { zxid, snapshot } = msg else {
            return vec![msg];
        };
        if !self.fuzzy_snap_to.remove(&to) {
            return vec![Message::Snap { zxid, snapshot }];
        }
        let txn = self
            .node(leader)
            .storage
            .log()
            .iter()
            .find(|t| t.zxid == zxid)
            .expect("the leader logged the SNAP's last txn")
            .data
            .clone();
        assert_ne!(zxid as u32, 0, "txn Z - 1 is in Z's epoch");
        self.fuzzed += 1;
        vec![
            Message::Snap {
                zxid: zxid - 1,
                snapshot,
            },
            Message::Proposal { zxid, txn },
            Message::Commit { zxid },
        ]
    }

    /// Delivers every event and syncs every log until nothing moves.
    fn pump(&mut self) {
        for _ in 0..100_000 {
            let now = self.now;
            if let Some(ev) = self.events.pop_front() {
                let (sid, effects) = match ev {
                    Event::Msg { from, to, msg } => match self.node(to).replica.as_mut() {
                        Some(r) => (to, r.message(now, from, msg)),
                        None => continue,
                    },
                    Event::Disconnected { sid, peer } => match self.node(sid).replica.as_mut() {
                        Some(r) => (sid, r.disconnected(now, peer)),
                        None => continue,
                    },
                    Event::LogRead {
                        sid,
                        peer,
                        after,
                        txns,
                    } => match self.node(sid).replica.as_mut() {
                        Some(r) => (sid, r.log_read(now, peer, after, txns)),
                        None => continue,
                    },
                };
                self.execute(sid, effects);
                continue;
            }
            // A leader writes a SNAP in steps between its other inputs.
            let sending = (1..=3).find(|&s| self.alive(s) && self.replica(s).snap_sending());
            if let Some(sid) = sending {
                let effects = self
                    .node(sid)
                    .replica
                    .as_mut()
                    .expect("alive")
                    .snap_step(now);
                self.execute(sid, effects);
                continue;
            }
            let unsynced = (1..=3).find(|&s| self.alive(s) && self.node(s).storage.has_unsynced());
            let Some(sid) = unsynced else {
                return;
            };
            let node = self.node(sid);
            let zxid = node.storage.sync();
            let effects = node.replica.as_mut().expect("alive").durable(now, zxid);
            self.execute(sid, effects);
        }
        panic!("the cluster never went quiet");
    }

    /// Lets `ms` pass in steps, ticking every member.
    fn advance(&mut self, ms: u64) {
        let end = self.now + ms;
        while self.now < end {
            self.now += STEP_MS;
            let now = self.now;
            for sid in 1..=3 {
                if let Some(r) = self.node(sid).replica.as_mut() {
                    let effects = r.tick(now);
                    self.execute(sid, effects);
                }
            }
            self.pump();
        }
    }

    /// Waits (at most 30 s) until one live member leads and every other live member
    /// serves as its learner; returns the leader.
    fn settle(&mut self) -> Sid {
        for _ in 0..600 {
            self.advance(STEP_MS);
            let live: Vec<Sid> = (1..=3).filter(|&s| self.alive(s)).collect();
            let leaders: Vec<Sid> = live
                .iter()
                .copied()
                .filter(|&s| matches!(self.replica(s).server().role(), Role::Leader { .. }))
                .collect();
            let learners = live
                .iter()
                .filter(|&&s| self.replica(s).server().role() == Role::Learner)
                .count();
            if leaders.len() == 1 && learners + 1 == live.len() {
                return leaders[0];
            }
        }
        panic!("no leader with every member serving");
    }

    fn client(&mut self, sid: Sid, input: Input) {
        let now = self.now;
        let effects = self
            .node(sid)
            .replica
            .as_mut()
            .expect("alive")
            .client(now, input);
        self.execute(sid, effects);
    }

    /// The owner session of `sid`'s ephemeral `path`, if it holds `path`.
    fn owner_of(&self, sid: Sid, path: &str) -> Option<i64> {
        let tree = &self.replica(sid).server().tree;
        tree.get(path).map(|n| n.ephemeral_owner())
    }

    /// A PING from the client on `sid`'s connection `conn`.
    fn ping(&mut self, sid: Sid, conn: u64) {
        let req = Input::Request {
            conn,
            xid: -2,
            opcode: op::PING,
            req: keel::proto::Request::Ping,
            body: Bytes::new(),
        };
        self.client(sid, req);
    }

    /// What connection `conn` of `sid` received since the last call.
    fn got(&mut self, sid: Sid, conn: u64) -> Vec<Got> {
        self.node(sid).got.remove(&conn).unwrap_or_default()
    }

    /// A new session of `timeout_ms` on `sid`'s connection `conn`: its id and password.
    fn connect(&mut self, sid: Sid, conn: u64, timeout_ms: i32) -> (i64, Bytes) {
        self.client(sid, connected(conn));
        self.client(sid, new_session(conn, timeout_ms));
        self.pump();
        match self.got(sid, conn).as_slice() {
            [Got::Connected {
                session_id, passwd, ..
            }] if *session_id != 0 => (*session_id, passwd.clone()),
            other => panic!("handshake on {sid} got {other:?}"),
        }
    }

    /// Reconnects session `session_id` on `sid`'s connection `conn`.
    fn resume(&mut self, sid: Sid, conn: u64, session_id: i64, passwd: &Bytes) -> Vec<Got> {
        self.client(sid, connected(conn));
        let req = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            time_out_ms: 30000,
            session_id,
            passwd: passwd.clone(),
            read_only: false,
        };
        self.client(sid, Input::Handshake { conn, req });
        self.pump();
        self.got(sid, conn)
    }

    /// Sends a request as the client's bytes (the record after the header), without
    /// pumping.
    fn send<R: Record>(&mut self, sid: Sid, conn: u64, xid: i32, opcode: i32, record: &R) {
        let mut b = BytesMut::new();
        record.encode(&mut b);
        let body = b.freeze();
        let req = decode_request(opcode, &body).expect("decodes");
        self.client(
            sid,
            Input::Request {
                conn,
                xid,
                opcode,
                req,
                body,
            },
        );
    }

    /// A create of `path` with `data` (flags: 0 persistent, 1 ephemeral); its reply.
    fn create(
        &mut self,
        sid: Sid,
        conn: u64,
        xid: i32,
        path: &str,
        data: &[u8],
        flags: i32,
    ) -> Got {
        self.send(
            sid,
            conn,
            xid,
            op::CREATE,
            &create_request(path, data, flags),
        );
        self.pump();
        self.reply(sid, conn, xid)
    }

    /// The reply with `xid` among what `conn` received.
    fn reply(&mut self, sid: Sid, conn: u64, xid: i32) -> Got {
        self.got(sid, conn)
            .into_iter()
            .find(|g| matches!(g, Got::Reply { xid: x, .. } if *x == xid))
            .unwrap_or_else(|| panic!("no reply {xid} on member {sid} conn {conn}"))
    }

    /// getData of `path` by `sid`'s client `conn`: its data and Stat, or the error.
    fn get(&mut self, sid: Sid, conn: u64, xid: i32, path: &str) -> Result<(Bytes, Stat), i32> {
        let req = PathWatchRequest {
            path: path.into(),
            watch: false,
        };
        self.send(sid, conn, xid, op::GET_DATA, &req);
        self.pump();
        decode_get(self.reply(sid, conn, xid))
    }
}

fn decode_get(got: Got) -> Result<(Bytes, Stat), i32> {
    match got {
        Got::Reply { err: 0, body, .. } => {
            let r: GetDataResponse = decode_all(&body).expect("GetDataResponse");
            Ok((r.data.unwrap_or_default(), r.stat))
        }
        Got::Reply { err, .. } => Err(err),
        other => panic!("not a reply: {other:?}"),
    }
}

fn ok(got: &Got) -> bool {
    matches!(got, Got::Reply { err: 0, .. })
}

fn others(leader: Sid) -> (Sid, Sid) {
    let mut f = (1..=3).filter(|&s| s != leader);
    (f.next().unwrap(), f.next().unwrap())
}

/// Once settled, the leader lists both followers as synced voting learners and each
/// follower names the leader: what `mntr`, `leader` and `zabstate` report.
#[test]
fn a_settled_ensemble_reports_its_leader_and_synced_learners() {
    let mut c = Cluster::new();
    let leader = c.settle();
    let (f1, f2) = others(leader);
    let peer = c.replica(leader).peer();
    assert_eq!(peer.leader(), Some(leader));
    assert_eq!(peer.zab_state(), keel::zab::ZabState::Broadcast);
    let learners: Vec<(Sid, bool, bool)> = peer
        .learners()
        .iter()
        .map(|l| (l.sid, l.observer, l.forwarding))
        .collect();
    let mut want = vec![(f1, false, true), (f2, false, true)];
    want.sort();
    assert_eq!(learners, want);
    for f in [f1, f2] {
        let p = c.replica(f).peer();
        assert_eq!(p.leader(), Some(leader));
        assert_eq!(p.zab_state(), keel::zab::ZabState::Broadcast);
        assert!(p.learners().is_empty() && p.leading_since_ms().is_none());
    }
}

/// The leader counts the syncs it chose by mode (mntr's `zk_diff_count`, which counts
/// DIFF and TRUNC as ZooKeeper's does, and `zk_snap_count`) as the messages it sent
/// show them, and knows each learner's last zxid from its ACKEPOCH (where the sync
/// starts, in its log line): a fresh ensemble DIFFs both followers from zxid 0; a
/// follower restarted after a write is DIFFed from the zxid it had; with SNAP-only
/// leaders the same follower gets SNAP.
#[test]
fn the_leader_counts_the_syncs_it_chose_by_mode() {
    for snap_only in [false, true] {
        let mut c = Cluster::with(snap_only);
        let leader = c.settle();
        let counts = c.replica(leader).sync_counts();
        assert_eq!((counts.diff, counts.trunc, counts.snap), (2, 0, 0));
        let (f, _) = others(leader);
        assert!(c
            .replica(leader)
            .peer()
            .learners()
            .iter()
            .all(|l| l.peer_last_zxid == 0));
        c.connect(f, 1, 30_000);
        assert!(ok(&c.create(f, 1, 1, "/w", b"w", 0)));
        let had = c.replica(f).peer().last_logged();
        c.crash(f);
        c.connect(leader, 2, 30_000);
        assert!(ok(&c.create(leader, 2, 1, "/w2", b"w2", 0)));
        c.syncs.clear();
        c.start(f);
        assert_eq!(c.settle(), leader);
        let counts = c.replica(leader).sync_counts();
        let want = if snap_only { (2, 0, 1) } else { (3, 0, 0) };
        assert_eq!(
            (counts.diff, counts.trunc, counts.snap),
            want,
            "snap_only {snap_only}"
        );
        let sent = if snap_only { "snap" } else { "diff" };
        assert_eq!(c.syncs.get(sent), Some(&1), "{:?}", c.syncs);
        let info = c.replica(leader).peer().learners();
        let l = info
            .iter()
            .find(|l| l.sid == f)
            .expect("the restarted follower");
        assert_eq!(l.peer_last_zxid, had);
    }
}

/// Election; then a follower's client creates a znode, and every member's own client
/// reads it with the same Stat (the txn went follower -> leader -> every member).
#[test]
fn a_followers_write_is_read_on_every_member_with_the_same_stat() {
    let mut c = Cluster::new();
    let leader = c.settle();
    let (f, _) = others(leader);
    c.connect(f, 1, 10_000);
    let created = c.create(f, 1, 1, "/a", b"hello", 0);
    assert!(ok(&created), "{created:?}");
    let mut stats = Vec::new();
    for sid in 1..=3 {
        c.connect(sid, 10, 10_000);
        let (data, stat) = c.get(sid, 10, 1, "/a").expect("/a on every member");
        assert_eq!(&data[..], b"hello");
        stats.push(stat);
    }
    assert!(stats.windows(2).all(|w| w[0] == w[1]), "{stats:?}");
    assert_eq!(
        stats[0].czxid >> 32,
        i64::from(c.replica(leader).peer().epochs().1)
    );
}

/// A learner's client writes through the leader's client and then syncs on a follower
/// before anything travelled: the follower's read queued behind the sync sees the
/// write, because the leader answers the sync (SYNC packet) after the write's COMMIT.
#[test]
fn a_learners_sync_makes_its_next_read_see_what_the_leader_sequenced() {
    let mut c = Cluster::new();
    let leader = c.settle();
    let (f, _) = others(leader);
    c.connect(leader, 1, 10_000);
    c.connect(f, 2, 10_000);
    c.send(leader, 1, 1, op::CREATE, &create_request("/s", b"v", 0));
    c.send(f, 2, 1, op::SYNC, &PathRequest { path: "/".into() });
    c.send(
        f,
        2,
        2,
        op::GET_DATA,
        &PathWatchRequest {
            path: "/s".into(),
            watch: false,
        },
    );
    c.pump();
    let got = c.got(f, 2);
    assert!(
        matches!(got.first(), Some(Got::Reply { xid: 1, err: 0, .. })),
        "the sync is answered first: {got:?}"
    );
    let read = got
        .into_iter()
        .find(|g| matches!(g, Got::Reply { xid: 2, .. }))
        .expect("the read is answered");
    let (data, _) = decode_get(read).expect("the read behind the sync sees /s");
    assert_eq!(&data[..], b"v");
}

/// A settled cluster, its leader, its followers, and a session of 4 s on the first
/// follower's connection 1 (id and password) that created the ephemeral /e.
fn session_with_an_ephemeral() -> (Cluster, Sid, (Sid, Sid), i64, Bytes) {
    let mut c = Cluster::new();
    let leader = c.settle();
    let (f1, f2) = others(leader);
    let (session, passwd) = c.connect(f1, 1, 4000);
    assert!(ok(&c.create(f1, 1, 1, "/e", b"", 1)));
    (c, leader, (f1, f2), session, passwd)
}

/// A session created on one follower, with an ephemeral, reconnects to the other
/// follower: the leader revalidates it (REVALIDATE), the client keeps its session id
/// and ephemeral, and its pings to the new member keep it alive well past its
/// timeout (the member reports it as touched in its PING echoes).
#[test]
fn a_session_moves_to_another_member_and_stays_alive() {
    let (mut c, _, (f1, f2), session, passwd) = session_with_an_ephemeral();
    c.client(f1, Input::Disconnected { conn: 1 });
    let got = c.resume(f2, 2, session, &passwd);
    assert!(
        matches!(got.as_slice(), [Got::Connected { session_id, .. }] if *session_id == session),
        "{got:?}"
    );
    for i in 0..10 {
        c.advance(1000);
        c.ping(f2, 2);
        assert!(
            c.got(f2, 2).iter().all(|g| !matches!(g, Got::Close)),
            "session closed after {i} s"
        );
    }
    c.pump();
    for sid in 1..=3 {
        assert_eq!(c.owner_of(sid, "/e"), Some(session), "member {sid}");
    }
    // The session still writes through its new member.
    assert!(ok(&c.create(f2, 2, 2, "/e2", b"", 0)));
}

/// The leader crashes after a write was acknowledged; the survivors elect a new leader
/// and both hold the write, new writes work, and the old leader restarts from its
/// storage, catches up (by DIFF: its log is a prefix of the new leader's) and serves
/// the same tree.
#[test]
fn a_write_survives_the_leaders_crash_and_the_old_leader_catches_up_by_diff() {
    let (c, _) = crash_and_restart_the_leader(false);
    assert!(c.syncs.get("diff").is_some_and(|&n| n > 0), "{:?}", c.syncs);
    assert_eq!(c.syncs.get("snap"), None, "{:?}", c.syncs);
}

/// As above with leaders that SNAP every learner: the old leader installs the new
/// leader's state (tree and sessions) from the SNAP and serves the same tree.
#[test]
fn a_write_survives_the_leaders_crash_and_the_old_leader_catches_up_by_snap() {
    let (mut c, old) = crash_and_restart_the_leader(true);
    assert!(c.syncs.get("snap").is_some_and(|&n| n > 0), "{:?}", c.syncs);
    let (zxid, _) = c.nodes[old as usize - 1].storage.snapshot();
    assert_ne!(
        zxid, 0,
        "the old leader's storage holds the SNAP it installed"
    );
    // Restarted on that snapshot (the SNAP stream as it arrived), it holds the
    // leader's tree before any sync.
    let want = c.replica(old).server().tree.node_count();
    c.crash(old);
    c.start(old);
    let server = c.replica(old).server();
    assert_eq!(server.last_zxid as u64, zxid);
    assert!(server.tree.get("/w2").is_some(), "the SNAP's write");
    assert_eq!(server.tree.node_count(), want);
}

/// Runs the scenario; returns the cluster and the old leader.
fn crash_and_restart_the_leader(snap_only: bool) -> (Cluster, Sid) {
    let mut c = Cluster::with(snap_only);
    let old = c.settle();
    let (f, _) = others(old);
    let (session, _) = c.connect(f, 1, 30_000);
    assert!(ok(&c.create(f, 1, 1, "/w", b"before", 0)));
    c.crash(old);
    let new = c.settle();
    assert_ne!(new, old);
    let f = (1..=3).find(|&s| s != new && s != old).unwrap();
    for sid in [new, f] {
        c.connect(sid, 20, 10_000);
        let (data, _) = c.get(sid, 20, 1, "/w").expect("/w after the crash");
        assert_eq!(&data[..], b"before", "member {sid}");
    }
    assert!(ok(&c.create(f, 20, 2, "/w2", b"after", 0)));
    c.syncs.clear();
    c.start(old);
    c.settle();
    let mut seen = Vec::new();
    for sid in 1..=3 {
        c.connect(sid, 30, 10_000);
        let w = c.get(sid, 30, 1, "/w").expect("/w");
        let w2 = c.get(sid, 30, 2, "/w2").expect("/w2");
        let server = c.replica(sid).server();
        let count = server.tree.node_count();
        let timeout = server.sessions.get(session).map(|s| s.timeout_ms);
        seen.push((w, w2, count, timeout));
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:?}");
    assert_eq!(seen[0].3, Some(30_000), "the session is on every member");
    (c, old)
}

/// Every member's `/zookeeper/config` holds the membership as ZooKeeper's
/// initConfigInZKDatabase writes it (dataVersion -1, mzxid 0, ctime 0): the leader's
/// since its start, a learner's since its sync. A member that rejoins by SNAP, whose
/// tree then holds the leader's node, writes its own again (mtime of its sync).
#[test]
fn every_member_holds_the_membership_in_zookeeper_config() {
    let mut c = Cluster::with(true);
    let leader = c.settle();
    let config_node = |c: &mut Cluster, sid: Sid, conn: u64| {
        c.connect(sid, conn, 10_000);
        c.get(sid, conn, 1, "/zookeeper/config")
            .expect("/zookeeper/config")
    };
    for sid in 1..=3 {
        let (data, stat) = config_node(&mut c, sid, 10);
        assert_eq!(std::str::from_utf8(&data), Ok(MEMBERSHIP), "member {sid}");
        let fields = (
            stat.version,
            stat.mzxid,
            stat.czxid,
            stat.ctime,
            stat.aversion,
        );
        assert_eq!(fields, (-1, 0, 0, 0, -1), "member {sid}");
        assert_eq!(stat.data_length as usize, MEMBERSHIP.len());
        if sid == leader {
            assert_eq!(stat.mtime as u64, T0, "the leader's is from its start");
        } else {
            assert!(stat.mtime as u64 > T0, "a learner's is from its sync");
        }
    }
    let (f, _) = others(leader);
    c.crash(f);
    // A write it misses, so that the leader (SNAP only) sends it a snapshot.
    c.connect(leader, 11, 10_000);
    assert!(ok(&c.create(leader, 11, 2, "/missed", b"", 0)));
    c.advance(1_000);
    let restarted = c.now;
    c.start(f);
    c.settle();
    assert!(c.syncs.get("snap").is_some_and(|&n| n > 0), "{:?}", c.syncs);
    let (data, stat) = config_node(&mut c, f, 20);
    assert_eq!(std::str::from_utf8(&data), Ok(MEMBERSHIP));
    assert!(
        stat.mtime as u64 > restarted,
        "written at the sync, not the leader's node from the SNAP: {stat:?}"
    );
}

/// A session whose client went away is expired by the leader: its ephemeral is gone on
/// every member, and so is the session.
#[test]
fn a_session_expired_by_the_leader_loses_its_ephemerals_everywhere() {
    let mut c = Cluster::new();
    let leader = c.settle();
    let (f, _) = others(leader);
    let (session, _) = c.connect(f, 1, 4000);
    assert!(ok(&c.create(f, 1, 1, "/x", b"", 1)));
    c.pump();
    for sid in 1..=3 {
        assert!(
            c.replica(sid).server().tree.get("/x").is_some(),
            "member {sid}"
        );
    }
    c.client(f, Input::Disconnected { conn: 1 });
    c.advance(10_000);
    for sid in 1..=3 {
        let r = c.replica(sid).server();
        assert!(r.tree.get("/x").is_none(), "member {sid} still has /x");
        assert!(
            r.sessions.get(session).is_none(),
            "member {sid} has the session"
        );
    }
}

/// A session older than its timeout and kept alive by its client's pings through a
/// follower survives the leader's crash: the new leader gives every session a full
/// timeout from when it starts leading, as ZooKeeper's new leader builds its session
/// tracker (SessionTrackerImpl arms each session at now). The new leader's deadlines
/// are not the ones a learner computed when it applied the createSession txn (a
/// learner never sees its sessions' pings), nor the txn's time. (Found by
/// tests/sim_clients.rs: every failover expired every session older than its timeout.)
#[test]
fn a_live_session_survives_a_leader_failover() {
    let (mut c, leader, (f1, f2), session, passwd) = session_with_an_ephemeral();
    for _ in 0..10 {
        c.advance(1000);
        c.ping(f1, 1);
    }
    c.pump();
    c.crash(leader);
    let new = c.settle();
    assert_ne!(new, leader);
    // The client reconnects well within its timeout, after the new leader's first ticks.
    c.advance(1000);
    let f = if new == f1 { f2 } else { f1 };
    let got = c.resume(f, 2, session, &passwd);
    assert!(
        matches!(got.as_slice(), [Got::Connected { session_id, .. }] if *session_id == session),
        "the session expired at the failover: {got:?}"
    );
    for sid in [new, f] {
        assert_eq!(c.owner_of(sid, "/e"), Some(session), "member {sid}");
    }
}

/// The ERROR lines `f` logs (tracing, on this thread).
fn errors_logged(f: impl FnOnce()) -> String {
    #[derive(Clone, Default)]
    struct Buf(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buf = Buf::default();
    let writer = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::ERROR)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, f);
    let text = buf.0.lock().unwrap().clone();
    String::from_utf8(text).unwrap()
}

/// A learner synced by a fuzzy SNAP (a tree that already holds txns after the SNAP's
/// zxid, as a ZooKeeper leader sends) applies those txns as ZooKeeper does, without
/// refusing them (ZooKeeper ignores their NODEEXISTS and NONODE: DataTree.processTxn),
/// and ends with the leader's tree.
#[test]
fn a_learner_applies_the_txns_a_fuzzy_snap_already_holds_without_refusing_them() {
    let mut c = Cluster::with(true);
    let leader = c.settle();
    let (_, f) = others(leader);
    c.crash(f);
    c.connect(leader, 1, 30_000);
    assert!(ok(&c.create(leader, 1, 1, "/x", b"x", 0)));
    c.fuzzy_snap_to.insert(f);
    let errors = errors_logged(|| {
        c.start(f);
        c.settle();
    });
    assert_eq!(c.fuzzed, 1, "the learner was sent the fuzzy SNAP");
    assert!(!errors.contains("txn did not apply"), "{errors}");
    c.connect(leader, 30, 10_000);
    c.connect(f, 30, 10_000);
    let mut seen = Vec::new();
    for sid in [leader, f] {
        let x = c.get(sid, 30, 1, "/x").expect("/x");
        let server = c.replica(sid).server();
        seen.push((x, server.tree.node_count(), server.last_zxid));
    }
    assert_eq!(seen[0], seen[1], "the learner holds the leader's tree");
}

/// A read-only client's ConnectRequest on `sid`'s connection `conn` (canBeReadOnly set):
/// a new session when `session_id` is 0.
fn connect_read_only(
    c: &mut Cluster,
    sid: Sid,
    conn: u64,
    session_id: i64,
    passwd: &[u8],
) -> Vec<Got> {
    c.client(sid, connected(conn));
    let req = ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 0,
        time_out_ms: 6000,
        session_id,
        passwd: Bytes::copy_from_slice(passwd),
        read_only: true,
    };
    c.client(sid, Input::Handshake { conn, req });
    c.pump();
    c.got(sid, conn)
}

/// `sid`'s role after each step of `ms` ms, until `until` says stop (at most 10 s);
/// returns the time it took.
fn advance_until(c: &mut Cluster, sid: Sid, until: impl Fn(Role) -> bool) -> u64 {
    let start = c.now;
    while c.now - start < 10_000 {
        c.advance(STEP_MS);
        if until(c.replica(sid).server().role()) {
            return c.now - start;
        }
    }
    panic!("member {sid} stayed {:?}", c.replica(sid).server().role());
}

/// A member left alone serves read-only clients once it has been LOOKING for the grace
/// period (max(2000 ms, tickTime): ZooKeeper's QuorumPeer), from its last applied
/// state, in sessions of its own that never reach the replicated table; it refuses
/// writes and sync with NOTREADONLY and every other client by closing, and when the
/// quorum is back it stops: its clients are disconnected and it serves read-write.
#[test]
fn a_member_without_its_quorum_serves_read_only_clients_until_the_quorum_is_back() {
    let mut c = Cluster::read_only(true);
    let leader = c.settle();
    let (s, other) = others(leader);
    let (session, passwd) = c.connect(s, 1, 6000);
    assert!(ok(&c.create(s, 1, 1, "/a", b"kept", 0)));
    // With local sessions the session is local to its member until an ephemeral
    // upgrades it; a global one is what read-only mode refuses below.
    assert!(ok(&c.create(s, 1, 2, "/owner", b"", 1)));
    assert!(c.replica(s).server().sessions.get(session).is_some());
    let applied = c.replica(s).server().last_zxid;
    c.crash(leader);
    c.crash(other);
    // The survivor looks for a leader; inside the grace period it serves no one.
    c.advance(1500);
    assert_eq!(c.replica(s).server().role(), Role::NotServing);
    assert_eq!(
        connect_read_only(&mut c, s, 2, 0, &[0; 16]),
        vec![Got::Close]
    );
    let waited = 1500 + advance_until(&mut c, s, |r| r == Role::ReadOnly);
    assert!(
        (2000..=2200).contains(&waited),
        "read-only after {waited} ms of LOOKING"
    );

    // A read-only client: a local session (this member's id in the high byte), the
    // ConnectResponse says readOnly, reads answer from the last applied state.
    let got = connect_read_only(&mut c, s, 3, 0, &[0; 16]);
    let [Got::Connected {
        session_id: ro,
        read_only: true,
        timeout_ms: 6000,
        passwd: ro_passwd,
    }] = got.as_slice()
    else {
        panic!("read-only handshake got {got:?}");
    };
    let (ro, ro_passwd) = (*ro, ro_passwd.clone());
    assert_eq!(ro >> 56, s as i64, "session {ro:#x}");
    assert!(
        c.replica(s).server().sessions.get(ro).is_none(),
        "a read-only session is not global"
    );
    assert_eq!(
        c.get(s, 3, 1, "/a").map(|(d, _)| d),
        Ok(Bytes::from_static(b"kept"))
    );
    for (xid, opcode) in [(2, op::CREATE), (3, op::SYNC)] {
        if opcode == op::CREATE {
            c.send(s, 3, xid, opcode, &create_request("/b", b"", 0));
        } else {
            c.send(s, 3, xid, opcode, &PathRequest { path: "/".into() });
        }
        c.pump();
        assert_eq!(
            c.reply(s, 3, xid),
            Got::Reply {
                xid,
                zxid: applied,
                err: -119,
                body: Bytes::new()
            },
            "opcode {opcode}"
        );
    }
    assert!(c.replica(s).server().tree.get("/b").is_none());
    // A client without canBeReadOnly, and the global session, are refused by closing.
    c.client(s, connected(4));
    c.client(s, new_session(4, 6000));
    assert_eq!(c.got(s, 4), vec![Got::Close]);
    assert_eq!(
        connect_read_only(&mut c, s, 5, session, &passwd),
        vec![Got::Close]
    );
    // The local session resumes on another connection (the old one is closed); a wrong
    // password is told it expired.
    let got = connect_read_only(&mut c, s, 6, ro, &ro_passwd);
    assert!(
        matches!(got.as_slice(), [Got::Connected { session_id, read_only: true, .. }] if *session_id == ro),
        "{got:?}"
    );
    assert_eq!(c.got(s, 3), vec![Got::Close]);
    let got = connect_read_only(&mut c, s, 7, ro, &[1; 16]);
    assert!(
        matches!(
            got.as_slice(),
            [
                Got::Connected {
                    session_id: 0,
                    read_only: true,
                    ..
                },
                Got::Close
            ]
        ),
        "{got:?}"
    );

    // The quorum is back: the read-only server stops, its client is disconnected, and
    // the member serves read-write again; the local session is gone with it.
    c.start(leader);
    c.start(other);
    let back = c.settle();
    assert!(
        matches!(
            c.replica(s).server().role(),
            Role::Learner | Role::Leader { .. }
        ),
        "leader {back}"
    );
    // Closed when the read-only server stops (the later role changes close it again,
    // which the runtime ignores).
    assert_eq!(c.got(s, 6).first(), Some(&Got::Close));
    let got = c.resume(s, 8, ro, &ro_passwd);
    assert!(
        matches!(
            got.as_slice(),
            [
                Got::Connected {
                    session_id: 0,
                    read_only: false,
                    ..
                },
                ..
            ]
        ),
        "{got:?}"
    );
    let (_, _) = c.connect(s, 9, 6000);
    assert!(ok(&c.create(s, 9, 1, "/b", b"", 0)));
}

/// Without `localSessionsEnabled`, ZooKeeper 3.8's read-only server submits a new
/// session's createSession as a global request and refuses it: the client gets a bare
/// reply header (xid 0, the last zxid, NOTREADONLY) and no session (measured on a
/// ZooKeeper ensemble with `-Dreadonlymode.enabled=true`).
#[test]
fn without_local_sessions_a_read_only_member_refuses_new_sessions_with_notreadonly() {
    let mut c = Cluster::read_only(false);
    let leader = c.settle();
    let (s, other) = others(leader);
    c.crash(leader);
    c.crash(other);
    advance_until(&mut c, s, |r| r == Role::ReadOnly);
    let zxid = c.replica(s).server().last_zxid;
    assert_eq!(
        connect_read_only(&mut c, s, 1, 0, &[0; 16]),
        vec![Got::Reply {
            xid: 0,
            zxid,
            err: -119,
            body: Bytes::new()
        }]
    );
}

/// Read-only mode is off unless asked for; and a member whose election ends inside the
/// grace period never turns read-only (the followers of a crashed leader elect again).
#[test]
fn read_only_mode_is_off_by_default_and_waits_out_the_grace_period() {
    let mut c = Cluster::new();
    let leader = c.settle();
    let (s, other) = others(leader);
    c.crash(leader);
    c.crash(other);
    c.advance(5000);
    assert_eq!(c.replica(s).server().role(), Role::NotServing);
    assert_eq!(
        connect_read_only(&mut c, s, 1, 0, &[0; 16]),
        vec![Got::Close]
    );

    let mut c = Cluster::read_only(true);
    let leader = c.settle();
    c.crash(leader);
    for _ in 0..100 {
        c.advance(STEP_MS);
        for sid in (1..=3).filter(|&s| s != leader) {
            assert_ne!(
                c.replica(sid).server().role(),
                Role::ReadOnly,
                "member {sid}"
            );
        }
    }
    let new = c.settle();
    assert_ne!(new, leader);
}

//! One seeded world: `n` [`Replica`]s (exactly the production member: Zab and the state
//! machine) over a simulated network, in-memory storage with seeded fsync latency, and
//! ZooKeeper clients connected to random members. Faults: message delays (FIFO per
//! link, as TCP), quorum connection breaks that lose what was in flight, partitions,
//! crashes (of one member, or power loss of all) that lose unsynced writes and restart
//! from storage, slow fsyncs, client connection drops, clients giving up their
//! sessions. Every client operation's invocation and response is recorded in
//! [`World::history`] for tests/sim_clients/check.rs.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{Hash, Hasher};

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
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::model::{ZnodeOp, ZnodeRet};
use crate::sansio::{self, decode, Got};
use crate::zab_storage;

const T0: u64 = 1_700_000_000_000;
/// Zab's tickTime, ms (the server's session buckets use sansio's 2 s).
const ZAB_TICK_MS: u64 = 100;
/// How often each member is ticked, ms.
const TICK_EVERY_MS: u64 = 50;
/// How often the clients act and the trees are compared, ms.
const STEP_MS: u64 = 10;
/// The clients' session timeout, ms.
const SESSION_TIMEOUT_MS: i32 = 6_000;
/// How much earlier than its timeout after the client last heard from a member a
/// session may expire, ms: the leader's last touch of a session whose member lost the
/// leader comes before that member notices (syncLimit x tickTime) and stops serving,
/// plus message delays.
const EXPIRY_SLACK_MS: u64 = 1_000;
/// The calm phase lasts at least this long, ms: every session given up in the faulty
/// phase has expired by then (its timeout, rounded up to the server's 2 s buckets,
/// plus the close's commit).
const CALM_MIN_MS: u64 = SESSION_TIMEOUT_MS as u64 + 5_000;
/// A client gives up on a reply (or a handshake) after this long and drops its
/// connection, as ZooKeeper's client does after 2/3 of the session timeout without
/// hearing from its server.
const CLIENT_GIVE_UP_MS: u64 = 4_000;
/// A connected client that sent nothing for this long pings.
const PING_EVERY_MS: u64 = 1_500;

/// The znodes the clients work on.
pub const PATHS: [&str; 3] = ["/r0", "/r1", "/r2"];

/// What a seed's world looks like.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Voting members.
    pub members: usize,
    /// Clients.
    pub clients: usize,
    /// How many of [`PATHS`] the clients use.
    pub paths: usize,
    /// Faulty phase length, ms of simulated time.
    pub faulty_ms: u64,
    /// A deliberately broken storage for the checker's teeth test: members are told
    /// their appends are durable at once, while the real fsync (which a crash waits
    /// for) comes later.
    pub lying_fsync: bool,
    /// A follower's ACKs are sent by its storage once the txn is synced, as keel's
    /// storage thread sends them by default ([`keel::zab::Config::storage_acks`],
    /// `keel.storageAcks`); false: by the core when it hears of the sync.
    pub storage_acks: bool,
    /// A deliberately broken storage for the checker's teeth test: with
    /// [`Options::storage_acks`], a follower's storage sends its ACKs when the txn is
    /// appended, before the fsync (which a crash waits for).
    pub acks_before_fsync: bool,
}

impl Options {
    /// A member's fsync latency range when no fault slows it, ms: fast, except with
    /// [`Options::lying_fsync`] and [`Options::acks_before_fsync`], where a slow fsync
    /// widens the window a crash loses.
    fn normal_fsync_ms(&self) -> (u64, u64) {
        if self.lying_fsync || self.acks_before_fsync {
            (200, 800)
        } else {
            (0, 2)
        }
    }
}

/// One recorded client history event.
#[derive(Clone, Debug)]
pub enum Hist {
    /// `thread` invoked `op` on `path`; `linearizable` if the op is a write or a read
    /// behind a sync (ZooKeeper promises linearizability only for those).
    Invoke {
        thread: u64,
        path: usize,
        op: ZnodeOp,
        linearizable: bool,
    },
    /// `thread`'s op returned `ret`.
    Return { thread: u64, ret: ZnodeRet },
}

enum Event {
    Msg {
        from: Sid,
        to: Sid,
        msg: Message,
        /// The quorum connection's generation (`None` on the election channel).
        generation: Option<u64>,
        incarnation: u64,
    },
    Disconnected {
        sid: Sid,
        peer: Sid,
        incarnation: u64,
    },
    LogRead {
        sid: Sid,
        peer: Sid,
        after: Zxid,
        txns: Option<Vec<Txn>>,
        incarnation: u64,
    },
    Sync {
        sid: Sid,
        point: usize,
        incarnation: u64,
    },
    Tick {
        sid: Sid,
        incarnation: u64,
    },
    Restart {
        sid: Sid,
    },
    Heal {
        pairs: Vec<(Sid, Sid)>,
    },
    FsyncNormal {
        sid: Sid,
    },
    /// The next step of the SNAPs `sid` writes, between other events.
    SnapStep {
        sid: Sid,
        incarnation: u64,
    },
}

struct Member {
    replica: Option<Replica>,
    storage: MemStorage,
    incarnation: u64,
    /// A sync in flight.
    syncing: bool,
    /// A [`Event::SnapStep`] scheduled.
    snap_stepping: bool,
    /// The fsync latency range, ms.
    fsync_ms: (u64, u64),
    /// The server's role when last looked at (its changes are traced).
    role: Option<Role>,
    /// ACKs the storage sends once their txn is synced ([`Options::storage_acks`]):
    /// zxid, to whom, and on which connection (generation) the core asked for it.
    storage_acks: Vec<(Zxid, Sid, u64)>,
}

/// What a client waits for.
#[derive(Clone, Debug)]
enum Waiting {
    Nothing,
    Handshake {
        since: u64,
    },
    Reply {
        since: u64,
        xid: i32,
        path: usize,
        op: ZnodeOp,
        /// A sync sent before this read, not yet answered.
        sync_xid: Option<i32>,
    },
    /// The reply to the create of an ephemeral znode (outside the checked histories:
    /// see [`World::ephemerals`]).
    Ephemeral {
        since: u64,
        xid: i32,
        path: String,
    },
}

struct Client {
    /// The stateright thread this client's ops are recorded under; a new one after an
    /// op whose outcome is unknown (it stays in flight for good).
    thread: u64,
    member: Option<Sid>,
    conn: u64,
    session_id: i64,
    passwd: Bytes,
    /// The highest zxid this session has seen in a reply header.
    last_zxid: i64,
    /// The highest mzxid this session has seen per path (written or read).
    seen_mzxid: [i64; PATHS.len()],
    waiting: Waiting,
    next_xid: i32,
    next_op_at: u64,
    last_sent: u64,
    /// When this session last heard from a member (a reply or its handshake).
    last_heard: u64,
}

/// The simulated ensemble and its clients.
pub struct World {
    opts: Options,
    now: u64,
    rng: StdRng,
    members: Vec<Member>,
    events: BTreeMap<(u64, u64), Event>,
    seq: u64,
    /// Open quorum connections (smaller sid first) and their generation.
    conns: HashMap<(Sid, Sid), u64>,
    next_generation: u64,
    /// When the last message on each (from, to, election?) link arrives (FIFO).
    link_at: HashMap<(Sid, Sid, bool), u64>,
    blocked: HashSet<(Sid, Sid)>,
    clients: Vec<Client>,
    /// Client connection ids to client indexes.
    conn_client: HashMap<u64, usize>,
    next_conn: u64,
    next_thread: u64,
    next_value: u32,
    faults_on: bool,
    /// Each client op's invocation and response, in real-time order.
    pub history: Vec<Hist>,
    /// Every acknowledged write: path, data version, mzxid.
    pub acked: Vec<(usize, i32, i64)>,
    /// Every ephemeral znode whose create was acknowledged, and its session.
    pub ephemerals: Vec<(String, i64)>,
    /// The sessions that expired (a reconnect was refused) or that their client gave
    /// up (it starts a new one; the old one must expire).
    pub gone_sessions: HashSet<i64>,
    /// The digest first seen for each applied zxid, and by whom.
    digests: HashMap<i64, (i64, Sid)>,
    /// A recent trace, for failure reports.
    trace: Vec<String>,
    /// Every trace line, hashed.
    trace_hash: DefaultHasher,
    /// Print every trace line as it happens (`KEEL_SIM_TRACE=1`).
    print_trace: bool,
    failure: Option<String>,
    /// What happened, counted (for the coverage report: see [`World::stats`]).
    stats: BTreeMap<&'static str, u64>,
    /// The epochs in which a leader was established.
    epochs: HashSet<u32>,
}

/// A tracing span naming the member and the simulated time, for the members' own logs
/// (`KEEL_SIM_LOG`, a tracing filter such as `keel=debug`).
fn member_span(sid: Sid, now: u64) -> tracing::span::EnteredSpan {
    tracing::info_span!(target: "keel::sim", "m", sid, t = now.saturating_sub(T0)).entered()
}

fn key(a: Sid, b: Sid) -> (Sid, Sid) {
    (a.min(b), a.max(b))
}

fn encode<R: Record>(r: &R) -> Bytes {
    let mut b = BytesMut::new();
    r.encode(&mut b);
    b.freeze()
}

fn value_of(data: &[u8]) -> u32 {
    u32::from_be_bytes(data.try_into().expect("4-byte values"))
}

/// What `/zookeeper/config` holds for an ensemble of `n` participants (the text
/// `Config::membership` writes; the ports are never dialled here).
fn membership(n: Sid) -> Bytes {
    let mut text = String::new();
    for sid in 1..=n {
        text.push_str(&format!(
            "server.{sid}=127.0.0.1:{}:{}:participant\n",
            2888 + sid as u32,
            3888 + sid as u32
        ));
    }
    text.push_str("version=0");
    Bytes::from(text)
}

impl World {
    pub fn new(seed: u64, opts: Options) -> World {
        let mut w = World {
            opts,
            now: T0,
            rng: StdRng::seed_from_u64(seed),
            members: Vec::new(),
            events: BTreeMap::new(),
            seq: 0,
            conns: HashMap::new(),
            next_generation: 1,
            link_at: HashMap::new(),
            blocked: HashSet::new(),
            clients: Vec::new(),
            conn_client: HashMap::new(),
            next_conn: 1,
            next_thread: 0,
            next_value: 1,
            faults_on: true,
            history: Vec::new(),
            acked: Vec::new(),
            ephemerals: Vec::new(),
            gone_sessions: HashSet::new(),
            digests: HashMap::new(),
            trace: Vec::new(),
            trace_hash: DefaultHasher::new(),
            print_trace: std::env::var("KEEL_SIM_TRACE").is_ok_and(|v| v == "1"),
            failure: None,
            stats: BTreeMap::new(),
            epochs: HashSet::new(),
        };
        for _ in 0..opts.members {
            w.members.push(Member {
                replica: None,
                storage: MemStorage::new(),
                incarnation: 0,
                syncing: false,
                snap_stepping: false,
                fsync_ms: opts.normal_fsync_ms(),
                role: None,
                storage_acks: Vec::new(),
            });
        }
        for sid in 1..=opts.members as Sid {
            w.start(sid);
        }
        for _ in 0..opts.clients {
            let thread = w.new_thread();
            let at = T0 + w.rng.gen_range(0..2_000);
            w.clients.push(Client {
                thread,
                member: None,
                conn: 0,
                session_id: 0,
                passwd: Bytes::from_static(&[0; 16]),
                last_zxid: 0,
                seen_mzxid: [0; PATHS.len()],
                waiting: Waiting::Nothing,
                next_xid: 1,
                next_op_at: at,
                last_sent: at,
                last_heard: at,
            });
        }
        w
    }

    fn count(&mut self, what: &'static str) {
        *self.stats.entry(what).or_default() += 1;
    }

    /// What happened in this world, counted: faults, client ops and their outcomes,
    /// leader epochs.
    pub fn stats(&self) -> BTreeMap<&'static str, u64> {
        let mut s = self.stats.clone();
        s.insert("leader epochs", self.epochs.len() as u64);
        s
    }

    fn new_thread(&mut self) -> u64 {
        self.next_thread += 1;
        self.next_thread
    }

    fn log(&mut self, line: impl FnOnce() -> String) {
        if self.trace.len() >= 400 {
            self.trace.drain(..200);
        }
        let l = format!("{:>7} {}", self.now - T0, line());
        l.hash(&mut self.trace_hash);
        if self.print_trace {
            eprintln!("{l}");
        }
        self.trace.push(l);
    }

    /// The last trace lines.
    pub fn trace_tail(&self) -> String {
        let from = self.trace.len().saturating_sub(60);
        self.trace[from..].join("\n")
    }

    fn fail(&mut self, e: String) {
        if self.failure.is_none() {
            self.log(|| format!("FAIL {e}"));
            self.failure = Some(e);
        }
    }

    /// The first invariant broken, if any.
    pub fn failure(&self) -> Option<&String> {
        self.failure.as_ref()
    }

    fn at(&mut self, at: u64, e: Event) {
        self.seq += 1;
        self.events.insert((at, self.seq), e);
    }

    fn m(&mut self, sid: Sid) -> &mut Member {
        &mut self.members[sid as usize - 1]
    }

    fn alive(&self, sid: Sid) -> bool {
        self.members[sid as usize - 1].replica.is_some()
    }

    fn inc(&self, sid: Sid) -> u64 {
        self.members[sid as usize - 1].incarnation
    }

    fn all(&self) -> impl Iterator<Item = Sid> {
        1..=self.opts.members as Sid
    }

    /// Every member's replica that is up, with its sid.
    pub fn replicas(&self) -> Vec<(Sid, &Replica)> {
        self.all()
            .filter_map(|s| Some((s, self.replica(s)?)))
            .collect()
    }

    /// The replica of `sid`, if it is up.
    pub fn replica(&self, sid: Sid) -> Option<&Replica> {
        self.members[sid as usize - 1].replica.as_ref()
    }

    fn start(&mut self, sid: Sid) {
        let now = self.now;
        let n = self.opts.members as Sid;
        let mut config = Config::new(sid, QuorumVerifier::new(1..=n, []), ZAB_TICK_MS, 10, 5);
        config.storage_acks = self.opts.storage_acks;
        // SNAP steps of a few znodes: the clients' txns apply between them, so a SNAP is
        // fuzzy as a loaded leader's is.
        let step_bytes = self.rng.gen_range(1..400);
        let m = self.m(sid);
        let recovered = m.storage.recover();
        let (_, snapshot) = m.storage.snapshot();
        let (mut replica, effects) = Replica::new(
            config,
            sansio::logged_settings(),
            recovered,
            &snapshot,
            membership(n),
            now,
            sid,
        )
        .expect("replica starts");
        replica.set_snap_step_bytes(step_bytes);
        m.replica = Some(replica);
        m.incarnation += 1;
        m.syncing = false;
        m.snap_stepping = false;
        let incarnation = m.incarnation;
        self.log(|| format!("start {sid}"));
        let jitter = self.rng.gen_range(1..TICK_EVERY_MS);
        self.at(now + jitter, Event::Tick { sid, incarnation });
        self.execute(sid, effects);
    }

    /// Power loss of `sid`: unsynced appends are lost, its peers' connections to it
    /// break, and its clients' connections reset.
    fn crash(&mut self, sid: Sid) {
        self.log(|| format!("crash {sid}"));
        self.count("crashes");
        let m = self.m(sid);
        m.replica = None;
        m.storage.crash();
        m.syncing = false;
        m.storage_acks.clear();
        for peer in self.all().collect::<Vec<_>>() {
            if peer != sid {
                self.break_conn(sid, peer);
            }
        }
        for c in 0..self.clients.len() {
            if self.clients[c].member == Some(sid) {
                self.client_lost(c);
            }
        }
    }

    fn break_conn(&mut self, a: Sid, b: Sid) {
        if self.conns.remove(&key(a, b)).is_none() {
            return;
        }
        self.log(|| format!("break {a}-{b}"));
        self.count("quorum connection breaks");
        for (s, p) in [(a, b), (b, a)] {
            if self.alive(s) {
                self.disconnect_later(s, p, 1..20);
            }
        }
    }

    /// Sends the ACKs `sid`'s storage holds for txns up to `zxid`, each on the
    /// connection it was asked for (dropped if that one is gone or replaced).
    fn send_storage_acks(&mut self, sid: Sid, zxid: Zxid) {
        let m = self.m(sid);
        let synced = m.storage_acks.iter().take_while(|a| a.0 <= zxid).count();
        let acks: Vec<(Zxid, Sid, u64)> = m.storage_acks.drain(..synced).collect();
        for (z, to, generation) in acks {
            if self.conns.get(&key(sid, to)) == Some(&generation) {
                self.log(|| format!("storage of {sid} -> {to}: ACK {z:#x}"));
                self.count("storage ACKs");
                self.send(sid, to, Message::Ack { zxid: z });
            }
        }
    }

    /// `sid` learns, after a delay in `ms`, that its connection to `peer` is gone.
    fn disconnect_later(&mut self, sid: Sid, peer: Sid, ms: std::ops::Range<u64>) {
        let at = self.now + self.rng.gen_range(ms);
        let incarnation = self.inc(sid);
        self.at(
            at,
            Event::Disconnected {
                sid,
                peer,
                incarnation,
            },
        );
    }

    fn delay(&mut self) -> u64 {
        if self.faults_on && self.rng.gen_bool(0.03) {
            self.rng.gen_range(20..300)
        } else {
            self.rng.gen_range(1..8)
        }
    }

    fn send(&mut self, from: Sid, to: Sid, msg: Message) {
        let election = msg.channel() == Channel::Election;
        let blocked = self.blocked.contains(&(from, to));
        let generation = if election {
            if blocked || !self.alive(to) {
                return;
            }
            None
        } else {
            if matches!(
                msg,
                Message::FollowerInfo { .. } | Message::ObserverInfo { .. }
            ) {
                self.break_conn(from, to);
                if blocked || !self.alive(to) {
                    self.disconnect_later(from, to, 50..500);
                    return;
                }
                self.next_generation += 1;
                self.conns.insert(key(from, to), self.next_generation);
            }
            match self.conns.get(&key(from, to)).copied() {
                None => return,
                Some(_) if blocked => {
                    self.break_conn(from, to);
                    return;
                }
                Some(g) => Some(g),
            }
        };
        let d = self.delay();
        let link = (from, to, election);
        let at = (self.now + d).max(self.link_at.get(&link).copied().unwrap_or(0));
        self.link_at.insert(link, at);
        let incarnation = self.inc(to);
        self.at(
            at,
            Event::Msg {
                from,
                to,
                msg,
                generation,
                incarnation,
            },
        );
    }

    fn execute(&mut self, sid: Sid, effects: Vec<Effect>) {
        for e in effects {
            if !self.alive(sid) {
                return;
            }
            match e {
                Effect::Zab(a) => self.execute_action(sid, a),
                Effect::Client { conn, out } => self.on_client_output(conn, decode(out)),
                Effect::Storage(_) => {}
                Effect::Halt { reason } => {
                    self.fail(format!("member {sid} halted: {reason}"));
                    self.crash(sid);
                }
            }
        }
        self.trace_role(sid);
        self.schedule_sync(sid);
        self.schedule_snap_step(sid);
    }

    fn schedule_snap_step(&mut self, sid: Sid) {
        let m = &self.members[sid as usize - 1];
        if m.snap_stepping || !m.replica.as_ref().is_some_and(|r| r.snap_sending()) {
            return;
        }
        // Steps apart as a busy leader's are, so that txns apply between them.
        let at = self.now + self.rng.gen_range(1..25);
        let m = self.m(sid);
        m.snap_stepping = true;
        let incarnation = m.incarnation;
        self.at(at, Event::SnapStep { sid, incarnation });
    }

    /// Traces `sid`'s role when it changed.
    fn trace_role(&mut self, sid: Sid) {
        let Some(s) = self.replica(sid).map(|r| r.server()) else {
            return;
        };
        let (role, zxid, sessions) = (s.role(), s.last_zxid, s.sessions.len());
        if self.m(sid).role.replace(role) != Some(role) {
            self.log(|| format!("member {sid} is {role:?} at {zxid:#x} with {sessions} sessions"));
        }
    }

    fn execute_action(&mut self, sid: Sid, a: Action) {
        let appended = match &a {
            Action::AppendTxns { txns, .. } => txns.last().map(|t| t.zxid),
            _ => None,
        };
        match &a {
            // On the connection up now, as the runtime's handle is; none: lost, as a
            // message sent now would be.
            Action::AppendTxns {
                txns,
                ack_to: Some(to),
            } => {
                if let Some(&generation) = self.conns.get(&key(sid, *to)) {
                    let acks = txns.iter().map(|t| (t.zxid, *to, generation));
                    self.m(sid).storage_acks.extend(acks);
                    if self.opts.acks_before_fsync {
                        self.send_storage_acks(sid, Zxid::MAX);
                    }
                }
            }
            Action::TruncateLog { after } => {
                let after = *after;
                self.m(sid).storage_acks.retain(|&(z, _, _)| z <= after);
            }
            Action::InstallSnapshot { .. } => self.m(sid).storage_acks.clear(),
            _ => {}
        }
        let a = match zab_storage::execute(&mut self.m(sid).storage, a) {
            Ok(()) => {
                if let Some(zxid) = appended.filter(|_| self.opts.lying_fsync) {
                    self.send_storage_acks(sid, zxid);
                    let now = self.now;
                    let _span = member_span(sid, now);
                    let r = self.m(sid).replica.as_mut().expect("alive");
                    let effects = r.durable(now, zxid);
                    self.execute(sid, effects);
                }
                return;
            }
            Err(a) => a,
        };
        match a {
            Action::Send { to, msg } => {
                if let Message::Snap { zxid, .. } = &msg {
                    self.count("SNAPs");
                    let applied = self.replica(sid).map_or(0, |r| r.server().last_zxid);
                    if applied > *zxid as i64 {
                        // Txns applied while it was written: a fuzzy SNAP.
                        self.count("SNAPs with txns after their zxid");
                    }
                }
                self.send(sid, to, msg)
            }
            Action::CloseConnection { peer } => self.break_conn(sid, peer),
            Action::ReadLog {
                peer,
                after,
                upto,
                snapshot_size_factor,
            } => {
                let txns = read_for_diff(&self.m(sid).storage, after, upto, snapshot_size_factor);
                let at = self.now + self.rng.gen_range(1..20);
                let incarnation = self.inc(sid);
                self.at(
                    at,
                    Event::LogRead {
                        sid,
                        peer,
                        after,
                        txns,
                        incarnation,
                    },
                );
            }
            other => self.fail(format!("member {sid}: the replica returned {other:?}")),
        }
    }

    fn schedule_sync(&mut self, sid: Sid) {
        let m = &self.members[sid as usize - 1];
        if m.replica.is_none() || m.syncing || !m.storage.has_unsynced() {
            return;
        }
        let (lo, hi) = m.fsync_ms;
        let d = self.rng.gen_range(lo..=hi);
        let at = self.now + d;
        let m = self.m(sid);
        m.syncing = true;
        let point = m.storage.sync_point();
        let incarnation = m.incarnation;
        self.at(
            at,
            Event::Sync {
                sid,
                point,
                incarnation,
            },
        );
    }

    /// Runs one event; false when none is left before `until`.
    fn step(&mut self, until: u64) -> bool {
        let Some((&(at, seq), _)) = self.events.first_key_value() else {
            return false;
        };
        if at > until {
            return false;
        }
        let ev = self.events.remove(&(at, seq)).expect("present");
        self.now = self.now.max(at);
        let now = self.now;
        let live = |w: &World, sid: Sid, inc: u64| w.alive(sid) && w.inc(sid) == inc;
        match ev {
            Event::Msg {
                from,
                to,
                msg,
                generation,
                incarnation,
            } => {
                if !live(self, to, incarnation)
                    || generation.is_some_and(|g| self.conns.get(&key(from, to)) != Some(&g))
                {
                    return true;
                }
                let _span = member_span(to, now);
                let r = self.m(to).replica.as_mut().expect("alive");
                let effects = r.message(now, from, msg);
                self.execute(to, effects);
            }
            Event::Disconnected {
                sid,
                peer,
                incarnation,
            } => {
                if live(self, sid, incarnation) {
                    let _span = member_span(sid, now);
                    let r = self.m(sid).replica.as_mut().expect("alive");
                    let effects = r.disconnected(now, peer);
                    self.execute(sid, effects);
                }
            }
            Event::LogRead {
                sid,
                peer,
                after,
                txns,
                incarnation,
            } => {
                if live(self, sid, incarnation) {
                    let _span = member_span(sid, now);
                    let r = self.m(sid).replica.as_mut().expect("alive");
                    let effects = r.log_read(now, peer, after, txns);
                    self.execute(sid, effects);
                }
            }
            Event::Sync {
                sid,
                point,
                incarnation,
            } => {
                if live(self, sid, incarnation) {
                    let m = self.m(sid);
                    m.syncing = false;
                    let zxid = m.storage.sync_to(point);
                    // The storage's ACKs go before the core hears of the sync.
                    self.send_storage_acks(sid, zxid);
                    let _span = member_span(sid, now);
                    let m = self.m(sid);
                    let effects = m.replica.as_mut().expect("alive").durable(now, zxid);
                    self.execute(sid, effects);
                }
            }
            Event::Tick { sid, incarnation } => {
                if live(self, sid, incarnation) {
                    let _span = member_span(sid, now);
                    let r = self.m(sid).replica.as_mut().expect("alive");
                    let effects = r.tick(now);
                    self.execute(sid, effects);
                    self.at(now + TICK_EVERY_MS, Event::Tick { sid, incarnation });
                }
            }
            Event::Restart { sid } => {
                if !self.alive(sid) {
                    self.start(sid);
                }
            }
            Event::Heal { pairs } => {
                for p in pairs {
                    self.blocked.remove(&p);
                }
            }
            Event::SnapStep { sid, incarnation } => {
                if live(self, sid, incarnation) {
                    self.count("SNAP steps");
                    let m = self.m(sid);
                    m.snap_stepping = false;
                    let _span = member_span(sid, now);
                    let effects = m.replica.as_mut().expect("alive").snap_step(now);
                    self.execute(sid, effects);
                }
            }
            Event::FsyncNormal { sid } => {
                let normal = self.opts.normal_fsync_ms();
                self.m(sid).fsync_ms = normal;
            }
        }
        true
    }

    fn random_fault(&mut self) {
        let n = self.opts.members as Sid;
        let sid = self.rng.gen_range(1..=n);
        let until = self.now + self.rng.gen_range(300..4_000);
        match self.rng.gen_range(0..100) {
            0..=4 => {
                // Power loss of the whole ensemble: only what each member synced is left.
                self.log(|| "power loss".into());
                self.count("power losses");
                for sid in 1..=n {
                    if self.alive(sid) {
                        self.crash(sid);
                        let back = self.now + self.rng.gen_range(200..3_000);
                        self.at(back, Event::Restart { sid });
                    }
                }
            }
            5..=24 => {
                if self.alive(sid) {
                    self.crash(sid);
                    let back = self.now + self.rng.gen_range(200..3_000);
                    self.at(back, Event::Restart { sid });
                }
            }
            25..=44 => {
                let other = (sid % n) + 1;
                self.break_conn(sid, other);
            }
            45..=64 => {
                self.log(|| format!("isolate {sid}"));
                self.count("isolations");
                let mut pairs = Vec::new();
                for o in 1..=n {
                    if o != sid {
                        pairs.extend([(sid, o), (o, sid)]);
                        self.blocked.insert((sid, o));
                        self.blocked.insert((o, sid));
                    }
                }
                self.at(until, Event::Heal { pairs });
            }
            65..=79 => {
                let slow = self.rng.gen_range(100..1_500);
                self.log(|| format!("slow fsync {sid} {slow}"));
                self.count("slow fsyncs");
                self.m(sid).fsync_ms = (slow / 2, slow);
                self.at(until, Event::FsyncNormal { sid });
            }
            _ => {
                let c = self.rng.gen_range(0..self.clients.len());
                if let Some(sid) = self.clients[c].member {
                    self.log(|| format!("client {c} drops its connection"));
                    self.count("client drops");
                    let conn = self.clients[c].conn;
                    self.client_lost(c);
                    self.input(sid, Input::Disconnected { conn });
                }
                if self.rng.gen_bool(0.5) {
                    self.abandon_session(c);
                }
            }
        }
    }

    /// Client `c` forgets its session (as a process that restarts does) and starts a
    /// new one at its next connect; the old one must expire, its ephemerals with it.
    fn abandon_session(&mut self, c: usize) {
        let client = &self.clients[c];
        if client.member.is_some() || client.session_id == 0 {
            return;
        }
        let old = client.session_id;
        self.clients[c].session_id = 0;
        self.clients[c].passwd = Bytes::from_static(&[0; 16]);
        self.gone_sessions.insert(old);
        self.count("sessions abandoned");
        self.log(|| format!("client {c} abandons session {old:#x}"));
    }

    fn input(&mut self, sid: Sid, input: Input) {
        let now = self.now;
        let _span = member_span(sid, now);
        if let Some(r) = self.m(sid).replica.as_mut() {
            let effects = r.client(now, input);
            self.execute(sid, effects);
        }
    }

    /// Client `c`'s connection is gone: what it waited for is unknown for good.
    fn client_lost(&mut self, c: usize) {
        let client = &mut self.clients[c];
        self.conn_client.remove(&client.conn);
        client.member = None;
        if matches!(client.waiting, Waiting::Reply { .. }) {
            self.next_thread += 1;
            client.thread = self.next_thread;
            *self.stats.entry("ops lost in flight").or_default() += 1;
        }
        client.waiting = Waiting::Nothing;
        client.next_op_at = self.now + self.rng.gen_range(50..500);
    }

    fn send_request<R: Record>(&mut self, c: usize, xid: i32, opcode: i32, record: &R) {
        let body = encode(record);
        let req = decode_request(opcode, &body).expect("decodes");
        let client = &mut self.clients[c];
        client.last_sent = self.now;
        let (sid, conn) = (client.member.expect("connected"), client.conn);
        self.input(
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

    /// Client `c` pings its member when it is connected and has sent nothing for
    /// [`PING_EVERY_MS`] (ZooKeeper's client: a ping after half its read timeout of
    /// sending nothing). Without it a session whose client waits long for a reply,
    /// or idles in the calm phase, expires though its client heard from the ensemble
    /// less than a timeout ago.
    fn ping_if_idle(&mut self, c: usize) {
        let now = self.now;
        let client = &self.clients[c];
        let Some(sid) = client
            .member
            .filter(|_| now - client.last_sent > PING_EVERY_MS)
        else {
            return;
        };
        let conn = client.conn;
        self.clients[c].last_sent = now;
        self.input(
            sid,
            Input::Request {
                conn,
                xid: -2,
                opcode: op::PING,
                req: keel::proto::Request::Ping,
                body: Bytes::new(),
            },
        );
    }

    /// What client `c` does at this step: connect, issue an op, ping, or give up.
    fn client_step(&mut self, c: usize) {
        let now = self.now;
        let client = &self.clients[c];
        match client.waiting {
            Waiting::Handshake { since }
            | Waiting::Reply { since, .. }
            | Waiting::Ephemeral { since, .. } => {
                if now - since > CLIENT_GIVE_UP_MS {
                    let (sid, conn) = (client.member.expect("connected"), client.conn);
                    self.log(|| format!("client {c} gives up on {sid}"));
                    self.client_lost(c);
                    self.input(sid, Input::Disconnected { conn });
                } else if !matches!(client.waiting, Waiting::Handshake { .. }) {
                    // ZooKeeper's client pings when it has sent nothing for a while,
                    // whether or not replies are outstanding.
                    self.ping_if_idle(c);
                }
                return;
            }
            Waiting::Nothing => {}
        }
        let calm = !self.faults_on && self.opts.faulty_ms > 0;
        if now < client.next_op_at || (calm && client.member.is_some()) {
            // The calm phase: clients only keep their sessions.
            self.ping_if_idle(c);
            return;
        }
        let Some(_) = client.member else {
            let live: Vec<Sid> = self.all().filter(|&s| self.alive(s)).collect();
            if live.is_empty() {
                return;
            }
            let sid = live[self.rng.gen_range(0..live.len())];
            let conn = self.next_conn;
            self.next_conn += 1;
            let client = &mut self.clients[c];
            client.member = Some(sid);
            client.conn = conn;
            client.waiting = Waiting::Handshake { since: now };
            client.last_sent = now;
            let req = ConnectRequest {
                protocol_version: 0,
                last_zxid_seen: client.last_zxid,
                time_out_ms: SESSION_TIMEOUT_MS,
                session_id: client.session_id,
                passwd: client.passwd.clone(),
                read_only: false,
            };
            let session = client.session_id;
            self.conn_client.insert(conn, c);
            self.log(|| format!("client {c} connects to {sid} (session {session:#x})"));
            self.input(sid, sansio::connected(conn));
            self.input(sid, Input::Handshake { conn, req });
            return;
        };
        let value = self.next_value;
        let xid = client.next_xid;
        if self.rng.gen_bool(0.05) {
            let path = format!("/e{c}-{value}");
            self.next_value += 1;
            self.count("ephemeral creates");
            let client = &mut self.clients[c];
            client.next_xid += 1;
            client.next_op_at = now + self.rng.gen_range(5..200);
            client.waiting = Waiting::Ephemeral {
                since: now,
                xid,
                path: path.clone(),
            };
            self.log(|| format!("client {c} creates ephemeral {path}"));
            let req = sansio::create_request(&path, b"", 1);
            return self.send_request(c, xid, op::CREATE, &req);
        }
        let path = self.rng.gen_range(0..self.opts.paths);
        let roll = self.rng.gen_range(0..100);
        let (zop, sync) = match roll {
            0..=14 => (ZnodeOp::Create(value), false),
            15..=54 => (ZnodeOp::Set(value), false),
            55..=79 => (ZnodeOp::Get, false),
            _ => (ZnodeOp::Get, true),
        };
        self.next_value += 1;
        self.count(match (&zop, sync) {
            (ZnodeOp::Create(_), _) => "creates",
            (ZnodeOp::Set(_), _) => "sets",
            (ZnodeOp::Get, false) => "plain reads",
            (ZnodeOp::Get, true) => "sync'd reads",
        });
        let client = &mut self.clients[c];
        client.next_xid += 2;
        client.next_op_at = now + self.rng.gen_range(5..200);
        let thread = client.thread;
        client.waiting = Waiting::Reply {
            since: now,
            xid: xid + 1,
            path,
            op: zop.clone(),
            sync_xid: sync.then_some(xid),
        };
        self.history.push(Hist::Invoke {
            thread,
            path,
            op: zop.clone(),
            linearizable: sync || !matches!(zop, ZnodeOp::Get),
        });
        self.log(|| {
            format!(
                "client {c} thread {thread} {zop:?} {} sync={sync}",
                PATHS[path]
            )
        });
        let p = PATHS[path].to_string();
        if sync {
            self.send_request(c, xid, op::SYNC, &PathRequest { path: p.clone() });
        }
        let data = Some(Bytes::copy_from_slice(&value.to_be_bytes()));
        match zop {
            ZnodeOp::Create(_) => self.send_request(
                c,
                xid + 1,
                op::CREATE,
                &sansio::create_request(&p, &value.to_be_bytes(), 0),
            ),
            ZnodeOp::Set(_) => self.send_request(
                c,
                xid + 1,
                op::SET_DATA,
                &SetDataRequest {
                    path: p,
                    data,
                    version: -1,
                },
            ),
            ZnodeOp::Get => self.send_request(
                c,
                xid + 1,
                op::GET_DATA,
                &PathWatchRequest {
                    path: p,
                    watch: false,
                },
            ),
        }
    }

    /// Something member output on connection `conn`.
    fn on_client_output(&mut self, conn: u64, got: Got) {
        let Some(&c) = self.conn_client.get(&conn) else {
            return;
        };
        match got {
            Got::Close => {
                self.log(|| format!("client {c}: connection closed"));
                self.client_lost(c);
            }
            Got::Event { .. } => {}
            Got::Connected {
                session_id, passwd, ..
            } => {
                let old = self.clients[c].session_id;
                if session_id == 0 && old != 0 {
                    let silent = self.now - self.clients[c].last_heard;
                    self.log(|| {
                        format!(
                            "client {c}: session {old:#x} expired, {silent} ms after it last heard"
                        )
                    });
                    if silent + EXPIRY_SLACK_MS < SESSION_TIMEOUT_MS as u64 {
                        self.fail(format!(
                            "session {old:#x} (client {c}) expired {silent} ms after its client last heard from the ensemble (timeout {SESSION_TIMEOUT_MS} ms)"
                        ));
                    }
                    self.count("sessions expired");
                    self.gone_sessions.insert(old);
                }
                if session_id != 0 && session_id != old {
                    // A new session: its own thread, and ZooKeeper's ordering promises
                    // start afresh (a new handle's last zxid seen is 0).
                    let thread = self.new_thread();
                    let client = &mut self.clients[c];
                    client.thread = thread;
                    client.last_zxid = 0;
                    client.seen_mzxid = [0; PATHS.len()];
                }
                let client = &mut self.clients[c];
                if session_id == 0 {
                    // Expired (ZooKeeper closes the connection next): a new session
                    // at the next connect.
                    client.session_id = 0;
                } else {
                    client.last_heard = self.now;
                    client.session_id = session_id;
                    client.passwd = passwd;
                    client.waiting = Waiting::Nothing;
                }
            }
            Got::Reply {
                xid,
                zxid,
                err,
                body,
            } => self.reply(c, xid, zxid, err, body),
        }
    }

    fn reply(&mut self, c: usize, xid: i32, zxid: i64, err: i32, body: Bytes) {
        let client = &mut self.clients[c];
        client.last_heard = self.now;
        let session = client.session_id;
        if xid != -2 && zxid < client.last_zxid {
            let last = client.last_zxid;
            self.fail(format!(
                "session {session:#x} (client {c}) saw zxid {last:#x}, then a reply (xid {xid}) with zxid {zxid:#x}"
            ));
            return;
        }
        let client = &mut self.clients[c];
        client.last_zxid = client.last_zxid.max(zxid);
        if let Waiting::Ephemeral {
            xid: want, path, ..
        } = &client.waiting
        {
            if *want == xid {
                if err == 0 {
                    self.ephemerals.push((path.clone(), session));
                }
                self.log(|| format!("client {c} ephemeral -> {err}"));
                self.clients[c].waiting = Waiting::Nothing;
            }
            return;
        }
        let Waiting::Reply {
            xid: want,
            path,
            op,
            sync_xid,
            ..
        } = client.waiting.clone()
        else {
            return;
        };
        if sync_xid == Some(xid) {
            if err != 0 {
                self.log(|| format!("client {c}: sync failed {err}"));
            }
            if let Waiting::Reply { sync_xid, .. } = &mut self.clients[c].waiting {
                *sync_xid = None;
            }
            return;
        }
        if xid != want {
            return;
        }
        let thread = self.clients[c].thread;
        let ret = match (&op, err) {
            (ZnodeOp::Create(_), 0) => Some((ZnodeRet::Created, None)),
            (ZnodeOp::Create(_), -110) => Some((ZnodeRet::NodeExists, None)),
            (ZnodeOp::Set(_), 0) => {
                let r: StatResponse = decode_all(&body).expect("StatResponse");
                Some((ZnodeRet::SetOk(r.stat.version), Some(r.stat.mzxid)))
            }
            (ZnodeOp::Set(_) | ZnodeOp::Get, -101) => Some((ZnodeRet::NoNode, None)),
            (ZnodeOp::Get, 0) => {
                let r: GetDataResponse = decode_all(&body).expect("GetDataResponse");
                let v = value_of(&r.data.unwrap_or_default());
                Some((ZnodeRet::Data(v, r.stat.version), Some(r.stat.mzxid)))
            }
            // Any other error: the outcome is unknown to this model.
            _ => None,
        };
        let client = &mut self.clients[c];
        client.waiting = Waiting::Nothing;
        let Some((ret, mzxid)) = ret else {
            self.log(|| format!("client {c} thread {thread}: error {err}, outcome unknown"));
            self.count("ops failed (outcome unknown)");
            self.clients[c].thread = self.new_thread();
            return;
        };
        if let Some(m) = mzxid {
            let seen = client.seen_mzxid[path];
            client.seen_mzxid[path] = seen.max(m);
            if m < seen {
                self.fail(format!(
                    "session {session:#x} (client {c}) saw {} at mzxid {seen:#x}, then read mzxid {m:#x}",
                    PATHS[path]
                ));
            }
            if let ZnodeRet::SetOk(version) = ret {
                self.acked.push((path, version, m));
            }
        }
        if let ZnodeRet::Created = ret {
            self.acked.push((path, 0, zxid));
        }
        self.log(|| format!("client {c} thread {thread} -> {ret:?} zxid {zxid:#x}"));
        self.count("ops answered");
        self.history.push(Hist::Return { thread, ret });
    }

    /// Members at the same applied zxid hold equal trees (by digest), at any time.
    fn check_digests(&mut self) {
        for sid in self.all().collect::<Vec<_>>() {
            let Some(r) = self.replica(sid) else {
                continue;
            };
            let s = r.server();
            if let Role::Leader { epoch } = s.role() {
                self.epochs.insert(epoch);
            }
            if self.replica(sid).expect("up").in_fuzzy_sync() {
                // Its tree may hold txns after its zxid until UPTODATE.
                continue;
            }
            let s = self.replica(sid).expect("up").server();
            let (zxid, digest) = (s.last_zxid, s.tree.digest());
            match self.digests.get(&zxid).copied() {
                None => {
                    self.digests.insert(zxid, (digest, sid));
                }
                Some((d, other)) if d != digest => self.fail(format!(
                    "member {sid} at zxid {zxid:#x} has digest {digest:#x}, member {other} had {d:#x}"
                )),
                Some(_) => {}
            }
        }
    }

    /// Runs the world for `ms`: events, client steps and checks every [`STEP_MS`],
    /// faults now and then while they are on.
    pub fn run_for(&mut self, ms: u64) {
        let end = self.now + ms;
        let mut next_fault = self.now + self.rng.gen_range(300..2_000);
        while self.now < end && self.failure.is_none() {
            let step_end = self.now + STEP_MS;
            while self.step(step_end) {}
            self.now = step_end;
            if self.faults_on && self.now >= next_fault {
                self.random_fault();
                next_fault = self.now + self.rng.gen_range(300..2_000);
            }
            for c in 0..self.clients.len() {
                self.client_step(c);
            }
            self.check_digests();
        }
    }

    /// The faulty phase, then calm (every member up, no partitions, fast fsync) for at
    /// least [`CALM_MIN_MS`] and until the ensemble has converged; checks the end state.
    pub fn run(&mut self) {
        self.run_for(self.opts.faulty_ms);
        self.faults_on = false;
        self.blocked.clear();
        for sid in self.all().collect::<Vec<_>>() {
            self.m(sid).fsync_ms = self.opts.normal_fsync_ms();
            if !self.alive(sid) {
                self.start(sid);
            }
        }
        self.run_for(CALM_MIN_MS);
        for _ in 0..60 {
            if self.failure.is_some() || self.converged() {
                break;
            }
            self.run_for(500);
        }
        if self.failure.is_none() && !self.converged() {
            let state: Vec<String> = self
                .all()
                .map(|s| {
                    let r = self.replica(s).expect("up");
                    format!(
                        "{s}: {:?} last_zxid {:#x}",
                        r.server().role(),
                        r.server().last_zxid
                    )
                })
                .collect();
            self.fail(format!(
                "no convergence 30 s after the faults: {}",
                state.join(", ")
            ));
        }
    }

    /// One leader, every other member its learner, all at the same zxid and tree.
    fn converged(&self) -> bool {
        let rs: Vec<&Replica> = self.all().filter_map(|s| self.replica(s)).collect();
        rs.len() == self.opts.members
            && rs
                .iter()
                .filter(|r| matches!(r.server().role(), Role::Leader { .. }))
                .count()
                == 1
            && rs.iter().all(|r| {
                r.server().last_zxid == rs[0].server().last_zxid
                    && r.server().tree.digest() == rs[0].server().tree.digest()
                    && matches!(r.server().role(), Role::Leader { .. } | Role::Learner)
            })
    }

    /// The converged ensemble's last zxid and tree digest (member 1's), for comparing
    /// two runs of a seed.
    pub fn outcome(&self) -> Option<(i64, i64)> {
        let s = self.replica(1)?.server();
        Some((s.last_zxid, s.tree.digest()))
    }

    /// A hash of every trace line of the run (the trace kept is only its tail): equal
    /// for two runs of one seed.
    pub fn trace_hash(&self) -> u64 {
        self.trace_hash.finish()
    }

    /// The converged state of `path`: its data and data version, if it exists.
    pub fn final_state(&self, path: usize) -> Option<(u32, i32, i64)> {
        let r = self.replica(1).expect("up");
        r.server()
            .tree
            .get(PATHS[path])
            .map(|n| (value_of(n.data_bytes()), n.version(), n.mzxid()))
    }
}

//! The simulated ensemble: members driving `keel::zab::Peer`, a network of FIFO TCP
//! streams that break and stall, disks that lose unsynced writes on a crash, and
//! simulated time. One thread; everything random comes from one seeded RNG, so a seed
//! replays exactly.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use keel::zab::message::{Channel, Message};
use keel::zab::quorum::QuorumVerifier;
use keel::zab::storage::{read_for_diff, MemStorage, ZabStorage};
use keel::zab::wire::config::ServerLine;
use keel::zab::wire::txn::{encode_payload, TxnHeader, ZkTxn};
use keel::zab::{epoch_of, Action, Config, Input, Peer, RoleChange, Sid, Txn, Zxid};

use super::check::{Checker, ZkLearnerStream};

/// The simulation's tickTime, ms.
pub const TICK_MS: u64 = 100;

/// What a run does.
#[derive(Clone, Debug)]
pub struct Options {
    /// Voting members.
    pub participants: usize,
    /// Observers (sids after the participants).
    pub observers: usize,
    /// How long random faults are injected, ms of simulated time.
    pub chaos_ms: u64,
    /// After the chaos: everything healed, how long to wait for progress, ms.
    pub heal_ms: u64,
    /// Mean ms between random faults (0: none).
    pub fault_every_ms: u64,
    /// Mean ms between client proposals.
    pub propose_every_ms: u64,
    /// The committed window each member keeps for DIFFs.
    pub commit_log_count: usize,
    /// `reconfigEnabled`: the workload proposes reconfigs now and then
    /// (`reconfig_every`), and members keep the config they activate across restarts.
    pub reconfig: bool,
    /// Members outside the initial config (sids after the observers), each started
    /// with the initial config plus itself as a participant, as a joining ZooKeeper
    /// server is; they learn as non-voting followers until a reconfig adds them.
    pub spares: usize,
    /// With `reconfig`: one proposal in this many is a reconfig (when none is pending).
    pub reconfig_every: u64,
    /// `keel.storageAcks` on every member: a follower's PROPOSAL ACKs go out as its
    /// storage syncs them ([`keel::zab::Config::storage_acks`]).
    pub storage_acks: bool,
}

impl Options {
    /// A run without random faults, for scripted scenarios.
    pub fn quiet(participants: usize) -> Options {
        Options {
            fault_every_ms: 0,
            ..Options::random(participants)
        }
    }

    /// The default random run for `participants` voters.
    pub fn random(participants: usize) -> Options {
        Options {
            participants,
            observers: 0,
            chaos_ms: 20_000,
            heal_ms: 10_000,
            fault_every_ms: 400,
            propose_every_ms: 40,
            commit_log_count: 30,
            reconfig: false,
            spares: 0,
            reconfig_every: 40,
            storage_acks: true,
        }
    }
}

/// One member: its core (None while crashed), its disk and its applied state.
pub struct Member {
    pub sid: Sid,
    pub peer: Option<Peer>,
    pub storage: MemStorage,
    /// The committed txns applied, in order, from the first (the "tree").
    pub applied: Vec<Txn>,
    pub role: Option<RoleChange>,
    next_tick_ms: u64,
    /// An fsync under way: completes at .0 covering the log up to point .1.
    sync: Option<(u64, usize)>,
    /// fsync latency range, ms.
    pub fsync_ms: (u64, u64),
    /// Txns this incarnation proposed as leader, not yet committed.
    proposals: BTreeMap<Zxid, Bytes>,
    /// The config it activated last, kept across restarts (its dynamic config file).
    pub config: QuorumVerifier,
    /// ACKs its storage sends once the txn is synced (`AppendTxns`'s `ack_to`): the
    /// zxid, the leader and the quorum connection's generation then.
    storage_acks: Vec<(Zxid, Sid, u64)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct QueueKey {
    from: Sid,
    to: Sid,
    channel: u8,
}

struct InFlight {
    at_ms: u64,
    generation: u64,
    msg: Message,
}

#[derive(Clone, Copy, Default)]
struct Conn {
    generation: u64,
    up: bool,
}

#[derive(Clone, Debug)]
enum Timer {
    ConnectFailed {
        sid: Sid,
        peer: Sid,
        generation: u64,
    },
    Restart {
        sid: Sid,
    },
    Unblock {
        pairs: Vec<(Sid, Sid)>,
    },
    FsyncNormal {
        sid: Sid,
    },
    /// The answer to an `Action::ReadLog`, after the read's latency.
    LogRead {
        sid: Sid,
        input: Input,
    },
}

/// The whole simulated world.
pub struct World {
    pub seed: u64,
    pub rng: StdRng,
    pub now_ms: u64,
    pub opts: Options,
    pub members: Vec<Member>,
    quorum: QuorumVerifier,
    conns: HashMap<(Sid, Sid), Conn>,
    queues: BTreeMap<QueueKey, VecDeque<InFlight>>,
    blocked: HashMap<(Sid, Sid), u32>,
    pending: VecDeque<(Sid, Input)>,
    timers: Vec<(u64, Timer)>,
    pub checker: Checker,
    /// Each leader-to-learner quorum connection (leader, learner, generation) as a
    /// ZooKeeper 3.8 learner would take it: a keel leader must lead ZooKeeper
    /// followers too.
    zk_streams: HashMap<(Sid, Sid, u64), ZkLearnerStream>,
    /// The last ACK each learner sent on each quorum connection (from, to, generation):
    /// they must ascend, as a ZooKeeper leader commits in zxid order and looks at a
    /// proposal again only when an ACK for it comes.
    ack_order: HashMap<(Sid, Sid, u64), Zxid>,
    pub failure: Option<String>,
    next_fault_ms: u64,
    next_propose_ms: u64,
    proposals_made: u64,
    pub chaos: bool,
    /// Whether the workload proposes.
    pub workload: bool,
    trace: Option<VecDeque<String>>,
    /// The payload of the proposal being stepped, to pair with `Action::Proposed`.
    proposing: Option<Bytes>,
    /// How many DIFF, TRUNC and SNAP syncs leaders started, by name; "diff_from_log"
    /// counts the DIFFs served from the on-disk log (also in "diff"), "log_read" the
    /// reads of it and "log_read_refused" those that found the log could not serve.
    pub syncs: BTreeMap<&'static str, u64>,
    /// Learners whose last log read served a DIFF not yet sent.
    log_served: HashSet<(Sid, Sid)>,
    /// Drop the last txn of every log read (ZOOKEEPER-2418's gap between the on-disk
    /// log and the window): the leader must notice and send a SNAP.
    pub log_read_gap: bool,
    /// Whether an on-disk log read drops a txn from its middle (a log with a hole, as
    /// an older keel's learners could write): the leader must not DIFF across it.
    pub log_read_hole: bool,
    /// How long an on-disk log read takes, ms: uniformly in `log_read_ms.0..log_read_ms.1`.
    pub log_read_ms: (u64, u64),
    /// Whether a message now and then takes 20-300 ms (holding up every message
    /// behind it on its connection). A scenario that needs commits to flow steadily
    /// turns it off.
    pub delay_spikes: bool,
    /// Crash this member right after it executes an action that matches (the rest of
    /// that step's actions never happen).
    pub crash_after: Option<(Sid, ActionMatch)>,
    /// When a message that matches is delivered to .0, crash .2 right after.
    pub crash_on_delivery: Option<(Sid, MessageMatch, Sid)>,
}

/// A predicate over actions for `World::crash_after`.
pub type ActionMatch = Box<dyn Fn(&Action) -> bool>;
/// A predicate over messages for `World::crash_on_delivery`.
pub type MessageMatch = Box<dyn Fn(&Message) -> bool>;

fn key(a: Sid, b: Sid) -> (Sid, Sid) {
    (a.min(b), a.max(b))
}

/// A snapshot's bytes: (u64 zxid, u32 len, data)*.
pub fn encode_state(state: &[Txn]) -> Bytes {
    let mut b = BytesMut::new();
    for t in state {
        b.put_u64(t.zxid);
        b.put_u32(t.data.len() as u32);
        b.put_slice(&t.data);
    }
    b.freeze()
}

/// The inverse of `encode_state`.
pub fn decode_state(mut b: Bytes) -> Vec<Txn> {
    let mut out = Vec::new();
    while b.has_remaining() {
        let zxid = b.get_u64();
        let len = b.get_u32() as usize;
        out.push(Txn {
            zxid,
            data: b.split_to(len),
        });
    }
    out
}

impl World {
    /// A fresh ensemble (empty dataDirs), every member started at time 0.
    pub fn new(seed: u64, opts: Options) -> World {
        let n = opts.participants + opts.observers;
        let all = n + opts.spares;
        let quorum = QuorumVerifier::from_servers(
            (1..=n as Sid).map(|sid| sim_line(sid, sid > opts.participants as Sid)),
            0,
        )
        .expect("participants");
        let mut w = World {
            seed,
            rng: StdRng::seed_from_u64(seed),
            now_ms: 0,
            members: Vec::new(),
            quorum,
            conns: HashMap::new(),
            queues: BTreeMap::new(),
            blocked: HashMap::new(),
            pending: VecDeque::new(),
            timers: Vec::new(),
            checker: Checker::default(),
            zk_streams: HashMap::new(),
            ack_order: HashMap::new(),
            failure: None,
            next_fault_ms: 0,
            next_propose_ms: 0,
            proposals_made: 0,
            chaos: true,
            workload: true,
            trace: std::env::var("KEEL_SIM_TRACE")
                .ok()
                .map(|_| VecDeque::new()),
            proposing: None,
            syncs: BTreeMap::new(),
            log_served: HashSet::new(),
            log_read_gap: false,
            log_read_hole: false,
            log_read_ms: (0, 20),
            delay_spikes: true,
            crash_after: None,
            crash_on_delivery: None,
            opts,
        };
        w.next_fault_ms = w.gap(w.opts.fault_every_ms);
        for i in 0..all {
            let sid = i as Sid + 1;
            let config = if i < n {
                w.quorum.clone()
            } else {
                let lines = w.quorum.servers().cloned().chain([sim_line(sid, false)]);
                QuorumVerifier::from_servers(lines, 0).expect("participants")
            };
            let jitter = w.rng.gen_range(0..TICK_MS / 2);
            w.members.push(Member {
                sid: i as Sid + 1,
                peer: None,
                storage: MemStorage::new(),
                applied: Vec::new(),
                role: None,
                next_tick_ms: jitter,
                sync: None,
                fsync_ms: (1, 5),
                proposals: BTreeMap::new(),
                config,
                storage_acks: Vec::new(),
            });
        }
        for sid in 1..=all as Sid {
            w.start_member(sid);
        }
        w
    }

    fn gap(&mut self, mean: u64) -> u64 {
        if mean == 0 {
            return u64::MAX;
        }
        self.now_ms + self.rng.gen_range(1..=2 * mean)
    }

    fn log(&mut self, line: impl FnOnce() -> String) {
        if let Some(t) = self.trace.as_mut() {
            if t.len() >= 200_000 {
                t.pop_front();
            }
            t.push_back(line());
        }
    }

    /// The last traced events (KEEL_SIM_TRACE set), for a failure report.
    pub fn trace_tail(&self) -> String {
        self.trace.as_ref().map_or_else(
            || "(set KEEL_SIM_TRACE=1 for a trace)".to_string(),
            |t| t.iter().cloned().collect::<Vec<_>>().join("\n"),
        )
    }

    fn config(&self, sid: Sid) -> Config {
        let quorum = self.members[sid as usize - 1].config.clone();
        let mut c = Config::new(sid, quorum, TICK_MS, 10, 5);
        c.reconfig_enabled = self.opts.reconfig;
        c.storage_acks = self.opts.storage_acks;
        c.max_notification_interval_ms = 1_600;
        c.commit_log_count = self.opts.commit_log_count;
        c
    }

    fn m(&mut self, sid: Sid) -> &mut Member {
        &mut self.members[sid as usize - 1]
    }

    /// Whether `sid` is running.
    pub fn alive(&self, sid: Sid) -> bool {
        self.members[sid as usize - 1].peer.is_some()
    }

    fn start_member(&mut self, sid: Sid) {
        let config = self.config(sid);
        let now = self.now_ms;
        let m = self.m(sid);
        let recovered = m.storage.recover();
        // What the runtime refuses to start on (member::ensemble's refuse_a_hole): a
        // member's own writes must never leave one.
        let hole = keel::zab::log::first_hole(recovered.snapshot_zxid, &recovered.log);
        m.applied = decode_state(m.storage.snapshot().1);
        m.role = None;
        m.proposals.clear();
        m.sync = None;
        m.storage_acks.clear();
        let (peer, actions) = Peer::new(config, recovered, now);
        m.peer = Some(peer);
        let applied = m.applied.clone();
        if let Some((before, after)) = hole {
            self.fail(format!(
                "server.{sid} restarts on a txn log that skips from 0x{before:x} to 0x{after:x}"
            ));
        }
        if let Err(e) = self.checker.on_applied(sid, &applied, 0) {
            self.fail(e);
        }
        self.log(|| format!("{now} start {sid}"));
        self.execute(sid, actions);
    }

    /// Power loss on `sid`: unsynced writes are lost, its connections break.
    pub fn crash(&mut self, sid: Sid) {
        if !self.alive(sid) {
            return;
        }
        let now = self.now_ms;
        self.log(|| format!("{now} crash {sid}"));
        let m = self.m(sid);
        m.peer = None;
        m.storage.crash();
        m.sync = None;
        m.storage_acks.clear();
        m.role = None;
        let n = self.members.len() as Sid;
        for other in 1..=n {
            if other != sid {
                self.break_conn(sid, other, true);
                for ch in [0, 1] {
                    self.queues.remove(&QueueKey {
                        from: sid,
                        to: other,
                        channel: ch,
                    });
                    self.queues.remove(&QueueKey {
                        from: other,
                        to: sid,
                        channel: ch,
                    });
                }
            }
        }
    }

    /// Starts a crashed member from its disk.
    pub fn restart(&mut self, sid: Sid) {
        if !self.alive(sid) {
            self.start_member(sid);
        }
    }

    /// Sets `sid`'s fsync latency range, ms.
    pub fn set_fsync(&mut self, sid: Sid, lo: u64, hi: u64) {
        self.m(sid).fsync_ms = (lo, hi);
    }

    /// Wipes a crashed member's disk (a new, empty dataDir).
    pub fn wipe(&mut self, sid: Sid) {
        assert!(!self.alive(sid));
        self.m(sid).storage = MemStorage::new();
    }

    /// Blocks `from -> to` until `unblock` (a one-way partition; call both ways for a
    /// symmetric one).
    pub fn block(&mut self, from: Sid, to: Sid) {
        let now = self.now_ms;
        self.log(|| format!("{now} block {from}->{to}"));
        *self.blocked.entry((from, to)).or_insert(0) += 1;
    }

    /// Lifts one `block(from, to)`.
    pub fn unblock(&mut self, from: Sid, to: Sid) {
        let now = self.now_ms;
        self.log(|| format!("{now} unblock {from}->{to}"));
        if let Some(c) = self.blocked.get_mut(&(from, to)) {
            *c -= 1;
            if *c == 0 {
                self.blocked.remove(&(from, to));
            }
        }
    }

    /// Cuts `sid` off from everyone, both ways.
    pub fn isolate(&mut self, sid: Sid) -> Vec<(Sid, Sid)> {
        let mut pairs = Vec::new();
        for other in 1..=self.members.len() as Sid {
            if other != sid {
                pairs.push((sid, other));
                pairs.push((other, sid));
            }
        }
        for &(a, b) in &pairs {
            self.block(a, b);
        }
        pairs
    }

    fn is_blocked(&self, from: Sid, to: Sid) -> bool {
        self.blocked.contains_key(&(from, to))
    }

    /// Lifts every partition.
    pub fn heal(&mut self) {
        self.blocked.clear();
        self.timers
            .retain(|(_, t)| !matches!(t, Timer::Unblock { .. }));
    }

    /// Breaks the quorum connection between `a` and `b`, losing what was in flight;
    /// both ends (or only `b` unless `notify_a`) see it.
    fn break_conn(&mut self, a: Sid, b: Sid, notify_a: bool) {
        let c = self.conns.entry(key(a, b)).or_default();
        if !c.up {
            return;
        }
        c.up = false;
        c.generation += 1;
        for (f, t) in [(a, b), (b, a)] {
            self.queues.remove(&QueueKey {
                from: f,
                to: t,
                channel: 1,
            });
        }
        if notify_a && self.alive(a) {
            self.pending.push_back((a, Input::Disconnected { peer: b }));
        }
        if self.alive(b) {
            self.pending.push_back((b, Input::Disconnected { peer: a }));
        }
    }

    fn delay(&mut self) -> u64 {
        if self.rng.gen_bool(0.03) && self.delay_spikes {
            self.rng.gen_range(20..300)
        } else {
            self.rng.gen_range(1..8)
        }
    }

    fn enqueue(&mut self, from: Sid, to: Sid, msg: Message, generation: u64) {
        let channel = u8::from(msg.channel() == Channel::Quorum);
        let d = self.delay();
        let q = self
            .queues
            .entry(QueueKey { from, to, channel })
            .or_default();
        let at_ms = q.back().map_or(0, |l| l.at_ms).max(self.now_ms + d);
        if channel == 1 {
            let stream = self.zk_streams.entry((from, to, generation)).or_default();
            if let Err(e) = stream.on_leader_msg(&msg) {
                self.fail(format!("leader {from} to learner {to}: {e}"));
            }
        }
        if let Message::Ack { zxid } = msg {
            // Every txn of the epoch the learner holds below it, and has not seen
            // committed, was ACKed before it on this connection (ZOOKEEPER-4785: those
            // of the sync too).
            let m = &self.members[from as usize - 1];
            let committed = m.peer.as_ref().map_or(0, |p| p.committed());
            let skipped = m
                .storage
                .log()
                .iter()
                .map(|t| t.zxid)
                .filter(|&y| y < zxid && y > committed && epoch_of(y) == epoch_of(zxid))
                .max();
            let last = self.ack_order.entry((from, to, generation)).or_default();
            let last = std::mem::replace(last, zxid.max(*last));
            // Only the epoch's own zxid is ACKed twice (NEWLEADER, then UPTODATE).
            let again = zxid == last && zxid != keel::zab::zxid(epoch_of(zxid), 0);
            if zxid < last || again {
                self.fail(format!(
                    "learner {from} sent leader {to} ACK {zxid:#x} after ACK {last:#x} on one connection"
                ));
            } else if let Some(y) = skipped.filter(|&y| y > last) {
                self.fail(format!(
                    "learner {from} sent leader {to} ACK {zxid:#x} with {y:#x} of the same epoch held and not ACKed (the last ACK: {last:#x})"
                ));
            }
        }
        let q = self
            .queues
            .entry(QueueKey { from, to, channel })
            .or_default();
        q.push_back(InFlight {
            at_ms,
            generation,
            msg,
        });
    }

    fn send(&mut self, from: Sid, to: Sid, msg: Message) {
        if !self.alive(to) && msg.channel() == Channel::Election {
            return;
        }
        match msg.channel() {
            Channel::Election => {
                // A blocked election connection fails; ZooKeeper re-sends on timeout.
                if !self.is_blocked(from, to) {
                    self.enqueue(from, to, msg, 0);
                }
            }
            Channel::Quorum => {
                if matches!(
                    msg,
                    Message::FollowerInfo { .. } | Message::ObserverInfo { .. }
                ) {
                    // A learner opens a new connection: the old one (if any) closes.
                    self.break_conn(from, to, false);
                    let refused =
                        !self.alive(to) || self.is_blocked(from, to) || self.is_blocked(to, from);
                    let c = self.conns.entry(key(from, to)).or_default();
                    c.generation += 1;
                    let generation = c.generation;
                    if refused {
                        let at = self.now_ms + self.rng.gen_range(50..500);
                        self.timers.push((
                            at,
                            Timer::ConnectFailed {
                                sid: from,
                                peer: to,
                                generation,
                            },
                        ));
                        return;
                    }
                    c.up = true;
                    self.enqueue(from, to, msg, generation);
                } else {
                    let c = self.conns.get(&key(from, to)).copied().unwrap_or_default();
                    if c.up {
                        self.enqueue(from, to, msg, c.generation);
                    }
                }
            }
        }
    }

    fn fail(&mut self, e: String) {
        if self.failure.is_none() {
            self.failure = Some(format!("t={}ms: {e}", self.now_ms));
        }
    }

    /// Feeds `input` to `sid` now and executes what it returns.
    pub fn input(&mut self, sid: Sid, input: Input) {
        let now = self.now_ms;
        let Some(peer) = self.m(sid).peer.as_mut() else {
            return;
        };
        let actions = peer.step(now, input);
        self.execute(sid, actions);
    }

    fn execute(&mut self, sid: Sid, actions: Vec<Action>) {
        for a in actions {
            if self.failure.is_some() {
                return;
            }
            let now = self.now_ms;
            if self.trace.is_some() {
                let line = format!("{now} {sid}: {}", short(&a));
                self.log(|| line);
            }
            let crash_now = self
                .crash_after
                .as_ref()
                .is_some_and(|(s, f)| *s == sid && f(&a));
            match &a {
                Action::Send {
                    to,
                    msg: Message::Diff { .. },
                } => {
                    *self.syncs.entry("diff").or_default() += 1;
                    if self.log_served.remove(&(sid, *to)) {
                        *self.syncs.entry("diff_from_log").or_default() += 1;
                    }
                }
                Action::Send {
                    to,
                    msg: Message::Trunc { .. },
                } => {
                    *self.syncs.entry("trunc").or_default() += 1;
                    self.log_served.remove(&(sid, *to));
                }
                Action::SendSnapshot { to, .. } => {
                    *self.syncs.entry("snap").or_default() += 1;
                    self.log_served.remove(&(sid, *to));
                }
                _ => {}
            }
            self.execute_one(sid, a);
            if crash_now {
                self.crash_after = None;
                self.crash(sid);
                return;
            }
        }
    }

    fn execute_one(&mut self, sid: Sid, a: Action) {
        {
            match a {
                Action::Send { to, msg } => self.send(sid, to, msg),
                Action::SendSnapshot { to, zxid } => {
                    let m = self.m(sid);
                    let last = m.applied.last().map_or(0, |t| t.zxid);
                    if last != zxid {
                        return self.fail(format!(
                            "{sid} asked to snapshot at {zxid:#x} but applied {last:#x}"
                        ));
                    }
                    let snapshot = encode_state(&m.applied);
                    self.send(sid, to, Message::Snap { zxid, snapshot });
                }
                Action::CloseConnection { peer } => self.break_conn(sid, peer, false),
                // No member here has a state machine or clients (nothing sends REQUEST,
                // REVALIDATE or sessions in a PING), so the core has nothing to deliver.
                Action::Deliver { from, msg } => self.fail(format!(
                    "{sid} delivered {msg:?} from {from} with no state machine to take it"
                )),
                Action::ReadLog {
                    peer,
                    after,
                    upto,
                    snapshot_size_factor,
                } => {
                    let storage = &self.members[sid as usize - 1].storage;
                    let mut txns = read_for_diff(storage, after, upto, snapshot_size_factor);
                    if self.log_read_gap {
                        if let Some(t) = txns.as_mut() {
                            t.pop();
                        }
                    }
                    if self.log_read_hole {
                        if let Some(t) = txns.as_mut().filter(|t| t.len() >= 3) {
                            t.remove(t.len() / 2);
                        }
                    }
                    let served = if txns.is_some() {
                        self.log_served.insert((sid, peer));
                        "log_read"
                    } else {
                        "log_read_refused"
                    };
                    *self.syncs.entry(served).or_default() += 1;
                    // A read takes a while; the leader keeps committing meanwhile.
                    let (fastest, slowest) = self.log_read_ms;
                    let at = self.now_ms + self.rng.gen_range(fastest..slowest.max(fastest + 1));
                    let input = Input::LogRead { peer, after, txns };
                    self.timers.push((at, Timer::LogRead { sid, input }));
                }
                Action::AppendTxns { txns, ack_to } => {
                    let conn = ack_to.map(|to| (to, self.conns.get(&key(sid, to)).copied()));
                    let m = self.m(sid);
                    m.storage.append(&txns);
                    // On the connection up now, as the runtime's handle is; none: lost,
                    // as a message sent now would be.
                    if let Some((to, Some(c))) = conn.filter(|(_, c)| c.is_some_and(|c| c.up)) {
                        let acks = txns.iter().map(|t| (t.zxid, to, c.generation));
                        m.storage_acks.extend(acks);
                    }
                    self.schedule_sync(sid);
                }
                Action::PersistAcceptedEpoch { epoch } => {
                    self.m(sid).storage.set_accepted_epoch(epoch)
                }
                Action::PersistCurrentEpoch { epoch } => {
                    self.m(sid).storage.set_current_epoch(epoch)
                }
                Action::TruncateLog { after } => {
                    let m = self.m(sid);
                    m.storage.truncate_after(after);
                    m.storage_acks.retain(|&(z, _, _)| z <= after);
                    let len = m.storage.log().len();
                    if let Some((_, point)) = m.sync.as_mut() {
                        *point = (*point).min(len);
                    }
                }
                Action::InstallSnapshot { zxid, snapshot } => {
                    let m = self.m(sid);
                    if let Some(last) = m.applied.last().filter(|t| t.zxid > zxid) {
                        let last = last.zxid;
                        return self.fail(format!(
                            "{sid} installed a snapshot at {zxid:#x} behind its applied {last:#x}: applied zxids must increase"
                        ));
                    }
                    m.storage.install_snapshot(zxid, snapshot.clone());
                    m.storage_acks.clear();
                    m.applied = decode_state(snapshot);
                    if let Some((_, point)) = m.sync.as_mut() {
                        *point = 0;
                    }
                    let applied = m.applied.clone();
                    if applied.last().map_or(0, |t| t.zxid) != zxid {
                        return self.fail(format!("{sid} installed a snapshot not at {zxid:#x}"));
                    }
                    if let Err(e) = self.checker.on_applied(sid, &applied, 0) {
                        self.fail(e);
                    }
                }
                Action::Commit { upto } => {
                    let m = self.m(sid);
                    let from = m.applied.len();
                    let after = m.applied.last().map_or(0, |t| t.zxid);
                    if upto <= after {
                        return self.fail(format!(
                            "{sid} committed {upto:#x} after applying {after:#x}"
                        ));
                    }
                    let txns = m.storage.read_range(after, upto);
                    if txns.last().map(|t| t.zxid) != Some(upto) {
                        return self.fail(format!("{sid} committed {upto:#x}, which its log does not hold after {after:#x}"));
                    }
                    m.applied.extend(txns);
                    let leader = matches!(m.role, Some(RoleChange::LeaderEstablished { .. }));
                    let mut acked = Vec::new();
                    if leader {
                        let rest = m.proposals.split_off(&(upto + 1));
                        let done = std::mem::replace(&mut m.proposals, rest);
                        for (zxid, data) in done {
                            acked.push(Txn { zxid, data });
                        }
                    }
                    let applied = m.applied.clone();
                    if let Err(e) = self.checker.on_applied(sid, &applied, from) {
                        return self.fail(e);
                    }
                    for t in acked {
                        if !applied.contains(&t) {
                            return self.fail(format!(
                                "{sid} acknowledged {:#x} it did not apply",
                                t.zxid
                            ));
                        }
                        self.checker.on_acked(t);
                    }
                }
                Action::Proposed { zxid } => {
                    let data = self.proposing.take().expect("a proposal in flight");
                    self.m(sid).proposals.insert(zxid, data);
                }
                Action::ProposeRefused => {
                    self.proposing = None;
                }
                Action::ConfigSeen { .. } => {}
                Action::ConfigActivated { config } => {
                    if let Err(e) = self.checker.on_config(sid, &config) {
                        return self.fail(e);
                    }
                    self.m(sid).config = config;
                }
                Action::RoleChanged(rc) => {
                    let m = self.m(sid);
                    m.role = Some(rc);
                    if !matches!(rc, RoleChange::LeaderEstablished { .. }) {
                        // Whatever it proposed and did not commit is the client's
                        // connection loss: never acknowledged.
                        m.proposals.clear();
                    }
                    if let RoleChange::LeaderEstablished { epoch } = rc {
                        let m = &self.members[sid as usize - 1];
                        let mut held: BTreeMap<Zxid, Txn> =
                            m.applied.iter().map(|t| (t.zxid, t.clone())).collect();
                        for t in m.storage.log() {
                            held.insert(t.zxid, t.clone());
                        }
                        if let Err(e) = self.checker.on_established(epoch, sid, &held) {
                            self.fail(e);
                        }
                    }
                }
            }
        }
    }

    fn schedule_sync(&mut self, sid: Sid) {
        let now = self.now_ms;
        let (lo, hi) = self.members[sid as usize - 1].fsync_ms;
        let d = self.rng.gen_range(lo..=hi);
        let m = self.m(sid);
        if m.sync.is_none() && m.storage.has_unsynced() {
            m.sync = Some((now + d, m.storage.sync_point()));
        }
    }

    /// Proposes a client txn on `sid`; with reconfig on, now and then a reconfig.
    pub fn propose(&mut self, sid: Sid) {
        self.proposals_made += 1;
        if self.opts.reconfig && self.rng.gen_range(0..self.opts.reconfig_every) == 0 {
            if let Some(new) = self.random_config(sid) {
                return self.propose_reconfig(sid, &new);
            }
        }
        let data = Bytes::from(format!("s{}-c{}", self.seed, self.proposals_made));
        self.proposing = Some(data.clone());
        self.input(sid, Input::Propose { txn: data });
        self.proposing = None;
    }

    /// A random new config the leader `sid` may propose, as the server's reconfig
    /// rules allow it: none pending (RECONFIGINPROGRESS), at least two voters, and
    /// the leader with its synced followers a quorum of it (NEWCONFIGNOQUORUM).
    /// `None` when the draw breaks a rule.
    fn random_config(&mut self, sid: Sid) -> Option<QuorumVerifier> {
        let peer = self.members[sid as usize - 1].peer.as_ref()?;
        let current = peer.quorum_config().clone();
        if peer.last_seen_config().version() != current.version() {
            return None;
        }
        let synced: Vec<Sid> = peer
            .learners()
            .iter()
            .filter(|l| l.forwarding && !l.observer)
            .map(|l| l.sid)
            .chain([sid])
            .collect();
        let version = peer.next_zxid()?;
        let lines: Vec<_> = (1..=self.members.len() as Sid)
            .filter_map(|s| match self.rng.gen_range(0..10) {
                0..=5 => Some(sim_line(s, false)),
                6..=7 => Some(sim_line(s, true)),
                _ => None,
            })
            .collect();
        let new = QuorumVerifier::from_servers(lines, version).ok()?;
        let ok = new.participants().count() >= 2 && new.contains_quorum(synced);
        ok.then_some(new)
    }

    /// Proposes on leader `sid` the reconfig txn that installs `new`
    /// (`new.version()` must be the leader's next zxid).
    pub fn propose_reconfig(&mut self, sid: Sid, new: &QuorumVerifier) {
        let data = reconfig_txn(new);
        let now = self.now_ms;
        let text = new.text().replace('\n', " ");
        self.log(|| format!("{now} {sid}: propose reconfig {text}"));
        self.proposing = Some(data.clone());
        self.input(sid, Input::Propose { txn: data });
        self.proposing = None;
    }

    /// The members that say they lead an established epoch.
    pub fn leaders(&self) -> Vec<Sid> {
        self.members
            .iter()
            .filter(|m| {
                m.peer.is_some() && matches!(m.role, Some(RoleChange::LeaderEstablished { .. }))
            })
            .map(|m| m.sid)
            .collect()
    }

    /// The one established leader, if exactly one member is.
    pub fn leader(&self) -> Option<Sid> {
        match self.leaders().as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    }

    fn random_fault(&mut self) {
        let n = self.members.len() as Sid;
        let sid = self.rng.gen_range(1..=n);
        let other = {
            let o = self.rng.gen_range(1..n);
            if o >= sid {
                o + 1
            } else {
                o
            }
        };
        let until = self.now_ms + self.rng.gen_range(300..4_000);
        match self.rng.gen_range(0..100) {
            0..=19 => {
                let now = self.now_ms;
                self.log(|| format!("{now} break {sid}-{other}"));
                self.break_conn(sid, other, true);
            }
            20..=34 => {
                let pairs = self.isolate(sid);
                self.timers.push((until, Timer::Unblock { pairs }));
            }
            35..=44 => {
                self.block(sid, other);
                self.timers.push((
                    until,
                    Timer::Unblock {
                        pairs: vec![(sid, other)],
                    },
                ));
            }
            45..=54 => {
                self.block(sid, other);
                self.block(other, sid);
                self.timers.push((
                    until,
                    Timer::Unblock {
                        pairs: vec![(sid, other), (other, sid)],
                    },
                ));
            }
            55..=74 => {
                let down = self.members.iter().filter(|m| m.peer.is_none()).count();
                if self.alive(sid) && down < self.members.len() {
                    self.crash(sid);
                    let back = self.now_ms + self.rng.gen_range(200..3_000);
                    self.timers.push((back, Timer::Restart { sid }));
                }
            }
            75..=84 => {
                let slow = self.rng.gen_range(100..1_500);
                self.m(sid).fsync_ms = (slow / 2, slow);
                self.timers.push((until, Timer::FsyncNormal { sid }));
            }
            85..=92 => {
                // A lagging tick: the member's clock stalls (a GC pause).
                let lag = self.rng.gen_range(200..1_500);
                let m = self.m(sid);
                m.next_tick_ms += lag;
            }
            _ => self.local_snapshot(sid),
        }
    }

    /// `sid` takes a local snapshot of its applied state, as the server does, which
    /// drops the log entries it covers.
    pub fn local_snapshot(&mut self, sid: Sid) {
        let m = self.m(sid);
        if let Some(last) = m.applied.last() {
            let z = last.zxid;
            let bytes = encode_state(&m.applied);
            m.storage.save_snapshot(z, bytes);
            let now = self.now_ms;
            self.log(|| format!("{now} {sid}: local snapshot {z:#x}"));
        }
    }

    /// Runs until `until_ms` or a failure.
    pub fn run_until(&mut self, until_ms: u64) {
        #[derive(Clone, Copy)]
        enum Ev {
            Tick(usize),
            Sync(usize),
            Deliver(QueueKey),
            Timer(usize),
            Fault,
            Propose,
        }
        while self.failure.is_none() {
            if let Some((sid, input)) = self.pending.pop_front() {
                self.input(sid, input);
                continue;
            }
            let mut best: Option<(u64, Ev)> = None;
            let mut consider = |at: u64, ev: Ev| {
                if best.is_none_or(|(b, _)| at < b) {
                    best = Some((at, ev));
                }
            };
            for (i, m) in self.members.iter().enumerate() {
                if m.peer.is_some() {
                    consider(m.next_tick_ms, Ev::Tick(i));
                    if let Some((at, _)) = m.sync {
                        consider(at, Ev::Sync(i));
                    }
                }
            }
            for (k, q) in &self.queues {
                if let Some(head) = q.front() {
                    if k.channel == 0 || !self.blocked.contains_key(&(k.from, k.to)) {
                        consider(head.at_ms, Ev::Deliver(*k));
                    }
                }
            }
            for (i, (at, _)) in self.timers.iter().enumerate() {
                consider(*at, Ev::Timer(i));
            }
            if self.chaos {
                consider(self.next_fault_ms, Ev::Fault);
            }
            if self.workload {
                consider(self.next_propose_ms, Ev::Propose);
            }
            let Some((at, ev)) = best else { break };
            if at > until_ms {
                self.now_ms = until_ms;
                break;
            }
            self.now_ms = self.now_ms.max(at);
            match ev {
                Ev::Tick(i) => {
                    let lag = if self.rng.gen_bool(0.01) {
                        self.rng.gen_range(0..300)
                    } else {
                        0
                    };
                    self.members[i].next_tick_ms = self.now_ms + TICK_MS / 2 + lag;
                    self.input(i as Sid + 1, Input::Tick);
                }
                Ev::Sync(i) => {
                    let m = &mut self.members[i];
                    let (_, point) = m.sync.take().expect("sync");
                    let zxid = m.storage.sync_to(point);
                    let sid = m.sid;
                    let synced = m.storage_acks.iter().take_while(|a| a.0 <= zxid).count();
                    let acks: Vec<(Zxid, Sid, u64)> = m.storage_acks.drain(..synced).collect();
                    let now = self.now_ms;
                    self.log(|| format!("{now} {sid}: durable {zxid:#x}"));
                    // The storage thread's ACKs, before the core hears of the sync.
                    for (z, to, generation) in acks {
                        let c = self.conns.get(&key(sid, to)).copied().unwrap_or_default();
                        if c.up && c.generation == generation {
                            self.log(|| format!("{now} {sid}: storage -> {to}: ACK {z:#x}"));
                            *self.syncs.entry("storage_ack").or_default() += 1;
                            self.enqueue(sid, to, Message::Ack { zxid: z }, generation);
                        }
                    }
                    self.schedule_sync(sid);
                    self.input(sid, Input::Durable { zxid });
                }
                Ev::Deliver(k) => {
                    let f = self
                        .queues
                        .get_mut(&k)
                        .and_then(|q| q.pop_front())
                        .expect("head");
                    let current = self
                        .conns
                        .get(&key(k.from, k.to))
                        .copied()
                        .unwrap_or_default();
                    if k.channel == 1 && (!current.up || current.generation != f.generation) {
                        continue;
                    }
                    if self.trace.is_some() {
                        let line = format!(
                            "{} {} <- {}: {}",
                            self.now_ms,
                            k.to,
                            k.from,
                            short_msg(&f.msg)
                        );
                        self.log(|| line);
                    }
                    let victim = match &self.crash_on_delivery {
                        Some((to, matches, victim)) if *to == k.to && matches(&f.msg) => {
                            Some(*victim)
                        }
                        _ => None,
                    };
                    self.input(
                        k.to,
                        Input::Message {
                            from: k.from,
                            msg: f.msg,
                        },
                    );
                    if let Some(v) = victim {
                        self.crash_on_delivery = None;
                        self.crash(v);
                    }
                }
                Ev::Timer(i) => {
                    let (_, t) = self.timers.swap_remove(i);
                    match t {
                        Timer::ConnectFailed {
                            sid,
                            peer,
                            generation,
                        } => {
                            let c = self.conns.get(&key(sid, peer)).copied().unwrap_or_default();
                            if c.generation == generation && !c.up {
                                self.input(sid, Input::Disconnected { peer });
                            }
                        }
                        Timer::Restart { sid } => self.restart(sid),
                        Timer::Unblock { pairs } => {
                            for (a, b) in pairs {
                                self.unblock(a, b);
                            }
                        }
                        Timer::FsyncNormal { sid } => self.m(sid).fsync_ms = (1, 5),
                        Timer::LogRead { sid, input } => self.input(sid, input),
                    }
                }
                Ev::Fault => {
                    self.random_fault();
                    self.next_fault_ms = self.gap(self.opts.fault_every_ms);
                }
                Ev::Propose => {
                    self.next_propose_ms = self.gap(self.opts.propose_every_ms);
                    let leaders = self.leaders();
                    if !leaders.is_empty() {
                        let sid = leaders[self.rng.gen_range(0..leaders.len())];
                        self.propose(sid);
                    }
                }
            }
        }
    }

    /// Runs for `ms` more.
    pub fn run_for(&mut self, ms: u64) {
        self.run_until(self.now_ms + ms);
    }

    /// Runs until `cond` holds (checked between events, at most every 10 ms of
    /// simulated time) or `ms` pass; whether it held.
    pub fn run_until_cond(&mut self, ms: u64, mut cond: impl FnMut(&World) -> bool) -> bool {
        let end = self.now_ms + ms;
        while self.now_ms < end && self.failure.is_none() {
            if cond(self) {
                return true;
            }
            self.run_for(10);
        }
        cond(self)
    }

    /// Ends the chaos: heals the network, restarts every member, fsyncs fast again.
    pub fn calm(&mut self) {
        self.chaos = false;
        self.heal();
        self.timers
            .retain(|(_, t)| matches!(t, Timer::ConnectFailed { .. } | Timer::LogRead { .. }));
        for sid in 1..=self.members.len() as Sid {
            self.m(sid).fsync_ms = (1, 5);
            self.restart(sid);
        }
    }
}

/// The simulation's server line for `sid` (addresses are names only here).
pub fn sim_line(sid: Sid, observer: bool) -> ServerLine {
    ServerLine {
        sid,
        host: "10.0.0.1".into(),
        quorum_port: 2000 + sid as u16 * 10,
        election_port: 2001 + sid as u16 * 10,
        observer,
        client: None,
    }
}

/// A reconfig txn as ZooKeeper's leader preps it: TxnHeader (type 16, zxid = the
/// config's version) and a SetDataTxn of `/zookeeper/config` holding the config text.
pub fn reconfig_txn(config: &QuorumVerifier) -> Bytes {
    let header = TxnHeader {
        session_id: 0x5e55,
        cxid: 1,
        zxid: config.version() as i64,
        time_ms: 0,
        kind: 16, // OpCode.reconfig
    };
    let txn = ZkTxn::SetData {
        path: "/zookeeper/config".into(),
        data: Some(Bytes::from(config.text())),
        version: -1,
    };
    encode_payload(&header, &txn, None).expect("a SetDataTxn encodes")
}

fn short_msg(m: &Message) -> String {
    match m {
        Message::Snap { zxid, .. } => format!("Snap({zxid:#x})"),
        Message::Proposal { zxid, .. } => format!("Proposal({zxid:#x})"),
        Message::Inform { zxid, .. } => format!("Inform({zxid:#x})"),
        Message::Notification(n) => format!(
            "Vote({:?} leader {} zxid {:#x} round {} epoch {})",
            n.state, n.leader, n.zxid, n.election_epoch, n.peer_epoch
        ),
        other => format!("{other:x?}"),
    }
}

fn short(a: &Action) -> String {
    match a {
        Action::Send { to, msg } => format!("-> {to}: {}", short_msg(msg)),
        Action::AppendTxns { txns, ack_to } => format!(
            "append {:#x}..{:#x}{}",
            txns[0].zxid,
            txns[txns.len() - 1].zxid,
            ack_to.map_or(String::new(), |to| format!(", ACK to {to} once synced"))
        ),
        Action::InstallSnapshot { zxid, .. } => format!("install snapshot {zxid:#x}"),
        other => format!("{other:x?}"),
    }
}

/// What a seed that passed did: how many txns were acknowledged, and the syncs
/// leaders started by kind (`World::syncs`).
#[derive(Debug)]
pub struct Outcome {
    pub acked: usize,
    /// Reconfig txns in the committed history.
    pub reconfigs: u64,
    pub syncs: BTreeMap<&'static str, u64>,
}

/// Runs a seed's random schedule: chaos, then calm with a liveness check. Err holds
/// the failure with the seed to replay it.
pub fn run_seed(seed: u64, opts: Options) -> Result<Outcome, String> {
    let mut w = World::new(seed, opts.clone());
    w.run_until(opts.chaos_ms);
    if w.failure.is_none() {
        w.calm();
        let before = w.checker.acked.len();
        let end = w.now_ms + opts.heal_ms;
        let progressed = w.run_until_cond(opts.heal_ms, |w| w.checker.acked.len() > before + 5);
        w.run_until(end.min(w.now_ms + 1_000));
        if w.failure.is_none() && !progressed {
            w.fail(format!(
                "no progress within {} ms after healing; roles {:?}",
                opts.heal_ms,
                w.members
                    .iter()
                    .map(|m| (m.sid, m.role))
                    .collect::<Vec<_>>()
            ));
        }
        if w.failure.is_none() {
            // Writes stop; every member, observers included, must reach the same state.
            w.workload = false;
            // With reconfig, also every member on the last committed config: a member
            // syncing may hold the reconfig's commit and activate it only at UPTODATE.
            let same = w.run_until_cond(opts.heal_ms, |w| {
                let mut lasts = w.members.iter().map(|m| m.applied.last().map(|t| t.zxid));
                let first = lasts.next().flatten();
                let configs = !opts.reconfig
                    || w.checker.last_committed_config().is_none_or(|last| {
                        w.members
                            .iter()
                            .all(|m| m.config.version() == last.version())
                    });
                first.is_some() && lasts.all(|l| l == first) && configs
            });
            if w.failure.is_none() && !same {
                w.fail(format!(
                    "members did not converge after healing: applied {:x?}, configs {:x?}, roles {:?}",
                    w.members
                        .iter()
                        .map(|m| m.applied.last().map(|t| t.zxid))
                        .collect::<Vec<_>>(),
                    w.members
                        .iter()
                        .map(|m| m.config.version())
                        .collect::<Vec<_>>(),
                    w.members
                        .iter()
                        .map(|m| (m.sid, m.role))
                        .collect::<Vec<_>>()
                ));
            }
        }
        if w.failure.is_none() {
            if let Err(e) = w.checker.acked_committed() {
                w.fail(e);
            }
        }
        if w.failure.is_none() && opts.reconfig {
            // A committed config is never lost: once healed, every member runs the
            // last one committed.
            if let Some(last) = w.checker.last_committed_config() {
                let behind: Vec<(Sid, Zxid)> = w
                    .members
                    .iter()
                    .filter(|m| m.config.version() != last.version())
                    .map(|m| (m.sid, m.config.version()))
                    .collect();
                if !behind.is_empty() {
                    w.fail(format!(
                        "members not on the last committed config {:#x}: {behind:x?}",
                        last.version()
                    ));
                }
            }
        }
    }
    if let Ok(path) = std::env::var("KEEL_SIM_TRACE") {
        if path.len() > 1 {
            std::fs::write(&path, w.trace_tail()).expect("trace file");
        }
    }
    match w.failure.take() {
        None => Ok(Outcome {
            acked: w.checker.acked.len(),
            reconfigs: w.checker.reconfigs(),
            syncs: std::mem::take(&mut w.syncs),
        }),
        Some(e) => Err(format!(
            "seed {seed} ({} members{}) failed: {e}\nreplay: KEEL_SIM_SEED={seed}{} cargo test --release --test sim replay -- --nocapture\n{}",
            opts.participants,
            if opts.reconfig { ", reconfig" } else { "" },
            if opts.reconfig { " KEEL_SIM_RECONFIG=1" } else { "" },
            w.trace_tail()
        )),
    }
}

//! One ensemble member, sans-I/O: the Zab core ([`Peer`]) and the state machine
//! ([`Server`]) glued together in both directions, as ZooKeeper's QuorumPeer joins its
//! Leader/Follower to its ZooKeeperServer. A [`Replica`] opens no socket, reads no
//! clock and calls no storage: the runtime (or a test, or the simulation) feeds it one
//! input per step function with the time as a value and executes the [`Effect`]s it
//! returns, in order.
//!
//! Zab -> server:
//! - `RoleChanged` becomes the server's [`Role`]: electing, leading before the epoch is
//!   established, and learning before UPTODATE are `NotServing`; an established
//!   epoch is `Leader`, UPTODATE is `Learner`. With read-only mode on
//!   ([`Replica::enable_read_only_mode`]), a member still LOOKING after the grace
//!   period becomes `ReadOnly` at a tick, as ZooKeeper's QuorumPeer starts its
//!   ReadOnlyZooKeeperServer; any role change out of LOOKING ends it.
//! - `Commit { upto }` applies every logged txn up to `upto`: on the leader its own
//!   proposals as [`server::Input::Durable`] (the server holds them prepped), every
//!   other txn (old epochs committed at sync, everything on a learner) as
//!   [`server::Input::Apply`], decoded from ZooKeeper's TxnHeader + record by
//!   [`crate::zab::wire::txn`]. The replica keeps the payloads of txns appended and not
//!   yet committed (those of the recovered log too) for that.
//! - `Deliver` becomes `Remote` (a REQUEST, its record decoded here by opcode as the
//!   client port decodes it), `Revalidate`, `Touched` (a PING's sessions),
//!   `RevalidateReply` or `SyncReply`.
//! - `SendSnapshot` takes the applied state and sends SNAP (ZooKeeper's DataTree
//!   stream, [`snap`]); `InstallSnapshot` replaces the applied state from that stream
//!   and is also returned, for storage, with the stream as it came (storage keeps it
//!   so, [`crate::storage::zab`], and a restart reads it back as this did).
//! - Every other action is returned as [`Effect::Zab`], in order.
//!
//! Server -> Zab:
//! - `StorageOp::Append` is proposed ([`zab::Input::Propose`]); the zxid Zab gives it
//!   must be the one the server gave it (see [`Effect::Halt`]).
//! - Forwards, revalidations, revalidation answers and SYNC answers become REQUEST,
//!   REVALIDATE and SYNC packets, sent after the whole batch of actions of the step, so
//!   a SYNC goes behind the COMMITs of the same step.
//! - The sessions a learner's clients touched fill its PING echo.
//! - Client packets are [`Effect::Client`]; the server's local snapshot operations are
//!   [`Effect::Storage`].

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;

use crate::import::passwd::session_passwd;
use crate::member::snap_send::{Finished, SnapSends, SNAP_STEP_BYTES};
use crate::proto::opcode as op;
use crate::proto::wire::decode_request;
use crate::server::reconfig::ReconfigContext;
use crate::server::recovery::{decode_snapshot_header, SnapshotSession};
use crate::server::stats::SummaryStat;
use crate::server::{
    self, Forwarded, Outbound, Revalidate, RevalidateReply, Role, Server, Settings, StorageOp,
};
use crate::storage::zab::{decode_snapshot, SNAPSHOT_FORM_MAGIC};
use crate::tree::{snapshot as tree_snapshot, DataTree};
use crate::watch::ConnId;
use crate::zab::message::Message;
use crate::zab::wire::reader::Input as StreamInput;
use crate::zab::wire::snap;
use crate::zab::wire::txn::{decode_keel, encode_keel};
use crate::zab::{self, Action, Peer, Recovered, RoleChange, Sid, Txn, Zxid};

/// What the runtime must do, in the order returned.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// A Zab action, executed as for a bare [`Peer`] (see [`crate::zab`]'s ordering
    /// rules): `Send`, `CloseConnection`, `AppendTxns`, `PersistAcceptedEpoch`,
    /// `PersistCurrentEpoch`, `TruncateLog`, `InstallSnapshot` (the state machine has
    /// already taken it; storage must too) and `ReadLog`. The replica answers
    /// `SendSnapshot`, `Commit`, `Deliver`, `RoleChanged`, `Proposed` and
    /// `ProposeRefused` itself, so they never appear here.
    Zab(Action),
    /// Write this to client connection `conn`, as for a standalone server.
    Client {
        /// The connection.
        conn: ConnId,
        /// What to write (or close).
        out: Outbound,
    },
    /// The server's own periodic snapshot: `SnapshotChunk` and `SnapshotDone` (never
    /// `Append`: txns go to the txn log through Zab's `AppendTxns`).
    Storage(StorageOp),
    /// The replica found its two halves disagreeing (Zab gave a proposal another zxid
    /// than the server did, a committed txn or a snapshot does not decode, a snapshot
    /// to send is not of the committed state). Applying on would diverge from the
    /// ensemble, so it takes no more input: the runtime must stop this member and
    /// restart it from storage, as ZooKeeper exits on such errors. A debug build
    /// panics where the cause is keel's own bug.
    Halt {
        /// What disagreed.
        reason: String,
    },
}

/// One ensemble member: the Zab core and the state machine, glued.
pub struct Replica {
    peer: Peer,
    server: Server,
    /// The leader this member learns from, from `Following` / `Observing` on.
    leader: Option<Sid>,
    /// Logged txns not yet committed, ascending: applied at their `Commit`. Bounded as
    /// Zab's own log of txns not known committed is (the payloads are shared `Bytes`).
    uncommitted: VecDeque<Txn>,
    /// The first zxid the server proposed itself in the current role: every later
    /// txn is its own (held prepped), every earlier one is applied from its payload.
    own_from: Option<Zxid>,
    halted: Option<String>,
    effects: Vec<Effect>,
    /// The Zab core's actions of the step being run, kept empty between steps so that
    /// a step allocates none ([`Peer::step_into`]).
    actions: Vec<Action>,
    /// The server's storage operations and forwards being handed on, kept empty
    /// between calls for the same reason.
    storage_ops: Vec<StorageOp>,
    forwards: Vec<Forwarded>,
    syncs: SyncCounts,
    /// The proposals this member made as leader (see [`ProposalStats`]).
    proposal_stats: ProposalStats,
    /// While leading: when each recent proposal was made (see [`ProposalTimes`]).
    proposal_times: ProposalTimes,
    /// When this member last started electing, ms; `None` once an election ended (the
    /// console's election record; `looking_since_ms` is the read-only grace period's).
    election_started_ms: Option<u64>,
    /// How its last election went.
    last_election: Option<ElectionRecord>,
    /// The election and sync figures `mntr` and `/metrics` report (see [`RoleMetrics`]).
    role_metrics: RoleMetrics,
    /// Set from start-up and from installing a leader's SNAP until this member serves
    /// again (UPTODATE, or its leadership established): the txns committed meanwhile
    /// apply leniently, as the tree may already hold some of them. A SNAP is fuzzy
    /// (ZooKeeper's leader, and keel's, [`crate::member::snap_send`], serialize the tree
    /// while they go on applying txns), so the tree may hold txns after the SNAP's zxid,
    /// which then come as proposals and commits and would find their znode created or
    /// deleted already; every such txn is committed before UPTODATE (it was applied
    /// during the serialization, before the learner could ACK NEWLEADER). The snapshot
    /// a member starts from is fuzzy the same way: its own periodic one, or a SNAP it
    /// installed and crashed before the txns after it were durable, which a leader then
    /// sends again. ZooKeeper ignores NODEEXISTS and NONODE there (DataTree.processTxn,
    /// as FileTxnSnapLog.processTransaction at start-up); keel applies them as its
    /// recovery does (`Server::set_lenient_upto`).
    fuzzy_sync: bool,
    /// The ensemble's membership text ([`crate::config::Config::membership`]), which
    /// `/zookeeper/config` holds.
    membership: Bytes,
    /// Since when (ms) the Zab core has been LOOKING without a break; `None` otherwise.
    looking_since_ms: Option<u64>,
    /// With read-only mode on: how long (ms) a member must have been LOOKING before it
    /// serves read-only clients; `None`: read-only mode is off.
    read_only_grace_ms: Option<u64>,
    /// `standaloneEnabled` (true): a reconfig then needs 2 voters, else 1.
    standalone_enabled: bool,
    /// While leading: the SNAPs being written to learners, in steps ([`Replica::snap_step`]).
    snap_sends: SnapSends,
    /// Stream bytes per [`Replica::snap_step`] ([`SNAP_STEP_BYTES`]; the simulation
    /// makes steps small so that txns apply between them).
    snap_step_bytes: usize,
}

/// The least time, ms, a member waits in LOOKING before it turns read-only (ZooKeeper's
/// QuorumPeer: `Math.max(2000, tickTime)`, "lower-bound grace period to 2 secs").
pub const READ_ONLY_GRACE_MIN_MS: u64 = 2000;

/// How many learners this member synced, while leading, in each way since it started
/// (ZooKeeper's `LearnerHandler` counts DIFF and TRUNC syncs together as `diff_count`
/// and SNAP syncs as `snap_count`; keel also keeps TRUNC apart for its log).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyncCounts {
    /// Syncs that began with DIFF.
    pub diff: u64,
    /// Syncs that began with TRUNC.
    pub trunc: u64,
    /// Syncs that began with SNAP.
    pub snap: u64,
}

/// The proposals a member made while leading: how many since it started (ZooKeeper's
/// `ServerMetrics.PROPOSAL_COUNT`, `zk_proposal_count`) and the sizes of the current
/// leadership's ones, the txn bytes of each PROPOSAL (`Leader.propose`'s
/// `proposalStats`, a BufferStats each Leader starts afresh: `Proposal sizes
/// last/min/max`, `zk_*_proposal_size`; -1 before the first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProposalStats {
    /// Proposals made since this member started.
    pub count: u64,
    /// The leadership the sizes are of (its start, ms).
    pub leading_since_ms: Option<u64>,
    /// Last, smallest and largest proposal of that leadership, bytes.
    pub last_min_max: (i64, i64, i64),
}

impl Default for ProposalStats {
    fn default() -> Self {
        ProposalStats {
            count: 0,
            leading_since_ms: None,
            last_min_max: (-1, -1, -1),
        }
    }
}

impl ProposalStats {
    fn record(&mut self, leading_since_ms: Option<u64>, size: usize) {
        if self.leading_since_ms != leading_since_ms {
            self.leading_since_ms = leading_since_ms;
            self.last_min_max = (-1, -1, -1);
        }
        let size = size as i64;
        let (_, min, max) = self.last_min_max;
        self.count += 1;
        self.last_min_max = (
            size,
            if min < 0 { size } else { min.min(size) },
            max.max(size),
        );
    }

    /// The sizes, of the leadership starting at `leading_since_ms` only (a member that
    /// no longer leads, or leads again, shows none of its earlier ones).
    pub fn sizes(&self, leading_since_ms: Option<u64>) -> (i64, i64, i64) {
        match leading_since_ms {
            Some(_) if leading_since_ms == self.leading_since_ms => self.last_min_max,
            _ => (-1, -1, -1),
        }
    }
}

/// Proposal times kept while leading ([`ProposalTimes`]). Entries every synced
/// participant acknowledged are dropped when the queue is full; a learner stuck further
/// back then shows a lag of at least the oldest entry's age.
const PROPOSAL_TIMES: usize = 4096;

/// When the leader's recent proposals were made, (zxid, ms), ascending, at most
/// [`PROPOSAL_TIMES`] of them, for the learners' lag in ms.
#[derive(Debug, Default)]
struct ProposalTimes {
    times: VecDeque<(Zxid, u64)>,
    /// The last zxid whose time was dropped (0: none).
    dropped: Zxid,
}

impl ProposalTimes {
    /// Keeps `zxid`'s time. When full, first drops the times every synced participant
    /// acknowledged (`min_acked` gives the least of their ACKs), then the oldest.
    fn record(&mut self, zxid: Zxid, now_ms: u64, min_acked: impl FnOnce() -> Zxid) {
        if self.times.len() >= PROPOSAL_TIMES {
            let acked = min_acked();
            while let Some(&(z, _)) = self.times.front() {
                if z > acked && self.times.len() < PROPOSAL_TIMES {
                    break;
                }
                self.dropped = z;
                self.times.pop_front();
            }
        }
        self.times.push_back((zxid, now_ms));
    }

    /// When the first txn after `acked` was proposed.
    fn at(&self, acked: Zxid) -> ProposedAt {
        let i = self.times.partition_point(|&(z, _)| z <= acked);
        match self.times.get(i) {
            None => ProposedAt::CaughtUp,
            // Txns up to `dropped` were proposed before the oldest time kept.
            Some(&(_, t)) if i == 0 && acked < self.dropped => ProposedAt::Before(t),
            Some(&(_, t)) => ProposedAt::At(t),
        }
    }
}

/// What ZooKeeper's `ServerMetrics` count of a member's role changes since it started,
/// as `mntr` and `/metrics` report them:
/// - `looking_count`: each time it starts LOOKING (`QuorumPeer.run`'s LOOKING case; a
///   member starts LOOKING, so a fresh one counts 1; an election begun again while
///   still LOOKING, and a read-only server's whole LOOKING spell, count once);
/// - `election_time`: ms from starting to look to starting to lead or follow
///   (`Leader.lead`, `Follower.followLeader`; an observer records none), also when a
///   reconfig turns an observer into a follower without an election (0 ms here);
/// - `follower_sync_time` / `observer_sync_time`: ms from connecting to the leader to
///   UPTODATE (`Follower.followLeader`, `Observer.observeLeader`), a reconfig's
///   role change included;
/// - `unavailable_time` / `leader_unavailable_time`: ms from leaving broadcast (LOOKING,
///   or a reconfig's role change) to broadcast again, the latter when it then leads
///   (`QuorumPeer.setZabState`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleMetrics {
    /// Times it started LOOKING.
    pub looking_count: u64,
    /// See the type's documentation.
    pub election_time: SummaryStat,
    /// See the type's documentation.
    pub follower_sync_time: SummaryStat,
    /// See the type's documentation.
    pub observer_sync_time: SummaryStat,
    /// See the type's documentation.
    pub unavailable_time: SummaryStat,
    /// See the type's documentation.
    pub leader_unavailable_time: SummaryStat,
    /// PROPOSALs a learner received once synced (`Follower.processPacket`:
    /// `zk_learner_proposal_received_count`).
    pub learner_proposals_received: u64,
    /// COMMITs a follower and INFORMs an observer received once synced
    /// (`zk_learner_commit_received_count`).
    pub learner_commits_received: u64,
    /// Txns committed while leading, reconfigs not (`Leader.commit`:
    /// `zk_commit_count`).
    pub leader_commits: u64,
    /// When the current election began, ms.
    looking_since_ms: Option<u64>,
    /// When it connected to its leader (and as an observer), until UPTODATE.
    syncing_since_ms: Option<(u64, bool)>,
    /// When it left broadcast, until it is in broadcast again.
    unavailable_since_ms: Option<u64>,
}

impl Default for RoleMetrics {
    fn default() -> Self {
        RoleMetrics::starting(0, false)
    }
}

impl RoleMetrics {
    /// The figures of a member starting at `now_ms`, LOOKING or not.
    pub fn starting(now_ms: u64, looking: bool) -> RoleMetrics {
        RoleMetrics {
            looking_count: u64::from(looking),
            election_time: SummaryStat::default(),
            follower_sync_time: SummaryStat::default(),
            observer_sync_time: SummaryStat::default(),
            unavailable_time: SummaryStat::default(),
            leader_unavailable_time: SummaryStat::default(),
            learner_proposals_received: 0,
            learner_commits_received: 0,
            leader_commits: 0,
            looking_since_ms: looking.then_some(now_ms),
            syncing_since_ms: None,
            unavailable_since_ms: Some(now_ms),
        }
    }

    /// Counts a role change at `now_ms`; `was_looking`: the member was LOOKING already.
    pub fn record(&mut self, now_ms: u64, change: RoleChange, was_looking: bool) {
        let since = |t: Option<u64>| t.map_or(0, |t| now_ms.saturating_sub(t));
        match change {
            RoleChange::Looking => {
                if !was_looking {
                    self.looking_count += 1;
                    self.looking_since_ms = Some(now_ms);
                }
                self.syncing_since_ms = None;
                self.unavailable_since_ms.get_or_insert(now_ms);
            }
            RoleChange::Leading | RoleChange::Following { .. } | RoleChange::Observing { .. } => {
                let observer = matches!(change, RoleChange::Observing { .. });
                if !observer {
                    self.election_time.add(since(self.looking_since_ms.take()));
                }
                self.looking_since_ms = None;
                self.syncing_since_ms =
                    (!matches!(change, RoleChange::Leading)).then_some((now_ms, observer));
                self.unavailable_since_ms.get_or_insert(now_ms);
            }
            RoleChange::LeaderEstablished { .. } | RoleChange::LearnerServing { .. } => {
                if let Some((t, observer)) = self.syncing_since_ms.take() {
                    let sync = if observer {
                        &mut self.observer_sync_time
                    } else {
                        &mut self.follower_sync_time
                    };
                    sync.add(now_ms.saturating_sub(t));
                }
                if let Some(t) = self.unavailable_since_ms.take() {
                    let ms = now_ms.saturating_sub(t);
                    self.unavailable_time.add(ms);
                    if matches!(change, RoleChange::LeaderEstablished { .. }) {
                        self.leader_unavailable_time.add(ms);
                    }
                }
            }
        }
    }
}

/// One election of this member, from LOOKING to following or leading.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ElectionRecord {
    /// When it started looking, ms.
    pub started_ms: u64,
    /// When it ended (this member started leading, following or observing), ms.
    pub ended_ms: u64,
    /// The leader it chose.
    pub leader: Sid,
    /// The winning vote's last zxid and currentEpoch, when the vote is known.
    pub vote: Option<(Zxid, u32)>,
}

/// When a learner's oldest unacknowledged txn was proposed (see [`Replica::proposed_at`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProposedAt {
    /// Nothing after its acknowledged zxid was proposed in this term of leading.
    CaughtUp,
    /// The first txn after its acknowledged zxid was proposed at this ms.
    At(u64),
    /// Proposed before the oldest time kept, which is this ms.
    Before(u64),
}

/// The applied state as a snapshot holds it.
struct State {
    zxid: Zxid,
    tree: DataTree,
    sessions: Vec<SnapshotSession>,
}

/// The znode holding the ensemble's membership (ZooDefs.CONFIG_NODE).
const CONFIG_NODE: &str = "/zookeeper/config";

impl Replica {
    /// A member starting at `now_ms` from what its storage recovered: `recovered` (Zab's
    /// epochs and log, [`zab::storage::ZabStorage::recover`]) and `snapshot`, the bytes
    /// of the snapshot at `recovered.snapshot_zxid` (ignored when that is 0). The state
    /// machine starts from the snapshot alone: the logged txns after it are applied
    /// once a leader commits them. `settings.durable` is forced on (a txn applies at
    /// its commit); `seed` is the server's randomness. The returned effects (the first
    /// notifications) must be executed.
    ///
    /// `membership` is what `/zookeeper/config` holds
    /// ([`crate::config::Config::membership`]): written into the tree now, unless the
    /// recovered snapshot holds a content already (ZooKeeper's QuorumPeerMain writes
    /// it into the empty database, which the snapshot then replaces), and again each
    /// time this member has synced with a leader as a learner (`Learner.syncWithLeader`).
    ///
    /// Errors: a sid above 255 (ZooKeeper puts it in a session id's high byte), or a
    /// snapshot that does not decode or is not at `recovered.snapshot_zxid`.
    pub fn new(
        config: zab::Config,
        mut settings: Settings,
        recovered: Recovered,
        snapshot: &[u8],
        membership: Bytes,
        now_ms: u64,
        seed: u64,
    ) -> Result<(Replica, Vec<Effect>), String> {
        let sid = u8::try_from(config.my_sid)
            .map_err(|_| format!("server id {} is above 255", config.my_sid))?;
        settings.durable = true;
        let mut server = Server::new(settings, 0, now_ms as i64, seed);
        server.set_server_id(sid);
        server.handle(now_ms as i64, server::Input::Role(Role::NotServing));
        if recovered.snapshot_zxid != 0 {
            let state = decode_state(snapshot, recovered.snapshot_zxid)?;
            if state.zxid != recovered.snapshot_zxid {
                return Err(format!(
                    "snapshot holds zxid {:#x}, storage says {:#x}",
                    state.zxid, recovered.snapshot_zxid
                ));
            }
            server.restore(state.zxid as i64, state.tree, &state.sessions);
        }
        let config_node_empty = server
            .tree
            .get(CONFIG_NODE)
            .is_some_and(|n| n.data_len() == 0);
        if config_node_empty {
            server.init_config_node(&membership, now_ms as i64);
        }
        if let Some(last) = recovered.log.last() {
            // Logged after the snapshot before this start: the leader commits them once
            // this member has synced; the snapshot may be a fuzzy ZooKeeper one.
            server.set_lenient_upto(last.zxid as i64);
        }
        let uncommitted = recovered.log.iter().cloned().collect();
        let (peer, actions) = Peer::new(config, recovered, now_ms);
        // A member starts LOOKING (ZooKeeper's QuorumPeer starts in that state, and its
        // read-only grace period runs from then).
        let looking_since_ms =
            (peer.state() == crate::zab::message::ServerState::Looking).then_some(now_ms);
        let mut replica = Replica {
            peer,
            server,
            leader: None,
            uncommitted,
            own_from: None,
            halted: None,
            effects: Vec::new(),
            actions: Vec::new(),
            storage_ops: Vec::new(),
            forwards: Vec::new(),
            syncs: SyncCounts::default(),
            proposal_stats: ProposalStats::default(),
            proposal_times: ProposalTimes::default(),
            election_started_ms: Some(now_ms),
            last_election: None,
            role_metrics: RoleMetrics::starting(now_ms, looking_since_ms.is_some()),
            fuzzy_sync: true,
            membership,
            looking_since_ms,
            read_only_grace_ms: None,
            standalone_enabled: true,
            snap_sends: SnapSends::default(),
            snap_step_bytes: SNAP_STEP_BYTES,
        };
        replica.run(now_ms, actions);
        let effects = replica.take();
        Ok((replica, effects))
    }

    /// Turns read-only mode on (`-Dreadonlymode.enabled=true`): from now on, a member
    /// that has been LOOKING for `max(2000, tick_ms)` ms without a break serves
    /// read-only clients ([`Role::ReadOnly`]) until it leaves LOOKING.
    pub fn enable_read_only_mode(&mut self, tick_ms: u64) {
        self.read_only_grace_ms = Some(tick_ms.max(READ_ONLY_GRACE_MIN_MS));
    }

    /// Sets the stream bytes a [`Replica::snap_step`] writes (default
    /// [`SNAP_STEP_BYTES`]); at least 1.
    pub fn set_snap_step_bytes(&mut self, bytes: usize) {
        self.snap_step_bytes = bytes.max(1);
    }

    /// Whether this member has not served since it started or installed a leader's
    /// SNAP: its tree may already hold txns after its applied zxid (snapshots are
    /// fuzzy), so it equals another member's at the same zxid only once it serves.
    pub fn in_fuzzy_sync(&self) -> bool {
        self.fuzzy_sync
    }

    /// Whether a SNAP to a learner is being written: call [`Replica::snap_step`]
    /// between other inputs until it is not.
    pub fn snap_sending(&self) -> bool {
        !self.snap_sends.is_empty()
    }

    /// Writes the next step of a SNAP in progress (see [`crate::member::snap_send`]);
    /// once one is finished, its `Send`s: the SNAP, then what was held behind it.
    pub fn snap_step(&mut self, now_ms: u64) -> Vec<Effect> {
        if self.halted.is_none() {
            let bytes = self.snap_step_bytes;
            let applied = self.server.last_zxid as Zxid;
            let done = self
                .snap_sends
                .step(&self.server.tree, applied, bytes, now_ms);
            if let Some(done) = done {
                self.release(done);
            }
        }
        self.take()
    }

    /// The `Send`s of a finished SNAP, in order.
    fn release(&mut self, done: Finished) {
        for msg in done.messages {
            self.effects
                .push(Effect::Zab(Action::Send { to: done.to, msg }));
        }
    }

    /// `standaloneEnabled=false`: a reconfig may leave a single voter (ZooKeeper's
    /// PrepRequestProcessor asks for 2 only with standalone enabled).
    pub fn set_standalone_enabled(&mut self, enabled: bool) {
        self.standalone_enabled = enabled;
    }

    /// Before a reconfig request reaches the state machine's prep: what the Zab core
    /// knows that the prep needs, when this member leads an established epoch that
    /// may propose (else none: a learner forwards it; ZooKeeper's non-leader answers
    /// UNIMPLEMENTED). Only reconfig requests pay for it.
    fn reconfig_context(&mut self, is_reconfig: bool) {
        if !is_reconfig {
            return;
        }
        let ctx = self.peer.next_zxid().map(|next_zxid| {
            let me = self.peer.sid();
            let synced_voters = self
                .peer
                .learners()
                .into_iter()
                .filter(|l| l.forwarding && !l.observer)
                .map(|l| l.sid)
                .chain([me])
                .collect();
            ReconfigContext {
                current: self.peer.quorum_config().clone(),
                last_seen: self.peer.last_seen_config().clone(),
                synced_voters,
                next_zxid,
                standalone_enabled: self.standalone_enabled,
            }
        });
        self.server.set_reconfig_context(ctx);
    }

    /// A client connection's input: `Connected`, `OldClient`, `Authenticated`,
    /// `Handshake`, `Request` (with its record's bytes: see
    /// [`server::Input::Request`]), `Received` or `Disconnected`. The ensemble's inputs (role,
    /// commits, forwarded requests) come from Zab only; one given here is a bug of
    /// the caller and is dropped (a debug build panics).
    pub fn client(&mut self, now_ms: u64, input: server::Input) -> Vec<Effect> {
        let from_client = matches!(
            input,
            server::Input::Connected { .. }
                | server::Input::OldClient { .. }
                | server::Input::Authenticated { .. }
                | server::Input::Handshake { .. }
                | server::Input::Request { .. }
                | server::Input::Disconnected { .. }
                | server::Input::Received { .. }
        );
        debug_assert!(from_client, "not a client input: {input:?}");
        if from_client && self.halted.is_none() {
            let reconfig = matches!(
                input,
                server::Input::Request {
                    opcode: op::RECONFIG,
                    ..
                }
            );
            self.reconfig_context(reconfig);
            self.server.handle(now_ms as i64, input);
            self.drain_server(now_ms);
        }
        self.take()
    }

    /// Time passed: Zab's timers (feed at least every tickTime / 2) and the server's
    /// (session expiry, container reaping: on the leader only).
    pub fn tick(&mut self, now_ms: u64) -> Vec<Effect> {
        self.zab(now_ms, zab::Input::Tick);
        self.maybe_start_read_only(now_ms);
        if self.halted.is_none() {
            self.server.handle(now_ms as i64, server::Input::Tick);
            self.drain_server(now_ms);
        }
        self.take()
    }

    /// A message from peer `from` (election or quorum port).
    pub fn message(&mut self, now_ms: u64, from: Sid, msg: Message) -> Vec<Effect> {
        self.zab(now_ms, zab::Input::Message { from, msg });
        self.take()
    }

    /// The quorum connection to `peer` broke or a connect to it failed.
    pub fn disconnected(&mut self, now_ms: u64, peer: Sid) -> Vec<Effect> {
        self.snap_sends.forget(peer);
        self.zab(now_ms, zab::Input::Disconnected { peer });
        self.take()
    }

    /// Every txn appended so far up to `zxid` is synced in the txn log.
    pub fn durable(&mut self, now_ms: u64, zxid: Zxid) -> Vec<Effect> {
        self.zab(now_ms, zab::Input::Durable { zxid });
        self.take()
    }

    /// The answer to a `ReadLog` effect (see [`zab::Input::LogRead`]).
    pub fn log_read(
        &mut self,
        now_ms: u64,
        peer: Sid,
        after: Zxid,
        txns: Option<Vec<Txn>>,
    ) -> Vec<Effect> {
        self.zab(now_ms, zab::Input::LogRead { peer, after, txns });
        self.take()
    }

    /// Writes the next chunk of the server's periodic snapshot, if one is under way
    /// ([`Server::snapshot_step`]; call when idle).
    pub fn snapshot_step(&mut self, now_ms: u64) -> Vec<Effect> {
        if self.halted.is_none() {
            self.server.snapshot_step();
            self.drain_server(now_ms);
        }
        self.take()
    }

    /// The state machine, for reads (admin, tests).
    pub fn server(&self) -> &Server {
        &self.server
    }

    /// The state machine, for the admin surface's statistics resets (`srst`, `crst`)
    /// only: an input given to it directly would bypass the glue.
    pub fn server_mut(&mut self) -> &mut Server {
        &mut self.server
    }

    /// The current config text (`/zookeeper/config`'s after each sync): zoo.cfg's
    /// membership at start, then each config this member activates.
    pub fn membership(&self) -> &[u8] {
        &self.membership
    }

    /// The Zab core, for reads (role, zxids, epochs).
    pub fn peer(&self) -> &Peer {
        &self.peer
    }

    /// The proposals this member made as leader (see [`ProposalStats`]).
    pub fn proposal_stats(&self) -> ProposalStats {
        self.proposal_stats
    }

    /// The syncs this member chose as leader, by mode (see [`SyncCounts`]).
    pub fn sync_counts(&self) -> SyncCounts {
        self.syncs
    }

    /// The election and sync figures of this member's role changes (see
    /// [`RoleMetrics`]).
    pub fn role_metrics(&self) -> &RoleMetrics {
        &self.role_metrics
    }

    /// This member's last finished election, and when it started looking if it is
    /// electing now.
    pub fn elections(&self) -> (Option<ElectionRecord>, Option<u64>) {
        (self.last_election, self.election_started_ms)
    }

    /// While leading, when the first txn after `acked` was proposed; a learner's lag
    /// in ms is the time since then. Work: a binary search of the kept times.
    pub fn proposed_at(&self, acked: Zxid) -> ProposedAt {
        self.proposal_times.at(acked)
    }

    fn record_proposal(&mut self, now_ms: u64, zxid: Zxid) {
        let peer = &self.peer;
        self.proposal_times.record(zxid, now_ms, || {
            peer.learners()
                .iter()
                .filter(|l| !l.observer && l.forwarding)
                .map(|l| l.acked)
                .min()
                .unwrap_or(zxid)
        });
    }

    /// Why the replica halted, if it did (see [`Effect::Halt`]).
    pub fn halted(&self) -> Option<&str> {
        self.halted.as_deref()
    }

    /// Starts serving read-only once the grace period in LOOKING is over (the core is
    /// still LOOKING, as ZooKeeper checks before it starts its read-only server).
    fn maybe_start_read_only(&mut self, now_ms: u64) {
        let (Some(grace), Some(since)) = (self.read_only_grace_ms, self.looking_since_ms) else {
            return;
        };
        let looking = self.peer.state() == crate::zab::message::ServerState::Looking;
        if self.halted.is_some()
            || !looking
            || self.server.role() != Role::NotServing
            || now_ms < since.saturating_add(grace)
        {
            return;
        }
        tracing::info!(
            looking_ms = now_ms - since,
            last_zxid = format!("{:#x}", self.server.last_zxid),
            "Read-only server started: no quorum, serving read-only clients"
        );
        self.server
            .handle(now_ms as i64, server::Input::Role(Role::ReadOnly));
        self.drain_server(now_ms);
    }

    fn take(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }

    /// Gives back a vector of effects the caller has emptied, for the next call's
    /// effects: a runtime that hands each one back allocates none per message (a
    /// leader gets a REQUEST and an ACK from each follower per write). Its contents,
    /// if any, are dropped.
    pub fn recycle(&mut self, mut spare: Vec<Effect>) {
        if self.effects.is_empty() && spare.capacity() > self.effects.capacity() {
            spare.clear();
            self.effects = spare;
        }
    }

    fn halt(&mut self, reason: String) {
        if self.halted.is_some() {
            return;
        }
        tracing::error!(%reason, "replica halted: its Zab core and state machine disagree");
        self.snap_sends.clear();
        self.halted = Some(reason.clone());
        self.effects.push(Effect::Halt { reason });
    }

    /// One Zab step, its actions, then what the server queued meanwhile.
    fn zab(&mut self, now_ms: u64, input: zab::Input) {
        if self.halted.is_some() {
            return;
        }
        if let zab::Input::Message { msg, .. } = &input {
            // A synced learner's broadcast packets (ZooKeeper counts them in
            // Follower/Observer.processPacket, which runs after syncWithLeader).
            if self.server.role() == Role::Learner {
                match msg {
                    Message::Proposal { .. } => self.role_metrics.learner_proposals_received += 1,
                    Message::Commit { .. } | Message::Inform { .. } => {
                        self.role_metrics.learner_commits_received += 1
                    }
                    _ => {}
                }
            }
        }
        let mut actions = std::mem::take(&mut self.actions);
        self.peer.step_into(now_ms, input, &mut actions);
        self.run(now_ms, actions.drain(..));
        self.actions = actions;
        self.drain_server(now_ms);
    }

    fn run(&mut self, now_ms: u64, actions: impl IntoIterator<Item = Action>) {
        for a in actions {
            if self.halted.is_some() {
                return;
            }
            self.on_action(now_ms, a);
        }
    }

    /// Logs (info) what operators follow an ensemble by: every role change with the
    /// election result that led to it, and each sync mode the leader chose, which it
    /// also counts. ZooKeeper logs the same events (`QuorumPeer`'s LEADING / FOLLOWING /
    /// LOOKING, `LearnerHandler`'s "Sending DIFF|TRUNC|SNAP").
    fn report(&mut self, action: &Action) {
        let (mode, to, upto) = match *action {
            Action::RoleChanged(change) => return self.report_role(change),
            Action::Send {
                to,
                msg: Message::Diff { zxid },
            } => ("DIFF", to, zxid),
            Action::Send {
                to,
                msg: Message::Trunc { zxid },
            } => ("TRUNC", to, zxid),
            Action::SendSnapshot { to, zxid } => ("SNAP", to, zxid),
            _ => return,
        };
        let counter = match mode {
            "DIFF" => &mut self.syncs.diff,
            "TRUNC" => &mut self.syncs.trunc,
            _ => &mut self.syncs.snap,
        };
        *counter += 1;
        let from = self
            .peer
            .learners()
            .iter()
            .find(|l| l.sid == to)
            .map_or(0, |l| l.peer_last_zxid);
        let SyncCounts { diff, trunc, snap } = self.syncs;
        tracing::info!(
            diff_syncs = diff,
            trunc_syncs = trunc,
            snap_syncs = snap,
            "sync with learner: {mode} to sid {to}, from zxid {from:#x} to {upto:#x}"
        );
    }

    fn report_role(&self, change: RoleChange) {
        let (accepted_epoch, current_epoch) = self.peer.epochs();
        let last_zxid = format!("{:#x}", self.peer.last_logged());
        let me = self.peer.sid();
        let elected = |leader: Sid| match self.peer.decided_vote() {
            Some(v) => tracing::info!(
                leader,
                zxid = format!("{:#x}", v.zxid),
                epoch = v.peer_epoch,
                "election result: sid {leader} leads (its last zxid {:#x}, currentEpoch {})",
                v.zxid,
                v.peer_epoch
            ),
            None => tracing::info!(leader, "election result: sid {leader} leads"),
        };
        match change {
            RoleChange::Looking => match self.peer.looked_because() {
                Some(why) => tracing::info!(
                    accepted_epoch,
                    current_epoch,
                    last_zxid,
                    "role change: sid {me} LOOKING (electing a leader): {why}"
                ),
                None => tracing::info!(
                    accepted_epoch,
                    current_epoch,
                    last_zxid,
                    "role change: sid {me} LOOKING (electing a leader)"
                ),
            },
            RoleChange::Leading => {
                elected(me);
                tracing::info!(
                    accepted_epoch,
                    current_epoch,
                    last_zxid,
                    "role change: sid {me} LEADING (discovery and sync of a new epoch)"
                );
            }
            RoleChange::LeaderEstablished { epoch } => tracing::info!(
                epoch,
                last_zxid,
                "role change: sid {me} leader established in epoch {epoch} (a quorum \
                 acknowledged NEWLEADER); serving clients"
            ),
            RoleChange::Following { leader } | RoleChange::Observing { leader } => {
                elected(leader);
                let role = if matches!(change, RoleChange::Following { .. }) {
                    "FOLLOWING"
                } else {
                    "OBSERVING"
                };
                tracing::info!(
                    leader,
                    accepted_epoch,
                    current_epoch,
                    last_zxid,
                    "role change: sid {me} {role} sid {leader} (syncing)"
                );
            }
            RoleChange::LearnerServing { leader, epoch } => tracing::info!(
                leader,
                epoch,
                last_zxid,
                "role change: sid {me} in broadcast with leader sid {leader} in epoch \
                 {epoch} (UPTODATE); serving clients"
            ),
        }
    }

    fn on_action(&mut self, now_ms: u64, action: Action) {
        let now = now_ms as i64;
        self.report(&action);
        match action {
            Action::RoleChanged(change) => {
                if matches!(
                    change,
                    RoleChange::LearnerServing { .. } | RoleChange::LeaderEstablished { .. }
                ) {
                    if self.fuzzy_sync {
                        // The commits that come with this role change (a learner's at
                        // UPTODATE, a new leader's of its own log) may be of txns the
                        // fuzzy tree holds already: every txn logged so far applies
                        // leniently, as those before it did.
                        if let Some(last) = self.uncommitted.back() {
                            self.server.set_lenient_upto(last.zxid as i64);
                        }
                    }
                    self.fuzzy_sync = false;
                }
                if !matches!(
                    change,
                    RoleChange::Leading | RoleChange::LeaderEstablished { .. }
                ) {
                    self.snap_sends.clear();
                }
                let role = match change {
                    RoleChange::Looking
                    | RoleChange::Leading
                    | RoleChange::Following { .. }
                    | RoleChange::Observing { .. } => Role::NotServing,
                    RoleChange::LeaderEstablished { epoch } => Role::Leader { epoch },
                    RoleChange::LearnerServing { .. } => Role::Learner,
                };
                let was_looking = self.looking_since_ms.is_some();
                self.role_metrics.record(now_ms, change, was_looking);
                self.looking_since_ms = match change {
                    RoleChange::Looking => self.looking_since_ms.or(Some(now_ms)),
                    _ => None,
                };
                if change == RoleChange::Looking && self.server.role() == Role::ReadOnly {
                    // Still LOOKING (an election begun again): the read-only server
                    // stays, as ZooKeeper's lives for the whole LOOKING state.
                    return;
                }
                self.leader = match change {
                    RoleChange::Following { leader }
                    | RoleChange::Observing { leader }
                    | RoleChange::LearnerServing { leader, .. } => Some(leader),
                    _ => None,
                };
                self.own_from = None;
                self.note_election(now_ms, change);
                if matches!(change, RoleChange::LearnerServing { .. }) {
                    // Synced (DIFF, TRUNC or SNAP, whose tree holds the leader's
                    // content): the member's own configuration is written again before
                    // any client reads it, as Learner.syncWithLeader does.
                    self.server.init_config_node(&self.membership, now);
                }
                self.server.handle(now, server::Input::Role(role));
            }
            Action::Commit { upto } => {
                if self.fuzzy_sync {
                    self.server.set_lenient_upto(upto as i64);
                }
                self.commit(now, upto)
            }
            Action::Deliver { from, msg } => self.deliver(now, from, msg),
            Action::SendSnapshot { to, zxid } => {
                let applied = self.server.last_zxid as Zxid;
                if applied != zxid {
                    debug_assert_eq!(applied, zxid, "SNAP of a state not applied");
                    return self.halt(format!(
                        "asked to send a snapshot at {zxid:#x} with {applied:#x} applied"
                    ));
                }
                // Written in steps (snap_step), fuzzy as ZooKeeper's: see snap_send.
                let sessions = stream_sessions(&self.server);
                self.snap_sends
                    .start(&self.server.tree, &sessions, to, zxid, now_ms);
            }
            Action::InstallSnapshot { zxid, snapshot } => {
                let state = match decode_stream(&snapshot, zxid) {
                    Ok(s) => s,
                    Err(e) => return self.halt(format!("SNAP at {zxid:#x}: {e}")),
                };
                self.server
                    .restore(state.zxid as i64, state.tree, &state.sessions);
                self.server.set_lenient_upto(state.zxid as i64);
                self.fuzzy_sync = true;
                self.uncommitted.clear();
                // Storage keeps the stream as it came (the same `Bytes`, which the
                // runtime may have staged meanwhile), and a restart reads it as this
                // did ([`decode_state`]): re-encoding the new state in keel's own form
                // cost 0.1-0.15 s of a 1,000,000-znode SNAP.
                self.effects
                    .push(Effect::Zab(Action::InstallSnapshot { zxid, snapshot }));
            }
            Action::AppendTxns { txns, ack_to } => {
                self.uncommitted.extend(txns.iter().cloned());
                self.effects
                    .push(Effect::Zab(Action::AppendTxns { txns, ack_to }));
            }
            Action::TruncateLog { after } => {
                while self.uncommitted.back().is_some_and(|t| t.zxid > after) {
                    self.uncommitted.pop_back();
                }
                self.effects
                    .push(Effect::Zab(Action::TruncateLog { after }));
            }
            Action::Send {
                to,
                msg: Message::Ping { zxid, touched },
            } if self.leader == Some(to) && touched.is_empty() => {
                // A learner's echo carries the sessions its clients touched, with their
                // timeouts (LearnerSessionTracker.snapshot).
                let touched = self
                    .server
                    .drain_touched()
                    .into_iter()
                    .map(|id| {
                        let timeout = self.server.sessions.get(id).map_or(0, |s| s.timeout_ms);
                        (id, timeout)
                    })
                    .collect();
                self.send(to, Message::Ping { zxid, touched });
            }
            Action::Send { to, msg } => self.send(to, msg),
            Action::CloseConnection { peer } => {
                self.snap_sends.forget(peer);
                self.effects
                    .push(Effect::Zab(Action::CloseConnection { peer }));
            }
            Action::ConfigActivated { config } => {
                // What `/zookeeper/config` is written with after a sync from now on
                // (the reconfig txn itself sets it in the tree).
                self.membership = Bytes::from(config.text());
                // And `/zookeeper/config` now, as `processReconfig` ->
                // `initConfigInZKDatabase` (the reconfig txn, when there is one,
                // writes the same text; the initial config's versioning has none).
                self.server.init_config_node(&self.membership, now);
                self.effects
                    .push(Effect::Zab(Action::ConfigActivated { config }));
            }
            // Answers to `Propose`, taken by `propose`.
            Action::Proposed { .. } | Action::ProposeRefused => {}
            other => self.effects.push(Effect::Zab(other)),
        }
    }

    /// Keeps the election figures the console shows: when looking began, and when it
    /// ended with which leader. Proposal times belong to one term of leading.
    fn note_election(&mut self, now_ms: u64, change: RoleChange) {
        let leader = match change {
            RoleChange::Looking => {
                self.election_started_ms = Some(now_ms);
                self.proposal_times = ProposalTimes::default();
                return;
            }
            RoleChange::Leading => self.peer.sid(),
            RoleChange::Following { leader } | RoleChange::Observing { leader } => leader,
            RoleChange::LeaderEstablished { .. } | RoleChange::LearnerServing { .. } => return,
        };
        self.proposal_times = ProposalTimes::default();
        if let Some(started_ms) = self.election_started_ms.take() {
            self.last_election = Some(ElectionRecord {
                started_ms,
                ended_ms: now_ms,
                leader,
                vote: self
                    .peer
                    .decided_vote()
                    .map(|v| (v.zxid, v.peer_epoch as u32)),
            });
        }
    }

    /// Zab committed every logged txn up to `upto`: apply them in zxid order.
    fn commit(&mut self, now: i64, upto: Zxid) {
        let mut own = false;
        let leading = matches!(self.server.role(), Role::Leader { .. });
        while self.uncommitted.front().is_some_and(|t| t.zxid <= upto) {
            let Some(t) = self.uncommitted.pop_front() else {
                break;
            };
            if leading && !zab::reconfig::is_reconfig_txn(&t.data) {
                // A reconfig is committed with COMMITANDACTIVATE, which ZooKeeper's
                // Leader.commitAndActivate does not count.
                self.role_metrics.leader_commits += 1;
            }
            if self.own_from.is_some_and(|first| t.zxid >= first) {
                // The server holds it prepped, with whoever waits for it.
                own = true;
                continue;
            }
            let txn = match decode_keel(&t.data) {
                Ok(txn) if txn.zxid as Zxid == t.zxid => txn,
                Ok(txn) => {
                    return self.halt(format!(
                        "committed txn {:#x} says it is {:#x}",
                        t.zxid, txn.zxid
                    ))
                }
                Err(e) => {
                    return self.halt(format!("committed txn {:#x} does not decode: {e}", t.zxid))
                }
            };
            self.server.handle(now, server::Input::Apply(txn));
        }
        if own {
            self.server
                .handle(now, server::Input::Durable { zxid: upto as i64 });
        }
    }

    fn deliver(&mut self, now: i64, from: Sid, msg: Message) {
        let input = match msg {
            Message::Request {
                session_id,
                cxid,
                opcode,
                body,
                auth,
            } => match decode_request(opcode, &body) {
                Ok(req) => server::Input::Remote {
                    from,
                    fwd: Forwarded {
                        session_id,
                        cxid,
                        opcode,
                        req,
                        body,
                        ids: auth,
                    },
                },
                Err(e) => {
                    // Only auth and sasl records fail to decode, and a learner forwards
                    // neither.
                    tracing::warn!(from, opcode, error = %e, "forwarded request dropped");
                    return;
                }
            },
            Message::Revalidate {
                session_id,
                timeout_ms,
            } => server::Input::Revalidate {
                from,
                req: Revalidate {
                    session_id,
                    timeout_ms,
                },
            },
            Message::Ping { touched, .. } => server::Input::Touched {
                sessions: touched.into_iter().map(|(id, _)| id).collect(),
            },
            Message::RevalidateReply { session_id, valid } => {
                server::Input::RevalidateReply(RevalidateReply { session_id, valid })
            }
            Message::Sync => server::Input::SyncReply,
            other => {
                tracing::warn!(from, msg = ?other, "Zab delivered a message no state machine takes");
                return;
            }
        };
        let reconfig = matches!(
            &input,
            server::Input::Remote { fwd, .. } if fwd.opcode == op::RECONFIG
        );
        self.reconfig_context(reconfig);
        self.server.handle(now, input);
    }

    /// Routes what the server queued until it queues nothing more: its proposals to
    /// Zab (whose actions may feed it again), everything else out.
    fn drain_server(&mut self, now_ms: u64) {
        loop {
            if self.halted.is_some() {
                return;
            }
            // Drained through vectors kept from call to call: one allocation fewer
            // each per message.
            let mut ops = std::mem::take(&mut self.storage_ops);
            self.server.drain_storage_into(&mut ops);
            let proposed = !ops.is_empty();
            for op in ops.drain(..) {
                match op {
                    StorageOp::Append(txn) => self.propose(now_ms, txn),
                    other => self.effects.push(Effect::Storage(other)),
                }
                if self.halted.is_some() {
                    return;
                }
            }
            self.storage_ops = ops;
            self.effects.extend(
                self.server
                    .outbox_drain()
                    .map(|(conn, out)| Effect::Client { conn, out }),
            );
            self.route_member_messages();
            if !proposed {
                return;
            }
        }
    }

    /// The learner's forwards and revalidations to its leader, the leader's answers to
    /// its learners.
    fn route_member_messages(&mut self) {
        let mut forwards = std::mem::take(&mut self.forwards);
        self.server.drain_forwards_into(&mut forwards);
        let revalidations = self.server.drain_revalidations();
        if let Some(leader) = self.leader {
            for f in forwards.drain(..) {
                self.send(
                    leader,
                    Message::Request {
                        session_id: f.session_id,
                        cxid: f.cxid,
                        opcode: f.opcode,
                        body: f.body,
                        auth: f.ids,
                    },
                );
            }
            for r in revalidations {
                self.send(
                    leader,
                    Message::Revalidate {
                        session_id: r.session_id,
                        timeout_ms: r.timeout_ms,
                    },
                );
            }
        }
        // Kept for the next call, emptied (a learner without a leader drops them).
        forwards.clear();
        self.forwards = forwards;
        for (to, r) in self.server.drain_revalidate_replies() {
            self.send(
                to,
                Message::RevalidateReply {
                    session_id: r.session_id,
                    valid: r.valid,
                },
            );
        }
        for to in self.server.drain_sync_replies() {
            self.send(to, Message::Sync);
        }
    }

    /// Sends `msg` to `to`, or holds it behind a SNAP being written to `to`.
    fn send(&mut self, to: Sid, msg: Message) {
        let applied = self.server.last_zxid as Zxid;
        match self.snap_sends.hold(&self.server.tree, applied, to, msg) {
            Err(msg) => self.effects.push(Effect::Zab(Action::Send { to, msg })),
            Ok(None) => {}
            Ok(Some(done)) => self.release(done),
        }
    }

    /// Proposes a txn the server prepped, checking Zab gives it the server's zxid.
    fn propose(&mut self, now_ms: u64, txn: server::txn::Txn) {
        let data = match encode_keel(&txn) {
            Ok(d) => d,
            Err(e) => {
                debug_assert!(false, "txn {:#x} has no ZooKeeper form: {e}", txn.zxid);
                return self.halt(format!("txn {:#x} has no ZooKeeper form: {e}", txn.zxid));
            }
        };
        let size = data.len();
        let mut actions = std::mem::take(&mut self.actions);
        self.peer
            .step_into(now_ms, zab::Input::Propose { txn: data }, &mut actions);
        let mut refused = false;
        for a in actions.drain(..) {
            if self.halted.is_some() {
                return;
            }
            match a {
                Action::Proposed { zxid } if zxid == txn.zxid as Zxid => {
                    self.own_from.get_or_insert(zxid);
                    let leading_since = self.peer.leading_since_ms();
                    self.proposal_stats.record(leading_since, size);
                    self.record_proposal(now_ms, zxid);
                }
                Action::Proposed { zxid } => {
                    debug_assert_eq!(zxid, txn.zxid as Zxid, "Zab and the server disagree");
                    return self.halt(format!(
                        "Zab proposed the server's txn {:#x} as {zxid:#x}",
                        txn.zxid
                    ));
                }
                Action::ProposeRefused => refused = true,
                other => self.on_action(now_ms, other),
            }
        }
        self.actions = actions;
        if refused {
            // Zab will not sequence it (its epoch's counter is used up: ZooKeeper then
            // forces a new election). Answer as ZooKeeper does when it stops serving:
            // the clients' connections close, the proposals held are forgotten, and
            // the clients reconnect to a member that serves.
            tracing::warn!(
                zxid = format!("{:#x}", txn.zxid),
                "Zab refused a proposal; not serving"
            );
            self.own_from = None;
            self.server
                .handle(now_ms as i64, server::Input::Role(Role::NotServing));
        }
    }
}

/// The sessions a SNAP stream starts with (ZooKeeper's DataTree serialization, which
/// a ZooKeeper learner reads too): id and timeout ms of each; the stream itself is
/// written by [`crate::member::snap_send`].
fn stream_sessions(server: &Server) -> Vec<(i64, i32)> {
    server
        .sessions
        .iter()
        .map(|s| (s.id, s.timeout_ms))
        .collect()
}

/// A SNAP stream ([`snap::StreamWriter`]) as the state at `zxid`. Session passwords are
/// ZooKeeper's, derived from the id, as every member of an ensemble checks them.
fn decode_stream(bytes: &[u8], zxid: Zxid) -> Result<State, String> {
    let mut r = StreamInput::new(bytes);
    let mut tree = DataTree::empty();
    let mut acls = HashMap::new();
    let sessions = snap::read_stream(&mut r, &mut acls, &mut |n| {
        tree.insert_loaded(n.path, n.data, n.acl, &n.meta);
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    if r.offset() != bytes.len() {
        return Err(format!(
            "{} bytes after the stream's end",
            bytes.len() - r.offset()
        ));
    }
    tree.recount_quotas();
    Ok(State {
        zxid,
        tree,
        sessions: sessions
            .into_iter()
            .map(|(id, timeout_ms)| SnapshotSession {
                id,
                timeout_ms,
                passwd: session_passwd(id),
            })
            .collect(),
    })
}

/// A stored snapshot as a state: what a restart reads. Either keel's own snapshot form
/// (the chunks a periodic snapshot wrote, framed by
/// [`crate::storage::zab::encode_snapshot`]; its header holds the zxid) or, for bytes
/// that do not start as that form, a SNAP stream as a learner installed it, the state
/// at `zxid` (see [`crate::storage::zab`]).
fn decode_state(bytes: &[u8], zxid: Zxid) -> Result<State, String> {
    if !bytes.starts_with(SNAPSHOT_FORM_MAGIC) {
        return decode_stream(bytes, zxid).map_err(|e| format!("stored SNAP stream: {e}"));
    }
    let chunks = decode_snapshot(bytes)?;
    let (header, nodes) = chunks.split_first().ok_or("snapshot has no header chunk")?;
    let (zxid, sessions) = decode_snapshot_header(header)?;
    let mut tree = DataTree::empty();
    let mut acls = HashMap::new();
    for (i, chunk) in nodes.iter().enumerate() {
        tree_snapshot::decode_nodes(&mut tree, chunk, &mut acls)
            .map_err(|e| format!("snapshot chunk {}: {e}", i + 1))?;
    }
    tree.recount_quotas();
    Ok(State {
        zxid: zxid as Zxid,
        tree,
        sessions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proposal_times_give_the_first_unacknowledged_txns_time() {
        let mut t = ProposalTimes::default();
        assert_eq!(t.at(0x1_0000_0000), ProposedAt::CaughtUp);
        for c in 1..=3u64 {
            t.record(0x1_0000_0000 + c, 100 * c, || unreachable!("not full"));
        }
        // A learner synced up to the epoch's start is behind by all three.
        assert_eq!(t.at(0x1_0000_0000), ProposedAt::At(100));
        assert_eq!(t.at(0x1_0000_0001), ProposedAt::At(200));
        assert_eq!(t.at(0x1_0000_0003), ProposedAt::CaughtUp);
    }

    #[test]
    fn full_proposal_times_drop_what_all_acknowledged_then_the_oldest() {
        let mut t = ProposalTimes::default();
        let n = PROPOSAL_TIMES as u64;
        for z in 1..=n {
            t.record(z, z, || unreachable!("not full"));
        }
        // Every synced participant acknowledged up to 10: 1..=10 go, 11 stays.
        t.record(n + 1, n + 1, || 10);
        assert_eq!(t.times.len(), PROPOSAL_TIMES - 9);
        assert_eq!(t.at(10), ProposedAt::At(11));
        // A learner behind that (an observer, a syncing one) gets a lower bound.
        assert_eq!(t.at(3), ProposedAt::Before(11));
        // A participant stuck at 0: the oldest goes, one per proposal.
        for z in n + 2..n + 12 {
            t.record(z, z, || 0);
        }
        assert_eq!(t.times.len(), PROPOSAL_TIMES);
        assert_eq!(t.at(0), ProposedAt::Before(12));
    }
}

#[cfg(test)]
mod role_metrics_tests {
    use super::*;

    /// A member that starts LOOKING, follows, loses its leader, turns observer by a
    /// reconfig and back: ZooKeeper's counts of the same (a 3.8 ensemble's mntr).
    #[test]
    fn counts_as_zookeeper() {
        let mut m = RoleMetrics::starting(1_000, true);
        assert_eq!(m.looking_count, 1);
        m.record(1_000, RoleChange::Looking, true);
        assert_eq!(m.looking_count, 1, "the first LOOKING is counted once");
        m.record(1_300, RoleChange::Following { leader: 2 }, true);
        m.record(
            1_500,
            RoleChange::LearnerServing {
                leader: 2,
                epoch: 1,
            },
            false,
        );
        assert_eq!(m.election_time.count(), 1);
        assert_eq!(m.election_time.sum(), 300);
        assert_eq!(m.follower_sync_time.sum(), 200);
        assert_eq!(m.unavailable_time.sum(), 500);
        // A reconfig: follower -> observer -> follower, no election.
        m.record(2_000, RoleChange::Observing { leader: 2 }, false);
        m.record(
            2_100,
            RoleChange::LearnerServing {
                leader: 2,
                epoch: 1,
            },
            false,
        );
        assert_eq!((m.looking_count, m.election_time.count()), (1, 1));
        assert_eq!(m.observer_sync_time.count(), 1);
        m.record(3_000, RoleChange::Following { leader: 2 }, false);
        m.record(
            3_050,
            RoleChange::LearnerServing {
                leader: 2,
                epoch: 1,
            },
            false,
        );
        assert_eq!(m.election_time.count(), 2);
        assert_eq!(m.follower_sync_time.count(), 2);
        assert_eq!(m.unavailable_time.count(), 3);
        // LOOKING again (twice: an election begun again counts once), then leading.
        m.record(4_000, RoleChange::Looking, false);
        m.record(4_100, RoleChange::Looking, true);
        m.record(4_400, RoleChange::Leading, true);
        m.record(4_600, RoleChange::LeaderEstablished { epoch: 2 }, false);
        assert_eq!(m.looking_count, 2);
        assert_eq!(m.election_time.count(), 3);
        assert_eq!(m.leader_unavailable_time.sum(), 600);
        assert_eq!(m.follower_sync_time.count(), 2);
    }
}

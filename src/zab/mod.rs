//! A sans-I/O Zab: ZooKeeper's atomic broadcast as a pure state machine. No sockets,
//! clock, threads or storage calls: the runtime feeds [`Input`]s with the time as a
//! value to [`Peer::step`] and executes the [`Action`]s it returns, in order. One seeded
//! simulation (tests/sim.rs) drives this same code for whole ensembles.
//!
//! Phases as in ZooKeeper (../shared/ZAB-WIRE.md): fast leader election
//! ([`election`]), discovery (FOLLOWERINFO, LEADERINFO, ACKEPOCH), synchronisation
//! (DIFF / TRUNC / SNAP, NEWLEADER, UPTODATE) and broadcast (PROPOSAL, ACK, COMMIT,
//! PING) in [`leader`] and [`learner`]; [`quorum`] says what a majority is, [`log`]
//! holds the in-memory window of the member's txn log, [`storage`] the durable side as
//! a trait plus an in-memory implementation for the simulation, [`message`] the
//! messages, [`wire`] ZooKeeper's bytes for them on both ports. Txn payloads are
//! opaque to the core: on the wire they are ZooKeeper's TxnHeader plus txn record
//! ([`wire::txn`] converts keel's txns to and from them).
//!
//! Ordering rules the runtime must keep (each is repeated at the action it governs):
//! - actions run in the order returned; `PersistAcceptedEpoch`, `PersistCurrentEpoch`,
//!   `TruncateLog` and `InstallSnapshot` complete durably before the next action runs
//!   (ZooKeeper writes them synchronously, too);
//! - `AppendTxns` may complete later: the runtime reports [`Input::Durable`] once every
//!   appended txn up to a zxid is synced (group commit); with `ack_to`, it also sends
//!   that peer an ACK per txn once synced, on the connection current when the action
//!   ran, after everything sent on it before (see [`Config::storage_acks`]);
//! - `Commit` is applied before any later `SendSnapshot`, so a snapshot holds at least
//!   the txns committed before it (later ones too if it is written while they apply,
//!   as ZooKeeper's is: every `Send` to that learner after it must then wait for it);
//! - `ReadLog` may complete later: the runtime reads its txn log and reports
//!   [`Input::LogRead`] (ZooKeeper reads it in the LearnerHandler's thread).

pub mod election;
pub mod leader;
pub mod learner;
pub mod log;
pub mod message;
pub mod quorum;
pub mod reconfig;
pub mod storage;
pub mod wire;

use bytes::Bytes;

use self::election::{Election, Vote};
use self::leader::Leader;
use self::learner::Learner;
use self::log::Log;
use self::message::{Message, Notification, ServerState};
use self::quorum::QuorumVerifier;

/// A server id (`myid`, the N of server.N).
pub type Sid = u64;

/// A ZooKeeper transaction id: epoch in the high 32 bits, counter in the low 32
/// (`ZxidUtils.java`). 0 is "nothing logged"; a zxid with counter 0 names no txn.
pub type Zxid = u64;

/// The zxid of txn `counter` in `epoch`.
pub fn zxid(epoch: u32, counter: u32) -> Zxid {
    (u64::from(epoch) << 32) | u64::from(counter)
}

/// The epoch of a zxid.
pub fn epoch_of(zxid: Zxid) -> u32 {
    (zxid >> 32) as u32
}

/// The counter of a zxid.
pub fn counter_of(zxid: Zxid) -> u32 {
    zxid as u32
}

/// One logged txn: its zxid and its opaque payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Txn {
    /// The txn's zxid.
    pub zxid: Zxid,
    /// The payload: for a ZooKeeper peer, its TxnHeader + txn record
    /// ([`wire::txn::encode_keel`]).
    pub data: Bytes,
}

/// The settings the core runs with (zoo.cfg and ZooKeeper's system properties).
#[derive(Clone, Debug)]
pub struct Config {
    /// This member's sid.
    pub my_sid: Sid,
    /// The ensemble.
    pub quorum: QuorumVerifier,
    /// tickTime in ms.
    pub tick_ms: u64,
    /// initLimit in ticks: discovery and sync must finish within it.
    pub init_limit: u64,
    /// syncLimit in ticks: a leader and its learners must hear each other within it.
    pub sync_limit: u64,
    /// The election's finalize wait and first notification timeout in ms
    /// (`zookeeper.fastleader.minNotificationInterval`, 200).
    pub finalize_wait_ms: u64,
    /// The largest notification timeout in ms
    /// (`zookeeper.fastleader.maxNotificationInterval`, 60000).
    pub max_notification_interval_ms: u64,
    /// How many committed txns a member keeps in memory for DIFFs
    /// (`zookeeper.commitLogCount`, 500).
    pub commit_log_count: usize,
    /// A learner behind that window is synced by DIFF from the on-disk txn log while
    /// the log from its last zxid on is at most this fraction of the newest snapshot's
    /// size; SNAP beyond that (`zookeeper.snapshotSizeFactor`, 0.33). Negative: never
    /// read the on-disk log for a DIFF. See [`storage::read_for_diff`].
    pub snapshot_size_factor: f64,
    /// `reconfigEnabled` (false): dynamic reconfiguration ([`reconfig`]). Off, the
    /// config never changes: reconfig txns are logged and applied as data only, as
    /// ZooKeeper's `processReconfig` skips them.
    pub reconfig_enabled: bool,
    /// Whether a follower in broadcast leaves the ACKs of its PROPOSALs to the runtime
    /// that appends them ([`Action::AppendTxns`]'s `ack_to`): each goes out as soon as
    /// its txn is synced, where the core would send it only once it has been handed
    /// [`Input::Durable`], a turn later. ZooKeeper's follower does the same: its
    /// SyncRequestProcessor thread writes the ACKs after its flush
    /// (SendAckRequestProcessor). Issue 16: one wake-up less on every write's path.
    /// The ACKs are the same messages in the same order (one per zxid, ascending).
    /// Off (the default): the core sends them on `Durable`.
    pub storage_acks: bool,
}

impl Config {
    /// ZooKeeper's defaults for everything but the ensemble and the limits.
    pub fn new(
        my_sid: Sid,
        quorum: QuorumVerifier,
        tick_ms: u64,
        init_limit: u64,
        sync_limit: u64,
    ) -> Config {
        Config {
            my_sid,
            quorum,
            tick_ms,
            init_limit,
            sync_limit,
            finalize_wait_ms: 200,
            max_notification_interval_ms: 60_000,
            commit_log_count: 500,
            snapshot_size_factor: 0.33,
            reconfig_enabled: false,
            storage_acks: false,
        }
    }
}

/// What a member finds in its dataDir at start (see [`storage::ZabStorage::recover`]).
#[derive(Clone, Debug, Default)]
pub struct Recovered {
    /// acceptedEpoch: the newest epoch it promised to follow.
    pub accepted_epoch: u32,
    /// currentEpoch: the newest epoch it synced with.
    pub current_epoch: u32,
    /// The zxid of the last txn the snapshot holds (0 for none). Its txns are known
    /// committed; the runtime restores the state from it.
    pub snapshot_zxid: Zxid,
    /// The durable txns after the snapshot, ascending. Not known committed until a
    /// leader says so, so the runtime does not apply them at start.
    pub log: Vec<Txn>,
}

/// An event the runtime feeds to [`Peer::step`].
#[derive(Clone, Debug)]
pub enum Input {
    /// Time passed; `now_ms` of the step is the new time. Feed at least every
    /// tick_ms / 2.
    Tick,
    /// A message arrived from peer `from` (election or quorum port).
    Message {
        /// The sender.
        from: Sid,
        /// What it said.
        msg: Message,
    },
    /// The quorum connection to `peer` broke (or a connect failed); what was in
    /// flight on it is lost.
    Disconnected {
        /// The peer.
        peer: Sid,
    },
    /// A client write, prepared into a txn payload, to be proposed (leader only).
    Propose {
        /// The txn payload.
        txn: Bytes,
    },
    /// Every txn appended so far up to `zxid` is durable (synced) in the txn log.
    Durable {
        /// The last durable zxid.
        zxid: Zxid,
    },
    /// The answer to [`Action::ReadLog`] with the same `peer` and `after`.
    LogRead {
        /// The learner the read was for.
        peer: Sid,
        /// The `after` of the request.
        after: Zxid,
        /// The logged txns with `after < zxid <= upto`, ascending; `None` when the
        /// log does not hold the txn `after` itself (it does not reach back that far)
        /// or the size rule of [`storage::read_for_diff`] says SNAP.
        txns: Option<Vec<Txn>>,
    },
}

/// A role as the runtime and operators see it (srvr `Mode:`, `zk_server_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoleChange {
    /// Electing.
    Looking,
    /// Elected: discovery and sync under way as leader of the coming epoch.
    Leading,
    /// A quorum acknowledged NEWLEADER: `epoch` is established and proposals are
    /// accepted.
    LeaderEstablished {
        /// The established epoch.
        epoch: u32,
    },
    /// Connecting to and syncing with `leader`.
    Following {
        /// The leader's sid.
        leader: Sid,
    },
    /// As `Following`, as an observer.
    Observing {
        /// The leader's sid.
        leader: Sid,
    },
    /// UPTODATE received: in broadcast with `leader` in `epoch`; serve clients.
    LearnerServing {
        /// The leader's sid.
        leader: Sid,
        /// The epoch.
        epoch: u32,
    },
}

/// What the runtime must do, in the order returned (see the module rules).
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Send `msg` to `to` on the port `msg.channel()` names. On the quorum port a
    /// learner's FOLLOWERINFO/OBSERVERINFO opens a new connection (closing any old
    /// one); every other quorum message goes on the current connection and is dropped
    /// if there is none.
    Send {
        /// The peer.
        to: Sid,
        /// The message.
        msg: Message,
    },
    /// Send `Message::Snap { zxid, snapshot }` to `to` with the state as of `zxid`,
    /// which is the last committed zxid: every `Commit` returned before this action
    /// must be applied before the snapshot is taken. Commits after it may show in the
    /// snapshot too (ZooKeeper's fuzzy snapshot, which the learner's replay of the txns
    /// after `zxid` tolerates), provided every `Send` to `to` after this action goes
    /// out after the snapshot, in order.
    SendSnapshot {
        /// The learner.
        to: Sid,
        /// The zxid of the state to send.
        zxid: Zxid,
    },
    /// A message for the member's state machine, not the core: on a leader a synced
    /// learner's REQUEST, REVALIDATE or the touched sessions of its PING; on a learner
    /// in broadcast the leader's SYNC or REVALIDATE answer. In stream order with the
    /// other actions (a SYNC comes after the `Commit`s before it).
    Deliver {
        /// The peer it came from.
        from: Sid,
        /// The message.
        msg: Message,
    },
    /// Close the quorum connection to `peer` (it timed out or broke the protocol).
    CloseConnection {
        /// The peer.
        peer: Sid,
    },
    /// Append `txns` to the txn log, then sync (batched), then report
    /// [`Input::Durable`]. A member must not acknowledge a txn before it is durable:
    /// the core waits for `Durable` for that, unless it names `ack_to`.
    AppendTxns {
        /// Ascending, all above the log's last zxid.
        txns: Vec<Txn>,
        /// Once they are synced, send this peer (the leader) `Message::Ack` for each
        /// txn, ascending, on the quorum connection current when this action ran and
        /// after every message sent on it before; dropped if that connection closed
        /// meanwhile, as a message queued on it would have been. Only a follower in
        /// broadcast with [`Config::storage_acks`] names one.
        ack_to: Option<Sid>,
    },
    /// Durably write acceptedEpoch (temp file + rename) before the next action: a member
    /// persists acceptedEpoch before it answers LEADERINFO with ACKEPOCH, and a leader
    /// before it sends LEADERINFO.
    PersistAcceptedEpoch {
        /// The epoch.
        epoch: u32,
    },
    /// Durably write currentEpoch before the next action: a leader after its ACKEPOCH
    /// quorum and before any sync; a learner after every txn received before NEWLEADER
    /// is durable and before it ACKs NEWLEADER.
    PersistCurrentEpoch {
        /// The epoch.
        epoch: u32,
    },
    /// Durably drop every logged txn above `after` (TRUNC), including unsynced ones,
    /// before the next action.
    TruncateLog {
        /// The last zxid kept.
        after: Zxid,
    },
    /// Atomically (the old state or the new, never a mix) and durably replace the state
    /// and the txn log with `snapshot`, the state as of `zxid` (SNAP), before the next
    /// action. The member's applied state becomes `zxid`.
    InstallSnapshot {
        /// The zxid of the last txn in the snapshot.
        zxid: Zxid,
        /// The serialized state.
        snapshot: Bytes,
    },
    /// Apply every logged txn up to `upto` in zxid order. Commits come strictly in
    /// zxid order and only for txns a quorum has durable; on the leader this is the
    /// point the client is answered.
    Commit {
        /// The new commit point.
        upto: Zxid,
    },
    /// The txn of the last [`Input::Propose`] took `zxid`.
    Proposed {
        /// The zxid.
        zxid: Zxid,
    },
    /// The last [`Input::Propose`] was refused: this member is not an established
    /// leader (the runtime answers as ZooKeeper does when not serving).
    ProposeRefused,
    /// The member's role changed.
    RoleChanged(RoleChange),
    /// Read the txn log for a DIFF to learner `peer` that is behind the in-memory
    /// window (ZooKeeper's `getProposalsFromTxnLog`, ZAB-WIRE.md §4.2 rule 5), and
    /// report [`Input::LogRead`] with the same `peer` and `after`:
    /// [`storage::read_for_diff`]`(storage, after, upto, snapshot_size_factor)` does
    /// it. The read may complete later (nothing else waits for it: the learner's sync
    /// does), but it reads the log as it is when it runs, appended txns not yet synced
    /// included; a `TruncateLog` or `InstallSnapshot` cannot come between (only a
    /// leader reads, and a leader does neither), and a local snapshot that dropped the
    /// log before `after` makes the answer `None`. The core checks that the txns
    /// reach `upto` without a gap (ZOOKEEPER-2418) and sends SNAP otherwise.
    /// A newer config was seen (a reconfig proposal, or NEWLEADER's config): the
    /// runtime writes it as `<zoo.cfg>.dynamic.next` and connects to its new members
    /// (`QuorumPeer.setLastSeenQuorumVerifier`). Only with reconfig enabled.
    ConfigSeen {
        /// The config.
        config: QuorumVerifier,
    },
    /// `config` is now the member's current config (a reconfig committed, or a
    /// leader's config activated at UPTODATE / establishment): the runtime writes its
    /// dynamic config file, edits zoo.cfg, and uses its addresses from now on
    /// (`QuorumPeer.setQuorumVerifier(qv, true)`). Only with reconfig enabled.
    ConfigActivated {
        /// The config.
        config: QuorumVerifier,
    },
    ReadLog {
        /// The learner the DIFF is for.
        peer: Sid,
        /// The learner's last zxid: the log must hold this txn.
        after: Zxid,
        /// The last txn wanted: the zxid just before the in-memory window.
        upto: Zxid,
        /// [`Config::snapshot_size_factor`].
        snapshot_size_factor: f64,
    },
}

/// State every role reads: settings, epochs, the log and the clock of this step.
#[derive(Debug)]
pub struct Ctx {
    /// The settings.
    pub config: Config,
    /// acceptedEpoch as persisted.
    pub accepted_epoch: u32,
    /// currentEpoch as persisted.
    pub current_epoch: u32,
    /// The in-memory log.
    pub log: Log,
    /// The last zxid reported durable (never above `log.last()`).
    pub durable: Zxid,
    /// The time of the current step, ms.
    pub now_ms: u64,
    /// The vote this member answers LOOKING peers with once it has decided, and the
    /// round it decided in.
    pub decided: Option<(Vote, u64)>,
    /// The newest config seen (`lastSeenQuorumVerifier`): `config.quorum` itself, or a
    /// newer one proposed and not yet committed.
    pub last_seen: QuorumVerifier,
    /// Why the role that is ending went LOOKING, set just before it returns
    /// [`Next::Look`] ([`Ctx::look_because`]) and taken by the transition.
    leaving_because: Option<&'static str>,
    out: Vec<Action>,
}

impl Ctx {
    /// [`Next::Look`], recording `why` for the role change's log line (ZooKeeper logs
    /// the same events as exceptions: "Read timed out", "Not sufficient followers
    /// synced", "Timeout while waiting for epoch from quorum").
    pub fn look_because(&mut self, why: &'static str) -> Next {
        self.leaving_because = Some(why);
        Next::Look
    }

    /// Queues an action.
    pub fn emit(&mut self, action: Action) {
        self.out.push(action);
    }

    /// Queues a send.
    pub fn send(&mut self, to: Sid, msg: Message) {
        self.out.push(Action::Send { to, msg });
    }

    /// This member's sid.
    pub fn me(&self) -> Sid {
        self.config.my_sid
    }

    /// Whether this member votes.
    pub fn is_participant(&self) -> bool {
        self.config.quorum.is_participant(self.config.my_sid)
    }

    /// Whether this member learns as an observer (OBSERVERINFO). A member outside the
    /// current config learns as a non-voting follower (`QuorumPeer.updateLearnerType`),
    /// and so does an observer that votes in the newer config it has seen: it must
    /// hold and acknowledge the whole history for that config's quorums (an observer
    /// is synced to the commit point and gets no PROPOSALs). ZooKeeper keeps it an
    /// observer and counts its NEWLEADER ACK for the newer config; the simulation
    /// found a keel leader then waiting for good for a NEWLEADER quorum of a last seen
    /// config whose voters were observers (reconfig seed 25).
    pub fn is_observer(&self) -> bool {
        let me = self.config.my_sid;
        let newer = self.last_seen.version() > self.config.quorum.version();
        self.config.quorum.is_observer(me) && !(newer && self.last_seen.is_participant(me))
    }

    /// Takes `qv` as the last seen config when reconfig is on and it is newer
    /// (`setLastSeenQuorumVerifier`).
    pub fn see_config(&mut self, qv: QuorumVerifier) {
        if self.config.reconfig_enabled && qv.version() > self.last_seen.version() {
            self.last_seen = qv.clone();
            self.emit(Action::ConfigSeen { config: qv });
        }
    }

    /// Drops a last seen config that no txn of this member's log carries any more
    /// (its reconfig txn was lost): the current config is the last seen one again.
    pub fn forget_last_seen(&mut self) {
        if self.last_seen.version() != self.config.quorum.version() {
            self.last_seen = self.config.quorum.clone();
            self.emit(Action::ConfigSeen {
                config: self.last_seen.clone(),
            });
        }
    }

    /// Takes the leader's config from NEWLEADER as the last seen one, older or not
    /// (ZooKeeper's `setLastSeenQuorumVerifier` logs a stale one and takes it): a
    /// newer config this member saw from a PROPOSAL the sync truncated is gone.
    pub fn adopt_last_seen(&mut self, qv: QuorumVerifier) {
        if !self.config.reconfig_enabled {
            return;
        }
        // But never below a reconfig txn this member still holds past its current
        // config (one seen in this very sync: an established leader's NEWLEADER
        // carries its current config while a reconfig is pending). Forgetting it let
        // a member lead and establish on the old config's quorum alone and lose txns
        // a quorum of the new one had committed (reconfig seed 527).
        let current = self.config.quorum.version();
        let held = self
            .log
            .after(current)
            .filter_map(|t| reconfig::config_of_txn(&t.data))
            .filter(|q| q.version() > current)
            .last();
        let next = [Some(qv), held]
            .into_iter()
            .flatten()
            .filter(|q| q.version() >= current)
            .max_by_key(|q| q.version())
            .unwrap_or_else(|| self.config.quorum.clone());
        if next.version() != self.last_seen.version() {
            self.last_seen = next;
            self.emit(Action::ConfigSeen {
                config: self.last_seen.clone(),
            });
        }
    }

    /// Makes `qv` the current config when reconfig is on and it is newer
    /// (`QuorumPeer.processReconfig`'s `setQuorumVerifier`). Returns whether this
    /// member's kind changed: whether it learns as an observer (`updateLearnerType`).
    pub fn activate_config(&mut self, qv: QuorumVerifier) -> bool {
        if !self.config.reconfig_enabled || qv.version() <= self.config.quorum.version() {
            return false;
        }
        // A voter and a non-voting follower are both PARTICIPANTs to ZooKeeper: only
        // learning as an observer or not is a change of kind.
        let was_observer = self.is_observer();
        if qv.version() > self.last_seen.version() {
            self.last_seen = qv.clone();
        }
        self.config.quorum = qv.clone();
        self.emit(Action::ConfigActivated { config: qv });
        was_observer != self.is_observer()
    }

    /// Whether `sid` votes in the current config or the last seen one
    /// (`QuorumPeer.getCurrentAndNextConfigVoters`, FLE's `validVoter`).
    pub fn is_voter(&self, sid: Sid) -> bool {
        self.config.quorum.is_participant(sid) || self.last_seen.is_participant(sid)
    }

    /// The voters of the current and the last seen config, ascending.
    pub fn voters(&self) -> Vec<Sid> {
        let mut v: Vec<Sid> = self
            .config
            .quorum
            .participants()
            .chain(self.last_seen.participants())
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The notification of `vote` with the config ZooKeeper's FLE puts in it: the
    /// current config's text with reconfig on; empty otherwise, for the codec to
    /// write the static config (ZAB-WIRE.md §2).
    pub fn notification(&self, vote: &Vote, state: ServerState, round: u64) -> Notification {
        let mut n = vote.notification(state, round);
        if self.config.reconfig_enabled {
            n.config = bytes::Bytes::from(self.config.quorum.text());
        }
        n
    }

    /// Whether `sids` hold a quorum of every active config (the current one, and the
    /// last seen one while it is newer).
    pub fn all_quorums(&self, sids: impl IntoIterator<Item = Sid> + Clone) -> bool {
        reconfig::active(&self.config.quorum, &self.last_seen)
            .all(|qv| qv.contains_quorum(sids.clone()))
    }
}

/// Where a role hands over to the next.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// Keep the role.
    Stay,
    /// Go back to electing.
    Look,
    /// Lead (the election chose this member).
    Lead,
    /// Follow or observe `leader`.
    Learn(Sid),
}

/// Where a member is in Zab (ZooKeeper's `QuorumPeer.ZabState`, shown by `mntr`
/// `zk_peer_state` and the AdminServer's `zabstate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZabState {
    /// LOOKING.
    Election,
    /// Leader or learner agreeing on the new epoch.
    Discovery,
    /// Learners being brought up to date.
    Synchronization,
    /// Serving: proposals and commits.
    Broadcast,
}

impl ZabState {
    /// ZooKeeper's name of the state (`ZabState.name()`).
    pub fn name(self) -> &'static str {
        match self {
            ZabState::Election => "ELECTION",
            ZabState::Discovery => "DISCOVERY",
            ZabState::Synchronization => "SYNCHRONIZATION",
            ZabState::Broadcast => "BROADCAST",
        }
    }
}

/// One learner connected to a leader, as the leader sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LearnerInfo {
    /// The learner's sid.
    pub sid: Sid,
    /// It registered with OBSERVERINFO.
    pub observer: bool,
    /// Its sync is queued and proposals are forwarded to it (ZooKeeper's forwarding
    /// followers and observing learners: what `zk_synced_followers` counts).
    pub forwarding: bool,
    /// The last logged zxid its ACKEPOCH reported, 0 before (ZooKeeper's
    /// `LearnerHandler.peerLastZxid`): the zxid its DIFF, TRUNC or SNAP starts from.
    pub peer_last_zxid: Zxid,
    /// The highest zxid it acknowledged as durable (0 before its NEWLEADER ACK; an
    /// observer never acknowledges): how far behind the leader's log it is.
    pub acked: Zxid,
    /// When the leader last heard from it, ms (the time input's clock).
    pub last_heard_ms: u64,
    /// When its LEARNERINFO arrived, ms: when its election ended with this leader.
    pub connected_ms: u64,
}

#[derive(Debug)]
enum Role {
    Looking(Election),
    Leading(Box<Leader>),
    Learning(Learner),
}

/// One ensemble member's Zab state machine.
#[derive(Debug)]
pub struct Peer {
    ctx: Ctx,
    role: Role,
    /// The FOLLOWERINFO or OBSERVERINFO of learners that connected while this member
    /// was still LOOKING, at most one per sid: handed to the leader if this member
    /// comes to lead, else their connections are closed (see `hold_learner`).
    held_learners: Vec<(Sid, Message)>,
    /// Why this member's latest LOOKING role change happened (None at start, or when
    /// it gave no reason, as an election starting again under a newer config).
    looked_because: Option<&'static str>,
}

impl Peer {
    /// A member starting from what its storage recovered, at time `now_ms`, in
    /// LOOKING. The returned actions (the first notifications) must be executed.
    pub fn new(config: Config, recovered: Recovered, now_ms: u64) -> (Peer, Vec<Action>) {
        // A reconfig txn in the log past the current config is the last seen config
        // (ZooKeeper keeps it in `<cfg>.dynamic.next`; the log is where it came from,
        // and a crash between the two cannot lose it).
        let newer = |qv: &QuorumVerifier| qv.version() > config.quorum.version();
        let last_seen = match config.reconfig_enabled {
            true => recovered
                .log
                .iter()
                .rev()
                .find_map(|t| reconfig::config_of_txn(&t.data).filter(newer)),
            false => None,
        };
        let last_seen = last_seen.unwrap_or_else(|| config.quorum.clone());
        let log = Log::new(
            recovered.snapshot_zxid,
            recovered.log,
            config.commit_log_count,
        );
        let durable = log.last();
        let mut ctx = Ctx {
            last_seen,
            config,
            accepted_epoch: recovered.accepted_epoch,
            current_epoch: recovered.current_epoch,
            log,
            durable,
            now_ms,
            decided: None,
            leaving_because: None,
            out: Vec::new(),
        };
        let election = Election::start(&mut ctx, 0);
        let peer = Peer {
            ctx,
            role: Role::Looking(election),
            held_learners: Vec::new(),
            looked_because: None,
        };
        let mut peer = peer;
        let out = std::mem::take(&mut peer.ctx.out);
        (peer, out)
    }

    /// Feeds one input at time `now_ms` (never decreasing) and returns what to do.
    pub fn step(&mut self, now_ms: u64, input: Input) -> Vec<Action> {
        self.step_inner(now_ms, input);
        std::mem::take(&mut self.ctx.out)
    }

    /// [`Peer::step`], leaving what to do in `out` (which must be empty) instead of
    /// returning a new vector: a member steps once per message (on a leader, a
    /// REQUEST and an ACK from each follower per write), and a caller that keeps
    /// `out` from step to step, emptied, allocates nothing for them.
    pub fn step_into(&mut self, now_ms: u64, input: Input, out: &mut Vec<Action>) {
        assert!(out.is_empty(), "step_into takes an empty vector");
        // The core pushes into the caller's vector; its own (empty: every step hands
        // its actions out) waits for the next step.
        std::mem::swap(&mut self.ctx.out, out);
        self.step_inner(now_ms, input);
        std::mem::swap(&mut self.ctx.out, out);
    }

    /// One step's work; its actions are left in `ctx.out`.
    fn step_inner(&mut self, now_ms: u64, input: Input) {
        self.ctx.now_ms = self.ctx.now_ms.max(now_ms);
        let next = match input {
            Input::Message {
                from,
                msg: Message::Notification(n),
            } => self.on_notification(from, n),
            Input::Durable { zxid } => {
                self.ctx.durable = self.ctx.durable.max(zxid.min(self.ctx.log.last()));
                self.dispatch(input_durable)
            }
            Input::Propose { txn } => match &mut self.role {
                Role::Leading(l) => {
                    l.propose(&mut self.ctx, txn);
                    Next::Stay
                }
                _ => {
                    self.ctx.emit(Action::ProposeRefused);
                    Next::Stay
                }
            },
            other => {
                let ctx = &mut self.ctx;
                match &mut self.role {
                    Role::Looking(e) => match other {
                        Input::Tick => e.tick(ctx),
                        Input::Message {
                            from,
                            msg: msg @ (Message::FollowerInfo { .. } | Message::ObserverInfo { .. }),
                        } => {
                            Self::hold_learner(&mut self.held_learners, from, msg);
                            Next::Stay
                        }
                        Input::Message { from, .. } => {
                            self.held_learners.retain(|(s, _)| *s != from);
                            ctx.emit(Action::CloseConnection { peer: from });
                            Next::Stay
                        }
                        Input::Disconnected { peer } => {
                            self.held_learners.retain(|(s, _)| *s != peer);
                            Next::Stay
                        }
                        _ => Next::Stay,
                    },
                    Role::Leading(l) => l.step(ctx, other),
                    Role::Learning(l) => l.step(ctx, other),
                }
            }
        };
        self.transition(next);
        self.release_held_learners();
    }

    /// Keeps the first packet of a learner that connected while this member is
    /// LOOKING. A ZooKeeper learner that decided before us that we lead connects at
    /// once; ZooKeeper's leader only listens on its quorum port once it leads, so the
    /// learner's connect is refused and retried until initLimit, but a connection we
    /// accept and then close fails its registerWithLeader, and it elects again (seen
    /// in a mixed ensemble: the ZooKeeper members went on without the keel member
    /// they had just elected). Keeping the packet until our own election ends is the
    /// same to a keel learner, which waits for LEADERINFO up to initLimit.
    fn hold_learner(held: &mut Vec<(Sid, Message)>, from: Sid, msg: Message) {
        held.retain(|(s, _)| *s != from);
        held.push((from, msg));
    }

    /// Once the election is over: the held learners' packets go to the leader if
    /// this member leads, else their connections are closed (they elect again and
    /// find the leader).
    fn release_held_learners(&mut self) {
        while !self.held_learners.is_empty() {
            match &self.role {
                Role::Looking(_) => return,
                Role::Leading(_) => {
                    let (from, msg) = self.held_learners.remove(0);
                    let next = match &mut self.role {
                        Role::Leading(l) => l.step(&mut self.ctx, Input::Message { from, msg }),
                        _ => unreachable!("matched above"),
                    };
                    self.transition(next);
                }
                Role::Learning(_) => {
                    for (peer, _) in self.held_learners.drain(..) {
                        self.ctx.emit(Action::CloseConnection { peer });
                    }
                }
            }
        }
    }

    fn dispatch(&mut self, f: fn(&mut Ctx, &mut Role) -> Next) -> Next {
        f(&mut self.ctx, &mut self.role)
    }

    fn on_notification(&mut self, from: Sid, n: Notification) -> Next {
        if self.ctx.config.reconfig_enabled && matches!(self.role, Role::Looking(_)) {
            // A LOOKING member takes a newer config from a notification and elects
            // again under it (FLE's WorkerReceiver: processReconfig, "restarting
            // leader election").
            let text = std::str::from_utf8(&n.config).ok();
            let theirs = text.and_then(|t| wire::config::parse_quorum_config(t).ok());
            if let Some(rqv) = theirs.filter(|q| q.version() > self.ctx.config.quorum.version()) {
                let cur = self.ctx.config.quorum.clone();
                self.ctx.activate_config(rqv.clone());
                if !rqv.same_config(&cur) {
                    return Next::Look;
                }
            }
        }
        match &mut self.role {
            Role::Looking(e) => e.on_notification(&mut self.ctx, from, n),
            _ => {
                // Not LOOKING: a LOOKING peer (or any non-voter) learns who leads from
                // our current vote and state (ZAB-WIRE.md §2 "You must reply").
                let voter = self.ctx.is_voter(from);
                if n.state == ServerState::Looking || !voter {
                    if let Some((vote, round)) = self.ctx.decided.clone() {
                        let state = self.server_state();
                        let n = self.ctx.notification(&vote, state, round);
                        self.ctx.send(from, Message::Notification(n));
                    }
                }
                Next::Stay
            }
        }
    }

    fn server_state(&self) -> ServerState {
        match &self.role {
            Role::Looking(_) => ServerState::Looking,
            Role::Leading(_) => ServerState::Leading,
            Role::Learning(_) if !self.ctx.is_observer() => ServerState::Following,
            Role::Learning(_) => ServerState::Observing,
        }
    }

    fn transition(&mut self, mut next: Next) {
        // Bounded: each hand-over either settles or goes to LOOKING, which settles.
        for _ in 0..4 {
            // Taken whatever comes next: a reason left by a role that handed over
            // (a leader to the designated one) is not the next LOOKING's.
            let why = self.ctx.leaving_because.take();
            next = match next {
                Next::Stay => return,
                Next::Look => {
                    self.looked_because = why;
                    self.close_role();
                    self.ctx.emit(Action::RoleChanged(RoleChange::Looking));
                    let round = match &self.role {
                        Role::Looking(e) => e.round(),
                        _ => self.ctx.decided.as_ref().map_or(0, |d| d.1),
                    };
                    self.ctx.decided = None;
                    self.role = Role::Looking(Election::start(&mut self.ctx, round));
                    Next::Stay
                }
                Next::Lead => {
                    // A hand-over after a reconfig goes from one role to the next
                    // without an election (`QuorumPeer.updateServerState`).
                    self.close_role();
                    self.ctx.emit(Action::RoleChanged(RoleChange::Leading));
                    let (leader, next) = Leader::start(&mut self.ctx);
                    self.role = Role::Leading(Box::new(leader));
                    next
                }
                Next::Learn(leader) => {
                    self.close_role();
                    let change = if !self.ctx.is_observer() {
                        RoleChange::Following { leader }
                    } else {
                        RoleChange::Observing { leader }
                    };
                    self.ctx.emit(Action::RoleChanged(change));
                    self.role = Role::Learning(Learner::start(&mut self.ctx, leader));
                    Next::Stay
                }
            };
        }
    }

    fn close_role(&mut self) {
        match &mut self.role {
            Role::Looking(_) => {}
            Role::Leading(l) => l.close(&mut self.ctx),
            Role::Learning(l) => l.close(&mut self.ctx),
        }
    }

    /// This member's sid.
    pub fn sid(&self) -> Sid {
        self.ctx.config.my_sid
    }

    /// The last logged zxid.
    pub fn last_logged(&self) -> Zxid {
        self.ctx.log.last()
    }

    /// The commit point.
    pub fn committed(&self) -> Zxid {
        self.ctx.log.committed()
    }

    /// acceptedEpoch and currentEpoch.
    pub fn epochs(&self) -> (u32, u32) {
        (self.ctx.accepted_epoch, self.ctx.current_epoch)
    }

    /// Why this member's latest LOOKING role change happened (the leader lost its
    /// quorum, the leader went silent for syncLimit, ...), for that change's log line;
    /// `None` before any, or when it gave no reason (an election started again under
    /// a newer config, or one that chose this non-voting member).
    pub fn looked_because(&self) -> Option<&'static str> {
        self.looked_because
    }

    /// The state as a notification would report it.
    pub fn state(&self) -> ServerState {
        self.server_state()
    }

    /// Where this member is in Zab.
    pub fn zab_state(&self) -> ZabState {
        match &self.role {
            Role::Looking(_) => ZabState::Election,
            Role::Leading(l) => l.zab_state(),
            Role::Learning(l) => l.zab_state(),
        }
    }

    /// The leader: this member while it leads, the one it learns from while it
    /// follows or observes, none while it elects.
    pub fn leader(&self) -> Option<Sid> {
        match &self.role {
            Role::Looking(_) => None,
            Role::Leading(_) => Some(self.sid()),
            Role::Learning(l) => Some(l.leader()),
        }
    }

    /// The learners connected to this member while it leads (empty otherwise).
    pub fn learners(&self) -> Vec<LearnerInfo> {
        match &self.role {
            Role::Leading(l) => l.learners(),
            _ => Vec::new(),
        }
    }

    /// When this member started leading, ms; `None` unless it leads.
    pub fn leading_since_ms(&self) -> Option<u64> {
        match &self.role {
            Role::Leading(l) => Some(l.started_ms()),
            _ => None,
        }
    }

    /// The vote this member's last election decided (the leader, its last zxid and
    /// currentEpoch) while it leads or learns; `None` while it elects.
    pub fn decided_vote(&self) -> Option<&Vote> {
        self.ctx.decided.as_ref().map(|(vote, _)| vote)
    }

    /// The current config (`QuorumPeer.getQuorumVerifier`).
    pub fn quorum_config(&self) -> &QuorumVerifier {
        &self.ctx.config.quorum
    }

    /// The newest config seen (`getLastSeenQuorumVerifier`): newer than the current
    /// one while a reconfig is proposed and not committed.
    pub fn last_seen_config(&self) -> &QuorumVerifier {
        &self.ctx.last_seen
    }

    /// The zxid the next proposal would take, if this member is an established
    /// leader that may propose (a reconfig txn's config carries it as its version).
    pub fn next_zxid(&self) -> Option<Zxid> {
        match &self.role {
            Role::Leading(l) => l.next_zxid(),
            _ => None,
        }
    }

    /// The epoch this member leads with a quorum, if it is an established leader.
    pub fn established_epoch(&self) -> Option<u32> {
        match &self.role {
            Role::Leading(l) => l.established_epoch(),
            _ => None,
        }
    }
}

fn input_durable(ctx: &mut Ctx, role: &mut Role) -> Next {
    match role {
        Role::Looking(_) => Next::Stay,
        Role::Leading(l) => l.on_durable(ctx),
        Role::Learning(l) => l.on_durable(ctx),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Standalone is an ensemble of one: it elects itself after the finalize wait,
    /// establishes its epoch alone and commits a txn once its own log has it durable.
    #[test]
    fn an_ensemble_of_one_leads_and_commits_on_its_own_durable_log() {
        let config = Config::new(1, QuorumVerifier::new([1], []), 100, 10, 5);
        let (mut peer, actions) = Peer::new(config, Recovered::default(), 0);
        assert!(actions.is_empty(), "nobody to notify: {actions:?}");
        assert_eq!(
            (peer.zab_state(), peer.leader()),
            (ZabState::Election, None)
        );
        assert!(
            peer.step(100, Input::Tick).is_empty(),
            "still in the finalize wait"
        );
        let actions = peer.step(200, Input::Tick);
        assert!(
            actions.contains(&Action::PersistAcceptedEpoch { epoch: 1 }),
            "{actions:?}"
        );
        assert!(
            actions.contains(&Action::PersistCurrentEpoch { epoch: 1 }),
            "{actions:?}"
        );
        assert!(
            actions.contains(&Action::RoleChanged(RoleChange::LeaderEstablished {
                epoch: 1
            }))
        );
        assert_eq!(peer.established_epoch(), Some(1));
        assert_eq!(peer.zab_state(), ZabState::Broadcast);
        assert_eq!(peer.leader(), Some(1));
        assert_eq!(peer.leading_since_ms(), Some(200));
        assert!(peer.learners().is_empty());
        let actions = peer.step(
            201,
            Input::Propose {
                txn: Bytes::from_static(b"t"),
            },
        );
        let z = zxid(1, 1);
        assert_eq!(actions[0], Action::Proposed { zxid: z });
        assert!(
            !actions.iter().any(|a| matches!(a, Action::Commit { .. })),
            "not durable yet"
        );
        let actions = peer.step(202, Input::Durable { zxid: z });
        assert_eq!(actions, vec![Action::Commit { upto: z }]);
        assert_eq!(peer.committed(), z);
    }

    /// `step_into` with one vector kept from step to step gives `step`'s actions: two
    /// peers of one ensemble of one, fed the same inputs (an election, proposals, their
    /// durability), one through each.
    #[test]
    fn step_into_a_reused_vector_gives_the_actions_step_returns() {
        let config = || Config::new(1, QuorumVerifier::new([1], []), 100, 10, 5);
        let (mut by_step, _) = Peer::new(config(), Recovered::default(), 0);
        let (mut by_into, _) = Peer::new(config(), Recovered::default(), 0);
        let mut inputs = vec![(100, Input::Tick), (200, Input::Tick)];
        for n in 1..=3 {
            inputs.push((
                200 + n,
                Input::Propose {
                    txn: Bytes::from_static(b"t"),
                },
            ));
        }
        inputs.push((210, Input::Durable { zxid: zxid(1, 3) }));
        let mut out = Vec::new();
        let mut nonempty = 0;
        for (now, input) in inputs {
            let want = by_step.step(now, input.clone());
            by_into.step_into(now, input, &mut out);
            assert_eq!(out, want, "at {now}");
            nonempty += usize::from(!want.is_empty());
            out.clear();
        }
        assert!(nonempty >= 5, "the inputs made actions");
        assert_eq!(by_into.committed(), zxid(1, 3));
    }

    /// A ZooKeeper learner that decided before us that we lead connects while we are
    /// still LOOKING and does not retry a connection we accept and close: its
    /// FOLLOWERINFO is held (no close) and answered with LEADERINFO once we lead.
    #[test]
    fn a_followerinfo_that_comes_while_looking_is_held_until_we_lead() {
        let config = Config::new(3, QuorumVerifier::new([1, 2, 3], []), 100, 10, 5);
        let (mut peer, _) = Peer::new(config, Recovered::default(), 0);
        let info = Message::FollowerInfo {
            accepted_epoch: 0,
            sid: 1,
            protocol_version: 0x10000,
            config_version: 0,
        };
        let actions = peer.step(1, Input::Message { from: 1, msg: info });
        assert!(
            !actions.contains(&Action::CloseConnection { peer: 1 }),
            "{actions:?}"
        );
        let vote = |from: Sid| Input::Message {
            from,
            msg: Message::Notification(Notification {
                state: ServerState::Looking,
                leader: 3,
                zxid: 0,
                election_epoch: 1,
                peer_epoch: 0,
                config: Bytes::new(),
            }),
        };
        let mut actions = peer.step(2, vote(1));
        actions.extend(peer.step(3, vote(2)));
        for t in (100..=1000).step_by(100) {
            actions.extend(peer.step(t, Input::Tick));
        }
        assert_eq!(peer.leader(), Some(3), "{actions:?}");
        assert!(
            actions.iter().any(|a| matches!(
                a,
                Action::Send {
                    to: 1,
                    msg: Message::LeaderInfo { .. }
                }
            )),
            "{actions:?}"
        );
    }

    /// A LOOKING member answers a worse vote of its own round with its vote at once,
    /// not a notification timeout later, and ignores an equal one (no echo loop).
    #[test]
    fn a_worse_vote_of_the_same_round_gets_our_vote_back() {
        let config = Config::new(3, QuorumVerifier::new([1, 2, 3], []), 100, 10, 5);
        let recovered = Recovered {
            accepted_epoch: 0,
            current_epoch: 0,
            snapshot_zxid: 0,
            log: Vec::new(),
        };
        let (mut peer, _) = Peer::new(config, recovered, 0);
        let vote = |leader: Sid| Input::Message {
            from: 1,
            msg: Message::Notification(Notification {
                state: ServerState::Looking,
                leader,
                zxid: 0,
                election_epoch: 1,
                peer_epoch: 0,
                config: Bytes::new(),
            }),
        };
        let ours_to_1 = |actions: &[Action]| {
            actions
                .iter()
                .filter(|a| {
                    matches!(a, Action::Send { to: 1, msg: Message::Notification(n) }
                        if n.leader == 3 && n.election_epoch == 1)
                })
                .count()
        };
        let actions = peer.step(1, vote(1));
        assert_eq!(ours_to_1(&actions), 1, "{actions:?}");
        let actions = peer.step(2, vote(3));
        assert_eq!(ours_to_1(&actions), 0, "{actions:?}");
    }

    /// A ZooKeeper 3.8.0 follower may ACK the sync's PROPOSALs before NEWLEADER (its
    /// SyncThread races the NEWLEADER ACK): the leader keeps the connection and sends
    /// UPTODATE on the NEWLEADER ACK.
    #[test]
    fn proposal_acks_before_the_newleader_ack_keep_the_learner() {
        let config = Config::new(3, QuorumVerifier::new([1, 2, 3], []), 100, 10, 5);
        let txn = |n| Txn {
            zxid: zxid(1, n),
            data: Bytes::from_static(b"t"),
        };
        let recovered = Recovered {
            accepted_epoch: 1,
            current_epoch: 1,
            snapshot_zxid: 0,
            log: vec![txn(1), txn(2)],
        };
        let (mut peer, _) = Peer::new(config, recovered, 0);
        let vote = |from: Sid| Input::Message {
            from,
            msg: Message::Notification(Notification {
                state: ServerState::Looking,
                leader: 3,
                zxid: zxid(1, 2),
                election_epoch: 1,
                peer_epoch: 1,
                config: Bytes::new(),
            }),
        };
        peer.step(1, vote(1));
        peer.step(2, vote(2));
        peer.step(1000, Input::Tick);
        assert_eq!(peer.leader(), Some(3));
        let t = std::cell::Cell::new(1000);
        let step = |peer: &mut Peer, from: Sid, msg: Message| {
            t.set(t.get() + 1);
            peer.step(t.get(), Input::Message { from, msg })
        };
        let mut out = Vec::new();
        for sid in [1, 2] {
            out.extend(step(
                &mut peer,
                sid,
                Message::FollowerInfo {
                    accepted_epoch: 1,
                    sid,
                    protocol_version: 0x10000,
                    config_version: 0,
                },
            ));
        }
        for sid in [1, 2] {
            out.extend(step(
                &mut peer,
                sid,
                Message::AckEpoch {
                    last_logged_zxid: zxid(1, 1),
                    current_epoch: 1,
                },
            ));
        }
        out.extend(peer.step(t.get() + 1, Input::Durable { zxid: zxid(1, 2) }));
        assert!(
            out.iter().any(|a| matches!(
                a,
                Action::Send {
                    to: 1,
                    msg: Message::NewLeader { .. }
                }
            )),
            "{out:?}"
        );
        let out = step(&mut peer, 1, Message::Ack { zxid: zxid(1, 2) });
        assert!(
            !out.contains(&Action::CloseConnection { peer: 1 }),
            "{out:?}"
        );
        let mut out = step(&mut peer, 1, Message::Ack { zxid: zxid(2, 0) });
        out.extend(step(&mut peer, 2, Message::Ack { zxid: zxid(2, 0) }));
        assert!(
            out.iter().any(|a| matches!(
                a,
                Action::Send {
                    to: 1,
                    msg: Message::UpToDate { .. }
                }
            )),
            "{out:?}"
        );
    }

    /// A ZooKeeper 3.8 leader forwards an observer what commits during its sync as
    /// INFORMs from `startForwarding` on, ahead of NEWLEADER, some already inside the
    /// SNAP; a keel leader sends them after NEWLEADER, before the observer's ACK.
    /// The observer takes each (skipping those the SNAP holds) and stays in sync.
    #[test]
    fn an_observer_takes_informs_at_any_point_of_its_sync() {
        let config = Config::new(4, QuorumVerifier::new([1, 2, 3], [4]), 100, 10, 5);
        let (mut peer, _) = Peer::new(config, Recovered::default(), 0);
        for from in [1, 2, 3] {
            let state = match from {
                3 => ServerState::Leading,
                _ => ServerState::Following,
            };
            let msg = Message::Notification(Notification {
                state,
                leader: 3,
                zxid: zxid(1, 3),
                election_epoch: 1,
                peer_epoch: 1,
                config: Bytes::new(),
            });
            peer.step(1, Input::Message { from, msg });
        }
        peer.step(1000, Input::Tick);
        assert_eq!(peer.leader(), Some(3), "observes 3");
        let t = std::cell::Cell::new(1000);
        let mut step = |msg: Message| {
            t.set(t.get() + 1);
            peer.step(t.get(), Input::Message { from: 3, msg })
        };
        let inform = |n| Message::Inform {
            zxid: zxid(1, n),
            txn: Bytes::from_static(b"t"),
        };
        let looks = |out: &[Action]| {
            out.iter()
                .any(|a| matches!(a, Action::CloseConnection { peer: 3 }))
        };
        let mut out = step(Message::LeaderInfo {
            new_epoch: 1,
            protocol_version: 0x10000,
        });
        out.extend(step(Message::Snap {
            zxid: zxid(1, 3),
            snapshot: Bytes::new(),
        }));
        // Committed before the SNAP was read: held already.
        out.extend(step(inform(2)));
        out.extend(step(inform(3)));
        out.extend(step(inform(4)));
        out.extend(step(Message::NewLeader {
            epoch: 1,
            config: Bytes::new(),
        }));
        assert!(!looks(&out), "{out:?}");
        assert!(
            out.contains(&Action::Commit { upto: zxid(1, 4) }),
            "{out:?}"
        );
        // Before its NEWLEADER ACK: the txn the INFORM before NEWLEADER brought is
        // not yet durable.
        let out = step(inform(5));
        assert!(!looks(&out), "{out:?}");
        assert!(
            out.contains(&Action::Commit { upto: zxid(1, 5) }),
            "{out:?}"
        );
        let out = peer.step(2000, Input::Durable { zxid: zxid(1, 4) });
        assert!(
            out.iter().any(|a| matches!(
                a,
                Action::Send {
                    to: 3,
                    msg: Message::Ack { .. }
                }
            )),
            "the NEWLEADER ACK waits only for what came before NEWLEADER: {out:?}"
        );
        let out = peer.step(
            2001,
            Input::Message {
                from: 3,
                msg: inform(6),
            },
        );
        assert!(!looks(&out), "{out:?}");
        let out = peer.step(
            2002,
            Input::Message {
                from: 3,
                msg: Message::UpToDate {
                    committed: Some(zxid(1, 6)),
                },
            },
        );
        assert!(!looks(&out), "{out:?}");
        assert_eq!(peer.zab_state(), ZabState::Broadcast);
        assert_eq!(peer.committed(), zxid(1, 6));
    }
}

//! The leader's side of discovery, synchronisation and broadcast (ZooKeeper's
//! `Leader.lead` and one `LearnerHandler` per learner, ZAB-WIRE.md §4, §5, §7).

use std::collections::BTreeMap;

use bytes::Bytes;

use super::log::follows;
use super::message::Message;
use super::quorum::QuorumVerifier;
use super::reconfig::{config_of_txn, designated_leader, quorum_point};
use super::{counter_of, epoch_of, zxid, Action, Ctx, Input, Next, RoleChange, Sid, Txn, Zxid};

/// Each voter's highest durable zxid, gathered at every commit: inline up to 16 voters.
type Acks = smallvec::SmallVec<[(Sid, Zxid); 16]>;

/// ZooKeeper's learner/leader protocol version (0x10000).
pub const PROTOCOL_VERSION: i32 = 0x10000;

/// Where the leader is in establishing its epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Collecting FOLLOWERINFOs to choose the epoch (`getEpochToPropose`).
    Discovery,
    /// LEADERINFO sent; collecting ACKEPOCHs (`waitForEpochAck`).
    AwaitEpochAcks,
    /// currentEpoch written, learners synced; collecting NEWLEADER ACKs
    /// (`waitForNewLeaderAck`).
    AwaitNewLeaderAcks,
    /// A quorum acknowledged NEWLEADER: broadcast.
    Established,
}

/// One learner's progress (ZooKeeper's `LearnerHandler`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// FOLLOWERINFO/OBSERVERINFO received.
    Info,
    /// ACKEPOCH received; the sync waits for the leader's ACKEPOCH quorum.
    EpochAcked { last_zxid: Zxid },
    /// Behind the in-memory window: `Action::ReadLog` for the txns after `after` up
    /// to `upto` is out; the window keeps every txn after `upto` meanwhile.
    ReadingLog { after: Zxid, upto: Zxid },
    /// Sync and NEWLEADER queued; waiting for the ACK of NEWLEADER, which covers
    /// every txn queued before NEWLEADER (up to `newleader_upto`).
    Syncing { newleader_upto: Zxid },
    /// NEWLEADER acknowledged; UPTODATE sent once the epoch is established.
    Synced,
}

#[derive(Debug)]
struct Handler {
    observer: bool,
    accepted_epoch: u32,
    /// ACKEPOCH's currentEpoch was not -1 (the learner had not accepted this epoch
    /// already): it counts toward the ACKEPOCH quorum.
    epoch_counts: bool,
    stage: Stage,
    leaderinfo_sent: bool,
    uptodate_sent: bool,
    /// The highest zxid queued to the learner (as PROPOSAL, INFORM or in the
    /// snapshot); it holds every txn of ours up to here once it has read its queue.
    queued_upto: Zxid,
    /// The highest zxid a COMMIT (or INFORM) was queued for.
    commit_sent_upto: Zxid,
    /// The highest zxid it acknowledged as durable.
    acked: Zxid,
    /// The last logged zxid its ACKEPOCH reported (0 before): where its sync starts.
    peer_last_zxid: Zxid,
    last_heard_ms: u64,
    /// When its LEARNERINFO arrived: when it chose this leader.
    connected_ms: u64,
}

impl Handler {
    fn forwarding(&self) -> bool {
        matches!(self.stage, Stage::Syncing { .. } | Stage::Synced)
    }

    /// A participant past NEWLEADER but not yet sent UPTODATE gets PROPOSALs but no
    /// COMMIT: ZooKeeper's learner logs the sync's PROPOSALs at NEWLEADER and applies
    /// COMMITs in order only once in broadcast; a COMMIT in between for a txn proposed
    /// before NEWLEADER throws in its `syncWithLeader` (3.8.0, seen under a keel
    /// leader: the follower resynced again and again under load). The COMMITs go out
    /// right after UPTODATE.
    fn holds_commits(&self) -> bool {
        !self.observer && self.forwarding() && !self.uptodate_sent
    }
}

/// Txns outstanding when a reconfig committed: they were proposed under the old
/// config too and need its quorum as well (each ZooKeeper Proposal keeps the
/// verifiers it was proposed with).
#[derive(Debug)]
struct Prior {
    /// The config before the reconfig.
    config: QuorumVerifier,
    /// The last txn proposed under it.
    last: Zxid,
    /// Since when they wait for its quorum (reset on each commit), ms.
    waiting_since_ms: u64,
}

/// A leader from its election until it steps down.
#[derive(Debug)]
pub struct Leader {
    phase: Phase,
    /// The epoch being established, once chosen.
    epoch: u32,
    handlers: BTreeMap<Sid, Handler>,
    /// The current phase must end by this time (initLimit).
    phase_deadline_ms: u64,
    next_ping_ms: u64,
    next_quorum_check_ms: u64,
    /// The counter of the last txn proposed in `epoch`.
    counter: u32,
    /// When this member started leading, ms (ZooKeeper's `zk_leader_uptime` counts
    /// from here).
    started_ms: u64,
    /// The zxid of the reconfig proposed and not yet committed (at most one:
    /// RECONFIGINPROGRESS); its config is `ctx.last_seen`.
    pending_reconfig: Option<Zxid>,
    /// False once a committed reconfig designated another leader: nothing more is
    /// committed here (`Leader.allowedToCommit`), and when this leader steps down it
    /// learns from `handover` instead of electing (`updateServerState`).
    allowed_to_commit: bool,
    handover: Option<Sid>,
    /// After a reconfig committed while later txns were outstanding: the config they
    /// were proposed under and the last of them. They need its quorum too, as each
    /// ZooKeeper Proposal keeps the verifiers it was proposed with: committing them on
    /// the new config's quorum alone lost a committed txn (reconfig seed 527: a
    /// leader elected by an old quorum that lacked it truncated it away).
    prior: Option<Prior>,
    /// Each learner's highest acknowledged zxid of this epoch, kept across its
    /// reconnections (ZooKeeper keeps a Proposal's acks): an old voter that comes back
    /// as an observer acks nothing more, but what it acked stays durable.
    acked_ever: BTreeMap<Sid, Zxid>,
    /// The last reconfig committed in this epoch and the leader it designated: a
    /// learner whose COMMITs were held past it gets COMMITANDACTIVATE for it too.
    activated: Option<(Zxid, Sid)>,
}

impl Leader {
    /// Starts leading: discovery begins; with a quorum of one it may finish at once.
    pub fn start(ctx: &mut Ctx) -> (Leader, Next) {
        let mut l = Leader {
            phase: Phase::Discovery,
            epoch: 0,
            handlers: BTreeMap::new(),
            phase_deadline_ms: ctx.now_ms + ctx.config.init_limit * ctx.config.tick_ms,
            next_ping_ms: ctx.now_ms + ctx.config.tick_ms / 2,
            next_quorum_check_ms: ctx.now_ms + ctx.config.tick_ms,
            counter: 0,
            started_ms: ctx.now_ms,
            pending_reconfig: None,
            allowed_to_commit: true,
            handover: None,
            activated: None,
            prior: None,
            acked_ever: BTreeMap::new(),
        };
        let next = l.advance(ctx);
        (l, next)
    }

    /// Where the leader is, as ZooKeeper's `QuorumPeer.ZabState` names it: discovery
    /// until the ACKEPOCH quorum, synchronisation until the NEWLEADER quorum, then
    /// broadcast.
    pub fn zab_state(&self) -> super::ZabState {
        match self.phase {
            Phase::Discovery | Phase::AwaitEpochAcks => super::ZabState::Discovery,
            Phase::AwaitNewLeaderAcks => super::ZabState::Synchronization,
            Phase::Established => super::ZabState::Broadcast,
        }
    }

    /// When this member started leading, ms.
    pub fn started_ms(&self) -> u64 {
        self.started_ms
    }

    /// Every connected learner (ZooKeeper's `Leader.getLearners`), ascending by sid.
    pub fn learners(&self) -> Vec<super::LearnerInfo> {
        self.handlers
            .iter()
            .map(|(&sid, h)| super::LearnerInfo {
                sid,
                observer: h.observer,
                forwarding: h.forwarding(),
                peer_last_zxid: h.peer_last_zxid,
                acked: h.acked,
                last_heard_ms: h.last_heard_ms,
                connected_ms: h.connected_ms,
            })
            .collect()
    }

    /// The zxid the next proposal takes, while proposals are taken.
    pub fn next_zxid(&self) -> Option<Zxid> {
        let open = self.phase == Phase::Established && self.allowed_to_commit;
        (open && self.counter < u32::MAX).then(|| zxid(self.epoch, self.counter + 1))
    }

    /// The established epoch, if a quorum acknowledged NEWLEADER.
    pub fn established_epoch(&self) -> Option<u32> {
        (self.phase == Phase::Established).then_some(self.epoch)
    }

    /// Stepping down: every learner connection closes.
    pub fn close(&mut self, ctx: &mut Ctx) {
        for &sid in self.handlers.keys() {
            ctx.emit(Action::CloseConnection { peer: sid });
        }
        self.handlers.clear();
    }

    /// A non-notification input.
    pub fn step(&mut self, ctx: &mut Ctx, input: Input) -> Next {
        match input {
            Input::Tick => self.tick(ctx),
            Input::Message { from, msg } => self.on_message(ctx, from, msg),
            Input::Disconnected { peer } => {
                self.handlers.remove(&peer);
                self.advance(ctx)
            }
            Input::LogRead { peer, after, txns } => {
                self.on_log_read(ctx, peer, after, txns);
                self.advance(ctx)
            }
            Input::Propose { .. } | Input::Durable { .. } => Next::Stay,
        }
    }

    /// The leader's own log became more durable: it counts toward NEWLEADER and
    /// proposal quorums.
    pub fn on_durable(&mut self, ctx: &mut Ctx) -> Next {
        self.advance(ctx)
    }

    fn tick(&mut self, ctx: &mut Ctx) -> Next {
        let now = ctx.now_ms;
        let tick = ctx.config.tick_ms;
        if self.phase != Phase::Established && now >= self.phase_deadline_ms {
            // No quorum within initLimit: elect again (ZooKeeper's lead() times out).
            // Each phase has its own initLimit from its start.
            ctx.look_because(match self.phase {
                Phase::Discovery => "no quorum of FOLLOWERINFOs within initLimit",
                Phase::AwaitEpochAcks => "no quorum of ACKEPOCHs within initLimit",
                _ => "no quorum of NEWLEADER ACKs (with its own sync) within initLimit",
            });
            return self.step_down();
        }
        // A learner silent for initLimit (while syncing) or syncLimit (after) is
        // dropped, as its socket read times out in ZooKeeper.
        let init = ctx.config.init_limit * tick;
        let sync = ctx.config.sync_limit * tick;
        let dead: Vec<Sid> = self
            .handlers
            .iter()
            .filter(|(_, h)| {
                let limit = if h.stage == Stage::Synced { sync } else { init };
                now.saturating_sub(h.last_heard_ms) > limit
            })
            .map(|(&s, _)| s)
            .collect();
        for sid in dead {
            self.handlers.remove(&sid);
            ctx.emit(Action::CloseConnection { peer: sid });
        }
        if now >= self.next_ping_ms {
            self.next_ping_ms = now + tick / 2;
            let last = ctx.log.last();
            for (&sid, h) in &self.handlers {
                if h.forwarding() {
                    ctx.send(
                        sid,
                        Message::Ping {
                            zxid: last,
                            touched: Vec::new(),
                        },
                    );
                }
            }
        }
        if let Some(prior) = &self.prior {
            // The old config's voters may never ack the txns they still owe (those that
            // became observers ack nothing more; ZooKeeper's leader then waits for
            // good): after syncLimit without a commit, elect again. The next leader
            // establishes every txn it holds with a NEWLEADER quorum of its configs.
            if now.saturating_sub(prior.waiting_since_ms) > sync {
                ctx.look_because("the old config's txns went uncommitted for syncLimit");
                return self.step_down();
            }
        }
        if self.phase == Phase::Established && now >= self.next_quorum_check_ms {
            self.next_quorum_check_ms = now + tick;
            // Each tick the leader and the learners heard from within syncLimit must
            // be a quorum, else it steps down (Leader.lead's tick loop).
            let live = self
                .handlers
                .iter()
                .filter(|(_, h)| {
                    h.stage == Stage::Synced && now.saturating_sub(h.last_heard_ms) <= sync
                })
                .map(|(&s, _)| s)
                .chain([ctx.me()]);
            // With a reconfig pending, of both configs (Leader.lead's syncedAckSet).
            let live: Vec<Sid> = live.collect();
            if !ctx.all_quorums(live.iter().copied()) {
                ctx.look_because(
                    "lost its quorum: too few synced learners heard from within syncLimit",
                );
                return self.step_down();
            }
        }
        self.advance(ctx)
    }

    /// Leaving the leader's role: to the designated leader after a reconfig that
    /// named another, else to an election.
    fn step_down(&self) -> Next {
        match self.handover {
            Some(leader) => Next::Learn(leader),
            None => Next::Look,
        }
    }

    fn on_message(&mut self, ctx: &mut Ctx, from: Sid, msg: Message) -> Next {
        let now = ctx.now_ms;
        match msg {
            Message::FollowerInfo {
                accepted_epoch,
                config_version,
                ..
            }
            | Message::ObserverInfo {
                accepted_epoch,
                config_version,
                ..
            } => {
                let observer = matches!(msg, Message::ObserverInfo { .. });
                let refused = if ctx.config.reconfig_enabled {
                    // Any server may learn (a joining one as a non-voting follower), but
                    // not one with a newer activated config (LearnerHandler.run:
                    // "Follower is ahead of the leader").
                    config_version > ctx.config.quorum.version() as i64
                } else {
                    observer != ctx.config.quorum.is_observer(from)
                        || !ctx.config.quorum.members().any(|s| s == from)
                };
                if refused {
                    ctx.emit(Action::CloseConnection { peer: from });
                    return Next::Stay;
                }
                if self.phase != Phase::Discovery && accepted_epoch > self.epoch {
                    // The learner promised a newer epoch to a leader that never got a
                    // quorum of ACKEPOCHs (a "false leader", ZOOKEEPER-335): it refuses
                    // our LEADERINFO and can never follow this epoch. ZooKeeper sends
                    // LEADERINFO anyway and the learner loops between LOOKING and
                    // FOLLOWING for as long as this leader keeps its quorum (found by
                    // seed 13893: two of five members out for good). Stepping down lets
                    // the next discovery choose an epoch above that promise. It cannot
                    // repeat without end: an acceptedEpoch only rises by a LEADERINFO
                    // from a leader that had a quorum of FOLLOWERINFOs, and each step
                    // down raises the next epoch chosen.
                    return ctx.look_because("a learner has accepted a newer epoch");
                }
                // A new connection from a known learner replaces its old handler.
                self.handlers.insert(
                    from,
                    Handler {
                        observer,
                        accepted_epoch,
                        epoch_counts: false,
                        stage: Stage::Info,
                        leaderinfo_sent: false,
                        uptodate_sent: false,
                        queued_upto: 0,
                        commit_sent_upto: 0,
                        acked: 0,
                        peer_last_zxid: 0,
                        last_heard_ms: now,
                        connected_ms: now,
                    },
                );
                self.advance(ctx)
            }
            other => {
                let Some(h) = self.handlers.get_mut(&from) else {
                    // Nothing but LearnerInfo may open a quorum connection.
                    ctx.emit(Action::CloseConnection { peer: from });
                    return Next::Stay;
                };
                h.last_heard_ms = now;
                match (h.stage, other) {
                    (
                        Stage::Info,
                        Message::AckEpoch {
                            last_logged_zxid,
                            current_epoch,
                        },
                    ) if h.leaderinfo_sent => {
                        // A learner more recent than the leader cannot be led by it
                        // (StateSummary.isMoreRecentThan): drop that learner.
                        if current_epoch != -1 {
                            let theirs = (current_epoch as u32, last_logged_zxid);
                            if theirs > (ctx.current_epoch, ctx.log.last()) {
                                self.handlers.remove(&from);
                                ctx.emit(Action::CloseConnection { peer: from });
                                return Next::Stay;
                            }
                        }
                        h.epoch_counts = current_epoch != -1;
                        h.peer_last_zxid = last_logged_zxid;
                        h.stage = Stage::EpochAcked {
                            last_zxid: last_logged_zxid,
                        };
                        self.advance(ctx)
                    }
                    (Stage::Syncing { newleader_upto }, Message::Ack { zxid: z })
                        if z == zxid(self.epoch, 0) =>
                    {
                        h.stage = Stage::Synced;
                        h.acked = h.acked.max(newleader_upto);
                        self.advance(ctx)
                    }
                    // ZooKeeper 3.8.0's follower logs the sync's PROPOSALs at NEWLEADER
                    // on its SyncThread, whose ACKs may overtake the NEWLEADER ACK its
                    // main thread writes next (ZooKeeper's LearnerHandler takes the
                    // first ACK of any zxid; seen in a mixed ensemble, where closing
                    // the connection here made the follower resync again): nothing
                    // to count, the NEWLEADER ACK that follows covers them.
                    (Stage::Syncing { .. }, Message::Ack { zxid: z })
                        if z > 0 && z <= h.queued_upto =>
                    {
                        Next::Stay
                    }
                    (Stage::Synced, Message::Ack { zxid: z }) => {
                        if epoch_of(z) == self.epoch && counter_of(z) != 0 {
                            h.acked = h.acked.max(z.min(h.queued_upto));
                            if ctx.config.reconfig_enabled {
                                let ever = self.acked_ever.entry(from).or_default();
                                *ever = (*ever).max(h.acked);
                            }
                        }
                        self.advance(ctx)
                    }
                    (Stage::Synced, Message::Ping { touched, .. }) => {
                        if !touched.is_empty() {
                            ctx.emit(Action::Deliver {
                                from,
                                msg: Message::Ping { zxid: 0, touched },
                            });
                        }
                        Next::Stay
                    }
                    // A synced learner's clients' requests are the state machine's.
                    (
                        Stage::Synced,
                        msg @ (Message::Request { .. } | Message::Revalidate { .. }),
                    ) => {
                        ctx.emit(Action::Deliver { from, msg });
                        Next::Stay
                    }
                    _ => {
                        // Anything else breaks the protocol (between ACKEPOCH and the
                        // NEWLEADER ACK a learner sends nothing): drop that learner.
                        self.handlers.remove(&from);
                        ctx.emit(Action::CloseConnection { peer: from });
                        self.advance(ctx)
                    }
                }
            }
        }
    }

    /// Moves through the phases as far as the quorums collected allow.
    fn advance(&mut self, ctx: &mut Ctx) -> Next {
        let me = ctx.me();
        if self.phase == Phase::Discovery {
            let infos = self
                .handlers
                .iter()
                .filter(|(_, h)| !h.observer)
                .map(|(&s, _)| s)
                .chain([me]);
            if !ctx.config.quorum.contains_quorum(infos) {
                return Next::Stay;
            }
            // Observers raise the epoch but never count (ZOOKEEPER-2959).
            let max_seen = self
                .handlers
                .values()
                .map(|h| h.accepted_epoch)
                .max()
                .unwrap_or(0);
            self.epoch = max_seen.max(ctx.accepted_epoch) + 1;
            // acceptedEpoch is durable before any LEADERINFO names the epoch.
            ctx.accepted_epoch = self.epoch;
            ctx.emit(Action::PersistAcceptedEpoch { epoch: self.epoch });
            if ctx.config.reconfig_enabled
                && ctx.config.quorum.version() == 0
                && ctx.last_seen.version() == 0
            {
                // ZOOKEEPER-1783: an initial config gets a version once a quorum
                // establishes it, the NEWLEADER zxid, so that it beats the partial
                // initial configs of joining servers.
                let versioned = ctx.config.quorum.with_version(zxid(self.epoch, 0));
                ctx.see_config(versioned);
            }
            self.phase = Phase::AwaitEpochAcks;
            self.phase_deadline_ms = ctx.now_ms + ctx.config.init_limit * ctx.config.tick_ms;
        }
        for (&sid, h) in self.handlers.iter_mut() {
            if h.stage == Stage::Info && !h.leaderinfo_sent {
                h.leaderinfo_sent = true;
                ctx.send(
                    sid,
                    Message::LeaderInfo {
                        new_epoch: self.epoch,
                        protocol_version: PROTOCOL_VERSION,
                    },
                );
            }
        }
        if self.phase == Phase::AwaitEpochAcks {
            let acks = self
                .handlers
                .iter()
                .filter(|(_, h)| !h.observer && h.epoch_counts && !matches!(h.stage, Stage::Info))
                .map(|(&s, _)| s)
                .chain([me]);
            // currentEpoch may name the epoch only once the history the leader brings
            // into it is durable: a vote with the new epoch beats every vote of the
            // old one, so a crash that lost unsynced history after the write would let
            // this member lead again without txns a quorum acknowledged (found by
            // seed 4424; the leader's side of ZOOKEEPER-4643). The history is fixed
            // while leading starts, so this waits for at most one sync.
            if !ctx.config.quorum.contains_quorum(acks) || ctx.durable < ctx.log.last() {
                return Next::Stay;
            }
            if ctx.config.reconfig_enabled
                && ctx.last_seen.version() > ctx.config.quorum.version()
                && !self.holds_reconfig_txn(ctx)
            {
                // The initial history is fixed now. A last seen config whose reconfig
                // txn it lacks (the config came with a NEWLEADER, and the txn was lost)
                // was never committed, and the learners synced to this history lose
                // that txn too: back to the current config before any NEWLEADER
                // carries it (reconfig seed 43917 activated such a config).
                ctx.forget_last_seen();
            }
            // currentEpoch is durable before any learner is synced into the epoch.
            ctx.current_epoch = self.epoch;
            ctx.emit(Action::PersistCurrentEpoch { epoch: self.epoch });
            if let Some((vote, _)) = ctx.decided.as_mut() {
                vote.peer_epoch = u64::from(self.epoch);
            }
            self.phase = Phase::AwaitNewLeaderAcks;
            self.phase_deadline_ms = ctx.now_ms + ctx.config.init_limit * ctx.config.tick_ms;
        }
        let to_sync: Vec<(Sid, Zxid)> = self
            .handlers
            .iter()
            .filter_map(|(&s, h)| match h.stage {
                Stage::EpochAcked { last_zxid } => Some((s, last_zxid)),
                _ => None,
            })
            .collect();
        for (sid, peer_zxid) in to_sync {
            self.sync_learner(ctx, sid, peer_zxid);
        }
        if self.phase == Phase::AwaitNewLeaderAcks {
            let self_ready = ctx.durable >= ctx.log.last();
            let acks = self
                .handlers
                .iter()
                .filter(|(_, h)| !h.observer && h.stage == Stage::Synced)
                .map(|(&s, _)| s)
                .chain(self_ready.then_some(me));
            let acks: Vec<Sid> = acks.collect();
            if !ctx.all_quorums(acks.iter().copied()) {
                return Next::Stay;
            }
            self.phase = Phase::Established;
            self.next_quorum_check_ms = ctx.now_ms + ctx.config.tick_ms;
            ctx.emit(Action::RoleChanged(RoleChange::LeaderEstablished {
                epoch: self.epoch,
            }));
            if ctx.config.reconfig_enabled && ctx.last_seen.version() > ctx.config.quorum.version()
            {
                // The config NEWLEADER carried is now the quorum's (ZOOKEEPER-1324,
                // Leader.startZkServer), with its designated leader. It activates once
                // the txns the quorum synced are committed, its reconfig txn among them
                // (ZooKeeper activates first and commits after).
                let newleader = zxid(self.epoch, 0);
                let votes: Vec<(Sid, Zxid)> = acks.iter().map(|&s| (s, newleader)).collect();
                let new = ctx.last_seen.clone();
                let designated = designated_leader(me, &ctx.config.quorum, &new, newleader, &votes);
                self.commit(ctx);
                ctx.activate_config(new);
                if designated != Some(me) {
                    self.hand_over(ctx, designated, newleader);
                }
            }
        }
        self.commit(ctx);
        let committed = ctx.log.committed();
        for (&sid, h) in self.handlers.iter_mut() {
            if h.stage == Stage::Synced && !h.uptodate_sent {
                h.uptodate_sent = true;
                // The learner's log is committed up to here (with txns it held before
                // the sync that no COMMIT on this connection names: a restarted keel
                // learner applies only its snapshot); a ZooKeeper learner ignores it.
                let upto = committed.min(h.queued_upto);
                ctx.send(
                    sid,
                    Message::UpToDate {
                        committed: Some(upto),
                    },
                );
                if h.observer {
                    continue;
                }
                // The COMMITs held since NEWLEADER (`holds_commits`), in zxid order; the
                // window kept their txns (`commit`'s pin).
                let held: Vec<Zxid> = ctx
                    .log
                    .after(h.commit_sent_upto)
                    .take_while(|t| t.zxid <= upto)
                    .map(|t| t.zxid)
                    .collect();
                for z in held {
                    let msg = match self.activated {
                        Some((r, leader)) if r == z => {
                            Message::CommitAndActivate { zxid: z, leader }
                        }
                        _ => Message::Commit { zxid: z },
                    };
                    ctx.send(sid, msg);
                    h.commit_sent_upto = z;
                }
            }
        }
        Next::Stay
    }

    /// ZooKeeper's `LearnerHandler.syncFollower` (ZAB-WIRE.md §4.2) over the in-memory
    /// log, then `startForwarding`: DIFF when the learner's last zxid is in our log,
    /// TRUNC when it holds txns past ours in that epoch; behind the window a DIFF from
    /// the on-disk log (`Action::ReadLog`, finished in `on_log_read`) when it holds the
    /// learner's last txn, SNAP otherwise; then every txn it lacks as PROPOSAL (+
    /// COMMIT when committed), then NEWLEADER. As in ZooKeeper, the on-disk log only
    /// serves a learner whose last zxid it holds exactly: one that diverged behind the
    /// window (a TRUNC in the window's terms) gets a SNAP.
    fn sync_learner(&mut self, ctx: &mut Ctx, sid: Sid, peer: Zxid) {
        let log = &ctx.log;
        let committed = log.committed();
        // An established leader syncs every learner from its commit point, as
        // ZooKeeper's from its committed log: one holding txns past it (PROPOSALs it
        // got before it reconnected) is TRUNCated to it and gets them again, as
        // PROPOSALs (a follower, then their COMMITs) or INFORMs (an observer).
        // Otherwise nothing would ever tell it they committed: a COMMIT with no
        // PROPOSAL on this connection breaks a ZooKeeper learner (reconfig seeds 622,
        // 27201). While establishing, the whole initial history (see `queue_sync`).
        let established = self.phase == Phase::Established;
        let last = if established { committed } else { log.last() };
        if established && peer > committed {
            // What it acknowledged past the commit point is truncated away.
            if let Some(ever) = self.acked_ever.get_mut(&sid) {
                *ever = (*ever).min(committed);
            }
        }
        let new_epoch_zxid = counter_of(peer) == 0;
        let (first, from) = if peer == last {
            (Message::Diff { zxid: last }, peer)
        } else if peer > last && !new_epoch_zxid {
            trunc_or_bug(last, last)
        } else if peer >= log.base() && peer <= last {
            if peer == log.base() && new_epoch_zxid {
                // No txn has this zxid (a wiped learner's 0, or an epoch's start), so
                // ZooKeeper's window, which starts at its first txn, never holds it,
                // and its on-disk log finds no txn at it: SNAP, not a DIFF of all.
                snap_at(committed)
            } else if peer == log.base() {
                (Message::Diff { zxid: last }, peer)
            } else {
                let at = log.first_at_or_after(peer).map(|t| t.zxid).unwrap_or(last);
                if at == peer || new_epoch_zxid {
                    (Message::Diff { zxid: last }, peer)
                } else if epoch_of(at) == epoch_of(peer) {
                    let prev = log.before(peer);
                    trunc_or_bug(prev, last)
                } else {
                    snap_at(committed)
                }
            }
        } else if counter_of(peer) != 0 && ctx.config.snapshot_size_factor >= 0.0 {
            // Behind the window: ask for the on-disk log between the learner's last
            // txn and the window (ZooKeeper reads it for a peer zxid it holds; a
            // zxid of 0 or of a new epoch is no txn, so those get a SNAP at once).
            let upto = log.base();
            ctx.emit(Action::ReadLog {
                peer: sid,
                after: peer,
                upto,
                snapshot_size_factor: ctx.config.snapshot_size_factor,
            });
            let h = self.handlers.get_mut(&sid).expect("handler to sync");
            h.stage = Stage::ReadingLog { after: peer, upto };
            return;
        } else {
            snap_at(committed)
        };
        self.queue_sync(ctx, sid, first, from, Vec::new());
    }

    /// The answer to a `ReadLog` for learner `sid`: DIFF when the txns read join the
    /// in-memory window without a gap (ZOOKEEPER-2418: a DIFF with a hole would leave
    /// the learner's state wrong for good), SNAP when the log could not serve them.
    /// A stale answer (the learner reconnected since) is ignored.
    fn on_log_read(&mut self, ctx: &mut Ctx, sid: Sid, after: Zxid, txns: Option<Vec<Txn>>) {
        let Some(h) = self.handlers.get_mut(&sid) else {
            return;
        };
        let Stage::ReadingLog {
            after: asked, upto, ..
        } = h.stage
        else {
            return;
        };
        if asked != after {
            return;
        }
        // The window is pinned at `upto` while the read is out (`commit`), so txns that
        // reach `upto` join it; a base past it would be a hole all the same.
        let window_holds_upto = ctx.log.base() <= upto;
        // One after another from the learner's last txn (`follows`): a log with a
        // hole (written by an older keel, whose learners logged past a lost txn)
        // gets a SNAP, not a DIFF that carries the hole on.
        let joined = txns.filter(|txns| {
            let mut prev = after;
            let ordered = txns.iter().all(|t| {
                let ok = follows(prev, t.zxid) && t.zxid <= upto;
                prev = t.zxid;
                ok
            });
            ordered && prev == upto && window_holds_upto
        });
        let Some(from_log) = joined else {
            let committed = ctx.log.committed();
            let (first, from) = snap_at(committed);
            self.queue_sync(ctx, sid, first, from, Vec::new());
            return;
        };
        let last = ctx.log.last();
        self.queue_sync(ctx, sid, Message::Diff { zxid: last }, upto, from_log);
    }

    /// Queues a sync that starts with `first` (DIFF, TRUNC or SNAP at `from`): the
    /// txns `from_log` read from the on-disk log (all committed) and then every txn
    /// of the window after `from` the learner lacks, as PROPOSAL (+ COMMIT when
    /// committed), then NEWLEADER; the learner starts forwarding.
    fn queue_sync(
        &mut self,
        ctx: &mut Ctx,
        sid: Sid,
        first: Message,
        from: Zxid,
        from_log: Vec<Txn>,
    ) {
        let last = ctx.log.last();
        let committed = ctx.log.committed();
        let h = self.handlers.get_mut(&sid).expect("handler to sync");
        match first {
            Message::Snap { zxid: z, .. } => ctx.emit(Action::SendSnapshot { to: sid, zxid: z }),
            other => ctx.send(sid, other),
        }
        // Observers of an established leader get committed txns only; the rest reaches
        // them as INFORM. While establishing, they get the whole initial history, as
        // followers do: it is what ACKing NEWLEADER's epoch stands for (reconfig seed
        // 9121: an observer with the new currentEpoch but without the initial
        // history's last txn turned voter, won an election on its epoch and lost that
        // committed txn). UPTODATE then tells them what committed.
        let upto = if h.observer && self.phase == Phase::Established {
            committed
        } else {
            last
        };
        let mut sent = from;
        let txns: Vec<Txn> = from_log
            .into_iter()
            .chain(
                ctx.log
                    .after(from)
                    .take_while(|t| t.zxid <= upto)
                    .cloned()
                    .collect::<Vec<_>>(),
            )
            .collect();
        for t in txns {
            let z = t.zxid;
            ctx.send(
                sid,
                Message::Proposal {
                    zxid: z,
                    txn: t.data,
                },
            );
            if z <= committed {
                ctx.send(sid, Message::Commit { zxid: z });
            }
            sent = z;
        }
        h.queued_upto = sent.max(from);
        // A COMMIT of a txn with no PROPOSAL on this connection breaks a ZooKeeper
        // learner (ZkLearnerStream in tests/sim/check.rs): none for the txns up to
        // `from`, which the learner holds already (UPTODATE tells a keel learner
        // which of them are committed).
        h.commit_sent_upto = committed.min(h.queued_upto).max(from);
        h.stage = Stage::Syncing {
            newleader_upto: h.queued_upto,
        };
        // The last seen config (Leader.getQuorumVerifierBytes): establishing, the
        // NEWLEADER quorum commits it; once established with a reconfig pending, it
        // shows a syncing observer that it votes in that config (ZooKeeper gives an
        // observer no outstanding PROPOSALs; reconfig seed 1343 waited for good for
        // the ACKs of observers turned participants). The learner activates it at
        // UPTODATE only once committed. With reconfig off the codec writes the
        // static config.
        let config = if ctx.config.reconfig_enabled {
            Bytes::from(ctx.last_seen.text())
        } else {
            Bytes::new()
        };
        ctx.send(
            sid,
            Message::NewLeader {
                epoch: self.epoch,
                config,
            },
        );
    }

    /// A client txn: the next zxid of the epoch, into our log and to every forwarding
    /// follower (pipelined: no wait for earlier ACKs).
    pub fn propose(&mut self, ctx: &mut Ctx, txn: Bytes) {
        if self.phase != Phase::Established || self.counter == u32::MAX || !self.allowed_to_commit {
            // A counter at its end needs a new epoch (ZOOKEEPER-1277); a leader that
            // handed over commits nothing more.
            ctx.emit(Action::ProposeRefused);
            return;
        }
        self.counter += 1;
        let z = zxid(self.epoch, self.counter);
        if ctx.config.reconfig_enabled {
            if let Some(qv) = config_of_txn(&txn) {
                // From here every proposal needs a quorum of both configs. The config's
                // version is the txn's zxid (the server preps it so: PrepRequestProcessor).
                debug_assert_eq!(qv.version(), z, "a reconfig's version is its zxid");
                ctx.see_config(qv.with_version(z));
                self.pending_reconfig = Some(z);
            }
        }
        ctx.log.append(Txn {
            zxid: z,
            data: txn.clone(),
        });
        ctx.emit(Action::Proposed { zxid: z });
        ctx.emit(Action::AppendTxns {
            txns: vec![Txn {
                zxid: z,
                data: txn.clone(),
            }],
            ack_to: None,
        });
        for (&sid, h) in self.handlers.iter_mut() {
            if h.forwarding() && !h.observer {
                ctx.send(
                    sid,
                    Message::Proposal {
                        zxid: z,
                        txn: txn.clone(),
                    },
                );
                h.queued_upto = z;
            }
        }
    }

    /// Commits as far as the quorums allow, COMMITs strictly in zxid order; a
    /// committed reconfig activates its config before anything after it commits
    /// (`Leader.processAck`'s loop over `tryToCommit`).
    fn commit(&mut self, ctx: &mut Ctx) {
        if self.phase != Phase::Established {
            return;
        }
        while self.allowed_to_commit {
            let acks = self.acks(ctx);
            let Some(upto) = self.commit_point(ctx, &acks) else {
                return;
            };
            let reconfig = self.pending_reconfig.filter(|&r| r == upto);
            let designated = reconfig
                .map(|r| designated_leader(ctx.me(), &ctx.config.quorum, &ctx.last_seen, r, &acks));
            self.commit_upto(ctx, upto, designated.map(|d| d.unwrap_or(ctx.me())));
            match &mut self.prior {
                Some(p) if upto >= p.last => self.prior = None,
                Some(p) => p.waiting_since_ms = ctx.now_ms,
                None => {}
            }
            let Some(designated) = designated else {
                continue;
            };
            self.activated = Some((upto, designated.unwrap_or(ctx.me())));
            // The reconfig is committed: its config becomes the current one. The txns
            // proposed after it, under both configs, still need the old one's quorum.
            let old = ctx.config.quorum.clone();
            let new = ctx.last_seen.clone();
            self.pending_reconfig = None;
            let last = ctx.log.last();
            if last > upto {
                self.prior = Some(Prior {
                    config: old,
                    last,
                    waiting_since_ms: ctx.now_ms,
                });
            }
            ctx.activate_config(new);
            if designated != Some(ctx.me()) {
                self.hand_over(ctx, designated, upto);
            }
        }
    }

    /// A committed reconfig designated another leader (`designated`; none when no
    /// new voter acknowledged it): commit nothing more, and step down to it once the
    /// followers have left for it (the tick's quorum check), as ZooKeeper's leader
    /// does. Our vote names the designated leader from now on (`processReconfig` ->
    /// `updateVote`, at the reconfig's zxid): LOOKING members we answer must not be
    /// sent to us (reconfig seeds 999 and 53173: looking members waited for good for
    /// a leader a stale vote named).
    fn hand_over(&mut self, ctx: &mut Ctx, designated: Option<Sid>, at: Zxid) {
        self.allowed_to_commit = false;
        self.handover = designated;
        if let (Some(d), Some((vote, _))) = (designated, ctx.decided.as_mut()) {
            vote.leader = d;
            vote.zxid = at;
        }
    }

    /// Whether the leader's log holds the reconfig txn of its last seen config (at
    /// the config's version, the txn's zxid).
    fn holds_reconfig_txn(&self, ctx: &Ctx) -> bool {
        let v = ctx.last_seen.version();
        ctx.log
            .after(v.saturating_sub(1))
            .next()
            .filter(|t| t.zxid == v)
            .and_then(|t| config_of_txn(&t.data))
            .is_some_and(|q| q.version() == v)
            || v <= ctx.log.committed()
            // ZOOKEEPER-1783's version of an initial config: no txn.
            || v == zxid(self.epoch, 0)
    }

    /// Each voting learner's highest durable zxid, and the leader's own.
    fn acks(&self, ctx: &Ctx) -> Acks {
        self.handlers
            .iter()
            .filter(|(_, h)| !h.observer && h.stage == Stage::Synced)
            .map(|(&s, h)| (s, h.acked))
            .chain([(ctx.me(), ctx.durable)])
            .collect()
    }

    /// The last txn of the log that may commit now, past the commit point: acked by a
    /// quorum of the current config; from a pending reconfig on, of its config too,
    /// and no further than the reconfig itself. `None` when nothing new commits.
    fn commit_point(&self, ctx: &Ctx, acks: &[(Sid, Zxid)]) -> Option<Zxid> {
        let current = &ctx.config.quorum;
        let mut target = if cfg!(feature = "sim-bug-early-commit") {
            // Deliberate bug for the simulation's teeth: the leader's own durable log
            // alone commits.
            ctx.durable
        } else {
            quorum_point(current, acks)
        };
        if let Some(r) = self.pending_reconfig {
            if ctx.last_seen.version() > current.version() {
                let both = target.min(quorum_point(&ctx.last_seen, acks));
                target = if both >= r { r } else { target.min(r - 1) };
            }
        }
        if let Some(Prior {
            config: old, last, ..
        }) = &self.prior
        {
            let ever: Vec<(Sid, Zxid)> = acks
                .iter()
                .map(|&(s, z)| (s, z.max(self.acked_ever.get(&s).copied().unwrap_or(0))))
                .chain(self.acked_ever.iter().map(|(&s, &z)| (s, z)))
                .collect();
            let old_point = quorum_point(old, &ever);
            if old_point < *last {
                target = target.min(old_point);
            }
        }
        let target = target.min(ctx.log.last());
        if target <= ctx.log.committed() {
            return None;
        }
        // The quorum point is an acknowledged zxid, so a txn of our log or its base.
        ctx.log
            .after(ctx.log.committed())
            .take_while(|t| t.zxid <= target)
            .last()
            .map(|t| t.zxid)
    }

    /// Commits the log up to `upto` and sends the COMMITs (INFORMs to observers);
    /// with `activate`, `upto` is a reconfig, whose COMMIT is COMMITANDACTIVATE
    /// (INFORMANDACTIVATE) naming that leader.
    fn commit_upto(&mut self, ctx: &mut Ctx, upto: Zxid, activate: Option<Sid>) {
        let newly: Vec<Txn> = ctx
            .log
            .after(ctx.log.committed())
            .take_while(|t| t.zxid <= upto)
            .cloned()
            .collect();
        // While a learner's on-disk log read is out, the window keeps every txn after
        // the read's end, so the answer joins it however many commits the read
        // outlasts (re-reading what commits trimmed meanwhile never caught up under
        // continuous writes: the learner waited out initLimit, again and again). The
        // pin lasts at most until the learner's handler goes (initLimit), so the
        // window grows by at most what commits in that time.
        // A learner between NEWLEADER and UPTODATE pins it too, from its last COMMIT:
        // its held COMMITs go out at UPTODATE (within initLimit, or the handler goes).
        let pin = self
            .handlers
            .values()
            .filter_map(|h| match h.stage {
                Stage::ReadingLog { upto, .. } => Some(upto),
                _ if h.holds_commits() => Some(h.commit_sent_upto),
                _ => None,
            })
            .min();
        ctx.log.commit_keeping(upto, pin);
        ctx.emit(Action::Commit { upto });
        for (&sid, h) in self.handlers.iter_mut() {
            if !h.forwarding() {
                continue;
            }
            if h.holds_commits() {
                continue;
            }
            for t in &newly {
                let leader = activate.filter(|_| t.zxid == upto);
                if h.observer {
                    if t.zxid > h.queued_upto {
                        let msg = match leader {
                            Some(leader) => Message::InformAndActivate {
                                zxid: t.zxid,
                                leader,
                                txn: t.data.clone(),
                            },
                            None => Message::Inform {
                                zxid: t.zxid,
                                txn: t.data.clone(),
                            },
                        };
                        ctx.send(sid, msg);
                        h.queued_upto = t.zxid;
                        h.commit_sent_upto = t.zxid;
                    }
                } else if t.zxid > h.commit_sent_upto && t.zxid <= h.queued_upto {
                    let msg = match leader {
                        Some(leader) => Message::CommitAndActivate {
                            zxid: t.zxid,
                            leader,
                        },
                        None => Message::Commit { zxid: t.zxid },
                    };
                    ctx.send(sid, msg);
                    h.commit_sent_upto = t.zxid;
                }
            }
        }
    }
}

/// A SNAP of the state at the commit point `committed`, the txns after it to follow.
fn snap_at(committed: Zxid) -> (Message, Zxid) {
    (
        Message::Snap {
            zxid: committed,
            snapshot: Bytes::new(),
        },
        committed,
    )
}

/// TRUNC(to) as the rule says, or, under the simulation's deliberate bug, a DIFF.
fn trunc_or_bug(to: Zxid, last: Zxid) -> (Message, Zxid) {
    if cfg!(feature = "sim-bug-diff-not-trunc") {
        (Message::Diff { zxid: last }, to)
    } else {
        (Message::Trunc { zxid: to }, to)
    }
}

//! A follower's or observer's side of discovery, synchronisation and broadcast
//! (ZooKeeper's `Learner.registerWithLeader`, `syncWithLeader`, `Follower` and
//! `Observer`, ZAB-WIRE.md §4.1, §4.5, §4.6, §7).

use super::message::Message;
use super::quorum::QuorumVerifier;
use super::reconfig::{config_of_txn, same_quorum_address};
use super::wire::config::parse_quorum_config;
use super::{epoch_of, zxid, Action, Ctx, Input, Next, RoleChange, Sid, Txn, Zxid};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// FOLLOWERINFO sent.
    AwaitLeaderInfo,
    /// ACKEPOCH sent; the next packet is DIFF, TRUNC or SNAP.
    AwaitSync,
    /// Taking PROPOSALs and COMMITs until NEWLEADER.
    Syncing,
    /// NEWLEADER received; its ACK waits until every txn received is durable.
    AwaitDurable,
    /// NEWLEADER acknowledged; waiting for UPTODATE.
    AwaitUpToDate,
    /// Serving: PROPOSAL / ACK / COMMIT / PING.
    Broadcast,
}

/// A learner from its election until it goes LOOKING.
#[derive(Debug)]
pub struct Learner {
    leader: Sid,
    observer: bool,
    phase: Phase,
    /// The epoch from LEADERINFO.
    epoch: u32,
    last_heard_ms: u64,
    /// The highest zxid an ACK was sent for, or left to go with its append.
    ack_sent: Zxid,
    /// The last zxid received before NEWLEADER: durable before its ACK. Txns that
    /// arrive after NEWLEADER do not hold the ACK back (continuous writes during a
    /// sync would otherwise starve it, ZOOKEEPER-4394).
    newleader_upto: Zxid,
    /// Connect attempts left before going LOOKING, and when to make the next one
    /// (Learner.connectToLeader: 5 tries, 100 ms apart).
    connect_tries_left: u32,
    reconnect_at_ms: Option<u64>,
    /// The config NEWLEADER carried, activated at UPTODATE (reconfig on).
    newleader_config: Option<QuorumVerifier>,
    /// The config of the last reconfig txn the sync committed, activated at UPTODATE
    /// (with NEWLEADER's, whichever is newer).
    synced_config: Option<QuorumVerifier>,
}

/// Connect attempts to the leader before a learner gives up (Learner.connectToLeader).
const CONNECT_TRIES: u32 = 5;
/// The pause between connect attempts, ms.
const CONNECT_RETRY_MS: u64 = 100;

impl Learner {
    /// Connects to `leader` and registers with FOLLOWERINFO / OBSERVERINFO.
    pub fn start(ctx: &mut Ctx, leader: Sid) -> Learner {
        let mut l = Learner {
            leader,
            observer: ctx.is_observer(),
            phase: Phase::AwaitLeaderInfo,
            epoch: 0,
            last_heard_ms: ctx.now_ms,
            ack_sent: 0,
            newleader_upto: 0,
            connect_tries_left: CONNECT_TRIES - 1,
            reconnect_at_ms: None,
            newleader_config: None,
            synced_config: None,
        };
        l.register(ctx);
        l
    }

    /// Opens the connection with FOLLOWERINFO / OBSERVERINFO.
    fn register(&mut self, ctx: &mut Ctx) {
        let (observer, leader) = (self.observer, self.leader);
        let (accepted_epoch, sid) = (ctx.accepted_epoch, ctx.me());
        // LearnerInfo.configVersion: the current config's (Learner.registerWithLeader).
        let config_version = ctx.config.quorum.version() as i64;
        let msg = if observer {
            Message::ObserverInfo {
                accepted_epoch,
                sid,
                protocol_version: super::leader::PROTOCOL_VERSION,
                config_version,
            }
        } else {
            Message::FollowerInfo {
                accepted_epoch,
                sid,
                protocol_version: super::leader::PROTOCOL_VERSION,
                config_version,
            }
        };
        ctx.send(leader, msg);
        self.last_heard_ms = ctx.now_ms;
    }

    /// The leader this learner follows or observes.
    pub fn leader(&self) -> Sid {
        self.leader
    }

    /// Where the learner is, as ZooKeeper's `QuorumPeer.ZabState` names it: discovery
    /// until LEADERINFO, synchronisation until UPTODATE, then broadcast.
    pub fn zab_state(&self) -> super::ZabState {
        match self.phase {
            Phase::AwaitLeaderInfo => super::ZabState::Discovery,
            Phase::AwaitSync | Phase::Syncing | Phase::AwaitDurable | Phase::AwaitUpToDate => {
                super::ZabState::Synchronization
            }
            Phase::Broadcast => super::ZabState::Broadcast,
        }
    }

    /// Going LOOKING: the leader connection closes.
    pub fn close(&mut self, ctx: &mut Ctx) {
        ctx.emit(Action::CloseConnection { peer: self.leader });
    }

    /// A non-notification input.
    pub fn step(&mut self, ctx: &mut Ctx, input: Input) -> Next {
        match input {
            Input::Tick if self.reconnect_at_ms.is_some() => {
                if self.reconnect_at_ms.is_some_and(|at| ctx.now_ms >= at) {
                    self.reconnect_at_ms = None;
                    self.register(ctx);
                }
                Next::Stay
            }
            Input::Disconnected { peer }
                if peer == self.leader
                    && self.phase == Phase::AwaitLeaderInfo
                    && self.connect_tries_left > 0 =>
            {
                // The leader may not listen yet (it is finishing its election).
                self.connect_tries_left -= 1;
                self.reconnect_at_ms = Some(ctx.now_ms + CONNECT_RETRY_MS);
                Next::Stay
            }
            Input::Tick => {
                // Without the leader for initLimit (syncing) or syncLimit (after the
                // NEWLEADER ACK) a learner goes LOOKING (its socket read times out).
                let (ticks, why) = match self.phase {
                    Phase::AwaitUpToDate | Phase::Broadcast => (
                        ctx.config.sync_limit,
                        "nothing from the leader within syncLimit",
                    ),
                    _ => (
                        ctx.config.init_limit,
                        "nothing from the leader within initLimit",
                    ),
                };
                if ctx.now_ms.saturating_sub(self.last_heard_ms) > ticks * ctx.config.tick_ms {
                    ctx.look_because(why)
                } else {
                    Next::Stay
                }
            }
            Input::Disconnected { peer } if peer == self.leader => {
                ctx.look_because(match self.phase {
                    // Its tries used up, or the leader refused our FOLLOWERINFO.
                    Phase::AwaitLeaderInfo => "could not connect to or register with the leader",
                    _ => "the leader's connection closed",
                })
            }
            Input::Message { from, msg } if from == self.leader => {
                self.last_heard_ms = ctx.now_ms;
                self.on_message(ctx, msg)
            }
            Input::Message { from, .. } => {
                // Only the leader talks to us on the quorum port; another learner that
                // took us for its leader is refused and retries or re-elects.
                ctx.emit(Action::CloseConnection { peer: from });
                Next::Stay
            }
            _ => Next::Stay,
        }
    }

    fn on_message(&mut self, ctx: &mut Ctx, msg: Message) -> Next {
        match (self.phase, msg) {
            (Phase::AwaitLeaderInfo, Message::LeaderInfo { new_epoch, .. }) => {
                let current_epoch = if new_epoch > ctx.accepted_epoch {
                    // acceptedEpoch is durable before the ACKEPOCH that promises it.
                    ctx.accepted_epoch = new_epoch;
                    ctx.emit(Action::PersistAcceptedEpoch { epoch: new_epoch });
                    ctx.current_epoch as i32
                } else if new_epoch == ctx.accepted_epoch {
                    -1
                } else {
                    // We promised a newer epoch to another leader.
                    return ctx.look_because("the leader's epoch is below the one accepted");
                };
                self.epoch = new_epoch;
                self.phase = Phase::AwaitSync;
                ctx.send(
                    self.leader,
                    Message::AckEpoch {
                        last_logged_zxid: ctx.log.last(),
                        current_epoch,
                    },
                );
                Next::Stay
            }
            (Phase::AwaitSync, Message::Diff { .. }) => {
                self.phase = Phase::Syncing;
                Next::Stay
            }
            (Phase::AwaitSync, Message::Trunc { zxid: z }) => {
                if !ctx.log.truncate_after(z) {
                    // The leader would drop a txn we know committed: refuse to follow
                    // it (ZooKeeper exits, ZOOKEEPER-3701).
                    return ctx.look_because("the leader's TRUNC would drop a committed txn");
                }
                // The truncation is durable before any later txn is appended.
                ctx.emit(Action::TruncateLog { after: z });
                ctx.durable = ctx.durable.min(z);
                self.phase = Phase::Syncing;
                Next::Stay
            }
            (Phase::AwaitSync, Message::Snap { zxid: z, snapshot }) => {
                let committed = ctx.log.committed();
                if z >= committed {
                    // Installed atomically and durably before the txns that follow it.
                    ctx.emit(Action::InstallSnapshot { zxid: z, snapshot });
                    ctx.log.reset(z);
                    ctx.durable = z;
                } else {
                    // The leader's commit point is behind ours (it has not yet committed
                    // its history in the new epoch). What we applied is committed, so it
                    // is in the leader's log at the same zxids: keep it, so our applied
                    // state never moves back, and drop only what may diverge. The
                    // proposals up to our commit point that follow are skipped.
                    ctx.log.truncate_after(committed);
                    ctx.emit(Action::TruncateLog { after: committed });
                    ctx.durable = ctx.durable.min(committed);
                }
                self.phase = Phase::Syncing;
                Next::Stay
            }
            (
                Phase::Syncing | Phase::AwaitDurable | Phase::AwaitUpToDate | Phase::Broadcast,
                Message::Proposal { zxid: z, txn },
            ) if !self.observer || self.phase == Phase::Syncing => {
                if self.phase == Phase::Syncing && z <= ctx.log.committed() {
                    // Already held and applied (a SNAP behind our commit point).
                    return Next::Stay;
                }
                let t = Txn { zxid: z, data: txn };
                if !ctx.log.append_next(t.clone()) {
                    // Txns come one after another on one stream (ZOOKEEPER-4925's
                    // continuity): a gap is a stream that lost some (messages meant
                    // for a connection that was replaced) or a broken leader.
                    return ctx.look_because("a txn from the leader out of zxid order");
                }
                if ctx.config.reconfig_enabled {
                    if let Some(qv) = config_of_txn(&t.data) {
                        ctx.see_config(qv);
                    }
                }
                let ack_to = self.ack_with_append(ctx, z);
                ctx.emit(Action::AppendTxns {
                    txns: vec![t],
                    ack_to,
                });
                Next::Stay
            }
            (
                Phase::Syncing | Phase::AwaitDurable | Phase::AwaitUpToDate | Phase::Broadcast,
                Message::CommitAndActivate { zxid: z, leader },
            ) if !self.observer => {
                if self.commit_only(ctx, z) == Next::Look {
                    return Next::Look;
                }
                let qv = ctx
                    .log
                    .after(z.saturating_sub(1))
                    .next()
                    .filter(|t| t.zxid == z);
                let qv = qv.and_then(|t| config_of_txn(&t.data));
                self.activate(ctx, qv, Some(leader))
            }
            (
                Phase::Syncing | Phase::AwaitDurable | Phase::AwaitUpToDate | Phase::Broadcast,
                Message::InformAndActivate {
                    zxid: z,
                    leader,
                    txn,
                },
            ) if self.observer => {
                if self.held_by_sync(ctx, z) {
                    // The txn is held (a SNAP taken after it committed), but its
                    // config still activates here, with the leader it names.
                    let newer =
                        config_of_txn(&txn).filter(|qv| qv.version() > ctx.config.quorum.version());
                    return match newer {
                        Some(qv) => self.activate(ctx, Some(qv), Some(leader)),
                        None => Next::Stay,
                    };
                }
                let t = Txn { zxid: z, data: txn };
                if !ctx.log.append_next(t.clone()) {
                    return ctx.look_because("a txn from the leader out of zxid order");
                }
                let qv = config_of_txn(&t.data);
                ctx.emit(Action::AppendTxns {
                    txns: vec![t],
                    ack_to: None,
                });
                if self.commit_only(ctx, z) == Next::Look {
                    return Next::Look;
                }
                self.activate(ctx, qv, Some(leader))
            }
            (
                Phase::Syncing | Phase::AwaitDurable | Phase::AwaitUpToDate | Phase::Broadcast,
                Message::Commit { zxid: z },
            ) => self.commit(ctx, z),
            // A leader forwards an observer the txns committed after its sync was
            // queued as INFORMs from then on, so they come before NEWLEADER (a
            // ZooKeeper leader's `startForwarding` precedes it), before this member
            // acknowledged it, or before UPTODATE (Learner.syncWithLeader takes them
            // at any point of the sync). Those a SNAP behind our commit point brings
            // again are held and applied already.
            (
                Phase::Syncing | Phase::AwaitDurable | Phase::AwaitUpToDate | Phase::Broadcast,
                Message::Inform { zxid: z, txn },
            ) if self.observer => {
                if self.held_by_sync(ctx, z) {
                    return Next::Stay;
                }
                let t = Txn { zxid: z, data: txn };
                if !ctx.log.append_next(t.clone()) {
                    return ctx.look_because("a txn from the leader out of zxid order");
                }
                ctx.emit(Action::AppendTxns {
                    txns: vec![t],
                    ack_to: None,
                });
                self.commit(ctx, z)
            }
            (Phase::Syncing, Message::NewLeader { epoch, config }) => {
                if epoch != self.epoch {
                    return ctx.look_because("NEWLEADER for another epoch");
                }
                // The leader's last seen config, to complete with it (ZOOKEEPER-1324)
                // and activate at UPTODATE (Learner.syncWithLeader).
                if ctx.config.reconfig_enabled && config.len() > 1 {
                    let text = std::str::from_utf8(&config).ok();
                    if let Some(qv) = text.and_then(|t| parse_quorum_config(t).ok()) {
                        ctx.adopt_last_seen(qv.clone());
                        self.newleader_config = Some(qv);
                    }
                }
                self.phase = Phase::AwaitDurable;
                self.newleader_upto = ctx.log.last();
                self.try_ack_newleader(ctx);
                Next::Stay
            }
            (Phase::AwaitUpToDate, Message::UpToDate { committed }) => {
                if let Some(z) = committed {
                    if self.commit(ctx, z.min(ctx.log.last())) == Next::Look {
                        return Next::Look;
                    }
                }
                // NEWLEADER's config activates once committed (ZooKeeper activates it
                // here whether committed or not: the simulation found members on a
                // config no quorum committed); a pending one stays last seen until
                // its COMMITANDACTIVATE.
                // The epoch's own zxid counts as committed: ZOOKEEPER-1783 versions
                // an initial config with it, and UPTODATE means a quorum has it.
                let synced = self.synced_config.take();
                let committed = ctx.log.committed();
                let epoch_zxid = zxid(self.epoch, 0);
                let newleader = self
                    .newleader_config
                    .take()
                    .filter(|q| q.version() <= committed || q.version() == epoch_zxid);
                let newest = [newleader, synced]
                    .into_iter()
                    .flatten()
                    .max_by_key(|q| q.version());
                if let Some(qv) = newest {
                    if qv.version() > ctx.config.quorum.version()
                        && self.activate(ctx, Some(qv), None) == Next::Look
                    {
                        return Next::Look;
                    }
                }
                if self.observer && !ctx.is_observer() {
                    // Registered as an observer, but it votes in the pending config
                    // it now holds: again as a follower, to get and ACK the
                    // outstanding PROPOSALs that config's quorum needs.
                    return Next::Learn(self.leader);
                }
                ctx.send(
                    self.leader,
                    Message::Ack {
                        zxid: zxid(self.epoch, 0),
                    },
                );
                self.phase = Phase::Broadcast;
                ctx.emit(Action::RoleChanged(RoleChange::LearnerServing {
                    leader: self.leader,
                    epoch: self.epoch,
                }));
                self.ack_durable(ctx);
                Next::Stay
            }
            (Phase::Broadcast, Message::Ping { zxid: z, .. }) => {
                // The member adds its touched sessions to this echo.
                ctx.send(
                    self.leader,
                    Message::Ping {
                        zxid: z,
                        touched: Vec::new(),
                    },
                );
                Next::Stay
            }
            // The leader's answers for the state machine, in stream order (a SYNC after
            // the COMMITs before it).
            (Phase::Broadcast, msg @ (Message::Sync | Message::RevalidateReply { .. })) => {
                ctx.emit(Action::Deliver {
                    from: self.leader,
                    msg,
                });
                Next::Stay
            }
            // Leader PINGs may start once NEWLEADER is queued; they are ignored during
            // sync.
            (_, Message::Ping { .. }) => Next::Stay,
            _ => ctx.look_because("a message from the leader out of place"),
        }
    }

    /// Whether an observer's INFORM or INFORMANDACTIVATE of `z` brings a txn it holds
    /// and applied already: one at or below its commit point while it syncs (a SNAP
    /// taken after the txn committed; a leader forwards what commits once the sync is
    /// queued). In broadcast, the same is a broken stream, which `append_next`
    /// refuses.
    fn held_by_sync(&self, ctx: &Ctx, z: Zxid) -> bool {
        self.phase != Phase::Broadcast && z <= ctx.log.committed()
    }

    /// Activates reconfig `qv` once committed (`QuorumPeer.processReconfig`). With a
    /// designated leader (COMMITANDACTIVATE / INFORMANDACTIVATE): when it is another
    /// one, or this member's kind changed, straight to the new role with no election
    /// ("changes proposed in reconfig" -> `updateServerState`). With none (NEWLEADER's
    /// config at UPTODATE, a reconfig committed by a plain COMMIT): a change of kind,
    /// or a leader that is no longer a voter at the same quorum address, means a new
    /// election (reconfigFlag cleared). `qv` is None when the committed zxid is no
    /// reconfig txn we hold: the leader and we disagree.
    fn activate(
        &mut self,
        ctx: &mut Ctx,
        qv: Option<QuorumVerifier>,
        designated: Option<Sid>,
    ) -> Next {
        let Some(qv) = qv else {
            return ctx.look_because("an activation of a config not held");
        };
        if !ctx.config.reconfig_enabled {
            return Next::Stay;
        }
        let before = ctx.config.quorum.clone();
        let kind_changed = ctx.activate_config(qv);
        let Some(leader) = designated else {
            let now = &ctx.config.quorum;
            let moved = !same_quorum_address(self.leader, &before, now);
            return match kind_changed || moved || !now.is_participant(self.leader) {
                true => {
                    ctx.look_because("a reconfig changed this member's role or the leader's place")
                }
                false => Next::Stay,
            };
        };
        if !kind_changed && leader == self.leader {
            return Next::Stay;
        }
        let committed = ctx.log.committed();
        if let Some((vote, _)) = ctx.decided.as_mut() {
            vote.leader = leader;
            vote.zxid = committed;
        }
        if leader == ctx.me() {
            Next::Lead
        } else {
            Next::Learn(leader)
        }
    }

    fn commit(&mut self, ctx: &mut Ctx, z: Zxid) -> Next {
        // A reconfig committed by a plain COMMIT (or UPTODATE): a keel leader sends
        // one for txns a learner got before its sync, and the NEWLEADER config may
        // predate it. Its config activates all the same, with no designated leader.
        // Read before committing, which may trim the txns from the window.
        let before = ctx.log.committed();
        let config = match ctx.config.reconfig_enabled && z > before {
            true => ctx
                .log
                .after(before)
                .take_while(|t| t.zxid <= z)
                .filter_map(|t| config_of_txn(&t.data))
                .last(),
            false => None,
        };
        let next = self.commit_only(ctx, z);
        if next != Next::Stay {
            return next;
        }
        match config {
            // The sync's commits may leave the in-memory window before UPTODATE.
            Some(qv) if self.phase == Phase::Syncing => {
                self.synced_config = Some(qv);
                Next::Stay
            }
            Some(qv) if qv.version() > ctx.config.quorum.version() => {
                self.activate(ctx, Some(qv), None)
            }
            _ => Next::Stay,
        }
    }

    fn commit_only(&mut self, ctx: &mut Ctx, z: Zxid) -> Next {
        if z <= ctx.log.committed() {
            return Next::Stay;
        }
        if !ctx.log.commit_to(z) {
            // A COMMIT for a txn we do not hold: the leader and we disagree.
            return ctx.look_because("a commit (COMMIT, UPTODATE, INFORM, ...) of a txn not held");
        }
        ctx.emit(Action::Commit { upto: z });
        Next::Stay
    }

    /// Our log became more durable.
    pub fn on_durable(&mut self, ctx: &mut Ctx) -> Next {
        match self.phase {
            Phase::AwaitDurable => self.try_ack_newleader(ctx),
            Phase::Broadcast => self.ack_durable(ctx),
            _ => {}
        }
        Next::Stay
    }

    /// The NEWLEADER ACK: every txn received before NEWLEADER is durable, then
    /// currentEpoch is written, then the ACK goes out (ZAB-WIRE.md §4.6, the safe rule;
    /// ZOOKEEPER-3911, -4785, -4643). Proposal ACKs only follow it.
    fn try_ack_newleader(&mut self, ctx: &mut Ctx) {
        let durable =
            cfg!(feature = "sim-bug-ack-before-durable") || ctx.durable >= self.newleader_upto;
        if !durable {
            return;
        }
        ctx.current_epoch = self.epoch;
        ctx.emit(Action::PersistCurrentEpoch { epoch: self.epoch });
        if let Some((vote, _)) = ctx.decided.as_mut() {
            vote.peer_epoch = u64::from(self.epoch);
        }
        let z = zxid(self.epoch, 0);
        ctx.send(self.leader, Message::Ack { zxid: z });
        self.ack_sent = z;
        self.phase = Phase::AwaitUpToDate;
    }

    /// Whether the ACK of PROPOSAL `z`, just appended to the in-memory log, goes with
    /// its append ([`super::Config::storage_acks`]): in broadcast, on a follower, when
    /// every other txn of the epoch is acknowledged already (or goes with its own
    /// append), so the ACKs still leave in zxid order. A ZooKeeper leader commits in
    /// zxid order and looks at a proposal again only when an ACK for it comes: an ACK
    /// that overtook the one before could leave a txn uncommitted. `z` then counts as
    /// acknowledged here. The txns a sync brought are acknowledged by the core
    /// ([`Learner::ack_durable`]); proposals take this path once those have gone.
    fn ack_with_append(&mut self, ctx: &Ctx, z: Zxid) -> Option<Sid> {
        if !ctx.config.storage_acks || self.observer || self.phase != Phase::Broadcast {
            return None;
        }
        let epoch = self.epoch;
        let caught_up = epoch_of(z) == epoch
            && ctx
                .log
                .after(self.ack_sent)
                .filter(|t| epoch_of(t.zxid) == epoch)
                .all(|t| t.zxid == z);
        if !caught_up {
            return None;
        }
        self.ack_sent = z;
        Some(self.leader)
    }

    /// In broadcast a follower ACKs each txn of the epoch once it is durable, in zxid
    /// order, including those received before NEWLEADER (ZOOKEEPER-4785). Observers
    /// never ACK. Those that went with their appends ([`Learner::ack_with_append`]) are
    /// counted in `ack_sent` already.
    fn ack_durable(&mut self, ctx: &mut Ctx) {
        if self.observer {
            return;
        }
        let upto = ctx.durable;
        let acks: Vec<Zxid> = ctx
            .log
            .after(self.ack_sent)
            .take_while(|t| t.zxid <= upto)
            .filter(|t| epoch_of(t.zxid) == self.epoch)
            .map(|t| t.zxid)
            .collect();
        for z in acks {
            ctx.send(self.leader, Message::Ack { zxid: z });
            self.ack_sent = z;
        }
    }
}

//! Fast leader election (ZooKeeper's `FastLeaderElection.lookForLeader`, ZAB-WIRE.md
//! §2): votes ordered by (peerEpoch, zxid, sid), a logical clock per round, a finalize
//! wait once a quorum agrees, notification timeouts that double up to a cap, and
//! joining a running ensemble from FOLLOWING/LEADING notifications.

use std::collections::HashMap;

use bytes::Bytes;

use super::message::{Message, Notification, ServerState, NO_VOTE};
use super::{Ctx, Next, Sid, Zxid};

/// A vote: the proposed leader, its last logged zxid and its currentEpoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vote {
    /// The proposed leader.
    pub leader: Sid,
    /// The proposed leader's last logged zxid.
    pub zxid: Zxid,
    /// The proposed leader's currentEpoch.
    pub peer_epoch: u64,
}

impl Vote {
    /// The notification carrying this vote from a member in `state` in round `round`.
    pub fn notification(&self, state: ServerState, round: u64) -> Notification {
        Notification {
            state,
            leader: self.leader,
            zxid: self.zxid,
            election_epoch: round,
            peer_epoch: self.peer_epoch,
            config: Bytes::new(),
        }
    }
}

/// A vote as received, with the sender's round and state.
#[derive(Clone, Debug)]
struct Received {
    vote: Vote,
    round: u64,
    state: ServerState,
}

impl Received {
    /// ZooKeeper's `Vote.equals`: all fields when either side is LOOKING, else only the
    /// leader and its epoch (ZOOKEEPER-1732).
    fn same(&self, other: &Received) -> bool {
        if self.state == ServerState::Looking || other.state == ServerState::Looking {
            self.vote == other.vote && self.round == other.round
        } else {
            self.vote.leader == other.vote.leader && self.vote.peer_epoch == other.vote.peer_epoch
        }
    }
}

/// One LOOKING period.
#[derive(Debug)]
pub struct Election {
    /// The logical clock: the round this member votes in.
    round: u64,
    /// The current proposal.
    vote: Vote,
    /// Votes of this round by sender (ZooKeeper's recvset), own vote included.
    recv: HashMap<Sid, Received>,
    /// FOLLOWING/LEADING notifications of any round (outofelection).
    out_of_election: HashMap<Sid, Received>,
    /// The current notification timeout, ms: starts at the finalize wait, doubles on
    /// each silent period up to the configured maximum.
    not_timeout_ms: u64,
    /// When to re-send our vote. It runs from our own last broadcast, not from the last
    /// notification received: a peer re-sending on the same period must not starve
    /// our re-sends (ZooKeeper re-sends the last message whenever an election
    /// connection comes back, which covers the same case).
    resend_at_ms: u64,
    /// Set once a quorum agrees with `vote`: decide at this time unless a better vote
    /// arrives first.
    finalize_at_ms: Option<u64>,
}

impl Election {
    /// Starts a round after `prev_round` with this member's own vote and broadcasts it.
    pub fn start(ctx: &mut Ctx, prev_round: u64) -> Election {
        let mut e = Election {
            round: prev_round + 1,
            vote: initial_vote(ctx),
            recv: HashMap::new(),
            out_of_election: HashMap::new(),
            not_timeout_ms: ctx.config.finalize_wait_ms,
            resend_at_ms: ctx.now_ms + ctx.config.finalize_wait_ms,
            finalize_at_ms: None,
        };
        e.broadcast(ctx);
        e
    }

    /// The round (logical clock).
    pub fn round(&self) -> u64 {
        self.round
    }

    fn broadcast(&mut self, ctx: &mut Ctx) {
        self.resend_at_ms = ctx.now_ms + self.not_timeout_ms;
        let me = ctx.me();
        let n = ctx.notification(&self.vote, ServerState::Looking, self.round);
        let voters: Vec<Sid> = ctx.voters().into_iter().filter(|&s| s != me).collect();
        for to in voters {
            ctx.send(to, Message::Notification(n.clone()));
        }
        if ctx.is_voter(me) {
            // A member's own notification loops back to itself in ZooKeeper; recording
            // it here is the same, and like any arrival it may complete a quorum (an
            // ensemble of one decides on its own vote). ZooKeeper sends to the voters
            // of the current and the next config, itself included when it votes only
            // in the next one: its vote must count for that config's quorum (reconfig
            // seed 302 waited for good without it).
            let mine = Received {
                vote: self.vote.clone(),
                round: self.round,
                state: ServerState::Looking,
            };
            self.recv.insert(me, mine.clone());
            if self.finalize_at_ms.is_none() && term(ctx, &self.recv, &mine) {
                self.finalize_at_ms = Some(ctx.now_ms + ctx.config.finalize_wait_ms);
            }
        }
    }

    fn reply(&self, ctx: &mut Ctx, to: Sid) {
        let n = ctx.notification(&self.vote, ServerState::Looking, self.round);
        ctx.send(to, Message::Notification(n));
    }

    /// Time passed: decide when the finalize wait is over, or re-send after silence.
    pub fn tick(&mut self, ctx: &mut Ctx) -> Next {
        if let Some(at) = self.finalize_at_ms {
            if ctx.now_ms >= at {
                return self.decide(ctx, self.vote.clone(), self.round);
            }
            return Next::Stay;
        }
        if ctx.now_ms >= self.resend_at_ms {
            self.not_timeout_ms =
                (self.not_timeout_ms * 2).min(ctx.config.max_notification_interval_ms);
            self.broadcast(ctx);
        }
        Next::Stay
    }

    /// A notification from `from`.
    pub fn on_notification(&mut self, ctx: &mut Ctx, from: Sid, n: Notification) -> Next {
        if !ctx.is_voter(from) {
            // Non-voters always get our current vote and never count.
            self.reply(ctx, from);
            return Next::Stay;
        }
        if n.state == ServerState::Looking && n.election_epoch < self.round {
            // A peer in an older round learns ours (WorkerReceiver).
            self.reply(ctx, from);
        }
        if !ctx.is_voter(n.leader) {
            // A voter with no vote of its own yet (a member of the next config only)
            // in a newer round: join that round anyway, else it and we wait for good
            // in different rounds (reconfig seed 987). ZooKeeper ignores such a
            // notification whole.
            if n.state == ServerState::Looking
                && n.election_epoch > self.round
                && self.finalize_at_ms.is_none()
            {
                self.round = n.election_epoch;
                self.recv.clear();
                self.vote = initial_vote(ctx);
                self.broadcast(ctx);
            }
            return Next::Stay;
        }
        let vote = Vote {
            leader: n.leader,
            zxid: n.zxid,
            peer_epoch: n.peer_epoch,
        };
        // A peer in this round that proposes a worse leader learns ours at once. In
        // ZooKeeper it learns it only when our vote changes or our notification timeout
        // re-sends it (finalizeWait at first): a member that stops FOLLOWING a moment
        // after its peer answered the peer's first notification as a follower, then
        // votes for itself, waits that long (a killed leader's two followers took
        // 450-590 ms to elect). Replying is safe: a notification is only a vote, and
        // one to a worse vote carries what a re-send would.
        let worse_same_round = n.state == ServerState::Looking
            && n.election_epoch == self.round
            && better(ctx, &self.vote, &vote);
        if worse_same_round {
            self.reply(ctx, from);
        }
        if self.finalize_at_ms.is_some() {
            // During the finalize wait only a better vote counts; it reopens the round
            // (ZooKeeper requeues it and continues; anything else it drains unread).
            if !better(ctx, &vote, &self.vote) {
                return Next::Stay;
            }
            self.finalize_at_ms = None;
        }
        let received = Received {
            vote: vote.clone(),
            round: n.election_epoch,
            state: n.state,
        };
        match n.state {
            ServerState::Looking => {
                if n.election_epoch > self.round {
                    self.round = n.election_epoch;
                    self.recv.clear();
                    let own = initial_vote(ctx);
                    self.vote = if better(ctx, &vote, &own) { vote } else { own };
                    self.broadcast(ctx);
                } else if n.election_epoch < self.round {
                    return Next::Stay;
                } else if better(ctx, &vote, &self.vote) {
                    self.vote = vote;
                    self.broadcast(ctx);
                }
                self.recv.insert(from, received);
                let mine = Received {
                    vote: self.vote.clone(),
                    round: self.round,
                    state: ServerState::Looking,
                };
                if term(ctx, &self.recv, &mine) {
                    self.finalize_at_ms = Some(ctx.now_ms + ctx.config.finalize_wait_ms);
                }
                Next::Stay
            }
            ServerState::Observing => Next::Stay,
            ServerState::Following | ServerState::Leading => {
                if n.election_epoch == self.round {
                    self.recv.insert(from, received.clone());
                    if joined(ctx, &self.recv, &received)
                        && self.check_leader(ctx, &self.recv, n.leader, n.election_epoch)
                    {
                        return self.decide(ctx, vote, n.election_epoch);
                    }
                }
                // Joining an established ensemble: a quorum follows the same leader,
                // and that leader says it leads.
                self.out_of_election.insert(from, received.clone());
                if joined(ctx, &self.out_of_election, &received)
                    && self.check_leader(ctx, &self.out_of_election, n.leader, n.election_epoch)
                {
                    self.round = n.election_epoch;
                    return self.decide(ctx, vote, n.election_epoch);
                }
                Next::Stay
            }
        }
    }

    /// ZooKeeper's `checkLeader`: the proposed leader's own message says LEADING, or,
    /// when it is this member, the round matches.
    fn check_leader(
        &self,
        ctx: &Ctx,
        votes: &HashMap<Sid, Received>,
        leader: Sid,
        round: u64,
    ) -> bool {
        if leader != ctx.me() {
            votes
                .get(&leader)
                .is_some_and(|r| r.state == ServerState::Leading)
        } else {
            self.round == round
        }
    }

    fn decide(&mut self, ctx: &mut Ctx, vote: Vote, round: u64) -> Next {
        let leader = vote.leader;
        ctx.decided = Some((vote, round));
        if leader == ctx.me() && ctx.is_participant() {
            Next::Lead
        } else if leader == ctx.me() {
            Next::Look
        } else {
            Next::Learn(leader)
        }
    }
}

/// ZooKeeper's initial vote: itself for a voter, [`NO_VOTE`] for anyone else.
fn initial_vote(ctx: &Ctx) -> Vote {
    if !ctx.is_participant() {
        return Vote {
            leader: NO_VOTE,
            zxid: NO_VOTE,
            peer_epoch: NO_VOTE,
        };
    }
    Vote {
        leader: ctx.me(),
        zxid: ctx.log.last(),
        peer_epoch: u64::from(ctx.current_epoch),
    }
}

/// ZooKeeper's `totalOrderPredicate`: `new` beats `cur` if its leader votes and it is
/// greater by (peerEpoch, zxid, sid). A non-voter's own vote (ZooKeeper's
/// Long.MIN_VALUE triple) loses to any voter's.
fn better(ctx: &Ctx, new: &Vote, cur: &Vote) -> bool {
    let q = &ctx.config.quorum;
    if !q.is_participant(new.leader) {
        return false;
    }
    if !q.is_participant(cur.leader) {
        return true;
    }
    (new.peer_epoch, new.zxid, new.leader) > (cur.peer_epoch, cur.zxid, cur.leader)
}

/// Joining an established leader: the senders following `vote`'s leader are a quorum
/// of the current config. ZooKeeper asks a quorum of the last seen config too; a
/// member whose last seen config came from a reconfig PROPOSAL that was lost (its
/// leader fell before it committed, and a quorum of the current config went on
/// without it) then waits for good for members that never saw it (found by
/// reconfig seed 24). Following is safe whoever leads: the leader's own election
/// and NEWLEADER quorum are what must meet every active config, and the sync that
/// follows TRUNCates the lost txn and replaces the last seen config with the leader's.
fn joined(ctx: &Ctx, votes: &HashMap<Sid, Received>, vote: &Received) -> bool {
    let agree = votes.iter().filter(|(_, r)| r.same(vote)).map(|(&s, _)| s);
    ctx.config.quorum.contains_quorum(agree)
}

/// ZooKeeper's `termPredicate`: the senders whose vote equals `vote` are a quorum.
/// With a newer config seen, of both configs (`getVoteTracker`).
fn term(ctx: &Ctx, votes: &HashMap<Sid, Received>, vote: &Received) -> bool {
    let agree: Vec<Sid> = votes
        .iter()
        .filter(|(_, r)| r.same(vote))
        .map(|(&s, _)| s)
        .collect();
    ctx.all_quorums(agree.iter().copied())
}

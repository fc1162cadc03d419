//! The state machine as one member of an ensemble (issue 15 items 5 and 6): which part
//! it plays ([`Role`]), how a learner forwards its clients' writes and session
//! operations to the leader ([`Forwarded`], ZooKeeper's REQUEST packet), how the leader
//! preps them as its own, and how every member applies the txns the leader committed and
//! answers the clients of its own that wait for them (ZooKeeper's FinalRequestProcessor
//! runs on every member for its own connections).
//!
//! Flow of a write from a client of a learner: the learner queues a [`Forwarded`] and
//! keeps the request in the connection's in-flight queue (its later reads wait behind
//! it, as behind a local write); the runtime sends it to the leader, whose server gets
//! [`super::Input::Remote`], preps it like a local write (the txn takes a zxid even when
//! it fails) and proposes it; once Zab commits it, every learner gets
//! [`super::Input::Apply`] with the txn, applies it, fires its own watches, and the one
//! that forwarded it answers its client with the txn's result.
//!
//! Zxids: the leader's server hands them out from `epoch << 32` on, one per txn, which
//! is the order Zab proposes them in; the runtime checks that the zxid Zab reports for a
//! proposal is the one the server gave it.
//!
//! Sessions: a learner mints a new session's id itself (its server id in the high byte,
//! ZooKeeper's SessionTrackerImpl.initializeNextSessionId) and forwards createSession;
//! the password is ZooKeeper's, derived from the id (ZooKeeperServer.generatePasswd),
//! so any member can check it. With `localSessionsEnabled` a new session stays local to
//! its member instead and is made global only when it needs to be
//! ([`super::local_sessions`]). Only the leader expires (global) sessions and reaps containers and
//! TTL nodes; a learner reports the sessions its clients touched ([`Server::drain_touched`],
//! sent in its PING replies) and the leader counts them as touched.
//!
//! `sync` (ZooKeeper's Leader.processSync): the leader answers a sync once every txn it
//! had proposed when the sync arrived is committed and applied, at once when none is
//! outstanding. For a learner's client it tells the runtime to send that learner a
//! SYNC packet (after the COMMITs before it on the same stream; the packet names no
//! request, so a learner answers its forwarded syncs in the order it sent them), and
//! the learner answers its client then, so the client reads at least what the leader
//! had sequenced. For the
//! leader's own client it answers itself. A standalone server answers sync as a read.
//!
//! A session that reconnects to a learner is checked there against ZooKeeper's derived
//! password, then revalidated by the leader ([`Revalidate`], ZooKeeper's REVALIDATE
//! packet): the leader touches it and makes the learner its owner, so the session's
//! requests that still come through the member it left fail with SESSIONMOVED
//! (PrepRequestProcessor's checkSession), and answers whether it is still valid.

use super::{Conn, Origin, Queued, Server};
use crate::import::passwd::session_passwd;
use crate::proto::opcode as op;
use crate::proto::Request;
use crate::server::txn::{Txn, TxnOp};
use crate::session::SessionTracker;
use crate::watch::ConnId;
use bytes::Bytes;
use jute::Id;
use jute::PathRequest;

/// The part a server plays (ZooKeeper's ZooKeeperServer, LeaderZooKeeperServer and
/// Follower-/ObserverZooKeeperServer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Alone: every txn is committed once durable ([`super::Input::Durable`]).
    Standalone,
    /// An ensemble member that is electing or syncing: it serves no client (ZooKeeper's
    /// "ZooKeeperServer not running": a connection is closed at its handshake).
    NotServing,
    /// The leader of an established epoch: preps every write (its own clients' and the
    /// forwarded ones), proposes it, and applies it once committed (reported as
    /// [`super::Input::Durable`]).
    Leader {
        /// The established epoch; this server's zxids go on from `epoch << 32`.
        epoch: u32,
    },
    /// A follower or observer in broadcast: forwards writes and session operations,
    /// applies what the leader commits ([`super::Input::Apply`]), answers reads itself.
    Learner,
    /// An ensemble member that has lost its quorum, with `readonlymode.enabled`
    /// (ZooKeeper's ReadOnlyZooKeeperServer): serves clients that connect with
    /// canBeReadOnly from its last applied state, in sessions of its own, and refuses
    /// whatever changes state with NOTREADONLY ([`super::read_only`]).
    ReadOnly,
}

/// A learner client's write or session operation for the leader (ZooKeeper's REQUEST
/// QuorumPacket: sessionId, cxid, type, the request record, the connection's authinfo;
/// ZAB-WIRE.md §3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Forwarded {
    /// The client's session.
    pub session_id: i64,
    /// The client's xid (0 for the createSession of a new session).
    pub cxid: i32,
    /// The request's opcode.
    pub opcode: i32,
    /// The decoded request.
    pub req: Request,
    /// The request record's bytes as the client sent them (REQUEST's data after
    /// sessionId, cxid and type), for the leader to decode itself; for the
    /// createSession of a new session, its timeout as a 4-byte int, as ZooKeeper's
    /// learner forwards it (ZooKeeperServer.createSession).
    pub body: Bytes,
    /// The connection's identities (`ip:`, auth packets, TLS), which the leader checks
    /// ACLs against.
    pub ids: Vec<Id>,
}

/// A learner asks the leader whether a session that reconnected to it is still valid
/// (ZooKeeper's REVALIDATE packet, learner -> leader: sessionId, timeout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Revalidate {
    /// The session.
    pub session_id: i64,
    /// The timeout the client asked for, ms.
    pub timeout_ms: i32,
}

/// The leader's answer to [`Revalidate`] (REVALIDATE, leader -> learner: sessionId,
/// valid).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RevalidateReply {
    /// The session.
    pub session_id: i64,
    /// Whether it is alive; the learner now owns it if so.
    pub valid: bool,
}

/// A sync the leader answers once the txns before it are applied.
#[derive(Debug)]
pub(super) enum SyncWaiter {
    /// The leader's own client: answered as a read.
    Local {
        conn: ConnId,
        session_id: i64,
        xid: i32,
        req: PathRequest,
    },
    /// A learner's client: a SYNC packet for learner `from`.
    Remote { from: u64 },
}

/// The key of a forwarded request a learner waits on: the session and cxid the txn
/// committed for it carries.
pub(super) type AwaitKey = (i64, i32);

impl Server {
    /// The part this server plays now.
    pub fn role(&self) -> Role {
        self.role
    }

    /// Session ids minted from now on carry `sid` in their high byte, as ZooKeeper's
    /// (SessionTrackerImpl.initializeNextSessionId); call once, before serving.
    pub fn set_server_id(&mut self, sid: u8) {
        self.my_sid = u64::from(sid);
        self.sessions
            .set_next_session_id(SessionTracker::initial_id(self.now_ms, sid));
    }

    /// Takes the requests a learner forwards to the leader, in order.
    pub fn drain_forwards(&mut self) -> Vec<Forwarded> {
        std::mem::take(&mut self.forwards)
    }

    /// [`Server::drain_forwards`] into `out` (appended), the queue keeping its room
    /// (a learner forwards every write its clients send).
    pub fn drain_forwards_into(&mut self, out: &mut Vec<Forwarded>) {
        out.append(&mut self.forwards);
    }

    /// Takes the learners (server ids) owed a SYNC packet for a sync they forwarded, in
    /// order; each goes behind the COMMITs already sent to that learner.
    pub fn drain_sync_replies(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.sync_replies)
    }

    /// Takes a learner's revalidation requests for the leader, in order.
    pub fn drain_revalidations(&mut self) -> Vec<Revalidate> {
        std::mem::take(&mut self.revalidations)
    }

    /// Takes the leader's answers to revalidations: each with the server id of the
    /// learner it goes to.
    pub fn drain_revalidate_replies(&mut self) -> Vec<(u64, RevalidateReply)> {
        std::mem::take(&mut self.revalidate_replies)
    }

    /// Takes the sessions a learner's clients touched since the last call (the learner
    /// reports them to the leader in its PING replies), ascending.
    pub fn drain_touched(&mut self) -> Vec<i64> {
        let mut ids: Vec<i64> = self.touched.drain().collect();
        ids.sort_unstable();
        ids
    }

    /// Plays `role` from now on. Leaving a role closes every client connection (they
    /// reconnect, to this member or another, as ZooKeeper's clients do when their
    /// server shuts down for an election) and forgets proposals not yet committed: if
    /// Zab commits them after all, they come back as [`super::Input::Apply`]. Becoming
    /// the leader gives every session a full timeout from now.
    pub(super) fn set_role(&mut self, role: Role) {
        if role == self.role {
            return;
        }
        tracing::info!(from = ?self.role, to = ?role, "server role changed");
        let conns: Vec<ConnId> = self.conns.keys().copied().collect();
        for conn in conns {
            self.close(conn);
            if let Some(c) = self.conns.get_mut(&conn) {
                c.session_id = 0;
                c.inflight.clear();
            }
            self.watches.remove_conn(conn);
        }
        self.session_conn.clear();
        self.pending.clear();
        self.outstanding.clear();
        self.outstanding_paths.clear();
        self.awaiting.clear();
        self.awaiting_sessions.clear();
        self.forwards.clear();
        self.touched.clear();
        self.syncs.clear();
        self.sync_replies.clear();
        self.awaiting_syncs.clear();
        self.awaiting_revalidations.clear();
        self.revalidations.clear();
        self.revalidate_replies.clear();
        self.session_owner.clear();
        self.upgrading.clear();
        self.local_sessions = self.new_local_sessions();
        self.proposed_zxid = match role {
            Role::Leader { epoch } => (i64::from(epoch) << 32).max(self.last_zxid),
            _ => self.last_zxid,
        };
        if let Role::Leader { .. } = role {
            // A new leader gives every session a full timeout from now, as ZooKeeper's
            // builds its SessionTrackerImpl at leadership: the deadlines this member
            // held as a learner never saw the sessions' pings (they went to the old
            // leader), so most are long past.
            let now = self.now_ms;
            let ids: Vec<i64> = self.sessions.iter().map(|s| s.id).collect();
            for id in ids {
                self.sessions.touch(id, None, now);
            }
        }
        self.role = role;
    }

    /// Whether this server prepares and proposes writes itself (standalone or leader).
    pub(super) fn sequences_writes(&self) -> bool {
        matches!(self.role, Role::Standalone | Role::Leader { .. })
    }

    /// A new session on a learner: mint its id, forward its createSession, answer the
    /// handshake when that txn comes back committed.
    pub(super) fn forward_new_session(&mut self, conn: ConnId, timeout_ms: i32) {
        let id = self.sessions.next_session_id();
        let ids = self.identities_of(conn);
        if let Some(c) = self.conns.get_mut(&conn) {
            c.session_id = id;
            c.inflight.push_back(Queued::Forwarded);
        }
        self.session_conn.insert(id, conn);
        self.awaiting_sessions.insert(id, (conn, timeout_ms));
        self.forwards.push(Forwarded {
            session_id: id,
            cxid: 0,
            opcode: crate::proto::opcode::CREATE_SESSION,
            req: Request::CreateSession { timeout_ms },
            body: Bytes::copy_from_slice(&timeout_ms.to_be_bytes()),
            ids,
        });
    }

    /// A write (or closeSession, or createSession again) of a learner's client: forward
    /// it and wait for its txn.
    pub(super) fn forward(
        &mut self,
        conn: ConnId,
        session_id: i64,
        xid: i32,
        opcode: i32,
        req: Request,
        body: Bytes,
    ) {
        if self.local_session(session_id).is_none() {
            self.touched.insert(session_id);
        }
        let origin = match &req {
            Request::CloseSession => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.closing = true;
                }
                Origin::Close { conn, xid }
            }
            Request::CreateSession { timeout_ms } => Origin::Handshake {
                conn,
                timeout_ms: *timeout_ms,
            },
            // The learner answers EPHEMERALONLOCALSESSION itself (the exception its
            // FollowerRequestProcessor attached), whatever the leader's txn says; for
            // a multi ZooKeeper's FinalRequestProcessor ignores that exception and the
            // leader's per-op results go back.
            _ if !matches!(req, Request::Multi(_)) && self.refuse_ephemeral(session_id, &req) => {
                Origin::Refused {
                    conn,
                    xid,
                    code: crate::proto::ErrorCode::EphemeralOnLocalSession,
                }
            }
            _ => Origin::Reply { conn, xid },
        };
        let ids = self.identities_of(conn);
        if let Some(c) = self.conns.get_mut(&conn) {
            c.inflight.push_back(Queued::Forwarded);
        }
        self.awaiting.insert((session_id, xid), origin);
        self.forwards.push(Forwarded {
            session_id,
            cxid: xid,
            opcode,
            req,
            body,
            ids,
        });
    }

    /// The leader's side of [`Forwarded`]: prep it as a write of `session_id` with the
    /// learner connection's identities; nobody here waits for the answer.
    pub(super) fn remote(&mut self, from: u64, fwd: Forwarded) {
        if !matches!(self.role, Role::Leader { .. }) {
            tracing::debug!(
                session = format!("0x{:x}", fwd.session_id),
                "forwarded request while not leading; dropped"
            );
            return;
        }
        self.stats.packets_received += 1;
        match fwd.req {
            Request::Sync(_) => {
                self.syncs
                    .push_back((self.proposed_zxid, SyncWaiter::Remote { from }));
                self.answer_syncs();
            }
            Request::CreateSession { timeout_ms }
                if self.sessions.get(fwd.session_id).is_none() =>
            {
                let timeout_ms = timeout_ms.clamp(
                    self.settings.min_session_timeout_ms,
                    self.settings.max_session_timeout_ms,
                );
                let passwd = session_passwd(fwd.session_id);
                self.session_owner.insert(fwd.session_id, from);
                if self.settings.local_sessions_enabled {
                    // Perhaps an upgrade: the request that needs it comes right behind.
                    self.upgrading.insert(fwd.session_id);
                }
                self.propose(
                    fwd.session_id,
                    fwd.cxid,
                    TxnOp::CreateSession { timeout_ms, passwd },
                    Origin::Server,
                );
            }
            Request::CreateSession { .. } => {
                // createSession again, for a session the leader knows: logged once more
                // with the session's own timeout and password (see
                // `Server::create_session_again`).
                if let Some(session) = self.sessions.get(fwd.session_id) {
                    let (timeout_ms, passwd) = (session.timeout_ms, session.passwd);
                    self.propose(
                        fwd.session_id,
                        fwd.cxid,
                        TxnOp::CreateSession { timeout_ms, passwd },
                        Origin::Server,
                    );
                }
            }
            req if self.upgrading.contains(&fwd.session_id) => {
                self.prep_and_propose(fwd.session_id, fwd.cxid, req, &fwd.ids, None, from);
            }
            req if self.is_learner_local_session(fwd.session_id) => {
                // A learner's local session: not touched here; an ephemeral create of
                // it is SESSIONEXPIRED (LeaderSessionTracker.checkGlobalSession), in
                // prep.
                self.prep_and_propose(fwd.session_id, fwd.cxid, req, &fwd.ids, None, from);
                // The leader keeps no owner for a session that is not global: it would
                // never be closed here.
                self.session_owner.remove(&fwd.session_id);
            }
            req => {
                let closing = self.sessions.get(fwd.session_id).is_none_or(|s| s.closing);
                if closing || !self.sessions.touch(fwd.session_id, None, self.now_ms) {
                    // As for a local client: a request of a session that is closing or
                    // gone is dropped (ZooKeeperServer.touch fails).
                    tracing::debug!(
                        session = format!("0x{:x}", fwd.session_id),
                        cxid = fwd.cxid,
                        "forwarded request of a closed session dropped"
                    );
                    return;
                }
                self.prep_and_propose(fwd.session_id, fwd.cxid, req, &fwd.ids, None, from);
            }
        }
    }

    /// A reconnect to a learner of a session it did not create: check ZooKeeper's
    /// password, then ask the leader.
    pub(super) fn forward_revalidate(
        &mut self,
        conn: ConnId,
        session_id: i64,
        timeout_ms: i32,
        passwd: &[u8],
    ) {
        if passwd != session_passwd(session_id) {
            return self.tell_expired(conn, session_id, "session password wrong");
        }
        self.awaiting_revalidations
            .insert(session_id, (conn, timeout_ms));
        self.revalidations.push(Revalidate {
            session_id,
            timeout_ms,
        });
    }

    /// The leader's side of [`Revalidate`] from learner `from`.
    pub(super) fn revalidate(&mut self, from: u64, req: Revalidate) {
        let valid = self
            .sessions
            .get(req.session_id)
            .is_some_and(|s| !s.closing)
            && self.sessions.touch(req.session_id, None, self.now_ms);
        if valid {
            self.session_owner.insert(req.session_id, from);
        }
        tracing::info!(
            session = format!("0x{:x}", req.session_id),
            learner = from,
            valid,
            "session revalidated"
        );
        self.revalidate_replies.push((
            from,
            RevalidateReply {
                session_id: req.session_id,
                valid,
            },
        ));
    }

    /// A learner: the leader's answer for a reconnecting session.
    pub(super) fn revalidated(&mut self, reply: RevalidateReply) {
        let Some((conn, timeout_ms)) = self.awaiting_revalidations.remove(&reply.session_id) else {
            return;
        };
        if !reply.valid {
            self.send_connect_response(conn, 0, 0, [0u8; 16]);
            self.close(conn);
            return;
        }
        self.attach_session(conn, reply.session_id);
        let timeout_ms = self
            .sessions
            .get(reply.session_id)
            .map_or(timeout_ms, |s| s.timeout_ms);
        self.connect_response(conn, reply.session_id, timeout_ms);
    }

    /// Whether `owner` (a server id) may act for `session_id` on the leader: the session
    /// has no owner yet (it is then `owner`'s) or is owned by it (ZooKeeper's
    /// SessionTracker.checkSession).
    pub(super) fn owns_session(&mut self, session_id: i64, owner: u64) -> bool {
        if !matches!(self.role, Role::Leader { .. }) {
            return true;
        }
        *self.session_owner.entry(session_id).or_insert(owner) == owner
    }

    /// The leader counts the sessions a learner reported as touched.
    pub(super) fn touched_remotely(&mut self, sessions: &[i64]) {
        for &id in sessions {
            self.sessions.touch(id, None, self.now_ms);
        }
    }

    /// A txn the leader committed, on any member: applied in zxid order; the client
    /// that waits for it here (a forwarded request, or the leader's own proposal still
    /// pending) is answered.
    pub(super) fn apply_committed(&mut self, txn: Txn) {
        if txn.zxid <= self.last_zxid {
            // Already applied (a DIFF that overlaps what a snapshot held).
            return;
        }
        if self
            .pending
            .front()
            .is_some_and(|(t, _)| t.zxid == txn.zxid)
        {
            if let Some((own, origin)) = self.pending.pop_front() {
                self.proposed_zxid = self.proposed_zxid.max(own.zxid);
                return self.finish(own, origin);
            }
        }
        self.proposed_zxid = self.proposed_zxid.max(txn.zxid);
        let origin = match &txn.op {
            TxnOp::CreateSession { timeout_ms, .. } => {
                match self.awaiting_sessions.remove(&txn.session_id) {
                    Some((conn, _)) => Origin::Handshake {
                        conn,
                        timeout_ms: *timeout_ms,
                    },
                    None => self
                        .awaiting
                        .remove(&(txn.session_id, txn.cxid))
                        .unwrap_or(Origin::Server),
                }
            }
            _ => self
                .awaiting
                .remove(&(txn.session_id, txn.cxid))
                .unwrap_or(Origin::Server),
        };
        self.finish(txn, origin);
    }

    /// A sync of a client of this server, in an ensemble: a learner forwards it, the
    /// leader waits for its outstanding proposals. Returns false when it is answered as
    /// a plain read instead (standalone, or a leader with nothing outstanding).
    pub(super) fn sync(
        &mut self,
        conn: ConnId,
        session_id: i64,
        xid: i32,
        req: &PathRequest,
        body: &Bytes,
    ) -> bool {
        match self.role {
            Role::Learner => {
                let ids = self.identities_of(conn);
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.inflight.push_back(Queued::Forwarded);
                }
                self.awaiting_syncs
                    .push_back((conn, session_id, xid, req.clone()));
                self.forwards.push(Forwarded {
                    session_id,
                    cxid: xid,
                    opcode: op::SYNC,
                    req: Request::Sync(req.clone()),
                    body: body.clone(),
                    ids,
                });
                true
            }
            Role::Leader { .. } if self.proposed_zxid > self.last_zxid => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.inflight.push_back(Queued::Forwarded);
                }
                self.syncs.push_back((
                    self.proposed_zxid,
                    SyncWaiter::Local {
                        conn,
                        session_id,
                        xid,
                        req: req.clone(),
                    },
                ));
                true
            }
            _ => false,
        }
    }

    /// A learner: the leader's SYNC packet answers the oldest sync forwarded.
    pub(super) fn sync_replied(&mut self) {
        if let Some((conn, session_id, xid, req)) = self.awaiting_syncs.pop_front() {
            self.answer_sync(conn, session_id, xid, req);
        }
    }

    /// Answers the syncs whose txns are all applied now (called after each apply).
    pub(super) fn answer_syncs(&mut self) {
        while self
            .syncs
            .front()
            .is_some_and(|(zxid, _)| *zxid <= self.last_zxid)
        {
            let Some((_, waiter)) = self.syncs.pop_front() else {
                break;
            };
            match waiter {
                SyncWaiter::Remote { from } => self.sync_replies.push(from),
                SyncWaiter::Local {
                    conn,
                    session_id,
                    xid,
                    req,
                } => self.answer_sync(conn, session_id, xid, req),
            }
        }
    }

    /// The sync's reply (as a read, with this member's applied zxid), then the reads
    /// queued behind it.
    fn answer_sync(&mut self, conn: ConnId, session_id: i64, xid: i32, req: PathRequest) {
        self.read(conn, session_id, xid, op::SYNC, Request::Sync(req));
        let zxid = self.last_zxid;
        self.release(conn, zxid);
    }

    pub(super) fn identities_of(&self, conn: ConnId) -> Vec<Id> {
        self.conns
            .get(&conn)
            .map(|c: &Conn| c.identities.clone())
            .unwrap_or_default()
    }
}

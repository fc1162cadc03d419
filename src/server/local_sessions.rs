//! Local sessions (issue 18 part 3): with `localSessionsEnabled`, a session a client
//! creates on an ensemble member is kept by that member only, as ZooKeeper 3.8's
//! UpgradeableSessionTracker, LocalSessionTracker, LearnerSessionTracker and
//! LeaderSessionTracker keep it. The read-only server keeps its sessions in the same
//! table ([`super::read_only`]).
//!
//! - Creation (`QuorumZooKeeperServer.setLocalSessionFlag`): on a leader or learner every
//!   new session is local: no createSession txn, its id minted by this member (its
//!   server id in the high byte, from a tracker built when the member took its role, as
//!   ZooKeeper builds a fresh LocalSessionTracker with each ZooKeeperServer), its
//!   password ZooKeeper's derived one. A standalone server has no local sessions.
//! - Life: a local session is touched by its requests here and expires here in tickTime
//!   buckets with no closeSession txn; a learner does not list it in its PING touched
//!   list (`LearnerSessionTracker.touchSession` touches the local tracker only). Its
//!   closeSession is answered here with no txn (header with this member's last zxid)
//!   and closes the connection. It is forgotten when the member changes role.
//! - Reconnects: a local session resumes only on its own member. Elsewhere it is
//!   unknown: a learner asks the leader, which answers invalid for any session not
//!   global (`LeaderZooKeeperServer.checkIfValidGlobalSession`); the client is told it
//!   expired.
//! - Upgrade (`QuorumZooKeeperServer.checkUpgradeSession`): a create or create2 with an
//!   ephemeral mode (EPHEMERAL, EPHEMERAL_SEQUENTIAL; containers and TTL nodes are not
//!   ephemeral there), or a multi holding one, needs a global session. With
//!   `localSessionsUpgradingEnabled` the session leaves the local table and a
//!   createSession of it (same id, its local timeout, the derived password) is submitted
//!   just before the request, so the createSession txn precedes the create. Without it
//!   the request fails with EPHEMERALONLOCALSESSION (-120): on the leader as an error
//!   txn; a learner forwards it and answers -120 whatever the leader made of it (the
//!   follower's own request carries the exception its FinalRequestProcessor throws).
//! - The leader (`LeaderSessionTracker.checkSession`) lets through the requests of a
//!   session it does not know whose id carries another member's server id (a learner's
//!   local session), without touching it; an ephemeral create of a session that is not
//!   global is SESSIONEXPIRED there (`checkGlobalSession`).
//! - `mntr`: `zk_local_sessions` counts this member's local sessions,
//!   `zk_global_sessions` the replicated session table (ZKDatabase's session count).

use super::{Queued, Role, Server};
use crate::import::passwd::session_passwd;
use crate::proto::opcode as op;
use crate::proto::{MultiOp, Request};
use crate::server::txn::TxnOp;
use crate::session::{Session, SessionTracker};
use crate::watch::ConnId;
use bytes::Bytes;

/// Create flags whose CreateMode is ephemeral (EPHEMERAL 1, EPHEMERAL_SEQUENTIAL 3;
/// shared/PROTOCOL.md "Create modes").
const EPHEMERAL_FLAGS: [i32; 2] = [1, 3];

/// Whether `req` needs a global session: ZooKeeper's checkUpgradeSession looks at create
/// and create2 (also inside a multi) with an ephemeral mode only.
pub(super) fn needs_global_session(req: &Request) -> bool {
    let ephemeral_create = |opcode: i32, flags: i32| {
        matches!(opcode, op::CREATE | op::CREATE2) && EPHEMERAL_FLAGS.contains(&flags)
    };
    match req {
        Request::Create(c) => ephemeral_create(c.opcode, c.flags),
        Request::Multi(ops) => ops.iter().any(|o| match o {
            MultiOp::Create(c) => ephemeral_create(c.opcode, c.flags),
            _ => false,
        }),
        _ => false,
    }
}

impl Server {
    /// A fresh table of local sessions for the role this member takes now: its ids carry
    /// this member's id in the high byte and the time below, as the session tracker a
    /// ZooKeeper server builds when it starts in a role.
    pub(super) fn new_local_sessions(&self) -> SessionTracker {
        let sid = u8::try_from(self.my_sid).unwrap_or(0);
        SessionTracker::new(
            self.settings.tick_ms,
            SessionTracker::initial_id(self.now_ms, sid),
        )
    }

    /// Whether new sessions on this member are local: `localSessionsEnabled` on a leader
    /// or learner (the read-only server has rules of its own, [`super::read_only`]).
    pub(super) fn local_sessions_on(&self) -> bool {
        self.settings.local_sessions_enabled
            && matches!(self.role, Role::Leader { .. } | Role::Learner)
    }

    /// This member's local session `id`, if it keeps one (on a leader or learner).
    pub fn local_session(&self, id: i64) -> Option<&Session> {
        if !self.local_sessions_on() && self.role != Role::ReadOnly {
            return None;
        }
        self.local_sessions.get(id)
    }

    /// This member's table of local sessions when it has them (`localSessionsEnabled` on
    /// a leader, a learner or the read-only server: `dump` lists them).
    pub fn local_session_table(&self) -> Option<&SessionTracker> {
        let kept = self.local_sessions_on() || self.role == Role::ReadOnly;
        (self.settings.local_sessions_enabled && kept).then_some(&self.local_sessions)
    }

    /// How many local sessions this member keeps (`mntr`'s `zk_local_sessions`).
    pub fn local_session_count(&self) -> usize {
        if !self.local_sessions_on() && self.role != Role::ReadOnly {
            return 0;
        }
        self.local_sessions.len()
    }

    /// A new session on a leader or learner with local sessions: kept here, answered at
    /// once; `timeout_ms` is clamped.
    pub(super) fn create_local_session(&mut self, conn: ConnId, timeout_ms: i32) {
        let id = self.local_sessions.next_session_id();
        let passwd = session_passwd(id);
        self.local_sessions.add(id, timeout_ms, passwd, self.now_ms);
        tracing::info!(
            session = format!("0x{id:x}"),
            timeout_ms,
            "local session created"
        );
        self.attach_session(conn, id);
        self.send_connect_response(conn, id, timeout_ms, passwd);
    }

    /// A reconnect to this member of one of its local sessions: resumed with a right
    /// password, told it expired otherwise. Returns false when `session_id` is not a
    /// local session here (it is then looked up as a global one).
    pub(super) fn reopen_local_session(
        &mut self,
        conn: ConnId,
        session_id: i64,
        timeout_ms: i32,
        passwd: &[u8],
    ) -> bool {
        if self.local_session(session_id).is_none() {
            return false;
        }
        if passwd != session_passwd(session_id)
            || !self
                .local_sessions
                .touch(session_id, Some(timeout_ms), self.now_ms)
        {
            self.tell_expired(conn, session_id, "local session password wrong");
            return true;
        }
        self.attach_session(conn, session_id);
        self.send_connect_response(conn, session_id, timeout_ms, session_passwd(session_id));
        true
    }

    /// A write of local session `session_id` before it goes the way of any write.
    /// Returns true when it was answered here (a createSession again; a closeSession,
    /// done locally, or queued behind the session's earlier requests); false when it
    /// goes on: then an
    /// ephemeral create has upgraded the session (its createSession submitted first),
    /// or, with upgrading off, been marked for EPHEMERALONLOCALSESSION (see
    /// `refuse_ephemeral`).
    pub(super) fn local_session_write(
        &mut self,
        conn: ConnId,
        session_id: i64,
        xid: i32,
        req: &Request,
    ) -> bool {
        if let Request::CloseSession = req {
            let Some(c) = self.conns.get_mut(&conn) else {
                return true;
            };
            // Later requests of the session are dropped, as after any accepted close.
            c.closing = true;
            if c.inflight.is_empty() {
                self.close_local_session(conn, session_id, xid);
            } else {
                // Answered in order, behind the session's requests still in flight.
                c.inflight.push_back(Queued::Read {
                    xid,
                    opcode: op::CLOSE_SESSION,
                    req: Request::CloseSession,
                    arrived_ms: self.now_ms,
                });
            }
            return true;
        }
        if let Request::CreateSession { .. } = req {
            // Every createSession is local here (setLocalSessionFlag): no txn, and
            // FinalRequestProcessor sends the ConnectResponse again. keel sends it at
            // once, even ahead of the session's writes still in flight.
            let timeout_ms = self
                .local_sessions
                .get(session_id)
                .map_or(0, |s| s.timeout_ms);
            self.send_connect_response(conn, session_id, timeout_ms, session_passwd(session_id));
            return true;
        }
        if needs_global_session(req) && self.settings.local_sessions_upgrading_enabled {
            self.upgrade_session(conn, session_id);
        }
        false
    }

    /// Whether an ephemeral create of local session `session_id` must fail with
    /// EPHEMERALONLOCALSESSION (upgrading is off; with it on the session is no longer
    /// local by now).
    pub(super) fn refuse_ephemeral(&self, session_id: i64, req: &Request) -> bool {
        self.local_session(session_id).is_some() && needs_global_session(req)
    }

    /// Closes local session `session_id` here: no txn; the reply header carries this
    /// member's last zxid, then the connection closes.
    pub(super) fn close_local_session(&mut self, conn: ConnId, session_id: i64, xid: i32) {
        tracing::info!(
            session = format!("0x{session_id:x}"),
            "local session closed by client"
        );
        self.local_sessions.remove(session_id);
        self.session_owner.remove(&session_id);
        self.send(conn, super::reply::header_only(xid, self.last_zxid, 0));
        self.drop_session_conn(session_id);
        self.close(conn);
    }

    /// Makes local session `session_id` global: it leaves the local table and its
    /// createSession (its local timeout, the derived password, cxid 0) is proposed on
    /// the leader or forwarded by a learner, ahead of the request that needs it.
    fn upgrade_session(&mut self, conn: ConnId, session_id: i64) {
        let Some(session) = self.local_sessions.remove(session_id) else {
            return;
        };
        let timeout_ms = session.timeout_ms;
        tracing::info!(session = format!("0x{session_id:x}"), "Upgrading session");
        self.upgrading.insert(session_id);
        if self.role == Role::Learner {
            self.touched.insert(session_id);
            let ids = self.identities_of(conn);
            self.forwards.push(super::Forwarded {
                session_id,
                cxid: 0,
                opcode: op::CREATE_SESSION,
                req: Request::CreateSession { timeout_ms },
                body: Bytes::copy_from_slice(&timeout_ms.to_be_bytes()),
                ids,
            });
            return;
        }
        self.session_owner.insert(session_id, self.my_sid);
        self.propose(
            session_id,
            0,
            TxnOp::CreateSession {
                timeout_ms,
                passwd: session_passwd(session_id),
            },
            super::Origin::Server,
        );
    }

    /// Whether the leader lets a forwarded request of `session_id` through although the
    /// session is not in its table: a learner's local session (another member's server
    /// id in the high byte) with local sessions on.
    pub(super) fn is_learner_local_session(&self, session_id: i64) -> bool {
        self.settings.local_sessions_enabled
            && (session_id as u64 >> 56) != self.my_sid
            && self.sessions.get(session_id).is_none()
    }

    /// Closes the connections of local sessions past their deadline (their
    /// LocalSessionTracker expires them on this member; no txn).
    pub(super) fn expire_local_sessions(&mut self) {
        for id in self.local_sessions.expire(self.now_ms) {
            tracing::info!(session = format!("0x{id:x}"), "local session expired");
            self.local_sessions.remove(id);
            self.session_owner.remove(&id);
            self.drop_session_conn(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::request::CreateOp;
    use crate::proto::ErrorCode;
    use crate::server::{Input, Outbound, Settings, StorageOp};
    use jute::{Decoder, ReplyHeader};

    const T0: i64 = 1_700_000_000_000;
    const TICK_MS: u32 = 2000;
    const TIMEOUT_MS: i32 = 10_000;

    /// A member (server id 1) with local sessions on, txns waiting for
    /// [`Input::Durable`], playing `role`, with connection 1 open.
    fn member(role: Role, upgrading: bool) -> Server {
        let settings = Settings {
            tick_ms: TICK_MS,
            local_sessions_enabled: true,
            local_sessions_upgrading_enabled: upgrading,
            ..Settings::default()
        };
        let mut s = Server::new(settings, 1, T0, 1);
        s.set_server_id(1);
        s.handle(T0, Input::Role(role));
        let addr = "127.0.0.1:5000".parse().unwrap();
        s.handle(T0, Input::Connected { conn: 1, addr });
        s
    }

    const LEADER: Role = Role::Leader { epoch: 1 };

    /// Connects a new session on connection 1; returns its id from the ConnectResponse.
    fn connect(s: &mut Server) -> i64 {
        let req = jute::ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            time_out_ms: TIMEOUT_MS,
            session_id: 0,
            passwd: Bytes::from_static(&[0; 16]),
            read_only: false,
        };
        s.handle(T0, Input::Handshake { conn: 1, req });
        let out = s.drain_outbox();
        let [(1, Outbound::Packet(p))] = &out[..] else {
            panic!("one ConnectResponse expected: {out:?}");
        };
        let resp: jute::ConnectResponse = Decoder::new(&p[4..]).record().unwrap();
        assert_eq!(resp.time_out_ms, TIMEOUT_MS);
        resp.session_id
    }

    fn create(path: &str, flags: i32) -> Request {
        Request::Create(CreateOp {
            opcode: op::CREATE,
            path: path.into(),
            data: None,
            acl: crate::tree::acl::open_acl(),
            flags,
            ttl_ms: None,
        })
    }

    fn send(s: &mut Server, xid: i32, opcode: i32, req: Request) {
        let input = Input::Request {
            conn: 1,
            xid,
            opcode,
            req,
            body: Bytes::new(),
        };
        s.handle(T0 + 10, input);
    }

    /// The txns queued for storage.
    fn txns(s: &mut Server) -> Vec<crate::server::txn::Txn> {
        s.drain_storage()
            .into_iter()
            .map(|op| match op {
                StorageOp::Append(t) => t,
                other => panic!("unexpected storage op {other:?}"),
            })
            .collect()
    }

    /// The reply headers sent on connection 1, and whether it was closed.
    fn replies(s: &mut Server) -> (Vec<ReplyHeader>, bool) {
        let mut headers = Vec::new();
        let mut closed = false;
        for (conn, o) in s.drain_outbox() {
            assert_eq!(conn, 1);
            match o {
                Outbound::Packet(p) => headers.push(Decoder::new(&p[4..]).record().unwrap()),
                Outbound::Close => closed = true,
            }
        }
        (headers, closed)
    }

    #[test]
    fn a_new_session_is_local_with_no_txn() {
        let mut s = member(LEADER, true);
        let id = connect(&mut s);
        assert_eq!(
            id as u64 >> 56,
            1,
            "the member's server id in the high byte"
        );
        assert!(txns(&mut s).is_empty(), "no createSession txn");
        assert_eq!(s.local_session_count(), 1);
        assert!(s.sessions.is_empty(), "not a global session");
        // A persistent create keeps it local.
        send(&mut s, 1, op::CREATE, create("/p", 0));
        let t = txns(&mut s);
        assert_eq!(t.len(), 1);
        assert!(matches!(t[0].op, TxnOp::Create { .. }));
        assert_eq!(s.local_session_count(), 1);
    }

    #[test]
    fn a_local_session_expires_without_a_txn() {
        let mut s = member(LEADER, true);
        let id = connect(&mut s);
        // Deadline T0 + 10 s, rounded up to the next tick bucket.
        let bucket_ms = ((T0 + TIMEOUT_MS as i64) / TICK_MS as i64 + 1) * TICK_MS as i64;
        s.handle(bucket_ms - 1, Input::Tick);
        assert_eq!(s.local_session_count(), 1);
        s.handle(bucket_ms, Input::Tick);
        assert!(txns(&mut s).is_empty(), "no closeSession txn");
        assert_eq!(s.local_session_count(), 0);
        assert!(s.local_session(id).is_none());
        assert!(replies(&mut s).1, "its connection is closed");
    }

    #[test]
    fn an_ephemeral_create_upgrades_the_session_first() {
        let mut s = member(LEADER, true);
        let id = connect(&mut s);
        send(&mut s, 1, op::CREATE, create("/e", 1));
        let t = txns(&mut s);
        assert_eq!(t.len(), 2, "{t:?}");
        assert_eq!(t[0].session_id, id);
        assert_eq!(
            t[0].op,
            TxnOp::CreateSession {
                timeout_ms: TIMEOUT_MS,
                passwd: session_passwd(id)
            }
        );
        assert_eq!(t[1].session_id, id);
        assert!(matches!(&t[1].op, TxnOp::Create { owner, .. } if *owner == id));
        assert!(t[0].zxid < t[1].zxid);
        assert_eq!(s.local_session_count(), 0);
        s.handle(T0 + 20, Input::Durable { zxid: t[1].zxid });
        assert!(s.sessions.get(id).is_some(), "global now");
        let (h, _) = replies(&mut s);
        assert_eq!((h.len(), h[0].xid, h[0].err), (1, 1, 0));
        assert_eq!(s.tree.ephemerals(id).count(), 1);
    }

    #[test]
    fn without_upgrading_an_ephemeral_create_fails() {
        let mut s = member(LEADER, false);
        let id = connect(&mut s);
        send(&mut s, 1, op::CREATE, create("/e", 3));
        let t = txns(&mut s);
        assert_eq!(t.len(), 1, "an error txn, no createSession: {t:?}");
        assert!(matches!(
            t[0].op,
            TxnOp::Error(ErrorCode::EphemeralOnLocalSession)
        ));
        s.handle(T0 + 20, Input::Durable { zxid: t[0].zxid });
        let (h, _) = replies(&mut s);
        assert_eq!(h[0].err, ErrorCode::EphemeralOnLocalSession.code());
        assert_eq!(s.local_session_count(), 1, "still local");
        assert!(s.sessions.get(id).is_none());
    }

    #[test]
    fn without_upgrading_an_ephemeral_container_or_ttl_create_is_session_expired() {
        // checkUpgradeSession (EPHEMERALONLOCALSESSION) looks at create and create2;
        // createContainer and createTTL with an ephemeral mode reach checkGlobalSession.
        for (opcode, ttl_ms) in [(op::CREATE_CONTAINER, None), (op::CREATE_TTL, None)] {
            let mut s = member(LEADER, false);
            connect(&mut s);
            let Request::Create(mut c) = create("/e", 1) else {
                unreachable!()
            };
            c.opcode = opcode;
            c.ttl_ms = ttl_ms;
            send(&mut s, 1, opcode, Request::Create(c));
            let t = txns(&mut s);
            assert_eq!(t.len(), 1, "{t:?}");
            assert!(
                matches!(t[0].op, TxnOp::Error(ErrorCode::SessionExpired)),
                "opcode {opcode}: {:?}",
                t[0].op
            );
        }
    }

    fn multi_with_an_ephemeral() -> Request {
        let Request::Create(p) = create("/mp", 0) else {
            unreachable!()
        };
        let Request::Create(e) = create("/me", 1) else {
            unreachable!()
        };
        Request::Multi(vec![MultiOp::Create(p), MultiOp::Create(e)])
    }

    #[test]
    fn without_upgrading_a_multi_with_an_ephemeral_fails_at_that_op() {
        // The leader's own local session: EPHEMERALONLOCALSESSION at the ephemeral op,
        // as ZooKeeper's validateCreateRequest throws the exception its
        // LeaderRequestProcessor attached (seen against ZooKeeper 3.8 in
        // compat-tests/ensemble/local_sessions.sh).
        let mut s = member(LEADER, false);
        connect(&mut s);
        send(&mut s, 1, op::MULTI, multi_with_an_ephemeral());
        let t = txns(&mut s);
        assert_eq!(t.len(), 1, "{t:?}");
        assert_eq!(
            t[0].op,
            TxnOp::MultiError(vec![ErrorCode::Ok, ErrorCode::EphemeralOnLocalSession])
        );
        // A learner's: its multi goes to the leader as it is (answered with the
        // leader's per-op results), which fails the op with SESSIONEXPIRED.
        let mut l = member(Role::Learner, false);
        connect(&mut l);
        send(&mut l, 1, op::MULTI, multi_with_an_ephemeral());
        let f = l.drain_forwards();
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].req, multi_with_an_ephemeral());
        let mut leader = member(LEADER, false);
        let remote = SessionTracker::initial_id(T0, 2);
        leader.handle(
            T0,
            Input::Remote {
                from: 2,
                fwd: crate::server::Forwarded {
                    session_id: remote,
                    cxid: 1,
                    opcode: op::MULTI,
                    req: multi_with_an_ephemeral(),
                    body: Bytes::new(),
                    ids: Vec::new(),
                },
            },
        );
        let t = txns(&mut leader);
        assert_eq!(
            t[0].op,
            TxnOp::MultiError(vec![ErrorCode::Ok, ErrorCode::SessionExpired])
        );
    }

    #[test]
    fn closing_a_local_session_is_local() {
        let mut s = member(LEADER, true);
        let id = connect(&mut s);
        send(&mut s, 7, op::CLOSE_SESSION, Request::CloseSession);
        assert!(txns(&mut s).is_empty(), "no closeSession txn");
        let (h, closed) = replies(&mut s);
        assert_eq!((h.len(), h[0].xid, h[0].err), (1, 7, 0));
        assert!(closed);
        assert!(s.local_session(id).is_none());
    }

    #[test]
    fn create_session_again_of_a_local_session_logs_no_txn() {
        let mut s = member(Role::Learner, true);
        let id = connect(&mut s);
        let req = Request::CreateSession {
            timeout_ms: TIMEOUT_MS,
        };
        send(&mut s, 0, op::CREATE_SESSION, req);
        assert!(s.drain_forwards().is_empty(), "nothing forwarded");
        let out = s.drain_outbox();
        let [(1, Outbound::Packet(p))] = &out[..] else {
            panic!("one ConnectResponse expected: {out:?}");
        };
        let resp: jute::ConnectResponse = Decoder::new(&p[4..]).record().unwrap();
        assert_eq!((resp.session_id, resp.time_out_ms), (id, TIMEOUT_MS));
        assert_eq!(resp.passwd[..], session_passwd(id)[..]);
        assert_eq!(s.local_session_count(), 1);
    }

    #[test]
    fn a_learner_forwards_the_upgrade_then_the_create_and_no_touches() {
        let mut s = member(Role::Learner, true);
        let id = connect(&mut s);
        assert!(s.drain_forwards().is_empty(), "no createSession forwarded");
        send(&mut s, 1, op::CREATE, create("/p", 0));
        assert!(s.drain_touched().is_empty(), "not in the PING touched list");
        let f = s.drain_forwards();
        assert_eq!(f.len(), 1);
        send(&mut s, 2, op::CREATE, create("/e", 1));
        let f = s.drain_forwards();
        let kinds: Vec<(i64, i32, i32)> =
            f.iter().map(|f| (f.session_id, f.cxid, f.opcode)).collect();
        assert_eq!(kinds, [(id, 0, op::CREATE_SESSION), (id, 2, op::CREATE)]);
        assert_eq!(
            f[0].req,
            Request::CreateSession {
                timeout_ms: TIMEOUT_MS
            }
        );
        assert_eq!(s.local_session_count(), 0);
    }

    #[test]
    fn the_leader_serves_a_learners_local_session_but_no_ephemeral() {
        let mut s = member(LEADER, true);
        let remote = SessionTracker::initial_id(T0, 2);
        let fwd = |cxid: i32, req: Request| Input::Remote {
            from: 2,
            fwd: crate::server::Forwarded {
                session_id: remote,
                cxid,
                opcode: op::CREATE,
                req,
                body: Bytes::new(),
                ids: Vec::new(),
            },
        };
        s.handle(T0, fwd(1, create("/p", 0)));
        s.handle(T0, fwd(2, create("/e", 1)));
        let t = txns(&mut s);
        assert_eq!(t.len(), 2, "{t:?}");
        assert!(matches!(t[0].op, TxnOp::Create { .. }));
        assert!(matches!(t[1].op, TxnOp::Error(ErrorCode::SessionExpired)));
        assert!(s.sessions.get(remote).is_none(), "not made global");
    }
}

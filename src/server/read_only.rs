//! The state machine as a read-only server (issue 18 part 2): what an ensemble member
//! that has lost its quorum does once the runtime gives it [`Role::ReadOnly`], as
//! ZooKeeper 3.8's ReadOnlyZooKeeperServer and ReadOnlyRequestProcessor do. Which
//! member turns read-only, and when, is the replica's rule
//! ([`crate::member::replica`]); this file is what such a member answers.
//!
//! - Handshake (`ZooKeeperServer.processConnectRequest`): a client whose ConnectRequest
//!   lacks canBeReadOnly (or the readOnly byte altogether) is refused by closing its
//!   connection, before any other check; a client that has seen a newer zxid too. Every
//!   ConnectResponse says readOnly=true.
//! - Sessions are never global: a new one is local to this member (no txn, no zxid; its
//!   id minted from this member's id and the time the read-only server started, as a
//!   fresh `LocalSessionTracker` does) and is forgotten when the member leaves read-only
//!   mode. That is with `localSessionsEnabled`. Without it ZooKeeper 3.8 submits the
//!   createSession as a global request, which its ReadOnlyRequestProcessor refuses: the
//!   client gets a bare reply header (xid 0, NOTREADONLY) where it waits for a
//!   ConnectResponse, and no session. keel answers the same way (measured on a 3-member
//!   ZooKeeper 3.8 ensemble with `-Dreadonlymode.enabled=true`).
//! - Reconnects (`validateSession`, `reopenSession`): a global session (one in the
//!   replicated session table) is refused by closing the connection; a local one with
//!   ZooKeeper's derived password resumes; anything else is told it expired. Without
//!   local sessions every session with the derived password that is not global is
//!   accepted (ZooKeeper's LearnerSessionTracker.touchSession then always succeeds).
//! - Requests (`ReadOnlyRequestProcessor`): by opcode, sync, create, create2,
//!   createTTL, createContainer, delete, deleteContainer, setData, reconfig, setACL,
//!   multi and check get a reply header with NOTREADONLY and the last applied zxid;
//!   closeSession and createSession too unless the session is local; everything else
//!   is answered from the tree as on any member. A local session's closeSession is
//!   answered OK and its connection closed.
//! - Local sessions expire in tickTime buckets on this member (their LocalSessionTracker
//!   runs here); an expired one's connection is closed.

use super::{Role, Server};
use crate::import::passwd::session_passwd;
use crate::proto::opcode as op;
use crate::proto::ErrorCode;
use crate::watch::ConnId;
use jute::ConnectRequest;

/// The opcodes ZooKeeper's ReadOnlyRequestProcessor refuses with NOTREADONLY whatever
/// the session (closeSession and createSession are refused for global sessions only).
const REFUSED_OPCODES: &[i32] = &[
    op::SYNC,
    op::CREATE,
    op::CREATE2,
    op::CREATE_TTL,
    op::CREATE_CONTAINER,
    op::DELETE,
    op::DELETE_CONTAINER,
    op::SET_DATA,
    op::RECONFIG,
    op::SET_ACL,
    op::MULTI,
    op::CHECK,
];

/// What a read-only server does with one request of a session it serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ReadOnlyVerdict {
    /// Answered here already (refused, or a closeSession done): nothing more to do.
    Answered,
    /// A read: answer it as any member does.
    Serve,
}

impl Server {
    /// The handshake of a read-only server. Returns true when it answered it (every
    /// case but one of a client allowed in: that one goes on as on any member, see
    /// [`Server::read_only_session`]).
    pub(super) fn read_only_refuses(&mut self, conn: ConnId, req: &ConnectRequest) -> bool {
        let old_client = self.conns.get(&conn).is_some_and(|c| c.old_client);
        if req.read_only && !old_client {
            return false;
        }
        tracing::info!(
            conn,
            "Refusing session request for not-read-only client: this member is read-only"
        );
        self.close(conn);
        true
    }

    /// A read-only server's session for a handshake already checked (canBeReadOnly, its
    /// zxid not ahead); `timeout_ms` is clamped.
    pub(super) fn read_only_session(
        &mut self,
        conn: ConnId,
        req: &ConnectRequest,
        timeout_ms: i32,
    ) {
        if req.session_id == 0 {
            let id = self.local_sessions.next_session_id();
            if !self.settings.local_sessions_enabled {
                // ZooKeeper's createSession goes to its ReadOnlyRequestProcessor as a
                // global request and is refused there; the reply header is all the
                // client gets.
                tracing::info!(
                    conn,
                    session = format!("0x{id:x}"),
                    "read-only: createSession refused (NOTREADONLY) without localSessionsEnabled"
                );
                let packet =
                    super::reply::header_only(0, self.last_zxid, ErrorCode::NotReadOnly.code());
                self.send(conn, packet);
                return;
            }
            self.local_sessions
                .add(id, timeout_ms, session_passwd(id), self.now_ms);
            tracing::info!(
                session = format!("0x{id:x}"),
                timeout_ms,
                "read-only: local session created"
            );
            self.attach_session(conn, id);
            self.send_connect_response(conn, id, timeout_ms, session_passwd(id));
            return;
        }
        if self.sessions.get(req.session_id).is_some() {
            tracing::info!(
                conn,
                session = format!("0x{:x}", req.session_id),
                "Refusing global session reconnection in RO mode"
            );
            self.close(conn);
            return;
        }
        let passwd_ok = req.passwd[..] == session_passwd(req.session_id)[..];
        let known = if self.settings.local_sessions_enabled {
            self.local_sessions
                .touch(req.session_id, Some(timeout_ms), self.now_ms)
        } else {
            // No local session tracker: ZooKeeper's touch succeeds for any session.
            if self.local_sessions.get(req.session_id).is_none() {
                self.local_sessions.add(
                    req.session_id,
                    timeout_ms,
                    session_passwd(req.session_id),
                    self.now_ms,
                );
            }
            true
        };
        if !passwd_ok || !known {
            let why = "read-only: session expired or password wrong";
            return self.tell_expired(conn, req.session_id, why);
        }
        self.attach_session(conn, req.session_id);
        self.send_connect_response(
            conn,
            req.session_id,
            timeout_ms,
            session_passwd(req.session_id),
        );
    }

    /// A request of a session this read-only server serves, after its auth checks:
    /// touches the local session (a session gone closes the connection) and refuses
    /// what changes state.
    pub(super) fn read_only_request(
        &mut self,
        conn: ConnId,
        session_id: i64,
        xid: i32,
        opcode: i32,
    ) -> ReadOnlyVerdict {
        debug_assert_eq!(self.role, Role::ReadOnly);
        if !self.local_sessions.touch(session_id, None, self.now_ms) {
            self.close(conn);
            return ReadOnlyVerdict::Answered;
        }
        let local = self.settings.local_sessions_enabled;
        let refused = REFUSED_OPCODES.contains(&opcode)
            || opcode == op::CREATE_SESSION
            || (opcode == op::CLOSE_SESSION && !local);
        if refused {
            tracing::debug!(
                session = format!("0x{session_id:x}"),
                xid,
                op = op::short_name(opcode),
                "read-only: request refused (NOTREADONLY)"
            );
            let packet =
                super::reply::header_only(xid, self.last_zxid, ErrorCode::NotReadOnly.code());
            self.send(conn, packet);
            return ReadOnlyVerdict::Answered;
        }
        if opcode == op::CLOSE_SESSION {
            tracing::info!(
                session = format!("0x{session_id:x}"),
                "read-only: local session closed by client"
            );
            self.local_sessions.remove(session_id);
            self.send(conn, super::reply::header_only(xid, self.last_zxid, 0));
            self.drop_session_conn(session_id);
            self.close(conn);
            return ReadOnlyVerdict::Answered;
        }
        ReadOnlyVerdict::Serve
    }

    /// Closes the connections of local sessions past their deadline (their
    /// LocalSessionTracker expires them on this member).
    pub(super) fn expire_read_only_sessions(&mut self) {
        if !self.settings.local_sessions_enabled {
            return;
        }
        self.expire_local_sessions();
    }
}

//! Requests ZooKeeper answers before they reach the tree: unknown opcodes, records it
//! refuses ([`Request::Rejected`]), and createSession
//! sent again on a live session (the decoding is in `proto::wire`).

use super::txn::TxnOp;
use super::{reply, Origin, Server};
use crate::proto::{ErrorCode, Rejection, RejectionBody, Request};
use crate::watch::ConnId;
use bytes::BufMut;
use jute::{MultiHeader, Record, ReplyHeader};

impl Server {
    /// Answers a request that is not a txn and never reaches the tree: an unknown
    /// opcode (UNIMPLEMENTED with zxid -1, then the connection is closed, as
    /// ZooKeeper's UnimplementedRequestProcessor does), or a rejected read (its code, the last zxid, and the body ZooKeeper had begun).
    pub(super) fn answer_refused(&mut self, conn: ConnId, xid: i32, req: &Request) {
        let zxid = self.last_zxid;
        let packet = match req {
            Request::Unknown(opcode) => {
                tracing::info!(conn, xid, opcode, "unknown opcode; closing the connection");
                self.send(
                    conn,
                    reply::header_only(xid, -1, ErrorCode::Unimplemented.code()),
                );
                self.close(conn);
                return;
            }
            Request::Rejected(Rejection { code, body, .. }) => {
                if *code != ErrorCode::Ok {
                    tracing::info!(conn, xid, error = ?code, "request refused before the tree");
                }
                reply::frame(|b| {
                    ReplyHeader {
                        xid,
                        zxid,
                        err: code.code(),
                    }
                    .encode(b);
                    match body {
                        RejectionBody::Empty => {}
                        RejectionBody::MultiEnd => MultiHeader {
                            op_type: -1,
                            done: true,
                            err: -1,
                        }
                        .encode(b),
                        RejectionBody::NullString => b.put_i32(-1),
                    }
                })
            }
            _ => return,
        };
        self.send(conn, packet);
    }

    /// createSession (-10) as a request on a live session: ZooKeeper logs a
    /// createSession txn for the same session and, once it applies, sends the
    /// ConnectResponse again (the connection's negotiated timeout, the same password).
    /// The txn keeps the session's timeout and password, so the session is unchanged
    /// (ZooKeeper's txn carries the timeout from the body, which it only records).
    pub(super) fn create_session_again(&mut self, conn: ConnId, session_id: i64, xid: i32) {
        let Some(session) = self.sessions.get(session_id) else {
            return;
        };
        let (timeout_ms, passwd) = (session.timeout_ms, session.passwd);
        self.propose(
            session_id,
            xid,
            TxnOp::CreateSession { timeout_ms, passwd },
            Origin::Handshake { conn, timeout_ms },
        );
    }
}

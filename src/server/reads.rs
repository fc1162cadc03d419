//! Reads and session-local requests, answered from the applied tree in the session's
//! request order (ZooKeeper's FinalRequestProcessor for non-txn ops).

use super::reply;
use super::Server;
use crate::proto::opcode::{self as op, event, perm, state};
use crate::proto::request::MultiOp;
use crate::proto::{ErrorCode, Request};
use crate::tree::acl;
use crate::watch::{ConnId, Table, PERSISTENT, RECURSIVE, STANDARD};
use jute::codec::Encoder;
use jute::{
    Acl, ClientInfo, ErrorResponse, GetAclResponse, GetAllChildrenNumberResponse,
    GetChildren2Response, GetChildrenResponse, GetEphemeralsResponse, Id, MultiHeader, Record,
    ReplyHeader, SetWatches2, StatResponse, WhoAmIResponse,
};

impl Server {
    fn read_check(
        &self,
        p: &str,
        perm: i32,
        ids: &[Id],
    ) -> Result<crate::tree::ZnodeRef<'_>, ErrorCode> {
        let node = self.tree.get(p).ok_or(ErrorCode::NoNode)?;
        acl::check(self.tree.acl(node), perm, ids)?;
        Ok(node)
    }

    fn children_of(&self, p: &str, ids: &[Id]) -> Result<(Vec<String>, jute::Stat), ErrorCode> {
        let node = self.read_check(p, perm::READ, ids)?;
        Ok((
            self.tree.children(p).map(String::from).collect(),
            node.stat(),
        ))
    }

    /// A GetDataResponse body encoded straight from the znode (its data and Stat).
    fn encode_data(node: crate::tree::ZnodeRef<'_>, b: &mut bytes::BytesMut) {
        match node.data() {
            Some(data) => b.buffer(data),
            None => b.int(-1),
        }
        node.stat().encode(b);
    }

    /// Answers a read or session-local request.
    pub(super) fn read(
        &mut self,
        conn: ConnId,
        session_id: i64,
        xid: i32,
        opcode: i32,
        req: Request,
    ) {
        if let Request::CloseSession = req {
            // A local session's closeSession, queued behind the session's earlier
            // requests ([`super::local_sessions`]).
            return self.close_local_session(conn, session_id, xid);
        }
        let zxid = self.last_zxid;
        // Borrowed, not cloned: this runs for every read.
        let no_ids: [Id; 0] = [];
        let ids: &[Id] = match self.conns.get(&conn) {
            Some(c) => &c.identities,
            None => &no_ids,
        };
        let ok = |body: &dyn Fn(&mut bytes::BytesMut)| {
            reply::frame(|buf| {
                ReplyHeader { xid, zxid, err: 0 }.encode(buf);
                body(buf);
            })
        };
        // The code of an error reply, logged below with the request's path.
        let refused: std::cell::Cell<Option<ErrorCode>> = std::cell::Cell::new(None);
        let err = |code: ErrorCode| {
            refused.set(Some(code));
            reply::header_only(xid, zxid, code.code())
        };
        let packet = match &req {
            Request::Ping => reply::header_only(op::XID_PING, zxid, 0),
            Request::Auth(pkt) => {
                self.auth(conn, xid, pkt);
                return;
            }
            Request::SetWatches(w) => {
                self.set_watches(conn, w);
                // ZooKeeper answers with the request's own xid (normally -8).
                reply::header_only(xid, zxid, 0)
            }
            Request::Exists(r) => match self.tree.get(&r.path) {
                Some(node) => {
                    let stat = node.stat();
                    self.note_read_bytes(&r.path, 0);
                    if r.watch {
                        self.watches.add(Table::Data, &r.path, conn, STANDARD);
                    }
                    ok(&|b| StatResponse { stat: stat.clone() }.encode(b))
                }
                None => {
                    if r.watch {
                        self.watches.add(Table::Data, &r.path, conn, STANDARD);
                    }
                    // exists on a missing znode is an answer, not a refusal.
                    reply::header_only(xid, zxid, ErrorCode::NoNode.code())
                }
            },
            // The hottest read: the reply is encoded straight from the znode, without
            // an intermediate response record (whose data clone would share the buffer).
            Request::GetData(r) => match self.read_check(&r.path, perm::READ, ids) {
                Ok(node) => {
                    let packet = ok(&|b| Self::encode_data(node, b));
                    let data_bytes = node.data_len() as u64;
                    self.note_read_bytes(&r.path, data_bytes);
                    if r.watch {
                        self.watches.add(Table::Data, &r.path, conn, STANDARD);
                    }
                    packet
                }
                Err(code) => err(code),
            },
            Request::GetChildren(r) | Request::GetChildren2(r) => {
                match self.children_of(&r.path, ids) {
                    Ok((children, stat)) => {
                        let names_bytes = children.iter().map(|c| c.len() as u64).sum();
                        self.note_read_bytes(&r.path, names_bytes);
                        if r.watch {
                            self.watches.add(Table::Child, &r.path, conn, STANDARD);
                        }
                        if opcode == op::GET_CHILDREN {
                            let resp = GetChildrenResponse { children };
                            ok(&|b| resp.encode(b))
                        } else {
                            let resp = GetChildren2Response { children, stat };
                            ok(&|b| resp.encode(b))
                        }
                    }
                    Err(code) => err(code),
                }
            }
            Request::GetAcl(r) => match self.get_acl(&r.path, ids) {
                Ok(resp) => ok(&|b| resp.encode(b)),
                Err(code) => err(code),
            },
            Request::Sync(r) => ok(&|b| r.encode(b)),
            // Writes read as a multiRead: ZooKeeper's FinalRequestProcessor fails on the
            // first with the (empty) result list already begun, so the error reply
            // carries that list's end.
            Request::MultiRead(ops) if ops.first().is_some_and(|o| !o.is_read()) => {
                refused.set(Some(ErrorCode::MarshallingError));
                reply::frame(|b| {
                    ReplyHeader {
                        xid,
                        zxid,
                        err: ErrorCode::MarshallingError.code(),
                    }
                    .encode(b);
                    super::apply::end_multi(b);
                })
            }
            Request::MultiReadMalformed => err(ErrorCode::MarshallingError),
            Request::MultiRead(ops) => {
                let mut parts: Vec<(i32, Result<bytes::Bytes, ErrorCode>)> = Vec::new();
                // (path, bytes) of each op that read its znode, noted once `ids` (a
                // borrow of the connection) is no longer needed.
                let mut read_bytes: Vec<(&str, u64)> = Vec::with_capacity(ops.len());
                for o in ops {
                    match o {
                        MultiOp::GetChildren(p) => {
                            let r = self.children_of(&p.path, ids).map(|(children, _)| {
                                let names_bytes = children.iter().map(|c| c.len() as u64).sum();
                                read_bytes.push((&p.path, names_bytes));
                                let mut b = bytes::BytesMut::new();
                                GetChildrenResponse { children }.encode(&mut b);
                                b.freeze()
                            });
                            parts.push((op::GET_CHILDREN, r));
                        }
                        MultiOp::GetData(p) => {
                            let r = self.read_check(&p.path, perm::READ, ids).map(|node| {
                                read_bytes.push((&p.path, node.data_len() as u64));
                                let mut b = bytes::BytesMut::new();
                                Self::encode_data(node, &mut b);
                                b.freeze()
                            });
                            parts.push((op::GET_DATA, r));
                        }
                        // Never here: the decoder keeps one kind per multiRead.
                        _ => parts.push((op::ERROR, Err(ErrorCode::MarshallingError))),
                    }
                }
                for (path, bytes) in read_bytes {
                    self.note_read_bytes(path, bytes);
                }
                ok(&|b| {
                    for (t, r) in &parts {
                        match r {
                            Ok(body) => {
                                MultiHeader {
                                    op_type: *t,
                                    done: false,
                                    err: 0,
                                }
                                .encode(b);
                                b.extend_from_slice(body);
                            }
                            Err(code) => {
                                MultiHeader {
                                    op_type: op::ERROR,
                                    done: false,
                                    err: code.code(),
                                }
                                .encode(b);
                                ErrorResponse { err: code.code() }.encode(b);
                            }
                        }
                    }
                    super::apply::end_multi(b);
                })
            }
            Request::CheckWatches(r) | Request::RemoveWatches(r) => {
                let remove = opcode == op::REMOVE_WATCHES;
                match self.check_or_remove_watches(conn, &r.path, r.watcher_type, remove) {
                    Ok(()) => ok(&|_| {}),
                    Err(code) => err(code),
                }
            }
            Request::GetEphemerals(r) => {
                let prefix = &r.path;
                let ephemerals: Vec<String> = self
                    .tree
                    .ephemerals(session_id)
                    .filter(|p| prefix == "/" || p.starts_with(prefix.as_str()))
                    .cloned()
                    .collect();
                let resp = GetEphemeralsResponse { ephemerals };
                ok(&|b| resp.encode(b))
            }
            Request::GetAllChildrenNumber(r) => match self.read_check(&r.path, perm::READ, ids) {
                Ok(_) => {
                    let total_number = self.tree.descendant_count(&r.path) as i32;
                    ok(&|b| GetAllChildrenNumberResponse { total_number }.encode(b))
                }
                Err(code) => err(code),
            },
            // ZooKeeper 3.8 knows the modes PERSISTENT (0) and PERSISTENT_RECURSIVE (1);
            // WatcherMode.fromZooDef refuses any other, which answers MARSHALLINGERROR.
            Request::AddWatch(r) if matches!(r.mode, 0 | 1) => {
                self.watches.add_persistent(&r.path, conn, r.mode == 1);
                ok(&|b| ErrorResponse { err: 0 }.encode(b))
            }
            Request::AddWatch(_) => err(ErrorCode::MarshallingError),
            Request::WhoAmI => {
                // Every id, super included (ZooKeeper prints it with an empty user).
                let client_info: Vec<ClientInfo> = ids
                    .iter()
                    .map(|i| ClientInfo {
                        auth_scheme: i.scheme.clone(),
                        user: acl::user_name(i),
                    })
                    .collect();
                ok(&|b| {
                    WhoAmIResponse {
                        client_info: client_info.clone(),
                    }
                    .encode(b)
                })
            }
            Request::Sasl(token) => {
                self.sasl(conn, xid, token);
                return;
            }
            Request::SaslGssapi(step) => {
                self.sasl_gssapi(conn, xid, step.clone());
                return;
            }
            Request::Unknown(_) | Request::Rejected(_) => {
                self.answer_refused(conn, xid, &req);
                return;
            }
            // Writes never reach here; answer defensively rather than panic.
            _ => err(ErrorCode::Unimplemented),
        };
        if let Some(code) = refused.get() {
            tracing::info!(
                session = format!("0x{session_id:x}"),
                xid,
                op = op::short_name(opcode),
                path = req.path().unwrap_or(""),
                error = ?code,
                "request refused"
            );
        }
        self.send(conn, packet);
    }

    fn get_acl(&self, p: &str, ids: &[Id]) -> Result<GetAclResponse, ErrorCode> {
        let node = self.read_check(p, perm::READ | perm::ADMIN, ids)?;
        let node_acl = self.tree.acl(node);
        let acl: Vec<Acl> = if acl::check(node_acl, perm::ADMIN, ids).is_ok() {
            node_acl.to_vec()
        } else {
            // Without ADMIN a client does not see digest password hashes.
            node_acl
                .iter()
                .map(|a| {
                    let mut a = a.clone();
                    if a.id.scheme == "digest" {
                        let user = a.id.id.split(':').next().unwrap_or("").to_string();
                        a.id.id = format!("{user}:x");
                    }
                    a
                })
                .collect()
        };
        Ok(GetAclResponse {
            acl,
            stat: node.stat(),
        })
    }

    /// checkWatches/removeWatches (ZooKeeper 3.8's DataTree.containsWatcher and
    /// removeWatch). `watcher_type`: 1 Children (the child table), 2 Data (the data
    /// table), 3 Any (both); a watch of any mode in the table counts, so a persistent
    /// or recursive watch answers Children too. A removal takes the connection's whole
    /// entry in the table.
    ///
    /// Errors: MARSHALLINGERROR for any other type (3.8's WatcherType.fromInt knows no
    /// other; Persistent and PersistentRecursive came in 3.9), NOWATCHER when the
    /// connection holds no matching watch.
    fn check_or_remove_watches(
        &mut self,
        conn: ConnId,
        p: &str,
        watcher_type: i32,
        remove: bool,
    ) -> Result<(), ErrorCode> {
        let tables: &[Table] = match watcher_type {
            1 => &[Table::Child],
            2 => &[Table::Data],
            3 => &[Table::Child, Table::Data],
            _ => return Err(ErrorCode::MarshallingError),
        };
        let all = STANDARD | PERSISTENT | RECURSIVE;
        let mut found = false;
        for t in tables {
            if remove {
                found |= self.watches.remove(*t, p, conn, all);
            } else {
                found |= self.watches.contains(*t, p, conn, all);
            }
        }
        if found {
            Ok(())
        } else {
            Err(ErrorCode::NoWatcher)
        }
    }

    /// Re-registers a reconnecting client's watches; events it missed since
    /// `relative_zxid` fire at once (ZooKeeper's DataTree.setWatches).
    fn set_watches(&mut self, conn: ConnId, w: &SetWatches2) {
        let rel = w.relative_zxid;
        let mut events: Vec<(i32, String)> = Vec::new();
        for p in &w.data_watches {
            match self.tree.get(p) {
                None => events.push((event::NODE_DELETED, p.clone())),
                Some(n) if n.mzxid() > rel => events.push((event::NODE_DATA_CHANGED, p.clone())),
                Some(_) => self.watches.add(Table::Data, p, conn, STANDARD),
            }
        }
        for p in &w.exist_watches {
            match self.tree.get(p) {
                Some(_) => events.push((event::NODE_CREATED, p.clone())),
                None => self.watches.add(Table::Data, p, conn, STANDARD),
            }
        }
        for p in &w.child_watches {
            match self.tree.get(p) {
                None => events.push((event::NODE_DELETED, p.clone())),
                Some(n) if n.pzxid() > rel => {
                    events.push((event::NODE_CHILDREN_CHANGED, p.clone()))
                }
                Some(_) => self.watches.add(Table::Child, p, conn, STANDARD),
            }
        }
        for p in &w.persistent_watches {
            self.watches.add_persistent(p, conn, false);
        }
        for p in &w.persistent_recursive_watches {
            self.watches.add_persistent(p, conn, true);
        }
        for (t, p) in events {
            self.send(conn, reply::notification(t, state::SYNC_CONNECTED, &p));
        }
    }
}

//! The request pipeline over the state machine: handshake, prep, commit, apply, reads.
//!
//! [`Server`] is sans-I/O: the runtime (`net`) feeds it [`Input`]s stamped with the
//! current time and executes the [`Outbound`] actions it queues, per connection, in
//! order. Because one `Server` handles every input in turn, replies to a session leave
//! in request order and a watch event is queued before any reply that reflects it.
//!
//! Standalone is an ensemble of one: a write's txn commits as soon as prep made it.
//! Storage (durable txn log) and Zab slot in at [`Server::commit`].

pub mod apply;
pub mod prep;
pub mod reads;
pub mod reply;
pub mod txn;

use crate::proto::opcode as op;
use crate::proto::{ErrorCode, Request};
use crate::session::SessionTracker;
use crate::tree::{acl, DataTree};
use crate::watch::{ConnId, WatchManager};
use bytes::Bytes;
use jute::{ConnectRequest, ConnectResponse, Id};
use prep::{Prep, PrepSettings};
use rand::{rngs::StdRng, RngCore, SeedableRng};
use std::collections::HashMap;
use std::net::SocketAddr;
use txn::{Txn, TxnOp};

/// What the runtime tells the server.
#[derive(Debug)]
pub enum Input {
    /// A TCP connection was accepted.
    Connected { conn: ConnId, addr: SocketAddr },
    /// The connection's first packet.
    Handshake { conn: ConnId, req: ConnectRequest },
    /// A request after the handshake.
    Request {
        conn: ConnId,
        xid: i32,
        opcode: i32,
        req: Request,
    },
    /// The connection is gone (closed by the client, an error, or a Close we asked for).
    Disconnected { conn: ConnId },
    /// Time passed: expire sessions, reap containers and TTL nodes.
    Tick,
}

/// What the server asks the runtime to do on one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outbound {
    /// Write this framed packet.
    Packet(Bytes),
    /// Flush what was queued, then close the connection.
    Close,
}

/// Settings from zoo.cfg the state machine uses.
#[derive(Debug, Clone)]
pub struct Settings {
    /// tickTime, ms: the session expiry bucket width.
    pub tick_ms: u32,
    /// Session timeout bounds, ms.
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    /// `user:base64(sha1(user:password))` of the super user, if any.
    pub super_digest: Option<String>,
    pub prep: PrepSettings,
    /// How often containers and TTL nodes are reaped, ms.
    pub container_check_interval_ms: u64,
    /// `reconfigEnabled` from zoo.cfg.
    pub reconfig_enabled: bool,
}

/// Per-connection figures for `cons` and `stat`.
#[derive(Debug, Clone, Default)]
pub struct ConnStats {
    pub received: u64,
    pub sent: u64,
    pub last_op: &'static str,
    pub last_cxid: i32,
    pub last_zxid: i64,
    pub established_ms: i64,
    pub last_response_ms: i64,
}

/// A connection as the state machine knows it.
#[derive(Debug)]
pub struct Conn {
    pub addr: SocketAddr,
    /// 0 until the handshake completes.
    pub session_id: i64,
    /// `ip:<addr>` plus identities added by auth packets.
    pub identities: Vec<Id>,
    pub stats: ConnStats,
}

/// Server-wide figures for the four-letter words.
#[derive(Debug, Clone, Default)]
pub struct ServerStats {
    pub packets_received: u64,
    pub packets_sent: u64,
    pub started_ms: i64,
}

/// The state machine of a standalone server.
pub struct Server {
    pub settings: Settings,
    pub tree: DataTree,
    pub sessions: SessionTracker,
    pub watches: WatchManager,
    pub conns: HashMap<ConnId, Conn>,
    /// Which connection each session is attached to.
    session_conn: HashMap<i64, ConnId>,
    /// The last committed (and applied) zxid.
    pub last_zxid: i64,
    pub stats: ServerStats,
    rng: StdRng,
    now_ms: i64,
    next_reap_ms: i64,
    outbox: Vec<(ConnId, Outbound)>,
}

impl Server {
    /// A server with an empty tree whose zxids start at `epoch << 32`. `now_ms` is the
    /// start time (it seeds session ids) and `seed` the randomness for session passwords.
    pub fn new(settings: Settings, epoch: u32, now_ms: i64, seed: u64) -> Server {
        let tick = settings.tick_ms;
        let reap = settings.container_check_interval_ms as i64;
        Server {
            settings,
            tree: DataTree::new(),
            sessions: SessionTracker::new(tick, SessionTracker::initial_id(now_ms, 0)),
            watches: WatchManager::default(),
            conns: HashMap::new(),
            session_conn: HashMap::new(),
            last_zxid: (epoch as i64) << 32,
            stats: ServerStats {
                started_ms: now_ms,
                ..ServerStats::default()
            },
            rng: StdRng::seed_from_u64(seed),
            now_ms,
            next_reap_ms: now_ms + reap,
            outbox: Vec::new(),
        }
    }

    /// Takes the queued actions, in order.
    pub fn drain_outbox(&mut self) -> Vec<(ConnId, Outbound)> {
        std::mem::take(&mut self.outbox)
    }

    /// Current time as last given.
    pub fn now_ms(&self) -> i64 {
        self.now_ms
    }

    pub(crate) fn send(&mut self, conn: ConnId, packet: Bytes) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.stats.sent += 1;
            self.stats.packets_sent += 1;
            self.outbox.push((conn, Outbound::Packet(packet)));
        }
    }

    fn close(&mut self, conn: ConnId) {
        self.outbox.push((conn, Outbound::Close));
    }

    /// Handles one input at time `now_ms`.
    pub fn handle(&mut self, now_ms: i64, input: Input) {
        self.now_ms = now_ms;
        match input {
            Input::Connected { conn, addr } => {
                let ip = addr.ip().to_canonical().to_string();
                self.conns.insert(
                    conn,
                    Conn {
                        addr,
                        session_id: 0,
                        identities: vec![Id {
                            scheme: "ip".into(),
                            id: ip,
                        }],
                        stats: ConnStats {
                            established_ms: now_ms,
                            ..ConnStats::default()
                        },
                    },
                );
            }
            Input::Handshake { conn, req } => self.handshake(conn, req),
            Input::Request {
                conn,
                xid,
                opcode,
                req,
            } => self.request(conn, xid, opcode, req),
            Input::Disconnected { conn } => {
                if let Some(c) = self.conns.remove(&conn) {
                    if self.session_conn.get(&c.session_id) == Some(&conn) {
                        self.session_conn.remove(&c.session_id);
                    }
                }
                self.watches.remove_conn(conn);
            }
            Input::Tick => self.tick(),
        }
    }

    fn handshake(&mut self, conn: ConnId, req: ConnectRequest) {
        self.stats.packets_received += 1;
        if !self.conns.contains_key(&conn) {
            return;
        }
        if req.last_zxid_seen > self.last_zxid {
            // The client has seen a newer state than ours: it must look elsewhere.
            tracing::info!(
                conn,
                client_zxid = req.last_zxid_seen,
                our_zxid = self.last_zxid,
                "refusing session: client has seen a newer zxid"
            );
            self.close(conn);
            return;
        }
        let timeout_ms = req.time_out_ms.clamp(
            self.settings.min_session_timeout_ms,
            self.settings.max_session_timeout_ms,
        );
        if req.session_id == 0 {
            let id = self.sessions.next_session_id();
            let mut passwd = [0u8; 16];
            self.rng.fill_bytes(&mut passwd);
            self.commit(Txn {
                zxid: self.last_zxid + 1,
                time_ms: self.now_ms,
                session_id: id,
                cxid: 0,
                op: TxnOp::CreateSession { timeout_ms, passwd },
            });
            tracing::info!(session = format!("0x{id:x}"), timeout_ms, "session created");
            self.attach(conn, id, timeout_ms, passwd);
            return;
        }
        let valid = self
            .sessions
            .get(req.session_id)
            .is_some_and(|s| !s.closing && s.passwd[..] == req.passwd[..]);
        if !valid {
            tracing::info!(
                session = format!("0x{:x}", req.session_id),
                "session expired or password wrong; telling the client it expired"
            );
            let resp = ConnectResponse {
                protocol_version: 0,
                time_out_ms: 0,
                session_id: 0,
                passwd: Bytes::from_static(&[0u8; 16]),
                read_only: false,
            };
            self.send(conn, reply::frame(|b| jute::Record::encode(&resp, b)));
            self.close(conn);
            return;
        }
        self.sessions
            .touch(req.session_id, Some(timeout_ms), self.now_ms);
        // A session lives on one connection: the old one (if still open) is closed.
        if let Some(old) = self.session_conn.get(&req.session_id).copied() {
            if old != conn {
                self.close(old);
                if let Some(c) = self.conns.get_mut(&old) {
                    c.session_id = 0;
                }
                self.watches.remove_conn(old);
            }
        }
        let passwd = self
            .sessions
            .get(req.session_id)
            .map(|s| s.passwd)
            .unwrap_or_default();
        self.attach(conn, req.session_id, timeout_ms, passwd);
    }

    fn attach(&mut self, conn: ConnId, session_id: i64, timeout_ms: i32, passwd: [u8; 16]) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.session_id = session_id;
        }
        self.session_conn.insert(session_id, conn);
        let resp = ConnectResponse {
            protocol_version: 0,
            time_out_ms: timeout_ms,
            session_id,
            passwd: Bytes::copy_from_slice(&passwd),
            read_only: false,
        };
        self.send(conn, reply::frame(|b| jute::Record::encode(&resp, b)));
    }

    fn request(&mut self, conn: ConnId, xid: i32, opcode: i32, req: Request) {
        self.stats.packets_received += 1;
        let now = self.now_ms;
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.stats.received += 1;
        c.stats.last_op = op::short_name(opcode);
        c.stats.last_cxid = xid;
        c.stats.last_response_ms = now;
        let session_id = c.session_id;
        if session_id == 0 {
            self.close(conn);
            return;
        }
        if !self.sessions.touch(session_id, None, now) {
            self.send(
                conn,
                reply::header_only(xid, self.last_zxid, ErrorCode::SessionExpired.code()),
            );
            self.close(conn);
            return;
        }
        if req.is_write() {
            self.write(conn, session_id, xid, req);
        } else {
            self.read(conn, session_id, xid, opcode, req);
        }
        let last = self.last_zxid;
        if let Some(c) = self.conns.get_mut(&conn) {
            c.stats.last_zxid = last;
        }
    }

    fn write(&mut self, conn: ConnId, session_id: i64, xid: i32, req: Request) {
        let zxid = self.last_zxid + 1;
        let identities = self
            .conns
            .get(&conn)
            .map(|c| c.identities.clone())
            .unwrap_or_default();
        let op = {
            let mut p = Prep::new(&self.tree, &self.settings.prep, &identities, session_id);
            let r = match &req {
                Request::Create(c) => p.create(c),
                Request::Delete(d) => p.delete(&d.path, d.version),
                Request::DeleteContainer(d) => p.delete_container(&d.path),
                Request::SetData(s) => p.set_data(&s.path, &s.data, s.version),
                Request::SetAcl(s) => p.set_acl(&s.path, &s.acl, s.version),
                Request::Check(c) => p.check(&c.path, c.version),
                Request::Multi(ops) => Ok(p.multi(ops)),
                // Standalone ZooKeeper answers UNIMPLEMENTED when reconfig is enabled
                // (no ensemble to change) and RECONFIGDISABLED otherwise.
                Request::Reconfig(_) if self.settings.reconfig_enabled => {
                    Err(ErrorCode::Unimplemented)
                }
                Request::Reconfig(_) => Err(ErrorCode::ReconfigDisabled),
                Request::CloseSession => Ok(TxnOp::CloseSession {
                    ephemerals: self.tree.ephemerals(session_id).cloned().collect(),
                }),
                _ => Err(ErrorCode::Unimplemented),
            };
            r.unwrap_or_else(TxnOp::Error)
        };
        if matches!(op, TxnOp::CloseSession { .. }) {
            self.sessions.set_closing(session_id);
        }
        let closing = matches!(op, TxnOp::CloseSession { .. });
        let result = self.commit(Txn {
            zxid,
            time_ms: self.now_ms,
            session_id,
            cxid: xid,
            op,
        });
        let packet = apply::encode_result(xid, zxid, &result);
        self.send(conn, packet);
        if closing {
            tracing::info!(
                session = format!("0x{session_id:x}"),
                "session closed by client"
            );
            self.session_conn.remove(&session_id);
            if let Some(c) = self.conns.get_mut(&conn) {
                c.session_id = 0;
            }
            self.close(conn);
        }
    }

    /// Commits a txn: in standalone the quorum is this server alone, so the txn is
    /// applied at once. Returns what applying it produced.
    pub fn commit(&mut self, txn: Txn) -> apply::OpResult {
        debug_assert_eq!(txn.zxid, self.last_zxid + 1, "zxids are consecutive");
        self.last_zxid = txn.zxid;
        self.apply(&txn)
    }

    fn tick(&mut self) {
        for id in self.sessions.expire(self.now_ms) {
            tracing::info!(session = format!("0x{id:x}"), "session expired");
            let ephemerals = self.tree.ephemerals(id).cloned().collect();
            self.commit(Txn {
                zxid: self.last_zxid + 1,
                time_ms: self.now_ms,
                session_id: id,
                cxid: 0,
                op: TxnOp::CloseSession { ephemerals },
            });
            if let Some(conn) = self.session_conn.remove(&id) {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.session_id = 0;
                }
                self.close(conn);
            }
        }
        if self.now_ms >= self.next_reap_ms {
            self.next_reap_ms = self.now_ms + self.settings.container_check_interval_ms as i64;
            self.reap_containers();
        }
    }

    /// Deletes empty containers that once had children, and TTL nodes that are empty
    /// and unmodified for longer than their TTL (ZooKeeper's ContainerManager).
    fn reap_containers(&mut self) {
        let mut candidates = Vec::new();
        for p in self.tree.containers() {
            if let Some(n) = self.tree.get(p) {
                if n.children.is_empty() && n.child_creates > 0 {
                    candidates.push(p.clone());
                }
            }
        }
        for p in self.tree.ttls() {
            if let Some(n) = self.tree.get(p) {
                if let crate::tree::Owner::Ttl(ttl) = n.owner() {
                    if n.children.is_empty() && ttl != 0 && self.now_ms - n.mtime > ttl {
                        candidates.push(p.clone());
                    }
                }
            }
        }
        for p in candidates {
            let no_ids: [Id; 0] = [];
            let op = Prep::new(&self.tree, &self.settings.prep, &no_ids, 0)
                .delete_container(&p)
                .unwrap_or_else(TxnOp::Error);
            self.commit(Txn {
                zxid: self.last_zxid + 1,
                time_ms: self.now_ms,
                session_id: 0,
                cxid: 0,
                op,
            });
        }
    }

    /// Handles an auth packet (xid -4): digest adds `digest:user:hash` (and `super`
    /// when it matches the super digest); anything else fails and closes the
    /// connection, as ZooKeeper does.
    fn auth(&mut self, conn: ConnId, pkt: &jute::AuthPacket) {
        let ok = pkt.scheme == "digest" && std::str::from_utf8(&pkt.auth).is_ok();
        if !ok {
            tracing::info!(conn, scheme = %pkt.scheme, "authentication failed");
            self.send(
                conn,
                reply::header_only(op::XID_AUTH, 0, ErrorCode::AuthFailed.code()),
            );
            self.close(conn);
            return;
        }
        let text = std::str::from_utf8(&pkt.auth).unwrap_or_default();
        let digest = acl::digest_id(text);
        let is_super = self.settings.super_digest.as_deref() == Some(digest.as_str());
        if let Some(c) = self.conns.get_mut(&conn) {
            let mut add = |id: Id| {
                if !c.identities.contains(&id) {
                    c.identities.push(id);
                }
            };
            if is_super {
                add(Id {
                    scheme: "super".into(),
                    id: String::new(),
                });
            }
            add(Id {
                scheme: "digest".into(),
                id: digest,
            });
        }
        self.send(conn, reply::header_only(op::XID_AUTH, 0, 0));
    }
}

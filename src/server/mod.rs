//! The request pipeline over the state machine: handshake, prep, commit, apply, reads.
//!
//! [`Server`] is sans-I/O: the runtime (`net`) feeds it [`Input`]s stamped with the
//! current time and executes the [`Outbound`] actions it queues, per connection, in
//! order. Because one `Server` handles every input in turn, replies to a session leave
//! in request order and a watch event is queued before any reply that reflects it.
//!
//! A write is prepped into a [`Txn`] at once (checked against the tree plus every
//! earlier txn not yet applied), then proposed: with `durable` set it waits as a
//! [`StorageOp::Append`] until the runtime reports it durable ([`Input::Durable`]); only
//! then is it applied and answered. Standalone is an ensemble of one, so durable means
//! committed. A session's reads wait behind its own earlier writes, so every reply
//! reflects all of the session's previous requests (ZooKeeper's ordering guarantee).
//! After a number of txns drawn from `snap_count / 2 + 1 ..= 2 * (snap_count / 2)` (anew
//! for each, as ZooKeeper draws its `randRoll`) a fuzzy snapshot is written in steps
//! between inputs.

pub mod apply;
pub mod local_sessions;
pub mod member;
pub mod prep;
pub mod read_only;
pub mod reads;
pub mod reconfig;
pub mod recovery;
mod refused;
pub mod reply;
mod sasl;
pub mod stats;
pub mod txn;

use crate::proto::opcode as op;
use crate::proto::{ErrorCode, Request};
use crate::session::SessionTracker;
use crate::tree::{acl, DataTree};
use crate::watch::{ConnId, WatchManager};
use bytes::Bytes;
use jute::{ConnectRequest, ConnectResponse, Id};
pub use member::{Forwarded, Revalidate, RevalidateReply, Role};
use prep::{Prep, PrepSettings};
use rand::{rngs::StdRng, Rng, RngCore, SeedableRng};
use rustc_hash::FxHashMap as HashMap;
use std::collections::VecDeque;
use std::net::SocketAddr;
use txn::{Txn, TxnOp};

/// What the runtime tells the server.
#[derive(Debug)]
pub enum Input {
    /// A TCP connection was accepted.
    Connected { conn: ConnId, addr: SocketAddr },
    /// The connection's ConnectRequest (the next input) lacks the trailing readOnly
    /// byte, as from clients before ZooKeeper 3.4: its ConnectResponse lacks it too.
    OldClient { conn: ConnId },
    /// The transport vouched for identities of the connection before its first packet:
    /// a TLS client certificate gives `x509:<subject DN>` (and `super:<DN>` for the x509
    /// super user), as ZooKeeper's X509AuthenticationProvider adds them when the TLS
    /// handshake completes. They hold for the connection's lifetime.
    Authenticated { conn: ConnId, ids: Vec<Id> },
    /// The connection's first packet.
    Handshake { conn: ConnId, req: ConnectRequest },
    /// A request after the handshake. `body` is the request record's bytes as the
    /// client sent them (after the RequestHeader), which a learner forwards to the
    /// leader unchanged (ZooKeeper's REQUEST packet carries them, and a malformed
    /// record must reach the leader's prep as it came). Only an ensemble member needs
    /// it: net fills it with a slice of the frame then, and `Bytes::new()` standalone
    /// (a slice the core holds keeps the connection's read buffer from being reused).
    Request {
        conn: ConnId,
        xid: i32,
        opcode: i32,
        req: Request,
        body: Bytes,
    },
    /// The connection is gone (closed by the client, an error, or a Close we asked for).
    Disconnected { conn: ConnId },
    /// Bytes of whole client frames read, each with its 4-byte length prefix, the
    /// ConnectRequest's included: `zk_bytes_received_count` (ZooKeeper's
    /// `ServerCnxn.packetReceived`, called with `4 + length` for every frame read). The
    /// runtime sends one per batch of frames it reads.
    Received { bytes: u64 },
    /// Time passed: expire sessions, reap containers and TTL nodes.
    Tick,
    /// Every txn up to this zxid is committed: standalone, durable in the txn log; on a
    /// leader, Zab's commit (a quorum has it durable). The server's own proposals up to
    /// it apply.
    Durable { zxid: i64 },
    /// Play this part from now on (see [`Role`]; the runtime follows Zab's role
    /// changes).
    Role(Role),
    /// Leader: learner `from` (its server id) forwarded its client's request.
    Remote { from: u64, fwd: Forwarded },
    /// Leader: learner `from` asks whether a session that reconnected to it is valid.
    Revalidate { from: u64, req: Revalidate },
    /// Learner: the leader's answer to a [`Revalidate`].
    RevalidateReply(RevalidateReply),
    /// Learner: the leader's SYNC packet: the oldest sync forwarded is answered.
    SyncReply,
    /// Leader: sessions a learner's clients touched (from its PING reply).
    Touched { sessions: Vec<i64> },
    /// A txn Zab committed that this server did not propose itself (a learner's view
    /// of every write; on a new leader, txns of the old epoch committed at sync): apply
    /// it in zxid order and answer the client that waits for it here.
    Apply(Txn),
}

/// What the server asks the storage layer to do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorageOp {
    /// Log this txn; report [`Input::Durable`] once it (and all before it) are synced.
    Append(Txn),
    /// Store chunk `index` of the snapshot begun at `zxid`.
    SnapshotChunk {
        zxid: i64,
        index: u32,
        data: Vec<u8>,
    },
    /// The snapshot begun at `zxid` is complete with `chunks` chunks.
    SnapshotDone { zxid: i64, chunks: u32 },
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
    /// Whether txns wait for [`Input::Durable`] before they apply (false: apply at once,
    /// for tests that drive the state machine without storage).
    pub durable: bool,
    /// `snapCount` (0 = never): each snapshot comes after a number of txns drawn from
    /// `snap_count / 2 + 1 ..= 2 * (snap_count / 2)` ([`snapshot_after`]).
    pub snap_count: u64,
    /// The SASL server's users, from the JAAS file's server section (`None`: SASL is
    /// off, and a sasl request gets OK with a null token, as ZooKeeper without a SASL
    /// login answers).
    pub sasl: Option<std::sync::Arc<crate::sasl::SaslServerConfig>>,
    /// `zookeeper.allowSaslFailedClients`: a failed SASL exchange keeps its connection
    /// (unless SASL is required).
    pub allow_sasl_failed_clients: bool,
    /// The schemes every request but auth and sasl needs an identity of
    /// (`sessionRequireClientSASLAuth`, `enforce.auth.*`); `None`: not enforced.
    pub enforced_schemes: Option<Vec<String>>,
    /// `localSessionsEnabled`: on a leader or learner a new session is local to this
    /// member ([`local_sessions`]); in read-only mode too (without it ZooKeeper 3.8's
    /// read-only server refuses new sessions; see [`read_only`]).
    pub local_sessions_enabled: bool,
    /// `localSessionsUpgradingEnabled`: a local session that creates an ephemeral is
    /// made global first; without it that create fails with EPHEMERALONLOCALSESSION.
    pub local_sessions_upgrading_enabled: bool,
}

impl Default for Settings {
    /// ZooKeeper's defaults: tickTime 2000 (session timeouts 4-40 s), a container check
    /// every minute, txns applied once durable, every optional feature off (no super
    /// user, no SASL, no quotas enforced, no extended types, no reconfig, no local
    /// sessions).
    fn default() -> Settings {
        Settings {
            tick_ms: 2000,
            min_session_timeout_ms: 4000,
            max_session_timeout_ms: 40000,
            super_digest: None,
            prep: prep::PrepSettings {
                extended_types: false,
                enforce_quota: false,
                sasl_acls: false,
            },
            container_check_interval_ms: 60_000,
            reconfig_enabled: false,
            durable: true,
            snap_count: 0,
            sasl: None,
            allow_sasl_failed_clients: false,
            enforced_schemes: None,
            local_sessions_enabled: false,
            local_sessions_upgrading_enabled: false,
        }
    }
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
    /// Latencies of this connection's answered requests.
    pub latency: stats::ConnLatency,
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
    /// Its ConnectRequest had no readOnly byte (see [`Input::OldClient`]).
    pub old_client: bool,
    /// This connection's requests not yet answered, in arrival order: its proposed
    /// writes (by zxid) and the reads queued behind them.
    inflight: VecDeque<Queued>,
    /// The connection's DIGEST-MD5 exchange, from its first sasl request on.
    sasl: Option<crate::sasl::digest_md5::DigestMd5Server>,
    /// A closeSession from this connection was accepted: later requests are dropped.
    /// Kept here as well as in the session table because a session whose createSession
    /// is still on its way to disk is not in the table yet.
    closing: bool,
}

/// An unanswered request of one connection.
#[derive(Debug)]
enum Queued {
    /// A proposed txn; its reply goes out when it applies.
    Txn(i64),
    /// A write a learner forwarded to the leader; answered when its txn applies.
    Forwarded,
    /// A read waiting for the writes before it.
    Read {
        xid: i32,
        opcode: i32,
        req: Request,
        /// When it arrived, for its latency.
        arrived_ms: i64,
    },
}

/// Who waits for a proposed txn.
#[derive(Debug, Clone, Copy)]
enum Origin {
    /// Nobody (expiry, container reaping).
    Server,
    /// A client request: reply with this xid.
    Reply { conn: ConnId, xid: i32 },
    /// A handshake: send the ConnectResponse.
    Handshake { conn: ConnId, timeout_ms: i32 },
    /// closeSession: reply, then close the connection.
    Close { conn: ConnId, xid: i32 },
    /// A learner's forwarded request answered with this error whatever its txn: an
    /// ephemeral create of a local session with upgrading off (the follower's own
    /// request carries EPHEMERALONLOCALSESSION, see [`local_sessions`]).
    Refused {
        conn: ConnId,
        xid: i32,
        code: ErrorCode,
    },
}

/// A snapshot being written in steps.
#[derive(Debug)]
struct SnapshotProgress {
    zxid: i64,
    /// Last path written; `None` before the first node chunk.
    cursor: Option<String>,
    next_index: u32,
}

/// Largest snapshot chunk, bytes; also bounds the work one snapshot step does, which
/// requests waiting on the core wait behind. 128 KiB was tried: the set phase's p999
/// during snapshots of 10,000 znodes was a little lower, but a snapshot of 1,000,000
/// znodes took 1.9–2.2 s instead of 1.1–1.7 s (RocksDB's per-write cost), and the
/// memory it holds while running (about 30 MB) lasted that much longer.
const SNAPSHOT_CHUNK_BYTES: usize = 1 << 20;

/// Server-wide figures for the four-letter words.
#[derive(Debug, Clone, Default)]
pub struct ServerStats {
    pub packets_received: u64,
    pub packets_sent: u64,
    pub started_ms: i64,
    /// Latencies, sizes, storage times (`stats`).
    pub metrics: stats::Metrics,
}

/// The state machine of a standalone server.
pub struct Server {
    pub settings: Settings,
    pub tree: DataTree,
    pub sessions: SessionTracker,
    pub watches: WatchManager,
    pub conns: rustc_hash::FxHashMap<ConnId, Conn>,
    /// Which connection each session is attached to.
    session_conn: rustc_hash::FxHashMap<i64, ConnId>,
    /// The last committed (and applied) zxid.
    pub last_zxid: i64,
    pub stats: ServerStats,
    rng: StdRng,
    now_ms: i64,
    next_reap_ms: i64,
    outbox: Vec<(ConnId, Outbound)>,
    storage_ops: Vec<StorageOp>,
    /// The last zxid handed out (>= `last_zxid`; more while txns wait to be durable).
    proposed_zxid: i64,
    /// Proposed txns not yet applied, in zxid order.
    pending: VecDeque<(Txn, Origin)>,
    /// Their effects, for prep.
    outstanding: prep::Outstanding,
    /// The paths each proposed txn recorded in `outstanding`, in zxid order, so
    /// applying a txn clears just its own entries instead of scanning them all.
    outstanding_paths: VecDeque<(i64, Vec<String>)>,
    txns_since_snapshot: u64,
    /// The next snapshot starts once `txns_since_snapshot` reaches this
    /// ([`snapshot_after`]).
    snapshot_after: u64,
    snapshot: Option<SnapshotProgress>,
    /// Set while recovery replays the log: apply is lenient (see `recovery`).
    replaying: bool,
    /// Committed txns up to this zxid apply leniently, as in recovery: an ensemble
    /// member's txns logged after its snapshot before it started, which the leader
    /// commits once it has synced. The snapshot may be ZooKeeper's, which is fuzzy
    /// (written while txns were applied), so some of those txns are already in its
    /// tree; ZooKeeper replays them leniently too (FileTxnSnapLog.processTransaction).
    lenient_upto: i64,
    /// The part this server plays in its ensemble.
    role: Role,
    /// Learner: requests for the leader, in order.
    forwards: Vec<Forwarded>,
    /// Learner: who waits for the txn of each forwarded request.
    awaiting: HashMap<member::AwaitKey, Origin>,
    /// Learner: new sessions whose createSession is forwarded: connection, timeout.
    awaiting_sessions: HashMap<i64, (ConnId, i32)>,
    /// Learner: sessions touched since the leader was last told.
    touched: rustc_hash::FxHashSet<i64>,
    /// Leader: syncs waiting for the txns proposed before them, by that last zxid.
    syncs: VecDeque<(i64, member::SyncWaiter)>,
    /// Leader: learners owed a SYNC packet, for the runtime.
    sync_replies: Vec<u64>,
    /// Learner: forwarded syncs, oldest first: connection, session, xid, request.
    awaiting_syncs: VecDeque<(ConnId, i64, i32, jute::PathRequest)>,
    /// This server's id (`myid`; 0 standalone).
    my_sid: u64,
    /// Leader: the server id each session's requests must come through.
    session_owner: HashMap<i64, u64>,
    /// Learner: revalidations for the leader.
    revalidations: Vec<Revalidate>,
    /// Leader: answers to revalidations, with the learner each goes to.
    revalidate_replies: Vec<(u64, RevalidateReply)>,
    /// Learner: reconnects waiting for the leader's revalidation: connection, timeout.
    awaiting_revalidations: HashMap<i64, (ConnId, i32)>,
    /// Local sessions: this member's own, never in the replicated table (see
    /// [`local_sessions`] and, in read-only mode, [`read_only`]); rebuilt at each role
    /// change. Bounded by the connections (one session each, until it expires).
    local_sessions: SessionTracker,
    /// Local sessions being upgraded: their createSession is proposed (leader) or
    /// forwarded (learner) and not yet applied; they count as global meanwhile. Bounded
    /// by the local sessions.
    upgrading: rustc_hash::FxHashSet<i64>,
    /// Leader: what prepping a reconfig needs from the Zab core; `None` standalone and
    /// on other members, where a reconfig gets UNIMPLEMENTED (or RECONFIGDISABLED).
    reconfig: Option<reconfig::ReconfigContext>,
}

/// How many txns the next snapshot comes after: ZooKeeper's SyncRequestProcessor rule,
/// `logCount > snapCount / 2 + randRoll` with `randRoll` drawn from `0 .. snapCount / 2`
/// anew after each snapshot, so between `snap_count / 2 + 1` and `2 * (snap_count / 2)`
/// (just `snap_count` when that is 0 or 1, which zoo.cfg never gives: ZooKeeper and
/// keel's config raise a `snapCount` below 2 to 2). Why not every `snap_count` txns
/// exactly: every member applies the same txns, so all of them would write their
/// snapshots at once, together pausing the ensemble's disks and CPUs (ZooKeeper's reason
/// for the roll).
fn snapshot_after(snap_count: u64, rng: &mut StdRng) -> u64 {
    let half = snap_count / 2;
    if half == 0 {
        return snap_count;
    }
    half + 1 + rng.gen_range(0..half)
}

impl Server {
    /// A server with an empty tree whose zxids start at `epoch << 32`. `now_ms` is the
    /// start time (it seeds session ids) and `seed` the randomness for session passwords.
    pub fn new(settings: Settings, epoch: u32, now_ms: i64, seed: u64) -> Server {
        let tick = settings.tick_ms;
        let reap = settings.container_check_interval_ms as i64;
        let mut rng = StdRng::seed_from_u64(seed);
        let snapshot_after = snapshot_after(settings.snap_count, &mut rng);
        Server {
            settings,
            tree: DataTree::new(),
            sessions: SessionTracker::new(tick, SessionTracker::initial_id(now_ms, 0)),
            watches: WatchManager::default(),
            conns: Default::default(),
            session_conn: Default::default(),
            last_zxid: (epoch as i64) << 32,
            stats: ServerStats {
                started_ms: now_ms,
                ..ServerStats::default()
            },
            rng,
            now_ms,
            next_reap_ms: now_ms + reap,
            outbox: Vec::new(),
            storage_ops: Vec::new(),
            proposed_zxid: (epoch as i64) << 32,
            pending: VecDeque::new(),
            outstanding: HashMap::default(),
            outstanding_paths: VecDeque::new(),
            txns_since_snapshot: 0,
            snapshot_after,
            snapshot: None,
            replaying: false,
            lenient_upto: 0,
            role: Role::Standalone,
            forwards: Vec::new(),
            awaiting: HashMap::default(),
            awaiting_sessions: HashMap::default(),
            touched: Default::default(),
            syncs: VecDeque::new(),
            sync_replies: Vec::new(),
            awaiting_syncs: VecDeque::new(),
            my_sid: 0,
            session_owner: HashMap::default(),
            revalidations: Vec::new(),
            revalidate_replies: Vec::new(),
            awaiting_revalidations: HashMap::default(),
            local_sessions: SessionTracker::new(tick, 0),
            upgrading: Default::default(),
            reconfig: None,
        }
    }

    /// Sets what prepping a reconfig request needs (see [`reconfig::ReconfigContext`]);
    /// the member runtime sets it on the leader whenever the Zab core's configs or
    /// synced followers change. `None` (standalone, or not the leader) keeps the
    /// answers of a server that cannot reconfigure: UNIMPLEMENTED when reconfigEnabled,
    /// RECONFIGDISABLED otherwise. With `Some`, a reconfig is prepped in ZooKeeper's
    /// order ([`reconfig`]) into a [`TxnOp::Reconfig`] versioned by the zxid its
    /// proposal gets (the context's `next_zxid` is not used here).
    pub fn set_reconfig_context(&mut self, ctx: Option<reconfig::ReconfigContext>) {
        self.reconfig = ctx;
    }

    /// Takes the queued storage operations, in order.
    pub fn drain_storage(&mut self) -> Vec<StorageOp> {
        std::mem::take(&mut self.storage_ops)
    }

    /// [`Server::drain_storage`] into `out` (appended): the queue keeps its room, so
    /// a member that drains it after every message allocates none for it.
    pub fn drain_storage_into(&mut self, out: &mut Vec<StorageOp>) {
        out.append(&mut self.storage_ops);
    }

    /// Whether a snapshot is being written (the runtime then calls
    /// [`Server::snapshot_step`] whenever it is idle).
    pub fn snapshot_in_progress(&self) -> bool {
        self.snapshot.is_some()
    }

    /// Number of txns proposed but not yet applied.
    pub fn pending_count(&self) -> usize {
        self.pending.len()
    }

    /// Takes the queued actions, in order.
    pub fn drain_outbox(&mut self) -> Vec<(ConnId, Outbound)> {
        std::mem::take(&mut self.outbox)
    }

    /// [`Server::drain_outbox`] as a draining iterator: the queue keeps its room (see
    /// [`Server::drain_storage_into`]).
    pub fn outbox_drain(&mut self) -> std::vec::Drain<'_, (ConnId, Outbound)> {
        self.outbox.drain(..)
    }

    /// Current time as last given.
    pub fn now_ms(&self) -> i64 {
        self.now_ms
    }

    /// The connection `session` is attached to, with its id, if it is connected here.
    pub fn session_connection(&self, session: i64) -> Option<(ConnId, &Conn)> {
        let id = *self.session_conn.get(&session)?;
        self.conns.get(&id).map(|c| (id, c))
    }

    pub(crate) fn send(&mut self, conn: ConnId, packet: Bytes) {
        self.send_packet(conn, packet, true);
    }

    /// Queues a packet; `sized`: a reply the reply size figures count.
    fn send_packet(&mut self, conn: ConnId, packet: Bytes, sized: bool) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.stats.sent += 1;
            self.stats.packets_sent += 1;
            if sized {
                // ZooKeeper's BufferStats count the reply without its length prefix.
                let size = packet.len().saturating_sub(4) as i64;
                self.stats.metrics.response_size.record(size);
            }
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
                self.stats.metrics.connection_requests += 1;
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
                        old_client: false,
                        inflight: VecDeque::new(),
                        sasl: None,
                        closing: false,
                    },
                );
            }
            Input::Authenticated { conn, ids } => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    for id in ids {
                        acl::add_identity(&mut c.identities, id);
                    }
                }
            }
            Input::OldClient { conn } => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.old_client = true;
                }
            }
            Input::Handshake { conn, req } => self.handshake(conn, req),
            Input::Request {
                conn,
                xid,
                opcode,
                req,
                body,
            } => self.request(conn, xid, opcode, req, body),
            Input::Disconnected { conn } => {
                if let Some(c) = self.conns.remove(&conn) {
                    if self.session_conn.get(&c.session_id) == Some(&conn) {
                        self.session_conn.remove(&c.session_id);
                    }
                }
                self.watches.remove_conn(conn);
            }
            Input::Tick => self.tick(),
            Input::Durable { zxid } => {
                while self.pending.front().is_some_and(|(t, _)| t.zxid <= zxid) {
                    if let Some((txn, origin)) = self.pending.pop_front() {
                        self.finish(txn, origin);
                    }
                }
            }
            Input::Role(role) => self.set_role(role),
            Input::Remote { from, fwd } => self.remote(from, fwd),
            Input::Revalidate { from, req } => self.revalidate(from, req),
            Input::RevalidateReply(reply) => self.revalidated(reply),
            Input::Touched { sessions } => self.touched_remotely(&sessions),
            Input::SyncReply => self.sync_replied(),
            Input::Apply(txn) => self.apply_committed(txn),
            Input::Received { bytes } => self.stats.metrics.bytes_received += bytes,
        }
    }

    fn handshake(&mut self, conn: ConnId, req: ConnectRequest) {
        self.stats.packets_received += 1;
        if !self.conns.contains_key(&conn) {
            return;
        }
        if self.role == Role::NotServing {
            // ZooKeeper closes a connection whose server is not running (electing or
            // syncing); the client tries another member.
            tracing::info!(
                conn,
                "refusing session: this member is not serving (electing or syncing)"
            );
            self.close(conn);
            return;
        }
        if self.role == Role::ReadOnly && self.read_only_refuses(conn, &req) {
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
        if self.role == Role::ReadOnly {
            return self.read_only_session(conn, &req, timeout_ms);
        }
        if req.session_id == 0 && self.local_sessions_on() {
            return self.create_local_session(conn, timeout_ms);
        }
        if req.session_id != 0
            && self.reopen_local_session(conn, req.session_id, timeout_ms, &req.passwd)
        {
            return;
        }
        if req.session_id == 0 && self.role == Role::Learner {
            return self.forward_new_session(conn, timeout_ms);
        }
        if req.session_id == 0 {
            let id = self.sessions.next_session_id();
            let mut passwd = [0u8; 16];
            if matches!(self.role, Role::Leader { .. }) {
                // ZooKeeper's password, derived from the id, so that every member
                // (keel or ZooKeeper) can check it.
                passwd = crate::import::passwd::session_passwd(id);
            } else {
                self.rng.fill_bytes(&mut passwd);
            }
            if let Some(c) = self.conns.get_mut(&conn) {
                c.session_id = id;
            }
            self.session_conn.insert(id, conn);
            self.propose(
                id,
                0,
                TxnOp::CreateSession { timeout_ms, passwd },
                Origin::Handshake { conn, timeout_ms },
            );
            return;
        }
        if self.role == Role::Learner {
            return self.forward_revalidate(conn, req.session_id, timeout_ms, &req.passwd);
        }
        let valid = self
            .sessions
            .get(req.session_id)
            .is_some_and(|s| !s.closing && s.passwd[..] == req.passwd[..]);
        if !valid {
            return self.tell_expired(conn, req.session_id, "session expired or password wrong");
        }
        self.sessions
            .touch(req.session_id, Some(timeout_ms), self.now_ms);
        if matches!(self.role, Role::Leader { .. }) {
            // Reconnected to the leader: its requests come through here from now on.
            self.session_owner.insert(req.session_id, self.my_sid);
        }
        self.attach_session(conn, req.session_id);
        self.connect_response(conn, req.session_id, timeout_ms);
    }

    /// Puts `session_id` on `conn`. A session lives on one connection: the old one (if
    /// still open) is closed.
    fn attach_session(&mut self, conn: ConnId, session_id: i64) {
        if let Some(old) = self.session_conn.get(&session_id).copied() {
            if old != conn {
                self.close(old);
                if let Some(c) = self.conns.get_mut(&old) {
                    c.session_id = 0;
                }
                self.watches.remove_conn(old);
            }
        }
        if let Some(c) = self.conns.get_mut(&conn) {
            c.session_id = session_id;
        }
        self.session_conn.insert(session_id, conn);
    }

    fn connect_response(&mut self, conn: ConnId, session_id: i64, timeout_ms: i32) {
        let passwd = self
            .sessions
            .get(session_id)
            .map(|s| s.passwd)
            .unwrap_or_default();
        self.send_connect_response(conn, session_id, timeout_ms, passwd);
    }

    /// Answers a reconnect of `session_id` as ZooKeeper answers a session it cannot
    /// resume (`finishSessionInit(cnxn, false)`): a ConnectResponse with session 0 and
    /// timeout 0, then the connection closed. `why` is logged.
    fn tell_expired(&mut self, conn: ConnId, session_id: i64, why: &str) {
        tracing::info!(
            session = format!("0x{session_id:x}"),
            "{why}; telling the client it expired"
        );
        self.send_connect_response(conn, 0, 0, [0u8; 16]);
        self.close(conn);
    }

    /// Sends a ConnectResponse; without its readOnly byte to a client whose request had
    /// none (ZooKeeper's `isOldClient`).
    fn send_connect_response(
        &mut self,
        conn: ConnId,
        session_id: i64,
        timeout_ms: i32,
        passwd: [u8; 16],
    ) {
        let resp = ConnectResponse {
            protocol_version: 0,
            time_out_ms: timeout_ms,
            session_id,
            passwd: Bytes::copy_from_slice(&passwd),
            // ZooKeeperServer.finishSessionInit: whether this is a read-only server.
            read_only: self.role == Role::ReadOnly,
        };
        let old_client = self.conns.get(&conn).is_some_and(|c| c.old_client);
        let packet = reply::frame(|b| {
            jute::Record::encode(&resp, b);
            if old_client {
                // The readOnly bool is the record's last byte.
                b.truncate(b.len() - 1);
            }
        });
        // finishSessionInit writes it with sendBuffer, past the reply size figures
        // (ServerCnxn.sendResponse's updateClientResponseSize); it counts as a packet.
        self.send_packet(conn, packet, false);
    }

    fn request(&mut self, conn: ConnId, xid: i32, opcode: i32, req: Request, body: Bytes) {
        self.stats.packets_received += 1;
        let now = self.now_ms;
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.stats.received += 1;
        c.stats.last_op = op::short_name(opcode);
        // Pings and other special xids are negative: ZooKeeper keeps the last real one.
        if xid >= 0 {
            c.stats.last_cxid = xid;
        }
        c.stats.last_response_ms = now;
        let session_id = c.session_id;
        let waiting = !c.inflight.is_empty();
        if session_id == 0 {
            self.close(conn);
            return;
        }
        // A session whose createSession is still on its way to disk is not in the
        // tracker yet; its requests queue behind the handshake.
        let creating = self.sessions.get(session_id).is_none()
            && c.inflight
                .iter()
                .any(|q| matches!(q, Queued::Txn(_) | Queued::Forwarded));
        let closing = c.closing || self.sessions.get(session_id).is_some_and(|s| s.closing);
        let auth = matches!(
            req,
            Request::Auth(_) | Request::Sasl(_) | Request::SaslGssapi(_)
        );
        if !auth && !self.authenticated(conn, xid) {
            return;
        }
        if closing {
            // Once a closeSession (the client's or an expiry's) is accepted, ZooKeeper
            // drops the session's later requests unanswered (ZooKeeperServer.touch
            // fails, "Dropping request"): nothing of them is prepped, so no ephemeral
            // is created after the close (ZOOKEEPER-1208). The requests before the
            // close are still answered in order; the connection closes when the
            // closeSession applies.
            tracing::debug!(
                session = format!("0x{session_id:x}"),
                xid,
                op = op::short_name(opcode),
                "request after the session's close dropped"
            );
            return;
        }
        if self.role == Role::ReadOnly {
            if self.read_only_request(conn, session_id, xid, opcode)
                == read_only::ReadOnlyVerdict::Answered
            {
                return;
            }
        } else if self.local_session(session_id).is_some() {
            // A local session is touched here only, and never in a learner's PING
            // touched list (LearnerSessionTracker.touchSession).
            self.local_sessions.touch(session_id, None, now);
            if req.is_write() && self.local_session_write(conn, session_id, xid, &req) {
                return;
            }
        } else if !creating
            && !self.upgrading.contains(&session_id)
            && !self.sessions.touch(session_id, None, now)
        {
            // The session is gone (no closeSession of it is on its way): ZooKeeper
            // drops the request; its connection was closed with the session.
            self.close(conn);
            return;
        }
        if self.role == Role::Learner && self.local_session(session_id).is_none() {
            self.touched.insert(session_id);
        }
        if let Request::Sync(r) = &req {
            if self.sync(conn, session_id, xid, r, &body) {
                return;
            }
        }
        if req.is_write() && self.role == Role::Learner {
            self.forward(conn, session_id, xid, opcode, req, body);
        } else if req.is_write() {
            self.write(conn, session_id, xid, req);
        } else if waiting {
            if let Some(c) = self.conns.get_mut(&conn) {
                c.inflight.push_back(Queued::Read {
                    xid,
                    opcode,
                    req,
                    arrived_ms: now,
                });
            }
        } else {
            self.note_read(conn, opcode, &req, now);
            self.read(conn, session_id, xid, opcode, req);
            self.note_last_zxid(conn);
        }
    }

    fn note_last_zxid(&mut self, conn: ConnId) {
        let last = self.last_zxid;
        if let Some(c) = self.conns.get_mut(&conn) {
            c.stats.last_zxid = last;
        }
    }

    fn write(&mut self, conn: ConnId, session_id: i64, xid: i32, req: Request) {
        if let Request::CreateSession { .. } = req {
            return self.create_session_again(conn, session_id, xid);
        }
        let identities = self
            .conns
            .get(&conn)
            .map(|c| c.identities.clone())
            .unwrap_or_default();
        let me = self.my_sid;
        // An ephemeral create of a local session (upgrading off) fails in prep.
        self.prep_and_propose(session_id, xid, req, &identities, Some(conn), me);
    }

    /// Preps a write of `session_id` checked against `identities` and proposes it; the
    /// reply goes to `conn` (None: a learner forwarded it and answers it itself).
    /// `owner` is the server id the request came through: on a leader, a session owned
    /// by another member gets SESSIONMOVED (the txn still takes a zxid).
    fn prep_and_propose(
        &mut self,
        session_id: i64,
        xid: i32,
        req: Request,
        identities: &[Id],
        conn: Option<ConnId>,
        owner: u64,
    ) {
        let moved = !self.owns_session(session_id, owner);
        let ephemeral_refusal = if self.local_session(session_id).is_some() {
            Some(ErrorCode::EphemeralOnLocalSession)
        } else if self.is_learner_local_session(session_id) && !self.upgrading.contains(&session_id)
        {
            // (A session being upgraded is global once its createSession, prepped
            // before this request, applies.)
            Some(ErrorCode::SessionExpired)
        } else {
            None
        };
        let mut p = Prep::new(
            &self.tree,
            &self.outstanding,
            &self.settings.prep,
            identities,
            session_id,
        );
        if let Some(code) = ephemeral_refusal {
            p.refuse_ephemerals(code);
        }
        let next_zxid = (self.proposed_zxid + 1) as u64;
        let r = match &req {
            // ZooKeeper checks reconfigEnabled before the session.
            Request::Reconfig(_) if !self.settings.reconfig_enabled => {
                Err(ErrorCode::ReconfigDisabled)
            }
            _ if moved => Err(ErrorCode::SessionMoved),
            Request::Create(c) => p.create(c),
            Request::Delete(d) => p.delete(&d.path, d.version),
            Request::DeleteContainer(d) => p.delete_container(&d.path),
            Request::SetData(s) => p.set_data(&s.path, &s.data, s.version),
            Request::SetAcl(s) => p.set_acl(&s.path, &s.acl, s.version),
            Request::Check(c) => p.check(&c.path, c.version),
            Request::Multi(ops) => Ok(p.multi(ops)),
            // A server that does not lead answers UNIMPLEMENTED (ZooKeeper's standalone
            // server is no LeaderZooKeeperServer).
            Request::Reconfig(r) => match &self.reconfig {
                Some(ctx) => reconfig::prep(&mut p, r, ctx, next_zxid),
                None => Err(ErrorCode::Unimplemented),
            },
            Request::Rejected(r) => Err(r.code),
            Request::CloseSession => Ok(p.close_session(self.session_ephemerals(session_id))),
            _ => Err(ErrorCode::Unimplemented),
        };
        let changes = p.into_changes();
        // ZooKeeper logs each refused write at INFO ("Got user-level KeeperException");
        // so does keel, with the reason. The error still takes a zxid, as in ZooKeeper.
        match &r {
            Err(code) => tracing::info!(
                session = format!("0x{session_id:x}"),
                xid,
                op = req.name(),
                path = req.path().unwrap_or(""),
                error = ?code,
                "request refused"
            ),
            Ok(TxnOp::MultiError(codes)) => tracing::info!(
                session = format!("0x{session_id:x}"),
                xid,
                op = "multi",
                errors = ?codes,
                "request refused"
            ),
            Ok(_) => {}
        }
        let op = r.unwrap_or_else(TxnOp::Error);
        let origin = match conn {
            Some(conn) if matches!(op, TxnOp::CloseSession { .. }) => {
                self.sessions.set_closing(session_id);
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.closing = true;
                }
                Origin::Close { conn, xid }
            }
            None if matches!(op, TxnOp::CloseSession { .. }) => {
                self.sessions.set_closing(session_id);
                Origin::Server
            }
            Some(conn) => Origin::Reply { conn, xid },
            None => Origin::Server,
        };
        if !matches!(op, TxnOp::Error(_) | TxnOp::MultiError(_)) {
            self.record_outstanding(changes);
        }
        self.propose(session_id, xid, op, origin);
    }

    /// Records prep's changes under the zxid the next proposal will get. Done before
    /// proposing, because without storage the txn applies (and clears its changes)
    /// at once.
    fn record_outstanding(&mut self, changes: HashMap<String, Option<prep::NodeView>>) {
        let zxid = self.proposed_zxid + 1;
        let mut paths = Vec::with_capacity(changes.len());
        for (path, view) in changes {
            paths.push(path.clone());
            self.outstanding.insert(path, (zxid, view));
        }
        self.outstanding_paths.push_back((zxid, paths));
    }

    /// The session's ephemerals as they will be once every proposed txn applies.
    fn session_ephemerals(&self, session_id: i64) -> Vec<String> {
        let mut paths: std::collections::BTreeSet<String> =
            self.tree.ephemerals(session_id).cloned().collect();
        for (path, (_, view)) in &self.outstanding {
            match view {
                Some(v) if v.owner() == session_id => {
                    paths.insert(path.clone());
                }
                _ => {
                    paths.remove(path);
                }
            }
        }
        paths.into_iter().collect()
    }

    /// Gives `op` the next zxid and sends it on its way: to storage (applied once
    /// durable) or, without storage, applied at once. Returns the zxid.
    fn propose(&mut self, session_id: i64, cxid: i32, op: TxnOp, origin: Origin) -> i64 {
        self.proposed_zxid += 1;
        let txn = Txn {
            zxid: self.proposed_zxid,
            time_ms: self.now_ms,
            session_id,
            cxid,
            op,
        };
        let zxid = txn.zxid;
        match origin {
            Origin::Reply { conn, .. }
            | Origin::Handshake { conn, .. }
            | Origin::Close { conn, .. }
            | Origin::Refused { conn, .. } => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.inflight.push_back(Queued::Txn(zxid));
                }
            }
            Origin::Server => {}
        }
        if self.settings.durable {
            self.storage_ops.push(StorageOp::Append(txn.clone()));
            self.pending.push_back((txn, origin));
        } else {
            self.finish(txn, origin);
        }
        zxid
    }

    /// Applies a committed txn, answers whoever waits for it, and releases the reads
    /// queued behind it.
    fn finish(&mut self, txn: Txn, origin: Origin) {
        debug_assert!(txn.zxid > self.last_zxid, "zxids apply in order");
        self.last_zxid = txn.zxid;
        let result = self.apply(&txn);
        let zxid = txn.zxid;
        if let TxnOp::CloseSession { .. } = txn.op {
            // A closed session has no owner any more (keeps the leader's table bounded
            // by the live sessions).
            self.session_owner.remove(&txn.session_id);
        }
        // Clear what this txn (and any earlier one) recorded, unless a later proposal
        // has since recorded the same path: that entry stays until its own txn applies.
        while self
            .outstanding_paths
            .front()
            .is_some_and(|(z, _)| *z <= zxid)
        {
            if let Some((_, paths)) = self.outstanding_paths.pop_front() {
                for path in paths {
                    if self.outstanding.get(&path).is_some_and(|(z, _)| *z <= zxid) {
                        self.outstanding.remove(&path);
                    }
                }
            }
        }
        // Session creation is not timed, as in ZooKeeper (it never reaches
        // FinalRequestProcessor's statistics).
        if let TxnOp::CreateSession { .. } = txn.op {
            // An upgraded session is global from now on.
            self.upgrading.remove(&txn.session_id);
        }
        let waiting = match origin {
            Origin::Reply { conn, .. }
            | Origin::Close { conn, .. }
            | Origin::Refused { conn, .. } => Some(conn),
            Origin::Server | Origin::Handshake { .. } => None,
        };
        self.note_txn(&txn, waiting);
        let conn = match origin {
            Origin::Server => {
                if let TxnOp::CloseSession { .. } = txn.op {
                    self.drop_session_conn(txn.session_id);
                }
                None
            }
            Origin::Reply { conn, xid } => {
                // A check (13) on its own that passes gets no reply from ZooKeeper 3.8
                // (its FinalRequestProcessor fails to serialize the missing Stat).
                if !matches!(result, apply::OpResult::Check) {
                    self.send(conn, apply::encode_result(xid, zxid, &result));
                }
                Some(conn)
            }
            Origin::Refused { conn, xid, code } => {
                self.send(conn, reply::header_only(xid, zxid, code.code()));
                Some(conn)
            }
            Origin::Handshake { conn, timeout_ms } => {
                tracing::info!(
                    session = format!("0x{:x}", txn.session_id),
                    timeout_ms,
                    "session created"
                );
                // A closeSession sent right behind the ConnectRequest was accepted
                // before the session was in the table: mark it closing now, so it
                // neither expires nor takes requests before that close applies.
                if self.conns.get(&conn).is_some_and(|c| c.closing) {
                    self.sessions.set_closing(txn.session_id);
                }
                self.connect_response(conn, txn.session_id, timeout_ms);
                Some(conn)
            }
            Origin::Close { conn, xid } => {
                tracing::info!(
                    session = format!("0x{:x}", txn.session_id),
                    "session closed by client"
                );
                self.send(conn, apply::encode_result(xid, zxid, &result));
                self.drop_session_conn(txn.session_id);
                self.close(conn);
                None
            }
        };
        if let Some(conn) = conn {
            self.release(conn, zxid);
        }
        self.answer_syncs();
        self.txns_since_snapshot += 1;
        if self.settings.snap_count > 0
            && self.settings.durable
            && self.snapshot.is_none()
            && self.txns_since_snapshot >= self.snapshot_after
        {
            self.start_snapshot();
        }
    }

    /// Pops the answered txn from the connection's queue and answers the reads behind it.
    fn release(&mut self, conn: ConnId, zxid: i64) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if matches!(c.inflight.front(), Some(Queued::Txn(z)) if *z == zxid)
            || matches!(c.inflight.front(), Some(Queued::Forwarded))
        {
            c.inflight.pop_front();
        }
        loop {
            let Some(c) = self.conns.get_mut(&conn) else {
                return;
            };
            if !matches!(c.inflight.front(), Some(Queued::Read { .. })) {
                break;
            }
            let Some(Queued::Read {
                xid,
                opcode,
                req,
                arrived_ms,
            }) = c.inflight.pop_front()
            else {
                break;
            };
            let session_id = c.session_id;
            self.note_read(conn, opcode, &req, arrived_ms);
            self.read(conn, session_id, xid, opcode, req);
        }
        self.note_last_zxid(conn);
    }

    /// Forgets which connection a closed session was on, and closes that connection.
    fn drop_session_conn(&mut self, session_id: i64) {
        if let Some(conn) = self.session_conn.remove(&session_id) {
            if let Some(c) = self.conns.get_mut(&conn) {
                c.session_id = 0;
            }
            self.close(conn);
        }
    }

    fn tick(&mut self) {
        // Only the server that sequences writes expires sessions and reaps containers
        // (on an ensemble, the leader: ZooKeeper's SessionTracker and ContainerManager
        // run there). A read-only member expires its own local sessions.
        if self.role == Role::ReadOnly {
            self.expire_read_only_sessions();
        }
        if self.local_sessions_on() {
            self.expire_local_sessions();
        }
        if !self.sequences_writes() {
            return;
        }
        for id in self.sessions.expire(self.now_ms) {
            tracing::info!(session = format!("0x{id:x}"), "session expired");
            let ephemerals = self.session_ephemerals(id);
            let no_ids: [Id; 0] = [];
            let mut prep = Prep::new(
                &self.tree,
                &self.outstanding,
                &self.settings.prep,
                &no_ids,
                id,
            );
            let op = prep.close_session(ephemerals);
            let changes = prep.into_changes();
            self.record_outstanding(changes);
            self.propose(id, 0, op, Origin::Server);
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
                if n.num_children() == 0 && n.child_creates() > 0 {
                    candidates.push(p.clone());
                }
            }
        }
        for p in self.tree.ttls() {
            if let Some(n) = self.tree.get(p) {
                if let crate::tree::Owner::Ttl(ttl) = n.owner() {
                    if n.num_children() == 0 && ttl != 0 && self.now_ms - n.mtime() > ttl {
                        candidates.push(p.clone());
                    }
                }
            }
        }
        for p in candidates {
            if self.outstanding.contains_key(&p) {
                // A txn on its way to disk touches it; look again next time.
                continue;
            }
            let no_ids: [Id; 0] = [];
            let mut prep = Prep::new(
                &self.tree,
                &self.outstanding,
                &self.settings.prep,
                &no_ids,
                0,
            );
            let r = prep.delete_container(&p);
            let changes = prep.into_changes();
            let op = r.unwrap_or_else(TxnOp::Error);
            if !matches!(op, TxnOp::Error(_)) {
                self.record_outstanding(changes);
            }
            self.propose(0, 0, op, Origin::Server);
        }
    }

    /// Counts txns towards the next snapshot from zero, against a newly drawn number.
    fn restart_snapshot_count(&mut self) {
        self.txns_since_snapshot = 0;
        self.snapshot_after = snapshot_after(self.settings.snap_count, &mut self.rng);
    }

    fn start_snapshot(&mut self) {
        self.restart_snapshot_count();
        let zxid = self.last_zxid;
        tracing::info!(zxid = format!("0x{zxid:x}"), "snapshot started");
        self.storage_ops.push(StorageOp::SnapshotChunk {
            zxid,
            index: 0,
            data: recovery::encode_snapshot_header(zxid, &self.sessions),
        });
        self.snapshot = Some(SnapshotProgress {
            zxid,
            cursor: None,
            next_index: 1,
        });
    }

    /// Writes the next chunk of the snapshot in progress, if any. Each step serialises
    /// at most about one chunk, so writes are never stalled for long; the snapshot is
    /// fuzzy and recovery replays the txns after its zxid.
    pub fn snapshot_step(&mut self) {
        let Some(progress) = self.snapshot.as_mut() else {
            return;
        };
        let mut buf = bytes::BytesMut::with_capacity(SNAPSHOT_CHUNK_BYTES + 4096);
        let next = crate::tree::snapshot::encode_nodes(
            &self.tree,
            progress.cursor.as_deref(),
            SNAPSHOT_CHUNK_BYTES,
            &mut buf,
        );
        let zxid = progress.zxid;
        let index = progress.next_index;
        progress.next_index += 1;
        self.storage_ops.push(StorageOp::SnapshotChunk {
            zxid,
            index,
            data: buf.to_vec(),
        });
        match next {
            Some(cursor) => progress.cursor = Some(cursor),
            None => {
                self.storage_ops.push(StorageOp::SnapshotDone {
                    zxid,
                    chunks: index + 1,
                });
                tracing::info!(
                    zxid = format!("0x{zxid:x}"),
                    chunks = index + 1,
                    "snapshot written"
                );
                self.snapshot = None;
            }
        }
    }

    /// Handles an auth packet, as ZooKeeper's providers do: digest adds
    /// `digest:user:hash` (and `super` when it matches the super digest) for any bytes,
    /// read as UTF-8 with U+FFFD for what is not (Java's `new String(authData)` under
    /// a UTF-8 locale); ip adds the connection's own address, whatever the payload; x509
    /// succeeds on a connection whose TLS client certificate already made it
    /// `x509:<DN>` (ZooKeeper's provider re-checks that certificate). Any other scheme
    /// (sasl, world, super, auth, unknown) is AUTHFAILED and closes the connection. The
    /// reply carries the request's own xid (normally -4) and zxid 0.
    pub(super) fn auth(&mut self, conn: ConnId, xid: i32, pkt: &jute::AuthPacket) {
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        let ids = match pkt.scheme.as_str() {
            "digest" => {
                let digest = acl::digest_id(&jute::codec::java_string(&pkt.auth));
                let mut ids = Vec::with_capacity(2);
                if self.settings.super_digest.as_deref() == Some(digest.as_str()) {
                    ids.push(Id {
                        scheme: "super".into(),
                        id: String::new(),
                    });
                }
                ids.push(Id {
                    scheme: "digest".into(),
                    id: digest,
                });
                Some(ids)
            }
            "ip" => Some(vec![Id {
                scheme: "ip".into(),
                id: c.addr.ip().to_canonical().to_string(),
            }]),
            "x509" if c.identities.iter().any(|i| i.scheme == "x509") => Some(Vec::new()),
            _ => None,
        };
        let Some(ids) = ids else {
            tracing::info!(conn, scheme = %pkt.scheme, "authentication failed");
            self.send(
                conn,
                reply::header_only(xid, 0, ErrorCode::AuthFailed.code()),
            );
            self.close(conn);
            return;
        };
        if let Some(c) = self.conns.get_mut(&conn) {
            for id in ids {
                acl::add_identity(&mut c.identities, id);
            }
        }
        self.send(conn, reply::header_only(xid, 0, 0));
    }
}

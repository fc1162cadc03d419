//! The ensemble's sockets: a member's election port and quorum port, the connections
//! to every other member on both, moving the bytes of [`crate::zab::wire`] and nothing
//! else (what to send, to whom and when is the Zab core's; ZAB-WIRE.md §1, §3).
//!
//! [`PeerNet::start`] binds both ports and returns the handle the member runtime sends
//! through ([`PeerNet::send`], [`PeerNet::close`], both non-blocking) and the
//! [`PeerInbox`] it receives [`Input::Message`] and [`Input::Disconnected`] from.
//! [`PeerNet::set_members`] follows a dynamic reconfiguration (ZooKeeper 3.5+): who
//! the other members are and where they listen may change while the ensemble runs.
//!
//! - [`election`]: the election port as ZooKeeper's QuorumCnxManager runs it: one link
//!   per other member, its handshake and sid tie-break, reconnects with back-off, and
//!   links to sids without a server line that introduce themselves.
//! - [`quorum`]: the quorum port: learner -> leader connections, one per peer in
//!   either direction, each with a generation so a replaced or closed connection's
//!   late bytes never reach the core; a learner of any sid but our own may connect.
//! - [`link`]: what both ports share: connecting with a timeout, the batched writer,
//!   socket options, the stream (plain or TLS).
//! - [`tls`]: TLS on both ports (`sslQuorum`, `portUnification`, the `ssl.quorum.*`
//!   keys), mutual, with ZooKeeper's host check.
//!
//! Bounds: a quorum connection's outgoing queue holds at most
//! [`PeerParams::queue_bytes`] (bytes, not messages: the core emits a whole DIFF, up to
//! ~500 PROPOSAL + COMMIT pairs or more from the txn log, in one step, and a SNAP is one
//! message of any size, which goes only into an empty queue and does not count against
//! the bytes, so the packets after it do); an election link's
//! queue one notification; each connection's read buffer at most one packet (the frame
//! bound on the election port, `jute.maxbuffer` on the quorum port, a SNAP stream at
//! most [`PeerParams::max_snapshot_bytes`]); the inbox [`PeerParams::inbox_messages`].
//! There is one election link per other member with a server line in the last
//! [`PeerNet::set_members`] (or at start) and at most [`PeerParams::unlisted_links`]
//! more, for sids without one that dialed in; quorum connections are one per peer sid,
//! and only sids that dialed in or that the core asked to reach have one.
//! A full election queue drops its oldest notification (ZooKeeper's send queue holds
//! one and the newest wins: a vote supersedes the ones before it). A full quorum queue
//! closes that peer's connection and reports [`Input::Disconnected`]: Zab's quorum
//! stream is FIFO with no gaps, so a message may be lost only with its connection, and
//! the caller (the core's task) must never wait for one slow peer.

pub mod election;
pub mod link;
pub mod quorum;
pub mod quorum_auth;
pub mod tls;

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinSet};
use tracing::info;

use crate::config::ServerSpec;
use crate::zab::message::{Channel, Message};
use crate::zab::wire::config::{quorum_config_text, ServerLine};
use crate::zab::wire::election::ElectionAddress;
use crate::zab::wire::packet::Limits;
use crate::zab::wire::{max_buffer_bytes, DEFAULT_JUTE_MAXBUFFER};
use crate::zab::{Input, Sid};

/// The runtime's settings (zoo.cfg keys and ZooKeeper's system properties that
/// [`crate::config::Config`] does not carry yet, and keel's own bounds).
#[derive(Clone, Debug)]
pub struct PeerParams {
    /// How long an election connect may take (`cnxTimeout` /
    /// `zookeeper.cnxTimeout`, 5000 ms); also the limit for a connection's initial
    /// message to arrive.
    pub cnx_timeout: Duration,
    /// How long a learner's connect to the leader's quorum port may take, and how long
    /// a leader waits for a new connection's first packet (ZooKeeper: tickTime x
    /// initLimit).
    pub quorum_connect_timeout: Duration,
    /// `quorumListenOnAllIPs`: bind both ports on every address (the wildcard) rather
    /// than the server.N line's host (false).
    pub quorum_listen_on_all_ips: bool,
    /// `jute.maxbuffer`: the longest buffer a quorum packet may carry (0xfffff; the
    /// reader allows it plus ZooKeeper's extrasize, [`max_buffer_bytes`]).
    pub jute_max_buffer: usize,
    /// The longest SNAP stream a learner buffers, bytes.
    pub max_snapshot_bytes: usize,
    /// The bytes a quorum connection's outgoing queue may hold; past them the
    /// connection closes (a learner that far behind is lost to the leader anyway).
    pub queue_bytes: usize,
    /// Received inputs queued for the member; readers wait (TCP pushes back) beyond.
    pub inbox_messages: usize,
    /// The first wait before an election link dials again after a failure; it doubles
    /// on each failure up to `reconnect_max`.
    pub reconnect_min: Duration,
    /// The longest wait between an election link's dials.
    pub reconnect_max: Duration,
    /// How many election links this member keeps for sids with no server line that
    /// dialed in (a server joining by reconfig, before the config that adds it), and
    /// how many learner connections of such sids it accepts. When the election links
    /// are all taken, the oldest one without a connection that had `cnx_timeout` to
    /// connect is dropped for the newcomer; without one, and for one learner too many,
    /// the newcomer is refused. ZooKeeper keeps no such bound; keel bounds every table.
    /// 0 (the member runtime's choice with reconfig off, where no server can join): an
    /// unlisted sid is refused on both ports.
    pub unlisted_links: usize,
    /// TLS on both ports (`sslQuorum`, `portUnification`); `None`: plaintext.
    pub tls: Option<Arc<tls::PeerTls>>,
    /// Quorum SASL on both ports (`quorum.auth.enableSasl`, [`quorum_auth`]); `None`:
    /// off (no auth packet is sent or looked for).
    pub sasl: Option<Arc<crate::sasl::quorum::QuorumSasl>>,
    /// The Kerberos credentials quorum SASL GSSAPI runs with (a section of `sasl` that
    /// logs in with Kerberos); `None`: DIGEST-MD5 only.
    pub kerberos: Option<Arc<crate::net::gss::QuorumKerberos>>,
}

impl Default for PeerParams {
    /// ZooKeeper's defaults (tickTime 2000 x initLimit 10 for the quorum connect).
    fn default() -> PeerParams {
        PeerParams {
            cnx_timeout: Duration::from_millis(5000),
            quorum_connect_timeout: Duration::from_millis(20_000),
            quorum_listen_on_all_ips: false,
            jute_max_buffer: DEFAULT_JUTE_MAXBUFFER,
            max_snapshot_bytes: 1 << 30,
            queue_bytes: 64 << 20,
            inbox_messages: 4096,
            reconnect_min: Duration::from_millis(100),
            reconnect_max: Duration::from_millis(5000),
            unlisted_links: 64,
            tls: None,
            sasl: None,
            kerberos: None,
        }
    }
}

/// Another member as its server.N line names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Member {
    pub(crate) host: String,
    pub(crate) quorum_port: u16,
    pub(crate) election_port: u16,
}

/// What connections tell the inbox; quorum events carry their connection's
/// generation so the inbox drops those of a connection that is no longer current.
#[derive(Debug)]
pub(crate) enum Event {
    /// A notification from `from`'s election link.
    Election { from: Sid, msg: Message },
    /// A message on quorum connection `generation` of `from`.
    Quorum {
        from: Sid,
        generation: u64,
        msg: Message,
    },
    /// Quorum connection `generation` to `peer` broke, or its connect failed.
    Closed { peer: Sid, generation: u64 },
}

/// Who the other members are and the election link to each, changed by
/// [`PeerNet::set_members`] and by sids without a server line that introduce
/// themselves on the election port.
#[derive(Default)]
pub(crate) struct Peers {
    /// Every other member with a server line in the last [`PeerNet::set_members`] (or
    /// at start): where its quorum and election ports are.
    pub(crate) members: BTreeMap<Sid, Member>,
    /// The election link to each of `members`, and to each sid without a server line
    /// that dialed in (at most [`PeerParams::unlisted_links`] of those).
    pub(crate) links: BTreeMap<Sid, election::Link>,
}

impl Peers {
    /// How many links belong to sids without a server line.
    pub(crate) fn unlisted(&self) -> usize {
        self.links
            .keys()
            .filter(|sid| !self.members.contains_key(sid))
            .count()
    }
}

/// What the handle, the inbox and every connection task share.
pub(crate) struct Shared {
    pub(crate) my_sid: Sid,
    /// This member's own addresses: the initial message advertises its election
    /// address; [`PeerNet::set_own_line`] moves them.
    pub(crate) me: Mutex<Member>,
    /// The tasks accepting on the election and the quorum port, replaced when the
    /// member's own line moves a port.
    listeners: Mutex<Listeners>,
    pub(crate) params: PeerParams,
    /// The quorum config text a notification carries when the core gave it none (the
    /// static config at start; the core fills in its own when reconfig is on).
    pub(crate) static_config: Bytes,
    pub(crate) limits: Limits,
    /// The members and the election links, under one short lock: sending a
    /// notification takes it once to find its link; the quorum path (PROPOSAL, COMMIT,
    /// ACK) never takes it.
    pub(crate) peers: Mutex<Peers>,
    pub(crate) quorum: Mutex<quorum::Slots>,
    /// Peers whose current quorum connection was dropped by this side (a full queue)
    /// or replaced by a newer incoming one: the inbox reports them before anything
    /// else it holds.
    pub(crate) lost: LostPeers,
    pub(crate) events: mpsc::Sender<Event>,
    tasks: Mutex<JoinSet<()>>,
}

/// The peers of [`Shared::lost`], with a flag read without the lock: the inbox asks for
/// every message it hands the core (a leader under load: a REQUEST and an ACK from each
/// follower per write), and the set is nearly always empty. The flag is stored under
/// the lock at every change, so once the set's last change is visible it tells the
/// truth; a loss recorded before an event was sent is seen by whoever receives that
/// event (the channel orders the two).
#[derive(Default)]
pub(crate) struct LostPeers {
    set: Mutex<BTreeSet<Sid>>,
    any: AtomicBool,
}

impl LostPeers {
    /// Records that `peer`'s connection was lost.
    pub(crate) fn insert(&self, peer: Sid) {
        let mut set = self.set.lock();
        set.insert(peer);
        self.any.store(true, Ordering::Release);
    }

    /// Forgets a loss of `peer`'s connection.
    pub(crate) fn remove(&self, peer: Sid) {
        let mut set = self.set.lock();
        set.remove(&peer);
        self.any.store(!set.is_empty(), Ordering::Release);
    }

    /// Takes the lowest peer recorded, if any.
    pub(crate) fn pop_first(&self) -> Option<Sid> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        let mut set = self.set.lock();
        let peer = set.pop_first();
        self.any.store(!set.is_empty(), Ordering::Release);
        peer
    }

    /// Whether no loss is recorded.
    pub(crate) fn is_empty(&self) -> bool {
        !self.any.load(Ordering::Acquire)
    }
}

impl Shared {
    /// The hosts of the configuration's server lines, this member's own included: a
    /// Kerberos learner's `service/host@REALM` principal must name one (ZooKeeper's
    /// authzHosts, QuorumPeer.initialize).
    pub(crate) fn authz_hosts(&self) -> Vec<String> {
        let mut hosts: Vec<String> = self
            .peers
            .lock()
            .members
            .values()
            .map(|m| m.host.clone())
            .collect();
        hosts.push(self.me.lock().host.clone());
        hosts
    }

    /// Runs `f` until it ends, is aborted by the handle returned, or the [`PeerNet`] is
    /// dropped.
    pub(crate) fn spawn(
        &self,
        f: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> AbortHandle {
        let mut tasks = self.tasks.lock();
        while tasks.try_join_next().is_some() {}
        tasks.spawn(f)
    }
}

/// The accept tasks of the two peer ports.
#[derive(Default)]
struct Listeners {
    election: Option<tokio::task::JoinHandle<()>>,
    quorum: Option<tokio::task::JoinHandle<()>>,
}

impl Listeners {
    fn slot(&mut self, port: Port) -> &mut Option<tokio::task::JoinHandle<()>> {
        match port {
            Port::Election => &mut self.election,
            Port::Quorum => &mut self.quorum,
        }
    }
}

/// One of the two peer ports of this member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Port {
    Election,
    Quorum,
}

impl Port {
    fn name(self) -> &'static str {
        match self {
            Port::Election => "election",
            Port::Quorum => "quorum",
        }
    }

    fn of(self, m: &Member) -> u16 {
        match self {
            Port::Election => m.election_port,
            Port::Quorum => m.quorum_port,
        }
    }

    /// Starts this port's accept task on `listener` (a plain tokio task, not one of
    /// the shared set: moving a port must be able to wait for the old one to close).
    fn listen(
        self,
        shared: &Arc<Shared>,
        listener: tokio::net::TcpListener,
    ) -> tokio::task::JoinHandle<()> {
        match self {
            Port::Election => tokio::spawn(election::listen(shared.clone(), listener)),
            Port::Quorum => tokio::spawn(quorum::listen(shared.clone(), listener)),
        }
    }
}

/// Stops an accept task and waits until it is gone, its socket closed with it.
async fn close_listener(task: Option<tokio::task::JoinHandle<()>>) {
    if let Some(task) = task {
        task.abort();
        let _ = task.await;
    }
}

/// Binds `host:port` now, for a port this member listens on (the wildcard with
/// `quorum_listen_on_all_ips`, as ZooKeeper's `quorumListenOnAllIPs`).
///
/// Errors: the address does not bind; the error names `port`'s kind and the address
/// (as the client port's start-up error does), keeping the OS error's kind.
fn bind_now(
    params: &PeerParams,
    host: &str,
    port: Port,
    number: u16,
) -> io::Result<tokio::net::TcpListener> {
    let host = bind_host(params, host);
    let bound = std::net::TcpListener::bind((host, number)).and_then(|listener| {
        listener.set_nonblocking(true)?;
        tokio::net::TcpListener::from_std(listener)
    });
    bound.map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "{} port: cannot listen on {host}:{number}: {e}",
                port.name()
            ),
        )
    })
}

/// The host a peer port of this member binds for its server line's `host`.
fn bind_host<'a>(params: &PeerParams, host: &'a str) -> &'a str {
    if params.quorum_listen_on_all_ips {
        "0.0.0.0"
    } else {
        host
    }
}

/// A member's peer connections. Dropping it closes both ports and every connection.
pub struct PeerNet {
    shared: Arc<Shared>,
    /// The broadcast's messages of the core's current turn ([`PeerNet::send_corked`]).
    cork: quorum::Cork,
}

/// Where the member receives what its peers say: only [`Input::Message`] and
/// [`Input::Disconnected`], in each connection's order.
pub struct PeerInbox {
    shared: Arc<Shared>,
    rx: mpsc::Receiver<Event>,
    held: Option<Event>,
}

/// One live election connection, as [`PeerNet::election_link`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkInfo {
    /// This end's address.
    pub local: SocketAddr,
    /// The peer's end.
    pub remote: SocketAddr,
    /// How many connections this link has carried since start (this one included).
    pub connections: u64,
}

fn member_of(s: &ServerLine) -> Member {
    Member {
        host: s.host.clone(),
        quorum_port: s.quorum_port,
        election_port: s.election_port,
    }
}

impl PeerNet {
    /// Binds `my_sid`'s election and quorum ports from its line in `servers` (the
    /// wildcard with `quorum_listen_on_all_ips`) and starts a link to every other
    /// member's election port (as [`PeerNet::set_members`] with `servers` would). The quorum port stays bound for the member's life:
    /// ZooKeeper 3.8 binds it only while leading (the `Leader` constructor) and a
    /// learner that dials a non-leader is refused; here it is accepted and the core,
    /// not leading, closes it on its first packet, which the learner sees the same way
    /// (a broken connection, then a retry), and a leader never finds its port taken.
    ///
    /// Errors: `my_sid` has no server line, or a port does not bind.
    pub async fn start(
        my_sid: Sid,
        servers: &[ServerSpec],
        params: PeerParams,
    ) -> io::Result<(PeerNet, PeerInbox)> {
        let lines: Vec<ServerLine> = servers.iter().map(ServerLine::from).collect();
        let me = lines
            .iter()
            .find(|s| s.sid == my_sid)
            .map(member_of)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("no server.{my_sid} line"),
                )
            })?;
        let static_config = Bytes::from(quorum_config_text(&lines, 0));
        let election_listener = bind_now(&params, &me.host, Port::Election, me.election_port)?;
        let quorum_listener = bind_now(&params, &me.host, Port::Quorum, me.quorum_port)?;
        let max_buffer = max_buffer_bytes(params.jute_max_buffer);
        let (events, rx) = mpsc::channel(params.inbox_messages.max(1));
        let shared = Arc::new(Shared {
            my_sid,
            me: Mutex::new(me),
            listeners: Mutex::new(Listeners::default()),
            limits: Limits {
                max_buffer,
                max_packet: 2 * max_buffer,
            },
            params,
            static_config,
            peers: Mutex::new(Peers::default()),
            quorum: Mutex::new(quorum::Slots::default()),
            lost: LostPeers::default(),
            events,
            tasks: Mutex::new(JoinSet::new()),
        });
        *shared.listeners.lock() = Listeners {
            election: Some(Port::Election.listen(&shared, election_listener)),
            quorum: Some(Port::Quorum.listen(&shared, quorum_listener)),
        };
        let net = PeerNet {
            shared,
            cork: quorum::Cork::default(),
        };
        net.set_members(&lines);
        let inbox = PeerInbox {
            shared: net.shared.clone(),
            rx,
            held: None,
        };
        Ok((net, inbox))
    }

    /// Makes `servers` the members this network reaches: the union of the current and
    /// the last seen configuration's server lines, as the runtime passes it on every
    /// config change (ZooKeeper's QuorumCnxManager dials a sid found in either view,
    /// `connectOne`; QuorumPeer `setLastSeenQuorumVerifier` connects to the new ones).
    /// Our own line is skipped here: [`PeerNet::set_own_line`] follows it.
    ///
    /// - A new sid gets an election link, which dials when the core first sends to it.
    /// - A sid whose election address changed dials the new one from now on; its
    ///   election connection, whichever side opened it, is closed and the new address
    ///   dialed at once (ZooKeeper restarts its QuorumCnxManager on a config change,
    ///   `QuorumPeer.restartLeaderElection`, closing every connection).
    /// - A sid whose quorum address changed is dialed there by the next FOLLOWERINFO /
    ///   OBSERVERINFO; a quorum connection already up stays (its leader or learner is
    ///   the core's to drop).
    /// - A sid that is gone loses its election link now, connection and queued
    ///   notification with it: ZooKeeper never dials a sid outside both views
    ///   (`connectOne` logs "Invalid server id") and its restarted manager holds no
    ///   connection to it. Like any sid without a server line it may still dial in
    ///   ([`PeerParams::unlisted_links`]), and its quorum connection, if any, stays.
    ///
    /// Links of sids with no server line that dialed in are kept, or take the line's
    /// address if `servers` now names them.
    pub fn set_members(&self, servers: &[ServerLine]) {
        let shared = &self.shared;
        let next: BTreeMap<Sid, Member> = servers
            .iter()
            .filter(|s| s.sid != shared.my_sid)
            .map(|s| (s.sid, member_of(s)))
            .collect();
        let mut peers = shared.peers.lock();
        let gone: Vec<Sid> = peers
            .members
            .keys()
            .filter(|sid| !next.contains_key(sid))
            .copied()
            .collect();
        for sid in gone {
            if let Some(link) = peers.links.remove(&sid) {
                info!("election: server.{sid} left the configuration; its link stops");
                link.stop();
            }
        }
        for (&sid, m) in &next {
            let address = ElectionAddress {
                host: m.host.clone(),
                port: m.election_port,
            };
            match peers.links.get(&sid) {
                Some(link) => {
                    if link.outbox.move_to(address) {
                        info!(
                            "election: server.{sid} is now at {}:{}; redialing",
                            m.host, m.election_port
                        );
                    }
                }
                None => {
                    let link = election::Link::start(shared, sid, Some(address));
                    peers.links.insert(sid, link);
                }
            }
        }
        peers.members = next;
    }

    /// Follows this member's own server line in the configuration just activated (a
    /// reconfig that moves its election or quorum port, or its host): each port that
    /// moved is bound at its new address and the old one closed, and the initial
    /// messages advertise the new election address from now on. Connections already
    /// up stay (the peers' own config change makes them redial the new address).
    /// ZooKeeper does the same when it activates a config
    /// (`QuorumPeer.processReconfig`: a new election address restarts leader election,
    /// and the quorum port is bound again by the next `Leader`).
    ///
    /// A new port this member already listens on (the two ports swapped or rotated, or
    /// the same port under another spelling of the host) cannot be bound while the old
    /// listener holds it: then the moving ports are closed first (and waited for), and
    /// listen at their old addresses again if the new ones do not bind.
    ///
    /// Errors: a new address does not bind; the old ports are open then (the member
    /// keeps serving where it was, as it would after a failed restart).
    pub async fn set_own_line(&self, line: &ServerLine) -> io::Result<()> {
        let shared = &self.shared;
        let next = member_of(line);
        let now = shared.me.lock().clone();
        if next == now {
            return Ok(());
        }
        let p = &shared.params;
        let host_moved = bind_host(p, &next.host) != bind_host(p, &now.host);
        let moving: Vec<Port> = [Port::Election, Port::Quorum]
            .into_iter()
            .filter(|port| host_moved || port.of(&next) != port.of(&now))
            .collect();
        let held = |port: u16| port == now.election_port || port == now.quorum_port;
        let close_first = moving.iter().any(|port| held(port.of(&next)));
        if close_first {
            let old: Vec<_> = {
                let mut l = shared.listeners.lock();
                moving.iter().map(|&port| l.slot(port).take()).collect()
            };
            for task in old {
                close_listener(task).await;
            }
        }
        let mut bound = Vec::new();
        for &port in &moving {
            match bind_now(p, &next.host, port, port.of(&next)) {
                Ok(listener) => bound.push((port, listener)),
                Err(e) if close_first => {
                    drop(bound);
                    for &port in &moving {
                        match bind_now(p, &now.host, port, port.of(&now)) {
                            Ok(listener) => {
                                let task = port.listen(shared, listener);
                                *shared.listeners.lock().slot(port) = Some(task);
                            }
                            Err(e) => tracing::error!("{e} (again, after a failed move)"),
                        }
                    }
                    return Err(e);
                }
                Err(e) => return Err(e),
            }
        }
        for (port, listener) in bound {
            info!(
                "{}: this member now listens on {}:{}",
                port.name(),
                next.host,
                port.of(&next)
            );
            let task = port.listen(shared, listener);
            let old = shared.listeners.lock().slot(port).replace(task);
            close_listener(old).await;
        }
        *shared.me.lock() = next;
        Ok(())
    }

    /// Queues `msg` for `to` on the port [`Message::channel`] names, never waiting
    /// (Action::Send's rules):
    /// - a notification goes on the election link, which connects if it must; a full
    ///   queue drops its oldest notification;
    /// - FOLLOWERINFO / OBSERVERINFO opens a new quorum connection to `to`'s quorum
    ///   port, closing any old one; if the connect fails, [`Input::Disconnected`];
    /// - any other quorum message goes on the current quorum connection to `to` and is
    ///   dropped if there is none; a full queue closes that connection and reports
    ///   [`Input::Disconnected`].
    ///
    /// A notification to a sid with no election link (no server line in the last
    /// [`PeerNet::set_members`], and no connection of its own recorded, ZAB-WIRE.md
    /// §1), a FOLLOWERINFO / OBSERVERINFO to a sid with no server line (no quorum
    /// address), or a message with no wire form is logged and dropped.
    ///
    /// What [`PeerNet::send_corked`] holds is sent first, so a peer gets every message
    /// in the order sent.
    pub fn send(&mut self, to: Sid, msg: Message) {
        self.flush();
        self.send_now(to, msg);
    }

    fn send_now(&self, to: Sid, msg: Message) {
        match msg.channel() {
            Channel::Election => election::send(&self.shared, to, &msg),
            Channel::Quorum => quorum::send(&self.shared, to, msg),
        }
    }

    /// Sends `msg` to `to` as [`PeerNet::send`] does, but a PROPOSAL, ACK, COMMIT,
    /// INFORM, PING, REQUEST or REVALIDATE waits, encoded, until [`PeerNet::flush`]
    /// sends it with the others for the same peer as one piece (one lock, one
    /// allocation, one write per peer and turn, made by the core itself when nothing is
    /// queued before it). Any other message flushes first, so each peer still gets
    /// every message in order.
    pub fn send_corked(&mut self, to: Sid, msg: Message) {
        if msg.is_steady() {
            self.cork.send(&self.shared, to, &msg);
        } else {
            self.send(to, msg);
        }
    }

    /// Sends what [`PeerNet::send_corked`] holds. The core calls it when it has
    /// executed its turn's effects, and before any effect other than a send, a reply
    /// or an append.
    pub fn flush(&mut self) {
        self.cork.flush(&self.shared);
    }

    /// Sends what the cork holds, then a handle on `peer`'s current quorum connection
    /// for the storage thread to send ACKs on once it has synced their txns
    /// ([`crate::zab::Action::AppendTxns`]'s `ack_to`): they go after everything sent
    /// to `peer` before, and nowhere if the connection closes first. `None` without a
    /// connection (the ACKs are lost, as a message sent then would be).
    pub fn ack_link(&mut self, peer: Sid) -> Option<quorum::AckLink> {
        self.flush();
        quorum::ack_link(&self.shared, peer)
    }

    /// Closes the quorum connection to `peer`, if any (Action::CloseConnection). Not
    /// reported back: the core asked for it.
    pub fn close(&self, peer: Sid) {
        quorum::close(&self.shared, peer);
    }

    /// The election connection to `peer` as it stands, if one is up.
    pub fn election_link(&self, peer: Sid) -> Option<LinkInfo> {
        let outbox = self.shared.peers.lock().links.get(&peer)?.outbox.clone();
        outbox.info()
    }

    /// The quorum connection with `peer` as it stands, if one is up.
    pub fn quorum_link(&self, peer: Sid) -> Option<quorum::QuorumLinkInfo> {
        self.shared.quorum.lock().info(peer)
    }

    /// This member's sid.
    pub fn my_sid(&self) -> Sid {
        self.shared.my_sid
    }
}

impl Drop for PeerNet {
    fn drop(&mut self) {
        // The tasks hold the shared state; aborting them ends every socket and lets it
        // go.
        self.shared.tasks.lock().abort_all();
        let mut listeners = self.shared.listeners.lock();
        for port in [Port::Election, Port::Quorum] {
            if let Some(task) = listeners.slot(port).take() {
                task.abort();
            }
        }
        drop(listeners);
        self.shared.quorum.lock().clear();
    }
}

impl PeerInbox {
    /// The next input, waiting for one (after the [`PeerNet`] is dropped, forever).
    /// Cancel-safe (usable in `select!`).
    pub async fn recv(&mut self) -> Input {
        loop {
            if let Some(input) = self.next_ready(false) {
                return input;
            }
            // Nothing queued: wait for the next event. The inbox holds the shared
            // state and its sender, so the channel never closes.
            match self.rx.recv().await {
                Some(e) => self.held = Some(e),
                None => std::future::pending().await,
            }
        }
    }

    /// The next input if one is ready now, without waiting: what [`PeerInbox::recv`]
    /// would return at once, in the same order (a loss first). The core drains the
    /// inbox with it after each `recv`, so a burst of ACKs or COMMITs (one per zxid, as
    /// ZooKeeper sends them) costs one turn of its loop, not one each.
    ///
    /// It stops (`None`, the message kept for `recv`) at the first message of a quorum
    /// connection the core has not been handed yet: admitting it makes that connection
    /// the one the core's sends go to ([`quorum::Slots::admit`]), and sends the core
    /// decided before it, not yet executed, were meant for the connection it replaced.
    pub fn try_recv(&mut self) -> Option<Input> {
        self.next_ready(true)
    }

    /// The next input from what is queued (a loss first, then the held event, then the
    /// channel), `None` when nothing is; with `stop_at_new_connection`, also `None` at
    /// the first message of an unadmitted quorum connection, which stays held.
    fn next_ready(&mut self, stop_at_new_connection: bool) -> Option<Input> {
        loop {
            if let Some(peer) = self.shared.lost.pop_first() {
                return Some(Input::Disconnected { peer });
            }
            let event = match self.held.take() {
                Some(e) => e,
                None => self.rx.try_recv().ok()?,
            };
            // A loss recorded while the event was queued happened before it.
            if !self.shared.lost.is_empty() {
                self.held = Some(event);
                continue;
            }
            if let Event::Quorum {
                from,
                generation,
                msg,
            } = event
            {
                // One lock for the check and the admission: this is every message.
                let mut quorum = self.shared.quorum.lock();
                if stop_at_new_connection && quorum.is_unadmitted(from, generation) {
                    drop(quorum);
                    self.held = Some(Event::Quorum {
                        from,
                        generation,
                        msg,
                    });
                    return None;
                }
                if quorum.admit(from, generation) {
                    return Some(Input::Message { from, msg });
                }
                continue;
            }
            if let Some(input) = self.admit(event) {
                return Some(input);
            }
        }
    }

    /// The input an event stands for, or `None` if it belongs to a quorum connection
    /// that was closed or replaced since (its bytes are lost with it, as Zab expects).
    fn admit(&mut self, event: Event) -> Option<Input> {
        match event {
            Event::Election { from, msg } => Some(Input::Message { from, msg }),
            Event::Quorum {
                from,
                generation,
                msg,
            } => self
                .shared
                .quorum
                .lock()
                .admit(from, generation)
                .then_some(Input::Message { from, msg }),
            Event::Closed { peer, generation } => self
                .shared
                .quorum
                .lock()
                .remove_if_current(peer, generation)
                .then_some(Input::Disconnected { peer }),
        }
    }
}

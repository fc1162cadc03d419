//! The election port, as ZooKeeper's QuorumCnxManager runs it (ZAB-WIRE.md §1): one
//! link per other member carrying notifications both ways over one TCP connection,
//! whichever side opened it.
//!
//! - Dialing: the initiator writes its initial message (V1: sid and its own election
//!   address) in one write. Only a connection opened by the larger sid survives: a
//!   smaller sid closes right after its initial message and waits for the larger one
//!   to dial back; a larger sid receiving one does so.
//! - A link connects when it has something to send, and after a break dials again
//!   with a back-off that doubles from [`PeerParams::reconnect_min`] to
//!   [`PeerParams::reconnect_max`], re-sending its last notification when nothing newer
//!   is queued (QuorumCnxManager re-sends it: a vote lost with a connection would
//!   otherwise wait for the election's own re-send timeout).
//! - Its queue holds one notification, the newest (ZooKeeper's send queue capacity):
//!   a vote supersedes the ones before it.
//! - Frames (int length + body) longer than PACKETMAXSIZE or not positive close the
//!   connection; a body that is not a notification is skipped, as ZooKeeper's
//!   WorkerReceiver skips it.
//! - Membership ([`super::PeerNet::set_members`]): a link dials its member's election
//!   address as the last server line gave it; when that changes, the connection made
//!   before is closed and the new address dialed at once. A sid with no server line
//!   that dials in is handled as QuorumCnxManager `handleConnection` handles any sid:
//!   kept if the tie-break says so, else dialed back at the address its initial
//!   message gave (the first, for V2). keel records that address in a link of its own
//!   (at most [`PeerParams::unlisted_links`] such), so the core's notifications reach
//!   the sid and the link redials it after a break. An initiator announcing
//!   OBSERVER_ID is refused: ZooKeeper invents a negative sid for it, which no core
//!   could address.
//!
//! [`PeerParams::reconnect_min`]: super::PeerParams::reconnect_min
//! [`PeerParams::reconnect_max`]: super::PeerParams::reconnect_max
//! [`PeerParams::unlisted_links`]: super::PeerParams::unlisted_links

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::{Buf, Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Notify};
use tokio::task::AbortHandle;
use tracing::{debug, info, warn};

use super::link::{self, invalid, PeerReader, PeerStream, PeerWriter, READ_CHUNK};
use super::{Event, LinkInfo, Shared};
use crate::zab::message::Message;
use crate::zab::wire::election::{
    decode_frame, decode_notification, encode_frame, encode_notification, incoming,
    initiator_keeps, ElectionAddress, Incoming, InitialMessage, MAX_ADDRESS_BYTES, OBSERVER_ID,
};
use crate::zab::Sid;

/// Notifications a link queues (QuorumCnxManager.SEND_CAPACITY).
const SEND_CAPACITY: usize = 1;

/// Commands the listener gives a link; a handful at most are ever outstanding.
const COMMANDS: usize = 4;

/// What the election listener hands a link.
pub(crate) enum Command {
    /// A connection the peer (the larger sid) opened and introduced: it replaces the
    /// link's connection, with the bytes read after the initial message.
    Adopt(PeerStream, BytesMut),
    /// The peer (the smaller sid) dialed and was closed: dial it back.
    DialBack,
}

/// A connection a link carries, and the [`Target::version`] it belongs to: a
/// connection made before the target last moved is closed.
struct Conn {
    stream: PeerStream,
    /// Bytes read after the initial message (an adopted connection).
    rest: BytesMut,
    version: u64,
}

/// Where a link dials.
struct Target {
    /// The peer's election address: its server line's, or the one its initial message
    /// gave; `None` while neither is known (a legacy initial message carries none).
    address: Option<ElectionAddress>,
    /// How many times a server line moved `address`.
    version: u64,
}

/// An election link as [`super::Peers`] holds it: its outbox and its task.
pub(crate) struct Link {
    pub(crate) outbox: Arc<Outbox>,
    task: AbortHandle,
}

impl Link {
    /// Starts the link to `peer`; it dials `address` once it has something to send.
    pub(crate) fn start(shared: &Arc<Shared>, peer: Sid, address: Option<ElectionAddress>) -> Link {
        let (outbox, commands) = Outbox::new(address);
        let outbox = Arc::new(outbox);
        let task = shared.spawn(run_link(shared.clone(), peer, outbox.clone(), commands));
        Link { outbox, task }
    }

    /// Ends the link: its task, its connection, its queued notification.
    pub(crate) fn stop(self) {
        self.task.abort();
    }
}

/// A link's outgoing side: its queue, the listener's commands, what is connected.
pub(crate) struct Outbox {
    queue: Mutex<VecDeque<Bytes>>,
    /// The frame last written, re-sent on a new connection with nothing newer queued.
    last: Mutex<Option<Bytes>>,
    ready: Notify,
    commands: mpsc::Sender<Command>,
    connected: Mutex<Option<(SocketAddr, SocketAddr)>>,
    /// Since when no connection is up (the link's start, or its last connection's
    /// end): a link of a sid without a server line may be evicted only once it had
    /// cnxTimeout to connect (again).
    idle_since: Mutex<Instant>,
    connections: AtomicU64,
    target: Mutex<Target>,
    /// Woken when a server line moves `target`.
    moved: Notify,
}

impl Outbox {
    /// An empty outbox dialing `address`, and the receiving end of its commands, for
    /// [`run_link`].
    fn new(address: Option<ElectionAddress>) -> (Outbox, mpsc::Receiver<Command>) {
        let (commands, rx) = mpsc::channel(COMMANDS);
        let outbox = Outbox {
            queue: Mutex::new(VecDeque::with_capacity(SEND_CAPACITY)),
            last: Mutex::new(None),
            ready: Notify::new(),
            commands,
            connected: Mutex::new(None),
            idle_since: Mutex::new(Instant::now()),
            connections: AtomicU64::new(0),
            target: Mutex::new(Target {
                address,
                version: 0,
            }),
            moved: Notify::new(),
        };
        (outbox, rx)
    }

    /// Points the link at a server line's election address; if that is a change, the
    /// connection made before is closed and `address` dialed at once. Whether it was.
    pub(crate) fn move_to(&self, address: ElectionAddress) -> bool {
        let mut t = self.target.lock();
        if t.address.as_ref() == Some(&address) {
            return false;
        }
        t.address = Some(address);
        t.version += 1;
        drop(t);
        self.moved.notify_one();
        true
    }

    /// Records the address an initial message gave, for a sid with no server line: the
    /// next dial goes there; the connection it came on is sorted by the tie-break.
    fn record(&self, address: ElectionAddress) {
        self.target.lock().address = Some(address);
    }

    fn version(&self) -> u64 {
        self.target.lock().version
    }

    /// Returns once the target has moved past `version`.
    async fn moved_since(&self, version: u64) {
        // `notify_one` keeps a permit when nobody waits, so a move between the check
        // and the wait still wakes it; a stale permit only re-checks.
        while self.version() == version {
            self.moved.notified().await;
        }
    }

    fn adopt(&self, stream: PeerStream, rest: BytesMut) -> Conn {
        Conn {
            stream,
            rest,
            version: self.version(),
        }
    }

    fn push(&self, frame: Bytes) {
        let mut q = self.queue.lock();
        while q.len() >= SEND_CAPACITY {
            q.pop_front();
        }
        q.push_back(frame);
        drop(q);
        self.ready.notify_one();
    }

    fn pop(&self) -> Option<Bytes> {
        self.queue.lock().pop_front()
    }

    fn is_empty(&self) -> bool {
        self.queue.lock().is_empty()
    }

    /// The live connection, if any.
    pub(crate) fn info(&self) -> Option<LinkInfo> {
        self.connected.lock().map(|(local, remote)| LinkInfo {
            local,
            remote,
            connections: self.connections.load(Ordering::Relaxed),
        })
    }
}

/// Queues a notification for `to` (see [`super::PeerNet::send`]).
pub(crate) fn send(shared: &Shared, to: Sid, msg: &Message) {
    let Message::Notification(n) = msg else {
        return;
    };
    let outbox = shared.peers.lock().links.get(&to).map(|l| l.outbox.clone());
    let Some(outbox) = outbox else {
        warn!("election: no server.{to} line; notification dropped");
        return;
    };
    match encode_frame(&encode_notification(n, &shared.static_config)) {
        Ok(frame) => outbox.push(frame),
        Err(e) => warn!("election: notification to {to} dropped: {e}"),
    }
}

/// Accepts election connections and sorts them by the tie-break; a TLS handshake
/// (sslQuorum) must be done within cnxTimeout.
pub(crate) async fn listen(shared: Arc<Shared>, listener: TcpListener) {
    let timeout = shared.params.cnx_timeout;
    link::listen(shared, listener, "election", timeout, introduce).await
}

/// Reads an incoming connection's initial message (within cnxTimeout) and hands the
/// connection to its link, or closes it and asks the link to dial back.
async fn introduce(
    shared: Arc<Shared>,
    mut stream: PeerStream,
    addr: SocketAddr,
) -> io::Result<()> {
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    let read = async {
        loop {
            if let Some((m, used)) = InitialMessage::decode(&buf).map_err(invalid)? {
                buf.advance(used);
                return Ok::<_, io::Error>(m);
            }
            // The whole message is 20 bytes plus the address; more is frames.
            if buf.len() > 20 + MAX_ADDRESS_BYTES + READ_CHUNK {
                return Err(invalid("initial message too long"));
            }
            if stream.read_buf(&mut buf).await? == 0 {
                return Err(invalid(format!(
                    "closed after {} bytes, inside the initial message",
                    buf.len()
                )));
            }
        }
    };
    let hello = tokio::time::timeout(shared.params.cnx_timeout, read)
        .await
        .map_err(|_| invalid("no initial message within cnxTimeout"))??;
    let sid = hello.sid;
    if sid == OBSERVER_ID {
        return Err(invalid("an observer with no sid (OBSERVER_ID)"));
    }
    let decision = incoming(shared.my_sid, sid);
    if decision == Incoming::OwnSid {
        return Err(invalid("the initiator has this member's own sid"));
    }
    if let Some(sasl) = shared.params.sasl.clone() {
        // QuorumCnxManager.handleConnection authenticates before the tie-break.
        let timeout = shared.params.cnx_timeout;
        let hosts = shared.authz_hosts();
        let kerberos = shared.params.kerberos.as_deref();
        let serve = super::quorum_auth::serve(
            &sasl,
            kerberos,
            &hosts,
            &mut stream,
            &mut buf,
            timeout,
            addr,
        );
        match serve.await {
            Ok(_) => {}
            // A smaller sid that does not authenticate closes right after its initial
            // message; it only wants the dial-back (where this member is the one that
            // authenticates), so that goes ahead when SASL is not required.
            Err(e)
                if e.kind() == io::ErrorKind::UnexpectedEof
                    && decision == Incoming::CloseAndConnectBack
                    && !sasl.settings.server_require => {}
            Err(e) => return Err(e),
        }
    }
    let outbox = link_for(&shared, sid, hello.addresses.first(), addr)?;
    match decision {
        Incoming::Keep => {
            debug!("election: server.{sid} connected from {addr}");
            if outbox
                .commands
                .try_send(Command::Adopt(stream, buf))
                .is_err()
            {
                return Err(invalid(format!("link to {sid} is busy")));
            }
        }
        Incoming::CloseAndConnectBack => {
            debug!("election: server.{sid} dialed from {addr}; the larger sid dials back");
            // A full command queue already holds a dial-back or a connection.
            let _ = outbox.commands.try_send(Command::DialBack);
        }
        Incoming::OwnSid => unreachable!("refused above"),
    }
    Ok(())
}

/// The link to `sid`, which just introduced itself from `from` giving `advertised`:
/// the one its server line made, or one recorded for a sid with none (the address
/// kept up to date as the sid gives it).
///
/// Errors: a sid with no server line, none recorded yet and
/// [`PeerParams::unlisted_links`](super::PeerParams::unlisted_links) such links
/// already.
fn link_for(
    shared: &Arc<Shared>,
    sid: Sid,
    advertised: Option<&ElectionAddress>,
    from: SocketAddr,
) -> io::Result<Arc<Outbox>> {
    let mut peers = shared.peers.lock();
    let listed = peers.members.contains_key(&sid);
    if let Some(link) = peers.links.get(&sid) {
        if let (false, Some(a)) = (listed, advertised) {
            link.outbox.record(a.clone());
        }
        return Ok(link.outbox.clone());
    }
    if peers.unlisted() >= shared.params.unlisted_links {
        // Make room by dropping the link idle longest among those with no connection
        // for cnxTimeout and none handed to them (a sid that introduced itself once and
        // went away; not one whose connection just broke, or whose new one waits in its
        // command queue); without one, the newcomer is refused, so the links stay
        // bounded.
        let idle = peers
            .links
            .iter()
            .filter(|(s, l)| {
                !peers.members.contains_key(s)
                    && l.outbox.connected.lock().is_none()
                    && l.outbox.commands.capacity() == COMMANDS
                    && l.outbox.idle_since.lock().elapsed() >= shared.params.cnx_timeout
            })
            .min_by_key(|(_, l)| *l.outbox.idle_since.lock())
            .map(|(s, _)| *s);
        let Some(idle) = idle else {
            return Err(invalid(format!(
                "sid {sid} has no server line and {} such links are connected or connecting",
                shared.params.unlisted_links
            )));
        };
        info!("election: server.{idle} has no server line and no connection; its link is dropped for server.{sid}");
        if let Some(l) = peers.links.remove(&idle) {
            l.stop();
        }
    }
    info!("election: server.{sid} has no server line; introduced itself from {from} as {advertised:?}");
    let link = Link::start(shared, sid, advertised.cloned());
    let outbox = link.outbox.clone();
    peers.links.insert(sid, link);
    Ok(outbox)
}

/// Dials `peer` at the link's target and sends the initial message: the connection
/// when this member's sid is the larger, else `None` once the message is sent (the
/// peer dials back).
///
/// Errors: no address is known, the connect or the write fails.
async fn dial(shared: &Shared, peer: Sid, outbox: &Outbox) -> io::Result<Option<Conn>> {
    let (address, version) = {
        let t = outbox.target.lock();
        (t.address.clone(), t.version)
    };
    let Some(to) = address else {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "no election address known",
        ));
    };
    let mut stream = link::connect(shared, &to.host, to.port, shared.params.cnx_timeout).await?;
    let me = {
        let me = shared.me.lock();
        ElectionAddress {
            host: me.host.clone(),
            port: me.election_port,
        }
    };
    let hello = InitialMessage::v1(shared.my_sid, me)
        .encode()
        .map_err(invalid)?;
    stream.write_all(&hello).await?;
    let mut rest = BytesMut::new();
    if let Some(sasl) = &shared.params.sasl {
        // QuorumCnxManager.startConnection authenticates before the tie-break too.
        let who = format!("server.{peer} at {}:{}", to.host, to.port);
        super::quorum_auth::learn(
            sasl,
            shared.params.kerberos.as_deref(),
            &mut stream,
            &mut rest,
            shared.params.cnx_timeout,
            &to.host,
            &who,
        )
        .await?;
    }
    if initiator_keeps(shared.my_sid, peer) {
        Ok(Some(Conn {
            stream,
            rest,
            version,
        }))
    } else {
        let _ = stream.shutdown().await;
        Ok(None)
    }
}

/// How a link's connections ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// It broke or the peer closed it.
    Broke,
    /// A server line moved the peer: the new address is to be dialed now.
    Moved,
}

/// One link's life: connect when there is something to say, carry notifications both
/// ways, take the connections the listener adopts, dial again after a break or at
/// once when the peer's address moves. Ends only when aborted ([`Link::stop`]).
async fn run_link(
    shared: Arc<Shared>,
    peer: Sid,
    outbox: Arc<Outbox>,
    mut commands: mpsc::Receiver<Command>,
) {
    let params = shared.params.clone();
    let mut backoff = params.reconnect_min;
    let mut redial = false;
    loop {
        // Idle: wait for a reason to connect.
        let mut adopted = None;
        if !redial && outbox.is_empty() {
            tokio::select! {
                cmd = commands.recv() => match cmd {
                    Some(Command::Adopt(s, rest)) => adopted = Some(outbox.adopt(s, rest)),
                    Some(Command::DialBack) => {}
                    None => return,
                },
                _ = outbox.ready.notified() => {}
            }
        }
        let mut conn = match adopted {
            Some(c) => Some(c),
            None => match dial(&shared, peer, &outbox).await {
                Ok(Some(c)) => Some(c),
                Ok(None) => {
                    // The smaller sid: the peer dials back within cnxTimeout.
                    tokio::select! {
                        cmd = wait_adopt(&mut commands) => {
                            cmd.map(|(s, rest)| outbox.adopt(s, rest))
                        }
                        _ = tokio::time::sleep(params.cnx_timeout) => None,
                    }
                }
                // A refused TLS peer (sslQuorum: its certificate or ours) is worth a
                // line each time; a member that is down is not.
                Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                    warn!("election: connection to server.{peer} refused: {e}");
                    None
                }
                Err(e) => {
                    debug!("election: cannot connect to server.{peer}: {e}");
                    None
                }
            },
        };
        loop {
            match conn.take() {
                Some(c) => {
                    let started = Instant::now();
                    let end = run_connections(&shared, peer, &outbox, &mut commands, c).await;
                    redial = outbox.last.lock().is_some();
                    if end == End::Moved {
                        backoff = params.reconnect_min;
                        redial = true;
                        break;
                    }
                    // One that lived long was healthy: dial again at once. One the peer
                    // drops at once (it does not know us, say) must not make a loop.
                    if started.elapsed() >= params.reconnect_max {
                        backoff = params.reconnect_min;
                        break;
                    }
                }
                None => redial = true,
            }
            // Wait before dialing again, taking a connection the peer opens meanwhile;
            // a peer asking to be dialed back is up, and a moved one is elsewhere: dial
            // it now.
            let wait = backoff;
            backoff = (backoff * 2).min(params.reconnect_max);
            tokio::select! {
                cmd = commands.recv() => match cmd {
                    Some(Command::Adopt(s, rest)) => conn = Some(outbox.adopt(s, rest)),
                    Some(Command::DialBack) => {
                        redial = true;
                        break;
                    }
                    None => return,
                },
                _ = outbox.moved.notified() => {
                    backoff = params.reconnect_min;
                    redial = true;
                    break;
                }
                _ = tokio::time::sleep(wait) => break,
            }
        }
    }
}

/// The next connection the listener adopts, skipping dial-back requests (already
/// connected or connecting); `None` once the listener is gone.
async fn wait_adopt(commands: &mut mpsc::Receiver<Command>) -> Option<(PeerStream, BytesMut)> {
    loop {
        match commands.recv().await? {
            Command::Adopt(s, rest) => return Some((s, rest)),
            Command::DialBack => {}
        }
    }
}

/// Carries a connection, and each newer one the listener adopts in its place, until
/// one breaks or the peer's address moves past the one it was made for.
async fn run_connections(
    shared: &Shared,
    peer: Sid,
    outbox: &Outbox,
    commands: &mut mpsc::Receiver<Command>,
    mut conn: Conn,
) -> End {
    loop {
        let Conn {
            stream,
            rest,
            version,
        } = conn;
        let (Ok(local), Ok(remote)) = (stream.local_addr(), stream.peer_addr()) else {
            return End::Broke;
        };
        outbox.connections.fetch_add(1, Ordering::Relaxed);
        *outbox.connected.lock() = Some((local, remote));
        debug!("election: connected to server.{peer} at {remote}");
        let (rd, wr) = stream.into_split();
        let next = tokio::select! {
            r = read_frames(shared, peer, remote, rd, rest) => {
                if let Err(e) = r {
                    warn!("election connection to server.{peer} at {remote}: {e}; closed");
                }
                Err(End::Broke)
            }
            w = write_frames(outbox, wr) => {
                if let Err(e) = w {
                    info!("election connection to server.{peer} at {remote}: write failed: {e}");
                }
                Err(End::Broke)
            }
            c = wait_adopt(commands) => match c {
                Some((s, rest)) => Ok(outbox.adopt(s, rest)),
                None => Err(End::Broke),
            },
            _ = outbox.moved_since(version) => {
                info!("election: server.{peer} moved; closing the connection at {remote}");
                Err(End::Moved)
            }
        };
        *outbox.connected.lock() = None;
        *outbox.idle_since.lock() = Instant::now();
        match next {
            Ok(c) => conn = c,
            Err(end) => return end,
        }
    }
}

/// Writes queued notifications, the last one first again if nothing newer waits.
async fn write_frames(outbox: &Outbox, mut wr: PeerWriter) -> io::Result<()> {
    let resend = outbox
        .is_empty()
        .then(|| outbox.last.lock().clone())
        .flatten();
    if let Some(frame) = resend {
        wr.write_all(&frame).await?;
    }
    loop {
        let Some(first) = outbox.pop() else {
            outbox.ready.notified().await;
            continue;
        };
        let mut last = first.clone();
        link::write_batch(&mut wr, first, || {
            let next = outbox.pop();
            if let Some(b) = &next {
                last = b.clone();
            }
            next
        })
        .await?;
        *outbox.last.lock() = Some(last);
    }
}

/// Reads frames and passes each notification to the inbox; `Ok` at a clean end.
///
/// Errors: a frame length out of bounds, the connection closing inside a frame, a read
/// error.
async fn read_frames(
    shared: &Shared,
    peer: Sid,
    remote: SocketAddr,
    mut rd: PeerReader,
    mut buf: BytesMut,
) -> io::Result<()> {
    loop {
        while let Some((body, used)) = decode_frame(&buf).map_err(invalid)? {
            match decode_notification(body) {
                Ok(n) => {
                    let event = Event::Election {
                        from: peer,
                        msg: Message::Notification(n),
                    };
                    if shared.events.send(event).await.is_err() {
                        return Ok(());
                    }
                }
                Err(e) => {
                    warn!("election: skipped a message from server.{peer} at {remote}: {e}")
                }
            }
            buf.advance(used);
        }
        buf.reserve(READ_CHUNK);
        if rd.read_buf(&mut buf).await? == 0 {
            if buf.is_empty() {
                debug!("election: server.{peer} at {remote} closed the connection");
                return Ok(());
            }
            return Err(invalid(format!(
                "closed inside a frame ({} bytes of it read)",
                buf.len()
            )));
        }
    }
}

//! The quorum port (ZAB-WIRE.md §3, §4): raw QuorumPackets on a TCP stream between a
//! learner and its leader. A member holds at most one quorum connection per peer, in
//! either direction, numbered by a generation:
//! - outgoing: a learner's FOLLOWERINFO / OBSERVERINFO opens a new one to the peer's
//!   quorum port (closing the old one: the core asked for a fresh start);
//! - incoming: the peer's sid is the LearnerInfo of its first packet, which must be
//!   FOLLOWERINFO or OBSERVERINFO (LearnerHandler drops any other); a newer one
//!   from the same sid replaces the old, which the core hears of as
//!   [`Input::Disconnected`](crate::zab::Input::Disconnected) before the new
//!   connection's first message; what the core sends that sid until it is handed that
//!   message was meant for the old connection and is dropped with it (`Slot::admitted`).
//!   Any sid but our own is accepted, server line or not:
//!   ZooKeeper's LearnerCnxAcceptor takes every learner, and a server joining by
//!   reconfig syncs as a non-voting follower before the config that adds it commits
//!   (whether it counts is the core's to say).
//!
//! The inbox passes on only what the current generation said, so a closed or replaced
//! connection's late packets never reach the core. A connection that breaks, a connect
//! that fails, a packet that does not decode or passes `jute.maxbuffer`, and a queue
//! that fills all end the connection and report it; a close the core asked for does
//! not.

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, info, warn};

use super::link::{self, invalid, PeerReader, PeerStream, PeerWriter, READ_CHUNK};
use super::{Event, Shared};
use crate::zab::message::Message;
use crate::zab::wire::packet::QuorumPacket;
use crate::zab::wire::quorum::{
    encode_message, from_packet, kind_name, to_packet, Inbound, Side, SNAP_SIGNATURE,
};
use crate::zab::wire::snap_frame::SnapScan;
use crate::zab::Sid;

/// The current quorum connection to a peer.
struct Slot {
    generation: u64,
    /// The peer's end, for a connection it made to us (a learner's).
    remote: Option<SocketAddr>,
    /// Which end this member is: PING's data differs.
    side: Side,
    /// The outgoing queue.
    queue: QueueTx,
    /// Dropped to close the connection at once, queued bytes or not.
    _close: oneshot::Sender<()>,
    /// Whether the core has been handed this connection's first message. Until then
    /// what it sends `peer` was meant for the connection this one replaced (a learner
    /// that reconnected before the core heard the old one go: a SNAP written in steps
    /// finishes meanwhile, say) and is dropped, as it would have been with the old
    /// connection; a learner whose new connection got it first would read a SNAP or a
    /// PROPOSAL where LEADERINFO belongs and start over. A connection this member
    /// opened is its core's from the start.
    admitted: bool,
}

/// One quorum connection's figures (ZooKeeper's LearnerHandler: `packetsReceived`,
/// `packetsSent`, `requestsReceived`, `lastZxid`), for the leader's `observers` command.
#[derive(Debug)]
pub(crate) struct LinkCounters {
    received: AtomicU64,
    sent: AtomicU64,
    requests: AtomicU64,
    /// The zxid of the last packet sent (written or queued) with one above 0; -1
    /// before.
    last_zxid: AtomicI64,
    /// Packets queued and not yet written (a SNAP's packet, stream and signature count
    /// apart).
    queued_packets: AtomicUsize,
}

/// A quorum connection as [`super::PeerNet::quorum_link`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuorumLinkInfo {
    /// The peer's end, for a connection it made (a learner's, on the leader).
    pub remote: Option<SocketAddr>,
    /// Packets read from it, its first (LEARNERINFO) included.
    pub packets_received: u64,
    /// Packets sent to it (written at once or queued).
    pub packets_sent: u64,
    /// REQUEST packets it forwarded.
    pub requests: u64,
    /// The zxid of the last packet sent to it with one, -1 before.
    pub last_zxid: i64,
    /// Packets and bytes queued to it, not yet written.
    pub queued_packets: usize,
    pub queued_bytes: usize,
}

/// A plaintext connection's socket, for writes made without its writer task when
/// nothing is queued before them: the core's corked batches ([`Cork`]) and the storage
/// thread's ACKs ([`AckLink`]), which then go out without a wake-up or a task switch
/// in between.
/// TLS connections have none: their writes stay the writer task's.
#[derive(Default)]
struct Direct {
    /// The socket's write half while the connection is current (taken when its slot
    /// goes, so nothing is written on a connection the core closed).
    socket: parking_lot::Mutex<Option<Arc<OwnedWriteHalf>>>,
    /// Held around every write on the socket, by the writer task and by direct
    /// writers, so that no two writes interleave; and by a direct writer from its
    /// check of `unwritten` until what it could not write is queued.
    write: parking_lot::Mutex<()>,
    /// Bytes queued and not yet written: a direct write goes only when there are none
    /// (it would overtake them).
    unwritten: AtomicUsize,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.queue.direct.socket.lock().take();
    }
}

/// The bytes a queued part of `len` bytes counts for against a queue of `limit` bytes:
/// a part larger than half the limit ([`oversized`]: the stream of a SNAP of a big
/// tree) counts for none, so the NEWLEADER and PROPOSALs after it still fit while it
/// is written. It is let only into an empty queue, so a queue holds at most one such
/// part besides `limit` bytes. Counting it whole closed every SNAP past the limit at
/// the next packet: a learner behind a 1,000,000-znode tree (a 100 MB SNAP) was sent it
/// again and again. (Half, not the whole limit: a SNAP's packet and signature go with
/// its stream, and a stream just under the limit must not fill the queue with them.)
fn charge(len: usize, limit: usize) -> usize {
    if oversized(len, limit) {
        0
    } else {
        len
    }
}

/// Whether a part of `len` bytes is larger than half a queue of `limit` bytes.
fn oversized(len: usize, limit: usize) -> bool {
    len > limit / 2
}

impl Slot {
    /// Queues one message, the bytes `parts` in order (one part, or a SNAP's three),
    /// unless that would take the queue past `limit` bytes (see [`charge`] for a part
    /// larger than half the limit, which only an empty queue takes); `false` if full.
    fn push<const N: usize>(&self, parts: [Bytes; N], limit: usize) -> bool {
        let zxid = parts.first().and_then(|b| packet_zxid(b));
        // Under the write lock: a direct writer whose bytes the socket took only in
        // part queues the rest before it lets go, and no message may be queued in
        // between (it would land inside the direct writer's packet on the wire).
        let _write = self.queue.direct.write.lock();
        self.queue.push_locked(parts, 1, zxid, limit)
    }

    /// A [`Cork`]'s batch for this connection, `messages` messages encoded back to
    /// back, the last one's zxid `last_zxid`: written by the core itself when nothing
    /// is queued before it ([`QueueTx::write_or_push`]); `false` if the queue is full.
    /// Every write's path crosses a cork two or three times (a follower's REQUEST, the
    /// PROPOSAL, the COMMIT), and a hand-off to the writer task was a task switch each
    /// time (issue 16: 1 x 1 set p50 about 10 % lower through a follower, measured in
    /// d4e5542's commit message).
    fn write_corked(
        &self,
        batch: Bytes,
        messages: u64,
        last_zxid: Option<i64>,
        limit: usize,
    ) -> bool {
        self.queue.write_or_push(batch, messages, last_zxid, limit)
    }

    /// This connection's queue, for writes from another thread ([`AckLink`]).
    fn ack_queue(&self, limit: usize) -> AckQueue {
        AckQueue {
            limit,
            queue: self.queue.clone(),
        }
    }
}

/// One quorum connection, for the storage thread to send the ACKs of the txns it has
/// just synced on it ([`crate::zab::Action::AppendTxns`]'s `ack_to`, issue 16): written
/// on the socket at once when nothing is queued before them (plaintext), else queued
/// behind what is, as the core's messages are. Either way after everything the core
/// queued on the connection before it made the handle, and never on a connection that
/// has closed or been replaced since (those ACKs are lost with it, as queued messages
/// are).
pub struct AckLink {
    shared: Arc<Shared>,
    peer: Sid,
    generation: u64,
    queue: AckQueue,
}

/// A connection's outgoing queue as its pushers hold it: the core ([`Slot`]) and the
/// storage thread ([`AckQueue`]).
#[derive(Clone)]
struct QueueTx {
    tx: mpsc::UnboundedSender<Bytes>,
    /// The bytes queued as [`charge`] counts them, which bound the queue.
    queued: Arc<AtomicUsize>,
    /// Writes made without the writer task ([`Cork`], [`AckLink`]).
    direct: Arc<Direct>,
    counters: Arc<LinkCounters>,
}

impl QueueTx {
    /// Writes `bytes` (`messages` messages encoded back to back, the last one's zxid
    /// `last_zxid`) on the socket at once when nothing is queued before them and the
    /// connection is plaintext, so they go out without a wake-up of the writer task;
    /// else, and for what the socket did not take, queues them behind what is, as
    /// [`QueueTx::push_locked`] does. False when the queue is full.
    fn write_or_push(
        &self,
        bytes: Bytes,
        messages: u64,
        last_zxid: Option<i64>,
        limit: usize,
    ) -> bool {
        // Held from the check of what is unwritten until what the socket did not take
        // is queued: no other write, direct or queued, comes in between.
        let _write = self.direct.write.lock();
        let socket = self.direct.socket.lock().clone();
        let Some(socket) = socket.filter(|_| self.direct.unwritten.load(Ordering::Acquire) == 0)
        else {
            // Bytes queued before these, TLS, or a connection gone (whose queue drops
            // them): behind what is queued.
            return self.push_locked([bytes], messages, last_zxid, limit);
        };
        // A full socket (or a broken one, which the writer task reports): what it did
        // not take waits in the queue, ahead of anything queued after.
        let written = socket.try_write(&bytes).unwrap_or(0);
        if written < bytes.len() {
            return self.push_locked([bytes.slice(written..)], messages, last_zxid, limit);
        }
        self.counters.sent.fetch_add(messages, Ordering::Relaxed);
        if let Some(zxid) = last_zxid.filter(|&z| z > 0) {
            self.counters.last_zxid.store(zxid, Ordering::Relaxed);
        }
        true
    }

    /// Queues one message, the bytes `parts` in order (one part, or a SNAP's three),
    /// `messages` messages encoded back to back, the last one's zxid `last_zxid` (for
    /// the link's figures), unless that would take the queue past `limit` bytes (see
    /// [`charge`] for a part larger than half the limit, which only an empty queue
    /// takes); `false` if full. The caller holds `direct.write`.
    fn push_locked<const N: usize>(
        &self,
        parts: [Bytes; N],
        messages: u64,
        last_zxid: Option<i64>,
        limit: usize,
    ) -> bool {
        let big = parts.iter().any(|b| oversized(b.len(), limit));
        if big && self.counters.queued_packets.load(Ordering::Acquire) > 0 {
            return false;
        }
        let charged: usize = parts.iter().map(|b| charge(b.len(), limit)).sum();
        let before = self.queued.fetch_add(charged, Ordering::AcqRel);
        if !big && before.saturating_add(charged) > limit {
            self.queued.fetch_sub(charged, Ordering::AcqRel);
            return false;
        }
        self.counters.sent.fetch_add(messages, Ordering::Relaxed);
        self.counters
            .queued_packets
            .fetch_add(parts.len(), Ordering::Relaxed);
        if let Some(zxid) = last_zxid.filter(|&z| z > 0) {
            self.counters.last_zxid.store(zxid, Ordering::Relaxed);
        }
        for bytes in parts {
            // Counted before it is queued: a direct writer that finds none unwritten
            // finds nothing queued.
            self.direct
                .unwritten
                .fetch_add(bytes.len(), Ordering::AcqRel);
            // A closed queue means the connection ended; its end is reported by its
            // task.
            let _ = self.tx.send(bytes);
        }
        true
    }
}

/// What an [`AckLink`] writes through: its connection's queue and socket.
struct AckQueue {
    /// The queue's limit, bytes.
    limit: usize,
    queue: QueueTx,
}

impl std::fmt::Debug for AckLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AckLink")
            .field("peer", &self.peer)
            .field("generation", &self.generation)
            .finish()
    }
}

impl AckLink {
    /// Whether `other` is the same connection.
    pub fn same(&self, other: &AckLink) -> bool {
        Arc::ptr_eq(&self.queue.queue.direct, &other.queue.queue.direct)
    }

    /// Sends `acks`: `messages` packets encoded back to back, the last one's zxid
    /// `last_zxid`. Called from the storage thread; never blocks on the peer. A queue
    /// that is full closes the connection, as the core's sends do.
    pub fn send(&self, acks: Bytes, messages: u64, last_zxid: i64) {
        if !self.queue.send(acks, messages, last_zxid) {
            let mut slots = self.shared.quorum.lock();
            if slots.is_current(self.peer, self.generation) {
                drop_full(&self.shared, &mut slots, self.peer);
            }
        }
    }
}

impl AckQueue {
    /// [`AckLink::send`]; false when the queue is full.
    fn send(&self, acks: Bytes, messages: u64, last_zxid: i64) -> bool {
        self.queue
            .write_or_push(acks, messages, Some(last_zxid), self.limit)
    }
}

/// The writer's end of a connection's queue.
struct QueueRx {
    rx: mpsc::UnboundedReceiver<Bytes>,
    queued: Arc<AtomicUsize>,
    /// The queue's limit, bytes (what [`charge`] counted a message for).
    limit: usize,
    counters: Arc<LinkCounters>,
    direct: Arc<Direct>,
}

impl QueueRx {
    fn taken(&self, b: Bytes) -> Bytes {
        self.queued
            .fetch_sub(charge(b.len(), self.limit), Ordering::AcqRel);
        self.counters.queued_packets.fetch_sub(1, Ordering::Relaxed);
        b
    }

    async fn recv(&mut self) -> Option<Bytes> {
        let b = self.rx.recv().await?;
        Some(self.taken(b))
    }

    fn try_recv(&mut self) -> Option<Bytes> {
        let b = self.rx.try_recv().ok()?;
        Some(self.taken(b))
    }
}

/// Every peer's current quorum connection.
#[derive(Default)]
pub(crate) struct Slots {
    slots: HashMap<Sid, Slot>,
    next_generation: u64,
}

/// A new connection's ends, for the task that runs it.
struct Installed {
    generation: u64,
    rx: QueueRx,
    close: oneshot::Receiver<()>,
    replaced: bool,
}

impl Slots {
    /// Whether `generation` is `peer`'s current connection.
    pub(crate) fn is_current(&self, peer: Sid, generation: u64) -> bool {
        self.slots
            .get(&peer)
            .is_some_and(|s| s.generation == generation)
    }

    /// Whether `peer` has a connection.
    fn has(&self, peer: Sid) -> bool {
        self.slots.contains_key(&peer)
    }

    /// How many connections belong to sids not in `members`.
    fn count_outside(&self, members: &BTreeSet<Sid>) -> usize {
        self.slots.keys().filter(|s| !members.contains(s)).count()
    }

    /// Whether `generation` is `peer`'s current connection; if it is, the core is
    /// being handed its message, and what it sends `peer` from now on is this
    /// connection's ([`Slot::admitted`]).
    pub(crate) fn admit(&mut self, peer: Sid, generation: u64) -> bool {
        match self.slots.get_mut(&peer) {
            Some(s) if s.generation == generation => {
                s.admitted = true;
                true
            }
            _ => false,
        }
    }

    /// Whether `generation` is `peer`'s current connection and the core has not been
    /// handed a message of it yet ([`Slots::admit`] would make it the core's).
    pub(crate) fn is_unadmitted(&self, peer: Sid, generation: u64) -> bool {
        self.slots
            .get(&peer)
            .is_some_and(|s| s.generation == generation && !s.admitted)
    }

    /// Forgets `peer`'s connection if it is still `generation`; whether it was.
    pub(crate) fn remove_if_current(&mut self, peer: Sid, generation: u64) -> bool {
        let current = self.is_current(peer, generation);
        if current {
            self.slots.remove(&peer);
        }
        current
    }

    /// `peer`'s current connection's figures, if it has one.
    pub(crate) fn info(&self, peer: Sid) -> Option<QuorumLinkInfo> {
        let s = self.slots.get(&peer)?;
        let c = &s.queue.counters;
        Some(QuorumLinkInfo {
            remote: s.remote,
            packets_received: c.received.load(Ordering::Relaxed),
            packets_sent: c.sent.load(Ordering::Relaxed),
            requests: c.requests.load(Ordering::Relaxed),
            last_zxid: c.last_zxid.load(Ordering::Relaxed),
            queued_packets: c.queued_packets.load(Ordering::Relaxed),
            queued_bytes: s.queue.queued.load(Ordering::Relaxed),
        })
    }

    /// Closes every connection.
    pub(crate) fn clear(&mut self) {
        self.slots.clear();
    }

    /// Makes a new connection `peer`'s current one, the old one closing; `first`
    /// goes into its queue.
    /// `remote`: the peer's end of a connection it made, whose first packet was read.
    /// `limit`: the queue's bytes ([`super::PeerParams::queue_bytes`]).
    fn install(
        &mut self,
        peer: Sid,
        side: Side,
        first: Option<Bytes>,
        remote: Option<SocketAddr>,
        limit: usize,
    ) -> Installed {
        self.next_generation += 1;
        let generation = self.next_generation;
        let (tx, rx) = mpsc::unbounded_channel();
        let queued = Arc::new(AtomicUsize::new(0));
        let counters = Arc::new(LinkCounters {
            received: AtomicU64::new(u64::from(remote.is_some())),
            sent: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            last_zxid: AtomicI64::new(-1),
            queued_packets: AtomicUsize::new(0),
        });
        let (close_tx, close) = oneshot::channel();
        let direct = Arc::new(Direct::default());
        let slot = Slot {
            generation,
            remote,
            side,
            queue: QueueTx {
                tx,
                queued: queued.clone(),
                direct: direct.clone(),
                counters: counters.clone(),
            },
            _close: close_tx,
            admitted: remote.is_none(),
        };
        if let Some(b) = first {
            slot.push([b], limit);
        }
        let old = self.slots.insert(peer, slot);
        let rx = QueueRx {
            rx,
            queued,
            limit,
            counters,
            direct,
        };
        Installed {
            generation,
            rx,
            close,
            replaced: old.is_some(),
        }
    }
}

fn encode(msg: &Message, side: Side) -> Option<Bytes> {
    // Room for the packet header (type, zxid, data length, authinfo count) and the txn
    // of a PROPOSAL: growing from empty reallocated three times per packet.
    let data = match msg {
        Message::Proposal { txn, .. } => txn.len(),
        _ => 0,
    };
    let mut b = BytesMut::with_capacity(64 + data);
    match encode_message(msg, side, &mut b) {
        Ok(()) => Some(b.freeze()),
        Err(e) => {
            warn!("quorum: {msg:?} has no wire form ({e}); dropped");
            None
        }
    }
}

/// A SNAP as it goes on the stream (see [`encode_message`]): its packet, the stream
/// itself, not copied (a 1,000,000-znode stream is about 200 MB: copying it held the
/// core and the queue's lock for a fifth of a second), and the signature.
fn encode_snap(msg: &Message, side: Side) -> Option<[Bytes; 3]> {
    let Message::Snap { zxid, snapshot } = msg else {
        return None;
    };
    let mut header = BytesMut::with_capacity(64);
    match to_packet(msg, side) {
        Ok(packet) => packet.encode(&mut header),
        Err(e) => {
            warn!("quorum: SNAP at {zxid:#x} has no wire form ({e}); dropped");
            return None;
        }
    }
    let mut signature = BytesMut::with_capacity(4 + SNAP_SIGNATURE.len());
    signature.put_i32(SNAP_SIGNATURE.len() as i32);
    signature.put_slice(SNAP_SIGNATURE.as_bytes());
    Some([header.freeze(), snapshot.clone(), signature.freeze()])
}

/// Queues a quorum message for `to` (see [`super::PeerNet::send`]).
pub(crate) fn send(shared: &Arc<Shared>, to: Sid, msg: Message) {
    if matches!(
        msg,
        Message::FollowerInfo { .. } | Message::ObserverInfo { .. }
    ) {
        return open(shared, to, &msg);
    }
    let mut slots = shared.quorum.lock();
    if slots.queue(to, &msg, shared.params.queue_bytes) == Queued::Full {
        drop_full(shared, &mut slots, to);
    }
}

/// Never waits for one peer, never skips a message inside a stream: a connection whose
/// queue is full goes, and the core hears it broke.
fn drop_full(shared: &Shared, slots: &mut Slots, to: Sid) {
    warn!(
        "quorum: the queue to server.{to} is full ({} bytes); closing its connection",
        shared.params.queue_bytes
    );
    slots.slots.remove(&to);
    shared.lost.insert(to);
}

/// A corked batch is written (or queued) once it holds this many bytes (and one
/// message, which may be larger): a turn of many PROPOSALs goes out in pieces of about
/// this size rather than all at its end.
const CORK_BYTES: usize = 64 << 10;

/// The broadcast's messages for each peer's current quorum connection, encoded back
/// to back and written (or queued) as one piece when the core has executed its turn's
/// effects ([`Cork::flush`]): one lock, one allocation, one write for a turn's
/// PROPOSALs, ACKs or COMMITs, where each message took its own. The bytes on the wire
/// are the same messages, one per zxid, as ZooKeeper's.
#[derive(Default)]
pub(crate) struct Cork {
    /// One per peer written to this turn, in that order.
    pending: Vec<Corked>,
}

/// What a [`Cork`] holds for one peer.
struct Corked {
    to: Sid,
    /// The connection the messages are for.
    generation: u64,
    side: Side,
    bytes: BytesMut,
    messages: u64,
    last_zxid: Option<i64>,
}

impl Cork {
    /// Adds `msg` (one of [`Message::is_steady`]) for `to`'s current connection; dropped, as
    /// [`Slots::queue`] drops it, when there is none the core was handed.
    pub(crate) fn send(&mut self, shared: &Arc<Shared>, to: Sid, msg: &Message) {
        let i = match self.pending.iter().position(|c| c.to == to) {
            Some(i) => i,
            None => {
                let slots = shared.quorum.lock();
                let Some(slot) = slots.slots.get(&to).filter(|s| s.admitted) else {
                    debug!("quorum: a message for server.{to}, which has no connection, dropped");
                    return;
                };
                self.pending.push(Corked {
                    to,
                    generation: slot.generation,
                    side: slot.side,
                    bytes: BytesMut::with_capacity(4096),
                    messages: 0,
                    last_zxid: None,
                });
                self.pending.len() - 1
            }
        };
        let c = &mut self.pending[i];
        let before = c.bytes.len();
        if let Err(e) = encode_message(msg, c.side, &mut c.bytes) {
            c.bytes.truncate(before);
            warn!("quorum: {msg:?} has no wire form ({e}); dropped");
            return;
        }
        c.messages += 1;
        c.last_zxid = packet_zxid(&c.bytes[before..]).or(c.last_zxid);
        if c.bytes.len() >= CORK_BYTES {
            self.flush(shared);
        }
    }

    /// Writes what the cork holds, each peer's as one piece on the connection it was
    /// meant for: on the socket at once when nothing is queued before it and the
    /// connection is plaintext, else behind what is ([`Slot::write_corked`]); dropped
    /// if that connection was replaced or closed since, as it would have been lost with
    /// it.
    pub(crate) fn flush(&mut self, shared: &Arc<Shared>) {
        if self.pending.is_empty() {
            return;
        }
        let limit = shared.params.queue_bytes;
        let mut slots = shared.quorum.lock();
        for c in self.pending.drain(..) {
            let Some(slot) = slots
                .slots
                .get(&c.to)
                .filter(|s| s.generation == c.generation)
            else {
                continue;
            };
            if !slot.write_corked(c.bytes.freeze(), c.messages, c.last_zxid, limit) {
                drop_full(shared, &mut slots, c.to);
            }
        }
    }
}

/// The zxid of the encoded quorum packet at the start of `packet`, for the link's
/// figures: it follows the type (QuorumPacket: int type, long zxid).
fn packet_zxid(packet: &[u8]) -> Option<i64> {
    packet
        .get(4..12)
        .map(|z| i64::from_be_bytes(z.try_into().expect("8 bytes")))
}

/// What became of a message for a peer ([`Slots::queue`]).
#[derive(Debug, PartialEq, Eq)]
enum Queued {
    /// In the peer's queue.
    Yes,
    /// Lost as with a connection that broke (Action::Send): no connection, one the
    /// core has not been handed yet ([`Slot::admitted`]), or no wire form.
    Dropped,
    /// The queue is full: the connection must go.
    Full,
}

impl Slots {
    /// Queues `msg` on `to`'s current connection, whose queue holds `limit` bytes.
    fn queue(&self, to: Sid, msg: &Message, limit: usize) -> Queued {
        let Some(slot) = self.slots.get(&to) else {
            return Queued::Dropped;
        };
        if !slot.admitted {
            let kind = msg.packet_type().and_then(kind_name).unwrap_or("message");
            debug!("quorum: {kind} for server.{to}'s replaced connection dropped");
            return Queued::Dropped;
        }
        let queued = if matches!(msg, Message::Snap { .. }) {
            let Some(parts) = encode_snap(msg, slot.side) else {
                return Queued::Dropped;
            };
            slot.push(parts, limit)
        } else {
            let Some(bytes) = encode(msg, slot.side) else {
                return Queued::Dropped;
            };
            slot.push([bytes], limit)
        };
        if queued {
            Queued::Yes
        } else {
            Queued::Full
        }
    }
}

/// A learner's first packet: a new connection to `to`'s quorum port.
fn open(shared: &Arc<Shared>, to: Sid, msg: &Message) {
    let address = {
        let peers = shared.peers.lock();
        peers
            .members
            .get(&to)
            .map(|m| (m.host.clone(), m.quorum_port))
    };
    let Some((host, port)) = address else {
        warn!("quorum: no server.{to} line; {msg:?} dropped");
        return;
    };
    let Some(bytes) = encode(msg, Side::Learner) else {
        return;
    };
    // The core replaces the connection itself: an older loss is no news to it.
    shared.lost.remove(to);
    let installed = shared.quorum.lock().install(
        to,
        Side::Learner,
        Some(bytes),
        None,
        shared.params.queue_bytes,
    );
    let s = shared.clone();
    shared.spawn(async move {
        let Installed {
            generation,
            rx,
            mut close,
            ..
        } = installed;
        let connect = link::connect(&s, &host, port, s.params.quorum_connect_timeout);
        let stream = tokio::select! {
            _ = &mut close => return,
            r = connect => r,
        };
        let mut rest = BytesMut::new();
        let stream = match (stream, &s.params.sasl) {
            (Ok(mut stream), Some(sasl)) => {
                // Learner.connectToLeader authenticates before FOLLOWERINFO.
                let who = format!("server.{to} at {host}:{port}");
                let timeout = s.params.quorum_connect_timeout;
                let kerberos = s.params.kerberos.as_deref();
                let learn = super::quorum_auth::learn(
                    sasl,
                    kerberos,
                    &mut stream,
                    &mut rest,
                    timeout,
                    &host,
                    &who,
                );
                let done = tokio::select! {
                    _ = &mut close => return,
                    r = learn => r,
                };
                done.map(|()| stream)
            }
            (stream, _) => stream,
        };
        match stream {
            Ok(stream) => run(&s, to, generation, stream, rest, rx, close).await,
            Err(e) => {
                info!("quorum: cannot connect to server.{to} at {host}:{port}: {e}");
                let _ = s
                    .events
                    .send(Event::Closed {
                        peer: to,
                        generation,
                    })
                    .await;
            }
        }
    });
}

/// A handle on `to`'s current connection for the storage thread's ACKs, if it has one
/// the core was handed (see [`AckLink`]).
pub(crate) fn ack_link(shared: &Arc<Shared>, to: Sid) -> Option<AckLink> {
    let slots = shared.quorum.lock();
    let slot = slots.slots.get(&to).filter(|s| s.admitted)?;
    Some(AckLink {
        shared: shared.clone(),
        peer: to,
        generation: slot.generation,
        queue: slot.ack_queue(shared.params.queue_bytes),
    })
}

/// Closes `peer`'s connection, unreported (Action::CloseConnection).
pub(crate) fn close(shared: &Shared, peer: Sid) {
    shared.lost.remove(peer);
    shared.quorum.lock().slots.remove(&peer);
}

/// Accepts quorum connections; each is known by its first packet. A TLS handshake
/// (sslQuorum) must be done within the quorum connect timeout (tickTime x initLimit).
pub(crate) async fn listen(shared: Arc<Shared>, listener: TcpListener) {
    let timeout = shared.params.quorum_connect_timeout;
    link::listen(shared, listener, "quorum", timeout, accept).await
}

/// Reads a learner's first packet, installs the connection under its sid and runs it.
async fn accept(shared: Arc<Shared>, mut stream: PeerStream, addr: SocketAddr) -> io::Result<()> {
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    if let Some(sasl) = &shared.params.sasl {
        // LearnerHandler.run authenticates before reading the first packet.
        let timeout = shared.params.quorum_connect_timeout;
        let hosts = shared.authz_hosts();
        let kerberos = shared.params.kerberos.as_deref();
        super::quorum_auth::serve(sasl, kerberos, &hosts, &mut stream, &mut buf, timeout, addr)
            .await?;
    }
    let read = async {
        loop {
            if let Some((p, used)) = QuorumPacket::decode(&buf, shared.limits).map_err(invalid)? {
                buf.advance(used);
                return Ok::<_, io::Error>(p);
            }
            buf.reserve(READ_CHUNK);
            if stream.read_buf(&mut buf).await? == 0 {
                return Err(invalid(format!(
                    "closed after {} bytes, inside the first packet",
                    buf.len()
                )));
            }
        }
    };
    let packet = tokio::time::timeout(shared.params.quorum_connect_timeout, read)
        .await
        .map_err(|_| invalid("no first packet in time"))??;
    let first_kind = packet.kind;
    let msg = match from_packet(packet).map_err(invalid)? {
        Inbound::Message(m @ (Message::FollowerInfo { .. } | Message::ObserverInfo { .. })) => m,
        _ => {
            return Err(invalid(format!(
                "first packet is {}, not FOLLOWERINFO or OBSERVERINFO",
                kind_name(first_kind).unwrap_or("of no known type")
            )))
        }
    };
    let (Message::FollowerInfo { sid, .. } | Message::ObserverInfo { sid, .. }) = msg else {
        unreachable!("matched above");
    };
    if sid == shared.my_sid {
        return Err(invalid(format!(
            "a learner with this member's own sid {sid}"
        )));
    }
    let members: BTreeSet<Sid> = shared.peers.lock().members.keys().copied().collect();
    if shared.params.unlisted_links == 0 && !members.contains(&sid) {
        // A static config (reconfig off): no server joins, so a learner of an
        // unlisted sid is refused here, with its reason logged.
        return Err(invalid(format!("sid {sid} has no server line")));
    }
    debug!("quorum: server.{sid} connected from {addr}");
    let installed = {
        let mut slots = shared.quorum.lock();
        // Learners without a server line (joining servers) are bounded as their
        // election links are: each holds a send queue of up to the quorum queue limit.
        if !members.contains(&sid)
            && !slots.has(sid)
            && slots.count_outside(&members) >= shared.params.unlisted_links
        {
            return Err(invalid(format!(
                "sid {sid} has no server line and {} such learners are connected",
                shared.params.unlisted_links
            )));
        }
        let installed = slots.install(
            sid,
            Side::Leader,
            None,
            Some(addr),
            shared.params.queue_bytes,
        );
        if installed.replaced {
            shared.lost.insert(sid);
        }
        installed
    };
    let Installed {
        generation,
        rx,
        close,
        ..
    } = installed;
    let event = Event::Quorum {
        from: sid,
        generation,
        msg,
    };
    if shared.events.send(event).await.is_err() {
        return Ok(());
    }
    run(&shared, sid, generation, stream, buf, rx, close).await;
    Ok(())
}

/// Carries connection `generation` to `peer` until it breaks (reported) or is closed
/// or replaced here (not reported).
async fn run(
    shared: &Shared,
    peer: Sid,
    generation: u64,
    stream: PeerStream,
    rest: BytesMut,
    mut rx: QueueRx,
    mut close: oneshot::Receiver<()>,
) {
    let remote = stream
        .peer_addr()
        .map_or_else(|e| format!("(address unknown: {e})"), |a| a.to_string());
    let (rd, wr) = stream.into_split();
    let counters = rx.counters.clone();
    let wr = match wr {
        link::Either::Plain(wr) => {
            let wr = Arc::new(wr);
            // Only while the connection is current (its slot takes it back when it
            // goes, under the same lock): a slot gone already keeps none.
            let slots = shared.quorum.lock();
            if slots.is_current(peer, generation) {
                *rx.direct.socket.lock() = Some(wr.clone());
            }
            drop(slots);
            Writer::Plain(wr)
        }
        tls => Writer::Queued(tls),
    };
    tokio::select! {
        biased;
        _ = &mut close => return,
        r = read_packets(shared, peer, generation, rd, rest, &counters) => match r {
            Ok(()) => info!("quorum: server.{peer} at {remote} closed the connection"),
            Err(e) => warn!("quorum connection to server.{peer} at {remote}: {e}; closed"),
        },
        w = write_packets(wr, &mut rx) => {
            if let Err(e) = w {
                info!("quorum connection to server.{peer} at {remote}: write failed: {e}");
            }
        }
    }
    let _ = shared.events.send(Event::Closed { peer, generation }).await;
}

/// A connection's writing end: a plaintext socket shared with direct writers
/// ([`Direct`]), or a TLS one that only the writer task writes.
enum Writer {
    Plain(Arc<OwnedWriteHalf>),
    Queued(PeerWriter),
}

async fn write_packets(wr: Writer, rx: &mut QueueRx) -> io::Result<()> {
    let direct = rx.direct.clone();
    match wr {
        Writer::Queued(mut wr) => {
            while let Some(first) = rx.recv().await {
                let (batch, big) = link::gather(first, || rx.try_recv());
                let len = batch.len() + big.as_ref().map_or(0, |b| b.len());
                wr.write_all(&batch).await?;
                if let Some(b) = big {
                    wr.write_all(&b).await?;
                }
                direct.unwritten.fetch_sub(len, Ordering::AcqRel);
            }
        }
        Writer::Plain(wr) => {
            while let Some(first) = rx.recv().await {
                let (batch, big) = link::gather(first, || rx.try_recv());
                write_shared(&wr, &direct, &batch).await?;
                if let Some(b) = &big {
                    write_shared(&wr, &direct, b).await?;
                }
            }
        }
    }
    Ok(())
}

/// Writes `buf` on a socket that direct writers share: each write under the write lock,
/// and its bytes no longer counted unwritten once written.
async fn write_shared(wr: &OwnedWriteHalf, direct: &Direct, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        let written = {
            let _write = direct.write.lock();
            wr.try_write(buf)
        };
        match written {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                direct.unwritten.fetch_sub(n, Ordering::AcqRel);
                buf = &buf[n..];
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => wr.writable().await?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The read buffer a SNAP's stream starts with (address space; only what arrives is
/// touched): a 1,000,000-znode stream of 100-byte znodes is 193 MB.
const SNAP_RESERVE_BYTES: usize = 256 << 20;

/// Reads packets (and a SNAP's stream) and passes each message to the inbox; `Ok` at a
/// clean end.
///
/// Errors: a packet that does not decode or passes the bounds, a type the core has no
/// message for, the connection closing inside a packet, a read error.
async fn read_packets(
    shared: &Shared,
    peer: Sid,
    generation: u64,
    mut rd: PeerReader,
    mut buf: BytesMut,
    counters: &LinkCounters,
) -> io::Result<()> {
    // A SNAP packet's zxid and the walk over the stream after it, while one arrives.
    let mut snap: Option<(u64, SnapScan)> = None;
    loop {
        loop {
            let msg = if let Some((zxid, scan)) = snap.as_mut() {
                let Some(end) = scan.scan(&buf).map_err(invalid)? else {
                    break;
                };
                let snapshot = buf.split_to(end.used).freeze().slice(..end.stream_len);
                // What came after the stream, in a buffer of its own: the stream's
                // (hundreds of MB) is then the snapshot's alone, freed with it, not
                // kept as this connection's read buffer.
                buf = BytesMut::from(&buf[..]);
                let zxid = *zxid;
                snap = None;
                Message::Snap { zxid, snapshot }
            } else {
                let Some((packet, used)) =
                    QuorumPacket::decode(&buf, shared.limits).map_err(invalid)?
                else {
                    break;
                };
                buf.advance(used);
                match from_packet(packet).map_err(invalid)? {
                    Inbound::Message(m) => m,
                    Inbound::Snap { zxid } => {
                        info!(
                            peer,
                            zxid = format!("0x{zxid:x}"),
                            "SNAP from the leader: receiving its stream"
                        );
                        let max = shared.params.max_snapshot_bytes;
                        let scan = SnapScan::new(shared.limits, max);
                        snap = Some((zxid, scan));
                        // Room for a large stream at once: growing by doubling copied a
                        // 193 MB stream twice over and faulted in 512 MB of fresh pages
                        // (the transfer took 0.3 s, where loopback moves it in 0.07 s).
                        // Pages not written are never touched.
                        buf.reserve(SNAP_RESERVE_BYTES.min(max));
                        continue;
                    }
                }
            };
            counters.received.fetch_add(1, Ordering::Relaxed);
            if matches!(msg, Message::Request { .. }) {
                counters.requests.fetch_add(1, Ordering::Relaxed);
            }
            let event = Event::Quorum {
                from: peer,
                generation,
                msg,
            };
            if shared.events.send(event).await.is_err() {
                return Ok(());
            }
        }
        buf.reserve(READ_CHUNK);
        if rd.read_buf(&mut buf).await? == 0 {
            if buf.is_empty() && snap.is_none() {
                return Ok(());
            }
            return Err(invalid(format!(
                "closed inside a packet ({} bytes of it read)",
                buf.len()
            )));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connected plaintext socket pair: this end's write half as a connection's
    /// writer would hold it, and the peer's end.
    async fn socket_pair() -> (Arc<OwnedWriteHalf>, tokio::net::TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (ours, theirs) = tokio::join!(tokio::net::TcpStream::connect(addr), listener.accept());
        let (_, wr) = ours.unwrap().into_split();
        (Arc::new(wr), theirs.unwrap().0)
    }

    async fn read_exactly(peer: &mut tokio::net::TcpStream, n: usize) -> Vec<u8> {
        let mut buf = vec![0u8; n];
        tokio::io::AsyncReadExt::read_exact(peer, &mut buf)
            .await
            .unwrap();
        buf
    }

    /// A direct writer whose bytes the socket took in part queues the rest under the
    /// write lock; a message the core queues meanwhile waits for the lock, so it goes
    /// after that rest, never inside the direct writer's packet.
    #[test]
    fn a_message_queued_during_a_direct_write_waits_behind_its_rest() {
        let mut slots = Slots::default();
        let mut installed = slots.install(1, Side::Learner, None, None, 1 << 20);
        let slot = slots.slots.get(&1).expect("installed");
        let rest = Bytes::from(vec![3u8; 7]);
        let ping = Bytes::from(vec![9u8; 16]);
        let (locked_tx, locked_rx) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                // The storage thread: it holds the write lock, its write was partial,
                // and it queues the rest a moment later.
                let _write = slot.queue.direct.write.lock();
                locked_tx.send(()).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(50));
                assert!(slot.queue.push_locked([rest.clone()], 1, Some(7), 1 << 20));
            });
            locked_rx.recv().unwrap();
            // The core queues a PING meanwhile.
            assert!(slot.push([ping.clone()], 1 << 20));
        });
        let queued: Vec<Bytes> = std::iter::from_fn(|| installed.rx.try_recv()).collect();
        assert_eq!(queued, [rest, ping]);
    }

    /// The storage thread's ACKs go straight onto the socket when nothing is queued
    /// before them, behind the queue when something is (the writer task then writes
    /// both in order), and nowhere once the connection is gone.
    #[tokio::test]
    async fn acks_from_another_thread_never_overtake_what_is_queued() {
        let mut slots = Slots::default();
        let mut installed = slots.install(1, Side::Learner, None, None, 1 << 20);
        let (wr, mut peer) = socket_pair().await;
        let slot = slots.slots.get(&1).expect("installed");
        *slot.queue.direct.socket.lock() = Some(wr.clone());
        let acks = slot.ack_queue(1 << 20);
        let ack = |n: u8| Bytes::from(vec![n; 20]);

        // Nothing queued: written at once, no queue, no writer task.
        assert!(acks.send(ack(1), 1, 1));
        assert!(installed.rx.try_recv().is_none(), "not queued");
        assert_eq!(read_exactly(&mut peer, 20).await, vec![1; 20]);

        // A PING the core queued and the writer has not written yet: the ACK waits
        // behind it.
        assert!(slot.push([Bytes::from(vec![9u8; 16])], 1 << 20));
        assert!(acks.send(ack(2), 1, 2));
        let queued: Vec<Bytes> = std::iter::from_fn(|| installed.rx.try_recv()).collect();
        assert_eq!(queued, [Bytes::from(vec![9u8; 16]), ack(2)]);
        for b in &queued {
            write_shared(&wr, &slot.queue.direct, b).await.unwrap();
        }
        let mut want = vec![9u8; 16];
        want.extend([2u8; 20]);
        assert_eq!(read_exactly(&mut peer, 36).await, want);
        assert_eq!(slot.queue.direct.unwritten.load(Ordering::Acquire), 0);

        // Written once more straight away, then the connection goes: nothing after.
        assert!(acks.send(ack(3), 1, 3));
        assert_eq!(read_exactly(&mut peer, 20).await, vec![3; 20]);
        assert_eq!(
            slot.queue.counters.sent.load(Ordering::Relaxed),
            4,
            "1 PING, 3 ACKs"
        );
        slots.slots.remove(&1);
        acks.send(ack(4), 1, 4);
        drop((wr, installed));
        let mut rest = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut peer, &mut rest)
            .await
            .unwrap();
        assert!(rest.is_empty(), "{} bytes after the close", rest.len());
    }

    /// The core's corked batch goes straight onto the socket when nothing is queued
    /// before it, and behind a SNAP the writer task has not written yet (never ahead of
    /// it or inside it).
    #[tokio::test]
    async fn a_corked_batch_is_written_at_once_unless_something_is_queued_before_it() {
        let mut slots = Slots::default();
        let mut installed = slots.install(1, Side::Leader, None, None, 1 << 20);
        let (wr, mut peer) = socket_pair().await;
        let slot = slots.slots.get(&1).expect("installed");
        *slot.queue.direct.socket.lock() = Some(wr.clone());
        let batch = |n: u8| Bytes::from(vec![n; 48]);

        assert!(slot.write_corked(batch(1), 2, Some(0x1_0000_0002), 1 << 20));
        assert!(installed.rx.try_recv().is_none(), "not queued");
        assert_eq!(read_exactly(&mut peer, 48).await, vec![1; 48]);

        let snap = Message::Snap {
            zxid: 0x1_0000_0002,
            snapshot: Bytes::from(vec![7u8; 100]),
        };
        assert_eq!(slots.queue(1, &snap, 1 << 20), Queued::Yes);
        let slot = slots.slots.get(&1).expect("installed");
        assert!(slot.write_corked(batch(2), 1, Some(0x1_0000_0003), 1 << 20));
        let queued: Vec<Bytes> = std::iter::from_fn(|| installed.rx.try_recv()).collect();
        assert_eq!(queued.len(), 4, "the SNAP's three parts, then the batch");
        assert_eq!(queued[3], batch(2));
        assert_eq!(queued[1].len(), 100, "the stream");
        for b in &queued {
            write_shared(&wr, &slot.queue.direct, b).await.unwrap();
        }
        let total: usize = queued.iter().map(Bytes::len).sum();
        let got = read_exactly(&mut peer, total).await;
        assert_eq!(&got[total - 48..], &[2u8; 48][..]);
        assert_eq!(slot.queue.direct.unwritten.load(Ordering::Acquire), 0);

        // Nothing queued again: straight onto the socket.
        assert!(slot.write_corked(batch(3), 1, Some(0x1_0000_0004), 1 << 20));
        assert!(installed.rx.try_recv().is_none(), "not queued");
        assert_eq!(read_exactly(&mut peer, 48).await, vec![3; 48]);
        assert_eq!(
            slot.queue.counters.sent.load(Ordering::Relaxed),
            5,
            "4 messages in 3 batches, 1 SNAP"
        );
        assert_eq!(
            slot.queue.counters.last_zxid.load(Ordering::Relaxed),
            0x1_0000_0004,
            "the last batch's, written directly"
        );
    }

    #[test]
    fn a_snap_past_the_limit_goes_into_an_empty_queue_and_packets_after_it_still_fit() {
        let mut slots = Slots::default();
        let mut installed = slots.install(2, Side::Leader, None, None, 100);
        let slot = slots.slots.get(&2).expect("installed");
        let snap = Bytes::from(vec![0u8; 1000]);
        let packet = || Bytes::from(vec![1u8; 40]);
        assert!(slot.push([snap.clone()], 100), "an empty queue takes it");
        assert!(slot.push([packet()], 100), "a packet after it fits");
        assert!(slot.push([packet()], 100), "and another");
        assert!(!slot.push([packet()], 100), "past the limit: full");
        assert!(
            !slot.push([snap.clone()], 100),
            "another big one: only into an empty queue"
        );
        assert_eq!(installed.rx.try_recv().map(|b| b.len()), Some(1000));
        assert_eq!(installed.rx.try_recv().map(|b| b.len()), Some(40));
        assert_eq!(installed.rx.try_recv().map(|b| b.len()), Some(40));
        assert_eq!(slot.queue.queued.load(Ordering::Acquire), 0);
        assert!(slot.push([snap], 100), "empty again");
    }

    #[test]
    fn what_the_core_sends_a_learner_before_it_hears_of_its_new_connection_is_dropped() {
        let mut slots = Slots::default();
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let ping = Message::Ping {
            zxid: 5,
            touched: Vec::new(),
        };
        let mut old = slots.install(2, Side::Leader, None, Some(addr), 1000);
        assert!(
            slots.admit(2, old.generation),
            "the core takes its FOLLOWERINFO"
        );
        assert_eq!(slots.queue(2, &ping, 1000), Queued::Yes);
        assert!(old.rx.try_recv().is_some());
        // The learner connects again: the new connection replaces the old one before
        // the core hears of it. What the core sends meanwhile was the old one's.
        let mut new = slots.install(2, Side::Leader, None, Some(addr), 1000);
        assert!(new.replaced);
        let snap = Message::Snap {
            zxid: 5,
            snapshot: Bytes::from_static(b"stream"),
        };
        assert_eq!(slots.queue(2, &snap, 1000), Queued::Dropped);
        assert_eq!(slots.queue(2, &ping, 1000), Queued::Dropped);
        assert!(
            new.rx.try_recv().is_none(),
            "nothing reached the new connection"
        );
        assert!(!slots.admit(2, old.generation), "the old one is gone");
        // Its first message handed to the core: from now on sends are its.
        assert!(slots.admit(2, new.generation));
        assert_eq!(slots.queue(2, &ping, 1000), Queued::Yes);
        assert!(new.rx.try_recv().is_some());
        // A connection this member opens is its core's from the start.
        let mut out = slots.install(3, Side::Learner, None, None, 1000);
        assert_eq!(slots.queue(3, &ping, 1000), Queued::Yes);
        assert!(out.rx.try_recv().is_some());
    }

    #[test]
    fn a_snap_is_queued_as_its_packet_its_stream_uncopied_and_its_signature() {
        let mut slots = Slots::default();
        let mut installed = slots.install(2, Side::Leader, None, None, 100);
        let slot = slots.slots.get(&2).expect("installed");
        let snapshot = Bytes::from(vec![7u8; 1000]);
        let msg = Message::Snap {
            zxid: 0x1_0000_0005,
            snapshot: snapshot.clone(),
        };
        let parts = encode_snap(&msg, Side::Leader).expect("a SNAP");
        assert!(slot.push(parts, 100), "an empty queue takes it");
        assert!(
            slot.push([Bytes::from(vec![1u8; 40])], 100),
            "a packet after it fits"
        );
        let got: Vec<Bytes> = std::iter::from_fn(|| installed.rx.try_recv()).collect();
        assert_eq!(got.len(), 4);
        assert_eq!(
            got[1].as_ptr(),
            snapshot.as_ptr(),
            "the stream is not copied"
        );
        // The same bytes as the message written whole.
        let mut whole = BytesMut::new();
        encode_message(&msg, Side::Leader, &mut whole).unwrap();
        assert_eq!(got[..3].concat(), whole.to_vec());
        assert_eq!(slot.queue.queued.load(Ordering::Acquire), 0);
        assert_eq!(
            slot.queue.counters.sent.load(Ordering::Relaxed),
            2,
            "two messages"
        );
    }
}

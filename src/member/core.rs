//! The core task: the one task that owns the state machine ([`Server`]). It takes client
//! inputs and admin calls one at a time, in arrival order, and routes what the state
//! machine queues: packets to each connection in order, operations to the storage
//! thread. Being the only owner is what keeps ordering simple.

use super::now_ms;
use crate::admin::core_handle::CoreCall;
use crate::admin::quorum::EnsembleView;
use crate::admin::{fourlw, snapshot};
use crate::config::Config;
use crate::net::client::ToCore;
use crate::server::{Input, Outbound, Server, StorageOp};
use bytes::BytesMut;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch, Semaphore};

/// How often the core checks session expiry and container reaping, ms.
const TICK_MS: u64 = 100;

/// The core task: owns the state machine, applies inputs in arrival order, routes output
/// to connections and storage; returns when the client channel or the storage thread
/// closes. `admin_rx` brings the admin surface's calls. A snapshot chunk is serialised only with a permit from
/// `chunk_slots`, which the storage thread returns once the chunk is written.
pub async fn run(
    server: Server,
    mut rx: mpsc::Receiver<ToCore>,
    mut admin_rx: mpsc::Receiver<CoreCall>,
    mut durable: watch::Receiver<i64>,
    storage: mpsc::Sender<StorageOp>,
    chunk_slots: Arc<Semaphore>,
    config: Arc<Config>,
) {
    // The state machine is never dropped: the process exits right after this task
    // stops, and freeing a tree of millions of znodes would only delay a clean stop.
    let mut server = std::mem::ManuallyDrop::new(server);
    let server: &mut Server = &mut server;
    let mut routes: rustc_hash::FxHashMap<u64, mpsc::Sender<Outbound>> =
        rustc_hash::FxHashMap::default();
    let mut tick = tokio::time::interval(Duration::from_millis(TICK_MS));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        let snapshotting = server.snapshot_in_progress();
        tokio::select! {
            msg = rx.recv() => {
                let Some(msg) = msg else { return };
                handle(server, &mut routes, &config, msg);
                // Batch what is already queued before routing output.
                for _ in 0..1024 {
                    match rx.try_recv() {
                        Ok(msg) => handle(server, &mut routes, &config, msg),
                        Err(_) => break,
                    }
                }
            }
            Some(call) = admin_rx.recv() => call.run(server, &config, None),
            changed = durable.changed() => {
                if changed.is_err() {
                    return;
                }
                let zxid = *durable.borrow_and_update();
                server.handle(now_ms(), Input::Durable { zxid });
            }
            _ = tick.tick() => server.handle(now_ms(), Input::Tick),
            // While a snapshot is being written, idle moments go to it, as fast as the
            // storage thread writes its chunks.
            slot = chunk_slots.acquire(), if snapshotting => {
                if let Ok(slot) = slot {
                    slot.forget();
                    server.snapshot_step();
                }
            }
        }
        // One snapshot step per turn, so a busy server still finishes its snapshot.
        if server.snapshot_in_progress() {
            if let Ok(slot) = chunk_slots.try_acquire() {
                slot.forget();
                server.snapshot_step();
            }
        }
        for op in server.drain_storage() {
            if storage.send(op).await.is_err() {
                return;
            }
        }
        route(&mut routes, server.drain_outbox());
    }
}

/// Routes the state machine's output to the connections: one message per connection
/// per turn, its packets joined in order (the connection writes them with one syscall
/// anyway), then Close if asked. A connection that is not reading its replies (its
/// queue is full) is closed rather than waited for.
pub(crate) fn route(
    routes: &mut rustc_hash::FxHashMap<u64, mpsc::Sender<Outbound>>,
    outbox: impl IntoIterator<Item = (u64, Outbound)>,
) {
    let mut batches: Vec<(u64, BytesMut, bool)> = Vec::new();
    let mut slot: rustc_hash::FxHashMap<u64, usize> = rustc_hash::FxHashMap::default();
    for (conn, out) in outbox {
        let i = *slot.entry(conn).or_insert_with(|| {
            batches.push((conn, BytesMut::new(), false));
            batches.len() - 1
        });
        match out {
            // Nothing goes out after a Close.
            Outbound::Packet(p) if !batches[i].2 => batches[i].1.extend_from_slice(&p),
            Outbound::Packet(_) => {}
            Outbound::Close => batches[i].2 = true,
        }
    }
    for (conn, packets, close) in batches {
        let Some(tx) = routes.get(&conn) else {
            continue;
        };
        let mut sent = true;
        if !packets.is_empty() {
            sent = tx.try_send(Outbound::Packet(packets.freeze())).is_ok();
        }
        if sent && close {
            sent = tx.try_send(Outbound::Close).is_ok();
        }
        if !sent {
            tracing::warn!(
                conn,
                "client is not reading its replies; closing the connection"
            );
            routes.remove(&conn);
        } else if close {
            routes.remove(&conn);
        }
    }
}

/// What a core task feeds its clients' inputs to: the state machine itself
/// (standalone), or an ensemble member's replica, which also needs to hear of them.
pub(crate) trait ClientSink {
    /// One client input at `now_ms`.
    fn input(&mut self, now_ms: i64, input: Input);
    /// The state machine, for the four-letter words.
    fn server_mut(&mut self) -> &mut Server;
    /// An ensemble member's Zab side for the four-letter words; `None` standalone.
    fn ensemble_view(&self) -> Option<EnsembleView> {
        None
    }
}

impl ClientSink for Server {
    fn input(&mut self, now_ms: i64, input: Input) {
        self.handle(now_ms, input);
    }
    fn server_mut(&mut self) -> &mut Server {
        self
    }
}

/// One message from a client connection.
pub(crate) fn handle(
    sink: &mut impl ClientSink,
    routes: &mut rustc_hash::FxHashMap<u64, mpsc::Sender<Outbound>>,
    config: &Config,
    msg: ToCore,
) {
    match msg {
        ToCore::Register {
            conn,
            addr,
            tx,
            ids,
        } => {
            routes.insert(conn, tx);
            sink.input(now_ms(), Input::Connected { conn, addr });
            if !ids.is_empty() {
                sink.input(now_ms(), Input::Authenticated { conn, ids });
            }
        }
        ToCore::Input(input) => {
            if let Input::Disconnected { conn } = &input {
                routes.remove(conn);
            }
            sink.input(now_ms(), input);
        }
        ToCore::Inputs(inputs) => {
            let now = now_ms();
            for input in inputs {
                sink.input(now, input);
            }
        }
        ToCore::FourLetter { word, peer, reply } => {
            let ensemble = sink.ensemble_view();
            let server = sink.server_mut();
            // ZooKeeper counts a known word as a 4-byte packet received before it runs
            // it, listed or not (NIOServerCnxn.checkFourLetterWord: packetReceived(4)).
            server.stats.packets_received += 1;
            server.stats.metrics.bytes_received += 4;
            let text = if config.allows_four_letter_word(&word) {
                match word.as_str() {
                    "srst" => server.reset_stats(),
                    "crst" => server.reset_connection_stats(),
                    _ => {}
                }
                let snap = snapshot::build_for_word(server, config, ensemble.as_ref(), peer);
                fourlw::render(&word, &snap).unwrap_or_default()
            } else {
                fourlw::not_whitelisted(&word)
            };
            let _ = reply.send(text);
        }
    }
}

//! One keel member process, wired up: what ZooKeeper's ZooKeeperServerMain (and, for an
//! ensemble, QuorumPeerMain / QuorumPeer) do at start. [`run`] binds the admin endpoints,
//! recovers the store ([`recover`]), starts the storage thread, spawns the core task
//! ([`core`]) that owns the state machine, and then lets the client ports (src/net)
//! accept connections until shutdown. `net` moves bytes, `admin` renders answers, and
//! this module is the only one that knows them both. [`replica`] is an ensemble
//! member's sans-I/O heart: the Zab core and the state machine glued together, for the
//! peer runtime (and tests, and the simulation) to drive.

pub mod core;
pub mod dynamic_config;
pub mod ensemble;
pub mod recover;
pub mod replica;
pub mod snap_send;

use crate::admin::core_handle::CoreHandle;
use crate::config::Config;
use crate::net::busy_poll::BusyPoll;
use crate::net::client::{self, ClientParams, ClientPorts};
use crate::net::persist;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, watch, Semaphore};

/// Capacity of the channel into the core task; a full channel makes connections wait
/// (back-pressure), like ZooKeeper's globalOutstandingLimit.
const CORE_QUEUE: usize = 8192;
/// Admin calls (AdminServer commands, metrics scrapes) waiting for the core task.
const ADMIN_QUEUE: usize = 64;
/// Storage operations queued for the storage thread; a full queue makes the core wait.
const STORAGE_QUEUE: usize = 65536;
/// Snapshot chunks (about 1 MiB each) handed to the storage thread and not yet written.
/// Without this bound the core serialises a whole snapshot (hundreds of MB for a
/// million znodes) into the storage queue faster than RocksDB takes it, and that peak
/// stays in the process's RSS as freed-but-retained heap long after it is written.
const SNAPSHOT_CHUNKS_IN_FLIGHT: usize = 2;

/// Wall-clock time in ms since the Unix epoch: the time input of the state machine.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Runs the server described by `config` until `shutdown` resolves.
///
/// An ensemble zoo.cfg (more than one participant, or `standaloneEnabled=false`) runs
/// this process as one member of it ([`ensemble::run`]).
///
/// Errors: a client port
/// cannot be bound; a TLS setting is bad (the message names the `ssl.*` key); the store
/// is refused (see [`recover::recover`]).
pub async fn run(
    config: Config,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    if config.is_distributed() {
        return ensemble::run(config, shutdown).await;
    }
    let config = Arc::new(config);
    let tls = client::tls_acceptor(&config)?;
    // Like ZooKeeper, bind the metrics endpoint and the AdminServer before loading data.
    let admin = crate::admin::Endpoints::bind(&config).await?;
    let (server, storage) = recover::recover(&config)?;
    release_freed_memory();
    let ports = ClientPorts::bind(&config, tls).await?;
    let (storage_tx, storage_rx) = mpsc::channel(STORAGE_QUEUE);
    let (durable_tx, durable_rx) = watch::channel(server.last_zxid);
    let purge = persist::Purge {
        retain: config.autopurge_snap_retain_count as usize,
        interval_hours: config.autopurge_purge_interval_hours,
    };
    let storage_stats = server.stats.metrics.storage.clone();
    let chunk_slots = Arc::new(Semaphore::new(SNAPSHOT_CHUNKS_IN_FLIGHT));
    let written_slots = chunk_slots.clone();
    // Dropped when this function returns, which stops the poller thread.
    let (busy_poll, _busy_poll_thread) = BusyPoll::start(config.busy_poll_us())?;
    let storage_poll = busy_poll.clone();
    let storage_thread = std::thread::Builder::new()
        .name("keel-storage".into())
        .spawn(move || {
            persist::run(
                storage,
                storage_rx,
                durable_tx,
                purge,
                storage_stats,
                &written_slots,
                storage_poll,
            )
        })?;
    let (core_tx, core_rx) = mpsc::channel(CORE_QUEUE);
    let (admin_tx, admin_rx) = mpsc::channel(ADMIN_QUEUE);
    let core_task = tokio::spawn(core::run(
        server,
        core_rx,
        admin_rx,
        durable_rx,
        storage_tx,
        chunk_slots,
        config.clone(),
    ));
    admin.serve(CoreHandle::new(admin_tx));
    let params = ClientParams {
        max_buffer: config.jute_max_buffer,
        max_client_cnxns: config.max_client_cnxns,
        is_four_letter_word: crate::admin::fourlw::is_four_letter_word,
        x509_super_user: config.x509_super_user.clone(),
        busy_poll,
        gssapi: crate::net::gss::Acceptor::for_config(&config)?,
        ensemble: config.is_distributed(),
    };
    ports.serve(core_tx, params, None, shutdown).await;
    tracing::info!("shutting down");
    // Stop the core; the storage thread then drains its queue (every txn handed to it
    // is written) and ends.
    core_task.abort();
    let _ = core_task.await;
    let _ = tokio::task::spawn_blocking(move || storage_thread.join()).await;
    Ok(())
}

/// Returns the memory recovery freed (the whole snapshot, read at once) to the OS.
///
/// Why: keel's allocator (mimalloc, see main.rs) defers giving freed pages back until
/// the thread that freed them allocates again, and this thread goes on to accept
/// connections, which allocate little. Measured with 1M znodes of 100 bytes: resident
/// memory 5 s after a restart 428 MB without this, 197 MB with mimalloc purging at once
/// (glibc: 193 MB). Harmless when mimalloc is not the global allocator (tests): it
/// then has nothing to collect.
fn release_freed_memory() {
    // SAFETY: mi_collect takes a plain bool and only walks mimalloc's own structures
    // for the calling thread; it is safe to call at any time.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

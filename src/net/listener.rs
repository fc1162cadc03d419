//! The client listener, connections and the core task that owns the [`Server`].
//!
//! Each connection is one tokio task that reads frames, decodes them and hands them to
//! the core task over a bounded channel, and writes what the core queues for it. The
//! core task alone touches the state machine, so ordering is simple: it handles inputs
//! one at a time and queues outputs per connection in order.

use crate::admin::{fourlw, snapshot};
use crate::config::Config;
use crate::net::busy_poll::BusyPoll;
use crate::net::{persist, tls};
use crate::proto::{wire, Request};
use crate::server::{Input, Outbound, Server, StorageOp};
use crate::storage::rocks::RocksStorage;
use crate::storage::{Storage, StorageError};
use bytes::{Buf, BytesMut};
use jute::{ConnectRequest, Decoder, Id, Record, RequestHeader};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch, Semaphore};
use tokio_rustls::TlsAcceptor;

/// Capacity of the channel into the core task; a full channel makes connections wait
/// (back-pressure), like ZooKeeper's globalOutstandingLimit.
const CORE_QUEUE: usize = 8192;
/// Packets queued for one connection before it counts as not reading and is closed.
const CONN_QUEUE: usize = 65536;
/// Storage operations queued for the storage thread; a full queue makes the core wait.
const STORAGE_QUEUE: usize = 65536;
/// Snapshot chunks (about 1 MiB each) handed to the storage thread and not yet written.
/// Without this bound the core serialises a whole snapshot (hundreds of MB for a
/// million znodes) into the storage queue faster than RocksDB takes it, and that peak
/// stays in the process's RSS as freed-but-retained heap long after it is written.
const SNAPSHOT_CHUNKS_IN_FLIGHT: usize = 2;
/// How often the core checks session expiry and container reaping, ms.
const TICK_MS: u64 = 100;
/// How long a client on the secure port may take to finish the TLS handshake, ms
/// (Netty's SslHandler default, which ZooKeeper's secure port uses).
const TLS_HANDSHAKE_TIMEOUT_MS: u64 = 10_000;
/// The TLS record content type of a handshake message, the first byte a TLS client sends.
const TLS_HANDSHAKE_RECORD: u8 = 22;

/// A message to the core task.
enum CoreMsg {
    /// A new connection, where to send its output, and the identities its TLS client
    /// certificate gave it (empty on the plain port).
    Register {
        conn: u64,
        addr: SocketAddr,
        tx: mpsc::Sender<Outbound>,
        ids: Vec<Id>,
    },
    Input(Input),
    /// Every request decoded from one socket read, in order: one channel message
    /// instead of one per request (at most a read buffer's worth of requests).
    Inputs(Vec<Input>),
    /// A four-letter word from `peer`; the reply text goes back on the oneshot.
    FourLetter {
        word: String,
        peer: SocketAddr,
        reply: oneshot::Sender<String>,
    },
    /// A read-only look at the state machine from outside the client protocol
    /// (AdminServer, metrics); see [`CoreHandle::query`].
    Query(QueryFn),
    /// An admin command that changes the server's figures (`stat_reset`); see
    /// [`CoreHandle::update`].
    Update(UpdateFn),
}

/// A read-only look at the state machine, run on the core task.
type QueryFn = Box<dyn FnOnce(&Server, &Config) + Send>;
/// A change to the server's figures (not its data), run on the core task.
type UpdateFn = Box<dyn FnOnce(&mut Server, &Config) + Send>;

/// A cloneable way into the core task for the admin surface: runs a closure against the
/// state machine between two inputs, so what it reads is one consistent instant.
#[derive(Clone)]
pub struct CoreHandle {
    tx: mpsc::Sender<CoreMsg>,
}

impl CoreHandle {
    /// Runs `f` on the core task and returns its result; `None` when the core has
    /// stopped. Waits behind inputs already queued (at most [`CORE_QUEUE`] of them), so
    /// `f` must be quick: it holds up every client while it runs.
    pub async fn query<R, F>(&self, f: F) -> Option<R>
    where
        R: Send + 'static,
        F: FnOnce(&Server, &Config) -> R + Send + 'static,
    {
        let (reply_tx, reply_rx) = oneshot::channel();
        let msg = CoreMsg::Query(Box::new(move |server: &Server, config: &Config| {
            let _ = reply_tx.send(f(server, config));
        }));
        self.tx.send(msg).await.ok()?;
        reply_rx.await.ok()
    }

    /// Like [`CoreHandle::query`], for the admin commands that reset statistics; `f`
    /// must not touch the tree, sessions or watches (those change only through inputs).
    pub async fn update<R, F>(&self, f: F) -> Option<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Server, &Config) -> R + Send + 'static,
    {
        let (reply_tx, reply_rx) = oneshot::channel();
        let msg = CoreMsg::Update(Box::new(move |server: &mut Server, config: &Config| {
            let _ = reply_tx.send(f(server, config));
        }));
        self.tx.send(msg).await.ok()?;
        reply_rx.await.ok()
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Runs the server described by `config` until `shutdown` resolves.
///
/// As ZooKeeper does, it serves the plain client port when clientPort is set and the
/// TLS port when secureClientPort is set, both when both are; with neither, the plain
/// port 2181.
///
/// Errors: a client port cannot be bound; a TLS setting is bad (the message names the
/// `ssl.*` key).
pub async fn run(
    config: Config,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let config = Arc::new(config);
    let tls = match config.secure_client_port {
        Some(_) => Some(TlsAcceptor::from(
            tls::server_config(&config.ssl).map_err(std::io::Error::other)?,
        )),
        None => None,
    };
    // Like ZooKeeper, bind the metrics endpoint and the AdminServer before loading data.
    let admin = crate::admin::Endpoints::bind(&config).await?;
    let (server, storage) = recover(&config)?;
    release_freed_memory();
    let plain = if config.client_port.is_some() || config.secure_client_port.is_none() {
        let addr = config.client_port_address.as_deref().unwrap_or("0.0.0.0");
        let port = config.client_port.unwrap_or(2181);
        let listener = bind(addr, port, "clientPort").await?;
        tracing::info!(address = %addr, port, "serving clients");
        Some(listener)
    } else {
        None
    };
    let secure = match config.secure_client_port {
        Some(port) => {
            let addr = config
                .secure_client_port_address
                .as_deref()
                .unwrap_or("0.0.0.0");
            let listener = bind(addr, port, "secureClientPort").await?;
            tracing::info!(address = %addr, port, "serving clients over TLS");
            Some(listener)
        }
        None => None,
    };
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
    let (busy_poll, _busy_poll_thread) = BusyPoll::start(config.busy_poll_us)?;
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
    // The admin surface (AdminServer, metrics) reads the core through this handle.
    let core_handle = CoreHandle {
        tx: core_tx.clone(),
    };
    let core_task = tokio::spawn(core(
        server,
        core_rx,
        durable_rx,
        storage_tx,
        chunk_slots,
        config.clone(),
    ));
    admin.serve(core_handle);
    // maxClientCnxns counts per port, as ZooKeeper counts per connection factory (the
    // plaintext and the secure port each have their own).
    let per_ip: Arc<Mutex<HashMap<IpAddr, u32>>> = Arc::default();
    let per_ip_secure: Arc<Mutex<HashMap<IpAddr, u32>>> = Arc::default();
    let params = ConnParams {
        max_buffer: config.jute_max_buffer,
        x509_super_user: config.x509_super_user.clone(),
        busy_poll,
    };
    let mut next_conn: u64 = 1;
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => {
                tracing::info!("shutting down");
                // Stop the core; the storage thread then drains its queue (every txn
                // handed to it is written) and ends.
                core_task.abort();
                let _ = core_task.await;
                let _ = tokio::task::spawn_blocking(move || storage_thread.join()).await;
                return Ok(());
            }
            accepted = accept(plain.as_ref()) => {
                if let Some((socket, peer)) = admit(accepted, &per_ip, &config) {
                    spawn_connection(next_conn, socket, peer, None, &core_tx, &per_ip, &params);
                    next_conn += 1;
                }
            }
            accepted = accept(secure.as_ref()) => {
                if let Some((socket, peer)) = admit(accepted, &per_ip_secure, &config) {
                    spawn_connection(next_conn, socket, peer, tls.clone(), &core_tx, &per_ip_secure, &params);
                    next_conn += 1;
                }
            }
        }
    }
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

/// Binds a client port; the error names the zoo.cfg key.
async fn bind(addr: &str, port: u16, key: &str) -> std::io::Result<TcpListener> {
    TcpListener::bind((addr, port)).await.map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("{key}: cannot listen on {addr}:{port}: {e}"),
        )
    })
}

/// Accepts on `listener`; never resolves when there is none.
async fn accept(listener: Option<&TcpListener>) -> std::io::Result<(TcpStream, SocketAddr)> {
    match listener {
        Some(l) => l.accept().await,
        None => std::future::pending().await,
    }
}

/// Counts an accepted connection against maxClientCnxns for its address; `None` (the
/// socket dropped) when accept failed or the address is at its limit.
fn admit(
    accepted: std::io::Result<(TcpStream, SocketAddr)>,
    per_ip: &Mutex<HashMap<IpAddr, u32>>,
    config: &Config,
) -> Option<(TcpStream, SocketAddr)> {
    let (socket, peer) = match accepted {
        Ok(x) => x,
        Err(e) => {
            tracing::warn!(error = %e, "accept failed");
            return None;
        }
    };
    let ip = peer.ip();
    let mut map = per_ip.lock();
    let n = map.entry(ip).or_insert(0);
    if config.max_client_cnxns > 0 && *n >= config.max_client_cnxns {
        tracing::warn!(%ip, limit = config.max_client_cnxns, "too many connections from this address; closing");
        return None;
    }
    *n += 1;
    Some((socket, peer))
}

/// Serves one admitted connection on its own task (after the TLS handshake when `tls`
/// is given), then releases its maxClientCnxns slot.
fn spawn_connection(
    conn: u64,
    socket: TcpStream,
    peer: SocketAddr,
    tls: Option<TlsAcceptor>,
    core_tx: &mpsc::Sender<CoreMsg>,
    per_ip: &Arc<Mutex<HashMap<IpAddr, u32>>>,
    params: &ConnParams,
) {
    let core_tx = core_tx.clone();
    let per_ip = per_ip.clone();
    let params = params.clone();
    tokio::spawn(async move {
        // Replies are small and latency matters more than packet count.
        let _ = socket.set_nodelay(true);
        let result = match tls {
            None => connection(conn, socket, peer, core_tx, params, Vec::new()).await,
            Some(acceptor) => {
                secure_connection(conn, socket, peer, acceptor, core_tx, params).await
            }
        };
        if let Err(e) = result {
            tracing::debug!(conn, error = %e, "connection ended");
        }
        let ip = peer.ip();
        let mut map = per_ip.lock();
        if let Some(n) = map.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                map.remove(&ip);
            }
        }
    });
}

/// The TLS handshake on the secure port, then the connection as on the plain port.
/// A verified client certificate makes the connection `x509:<subject DN>` (see
/// [`tls::x509_identities`]); a failed or slow handshake closes it, as ZooKeeper's
/// CertificateVerifier does.
async fn secure_connection(
    conn: u64,
    socket: TcpStream,
    peer: SocketAddr,
    acceptor: TlsAcceptor,
    core_tx: mpsc::Sender<CoreMsg>,
    params: ConnParams,
) -> std::io::Result<()> {
    let timeout = Duration::from_millis(TLS_HANDSHAKE_TIMEOUT_MS);
    let handshake = async move {
        // A TLS client opens with a handshake record (content type 22). Anything else is
        // a plaintext client on the secure port: it is closed without a TLS alert, as
        // ZooKeeper's Netty SslHandler closes it.
        let mut first = [0u8; 1];
        if socket.peek(&mut first).await? == 0 || first[0] != TLS_HANDSHAKE_RECORD {
            return Ok(None);
        }
        acceptor.accept(socket).await.map(Some)
    };
    let stream = match tokio::time::timeout(timeout, handshake).await {
        Ok(Ok(Some(stream))) => stream,
        Ok(Ok(None)) => {
            tracing::info!(conn, %peer, "not a TLS client on the secure port; closing the connection");
            return Ok(());
        }
        Ok(Err(e)) => {
            tracing::info!(conn, %peer, error = %e, "TLS handshake failed; closing the connection");
            return Ok(());
        }
        Err(_) => {
            tracing::info!(conn, %peer, timeout_ms = TLS_HANDSHAKE_TIMEOUT_MS, "TLS handshake timed out; closing the connection");
            return Ok(());
        }
    };
    let chain = stream.get_ref().1.peer_certificates();
    let ids = match tls::x509_identities(chain, params.x509_super_user.as_deref()) {
        Ok(ids) => ids,
        Err(e) => {
            tracing::info!(conn, %peer, error = %e, "client certificate refused; closing the connection");
            return Ok(());
        }
    };
    for id in &ids {
        tracing::info!(conn, %peer, scheme = %id.scheme, id = %id.id, "authenticated by TLS client certificate");
    }
    connection(conn, stream, peer, core_tx, params, ids).await
}

/// Opens the store in dataDir (txn log in dataLogDir) and rebuilds the state machine
/// from it.
///
/// Errors: the store is corrupt, of another format version, or cannot be opened; the
/// error names the path and position and nothing is rewritten.
fn recover(config: &Config) -> std::io::Result<(Server, Box<dyn Storage>)> {
    let to_io = |e: StorageError| std::io::Error::other(e.to_string());
    let t0 = std::time::Instant::now();
    let db = config.data_dir.join(crate::storage::rocks::DB_DIR);
    let settings = crate::server_settings(config);
    // Recover from a read-only view first: every record is read and checked before
    // RocksDB may write anything, so a refused store is left exactly as it was.
    let recovered = match RocksStorage::open_read_only(&config.data_dir, &config.data_log_dir)
        .map_err(to_io)?
    {
        Some(ro) => Some(
            Server::recover(settings.clone(), &ro, &db, now_ms(), rand::random()).map_err(to_io)?,
        ),
        None => None,
    };
    let read_ms = t0.elapsed().as_millis() as u64;
    let storage = RocksStorage::open(&config.data_dir, &config.data_log_dir, config.force_sync)
        .map_err(to_io)?;
    tracing::debug!(
        read_ms,
        reopen_ms = t0.elapsed().as_millis() as u64 - read_ms,
        "store read, then opened for writing"
    );
    let (server, stats) = match recovered {
        Some(r) => r,
        None => {
            Server::recover(settings, &storage, &db, now_ms(), rand::random()).map_err(to_io)?
        }
    };
    tracing::info!(
        data_dir = %config.data_dir.display(),
        snapshot_zxid = stats.snapshot_zxid.map(|z| format!("0x{z:x}")),
        txns_replayed = stats.txns_replayed,
        znodes = stats.znodes,
        sessions = stats.sessions,
        last_zxid = format!("0x{:x}", server.last_zxid),
        elapsed_ms = t0.elapsed().as_millis() as u64,
        "recovered"
    );
    Ok((server, Box::new(storage)))
}

/// The core task: owns the state machine, applies inputs in arrival order, routes output
/// to connections and storage. A snapshot chunk is serialised only with a permit from
/// `chunk_slots`, which the storage thread returns once the chunk is written.
async fn core(
    server: Server,
    mut rx: mpsc::Receiver<CoreMsg>,
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
        // One message per connection per turn: its packets joined in order (the
        // connection writes them with one syscall anyway), then Close if asked.
        let mut batches: Vec<(u64, BytesMut, bool)> = Vec::new();
        let mut slot: rustc_hash::FxHashMap<u64, usize> = rustc_hash::FxHashMap::default();
        for (conn, out) in server.drain_outbox() {
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
}

fn handle(
    server: &mut Server,
    routes: &mut rustc_hash::FxHashMap<u64, mpsc::Sender<Outbound>>,
    config: &Config,
    msg: CoreMsg,
) {
    match msg {
        CoreMsg::Register {
            conn,
            addr,
            tx,
            ids,
        } => {
            routes.insert(conn, tx);
            server.handle(now_ms(), Input::Connected { conn, addr });
            if !ids.is_empty() {
                server.handle(now_ms(), Input::Authenticated { conn, ids });
            }
        }
        CoreMsg::Input(input) => {
            if let Input::Disconnected { conn } = &input {
                routes.remove(conn);
            }
            server.handle(now_ms(), input);
        }
        CoreMsg::Inputs(inputs) => {
            let now = now_ms();
            for input in inputs {
                server.handle(now, input);
            }
        }
        CoreMsg::FourLetter { word, peer, reply } => {
            let text = if config.four_letter_words.allows(&word) {
                match word.as_str() {
                    "srst" => server.reset_stats(),
                    "crst" => server.reset_connection_stats(),
                    _ => {}
                }
                let snap = snapshot::build_for_word(server, config, peer);
                fourlw::render(&word, &snap).unwrap_or_default()
            } else {
                fourlw::not_whitelisted(&word)
            };
            let _ = reply.send(text);
        }
        CoreMsg::Query(f) => f(server, config),
        CoreMsg::Update(f) => f(server, config),
    }
}

/// Reads one frame (length-prefixed packet) from `buf` if complete.
///
/// Errors: a negative length, or one above jute.maxbuffer, is malformed input.
fn take_frame(buf: &mut BytesMut, max_buffer: usize) -> std::io::Result<Option<BytesMut>> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if len < 0 || len as usize > max_buffer {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("packet length {len} is outside 0..={max_buffer} (jute.maxbuffer)"),
        ));
    }
    if buf.len() < 4 + len as usize {
        buf.reserve(4 + len as usize - buf.len());
        return Ok(None);
    }
    buf.advance(4);
    Ok(Some(buf.split_to(len as usize)))
}

fn bad_input(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string())
}

/// Decodes a request packet: header, then the op's record, as ZooKeeper takes it
/// ([`wire::decode_request`]: a record that does not decode is answered, not fatal).
///
/// Errors: a packet too short for its header, or an auth or sasl packet whose record
/// does not decode; the connection is then closed, as ZooKeeper closes it.
fn decode_request(packet: &[u8]) -> std::io::Result<(i32, i32, Request)> {
    let mut d = Decoder::new(packet);
    let header = RequestHeader::decode(&mut d).map_err(bad_input)?;
    let req = wire::decode_request(header.op_type, d.remaining()).map_err(bad_input)?;
    Ok((header.xid, header.op_type, req))
}

/// What every connection task gets from the listener.
#[derive(Clone)]
struct ConnParams {
    /// jute.maxbuffer: the largest frame accepted, bytes.
    max_buffer: usize,
    /// `X509AuthenticationProvider.superUser`: the certificate subject that passes
    /// every ACL check.
    x509_super_user: Option<String>,
    /// Told of each read, so the CPU stays awake for the reply's next request.
    busy_poll: BusyPoll,
}

/// One client connection on either port (`S` is the TCP stream or the TLS stream over
/// it): a four-letter word, or a session handshake and then requests. `ids` are the
/// identities the transport established (a TLS client certificate's).
async fn connection<S: AsyncRead + AsyncWrite + Unpin + Send>(
    conn: u64,
    mut socket: S,
    peer: SocketAddr,
    core_tx: mpsc::Sender<CoreMsg>,
    params: ConnParams,
    ids: Vec<Id>,
) -> std::io::Result<()> {
    let mut buf = BytesMut::with_capacity(4096);
    // The first four bytes decide: a four-letter word, or a session handshake.
    while buf.len() < 4 {
        if socket.read_buf(&mut buf).await? == 0 {
            return Ok(());
        }
    }
    if fourlw::is_four_letter_word(&buf[..4]) {
        let word = String::from_utf8_lossy(&buf[..4]).into_owned();
        let (reply_tx, reply_rx) = oneshot::channel();
        if core_tx
            .send(CoreMsg::FourLetter {
                word,
                peer,
                reply: reply_tx,
            })
            .await
            .is_err()
        {
            return Ok(());
        }
        if let Ok(text) = reply_rx.await {
            socket.write_all(text.as_bytes()).await?;
        }
        let _ = socket.shutdown().await;
        return Ok(());
    }
    let (out_tx, mut out_rx) = mpsc::channel(CONN_QUEUE);
    if core_tx
        .send(CoreMsg::Register {
            conn,
            addr: peer,
            tx: out_tx,
            ids,
        })
        .await
        .is_err()
    {
        return Ok(());
    }
    let result = serve(conn, &mut socket, &mut buf, &core_tx, &mut out_rx, &params).await;
    if let Err(e) = &result {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            // A TLS client that hangs up without close_notify (zkCli does): a normal
            // end of a session's connection, not worth an INFO line.
            tracing::debug!(conn, %peer, error = %e, "closing connection");
        } else {
            tracing::info!(conn, %peer, error = %e, "closing connection");
        }
    }
    let _ = core_tx
        .send(CoreMsg::Input(Input::Disconnected { conn }))
        .await;
    result
}

async fn serve<S: AsyncRead + AsyncWrite + Unpin + Send>(
    conn: u64,
    socket: &mut S,
    buf: &mut BytesMut,
    core_tx: &mpsc::Sender<CoreMsg>,
    out_rx: &mut mpsc::Receiver<Outbound>,
    params: &ConnParams,
) -> std::io::Result<()> {
    let mut handshaken = false;
    let mut wbuf = BytesMut::with_capacity(4096);
    loop {
        // Hand every complete frame to the core first, all in one message. A malformed
        // frame still lets the ones before it through, then closes the connection.
        let mut inputs = Vec::new();
        let mut malformed = None;
        loop {
            let packet = match take_frame(buf, params.max_buffer) {
                Ok(Some(p)) => p,
                Ok(None) => break,
                Err(e) => {
                    malformed = Some(e);
                    break;
                }
            };
            let input = if handshaken {
                match decode_request(&packet) {
                    Ok((xid, opcode, req)) => Input::Request {
                        conn,
                        xid,
                        opcode,
                        req,
                    },
                    Err(e) => {
                        malformed = Some(e);
                        break;
                    }
                }
            } else {
                handshaken = true;
                match ConnectRequest::decode_lenient(&packet) {
                    Ok(req) => {
                        if !ConnectRequest::has_read_only(&packet) {
                            inputs.push(Input::OldClient { conn });
                        }
                        Input::Handshake { conn, req }
                    }
                    Err(e) => {
                        malformed = Some(bad_input(e));
                        break;
                    }
                }
            };
            inputs.push(input);
        }
        if !inputs.is_empty() && core_tx.send(CoreMsg::Inputs(inputs)).await.is_err() {
            return Ok(());
        }
        if let Some(e) = malformed {
            return Err(e);
        }
        tokio::select! {
            n = socket.read_buf(buf) => {
                if n? == 0 {
                    return Ok(());
                }
                params.busy_poll.touch();
            }
            out = out_rx.recv() => {
                let mut close = false;
                let mut next = out;
                // Gather everything queued into one write.
                loop {
                    match next {
                        Some(Outbound::Packet(p)) => wbuf.extend_from_slice(&p),
                        Some(Outbound::Close) | None => {
                            close = true;
                            break;
                        }
                    }
                    if wbuf.len() > 256 * 1024 {
                        break;
                    }
                    match out_rx.try_recv() {
                        Ok(o) => next = Some(o),
                        Err(_) => break,
                    }
                }
                if !wbuf.is_empty() {
                    socket.write_all(&wbuf).await?;
                    // A TLS stream may hold encrypted records back until flushed.
                    socket.flush().await?;
                    wbuf.clear();
                }
                if close {
                    let _ = socket.shutdown().await;
                    return Ok(());
                }
            }
        }
    }
}

//! The client listener, connections and the core task that owns the [`Server`].
//!
//! Each connection is one tokio task that reads frames, decodes them and hands them to
//! the core task over a bounded channel, and writes what the core queues for it. The
//! core task alone touches the state machine, so ordering is simple: it handles inputs
//! one at a time and queues outputs per connection in order.

use crate::admin::{fourlw, snapshot};
use crate::config::Config;
use crate::net::persist;
use crate::proto::opcode as op;
use crate::proto::Request;
use crate::server::{Input, Outbound, Server, StorageOp};
use crate::storage::rocks::RocksStorage;
use crate::storage::{Storage, StorageError};
use bytes::{Buf, BytesMut};
use jute::{ConnectRequest, Decoder, PathRequest, Record, RequestHeader};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};

/// Capacity of the channel into the core task; a full channel makes connections wait
/// (back-pressure), like ZooKeeper's globalOutstandingLimit.
const CORE_QUEUE: usize = 8192;
/// Packets queued for one connection before it counts as not reading and is closed.
const CONN_QUEUE: usize = 65536;
/// Storage operations queued for the storage thread; a full queue makes the core wait.
const STORAGE_QUEUE: usize = 65536;
/// How often the core checks session expiry and container reaping, ms.
const TICK_MS: u64 = 100;

/// A message to the core task.
enum CoreMsg {
    /// A new connection and where to send its output.
    Register {
        conn: u64,
        addr: SocketAddr,
        tx: mpsc::Sender<Outbound>,
    },
    Input(Input),
    /// A four-letter word; the reply text goes back on the oneshot.
    FourLetter {
        word: String,
        reply: oneshot::Sender<String>,
    },
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Runs the server described by `config` until `shutdown` resolves.
///
/// Errors: the client port cannot be bound.
pub async fn run(
    config: Config,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let config = Arc::new(config);
    let addr = config
        .client_port_address
        .clone()
        .unwrap_or_else(|| "0.0.0.0".into());
    let port = config.client_port.unwrap_or(2181);
    let (server, storage) = recover(&config)?;
    let listener = TcpListener::bind((addr.as_str(), port)).await?;
    tracing::info!(address = %addr, port, "serving clients");
    let (storage_tx, storage_rx) = mpsc::channel(STORAGE_QUEUE);
    let (durable_tx, durable_rx) = watch::channel(server.last_zxid);
    let purge = persist::Purge {
        retain: config.autopurge_snap_retain_count as usize,
        interval_hours: config.autopurge_purge_interval_hours,
    };
    let storage_thread = std::thread::Builder::new()
        .name("keel-storage".into())
        .spawn(move || persist::run(storage, storage_rx, durable_tx, purge))?;
    let (core_tx, core_rx) = mpsc::channel(CORE_QUEUE);
    let core_task = tokio::spawn(core(
        server,
        core_rx,
        durable_rx,
        storage_tx,
        config.clone(),
    ));
    let per_ip: Arc<Mutex<HashMap<IpAddr, u32>>> = Arc::default();
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
            accepted = listener.accept() => {
                let (socket, peer) = match accepted {
                    Ok(x) => x,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        continue;
                    }
                };
                let ip = peer.ip();
                {
                    let mut map = per_ip.lock();
                    let n = map.entry(ip).or_insert(0);
                    if config.max_client_cnxns > 0 && *n >= config.max_client_cnxns {
                        tracing::warn!(%ip, limit = config.max_client_cnxns, "too many connections from this address; closing");
                        drop(socket);
                        continue;
                    }
                    *n += 1;
                }
                let conn = next_conn;
                next_conn += 1;
                let core_tx = core_tx.clone();
                let per_ip = per_ip.clone();
                let max_buffer = config.jute_max_buffer;
                tokio::spawn(async move {
                    if let Err(e) = connection(conn, socket, peer, core_tx, max_buffer).await {
                        tracing::debug!(conn, error = %e, "connection ended");
                    }
                    let mut map = per_ip.lock();
                    if let Some(n) = map.get_mut(&ip) {
                        *n -= 1;
                        if *n == 0 {
                            map.remove(&ip);
                        }
                    }
                });
            }
        }
    }
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
/// to connections and storage.
async fn core(
    server: Server,
    mut rx: mpsc::Receiver<CoreMsg>,
    mut durable: watch::Receiver<i64>,
    storage: mpsc::Sender<StorageOp>,
    config: Arc<Config>,
) {
    // The state machine is never dropped: the process exits right after this task
    // stops, and freeing a tree of millions of znodes would only delay a clean stop.
    let mut server = std::mem::ManuallyDrop::new(server);
    let server: &mut Server = &mut server;
    let mut routes: HashMap<u64, mpsc::Sender<Outbound>> = HashMap::new();
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
            // While a snapshot is being written, idle moments go to it.
            _ = std::future::ready(()), if snapshotting => {}
        }
        // One snapshot step per turn, so a busy server still finishes its snapshot.
        if server.snapshot_in_progress() {
            server.snapshot_step();
        }
        for op in server.drain_storage() {
            if storage.send(op).await.is_err() {
                return;
            }
        }
        for (conn, out) in server.drain_outbox() {
            let Some(tx) = routes.get(&conn) else {
                continue;
            };
            let close = out == Outbound::Close;
            if tx.try_send(out).is_err() {
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
    routes: &mut HashMap<u64, mpsc::Sender<Outbound>>,
    config: &Config,
    msg: CoreMsg,
) {
    match msg {
        CoreMsg::Register { conn, addr, tx } => {
            routes.insert(conn, tx);
            server.handle(now_ms(), Input::Connected { conn, addr });
        }
        CoreMsg::Input(input) => {
            if let Input::Disconnected { conn } = &input {
                routes.remove(conn);
            }
            server.handle(now_ms(), input);
        }
        CoreMsg::FourLetter { word, reply } => {
            let text = if config.four_letter_words.allows(&word) {
                let snap = snapshot::build(server, config);
                fourlw::render(&word, &snap).unwrap_or_default()
            } else {
                fourlw::not_whitelisted(&word)
            };
            let _ = reply.send(text);
        }
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

/// Decodes a request packet: header, then the op's record.
fn decode_request(packet: &[u8]) -> std::io::Result<(i32, i32, Request)> {
    let mut d = Decoder::new(packet);
    let header = RequestHeader::decode(&mut d).map_err(bad_input)?;
    let body = d.remaining();
    let req = if header.op_type == op::DELETE_CONTAINER {
        // ZooKeeper reads a deleteContainer body as the bare path bytes.
        Request::DeleteContainer(PathRequest {
            path: String::from_utf8_lossy(body).into_owned(),
        })
    } else {
        Request::decode(header.op_type, body).map_err(bad_input)?
    };
    Ok((header.xid, header.op_type, req))
}

async fn connection(
    conn: u64,
    mut socket: TcpStream,
    peer: SocketAddr,
    core_tx: mpsc::Sender<CoreMsg>,
    max_buffer: usize,
) -> std::io::Result<()> {
    socket.set_nodelay(true)?;
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
        })
        .await
        .is_err()
    {
        return Ok(());
    }
    let result = serve(
        conn,
        &mut socket,
        &mut buf,
        &core_tx,
        &mut out_rx,
        max_buffer,
    )
    .await;
    if let Err(e) = &result {
        tracing::info!(conn, %peer, error = %e, "closing connection");
    }
    let _ = core_tx
        .send(CoreMsg::Input(Input::Disconnected { conn }))
        .await;
    result
}

async fn serve(
    conn: u64,
    socket: &mut TcpStream,
    buf: &mut BytesMut,
    core_tx: &mpsc::Sender<CoreMsg>,
    out_rx: &mut mpsc::Receiver<Outbound>,
    max_buffer: usize,
) -> std::io::Result<()> {
    let mut handshaken = false;
    let mut wbuf = BytesMut::with_capacity(4096);
    loop {
        // Hand every complete frame to the core first.
        while let Some(packet) = take_frame(buf, max_buffer)? {
            let input = if handshaken {
                let (xid, opcode, req) = decode_request(&packet)?;
                Input::Request {
                    conn,
                    xid,
                    opcode,
                    req,
                }
            } else {
                handshaken = true;
                let req = ConnectRequest::decode_lenient(&packet).map_err(bad_input)?;
                Input::Handshake { conn, req }
            };
            if core_tx.send(CoreMsg::Input(input)).await.is_err() {
                return Ok(());
            }
        }
        tokio::select! {
            n = socket.read_buf(buf) => {
                if n? == 0 {
                    return Ok(());
                }
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

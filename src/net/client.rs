//! The client ports: the listeners, maxClientCnxns, the TLS handshake on the secure
//! port, and one task per connection that reads frames, decodes them and hands them to
//! the core task over a bounded channel ([`ToCore`]), and writes what the core queues for
//! it. This layer moves bytes only: what a request means is the state machine's
//! (src/server), run by the core task (src/member/core.rs).

use crate::config::Config;
use crate::net::busy_poll::BusyPoll;
use crate::net::tls;
use crate::proto::{opcode, wire, Request};
use crate::sasl::gssapi::GssapiServer;
use crate::server::{Input, Outbound};
use bytes::{Buf, Bytes, BytesMut};
use jute::{ConnectRequest, Decoder, Id, Record, RequestHeader};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_rustls::TlsAcceptor;

/// Packets queued for one connection before it counts as not reading and is closed.
const CONN_QUEUE: usize = 65536;
/// How long a client on the secure port may take to finish the TLS handshake, ms
/// (Netty's SslHandler default, which ZooKeeper's secure port uses).
const TLS_HANDSHAKE_TIMEOUT_MS: u64 = 10_000;
/// The TLS record content type of a handshake message, the first byte a TLS client sends.
const TLS_HANDSHAKE_RECORD: u8 = 22;

/// What a client connection tells the core task.
pub enum ToCore {
    /// A new connection, where to send its output, and the identities its TLS client
    /// certificate gave it (empty on the plain port).
    Register {
        /// The connection's id, unique in this process.
        conn: u64,
        /// The client's address.
        addr: SocketAddr,
        /// Where the core queues the connection's output.
        tx: mpsc::Sender<Outbound>,
        /// Identities from the TLS client certificate.
        ids: Vec<Id>,
    },
    /// One input for the state machine.
    Input(Input),
    /// Every request decoded from one socket read, in order: one channel message
    /// instead of one per request (at most a read buffer's worth of requests).
    Inputs(Vec<Input>),
    /// A four-letter word from `peer`; the reply text goes back on the oneshot.
    FourLetter {
        /// The word, 4 ASCII letters.
        word: String,
        /// The asking client's address.
        peer: SocketAddr,
        /// Where the answer goes.
        reply: oneshot::Sender<String>,
    },
}

/// The bound client ports (plain, secure) and the TLS settings for the secure one.
pub struct ClientPorts {
    plain: Option<TcpListener>,
    secure: Option<TcpListener>,
    tls: Option<TlsAcceptor>,
}

/// Reads the TLS settings for the secure client port, before anything else starts (a
/// bad `ssl.*` value stops start-up, naming the key). `None` without secureClientPort.
///
/// Errors: a key or trust store cannot be read or does not fit the settings.
pub fn tls_acceptor(config: &Config) -> std::io::Result<Option<TlsAcceptor>> {
    match config.secure_client_port {
        Some(_) => Ok(Some(TlsAcceptor::from(
            tls::server_config(&config.ssl, tls::CLIENT_PREFIX).map_err(std::io::Error::other)?,
        ))),
        None => Ok(None),
    }
}

impl ClientPorts {
    /// Binds the client ports as ZooKeeper does: the plain port when clientPort is set,
    /// the TLS port when secureClientPort is set, both when both are; with neither, the
    /// plain port 2181.
    ///
    /// Errors: a port cannot be bound (the message names the zoo.cfg key).
    pub async fn bind(config: &Config, tls: Option<TlsAcceptor>) -> std::io::Result<ClientPorts> {
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
        Ok(ClientPorts { plain, secure, tls })
    }

    /// Accepts clients until `shutdown` resolves, each on its own task that talks to
    /// the core through `core_tx`. Each `host:port` that `rebind` brings (an ensemble
    /// member whose server line's client address a reconfig moved) replaces the plain
    /// port: the new address is bound and the old listener closed, the connections
    /// already up stay (ZooKeeper's `ServerCnxnFactory.reconfigure`); if it does not
    /// bind, the old port stays, with the error logged.
    pub async fn serve(
        mut self,
        core_tx: mpsc::Sender<ToCore>,
        params: ClientParams,
        mut rebind: Option<watch::Receiver<Option<(String, u16)>>>,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        // maxClientCnxns counts per port, as ZooKeeper counts per connection factory
        // (the plaintext and the secure port each have their own).
        let per_ip: Arc<Mutex<HashMap<IpAddr, u32>>> = Arc::default();
        let per_ip_secure: Arc<Mutex<HashMap<IpAddr, u32>>> = Arc::default();
        let mut next_conn: u64 = 1;
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => return,
                Some(to) = moved(rebind.as_mut()) => match bind(&to.0, to.1, "clientPort").await {
                    Ok(l) => {
                        tracing::info!(address = %to.0, port = to.1, "serving clients at the address the config now gives");
                        self.plain = Some(l);
                    }
                    Err(e) => tracing::error!(error = %e, "the client port stays where it was"),
                },
                accepted = accept(self.plain.as_ref()) => {
                    if let Some((socket, peer)) = admit(accepted, &per_ip, params.max_client_cnxns) {
                        spawn_connection(next_conn, socket, peer, None, &core_tx, &per_ip, &params);
                        next_conn += 1;
                    }
                }
                accepted = accept(self.secure.as_ref()) => {
                    if let Some((socket, peer)) = admit(accepted, &per_ip_secure, params.max_client_cnxns) {
                        spawn_connection(next_conn, socket, peer, self.tls.clone(), &core_tx, &per_ip_secure, &params);
                        next_conn += 1;
                    }
                }
            }
        }
    }
}

/// The next client address `rebind` brings; never resolves without one (or once its
/// sender is gone).
async fn moved(
    rebind: Option<&mut watch::Receiver<Option<(String, u16)>>>,
) -> Option<(String, u16)> {
    let Some(rx) = rebind else {
        return std::future::pending().await;
    };
    loop {
        if rx.changed().await.is_err() {
            return std::future::pending().await;
        }
        if let Some(to) = rx.borrow_and_update().clone() {
            return Some(to);
        }
    }
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
    max_client_cnxns: u32,
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
    if max_client_cnxns > 0 && *n >= max_client_cnxns {
        tracing::warn!(%ip, limit = max_client_cnxns, "too many connections from this address; closing");
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
    core_tx: &mpsc::Sender<ToCore>,
    per_ip: &Arc<Mutex<HashMap<IpAddr, u32>>>,
    params: &ClientParams,
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
    core_tx: mpsc::Sender<ToCore>,
    params: ClientParams,
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

/// The request record's bytes of a decoded request packet (after its 8-byte
/// RequestHeader), for a learner to forward: a zero-copy slice of the frame in an
/// ensemble, nothing standalone, where a slice held by the core would keep the
/// connection's read buffer from being reused (an allocation per read).
fn request_body(packet: BytesMut, ensemble: bool) -> Bytes {
    if ensemble {
        packet.freeze().slice(REQUEST_HEADER_BYTES..)
    } else {
        Bytes::new()
    }
}

/// A RequestHeader's size: xid and type, two ints.
const REQUEST_HEADER_BYTES: usize = 8;

/// What every connection task gets from the listener.
#[derive(Clone)]
pub struct ClientParams {
    /// jute.maxbuffer: the largest frame accepted, bytes.
    pub max_buffer: usize,
    /// maxClientCnxns: connections per client address and port (0 = no limit).
    pub max_client_cnxns: u32,
    /// Whether a connection's first four bytes are a four-letter word (then the
    /// connection asks the core for its text and closes) rather than a session handshake.
    pub is_four_letter_word: fn(&[u8]) -> bool,
    /// `X509AuthenticationProvider.superUser`: the certificate subject that passes
    /// every ACL check.
    pub x509_super_user: Option<String>,
    /// Told of each read, so the CPU stays awake for the reply's next request.
    pub busy_poll: BusyPoll,
    /// The Kerberos credential when the JAAS server section logs in with Kerberos: each
    /// connection then runs its sasl tokens through its own GSSAPI exchange (see
    /// [`crate::net::gss`] for why that happens here).
    pub gssapi: Option<std::sync::Arc<crate::net::gss::Acceptor>>,
    /// Whether this member is in an ensemble: each request then carries its record's
    /// bytes for forwarding to the leader (see [`Input::Request`]'s `body`).
    pub ensemble: bool,
}

/// One client connection on either port (`S` is the TCP stream or the TLS stream over
/// it): a four-letter word, or a session handshake and then requests. `ids` are the
/// identities the transport established (a TLS client certificate's).
async fn connection<S: AsyncRead + AsyncWrite + Unpin + Send>(
    conn: u64,
    mut socket: S,
    peer: SocketAddr,
    core_tx: mpsc::Sender<ToCore>,
    params: ClientParams,
    ids: Vec<Id>,
) -> std::io::Result<()> {
    let mut buf = BytesMut::with_capacity(4096);
    // The first four bytes decide: a four-letter word, or a session handshake.
    while buf.len() < 4 {
        if socket.read_buf(&mut buf).await? == 0 {
            return Ok(());
        }
    }
    if (params.is_four_letter_word)(&buf[..4]) {
        let word = String::from_utf8_lossy(&buf[..4]).into_owned();
        let (reply_tx, reply_rx) = oneshot::channel();
        if core_tx
            .send(ToCore::FourLetter {
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
        .send(ToCore::Register {
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
        .send(ToCore::Input(Input::Disconnected { conn }))
        .await;
    result
}

/// The requests of one connection read and not yet answered, as the busy poller
/// counts them ([`BusyPoll::requests_read`]): those with an xid of 0 or more (a
/// ping, whose reply has xid -2 whatever its own, and the other special xids are left
/// out), less the replies with one written. Those still unanswered when the connection ends are dropped from the
/// count.
struct InFlight<'a> {
    poll: &'a BusyPoll,
    requests: usize,
}

impl InFlight<'_> {
    fn read(&mut self, requests: usize) {
        if requests > 0 {
            self.requests += requests;
            self.poll.requests_read(requests);
        }
    }

    /// Counts the replies in `packets`, length-prefixed frames back to back, each
    /// starting with its reply header's xid (PROTOCOL.md, "Framing").
    fn answered(&mut self, packets: &[u8]) {
        if self.requests == 0 {
            return;
        }
        let mut replies = 0usize;
        let mut rest = packets;
        while rest.len() >= 8 {
            let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            let xid = i32::from_be_bytes([rest[4], rest[5], rest[6], rest[7]]);
            replies += usize::from(xid >= 0);
            rest = rest.get(4 + len..).unwrap_or_default();
        }
        let replies = replies.min(self.requests);
        if replies > 0 {
            self.requests -= replies;
            self.poll.requests_answered(replies);
        }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if self.requests > 0 {
            self.poll.requests_answered(self.requests);
        }
    }
}

async fn serve<S: AsyncRead + AsyncWrite + Unpin + Send>(
    conn: u64,
    socket: &mut S,
    buf: &mut BytesMut,
    core_tx: &mpsc::Sender<ToCore>,
    out_rx: &mut mpsc::Receiver<Outbound>,
    params: &ClientParams,
) -> std::io::Result<()> {
    let mut handshaken = false;
    let mut wbuf = BytesMut::with_capacity(4096);
    let mut gssapi = None;
    let mut in_flight = InFlight {
        poll: &params.busy_poll,
        requests: 0,
    };
    loop {
        // Hand every complete frame to the core first, all in one message. A malformed
        // frame still lets the ones before it through, then closes the connection.
        let mut inputs = Vec::new();
        let mut malformed = None;
        let mut received_bytes = 0u64;
        let mut requests = 0usize;
        loop {
            let packet = match take_frame(buf, params.max_buffer) {
                Ok(Some(p)) => p,
                Ok(None) => break,
                Err(e) => {
                    malformed = Some(e);
                    break;
                }
            };
            received_bytes += 4 + packet.len() as u64;
            let input = if handshaken {
                match decode_request(&packet) {
                    Ok((xid, opcode, req)) => {
                        // A ping's reply has xid -2 whatever its request's was.
                        requests += usize::from(xid >= 0 && opcode != opcode::PING);
                        Input::Request {
                            conn,
                            xid,
                            opcode,
                            req: match (req, &params.gssapi) {
                                (Request::Sasl(token), Some(acceptor)) => {
                                    // A short blocking library call (it reads the keytab)
                                    // on this connection's task, as ZooKeeper runs it on
                                    // the connection's thread.
                                    let exchange = gssapi.get_or_insert_with(|| {
                                        GssapiServer::new(acceptor.context())
                                    });
                                    Request::SaslGssapi(exchange.evaluate(&token))
                                }
                                (req, _) => req,
                            },
                            body: request_body(packet, params.ensemble),
                        }
                    }
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
        in_flight.read(requests);
        if received_bytes > 0 {
            inputs.push(Input::Received {
                bytes: received_bytes,
            });
        }
        if !inputs.is_empty() && core_tx.send(ToCore::Inputs(inputs)).await.is_err() {
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
                        Some(Outbound::Packet(p)) => {
                            in_flight.answered(&p);
                            wbuf.extend_from_slice(&p);
                        }
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

//! What the election and quorum connections share: dialing with a timeout, socket
//! options, TLS when `sslQuorum` or `portUnification` asks for it (`super::tls`), the
//! stream either kind of connection is, and writing queued messages in batches.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf, ReadHalf, WriteHalf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsStream;
use tracing::warn;

use super::Shared;

/// Plaintext or TLS: a peer connection ([`PeerStream`]) or one of its halves
/// ([`PeerReader`], [`PeerWriter`]), reading and writing through whichever it is.
pub enum Either<P, T> {
    /// Plaintext.
    Plain(P),
    /// TLS (`sslQuorum`, or a TLS peer on a `portUnification` port).
    Tls(T),
}

/// A peer connection: plain TCP, or TLS over it (boxed: the TLS state is large).
pub type PeerStream = Either<TcpStream, Box<TlsStream<TcpStream>>>;

/// The reading half of a [`PeerStream`]: the socket's own half when plaintext (no
/// lock); a TLS connection's halves share its state.
pub type PeerReader = Either<OwnedReadHalf, ReadHalf<Box<TlsStream<TcpStream>>>>;

/// The writing half of a [`PeerStream`].
pub type PeerWriter = Either<OwnedWriteHalf, WriteHalf<Box<TlsStream<TcpStream>>>>;

impl PeerStream {
    fn tcp(&self) -> &TcpStream {
        match self {
            Either::Plain(s) => s,
            Either::Tls(s) => s.get_ref().0,
        }
    }

    /// This end's address.
    ///
    /// Errors: the socket's (it is no longer connected).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.tcp().local_addr()
    }

    /// The peer's address.
    ///
    /// Errors: the socket's (it is no longer connected).
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.tcp().peer_addr()
    }

    /// Splits the stream so one task reads while another writes.
    pub fn into_split(self) -> (PeerReader, PeerWriter) {
        match self {
            Either::Plain(s) => {
                let (rd, wr) = s.into_split();
                (Either::Plain(rd), Either::Plain(wr))
            }
            Either::Tls(s) => {
                let (rd, wr) = tokio::io::split(s);
                (Either::Tls(rd), Either::Tls(wr))
            }
        }
    }
}

/// A TLS peer that closes without close_notify (a member killed, or one that just
/// closes its socket) reads as a plain end of stream, as the same close does in
/// plaintext: the frame readers above tell a clean end from one inside a packet, so a
/// truncation is still caught there.
impl<P: AsyncRead + Unpin, T: AsyncRead + Unpin> AsyncRead for Either<P, T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Either::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Either::Tls(s) => match Pin::new(s).poll_read(cx, buf) {
                Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    Poll::Ready(Ok(()))
                }
                other => other,
            },
        }
    }
}

impl<P: AsyncWrite + Unpin, T: AsyncWrite + Unpin> AsyncWrite for Either<P, T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Either::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Either::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Either::Plain(s) => Pin::new(s).poll_flush(cx),
            Either::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Either::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Either::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// The most bytes one write gathers from a queue: enough for many small messages in one
/// syscall, few enough that one peer's batch does not hold a large copy.
pub const BATCH_BYTES: usize = 256 * 1024;

/// How many bytes a connection asks the socket for per read.
pub const READ_CHUNK: usize = 64 * 1024;

/// Every peer socket has TCP_NODELAY (QuorumCnxManager and Learner set it): Zab's
/// messages are small and latency-bound.
pub fn prepare(stream: &TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)
}

/// Connects to `host:port`, TCP_NODELAY set, and with `sslQuorum` does the TLS
/// handshake and the host check, all within `timeout`.
///
/// Errors: the name does not resolve, the connect or the handshake fails, the peer's
/// certificate is refused, or it all takes longer than `timeout` (`TimedOut`).
pub(crate) async fn connect(
    shared: &Shared,
    host: &str,
    port: u16,
    timeout: Duration,
) -> io::Result<PeerStream> {
    let dial = async {
        let stream = TcpStream::connect((host, port)).await?;
        prepare(&stream)?;
        match &shared.params.tls {
            None => Ok(Either::Plain(stream)),
            Some(tls) => {
                let remote = stream.peer_addr()?;
                tls.dial(stream, remote).await
            }
        }
    };
    tokio::time::timeout(timeout, dial).await.map_err(|_| {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!("connect to {host}:{port} took over {timeout:?}"),
        )
    })?
}

/// Writes `first` and whatever `more` yields right away, up to [`BATCH_BYTES`], in one
/// write (one syscall while the socket takes it all); a part of [`BATCH_BYTES`] or more
/// is written on its own, after the batch before it, without a copy.
pub async fn write_batch(
    wr: &mut PeerWriter,
    first: Bytes,
    more: impl FnMut() -> Option<Bytes>,
) -> io::Result<()> {
    let (batch, big) = gather(first, more);
    wr.write_all(&batch).await?;
    match big {
        Some(b) => wr.write_all(&b).await,
        None => Ok(()),
    }
}

/// What [`write_batch`] writes: `first` and whatever `more` yields right away, up to
/// [`BATCH_BYTES`], as one piece (copied into one buffer), and then a part of
/// [`BATCH_BYTES`] or more as it is (a SNAP's stream, not copied). `first` alone when it
/// is that large.
pub fn gather(first: Bytes, mut more: impl FnMut() -> Option<Bytes>) -> (Bytes, Option<Bytes>) {
    if first.len() >= BATCH_BYTES {
        return (first, None);
    }
    let mut batch = BytesMut::with_capacity(first.len().max(4096));
    batch.extend_from_slice(&first);
    while batch.len() < BATCH_BYTES {
        match more() {
            Some(b) if b.len() >= BATCH_BYTES => return (batch.freeze(), Some(b)),
            Some(b) => batch.extend_from_slice(&b),
            None => break,
        }
    }
    (batch.freeze(), None)
}

/// A malformed-input error, for the log line that closes a connection.
pub fn invalid(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

/// Accepts connections on `port` (its name, for logs) and runs `handle` on each in a
/// task of its own, after the TLS handshake (within `handshake_timeout`) when the peer
/// ports use TLS; an error, a refused TLS peer among them, closes that connection
/// alone, logged with the peer's address.
pub(crate) async fn listen<F, Fut>(
    shared: Arc<Shared>,
    listener: TcpListener,
    port: &'static str,
    handshake_timeout: Duration,
    handle: F,
) where
    F: Fn(Arc<Shared>, PeerStream, SocketAddr) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = io::Result<()>> + Send + 'static,
{
    let handle = Arc::new(handle);
    loop {
        match listener.accept().await {
            Ok((stream, addr)) => {
                let s = shared.clone();
                let handle = handle.clone();
                shared.spawn(async move {
                    let run = async {
                        prepare(&stream)?;
                        let stream = match &s.params.tls {
                            None => Either::Plain(stream),
                            Some(tls) => {
                                tokio::time::timeout(handshake_timeout, tls.accept(stream, addr))
                                    .await
                                    .map_err(|_| {
                                        invalid(format!(
                                            "no TLS handshake within {handshake_timeout:?}"
                                        ))
                                    })??
                            }
                        };
                        handle(s.clone(), stream, addr).await
                    };
                    if let Err(e) = run.await {
                        warn!("{port} connection from {addr}: {e}; closed");
                    }
                });
            }
            Err(e) => {
                // Out of descriptors and the like: wait rather than spin.
                warn!("{port} port: accept failed: {e}");
                tokio::time::sleep(shared.params.reconnect_min).await;
            }
        }
    }
}

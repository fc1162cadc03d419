//! What the election and quorum connections share: dialing with a timeout, socket
//! options, and writing queued messages in batches.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tracing::warn;

use super::Shared;

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

/// Connects to `host:port` within `timeout`, TCP_NODELAY set.
///
/// Errors: the name does not resolve, the connect fails, or it takes longer than
/// `timeout` (`TimedOut`).
pub async fn connect(host: &str, port: u16, timeout: Duration) -> io::Result<TcpStream> {
    let stream = tokio::time::timeout(timeout, TcpStream::connect((host, port)))
        .await
        .map_err(|_| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!("connect to {host}:{port} took over {timeout:?}"),
            )
        })??;
    prepare(&stream)?;
    Ok(stream)
}

/// Writes `first` and whatever `more` yields right away, up to [`BATCH_BYTES`], in one
/// write (one syscall while the socket takes it all).
pub async fn write_batch(
    wr: &mut OwnedWriteHalf,
    first: Bytes,
    mut more: impl FnMut() -> Option<Bytes>,
) -> io::Result<()> {
    if first.len() >= BATCH_BYTES {
        return wr.write_all(&first).await;
    }
    let mut batch = BytesMut::with_capacity(first.len().max(4096));
    batch.extend_from_slice(&first);
    while batch.len() < BATCH_BYTES {
        match more() {
            Some(b) => batch.extend_from_slice(&b),
            None => break,
        }
    }
    wr.write_all(&batch).await
}

/// A malformed-input error, for the log line that closes a connection.
pub fn invalid(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

/// Accepts connections on `port` (its name, for logs) and runs `handle` on each in a
/// task of its own; an error closes that connection alone, logged with the peer's
/// address.
pub(crate) async fn listen<F, Fut>(
    shared: Arc<Shared>,
    listener: TcpListener,
    port: &'static str,
    handle: F,
) where
    F: Fn(Arc<Shared>, TcpStream, SocketAddr) -> Fut,
    Fut: Future<Output = io::Result<()>> + Send + 'static,
{
    loop {
        match listener.accept().await {
            Ok((stream, addr)) => {
                let run = handle(shared.clone(), stream, addr);
                shared.spawn(async move {
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

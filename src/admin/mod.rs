//! Admin surface: the four-letter words, the AdminServer over HTTP, Prometheus metrics.
//!
//! - [`fourlw`]: the text each four-letter word answers, rendered from a
//!   [`fourlw::ServerSnapshot`] in Apache ZooKeeper 3.8's exact formats.
//! - [`snapshot`]: gathers that snapshot from the running state machine.
//! - [`json`]: the AdminServer's commands and their JSON bodies.
//! - [`http`]: the AdminServer endpoint (`admin.*` keys).
//! - [`console`]: the read-only web console the AdminServer also serves.
//! - [`metrics`]: the Prometheus `/metrics` endpoint (`metricsProvider.*` keys).
//! - [`quorum`]: the Zab side of an ensemble member, as the core task sees it.
//! - [`core_handle`]: how both endpoints reach the state machine on the core task.
//!
//! [`Endpoints`] binds both HTTP endpoints at start-up, in ZooKeeper's order and with its
//! failure behaviour, and serves them once the core task runs.

pub mod console;
pub mod core_handle;
pub mod fourlw;
pub mod http;
pub mod json;
pub mod metrics;
pub mod quorum;
pub mod snapshot;

use crate::admin::core_handle::CoreHandle;
use crate::config::Config;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Exit status when the AdminServer cannot start (ZooKeeper's
/// `ExitCode.ERROR_STARTING_ADMIN_SERVER`).
pub const EXIT_ADMIN_SERVER_FAILED: i32 = 4;

/// The HTTP endpoints zoo.cfg asks for, bound and waiting for the core.
pub struct Endpoints {
    admin: Option<http::AdminServer>,
    metrics: Option<metrics::MetricsServer>,
}

impl Endpoints {
    /// Binds the metrics endpoint (when `metricsProvider.className` names the Prometheus
    /// provider), then the AdminServer (when `admin.enableServer`), before any data is
    /// loaded, as ZooKeeper's `ZooKeeperServerMain.runFromConfig` starts them.
    ///
    /// Errors: an unknown metrics provider class, or a metrics address that cannot be
    /// bound (ZooKeeper stops with "Cannot boot MetricsProvider"). When the AdminServer's
    /// address cannot be bound the process exits with status
    /// [`EXIT_ADMIN_SERVER_FAILED`] after printing ZooKeeper's "Unable to start
    /// AdminServer, exiting abnormally", as ZooKeeper does.
    pub async fn bind(config: &Config) -> std::io::Result<Endpoints> {
        let metrics = if metrics::prometheus_enabled(config).map_err(std::io::Error::other)? {
            let server = metrics::MetricsServer::bind(config).await.map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!(
                        "Cannot boot MetricsProvider {}: cannot bind {}:{}: {e}",
                        config
                            .metrics_provider_class_name
                            .as_deref()
                            .unwrap_or_default(),
                        config.metrics_provider_http_host,
                        config.metrics_provider_http_port
                    ),
                )
            })?;
            tracing::info!(
                address = %config.metrics_provider_http_host,
                port = config.metrics_provider_http_port,
                "serving Prometheus metrics at /metrics"
            );
            Some(server)
        } else {
            None
        };
        let admin = if config.admin_enable_server {
            match http::AdminServer::bind(config).await {
                Ok(server) => {
                    tracing::info!(
                        address = %config.admin_server_address,
                        port = config.admin_server_port,
                        command_url = %config.admin_command_url,
                        "started AdminServer"
                    );
                    Some(server)
                }
                Err(e) => {
                    tracing::error!(
                        address = %config.admin_server_address,
                        port = config.admin_server_port,
                        command_url = %config.admin_command_url,
                        error = %e,
                        "problem starting AdminServer"
                    );
                    eprintln!("Unable to start AdminServer, exiting abnormally");
                    std::process::exit(EXIT_ADMIN_SERVER_FAILED);
                }
            }
        } else {
            None
        };
        Ok(Endpoints { admin, metrics })
    }

    /// Spawns the bound endpoints on the current tokio runtime; they answer through
    /// `core` until the process ends.
    pub fn serve(self, core: CoreHandle) {
        if let Some(admin) = self.admin {
            tokio::spawn(admin.serve(core.clone()));
        }
        if let Some(metrics) = self.metrics {
            tokio::spawn(metrics.serve(core));
        }
    }
}

/// A TCP listener that holds at most a fixed number of connections open: `accept` waits
/// for a free slot, and a slot frees when its connection is dropped. Bounds the admin
/// endpoints' work whatever their clients do.
pub(crate) struct BoundedListener {
    listener: TcpListener,
    slots: Arc<Semaphore>,
    /// A connection that moves no bytes for this long is closed (`admin.idleTimeout`),
    /// so slow or silent clients cannot hold every slot.
    idle: Duration,
}

impl BoundedListener {
    /// `listener` with at most `max` open connections (at least 1), each closed after
    /// `idle_ms` without a byte read or written (0 = never).
    pub(crate) fn new(listener: TcpListener, max: usize, idle_ms: u32) -> BoundedListener {
        BoundedListener {
            listener,
            slots: Arc::new(Semaphore::new(max.max(1))),
            idle: if idle_ms == 0 {
                Duration::from_secs(365 * 24 * 3600)
            } else {
                Duration::from_millis(idle_ms as u64)
            },
        }
    }
}

/// A connection holding one slot of its [`BoundedListener`].
pub(crate) struct BoundedStream {
    stream: TcpStream,
    _slot: OwnedSemaphorePermit,
    idle: Duration,
    /// When the connection counts as idle; pushed back by every byte moved.
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl BoundedStream {
    fn progressed(&mut self) {
        let next = tokio::time::Instant::now() + self.idle;
        self.deadline.as_mut().reset(next);
    }

    /// An error once the idle deadline has passed (and registers for it otherwise).
    fn check_idle(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "admin connection idle (admin.idleTimeout)",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl axum::serve::Listener for BoundedListener {
    type Io = BoundedStream;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            // The semaphore is never closed, so acquiring only waits.
            let slot = match self.slots.clone().acquire_owned().await {
                Ok(slot) => slot,
                Err(_) => return std::future::pending().await,
            };
            match self.listener.accept().await {
                Ok((stream, addr)) => {
                    return (
                        BoundedStream {
                            stream,
                            _slot: slot,
                            idle: self.idle,
                            deadline: Box::pin(tokio::time::sleep(self.idle)),
                        },
                        addr,
                    )
                }
                Err(e) => {
                    // Accept errors (e.g. too many open files) are transient: wait a
                    // little rather than spin.
                    tracing::warn!(error = %e, "admin endpoint accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

impl AsyncRead for BoundedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match Pin::new(&mut self.stream).poll_read(cx, buf) {
            Poll::Ready(r) => {
                self.progressed();
                Poll::Ready(r)
            }
            Poll::Pending => self.check_idle(cx),
        }
    }
}

impl AsyncWrite for BoundedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match Pin::new(&mut self.stream).poll_write(cx, buf) {
            Poll::Ready(r) => {
                self.progressed();
                Poll::Ready(r)
            }
            Poll::Pending => match self.check_idle(cx) {
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                _ => Poll::Pending,
            },
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::serve::Listener;
    use std::time::Duration;

    #[tokio::test]
    async fn bounded_listener_holds_at_most_its_slots() {
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        let mut listener = BoundedListener::new(tcp, 1, 0);
        let _a = TcpStream::connect(addr).await.unwrap();
        let _b = TcpStream::connect(addr).await.unwrap();
        let (first, _) = listener.accept().await;
        // The only slot is taken: the second connection waits in the backlog.
        let waited = tokio::time::timeout(Duration::from_millis(200), listener.accept()).await;
        assert!(
            waited.is_err(),
            "a second connection was accepted past the bound"
        );
        drop(first);
        let second = tokio::time::timeout(Duration::from_secs(5), listener.accept()).await;
        assert!(second.is_ok(), "the freed slot was not reused");
    }
}

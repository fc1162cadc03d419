//! How the admin surface reaches the state machine: a closure sent to the core task and
//! run there between two inputs, so what it reads is one consistent instant. Defined
//! here, on the admin side, so that the admin code needs nothing from the runtime and the
//! core task (src/member) is the only place that knows both.

use super::quorum::EnsembleView;
use crate::config::Config;
use crate::server::Server;
use tokio::sync::{mpsc, oneshot};

/// A read-only look at the state machine (and, on an ensemble member, its Zab side),
/// run on the core task.
type QueryFn = Box<dyn FnOnce(&Server, &Config, Option<&EnsembleView>) + Send>;
/// A change to the server's figures (not its data), run on the core task.
type UpdateFn = Box<dyn FnOnce(&mut Server, &Config) + Send>;

/// One admin call waiting for the core task; [`CoreCall::run`] executes it.
pub enum CoreCall {
    /// See [`CoreHandle::query`].
    Query(QueryFn),
    /// See [`CoreHandle::update`].
    Update(UpdateFn),
}

impl CoreCall {
    /// Runs the call against the state machine (on the core task, between inputs);
    /// `ensemble` is the member's Zab side, `None` standalone.
    pub fn run(self, server: &mut Server, config: &Config, ensemble: Option<&EnsembleView>) {
        match self {
            CoreCall::Query(f) => f(server, config, ensemble),
            CoreCall::Update(f) => f(server, config),
        }
    }
}

/// A cloneable way into the core task for the AdminServer and the metrics endpoint.
#[derive(Clone)]
pub struct CoreHandle {
    tx: mpsc::Sender<CoreCall>,
}

impl CoreHandle {
    /// A handle whose calls arrive on the receiver of `tx`, which the core task drains.
    /// The channel's capacity bounds how many admin calls can wait at once.
    pub fn new(tx: mpsc::Sender<CoreCall>) -> CoreHandle {
        CoreHandle { tx }
    }

    /// Runs `f` on the core task and returns its result; `None` when the core has
    /// stopped. Waits behind inputs already queued, so `f` must be quick: it holds up
    /// every client while it runs.
    pub async fn query<R, F>(&self, f: F) -> Option<R>
    where
        R: Send + 'static,
        F: FnOnce(&Server, &Config, Option<&EnsembleView>) -> R + Send + 'static,
    {
        let (reply_tx, reply_rx) = oneshot::channel();
        let call = CoreCall::Query(Box::new(
            move |server: &Server, config: &Config, ensemble: Option<&EnsembleView>| {
                let _ = reply_tx.send(f(server, config, ensemble));
            },
        ));
        self.tx.send(call).await.ok()?;
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
        let call = CoreCall::Update(Box::new(move |server: &mut Server, config: &Config| {
            let _ = reply_tx.send(f(server, config));
        }));
        self.tx.send(call).await.ok()?;
        reply_rx.await.ok()
    }
}

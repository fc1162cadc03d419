//! [`Syncers`]: threads that run the txn log's fdatasyncs while the storage thread
//! goes on appending, so one slow sync does not hold back the writes behind it.
//!
//! Why: with one thread that appends then syncs, a request arriving during a sync waits
//! for that sync and then for its own, about two syncs. Here the storage thread writes
//! the next group of txns at once and hands a sync job over; a free syncer starts it
//! right away, even while another sync is still running (up to [`SYNC_THREADS`] at a
//! time). A sync started after a write covers that write (fdatasync flushes the whole
//! file), so a finished job may report everything written before it was handed over.
//!
//! Only the newest job waits: a newer job covers everything an older one would, so
//! handing one over replaces any job not yet started (the queue is bounded at one).

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};
use tokio::sync::watch;

use super::busy_poll::BusyPoll;
use crate::server::stats::StorageStats;
use crate::storage::{StorageError, SyncJob};

/// How many syncs may run at once.
pub const SYNC_THREADS: usize = 2;

struct State {
    /// The newest job not yet started, and the highest zxid it makes durable.
    pending: Option<(SyncJob, i64)>,
    /// Set at stop: workers finish the pending job, then exit.
    stopping: bool,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

/// The sync threads; [`Syncers::stop`] drains and joins them.
pub struct Syncers {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Syncers {
    /// Starts `count` sync threads that report each finished job's zxid to `durable`
    /// (only ever raising it), time each sync into `stats` (`fsynctime`) and tell
    /// `busy_poll` while a sync runs. A failed
    /// sync calls `on_error`, which must not return (the process stops: a write may or
    /// may not be on disk).
    ///
    /// Errors: the OS refused a thread.
    pub fn start(
        count: usize,
        durable: watch::Sender<i64>,
        stats: StorageStats,
        busy_poll: BusyPoll,
        on_error: fn(&StorageError) -> !,
    ) -> std::io::Result<Syncers> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                pending: None,
                stopping: false,
            }),
            wake: Condvar::new(),
        });
        let mut threads = Vec::with_capacity(count);
        for i in 0..count {
            let (shared, durable, stats) = (Arc::clone(&shared), durable.clone(), stats.clone());
            let busy_poll = busy_poll.clone();
            threads.push(
                std::thread::Builder::new()
                    .name(format!("keel-sync-{i}"))
                    .spawn(move || work(&shared, &durable, &stats, &busy_poll, on_error))?,
            );
        }
        Ok(Syncers { shared, threads })
    }

    /// Hands over `job`, which makes everything up to `zxid` durable; it replaces a
    /// job not yet started (this one covers it). Never blocks on a sync.
    pub fn submit(&self, job: SyncJob, zxid: i64) {
        self.shared.state.lock().pending = Some((job, zxid));
        self.shared.wake.notify_one();
    }

    /// Runs the pending job, waits for running ones, and joins the threads.
    pub fn stop(self) {
        self.shared.state.lock().stopping = true;
        self.shared.wake.notify_all();
        for t in self.threads {
            let _ = t.join();
        }
    }
}

fn work(
    shared: &Shared,
    durable: &watch::Sender<i64>,
    stats: &StorageStats,
    busy_poll: &BusyPoll,
    on_error: fn(&StorageError) -> !,
) {
    loop {
        let (job, zxid) = {
            let mut state = shared.state.lock();
            loop {
                if let Some(next) = state.pending.take() {
                    break next;
                }
                if state.stopping {
                    return;
                }
                shared.wake.wait(&mut state);
            }
        };
        let t0 = Instant::now();
        // The CPU stays awake through the sync, so its completion and the replies
        // after it do not wait for a halted CPU to wake.
        let in_flight = busy_poll.sync_started();
        if let Err(e) = job() {
            on_error(&e);
        }
        drop(in_flight);
        stats.record_fsync(t0.elapsed().as_millis() as u64);
        durable.send_if_modified(|d| {
            let raise = zxid > *d;
            if raise {
                *d = zxid;
            }
            raise
        });
    }
}

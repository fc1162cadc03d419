//! The storage thread: executes the server's [`StorageOp`]s on a blocking thread,
//! appends in order, writing each batch of appended txns at once and syncing it once
//! (group commit), and the snapshot writes taken with a batch after its appends — on the [`Syncers`] threads when the store offers sync jobs, so the next
//! batch is written while a sync runs — and reports the highest durable zxid back to
//! the core through a watch channel (which never blocks, so the two cannot deadlock on
//! full queues). It times each sync and each snapshot into [`StorageStats`]
//! (`fsynctime`, `snapshottime`, `last_snapshot`).

use super::busy_poll::BusyPoll;
use super::syncer::{Syncers, SYNC_THREADS};
use crate::server::stats::StorageStats;
use crate::server::StorageOp;
use crate::storage::{LogEntry, Storage};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, watch, Semaphore};

/// Autopurge settings (ZooKeeper's autopurge.snapRetainCount / purgeInterval).
#[derive(Debug, Clone, Copy)]
pub struct Purge {
    pub retain: usize,
    /// 0 = never purge.
    pub interval_hours: u32,
}

impl Purge {
    /// Whether a purge is due after a snapshot, given the `last` one of this run (then
    /// set to now): autopurge is on, and none ran yet in this run (ZooKeeper runs its
    /// purge task at start-up) or `interval_hours` have passed since.
    pub fn due(&self, last: &mut Option<Instant>) -> bool {
        let every = Duration::from_secs(u64::from(self.interval_hours) * 3600);
        let due = self.interval_hours > 0 && last.is_none_or(|t| t.elapsed() >= every);
        if due {
            *last = Some(Instant::now());
        }
        due
    }
}

/// Runs until `rx` closes, recording sync and snapshot times in `stats`, and returning a
/// permit to `chunk_slots` for each snapshot chunk after the header once it is written
/// (the core takes one per chunk it serialises). A storage error
/// is fatal: the process exits, because an unacknowledged write may or may not be on
/// disk and serving on would be a guess.
pub fn run(
    mut storage: Box<dyn Storage>,
    mut rx: mpsc::Receiver<StorageOp>,
    durable: watch::Sender<i64>,
    purge: Purge,
    stats: StorageStats,
    chunk_slots: &Semaphore,
    busy_poll: BusyPoll,
) {
    // None: not yet purged in this run, so the first snapshot purges (ZooKeeper runs
    // its purge task at start-up, then every purgeInterval hours).
    let mut last_purge: Option<Instant> = None;
    let mut entries: Vec<LogEntry> = Vec::new();
    let syncers = match Syncers::start(
        SYNC_THREADS,
        durable.clone(),
        stats.clone(),
        busy_poll,
        fatal,
    ) {
        Ok(s) => s,
        Err(e) => fatal(&e.into()),
    };
    match storage.snapshots() {
        Ok(zxids) => {
            if let Some(&zxid) = zxids.last() {
                stats.found_snapshot(zxid);
            }
        }
        Err(e) => fatal(&e),
    }
    // The snapshot being written and when its first chunk arrived.
    let mut snapshot_started: Option<(i64, Instant)> = None;
    // Snapshot writes taken with a batch of appends, done after the appends are written
    // and their sync handed over: a snapshot's chunks are of txns already durable, so
    // the order between them and later appends does not matter, and the appends (which
    // clients wait on) need not wait behind a chunk's write.
    let mut deferred: Vec<StorageOp> = Vec::new();
    while let Some(first) = rx.blocking_recv() {
        let mut op = Some(first);
        let mut last_zxid = None;
        // Take everything already queued: one sync covers all its appends.
        while let Some(o) = op.take() {
            match o {
                StorageOp::Append(txn) => {
                    last_zxid = Some(txn.zxid);
                    entries.push(LogEntry {
                        zxid: txn.zxid,
                        data: txn.encode(),
                    });
                }
                snapshot_op => deferred.push(snapshot_op),
            }
            if entries.len() < 4096 && deferred.len() < 64 {
                op = rx.try_recv().ok();
            }
        }
        if !entries.is_empty() {
            let overlapped = match storage.append(&entries, false) {
                Ok(()) => storage.sync_job(),
                Err(e) => fatal(&e),
            };
            entries.clear();
            match (overlapped, last_zxid) {
                (Some(job), Some(z)) => syncers.submit(job, z),
                _ => {
                    // No sync job (forceSync=no, or a store without them): sync here.
                    let t0 = Instant::now();
                    if let Err(e) = storage.append(&[], true) {
                        fatal(&e);
                    }
                    stats.record_fsync(t0.elapsed().as_millis() as u64);
                    if let Some(z) = last_zxid {
                        raise(&durable, z);
                    }
                }
            }
        }
        for o in deferred.drain(..) {
            let result = match o {
                StorageOp::Append(_) => unreachable!("appends are never deferred"),
                StorageOp::SnapshotChunk { zxid, index, data } => {
                    if index == 0 {
                        snapshot_started = Some((zxid, Instant::now()));
                    }
                    let r = storage.put_snapshot_chunk(zxid, index, &data);
                    // Chunk 0, the header, is queued when the snapshot starts, without
                    // a permit; every later chunk took one.
                    if index > 0 {
                        chunk_slots.add_permits(1);
                    }
                    r
                }
                StorageOp::SnapshotDone { zxid, chunks } => {
                    let r = storage.finish_snapshot(zxid, chunks);
                    if r.is_ok() {
                        let elapsed_ms = match snapshot_started.take() {
                            Some((z, t0)) if z == zxid => t0.elapsed().as_millis() as u64,
                            _ => 0,
                        };
                        stats.record_snapshot(zxid, elapsed_ms, unix_seconds());
                    }
                    if r.is_ok() && purge.due(&mut last_purge) {
                        tracing::info!(retain = purge.retain, "purging old snapshots and txns");
                        storage.purge(purge.retain)
                    } else {
                        r
                    }
                }
            };
            if let Err(e) = result {
                fatal(&e);
            }
        }
    }
    syncers.stop();
    // A clean stop: every queued op is done; let the store tidy up for a quick start.
    if let Err(e) = storage.close() {
        tracing::warn!(error = %e, "tidying the store at stop failed; nothing is lost");
    }
}

/// Raises the durable zxid to `zxid` (the syncers raise it too; it never goes down).
fn raise(durable: &watch::Sender<i64>, zxid: i64) {
    durable.send_if_modified(|d| {
        let up = zxid > *d;
        if up {
            *d = zxid;
        }
        up
    });
}

/// Seconds since the Unix epoch (0 if the clock is before it).
fn unix_seconds() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn fatal(e: &crate::storage::StorageError) -> ! {
    tracing::error!(error = %e, "storage failed; stopping so no unacknowledged write is guessed at");
    std::process::exit(3);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::txn::{Txn, TxnOp};
    use crate::storage::mem::MemStorage;
    use crate::storage::{Snapshot, StorageError};
    use parking_lot::Mutex;
    use std::sync::Arc;

    /// A MemStorage that records the order of the writes it is asked for.
    struct Recorder {
        inner: MemStorage,
        calls: Arc<Mutex<Vec<String>>>,
    }

    impl Storage for Recorder {
        fn append(&mut self, entries: &[LogEntry], sync: bool) -> Result<(), StorageError> {
            let zxids: Vec<i64> = entries.iter().map(|e| e.zxid).collect();
            if !zxids.is_empty() {
                self.calls.lock().push(format!("append {zxids:?}"));
            }
            self.inner.append(entries, sync)
        }
        fn last_zxid(&self) -> Result<Option<i64>, StorageError> {
            self.inner.last_zxid()
        }
        fn read_log(
            &self,
            after: i64,
            f: &mut dyn FnMut(LogEntry) -> Result<(), StorageError>,
        ) -> Result<(), StorageError> {
            self.inner.read_log(after, f)
        }
        fn put_snapshot_chunk(
            &mut self,
            zxid: i64,
            index: u32,
            data: &[u8],
        ) -> Result<(), StorageError> {
            self.calls.lock().push(format!("chunk {index}"));
            self.inner.put_snapshot_chunk(zxid, index, data)
        }
        fn finish_snapshot(&mut self, zxid: i64, chunks: u32) -> Result<(), StorageError> {
            self.calls.lock().push(format!("done {chunks}"));
            self.inner.finish_snapshot(zxid, chunks)
        }
        fn latest_snapshot(&self) -> Result<Option<Snapshot>, StorageError> {
            self.inner.latest_snapshot()
        }
        fn snapshots(&self) -> Result<Vec<i64>, StorageError> {
            self.inner.snapshots()
        }
        fn purge(&mut self, retain: usize) -> Result<(), StorageError> {
            self.inner.purge(retain)
        }
        fn get_meta(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
            self.inner.get_meta(key)
        }
        fn put_meta(&mut self, key: &str, value: &[u8]) -> Result<(), StorageError> {
            self.inner.put_meta(key, value)
        }
    }

    fn append(zxid: i64) -> StorageOp {
        StorageOp::Append(Txn {
            zxid,
            time_ms: 0,
            session_id: zxid,
            cxid: 0,
            op: TxnOp::CreateSession {
                timeout_ms: 30_000,
                passwd: [0; 16],
            },
        })
    }

    fn chunk(index: u32) -> StorageOp {
        StorageOp::SnapshotChunk {
            zxid: 1,
            index,
            data: vec![index as u8; 16],
        }
    }

    /// Snapshot writes queued with appends are done after the appends are written, in
    /// their own order, and the appends are reported durable; the snapshot is complete.
    #[test]
    fn appends_are_written_before_the_snapshot_writes_queued_with_them() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let store = MemStorage::new();
        let (tx, rx) = mpsc::channel(16);
        for op in [
            chunk(0),
            append(2),
            chunk(1),
            append(3),
            chunk(2),
            StorageOp::SnapshotDone { zxid: 1, chunks: 3 },
            append(4),
        ] {
            tx.try_send(op).unwrap();
        }
        drop(tx);
        let (durable_tx, durable_rx) = watch::channel(1);
        let slots = Semaphore::new(0);
        let (poll, _thread) = BusyPoll::start(0).unwrap();
        run(
            Box::new(Recorder {
                inner: store.reopen(),
                calls: Arc::clone(&calls),
            }),
            rx,
            durable_tx,
            Purge {
                retain: 3,
                interval_hours: 0,
            },
            StorageStats::default(),
            &slots,
            poll,
        );
        assert_eq!(
            *calls.lock(),
            [
                "append [2, 3, 4]",
                "chunk 0",
                "chunk 1",
                "chunk 2",
                "done 3"
            ]
        );
        assert_eq!(*durable_rx.borrow(), 4);
        // One permit back for each chunk after the header.
        assert_eq!(slots.available_permits(), 2);
        let reopened = store.reopen();
        assert_eq!(reopened.snapshots().unwrap(), [1]);
        assert_eq!(reopened.last_zxid().unwrap(), Some(4));
    }
}

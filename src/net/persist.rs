//! The storage thread: executes the server's [`StorageOp`]s in order on a blocking
//! thread, syncing each batch of appended txns once (group commit), and reports the
//! highest durable zxid back to the core through a watch channel (which never blocks, so
//! the two cannot deadlock on full queues).

use crate::server::StorageOp;
use crate::storage::{LogEntry, Storage};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

/// Autopurge settings (ZooKeeper's autopurge.snapRetainCount / purgeInterval).
#[derive(Debug, Clone, Copy)]
pub struct Purge {
    pub retain: usize,
    /// 0 = never purge.
    pub interval_hours: u32,
}

/// Runs until `rx` closes. A storage error is fatal: the process exits, because an
/// unacknowledged write may or may not be on disk and serving on would be a guess.
pub fn run(
    mut storage: Box<dyn Storage>,
    mut rx: mpsc::Receiver<StorageOp>,
    durable: watch::Sender<i64>,
    purge: Purge,
) {
    let mut last_purge = Instant::now();
    let mut entries: Vec<LogEntry> = Vec::new();
    while let Some(first) = rx.blocking_recv() {
        let mut op = Some(first);
        let mut last_zxid = None;
        // Take everything already queued: one sync covers all its appends.
        while let Some(o) = op.take() {
            let result = match o {
                StorageOp::Append(txn) => {
                    last_zxid = Some(txn.zxid);
                    entries.push(LogEntry {
                        zxid: txn.zxid,
                        data: txn.encode(),
                    });
                    Ok(())
                }
                StorageOp::SnapshotChunk { zxid, index, data } => {
                    storage.put_snapshot_chunk(zxid, index, &data)
                }
                StorageOp::SnapshotDone { zxid, chunks } => {
                    let r = storage.finish_snapshot(zxid, chunks);
                    let due = purge.interval_hours > 0
                        && last_purge.elapsed()
                            >= Duration::from_secs(purge.interval_hours as u64 * 3600);
                    if r.is_ok() && due {
                        last_purge = Instant::now();
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
            if entries.len() < 4096 {
                op = rx.try_recv().ok();
            }
        }
        if !entries.is_empty() {
            if let Err(e) = storage.append(&entries, true) {
                fatal(&e);
            }
            entries.clear();
        }
        if let Some(z) = last_zxid {
            durable.send_replace(z);
        }
    }
}

fn fatal(e: &crate::storage::StorageError) -> ! {
    tracing::error!(error = %e, "storage failed; stopping so no unacknowledged write is guessed at");
    std::process::exit(3);
}

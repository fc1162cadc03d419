//! [`MemStorage`]: the [`Storage`] rules kept in memory, for tests and the deterministic
//! simulation (shared/DESIGN.md, `tests/sim*`: "disk (crash loses unsynced writes)").
//!
//! The durable state sits behind an `Arc<Mutex<..>>`, so a test can "restart" a server
//! over the same disk ([`MemStorage::reopen`]) and pull the plug first
//! ([`MemStorage::crash`]): a crash keeps what a real disk would have kept after an
//! fsync and nothing else.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;

use super::{LogEntry, Snapshot, Storage, StorageError};

/// The name [`StorageError::Corrupt`] gives for this backend's "file".
const PATH: &str = "<memory>";

/// An in-memory [`Storage`]: clones made by [`MemStorage::reopen`] share one simulated
/// disk. Nothing is ever damaged on it, so [`StorageError::Corrupt`] appears only for a
/// snapshot finished with chunks that were never written.
#[derive(Debug, Default)]
pub struct MemStorage {
    disk: Arc<Mutex<Disk>>,
}

/// What the simulated disk holds.
#[derive(Debug, Default)]
struct Disk {
    /// The txn log in zxid order, synced or not.
    log: Vec<LogEntry>,
    /// How many entries at the front of `log` a crash keeps: those appended before the
    /// last sync.
    synced_len: usize,
    /// Chunks by (snapshot zxid, chunk index), finished or not.
    chunks: BTreeMap<(i64, u32), Vec<u8>>,
    /// Finished snapshots: zxid -> chunk count.
    finished: BTreeMap<i64, u32>,
    /// Metadata; always written durably.
    meta: BTreeMap<String, Vec<u8>>,
    /// Syncs made so far (one per synced append), so tests can check group commit.
    syncs: u64,
}

impl MemStorage {
    /// An empty store on a fresh simulated disk.
    pub fn new() -> MemStorage {
        MemStorage::default()
    }

    /// Another handle on the same simulated disk, as a restarted server would open it.
    /// Call [`MemStorage::crash`] first to lose what was not synced.
    pub fn reopen(&self) -> MemStorage {
        MemStorage {
            disk: Arc::clone(&self.disk),
        }
    }

    /// Simulates a power loss: drops the log entries appended without sync since the
    /// last synced append, and the chunks of snapshots not yet finished. Metadata and
    /// finished snapshots survive, as they are written durably.
    pub fn crash(&self) {
        let mut disk = self.disk.lock();
        let synced_len = disk.synced_len;
        disk.log.truncate(synced_len);
        let Disk {
            chunks, finished, ..
        } = &mut *disk;
        chunks.retain(|(zxid, _), _| finished.contains_key(zxid));
    }

    /// How many syncs appends have made on this disk (one per `append(.., sync =
    /// true)` call, however many entries it carried).
    pub fn sync_count(&self) -> u64 {
        self.disk.lock().syncs
    }
}

impl Storage for MemStorage {
    fn append(&mut self, entries: &[LogEntry], sync: bool) -> Result<(), StorageError> {
        let mut disk = self.disk.lock();
        let mut last = disk.log.last().map(|e| e.zxid);
        // Check the whole call first so a refused append stores nothing, as one
        // RocksDB write batch would.
        for entry in entries {
            check_order(entry.zxid, last)?;
            last = Some(entry.zxid);
        }
        disk.log.extend_from_slice(entries);
        if sync {
            disk.synced_len = disk.log.len();
            disk.syncs += 1;
        }
        Ok(())
    }

    fn last_zxid(&self) -> Result<Option<i64>, StorageError> {
        Ok(self.disk.lock().log.last().map(|e| e.zxid))
    }

    fn read_log(
        &self,
        after: i64,
        f: &mut dyn FnMut(LogEntry) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        // Copy out first: `f` may take a while, and the lock is not held across it.
        let entries: Vec<LogEntry> = {
            let disk = self.disk.lock();
            let start = disk.log.partition_point(|e| e.zxid <= after);
            disk.log[start..].to_vec()
        };
        entries.into_iter().try_for_each(f)
    }

    fn put_snapshot_chunk(
        &mut self,
        zxid: i64,
        index: u32,
        data: &[u8],
    ) -> Result<(), StorageError> {
        self.disk.lock().chunks.insert((zxid, index), data.to_vec());
        Ok(())
    }

    fn finish_snapshot(&mut self, zxid: i64, chunks: u32) -> Result<(), StorageError> {
        self.disk.lock().finished.insert(zxid, chunks);
        Ok(())
    }

    fn latest_snapshot(&self) -> Result<Option<Snapshot>, StorageError> {
        let disk = self.disk.lock();
        let Some((&zxid, &count)) = disk.finished.last_key_value() else {
            return Ok(None);
        };
        let chunks = (0..count)
            .map(|index| {
                disk.chunks
                    .get(&(zxid, index))
                    .cloned()
                    .ok_or_else(|| StorageError::Corrupt {
                        path: PathBuf::from(PATH),
                        position: format!("snapshot 0x{zxid:x} chunk {index}"),
                        what: format!("chunk missing from a snapshot of {count} chunks"),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(Snapshot { zxid, chunks }))
    }

    fn snapshots(&self) -> Result<Vec<i64>, StorageError> {
        Ok(self.disk.lock().finished.keys().copied().collect())
    }

    fn purge(&mut self, retain: usize) -> Result<(), StorageError> {
        let mut disk = self.disk.lock();
        let complete: Vec<i64> = disk.finished.keys().copied().collect();
        let Some(&newest) = complete.last() else {
            return Ok(());
        };
        let keep_from = complete.len().saturating_sub(retain.max(1));
        let oldest_kept = complete[keep_from];
        let Disk {
            log,
            synced_len,
            chunks,
            finished,
            ..
        } = &mut *disk;
        finished.retain(|&zxid, _| zxid >= oldest_kept);
        // Chunks go with their deleted snapshot, and unfinished ones older than the
        // newest complete snapshot are abandoned; newer unfinished ones are in progress.
        chunks.retain(|&(zxid, _), _| finished.contains_key(&zxid) || zxid > newest);
        let removed = log.partition_point(|e| e.zxid <= oldest_kept);
        log.drain(..removed);
        *synced_len = synced_len.saturating_sub(removed);
        Ok(())
    }

    fn get_meta(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(self.disk.lock().meta.get(key).cloned())
    }

    fn put_meta(&mut self, key: &str, value: &[u8]) -> Result<(), StorageError> {
        self.disk.lock().meta.insert(key.to_owned(), value.to_vec());
        Ok(())
    }
}

/// The append order rule both backends keep: every zxid is above the last stored one,
/// and zxids are never negative (the RocksDB key is the zxid's big-endian bytes, whose
/// order is numeric only for non-negative zxids; ZooKeeper's zxids are
/// `(epoch << 32) | counter` with both parts non-negative).
fn check_order(zxid: i64, last: Option<i64>) -> Result<(), StorageError> {
    let last = last.unwrap_or(-1);
    if zxid <= last {
        return Err(StorageError::OutOfOrder { zxid, last });
    }
    Ok(())
}

//! Durable state in dataDir: the txn log, snapshots, and metadata (format version,
//! epochs), behind the [`Storage`] trait so the server does not care which backend
//! holds them. Backends: RocksDB with keel's own txn log files (`rocks` + `txnlog`,
//! production) and memory (`mem`, tests and simulation). One conformance suite
//! (`conformance`) runs against both.
//!
//! Storage is used from one thread (the runtime's storage thread); calls block.
//! Rules every backend keeps (shared/DESIGN.md, "One write, end to end"):
//! - `append(.., sync = true)` returns only once the entries survive a crash (fsync), and
//!   one call makes one sync however many entries it carries (group commit).
//! - Entries are read back in zxid order; a torn final record is dropped at open, as
//!   ZooKeeper drops a torn txn log tail; corruption anywhere else, or an unknown
//!   on-disk format version, is an error naming the file and position, and nothing is
//!   rewritten.
//! - A snapshot counts only once `finish_snapshot` returned; a crash mid-snapshot, or
//!   before the next synced write, leaves the previous one in force. `purge` makes the
//!   snapshots it keeps durable before it deletes anything.
//!
//! [`zab`] puts the Zab core's [`crate::zab::storage::ZabStorage`] on the production
//! backend: acceptedEpoch and currentEpoch files, log truncation (TRUNC) and snapshot
//! installs (SNAP), each durable and crash-safe step by step.

pub mod conformance;
pub mod mem;
pub mod rocks;
pub mod txnlog;
pub mod zab;

use std::path::PathBuf;

/// The on-disk format version keel writes. Version 1 kept the txn log in RocksDB;
/// version 2 keeps it in keel's own segment files ([`txnlog`]) and still reads a
/// version 1 store's log (the first read-write open marks it version 2, so an older
/// keel, which would not see the new files, refuses it). Any other stored version is
/// refused at open with [`StorageError::Version`].
pub const FORMAT_VERSION: u32 = 2;
/// The oldest on-disk format version this build still reads.
pub const OLDEST_FORMAT_VERSION: u32 = 1;

/// One txn as stored. The bytes are the server's encoding; storage treats them as opaque
/// but protects them with a checksum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    pub zxid: i64,
    pub data: Vec<u8>,
}

/// Why storage failed.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// Stored data is damaged: `path` names the file or database, `position` the record
    /// (e.g. "log record zxid 0x100000005" or "byte offset 4096").
    #[error("{}: corrupt data at {position}: {what}", path.display())]
    Corrupt {
        path: PathBuf,
        position: String,
        what: String,
    },
    /// The data was written in an on-disk format this build does not read.
    #[error("{}: on-disk format version {found}, this keel reads version {expected}", path.display())]
    Version {
        path: PathBuf,
        found: u32,
        expected: u32,
    },
    /// An append broke the rule that zxids only increase.
    #[error("zxid 0x{zxid:x} is not above the last stored zxid 0x{last:x}")]
    OutOfOrder { zxid: i64, last: i64 },
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The backend (RocksDB) reported an error.
    #[error("storage backend: {0}")]
    Backend(String),
}

/// Deletes the file at `path` if there is one.
///
/// Errors: any I/O error but the file not existing.
pub(crate) fn remove_file_if_present(path: &std::path::Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// A step boundary of a multi-step durable operation (a txn log truncation, a snapshot
/// install). In the library's own tests the step [`fail::arm`] chose fails here with an
/// I/O error naming `step`: a crash just after the step, which leaves what the steps so
/// far wrote and does nothing after. Otherwise a no-op.
#[inline]
pub(crate) fn fail_point(step: &str) -> Result<(), StorageError> {
    #[cfg(test)]
    if fail::hit() {
        return Err(std::io::Error::other(format!("injected crash after: {step}")).into());
    }
    #[cfg(not(test))]
    let _ = step;
    Ok(())
}

/// Failure injection for the library's tests: counts the [`fail_point`]s this thread
/// passes and fails the chosen one.
#[cfg(test)]
pub(crate) mod fail {
    use std::cell::Cell;

    thread_local! {
        static HITS: Cell<u32> = const { Cell::new(0) };
        static AT: Cell<Option<u32>> = const { Cell::new(None) };
    }

    /// From now on, the `k`-th fail point (1-based) this thread passes fails; `None`:
    /// none fails. Restarts the count.
    pub fn arm(k: Option<u32>) {
        HITS.set(0);
        AT.set(k);
    }

    /// The fail points this thread passed since the last [`arm`].
    pub fn hits() -> u32 {
        HITS.get()
    }

    /// Counts one fail point; whether it is the armed one.
    pub(super) fn hit() -> bool {
        let n = HITS.get() + 1;
        HITS.set(n);
        AT.get() == Some(n)
    }
}

/// A complete snapshot as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The last zxid applied when the snapshot began. Snapshots are fuzzy (the state
    /// moves on while it is written), so recovery replays every txn above this zxid.
    pub zxid: i64,
    /// The snapshot's bytes in chunk order.
    pub chunks: Vec<Vec<u8>>,
}

/// Work that makes every entry appended before it was made durable, runnable on any
/// thread (see [`Storage::sync_job`]).
pub type SyncJob = Box<dyn FnOnce() -> Result<(), StorageError> + Send>;

/// The durable store of one server.
pub trait Storage: Send {
    /// Appends `entries` (zxids strictly increasing and above every stored entry); with
    /// `sync`, returns only after they are durable, using one sync for the whole call.
    ///
    /// Errors: [`StorageError::OutOfOrder`], I/O or backend errors (the caller must then
    /// stop: an unacknowledged write may or may not be stored).
    fn append(&mut self, entries: &[LogEntry], sync: bool) -> Result<(), StorageError>;

    /// For a caller that overlaps syncs with further appends: a job that, run on any
    /// thread after this call, makes every entry appended before this call durable (one
    /// fdatasync), while appends go on. `None` when the backend has no such job or syncs
    /// are off (`forceSync=no`); then `append(.., true)` is the way to sync.
    fn sync_job(&mut self) -> Option<SyncJob> {
        None
    }

    /// The highest stored zxid, if any entry is stored.
    fn last_zxid(&self) -> Result<Option<i64>, StorageError>;

    /// Calls `f` with every stored entry whose zxid is above `after`, in zxid order.
    ///
    /// Errors: [`StorageError::Corrupt`] naming the first damaged record; `f`'s error.
    fn read_log(
        &self,
        after: i64,
        f: &mut dyn FnMut(LogEntry) -> Result<(), StorageError>,
    ) -> Result<(), StorageError>;

    /// Stores chunk `index` (0, 1, 2, ...) of the snapshot that began at `zxid`. Not
    /// durable and not visible until [`Storage::finish_snapshot`].
    fn put_snapshot_chunk(
        &mut self,
        zxid: i64,
        index: u32,
        data: &[u8],
    ) -> Result<(), StorageError>;

    /// Marks the snapshot at `zxid` with `chunks` chunks complete. It may become durable
    /// only with the next synced write ([`Storage::purge`], [`Storage::put_meta`]) or
    /// [`Storage::close`]; a crash before that may lose it, and recovery then starts
    /// from an older snapshot (or none) and replays the log, which only a purge trims.
    fn finish_snapshot(&mut self, zxid: i64, chunks: u32) -> Result<(), StorageError>;

    /// The newest complete snapshot, if any.
    ///
    /// Errors: [`StorageError::Corrupt`] if a chunk fails its checksum or is missing.
    fn latest_snapshot(&self) -> Result<Option<Snapshot>, StorageError>;

    /// zxids of the complete snapshots, oldest first.
    fn snapshots(&self) -> Result<Vec<i64>, StorageError>;

    /// Keeps the `retain` newest complete snapshots (at least 1), deletes older ones and
    /// every log entry not needed to recover from the oldest kept snapshot (zxid <= that
    /// snapshot's zxid). Incomplete snapshots older than the newest complete one go too.
    fn purge(&mut self, retain: usize) -> Result<(), StorageError>;

    /// A metadata value (e.g. "current_epoch").
    fn get_meta(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError>;

    /// Sets a metadata value durably.
    fn put_meta(&mut self, key: &str, value: &[u8]) -> Result<(), StorageError>;

    /// Called once on a clean stop, after the last append: a store may tidy up so the
    /// next start is quicker. Nothing may depend on it (a crash skips it).
    ///
    /// Errors: the tidy-up failed; everything appended is still durable.
    fn close(&mut self) -> Result<(), StorageError> {
        Ok(())
    }
}

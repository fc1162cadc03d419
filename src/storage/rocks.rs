//! [`RocksStorage`]: the production [`Storage`], one RocksDB database per server.
//!
//! Layout (all integers big-endian):
//! - The database lives in `dataDir/keel-db`; its write-ahead log in
//!   `dataLogDir/keel-wal` when ZooKeeper's `dataLogDir` is set apart from `dataDir` (so
//!   the txn log's fsyncs go to their own disk, as ZooKeeper advises), otherwise in the
//!   database directory.
//! - The txn log is not in RocksDB: it is keel's own segment files in
//!   `dataLogDir/keel-txnlog` ([`super::txnlog`]), on preallocated space so each group
//!   commit's fdatasync writes data only. The meta key [`TXNLOG_META_KEY`] records that
//!   the directory was created, so a start that cannot find it (dataLogDir changed,
//!   directory lost) is refused instead of silently starting without the log.
//! - Column family `log` (format version 1 only): key = zxid (8 bytes), value = a
//!   record (below) of the txn. Still read, never written; purge empties it.
//! - Column family `snapshot`: key = snapshot zxid (8 bytes) + chunk index (4 bytes),
//!   value = a record of the chunk.
//! - Column family `meta`: `format_version` = [`FORMAT_VERSION`] (4 bytes);
//!   `snapshot/<zxid as 16 hex digits>` = chunk count (4 bytes), written by
//!   `finish_snapshot` and marking that snapshot complete; every other key is the
//!   server's ([`Storage::put_meta`]).
//! - A record is 1 version byte ([`RECORD_VERSION`]), the CRC-32 (IEEE) of the data
//!   (4 bytes), then the data. RocksDB checksums its own blocks too; the record's CRC
//!   covers the bytes end to end, from the server's buffer back to it.
//!
//! Crash safety: every write is one RocksDB write batch, atomic in the WAL, but for a
//! SNAP's chunks, which go in as one ingested table file before the batch that makes
//! them a snapshot ([`RocksStorage::install_snapshot`]). The WAL is
//! recovered with `TolerateCorruptedTailRecords`: a torn final record (a crash in
//! mid-write) is dropped, as ZooKeeper drops a torn txn log tail, while damage before
//! the tail fails the open. Closed WALs are also tracked in the MANIFEST (RocksDB's
//! `track_and_verify_wals_in_manifest`), so one that went missing fails the open; the
//! live WAL is not tracked, so changing `dataLogDir` between runs without moving
//! `keel-wal` loses what was not yet flushed to the database's tables.
//!
//! Truncation and snapshot installs (Zab's TRUNC and SNAP, [`RocksStorage::truncate_after`]
//! and [`RocksStorage::install_snapshot`]) each commit in one synced write batch, which
//! RocksDB applies whole or not at all. The batch records the txn log's cut under
//! [`TXNLOG_TRUNCATE_KEY`]; the file work after it ([`super::txnlog`]'s truncation) is
//! redone by every open until the key is deleted, so a crash at any step leaves the
//! state before the batch or the state after the whole operation.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use rocksdb::{
    ColumnFamily, DBCompressionType, DBRecoveryMode, Direction, ErrorKind, IteratorMode, Options,
    WriteBatch, WriteOptions, DB,
};

use super::txnlog::{self, Cut, TxnLog};
use super::{
    fail_point, remove_file_if_present, LogEntry, Snapshot, Storage, StorageError, SyncJob,
    FORMAT_VERSION, OLDEST_FORMAT_VERSION,
};

/// The database's directory under `dataDir`.
pub const DB_DIR: &str = "keel-db";
/// The WAL's directory under `dataLogDir`, when that differs from `dataDir`.
pub const WAL_DIR: &str = "keel-wal";
/// Column family of the txn log.
pub const LOG_CF: &str = "log";
/// Column family of snapshot chunks.
pub const SNAPSHOT_CF: &str = "snapshot";
/// Column family of metadata.
pub const META_CF: &str = "meta";
/// The meta key holding [`FORMAT_VERSION`]; reserved, refused by `put_meta`.
pub const FORMAT_VERSION_KEY: &str = "format_version";
/// The prefix of the meta keys that mark snapshots complete; reserved, refused by
/// `put_meta`.
pub const SNAPSHOT_MARKER_PREFIX: &str = "snapshot/";
/// The meta key that marks the txn log directory as created; reserved.
pub const TXNLOG_META_KEY: &str = "txnlog_created";
/// The meta key holding the zxid (8 bytes) up to which purge deleted the log. The txn
/// log deletes whole segment files, so entries at or below it may still be in a kept
/// file; reads skip them, so the log reads exactly as purged. Reserved.
pub const TXNLOG_PURGED_KEY: &str = "txnlog_purged_upto";
/// The meta key holding the first zxid (8 bytes) of the newest txn log segment, written
/// each time the log starts a segment, so a start that finds the log's newest files
/// gone (deleted, or a stale copy of the directory) is refused. Reserved.
pub const TXNLOG_NEWEST_KEY: &str = "txnlog_newest_segment";
/// The meta key of a txn log truncation under way: a record (below) holding the
/// truncation point, the [`Cut`] and the carry (the entries the cut append keeps), from
/// the synced batch that commits a truncation or a snapshot install until its file work
/// is done. An open that finds it applies the cut ([`TxnLog::open_cut`]) and finishes
/// the work. Reserved.
pub const TXNLOG_TRUNCATE_KEY: &str = "txnlog_truncate";
/// The table file [`RocksStorage::stage_snapshot`] (and so
/// [`RocksStorage::install_snapshot`]) writes a SNAP's chunks into before RocksDB
/// ingests (moves) it, in the database directory. RocksDB leaves files of names it does
/// not use alone; an install, another stage, [`RocksStorage::discard_staged`] or an
/// open deletes one left behind.
pub const INSTALL_FILE: &str = "keel-install.sst.tmp";
/// The first byte of every log and snapshot record.
pub const RECORD_VERSION: u8 = 1;

/// How many of RocksDB's own info logs (`LOG`, `LOG.old.*`) to keep; its default of a
/// thousand would slowly fill dataDir.
const KEEP_INFO_LOGS: usize = 5;

const COLUMN_FAMILIES: [&str; 3] = [LOG_CF, SNAPSHOT_CF, META_CF];

/// A [`Storage`] on RocksDB. Open it with [`RocksStorage::open`]; dropping it closes the
/// database (which holds a lock file, so only one may be open per directory).
pub struct RocksStorage {
    /// Shared with the thread sealing a periodic snapshot ([`RocksStorage::seal`]).
    db: Arc<DB>,
    /// The database directory, named in errors.
    path: PathBuf,
    /// ZooKeeper's `forceSync`: when false, appends skip the fsync (meta and snapshot
    /// markers are still synced).
    force_sync: bool,
    /// The highest zxid in the log, kept so an append checks its order without a read.
    last: Option<i64>,
    /// The txn log (every append since format version 2).
    txnlog: TxnLog,
    /// Reads skip log entries at or below this zxid ([`TXNLOG_PURGED_KEY`]; -1: none).
    purged_upto: i64,
    /// Opened with [`RocksStorage::open_read_only`]: every write fails.
    read_only: bool,
    /// Opened read-only with a truncation under way: the carry it will append, which
    /// reads show after the txn log's entries.
    pending_carry: Vec<LogEntry>,
    /// Counts the writes of [`INSTALL_FILE`] and its ingests, so a
    /// [`StagedSnapshot`] is committed only while the file is the one it names.
    staged_generation: u64,
    /// The thread sealing the last periodic snapshot (see
    /// [`Storage::finish_snapshot`]): waited for before the next seal and before
    /// anything that deletes chunks or closes the store.
    seal: parking_lot::Mutex<Option<JoinHandle<Result<(), StorageError>>>>,
    /// A seal's error, kept: every later wait returns it, so it reaches a caller that
    /// stops the process even when the first to wait only logs (a SNAP's stage).
    seal_error: parking_lot::Mutex<Option<String>>,
    /// The periodic snapshot being written, as its chunks came in order from 0
    /// ([`WritingBytes`]): its size is then known once finished without reading it
    /// back. `None` when chunks came otherwise (the size is then measured).
    writing_bytes: Option<WritingBytes>,
    /// A complete snapshot's zxid and payload bytes, as written or last measured
    /// ([`RocksStorage::snapshot_payload_bytes`]).
    known_bytes: parking_lot::Mutex<Option<(i64, u64)>>,
}

/// The chunks of a periodic snapshot written so far, in order from chunk 0.
#[derive(Debug, Clone, Copy)]
struct WritingBytes {
    zxid: i64,
    /// The index the next chunk must have to be counted.
    next_index: u32,
    /// Payload bytes of chunks `0..next_index`.
    bytes: u64,
}

/// One chunk of a stored snapshot as [`RocksStorage::read_latest_snapshot`] reads it.
#[derive(Debug, Clone, Copy)]
pub struct ChunkRead<'a> {
    /// The snapshot's zxid.
    pub zxid: i64,
    /// How many chunks the snapshot has.
    pub count: u32,
    /// This chunk's place, from 0.
    pub index: u32,
    /// The chunk's bytes, checksum checked.
    pub bytes: &'a [u8],
}

/// A snapshot whose chunks [`RocksStorage::stage_snapshot`] wrote into
/// [`INSTALL_FILE`] and synced; [`RocksStorage::install_staged`] commits it.
#[derive(Debug)]
pub struct StagedSnapshot {
    zxid: i64,
    count: u32,
    generation: u64,
}

impl std::fmt::Debug for RocksStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RocksStorage")
            .field("path", &self.path)
            .field("force_sync", &self.force_sync)
            .field("last", &self.last)
            .finish()
    }
}

impl RocksStorage {
    /// Opens the database in `data_dir/keel-db`, creating it (and the directories) if
    /// absent, with its WAL in `log_dir/keel-wal` unless `log_dir` is `data_dir`.
    /// `force_sync` is ZooKeeper's `forceSync` (default yes): when false, synced
    /// appends are written but not fsynced.
    ///
    /// Errors: [`StorageError::Version`] if the stored format version is not
    /// [`FORMAT_VERSION`]; [`StorageError::Corrupt`] naming the path if the database
    /// holds data but no format version, lacks a column family, its log has a bad key,
    /// RocksDB finds damage before the WAL's tail, or the directory holds files but no
    /// database (nothing is created over them); I/O and backend errors.
    pub fn open(
        data_dir: &Path,
        log_dir: &Path,
        force_sync: bool,
    ) -> Result<RocksStorage, StorageError> {
        std::fs::create_dir_all(data_dir)?;
        std::fs::create_dir_all(log_dir)?;
        let path = data_dir.join(DB_DIR);
        let wal_dir = (std::fs::canonicalize(data_dir)? != std::fs::canonicalize(log_dir)?)
            .then(|| log_dir.join(WAL_DIR));
        let is_new = !path.join("CURRENT").try_exists()?;
        if is_new {
            // RocksDB deletes files it takes for its own obsolete ones, and would replay
            // stray WALs into a new database: refuse rather than risk either.
            refuse_if_not_empty(&path)?;
            if let Some(wal_dir) = &wal_dir {
                refuse_if_not_empty(wal_dir)?;
            }
            refuse_if_not_empty(&log_dir.join(txnlog::TXNLOG_DIR))?;
        }

        let mut opts = db_options(wal_dir.as_deref());
        opts.create_if_missing(is_new);
        opts.create_missing_column_families(is_new);
        if !is_new {
            check_column_families(&opts, &path)?;
        }
        let db = DB::open_cf(&opts, &path, COLUMN_FAMILIES).map_err(|e| rocks_error(&path, e))?;
        let txnlog_dir = log_dir.join(txnlog::TXNLOG_DIR);
        check_txnlog_present(&db, &path, &txnlog_dir)?;
        let pending = read_truncation(&db, &path)?;
        let txnlog = TxnLog::open_cut(&txnlog_dir, false, pending.as_ref().map(|t| t.cut))?;
        check_newest_segment(&db, &path, &txnlog)?;
        let mut storage = RocksStorage {
            db: Arc::new(db),
            path,
            force_sync,
            last: None,
            txnlog,
            purged_upto: -1,
            read_only: false,
            pending_carry: Vec::new(),
            staged_generation: 0,
            seal: parking_lot::Mutex::new(None),
            seal_error: parking_lot::Mutex::new(None),
            writing_bytes: None,
            known_bytes: parking_lot::Mutex::new(None),
        };
        storage.check_format_version()?;
        if let Some(truncation) = pending {
            tracing::info!(
                after = format!("0x{:x}", truncation.after),
                "finishing a txn log truncation a stop cut short"
            );
            storage.finish_truncation(&truncation.carry)?;
        }
        if storage.get_meta(TXNLOG_META_KEY)?.is_none() {
            let meta = storage.cf(META_CF)?;
            let mut batch = WriteBatch::default();
            batch.put_cf(meta, TXNLOG_META_KEY, [1u8]);
            storage.write(batch, true)?;
            // Into the table files in dataDir now: the WAL may live in dataLogDir, and
            // a start with another dataLogDir must still find these keys to refuse it.
            storage
                .db
                .flush_cf(meta)
                .map_err(|e| rocks_error(&storage.path, e))?;
        }
        // The newest segment on disk is newer than the one recorded when a crash came
        // between starting it and recording it: record it, so purge cannot make the
        // recorded one vanish.
        if let Some(newest) = storage.txnlog.newest_segment() {
            let recorded = storage.get_meta(TXNLOG_NEWEST_KEY)?;
            if recorded.as_deref() != Some(&newest.to_be_bytes()[..]) {
                storage.record_newest_segment(newest)?;
            }
        }
        storage.purged_upto = storage.read_purged_upto()?;
        storage.last = storage.read_last_zxid()?;
        // A SNAP's table file a crash left before RocksDB took it: its chunks are not
        // part of any snapshot. Deleted once the store passed every check.
        remove_file_if_present(&storage.path.join(INSTALL_FILE))?;
        Ok(storage)
    }

    /// Opens an existing database without changing a byte of it (RocksDB's read-only
    /// mode replays the WAL in memory only), so recovery can read and verify everything
    /// before anything is written: a store refused at start-up is left exactly as it
    /// was. Returns `None` when there is no database yet.
    ///
    /// Errors: as [`RocksStorage::open`], except that nothing is ever created.
    pub fn open_read_only(
        data_dir: &Path,
        log_dir: &Path,
    ) -> Result<Option<RocksStorage>, StorageError> {
        let path = data_dir.join(DB_DIR);
        if !path.join("CURRENT").try_exists()? {
            return Ok(None);
        }
        let wal_dir = match (
            std::fs::canonicalize(data_dir),
            std::fs::canonicalize(log_dir),
        ) {
            (Ok(d), Ok(l)) if d != l => Some(log_dir.join(WAL_DIR)),
            _ => None,
        };
        let opts = db_options(wal_dir.as_deref());
        check_column_families(&opts, &path)?;
        let db = DB::open_cf_for_read_only(&opts, &path, COLUMN_FAMILIES, false)
            .map_err(|e| rocks_error(&path, e))?;
        let txnlog_dir = log_dir.join(txnlog::TXNLOG_DIR);
        check_txnlog_present(&db, &path, &txnlog_dir)?;
        let pending = read_truncation(&db, &path)?;
        let txnlog = TxnLog::open_cut(&txnlog_dir, true, pending.as_ref().map(|t| t.cut))?;
        check_newest_segment(&db, &path, &txnlog)?;
        let mut storage = RocksStorage {
            db: Arc::new(db),
            path,
            force_sync: false,
            last: None,
            txnlog,
            purged_upto: -1,
            read_only: true,
            pending_carry: pending.map(|t| t.carry).unwrap_or_default(),
            staged_generation: 0,
            seal: parking_lot::Mutex::new(None),
            seal_error: parking_lot::Mutex::new(None),
            writing_bytes: None,
            known_bytes: parking_lot::Mutex::new(None),
        };
        storage.check_format_version()?;
        storage.purged_upto = storage.read_purged_upto()?;
        storage.last = storage.read_last_zxid()?;
        Ok(Some(storage))
    }

    /// Reads the format version, writing [`FORMAT_VERSION`] into a database that holds
    /// nothing at all (just created, or created by a run that stopped before writing
    /// it). A database that holds data without a version is refused.
    fn check_format_version(&self) -> Result<(), StorageError> {
        let meta = self.cf(META_CF)?;
        match self
            .db
            .get_cf(meta, FORMAT_VERSION_KEY)
            .map_err(|e| self.error(e))?
        {
            Some(value) => {
                let found =
                    <[u8; 4]>::try_from(value.as_slice()).map_err(|_| StorageError::Corrupt {
                        path: self.path.clone(),
                        position: format!("meta key {FORMAT_VERSION_KEY:?}"),
                        what: format!("{} bytes, expected 4", value.len()),
                    })?;
                let found = u32::from_be_bytes(found);
                if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&found) {
                    return Err(StorageError::Version {
                        path: self.path.clone(),
                        found,
                        expected: FORMAT_VERSION,
                    });
                }
                if found != FORMAT_VERSION && !self.read_only {
                    // Upgrade: from now on appends go to files an older keel would not
                    // read, so it must refuse this store.
                    let mut batch = WriteBatch::default();
                    batch.put_cf(meta, FORMAT_VERSION_KEY, FORMAT_VERSION.to_be_bytes());
                    self.write(batch, true)?;
                }
                Ok(())
            }
            None => {
                for name in COLUMN_FAMILIES {
                    let cf = self.cf(name)?;
                    if let Some(item) = self.db.iterator_cf(cf, IteratorMode::Start).next() {
                        item.map_err(|e| self.error(e))?;
                        return Err(StorageError::Corrupt {
                            path: self.path.clone(),
                            position: format!("meta key {FORMAT_VERSION_KEY:?}"),
                            what: format!(
                                "missing, though column family {name:?} holds data; \
                                 refusing to guess the format"
                            ),
                        });
                    }
                }
                if self.read_only {
                    // An empty database: the read-write open writes the version.
                    return Ok(());
                }
                let mut batch = WriteBatch::default();
                batch.put_cf(meta, FORMAT_VERSION_KEY, FORMAT_VERSION.to_be_bytes());
                self.write(batch, true)
            }
        }
    }

    /// Records `zxid` as the first zxid of the newest txn log segment, durably.
    fn record_newest_segment(&self, zxid: i64) -> Result<(), StorageError> {
        let meta = self.cf(META_CF)?;
        let mut batch = WriteBatch::default();
        batch.put_cf(meta, TXNLOG_NEWEST_KEY, zxid.to_be_bytes());
        self.write(batch, true)
    }

    /// The stored [`TXNLOG_PURGED_KEY`], -1 if none.
    fn read_purged_upto(&self) -> Result<i64, StorageError> {
        match self.get_meta(TXNLOG_PURGED_KEY)? {
            None => Ok(-1),
            Some(v) => <[u8; 8]>::try_from(v.as_slice())
                .map(i64::from_be_bytes)
                .map_err(|_| StorageError::Corrupt {
                    path: self.path.clone(),
                    position: format!("meta key {TXNLOG_PURGED_KEY:?}"),
                    what: format!("{} bytes, expected 8", v.len()),
                }),
        }
    }

    /// The highest zxid in the log: the txn log's, or the version-1 column family's;
    /// `None` when purge removed every entry (the server then takes its zxid from the
    /// snapshot).
    fn read_last_zxid(&self) -> Result<Option<i64>, StorageError> {
        let carried = self.pending_carry.last().map(|e| e.zxid);
        if let Some(z) = carried.or(self.txnlog.last_zxid()) {
            return Ok((z > self.purged_upto).then_some(z));
        }
        let log = self.cf(LOG_CF)?;
        match self.db.iterator_cf(log, IteratorMode::End).next() {
            None => Ok(None),
            Some(item) => {
                let (key, _) = item.map_err(|e| self.error(e))?;
                self.decode_log_key(&key).map(Some)
            }
        }
    }

    /// The newest complete snapshot's zxid (`None` with none), each of its chunks
    /// given in order to `visit` as a [`ChunkRead`] straight from RocksDB's block
    /// cache, with no copy: a caller joining them into one buffer (a restart reading
    /// a 1,000,000-znode snapshot, about 200 MB) copies them once, not twice as
    /// through [`Storage::latest_snapshot`]. Keeps the size read for
    /// [`RocksStorage::snapshot_payload_bytes`]. Waits for a snapshot being sealed
    /// first.
    ///
    /// Errors: [`StorageError::Corrupt`] if a chunk fails its checksum or is missing;
    /// `visit`'s own error, which stops the reading.
    pub fn read_latest_snapshot(
        &self,
        mut visit: impl FnMut(ChunkRead<'_>) -> Result<(), StorageError>,
    ) -> Result<Option<i64>, StorageError> {
        self.wait_seal()?;
        let Some(&(zxid, count)) = self.complete_snapshots()?.last() else {
            return Ok(None);
        };
        let snapshot = self.cf(SNAPSHOT_CF)?;
        let mut bytes = 0u64;
        for index in 0..count {
            let corrupt = |what: String| StorageError::Corrupt {
                path: self.path.clone(),
                position: format!("snapshot 0x{zxid:x} chunk {index}"),
                what,
            };
            let value = self
                .db
                .get_pinned_cf(snapshot, chunk_key(zxid, index))
                .map_err(|e| self.error(e))?
                .ok_or_else(|| corrupt(format!("missing from a snapshot of {count} chunks")))?;
            let data = decode_record(&value).map_err(corrupt)?;
            bytes += data.len() as u64;
            visit(ChunkRead {
                zxid,
                count,
                index,
                bytes: data,
            })?;
        }
        // Measured as read: a restart's read makes the first DIFF-or-SNAP check free.
        *self.known_bytes.lock() = Some((zxid, bytes));
        Ok(Some(zxid))
    }

    /// The newest complete snapshot's payload bytes (its chunks' lengths summed; 0
    /// with none), for ZooKeeper's DIFF-or-SNAP limit (`snapshotSizeFactor` x the
    /// snapshot's size, ZAB-WIRE.md §4.2). Known without a read for a snapshot this
    /// process finished writing in order or read ([`RocksStorage::read_latest_snapshot`],
    /// as a restart does); otherwise measured once by reading it (checksums checked,
    /// nothing copied) and kept. Reading and copying the whole snapshot for every
    /// learner the leader synced from its txn log, as before, cost its storage thread
    /// about 200 MB of reads and copies each time at 1,000,000 znodes. Waits for a
    /// snapshot being sealed first.
    ///
    /// Errors: those of [`RocksStorage::read_latest_snapshot`].
    pub fn snapshot_payload_bytes(&self) -> Result<u64, StorageError> {
        self.wait_seal()?;
        let Some(&(zxid, _)) = self.complete_snapshots()?.last() else {
            return Ok(0);
        };
        if let Some((at, bytes)) = *self.known_bytes.lock() {
            if at == zxid {
                return Ok(bytes);
            }
        }
        let mut bytes = 0u64;
        // The read keeps the size in `known_bytes` too.
        self.read_latest_snapshot(|c| {
            bytes += c.bytes.len() as u64;
            Ok(())
        })?;
        Ok(bytes)
    }

    fn cf(&self, name: &str) -> Result<&ColumnFamily, StorageError> {
        cf_of(&self.db, &self.path, name)
    }

    fn write(&self, batch: WriteBatch, sync: bool) -> Result<(), StorageError> {
        let mut opts = WriteOptions::default();
        opts.set_sync(sync);
        self.db.write_opt(batch, &opts).map_err(|e| self.error(e))
    }

    fn error(&self, e: rocksdb::Error) -> StorageError {
        rocks_error(&self.path, e)
    }

    fn decode_log_key(&self, key: &[u8]) -> Result<i64, StorageError> {
        let bytes = <[u8; 8]>::try_from(key).map_err(|_| StorageError::Corrupt {
            path: self.path.clone(),
            position: format!("log key {key:02x?}"),
            what: format!("{} bytes, expected 8", key.len()),
        })?;
        Ok(i64::from_be_bytes(bytes))
    }

    /// Complete snapshots (zxid, chunk count), oldest first.
    fn complete_snapshots(&self) -> Result<Vec<(i64, u32)>, StorageError> {
        let meta = self.cf(META_CF)?;
        let prefix = SNAPSHOT_MARKER_PREFIX.as_bytes();
        let mut found = Vec::new();
        for item in self
            .db
            .iterator_cf(meta, IteratorMode::From(prefix, Direction::Forward))
        {
            let (key, value) = item.map_err(|e| self.error(e))?;
            let Some(hex) = key.strip_prefix(prefix) else {
                break;
            };
            let corrupt = |what: String| StorageError::Corrupt {
                path: self.path.clone(),
                position: format!("meta key {:?}", String::from_utf8_lossy(&key)),
                what,
            };
            let zxid = std::str::from_utf8(hex)
                .ok()
                .and_then(|hex| u64::from_str_radix(hex, 16).ok())
                .ok_or_else(|| corrupt("not a snapshot zxid in hex".to_owned()))?
                as i64;
            let count = <[u8; 4]>::try_from(&*value)
                .map_err(|_| corrupt(format!("{} bytes, expected 4", value.len())))?;
            found.push((zxid, u32::from_be_bytes(count)));
        }
        found.sort_unstable();
        Ok(found)
    }

    /// The txn log's bytes after the segment a read from `after` opens first
    /// ([`TxnLog::storage_bytes_after`]: ZooKeeper's `TxnIterator.getStorageSize`).
    ///
    /// Errors: I/O errors.
    pub fn log_storage_bytes_after(&self, after: i64) -> Result<u64, StorageError> {
        self.txnlog.storage_bytes_after(after)
    }

    /// Durably drops every logged txn above `after` (Zab's TRUNC), synced or not; the
    /// txns kept become durable too. One synced batch commits it: the cut of the txn
    /// log with the carry ([`TXNLOG_TRUNCATE_KEY`]), the newest segment it leaves
    /// ([`TXNLOG_NEWEST_KEY`]) and the deletion of version-1 entries above `after`. The
    /// order, and what a crash after each step leaves (a later open redoes the rest):
    /// 1. sync the txn log, so every append before the cut is durable and the carry
    ///    lands where those end (a crash: the old log);
    /// 2. the batch (from here on, every open reads no txn above `after`);
    /// 3. delete the segments after the cut, newest first, and sync the directory;
    /// 4. zero the cut's segment from the cut on, and sync it;
    /// 5. append the carry, synced;
    /// 6. delete [`TXNLOG_TRUNCATE_KEY`], synced. Only then may a txn be appended
    ///    above `after`: a redo of step 4 would zero it.
    ///
    /// Errors: [`StorageError::Backend`] on a read-only store, or for `after` below the
    /// purge mark (those txns are in a snapshot and gone from the log); I/O and backend
    /// errors (the caller must then stop; the next open finishes the truncation if its
    /// batch was written).
    pub fn truncate_after(&mut self, after: i64) -> Result<(), StorageError> {
        // Chunk deletions must not overtake a snapshot being sealed: its marker
        // would then name chunks gone.
        self.wait_seal()?;
        if self.read_only {
            return Err(StorageError::Backend("store opened read-only".to_owned()));
        }
        if after < self.purged_upto {
            return Err(StorageError::Backend(format!(
                "refusing to truncate the txn log after 0x{after:x}: the txns up to 0x{:x} \
                 are in a snapshot and purged from the log",
                self.purged_upto
            )));
        }
        if self.last.is_none_or(|last| last <= after) {
            return Ok(());
        }
        self.txnlog.sync()?;
        fail_point("truncation: txn log synced")?;
        let plan = self.txnlog.plan_cut(after)?;
        let (log, meta) = (self.cf(LOG_CF)?, self.cf(META_CF)?);
        let mut batch = WriteBatch::default();
        // Version-1 keys are zxids >= 0 big-endian, all below 0x80 followed by zeros.
        batch.delete_range_cf(log, (after + 1).to_be_bytes(), [0x80, 0, 0, 0, 0, 0, 0, 0]);
        if let Some((cut, carry)) = &plan {
            batch.put_cf(
                meta,
                TXNLOG_TRUNCATE_KEY,
                encode_truncation(after, cut, carry),
            );
            match self.txnlog.newest_segment_after(cut) {
                Some(newest) => batch.put_cf(meta, TXNLOG_NEWEST_KEY, newest.to_be_bytes()),
                None => batch.delete_cf(meta, TXNLOG_NEWEST_KEY),
            }
        }
        self.write(batch, true)?;
        fail_point("truncation: cut committed")?;
        if let Some((cut, carry)) = plan {
            self.txnlog.truncate(cut)?;
            self.finish_truncation(&carry)?;
        }
        self.last = self.read_last_zxid()?;
        Ok(())
    }

    /// Atomically and durably replaces every snapshot and the whole txn log with the
    /// snapshot `chunks` as of `zxid` (Zab's SNAP): after a crash at any point the store
    /// holds the old snapshots and log, or this snapshot and no log. Later appends must
    /// be above `zxid`.
    ///
    /// The chunks go first, into a table file written beside the database and ingested
    /// whole ([`RocksStorage::stage_snapshot`]): durable, but not yet a complete snapshot
    /// (no marker), so a crash here leaves the old state and chunks recovery ignores.
    /// Why not in the batch: 200 MB of chunks through the WAL and the memtables (written
    /// twice, copied three times) took 1.7 s of a 1,000,000-znode SNAP, most of the
    /// learner's time after the parse. Then one synced batch commits it: a range
    /// deletion of every other stored chunk, the snapshot markers (all old ones deleted,
    /// this one's written), the purge mark at `zxid`, the deletion of every version-1
    /// log entry and of [`TXNLOG_NEWEST_KEY`], and a cut before the first txn log segment
    /// (every segment goes). The segments are then deleted as a truncation's (see
    /// [`RocksStorage::truncate_after`], steps 3 and 6). When a complete snapshot at
    /// `zxid` is already stored, the chunks go in the batch instead (after a range
    /// deletion of every stored chunk), as ingesting them would overwrite its chunks
    /// before the commit. The server must not have a snapshot of its own half written
    /// at the time (its chunks would be deleted).
    ///
    /// Errors: [`StorageError::Backend`] on a read-only store; I/O and backend errors
    /// (the caller must then stop).
    pub fn install_snapshot(&mut self, zxid: i64, chunks: &[&[u8]]) -> Result<(), StorageError> {
        if let Some(staged) = self.stage_snapshot(zxid, chunks)? {
            if self.install_staged(staged)? {
                return Ok(());
            }
        }
        let count = chunk_count(chunks)?;
        self.commit_install(zxid, count, Some(chunks))
    }

    /// The first half of [`RocksStorage::install_snapshot`], which may run while the
    /// caller still decides whether to install (a learner reading the SNAP it was
    /// sent): writes `chunks` as snapshot `zxid`'s into [`INSTALL_FILE`] and syncs it,
    /// changing nothing the store holds. [`RocksStorage::install_staged`] then commits
    /// it; a later stage or install replaces the file, and the next open deletes it.
    /// `None` when the chunks cannot go through a file: there are none, or a complete
    /// snapshot at `zxid` is stored (ingesting would overwrite its chunks before the
    /// commit).
    ///
    /// Errors: [`StorageError::Backend`] on a read-only store; I/O and backend errors.
    pub fn stage_snapshot(
        &mut self,
        zxid: i64,
        chunks: &[&[u8]],
    ) -> Result<Option<StagedSnapshot>, StorageError> {
        self.wait_seal()?;
        if self.read_only {
            return Err(StorageError::Backend("store opened read-only".to_owned()));
        }
        let count = chunk_count(chunks)?;
        if chunks.is_empty()
            || self
                .complete_snapshots()?
                .iter()
                .any(|&(old, _)| old == zxid)
        {
            return Ok(None);
        }
        self.staged_generation += 1;
        self.write_install_file(zxid, chunks)?;
        Ok(Some(StagedSnapshot {
            zxid,
            count,
            generation: self.staged_generation,
        }))
    }

    /// Gives up what [`RocksStorage::stage_snapshot`] wrote last: its file goes (a SNAP
    /// stream's size) and no [`StagedSnapshot`] from before commits any more.
    ///
    /// Errors: the file cannot be removed.
    pub fn discard_staged(&mut self) -> Result<(), StorageError> {
        self.staged_generation += 1;
        remove_file_if_present(&self.path.join(INSTALL_FILE))?;
        Ok(())
    }

    /// Commits a snapshot [`RocksStorage::stage_snapshot`] wrote, as
    /// [`RocksStorage::install_snapshot`] does: true once installed; false, with the
    /// store unchanged, when its file is no longer the one staged (another stage or
    /// install came after it) or a complete snapshot at its zxid has been stored
    /// since.
    ///
    /// Errors: I/O and backend errors (the caller must then stop).
    pub fn install_staged(&mut self, staged: StagedSnapshot) -> Result<bool, StorageError> {
        self.wait_seal()?;
        let file = self.path.join(INSTALL_FILE);
        if staged.generation != self.staged_generation || !file.exists() {
            return Ok(false);
        }
        if self
            .complete_snapshots()?
            .iter()
            .any(|&(old, _)| old == staged.zxid)
        {
            remove_file_if_present(&file)?;
            return Ok(false);
        }
        let cf = self.cf(SNAPSHOT_CF)?;
        let mut ingest = rocksdb::IngestExternalFileOptions::default();
        ingest.set_move_files(true);
        let ingested = self
            .db
            .ingest_external_file_cf_opts(cf, &ingest, vec![&file]);
        if ingested.is_err() {
            let _ = std::fs::remove_file(&file);
        }
        ingested.map_err(|e| self.error(e))?;
        self.staged_generation += 1;
        fail_point("snapshot install: chunks ingested")?;
        self.commit_install(staged.zxid, staged.count, None)?;
        Ok(true)
    }

    /// The synced batch that makes snapshot `zxid` of `count` chunks the store's only
    /// one and empties the log, then the txn log's file work (see
    /// [`RocksStorage::install_snapshot`]). The chunks go in the batch when given (all
    /// `count` of them); `None`: they were ingested.
    fn commit_install(
        &mut self,
        zxid: i64,
        count: u32,
        in_batch: Option<&[&[u8]]>,
    ) -> Result<(), StorageError> {
        // Chunk deletions must not overtake a snapshot being sealed: its marker
        // would then name chunks gone.
        self.wait_seal()?;
        // The installed snapshot may share a known one's zxid, not its bytes.
        *self.known_bytes.lock() = None;
        self.writing_bytes = None;
        let old_snapshots = self.complete_snapshots()?;
        let (log, snapshot, meta) = (self.cf(LOG_CF)?, self.cf(SNAPSHOT_CF)?, self.cf(META_CF)?);
        let mut batch = WriteBatch::default();
        // Every chunk key is 12 bytes, all below 13 bytes of 0xff.
        match in_batch {
            None => {
                batch.delete_range_cf(snapshot, &[][..], &chunk_key(zxid, 0)[..]);
                batch.delete_range_cf(snapshot, &chunk_key(zxid, count)[..], &[0xff; 13][..]);
            }
            Some(chunks) => {
                // The puts after the range deletion in the same batch take later
                // sequence numbers, so they stay.
                batch.delete_range_cf(snapshot, &[][..], &[0xff; 13][..]);
                for (index, chunk) in (0..count).zip(chunks) {
                    batch.put_cf(snapshot, chunk_key(zxid, index), encode_record(chunk));
                }
            }
        }
        for (old, _) in old_snapshots {
            batch.delete_cf(meta, marker_key(old));
        }
        batch.put_cf(meta, marker_key(zxid), count.to_be_bytes());
        batch.delete_range_cf(log, &[][..], &[0x80, 0, 0, 0, 0, 0, 0, 0][..]);
        batch.put_cf(meta, TXNLOG_PURGED_KEY, zxid.to_be_bytes());
        batch.delete_cf(meta, TXNLOG_NEWEST_KEY);
        let cut = self.txnlog.oldest_segment().map(|segment| Cut {
            segment,
            offset: 0,
            end: 0,
        });
        if let Some(cut) = &cut {
            batch.put_cf(meta, TXNLOG_TRUNCATE_KEY, encode_truncation(zxid, cut, &[]));
        }
        self.write(batch, true)?;
        fail_point("snapshot install: snapshot and log reset committed")?;
        self.purged_upto = zxid;
        if let Some(cut) = cut {
            self.txnlog.truncate(cut)?;
            self.finish_truncation(&[])?;
        }
        self.last = self.read_last_zxid()?;
        Ok(())
    }

    /// Writes `chunks` as snapshot `zxid`'s chunks 0, 1, ... into one table file,
    /// [`INSTALL_FILE`] in the database directory, and syncs it, for RocksDB to ingest
    /// (move) into the snapshot column family ([`RocksStorage::install_staged`]), which
    /// records it in its MANIFEST (synced). A failed write removes it, and an open
    /// removes one a crash left.
    ///
    /// Errors: I/O and backend errors.
    fn write_install_file(&self, zxid: i64, chunks: &[&[u8]]) -> Result<(), StorageError> {
        let file = self.path.join(INSTALL_FILE);
        // Never a second name of a live table file: should RocksDB have failed to
        // unlink it after the last ingest (it only warns), opening it anew (which
        // truncates) would damage that table.
        remove_file_if_present(&file)?;
        let result = (|| {
            let opts = db_options(None);
            let mut writer = rocksdb::SstFileWriter::create(&opts);
            writer.open(&file)?;
            // One record buffer for all chunks: a fresh one each time faulted in the
            // whole snapshot's size in new pages.
            let mut record = Vec::new();
            for (index, chunk) in (0u32..).zip(chunks) {
                encode_record_into(&mut record, chunk);
                writer.put(chunk_key(zxid, index), &record)?;
            }
            writer.finish()
        })();
        let synced = result.map_err(|e| self.error(e)).and_then(|()| {
            // Synced here, so the ingest that commits it (often while the caller has
            // moved on to other work) has no data left to write.
            File::open(&file)
                .and_then(|f| f.sync_all())
                .map_err(StorageError::Io)
        });
        if synced.is_err() {
            let _ = std::fs::remove_file(&file);
        }
        synced
    }

    /// The zxids of the complete snapshots, oldest first, as marked now: one still being
    /// sealed is not among them yet (and its seal's errors surface later). For a
    /// caller that must not wait for a flush (the ensemble storage thread, before each
    /// group commit).
    ///
    /// Errors: backend errors, a marker that does not decode.
    pub fn snapshots_now(&self) -> Result<Vec<i64>, StorageError> {
        Ok(self
            .complete_snapshots()?
            .into_iter()
            .map(|(zxid, _)| zxid)
            .collect())
    }

    /// Waits for the periodic snapshot being sealed, if any ([`seal`]).
    ///
    /// Errors: the seal's own (a failed flush or marker write), or its thread
    /// panicking; once one failed, every later call returns its error.
    fn wait_seal(&self) -> Result<(), StorageError> {
        let thread = self.seal.lock().take();
        if let Some(thread) = thread {
            let sealed = thread.join().unwrap_or_else(|_| {
                Err(StorageError::Backend(
                    "the snapshot seal thread panicked".to_owned(),
                ))
            });
            if let Err(e) = sealed {
                *self.seal_error.lock() = Some(e.to_string());
                return Err(e);
            }
        }
        match self.seal_error.lock().as_ref() {
            None => Ok(()),
            Some(e) => Err(StorageError::Backend(format!(
                "a periodic snapshot's seal failed earlier: {e}"
            ))),
        }
    }

    /// The end of a truncation whose cut the txn log has applied: appends the carry
    /// (synced, whatever `forceSync` says), then deletes [`TXNLOG_TRUNCATE_KEY`],
    /// synced, before anything else may be appended.
    fn finish_truncation(&mut self, carry: &[LogEntry]) -> Result<(), StorageError> {
        if !carry.is_empty() {
            if let Some(rolled) = self.txnlog.append(carry, true)? {
                self.record_newest_segment(rolled)?;
            }
            fail_point("truncation: carry appended")?;
        }
        let mut batch = WriteBatch::default();
        batch.delete_cf(self.cf(META_CF)?, TXNLOG_TRUNCATE_KEY);
        self.write(batch, true)?;
        fail_point("truncation: done")?;
        self.last = self.read_last_zxid()?;
        Ok(())
    }
}

/// Makes periodic snapshot `zxid` of `chunks` chunks complete: flushes the snapshot
/// column family (waiting, so every chunk written before, all without the WAL, is in a
/// table file and durable), then writes the marker through the WAL without an fsync.
/// The next synced write after it (a purge, which waits for the seal, `put_meta`) or a
/// close makes it durable; a crash before that only means recovery starts from the
/// previous snapshot, whose txns are all still in the log (only a purge deletes them,
/// and it syncs first). ZooKeeper,
/// too, writes snapshots off its log-sync path. The flush also frees the chunks'
/// memtables at once (settled RSS growth after creating 1,000,000 znodes: 135 B per
/// znode with the flush, 139-144 B without).
///
/// Errors: the flush's or the marker write's; nothing is marked then.
fn seal(db: &DB, path: &Path, zxid: i64, chunks: u32) -> Result<(), StorageError> {
    let cf = |name| cf_of(db, path, name);
    let mut flush = rocksdb::FlushOptions::default();
    flush.set_wait(true);
    db.flush_cf_opt(cf(SNAPSHOT_CF)?, &flush)
        .map_err(|e| rocks_error(path, e))?;
    let mut batch = WriteBatch::default();
    batch.put_cf(cf(META_CF)?, marker_key(zxid), chunks.to_be_bytes());
    db.write_opt(batch, &WriteOptions::default())
        .map_err(|e| rocks_error(path, e))
}

/// A truncation under way, as [`TXNLOG_TRUNCATE_KEY`] holds it.
#[derive(Debug)]
struct Truncation {
    /// Every txn above this zxid goes.
    after: i64,
    cut: Cut,
    carry: Vec<LogEntry>,
}

/// [`TXNLOG_TRUNCATE_KEY`]'s value: a record of `after`, the cut's segment, offset and
/// end (8 bytes each), the carry's entry count (4), then each entry as zxid (8), data
/// length (4), data.
fn encode_truncation(after: i64, cut: &Cut, carry: &[LogEntry]) -> Vec<u8> {
    let mut b = Vec::with_capacity(36 + carry.iter().map(|e| 12 + e.data.len()).sum::<usize>());
    b.extend_from_slice(&after.to_be_bytes());
    b.extend_from_slice(&cut.segment.to_be_bytes());
    b.extend_from_slice(&cut.offset.to_be_bytes());
    b.extend_from_slice(&cut.end.to_be_bytes());
    b.extend_from_slice(&(carry.len() as u32).to_be_bytes());
    for e in carry {
        b.extend_from_slice(&e.zxid.to_be_bytes());
        b.extend_from_slice(&(e.data.len() as u32).to_be_bytes());
        b.extend_from_slice(&e.data);
    }
    encode_record(&b)
}

/// The truncation under way in `db` (at `path`, named in errors), if any.
fn read_truncation(db: &DB, path: &Path) -> Result<Option<Truncation>, StorageError> {
    let meta = cf_of(db, path, META_CF)?;
    let Some(value) = db
        .get_cf(meta, TXNLOG_TRUNCATE_KEY)
        .map_err(|e| rocks_error(path, e))?
    else {
        return Ok(None);
    };
    let corrupt = |what: String| StorageError::Corrupt {
        path: path.to_path_buf(),
        position: format!("meta key {TXNLOG_TRUNCATE_KEY:?}"),
        what,
    };
    let data = decode_record(&value).map_err(corrupt)?;
    let mut rest = data;
    let mut take = |n: usize| -> Result<&[u8], StorageError> {
        let (head, tail) = rest
            .split_at_checked(n)
            .ok_or_else(|| corrupt(format!("{} bytes, cut short", data.len())))?;
        rest = tail;
        Ok(head)
    };
    let be_i64 = |b: &[u8]| i64::from_be_bytes(b.try_into().expect("8 bytes"));
    let after = be_i64(take(8)?);
    let cut = Cut {
        segment: be_i64(take(8)?),
        offset: be_i64(take(8)?) as u64,
        end: be_i64(take(8)?) as u64,
    };
    let count = u32::from_be_bytes(take(4)?.try_into().expect("4 bytes"));
    let mut carry = Vec::new();
    for _ in 0..count {
        let zxid = be_i64(take(8)?);
        let len = u32::from_be_bytes(take(4)?.try_into().expect("4 bytes"));
        carry.push(LogEntry {
            zxid,
            data: take(len as usize)?.to_vec(),
        });
    }
    if !rest.is_empty() {
        return Err(corrupt(format!("{} bytes after the carry", rest.len())));
    }
    Ok(Some(Truncation { after, cut, carry }))
}

impl Storage for RocksStorage {
    /// Moves the memtables into table files, so the WAL holds nothing to replay and
    /// the next start (which reads the store twice: a read-only check, then the
    /// read-write open) is quicker.
    fn close(&mut self) -> Result<(), StorageError> {
        if self.read_only {
            return Ok(());
        }
        // The txn log first: with forceSync off this is its only sync at a clean stop,
        // and a failed snapshot seal must not skip it.
        self.txnlog.sync()?;
        self.txnlog.discard_spare()?;
        self.wait_seal()?;
        let mut flush = rocksdb::FlushOptions::default();
        flush.set_wait(true);
        for name in COLUMN_FAMILIES {
            let cf = self.cf(name)?;
            self.db
                .flush_cf_opt(cf, &flush)
                .map_err(|e| rocks_error(&self.path, e))?;
        }
        Ok(())
    }

    /// One append to the txn log per call, fdatasynced when `sync` and `force_sync` are
    /// both set. An empty call with `sync` syncs the log, so it may serve as a barrier.
    fn append(&mut self, entries: &[LogEntry], sync: bool) -> Result<(), StorageError> {
        if self.read_only {
            return Err(StorageError::Backend("store opened read-only".to_owned()));
        }
        let sync = sync && self.force_sync;
        // Check the whole call first, so a refused append stores nothing. Nothing may go
        // at or below the purge mark either: reads would skip it.
        let mut last = self
            .last
            .max((self.purged_upto >= 0).then_some(self.purged_upto));
        for entry in entries {
            check_order(entry.zxid, last)?;
            last = Some(entry.zxid);
        }
        let rolled = self.txnlog.append(entries, sync)?;
        if !entries.is_empty() {
            self.last = last;
        }
        if !self.force_sync {
            // Acknowledged once written (forceSync=no): mark it so in later appends.
            self.txnlog.assume_durable();
        }
        if let Some(zxid) = rolled {
            self.record_newest_segment(zxid)?;
        }
        Ok(())
    }

    /// An fdatasync of the txn log's current segment, when `force_sync` is set.
    fn sync_job(&mut self) -> Option<SyncJob> {
        if !self.force_sync || self.read_only {
            return None;
        }
        self.txnlog.sync_job()
    }

    fn last_zxid(&self) -> Result<Option<i64>, StorageError> {
        Ok(self.last)
    }

    fn read_log(
        &self,
        after: i64,
        f: &mut dyn FnMut(LogEntry) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        let Some(start) = after.checked_add(1) else {
            return Ok(());
        };
        let start = start.max(0).to_be_bytes();
        let log = self.cf(LOG_CF)?;
        for item in self
            .db
            .iterator_cf(log, IteratorMode::From(&start, Direction::Forward))
        {
            let (key, value) = item.map_err(|e| self.error(e))?;
            let zxid = self.decode_log_key(&key)?;
            let data = decode_record(&value).map_err(|what| StorageError::Corrupt {
                path: self.path.clone(),
                position: format!("log record zxid 0x{zxid:x}"),
                what,
            })?;
            f(LogEntry {
                zxid,
                data: data.to_vec(),
            })?;
        }
        let after = after.max(self.purged_upto);
        self.txnlog.read(after, f)?;
        for entry in self.pending_carry.iter().filter(|e| e.zxid > after) {
            f(entry.clone())?;
        }
        Ok(())
    }

    fn put_snapshot_chunk(
        &mut self,
        zxid: i64,
        index: u32,
        data: &[u8],
    ) -> Result<(), StorageError> {
        let snapshot = self.cf(SNAPSHOT_CF)?;
        let mut batch = WriteBatch::default();
        batch.put_cf(snapshot, chunk_key(zxid, index), encode_record(data));
        // Not through the WAL: a chunk is useless until its snapshot's marker, which
        // [`RocksStorage::seal`] writes only once a flush has put every chunk into a
        // table file. Through the WAL, every snapshot was written twice (as much WAL
        // as table, per periodic snapshot 200 MB more for 1,000,000 znodes), and the
        // disk still wrote it back seconds after, under the txn log's fsyncs.
        let mut opts = WriteOptions::default();
        opts.disable_wal(true);
        self.db.write_opt(batch, &opts).map_err(|e| self.error(e))?;
        // Counted only as written in order (as the server does): chunks out of order
        // or written twice, which the trait allows, leave the size to be measured.
        let len = data.len() as u64;
        self.writing_bytes = match self.writing_bytes {
            _ if index == 0 => Some(WritingBytes {
                zxid,
                next_index: 1,
                bytes: len,
            }),
            Some(w) if w.zxid == zxid && w.next_index == index => Some(WritingBytes {
                zxid,
                next_index: index + 1,
                bytes: w.bytes + len,
            }),
            _ => None,
        };
        Ok(())
    }

    /// Seals the snapshot on a thread of its own ([`RocksStorage::seal`]) and returns:
    /// the marker goes in once a flush has made every chunk durable, so the storage
    /// thread neither waits for that flush nor syncs anything. Waits for the last
    /// snapshot's seal first (seals go in zxid order), returning its error.
    fn finish_snapshot(&mut self, zxid: i64, chunks: u32) -> Result<(), StorageError> {
        self.wait_seal()?;
        *self.known_bytes.lock() = match self.writing_bytes.take() {
            Some(w) if w.zxid == zxid && w.next_index == chunks => Some((zxid, w.bytes)),
            _ => None,
        };
        let db = Arc::clone(&self.db);
        let path = self.path.clone();
        let thread = std::thread::Builder::new()
            .name("keel-snapshot-seal".to_owned())
            .spawn(move || seal(&db, &path, zxid, chunks))
            .map_err(StorageError::Io)?;
        *self.seal.lock() = Some(thread);
        Ok(())
    }

    /// Waits for a snapshot being sealed first, so a finished one is the latest.
    fn latest_snapshot(&self) -> Result<Option<Snapshot>, StorageError> {
        let mut chunks = Vec::new();
        let zxid = self.read_latest_snapshot(|c| {
            if c.index == 0 {
                // A damaged marker's count is found out at its first missing chunk.
                chunks.reserve_exact(c.count.min(1 << 16) as usize);
            }
            chunks.push(c.bytes.to_vec());
            Ok(())
        })?;
        Ok(zxid.map(|zxid| Snapshot { zxid, chunks }))
    }

    /// Waits for a snapshot being sealed first (see [`RocksStorage::snapshots_now`]).
    fn snapshots(&self) -> Result<Vec<i64>, StorageError> {
        self.wait_seal()?;
        self.snapshots_now()
    }

    fn purge(&mut self, retain: usize) -> Result<(), StorageError> {
        self.wait_seal()?;
        let complete = self.complete_snapshots()?;
        let Some(&(newest, _)) = complete.last() else {
            return Ok(());
        };
        let keep_from = complete.len().saturating_sub(retain.max(1));
        let oldest_kept = complete[keep_from].0;
        let (log, snapshot, meta) = (self.cf(LOG_CF)?, self.cf(SNAPSHOT_CF)?, self.cf(META_CF)?);
        let mut batch = WriteBatch::default();
        for &(zxid, _) in &complete[..keep_from] {
            batch.delete_cf(meta, marker_key(zxid));
        }
        // Chunks of the deleted snapshots, and of unfinished snapshots older than the
        // newest complete one (abandoned; newer unfinished ones may be in progress).
        // One seek per snapshot: skip from each zxid's first chunk past its last.
        let mut iter = self.db.raw_iterator_cf(snapshot);
        iter.seek_to_first();
        while let Some(key) = iter.key() {
            let zxid = chunk_key_zxid(key).ok_or_else(|| StorageError::Corrupt {
                path: self.path.clone(),
                position: format!("snapshot key {key:02x?}"),
                what: format!("{} bytes, expected 12", key.len()),
            })?;
            let kept = complete[keep_from..].iter().any(|&(z, _)| z == zxid);
            let (from, to) = chunk_range(zxid);
            if !kept && zxid < newest {
                batch.delete_range_cf(snapshot, &from, &to);
            }
            iter.seek(&to);
        }
        iter.status().map_err(|e| self.error(e))?;
        drop(iter);
        // The log up to and including the oldest kept snapshot's zxid: recovery from it
        // replays only the txns above. Keys are 8 bytes, all below zxid + a 0 byte.
        if oldest_kept >= 0 {
            let mut to = oldest_kept.to_be_bytes().to_vec();
            to.push(0);
            batch.delete_range_cf(log, &[][..], &to[..]);
            if oldest_kept > self.purged_upto {
                batch.put_cf(meta, TXNLOG_PURGED_KEY, oldest_kept.to_be_bytes());
            }
        }
        self.write(batch, true)?;
        if oldest_kept > self.purged_upto {
            self.purged_upto = oldest_kept;
            // After the mark is durable: a crash in between leaves files the mark hides.
            self.txnlog.purge(oldest_kept)?;
        }
        self.last = self.read_last_zxid()?;
        Ok(())
    }

    fn get_meta(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        let meta = self.cf(META_CF)?;
        self.db.get_cf(meta, key).map_err(|e| self.error(e))
    }

    /// Errors: [`StorageError::Backend`] for the reserved keys [`FORMAT_VERSION_KEY`]
    /// and those starting with [`SNAPSHOT_MARKER_PREFIX`].
    fn put_meta(&mut self, key: &str, value: &[u8]) -> Result<(), StorageError> {
        if key == FORMAT_VERSION_KEY
            || key == TXNLOG_META_KEY
            || key == TXNLOG_PURGED_KEY
            || key == TXNLOG_NEWEST_KEY
            || key == TXNLOG_TRUNCATE_KEY
            || key.starts_with(SNAPSHOT_MARKER_PREFIX)
        {
            return Err(StorageError::Backend(format!(
                "meta key {key:?} is reserved for the storage layer"
            )));
        }
        let meta = self.cf(META_CF)?;
        let mut batch = WriteBatch::default();
        batch.put_cf(meta, key, value);
        self.write(batch, true)
    }
}

/// The append order rule (the same as `MemStorage`'s): every zxid is above the last
/// stored one and none is negative, because keys are the zxid's big-endian bytes, whose
/// order is numeric only for non-negative zxids.
fn check_order(zxid: i64, last: Option<i64>) -> Result<(), StorageError> {
    let last = last.unwrap_or(-1);
    if zxid <= last {
        return Err(StorageError::OutOfOrder { zxid, last });
    }
    Ok(())
}

/// Maps a RocksDB error; its corruption reports (a bad block, a WAL damaged before its
/// tail) become [`StorageError::Corrupt`] naming the database.
fn rocks_error(path: &Path, e: rocksdb::Error) -> StorageError {
    if e.kind() == ErrorKind::Corruption {
        StorageError::Corrupt {
            path: path.to_owned(),
            position: "as reported by RocksDB".to_owned(),
            what: e.into_string(),
        }
    } else {
        StorageError::Backend(format!("{}: {}", path.display(), e.into_string()))
    }
}

/// Refuses to create a database in a directory that already holds files.
fn refuse_if_not_empty(dir: &Path) -> Result<(), StorageError> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => match entries.next() {
            None => Ok(()),
            Some(entry) => Err(StorageError::Corrupt {
                path: dir.to_owned(),
                position: entry?.file_name().to_string_lossy().into_owned(),
                what: "found in a directory without a RocksDB CURRENT file; refusing to \
                       create a new database over it"
                    .to_owned(),
            }),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn encode_record(data: &[u8]) -> Vec<u8> {
    let mut record = Vec::with_capacity(5 + data.len());
    encode_record_into(&mut record, data);
    record
}

/// [`encode_record`] into `record`, replacing what it held.
fn encode_record_into(record: &mut Vec<u8>, data: &[u8]) {
    record.clear();
    record.push(RECORD_VERSION);
    record.extend_from_slice(&crc32fast::hash(data).to_be_bytes());
    record.extend_from_slice(data);
}

/// The data of a record, or what is wrong with it.
fn decode_record(record: &[u8]) -> Result<&[u8], String> {
    let Some((&version, rest)) = record.split_first() else {
        return Err("empty record".to_owned());
    };
    if version != RECORD_VERSION {
        return Err(format!(
            "record version {version}, this keel reads {RECORD_VERSION}"
        ));
    }
    let Some((crc, data)) = rest.split_first_chunk::<4>() else {
        return Err(format!("record of {} bytes is too short", record.len()));
    };
    let stored = u32::from_be_bytes(*crc);
    let computed = crc32fast::hash(data);
    if stored != computed {
        return Err(format!(
            "checksum mismatch: stored 0x{stored:08x}, computed 0x{computed:08x} over {} bytes",
            data.len()
        ));
    }
    Ok(data)
}

fn chunk_key(zxid: i64, index: u32) -> [u8; 12] {
    let mut key = [0; 12];
    key[..8].copy_from_slice(&zxid.to_be_bytes());
    key[8..].copy_from_slice(&index.to_be_bytes());
    key
}

fn chunk_key_zxid(key: &[u8]) -> Option<i64> {
    let key = <[u8; 12]>::try_from(key).ok()?;
    Some(i64::from_be_bytes(key[..8].try_into().ok()?))
}

/// Keys from `from` up to (not including) `to` are exactly the chunks of `zxid`: `from`
/// is its 8-byte prefix, `to` that prefix followed by five 0xff bytes, above any 12-byte
/// key with the prefix.
fn chunk_range(zxid: i64) -> (Vec<u8>, Vec<u8>) {
    let from = zxid.to_be_bytes().to_vec();
    let mut to = from.clone();
    to.extend_from_slice(&[0xff; 5]);
    (from, to)
}

fn marker_key(zxid: i64) -> String {
    format!("{SNAPSHOT_MARKER_PREFIX}{zxid:016x}")
}

/// Memory for all memtables together, bytes.
const MEMTABLE_BUDGET_BYTES: usize = 16 << 20;

/// The options of every open, read-write or read-only. One place on purpose: a
/// read-only open whose options differ from the read-write ones (WAL tracking off) makes
/// RocksDB 11.8 try to edit the MANIFEST it cannot write, and crash.
fn db_options(wal_dir: Option<&Path>) -> Options {
    let mut opts = Options::default();
    opts.set_wal_recovery_mode(DBRecoveryMode::TolerateCorruptedTailRecords);
    opts.set_track_and_verify_wals_in_manifest(true);
    opts.set_paranoid_checks(true);
    opts.set_compression_type(DBCompressionType::None);
    opts.set_keep_log_file_num(KEEP_INFO_LOGS);
    // The memtables only stage txns and snapshot chunks on their way to table files;
    // cap them together so their memory does not grow with the tree (RocksDB's
    // default is 64 MB per column family and memtable).
    opts.set_db_write_buffer_size(MEMTABLE_BUDGET_BYTES);
    opts.set_write_buffer_size(MEMTABLE_BUDGET_BYTES / 2);
    if let Some(wal_dir) = wal_dir {
        opts.set_wal_dir(wal_dir);
    }
    opts
}

/// The number of `chunks`, as a snapshot marker holds it.
///
/// Errors: [`StorageError::Backend`] past `u32::MAX` chunks.
fn chunk_count(chunks: &[&[u8]]) -> Result<u32, StorageError> {
    u32::try_from(chunks.len())
        .map_err(|_| StorageError::Backend(format!("a snapshot of {} chunks", chunks.len())))
}

/// The column family `name` of `db` (at `path`, named in the error if it is missing).
fn cf_of<'a>(db: &'a DB, path: &Path, name: &str) -> Result<&'a ColumnFamily, StorageError> {
    db.cf_handle(name).ok_or_else(|| StorageError::Corrupt {
        path: path.to_path_buf(),
        position: format!("column family {name:?}"),
        what: "missing".to_owned(),
    })
}

/// Refuses a store whose meta says its txn log directory was created when that
/// directory is not there (dataLogDir changed or the directory was lost): starting
/// without it would silently drop every txn since the last snapshot.
fn check_txnlog_present(db: &DB, path: &Path, txnlog_dir: &Path) -> Result<(), StorageError> {
    let meta = cf_of(db, path, META_CF)?;
    let created = db
        .get_cf(meta, TXNLOG_META_KEY)
        .map_err(|e| rocks_error(path, e))?
        .is_some();
    if created && !txnlog_dir.try_exists()? {
        return Err(StorageError::Corrupt {
            path: txnlog_dir.to_path_buf(),
            position: "directory".to_owned(),
            what: format!(
                "the txn log directory is missing, though the store in {} has one; \
                 if dataLogDir changed, move keel-txnlog (and keel-wal) to the new dataLogDir",
                path.display()
            ),
        });
    }
    Ok(())
}

/// Refuses a txn log whose newest segment is older than the newest one the store
/// recorded: the log's newest files are gone (deleted, or an old copy of the directory
/// was put back), and starting would silently lose their txns.
fn check_newest_segment(db: &DB, path: &Path, txnlog: &TxnLog) -> Result<(), StorageError> {
    let meta = cf_of(db, path, META_CF)?;
    let Some(value) = db
        .get_cf(meta, TXNLOG_NEWEST_KEY)
        .map_err(|e| rocks_error(path, e))?
    else {
        return Ok(());
    };
    let recorded = <[u8; 8]>::try_from(value.as_slice())
        .map(i64::from_be_bytes)
        .map_err(|_| StorageError::Corrupt {
            path: path.to_path_buf(),
            position: format!("meta key {TXNLOG_NEWEST_KEY:?}"),
            what: format!("{} bytes, expected 8", value.len()),
        })?;
    if txnlog
        .newest_segment()
        .is_none_or(|newest| newest < recorded)
    {
        return Err(StorageError::Corrupt {
            path: txnlog.dir().join(format!("log.{:016x}", recorded as u64)),
            position: "file".to_owned(),
            what: format!(
                "missing: the store in {} recorded this txn log segment as the newest; \
                 its txns would be lost",
                path.display()
            ),
        });
    }
    Ok(())
}

/// Refuses an existing database that lacks one of keel's column families.
fn check_column_families(opts: &Options, path: &Path) -> Result<(), StorageError> {
    let found = DB::list_cf(opts, path).map_err(|e| rocks_error(path, e))?;
    if let Some(missing) = COLUMN_FAMILIES
        .iter()
        .find(|cf| !found.iter().any(|f| f == *cf))
    {
        return Err(StorageError::Corrupt {
            path: path.to_path_buf(),
            position: format!("column family {missing:?}"),
            what: format!("missing (found {found:?}): not a keel database?"),
        });
    }
    Ok(())
}

impl Drop for RocksStorage {
    fn drop(&mut self) {
        // Compactions and flushes hold a close for as long as they run; what they would
        // write is already safe in the WAL and tables, so stop them now to keep a clean
        // stop within ZooKeeper's couple of seconds. A snapshot being sealed is let
        // finish first (one flush of its last memtable).
        if let Err(e) = self.wait_seal() {
            tracing::warn!(error = %e, "sealing the last snapshot failed; recovery uses the one before");
        }
        self.db.cancel_all_background_work(false);
    }
}

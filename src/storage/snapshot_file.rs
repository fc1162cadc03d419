//! [`SnapshotFiles`]: periodic snapshots written as RocksDB table files, each by a thread
//! of its own ([`SnapshotFile`]), then ingested into the snapshot column family and
//! marked complete.
//!
//! Why not write the chunks into the database as any write: each chunk then went to
//! RocksDB's WAL, into a memtable, and out again into a table file by a flush, so a
//! snapshot was written twice (1.8 GB of table files plus as much WAL per member while
//! 1,000,000 znodes were created at snapCount 100,000), and the disk was still busy
//! with it seconds after the writes stopped. Through a table file the chunks are
//! written once and reach the bottom level of the LSM tree directly (their keys are
//! above every stored chunk's), so no compaction rewrites them either.
//!
//! Why a thread: the file must be synced before RocksDB takes it, and a sync of a large
//! snapshot on the storage thread would hold every txn log append behind it. ZooKeeper,
//! too, writes snapshots on a thread of their own.
//!
//! Crash safety: until RocksDB has ingested the file (it syncs the file and its
//! MANIFEST first) the chunks are only in the file ([`file_name`]), which the next open
//! deletes; after the ingest and before the marker they are chunks without a marker,
//! which recovery ignores and a purge or a SNAP install deletes, as it does an
//! unfinished snapshot's chunks. The marker goes in after the chunks are durable.

use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;

use rocksdb::{IngestExternalFileOptions, Options, SstFileWriter, WriteBatch, WriteOptions, DB};

use super::rocks::{chunk_key, db_options, marker_key, rocks_error, META_CF, SNAPSHOT_CF};
use super::{remove_file_if_present, StorageError};

/// How the name of a periodic snapshot's table file starts ([`file_name`]).
pub const FILE_PREFIX: &str = "keel-snapshot-";
/// How it ends.
pub const FILE_SUFFIX: &str = ".sst.tmp";

/// The table file snapshot `zxid` is written into, in the database directory:
/// [`FILE_PREFIX`], the zxid as 16 hex digits, [`FILE_SUFFIX`]. An open deletes every
/// such file a crash left.
pub fn file_name(zxid: i64) -> String {
    format!("{FILE_PREFIX}{zxid:016x}{FILE_SUFFIX}")
}

/// Whether `name` is a periodic snapshot's table file ([`file_name`]).
pub fn is_file_name(name: &str) -> bool {
    name.starts_with(FILE_PREFIX) && name.ends_with(FILE_SUFFIX)
}

/// The periodic snapshots' table files under way: at most one still taking chunks,
/// and the sealed ones whose threads may still be ingesting them. A new snapshot need
/// not wait for the last one's ingest (a sync of up to a few hundred MB): snapshots come
/// back to back while writes pour in, and the storage thread must not stall on one.
#[derive(Default)]
pub struct SnapshotFiles {
    open: Option<SnapshotFile>,
    sealed: Vec<SnapshotFile>,
    /// Snapshots (newest last, at most [`SKIPPED`]) whose chunks are dropped and whose
    /// completion is never marked: one given up for another's chunk 0 (part of its
    /// chunks went with its file, so a marker would point at missing chunks), or one
    /// whose zxid already has a complete snapshot.
    skipped: Vec<i64>,
}

/// How many skipped snapshots [`SnapshotFiles`] remembers.
const SKIPPED: usize = 8;

impl SnapshotFiles {
    /// Whether chunk `index` of snapshot `zxid` is the open file's next one.
    pub fn takes(&self, zxid: i64, index: u32) -> bool {
        self.open.as_ref().is_some_and(|f| f.takes(zxid, index))
    }

    /// Opens snapshot `zxid`'s file, giving up the open one (its chunks are then stored
    /// nowhere and it is [`SnapshotFiles::skip`]ped: the server started over). A sealed
    /// file of the same zxid (same name) is waited for first; sealed files already done
    /// are reaped, so their errors surface.
    ///
    /// Errors: a writer's I/O or backend error; the thread cannot be started.
    pub fn start(&mut self, db: Arc<DB>, db_path: PathBuf, zxid: i64) -> Result<(), StorageError> {
        self.skipped.retain(|&z| z != zxid);
        if let Some(open) = self.open.take() {
            self.skip(open.zxid);
            if let Err(e) = open.wait() {
                tracing::warn!(error = %e, "a snapshot given up had failed; nothing of it is used");
            }
        }
        self.reap_where(|f| f.zxid == zxid || f.is_done())?;
        self.open = Some(SnapshotFile::start(db, db_path, zxid)?);
        Ok(())
    }

    /// Drops snapshot `zxid`'s chunks from now on and never marks it complete (until
    /// its chunk 0 comes again).
    pub fn skip(&mut self, zxid: i64) {
        self.skipped.retain(|&z| z != zxid);
        if self.skipped.len() == SKIPPED {
            self.skipped.remove(0);
        }
        self.skipped.push(zxid);
    }

    /// Whether snapshot `zxid` is skipped ([`SnapshotFiles::skip`]).
    pub fn is_skipped(&self, zxid: i64) -> bool {
        self.skipped.contains(&zxid)
    }

    /// Waits for the sealed files whose writers have ended, so their errors surface;
    /// never waits on one still writing.
    ///
    /// Errors: the first writer error.
    pub fn reap(&mut self) -> Result<(), StorageError> {
        self.reap_where(SnapshotFile::is_done)
    }

    fn reap_where(&mut self, pick: impl Fn(&SnapshotFile) -> bool) -> Result<(), StorageError> {
        let (done, keep): (Vec<_>, Vec<_>) = self.sealed.drain(..).partition(|f| pick(f));
        self.sealed = keep;
        let mut first = Ok(());
        for f in done {
            let result = f.wait();
            if first.is_ok() {
                first = result;
            }
        }
        first
    }

    /// Queues the open file's next chunk record (see [`SnapshotFiles::takes`]).
    ///
    /// Errors: the writer's own error; no file open.
    pub fn put(&mut self, record: Vec<u8>) -> Result<(), StorageError> {
        match self.open.as_mut() {
            Some(f) => f.put(record),
            None => Err(StorageError::Backend("no snapshot file open".to_owned())),
        }
    }

    /// Seals the open file if it is snapshot `zxid`'s: `true` when it took all `chunks`
    /// chunks, its writer then writing the marker after the ingest; `false` when the
    /// caller must write the marker (after [`SnapshotFiles::settle`]), the file's chunks
    /// going in first.
    ///
    /// Errors: the writer's own error.
    pub fn finish(&mut self, zxid: i64, chunks: u32) -> Result<bool, StorageError> {
        let Some(mut f) = self.open.take_if(|f| f.zxid == zxid) else {
            return Ok(false);
        };
        let whole = f.next_index == chunks;
        f.seal(whole.then_some(chunks))?;
        self.sealed.push(f);
        Ok(whole)
    }

    /// Waits for every sealed file's ingest and marker; with `abandon`, gives up the
    /// open file too (and skips its snapshot).
    ///
    /// Errors: the first writer error.
    pub fn settle(&mut self, abandon: bool) -> Result<(), StorageError> {
        let mut first = Ok(());
        let open = if abandon { self.open.take() } else { None };
        if let Some(f) = &open {
            self.skip(f.zxid);
        }
        for f in self.sealed.drain(..).chain(open) {
            let result = f.wait();
            if first.is_ok() {
                first = result;
            }
        }
        first
    }
}

/// Chunks (records of up to the server's 1 MiB chunk and a 5-byte header) queued to
/// the writer thread at most: the storage thread waits when the writer is this far
/// behind, as it waited on the database's own writes before.
const QUEUED_CHUNKS: usize = 8;

/// What the storage thread sends the writer thread.
enum Op {
    /// The next chunk's record (the chunk as [`super::rocks`] stores it).
    Chunk(Vec<u8>),
    /// No more chunks: ingest the file, then write the completion marker of `marker`
    /// chunks if one is given.
    Seal { marker: Option<u32> },
}

/// One periodic snapshot's table file under way: chunks are taken in index order from
/// 0, so their keys are in the order a table file needs.
struct SnapshotFile {
    zxid: i64,
    next_index: u32,
    sealed: bool,
    tx: Option<SyncSender<Op>>,
    thread: Option<JoinHandle<Result<(), StorageError>>>,
}

impl SnapshotFile {
    /// Starts the writer of snapshot `zxid`'s table file at `db_path/`[`file_name`].
    ///
    /// Errors: the thread cannot be started.
    fn start(db: Arc<DB>, db_path: PathBuf, zxid: i64) -> Result<SnapshotFile, StorageError> {
        let (tx, rx) = sync_channel(QUEUED_CHUNKS);
        let thread = std::thread::Builder::new()
            .name("keel-snapshot".to_owned())
            .spawn(move || write(&db, &db_path, zxid, rx))?;
        Ok(SnapshotFile {
            zxid,
            next_index: 0,
            sealed: false,
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Whether chunk `index` of snapshot `zxid` is the file's next one.
    fn takes(&self, zxid: i64, index: u32) -> bool {
        !self.sealed && self.zxid == zxid && self.next_index == index
    }

    /// Whether the writer thread has ended.
    fn is_done(&self) -> bool {
        self.thread.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Queues the next chunk's record, waiting while [`QUEUED_CHUNKS`] are queued.
    ///
    /// Errors: the writer's own error when it has stopped on one.
    fn put(&mut self, record: Vec<u8>) -> Result<(), StorageError> {
        self.send(Op::Chunk(record))?;
        self.next_index += 1;
        Ok(())
    }

    /// Ends the file: the writer ingests it and then writes the marker of `marker`
    /// chunks, if given. Returns at once; [`SnapshotFile::wait`] waits for it.
    ///
    /// Errors: the writer's own error when it has stopped on one.
    fn seal(&mut self, marker: Option<u32>) -> Result<(), StorageError> {
        self.send(Op::Seal { marker })?;
        self.sealed = true;
        Ok(())
    }

    fn send(&mut self, op: Op) -> Result<(), StorageError> {
        let sent = self.tx.as_ref().is_some_and(|tx| tx.send(op).is_ok());
        if sent {
            return Ok(());
        }
        // The writer stopped early, so on an error: that is the one to report.
        self.join()?;
        Err(StorageError::Backend(
            "the snapshot writer stopped before its snapshot was sealed".to_owned(),
        ))
    }

    /// Waits for the writer: a sealed file's ingest and marker are then done; an
    /// unsealed one is abandoned, its file deleted and none of its chunks stored (a
    /// snapshot the server gave up, as it does for a SNAP install).
    ///
    /// Errors: the writer's I/O or backend error.
    fn wait(mut self) -> Result<(), StorageError> {
        self.join()
    }

    fn join(&mut self) -> Result<(), StorageError> {
        // Without its sender the writer ends: after the seal, or abandoning the file.
        self.tx = None;
        match self.thread.take().map(JoinHandle::join) {
            None => Ok(()),
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(StorageError::Backend(
                "the snapshot writer thread panicked".to_owned(),
            )),
        }
    }
}

impl Drop for SnapshotFile {
    fn drop(&mut self) {
        if let Err(e) = self.join() {
            tracing::error!(error = %e, zxid = format!("0x{:x}", self.zxid), "writing a snapshot failed");
        }
    }
}

/// The options the table files are written with: the database's own, so RocksDB takes
/// the files as its own. One value for the process, as a writer borrows its options for
/// as long as it lives.
fn writer_options() -> &'static Options {
    static OPTIONS: OnceLock<Options> = OnceLock::new();
    OPTIONS.get_or_init(|| db_options(None))
}

/// The writer thread: the chunks into the file, then at the seal the ingest and the
/// marker; on anything else (the sender gone unsealed, an error) the file is deleted.
fn write(
    db: &DB,
    db_path: &std::path::Path,
    zxid: i64,
    rx: Receiver<Op>,
) -> Result<(), StorageError> {
    let file = db_path.join(file_name(zxid));
    let error = |e| rocks_error(db_path, e);
    // Never a second name of a live table file (RocksDB only warns when it cannot
    // unlink a file it took): opening it anew would truncate that table.
    remove_file_if_present(&file)?;
    let result = (|| {
        let mut writer = SstFileWriter::create(writer_options());
        writer.open(&file).map_err(error)?;
        let mut index = 0u32;
        let marker = loop {
            match rx.recv() {
                Ok(Op::Chunk(record)) => {
                    writer.put(chunk_key(zxid, index), record).map_err(error)?;
                    index += 1;
                }
                Ok(Op::Seal { marker }) => break marker,
                Err(_) => return Ok(None),
            }
        };
        if index > 0 {
            writer.finish().map_err(error)?;
            let mut ingest = IngestExternalFileOptions::default();
            ingest.set_move_files(true);
            let cf = cf(db, db_path, SNAPSHOT_CF)?;
            db.ingest_external_file_cf_opts(cf, &ingest, vec![&file])
                .map_err(error)?;
        }
        Ok(Some(marker))
    })();
    let sealed = match result {
        Ok(Some(marker)) => marker,
        Ok(None) | Err(_) => {
            let _ = std::fs::remove_file(&file);
            return result.map(|_| ());
        }
    };
    // An empty file (sealed before any chunk) was never written out; after an ingest
    // only RocksDB's failure to unlink the name (it just warns) leaves one. Neither may
    // keep the marker from being written.
    if let Err(e) = remove_file_if_present(&file) {
        tracing::warn!(error = %e, file = %file.display(), "could not delete a snapshot table file's name");
    }
    if let Some(chunks) = sealed {
        let mut batch = WriteBatch::default();
        batch.put_cf(
            cf(db, db_path, META_CF)?,
            marker_key(zxid),
            chunks.to_be_bytes(),
        );
        // Not synced, as the marker was never: see `Storage::finish_snapshot`.
        db.write_opt(batch, &WriteOptions::default())
            .map_err(error)?;
    }
    Ok(())
}

fn cf<'a>(
    db: &'a DB,
    db_path: &std::path::Path,
    name: &str,
) -> Result<&'a rocksdb::ColumnFamily, StorageError> {
    db.cf_handle(name).ok_or_else(|| StorageError::Corrupt {
        path: db_path.to_path_buf(),
        position: format!("column family {name:?}"),
        what: "missing".to_owned(),
    })
}

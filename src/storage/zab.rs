//! [`ZabStore`]: the Zab core's [`ZabStorage`] on keel's production storage (issue 15,
//! item 4): the txn log and snapshots of a [`RocksStorage`], plus acceptedEpoch and
//! currentEpoch in ZooKeeper's own files.
//!
//! What is where:
//! - acceptedEpoch and currentEpoch: files `acceptedEpoch` and `currentEpoch` in
//!   `dataDir/version-2` (ZooKeeper's snapshot directory), each the epoch in decimal
//!   with nothing around it, as ZooKeeper 3.8 writes them (`QuorumPeer.writeLongToFile`;
//!   seen in a real ensemble's dataDir). A write goes to `<name>.tmp`, is fsynced, renamed
//!   over the file, and the directory is fsynced ([`write_epoch_file`]). Reading follows
//!   `QuorumPeer.loadDataBase` (see [`ZabStore::open`]), so a ZooKeeper dataDir's epochs
//!   read as ZooKeeper reads them.
//! - The txn log: the store's segment log. Appends are written unsynced and `sync` makes
//!   them all durable with one fdatasync (group commit).
//! - Truncation (TRUNC) and snapshot installs (SNAP): [`RocksStorage::truncate_after`]
//!   and [`RocksStorage::install_snapshot`], each committed by one synced RocksDB batch
//!   and finished by any later open after a crash.
//!
//! The snapshot bytes at this boundary are one of two forms, told apart by their first
//! 8 bytes, and [`ZabStore::try_snapshot`] gives back exactly the bytes installed:
//! - keel's own snapshot form: the chunks the server writes (a header chunk, then
//!   chunks of znodes), framed by [`encode_snapshot`], starting [`SNAPSHOT_FORM_MAGIC`];
//!   stored as those chunks, as the server's periodic snapshots are;
//! - anything else is ZooKeeper's SNAP stream (its DataTree serialization, ZAB-WIRE.md
//!   §4.4) as a learner received it, stored as a [`STREAM_HEADER_MAGIC`] chunk and the
//!   stream cut into [`STREAM_CHUNK_BYTES`] pieces. Storing what arrived saves a learner
//!   re-encoding its whole new state (0.1-0.15 s of a 1,000,000-znode SNAP, issue 16).
//!   A stream cannot start with the form's magic: its first 4 bytes are the session
//!   count, and "KEEL" as that count (1,262,896,460 sessions of 12 bytes) is far past
//!   any stream a member accepts (`max_snapshot_bytes`).
//!
//! Reading either back into a state is the replica's (`member::replica`).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use bytes::{BufMut, Bytes, BytesMut};

use super::rocks::{RocksStorage, StagedSnapshot};
use super::{LogEntry, Storage, StorageError};
use crate::zab::storage::ZabStorage;
use crate::zab::{epoch_of, Recovered, Txn, Zxid};

/// ZooKeeper's snapshot directory under `dataDir`, which holds the epoch files.
pub const SNAP_DIR: &str = "version-2";
/// acceptedEpoch's file (ZooKeeper's `QuorumPeer.ACCEPTED_EPOCH_FILENAME`).
pub const ACCEPTED_EPOCH_FILE: &str = "acceptedEpoch";
/// currentEpoch's file (ZooKeeper's `QuorumPeer.CURRENT_EPOCH_FILENAME`).
pub const CURRENT_EPOCH_FILE: &str = "currentEpoch";
/// The suffix of an epoch file being written (ZooKeeper's
/// `AtomicFileOutputStream.TMP_EXTENSION`).
pub const TMP_SUFFIX: &str = ".tmp";
/// The metadata key that marks a store whose txn log holds ZooKeeper's txn records (an
/// ensemble member's), value [`TXN_FORM_ZOOKEEPER`]; a standalone server's log holds
/// keel's own records and has no such key. Each refuses the other's store.
pub const META_TXN_FORM: &str = "txn-form";
/// The value of [`META_TXN_FORM`] for an ensemble member's store.
pub const TXN_FORM_ZOOKEEPER: &[u8] = b"zookeeper";

/// The first 8 bytes of keel's snapshot form ([`encode_snapshot`]).
pub const SNAPSHOT_FORM_MAGIC: &[u8; 8] = b"KEELSNPF";
/// The first 8 bytes of chunk 0 of a snapshot stored as ZooKeeper's SNAP stream; the
/// snapshot's zxid (i64, big-endian) follows, and the stream is in the chunks after it.
pub const STREAM_HEADER_MAGIC: &[u8; 8] = b"KEELZKSS";
/// The size of each stored piece of a SNAP stream (the last may be shorter), bytes.
pub const STREAM_CHUNK_BYTES: usize = 1 << 20;

/// A member's durable Zab state on keel's production storage. Used from one thread (the
/// runtime's storage thread); calls block.
#[derive(Debug)]
pub struct ZabStore {
    store: RocksStorage,
    /// `dataDir/version-2`.
    snap_dir: PathBuf,
    accepted_epoch: u32,
    current_epoch: u32,
    /// The highest zxid known durable in the log (or the snapshot's, with no log).
    durable: Zxid,
    /// [`ZabStore::snapshot_zxid`] as last read, `None` when it must be read again. Every
    /// group commit needs it and reading it scans the store's snapshot markers (measured:
    /// 4 % of a follower's CPU under a set load, issue 16), while it changes only
    /// through [`ZabStore::store_mut`] and the install and truncate below, which clear it.
    snapshot_zxid_cache: std::cell::Cell<Option<Zxid>>,
    /// The snapshot [`ZabStore::try_stage_snapshot`] wrote last, not yet installed;
    /// given up (its bytes freed, its file deleted) by a truncation or any use of
    /// [`ZabStore::store_mut`]: a learner that installs does so right after staging,
    /// and one whose core answered the SNAP otherwise (a TRUNC, a closed connection)
    /// must not keep a stream's size of memory and disk.
    staged: Option<Staged>,
}

/// A staged snapshot and the bytes it was staged from, held so that bytes at the same
/// address and length are these bytes (see [`ZabStore::try_install_snapshot`]).
#[derive(Debug)]
struct Staged {
    zxid: Zxid,
    snapshot: Bytes,
    file: StagedSnapshot,
}

impl ZabStore {
    /// Opens (creating if absent) the store in `data_dir` with its txn log in `log_dir`
    /// ([`RocksStorage::open`]; `force_sync` is ZooKeeper's `forceSync`, which only
    /// concerns appends: epochs, truncations and installs are always synced), finishing
    /// any truncation or install a crash cut short, and reads the epochs as ZooKeeper's
    /// `QuorumPeer.loadDataBase` does, with L the epoch of the last stored zxid:
    /// - a missing file is created with L ("should only happen when you are upgrading";
    ///   a new dataDir, or a standalone one joining an ensemble);
    /// - if currentEpoch is below L and `currentEpoch.tmp` holds a greater epoch (a
    ///   write whose rename a crash prevented), that epoch is taken and written. Unlike
    ///   ZooKeeper, which refuses to start in that case without the tmp file, keel
    ///   accepts currentEpoch below L: its core makes the txns and snapshot a leader
    ///   sends before NEWLEADER durable before it writes currentEpoch, so a crash in
    ///   between leaves exactly that, and refusing would keep the member out for good.
    ///
    /// Errors: as [`RocksStorage::open`]; [`StorageError::Corrupt`] naming the file for
    /// an epoch file that is not an epoch in decimal (0 to 4294967295, at most followed
    /// by one line end), or acceptedEpoch below currentEpoch (ZooKeeper refuses both).
    /// Both files are checked before anything is written; a bad one is never rewritten.
    pub fn open(
        data_dir: &Path,
        log_dir: &Path,
        force_sync: bool,
    ) -> Result<ZabStore, StorageError> {
        let snap_dir = data_dir.join(SNAP_DIR);
        let accepted = read_epoch_file(&snap_dir.join(ACCEPTED_EPOCH_FILE))?;
        let current = read_epoch_file(&snap_dir.join(CURRENT_EPOCH_FILE))?;
        let mut store = RocksStorage::open(data_dir, log_dir, force_sync)?;
        match store.get_meta(META_TXN_FORM)? {
            Some(form) if form == TXN_FORM_ZOOKEEPER => {}
            Some(form) => {
                return Err(StorageError::Corrupt {
                    path: data_dir.join(super::rocks::DB_DIR),
                    position: format!("metadata {META_TXN_FORM}"),
                    what: format!(
                        "txn form {:?} is not one this keel writes",
                        String::from_utf8_lossy(&form)
                    ),
                })
            }
            None if store.last_zxid()?.is_some() || !store.snapshots()?.is_empty() => {
                return Err(StorageError::Corrupt {
                    path: data_dir.join(super::rocks::DB_DIR),
                    position: "the store".to_owned(),
                    what: "it is a standalone keel server's store (its txn log holds keel's \
                           own records); an ensemble member logs ZooKeeper's records and \
                           does not start on it"
                        .to_owned(),
                })
            }
            None => store.put_meta(META_TXN_FORM, TXN_FORM_ZOOKEEPER)?,
        }
        let mut zab = ZabStore {
            store,
            snap_dir,
            accepted_epoch: 0,
            current_epoch: 0,
            durable: 0,
            snapshot_zxid_cache: std::cell::Cell::new(None),
            staged: None,
        };
        zab.durable = zab.last_logged()?;
        let last_epoch = epoch_of(zab.durable);
        let mut current_epoch = current.unwrap_or(last_epoch);
        if current.is_some_and(|c| c < last_epoch) {
            let tmp = zab
                .snap_dir
                .join(format!("{CURRENT_EPOCH_FILE}{TMP_SUFFIX}"));
            match read_epoch_file(&tmp) {
                Ok(Some(e)) if e > current_epoch => {
                    tracing::info!(file = %tmp.display(), epoch = e, "found; setting currentEpoch to it");
                    current_epoch = e;
                }
                Ok(_) => {}
                // Half written when a crash came: the write never completed.
                Err(e) => tracing::warn!(error = %e, "ignoring an unfinished currentEpoch write"),
            }
        }
        let accepted_epoch = accepted.unwrap_or(last_epoch);
        if accepted_epoch < current_epoch {
            return Err(StorageError::Corrupt {
                path: zab.snap_dir.join(ACCEPTED_EPOCH_FILE),
                position: "contents".to_owned(),
                what: format!(
                    "acceptedEpoch {accepted_epoch} is below currentEpoch {current_epoch} \
                     (a member accepts an epoch before it syncs in it; ZooKeeper refuses this too)"
                ),
            });
        }
        if !zab.snap_dir.try_exists()? {
            std::fs::create_dir_all(&zab.snap_dir)?;
            File::open(data_dir)?.sync_all()?;
        }
        if current != Some(current_epoch) {
            if current.is_none() {
                tracing::info!(
                    epoch = current_epoch,
                    "{CURRENT_EPOCH_FILE} not found; creating it with the epoch of the last zxid"
                );
            }
            zab.write_current_epoch(current_epoch)?;
        }
        if accepted.is_none() {
            tracing::info!(
                epoch = accepted_epoch,
                "{ACCEPTED_EPOCH_FILE} not found; creating it with the epoch of the last zxid"
            );
            zab.write_accepted_epoch(accepted_epoch)?;
        }
        zab.accepted_epoch = accepted_epoch;
        zab.current_epoch = current_epoch;
        Ok(zab)
    }

    /// The underlying store, for the server's own use (its snapshots, metadata).
    pub fn store(&self) -> &RocksStorage {
        &self.store
    }

    /// The underlying store, for the server's own writes (its periodic snapshots).
    /// Appends must go through [`ZabStorage::append`], which keeps the durable mark.
    pub fn store_mut(&mut self) -> &mut RocksStorage {
        self.snapshot_zxid_cache.set(None);
        self.forget_staged();
        &mut self.store
    }

    /// The newest complete snapshot's zxid, 0 for none.
    pub fn snapshot_zxid(&self) -> Result<Zxid, StorageError> {
        if let Some(zxid) = self.snapshot_zxid_cache.get() {
            return Ok(zxid);
        }
        // As marked now: a periodic snapshot still being sealed is not waited for, and
        // the older zxid seen meanwhile stays cached until the next `store_mut`. Only
        // `last_logged` reads it while the member runs, and the log holds every txn
        // above a periodic snapshot's zxid, so the older value gives the same answer.
        let zxid = self.store.snapshots_now()?.last().map_or(0, |&z| z as Zxid);
        self.snapshot_zxid_cache.set(Some(zxid));
        Ok(zxid)
    }

    /// The highest logged zxid, or the snapshot's when the log holds nothing above it.
    fn last_logged(&self) -> Result<Zxid, StorageError> {
        let log = self.store.last_zxid()?.map_or(0, |z| z as Zxid);
        Ok(log.max(self.snapshot_zxid()?))
    }

    /// [`ZabStorage::recover`], with its errors.
    pub fn try_recover(&self) -> Result<Recovered, StorageError> {
        let snapshot_zxid = self.snapshot_zxid()?;
        Ok(Recovered {
            accepted_epoch: self.accepted_epoch,
            current_epoch: self.current_epoch,
            snapshot_zxid,
            log: self.try_read_range(snapshot_zxid, self.durable)?,
        })
    }

    /// [`ZabStorage::append`], with its errors ([`StorageError::OutOfOrder`] among them).
    pub fn try_append(&mut self, txns: &[Txn]) -> Result<(), StorageError> {
        let entries = txns
            .iter()
            .map(|t| {
                Ok(LogEntry {
                    zxid: to_i64(t.zxid)?,
                    data: t.data.to_vec(),
                })
            })
            .collect::<Result<Vec<_>, StorageError>>()?;
        self.store.append(&entries, false)
    }

    /// [`ZabStorage::sync`], with its errors.
    pub fn try_sync(&mut self) -> Result<Zxid, StorageError> {
        self.store.append(&[], true)?;
        self.durable = self.last_logged()?;
        Ok(self.durable)
    }

    /// [`ZabStorage::truncate_after`], with its errors ([`RocksStorage::truncate_after`]).
    pub fn try_truncate_after(&mut self, zxid: Zxid) -> Result<(), StorageError> {
        self.snapshot_zxid_cache.set(None);
        self.forget_staged();
        self.store.truncate_after(to_i64(zxid)?)?;
        self.durable = self.durable.min(self.last_logged()?);
        Ok(())
    }

    /// [`ZabStorage::read_range`], with its errors.
    pub fn try_read_range(&self, after: Zxid, upto: Zxid) -> Result<Vec<Txn>, StorageError> {
        let mut txns = Vec::new();
        self.store.read_log(to_i64(after)?, &mut |e| {
            let zxid = e.zxid as Zxid;
            if zxid <= upto {
                txns.push(Txn {
                    zxid,
                    data: Bytes::from(e.data),
                });
            }
            Ok(())
        })?;
        Ok(txns)
    }

    /// [`ZabStorage::set_accepted_epoch`], with its errors.
    pub fn try_set_accepted_epoch(&mut self, epoch: u32) -> Result<(), StorageError> {
        self.write_accepted_epoch(epoch)?;
        self.accepted_epoch = epoch;
        Ok(())
    }

    /// [`ZabStorage::set_current_epoch`], with its errors.
    pub fn try_set_current_epoch(&mut self, epoch: u32) -> Result<(), StorageError> {
        self.write_current_epoch(epoch)?;
        self.current_epoch = epoch;
        Ok(())
    }

    /// Writes `snapshot` (either form, see the module doc) as the snapshot at `zxid`
    /// would be stored, synced, without installing it: a learner stages the SNAP it
    /// was sent while it reads the stream into its tree, so that
    /// [`ZabStore::try_install_snapshot`] of the same bytes (the same `Bytes`, not a
    /// copy) then only commits ([`RocksStorage::stage_snapshot`]). Replaces what was
    /// staged before; the store's content does not change.
    ///
    /// Errors: [`StorageError::Corrupt`] if `snapshot` starts as keel's form but is
    /// not; I/O and backend errors (nothing is staged then).
    pub fn try_stage_snapshot(&mut self, zxid: Zxid, snapshot: Bytes) -> Result<(), StorageError> {
        self.forget_staged();
        let file = {
            let mut header = Vec::new();
            let chunks = self.stored_chunks(zxid, &snapshot, &mut header)?;
            self.store.stage_snapshot(to_i64(zxid)?, &chunks)?
        };
        self.staged = file.map(|file| Staged {
            zxid,
            snapshot,
            file,
        });
        Ok(())
    }

    /// Gives up the staged snapshot, if any (see `staged`); a file that cannot be
    /// deleted is only logged (the next stage, install or open deletes it).
    fn forget_staged(&mut self) {
        if self.staged.take().is_some() {
            if let Err(e) = self.store.discard_staged() {
                tracing::warn!(error = %e, "deleting a staged SNAP's file failed");
            }
        }
    }

    /// [`ZabStorage::install_snapshot`], with its errors: [`StorageError::Corrupt`] if
    /// `snapshot` starts as keel's form but is not ([`decode_snapshot`]), and those of
    /// [`RocksStorage::install_snapshot`]. When `snapshot` is the `Bytes` staged last
    /// for `zxid` (same address and length: the staged copy of the `Bytes` keeps that
    /// memory from being reused), only the staged file is committed.
    pub fn try_install_snapshot(
        &mut self,
        zxid: Zxid,
        snapshot: &[u8],
    ) -> Result<(), StorageError> {
        self.snapshot_zxid_cache.set(None);
        if let Some(staged) = self.staged.take() {
            let same = staged.zxid == zxid
                && staged.snapshot.as_ptr() == snapshot.as_ptr()
                && staged.snapshot.len() == snapshot.len();
            if same && self.store.install_staged(staged.file)? {
                self.durable = zxid;
                return Ok(());
            }
        }
        let mut header = Vec::new();
        let chunks = self.stored_chunks(zxid, snapshot, &mut header)?;
        self.store.install_snapshot(to_i64(zxid)?, &chunks)?;
        self.durable = zxid;
        Ok(())
    }

    /// The chunks `snapshot` is stored as (see the module doc), the stream form's header
    /// chunk built in `header`.
    ///
    /// Errors: [`StorageError::Corrupt`] for bytes that start as keel's form but are
    /// not.
    fn stored_chunks<'a>(
        &self,
        zxid: Zxid,
        snapshot: &'a [u8],
        header: &'a mut Vec<u8>,
    ) -> Result<Vec<&'a [u8]>, StorageError> {
        if snapshot.starts_with(SNAPSHOT_FORM_MAGIC) {
            return decode_snapshot(snapshot).map_err(|what| StorageError::Corrupt {
                path: self.snap_dir.clone(),
                position: format!("snapshot 0x{zxid:x} to install"),
                what,
            });
        }
        header.extend_from_slice(STREAM_HEADER_MAGIC);
        header.extend_from_slice(&to_i64(zxid)?.to_be_bytes());
        let mut chunks = Vec::with_capacity(1 + snapshot.len().div_ceil(STREAM_CHUNK_BYTES));
        chunks.push(&header[..]);
        chunks.extend(snapshot.chunks(STREAM_CHUNK_BYTES));
        Ok(chunks)
    }

    /// [`ZabStorage::snapshot`], with its errors: [`StorageError::Corrupt`] for a
    /// stream-form snapshot whose header chunk is not at its own zxid.
    pub fn try_snapshot(&self) -> Result<(Zxid, Bytes), StorageError> {
        // Chunk 0 tells the form; every chunk then goes straight into the one buffer
        // returned (see `RocksStorage::read_latest_snapshot`).
        enum Form {
            Keel(SnapshotFormWriter),
            Stream(BytesMut),
        }
        let mut form = None;
        let at_zxid = self.store.read_latest_snapshot(|c| {
            let (zxid, count, chunk) = (c.zxid, c.count, c.bytes);
            let Some(form) = form.as_mut() else {
                form = Some(match chunk.strip_prefix(STREAM_HEADER_MAGIC) {
                    Some(at) if at != zxid.to_be_bytes() => {
                        return Err(StorageError::Corrupt {
                            path: self.snap_dir.clone(),
                            position: format!("snapshot 0x{zxid:x} chunk 0"),
                            what: format!("a stream header not at this zxid: {at:02x?}"),
                        });
                    }
                    // The header chunk is not part of the stream.
                    Some(_) => Form::Stream(BytesMut::with_capacity(reserve_for(
                        count.saturating_sub(1),
                        STREAM_CHUNK_BYTES,
                    ))),
                    None => {
                        // Periodic snapshots cut chunks of about 1 MiB each
                        // (`server::SNAPSHOT_CHUNK_BYTES`, plus the znode that crosses
                        // it) after a small header chunk.
                        let room = reserve_for(count, STREAM_CHUNK_BYTES + 4096);
                        let slots = count.min(1 << 16) as usize;
                        let mut w = SnapshotFormWriter::with_capacity(slots, room);
                        w.chunk(|out| out.put_slice(chunk));
                        Form::Keel(w)
                    }
                });
                return Ok(());
            };
            match form {
                Form::Keel(w) => w.chunk(|out| out.put_slice(chunk)),
                Form::Stream(out) => out.put_slice(chunk),
            }
            Ok(())
        })?;
        let Some(zxid) = at_zxid else {
            return Ok((0, Bytes::new()));
        };
        let bytes = match form {
            Some(Form::Keel(w)) => w.finish(),
            Some(Form::Stream(out)) => out.freeze(),
            None => encode_snapshot::<&[u8]>(&[]),
        };
        Ok((zxid as Zxid, bytes))
    }

    fn write_accepted_epoch(&self, epoch: u32) -> Result<(), StorageError> {
        write_epoch_file(&self.snap_dir, ACCEPTED_EPOCH_FILE, epoch)
    }

    fn write_current_epoch(&self, epoch: u32) -> Result<(), StorageError> {
        write_epoch_file(&self.snap_dir, CURRENT_EPOCH_FILE, epoch)
    }
}

/// The most [`ZabStore::try_snapshot`] reserves up front, bytes: a SNAP is at most
/// 1 GiB (`max_snapshot_bytes`); a larger snapshot grows its buffer as it is read, and
/// a damaged marker's chunk count is found out at its first missing chunk instead of
/// by an allocation the machine refuses.
const MAX_SNAPSHOT_RESERVE_BYTES: usize = 1 << 30;

/// Room for `chunks` chunks of about `chunk_bytes` each, at most
/// [`MAX_SNAPSHOT_RESERVE_BYTES`]. Room reserved is only address space until written;
/// a buffer grown instead is copied each time it grows.
fn reserve_for(chunks: u32, chunk_bytes: usize) -> usize {
    (chunks as usize)
        .saturating_mul(chunk_bytes)
        .min(MAX_SNAPSHOT_RESERVE_BYTES)
}

/// Panics on a storage error: the trait has no error path, and a member cannot go on
/// without knowing what is durable (the runtime's storage thread stops the process on
/// any storage error, as ZooKeeper does on a failed log write). The `try_` methods of
/// [`ZabStore`] return the errors instead.
impl ZabStorage for ZabStore {
    fn recover(&self) -> Recovered {
        self.try_recover().unwrap_or_else(|e| fatal("recover", e))
    }

    fn append(&mut self, txns: &[Txn]) {
        self.try_append(txns).unwrap_or_else(|e| fatal("append", e))
    }

    fn sync(&mut self) -> Zxid {
        self.try_sync().unwrap_or_else(|e| fatal("sync", e))
    }

    fn truncate_after(&mut self, zxid: Zxid) {
        self.try_truncate_after(zxid)
            .unwrap_or_else(|e| fatal("truncate", e))
    }

    fn read_range(&self, after: Zxid, upto: Zxid) -> Vec<Txn> {
        self.try_read_range(after, upto)
            .unwrap_or_else(|e| fatal("read", e))
    }

    fn set_accepted_epoch(&mut self, epoch: u32) {
        self.try_set_accepted_epoch(epoch)
            .unwrap_or_else(|e| fatal("write acceptedEpoch", e))
    }

    fn set_current_epoch(&mut self, epoch: u32) {
        self.try_set_current_epoch(epoch)
            .unwrap_or_else(|e| fatal("write currentEpoch", e))
    }

    fn install_snapshot(&mut self, zxid: Zxid, snapshot: Bytes) {
        self.try_install_snapshot(zxid, &snapshot)
            .unwrap_or_else(|e| fatal("install snapshot", e))
    }

    fn snapshot(&self) -> (Zxid, Bytes) {
        self.try_snapshot()
            .unwrap_or_else(|e| fatal("read snapshot", e))
    }

    /// The snapshot's chunks' payload bytes ([`RocksStorage::snapshot_payload_bytes`]):
    /// keel's form without its framing (4 bytes a chunk), or a stream with its 16-byte
    /// header chunk; the 1/3 limit it is weighed against feels neither.
    fn snapshot_bytes(&self) -> u64 {
        self.store
            .snapshot_payload_bytes()
            .unwrap_or_else(|e| fatal("snapshot size", e))
    }

    /// ZooKeeper's measure, on keel's segment files: the segments after the one holding
    /// `after` ([`RocksStorage::log_storage_bytes_after`]). Summing the txns' payloads
    /// instead made a leader whose only snapshot was a small installed one send SNAP
    /// where ZooKeeper's leader sends DIFF from the same log (the sync differential's
    /// 800-txn case).
    fn log_bytes_after(&self, after: Zxid) -> u64 {
        to_i64(after)
            .and_then(|a| self.store.log_storage_bytes_after(a))
            .unwrap_or_else(|e| fatal("log size", e))
    }
}

fn fatal(what: &str, e: StorageError) -> ! {
    panic!("Zab storage: {what} failed: {e}")
}

/// A zxid as the store keeps it (signed, as ZooKeeper's `long`).
fn to_i64(zxid: Zxid) -> Result<i64, StorageError> {
    i64::try_from(zxid).map_err(|_| {
        StorageError::Backend(format!(
            "zxid 0x{zxid:x} is above ZooKeeper's largest (a signed 64-bit long)"
        ))
    })
}

/// The epoch in `path`, `None` if the file does not exist. Accepts what ZooKeeper's
/// `QuorumPeer.readLongFromFile` accepts (the first line, as `Long.parseLong` reads it:
/// decimal digits, an optional `+`) within an epoch's 32 bits; unlike it, refuses text
/// after the first line rather than ignoring it (ZooKeeper never writes any).
///
/// Errors: [`StorageError::Corrupt`] naming the file; I/O errors.
pub fn read_epoch_file(path: &Path) -> Result<Option<u32>, StorageError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let text = String::from_utf8_lossy(&bytes);
    let line = text
        .strip_suffix("\r\n")
        .or_else(|| text.strip_suffix('\n'))
        .or_else(|| text.strip_suffix('\r'))
        .unwrap_or(&text);
    match line.parse::<u32>() {
        Ok(epoch) if !line.contains(['\n', '\r']) => Ok(Some(epoch)),
        _ => Err(StorageError::Corrupt {
            path: path.to_path_buf(),
            position: "contents".to_owned(),
            what: format!(
                "found {text:?}, not an epoch (a decimal number from 0 to {}, as ZooKeeper \
                 writes it); refusing to guess, and leaving the file as it is",
                u32::MAX
            ),
        }),
    }
}

/// Writes `epoch` in decimal to `dir/name` durably and atomically: to `name.tmp`
/// (created or emptied), fsynced, renamed over `name`, then `dir` fsynced so the rename
/// survives a crash. A crash leaves the old file or the new one, and at most a stray
/// tmp file, which the next write replaces.
///
/// Errors: I/O errors, naming the file.
pub fn write_epoch_file(dir: &Path, name: &str, epoch: u32) -> Result<(), StorageError> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}{TMP_SUFFIX}"));
    let named = |e: std::io::Error, p: &Path| {
        StorageError::Io(std::io::Error::new(
            e.kind(),
            format!("{}: {e}", p.display()),
        ))
    };
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(|e| named(e, &tmp))?;
    file.write_all(epoch.to_string().as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| named(e, &tmp))?;
    drop(file);
    std::fs::rename(&tmp, &path).map_err(|e| named(e, &path))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| named(e, dir))?;
    Ok(())
}

/// keel's snapshot form of `chunks` (the snapshot chunks as the server writes them):
/// [`SNAPSHOT_FORM_MAGIC`], the chunk count (u32), then each chunk as its length (u32)
/// and bytes; integers big-endian.
///
/// Panics: a chunk or chunk count above u32::MAX.
pub fn encode_snapshot<C: AsRef<[u8]>>(chunks: &[C]) -> Bytes {
    let len = chunks.iter().map(|c| c.as_ref().len()).sum::<usize>();
    let mut w = SnapshotFormWriter::with_capacity(chunks.len(), len);
    for c in chunks {
        w.chunk(|out| out.put_slice(c.as_ref()));
    }
    w.finish()
}

/// Writes keel's snapshot form ([`encode_snapshot`]) chunk by chunk straight into one
/// buffer, for a writer that produces each chunk in place: a 1,000,000-znode state
/// built as separate chunks and then joined was copied twice more (212 MB each time,
/// into freshly faulted pages).
#[derive(Debug)]
pub struct SnapshotFormWriter {
    out: BytesMut,
    count: u32,
}

impl SnapshotFormWriter {
    /// A writer with room for about `chunks` chunks of `bytes` bytes in all (it grows
    /// past that as needed).
    pub fn with_capacity(chunks: usize, bytes: usize) -> SnapshotFormWriter {
        let mut out = BytesMut::with_capacity(12 + 4 * chunks + bytes);
        out.put_slice(SNAPSHOT_FORM_MAGIC);
        out.put_u32(0);
        SnapshotFormWriter { out, count: 0 }
    }

    /// Appends one chunk: what `write` puts into the buffer it is given (appending
    /// only; it may read `out.len()` to size the chunk).
    ///
    /// Panics: a chunk or chunk count above u32::MAX.
    pub fn chunk(&mut self, write: impl FnOnce(&mut BytesMut)) {
        let at = self.out.len();
        self.out.put_u32(0);
        write(&mut self.out);
        let len = u32::try_from(self.out.len() - at - 4).expect("chunk length fits in u32");
        self.out[at..at + 4].copy_from_slice(&len.to_be_bytes());
        self.count = self.count.checked_add(1).expect("chunk count fits in u32");
    }

    /// The snapshot form of the chunks appended.
    pub fn finish(mut self) -> Bytes {
        let at = SNAPSHOT_FORM_MAGIC.len();
        self.out[at..at + 4].copy_from_slice(&self.count.to_be_bytes());
        self.out.freeze()
    }
}

/// The chunks of a snapshot in keel's snapshot form ([`encode_snapshot`]).
///
/// Errors: what is wrong (no magic, a length past the end, bytes after the last chunk).
pub fn decode_snapshot(bytes: &[u8]) -> Result<Vec<&[u8]>, String> {
    let rest = bytes
        .strip_prefix(SNAPSHOT_FORM_MAGIC)
        .ok_or("not keel's snapshot form (no KEELSNPF magic)")?;
    let (count, mut rest) = rest
        .split_first_chunk::<4>()
        .ok_or("chunk count cut short")?;
    let count = u32::from_be_bytes(*count);
    let mut chunks = Vec::with_capacity(count.min(1 << 16) as usize);
    for i in 0..count {
        let (len, tail) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| format!("chunk {i} of {count}: length cut short"))?;
        let (chunk, tail) = tail
            .split_at_checked(u32::from_be_bytes(*len) as usize)
            .ok_or_else(|| format!("chunk {i} of {count} runs past the end"))?;
        chunks.push(chunk);
        rest = tail;
    }
    if !rest.is_empty() {
        return Err(format!(
            "{} bytes after chunk {count} of {count}",
            rest.len()
        ));
    }
    Ok(chunks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::fail;
    use crate::storage::rocks::INSTALL_FILE;
    use crate::storage::txnlog::{SEGMENT_HEADER_BYTES, TXNLOG_DIR};
    use crate::zab::storage::tests::conformance;
    use crate::zab::zxid;

    fn open(dir: &Path) -> ZabStore {
        ZabStore::open(dir, dir, true).unwrap_or_else(|e| panic!("open: {e}"))
    }

    /// Txn `counter` of epoch 1: 100 KiB whose bytes depend on the zxid.
    fn txn(counter: u32) -> Txn {
        let z = zxid(1, counter);
        Txn {
            zxid: z,
            data: Bytes::from(
                (0..100 << 10)
                    .map(|i| (i ^ z as usize) as u8)
                    .collect::<Vec<_>>(),
            ),
        }
    }

    fn txns(counters: std::ops::RangeInclusive<u32>) -> Vec<Txn> {
        counters.map(txn).collect()
    }

    /// The whole log as the store reads it, as counters (payloads checked).
    /// A standalone server's store (keel's own txn records) is refused by name and left
    /// as it was; an ensemble member's store is marked and reopens.
    #[test]
    fn a_standalone_store_is_refused_and_an_ensemble_store_is_marked() {
        let dir = tempfile::tempdir().unwrap();
        let mut standalone = RocksStorage::open(dir.path(), dir.path(), true).unwrap();
        standalone
            .append(
                &[LogEntry {
                    zxid: 1,
                    data: vec![1, 2, 3],
                }],
                true,
            )
            .unwrap();
        drop(standalone);
        let err = ZabStore::open(dir.path(), dir.path(), true).unwrap_err();
        assert!(
            err.to_string().contains("standalone keel server's store"),
            "{err}"
        );
        assert!(!dir.path().join(SNAP_DIR).join(CURRENT_EPOCH_FILE).exists());
        let reopened = RocksStorage::open(dir.path(), dir.path(), true).unwrap();
        assert_eq!(reopened.get_meta(META_TXN_FORM).unwrap(), None);
        assert_eq!(reopened.last_zxid().unwrap(), Some(1));
        drop(reopened);
        let fresh = tempfile::tempdir().unwrap();
        let mut zab = open(fresh.path());
        zab.try_append(&txns(1..=2)).unwrap();
        zab.try_sync().unwrap();
        drop(zab);
        let zab = open(fresh.path());
        assert_eq!(
            zab.store().get_meta(META_TXN_FORM).unwrap().as_deref(),
            Some(TXN_FORM_ZOOKEEPER)
        );
    }

    fn counters(s: &ZabStore) -> Vec<u32> {
        s.read_range(0, u64::MAX)
            .iter()
            .map(|t| {
                assert_eq!(t, &txn(t.zxid as u32), "payload of 0x{:x}", t.zxid);
                t.zxid as u32
            })
            .collect()
    }

    fn segments(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir.join(TXNLOG_DIR))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("log."))
            .collect();
        names.sort();
        names
    }

    /// Copies the directory tree `from` into `to`.
    fn copy_dir(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy_dir(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), target).unwrap();
            }
        }
    }

    /// Opens a copy of the store in `dir` (which stays as it is), in a directory that
    /// lives as long as the store.
    fn open_copy(dir: &Path) -> ZabStoreIn {
        let copy = tempfile::tempdir().unwrap();
        copy_dir(dir, copy.path());
        let store = open(copy.path());
        ZabStoreIn { store, _dir: copy }
    }

    /// A store with the temporary directory it lives in.
    struct ZabStoreIn {
        store: ZabStore,
        _dir: tempfile::TempDir,
    }

    impl std::ops::Deref for ZabStoreIn {
        type Target = ZabStore;
        fn deref(&self) -> &ZabStore {
            &self.store
        }
    }

    fn segment_name(counter: u32) -> String {
        format!("log.{:016x}", zxid(1, counter))
    }

    /// A store whose log holds txns 1..=32 in appends of 4 (400 KiB each), two appends
    /// to a 1 MB segment (the library's tests' size): segments start at txns 1, 9, 17
    /// and 25. The last append (29..=32) is not synced.
    fn four_segments(dir: &Path) -> ZabStore {
        let mut s = open(dir);
        for first in (1..=25).step_by(4) {
            s.append(&txns(first..=first + 3));
            s.sync();
        }
        s.append(&txns(29..=32));
        let want: Vec<String> = [1, 9, 17, 25].map(segment_name).to_vec();
        assert_eq!(segments(dir), want, "the layout the tests rely on");
        s
    }

    fn form(tag: &str) -> Bytes {
        encode_snapshot(&[format!("header {tag}").as_bytes(), b"nodes".as_slice()])
    }

    #[test]
    fn conforms() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path();
        conformance(
            open(path),
            |s| {
                drop(s);
                open(path)
            },
            form("conformance"),
        );
    }

    #[test]
    fn epoch_files_are_zookeepers() {
        let dir = tempfile::tempdir().unwrap();
        let snap_dir = dir.path().join("version-2");
        // What a real ZooKeeper 3.8 member wrote (tools/ensemble.sh, after one
        // election): "1" in each, no line end; a hand-edited "3\n" reads as ZooKeeper
        // reads it.
        std::fs::create_dir_all(&snap_dir).unwrap();
        std::fs::write(snap_dir.join("acceptedEpoch"), "3\n").unwrap();
        std::fs::write(snap_dir.join("currentEpoch"), "1").unwrap();
        let mut s = open(dir.path());
        let r = s.recover();
        assert_eq!((r.accepted_epoch, r.current_epoch), (3, 1));
        s.set_accepted_epoch(4_000_000_000);
        s.set_current_epoch(5);
        assert_eq!(
            std::fs::read_to_string(snap_dir.join("acceptedEpoch")).unwrap(),
            "4000000000"
        );
        assert_eq!(
            std::fs::read_to_string(snap_dir.join("currentEpoch")).unwrap(),
            "5"
        );
        let mut names: Vec<String> = std::fs::read_dir(&snap_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["acceptedEpoch", "currentEpoch"], "no tmp file left");
        drop(s);
        let r = open(dir.path()).recover();
        assert_eq!((r.accepted_epoch, r.current_epoch), (4_000_000_000, 5));
    }

    #[test]
    fn missing_epoch_files_take_the_last_zxids_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let snap_dir = dir.path().join("version-2");
        let mut s = open(dir.path());
        assert_eq!(
            std::fs::read_to_string(snap_dir.join("currentEpoch")).unwrap(),
            "0"
        );
        s.append(&[Txn {
            zxid: zxid(3, 1),
            data: Bytes::from_static(b"x"),
        }]);
        s.sync();
        drop(s);
        std::fs::remove_file(snap_dir.join("acceptedEpoch")).unwrap();
        std::fs::remove_file(snap_dir.join("currentEpoch")).unwrap();
        let r = open(dir.path()).recover();
        assert_eq!((r.accepted_epoch, r.current_epoch), (3, 3));
        for name in ["acceptedEpoch", "currentEpoch"] {
            assert_eq!(std::fs::read_to_string(snap_dir.join(name)).unwrap(), "3");
        }
    }

    #[test]
    fn bad_epoch_files_are_refused_and_left_alone() {
        let bad: [&[u8]; 9] = [
            b"",
            b"junk",
            b"-1",
            b"4294967296",
            b" 1",
            b"1 ",
            b"1\n2",
            b"0x5",
            b"\xff1",
        ];
        for name in ["acceptedEpoch", "currentEpoch"] {
            for contents in bad {
                let dir = tempfile::tempdir().unwrap();
                let file = dir.path().join("version-2").join(name);
                drop(open(dir.path()));
                std::fs::write(&file, contents).unwrap();
                match ZabStore::open(dir.path(), dir.path(), true) {
                    Err(StorageError::Corrupt { path, what, .. }) => {
                        assert_eq!(path, file, "{contents:?}");
                        assert!(what.contains("not an epoch"), "{what}");
                    }
                    other => panic!("{name} {contents:?}: expected Corrupt, got {other:?}"),
                }
                assert_eq!(std::fs::read(&file).unwrap(), contents, "never rewritten");
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path());
        s.set_accepted_epoch(2);
        s.set_current_epoch(2);
        drop(s);
        let accepted = dir.path().join("version-2/acceptedEpoch");
        std::fs::write(&accepted, "1").unwrap();
        match ZabStore::open(dir.path(), dir.path(), true) {
            Err(StorageError::Corrupt { path, what, .. }) => {
                assert_eq!(path, accepted);
                assert!(what.contains("below currentEpoch 2"), "{what}");
            }
            other => panic!("expected Corrupt, got {other:?}"),
        }
        assert_eq!(std::fs::read_to_string(&accepted).unwrap(), "1");
    }

    #[test]
    fn current_epoch_tmp_is_taken_when_the_log_is_ahead() {
        let dir = tempfile::tempdir().unwrap();
        let tmp = dir.path().join("version-2/currentEpoch.tmp");
        let mut s = open(dir.path());
        s.set_accepted_epoch(4);
        s.set_current_epoch(1);
        s.append(&[Txn {
            zxid: zxid(3, 1),
            data: Bytes::from_static(b"x"),
        }]);
        s.sync();
        drop(s);
        // A crash between the tmp file's fsync and its rename; half written: ignored.
        std::fs::write(&tmp, "3").unwrap();
        assert_eq!(open(dir.path()).recover().current_epoch, 3);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("version-2/currentEpoch")).unwrap(),
            "3"
        );
        std::fs::write(dir.path().join("version-2/currentEpoch"), "1").unwrap();
        std::fs::write(&tmp, "").unwrap();
        assert_eq!(open(dir.path()).recover().current_epoch, 1);
    }

    #[test]
    fn read_range_crosses_segments() {
        let dir = tempfile::tempdir().unwrap();
        let s = four_segments(dir.path());
        let got: Vec<Zxid> = s
            .read_range(zxid(1, 6), zxid(1, 27))
            .iter()
            .map(|t| t.zxid)
            .collect();
        assert_eq!(got, (7..=27).map(|c| zxid(1, c)).collect::<Vec<_>>());
        assert_eq!(
            s.recover().log.len(),
            28,
            "the unsynced append is not recovered"
        );
    }

    /// Crashes the operation `op` on a fresh [`four_segments`] store after its k-th
    /// step for k = 1, 2, ... until it completes, and also each recovery open after
    /// each of its own steps; every reopen must succeed, and `check` says whether it
    /// found the new state (else it must have found the old one), never the old after
    /// the new. `damage` changes the files after the crash after step k. Returns the k
    /// of the first step after which the new state is found, the operation's steps and
    /// the most steps a recovery took.
    fn crash_at_every_step(
        op: impl Fn(&mut ZabStore) -> Result<(), StorageError>,
        check: impl Fn(&ZabStore, &str) -> bool,
        damage: impl Fn(&Path, u32),
    ) -> (u32, u32, u32) {
        let mut first_new = None;
        let mut recovery_steps = 0;
        for k in 1.. {
            let dir = tempfile::tempdir().unwrap();
            let mut s = four_segments(dir.path());
            fail::arm(Some(k));
            let done = op(&mut s);
            let hits = fail::hits();
            fail::arm(None);
            if let Err(e) = &done {
                assert!(e.to_string().contains("injected crash"), "{e}");
            }
            drop(s);
            damage(dir.path(), k);
            let s = open_copy(dir.path());
            let is_new = check(&s, &format!("crash after step {k}"));
            drop(s);
            // A crash during the recovery too, after each of its steps, each on a copy
            // of the store as the first crash left it.
            for j in 1.. {
                let trial = tempfile::tempdir().unwrap();
                copy_dir(dir.path(), trial.path());
                fail::arm(Some(j));
                let reopened = ZabStore::open(trial.path(), trial.path(), true);
                fail::arm(None);
                let finished = reopened.is_ok();
                drop(reopened);
                let what = format!("crash after step {k}, then after recovery step {j}");
                assert_eq!(check(&open(trial.path()), &what), is_new, "{what}");
                if finished {
                    recovery_steps = recovery_steps.max(j - 1);
                    break;
                }
            }
            if is_new && first_new.is_none() {
                first_new = Some(k);
            }
            assert!(
                is_new || first_new.is_none(),
                "crash after step {k}: the old state after a crash that found the new one"
            );
            if done.is_ok() {
                assert!(hits < k);
                assert!(is_new, "a completed operation leaves the new state");
                return (first_new.expect("found new"), hits, recovery_steps);
            }
        }
        unreachable!()
    }

    #[test]
    fn truncate_survives_a_crash_at_every_step() {
        // Txn 10 is in the first append (9..=12) of the second segment.
        let after = zxid(1, 10);
        let new: Vec<u32> = (1..=10).collect();
        let steps = crash_at_every_step(
            |s| s.try_truncate_after(after),
            |s, what| {
                let log = counters(s);
                assert!(
                    log == new || log == (1..=32).collect::<Vec<_>>(),
                    "{what}: {log:?}"
                );
                log == new
            },
            |_, _| {},
        );
        // 1 the log's sync, 2 the commit, 3-4 the two later segments deleted, 5 the cut
        // segment zeroed, 6 the carry appended, 7 the key deleted; the recovery after
        // step 2 redoes 3-7.
        assert_eq!(steps, (2, 7, 5), "(commit step, steps, recovery steps)");
    }

    #[test]
    fn truncation_leaves_no_segment_past_the_cut_and_appends_go_on() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = four_segments(dir.path());
        s.truncate_after(zxid(1, 10));
        assert_eq!(segments(dir.path()), [segment_name(1), segment_name(9)]);
        assert_eq!(s.sync(), zxid(1, 10));
        s.append(&txns(11..=14));
        assert_eq!(s.sync(), zxid(1, 14));
        drop(s);
        let mut s = open(dir.path());
        assert_eq!(counters(&s), (1..=14).collect::<Vec<_>>());
        // A cut at a segment's start removes the segment; one below the first txn, all.
        s.truncate_after(zxid(1, 8));
        assert_eq!(segments(dir.path()), [segment_name(1)]);
        s.truncate_after(0);
        assert!(segments(dir.path()).is_empty());
        drop(s);
        let mut s = open(dir.path());
        assert!(counters(&s).is_empty());
        s.append(&txns(1..=2));
        assert_eq!(s.sync(), zxid(1, 2));
        drop(s);
        assert_eq!(counters(&open(dir.path())), [1, 2]);
    }

    #[test]
    fn a_read_only_open_reads_a_pending_truncation_and_changes_nothing() {
        // Server start-up verifies the store read-only before it opens it read-write.
        let dir = tempfile::tempdir().unwrap();
        let mut s = four_segments(dir.path());
        s.sync();
        fail::arm(Some(2));
        assert!(
            s.try_truncate_after(zxid(1, 10)).is_err(),
            "crash after the commit"
        );
        fail::arm(None);
        drop(s);
        let on_disk = segments(dir.path());
        let ro = RocksStorage::open_read_only(dir.path(), dir.path())
            .unwrap()
            .expect("a store");
        let mut read = Vec::new();
        ro.read_log(-1, &mut |e| {
            read.push(e.zxid);
            Ok(())
        })
        .unwrap();
        let want: Vec<i64> = (1..=10).map(|c| zxid(1, c) as i64).collect();
        assert_eq!(read, want, "the log up to the cut, then the carry");
        assert_eq!(ro.last_zxid().unwrap(), Some(zxid(1, 10) as i64));
        drop(ro);
        assert_eq!(segments(dir.path()), on_disk, "nothing deleted");
        assert_eq!(counters(&open(dir.path())), (1..=10).collect::<Vec<_>>());
        assert_eq!(segments(dir.path()), [segment_name(1), segment_name(9)]);
    }

    #[test]
    fn garbage_past_a_committed_cut_is_ignored() {
        // A crash during the zeroing may persist its writes in any order: the cut
        // append's header zeroed while later appends stay whole, or bytes in between.
        let steps = crash_at_every_step(
            |s| s.try_truncate_after(zxid(1, 10)),
            |s, what| {
                let log = counters(s);
                assert!(log.len() == 10 || log.len() == 32, "{what}: {log:?}");
                log.len() == 10
            },
            |dir, k| {
                let seg = dir.join(TXNLOG_DIR).join(segment_name(9));
                if k == 2 && seg.exists() {
                    let mut bytes = std::fs::read(&seg).unwrap();
                    let at = SEGMENT_HEADER_BYTES as usize;
                    bytes[at..at + 48].fill(0);
                    bytes[at + 500_000] ^= 0xff;
                    std::fs::write(&seg, bytes).unwrap();
                }
            },
        );
        assert_eq!(steps, (2, 7, 5));
    }

    /// Installs `new` at `at` (staged first when `staged`, so the install only commits
    /// the staged file) with a crash at every step: each leaves the old state (the
    /// store's own snapshot and its log) or the new one, never a mix.
    fn install_with_a_crash_at_every_step(at: Zxid, new: &Bytes, staged: bool) {
        let steps = crash_at_every_step(
            |s| {
                // The store's own snapshot first, so the old state has one too.
                let store = s.store_mut();
                store.put_snapshot_chunk(zxid(1, 4) as i64, 0, b"old")?;
                store.finish_snapshot(zxid(1, 4) as i64, 1)?;
                store.purge(1)?;
                if staged {
                    s.try_stage_snapshot(at, new.clone())?;
                }
                s.try_install_snapshot(at, new)
            },
            |s, what| {
                let (snap_zxid, snap) = s.snapshot();
                let r = s.recover();
                assert_eq!(r.snapshot_zxid, snap_zxid, "{what}");
                if snap_zxid == at {
                    assert_eq!(&snap, new, "{what}");
                    assert!(r.log.is_empty(), "{what}: {:?}", counters(s));
                    assert!(segments(s.snap_dir.parent().unwrap()).is_empty(), "{what}");
                    true
                } else {
                    let log = counters(s);
                    if snap_zxid == zxid(1, 4) {
                        assert_eq!(snap, encode_snapshot(&[b"old"]), "{what}");
                        assert_eq!(log, (5..=32).collect::<Vec<_>>(), "{what}");
                    } else {
                        assert_eq!(snap_zxid, 0, "{what}");
                        assert_eq!(log, (1..=32).collect::<Vec<_>>(), "{what}");
                    }
                    false
                }
            },
            |_, _| {},
        );
        // 1 the chunks ingested (no marker yet: the old state), 2 the batch, 3-6 the
        // four segments deleted, 7 the key deleted.
        assert_eq!(steps, (2, 7, 5), "(commit step, steps, recovery steps)");
    }

    #[test]
    fn install_survives_a_crash_at_every_step() {
        // Keel's form installed whole, and a SNAP stream staged first (as a learner
        // does) whose install only commits the staged file.
        let stream_new = stream(9, STREAM_CHUNK_BYTES + 5);
        for (new, staged) in [(form("new"), false), (stream_new, true)] {
            for at in [zxid(2, 3), zxid(1, 20)] {
                install_with_a_crash_at_every_step(at, &new, staged);
            }
        }
        // After an install below the old log's end, appends go on above it.
        let dir = tempfile::tempdir().unwrap();
        let mut s = four_segments(dir.path());
        s.install_snapshot(zxid(1, 20), form("new"));
        s.append(&txns(21..=22));
        assert_eq!(s.sync(), zxid(1, 22));
        drop(s);
        let s = open(dir.path());
        assert_eq!(counters(&s), [21, 22]);
        assert_eq!(s.recover().snapshot_zxid, zxid(1, 20));
    }

    /// A SNAP at the zxid of a snapshot already stored cannot ingest its chunks ahead
    /// of the commit (they would overwrite the stored one's): they go in the batch, and
    /// a crash at any step leaves one snapshot or the other, never a mix.
    #[test]
    fn an_install_at_a_stored_snapshots_zxid_survives_a_crash_at_every_step() {
        let at = zxid(1, 4);
        let old = || encode_snapshot(&[b"old".as_slice(), b"old 2"]);
        let steps = crash_at_every_step(
            |s| {
                let store = s.store_mut();
                store.put_snapshot_chunk(at as i64, 0, b"old")?;
                store.put_snapshot_chunk(at as i64, 1, b"old 2")?;
                store.finish_snapshot(at as i64, 2)?;
                store.purge(1)?;
                s.try_install_snapshot(at, &form("new"))
            },
            |s, what| {
                let (snap_zxid, snap) = s.snapshot();
                assert_eq!(snap_zxid, at, "{what}");
                if snap == form("new") {
                    assert!(counters(s).is_empty(), "{what}");
                    true
                } else {
                    assert_eq!(snap, old(), "{what}");
                    assert_eq!(counters(s), (5..=32).collect::<Vec<_>>(), "{what}");
                    false
                }
            },
            |_, _| {},
        );
        // 1 the batch, 2-5 the four segments deleted, 6 the key deleted.
        assert_eq!(steps, (1, 6, 5), "(commit step, steps, recovery steps)");
    }

    /// The table file a SNAP's chunks are written into before RocksDB ingests it goes
    /// with the ingest; one a crash left is deleted by the next open.
    #[test]
    fn an_install_leaves_no_table_file_behind() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = four_segments(dir.path());
        let file = dir
            .path()
            .join(crate::storage::rocks::DB_DIR)
            .join(INSTALL_FILE);
        s.install_snapshot(zxid(1, 20), form("new"));
        assert!(!file.exists());
        drop(s);
        std::fs::write(&file, b"a table file cut short").unwrap();
        let s = open(dir.path());
        assert!(!file.exists());
        assert_eq!(s.snapshot(), (zxid(1, 20), form("new")));
    }

    #[test]
    fn a_restart_recovers_what_was_durable() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path());
        assert_eq!(s.recover().snapshot_zxid, 0);
        assert!(s.recover().log.is_empty(), "an empty dataDir: SNAP");
        assert_eq!(s.snapshot(), (0, Bytes::new()));
        s.set_accepted_epoch(2);
        s.set_current_epoch(2);
        s.install_snapshot(zxid(1, 3), form("s"));
        s.append(&txns(4..=6));
        s.sync();
        s.truncate_after(zxid(1, 5));
        s.append(&[Txn {
            zxid: zxid(2, 1),
            data: Bytes::from_static(b"epoch 2"),
        }]);
        assert_eq!(s.sync(), zxid(2, 1));
        let before = s.recover();
        drop(s);
        let s = open(dir.path());
        let after = s.recover();
        assert_eq!(
            (
                after.accepted_epoch,
                after.current_epoch,
                after.snapshot_zxid
            ),
            (
                before.accepted_epoch,
                before.current_epoch,
                before.snapshot_zxid
            )
        );
        assert_eq!(after.log, before.log);
        let zxids: Vec<Zxid> = after.log.iter().map(|t| t.zxid).collect();
        assert_eq!(zxids, [zxid(1, 4), zxid(1, 5), zxid(2, 1)]);
        assert_eq!(s.snapshot(), (zxid(1, 3), form("s")));
    }

    #[test]
    fn snapshot_form_round_trips_and_refuses_other_bytes() {
        let chunks: [&[u8]; 3] = [b"header", b"", b"nodes"];
        let bytes = encode_snapshot(&chunks);
        assert_eq!(decode_snapshot(&bytes).unwrap(), chunks);
        assert_eq!(
            decode_snapshot(&encode_snapshot::<&[u8]>(&[]))
                .unwrap()
                .len(),
            0
        );
        for bad in [
            &b"state"[..],
            &bytes[..bytes.len() - 1],
            &[&bytes[..], b"x"].concat(),
        ] {
            assert!(decode_snapshot(bad).is_err(), "{bad:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path());
        let cut = &bytes[..bytes.len() - 1];
        assert!(matches!(
            s.try_install_snapshot(zxid(1, 1), cut),
            Err(StorageError::Corrupt { .. })
        ));
        assert!(matches!(
            s.try_stage_snapshot(zxid(1, 1), Bytes::copy_from_slice(cut)),
            Err(StorageError::Corrupt { .. })
        ));
        assert_eq!(s.snapshot(), (0, Bytes::new()), "nothing installed");
    }

    /// Bytes of `len` that are not keel's form (a SNAP stream, for storage), each byte
    /// depending on `seed` and its offset.
    fn stream(seed: u8, len: usize) -> Bytes {
        (0..len)
            .map(|i| seed.wrapping_add((i % 251) as u8))
            .collect::<Vec<u8>>()
            .into()
    }

    /// Any bytes not in keel's form are a SNAP stream: stored in pieces behind a header
    /// chunk and given back byte for byte, across a restart; keel's form still comes
    /// back as it went in.
    #[test]
    fn a_stream_is_stored_in_pieces_and_read_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path());
        let big = stream(1, 2 * STREAM_CHUNK_BYTES + 17);
        s.install_snapshot(zxid(1, 5), big.clone());
        assert_eq!(s.snapshot(), (zxid(1, 5), big.clone()));
        let stored = s.store.latest_snapshot().unwrap().unwrap();
        assert_eq!(stored.chunks.len(), 4, "a header and three pieces");
        assert_eq!(&stored.chunks[0][..8], STREAM_HEADER_MAGIC);
        drop(s);
        let mut s = open(dir.path());
        assert_eq!(s.snapshot(), (zxid(1, 5), big));
        s.install_snapshot(zxid(1, 6), Bytes::from_static(b"s"));
        assert_eq!(s.snapshot(), (zxid(1, 6), Bytes::from_static(b"s")));
        s.install_snapshot(zxid(1, 7), form("k"));
        assert_eq!(s.snapshot(), (zxid(1, 7), form("k")));
    }

    /// A staged snapshot changes nothing until the install of the very same bytes at
    /// the same zxid commits it; an install of other bytes, or at another zxid, or
    /// after a later stage, stores what it was given.
    #[test]
    fn a_staged_snapshot_is_committed_only_by_the_install_of_its_own_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path());
        s.install_snapshot(zxid(1, 1), form("old"));
        let file = dir
            .path()
            .join(crate::storage::rocks::DB_DIR)
            .join(INSTALL_FILE);

        let a = stream(2, STREAM_CHUNK_BYTES + 3);
        s.try_stage_snapshot(zxid(1, 9), a.clone()).unwrap();
        assert!(file.exists(), "staged into the table file");
        assert_eq!(s.snapshot(), (zxid(1, 1), form("old")), "not yet installed");
        s.try_install_snapshot(zxid(1, 9), &a).unwrap();
        assert!(!file.exists(), "the staged file was ingested");
        assert_eq!(s.snapshot(), (zxid(1, 9), a.clone()));

        // Other bytes at the staged zxid: stored as given, the staged file unused.
        let b = stream(3, 100);
        s.try_stage_snapshot(zxid(1, 10), b.clone()).unwrap();
        let other = stream(4, 100);
        s.try_install_snapshot(zxid(1, 10), &other).unwrap();
        assert_eq!(
            s.snapshot(),
            (zxid(1, 10), other),
            "what the install was given"
        );

        s.try_stage_snapshot(zxid(1, 11), b.clone()).unwrap();
        s.try_install_snapshot(zxid(1, 12), &b).unwrap();
        assert_eq!(s.snapshot(), (zxid(1, 12), b.clone()), "another zxid");

        let c = stream(5, 50);
        s.try_stage_snapshot(zxid(1, 13), b.clone()).unwrap();
        s.try_stage_snapshot(zxid(1, 13), c.clone()).unwrap();
        s.try_install_snapshot(zxid(1, 13), &b).unwrap();
        assert_eq!(s.snapshot(), (zxid(1, 13), b.clone()), "staged over by c");

        // Given up by another write (the core answered the SNAP otherwise): no file,
        // and the install of those bytes then writes them whole.
        s.try_stage_snapshot(zxid(1, 14), c.clone()).unwrap();
        assert!(file.exists());
        s.store_mut();
        assert!(!file.exists(), "a stream's size of disk given back");
        s.try_install_snapshot(zxid(1, 14), &c).unwrap();
        assert_eq!(s.snapshot(), (zxid(1, 14), c.clone()));
        s.try_stage_snapshot(zxid(1, 15), b.clone()).unwrap();
        s.try_truncate_after(zxid(1, 14)).unwrap();
        assert!(!file.exists(), "given up by a TRUNC");

        // A stage a restart cut short leaves the store as it was, and no file.
        s.try_stage_snapshot(zxid(1, 16), b.clone()).unwrap();
        drop(s);
        let s = open(dir.path());
        assert!(!file.exists());
        assert_eq!(s.snapshot(), (zxid(1, 14), c));
    }
}

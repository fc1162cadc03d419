//! [`TxnLog`]: keel's txn log, append-only segment files on zero-filled space.
//!
//! Why not RocksDB's WAL: an fdatasync after appending to a file that grows must also
//! write the file's new size (inode metadata), which on this project's machine costs
//! 1.5–2× an fdatasync of bytes written over blocks that already exist (p50 275–430 µs
//! against 170–200 µs). ZooKeeper preallocates its txn log for the same reason
//! (FileTxnLog, `zookeeper.preAllocSize`, 64 MB); so does this log: a new segment is
//! filled with zeros to its full [`SEGMENT_TARGET_BYTES`] and synced when it is started
//! (about 60 ms here, once per 64 MB), so the syncs of appends flush data only. Zeroing
//! in smaller steps as the log grows was measured to make the first sync after each
//! step about 2.5 ms (4 MB of zeros) instead of 0.2 ms, a spike every few thousand
//! writes that showed in the write phases' p99. The zeroing is done ahead, off the
//! write path: once the current segment is half full, a background thread prepares
//! the next one as [`SPARE_NAME`]; a roll then writes the header, renames the spare and
//! syncs the directory, a few milliseconds instead of about 60 that stalled every write
//! behind it. The preparation is paced: zeros in [`SPARE_SYNC_STEP_BYTES`] steps, each
//! synced, with a rest after each step ([`spare_rest`]) unless the log is catching up
//! with it. Unpaced, its 64 MB went to the disk in about 0.1 s, and every log sync in
//! that time waited behind it: traced on this project's machine during a 4 × 64 set
//! run, 21 of the log's 23 fdatasyncs over 2 ms fell inside that 0.1 s (up to 7 ms).
//! Paced, the same run's set p99 was 5.1–7.5 ms in 3 of 4 rounds against 14.3–16.0
//! ms unpaced, alternating on a noisy disk.
//!
//! Layout (integers big-endian) in `dataLogDir/keel-txnlog/`:
//! - Segment files `log.<first zxid as 16 hex digits>`, at most about
//!   [`SEGMENT_TARGET_BYTES`] each (one append never spans two files). A segment starts
//!   with [`SEGMENT_MAGIC`] and its first zxid (16 bytes), then appends back to back,
//!   then zeros.
//! - [`SPARE_NAME`], when present, is the next segment being prepared: never read; a
//!   later open ignores it, the next preparation replaces it, a clean stop deletes it.
//!   If it cannot be prepared (a WARN names it), the roll makes the segment itself.
//! - An append (one [`TxnLog::append`] call) is a 48-byte header — magic
//!   [`APPEND_MAGIC`], CRC-32 of the other 44 header bytes, body length (u64), CRC-32
//!   of the body, entry count (u32), first and last zxid, and the *durable mark*: the
//!   highest zxid known synced when the append was written — and a body of entries,
//!   each zxid (8), data length (4), data.
//!
//! Reading: the end of the log is where zeros begin. Damage there — a damaged append
//! (bad CRC, impossible length, zxids out of order), or an append header of zeros with
//! bytes after it — is a torn tail (a crash in mid-write; dropped, as ZooKeeper drops a
//! torn log tail) unless the damaged place held synced txns: that is shown by an intact
//! append after it whose durable mark is above the last intact zxid before the damage
//! (only the damaged place can have held such a txn). Syncs overlap with later writes
//! (see `net::syncer`), so an intact later append alone proves nothing; its durable
//! mark does. Synced and damaged, or damage in any segment but the last (the log syncs
//! a segment before starting the next), makes the open refuse with
//! [`StorageError::Corrupt`] naming file and offset. Nothing is rewritten, except that
//! a read-write open zeroes a torn tail before appending over it.
//!
//! Truncation (Zab's TRUNC, a SNAP's log reset) drops every append from a [`Cut`] on:
//! the segments after the cut's segment are deleted, and the cut's segment is zeroed
//! from the cut to the end of its appends. A cut falls between appends, so the entries
//! of the append it cuts through that stay (the *carry*) are written again as a new
//! append at the cut. The caller keeps the cut and carry durably elsewhere before any of
//! this starts (RocksStorage: the meta key `txnlog_truncate`) and passes the cut to every
//! open until the work is done ([`TxnLog::open_cut`]): such an open reads the cut's
//! segment only up to the cut and never looks past it, so whatever a crash left there
//! (deleted segments still present, zeroing half done, the carry half written) is ignored
//! and the open redoes the work.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{LogEntry, StorageError, SyncJob};

/// The txn log's directory under `dataLogDir`.
pub const TXNLOG_DIR: &str = "keel-txnlog";
/// The first 8 bytes of every segment file.
pub const SEGMENT_MAGIC: &[u8; 8] = b"KEELTXL\x01";
/// Bytes of a segment's header: magic, first zxid.
pub const SEGMENT_HEADER_BYTES: u64 = 16;
/// A new segment is started when an append would take the current one past this size
/// (ZooKeeper rolls its log by txn count; a size bound keeps each file's scan short).
#[cfg(not(test))]
pub const SEGMENT_TARGET_BYTES: u64 = 64 << 20;
/// In the library's own tests 1 MB, so tests of logs of several segments stay quick
/// (the integration tests in tests/ build the library as shipped, with 64 MB).
#[cfg(test)]
pub const SEGMENT_TARGET_BYTES: u64 = 1 << 20;
/// Zeros added at a time when one append is larger than a whole segment (the only case
/// that writes past a segment's preallocated [`SEGMENT_TARGET_BYTES`]).
pub const PREALLOC_CHUNK_BYTES: u64 = 4 << 20;
/// The next segment, zero-filled ahead of need (see the module comment). Not a
/// segment: reads never look at it.
pub const SPARE_NAME: &str = "spare.tmp";
/// The spare is synced after each this many bytes of zeros, so a log sync never waits
/// behind a large flush of it.
pub const SPARE_SYNC_STEP_BYTES: u64 = 256 << 10;
/// After a step, the spare's preparation rests this many times as long as the step took
/// (so it keeps the disk at most 1/(1 + this) busy), unless the log is catching up.
pub const SPARE_REST_FACTOR: u32 = 9;
/// The longest rest after one step, ms.
pub const SPARE_REST_MAX_MS: u64 = 50;
/// The first 4 bytes of every append ("KTXB").
pub const APPEND_MAGIC: u32 = 0x4b54_5842;
/// Bytes of an append's header.
pub const APPEND_HEADER_BYTES: usize = 48;
/// Bytes before each entry's data: zxid, data length.
const ENTRY_HEADER_BYTES: usize = 12;

/// Where a truncation cuts the log: every append from here on goes (module comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// The first zxid (file name) of the segment the cut is in. Every segment after it
    /// is deleted.
    pub segment: i64,
    /// Byte offset of the first dropped append in that segment; 0: the whole segment
    /// goes too.
    pub offset: u64,
    /// Byte offset where that segment's appends ended when the cut was made: the bytes
    /// from `offset` up to here are zeroed (past it the segment was zeros already).
    pub end: u64,
}

/// One segment file.
#[derive(Debug, Clone)]
struct Segment {
    /// From the file name: no entry in the file is below it.
    first_zxid: i64,
    path: PathBuf,
}

/// The txn log of one server. Used from the storage thread only.
#[derive(Debug)]
pub struct TxnLog {
    dir: PathBuf,
    /// Oldest first.
    segments: Vec<Segment>,
    /// The last segment, open for appends (None before the first append, or read-only);
    /// shared with [`SyncJob`]s running on other threads.
    file: Option<Arc<File>>,
    /// Where the next append goes in the last segment.
    write_pos: u64,
    /// The last segment's length: zeros from `write_pos` up to here.
    allocated: u64,
    /// The highest stored zxid.
    last: Option<i64>,
    /// The highest zxid known durable (synced), shared with the [`SyncJob`]s that raise
    /// it; written into each append header as its durable mark. -1: none.
    synced: Arc<AtomicI64>,
    read_only: bool,
    /// The next segment being prepared as [`SPARE_NAME`] on its own thread.
    spare: Option<Spare>,
    /// `write_pos`, shared with the thread preparing the spare, which paces itself by it.
    shared_pos: Arc<AtomicU64>,
    /// Opened read-only with a [`Cut`]: the last segment's appends end at `write_pos`
    /// (the cut), and reads ignore the bytes after it.
    cut_pending: bool,
}

/// The thread preparing the spare, and the flag that makes it stop early.
#[derive(Debug)]
struct Spare {
    thread: std::thread::JoinHandle<std::io::Result<File>>,
    abandon: Arc<AtomicBool>,
}

/// What a scan of one segment found.
struct Scan {
    /// Offset just past the last intact append.
    end: u64,
    /// Highest zxid in the segment.
    last: Option<i64>,
    /// A torn tail at `end`, with the reason (only for the last segment).
    torn: Option<String>,
}

impl TxnLog {
    /// Opens the log in `dir`, creating the directory unless `read_only`. Finds the end
    /// of the last segment; a read-write open zeroes a torn tail there (logged at WARN).
    ///
    /// Errors: [`StorageError::Corrupt`] for a segment with a bad name, header or
    /// damage before its tail; I/O errors.
    pub fn open(dir: &Path, read_only: bool) -> Result<TxnLog, StorageError> {
        TxnLog::open_cut(dir, read_only, None)
    }

    /// Opens the log as [`TxnLog::open`] does, with a truncation at `cut` under way (see
    /// the module comment): the log ends at the cut. A read-write open first does the
    /// truncation's file work, each step safe to redo: deletes the segments after the
    /// cut (newest first) and syncs the directory, then zeroes the cut's segment from the
    /// cut to [`Cut::end`] and syncs it. The carry is the caller's to append.
    ///
    /// Errors: as [`TxnLog::open`]; [`StorageError::Corrupt`] if the cut's segment is
    /// missing or shorter than the cut, or damaged before the cut.
    pub fn open_cut(dir: &Path, read_only: bool, cut: Option<Cut>) -> Result<TxnLog, StorageError> {
        if !read_only {
            std::fs::create_dir_all(dir)?;
        }
        let mut segments = list_segments(dir)?;
        if let Some(cut) = cut {
            let mut keep = segments.partition_point(|s| s.first_zxid < cut.segment);
            if cut.offset > 0 {
                if segments
                    .get(keep)
                    .is_none_or(|s| s.first_zxid != cut.segment)
                {
                    return Err(StorageError::Corrupt {
                        path: dir.join(segment_name(cut.segment)),
                        position: "file".to_owned(),
                        what: "missing, though a truncation under way cuts it".to_owned(),
                    });
                }
                keep += 1;
            }
            let dropped = segments.split_off(keep);
            if !read_only && !dropped.is_empty() {
                for seg in dropped.iter().rev() {
                    std::fs::remove_file(&seg.path)?;
                    super::fail_point("txn log truncation: a segment after the cut deleted")?;
                }
                File::open(dir)?.sync_all()?;
            }
        }
        let cut_offset = cut.filter(|c| c.offset > 0).map(|c| c.offset);
        let mut log = TxnLog {
            dir: dir.to_path_buf(),
            segments,
            file: None,
            write_pos: 0,
            allocated: 0,
            last: None,
            synced: Arc::new(AtomicI64::new(-1)),
            read_only,
            spare: None,
            shared_pos: Arc::new(AtomicU64::new(0)),
            cut_pending: read_only && cut_offset.is_some(),
        };
        // The newest segment with an entry gives `last`; an empty newest segment (a
        // crash just after creating it) is reused.
        for i in (0..log.segments.len()).rev() {
            let is_last = i + 1 == log.segments.len();
            let seg = log.segments[i].clone();
            let mut bytes = std::fs::read(&seg.path)?;
            let file_len = bytes.len() as u64;
            // The cut's segment (the last one now) is read up to the cut only, and
            // strictly: the appends before the cut were synced before the cut was made.
            let cut_here = cut_offset.filter(|_| is_last);
            if let Some(offset) = cut_here {
                if file_len < offset {
                    return Err(StorageError::Corrupt {
                        path: seg.path.clone(),
                        position: format!("byte offset {offset}"),
                        what: format!(
                            "{file_len} bytes, shorter than a truncation under way cuts it"
                        ),
                    });
                }
                bytes.truncate(offset as usize);
            }
            let scan = scan_segment(&seg, &bytes, is_last && cut_here.is_none(), &mut |_| Ok(()))?;
            if is_last {
                log.write_pos = scan.end;
                log.allocated = file_len;
                if let Some(reason) = &scan.torn {
                    tracing::warn!(
                        file = %seg.path.display(),
                        offset = scan.end,
                        reason = %reason,
                        "dropping a torn txn log tail (a write cut short by a crash, never acknowledged)"
                    );
                }
                if !read_only {
                    let file = OpenOptions::new().read(true).write(true).open(&seg.path)?;
                    if let (Some(offset), Some(cut)) = (cut_here, cut) {
                        zero_fill(&file, offset, cut.end.min(file_len).saturating_sub(offset))?;
                        file.sync_data()?;
                        super::fail_point("txn log truncation: the cut segment zeroed")?;
                    }
                    if scan.torn.is_some() || log.write_pos < SEGMENT_HEADER_BYTES {
                        // Zero from the end of the intact appends (or the whole file if
                        // even the header was cut short) so no stale byte is read later.
                        zero_fill(&file, scan.end, log.allocated.saturating_sub(scan.end))?;
                        if log.write_pos < SEGMENT_HEADER_BYTES {
                            file.write_all_at(&segment_header(seg.first_zxid), 0)?;
                            log.write_pos = SEGMENT_HEADER_BYTES;
                            log.allocated = log.allocated.max(SEGMENT_HEADER_BYTES);
                        }
                    }
                    // What a previous run wrote may still be only in the page cache
                    // (a kill, not a power loss): make it durable before relying on it.
                    file.sync_data()?;
                    log.file = Some(Arc::new(file));
                }
            }
            if scan.last.is_some() {
                log.last = scan.last;
                break;
            }
        }
        if !read_only {
            log.synced.store(log.last.unwrap_or(-1), Ordering::SeqCst);
        }
        Ok(log)
    }

    /// The first zxid of the newest segment, if any (the name a later open must find).
    pub fn newest_segment(&self) -> Option<i64> {
        self.segments.last().map(|s| s.first_zxid)
    }

    /// Declares everything written so far durable without a sync: with ZooKeeper's
    /// `forceSync=no` a write is acknowledged once written, so later appends must mark
    /// it as such (damage to it is then refused, not dropped as a torn tail).
    pub fn assume_durable(&self) {
        if let Some(last) = self.last {
            self.synced.fetch_max(last, Ordering::SeqCst);
        }
    }

    /// The highest stored zxid.
    pub fn last_zxid(&self) -> Option<i64> {
        self.last
    }

    /// The directory the log lives in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes `entries` (zxids strictly increasing, above [`TxnLog::last_zxid`]; the
    /// caller checks) as one append, and with `sync` makes it durable with one
    /// fdatasync. An empty call with `sync` syncs what was written before.
    ///
    /// Returns the first zxid of a segment this append started, if it started one.
    ///
    /// Errors: I/O errors; a write on a read-only log ([`StorageError::Backend`]);
    /// [`StorageError::Corrupt`] if the newest segment's name is above the first zxid
    /// (a file this log did not write).
    pub fn append(
        &mut self,
        entries: &[LogEntry],
        sync: bool,
    ) -> Result<Option<i64>, StorageError> {
        if self.read_only {
            return Err(StorageError::Backend("txn log opened read-only".to_owned()));
        }
        if entries.is_empty() {
            if sync {
                if let Some(file) = &self.file {
                    file.sync_data()?;
                }
                self.assume_durable();
            }
            return Ok(None);
        }
        let buf = encode_append(entries, self.synced.load(Ordering::SeqCst));
        let len = buf.len() as u64;
        let full =
            self.write_pos > SEGMENT_HEADER_BYTES && self.write_pos + len > SEGMENT_TARGET_BYTES;
        let mut rolled = None;
        if self.file.is_none() || full {
            self.roll(entries[0].zxid)?;
            rolled = Some(entries[0].zxid);
        } else if let Some(seg) = self.segments.last() {
            if seg.first_zxid > entries[0].zxid {
                return Err(StorageError::Corrupt {
                    path: seg.path.clone(),
                    position: "file name".to_owned(),
                    what: format!(
                        "segment named for zxid 0x{:x} cannot hold zxid 0x{:x}: not written \
                         by this log",
                        seg.first_zxid, entries[0].zxid
                    ),
                });
            }
        }
        let file = self.file.as_ref().expect("a segment is open after roll");
        if self.write_pos + len > self.allocated {
            // Zeros ahead of the writes, so the sync after them changes no metadata.
            let grow = (self.write_pos + len - self.allocated).max(PREALLOC_CHUNK_BYTES);
            zero_fill(file, self.allocated, grow)?;
            self.allocated += grow;
        }
        file.write_all_at(&buf, self.write_pos)?;
        self.write_pos += len;
        self.shared_pos.store(self.write_pos, Ordering::Relaxed);
        self.last = entries.last().map(|e| e.zxid);
        if self.spare.is_none() && self.write_pos > SEGMENT_TARGET_BYTES / 2 {
            self.spare = Some(prepare_spare(
                self.dir.join(SPARE_NAME),
                Arc::clone(&self.shared_pos),
            )?);
        }
        if sync {
            file.sync_data()?;
            self.assume_durable();
        }
        Ok(rolled)
    }

    /// Starts a new segment whose first zxid is `zxid`: syncs the old one, then takes
    /// the prepared spare (waiting for it if it is not done yet) or, without one,
    /// zero-fills a new file here; writes and syncs the header, gives the file its
    /// name and syncs the directory (so the file survives a crash).
    fn roll(&mut self, zxid: i64) -> Result<(), StorageError> {
        if let Some(old) = self.file.take() {
            old.sync_data()?;
        }
        let path = self.dir.join(segment_name(zxid));
        let spare_path = self.dir.join(SPARE_NAME);
        let spare = match self.spare.take().map(|preparing| preparing.thread.join()) {
            None => None,
            Some(Ok(Ok(file))) => Some(file),
            // The spare only saves time: without it the segment is made here, as when
            // there is none yet, and that reports any error that really stops writes.
            Some(Ok(Err(e))) => {
                tracing::warn!(file = %spare_path.display(), error = %e, "could not prepare the next txn log segment ahead; creating it now");
                None
            }
            Some(Err(_)) => {
                tracing::warn!(file = %spare_path.display(), "the thread preparing the next txn log segment panicked; creating it now");
                None
            }
        };
        let file = match spare {
            Some(spare) => {
                spare.write_all_at(&segment_header(zxid), 0)?;
                spare.sync_data()?;
                // Refuses to replace: a segment of that name is a file this log did
                // not expect (rename(2) would silently overwrite it).
                if path.exists() {
                    return Err(StorageError::Corrupt {
                        path,
                        position: "file".to_owned(),
                        what: "a segment of this name already exists; refusing to replace it"
                            .to_owned(),
                    });
                }
                std::fs::rename(&spare_path, &path)?;
                spare
            }
            None => {
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .open(&path)?;
                file.write_all_at(&segment_header(zxid), 0)?;
                zero_fill(
                    &file,
                    SEGMENT_HEADER_BYTES,
                    SEGMENT_TARGET_BYTES - SEGMENT_HEADER_BYTES,
                )?;
                file.sync_all()?;
                file
            }
        };
        File::open(&self.dir)?.sync_all()?;
        self.segments.push(Segment {
            first_zxid: zxid,
            path,
        });
        self.file = Some(Arc::new(file));
        self.write_pos = SEGMENT_HEADER_BYTES;
        self.allocated = SEGMENT_TARGET_BYTES;
        Ok(())
    }

    /// Calls `f` with every entry whose zxid is above `after`, in zxid order.
    ///
    /// Errors: [`StorageError::Corrupt`] naming the file and offset of a damaged
    /// append; I/O errors; `f`'s error.
    pub fn read(
        &self,
        after: i64,
        f: &mut dyn FnMut(LogEntry) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        for (i, seg) in self.segments.iter().enumerate() {
            // Every entry of this segment is below the next segment's first zxid.
            if let Some(next) = self.segments.get(i + 1) {
                if next.first_zxid <= after.saturating_add(1) {
                    continue;
                }
            }
            let is_last = i + 1 == self.segments.len();
            let mut bytes = std::fs::read(&seg.path)?;
            if is_last && (!self.read_only && self.file.is_some() || self.cut_pending) {
                // Appends end at write_pos; anything after it is zeros (or, before a
                // pending truncation's work is done, ignored).
                bytes.truncate(self.write_pos as usize);
            }
            scan_segment(seg, &bytes, is_last, &mut |entry| {
                if entry.zxid > after {
                    f(entry)
                } else {
                    Ok(())
                }
            })?;
        }
        Ok(())
    }

    /// The on-disk bytes of the segments after the one a read from `after` opens first:
    /// ZooKeeper's `FileTxnIterator.getStorageSize` for `readTxnLog(after)`, which sums
    /// the log files left after the first one opened (the newest whose name, its first
    /// zxid, is below `after`; else the oldest), preallocated zeros included. 0 when
    /// `after` is in the newest segment, as it is in ZooKeeper whenever its log has not
    /// rolled since (ZKDatabase.getProposalsFromTxnLog compares this with
    /// snapshotSizeFactor x the snapshot's size to choose DIFF or SNAP).
    ///
    /// Errors: I/O errors reading a segment's metadata.
    pub fn storage_bytes_after(&self, after: i64) -> Result<u64, StorageError> {
        let opened = self
            .segments
            .iter()
            .rposition(|s| s.first_zxid < after)
            .unwrap_or(0);
        let mut bytes = 0;
        for seg in self.segments.iter().skip(opened + 1) {
            bytes += std::fs::metadata(&seg.path)?.len();
        }
        Ok(bytes)
    }

    /// Where a truncation dropping every entry above `after` cuts the log, and its carry
    /// (the entries at or below `after` of the append it cuts through); `None` when no
    /// entry is above `after`. Changes nothing: the caller records both durably, then
    /// calls [`TxnLog::truncate`].
    ///
    /// Errors: I/O errors; [`StorageError::Corrupt`] if a segment no longer reads as
    /// it did at open.
    pub fn plan_cut(&self, after: i64) -> Result<Option<(Cut, Vec<LogEntry>)>, StorageError> {
        if self.last.is_none_or(|last| last <= after) {
            return Ok(None);
        }
        // Segments named at or below `after` may hold entries above it only in the
        // newest of them; every later segment holds only entries above it.
        let named_below = self.segments.partition_point(|s| s.first_zxid <= after);
        let whole = |i: usize| {
            self.segments.get(i).map(|s| {
                let cut = Cut {
                    segment: s.first_zxid,
                    offset: 0,
                    end: 0,
                };
                (cut, Vec::new())
            })
        };
        let Some(seg) = named_below.checked_sub(1).map(|i| &self.segments[i]) else {
            return Ok(whole(0));
        };
        let mut bytes = std::fs::read(&seg.path)?;
        if named_below == self.segments.len() {
            bytes.truncate(self.write_pos as usize);
        }
        // The segment's appends (offset, entries), and where they end.
        let mut appends = Vec::new();
        let mut at = SEGMENT_HEADER_BYTES as usize;
        let mut prev = seg.first_zxid.checked_sub(1);
        while bytes.len() - at >= APPEND_HEADER_BYTES
            && !bytes[at..at + APPEND_HEADER_BYTES].iter().all(|&b| b == 0)
        {
            let (entries, len) =
                read_append(&bytes, at, prev).map_err(|what| StorageError::Corrupt {
                    path: seg.path.clone(),
                    position: format!("byte offset {at}"),
                    what,
                })?;
            prev = entries.last().map(|e| e.0).or(prev);
            appends.push((at, entries));
            at += len;
        }
        let cut_append = appends
            .into_iter()
            .find(|(_, entries)| entries.last().is_some_and(|e| e.0 > after));
        if let Some((offset, entries)) = cut_append {
            let carry = entries
                .into_iter()
                .take_while(|(zxid, _)| *zxid <= after)
                .map(|(zxid, range)| LogEntry {
                    zxid,
                    data: bytes[range].to_vec(),
                })
                .collect();
            let cut = Cut {
                segment: seg.first_zxid,
                offset: offset as u64,
                end: at as u64,
            };
            return Ok(Some((cut, carry)));
        }
        Ok(whole(named_below))
    }

    /// Does the file work of a truncation at `cut` (see [`TxnLog::open_cut`]) and
    /// reopens the log at the cut; the caller then appends the carry. The caller must
    /// have made every append before the cut durable ([`TxnLog::sync`]) and recorded the
    /// cut durably first. Stops a spare's preparation (the next roll prepares anew).
    ///
    /// Errors: I/O errors; after one the log must be dropped and opened again with the
    /// cut.
    pub fn truncate(&mut self, cut: Cut) -> Result<(), StorageError> {
        if self.read_only {
            return Err(StorageError::Backend("txn log opened read-only".to_owned()));
        }
        self.discard_spare()?;
        self.file = None;
        *self = TxnLog::open_cut(&self.dir, false, Some(cut))?;
        Ok(())
    }

    /// The first zxid of the newest segment a truncation at `cut` leaves, if any.
    pub fn newest_segment_after(&self, cut: &Cut) -> Option<i64> {
        if cut.offset > 0 {
            return Some(cut.segment);
        }
        self.segments
            .iter()
            .rev()
            .map(|s| s.first_zxid)
            .find(|&z| z < cut.segment)
    }

    /// The first zxid of the oldest segment, if any.
    pub fn oldest_segment(&self) -> Option<i64> {
        self.segments.first().map(|s| s.first_zxid)
    }

    /// Deletes every segment whose entries are all at or below `upto` (the next segment
    /// starts at or below `upto + 1`); the last segment is always kept.
    ///
    /// Errors: I/O errors (segments deleted before the error stay deleted; what remains
    /// is still a valid log).
    pub fn purge(&mut self, upto: i64) -> Result<(), StorageError> {
        let mut removed = 0;
        while self.segments.len() > 1 && self.segments[1].first_zxid <= upto.saturating_add(1) {
            let seg = self.segments.remove(0);
            std::fs::remove_file(&seg.path)?;
            removed += 1;
        }
        if removed > 0 {
            File::open(&self.dir)?.sync_all()?;
        }
        Ok(())
    }

    /// A job that fdatasyncs the last segment: run after this call, it makes every
    /// append made before it durable (appends to an earlier segment were synced when
    /// the log moved on from it). `None` before the first segment exists.
    pub fn sync_job(&self) -> Option<SyncJob> {
        let file = Arc::clone(self.file.as_ref()?);
        let (synced, upto) = (Arc::clone(&self.synced), self.last?);
        Some(Box::new(move || {
            file.sync_data()?;
            synced.fetch_max(upto, Ordering::SeqCst);
            Ok(())
        }))
    }

    /// At a clean stop: stops the preparation of a spare and deletes it, so the
    /// directory holds segments only (an older keel refuses any other file).
    ///
    /// Errors: I/O errors deleting it.
    pub fn discard_spare(&mut self) -> Result<(), StorageError> {
        if let Some(preparing) = self.spare.take() {
            // Unfinished, it is only deleted: no need to wait for its paced steps.
            preparing.abandon.store(true, Ordering::Relaxed);
            let _ = preparing.thread.join();
        }
        if !self.read_only {
            super::remove_file_if_present(&self.dir.join(SPARE_NAME))?;
        }
        Ok(())
    }

    /// Syncs the last segment (a clean stop after unsynced appends).
    ///
    /// Errors: I/O errors.
    pub fn sync(&self) -> Result<(), StorageError> {
        if let Some(file) = &self.file {
            file.sync_data()?;
        }
        Ok(())
    }
}

fn segment_name(zxid: i64) -> String {
    format!("log.{:016x}", zxid as u64)
}

fn segment_header(zxid: i64) -> [u8; SEGMENT_HEADER_BYTES as usize] {
    let mut h = [0u8; SEGMENT_HEADER_BYTES as usize];
    h[..8].copy_from_slice(SEGMENT_MAGIC);
    h[8..].copy_from_slice(&zxid.to_be_bytes());
    h
}

/// The segments in `dir`, oldest first; an absent directory has none.
fn list_segments(dir: &Path) -> Result<Vec<Segment>, StorageError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let mut segments = Vec::new();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name == SPARE_NAME {
            continue;
        }
        let first_zxid = name
            .strip_prefix("log.")
            .filter(|hex| hex.len() == 16)
            .and_then(|hex| u64::from_str_radix(hex, 16).ok())
            .ok_or_else(|| StorageError::Corrupt {
                path: entry.path(),
                position: "file name".to_owned(),
                what: "not a keel txn log segment (log.<16 hex digits>); refusing to guess"
                    .to_owned(),
            })? as i64;
        segments.push(Segment {
            first_zxid,
            path: entry.path(),
        });
    }
    segments.sort_by_key(|s| s.first_zxid);
    Ok(segments)
}

/// Starts a thread that writes [`SEGMENT_TARGET_BYTES`] of zeros to a new file at
/// `path`, syncing every [`SPARE_SYNC_STEP_BYTES`] and resting between steps as
/// [`spare_rest`] says (reading the log's write position from `log_pos`), and returns
/// the open file, or an Interrupted error once [`Spare::abandon`] is set. Whatever was
/// at `path` is unlinked first and the file made with O_EXCL, so a symlink planted
/// there is never followed. Errors name `path`.
fn prepare_spare(path: PathBuf, log_pos: Arc<AtomicU64>) -> std::io::Result<Spare> {
    let abandon = Arc::new(AtomicBool::new(false));
    let stop = Arc::clone(&abandon);
    let thread = std::thread::Builder::new()
        .name("keel-txnlog-spare".into())
        .spawn(move || {
            let named = |e: std::io::Error| {
                std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
            };
            super::remove_file_if_present(&path).map_err(named)?;
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
                .map_err(named)?;
            let start_pos = log_pos.load(Ordering::Relaxed);
            let mut done = 0;
            while done < SEGMENT_TARGET_BYTES {
                if stop.load(Ordering::Relaxed) {
                    return Err(named(std::io::Error::new(
                        std::io::ErrorKind::Interrupted,
                        "preparation abandoned",
                    )));
                }
                let t0 = Instant::now();
                let n = SPARE_SYNC_STEP_BYTES.min(SEGMENT_TARGET_BYTES - done);
                zero_fill(&file, done, n).map_err(named)?;
                file.sync_data().map_err(named)?;
                done += n;
                let rest = spare_rest(
                    t0.elapsed(),
                    done,
                    start_pos,
                    log_pos.load(Ordering::Relaxed),
                );
                if !rest.is_zero() && done < SEGMENT_TARGET_BYTES {
                    std::thread::sleep(rest);
                }
            }
            Ok(file)
        })?;
    Ok(Spare { thread, abandon })
}

/// How long the spare's preparation rests after a step that took `step`, with `zeroed`
/// bytes of the spare done, when the log was at `start_pos` as the preparation began
/// and is at `log_pos` now.
///
/// The rule: the spare must be done by the time the log has used three quarters of the
/// space it had left when the preparation began, so its share zeroed must keep up with
/// 4/3 of the log's share used. While it does, it rests [`SPARE_REST_FACTOR`] × `step`
/// (at most [`SPARE_REST_MAX_MS`]), leaving the disk mostly to the log's syncs; when it
/// falls behind, it does not rest at all. A log that stands still gets its spare in
/// about 10 × the time the zeros take to write.
pub fn spare_rest(step: Duration, zeroed: u64, start_pos: u64, log_pos: u64) -> Duration {
    let runway = SEGMENT_TARGET_BYTES.saturating_sub(start_pos).max(1) as f64;
    let used = log_pos.saturating_sub(start_pos) as f64 / runway;
    let done = zeroed as f64 / SEGMENT_TARGET_BYTES as f64;
    if done < used * 4.0 / 3.0 {
        return Duration::ZERO;
    }
    (step * SPARE_REST_FACTOR).min(Duration::from_millis(SPARE_REST_MAX_MS))
}

/// Writes `len` zero bytes at `offset`, in bounded steps.
fn zero_fill(file: &File, offset: u64, len: u64) -> std::io::Result<()> {
    const STEP: u64 = 1 << 20;
    let zeros = vec![0u8; STEP.min(len) as usize];
    let mut done = 0;
    while done < len {
        let n = STEP.min(len - done);
        file.write_all_at(&zeros[..n as usize], offset + done)?;
        done += n;
    }
    Ok(())
}

/// The bytes of one append holding `entries`.
fn encode_append(entries: &[LogEntry], durable_mark: i64) -> Vec<u8> {
    let body_len: usize = entries
        .iter()
        .map(|e| ENTRY_HEADER_BYTES + e.data.len())
        .sum();
    let mut buf = Vec::with_capacity(APPEND_HEADER_BYTES + body_len);
    buf.resize(APPEND_HEADER_BYTES, 0);
    for e in entries {
        buf.extend_from_slice(&e.zxid.to_be_bytes());
        buf.extend_from_slice(&(e.data.len() as u32).to_be_bytes());
        buf.extend_from_slice(&e.data);
    }
    let body_crc = crc32fast::hash(&buf[APPEND_HEADER_BYTES..]);
    let first = entries.first().map_or(0, |e| e.zxid);
    let last = entries.last().map_or(0, |e| e.zxid);
    buf[0..4].copy_from_slice(&APPEND_MAGIC.to_be_bytes());
    buf[8..16].copy_from_slice(&(body_len as u64).to_be_bytes());
    buf[16..20].copy_from_slice(&body_crc.to_be_bytes());
    buf[20..24].copy_from_slice(&(entries.len() as u32).to_be_bytes());
    buf[24..32].copy_from_slice(&first.to_be_bytes());
    buf[32..40].copy_from_slice(&last.to_be_bytes());
    buf[40..48].copy_from_slice(&durable_mark.to_be_bytes());
    let header_crc = header_crc(&buf[..APPEND_HEADER_BYTES]);
    buf[4..8].copy_from_slice(&header_crc.to_be_bytes());
    buf
}

/// CRC-32 of a header's bytes other than the CRC field itself.
fn header_crc(h: &[u8]) -> u32 {
    let mut c = crc32fast::Hasher::new();
    c.update(&h[0..4]);
    c.update(&h[8..APPEND_HEADER_BYTES]);
    c.finalize()
}

fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().expect("4 bytes"))
}

fn be_u64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b[..8].try_into().expect("8 bytes"))
}

/// An append header's fields.
struct Header {
    body_len: u64,
    count: u32,
    first: i64,
    last: i64,
    /// The highest zxid known synced when the append was written.
    durable_mark: i64,
}

/// A valid append header at `at`.
fn read_header(bytes: &[u8], at: usize) -> Option<Header> {
    let h = bytes.get(at..at + APPEND_HEADER_BYTES)?;
    if be_u32(h) != APPEND_MAGIC || be_u32(&h[4..]) != header_crc(h) {
        return None;
    }
    Some(Header {
        body_len: be_u64(&h[8..]),
        count: be_u32(&h[20..]),
        first: be_u64(&h[24..]) as i64,
        last: be_u64(&h[32..]) as i64,
        durable_mark: be_u64(&h[40..]) as i64,
    })
}

/// The entries of one append: each zxid with where its data lies in the file's bytes.
type AppendEntries = Vec<(i64, std::ops::Range<usize>)>;

/// Why the append at `at` is damaged, or its entries (checked against `after`, the
/// highest zxid before it) and its total length.
fn read_append(
    bytes: &[u8],
    at: usize,
    after: Option<i64>,
) -> Result<(AppendEntries, usize), String> {
    let Header {
        body_len,
        count,
        first,
        last,
        ..
    } = read_header(bytes, at).ok_or_else(|| "bad append header (magic or CRC)".to_owned())?;
    let body_start = at + APPEND_HEADER_BYTES;
    let body_end = usize::try_from(body_len)
        .ok()
        .and_then(|n| body_start.checked_add(n))
        .filter(|&end| end <= bytes.len())
        .ok_or_else(|| format!("append of {body_len} bytes runs past the end of the file"))?;
    let body = &bytes[body_start..body_end];
    let crc = be_u32(&bytes[at + 16..]);
    if crc32fast::hash(body) != crc {
        return Err("append body fails its CRC".to_owned());
    }
    let mut entries = Vec::with_capacity(count.min(1 << 16) as usize);
    let mut pos = 0;
    let mut prev = after;
    while pos < body.len() {
        if body.len() - pos < ENTRY_HEADER_BYTES {
            return Err("entry header cut short".to_owned());
        }
        let zxid = be_u64(&body[pos..]) as i64;
        let len = be_u32(&body[pos + 8..]) as usize;
        let start = pos + ENTRY_HEADER_BYTES;
        if body.len() - start < len {
            return Err(format!("entry 0x{zxid:x} runs past its append"));
        }
        if zxid < 0 || prev.is_some_and(|p| zxid <= p) {
            return Err(format!("zxid 0x{zxid:x} is not above the one before it"));
        }
        prev = Some(zxid);
        entries.push((zxid, body_start + start..body_start + start + len));
        pos = start + len;
    }
    if entries.len() != count as usize
        || entries.first().map(|e| e.0) != Some(first)
        || entries.last().map(|e| e.0) != Some(last)
    {
        return Err("entries disagree with the append header".to_owned());
    }
    Ok((entries, APPEND_HEADER_BYTES + body.len()))
}

/// Walks one segment's appends, calling `f` with each entry. See the module comment for
/// when damage is a torn tail (only if `is_last`) and when it is refused.
fn scan_segment(
    seg: &Segment,
    bytes: &[u8],
    is_last: bool,
    f: &mut dyn FnMut(LogEntry) -> Result<(), StorageError>,
) -> Result<Scan, StorageError> {
    let corrupt = |offset: usize, what: String| StorageError::Corrupt {
        path: seg.path.clone(),
        position: format!("byte offset {offset}"),
        what,
    };
    let header_len = SEGMENT_HEADER_BYTES as usize;
    if bytes.len() < header_len || bytes[..header_len].iter().all(|&b| b == 0) {
        // Created but its header never reached the disk: only a crash during the roll
        // leaves this, and only in the newest file.
        if is_last && bytes.iter().all(|&b| b == 0) {
            return Ok(Scan {
                end: 0,
                last: None,
                torn: (!bytes.is_empty()).then(|| "segment header never written".to_owned()),
            });
        }
        return Err(corrupt(0, "segment header missing".to_owned()));
    }
    if &bytes[..8] != SEGMENT_MAGIC || be_u64(&bytes[8..]) as i64 != seg.first_zxid {
        return Err(corrupt(
            0,
            "not a keel txn log segment, or its header disagrees with its name".to_owned(),
        ));
    }
    let mut at = header_len;
    let mut last: Option<i64> = None;
    loop {
        let rest = &bytes[at..];
        let header = &rest[..rest.len().min(APPEND_HEADER_BYTES)];
        if header.iter().all(|&b| b == 0) {
            // Zeros: the end of what was written (or of the file) — unless bytes follow.
            if rest.iter().all(|&b| b == 0) {
                return Ok(Scan {
                    end: at as u64,
                    last,
                    torn: None,
                });
            }
            let what = "append header of zeros with data after it".to_owned();
            return damaged(bytes, at, last, is_last, what, &corrupt);
        }
        match read_append(bytes, at, last.or(Some(seg.first_zxid.saturating_sub(1)))) {
            Ok((entries, len)) => {
                for (zxid, range) in entries {
                    f(LogEntry {
                        zxid,
                        data: bytes[range].to_vec(),
                    })?;
                    last = Some(zxid);
                }
                at += len;
            }
            Err(what) => return damaged(bytes, at, last, is_last, what, &corrupt),
        }
    }
}

/// The verdict on damage at `at` (the last intact zxid before it is `last`): a torn
/// tail, or [`StorageError::Corrupt`] if the segment is not the last or an intact
/// append after it shows the damaged place held synced txns (module comment).
fn damaged(
    bytes: &[u8],
    at: usize,
    last: Option<i64>,
    is_last: bool,
    what: String,
    corrupt: &dyn Fn(usize, String) -> StorageError,
) -> Result<Scan, StorageError> {
    if !is_last {
        return Err(corrupt(at, what));
    }
    if let Some((later, mark)) = synced_beyond(bytes, at, last) {
        return Err(corrupt(
            at,
            format!(
                "{what}; the intact append at byte offset {later} records zxid 0x{mark:x} as \
                 synced, so the damaged place held acknowledged txns: damage before the \
                 log's tail"
            ),
        ));
    }
    Ok(Scan {
        end: at as u64,
        last,
        torn: Some(what),
    })
}

/// An intact append after `at` whose durable mark is above `last` (so some txn above
/// `last`, which only the damaged place can have held, was synced): its offset and mark.
fn synced_beyond(bytes: &[u8], at: usize, last: Option<i64>) -> Option<(usize, i64)> {
    let magic = APPEND_MAGIC.to_be_bytes();
    let last = last.unwrap_or(-1);
    let mut from = at + 1;
    while from + APPEND_HEADER_BYTES <= bytes.len() {
        let found = bytes[from..].windows(4).position(|w| w == magic)? + from;
        if let Some(h) = read_header(bytes, found) {
            if h.durable_mark > last && read_append(bytes, found, None).is_ok() {
                return Some((found, h.durable_mark));
            }
        }
        from = found + 1;
    }
    None
}

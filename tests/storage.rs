//! Storage backends: the shared conformance suite against MemStorage and RocksStorage,
//! then what only one backend can show: MemStorage's simulated crash, and the on-disk
//! checks of RocksStorage and its txn log (format versions and upgrade, checksums, torn
//! tails, damage before the tail, a missing log directory, purge by segment, separate
//! dataLogDir).

use std::path::{Path, PathBuf};

use keel::storage::conformance;
use keel::storage::mem::MemStorage;
use keel::storage::rocks::{self, RocksStorage};
use keel::storage::txnlog;
use keel::storage::{LogEntry, Storage, StorageError, FORMAT_VERSION};

/// A directory under the system temp dir, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let path =
            std::env::temp_dir().join(format!("keel-storage-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create temp dir");
        TempDir(path)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn entry(zxid: i64) -> LogEntry {
    LogEntry {
        zxid,
        data: format!("txn 0x{zxid:x} ").repeat(20).into_bytes(),
    }
}

fn read_zxids(store: &impl Storage) -> Vec<i64> {
    let mut zxids = Vec::new();
    store
        .read_log(-1, &mut |e| {
            assert_eq!(e, entry(e.zxid), "data of zxid 0x{:x}", e.zxid);
            zxids.push(e.zxid);
            Ok(())
        })
        .expect("read_log");
    zxids
}

fn open(data_dir: &Path) -> RocksStorage {
    RocksStorage::open(data_dir, data_dir, true).expect("open RocksStorage")
}

/// The database opened with the rocksdb crate directly, to damage it the way a disk or
/// another program could.
fn raw_db(data_dir: &Path) -> rocksdb::DB {
    rocksdb::DB::open_cf(
        &rocksdb::Options::default(),
        data_dir.join(rocks::DB_DIR),
        [rocks::LOG_CF, rocks::SNAPSHOT_CF, rocks::META_CF],
    )
    .expect("open raw rocksdb")
}

/// The highest-numbered WAL file (`NNNNNN.log`) in `dir`.
fn newest_wal(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir)
        .expect("list WAL dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .max_by_key(|p| {
            p.file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| s.parse::<u64>().ok())
        })
        .unwrap_or_else(|| panic!("no WAL file in {}", dir.display()))
}

fn wal_count(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter(|e| {
                    e.as_ref()
                        .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "log"))
                })
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn mem_conformance() {
    let mem = MemStorage::new();
    conformance::run_all(|| mem.reopen());
}

#[test]
fn mem_crash_keeps_only_synced_state() {
    let mut store = MemStorage::new();
    store.append(&[entry(1), entry(2)], true).unwrap();
    store.append(&[entry(3)], false).unwrap();
    store.put_meta("current_epoch", b"1").unwrap();
    store.put_snapshot_chunk(2, 0, b"done").unwrap();
    store.finish_snapshot(2, 1).unwrap();
    store.put_snapshot_chunk(3, 0, b"in progress").unwrap();
    store.crash();

    let mut store = store.reopen();
    assert_eq!(
        read_zxids(&store),
        [1, 2],
        "unsynced append lost, synced kept"
    );
    assert_eq!(store.last_zxid().unwrap(), Some(2));
    assert_eq!(
        store.get_meta("current_epoch").unwrap().as_deref(),
        Some(&b"1"[..])
    );
    assert_eq!(store.latest_snapshot().unwrap().unwrap().chunks, [b"done"]);
    // The unfinished snapshot's chunk is gone: finishing it now finds it missing.
    store.finish_snapshot(3, 1).unwrap();
    assert!(matches!(
        store.latest_snapshot(),
        Err(StorageError::Corrupt { .. })
    ));
    // The log goes on from the last synced entry.
    store.append(&[entry(3)], true).unwrap();
    store.crash();
    assert_eq!(read_zxids(&store.reopen()), [1, 2, 3]);
}

#[test]
fn mem_one_sync_per_append() {
    let mut store = MemStorage::new();
    store
        .append(&(1..=100).map(entry).collect::<Vec<_>>(), true)
        .unwrap();
    assert_eq!(
        store.sync_count(),
        1,
        "100 entries in one call make one sync"
    );
    store.append(&[entry(101)], false).unwrap();
    assert_eq!(store.sync_count(), 1, "an unsynced append makes none");
    store.append(&[], true).unwrap();
    assert_eq!(store.sync_count(), 2, "an empty synced append is a barrier");
    store.crash();
    assert_eq!(store.reopen().last_zxid().unwrap(), Some(101));
}

#[test]
fn rocks_conformance() {
    let dir = TempDir::new("conformance");
    conformance::run_all(|| open(dir.path()));
}

#[test]
fn rocks_conformance_separate_log_dir_without_force_sync() {
    let dir = TempDir::new("conformance-logdir");
    let (data, log) = (dir.path().join("data"), dir.path().join("log"));
    conformance::run_all(|| RocksStorage::open(&data, &log, false).expect("open"));
    assert!(
        wal_count(&log.join(rocks::WAL_DIR)) > 0,
        "the WAL lives in dataLogDir/{}",
        rocks::WAL_DIR
    );
    assert_eq!(
        wal_count(&data.join(rocks::DB_DIR)),
        0,
        "no WAL in dataDir when dataLogDir is set apart"
    );
}

#[test]
fn rocks_data_survives_reopen() {
    let dir = TempDir::new("reopen");
    {
        let mut store = open(dir.path());
        store.append(&[entry(1), entry(2)], true).unwrap();
        store.put_meta("current_epoch", b"7").unwrap();
    }
    for _ in 0..3 {
        let mut store = open(dir.path());
        let last = store.last_zxid().unwrap().unwrap();
        store.append(&[entry(last + 1)], true).unwrap();
    }
    let store = open(dir.path());
    assert_eq!(read_zxids(&store), [1, 2, 3, 4, 5]);
    assert_eq!(
        store.get_meta("current_epoch").unwrap().as_deref(),
        Some(&b"7"[..])
    );
}

#[test]
fn rocks_unknown_format_version_is_refused() {
    let dir = TempDir::new("version");
    open(dir.path()).append(&[entry(1)], true).unwrap();
    {
        let db = raw_db(dir.path());
        let meta = db.cf_handle(rocks::META_CF).unwrap();
        db.put_cf(meta, rocks::FORMAT_VERSION_KEY, 99u32.to_be_bytes())
            .unwrap();
    }
    let db_path = dir.path().join(rocks::DB_DIR);
    let err = RocksStorage::open(dir.path(), dir.path(), true)
        .expect_err("an unknown format version must be refused");
    assert!(
        err.to_string().contains(&db_path.display().to_string()),
        "the message names the path: {err}"
    );
    match err {
        StorageError::Version {
            path,
            found,
            expected,
        } => assert_eq!((path, found, expected), (db_path, 99, FORMAT_VERSION)),
        other => panic!("expected a Version error, got {other:?}"),
    }
    // Nothing was rewritten: the stored version is still the unknown one.
    let db = raw_db(dir.path());
    let meta = db.cf_handle(rocks::META_CF).unwrap();
    assert_eq!(
        db.get_cf(meta, rocks::FORMAT_VERSION_KEY).unwrap(),
        Some(99u32.to_be_bytes().to_vec())
    );
}

#[test]
fn rocks_data_without_format_version_is_refused() {
    let dir = TempDir::new("no-version");
    open(dir.path()).append(&[entry(1)], true).unwrap();
    {
        let db = raw_db(dir.path());
        let meta = db.cf_handle(rocks::META_CF).unwrap();
        db.delete_cf(meta, rocks::FORMAT_VERSION_KEY).unwrap();
    }
    match RocksStorage::open(dir.path(), dir.path(), true) {
        Err(StorageError::Corrupt { path, .. }) => {
            assert_eq!(path, dir.path().join(rocks::DB_DIR))
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[test]
fn rocks_stray_files_are_not_overwritten() {
    let dir = TempDir::new("stray");
    let db_dir = dir.path().join(rocks::DB_DIR);
    std::fs::create_dir_all(&db_dir).unwrap();
    std::fs::write(db_dir.join("000007.sst"), b"someone's data").unwrap();
    match RocksStorage::open(dir.path(), dir.path(), true) {
        Err(StorageError::Corrupt { path, position, .. }) => {
            assert_eq!((path, position.as_str()), (db_dir.clone(), "000007.sst"))
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert_eq!(
        std::fs::read(db_dir.join("000007.sst")).unwrap(),
        b"someone's data"
    );
}

#[test]
fn rocks_reserved_meta_keys_are_refused() {
    let dir = TempDir::new("reserved");
    let mut store = open(dir.path());
    for key in [rocks::FORMAT_VERSION_KEY, "snapshot/0000000000000001"] {
        assert!(
            matches!(store.put_meta(key, b"x"), Err(StorageError::Backend(_))),
            "put_meta({key:?}) must be refused"
        );
    }
    assert!(store.snapshots().unwrap().is_empty());
}

/// A log record as format version 1 stored it in the `log` column family: version
/// byte 1, CRC-32 of the data, the data.
fn legacy_record(data: &[u8]) -> Vec<u8> {
    let mut r = vec![rocks::RECORD_VERSION];
    r.extend_from_slice(&crc32fast::hash(data).to_be_bytes());
    r.extend_from_slice(data);
    r
}

/// Turns the store in `dir` into what format version 1 left: `entries` in the `log`
/// column family, version 1, no txn log directory.
fn make_version_1(dir: &Path, entries: &[LogEntry]) {
    drop(open(dir));
    std::fs::remove_dir_all(dir.join(txnlog::TXNLOG_DIR)).unwrap();
    let db = raw_db(dir);
    let log = db.cf_handle(rocks::LOG_CF).unwrap();
    for e in entries {
        db.put_cf(log, e.zxid.to_be_bytes(), legacy_record(&e.data))
            .unwrap();
    }
    let meta = db.cf_handle(rocks::META_CF).unwrap();
    db.put_cf(meta, rocks::FORMAT_VERSION_KEY, 1u32.to_be_bytes())
        .unwrap();
    db.delete_cf(meta, rocks::TXNLOG_META_KEY).unwrap();
}

#[test]
fn rocks_version_1_log_is_read_and_the_store_upgraded() {
    let dir = TempDir::new("v1");
    make_version_1(dir.path(), &[entry(1), entry(2), entry(3)]);
    {
        let ro = RocksStorage::open_read_only(dir.path(), dir.path())
            .unwrap()
            .expect("a store");
        assert_eq!(read_zxids(&ro), [1, 2, 3], "read-only open reads version 1");
    }
    assert!(
        !dir.path().join(txnlog::TXNLOG_DIR).exists(),
        "a read-only open creates nothing"
    );
    {
        let mut store = open(dir.path());
        assert_eq!(store.last_zxid().unwrap(), Some(3));
        assert_eq!(read_zxids(&store), [1, 2, 3]);
        store.append(&[entry(3)], true).unwrap_err();
        store.append(&[entry(4), entry(5)], true).unwrap();
        assert_eq!(read_zxids(&store), [1, 2, 3, 4, 5]);
    }
    let db = raw_db(dir.path());
    let meta = db.cf_handle(rocks::META_CF).unwrap();
    assert_eq!(
        db.get_cf(meta, rocks::FORMAT_VERSION_KEY).unwrap(),
        Some(FORMAT_VERSION.to_be_bytes().to_vec()),
        "the first read-write open marks the store with the new version"
    );
    drop(db);
    assert_eq!(read_zxids(&open(dir.path())), [1, 2, 3, 4, 5]);
}

#[test]
fn rocks_corrupt_log_record_is_reported() {
    let dir = TempDir::new("corrupt-log");
    make_version_1(
        dir.path(),
        &[entry(1), entry(0x1_0000_0005), entry(0x1_0000_0006)],
    );
    {
        let db = raw_db(dir.path());
        let log = db.cf_handle(rocks::LOG_CF).unwrap();
        let key = 0x1_0000_0005i64.to_be_bytes();
        let mut value = db.get_cf(log, key).unwrap().unwrap();
        let last = value.len() - 1;
        value[last] ^= 0x01;
        db.put_cf(log, key, value).unwrap();
        // A record of a version this keel does not know.
        let key = 0x1_0000_0006i64.to_be_bytes();
        let mut value = db.get_cf(log, key).unwrap().unwrap();
        value[0] = 2;
        db.put_cf(log, key, value).unwrap();
    }
    let store = open(dir.path());
    let mut read = Vec::new();
    let result = store.read_log(-1, &mut |e| {
        read.push(e.zxid);
        Ok(())
    });
    match result {
        Err(StorageError::Corrupt {
            path,
            position,
            what,
        }) => {
            assert_eq!(path, dir.path().join(rocks::DB_DIR));
            assert_eq!(position, "log record zxid 0x100000005");
            assert!(what.contains("checksum"), "{what}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert_eq!(read, [1], "entries before the damaged one are delivered");
    match store.read_log(0x1_0000_0005, &mut |_| Ok(())) {
        Err(StorageError::Corrupt { position, what, .. }) => {
            assert_eq!(position, "log record zxid 0x100000006");
            assert!(what.contains("version 2"), "{what}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[test]
fn rocks_corrupt_snapshot_chunk_is_reported() {
    let dir = TempDir::new("corrupt-snapshot");
    {
        let mut store = open(dir.path());
        store.put_snapshot_chunk(0x5, 0, b"chunk zero").unwrap();
        store.put_snapshot_chunk(0x5, 1, b"chunk one").unwrap();
        store.finish_snapshot(0x5, 2).unwrap();
    }
    {
        let db = raw_db(dir.path());
        let cf = db.cf_handle(rocks::SNAPSHOT_CF).unwrap();
        let mut key = 0x5i64.to_be_bytes().to_vec();
        key.extend_from_slice(&1u32.to_be_bytes());
        let mut value = db.get_cf(cf, &key).unwrap().unwrap();
        value[7] ^= 0x80;
        db.put_cf(cf, &key, value).unwrap();
    }
    match open(dir.path()).latest_snapshot() {
        Err(StorageError::Corrupt { position, .. }) => {
            assert_eq!(position, "snapshot 0x5 chunk 1")
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

/// The txn log's newest segment file in the store at `dir`.
fn newest_segment(dir: &Path) -> PathBuf {
    segments(dir)
        .pop()
        .unwrap_or_else(|| panic!("no txn log segment under {}", dir.display()))
}

/// The txn log's segment files, oldest first.
fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = std::fs::read_dir(dir.join(txnlog::TXNLOG_DIR))
        .expect("list txn log dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("log."))
        .collect();
    all.sort();
    all
}

/// Offset of the first byte of `needle` in `file`.
fn find(file: &Path, needle: &[u8]) -> usize {
    std::fs::read(file)
        .unwrap()
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap_or_else(|| panic!("{needle:?} not in {}", file.display()))
}

fn patch(file: &Path, at: usize, f: impl FnOnce(&mut [u8])) {
    let mut bytes = std::fs::read(file).unwrap();
    f(&mut bytes[at..]);
    std::fs::write(file, bytes).unwrap();
}

#[test]
fn txnlog_torn_tail_is_dropped() {
    let dir = TempDir::new("torn");
    {
        let mut store = open(dir.path());
        store.append(&[entry(1), entry(2), entry(3)], true).unwrap();
        store.append(&[entry(4)], false).unwrap();
        store.append(&[entry(5)], false).unwrap();
    }
    // A crash in mid-write: the last append's final bytes never reached the disk (the
    // zeros written ahead of the log show through).
    let seg = newest_segment(dir.path());
    let at = find(&seg, b"txn 0x5 ");
    patch(&seg, at + 100, |b| b[..60].fill(0));

    let mut store = open(dir.path());
    assert_eq!(
        read_zxids(&store),
        [1, 2, 3, 4],
        "only the torn append is gone"
    );
    assert_eq!(store.last_zxid().unwrap(), Some(4));
    store.append(&[entry(5)], true).unwrap();
    store.append(&[entry(6)], true).unwrap();
    drop(store);
    assert_eq!(read_zxids(&open(dir.path())), [1, 2, 3, 4, 5, 6]);
}

#[test]
fn txnlog_torn_header_is_dropped_and_read_only_open_changes_nothing() {
    let dir = TempDir::new("torn-header");
    {
        let mut store = open(dir.path());
        store.append(&[entry(1)], true).unwrap();
        store.append(&[entry(2)], true).unwrap();
    }
    // Half of the second append's header reached the disk.
    let seg = newest_segment(dir.path());
    let at = find(&seg, b"txn 0x2 ") - 12 - txnlog::APPEND_HEADER_BYTES;
    patch(&seg, at + 20, |b| b[..20].fill(0));
    let before = std::fs::read(&seg).unwrap();
    {
        let ro = RocksStorage::open_read_only(dir.path(), dir.path())
            .unwrap()
            .unwrap();
        assert_eq!(read_zxids(&ro), [1]);
    }
    assert!(
        std::fs::read(&seg).unwrap() == before,
        "a read-only open leaves the segment as it was"
    );
    let store = open(dir.path());
    assert_eq!(read_zxids(&store), [1]);
    assert_eq!(store.last_zxid().unwrap(), Some(1));
}

#[test]
fn txnlog_damage_before_the_tail_is_refused() {
    let dir = TempDir::new("txnlog-damage");
    {
        let mut store = open(dir.path());
        for zxid in 1..=5 {
            store.append(&[entry(zxid)], true).unwrap();
        }
    }
    // Flip a byte inside the first append's data; four intact appends follow it, so
    // it was synced and acknowledged: not a torn tail.
    let seg = newest_segment(dir.path());
    let at = find(&seg, b"txn 0x1 ");
    patch(&seg, at + 40, |b| b[0] ^= 0x01);
    let before = std::fs::read(&seg).unwrap();

    for read_only in [true, false] {
        let result = if read_only {
            RocksStorage::open_read_only(dir.path(), dir.path()).map(|s| s.unwrap())
        } else {
            RocksStorage::open(dir.path(), dir.path(), true)
        };
        match result {
            Err(StorageError::Corrupt {
                path,
                position,
                what,
            }) => {
                assert_eq!(path, seg);
                assert!(position.starts_with("byte offset "), "{position}");
                assert!(what.contains("damage before the log's tail"), "{what}");
            }
            Err(other) => panic!("expected Corrupt, got {other}"),
            Ok(store) => panic!(
                "open must refuse a damaged log, it read {:?}",
                read_zxids(&store)
            ),
        }
    }
    assert!(
        std::fs::read(&seg).unwrap() == before,
        "a refused log is left as it was"
    );
}

#[test]
fn txnlog_damage_to_unsynced_appends_is_a_torn_tail() {
    let dir = TempDir::new("txnlog-unsynced");
    {
        let mut store = open(dir.path());
        store.append(&[entry(1)], true).unwrap();
        // Written while a sync may still run (the storage thread does not wait): a
        // power loss can leave 2 damaged and 3 whole, neither acknowledged.
        store.append(&[entry(2)], false).unwrap();
        store.append(&[entry(3)], false).unwrap();
    }
    let seg = newest_segment(dir.path());
    let at = find(&seg, b"txn 0x2 ");
    patch(&seg, at + 40, |b| b[0] ^= 0x01);
    let store = open(dir.path());
    assert_eq!(
        read_zxids(&store),
        [1],
        "no append after the damage records it as synced: a torn tail"
    );
}

#[test]
fn txnlog_zeroed_header_before_synced_appends_is_refused() {
    let dir = TempDir::new("txnlog-zero-header");
    {
        let mut store = open(dir.path());
        for zxid in 1..=5 {
            store.append(&[entry(zxid)], true).unwrap();
        }
    }
    // Append 2's header reads as zeros, as the end of the log would; appends 3..5
    // record 2 as synced.
    let seg = newest_segment(dir.path());
    let at = find(&seg, b"txn 0x2 ") - 12 - txnlog::APPEND_HEADER_BYTES;
    patch(&seg, at, |b| b[..txnlog::APPEND_HEADER_BYTES].fill(0));
    match RocksStorage::open(dir.path(), dir.path(), true) {
        Err(StorageError::Corrupt {
            path,
            position,
            what,
        }) => {
            assert_eq!(path, seg);
            assert_eq!(position, format!("byte offset {at}"));
            assert!(what.contains("damage before the log's tail"), "{what}");
        }
        Err(other) => panic!("expected Corrupt, got {other}"),
        Ok(store) => panic!("open must refuse, it read {:?}", read_zxids(&store)),
    }
}

/// A store in `dir` whose txn log holds zxids 1..=80 (1 MB each) in two segments: two
/// appends of about 40 MB, the second of which does not fit in the first segment.
fn two_segments(dir: &Path) -> RocksStorage {
    let big = |zxid: i64| LogEntry {
        zxid,
        data: vec![zxid as u8; 1 << 20],
    };
    let mut store = open(dir);
    for range in [1..=40, 41..=80] {
        store
            .append(&range.map(big).collect::<Vec<_>>(), true)
            .unwrap();
    }
    store
}

#[test]
fn txnlog_missing_newest_segment_is_refused() {
    let dir = TempDir::new("txnlog-newest");
    drop(two_segments(dir.path()));
    let all = segments(dir.path());
    assert_eq!(all.len(), 2);
    let aside = dir.path().join("aside");
    std::fs::rename(&all[1], &aside).unwrap();
    for attempt in ["newest segment gone", "every segment gone"] {
        match RocksStorage::open(dir.path(), dir.path(), true) {
            Err(StorageError::Corrupt { path, what, .. }) => {
                assert_eq!(path, all[1], "{attempt}");
                assert!(what.contains("recorded this txn log segment"), "{what}");
            }
            other => panic!("{attempt}: expected Corrupt, got {other:?}"),
        }
        let _ = std::fs::remove_file(&all[0]);
    }
}

#[test]
fn txnlog_changed_data_log_dir_after_a_crash_is_refused() {
    let dir = TempDir::new("txnlog-moved-crash");
    let (data, log, other) = (
        dir.path().join("data"),
        dir.path().join("log"),
        dir.path().join("other"),
    );
    {
        let mut store = RocksStorage::open(&data, &log, true).unwrap();
        store.append(&[entry(1)], true).unwrap();
        // Dropped without close(): like a crash, RocksDB's memtables are not flushed.
    }
    match RocksStorage::open(&data, &other, true) {
        Err(StorageError::Corrupt { path, what, .. }) => {
            assert_eq!(path, other.join(txnlog::TXNLOG_DIR));
            assert!(what.contains("dataLogDir"), "{what}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    let store = RocksStorage::open(&data, &log, true).unwrap();
    assert_eq!(read_zxids(&store), [1]);
}

#[test]
fn txnlog_missing_directory_is_refused() {
    let dir = TempDir::new("txnlog-missing");
    open(dir.path()).append(&[entry(1)], true).unwrap();
    // dataLogDir changed without moving the log: starting would lose txn 1.
    let moved = dir.path().join("elsewhere");
    std::fs::rename(dir.path().join(txnlog::TXNLOG_DIR), &moved).unwrap();
    match RocksStorage::open(dir.path(), dir.path(), true) {
        Err(StorageError::Corrupt { path, what, .. }) => {
            assert_eq!(path, dir.path().join(txnlog::TXNLOG_DIR));
            assert!(what.contains("dataLogDir"), "{what}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    std::fs::rename(&moved, dir.path().join(txnlog::TXNLOG_DIR)).unwrap();
    assert_eq!(read_zxids(&open(dir.path())), [1]);
}

#[test]
fn txnlog_spare_segment_is_prepared_ahead_and_a_stale_one_is_never_read() {
    let dir = TempDir::new("txnlog-spare");
    drop(two_segments(dir.path()));
    let spare = dir.path().join(txnlog::TXNLOG_DIR).join(txnlog::SPARE_NAME);
    // The spare is prepared on its own thread, paced, and the store's drop does not wait
    // for it: under load it may not even exist yet (seen once on a busy machine).
    let t0 = std::time::Instant::now();
    while std::fs::metadata(&spare).map_or(true, |m| m.len() < txnlog::SEGMENT_TARGET_BYTES)
        && t0.elapsed() < std::time::Duration::from_secs(60)
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        spare.exists(),
        "a half-full segment gets its successor prepared"
    );
    // What a crash in mid-preparation might leave, made worse: bytes that are not zeros.
    std::fs::write(&spare, vec![0xa5; 3 << 20]).unwrap();
    assert_eq!(
        read_big(&open(dir.path())),
        (1..=80).map(|z| (z, 1 << 20)).collect::<Vec<_>>()
    );
    // The spare is prepared again over the stale one, and the roll uses it.
    let all = roll_once_more(dir.path());
    assert_eq!(all.len(), 3, "rolled to a third segment: {all:?}");
    assert_eq!(
        std::fs::metadata(&all[2]).unwrap().len(),
        txnlog::SEGMENT_TARGET_BYTES
    );
}

/// Each entry of a store written with `two_segments` and `roll_once_more` as (zxid,
/// data length), checking every data byte is the zxid's low byte (txn 81 excepted).
fn read_big(store: &RocksStorage) -> Vec<(i64, usize)> {
    let mut got = Vec::new();
    store
        .read_log(-1, &mut |e| {
            assert!(
                e.zxid == 81 || e.data.iter().all(|&b| b == e.zxid as u8),
                "data of zxid {}",
                e.zxid
            );
            got.push((e.zxid, e.data.len()));
            Ok(())
        })
        .unwrap();
    got
}

/// Opens the two-segment store in `dir`, appends a small txn 81 (the newest segment is
/// past half full, so a spare is prepared) and then 40 MB (txns 82..=121, a roll);
/// checks every txn reads back after a reopen. Returns the segments after.
fn roll_once_more(dir: &Path) -> Vec<PathBuf> {
    let mut store = open(dir);
    store
        .append(
            &[LogEntry {
                zxid: 81,
                data: b"small".to_vec(),
            }],
            true,
        )
        .unwrap();
    let big: Vec<LogEntry> = (82..=121)
        .map(|zxid| LogEntry {
            zxid,
            data: vec![zxid as u8; 1 << 20],
        })
        .collect();
    store.append(&big, true).unwrap();
    drop(store);
    let want: Vec<(i64, usize)> = (1..=121)
        .map(|z| (z, if z == 81 { 5 } else { 1 << 20 }))
        .collect();
    assert_eq!(read_big(&open(dir)), want, "no stale spare bytes show");
    segments(dir)
}

#[test]
fn txnlog_spare_is_deleted_at_a_clean_stop_and_a_bad_one_only_costs_time() {
    let dir = TempDir::new("txnlog-spare-bad");
    let mut store = two_segments(dir.path());
    let spare = dir.path().join(txnlog::TXNLOG_DIR).join(txnlog::SPARE_NAME);
    assert!(spare.exists());
    store.close().unwrap();
    drop(store);
    assert!(
        !spare.exists(),
        "a clean stop leaves segments only (older keels refuse others)"
    );

    // A directory in its place: the spare cannot be made, the roll makes the segment.
    std::fs::create_dir(&spare).unwrap();
    let all = roll_once_more(dir.path());
    assert_eq!(all.len(), 3, "{all:?}");
    std::fs::remove_dir(&spare).unwrap();

    // A symlink in its place is replaced, never followed.
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"not the log's").unwrap();
    let dir2 = TempDir::new("txnlog-spare-link");
    drop(two_segments(dir2.path()));
    let spare2 = dir2
        .path()
        .join(txnlog::TXNLOG_DIR)
        .join(txnlog::SPARE_NAME);
    std::fs::remove_file(&spare2).unwrap();
    std::os::unix::fs::symlink(&victim, &spare2).unwrap();
    let all = roll_once_more(dir2.path());
    assert_eq!(std::fs::read(&victim).unwrap(), b"not the log's");
    let newest = std::fs::symlink_metadata(&all[2]).unwrap();
    assert!(newest.file_type().is_file(), "{:?}", newest.file_type());
}

#[test]
fn txnlog_purge_deletes_whole_segments() {
    let dir = TempDir::new("txnlog-purge");
    let mut store = two_segments(dir.path());
    assert_eq!(
        segments(dir.path()).len(),
        2,
        "the log rolled to a second file"
    );
    store.put_snapshot_chunk(45, 0, b"state").unwrap();
    store.finish_snapshot(45, 1).unwrap();
    store.purge(1).unwrap();
    let left = segments(dir.path());
    assert_eq!(
        left.len(),
        1,
        "the file with only zxids <= 45 is gone: {left:?}"
    );
    let mut zxids = Vec::new();
    store
        .read_log(-1, &mut |e| {
            zxids.push(e.zxid);
            Ok(())
        })
        .unwrap();
    assert_eq!(
        zxids,
        (46..=80).collect::<Vec<_>>(),
        "reads start above the snapshot"
    );
    drop(store);
    let store = open(dir.path());
    let mut zxids = Vec::new();
    store
        .read_log(-1, &mut |e| {
            zxids.push(e.zxid);
            Ok(())
        })
        .unwrap();
    assert_eq!(zxids, (46..=80).collect::<Vec<_>>(), "purge is durable");
}

#[test]
fn rocks_wal_damage_before_the_tail_is_refused() {
    let dir = TempDir::new("wal-damage");
    {
        let mut store = open(dir.path());
        for i in 1..=5 {
            store
                .put_meta(
                    &format!("key{i}"),
                    format!("meta value {i} ").repeat(20).as_bytes(),
                )
                .unwrap();
        }
    }
    // Flip a byte inside the first value in RocksDB's WAL; four intact records follow.
    let wal = newest_wal(&dir.path().join(rocks::DB_DIR));
    let at = find(&wal, b"meta value 1 ");
    patch(&wal, at + 40, |b| b[0] ^= 0x01);

    match RocksStorage::open(dir.path(), dir.path(), true) {
        Err(StorageError::Corrupt { path, .. }) => {
            assert_eq!(path, dir.path().join(rocks::DB_DIR))
        }
        Err(other) => panic!("expected Corrupt, got {other}"),
        Ok(_) => panic!("open must refuse a damaged WAL"),
    }
}

#[test]
fn rocks_close_keeps_everything_and_leaves_no_wal_to_replay() {
    let dir = TempDir::new("close");
    {
        let mut store = open(dir.path());
        store.append(&[entry(1), entry(2)], true).unwrap();
        store.append(&[entry(3)], false).unwrap();
        store
            .put_snapshot_chunk(2, 0, b"snapshot chunk bytes")
            .unwrap();
        store.finish_snapshot(2, 1).unwrap();
        store.close().unwrap();
    }
    // Everything is in table files now: the live WAL holds no snapshot chunk.
    let wal = newest_wal(&dir.path().join(rocks::DB_DIR));
    let bytes = std::fs::read(&wal).unwrap();
    assert!(
        !bytes.windows(14).any(|w| w == b"snapshot chunk"),
        "WAL {} still holds a snapshot chunk after close",
        wal.display()
    );
    let store = open(dir.path());
    assert_eq!(read_zxids(&store), [1, 2, 3]);
    assert_eq!(store.latest_snapshot().unwrap().unwrap().zxid, 2);
}

#[test]
fn txnlog_spare_preparation_rests_only_while_ahead_of_the_log() {
    use std::time::Duration;
    let half = txnlog::SEGMENT_TARGET_BYTES / 2;
    let step = Duration::from_millis(2);
    let rest = step * txnlog::SPARE_REST_FACTOR;
    // The log stands still: the spare rests after every step, to the last one.
    assert_eq!(txnlog::spare_rest(step, 1 << 20, half, half), rest);
    assert_eq!(
        txnlog::spare_rest(step, txnlog::SEGMENT_TARGET_BYTES - (1 << 20), half, half),
        rest
    );
    // The log has used 60% of its runway: the spare must be 80% done to keep up with
    // finishing at 75%. 79% is behind: no rest.
    let used_60 = half + half * 6 / 10;
    let zeroed_79 = txnlog::SEGMENT_TARGET_BYTES * 79 / 100;
    assert_eq!(
        txnlog::spare_rest(step, zeroed_79, half, used_60),
        Duration::ZERO
    );
    // 81% keeps up: it rests again.
    let zeroed_81 = txnlog::SEGMENT_TARGET_BYTES * 81 / 100;
    assert_eq!(txnlog::spare_rest(step, zeroed_81, half, used_60), rest);
    // A log at the end of its segment (a roll waiting for the spare): never a rest.
    assert_eq!(
        txnlog::spare_rest(step, zeroed_81, half, txnlog::SEGMENT_TARGET_BYTES),
        Duration::ZERO
    );
    // A slow step rests at most SPARE_REST_MAX_MS.
    assert_eq!(
        txnlog::spare_rest(Duration::from_secs(1), 1 << 20, half, half),
        Duration::from_millis(txnlog::SPARE_REST_MAX_MS)
    );
}

#[test]
fn txnlog_storage_bytes_after_counts_the_segments_after_the_one_holding_the_zxid() {
    // ZooKeeper's TxnIterator.getStorageSize for readTxnLog(after): the files left after
    // the first one opened (the newest named below `after`). Segment 2 is named 41.
    let dir = TempDir::new("txnlog-storage-bytes");
    let store = two_segments(dir.path());
    let all = segments(dir.path());
    assert_eq!(all.len(), 2);
    let second = std::fs::metadata(&all[1]).unwrap().len();
    assert!(second >= 40 << 20, "segment 2 holds 40 MB: {second}");
    for after in [1, 2, 40, 41] {
        assert_eq!(
            store.log_storage_bytes_after(after).unwrap(),
            second,
            "after {after}"
        );
    }
    for after in [42, 80, 1000] {
        assert_eq!(
            store.log_storage_bytes_after(after).unwrap(),
            0,
            "after {after}"
        );
    }
}

#[test]
fn a_zab_store_sends_diff_from_its_newest_segment_whatever_the_snapshot_size() {
    // The sync differential's LARGE case: a member whose only snapshot is a small one it
    // installed (SNAP at start-up) logs 800 txns of 1 KiB; a learner 800 txns behind is
    // sent DIFF by ZooKeeper (its log has not rolled: getStorageSize is 0), so by keel.
    use bytes::Bytes;
    use keel::storage::zab::{encode_snapshot, ZabStore};
    use keel::zab::storage::{read_for_diff, ZabStorage};
    use keel::zab::Txn;
    let dir = TempDir::new("zab-diff-size");
    let mut store = ZabStore::open(dir.path(), dir.path(), true).unwrap();
    let epoch = 3u64 << 32;
    store.install_snapshot(epoch, encode_snapshot(&[vec![7u8; 600]]));
    let txns: Vec<Txn> = (1..=800)
        .map(|i| Txn {
            zxid: epoch + i,
            data: Bytes::from(vec![i as u8; 1024]),
        })
        .collect();
    store.append(&txns);
    store.sync();
    assert_eq!(store.log_bytes_after(epoch + 1), 0);
    let diff = read_for_diff(&store, epoch + 1, epoch + 800, 0.33)
        .expect("DIFF: the log from the learner's zxid is all in the newest segment");
    assert_eq!(diff.len(), 799);
    assert_eq!(diff[0].zxid, epoch + 2);
}

/// The snapshot zxids that have chunks in the snapshot column family, marked or not.
fn chunk_zxids(data_dir: &Path) -> Vec<i64> {
    let db = raw_db(data_dir);
    let cf = db
        .cf_handle(rocks::SNAPSHOT_CF)
        .expect("snapshot column family");
    let mut zxids: Vec<i64> = db
        .iterator_cf(cf, rocksdb::IteratorMode::Start)
        .map(|item| {
            let (key, _) = item.expect("chunk");
            i64::from_be_bytes(key[..8].try_into().expect("8-byte zxid"))
        })
        .collect();
    zxids.dedup();
    zxids
}

#[test]
fn rocks_snapshots_back_to_back_are_all_complete() {
    let dir = TempDir::new("snapshots-back-to-back");
    let chunk = vec![3u8; 1 << 20];
    let mut store = open(dir.path());
    // Each next snapshot starts while the last one's file may still be ingesting.
    for zxid in 1..=4i64 {
        for index in 0..4u32 {
            store.put_snapshot_chunk(zxid, index, &chunk).unwrap();
        }
        store.finish_snapshot(zxid, 4).unwrap();
    }
    assert_eq!(store.snapshots().unwrap(), vec![1, 2, 3, 4]);
    drop(store);
    let store = open(dir.path());
    assert_eq!(store.snapshots().unwrap(), vec![1, 2, 3, 4]);
    let latest = store.latest_snapshot().unwrap().expect("a snapshot");
    assert_eq!((latest.zxid, latest.chunks.len()), (4, 4));
    drop(store);
    assert_eq!(chunk_zxids(dir.path()), vec![1, 2, 3, 4]);
}

/// Bytes of RocksDB WAL files (`*.log`) in the database directory.
fn wal_bytes(data_dir: &Path) -> u64 {
    std::fs::read_dir(data_dir.join(rocks::DB_DIR))
        .expect("list the database directory")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .map(|p| std::fs::metadata(&p).expect("WAL size").len())
        .sum()
}

/// A periodic snapshot's chunks go into table files by a flush, never through the WAL;
/// the snapshot is complete (marked) as soon as `finish_snapshot` returned, for any
/// reader, and after a restart.
#[test]
fn rocks_a_periodic_snapshot_bypasses_the_wal_and_is_complete_once_finished() {
    let dir = TempDir::new("snapshot-no-wal");
    let chunks: Vec<Vec<u8>> = (0..8u8).map(|i| vec![i; 512 * 1024]).collect();
    {
        let mut store = open(dir.path());
        for (index, chunk) in (0u32..).zip(&chunks) {
            store.put_snapshot_chunk(0x7, index, chunk).unwrap();
        }
        // Measured before the seal's flush, after which RocksDB may drop the WAL file.
        assert!(
            wal_bytes(dir.path()) < 1 << 20,
            "4 MiB of chunks must not pass through the WAL ({} bytes there)",
            wal_bytes(dir.path())
        );
        store.finish_snapshot(0x7, 8).unwrap();
        assert_eq!(store.snapshots().unwrap(), vec![0x7]);
        // Dropped without a close: the marker is in the WAL, the chunks in tables.
    }
    let store = open(dir.path());
    assert_eq!(store.snapshots().unwrap(), vec![0x7]);
    let latest = store.latest_snapshot().unwrap().expect("a snapshot");
    assert_eq!((latest.zxid, latest.chunks), (0x7, chunks));
}

/// The size the DIFF-or-SNAP limit weighs: the chunks' bytes, known from the writing
/// for a snapshot finished in this process, measured from the store after a reopen,
/// and that of the new snapshot after an install (RocksStorage::snapshot_payload_bytes).
#[test]
fn rocks_the_snapshot_size_is_its_chunks_bytes_written_reopened_or_installed() {
    let dir = TempDir::new("snapshot-size");
    let chunks: Vec<Vec<u8>> = (1..=3u8).map(|i| vec![i; 1000 * i as usize]).collect();
    {
        let mut store = open(dir.path());
        assert_eq!(store.snapshot_payload_bytes().unwrap(), 0, "no snapshot");
        store.put_snapshot_chunk(0x5, 0, b"an older one").unwrap();
        store.finish_snapshot(0x5, 1).unwrap();
        assert_eq!(store.snapshot_payload_bytes().unwrap(), 12);
        for (index, chunk) in (0u32..).zip(&chunks) {
            store.put_snapshot_chunk(0x7, index, chunk).unwrap();
        }
        store.finish_snapshot(0x7, 3).unwrap();
        assert_eq!(store.snapshot_payload_bytes().unwrap(), 6000);
    }
    let mut store = open(dir.path());
    assert_eq!(
        store.snapshot_payload_bytes().unwrap(),
        6000,
        "measured after a reopen"
    );
    store
        .install_snapshot(0x7, &[b"same zxid", b"other bytes"])
        .unwrap();
    assert_eq!(
        store.snapshot_payload_bytes().unwrap(),
        20,
        "the installed snapshot's"
    );
    // Out of order, or a chunk twice, as the trait allows: still the chunks' bytes.
    for (zxid, order) in [(0x9, vec![2u32, 0, 1]), (0xb, vec![0, 1, 1, 2])] {
        for &index in &order {
            store
                .put_snapshot_chunk(zxid, index, &chunks[index as usize])
                .unwrap();
        }
        store.finish_snapshot(zxid, 3).unwrap();
        assert_eq!(
            store.snapshot_payload_bytes().unwrap(),
            6000,
            "chunks {order:?}"
        );
    }
}

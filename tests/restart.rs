//! Restarts of a keel process on the same dataDir:
//! - sessions resume after a clean stop (SIGTERM) and after SIGKILL, with their
//!   ephemerals; a closed session stays closed;
//! - a session whose client never comes back expires a full session timeout after the
//!   restart, its ephemerals go, and a watcher sees NodeDeleted;
//! - a torn WAL tail (a crash in mid-write) is dropped and every txn before it kept;
//! - damage before the tail (a WAL record, an SST block, the MANIFEST) and an unknown
//!   on-disk format version are refused at start-up: nonzero exit, an error naming the
//!   path, and the data directory left exactly as it was.

mod common;

use common::*;
use keel::storage::rocks;
use keel::storage::FORMAT_VERSION;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Long enough that no session used here expires by accident during a test.
const LONG_TIMEOUT_MS: i32 = 20000;

#[test]
fn sessions_and_ephemerals_survive_sigterm_and_sigkill() {
    let mut keel = Keel::new("resume", KeelOptions::default());
    keel.start();
    let mut a = Client::connect(keel.port, LONG_TIMEOUT_MS).expect("connect");
    let (id, passwd) = (a.session_id, a.passwd.clone());
    a.create("/p", Some(b"persistent"), CreateMode::Persistent)
        .expect("create /p");
    a.create("/p/eph", Some(b"mine"), CreateMode::Ephemeral)
        .expect("create ephemeral");
    let (seq, _) = a
        .create("/p/eseq-", None, CreateMode::EphemeralSequential)
        .expect("create ephemeral sequential");
    let zxid_before = a.last_zxid();
    a.abandon();

    let check = |c: &mut Client, paths: &[&str]| {
        for path in paths {
            let (_, stat) = c
                .get_data(path, false)
                .unwrap_or_else(|e| panic!("{path} after restart: error {e}"));
            assert_eq!(
                stat.ephemeral_owner, id,
                "{path} still owned by the session"
            );
        }
    };

    // A clean stop.
    assert!(keel.terminate().success(), "SIGTERM exits cleanly");
    keel.start();
    let mut a = Client::resume(keel.port, LONG_TIMEOUT_MS, id, &passwd)
        .expect("the session resumes after SIGTERM");
    assert_eq!(a.session_id, id);
    check(&mut a, &["/p/eph", &seq]);
    let (data, _) = a.get_data("/p", false).unwrap();
    assert_eq!(data.as_deref(), Some(&b"persistent"[..]));
    // A write after the restart: above every zxid of the previous run.
    a.create("/p/eph2", Some(b"after restart"), CreateMode::Ephemeral)
        .expect("create after restart");
    assert!(
        a.last_zxid() > zxid_before,
        "zxid 0x{:x} after restart is not above 0x{zxid_before:x}",
        a.last_zxid()
    );
    a.abandon();

    // A power cut.
    keel.kill9();
    keel.start();
    assert_eq!(
        Client::resume(keel.port, LONG_TIMEOUT_MS, id, &[7u8; 16].to_vec().into()).err(),
        Some(SESSIONEXPIRED),
        "a wrong password is refused"
    );
    let mut a = Client::resume(keel.port, LONG_TIMEOUT_MS, id, &passwd)
        .expect("the session resumes after SIGKILL");
    assert_eq!(a.session_id, id);
    check(&mut a, &["/p/eph", "/p/eph2", &seq]);
    let mut children = a.get_children("/p", false).unwrap();
    children.sort();
    let seq_name = seq.rsplit('/').next().unwrap().to_owned();
    assert_eq!(children, ["eph", "eph2", seq_name.as_str()]);

    // Closing the session removes its ephemerals, durably; it cannot be resumed.
    a.close().expect("close session");
    keel.kill9();
    keel.start();
    let mut b = Client::connect(keel.port, LONG_TIMEOUT_MS).expect("connect");
    assert_eq!(b.get_children("/p", false).unwrap(), Vec::<String>::new());
    assert_eq!(
        Client::resume(keel.port, LONG_TIMEOUT_MS, id, &passwd).err(),
        Some(SESSIONEXPIRED),
        "a closed session stays closed after a restart"
    );
}

#[test]
fn abandoned_session_expires_after_restart() {
    const TIMEOUT_MS: i32 = 4000;
    let mut keel = Keel::new("expire", KeelOptions::default());
    keel.start();
    let mut x = Client::connect(keel.port, TIMEOUT_MS).expect("connect");
    assert_eq!(
        x.timeout_ms, TIMEOUT_MS,
        "4000 ms is within [2, 20] x tickTime"
    );
    x.create("/x-eph", Some(b"x"), CreateMode::Ephemeral)
        .expect("create ephemeral");
    let (x_seq, _) = x
        .create("/x-seq-", None, CreateMode::EphemeralSequential)
        .expect("create ephemeral sequential");
    let x_id = x.session_id;
    let x_passwd = x.passwd.clone();
    let mut w = Client::connect(keel.port, LONG_TIMEOUT_MS).expect("connect watcher");
    w.get_data("/x-eph", true).expect("watch /x-eph");
    let (w_id, w_passwd) = (w.session_id, w.passwd.clone());
    let w_zxid = w.last_zxid();
    x.abandon();
    w.abandon();

    keel.kill9();
    keel.start();
    let restarted = Instant::now();
    // The watcher comes back and re-registers its watch, as ZooKeeper's clients do.
    let mut w =
        Client::resume(keel.port, LONG_TIMEOUT_MS, w_id, &w_passwd).expect("watcher resumes");
    w.set_watches(w_zxid, &["/x-eph"], &[], &[])
        .expect("setWatches");
    let stat = w
        .exists("/x-eph", false)
        .unwrap()
        .expect("the ephemeral is still there right after the restart");
    assert_eq!(stat.ephemeral_owner, x_id);

    let event = w
        .wait_event(Duration::from_secs(20))
        .expect("NodeDeleted within 20 s of the restart");
    let waited = restarted.elapsed();
    assert_eq!(
        (event.event_type, event.path.as_str()),
        (NODE_DELETED, "/x-eph"),
        "{event:?}"
    );
    assert!(
        waited >= Duration::from_millis(3000),
        "the restored session got a full timeout from the restart, expired after {waited:?}"
    );
    for path in ["/x-eph", x_seq.as_str()] {
        assert_eq!(w.exists(path, false).unwrap(), None, "{path} is gone");
    }
    assert_eq!(
        Client::resume(keel.port, TIMEOUT_MS, x_id, &x_passwd).err(),
        Some(SESSIONEXPIRED),
        "the expired session cannot be resumed"
    );

    // The expiry is durable.
    keel.kill9();
    keel.start();
    let mut w =
        Client::resume(keel.port, LONG_TIMEOUT_MS, w_id, &w_passwd).expect("watcher resumes again");
    assert_eq!(w.exists("/x-eph", false).unwrap(), None);
    assert_eq!(
        Client::resume(keel.port, TIMEOUT_MS, x_id, &x_passwd).err(),
        Some(SESSIONEXPIRED)
    );
}

/// Creates `/t/n0` .. `/t/n<count-1>`; returns the zxid of the last.
fn write_nodes(c: &mut Client, count: usize) -> i64 {
    match c.create("/t", None, CreateMode::Persistent) {
        Ok(_) | Err(NODEEXISTS) => {}
        Err(e) => panic!("create /t: {e}"),
    }
    for i in 0..count {
        let data = format!("node {i} ").repeat(8);
        c.create(
            &format!("/t/n{i}"),
            Some(data.as_bytes()),
            CreateMode::Persistent,
        )
        .unwrap_or_else(|e| panic!("create /t/n{i}: {e}"));
    }
    c.last_zxid()
}

fn assert_nodes(c: &mut Client, count: usize) {
    let paths: Vec<String> = (0..count).map(|i| format!("/t/n{i}")).collect();
    let got = c.get_data_many(&paths).expect("connection");
    for (i, r) in got.into_iter().enumerate() {
        let (data, stat) = r.unwrap_or_else(|e| panic!("/t/n{i}: error {e}"));
        assert_eq!(
            data,
            Some(format!("node {i} ").repeat(8).into_bytes()),
            "/t/n{i}"
        );
        assert_eq!(stat.version, 0);
    }
}

#[test]
fn torn_wal_tail_is_dropped_and_everything_before_kept() {
    for separate_log_dir in [false, true] {
        let mut keel = Keel::new(
            "torn",
            KeelOptions {
                separate_log_dir,
                ..KeelOptions::default()
            },
        );
        keel.start();
        let mut c = Client::connect(keel.port, LONG_TIMEOUT_MS).expect("connect");
        const COUNT: usize = 40;
        write_nodes(&mut c, COUNT);
        // The last txn before the crash: the one whose record will be torn.
        c.create("/torn", Some(b"last record"), CreateMode::Persistent)
            .expect("create /torn");
        keel.kill9();

        // Its append's last bytes never reached the disk: the zeros written ahead of
        // the log show through.
        let seg = newest_txnlog_segment(&[&keel.data_dir, &keel.log_dir]).expect("a segment");
        let mut bytes = std::fs::read(&seg).unwrap();
        let at = bytes
            .windows(11)
            .rposition(|w| w == b"last record")
            .unwrap_or_else(|| panic!("{} holds the last txn", seg.display()));
        bytes[at + 4..].iter_mut().take(64).for_each(|b| *b = 0);
        std::fs::write(&seg, bytes).unwrap();

        keel.start();
        let mut c = Client::connect(keel.port, LONG_TIMEOUT_MS).expect("connect");
        assert_nodes(&mut c, COUNT);
        assert_eq!(
            c.exists("/torn", false).unwrap(),
            None,
            "the torn record is dropped (separate dataLogDir: {separate_log_dir})"
        );
        // Writing goes on, and survives another crash.
        c.create("/after", Some(b"x"), CreateMode::Persistent)
            .expect("write after recovering a torn tail");
        keel.kill9();
        keel.start();
        let mut c = Client::connect(keel.port, LONG_TIMEOUT_MS).expect("connect");
        assert_nodes(&mut c, COUNT);
        assert!(c.exists("/after", false).unwrap().is_some());
    }
}

/// Every file under the dataDir and dataLogDir with its bytes, except RocksDB's own
/// info logs (`LOG`, `LOG.old.*`), which are diagnostics, not data.
fn data_files(keel: &Keel) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut dirs = vec![keel.data_dir.clone()];
    if keel.log_dir != keel.data_dir {
        dirs.push(keel.log_dir.clone());
    }
    dirs.iter()
        .flat_map(|d| files_under(d))
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name != "LOG" && !name.starts_with("LOG.old")
        })
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

/// What differs between two [`data_files`] listings.
fn changes(before: &BTreeMap<PathBuf, Vec<u8>>, after: &BTreeMap<PathBuf, Vec<u8>>) -> Vec<String> {
    let mut changed = Vec::new();
    for (p, bytes) in before {
        match after.get(p) {
            None => changed.push(format!("removed {}", p.display())),
            Some(b) if b != bytes => changed.push(format!("modified {}", p.display())),
            Some(_) => {}
        }
    }
    for p in after.keys().filter(|p| !before.contains_key(*p)) {
        changed.push(format!("added {}", p.display()));
    }
    changed
}

/// What a refused start did: its first stderr, and every change it (or a second
/// attempt) made to the data directory.
struct Refusal {
    stderr: String,
    changed: Vec<String>,
}

impl Refusal {
    /// Asserted last, so the rest of a test still runs and reports.
    fn assert_data_dir_unchanged(&self, what: &str) {
        assert!(
            self.changed.is_empty(),
            "{what}: a refused start changed the data directory: {:#?}",
            self.changed
        );
    }
}

/// Starts keel expecting a refusal naming the database, twice (a second attempt must
/// not "repair" anything either), recording any change to the data directory.
fn start_refused(keel: &mut Keel, what: &str, expect_in_stderr: &[&str]) -> Refusal {
    let db = keel.data_dir.join(rocks::DB_DIR);
    start_refused_naming(keel, &db, what, expect_in_stderr)
}

/// As [`start_refused`], with the error naming `named` (a directory or file).
fn start_refused_naming(
    keel: &mut Keel,
    db: &Path,
    what: &str,
    expect_in_stderr: &[&str],
) -> Refusal {
    let before = data_files(keel);
    let mut refusal = Refusal {
        stderr: String::new(),
        changed: Vec::new(),
    };
    for attempt in 0..2 {
        let (status, stderr) = keel.start_expecting_exit();
        assert!(
            !status.success(),
            "{what}: keel must exit nonzero, got {status}"
        );
        assert!(
            stderr.contains(&db.display().to_string()),
            "{what}: the error names {}:\n{stderr}",
            db.display()
        );
        for s in expect_in_stderr {
            assert!(
                stderr.contains(s),
                "{what}: stderr mentions {s:?}:\n{stderr}"
            );
        }
        for change in changes(&before, &data_files(keel)) {
            if !refusal.changed.contains(&change) {
                refusal.changed.push(change);
            }
        }
        if attempt == 0 {
            refusal.stderr = stderr;
        }
    }
    refusal
}

/// Flips a byte in the middle of every occurrence of `needle` in every file under the
/// data directories; returns the files changed.
fn damage(keel: &Keel, needle: &[u8]) -> Vec<PathBuf> {
    damage_where(keel, needle, |_| true)
}

/// As [`damage`], only in the files `pick` accepts.
fn damage_where(keel: &Keel, needle: &[u8], pick: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut hit = Vec::new();
    for (path, mut bytes) in data_files(keel) {
        if !pick(&path) {
            continue;
        }
        let mut found = false;
        let mut at = 0;
        while let Some(i) = bytes[at..].windows(needle.len()).position(|w| w == needle) {
            let pos = at + i + needle.len() / 2;
            bytes[pos] ^= 0x55;
            found = true;
            at = at + i + needle.len();
        }
        if found {
            std::fs::write(&path, &bytes).unwrap();
            hit.push(path);
        }
    }
    hit
}

const MARKER: &[u8] = b"corrupt-me:0123456789abcdefghijklmnopqrstuvwxyz:corrupt-me";

/// A fresh keel holding a marker znode followed by many more txns, so that the
/// marker's records lie well before the tail of the log.
fn keel_with_marker(tag: &str) -> Keel {
    keel_with_marker_opts(tag, KeelOptions::default())
}

/// As [`keel_with_marker`], with `opts`.
fn keel_with_marker_opts(tag: &str, opts: KeelOptions) -> Keel {
    let mut keel = Keel::new(tag, opts);
    keel.start();
    let mut c = Client::connect(keel.port, LONG_TIMEOUT_MS).expect("connect");
    c.create("/marker", Some(MARKER), CreateMode::Persistent)
        .expect("create /marker");
    write_nodes(&mut c, 300);
    keel
}

#[test]
fn damaged_txnlog_record_before_the_tail_is_refused() {
    let mut keel = keel_with_marker("bad-txnlog");
    keel.kill9();
    let hit = damage(&keel, MARKER);
    let segment = newest_txnlog_segment(&[&keel.data_dir, &keel.log_dir]).expect("a segment");
    assert_eq!(
        hit,
        std::slice::from_ref(&segment),
        "the marker is only in the txn log after a crash"
    );
    start_refused_naming(
        &mut keel,
        &segment,
        "a damaged txn log record",
        &["damage before the log's tail"],
    )
    .assert_data_dir_unchanged("a damaged txn log record");
}

#[test]
fn damaged_sst_is_refused() {
    // With snapCount 100, a snapshot taken during the 300 writes holds the marker; a
    // clean stop moves it from RocksDB's WAL into SST files. Only those are damaged
    // (the txn log holds the marker too).
    let mut keel = keel_with_marker_opts(
        "bad-sst",
        KeelOptions {
            snap_count: Some(100),
            ..KeelOptions::default()
        },
    );
    assert!(keel.terminate().success());
    let hit = damage_where(&keel, MARKER, |p| p.extension().is_some_and(|x| x == "sst"));
    assert!(
        !hit.is_empty(),
        "the marker is in an SST after a snapshot and a clean stop: {hit:?}"
    );
    start_refused(&mut keel, "a damaged SST", &[]).assert_data_dir_unchanged("a damaged SST");
}

#[test]
fn damaged_manifest_is_refused() {
    let mut keel = keel_with_marker("bad-manifest");
    assert!(keel.terminate().success());
    let db = keel.data_dir.join(rocks::DB_DIR);
    let manifest = std::fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("MANIFEST-")
        })
        .max()
        .expect("a MANIFEST");
    let mut bytes = std::fs::read(&manifest).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 4] {
        *b ^= 0xff;
    }
    std::fs::write(&manifest, bytes).unwrap();
    start_refused(&mut keel, "a damaged MANIFEST", &[])
        .assert_data_dir_unchanged("a damaged MANIFEST");
}

/// The database opened with the rocksdb crate directly (WAL in the database
/// directory), to change what keel cannot be made to write.
fn raw_db(data_dir: &Path) -> rocksdb::DB {
    rocksdb::DB::open_cf(
        &rocksdb::Options::default(),
        data_dir.join(rocks::DB_DIR),
        [rocks::LOG_CF, rocks::SNAPSHOT_CF, rocks::META_CF],
    )
    .expect("open the database with rocksdb")
}

fn set_format_version(data_dir: &Path, version: u32) {
    let db = raw_db(data_dir);
    let meta = db.cf_handle(rocks::META_CF).expect("meta column family");
    db.put_cf(meta, rocks::FORMAT_VERSION_KEY, version.to_be_bytes())
        .expect("put format_version");
    db.flush_cf(meta).expect("flush meta");
}

#[test]
fn unknown_format_version_is_refused() {
    let mut keel = keel_with_marker("version");
    assert!(keel.terminate().success());
    set_format_version(&keel.data_dir, 99);
    let refusal = start_refused(&mut keel, "format version 99", &["99"]);
    assert!(
        refusal.stderr.contains("version"),
        "the error says it is about the format version:\n{}",
        refusal.stderr
    );
    // Put back, the data is all there: the refusal damaged nothing.
    set_format_version(&keel.data_dir, FORMAT_VERSION);
    keel.start();
    let mut c = Client::connect(keel.port, LONG_TIMEOUT_MS).expect("connect");
    let (data, _) = c.get_data("/marker", false).expect("/marker");
    assert_eq!(data.as_deref(), Some(MARKER));
    assert_nodes(&mut c, 300);
    refusal.assert_data_dir_unchanged("format version 99");
}

//! `keel import-zookeeper ZK_DATADIR KEEL_DATADIR`: moves an Apache ZooKeeper 3.x
//! dataDir into a new keel store: every znode (data, ACL, every Stat field), every
//! session with its ephemerals, at ZooKeeper's last zxid, so keel's next zxid follows
//! ZooKeeper's and a client holding a ZooKeeper session can resume it on keel.
//!
//! The steps are ZooKeeper's own start-up (FileTxnSnapLog.restore, ZooKeeperServer.
//! loadData), reading its files with readers written here from the format facts:
//! 1. Find `snapshot.<zxid>` and `log.<zxid>` in `version-2` of the dataDir (and of the
//!    dataLogDir, when the logs live apart).
//! 2. [`snapshot`]: read the newest snapshot whose checksums verify, falling back to an
//!    older one as FileSnap does (each refusal is reported). Compressed snapshots
//!    (`.gz`, `.snappy`) are refused with the way out.
//! 3. [`txnlog`]: read the log files that hold the txns after that snapshot, each
//!    record's Adler-32 checked; their zxids must follow on without a gap.
//! 4. [`replay`]: apply them with ZooKeeper's DataTree rules, comparing the tree digests
//!    ZooKeeper 3.6+ recorded with the rebuilt tree's; then drop ephemerals of sessions
//!    that no longer exist, as ZooKeeper does at start-up.
//! 5. [`write`]: store the result as one keel snapshot and read it back to verify.
//!
//! Nothing is written until every input has been read and checked: a refused import
//! leaves KEEL_DATADIR as it was (or absent), and an existing keel store is never
//! overwritten. The ZooKeeper files are only read.

pub mod ensemble;
pub mod input;
pub mod node;
pub mod passwd;
pub mod replay;
pub mod snapshot;
pub mod txnlog;
pub mod write;

use crate::storage::StorageError;
use replay::{DigestMismatch, ReplayStats, ZkTree};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Why an import was refused.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A ZooKeeper file is damaged or not in a format this reader knows.
    #[error("{}: at byte offset {offset}: {what}", path.display())]
    Corrupt {
        path: PathBuf,
        offset: u64,
        what: String,
    },
    /// The input as a whole cannot be imported (no snapshot, missing txns, an existing
    /// keel store, a compressed snapshot, digests that disagree).
    #[error("{0}")]
    Refused(String),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Writing or reading back the keel store failed.
    #[error("keel store: {0}")]
    Store(#[from] StorageError),
}

impl ImportError {
    fn io(path: &Path, source: std::io::Error) -> ImportError {
        ImportError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    fn corrupt(path: &Path, m: input::Malformed) -> ImportError {
        ImportError::Corrupt {
            path: path.to_path_buf(),
            offset: m.offset,
            what: m.what,
        }
    }
}

/// What to import and where.
#[derive(Debug, Clone)]
pub struct Options {
    /// ZooKeeper's dataDir, or its `version-2` folder.
    pub zk_data_dir: PathBuf,
    /// ZooKeeper's dataLogDir (or its `version-2`), when the txn logs live apart.
    pub zk_log_dir: Option<PathBuf>,
    /// keel's dataDir: the store goes to `keel-db` in it.
    pub keel_data_dir: PathBuf,
    /// keel's dataLogDir, if it will run with one set apart (the store's write-ahead
    /// log then goes to `keel-wal` in it).
    pub keel_log_dir: Option<PathBuf>,
    /// ZooKeeper's `jute.maxbuffer`, bytes: bounds a txn log record's length.
    pub jute_maxbuffer: usize,
    /// Refuse when ZooKeeper's recorded tree digests disagree with the rebuilt tree
    /// (true), or only report it (false).
    pub check_digests: bool,
}

/// What an import did.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The snapshot the import started from, and its zxid.
    pub snapshot: PathBuf,
    pub snapshot_zxid: i64,
    /// ZooKeeper's last zxid, now keel's.
    pub last_zxid: i64,
    /// Log files read.
    pub log_files: usize,
    pub replay: ReplayStats,
    pub written: write::Written,
    /// Unreachable znodes left out (see [`replay`]).
    pub unreachable: usize,
    /// Ephemerals dropped because their session no longer existed.
    pub dead_session_ephemerals: usize,
    /// Problems that did not stop the import (a newer snapshot that did not verify, a
    /// torn log tail, digest mismatches when not checked).
    pub warnings: Vec<String>,
    pub elapsed: Duration,
}

/// ZooKeeper's files in one directory, by zxid.
#[derive(Debug, Default)]
struct Files {
    /// (zxid, path), newest first.
    snapshots: Vec<(i64, PathBuf)>,
    /// (first zxid, path), oldest first.
    logs: Vec<(i64, PathBuf)>,
}

/// `dir/version-2` if it exists, else `dir` (already the version-2 folder).
fn version_dir(dir: &Path) -> PathBuf {
    let v2 = dir.join("version-2");
    if v2.is_dir() {
        v2
    } else {
        dir.to_path_buf()
    }
}

/// The zxid in a ZooKeeper file name `prefix.<hex>[.suffix]` (Util.getZxidFromName).
fn zxid_of(name: &str, prefix: &str) -> Option<i64> {
    let mut parts = name.split('.');
    if parts.next()? != prefix {
        return None;
    }
    u64::from_str_radix(parts.next()?, 16)
        .ok()
        .map(|z| z as i64)
}

fn list(dir: &Path, prefix: &str) -> Result<Vec<(i64, PathBuf)>, ImportError> {
    let mut out = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| ImportError::io(dir, e))?;
    for e in entries {
        let e = e.map_err(|e| ImportError::io(dir, e))?;
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(z) = zxid_of(name, prefix) {
            out.push((z, e.path()));
        }
    }
    out.sort();
    Ok(out)
}

fn locate(opts: &Options) -> Result<Files, ImportError> {
    if !opts.zk_data_dir.is_dir() {
        return Err(ImportError::Refused(format!(
            "{}: not a directory",
            opts.zk_data_dir.display()
        )));
    }
    let snap_dir = version_dir(&opts.zk_data_dir);
    let log_dir = match &opts.zk_log_dir {
        Some(d) if !d.is_dir() => {
            return Err(ImportError::Refused(format!(
                "{}: not a directory",
                d.display()
            )))
        }
        Some(d) => version_dir(d),
        None => snap_dir.clone(),
    };
    let mut snapshots = list(&snap_dir, "snapshot")?;
    snapshots.reverse();
    let logs = list(&log_dir, "log")?;
    if snapshots.is_empty() {
        return Err(ImportError::Refused(format!(
            "{}: no snapshot.* file{}: not a ZooKeeper 3.5+ dataDir (ZooKeeper itself refuses to start from txn logs alone)",
            snap_dir.display(),
            if logs.is_empty() { " and no log.* file" } else { "" }
        )));
    }
    Ok(Files { snapshots, logs })
}

/// Compressed snapshots (SnapStream's `.gz` and `.snappy` modes), by file name.
fn compression(path: &Path) -> Option<&'static str> {
    let name = path.file_name()?.to_str()?;
    let parts: Vec<&str> = name.split('.').collect();
    if parts.len() < 3 {
        return None;
    }
    match parts[parts.len() - 1].to_ascii_lowercase().as_str() {
        "gz" => Some("gz"),
        "snappy" => Some("snappy"),
        _ => None,
    }
}

fn read(path: &Path) -> Result<Vec<u8>, ImportError> {
    std::fs::read(path).map_err(|e| ImportError::io(path, e))
}

fn mismatch_text(m: &DigestMismatch, place: &str) -> String {
    format!(
        "ZooKeeper's tree digest after txn 0x{:x} ({} {place}) is 0x{:x} but the rebuilt tree's is 0x{:x}",
        m.zxid, m.source, m.expected, m.actual
    )
}

/// Loads the newest snapshot that verifies (FileSnap.deserialize). The last value is
/// the text of a digest mismatch at the snapshot's own zxid, if any: not refused here.
/// ZooKeeper writes a snapshot while it applies txns, and the digest it records can
/// miss the last txn whose changes the snapshot already holds; ZooKeeper itself only
/// logs this. [`replay_logs`] settles it: a later txn digest that matches shows the
/// replayed tree is ZooKeeper's.
#[allow(clippy::type_complexity)]
fn load_snapshot(
    files: &Files,
    warnings: &mut Vec<String>,
    report: &mut dyn FnMut(&str),
) -> Result<(ZkTree, i64, PathBuf, Option<String>), ImportError> {
    let mut refusals = Vec::new();
    for (zxid, path) in &files.snapshots {
        if let Some(kind) = compression(path) {
            return Err(ImportError::Refused(format!(
                "{}: compressed snapshot ({kind}); keel reads only uncompressed ones. Start ZooKeeper once with -Dzookeeper.snapshot.compression.method= (empty: uncompressed) so it writes a plain snapshot at start-up, stop it, and import again{}",
                path.display(),
                if kind == "gz" { " (or gunzip this file: the result is a plain snapshot)" } else { "" }
            )));
        }
        let bytes = read(path)?;
        report(&format!(
            "reading {} ({} bytes)",
            path.display(),
            bytes.len()
        ));
        let parsed = snapshot::parse(&bytes, *zxid, &mut |n| {
            report(&format!("  ... {n} znodes read"))
        });
        drop(bytes);
        let snap = match parsed {
            Ok(s) => s,
            Err(m) => {
                let e = ImportError::corrupt(path, m);
                let text = format!("{e}; trying an older snapshot, as ZooKeeper would");
                report(&text);
                warnings.push(text);
                refusals.push(e.to_string());
                continue;
            }
        };
        report(&format!(
            "snapshot 0x{zxid:x}: {} znodes, {} sessions, {} ACL lists{}",
            snap.nodes.len(),
            snap.sessions.len(),
            snap.acls.len(),
            match snap.digest {
                Some(d) => format!(", digest for zxid 0x{:x}", d.zxid),
                None => String::new(),
            }
        ));
        let mut tree = ZkTree::from_snapshot(snap);
        let unconfirmed = match tree.check_loaded_digest() {
            Ok(()) => None,
            Err(m) => {
                let text = mismatch_text(&m, &format!("in {}", path.display()));
                report(&format!("{text}; the txns after it must settle it"));
                warnings.push(format!(
                    "{text} (a snapshot written while txns were applied; later txn digests matched)"
                ));
                Some(text)
            }
        };
        return Ok((tree, *zxid, path.clone(), unconfirmed));
    }
    Err(ImportError::Refused(format!(
        "no valid snapshot: {}",
        refusals.join("; ")
    )))
}

/// Replays every logged txn after the snapshot (FileTxnSnapLog.fastForwardFromEdits).
/// Returns the number of log files read.
///
/// Errors: besides damaged or missing logs, a snapshot digest mismatch (`unconfirmed`,
/// from [`load_snapshot`]) that no later matching txn digest settles, when digests are
/// checked.
fn replay_logs(
    tree: &mut ZkTree,
    snapshot_zxid: i64,
    mut unconfirmed: Option<String>,
    files: &Files,
    opts: &Options,
    warnings: &mut Vec<String>,
    report: &mut dyn FnMut(&str),
) -> Result<usize, ImportError> {
    let mut records = txnlog::RecordsAfter::new(
        snapshot_zxid,
        &files.logs,
        txnlog::max_record_bytes(opts.jute_maxbuffer),
    );
    let mut prev = snapshot_zxid;
    let mut prev_place = format!("snapshot 0x{snapshot_zxid:x}");
    let mut last_report = Instant::now();
    let mut mismatches = 0u64;
    while let Some((path, rec)) = records.next_record(report, warnings)? {
        let z = rec.header.zxid;
        let place = format!("{} offset {}", path.display(), rec.offset);
        if z <= prev {
            return Err(ImportError::Refused(format!(
                "txn 0x{z:x} at {place} is not above the previous txn 0x{prev:x} ({prev_place}): log files overlap or are out of order"
            )));
        }
        if z >> 32 == prev >> 32 && z != prev + 1 {
            return Err(ImportError::Refused(format!(
                "txns 0x{:x}..=0x{:x} are missing: {place} follows {prev_place} (a log file is missing or was cut short)",
                prev + 1,
                z - 1
            )));
        }
        let matched_before = tree.stats().digests_matched;
        let applied = tree.apply(&rec);
        if applied.is_ok() && tree.stats().digests_matched > matched_before {
            unconfirmed = None;
        }
        if let Err(m) = applied {
            let text = mismatch_text(&m, &format!("at {place}"));
            if opts.check_digests {
                return Err(ImportError::Refused(format!(
                    "{text}: the import would not reproduce ZooKeeper's data; refusing (--ignore-digests imports anyway)"
                )));
            }
            mismatches += 1;
            if mismatches == 1 {
                report(&text);
                warnings.push(text);
            }
        }
        prev = z;
        prev_place = place;
        if last_report.elapsed() >= Duration::from_secs(1) {
            last_report = Instant::now();
            report(&format!(
                "  ... {} txns replayed (zxid 0x{z:x}, {} znodes)",
                tree.stats().txns,
                tree.node_count()
            ));
        }
    }
    if mismatches > 1 {
        warnings.push(format!(
            "{mismatches} txn digests in all disagreed with the rebuilt tree"
        ));
    }
    if let Some(text) = unconfirmed.filter(|_| opts.check_digests) {
        return Err(ImportError::Refused(format!(
            "{text}, and no later txn digest in the logs matched the replayed tree; refusing (--ignore-digests imports anyway)"
        )));
    }
    Ok(records.files())
}

/// Imports `opts.zk_data_dir` into a new keel store in `opts.keel_data_dir`. Progress
/// lines go to `report` (the CLI prints them on stderr).
///
/// Errors: see [`ImportError`]; on any error nothing is left in KEEL_DATADIR.
pub fn run(opts: &Options, report: &mut dyn FnMut(&str)) -> Result<Summary, ImportError> {
    let t0 = Instant::now();
    let target = write::Target {
        data_dir: opts.keel_data_dir.clone(),
        log_dir: opts
            .keel_log_dir
            .clone()
            .unwrap_or_else(|| opts.keel_data_dir.clone()),
    };
    // Before reading anything: an existing store is never touched.
    target.check_empty()?;
    let files = locate(opts)?;
    let mut warnings = Vec::new();
    let (mut tree, snapshot_zxid, snapshot, unconfirmed) =
        load_snapshot(&files, &mut warnings, report)?;
    let log_files = replay_logs(
        &mut tree,
        snapshot_zxid,
        unconfirmed,
        &files,
        opts,
        &mut warnings,
        report,
    )?;
    let replayed = tree.finish();
    let (replay, unreachable, dead) = (
        replayed.stats,
        replayed.unreachable,
        replayed.dead_session_ephemerals,
    );
    let last_zxid = replayed.last_zxid;
    report(&format!(
        "replayed {} txns after the snapshot, last zxid 0x{last_zxid:x}, {} digests matched ZooKeeper's; writing {}",
        replay.txns,
        replay.digests_matched,
        target.db().display()
    ));
    let written = write::write_store(replayed, &target, report)?;
    Ok(Summary {
        snapshot,
        snapshot_zxid,
        last_zxid,
        log_files,
        replay,
        written,
        unreachable,
        dead_session_ephemerals: dead,
        warnings,
        elapsed: t0.elapsed(),
    })
}

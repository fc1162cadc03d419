//! A ZooKeeper ensemble member's dataDir as a keel ensemble member's store (issue 17,
//! item 3), so that keel replacing that member rejoins by DIFF rather than SNAP.
//!
//! What a ZooKeeper member restarts from is its newest valid snapshot (zxid Z), the txns
//! logged after it, and its epochs (FileTxnSnapLog.restore, QuorumPeer.loadDataBase).
//! The store made here holds the same: the snapshot at Z in keel's snapshot form, every
//! logged txn after Z as ZooKeeper's own record (the member's txn form), synced; the
//! epoch files stay ZooKeeper's, in `dataDir/version-2`, where [`ZabStore`] reads them.
//! The txns after Z are logged, not applied: the leader commits them after the sync,
//! as it does for a ZooKeeper member. ZooKeeper's snapshot is fuzzy (some of those txns
//! may already be in its tree); the server applies them leniently
//! (`Server::set_lenient_upto`), as ZooKeeper's replay does.
//!
//! The reading and its refusals are [`super`]'s: a damaged dataDir is refused and
//! nothing is written; ZooKeeper's files are only read.

use super::{locate, txnlog, version_dir, write, ImportError, Options};
use crate::server::recovery::encode_snapshot_header;
use crate::storage::zab::{
    encode_snapshot, ZabStore, ACCEPTED_EPOCH_FILE, CURRENT_EPOCH_FILE, SNAP_DIR,
};
use crate::tree::snapshot::encode_nodes;
use crate::zab::wire::txn::encode_payload;
use crate::zab::{Txn, Zxid};
use bytes::BytesMut;
use std::path::{Path, PathBuf};

/// The bytes of a snapshot chunk, as the server writes them.
const CHUNK_BYTES: usize = 1 << 20;
/// Txns handed to the store per append.
const APPEND_BATCH: usize = 1024;

/// What a conversion did.
#[derive(Debug, Clone)]
pub struct Converted {
    /// The snapshot converted, and its zxid Z.
    pub snapshot: PathBuf,
    pub snapshot_zxid: i64,
    /// The last logged zxid (Z when nothing was logged after it).
    pub last_zxid: i64,
    pub znodes: usize,
    pub sessions: usize,
    /// Txns logged after Z, now in keel's log.
    pub logged_txns: usize,
    pub log_files: usize,
    pub warnings: Vec<String>,
}

/// Whether `data_dir` is a ZooKeeper member's dataDir that keel has not converted:
/// `version-2` holds `snapshot.*` files and there is no keel store (`keel-db`).
pub fn needs_conversion(data_dir: &Path) -> bool {
    let v2 = data_dir.join(SNAP_DIR);
    if data_dir.join(crate::storage::rocks::DB_DIR).exists() {
        return false;
    }
    std::fs::read_dir(&v2).is_ok_and(|d| {
        d.flatten().any(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with("snapshot."))
        })
    })
}

/// Converts `opts.zk_data_dir` (and `opts.zk_log_dir`) into a new ensemble member's
/// store in `opts.keel_data_dir` (with its log in `opts.keel_log_dir`, else the data
/// dir). When the two dataDirs differ, ZooKeeper's acceptedEpoch and currentEpoch are
/// copied into `KEEL_DATADIR/version-2` first (as they are); in place they stay.
///
/// Errors: as [`super::run`]'s readers (a missing, damaged or compressed snapshot, a log
/// with a gap or a damaged record), an existing keel store, and storage errors. On an
/// error the keel store made so far is removed again.
pub fn convert(opts: &Options, report: &mut dyn FnMut(&str)) -> Result<Converted, ImportError> {
    let target = write::Target {
        data_dir: opts.keel_data_dir.clone(),
        log_dir: opts
            .keel_log_dir
            .clone()
            .unwrap_or_else(|| opts.keel_data_dir.clone()),
    };
    target.check_empty()?;
    let files = locate(opts)?;
    let mut warnings = Vec::new();
    let (tree, z, snapshot, _unconfirmed) = super::load_snapshot(&files, &mut warnings, report)?;
    let (txns, log_files) = logged_after(z, &files.logs, opts, &mut warnings, report)?;
    let (tree, sessions, _) = write::server_state(tree.finish());
    let mut chunks = vec![encode_snapshot_header(z, &sessions)];
    let mut cursor: Option<String> = None;
    loop {
        let mut buf = BytesMut::with_capacity(CHUNK_BYTES);
        let next = encode_nodes(&tree, cursor.as_deref(), CHUNK_BYTES, &mut buf);
        chunks.push(buf.to_vec());
        match next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    let bytes = encode_snapshot(&chunks);
    drop(chunks);
    copy_epochs(opts)?;
    let result = (|| {
        let mut store = ZabStore::open(&target.data_dir, &target.log_dir, true)?;
        store.try_install_snapshot(z as Zxid, &bytes)?;
        for batch in txns.chunks(APPEND_BATCH) {
            store.try_append(batch)?;
        }
        store.try_sync()?;
        Ok::<(), crate::storage::StorageError>(())
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_dir_all(target.db());
        if target.log_dir != target.data_dir {
            let _ = std::fs::remove_dir_all(target.log_dir.join(crate::storage::rocks::WAL_DIR));
        }
        return Err(e.into());
    }
    Ok(Converted {
        snapshot,
        snapshot_zxid: z,
        last_zxid: txns.last().map_or(z, |t| t.zxid as i64),
        znodes: tree.node_count(),
        sessions: sessions.len(),
        logged_txns: txns.len(),
        log_files,
        warnings,
    })
}

/// Copies ZooKeeper's epoch files into KEEL_DATADIR/version-2 when it is another
/// directory (an existing one there is left alone).
fn copy_epochs(opts: &Options) -> Result<(), ImportError> {
    let from = version_dir(&opts.zk_data_dir);
    let to = opts.keel_data_dir.join(SNAP_DIR);
    if from.canonicalize().ok() == to.canonicalize().ok() {
        return Ok(());
    }
    std::fs::create_dir_all(&to).map_err(|e| ImportError::io(&to, e))?;
    for name in [ACCEPTED_EPOCH_FILE, CURRENT_EPOCH_FILE] {
        let (src, dst) = (from.join(name), to.join(name));
        if src.exists() && !dst.exists() {
            std::fs::copy(&src, &dst).map_err(|e| ImportError::io(&dst, e))?;
        }
    }
    Ok(())
}

/// Every txn logged after `z`, as the member's log records (ZooKeeper's header, record
/// and digest), read as [`super::replay_logs`] reads them ([`txnlog::RecordsAfter`]),
/// zxids rising without a gap within an epoch. Returns them and the log files read.
fn logged_after(
    z: i64,
    logs: &[(i64, PathBuf)],
    opts: &Options,
    warnings: &mut Vec<String>,
    report: &mut dyn FnMut(&str),
) -> Result<(Vec<Txn>, usize), ImportError> {
    let mut records =
        txnlog::RecordsAfter::new(z, logs, txnlog::max_record_bytes(opts.jute_maxbuffer));
    let mut out = Vec::new();
    let mut prev = z;
    while let Some((path, rec)) = records.next_record(report, warnings)? {
        let zx = rec.header.zxid;
        // As a member's start requires of its log (member::ensemble's refuse_a_hole):
        // the next counter of an epoch, or the first of a later one.
        if !crate::zab::log::follows(prev as Zxid, zx as Zxid) {
            return Err(ImportError::Refused(format!(
                "txn 0x{zx:x} at {} offset {} does not follow 0x{prev:x}: a log file is missing, cut short, or out of order, or the ZooKeeper member missed the txns between",
                path.display(),
                rec.offset
            )));
        }
        let data = encode_payload(&rec.header, &rec.txn, rec.digest).map_err(|e| {
            ImportError::Refused(format!(
                "txn 0x{zx:x} at {} offset {}: {e}",
                path.display(),
                rec.offset
            ))
        })?;
        out.push(Txn {
            zxid: zx as Zxid,
            data,
        });
        prev = zx;
    }
    Ok((out, records.files()))
}

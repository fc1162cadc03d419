//! Recovery: rebuild the state machine from storage (latest snapshot + the txns after
//! it), and the snapshot header encoding.
//!
//! Snapshots are fuzzy (written in steps while txns keep applying), so replay is
//! lenient: a create over an existing znode replaces it, a delete of a missing znode is
//! a no-op. Every txn carries absolute values (versions, the parent's create count), so
//! replaying txns the snapshot already reflects converges on the same state, as with
//! ZooKeeper's fuzzy snapshots.

use super::txn::{Txn, TxnOp};
use super::{Server, Settings, StorageOp};
use crate::session::SessionTracker;
use crate::storage::{Storage, StorageError};
use crate::tree::{snapshot as tree_snapshot, DataTree};
use bytes::BufMut;
use jute::Decoder;
use std::collections::HashMap;
use std::path::Path;

const MAGIC: &[u8; 8] = b"KEELSNAP";
const SNAPSHOT_VERSION: u32 = 1;

/// Chunk 0 of a snapshot: magic, version, zxid, then every session (id, timeout ms,
/// password).
pub fn encode_snapshot_header(zxid: i64, sessions: &SessionTracker) -> Vec<u8> {
    let mut b = Vec::with_capacity(24 + sessions.len() * 28);
    b.put_slice(MAGIC);
    b.put_u32(SNAPSHOT_VERSION);
    b.put_i64(zxid);
    b.put_u32(sessions.len() as u32);
    for s in sessions.iter() {
        b.put_i64(s.id);
        b.put_i32(s.timeout_ms);
        b.put_slice(&s.passwd);
    }
    b
}

/// A session as a snapshot header holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotSession {
    /// The session id.
    pub id: i64,
    /// Its negotiated timeout, ms.
    pub timeout_ms: i32,
    /// Its password.
    pub passwd: [u8; 16],
}

/// Reads chunk 0 of a snapshot ([`encode_snapshot_header`]): its zxid and sessions.
///
/// Errors: what is wrong (not keel's magic or version, a truncated record).
pub fn decode_snapshot_header(chunk: &[u8]) -> Result<(i64, Vec<SnapshotSession>), String> {
    let mut d = Decoder::new(chunk);
    let bad = |e: jute::JuteError| e.to_string();
    let mut magic = [0u8; 8];
    for m in magic.iter_mut() {
        *m = d.bool_byte().map_err(bad)?;
    }
    let version = d.int().map_err(bad)? as u32;
    if &magic != MAGIC || version != SNAPSHOT_VERSION {
        return Err("not a keel snapshot of a known version".into());
    }
    let zxid = d.long().map_err(bad)?;
    let count = d.int().map_err(bad)?;
    let mut sessions = Vec::with_capacity(count.clamp(0, 1 << 16) as usize);
    for _ in 0..count {
        let id = d.long().map_err(bad)?;
        let timeout_ms = d.int().map_err(bad)?;
        let mut passwd = [0u8; 16];
        for p in passwd.iter_mut() {
            *p = d.bool_byte().map_err(bad)?;
        }
        sessions.push(SnapshotSession {
            id,
            timeout_ms,
            passwd,
        });
    }
    Ok((zxid, sessions))
}

fn corrupt(db: &Path, position: String, what: impl ToString) -> StorageError {
    StorageError::Corrupt {
        path: db.to_path_buf(),
        position,
        what: what.to_string(),
    }
}

/// Figures from a recovery, for the log.
#[derive(Debug, Default, Clone, Copy)]
pub struct RecoveryStats {
    pub snapshot_zxid: Option<i64>,
    pub znodes: usize,
    pub sessions: usize,
    pub txns_replayed: u64,
}

impl Server {
    /// Rebuilds a server from `storage` (`db` names it in errors): the newest complete
    /// snapshot, then every logged txn after it. Restored sessions get a full timeout
    /// from `now_ms`, as ZooKeeper's do after a restart; one whose client does not come
    /// back expires then, removing its ephemerals.
    ///
    /// Errors: [`StorageError::Corrupt`] naming the snapshot chunk or log record that
    /// does not decode, or a gap in the log's zxids.
    pub fn recover(
        settings: Settings,
        storage: &dyn Storage,
        db: &Path,
        now_ms: i64,
        seed: u64,
    ) -> Result<(Server, RecoveryStats), StorageError> {
        let mut server = Server::new(settings, 0, now_ms, seed);
        let mut stats = RecoveryStats::default();
        // Timed by the runtime (member::recover logs the read and reopen times): the
        // state machine reads no clock.
        let latest = storage.latest_snapshot()?;
        if let Some(snap) = latest {
            let pos = |i: usize| format!("snapshot 0x{:x} chunk {i}", snap.zxid);
            let header = snap
                .chunks
                .first()
                .ok_or_else(|| corrupt(db, pos(0), "no header chunk"))?;
            let (zxid, sessions) =
                decode_snapshot_header(header).map_err(|e| corrupt(db, pos(0), e))?;
            if zxid != snap.zxid {
                return Err(corrupt(db, pos(0), "header zxid disagrees with the key"));
            }
            for s in sessions {
                server.sessions.add(s.id, s.timeout_ms, s.passwd, now_ms);
            }
            let mut tree = DataTree::empty();
            let mut acls = HashMap::new();
            for (i, chunk) in snap.chunks.iter().enumerate().skip(1) {
                tree_snapshot::decode_nodes(&mut tree, chunk, &mut acls)
                    .map_err(|e| corrupt(db, pos(i), e))?;
            }
            tree.recount_quotas();
            tracing::debug!(znodes = tree.node_count(), "snapshot loaded");
            server.tree = tree;
            server.last_zxid = snap.zxid;
            stats.snapshot_zxid = Some(snap.zxid);
        }
        server.replaying = true;
        storage.read_log(server.last_zxid, &mut |entry| {
            let txn = Txn::decode(&entry.data)
                .map_err(|e| corrupt(db, format!("log record zxid 0x{:x}", entry.zxid), e))?;
            if txn.zxid != entry.zxid {
                return Err(corrupt(
                    db,
                    format!("log record zxid 0x{:x}", entry.zxid),
                    "record holds another zxid",
                ));
            }
            let last = server.last_zxid;
            let same_epoch = (txn.zxid >> 32) == (last >> 32);
            if same_epoch && txn.zxid != last + 1 {
                return Err(corrupt(
                    db,
                    format!("log record zxid 0x{:x}", entry.zxid),
                    format!("txns missing after 0x{last:x}"),
                ));
            }
            server.last_zxid = txn.zxid;
            server.apply(&txn);
            stats.txns_replayed += 1;
            Ok(())
        })?;
        server.replaying = false;
        server.proposed_zxid = server.last_zxid;
        server.remove_orphan_ephemerals(now_ms);
        let ids: Vec<i64> = server.sessions.iter().map(|s| s.id).collect();
        for id in ids {
            server.sessions.touch(id, None, now_ms);
        }
        stats.znodes = server.tree.node_count();
        stats.sessions = server.sessions.len();
        Ok((server, stats))
    }

    /// Replaces the applied state with a snapshot's (an ensemble member's SNAP): the
    /// tree, the sessions (each with a full timeout from now, as after a restart) and
    /// the applied zxid. Call while not serving (syncing): no client is attached, so
    /// nothing waits on the state replaced.
    pub fn restore(&mut self, zxid: i64, tree: DataTree, sessions: &[SnapshotSession]) {
        let old: Vec<i64> = self.sessions.iter().map(|s| s.id).collect();
        for id in old {
            self.sessions.remove(id);
        }
        for s in sessions {
            self.sessions.add(s.id, s.timeout_ms, s.passwd, self.now_ms);
        }
        self.tree = tree;
        self.last_zxid = zxid;
        self.proposed_zxid = zxid;
        self.pending.clear();
        self.outstanding.clear();
        self.outstanding_paths.clear();
        // A snapshot of the replaced state under way stops here, its chunks not yet
        // handed to storage with it: its steps would go on over the new tree from the
        // old cursor and mark it complete without the chunks the install deletes (or,
        // at the install's own zxid, write over the installed ones).
        self.snapshot = None;
        self.storage_ops.retain(|op| {
            !matches!(
                op,
                StorageOp::SnapshotChunk { .. } | StorageOp::SnapshotDone { .. }
            )
        });
        self.restart_snapshot_count();
    }

    /// Removes every ephemeral whose owner session is not in the session table, as
    /// ZooKeeper does when it loads its database (ZooKeeperServer.loadData kills the
    /// sessions that own ephemerals but have no timeout). Such a store comes from keel
    /// before issue 14, which could apply a create behind its session's close. The
    /// removal is a closeSession txn per dead session, applied at once and queued for
    /// the log, so the next start replays it (if it is lost, that start finds the same
    /// orphans and removes them again).
    fn remove_orphan_ephemerals(&mut self, now_ms: i64) {
        let mut dead: Vec<(i64, Vec<String>)> = self
            .tree
            .all_ephemerals()
            .iter()
            .filter(|(id, paths)| self.sessions.get(**id).is_none() && !paths.is_empty())
            .map(|(id, paths)| (*id, paths.iter().cloned().collect()))
            .collect();
        dead.sort_unstable();
        for (session_id, ephemerals) in dead {
            tracing::warn!(
                session = format!("0x{session_id:x}"),
                count = ephemerals.len(),
                paths = ?ephemerals,
                "removing ephemerals whose session no longer exists"
            );
            self.last_zxid += 1;
            self.proposed_zxid = self.last_zxid;
            let txn = Txn {
                zxid: self.last_zxid,
                time_ms: now_ms,
                session_id,
                cxid: 0,
                op: TxnOp::CloseSession { ephemerals },
            };
            self.apply(&txn);
            if self.settings.durable {
                self.storage_ops.push(StorageOp::Append(txn));
            }
        }
    }
}

//! ZooKeeper's DataTree as its own start-up rebuilds it: load a (fuzzy) snapshot, then
//! apply the logged txns after it with DataTree.processTxn's rules, then drop the
//! ephemerals of sessions that no longer exist (ZooKeeperServer.loadData). Keeping
//! ZooKeeper's rules, rather than keel's, is what makes the imported tree the one
//! ZooKeeper itself would serve after a restart.
//!
//! The rules that matter for a fuzzy snapshot (DataTree.createNode, deleteNode,
//! processTxn, setCversionPzxid):
//! - A create over an existing znode fails with NODEEXISTS and only replaces its ACL;
//!   for a plain `create` (opcode 1) the parent's cversion and pzxid are then raised to
//!   the txn's if higher.
//! - A create raises the parent's cversion (create count) and pzxid only if the txn's
//!   parentCVersion is higher than the stored one (-1 means stored + 1).
//! - A delete moves the parent's pzxid forward even if the child is already gone; a
//!   znode deleted with children leaves them in the node table, unreachable (they are
//!   left out of the import, as out of ZooKeeper's next snapshot).
//! - Failed txns (NONODE, NODEEXISTS) are skipped.
//! - Quota usage (`/zookeeper/quota/<path>/zookeeper_stats`) is recounted after the
//!   snapshot loads and then updated by each change (DataTree.setupQuota,
//!   updateQuotaStat).
//!
//! The tree digest (DigestCalculator, NodeHashMapImpl, AdHash: the sum of a CRC-32 over
//! each znode's path, data and Stat, znodes under `/zookeeper/` excluded) is kept as
//! ZooKeeper keeps it, so the digests ZooKeeper 3.6+ wrote into its snapshot and log
//! can be compared with ours: a match means this tree is ZooKeeper's, znode for znode.

use super::node::ZkNode;
use super::snapshot::{SnapshotDigest, ZkSnapshot};
use super::txnlog::{Txn, TxnRecord};
use crate::proto::opcode as op;
use crate::proto::ErrorCode;
use crate::tree::quota::{StatsTrack, LIMIT_NODE, QUOTA_ROOT, STAT_NODE};
use crate::tree::{digest, path, Owner};
use bytes::Bytes;
use jute::Acl;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

pub use crate::tree::digest::DIGEST_VERSION;

/// ZooKeeper's tree digest and ours disagree after a txn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestMismatch {
    /// The txn after which they were compared.
    pub zxid: i64,
    /// What ZooKeeper recorded (in the snapshot or the txn's log record).
    pub expected: i64,
    /// The digest of the tree rebuilt here.
    pub actual: i64,
    /// "snapshot" or "log".
    pub source: &'static str,
}

/// Figures from a replay, for the summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplayStats {
    /// Txns applied.
    pub txns: u64,
    /// Ops that failed as ZooKeeper's replay lets them fail (NONODE, NODEEXISTS), which a
    /// fuzzy snapshot makes normal.
    pub skipped_ops: u64,
    /// Digests compared and found equal.
    pub digests_matched: u64,
}

/// A DataTree plus the session table, with ZooKeeper's replay rules.
#[derive(Debug)]
pub struct ZkTree {
    /// Every znode by path ("/" is the root); `child_creates` is ZooKeeper's stored
    /// cversion. May hold unreachable znodes (see the module documentation).
    nodes: BTreeMap<String, ZkNode>,
    /// Ephemeral paths by owning session (DataTree.ephemerals: no containers or TTLs).
    ephemerals: HashMap<i64, BTreeSet<String>>,
    /// Paths that have a quota (DataTree.pTrie).
    quota_paths: BTreeSet<String>,
    /// Distinct ACL lists, shared.
    acls: HashMap<Vec<Acl>, Arc<Vec<Acl>>>,
    /// Session id -> timeout ms.
    sessions: BTreeMap<i64, i32>,
    /// ZooKeeper's tree digest (AdHash), wrapping.
    digest: i64,
    /// The last zxid applied (the snapshot's until a txn applies).
    last_zxid: i64,
    /// The snapshot's digest while the replay is still inside the snapshot's fuzzy range
    /// (DataTree.digestFromLoadedSnapshot); txn digests are compared only after it.
    snapshot_digest: Option<SnapshotDigest>,
    stats: ReplayStats,
}

/// The rebuilt state, ready to be written in keel's format.
#[derive(Debug)]
pub struct Replayed {
    /// Every reachable znode, in path order, children linked.
    pub nodes: BTreeMap<String, ZkNode>,
    /// Session id -> timeout ms.
    pub sessions: BTreeMap<i64, i32>,
    pub last_zxid: i64,
    pub stats: ReplayStats,
    /// Unreachable znodes left out.
    pub unreachable: usize,
    /// Ephemerals removed because their session no longer exists.
    pub dead_session_ephemerals: usize,
}

/// ZooKeeper's digest of one znode ([`crate::tree::digest::node_digest`]).
pub fn node_digest(path: &str, n: &ZkNode) -> i64 {
    digest::node_digest(path.as_bytes(), n.data.as_deref().unwrap_or(&[]), &n.meta())
}

/// Ephemeral owner as DataTree indexes it: sessions only.
fn session_owner(raw: i64) -> Option<i64> {
    match Owner::from_raw(raw) {
        Owner::Session(s) => Some(s),
        _ => None,
    }
}

impl ZkTree {
    /// Loads a snapshot as DataTree.deserialize does, then recounts quota usage
    /// (setupQuota). Call [`ZkTree::check_loaded_digest`] next.
    pub fn from_snapshot(snap: ZkSnapshot) -> ZkTree {
        let mut t = ZkTree {
            nodes: snap.nodes,
            ephemerals: HashMap::new(),
            quota_paths: BTreeSet::new(),
            acls: snap.acls,
            sessions: snap.sessions.into_iter().collect(),
            digest: 0,
            last_zxid: snap.zxid,
            snapshot_digest: None,
            stats: ReplayStats::default(),
        };
        let mut limits = Vec::new();
        let leaf_limit = format!("/{LIMIT_NODE}");
        for (p, n) in &t.nodes {
            t.digest = t.digest.wrapping_add(node_digest(p, n));
            if let Some(s) = session_owner(n.ephemeral_owner) {
                t.ephemerals.entry(s).or_default().insert(p.clone());
            }
            if p.starts_with(QUOTA_ROOT) && p.ends_with(&leaf_limit) && n.children.is_empty() {
                if let Some(i) = p.find(&leaf_limit) {
                    limits.push(p[QUOTA_ROOT.len()..i].to_string());
                }
            }
        }
        for real in limits {
            t.update_quota_for_path(&real);
            if !real.is_empty() {
                t.quota_paths.insert(real);
            }
        }
        // ZooKeeper ignores a digest older than the snapshot (DataTree.deserializeZxidDigest).
        t.snapshot_digest = snap.digest.filter(|d| d.zxid > 0 && d.zxid >= snap.zxid);
        t
    }

    /// Compares the snapshot's digest now if it is for the snapshot's own zxid (a
    /// snapshot nothing changed during, FileSnap.deserialize); otherwise the comparison
    /// happens when replay reaches its zxid.
    ///
    /// Errors: the snapshot's digest does not match its znodes.
    pub fn check_loaded_digest(&mut self) -> Result<(), DigestMismatch> {
        self.check_snapshot_digest(self.last_zxid)
    }

    /// Figures so far.
    pub fn stats(&self) -> ReplayStats {
        self.stats
    }

    /// The last zxid applied.
    pub fn last_zxid(&self) -> i64 {
        self.last_zxid
    }

    /// Number of znodes (unreachable ones included).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// ZooKeeper's digest of the whole tree.
    pub fn digest(&self) -> i64 {
        self.digest
    }

    /// Applies one logged txn (FileTxnSnapLog.processTransaction, then
    /// DataTree.compareDigest). The txn applies even when the digest comparison fails.
    ///
    /// Errors: the digest ZooKeeper recorded for this point disagrees with ours.
    pub fn apply(&mut self, rec: &TxnRecord) -> Result<(), DigestMismatch> {
        let h = &rec.header;
        match &rec.txn {
            Txn::CreateSession { timeout_ms } => {
                self.sessions.insert(h.session_id, *timeout_ms);
            }
            Txn::CloseSession { paths } => {
                self.sessions.remove(&h.session_id);
                self.kill_session(h.session_id, h.zxid, paths.as_deref());
            }
            Txn::Multi(ops) => {
                if !ops.iter().any(|o| matches!(o, Txn::Error { .. })) {
                    for o in ops {
                        self.apply_op(o, h.zxid, h.time_ms);
                    }
                }
            }
            other => self.apply_op(other, h.zxid, h.time_ms),
        }
        self.stats.txns += 1;
        self.last_zxid = self.last_zxid.max(h.zxid);
        self.check_snapshot_digest(h.zxid)?;
        if self.snapshot_digest.is_none() {
            if let Some(d) = rec.digest {
                if d.version == DIGEST_VERSION {
                    if d.tree_digest != self.digest {
                        return Err(DigestMismatch {
                            zxid: h.zxid,
                            expected: d.tree_digest,
                            actual: self.digest,
                            source: "log",
                        });
                    }
                    self.stats.digests_matched += 1;
                }
            }
        }
        Ok(())
    }

    /// DataTree.compareSnapshotDigests: at the snapshot digest's zxid, compare once.
    fn check_snapshot_digest(&mut self, zxid: i64) -> Result<(), DigestMismatch> {
        let Some(d) = self.snapshot_digest else {
            return Ok(());
        };
        if zxid != d.zxid {
            return Ok(());
        }
        self.snapshot_digest = None;
        if d.version != DIGEST_VERSION {
            return Ok(());
        }
        if d.digest != self.digest {
            return Err(DigestMismatch {
                zxid,
                expected: d.digest,
                actual: self.digest,
                source: "snapshot",
            });
        }
        self.stats.digests_matched += 1;
        Ok(())
    }

    /// One op of a txn (DataTree.processTxn for a single record); failures are skipped.
    fn apply_op(&mut self, o: &Txn, zxid: i64, time_ms: i64) {
        let r = match o {
            Txn::Create {
                kind,
                path,
                data,
                acl,
                owner,
                parent_cversion,
            } => {
                let r = self.create_node(
                    path,
                    data.clone(),
                    acl,
                    *owner,
                    *parent_cversion,
                    zxid,
                    time_ms,
                );
                if *kind == op::CREATE && r == Err(ErrorCode::NodeExists) {
                    // processTxn: a child deleted and re-created by another session in
                    // the fuzzy range leaves the parent behind; catch it up.
                    let _ = self.set_cversion_pzxid(path::split(path).0, *parent_cversion, zxid);
                }
                r
            }
            Txn::Delete { path } => self.delete_node(path, zxid),
            Txn::SetData {
                path,
                data,
                version,
            } => self.set_data(path, data.clone(), *version, zxid, time_ms),
            Txn::SetAcl { path, acl, version } => self.set_acl(path, acl, *version),
            Txn::Check { .. } | Txn::Error { .. } => Ok(()),
            Txn::CreateSession { .. } | Txn::CloseSession { .. } | Txn::Multi(_) => Ok(()),
        };
        if r.is_err() {
            self.stats.skipped_ops += 1;
        }
    }

    fn intern(&mut self, acl: &[Acl]) -> Arc<Vec<Acl>> {
        if let Some(a) = self.acls.get(acl) {
            return a.clone();
        }
        let a = Arc::new(acl.to_vec());
        self.acls.insert(acl.to_vec(), a.clone());
        a
    }

    /// Changes a znode in place, keeping the digest (NodeHashMap preChange/postChange).
    fn modify(&mut self, p: &str, f: impl FnOnce(&mut ZkNode)) -> Result<(), ErrorCode> {
        let n = self.nodes.get_mut(p).ok_or(ErrorCode::NoNode)?;
        let before = node_digest(p, n);
        f(n);
        let after = node_digest(p, n);
        self.digest = self.digest.wrapping_sub(before).wrapping_add(after);
        Ok(())
    }

    /// Removes a znode from the table and the indexes.
    fn remove(&mut self, p: &str) -> Option<ZkNode> {
        let n = self.nodes.remove(p)?;
        self.digest = self.digest.wrapping_sub(node_digest(p, &n));
        if let Some(s) = session_owner(n.ephemeral_owner) {
            if let Some(set) = self.ephemerals.get_mut(&s) {
                set.remove(p);
            }
        }
        Some(n)
    }

    /// DataTree.createNode.
    #[allow(clippy::too_many_arguments)]
    fn create_node(
        &mut self,
        p: &str,
        data: Option<Bytes>,
        acl: &[Acl],
        owner: i64,
        parent_cversion: i32,
        zxid: i64,
        time_ms: i64,
    ) -> Result<(), ErrorCode> {
        if p == "/" || !p.starts_with('/') {
            return Err(ErrorCode::BadArguments);
        }
        let (parent, name) = path::split(p);
        if !self.nodes.contains_key(parent) {
            return Err(ErrorCode::NoNode);
        }
        let acl = self.intern(acl);
        if let Some(existing) = self.nodes.get_mut(p) {
            // ACLs are not part of the digest.
            existing.acl = acl;
            return Err(ErrorCode::NodeExists);
        }
        self.modify(parent, |pn| {
            let cv = if parent_cversion == -1 {
                pn.child_creates.wrapping_add(1)
            } else {
                parent_cversion
            };
            if cv > pn.child_creates {
                pn.child_creates = cv;
                pn.pzxid = zxid;
            }
            pn.children.insert(name.into());
        })?;
        let bytes = data.as_ref().map_or(0, Bytes::len) as i64;
        let node = ZkNode::new(data, acl, owner, zxid, time_ms);
        self.digest = self.digest.wrapping_add(node_digest(p, &node));
        if let Some(s) = session_owner(owner) {
            self.ephemerals.entry(s).or_default().insert(p.to_string());
        }
        self.nodes.insert(p.to_string(), node);
        if let Some(real) = parent.strip_prefix(QUOTA_ROOT) {
            if name == LIMIT_NODE && !real.is_empty() {
                self.quota_paths.insert(real.to_string());
            }
            if name == STAT_NODE {
                let real = real.to_string();
                self.update_quota_for_path(&real);
            }
        }
        if let Some(prefix) = self.max_quota_prefix(p) {
            self.update_quota_stat(&prefix, bytes, 1);
        }
        Ok(())
    }

    /// DataTree.deleteNode. Children are not checked (prep did that when ZooKeeper
    /// first ran the txn); any are left unreachable, as in ZooKeeper.
    fn delete_node(&mut self, p: &str, zxid: i64) -> Result<(), ErrorCode> {
        let (parent, name) = path::split(p);
        if p == "/" || !self.nodes.contains_key(parent) {
            return Err(ErrorCode::NoNode);
        }
        self.modify(parent, |pn| {
            pn.children.remove(name);
            if zxid > pn.pzxid {
                pn.pzxid = zxid;
            }
        })?;
        let node = self.remove(p).ok_or(ErrorCode::NoNode)?;
        if parent.starts_with(QUOTA_ROOT) && name == LIMIT_NODE {
            self.quota_paths.remove(&parent[QUOTA_ROOT.len()..]);
        }
        if let Some(prefix) = self.max_quota_prefix(p) {
            self.update_quota_stat(&prefix, -(node.data_len() as i64), -1);
        }
        Ok(())
    }

    /// DataTree.setData.
    fn set_data(
        &mut self,
        p: &str,
        data: Option<Bytes>,
        version: i32,
        zxid: i64,
        time_ms: i64,
    ) -> Result<(), ErrorCode> {
        let new_len = data.as_ref().map_or(0, Bytes::len) as i64;
        let mut old_len = 0;
        self.modify(p, |n| {
            old_len = n.data_len() as i64;
            n.data = data;
            n.mtime = time_ms;
            n.mzxid = zxid;
            n.version = version;
        })?;
        if let Some(prefix) = self.max_quota_prefix(p) {
            self.update_quota_stat(&prefix, new_len - old_len, 0);
        }
        Ok(())
    }

    /// DataTree.setACL.
    fn set_acl(&mut self, p: &str, acl: &[Acl], version: i32) -> Result<(), ErrorCode> {
        let acl = self.intern(acl);
        self.modify(p, |n| {
            n.aversion = version;
            n.acl = acl;
        })
    }

    /// DataTree.setCversionPzxid.
    fn set_cversion_pzxid(&mut self, p: &str, cversion: i32, zxid: i64) -> Result<(), ErrorCode> {
        let p = if p.len() > 1 {
            p.trim_end_matches('/')
        } else {
            p
        };
        let current = self.nodes.get(p).ok_or(ErrorCode::NoNode)?.child_creates;
        let cv = if cversion == -1 {
            current.wrapping_add(1)
        } else {
            cversion
        };
        if cv > current {
            self.modify(p, |n| {
                n.child_creates = cv;
                n.pzxid = zxid;
            })?;
        }
        Ok(())
    }

    /// DataTree.killSession: deletes the paths the closeSession txn names, then any
    /// other ephemeral the session still owns.
    fn kill_session(&mut self, session: i64, zxid: i64, in_txn: Option<&[String]>) {
        let local = self.ephemerals.remove(&session).unwrap_or_default();
        if let Some(paths) = in_txn {
            for p in paths {
                if self.delete_node(p, zxid).is_err() {
                    self.stats.skipped_ops += 1;
                }
            }
        }
        for p in local {
            if in_txn.is_some_and(|paths| paths.contains(&p)) {
                continue;
            }
            if self.delete_node(&p, zxid).is_err() {
                self.stats.skipped_ops += 1;
            }
        }
    }

    /// DataTree.getMaxPrefixWithQuota: the deepest quota'd path at or above `p`.
    fn max_quota_prefix(&self, p: &str) -> Option<String> {
        if self.quota_paths.is_empty() {
            return None;
        }
        let mut cur = p;
        loop {
            if cur.is_empty() || cur == "/" {
                return None;
            }
            if self.quota_paths.contains(cur) {
                return Some(cur.to_string());
            }
            cur = path::split(cur).0;
        }
    }

    /// DataTree.updateQuotaStat: adds to the usage in the stats node, if there is one.
    fn update_quota_stat(&mut self, prefix: &str, bytes_diff: i64, count_diff: i64) {
        let stat_path = format!("{QUOTA_ROOT}{prefix}/{STAT_NODE}");
        let _ = self.modify(&stat_path, |n| {
            let mut t = StatsTrack::parse(n.data_bytes());
            t.count += count_diff;
            t.bytes += bytes_diff;
            n.data = Some(Bytes::from(t.render()));
        });
    }

    /// DataTree.updateQuotaForPath: recounts the subtree at `real` into its stats node.
    fn update_quota_for_path(&mut self, real: &str) {
        let (mut count, mut bytes) = (0i64, 0i64);
        // getCounts walks `path + "/" + child`, iteratively here so depth is no limit.
        let mut stack = vec![real.to_string()];
        while let Some(p) = stack.pop() {
            let Some(n) = self.nodes.get(&p) else {
                continue;
            };
            count += 1;
            bytes += n.data_len() as i64;
            for c in &n.children {
                stack.push(format!("{p}/{c}"));
            }
        }
        let stat_path = format!("{QUOTA_ROOT}{real}/{STAT_NODE}");
        let text = StatsTrack {
            count,
            bytes,
            extra: Vec::new(),
        }
        .render();
        let _ = self.modify(&stat_path, |n| n.data = Some(Bytes::from(text)));
    }

    /// Ends the replay as ZooKeeperServer.loadData does: ephemerals whose session is no
    /// longer in the session table are deleted at the last zxid. Then leaves out
    /// unreachable znodes and adds `/zookeeper/config` if an old snapshot lacked it
    /// (DataTree.addConfigNode: empty, world-readable, aclVersion -1).
    pub fn finish(mut self) -> Replayed {
        let dead: Vec<i64> = self
            .ephemerals
            .iter()
            .filter(|(s, paths)| !paths.is_empty() && !self.sessions.contains_key(*s))
            .map(|(s, _)| *s)
            .collect();
        let mut dead_session_ephemerals = 0;
        for s in dead {
            dead_session_ephemerals += self.ephemerals.get(&s).map_or(0, BTreeSet::len);
            self.kill_session(s, self.last_zxid, None);
        }
        // Path order puts a parent before its children, so one pass finds every znode
        // not linked from the root.
        let mut unreachable: BTreeSet<String> = BTreeSet::new();
        for (p, _) in self.nodes.iter() {
            if p == "/" {
                continue;
            }
            let (parent, name) = path::split(p);
            let linked = !unreachable.contains(parent)
                && self
                    .nodes
                    .get(parent)
                    .is_some_and(|pn| pn.children.contains(name));
            if !linked {
                unreachable.insert(p.clone());
            }
        }
        for p in &unreachable {
            self.nodes.remove(p);
        }
        if !self.nodes.contains_key("/zookeeper/config") {
            if let Some(zk) = self.nodes.get_mut("/zookeeper") {
                zk.children.insert("config".into());
                let read = Arc::new(vec![Acl {
                    perms: op::perm::READ,
                    id: jute::Id {
                        scheme: "world".into(),
                        id: "anyone".into(),
                    },
                }]);
                let mut config = ZkNode::new(Some(Bytes::new()), read, 0, 0, 0);
                config.aversion = -1;
                self.nodes.insert("/zookeeper/config".into(), config);
            }
        }
        Replayed {
            nodes: self.nodes,
            sessions: self.sessions,
            last_zxid: self.last_zxid,
            stats: self.stats,
            unreachable: unreachable.len(),
            dead_session_ephemerals,
        }
    }
}

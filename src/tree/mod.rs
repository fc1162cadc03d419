//! The DataTree: every znode by path, ephemerals by session, containers, TTL nodes and
//! quotas. Pure data: mutations take the zxid and time as inputs and do no I/O.
//!
//! Mutations here are the *apply* half of a txn: the server validated them in prep, so
//! a failure here means the txn log and the tree disagree (an internal error).

pub mod acl;
pub mod path;
pub mod quota;
pub mod snapshot;
pub mod znode;

use crate::proto::ErrorCode;
use bytes::Bytes;
use jute::{Acl, Id, Stat};
use quota::StatsTrack;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
pub use znode::{Owner, Znode};

/// The tree of znodes.
#[derive(Debug)]
pub struct DataTree {
    /// Kept in path order so a snapshot can walk it in resumable steps, and a parent
    /// always comes before its descendants.
    /// Each znode is boxed: keys are inserted mostly in order (sequential names, bulk
    /// loads), which leaves B-tree nodes about half full, so small slots (a pointer, not
    /// the whole znode) waste far less memory.
    nodes: BTreeMap<String, Box<Znode>>,
    /// Paths of ephemeral znodes, by owning session id.
    ephemerals: HashMap<i64, BTreeSet<String>>,
    /// Paths of container znodes.
    containers: BTreeSet<String>,
    /// Paths of TTL znodes.
    ttls: BTreeSet<String>,
    /// Paths that have a quota (a `zookeeper_limits` node).
    quota_paths: BTreeSet<String>,
    /// Sum of path lengths and data lengths, ZooKeeper's approximate data size.
    approximate_data_size: i64,
    /// Every distinct ACL in use, shared by all znodes that carry it (ZooKeeper's
    /// ReferenceCountedACLCache): most trees use a handful of ACLs, and one copy per
    /// znode would cost more than a small znode's data.
    acls: HashSet<Arc<Vec<Acl>>>,
    /// Cache size at which ACLs no znode uses any more are dropped.
    acls_purge_at: usize,
}

/// The ACL cache never purges below this many entries.
const ACL_CACHE_MIN_PURGE: usize = 1024;

impl Default for DataTree {
    fn default() -> Self {
        Self::new()
    }
}

impl DataTree {
    /// A tree with ZooKeeper's system nodes: `/`, `/zookeeper`, `/zookeeper/quota` and
    /// `/zookeeper/config` (read-only to everyone, aclVersion -1), all with zero Stats.
    pub fn new() -> DataTree {
        let open = Arc::new(acl::open_acl());
        let mut t = DataTree {
            nodes: BTreeMap::new(),
            ephemerals: HashMap::new(),
            containers: BTreeSet::new(),
            ttls: BTreeSet::new(),
            quota_paths: BTreeSet::new(),
            approximate_data_size: 0,
            acls: HashSet::new(),
            acls_purge_at: ACL_CACHE_MIN_PURGE,
        };
        let open = t.intern_acl(open);
        let system = |acl: &Arc<Vec<Acl>>| Znode::new(Some(Bytes::new()), acl.clone(), 0, 0, 0);
        let mut root = system(&open);
        root.children.insert("zookeeper".into());
        let mut zk = system(&open);
        zk.children.insert("quota".into());
        zk.children.insert("config".into());
        let read_only = Arc::new(vec![Acl {
            perms: crate::proto::opcode::perm::READ,
            id: Id {
                scheme: "world".into(),
                id: "anyone".into(),
            },
        }]);
        let read_only = t.intern_acl(read_only);
        let mut config = system(&read_only);
        config.aversion = -1;
        t.nodes.insert("/".into(), Box::new(root));
        t.nodes.insert("/zookeeper".into(), Box::new(zk));
        t.nodes
            .insert("/zookeeper/quota".into(), Box::new(system(&open)));
        t.nodes.insert("/zookeeper/config".into(), Box::new(config));
        t.approximate_data_size = t.nodes.keys().map(|p| p.len() as i64).sum();
        t
    }

    /// The znode at `path`.
    pub fn get(&self, path: &str) -> Option<&Znode> {
        self.nodes.get(path).map(|n| &**n)
    }

    /// Number of znodes, the system nodes included.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Sum of path and data lengths.
    pub fn approximate_data_size(&self) -> i64 {
        self.approximate_data_size
    }

    /// Ephemeral paths owned by `session`, sorted.
    pub fn ephemerals(&self, session: i64) -> impl Iterator<Item = &String> {
        self.ephemerals.get(&session).into_iter().flatten()
    }

    /// Every session that owns ephemerals, with their paths.
    pub fn all_ephemerals(&self) -> &HashMap<i64, BTreeSet<String>> {
        &self.ephemerals
    }

    /// Total number of ephemeral znodes.
    pub fn ephemeral_count(&self) -> usize {
        self.ephemerals.values().map(BTreeSet::len).sum()
    }

    /// Container paths.
    pub fn containers(&self) -> &BTreeSet<String> {
        &self.containers
    }

    /// TTL node paths.
    pub fn ttls(&self) -> &BTreeSet<String> {
        &self.ttls
    }

    /// Number of znodes strictly below `path`.
    pub fn descendant_count(&self, path: &str) -> usize {
        let Some(node) = self.nodes.get(path) else {
            return 0;
        };
        node.children
            .iter()
            .map(|c| 1 + self.descendant_count(&path::join(path, c)))
            .sum()
    }

    /// Adds a znode. `parent_creates` is the parent's new child-create count (the
    /// txn carries it so every member computes the same value).
    ///
    /// Errors: NONODE if the parent is missing, NODEEXISTS if the path is taken.
    #[allow(clippy::too_many_arguments)]
    pub fn create(
        &mut self,
        path: &str,
        data: Option<Bytes>,
        acl: Arc<Vec<Acl>>,
        owner: i64,
        parent_creates: i32,
        zxid: i64,
        time_ms: i64,
    ) -> Result<Stat, ErrorCode> {
        let (parent_path, name) = path::split(path);
        if self.nodes.contains_key(path) {
            return Err(ErrorCode::NodeExists);
        }
        let parent = self.nodes.get_mut(parent_path).ok_or(ErrorCode::NoNode)?;
        parent.children.insert(name.into());
        parent.child_creates = parent_creates;
        parent.pzxid = zxid;
        let data_len = data.as_ref().map_or(0, Bytes::len) as i64;
        let acl = self.intern_acl(acl);
        let node = Znode::new(data, acl, owner, zxid, time_ms);
        let stat = node.stat();
        self.nodes.insert(path.to_string(), Box::new(node));
        self.approximate_data_size += path.len() as i64 + data_len;
        self.index(path, Owner::from_raw(owner));
        self.on_quota_node_created(parent_path, name);
        self.update_quota_usage(path, 1, data_len);
        Ok(stat)
    }

    /// Removes a childless znode.
    ///
    /// Errors: NONODE if missing, NOTEMPTY if it has children.
    pub fn delete(&mut self, path: &str, zxid: i64) -> Result<(), ErrorCode> {
        let node = self.nodes.get(path).ok_or(ErrorCode::NoNode)?;
        if !node.children.is_empty() {
            return Err(ErrorCode::NotEmpty);
        }
        let data_len = node.data_len() as i64;
        self.unindex(path);
        self.nodes.remove(path);
        let (parent_path, name) = path::split(path);
        if let Some(parent) = self.nodes.get_mut(parent_path) {
            parent.children.remove(name);
            // A higher pzxid may already have been set by a later create in the same
            // multi; never move pzxid backwards.
            if zxid > parent.pzxid {
                parent.pzxid = zxid;
            }
        }
        if name == quota::LIMIT_NODE && parent_path.starts_with(quota::QUOTA_ROOT) {
            self.quota_paths
                .remove(&parent_path[quota::QUOTA_ROOT.len()..]);
        }
        self.update_quota_usage(path, -1, -data_len);
        Ok(())
    }

    /// Replaces a znode's data, setting dataVersion to `version`.
    ///
    /// Errors: NONODE.
    pub fn set_data(
        &mut self,
        path: &str,
        data: Option<Bytes>,
        version: i32,
        zxid: i64,
        time_ms: i64,
    ) -> Result<Stat, ErrorCode> {
        let node = self.nodes.get_mut(path).ok_or(ErrorCode::NoNode)?;
        let delta = data.as_ref().map_or(0, Bytes::len) as i64 - node.data_len() as i64;
        node.data = data;
        node.version = version;
        node.mzxid = zxid;
        node.mtime = time_ms;
        let stat = node.stat();
        self.approximate_data_size += delta;
        self.update_quota_usage(path, 0, delta);
        Ok(stat)
    }

    /// Replaces a znode's ACL, setting aclVersion to `aversion`.
    ///
    /// Errors: NONODE.
    pub fn set_acl(
        &mut self,
        path: &str,
        acl: Arc<Vec<Acl>>,
        aversion: i32,
    ) -> Result<Stat, ErrorCode> {
        if !self.nodes.contains_key(path) {
            return Err(ErrorCode::NoNode);
        }
        let acl = self.intern_acl(acl);
        let node = self.nodes.get_mut(path).ok_or(ErrorCode::NoNode)?;
        node.acl = acl;
        node.aversion = aversion;
        Ok(node.stat())
    }

    /// Replay form of create, for txns replayed over a fuzzy snapshot: an existing znode
    /// is overwritten (its children kept) instead of refused, so replaying a txn the
    /// snapshot already reflects converges to the same state.
    #[allow(clippy::too_many_arguments)]
    pub fn create_or_replace(
        &mut self,
        path: &str,
        data: Option<Bytes>,
        acl: Arc<Vec<Acl>>,
        owner: i64,
        parent_creates: i32,
        zxid: i64,
        time_ms: i64,
    ) -> Result<Stat, ErrorCode> {
        if let Some(old) = self.nodes.get(path) {
            let children = old.children.clone();
            self.unindex(path);
            self.nodes.remove(path);
            let stat = self.create(path, data, acl, owner, parent_creates, zxid, time_ms)?;
            if let Some(n) = self.nodes.get_mut(path) {
                n.children = children;
            }
            return Ok(stat);
        }
        self.create(path, data, acl, owner, parent_creates, zxid, time_ms)
    }

    /// Replay form of delete: a missing znode is not an error (its parent's pzxid still
    /// moves), and children left by a fuzzy snapshot go with it.
    pub fn delete_if_present(&mut self, path: &str, zxid: i64) {
        let children: Vec<String> = match self.nodes.get(path) {
            Some(n) => n.children.iter().map(|c| path::join(path, c)).collect(),
            None => {
                let parent = path::split(path).0;
                if let Some(p) = self.nodes.get_mut(parent) {
                    p.pzxid = p.pzxid.max(zxid);
                }
                return;
            }
        };
        for c in children {
            self.delete_if_present(&c, zxid);
        }
        let _ = self.delete(path, zxid);
    }

    /// Adds `path` to the ephemeral, container or TTL index its owner calls for.
    fn index(&mut self, path: &str, owner: Owner) {
        match owner {
            Owner::Session(s) => {
                self.ephemerals
                    .entry(s)
                    .or_default()
                    .insert(path.to_string());
            }
            Owner::Container => {
                self.containers.insert(path.to_string());
            }
            Owner::Ttl(_) => {
                self.ttls.insert(path.to_string());
            }
            Owner::None => {}
        }
    }

    /// Removes `path` from the ephemeral, container and TTL indexes.
    fn unindex(&mut self, path: &str) {
        let Some(node) = self.nodes.get(path) else {
            return;
        };
        match node.owner() {
            Owner::Session(s) => {
                if let Some(set) = self.ephemerals.get_mut(&s) {
                    set.remove(path);
                    if set.is_empty() {
                        self.ephemerals.remove(&s);
                    }
                }
            }
            Owner::Container => {
                self.containers.remove(path);
            }
            Owner::Ttl(_) => {
                self.ttls.remove(path);
            }
            Owner::None => {}
        }
        self.approximate_data_size -= (path.len() + node.data_len()) as i64;
    }

    /// Every znode in path order, starting after `cursor` (from the start if `None`).
    pub fn nodes_after<'a>(
        &'a self,
        cursor: Option<&str>,
    ) -> impl Iterator<Item = (&'a String, &'a Znode)> + 'a {
        use std::ops::Bound;
        let lower = match cursor {
            Some(c) => Bound::Excluded(c.to_string()),
            None => Bound::Unbounded,
        };
        self.nodes
            .range((lower, Bound::Unbounded))
            .map(|(p, n)| (p, &**n))
    }

    /// An empty tree (no system nodes), to be filled by [`DataTree::insert_loaded`]
    /// in path order.
    pub fn empty() -> DataTree {
        DataTree {
            nodes: BTreeMap::new(),
            ephemerals: HashMap::new(),
            containers: BTreeSet::new(),
            ttls: BTreeSet::new(),
            quota_paths: BTreeSet::new(),
            approximate_data_size: 0,
            acls: HashSet::new(),
            acls_purge_at: ACL_CACHE_MIN_PURGE,
        }
    }

    /// The shared copy of `acl`: an equal ACL already in use, or `acl` itself, now
    /// cached. When the cache has doubled since the last purge, ACLs held by no znode
    /// are dropped, so it stays bounded by the ACLs in use.
    fn intern_acl(&mut self, acl: Arc<Vec<Acl>>) -> Arc<Vec<Acl>> {
        if let Some(shared) = self.acls.get(&acl) {
            return shared.clone();
        }
        if self.acls.len() >= self.acls_purge_at {
            self.acls.retain(|a| Arc::strong_count(a) > 1);
            self.acls_purge_at = (self.acls.len() * 2).max(ACL_CACHE_MIN_PURGE);
        }
        self.acls.insert(acl.clone());
        acl
    }

    /// Adds a znode read from a snapshot and links it to its parent at once. Snapshots
    /// are in path order, so a parent is always loaded before its children; a znode
    /// whose parent is missing (a fuzzy snapshot can hold one) is kept unlinked, and
    /// replaying the log recreates the parent and links it.
    pub fn insert_loaded(&mut self, path: String, mut node: Znode) {
        node.children.clear();
        node.acl = self.intern_acl(node.acl);
        self.approximate_data_size += (path.len() + node.data_len()) as i64;
        self.index(&path, node.owner());
        if path != "/" {
            let (parent, name) = path::split(&path);
            if let Some(pn) = self.nodes.get_mut(parent) {
                pn.children.insert(name.into());
            }
            if name == quota::LIMIT_NODE
                && parent.starts_with(quota::QUOTA_ROOT)
                && parent != quota::QUOTA_ROOT
            {
                self.quota_paths
                    .insert(parent[quota::QUOTA_ROOT.len()..].to_string());
            }
        }
        self.nodes.insert(path, Box::new(node));
    }

    /// The deepest quota'd path at or above `path`, if any (ZooKeeper's
    /// getMaxPrefixWithQuota). A quota on the root itself is never kept.
    pub fn quota_root_of(&self, path: &str) -> Option<&str> {
        self.quota_paths
            .iter()
            .filter(|q| !q.is_empty() && q.as_str() != "/" && path::is_under(path, q))
            .max_by_key(|q| q.len())
            .map(String::as_str)
    }

    /// The (limits, usage) of the quota covering `path`, if any.
    pub fn quota_for(&self, path: &str) -> Option<(StatsTrack, StatsTrack)> {
        let root = self.quota_root_of(path)?;
        let limits = self.nodes.get(&quota::node_path(root, quota::LIMIT_NODE))?;
        let stats = self.nodes.get(&quota::node_path(root, quota::STAT_NODE))?;
        Some((
            StatsTrack::parse(limits.data_bytes()),
            StatsTrack::parse(stats.data_bytes()),
        ))
    }

    fn on_quota_node_created(&mut self, parent_path: &str, name: &str) {
        if !parent_path.starts_with(quota::QUOTA_ROOT) || parent_path == quota::QUOTA_ROOT {
            return;
        }
        let target = parent_path[quota::QUOTA_ROOT.len()..].to_string();
        if name == quota::LIMIT_NODE {
            self.quota_paths.insert(target);
        } else if name == quota::STAT_NODE {
            // Recount the subtree now that its usage is tracked.
            let (count, bytes) = self.usage_of(&target);
            let stat_path = quota::node_path(&target, quota::STAT_NODE);
            if let Some(node) = self.nodes.get_mut(&stat_path) {
                let mut t = StatsTrack::parse(node.data_bytes());
                t.count = count;
                t.bytes = bytes;
                let text = Bytes::from(t.render());
                self.approximate_data_size += text.len() as i64 - node.data_len() as i64;
                node.data = Some(text);
            }
        }
    }

    /// (znode count, data bytes) of the subtree at `path`, itself included.
    fn usage_of(&self, path: &str) -> (i64, i64) {
        let Some(node) = self.nodes.get(path) else {
            return (0, 0);
        };
        let mut acc = (1, node.data_len() as i64);
        for c in &node.children {
            let (n, b) = self.usage_of(&path::join(path, c));
            acc.0 += n;
            acc.1 += b;
        }
        acc
    }

    fn update_quota_usage(&mut self, path: &str, count_delta: i64, bytes_delta: i64) {
        if count_delta == 0 && bytes_delta == 0 {
            return;
        }
        let Some(root) = self.quota_root_of(path).map(str::to_string) else {
            return;
        };
        let stat_path = quota::node_path(&root, quota::STAT_NODE);
        if let Some(node) = self.nodes.get_mut(&stat_path) {
            let mut t = StatsTrack::parse(node.data_bytes());
            t.count += count_delta;
            t.bytes += bytes_delta;
            let text = Bytes::from(t.render());
            self.approximate_data_size += text.len() as i64 - node.data_len() as i64;
            node.data = Some(text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open() -> Arc<Vec<Acl>> {
        Arc::new(acl::open_acl())
    }

    #[test]
    fn system_nodes_match_zookeeper() {
        let t = DataTree::new();
        let zk = t.get("/zookeeper").unwrap().stat();
        assert_eq!((zk.num_children, zk.cversion), (2, -2));
        let cfg = t.get("/zookeeper/config").unwrap().stat();
        assert_eq!(cfg.aversion, -1);
        assert_eq!(t.get("/").unwrap().stat().num_children, 1);
    }

    #[test]
    fn cversion_counts_creates_and_deletes() {
        let mut t = DataTree::new();
        t.create("/a", None, open(), 0, 1, 2, 0).unwrap();
        t.create("/a/x", None, open(), 0, 1, 3, 0).unwrap();
        t.delete("/a/x", 4).unwrap();
        t.create("/a/y", None, open(), 0, 2, 5, 0).unwrap();
        let s = t.get("/a").unwrap().stat();
        assert_eq!((s.cversion, s.pzxid, s.num_children), (3, 5, 1));
        assert_eq!(t.delete("/a", 6), Err(ErrorCode::NotEmpty));
        assert_eq!(t.delete("/nope", 6), Err(ErrorCode::NoNode));
    }

    #[test]
    fn ephemerals_containers_ttls_tracked() {
        let mut t = DataTree::new();
        t.create("/e", None, open(), 42, 1, 2, 0).unwrap();
        t.create("/c", None, open(), znode::CONTAINER_OWNER, 2, 3, 0)
            .unwrap();
        let ttl = Owner::Ttl(500).to_raw();
        t.create("/t", None, open(), ttl, 3, 4, 0).unwrap();
        assert_eq!(t.ephemerals(42).collect::<Vec<_>>(), vec!["/e"]);
        assert!(t.containers().contains("/c"));
        assert!(t.ttls().contains("/t"));
        assert_eq!(t.get("/c").unwrap().stat().ephemeral_owner, 0);
        assert_eq!(t.get("/e").unwrap().stat().ephemeral_owner, 42);
        t.delete("/e", 5).unwrap();
        assert_eq!(t.ephemeral_count(), 0);
    }

    #[test]
    fn quota_usage_follows_changes() {
        let mut t = DataTree::new();
        t.create("/q", Some(Bytes::from_static(b"ab")), open(), 0, 1, 2, 0)
            .unwrap();
        t.create("/zookeeper/quota/q", None, open(), 0, 1, 3, 0)
            .unwrap();
        let lim = Bytes::from_static(b"count=5,bytes=-1");
        t.create(
            "/zookeeper/quota/q/zookeeper_limits",
            Some(lim),
            open(),
            0,
            1,
            4,
            0,
        )
        .unwrap();
        let st = Bytes::from_static(b"count=0,bytes=0");
        t.create(
            "/zookeeper/quota/q/zookeeper_stats",
            Some(st),
            open(),
            0,
            2,
            5,
            0,
        )
        .unwrap();
        t.create("/q/x", Some(Bytes::from_static(b"xyz")), open(), 0, 1, 6, 0)
            .unwrap();
        let (limits, usage) = t.quota_for("/q/x").unwrap();
        assert_eq!(limits.count, 5);
        assert_eq!((usage.count, usage.bytes), (2, 5));
    }
}

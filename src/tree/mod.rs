//! The DataTree: every znode by path, ephemerals by session, containers, TTL nodes and
//! quotas. Pure data: mutations take the zxid and time as inputs and do no I/O.
//!
//! Mutations here are the *apply* half of a txn: the server validated them in prep, so
//! a failure here means the txn log and the tree disagree (an internal error).

pub mod acl;
pub mod acl_cache;
pub mod children;
pub mod digest;
pub mod path;
pub mod quota;
pub mod snapshot;
pub mod znode;
pub mod znode_set;

use crate::proto::ErrorCode;
use acl_cache::AclCache;
pub use children::{ChildName, Children};
use jute::{Acl, Id, Stat};
use quota::StatsTrack;
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use znode::Base;
pub use znode::{Owner, Znode, ZnodeHeader, ZnodeMeta, ZnodeRef};
pub use znode_set::{Entry, ZnodeSet};

/// Znodes loaded in path order are packed into leaves in batches of this many.
const LOAD_BATCH: usize = 512;

/// What the tree's bookkeeping needs of a znode taken out ([`DataTree::take_node`]).
struct Gone {
    /// Its data's length, bytes.
    data_len: usize,
    /// Its ephemeralOwner, decoded: which index held it.
    owner: Owner,
    /// Its ACL's id in the ACL cache.
    acl_id: u32,
    /// Its share of the tree's digest ([`digest::node_digest`]).
    digest: i64,
}

/// The tree of znodes.
#[derive(Debug)]
pub struct DataTree {
    /// Every znode, ordered by path. Path order lets a snapshot walk the tree in
    /// resumable steps with a parent before its descendants, and makes a znode's
    /// children a range of this set ([`Children`]), so no znode stores a children set.
    /// Znodes are packed into leaves of neighbours ([`ZnodeSet`]).
    nodes: ZnodeSet,
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
    /// The ACLs znodes refer to by id.
    acls: AclCache,
    /// ZooKeeper's tree digest ([`digest`]): the wrapping sum of every counted
    /// znode's digest, kept as each change applies.
    digest: i64,
    /// (zxid, tree digest) after each txn whose zxid is a multiple of
    /// [`digest::DIGEST_LOG_INTERVAL`], oldest first, at most
    /// [`digest::DIGEST_LOG_LIMIT`] (DataTree.digestLog).
    digest_log: VecDeque<(i64, i64)>,
    /// Children counted while loading in path order ([`DataTree::insert_loaded`]) but not
    /// yet added to their parents' `numChildren`, one entry per run of siblings (path
    /// order keeps siblings together, but for their own subtrees): one update per run at
    /// the end ([`DataTree::finish_loading`]) instead of one per child (a million-child
    /// parent would otherwise be taken out of the set and put back a million times).
    loading_children: Vec<(String, i32)>,
    /// Znodes loaded in path order and not yet in `nodes`: packed into full leaves
    /// every [`LOAD_BATCH`] and by [`DataTree::finish_loading`] (sorted input needs no
    /// searches).
    loading: LoadBuffer,
    /// Paths that were missing when znodes below them were loaded (a fuzzy snapshot
    /// can hold a child whose parent's create is in the log after it), and paths whose
    /// znode [`DataTree::create_or_replace`] took out to replace (its children stay):
    /// the only paths whose [`DataTree::create`] may find children already there to
    /// count. Every other create skips that search (one of the four a create made).
    orphan_parents: HashSet<String>,
}

/// Znodes loaded in path order, waiting to be packed into leaves: their records, as
/// [`Znode`]s hold them, back to back in one buffer. A `Vec<Znode>` allocated, shrank
/// and freed a box per znode of a 1,000,000-znode SNAP or recovery.
#[derive(Debug, Default)]
struct LoadBuffer {
    bytes: Vec<u8>,
    /// Where each record ends in `bytes`.
    ends: Vec<usize>,
}

impl LoadBuffer {
    /// Appends the znode [`Znode::new`] would make of these arguments.
    fn push(
        &mut self,
        path: &str,
        data: Option<&[u8]>,
        acl: u32,
        meta: &ZnodeMeta,
        num_children: i32,
    ) {
        Znode::encode_new(&mut self.bytes, path, data, acl, meta, num_children);
        self.ends.push(self.bytes.len());
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Every record, in order.
    fn views(&self) -> Vec<ZnodeRef<'_>> {
        let mut start = 0;
        self.ends
            .iter()
            .map(|&end| {
                let node = ZnodeRef::new(&self.bytes[start..end], Base::default());
                start = end;
                node
            })
            .collect()
    }

    /// The last record's path.
    fn last_path(&self) -> Option<&[u8]> {
        let end = *self.ends.last()?;
        let start = self.ends.len().checked_sub(2).map_or(0, |i| self.ends[i]);
        Some(ZnodeRef::new(&self.bytes[start..end], Base::default()).key())
    }

    /// Drops the first `n` records.
    fn drain_front(&mut self, n: usize) {
        let Some(cut) = n.checked_sub(1).map(|i| self.ends[i]) else {
            return;
        };
        self.bytes.drain(..cut);
        self.ends.drain(..n);
        for end in &mut self.ends {
            *end -= cut;
        }
    }
}

/// (before, after) digests of the znode at `path` with `data` whose Stat went from
/// `old` to `new`: one hash of the znode, none when the Stat did not change or the
/// znode is not counted.
fn meta_change(path: &str, data: &[u8], old: &ZnodeMeta, new: &ZnodeMeta) -> (i64, i64) {
    if old == new || !digest::counts(path.as_bytes()) {
        return (0, 0);
    }
    let before = digest::node_digest(path.as_bytes(), data, old);
    (before, digest::after_meta_change(before, old, new))
}

impl Default for DataTree {
    fn default() -> Self {
        Self::new()
    }
}

impl DataTree {
    /// A tree with ZooKeeper's system nodes: `/`, `/zookeeper`, `/zookeeper/quota` and
    /// `/zookeeper/config` (read-only to everyone, aclVersion -1), all with zero Stats.
    pub fn new() -> DataTree {
        let mut t = DataTree::empty();
        let open = Arc::new(acl::open_acl());
        let read_only = Arc::new(vec![Acl {
            perms: crate::proto::opcode::perm::READ,
            id: Id {
                scheme: "world".into(),
                id: "anyone".into(),
            },
        }]);
        let zero = ZnodeMeta::default();
        t.insert_loaded("/", Some(&[]), &open, &zero);
        t.insert_loaded("/zookeeper", Some(&[]), &open, &zero);
        t.insert_loaded("/zookeeper/quota", Some(&[]), &open, &zero);
        let config = ZnodeMeta {
            aversion: -1,
            ..zero
        };
        t.insert_loaded("/zookeeper/config", Some(&[]), &read_only, &config);
        t.finish_loading();
        t
    }

    /// An empty tree (no system nodes), to be filled by [`DataTree::insert_loaded`]
    /// in path order.
    pub fn empty() -> DataTree {
        DataTree {
            nodes: ZnodeSet::new(),
            ephemerals: HashMap::new(),
            containers: BTreeSet::new(),
            ttls: BTreeSet::new(),
            quota_paths: BTreeSet::new(),
            approximate_data_size: 0,
            acls: AclCache::new(),
            digest: 0,
            digest_log: VecDeque::new(),
            loading_children: Vec::new(),
            loading: LoadBuffer::default(),
            orphan_parents: HashSet::new(),
        }
    }

    /// The znode at `path`. The empty path is the root, as in ZooKeeper's DataTree,
    /// which holds the root under both "" and "/" (so reads of "" answer for the root;
    /// writes never get here with it, their path check refuses it).
    pub fn get(&self, path: &str) -> Option<ZnodeRef<'_>> {
        self.nodes.get(path::root_alias(path).as_bytes())
    }

    /// The ACL `node` carries.
    pub fn acl(&self, node: ZnodeRef<'_>) -> &Arc<Vec<Acl>> {
        self.acl_by_id(node.acl_id())
    }

    /// The ACL with id `id` (a [`ZnodeHeader::acl_id`]).
    pub fn acl_by_id(&self, id: u32) -> &Arc<Vec<Acl>> {
        self.acls.get(id)
    }

    /// The child names of `path`, in name order (nothing if it has no znode).
    pub fn children(&self, path: &str) -> Children<'_> {
        Children::new(&self.nodes, path::root_alias(path))
    }

    /// The child names of `path` that sort after `after`, in name order: a page of a
    /// wide parent in the time of its own length.
    pub fn children_after(&self, path: &str, after: &str) -> Children<'_> {
        Children::after(&self.nodes, path::root_alias(path), after)
    }

    /// Number of znodes, the system nodes included.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Sum of path and data lengths.
    pub fn approximate_data_size(&self) -> i64 {
        self.approximate_data_size
    }

    /// ZooKeeper's digest of the whole tree (DataTree.getTreeDigest), see [`digest`].
    /// Kept incrementally: each change hashes only the znodes it touches.
    pub fn digest(&self) -> i64 {
        self.digest
    }

    /// Records the tree digest after the txn `zxid` applied, as DataTree.processTxn
    /// does after each whole txn (a multi once, at its end): kept in the digest log
    /// when `zxid` is a multiple of [`digest::DIGEST_LOG_INTERVAL`].
    pub fn txn_applied(&mut self, zxid: i64) {
        if zxid % digest::DIGEST_LOG_INTERVAL != 0 {
            return;
        }
        if self.digest_log.len() == digest::DIGEST_LOG_LIMIT {
            self.digest_log.pop_front();
        }
        self.digest_log.push_back((zxid, self.digest));
    }

    /// The digest log, (zxid, digest) oldest first: what `hash` prints.
    pub fn digest_log(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.digest_log.iter().copied()
    }

    /// Every ACL in use, by id ([`ZnodeHeader::acl_id`]), in id order.
    pub fn acls_in_use(&self) -> impl Iterator<Item = (u32, &Arc<Vec<Acl>>)> {
        self.acls.iter()
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

    /// Number of znodes strictly below `path`. For the empty path, one more: ZooKeeper
    /// counts the keys that start with `path + "/"`, which for "" takes in "/" itself.
    pub fn descendant_count(&self, path: &str) -> usize {
        if self.get(path).is_none() {
            return 0;
        }
        let below = children::subtree(&self.nodes, path::root_alias(path)).count();
        below + usize::from(path.is_empty())
    }

    /// Applies `f` to the znode at `path`; `None` if there is none. The znode is copied
    /// out and put back, in place when its record keeps its length (`f` must not
    /// change its path, which no `Znode` setter can).
    fn modify<R>(&mut self, path: &str, f: impl FnOnce(&mut Znode) -> R) -> Option<R> {
        let old = self.nodes.get(path.as_bytes())?;
        let mut node = Znode::from_ref(path.as_bytes(), old);
        let old_meta = old.meta();
        let r = f(&mut node);
        let new_meta = node.view().meta();
        if new_meta != old_meta && digest::counts(path.as_bytes()) {
            let before = digest::node_digest(path.as_bytes(), node.view().data_bytes(), &old_meta);
            self.digest_changed(
                before,
                digest::after_meta_change(before, &old_meta, &new_meta),
            );
        }
        self.nodes.insert(&node);
        Some(r)
    }

    /// Replaces the data of the znode at `path`, keeping everything else; returns the
    /// change in data length, or `None` if there is no such znode.
    fn replace_data(&mut self, path: &str, data: Option<&[u8]>) -> Option<i64> {
        let old = self.nodes.get(path.as_bytes())?;
        let meta = old.meta();
        let new = old.with_data_and_meta(path.as_bytes(), data, &meta);
        let delta = new.view().data_len() as i64 - old.data_len() as i64;
        self.digest_changed(
            digest::node_digest(path.as_bytes(), old.data_bytes(), &meta),
            digest::node_digest(path.as_bytes(), new.view().data_bytes(), &meta),
        );
        self.nodes.insert(&new);
        self.approximate_data_size += delta;
        Some(delta)
    }

    /// Adds a znode. `parent_creates` is the parent's new child-create count (the
    /// txn carries it so every member computes the same value).
    ///
    /// Errors: NONODE if the parent is missing, NODEEXISTS if the path is taken.
    #[allow(clippy::too_many_arguments)]
    pub fn create(
        &mut self,
        path: &str,
        data: Option<&[u8]>,
        acl: &Arc<Vec<Acl>>,
        owner: i64,
        parent_creates: i32,
        zxid: i64,
        time_ms: i64,
    ) -> Result<Stat, ErrorCode> {
        self.finish_loading();
        let (parent_path, name) = path::split(path);
        if parent_path == path {
            // The root is its own parent here: put in first, it would count itself as
            // its own child. It is there from the start, or nothing holds it.
            return Err(if self.get(path).is_some() {
                ErrorCode::NodeExists
            } else {
                ErrorCode::NoNode
            });
        }
        let acl = self.acls.acquire(acl);
        // Normally none: only znodes a fuzzy snapshot loaded below a then-missing
        // parent, or those of a znode a replayed create replaces, can be there already.
        // The set is nearly always empty: test that first, saving a SipHash per create.
        let orphan_parent = !self.orphan_parents.is_empty() && self.orphan_parents.contains(path);
        let children = if orphan_parent {
            self.children(path).count() as i32
        } else {
            0
        };
        let meta = ZnodeMeta::created(owner, zxid, time_ms);
        let node = Znode::new(path, data, acl, &meta, children);
        // Put in first, refused if there (one search, where a get and the insert took
        // two); taken out again if the parent is missing, as an applied txn's never is.
        if !self.nodes.insert_new(&node) {
            self.acls.release(acl);
            return Err(ErrorCode::NodeExists);
        }
        let Some(parent_change) =
            self.nodes
                .update_fields(parent_path.as_bytes(), |parent, data| {
                    let old = parent.meta;
                    parent.child_created(parent_creates, zxid);
                    meta_change(parent_path, data, &old, &parent.meta)
                })
        else {
            self.nodes.remove(path.as_bytes());
            self.acls.release(acl);
            return Err(ErrorCode::NoNode);
        };
        if orphan_parent {
            self.orphan_parents.remove(path);
        }
        self.digest_changed(parent_change.0, parent_change.1);
        let data_len = data.map_or(0, <[u8]>::len) as i64;
        let stat = node.view().stat();
        self.digest = self.digest.wrapping_add(digest::node_digest(
            path.as_bytes(),
            data.unwrap_or(&[]),
            &meta,
        ));
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
        self.finish_loading();
        let gone = self
            .take_node(path, Some(zxid), |f| {
                if f.num_children > 0 {
                    Err(ErrorCode::NotEmpty)
                } else {
                    Ok(())
                }
            })
            .ok_or(ErrorCode::NoNode)??;
        let (parent_path, name) = path::split(path);
        if name == quota::LIMIT_NODE && parent_path.starts_with(quota::QUOTA_ROOT) {
            self.quota_paths
                .remove(&parent_path[quota::QUOTA_ROOT.len()..]);
        }
        self.update_quota_usage(path, -1, -(gone.data_len as i64));
        Ok(())
    }

    /// Takes the znode at `path` out of the tree and every index, its parent's child
    /// count and the ACL cache; with `pzxid`, raises the parent's pzxid to it in the
    /// same change of the parent (one rewrite of its record, not two). Leaves quotas
    /// alone.
    fn remove_node(&mut self, path: &str, pzxid: Option<i64>) {
        let _ = self.take_node(path, pzxid, |_| Ok::<(), std::convert::Infallible>(()));
    }

    /// [`DataTree::remove_node`] if `check`, given the znode's fields, allows it
    /// (`Ok`); its `Err` changes nothing. `None` if there is no such znode. The znode
    /// is searched for once ([`ZnodeSet::remove_with`]): what the indexes, the ACL
    /// cache and the digest need of it is read while it is found.
    fn take_node<E>(
        &mut self,
        path: &str,
        pzxid: Option<i64>,
        check: impl FnOnce(&znode::Fields) -> Result<(), E>,
    ) -> Option<Result<Gone, E>> {
        let p = path.as_bytes();
        let taken = self.nodes.remove_with(p, |node| {
            let (fields, data_at) = node.fields();
            check(&fields)?;
            let data = &node.bytes()[data_at..];
            Ok(Gone {
                data_len: data.len(),
                owner: Owner::from_raw(fields.meta.ephemeral_owner),
                acl_id: fields.acl,
                digest: digest::node_digest(p, data, &fields.meta),
            })
        })?;
        let gone = match taken {
            Ok(gone) => gone,
            Err(e) => return Some(Err(e)),
        };
        self.unindex(path, gone.owner);
        self.acls.release(gone.acl_id);
        self.approximate_data_size -= (path.len() + gone.data_len) as i64;
        self.digest = self.digest.wrapping_sub(gone.digest);
        if path != "/" {
            let parent = path::split(path).0;
            let change = self.nodes.update_fields(parent.as_bytes(), |p, data| {
                let old = p.meta;
                p.child_removed(pzxid);
                meta_change(parent, data, &old, &p.meta)
            });
            if let Some((before, after)) = change {
                self.digest_changed(before, after);
            }
        }
        Some(Ok(gone))
    }

    /// Replaces a znode's data, setting dataVersion to `version`.
    ///
    /// Errors: NONODE.
    pub fn set_data(
        &mut self,
        path: &str,
        data: Option<&[u8]>,
        version: i32,
        zxid: i64,
        time_ms: i64,
    ) -> Result<Stat, ErrorCode> {
        self.finish_loading();
        // The record is rewritten where it lies: one search of the set.
        let new_data = data.unwrap_or(&[]);
        let (stat, delta, before, after) = self
            .nodes
            .set_data_with(path.as_bytes(), data, |fields, old_data| {
                let before = digest::node_digest(path.as_bytes(), old_data, &fields.meta);
                fields.meta.version = version;
                fields.meta.mzxid = zxid;
                fields.meta.mtime = time_ms;
                let after = digest::node_digest(path.as_bytes(), new_data, &fields.meta);
                let stat = fields.stat(new_data.len() as i32);
                let delta = new_data.len() as i64 - old_data.len() as i64;
                (stat, delta, before, after)
            })
            .ok_or(ErrorCode::NoNode)?;
        self.digest_changed(before, after);
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
        acl: &Arc<Vec<Acl>>,
        aversion: i32,
    ) -> Result<Stat, ErrorCode> {
        self.finish_loading();
        let old = self.get(path).ok_or(ErrorCode::NoNode)?.acl_id();
        let new = self.acls.acquire(acl);
        self.acls.release(old);
        self.modify(path, |node| {
            node.set_acl_id(new);
            node.set_aversion(aversion);
            node.view().stat()
        })
        .ok_or(ErrorCode::NoNode)
    }

    /// Replay form of create, for txns replayed over a fuzzy snapshot: an existing znode
    /// is overwritten (its children kept) instead of refused, so replaying a txn the
    /// snapshot already reflects converges to the same state.
    #[allow(clippy::too_many_arguments)]
    pub fn create_or_replace(
        &mut self,
        path: &str,
        data: Option<&[u8]>,
        acl: &Arc<Vec<Acl>>,
        owner: i64,
        parent_creates: i32,
        zxid: i64,
        time_ms: i64,
    ) -> Result<Stat, ErrorCode> {
        self.finish_loading();
        // Children are the znodes below the path, so they stay whatever replaces it.
        // remove_node leaves quotas alone and create counts the znode again: take the
        // old one out of its quota's usage first, so a replayed create the tree already
        // holds moves the usage by its change of data only (ZooKeeper's replay refuses
        // it as NODEEXISTS and changes nothing).
        if let Some(old_len) = self.get(path).map(|n| n.data_len() as i64) {
            self.remove_node(path, None);
            self.update_quota_usage(path, -1, -old_len);
            // Its children stay: the create counts them.
            self.orphan_parents.insert(path.to_string());
        }
        self.create(path, data, acl, owner, parent_creates, zxid, time_ms)
    }

    /// Replay form of delete: a missing znode is not an error (its parent's pzxid still
    /// moves), and children left by a fuzzy snapshot go with it.
    pub fn delete_if_present(&mut self, path: &str, zxid: i64) {
        self.finish_loading();
        if self.get(path).is_none() {
            let parent = path::split(path).0;
            self.modify(parent, |p| p.set_pzxid(p.view().pzxid().max(zxid)));
            return;
        }
        // Deepest first: a descendant sorts after its ancestors, so reverse path order
        // empties every znode before it is deleted.
        let below: Vec<String> = children::subtree(&self.nodes, path)
            .map(|e| e.path())
            .collect();
        for p in below.into_iter().rev() {
            let _ = self.delete(&p, zxid);
        }
        let _ = self.delete(path, zxid);
    }

    /// One znode's digest went from `before` to `after`.
    fn digest_changed(&mut self, before: i64, after: i64) {
        self.digest = self.digest.wrapping_sub(before).wrapping_add(after);
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

    /// Removes `path`, owned by `owner`, from the ephemeral, container and TTL indexes.
    fn unindex(&mut self, path: &str, owner: Owner) {
        match owner {
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
    }

    /// Every znode in path order, starting after `cursor` (from the start if `None`).
    pub fn nodes_after(&self, cursor: Option<&str>) -> znode_set::Iter<'_> {
        use std::ops::Bound;
        let lower = match cursor {
            Some(c) => Bound::Excluded(c.as_bytes()),
            None => Bound::Unbounded,
        };
        self.nodes.range_from(lower)
    }

    /// Adds a znode read from a snapshot (or an import) and counts it as a child of its
    /// parent. Snapshots are in path order, so a parent is always loaded before its
    /// children; a znode whose parent is missing (a fuzzy snapshot can hold one) is not
    /// a child of anything until replaying the log recreates the parent. Call
    /// [`DataTree::finish_loading`] after the last one, before the tree is read: in
    /// path order, parents' `numChildren` are brought up to date only then.
    pub fn insert_loaded(
        &mut self,
        path: &str,
        data: Option<&[u8]>,
        acl: &Arc<Vec<Acl>>,
        meta: &ZnodeMeta,
    ) {
        // Above every loaded path (the snapshot case): not loaded before, and nothing
        // below it is loaded yet, so no removal and no children to count.
        let in_order = match self.loading.last_path() {
            Some(last) => last < path.as_bytes(),
            None => self
                .nodes
                .last_path()
                .is_none_or(|last| last.as_slice() < path.as_bytes()),
        };
        let mut children = 0;
        if !in_order {
            self.finish_loading();
            // A path loaded twice keeps the last record, as a map insert would.
            self.remove_node(path, None);
            children = self.children(path).count() as i32;
        }
        let acl = self.acls.acquire(acl);
        self.approximate_data_size += (path.len() + data.map_or(0, <[u8]>::len)) as i64;
        self.digest = self.digest.wrapping_add(digest::node_digest(
            path.as_bytes(),
            data.unwrap_or(&[]),
            meta,
        ));
        self.index(path, Owner::from_raw(meta.ephemeral_owner));
        if path != "/" {
            let (parent, name) = path::split(path);
            if in_order {
                // Siblings load one after another (path order), so a run per parent
                // is a compare, not a hash, per znode.
                match self.loading_children.last_mut() {
                    Some((p, n)) if p == parent => *n = n.wrapping_add(1),
                    _ => self.loading_children.push((parent.to_string(), 1)),
                }
            } else if self
                .modify(parent, |p| {
                    p.set_num_children(p.view().num_children().wrapping_add(1))
                })
                .is_none()
            {
                self.orphan_parents.insert(parent.to_string());
            }
            if name == quota::LIMIT_NODE
                && parent.starts_with(quota::QUOTA_ROOT)
                && parent != quota::QUOTA_ROOT
            {
                self.quota_paths
                    .insert(parent[quota::QUOTA_ROOT.len()..].to_string());
            }
        }
        if in_order {
            self.loading.push(path, data, acl, meta, children);
            if self.loading.len() >= LOAD_BATCH {
                // Packed as they come, so a load never holds every znode twice.
                let packed = self.nodes.append_sorted(&self.loading.views(), false);
                self.loading.drain_front(packed);
            }
        } else {
            self.nodes
                .insert(&Znode::new(path, data, acl, meta, children));
        }
    }

    /// Adds the children counted by [`DataTree::insert_loaded`] to their parents'
    /// `numChildren` (a parent that was never loaded gets nothing, as before), after
    /// moving the znodes loaded in path order into the set. Every mutation calls it
    /// too, so a forgotten call cannot lose a znode behind a write; reads before it may
    /// miss the last znodes loaded in order, and see stale `numChildren`.
    pub fn finish_loading(&mut self) {
        if !self.loading.is_empty() {
            // After every znode in the set: `insert_loaded` only keeps znodes in path
            // order here.
            let loaded = std::mem::take(&mut self.loading);
            self.nodes.append_sorted(&loaded.views(), true);
        }
        if self.loading_children.is_empty() {
            return;
        }
        for (parent, n) in std::mem::take(&mut self.loading_children) {
            let found = self.modify(&parent, |p| {
                p.set_num_children(p.view().num_children().wrapping_add(n))
            });
            if found.is_none() {
                self.orphan_parents.insert(parent);
            }
        }
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

    /// Every quota'd path (the roots that have a limits node), in sorted order.
    pub fn quota_roots(&self) -> impl Iterator<Item = &str> {
        self.quota_paths.iter().map(String::as_str)
    }

    /// The (limits, usage) of the quota covering `path`, if any.
    pub fn quota_for(&self, path: &str) -> Option<(StatsTrack, StatsTrack)> {
        let root = self.quota_root_of(path)?;
        let limits = self.get(&quota::node_path(root, quota::LIMIT_NODE))?;
        let stats = self.get(&quota::node_path(root, quota::STAT_NODE))?;
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
            if let Some(node) = self.get(&stat_path) {
                let mut t = StatsTrack::parse(node.data_bytes());
                t.count = count;
                t.bytes = bytes;
                self.replace_data(&stat_path, Some(t.render().as_bytes()));
            }
        }
    }

    /// Recounts the usage of every quota into its stats znode, as ZooKeeper does after
    /// it loads a snapshot (DataTree.setupQuota, updateQuotaForPath: `count=N,bytes=M`
    /// of the subtree, the quota'd znode included; the stats znode's Stat unchanged).
    /// Call it after loading a tree: a fuzzy snapshot (written while the tree changed,
    /// ZAB-WIRE.md "SNAP") holds each stats znode as the writer found it, not as the
    /// znodes around it were written, and the txns replayed over it then move the
    /// counts from there.
    pub fn recount_quotas(&mut self) {
        self.finish_loading();
        let roots: Vec<String> = self
            .quota_paths
            .iter()
            .filter(|q| !q.is_empty() && q.as_str() != "/")
            .cloned()
            .collect();
        for root in roots {
            let stat_path = quota::node_path(&root, quota::STAT_NODE);
            if self.get(&stat_path).is_none() {
                continue;
            }
            let (count, bytes) = self.usage_of(&root);
            let text = StatsTrack {
                count,
                bytes,
                extra: Vec::new(),
            }
            .render();
            self.replace_data(&stat_path, Some(text.as_bytes()));
        }
    }

    /// (znode count, data bytes) of the subtree at `path`, itself included; (0, 0)
    /// when there is no such znode. Costs a walk of the subtree.
    pub fn usage_of(&self, path: &str) -> (i64, i64) {
        let Some(node) = self.get(path) else {
            return (0, 0);
        };
        children::subtree(&self.nodes, path).fold((1, node.data_len() as i64), |acc, e| {
            (acc.0 + 1, acc.1 + e.node().data_len() as i64)
        })
    }

    fn update_quota_usage(&mut self, path: &str, count_delta: i64, bytes_delta: i64) {
        if count_delta == 0 && bytes_delta == 0 {
            return;
        }
        let Some(root) = self.quota_root_of(path).map(str::to_string) else {
            return;
        };
        let stat_path = quota::node_path(&root, quota::STAT_NODE);
        if let Some(node) = self.get(&stat_path) {
            let mut t = StatsTrack::parse(node.data_bytes());
            t.count += count_delta;
            t.bytes += bytes_delta;
            self.replace_data(&stat_path, Some(t.render().as_bytes()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loading_counts_children_once_per_parent_at_finish() {
        let mut t = DataTree::empty();
        let acl = Arc::new(acl::open_acl());
        let m = ZnodeMeta::default();
        for p in ["/", "/a", "/a/x", "/a/y", "/a/y/z", "/b"] {
            t.insert_loaded(p, None, &acl, &m);
        }
        // Out of path order: counted at once, after the pending counts.
        t.insert_loaded("/a/w", None, &acl, &m);
        t.finish_loading();
        let n = |t: &DataTree, p: &str| t.get(p).unwrap().num_children();
        assert_eq!(
            [n(&t, "/"), n(&t, "/a"), n(&t, "/a/y"), n(&t, "/b")],
            [2, 3, 1, 0]
        );
        // Loaded twice: the last record, counted once.
        t.insert_loaded("/a/x", Some(b"new"), &acl, &m);
        t.finish_loading();
        assert_eq!(n(&t, "/a"), 3);
        assert_eq!(t.get("/a/x").unwrap().data(), Some(&b"new"[..]));
        // A write finishes a load nobody finished.
        let mut u = DataTree::empty();
        u.insert_loaded("/", None, &acl, &m);
        u.insert_loaded("/c", None, &acl, &m);
        u.set_data("/c", Some(b"x"), 1, 5, 0).unwrap();
        assert_eq!(n(&u, "/"), 1);
    }

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
        t.create("/a", None, &open(), 0, 1, 2, 0).unwrap();
        t.create("/a/x", None, &open(), 0, 1, 3, 0).unwrap();
        t.delete("/a/x", 4).unwrap();
        t.create("/a/y", None, &open(), 0, 2, 5, 0).unwrap();
        let s = t.get("/a").unwrap().stat();
        assert_eq!((s.cversion, s.pzxid, s.num_children), (3, 5, 1));
        assert_eq!(t.delete("/a", 6), Err(ErrorCode::NotEmpty));
        assert_eq!(t.delete("/nope", 6), Err(ErrorCode::NoNode));
    }

    #[test]
    fn ephemerals_containers_ttls_tracked() {
        let mut t = DataTree::new();
        t.create("/e", None, &open(), 42, 1, 2, 0).unwrap();
        t.create("/c", None, &open(), znode::CONTAINER_OWNER, 2, 3, 0)
            .unwrap();
        let ttl = Owner::Ttl(500).to_raw();
        t.create("/t", None, &open(), ttl, 3, 4, 0).unwrap();
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
        t.create("/q", Some(&b"ab"[..]), &open(), 0, 1, 2, 0)
            .unwrap();
        t.create("/zookeeper/quota/q", None, &open(), 0, 1, 3, 0)
            .unwrap();
        let lim = &b"count=5,bytes=-1"[..];
        t.create(
            "/zookeeper/quota/q/zookeeper_limits",
            Some(lim),
            &open(),
            0,
            1,
            4,
            0,
        )
        .unwrap();
        let st = &b"count=0,bytes=0"[..];
        t.create(
            "/zookeeper/quota/q/zookeeper_stats",
            Some(st),
            &open(),
            0,
            2,
            5,
            0,
        )
        .unwrap();
        t.create("/q/x", Some(&b"xyz"[..]), &open(), 0, 1, 6, 0)
            .unwrap();
        let (limits, usage) = t.quota_for("/q/x").unwrap();
        assert_eq!(limits.count, 5);
        assert_eq!((usage.count, usage.bytes), (2, 5));
    }

    /// A tree with a quota on /q (limits, stats 0/0) and /q holding "ab".
    fn quota_tree() -> DataTree {
        let mut t = DataTree::new();
        t.create("/q", Some(&b"ab"[..]), &open(), 0, 1, 2, 0)
            .unwrap();
        t.create("/zookeeper/quota/q", None, &open(), 0, 1, 3, 0)
            .unwrap();
        let q = "/zookeeper/quota/q";
        let lim = &b"count=50,bytes=-1"[..];
        t.create(
            &format!("{q}/zookeeper_limits"),
            Some(lim),
            &open(),
            0,
            1,
            4,
            0,
        )
        .unwrap();
        let st = &b"count=0,bytes=0"[..];
        t.create(
            &format!("{q}/zookeeper_stats"),
            Some(st),
            &open(),
            0,
            2,
            5,
            0,
        )
        .unwrap();
        t
    }

    fn usage(t: &DataTree) -> (i64, i64) {
        let (_, u) = t.quota_for("/q").unwrap();
        (u.count, u.bytes)
    }

    #[test]
    fn a_replayed_create_of_a_znode_the_tree_holds_counts_it_once() {
        let mut t = quota_tree();
        t.create("/q/x", Some(&b"xyz"[..]), &open(), 0, 1, 6, 0)
            .unwrap();
        assert_eq!(usage(&t), (2, 5));
        // The same create again (a txn a fuzzy snapshot already reflects), then one
        // whose data differs from what the tree holds: the count stays, bytes follow.
        t.create_or_replace("/q/x", Some(&b"xyz"[..]), &open(), 0, 1, 6, 0)
            .unwrap();
        assert_eq!(usage(&t), (2, 5));
        t.create_or_replace("/q/x", Some(&b"x"[..]), &open(), 0, 1, 6, 0)
            .unwrap();
        assert_eq!(usage(&t), (2, 3));
        // A create the tree lacks counts as a create.
        t.create_or_replace("/q/y", Some(&b"yy"[..]), &open(), 0, 2, 7, 0)
            .unwrap();
        assert_eq!(usage(&t), (3, 5));
    }

    #[test]
    fn recounting_quotas_sets_each_stats_znode_to_its_subtree() {
        let mut t = quota_tree();
        t.create("/q/x", Some(&b"xyz"[..]), &open(), 0, 1, 6, 0)
            .unwrap();
        t.create("/q/x/y", Some(&b"1234"[..]), &open(), 0, 1, 7, 0)
            .unwrap();
        // A stats znode as a fuzzy snapshot may hold it: from before the last creates.
        let stat_path = "/zookeeper/quota/q/zookeeper_stats";
        let before = t.get(stat_path).unwrap().stat();
        t.replace_data(stat_path, Some(&b"count=1,bytes=2"[..]));
        assert_eq!(usage(&t), (1, 2));
        t.recount_quotas();
        assert_eq!(usage(&t), (3, 9));
        assert_eq!(
            t.get(stat_path).unwrap().data(),
            Some(&b"count=3,bytes=9"[..])
        );
        // ZooKeeper writes the data only (updateQuotaForPath): the Stat's versions and
        // zxids are as before.
        let after = t.get(stat_path).unwrap().stat();
        assert_eq!(
            (after.version, after.mzxid, after.czxid),
            (before.version, before.mzxid, before.czxid)
        );
    }

    /// The names `c` yields, copied out.
    fn names(c: Children<'_>) -> Vec<String> {
        c.map(String::from).collect()
    }

    #[test]
    fn children_listed_in_name_order_skipping_subtrees() {
        let mut t = DataTree::new();
        let paths = ["/a", "/ab", "/a/b", "/a/b/c", "/a/a-b", "/a/b0", "/a/a"];
        for (i, p) in paths.iter().enumerate() {
            t.create(p, None, &open(), 0, 1, 2 + i as i64, 0).unwrap();
        }
        let listed = names(t.children("/a"));
        assert_eq!(listed, ["a", "a-b", "b", "b0"]);
        assert_eq!(names(t.children("/")), ["a", "ab", "zookeeper"]);
        assert_eq!(names(t.children("/a/b")), ["c"]);
        assert_eq!(t.children("/nope").count(), 0);
        assert_eq!(t.get("/a").unwrap().stat().num_children, 4);
        assert_eq!(t.descendant_count("/a"), 5);
        assert_eq!(t.descendant_count("/"), 10);
        t.delete_if_present("/a", 20);
        assert_eq!(t.node_count(), 5);
        assert_eq!(t.get("/").unwrap().stat().num_children, 2);
        assert_eq!(t.get("/").unwrap().pzxid(), 20);
    }

    /// A leaf's prefix can stop inside a name (counting names share their leading
    /// digits): names are still whole, and their subtrees are skipped.
    #[test]
    fn child_names_that_begin_in_a_leaf_prefix_come_out_whole() {
        let mut t = DataTree::new();
        t.create("/d", None, &open(), 0, 1, 2, 0).unwrap();
        let mut want = Vec::new();
        for i in 0..300 {
            let name = format!("n{i:010}");
            let data = Some(&[7u8; 40][..]);
            t.create(&format!("/d/{name}"), data, &open(), 0, 1, 3 + i, 0)
                .unwrap();
            if i % 50 == 0 {
                let below = format!("/d/{name}/x{i:05}");
                t.create(&below, None, &open(), 0, 1, 3 + i, 0).unwrap();
            }
            want.push(name);
        }
        // The case is there: some leaf's prefix ends inside a name under /d.
        let mut entries = t.nodes.range_from(std::ops::Bound::Unbounded);
        assert!(entries.any(|e| e.prefix().starts_with(b"/d/n")));
        assert_eq!(names(t.children("/d")), want);
        assert_eq!(t.get("/d").unwrap().stat().num_children, 300);
        assert_eq!(names(t.children("/d/n0000000050")), ["x00050"]);
        let lens: usize = t.children("/d").map(|n| n.len()).sum();
        assert_eq!(lens, want.iter().map(String::len).sum::<usize>());
        assert!(t.children("/d").zip(&want).all(|(n, w)| n == w.as_str()));
    }

    /// A leaf's prefix can reach into a child's subtree ("/h/c/x" for a leaf of
    /// "/h/c/x1" and "/h/c/x2"): the '/' that makes them descendants lies in the prefix,
    /// and the walk skips them all the same.
    #[test]
    fn descendants_whose_slash_lies_in_the_leaf_prefix_are_skipped() {
        let mut t = DataTree::new();
        let big = Some(&[1u8; 1500][..]);
        for (i, p) in ["/h", "/h/c", "/h/c/x1", "/h/c/x2", "/h/c/x3", "/h/d"]
            .iter()
            .enumerate()
        {
            t.create(p, big, &open(), 0, 1, 2 + i as i64, 0).unwrap();
        }
        let mut entries = t.nodes.range_from(std::ops::Bound::Unbounded);
        assert!(entries.any(|e| e.prefix().starts_with(b"/h/c/")));
        assert_eq!(names(t.children("/h")), ["c", "d"]);
        assert_eq!(names(t.children("/h/c")), ["x1", "x2", "x3"]);
        assert_eq!(names(t.children_after("/h", "c")), ["d"]);
    }

    #[test]
    fn children_after_a_name_resume_in_name_order() {
        let mut t = DataTree::new();
        // "a!" sorts after "a" as a name but before "/a/x" as a path.
        let paths = [
            "/p", "/p/a", "/p/a/x", "/p/a/x/y", "/p/a!", "/p/a0", "/p/b", "/q",
        ];
        for (i, p) in paths.iter().enumerate() {
            t.create(p, None, &open(), 0, 1, 2 + i as i64, 0).unwrap();
        }
        let all = names(t.children("/p"));
        assert_eq!(all, ["a", "a!", "a0", "b"]);
        let after = |name: &str| names(t.children_after("/p", name));
        assert_eq!(after(""), all);
        assert_eq!(after("a"), ["a!", "a0", "b"]);
        assert_eq!(after("a!"), ["a0", "b"]);
        assert_eq!(after("a0"), ["b"]);
        assert_eq!(after("aa"), ["b"]);
        assert!(after("b").is_empty());
        assert_eq!(names(t.children_after("/", "p")), ["q", "zookeeper"]);
    }

    /// `create` counts children already there only below paths a load found missing,
    /// or that a replayed create replaced: loaded in path order (counted at the load's
    /// end), out of it (counted at once), and replaced with its children kept.
    #[test]
    fn a_create_counts_the_children_a_load_or_a_replace_left() {
        let zero = ZnodeMeta::default();
        let n = |t: &DataTree, p: &str| t.get(p).unwrap().num_children();
        let mut t = DataTree::empty();
        for p in ["/", "/a", "/x/y", "/x/z"] {
            t.insert_loaded(p, None, &open(), &zero);
        }
        t.finish_loading();
        t.create("/x", None, &open(), 0, 1, 5, 0).unwrap();
        assert_eq!(n(&t, "/x"), 2);
        t.insert_loaded("/b/c", None, &open(), &zero);
        t.create("/b", None, &open(), 0, 1, 6, 0).unwrap();
        assert_eq!(n(&t, "/b"), 1);
        t.create_or_replace("/x", Some(b"again"), &open(), 0, 1, 7, 0)
            .unwrap();
        assert_eq!(n(&t, "/x"), 2);
        // Any other create finds none, as there are none.
        t.create("/a/new", None, &open(), 0, 1, 8, 0).unwrap();
        assert_eq!(n(&t, "/a/new"), 0);
        assert_eq!(t.delete("/x", 9), Err(ErrorCode::NotEmpty));
    }

    /// A load in path order longer than a batch ([`LOAD_BATCH`]) packs its znodes as it
    /// goes, and reads back exactly what was loaded, as a tree built by creates does.
    #[test]
    fn a_long_load_in_path_order_reads_back_what_was_loaded() {
        let mut built = DataTree::new();
        built
            .create("/p", Some(b"parent"), &open(), 0, 1, 1, 7)
            .unwrap();
        for i in 0..5 * LOAD_BATCH + 3 {
            let data = vec![b'a' + (i % 26) as u8; i % 300];
            let path = format!("/p/k{i:06}");
            built
                .create(
                    &path,
                    Some(&data),
                    &open(),
                    0,
                    i as i32 + 2,
                    i as i64 + 2,
                    9,
                )
                .unwrap();
        }
        let mut loaded = DataTree::empty();
        for e in built.nodes_after(None) {
            let n = e.node();
            loaded.insert_loaded(&e.path(), n.data(), built.acl(n), &n.meta());
        }
        loaded.finish_loading();
        assert_eq!(loaded.node_count(), built.node_count());
        assert_eq!(loaded.digest(), built.digest());
        for e in built.nodes_after(None) {
            let path = e.path();
            let got = loaded.get(&path).unwrap_or_else(|| panic!("{path} lost"));
            assert_eq!(got.data(), e.node().data(), "{path}");
            assert_eq!(got.stat(), e.node().stat(), "{path}");
        }
    }

    #[test]
    fn the_root_is_never_created() {
        let mut t = DataTree::new();
        let digest = t.digest();
        assert_eq!(
            t.create("/", None, &open(), 0, 1, 5, 0),
            Err(ErrorCode::NodeExists)
        );
        assert_eq!((t.digest(), t.get("/").unwrap().stat().pzxid), (digest, 0));
        let mut empty = DataTree::empty();
        assert_eq!(
            empty.create("/", None, &open(), 0, 1, 5, 0),
            Err(ErrorCode::NoNode)
        );
        assert_eq!(empty.node_count(), 0);
    }

    #[test]
    fn a_loaded_orphan_becomes_a_child_when_its_parent_is_created() {
        let mut t = DataTree::new();
        let zero = ZnodeMeta::default();
        t.insert_loaded("/x/y", Some(b"d"), &open(), &zero);
        assert_eq!(t.get("/").unwrap().stat().num_children, 1);
        assert_eq!(t.orphan_parents.len(), 1);
        t.create_or_replace("/x", None, &open(), 0, 1, 5, 0)
            .unwrap();
        assert_eq!(names(t.children("/x")), ["y"]);
        assert_eq!(t.get("/x").unwrap().stat().num_children, 1);
        // Once its parent is there, the orphan is an ordinary child.
        assert!(t.orphan_parents.is_empty());
        t.create_or_replace("/x/y", None, &open(), 0, 1, 6, 0)
            .unwrap();
        let x = t.get("/x").unwrap().stat();
        assert_eq!((x.num_children, x.pzxid), (1, 6));
        assert_eq!(t.delete("/x", 7), Err(ErrorCode::NotEmpty));
        assert_eq!(
            t.approximate_data_size(),
            DataTree::new().approximate_data_size() + 6
        );
    }

    #[test]
    fn acls_are_shared_and_released() {
        let mut t = DataTree::new();
        let mine = Arc::new(vec![Acl {
            perms: 1,
            id: Id {
                scheme: "digest".into(),
                id: "u:x".into(),
            },
        }]);
        t.create("/m", None, &mine, 0, 1, 2, 0).unwrap();
        t.create("/n", None, &mine, 0, 2, 3, 0).unwrap();
        assert_eq!(t.acls.len(), 3);
        t.set_acl("/m", &open(), 1).unwrap();
        assert_eq!(t.acl(t.get("/n").unwrap()), &mine);
        t.delete("/n", 4).unwrap();
        assert_eq!(t.acls.len(), 2);
        assert_eq!(t.acl(t.get("/m").unwrap()).as_ref(), &acl::open_acl());
    }

    /// The digest hashed from scratch over every znode.
    fn full_digest(t: &DataTree) -> i64 {
        t.nodes_after(None).fold(0i64, |sum, e| {
            let n = e.node();
            sum.wrapping_add(digest::node_digest(
                e.path().as_bytes(),
                n.data_bytes(),
                &n.meta(),
            ))
        })
    }

    #[test]
    fn digest_log_keeps_every_128th_zxid_up_to_its_limit() {
        let mut t = DataTree::new();
        t.create("/a", None, &open(), 0, 1, 0x80, 5).unwrap();
        t.txn_applied(0x80);
        t.txn_applied(0x81);
        assert_eq!(t.digest_log().collect::<Vec<_>>(), [(0x80, t.digest())]);
        for i in 2..=(digest::DIGEST_LOG_LIMIT as i64 + 1) {
            t.txn_applied(i * 0x80);
        }
        let log: Vec<_> = t.digest_log().collect();
        assert_eq!(log.len(), digest::DIGEST_LOG_LIMIT);
        assert_eq!(log[0].0, 2 * 0x80);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// The digest kept change by change equals the digest hashed from scratch,
        /// through every kind of change (creates below the system nodes and quota
        /// nodes included, deletes, data and ACL changes, replay forms, loading).
        #[test]
        fn digest_kept_incrementally_equals_hashing_the_whole_tree(
            ops in proptest::collection::vec((0..7u8, 0..6usize, 0..3usize, 0..300usize), 1..200)
        ) {
            const PATHS: [&str; 6] = ["/a", "/a/b", "/a-b", "/zookeeper/x", "/zookeeper/quota/a", "/"];
            let mut t = DataTree::new();
            let mut zxid = 1;
            for (kind, p, child, size) in ops {
                zxid += 1;
                let base = PATHS[p];
                let path = if child == 0 || base == "/" { base.to_string() } else { format!("{base}/c{child}") };
                let path = if path == "/" { format!("/r{child}") } else { path };
                let data = vec![size as u8; size];
                match kind {
                    0 | 1 => { let _ = t.create(&path, Some(&data), &open(), (size % 3) as i64, child as i32 + 1, zxid, zxid * 7); }
                    2 => { let _ = t.delete(&path, zxid); }
                    3 => { let _ = t.set_data(&path, Some(&data), size as i32, zxid, zxid * 9); }
                    4 => { let _ = t.set_acl(&path, &Arc::new(vec![]), size as i32); }
                    5 => { let _ = t.create_or_replace(&path, None, &open(), 0, 2, zxid, 1); }
                    _ => t.delete_if_present(&path, zxid),
                }
                proptest::prop_assert_eq!(t.digest(), full_digest(&t));
            }
            let mut loaded = DataTree::empty();
            for e in t.nodes_after(None) {
                let n = e.node();
                loaded.insert_loaded(&e.path(), n.data(), t.acl(n), &n.meta());
            }
            loaded.finish_loading();
            proptest::prop_assert_eq!(loaded.digest(), t.digest());
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Children, numChildren and subtree counts against a plain set of paths, on
        /// trees large enough to span many leaves (data of up to 1.5 KiB, names that
        /// share prefixes and sort around '/').
        #[test]
        fn children_match_a_model_across_leaves(
            ops in proptest::collection::vec(
                (proptest::collection::vec(0..8usize, 1..5), 0..1500usize, proptest::bool::weighted(0.8)),
                1..300,
            )
        ) {
            const NAMES: [&str; 8] = ["a", "a-b", "a0", "b", "k0001", "k0002", "\u{e8}", "\u{e9}t"];
            let mut t = DataTree::new();
            let mut model: BTreeSet<String> = ["/zookeeper", "/zookeeper/quota", "/zookeeper/config"]
                .iter().map(|s| s.to_string()).collect();
            let mut zxid = 2;
            for (parts, size, create) in ops {
                let path = format!("/{}", parts.iter().map(|&i| NAMES[i]).collect::<Vec<_>>().join("/"));
                zxid += 1;
                if create {
                    let parent = path::split(&path).0;
                    let ok = parent == "/" || model.contains(parent);
                    let r = t.create(&path, Some(&vec![7u8; size]), &open(), 0, 1, zxid, zxid * 10);
                    proptest::prop_assert_eq!(r.is_ok(), ok && !model.contains(&path));
                    if r.is_ok() {
                        model.insert(path);
                    }
                } else {
                    let has_children = model.iter().any(|p| p.starts_with(&format!("{path}/")));
                    let r = t.delete(&path, zxid);
                    proptest::prop_assert_eq!(r.is_ok(), model.contains(&path) && !has_children);
                    if r.is_ok() {
                        model.remove(&path);
                    }
                }
            }
            proptest::prop_assert_eq!(t.node_count(), model.len() + 1);
            for p in std::iter::once("/".to_string()).chain(model.iter().cloned()) {
                let prefix = if p == "/" { "/".to_string() } else { format!("{p}/") };
                let want: Vec<&str> = model
                    .iter()
                    .filter_map(|q| q.strip_prefix(&prefix))
                    .filter(|rest| !rest.contains('/'))
                    .collect();
                let got = names(t.children(&p));
                proptest::prop_assert_eq!(&got, &want, "children of {}", p);
                proptest::prop_assert_eq!(t.get(&p).unwrap().num_children() as usize, want.len());
                let below = model.iter().filter(|q| q.starts_with(&prefix)).count();
                proptest::prop_assert_eq!(t.descendant_count(&p), below, "below {}", p);
            }
        }
    }
}

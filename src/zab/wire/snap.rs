//! ZooKeeper's DataTree serialization: the stream a leader writes after a SNAP packet
//! and the body of a snapshot file (ZAB-WIRE.md §4.4; SerializeUtils.serializeSnapshot,
//! DataTree.serialize, ReferenceCountedACLCache.serialize, DataNode.serialize,
//! FileSnap.serialize). Every number big-endian jute:
//!
//! ```text
//! int nSessions; { long sessionId; int timeoutMs }*
//! int nAcls;     { long aclRef; vector<ACL{int perms; Id{ustring scheme; ustring id}}> }*
//! { ustring path; buffer data; long aclRef;
//!   StatPersisted{long czxid, mzxid, ctime, mtime; int version, cversion, aversion;
//!                 long ephemeralOwner, pzxid} }*
//! ustring "/"
//! ```
//!
//! - Znodes come parents first (ZooKeeper writes a depth-first pre-order, keel path
//!   order; either reads back). The root's path is "", the `/zookeeper` subtree is
//!   included. aclRef -1 is OPEN_ACL_UNSAFE; cversion is the stored child-create count
//!   (keel's `child_creates`); ephemeralOwner keeps the container and TTL encodings.
//! - After a SNAP packet the leader writes this stream, then the ustring
//!   [`SIGNATURE`] (LearnerHandler), which the learner checks (Learner.syncWithLeader).
//!   The SNAP stream carries no digest or checksum: ZooKeeper 3.8 writes the tree
//!   digest only into snapshot files. [`write_snapshot`] and [`read_snapshot`] are
//!   exactly the bytes between the SNAP packet and the next packet.
//! - A snapshot file is FileHeader{int `ZKSN`, int 2, long dbid -1}, this stream, a
//!   seal (long Adler-32 of every byte before it, ustring "/"), then in 3.6+ the
//!   ZxidDigest{long zxid, int version 2, long digest} and another seal
//!   ([`write_snapshot_file`]; the importer reads whole files,
//!   [`crate::import::snapshot`], with [`read_stream`]).
//!
//! Malformed input is a [`Malformed`] naming the byte offset, never a panic.

use super::reader::{Input, Malformed};
use crate::tree::{acl, digest, path, DataTree, ZnodeMeta};
use bytes::{BufMut, BytesMut};
use jute::codec::Encoder;
use jute::{Acl, Record};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// What the leader writes after the stream and the learner checks
/// (LearnerHandler / Learner.syncWithLeader).
pub const SIGNATURE: &str = "BenWasHere";
/// The aclRef meaning OPEN_ACL_UNSAFE (ReferenceCountedACLCache.OPEN_UNSAFE_ACL_ID).
pub const OPEN_ACL_REF: i64 = -1;
/// `ZKSN` (FileSnap.SNAP_MAGIC).
pub const SNAP_MAGIC: i32 = i32::from_be_bytes(*b"ZKSN");
/// The snapshot file format version every ZooKeeper 3.x writes (FileSnap.VERSION).
pub const SNAP_VERSION: i32 = 2;
/// The dbid ZooKeeper writes in a snapshot's FileHeader (FileSnap.dbId).
pub const SNAP_DBID: i64 = -1;

/// One znode as the stream carries it, for [`read_stream`]'s callback: `path` in
/// keel's form ("/" for the root), `data` `None` for null.
#[derive(Debug)]
pub struct StreamNode<'a, 'b> {
    pub path: &'b str,
    pub data: Option<&'a [u8]>,
    pub acl: &'b Arc<Vec<Acl>>,
    pub meta: ZnodeMeta,
    /// The byte offset of its path, for errors the callback reports.
    pub offset: usize,
}

/// Writes `tree` and `sessions` (session id, timeout ms) as the stream, up to and
/// including the closing "/", in path order.
pub fn write_stream(tree: &DataTree, sessions: &[(i64, i32)], out: &mut BytesMut) {
    let mut w = StreamWriter::begin(tree, sessions, i64::MAX, out);
    while !w.step(tree, usize::MAX, out) {}
}

/// The stream written in steps while `tree` goes on changing between them: ZooKeeper's
/// fuzzy SNAP, which its LearnerHandler serializes while the leader keeps applying
/// txns (ZAB-WIRE.md §4.4). The sessions and the ACL table are the state at `zxid`
/// (the header, written by [`StreamWriter::begin`]); each znode is as the step that
/// reaches it finds it. The learner replays every txn after `zxid` over the stream,
/// leniently until UPTODATE, and every txn carries absolute values (versions, the
/// parent's create count), so it converges on the leader's state.
///
/// The ACL table is the one part a later change can make unreadable: a znode whose ACL
/// is not the table's entry for its id (a setACL or a create after `zxid` brought an
/// ACL new since the header, maybe under an id freed and reused) must not name an
/// aclRef the learner lacks (ZooKeeper's learner fails on one) or one now meaning
/// another list. Such a znode created after `zxid` is left out with everything below
/// it (also created after `zxid`): the learner's replay creates them. One created
/// before `zxid` had a table ACL at `zxid`, so a setACL after `zxid` changed it; it is
/// written with an equal table entry if there is one, else with [`DENY_ALL`] (a table
/// entry of a stream that may change, never OPEN_ACL_UNSAFE: a learner that stops
/// before the replay, and serves read-only, must not open it to anyone), and that
/// setACL's replay sets the true list before the learner serves.
///
/// Parents must come before their children, and path order is not a walk of the tree:
/// `/a/b` sorts after `/a-b`, so a step past `/a-b` can meet a `/a/b` created since
/// together with its parent `/a`, which the steps had passed while it did not exist.
/// A znode created after `zxid` is therefore written only below a parent created
/// before `zxid` (which the steps met: it existed all along) or one written as created
/// after it; else it is left out, and again everything below it, for the learner's
/// replay to create.
#[derive(Debug)]
pub struct StreamWriter {
    /// The state's zxid: znodes created after it may be left out.
    zxid: i64,
    /// The table the header wrote, by keel's ACL id (OPEN_ACL_UNSAFE is not in it).
    table: HashMap<u32, Arc<Vec<Acl>>>,
    /// The aclRef of [`DENY_ALL`] in the table, for a stream that may change.
    deny_ref: Option<i64>,
    /// The last path written; `None` before the first.
    cursor: Option<String>,
    /// The znodes created after `zxid` that were written: the only such parents whose
    /// children may be (see above).
    written_new: HashSet<String>,
    done: bool,
}

impl StreamWriter {
    /// Writes the header: `sessions` and the ACL table of `tree`, the state at `zxid`.
    pub fn begin(
        tree: &DataTree,
        sessions: &[(i64, i32)],
        zxid: i64,
        out: &mut BytesMut,
    ) -> StreamWriter {
        out.put_i32(sessions.len() as i32);
        for &(id, timeout_ms) in sessions {
            out.put_i64(id);
            out.put_i32(timeout_ms);
        }
        // OPEN_ACL_UNSAFE is written as -1 and left out of the table, as ZooKeeper does
        // for its system nodes; the others by keel's id + 1 (ZooKeeper's ids start at 1).
        let open = acl::open_acl();
        let table: HashMap<u32, Arc<Vec<Acl>>> = tree
            .acls_in_use()
            .filter(|(_, a)| a.as_slice() != open.as_slice())
            .map(|(id, a)| (id, Arc::clone(a)))
            .collect();
        let mut ids: Vec<u32> = table.keys().copied().collect();
        ids.sort_unstable();
        // A stream of a tree that changes meanwhile (any `zxid` but i64::MAX) carries
        // DENY_ALL after the rest, under the next free aclRef.
        let deny_ref = (zxid != i64::MAX).then(|| acl_ref(ids.last().map_or(0, |&id| id + 1)));
        out.put_i32((ids.len() + usize::from(deny_ref.is_some())) as i32);
        for id in ids {
            out.put_i64(acl_ref(id));
            table[&id].as_ref().encode(out);
        }
        if let Some(r) = deny_ref {
            out.put_i64(r);
            deny_all().encode(out);
        }
        StreamWriter {
            zxid,
            table,
            deny_ref,
            cursor: None,
            written_new: HashSet::new(),
            done: false,
        }
    }

    /// Appends znodes after the last one written until `out` has grown by at least
    /// `max_bytes`, or all of them and the closing "/"; true once that is written.
    pub fn step(&mut self, tree: &DataTree, max_bytes: usize, out: &mut BytesMut) -> bool {
        if self.done {
            return true;
        }
        let open = acl::open_acl();
        let stop_at = out.len().saturating_add(max_bytes);
        let after = self.cursor.take();
        for e in tree.nodes_after(after.as_deref()) {
            let n = e.node();
            let p = e.path();
            let h = n.header();
            let m = h.meta;
            let acl = tree.acl_by_id(h.acl_id);
            let aclref = if acl.as_slice() == open.as_slice() {
                Some(OPEN_ACL_REF)
            } else if self
                .table
                .get(&h.acl_id)
                .is_some_and(|t| Arc::ptr_eq(t, acl))
            {
                Some(acl_ref(h.acl_id))
            } else if m.czxid > self.zxid {
                None
            } else {
                let equal = self
                    .table
                    .iter()
                    .find(|(_, t)| t.as_slice() == acl.as_slice())
                    .map(|(&id, _)| acl_ref(id));
                equal.or(self.deny_ref)
            };
            let created_since = m.czxid > self.zxid;
            let parent_missing = created_since && {
                let parent = path::split(&p).0;
                !self.written_new.contains(parent)
                    && tree.get(parent).is_none_or(|n| n.meta().czxid > self.zxid)
            };
            let (Some(aclref), false) = (aclref, parent_missing) else {
                self.cursor = Some(p);
                continue;
            };
            if created_since {
                self.written_new.insert(p.clone());
            }
            out.ustring(if p == "/" { "" } else { &p });
            match n.data() {
                Some(d) => out.buffer(d),
                None => out.int(-1),
            }
            out.put_i64(aclref);
            out.put_i64(m.czxid);
            out.put_i64(m.mzxid);
            out.put_i64(m.ctime);
            out.put_i64(m.mtime);
            out.put_i32(m.version);
            out.put_i32(m.child_creates);
            out.put_i32(m.aversion);
            out.put_i64(m.ephemeral_owner);
            out.put_i64(m.pzxid);
            let full = out.len() >= stop_at;
            self.cursor = Some(p);
            if full {
                return false;
            }
        }
        out.ustring("/");
        self.done = true;
        true
    }
}

/// What a fuzzy stream writes for a znode whose ACL changed since its zxid and is
/// none the table knows (see [`StreamWriter`]): world:anyone with no permission, so
/// that only super may touch it until the setACL's replay.
pub const DENY_ALL: (i32, &str, &str) = (0, "world", "anyone");

fn deny_all() -> Vec<Acl> {
    vec![Acl {
        perms: DENY_ALL.0,
        id: jute::Id {
            scheme: DENY_ALL.1.into(),
            id: DENY_ALL.2.into(),
        },
    }]
}

/// The aclRef of keel's ACL id `id` in the stream's table: ZooKeeper's ids start at 1.
fn acl_ref(id: u32) -> i64 {
    i64::from(id) + 1
}

/// The bytes a ZooKeeper 3.8 learner reads after a SNAP packet: the stream of `tree`
/// and `sessions` (session id, timeout ms), then [`SIGNATURE`].
pub fn write_snapshot(tree: &DataTree, sessions: &[(i64, i32)], out: &mut BytesMut) {
    write_stream(tree, sessions, out);
    out.ustring(SIGNATURE);
}

/// A whole ZooKeeper 3.8 snapshot file (`version-2/snapshot.<zxid hex>`): FileHeader,
/// the stream, a seal, the ZxidDigest of `tree` after `zxid` (the last txn it
/// reflects) and a seal (FileSnap.serialize).
pub fn write_snapshot_file(tree: &DataTree, sessions: &[(i64, i32)], zxid: i64) -> BytesMut {
    let mut out = BytesMut::new();
    out.put_i32(SNAP_MAGIC);
    out.put_i32(SNAP_VERSION);
    out.put_i64(SNAP_DBID);
    write_stream(tree, sessions, &mut out);
    seal(&mut out);
    out.put_i64(zxid);
    out.put_i32(digest::DIGEST_VERSION);
    out.put_i64(tree.digest());
    seal(&mut out);
    out
}

/// SnapStream.sealStream: the Adler-32 of every byte so far, then "/".
fn seal(out: &mut BytesMut) {
    let sum = crate::import::input::adler32(out);
    out.put_i64(sum);
    out.ustring("/");
}

/// Reads the stream at `r` up to and including its closing "/", calling `on_node` for
/// each znode in stream order; returns the sessions (id, timeout ms) in stream order.
/// Equal ACL lists share one allocation through `acls`.
///
/// Errors (each with its offset): truncation; a null ACL list in the table
/// (ReferenceCountedACLCache.deserialize); a path that is not absolute (the root is
/// ""); the root not first; a znode before its parent (DataTree.deserialize: "unable
/// to find parent") or twice; an aclRef the table lacks; no root; and whatever
/// `on_node` returns.
pub fn read_stream<'a>(
    r: &mut Input<'a>,
    acls: &mut HashMap<Vec<Acl>, Arc<Vec<Acl>>>,
    on_node: &mut dyn FnMut(StreamNode<'a, '_>) -> Result<(), Malformed>,
) -> Result<Vec<(i64, i32)>, Malformed> {
    let n = r.count("session count", 12)?;
    let mut sessions = Vec::with_capacity(n);
    for _ in 0..n {
        let id = r.long("session id")?;
        let timeout = r.int("session timeout")?;
        sessions.push((id, timeout));
    }

    let n = r.count("ACL table size", 12)?;
    let mut by_ref: HashMap<i64, Arc<Vec<Acl>>> = HashMap::with_capacity(n);
    for _ in 0..n {
        let id = r.long("ACL table id")?;
        if r.clone().int("ACL list")? == -1 {
            return Err(Malformed::at(
                r.offset(),
                "ACL table entry with a null ACL list",
            ));
        }
        let list = r.acl_list("ACL list")?;
        let shared = acls
            .entry(list)
            .or_insert_with_key(|k| Arc::new(k.clone()))
            .clone();
        by_ref.insert(id, shared);
    }
    let open = acls
        .entry(acl::open_acl())
        .or_insert_with_key(|k| Arc::new(k.clone()))
        .clone();

    // Every path read so far, borrowed from the stream: ZooKeeper looks each parent up
    // among the znodes already read, in whatever order its depth-first walk wrote them.
    // (Owned copies cost a 1,000,000-znode SNAP about half its parse time.)
    let mut seen = Seen::with_capacity(r.remaining() / 128);
    // The parent found last: siblings come one after another in both orders.
    let mut last_parent: &'a str = "";
    loop {
        let at = r.offset();
        let raw = r.path_ref("znode path")?;
        if raw == "/" {
            break;
        }
        let node_path: &'a str = if raw.is_empty() {
            "/"
        } else if raw.starts_with('/') && !raw.ends_with('/') {
            raw
        } else {
            return Err(Malformed::at(
                at,
                format!("znode path {raw:?} is not absolute"),
            ));
        };
        if node_path == "/" {
            if !seen.is_empty() {
                return Err(Malformed::at(at, "the root is not the first znode"));
            }
        } else {
            let parent = path::split(node_path).0;
            if parent != last_parent && !seen.contains(parent) {
                return Err(Malformed::at(
                    at,
                    format!("znode {node_path} comes before its parent {parent}"),
                ));
            }
            last_parent = parent;
        }
        if !seen.insert(node_path) {
            return Err(Malformed::at(
                at,
                format!("znode {node_path} appears twice"),
            ));
        }
        let data = r.buffer("znode data")?;
        let acl_at = r.offset();
        let acl_ref = r.long("znode ACL id")?;
        let acl = if acl_ref == OPEN_ACL_REF {
            &open
        } else {
            by_ref.get(&acl_ref).ok_or_else(|| {
                Malformed::at(
                    acl_at,
                    format!(
                        "znode {node_path} refers to ACL id {acl_ref}, which the ACL table lacks"
                    ),
                )
            })?
        };
        let czxid = r.long("czxid")?;
        let mzxid = r.long("mzxid")?;
        let ctime = r.long("ctime")?;
        let mtime = r.long("mtime")?;
        let version = r.int("version")?;
        let child_creates = r.int("cversion")?;
        let aversion = r.int("aversion")?;
        let ephemeral_owner = r.long("ephemeralOwner")?;
        let pzxid = r.long("pzxid")?;
        on_node(StreamNode {
            path: node_path,
            data,
            acl,
            meta: ZnodeMeta {
                czxid,
                mzxid,
                pzxid,
                ctime,
                mtime,
                version,
                child_creates,
                aversion,
                ephemeral_owner,
            },
            offset: at,
        })?;
    }
    if !seen.contains("/") {
        return Err(Malformed::at(
            r.offset(),
            "the snapshot holds no root znode",
        ));
    }
    Ok(sessions)
}

/// The paths a stream has read, for [`read_stream`]'s parent and repeat checks,
/// borrowed from the stream.
///
/// While paths come in strictly increasing byte order (keel's leaders write them so), a
/// repeat cannot happen, and a parent is on the stack of the last path's ancestors, or,
/// after a sibling whose name sorts below '/' ("/a-b" between "/a" and "/a/c"), found by
/// a binary search of the paths read, which are sorted: no hash and no random memory
/// access per znode (a hash set of 1,000,000 paths was a sixth of a learner's SNAP
/// parse). The first path out of that order (ZooKeeper's depth-first walk writes
/// siblings in hash order) moves them all into a hash set, used from then on.
struct Seen<'a> {
    /// Every path read, in order, until the first out of order.
    sorted: Vec<&'a str>,
    /// The last path and its ancestors among the paths read, root first.
    stack: Vec<&'a str>,
    /// Every path read, once one came out of order.
    set: Option<HashSet<&'a str>>,
}

impl<'a> Seen<'a> {
    fn with_capacity(n: usize) -> Seen<'a> {
        Seen {
            sorted: Vec::with_capacity(n),
            stack: Vec::new(),
            set: None,
        }
    }

    fn is_empty(&self) -> bool {
        self.sorted.is_empty() && self.set.as_ref().is_none_or(HashSet::is_empty)
    }

    fn contains(&self, path: &str) -> bool {
        match &self.set {
            Some(set) => set.contains(path),
            None => {
                self.stack.iter().rev().any(|p| *p == path)
                    || self.sorted.binary_search(&path).is_ok()
            }
        }
    }

    /// Adds `p`; false if it was read before.
    fn insert(&mut self, p: &'a str) -> bool {
        if let Some(set) = &mut self.set {
            return set.insert(p);
        }
        if self.sorted.last().is_some_and(|last| *last >= p) {
            let mut set = HashSet::with_capacity(self.sorted.len() * 2);
            set.extend(std::mem::take(&mut self.sorted));
            self.stack = Vec::new();
            let new = set.insert(p);
            self.set = Some(set);
            return new;
        }
        while self.stack.last().is_some_and(|top| !path::is_under(p, top)) {
            self.stack.pop();
        }
        self.stack.push(p);
        self.sorted.push(p);
        true
    }
}

/// Reads what [`write_snapshot`] writes (the bytes a learner reads after a SNAP
/// packet: the stream, then [`SIGNATURE`]) into a tree and its sessions (id, timeout
/// ms). The tree's digest is computed as it loads ([`DataTree::digest`]).
///
/// Errors: those of [`read_stream`], a signature other than [`SIGNATURE`] ("Missing
/// signature" in Learner.syncWithLeader), or bytes after it.
pub fn read_snapshot(bytes: &[u8]) -> Result<(DataTree, Vec<(i64, i32)>), Malformed> {
    let mut r = Input::new(bytes);
    let mut tree = DataTree::empty();
    let mut acls = HashMap::new();
    let sessions = read_stream(&mut r, &mut acls, &mut |n| {
        tree.insert_loaded(n.path, n.data, n.acl, &n.meta);
        Ok(())
    })?;
    tree.recount_quotas();
    let at = r.offset();
    let signature = r.ustring("signature")?;
    if signature != SIGNATURE {
        return Err(Malformed::at(
            at,
            format!("signature {signature:?} is not {SIGNATURE:?}: missing signature"),
        ));
    }
    if r.remaining() > 0 {
        return Err(Malformed::at(
            r.offset(),
            format!("{} unexpected bytes after the signature", r.remaining()),
        ));
    }
    Ok((tree, sessions))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::znode::CONTAINER_OWNER;
    use crate::tree::Owner;
    use jute::Id;
    use proptest::prelude::*;

    fn acls() -> [Arc<Vec<Acl>>; 3] {
        let one = |perms, scheme: &str, id: &str| Acl {
            perms,
            id: Id {
                scheme: scheme.into(),
                id: id.into(),
            },
        };
        [
            Arc::new(acl::open_acl()),
            Arc::new(vec![one(1, "world", "anyone")]),
            Arc::new(vec![
                one(31, "digest", "u:Eq8iQ8eK6aT0bL6vX2gkM3m3mWc="),
                one(1, "ip", "127.0.0.1"),
            ]),
        ]
    }

    /// A znode's path, data, ACL, persisted fields and numChildren.
    type Held = (String, Option<Vec<u8>>, Vec<Acl>, ZnodeMeta, i32);

    /// Everything a tree's znodes hold, for comparing trees.
    fn dump(t: &DataTree) -> Vec<Held> {
        t.nodes_after(None)
            .map(|e| {
                let n = e.node();
                (
                    e.path(),
                    n.data().map(<[u8]>::to_vec),
                    t.acl(n).as_ref().clone(),
                    n.meta(),
                    n.num_children(),
                )
            })
            .collect()
    }

    fn assert_same(a: &DataTree, b: &DataTree) {
        assert_eq!(dump(a), dump(b));
        assert_eq!(a.all_ephemerals(), b.all_ephemerals());
        assert_eq!(a.containers(), b.containers());
        assert_eq!(a.ttls(), b.ttls());
        assert_eq!(a.digest(), b.digest());
        assert_eq!(a.approximate_data_size(), b.approximate_data_size());
    }

    /// A tree built by random creates (persistent, ephemeral, container, TTL, null and
    /// empty data), data and ACL changes and deletes.
    fn tree_from(ops: &[(u8, usize, usize, u16)]) -> DataTree {
        let mut t = DataTree::new();
        apply(&mut t, ops, 0x1_0000_0000);
        t
    }

    /// [`tree_from`]'s changes to `t`, with zxids after `zxid`; returns the last zxid.
    fn apply(t: &mut DataTree, ops: &[(u8, usize, usize, u16)], mut zxid: i64) -> i64 {
        const NAMES: [&str; 4] = ["a", "a-b", "b", "zookeeper"];
        let acls = acls();
        for &(kind, p, q, v) in ops {
            zxid += 1;
            let path = match q % 3 {
                0 => format!("/{}", NAMES[p % 4]),
                1 => format!("/{}/{}", NAMES[p % 4], NAMES[q % 4]),
                _ => format!(
                    "/{}/{}/{}",
                    NAMES[p % 4],
                    NAMES[q % 4],
                    NAMES[v as usize % 4]
                ),
            };
            let data = match v % 3 {
                0 => None,
                1 => Some(vec![]),
                _ => Some(vec![v as u8; v as usize % 200]),
            };
            match kind % 6 {
                0..=2 => {
                    let owner = match v % 4 {
                        0 => 0,
                        1 => 0x100 + i64::from(v % 3),
                        2 => CONTAINER_OWNER,
                        _ => Owner::Ttl(i64::from(v) * 1000).to_raw(),
                    };
                    let _ = t.create(
                        &path,
                        data.as_deref(),
                        &acls[q % 3],
                        owner,
                        i32::from(v),
                        zxid,
                        zxid * 3,
                    );
                }
                3 => {
                    let _ = t.set_data(&path, data.as_deref(), i32::from(v), zxid, zxid * 5);
                }
                4 => {
                    let _ = t.set_acl(&path, &acls[p % 3], i32::from(v));
                }
                _ => {
                    let _ = t.delete(&path, zxid);
                }
            }
        }
        zxid
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// keel -> bytes -> keel keeps every znode (path, data, ACL, every Stat field,
        /// numChildren), the ephemeral, container and TTL indexes, the digest and the
        /// sessions; and every cut of the bytes is refused, never a panic.
        #[test]
        fn a_tree_round_trips_and_every_truncation_is_refused(
            ops in proptest::collection::vec((0..6u8, 0..4usize, 0..12usize, 0..1000u16), 0..120),
            sessions in proptest::collection::vec((any::<i64>(), any::<i32>()), 0..5),
        ) {
            let t = tree_from(&ops);
            let mut bytes = BytesMut::new();
            write_snapshot(&t, &sessions, &mut bytes);
            let (back, got) = read_snapshot(&bytes).unwrap();
            assert_same(&t, &back);
            prop_assert_eq!(&got, &sessions);
            for cut in (0..bytes.len()).step_by(7) {
                prop_assert!(read_snapshot(&bytes[..cut]).is_err());
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        /// A stream written in steps while the tree changes (a leader's fuzzy SNAP)
        /// always reads back; a znode there since the header's zxid comes out with its
        /// data, and every znode with the ACL it was created with (the changes here are
        /// creates, data changes and deletes; setACL is the test below).
        #[test]
        fn a_stream_written_while_the_tree_changes_reads_back(
            before in proptest::collection::vec((0..6u8, 0..4usize, 0..12usize, 0..1000u16), 0..60),
            during in proptest::collection::vec((0..6u8, 0..4usize, 0..12usize, 0..1000u16), 0..60),
            step_bytes in 1..300usize,
        ) {
            let during: Vec<_> = during
                .into_iter()
                .map(|(k, p, q, v)| (if k % 6 == 4 { 3 } else { k }, p, q, v))
                .collect();
            let mut t = tree_from(&before);
            let zxid = 0x1_0000_0000 + before.len() as i64;
            let mut out = BytesMut::new();
            let mut w = StreamWriter::begin(&t, &[], zxid, &mut out);
            let mut last = zxid;
            let mut ops = during.chunks(3);
            while !w.step(&t, step_bytes, &mut out) {
                if let Some(chunk) = ops.next() {
                    last = apply(&mut t, chunk, last);
                }
            }
            out.ustring(SIGNATURE);
            let (back, _) = read_snapshot(&out).expect("a fuzzy stream reads back");
            let now: HashMap<String, Held> =
                dump(&t).into_iter().map(|h| (h.0.clone(), h)).collect();
            for h in dump(&back) {
                if let Some(cur) = now.get(&h.0).filter(|c| c.3.czxid == h.3.czxid) {
                    prop_assert_eq!(&h.2, &cur.2, "{} has another ACL", &h.0);
                }
            }
            for cur in now.values().filter(|c| c.3.czxid <= zxid && c.3.mzxid <= zxid) {
                let n = back.get(&cur.0);
                prop_assert!(n.is_some(), "{} is missing", &cur.0);
                let n = n.unwrap();
                prop_assert_eq!(n.data().map(<[u8]>::to_vec), cur.1.clone());
            }
        }
    }

    /// The ACL table is the header's: a znode whose ACL is new since then is written with
    /// an aclRef the table has and that means what the table says, or left out with
    /// everything below it when it was created after the header's zxid.
    #[test]
    fn a_stream_never_names_an_acl_the_header_lacks_or_that_changed_meaning() {
        let [open, read_only, digest] = acls();
        let mut t = DataTree::new();
        t.create("/x", None, &read_only, 0, 0, 1, 1).unwrap();
        t.create("/y", None, &open, 0, 0, 2, 1).unwrap();
        t.create("/z", None, &open, 0, 0, 3, 1).unwrap();
        let mut out = BytesMut::new();
        let mut w = StreamWriter::begin(&t, &[], 3, &mut out);
        // /x goes, freeing read_only's id; /y's setACL takes a new list, maybe under
        // that id; /m is created after the header with a new list, /m/c below it with
        // OPEN_ACL_UNSAFE; /z takes read_only again, a new allocation.
        t.delete("/x", 4).unwrap();
        let fresh = Arc::new(vec![Acl {
            perms: 3,
            ..digest[0].clone()
        }]);
        t.set_acl("/y", &fresh, 1).unwrap();
        t.create("/m", None, &digest, 0, 0, 5, 1).unwrap();
        t.create("/m/c", None, &open, 0, 0, 6, 1).unwrap();
        t.set_acl("/z", &Arc::new(read_only.as_ref().clone()), 1)
            .unwrap();
        assert!(w.step(&t, usize::MAX, &mut out));
        out.ustring(SIGNATURE);
        let (back, _) = read_snapshot(&out).expect("reads back");
        let acl_of = |p: &str| back.acl(back.get(p).unwrap()).as_ref().clone();
        // /y's list is none the header knew: written as DENY_ALL (never opened), which
        // its setACL's replay corrects; /z's equals a table entry, written with it.
        assert_eq!(acl_of("/y"), deny_all());
        assert_ne!(acl_of("/y"), open.as_ref().clone());
        assert_eq!(acl_of("/z"), read_only.as_ref().clone());
        assert!(back.get("/m").is_none() && back.get("/m/c").is_none());
        assert!(back.get("/x").is_none());
    }

    #[test]
    fn a_snapshot_file_reads_back_through_the_importer_with_its_digest() {
        let t = tree_from(&[(0, 0, 0, 5), (1, 0, 1, 2), (2, 1, 0, 7), (3, 0, 0, 11)]);
        let file = write_snapshot_file(&t, &[(0x100, 30_000)], 0x1_0000_0009);
        let snap = crate::import::snapshot::parse(&file, 0x1_0000_0009, &mut |_| {}).unwrap();
        let d = snap.digest.unwrap();
        assert_eq!(
            (d.zxid, d.version, d.digest),
            (0x1_0000_0009, 2, t.digest())
        );
        assert_eq!(snap.sessions, [(0x100, 30_000)]);
        assert_eq!(snap.nodes.len(), t.node_count());
        let a = &snap.nodes["/a"];
        assert_eq!(
            (a.ephemeral_owner, a.acl.as_ref()),
            (
                t.get("/a").unwrap().ephemeral_owner(),
                t.acl(t.get("/a").unwrap()).as_ref()
            )
        );
    }

    #[test]
    fn malformed_streams_are_refused_with_their_offset() {
        let t = tree_from(&[(0, 0, 0, 5), (0, 0, 4, 6)]);
        let mut good = BytesMut::new();
        write_snapshot(&t, &[], &mut good);
        let err = |b: &[u8]| read_snapshot(b).unwrap_err().to_string();

        let mut bad_sig = good[..good.len() - SIGNATURE.len()].to_vec();
        bad_sig.extend_from_slice(b"BenWasHerf");
        assert!(
            err(&bad_sig).contains("missing signature"),
            "{}",
            err(&bad_sig)
        );

        let mut extra = good.to_vec();
        extra.push(0);
        assert!(err(&extra).contains("unexpected bytes"));

        // A child before its parent, an unknown aclRef, a relative path.
        let node = |w: &mut BytesMut, path: &str, acl_ref: i64| {
            w.ustring(path);
            w.int(-1);
            w.put_i64(acl_ref);
            w.put_bytes(0, 8 * 4 + 4 * 3 + 8 * 2);
        };
        for (paths, acl_ref, want) in [
            (&["", "/a/b"][..], -1, "comes before its parent /a"),
            (&["", "/a"][..], 7, "ACL id 7, which the ACL table lacks"),
            (&["", "a"][..], -1, "is not absolute"),
            (&["/a"][..], -1, "comes before its parent /"),
            (&["", "/a", "/a"][..], -1, "appears twice"),
            // Out of path order (ZooKeeper's hash-ordered walk): the repeat is found,
            // and a parent is looked up whatever the sibling before it had.
            (&["", "/b", "/a", "/b"][..], -1, "appears twice"),
            (
                &["", "/a", "/a/x", "/b/y"][..],
                -1,
                "comes before its parent /b",
            ),
            (&[][..], -1, "no root znode"),
            // In path order, a parent below a sibling that sorts before '/' is looked up
            // too, and found missing.
            (
                &["", "/a", "/a-b", "/a-b/c", "/a/x/y"][..],
                -1,
                "comes before its parent /a/x",
            ),
        ] {
            let mut w = BytesMut::new();
            w.put_i32(0);
            w.put_i32(0);
            for p in paths {
                node(&mut w, p, acl_ref);
            }
            w.ustring("/");
            w.ustring(SIGNATURE);
            assert!(err(&w).contains(want), "{paths:?}: {}", err(&w));
        }
        // A depth-first walk out of path order reads, each znode under its parent.
        let mut w = BytesMut::new();
        w.put_i32(0);
        w.put_i32(0);
        for p in ["", "/b", "/b/x", "/a", "/a/y", "/b/z"] {
            node(&mut w, p, -1);
        }
        w.ustring("/");
        w.ustring(SIGNATURE);
        let (tree, _) = read_snapshot(&w).expect("a depth-first stream");
        assert_eq!(tree.get("/b").unwrap().num_children(), 2);
        assert_eq!(tree.get("/a").unwrap().num_children(), 1);
        assert_eq!(tree.get("/").unwrap().num_children(), 2);
        // In path order, a parent that is not the last path's ancestor ("/a" after
        // "/a-b") is found.
        let mut w = BytesMut::new();
        w.put_i32(0);
        w.put_i32(0);
        for p in ["", "/a", "/a-b", "/a-b/c", "/a.d", "/a/x", "/a/x/y", "/b"] {
            node(&mut w, p, -1);
        }
        w.ustring("/");
        w.ustring(SIGNATURE);
        let (tree, _) = read_snapshot(&w).expect("a stream in path order");
        assert_eq!(tree.get("/a").unwrap().num_children(), 1);
        assert_eq!(tree.get("/a/x").unwrap().num_children(), 1);
        assert_eq!(tree.get("/").unwrap().num_children(), 4);
        // A count too large for the bytes does not allocate.
        let mut w = BytesMut::new();
        w.put_i32(i32::MAX);
        assert!(err(&w).contains("session count"));
    }
}

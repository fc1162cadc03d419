//! Every znode of the tree in path order, packed into leaves of consecutive znodes.
//!
//! A million-znode tree is mostly znodes, so their layout decides the server's memory
//! (issue 5). One allocation per znode in a B-tree of pointers cost about 200 bytes for
//! a 100-byte znode: the allocator rounds each record up to its size class, in-order
//! inserts leave B-tree nodes half full, and every record repeats its parent's path and
//! a whole zxid and time. Here a leaf is one exactly sized allocation of at most
//! [`LEAF_MAX_BYTES`] (a single larger znode gets a leaf of its own):
//!
//! `[prefix length | prefix | base czxid | base ctime | record...]`, each record
//! `[record length | key length | key | header | data]` (a [`ZnodeRef`]).
//!
//! - The prefix is the longest start every path in the leaf shares, cut back to a
//!   character boundary: usually the parent directory and, for names that count up,
//!   their common digits; it can also reach into a child's subtree, or be a whole path
//!   (a leaf of one znode, whose key is then empty). Keys are the paths without it, so
//!   a child's name can begin in the prefix and end in the key
//!   ([`super::children::ChildName`]).
//! - czxid and ctime are stored relative to the leaf's [`Base`]: znodes that sit next to
//!   each other were mostly created close together.
//! - The leaves are in a `BTreeMap`, one entry per few dozen znodes, each by a path at
//!   or before its first znode's and after every path of the leaf before it: the
//!   first path when the leaf was written, kept when that znode is deleted (an
//!   ascending run of deletes took a key out and put one in per delete).
//!
//! A write rebuilds its leaf (a copy of at most 4 KiB, or less when the record keeps its
//! length: then it is overwritten in place), splitting a leaf that grew too large and
//! merging one that shrank into its successor. Lookups scan one leaf's records in order.

use super::znode::{self, encode_record, Base, Fields, Znode, ZnodeRef};
use std::cmp::Ordering;
use std::collections::{btree_map, BTreeMap};
use std::ops::Bound;

/// Largest leaf, bytes, unless it holds a single znode: the most a write copies and a
/// lookup scans. Sized so the leaf index costs a few bytes per znode.
const LEAF_MAX_BYTES: usize = 4096;

/// A leaf smaller than this after a removal is merged into its successor (if both fit in
/// one leaf), so deleting most znodes does not leave one leaf per survivor.
const LEAF_MERGE_BYTES: usize = LEAF_MAX_BYTES / 4;

/// The znodes of a tree, ordered by path. Paths are byte strings; the tree only puts
/// valid ZooKeeper paths here.
#[derive(Default)]
pub struct ZnodeSet {
    /// Leaves by a path at or before their first znode's (their first path when
    /// written), after every path of the leaf before.
    leaves: BTreeMap<Box<[u8]>, Box<[u8]>>,
    /// Number of znodes.
    len: usize,
    /// Reused while building a leaf, which is then copied out exactly sized.
    scratch: Vec<u8>,
}

impl std::fmt::Debug for ZnodeSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZnodeSet")
            .field("len", &self.len)
            .field("leaves", &self.leaves.len())
            .finish()
    }
}

/// Asks the CPU to start loading every cache line of `bytes` (a leaf, at most 4 KiB
/// but for one large znode, whose first 4 KiB only are asked for). A lookup scans a
/// leaf's records in order, and on a busy member the leaf is rarely in cache: loading
/// its lines one after the other as the scan reaches them was most of a lookup's time
/// (`cargo run --release --example tree_lookup`).
#[inline]
fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        for at in (0..bytes.len().min(LEAF_MAX_BYTES)).step_by(64) {
            // SAFETY: a prefetch is a hint: it never faults and changes no memory, and
            // the address is inside `bytes`.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(bytes.as_ptr().add(at).cast::<i8>()) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// A leaf's header, decoded, and where its records start.
struct Leaf<'a> {
    bytes: &'a [u8],
    prefix: &'a [u8],
    base: Base,
    records_at: usize,
}

impl<'a> Leaf<'a> {
    fn parse(bytes: &'a [u8]) -> Leaf<'a> {
        prefetch(bytes);
        let mut at = 0;
        let plen = znode::get(bytes, &mut at) as usize;
        let prefix = &bytes[at..at + plen];
        at += plen;
        let czxid = znode::get_signed(bytes, &mut at);
        let ctime = znode::get_signed(bytes, &mut at);
        Leaf {
            bytes,
            prefix,
            base: Base { czxid, ctime },
            records_at: at,
        }
    }

    /// The records as [`Item`]s, with their whole paths.
    fn items(&self) -> impl Iterator<Item = Item<'a>> + 'a {
        let prefix = self.prefix;
        self.records().map(move |(_, _, node)| Item {
            head: prefix,
            tail: node.key(),
            node,
        })
    }

    fn records(&self) -> Records<'a> {
        Records {
            bytes: self.bytes,
            at: self.records_at,
            base: self.base,
        }
    }
}

/// The records of one leaf in order, each with its offset in the leaf (where its record
/// length starts) and its end.
struct Records<'a> {
    bytes: &'a [u8],
    at: usize,
    base: Base,
}

impl<'a> Iterator for Records<'a> {
    type Item = (usize, usize, ZnodeRef<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.bytes.len() {
            return None;
        }
        let start = self.at;
        let len = znode::get(self.bytes, &mut self.at) as usize;
        let rec = &self.bytes[self.at..self.at + len];
        self.at += len;
        Some((start, self.at, ZnodeRef::new(rec, self.base)))
    }
}

/// One znode while leaves are rebuilt: its path is `head` then `tail` (a leaf's prefix
/// and a record's key, or a whole path and nothing), its fields and data in `node`.
#[derive(Clone, Copy)]
struct Item<'a> {
    head: &'a [u8],
    tail: &'a [u8],
    node: ZnodeRef<'a>,
}

impl<'a> Item<'a> {
    fn new(node: ZnodeRef<'a>) -> Item<'a> {
        Item {
            head: node.key(),
            tail: &[],
            node,
        }
    }

    fn path(&self) -> Vec<u8> {
        [self.head, self.tail].concat()
    }

    fn path_len(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    /// About the bytes the record takes in a leaf: enough to decide splits.
    fn size(&self) -> usize {
        self.path_len() + self.node.body().len() + 4
    }

    /// The czxid and ctime a leaf starting with this znode is based on.
    fn base(&self) -> Base {
        let m = self.node.meta();
        Base {
            czxid: m.czxid,
            ctime: m.ctime,
        }
    }
}

/// A znode and the prefix its key follows: its path is `prefix` then `node.key()`.
#[derive(Clone, Copy)]
pub struct Entry<'a> {
    prefix: &'a [u8],
    node: ZnodeRef<'a>,
}

impl<'a> Entry<'a> {
    /// The znode.
    pub fn node(&self) -> ZnodeRef<'a> {
        self.node
    }

    /// The leaf prefix: the path's first bytes, shared by every path in its leaf. It
    /// ends on a character boundary, not necessarily after a '/'.
    pub fn prefix(&self) -> &'a [u8] {
        self.prefix
    }

    /// The path after [`Entry::prefix`].
    pub fn key(&self) -> &'a [u8] {
        self.node.key()
    }

    /// The path, as a new string (paths come from `&str`, so always UTF-8).
    pub fn path(&self) -> String {
        String::from_utf8_lossy(&[self.prefix, self.key()].concat()).into_owned()
    }

    /// How the path compares with `other`.
    pub fn cmp_path(&self, other: &[u8]) -> Ordering {
        let n = self.prefix.len().min(other.len());
        match self.prefix[..n].cmp(&other[..n]) {
            Ordering::Equal if other.len() < self.prefix.len() => Ordering::Greater,
            Ordering::Equal => self.key().cmp(&other[self.prefix.len()..]),
            o => o,
        }
    }

    /// Whether the path starts with `p`.
    pub fn starts_with(&self, p: &[u8]) -> bool {
        if p.len() <= self.prefix.len() {
            self.prefix.starts_with(p)
        } else {
            p.starts_with(self.prefix) && self.key().starts_with(&p[self.prefix.len()..])
        }
    }
}

/// Znodes in path order from a lower bound ([`ZnodeSet::range_from`]).
pub struct Iter<'a> {
    leaves: btree_map::Range<'a, Box<[u8]>, Box<[u8]>>,
    prefix: &'a [u8],
    records: Option<Records<'a>>,
    /// The first znode, found while skipping those below the bound.
    pending: Option<Entry<'a>>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = Entry<'a>;

    fn next(&mut self) -> Option<Entry<'a>> {
        if let Some(e) = self.pending.take() {
            return Some(e);
        }
        loop {
            if let Some((_, _, node)) = self.records.as_mut().and_then(Iterator::next) {
                return Some(Entry {
                    prefix: self.prefix,
                    node,
                });
            }
            let (_, leaf) = self.leaves.next()?;
            let leaf = Leaf::parse(leaf);
            self.prefix = leaf.prefix;
            self.records = Some(leaf.records());
        }
    }
}

/// `len`, or less so that `p[..len]` does not end inside a UTF-8 character (`p` is a
/// path, so UTF-8): a leaf's prefix and its keys then stay UTF-8 each.
fn char_boundary(p: &[u8], mut len: usize) -> usize {
    // A continuation byte (0b10xx_xxxx) at `len` means `len` is inside a character.
    while len > 0 && len < p.len() && p[len] & 0xC0 == 0x80 {
        len -= 1;
    }
    len
}

/// Writes a leaf of `items` (in path order, at least one) based on `base` into `out`.
/// Its prefix is the longest start the first and last paths share, which every path
/// between them shares too. For names that count up ("/app/n0000000123") that keeps
/// their common digits out of the keys: `cargo run --release --example tree_memory`
/// gives 112.8 B per znode (RSS) where a prefix stopping at the last '/' gave 118.6.
/// The cost: an insert past either end of a leaf that does not share its prefix
/// rebuilds the leaf (see [`ZnodeSet::splice_in`]), a few times per leaf in an
/// ascending run (`--example digest_cost`: create 1.7-2.3 µs either way).
fn build_leaf(items: &[Item<'_>], base: Base, out: &mut Vec<u8>) {
    out.clear();
    let first = items[0].path();
    let last = items[items.len() - 1].path();
    let common = first.iter().zip(&last).take_while(|(a, b)| a == b).count();
    let plen = char_boundary(&first, common);
    znode::put(out, plen as u64);
    out.extend_from_slice(&first[..plen]);
    znode::put_signed(out, base.czxid);
    znode::put_signed(out, base.ctime);
    let mut rec = Vec::with_capacity(256);
    for it in items {
        let (head, tail) = if plen <= it.head.len() {
            (&it.head[plen..], it.tail)
        } else {
            (&[][..], &it.tail[plen - it.head.len()..])
        };
        rec.clear();
        if it.node.base() == base {
            // Same base: header and data copy over as they are.
            znode::put(&mut rec, (head.len() + tail.len()) as u64);
            rec.extend_from_slice(head);
            rec.extend_from_slice(tail);
            rec.extend_from_slice(it.node.body());
        } else {
            let (fields, data_at) = it.node.fields();
            encode_record(
                &mut rec,
                head,
                tail,
                &fields,
                base,
                &it.node.bytes()[data_at..],
            );
        }
        znode::put(out, rec.len() as u64);
        out.extend_from_slice(&rec);
    }
}

/// Where to cut `items` in two when they do not fit in one leaf: at the byte midpoint,
/// but never leaving a side empty.
fn midpoint(items: &[Item<'_>]) -> usize {
    let total: usize = items.iter().map(Item::size).sum();
    let mut acc = 0;
    for (i, it) in items.iter().enumerate() {
        acc += it.size();
        if acc >= total / 2 {
            return (i + 1).clamp(1, items.len() - 1);
        }
    }
    items.len() / 2
}

impl ZnodeSet {
    /// An empty set.
    pub fn new() -> ZnodeSet {
        ZnodeSet::default()
    }

    /// Number of znodes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The key and bytes of the leaf `path` belongs in: the last one starting at or
    /// before it.
    fn leaf_of(&self, path: &[u8]) -> Option<(&[u8], &[u8])> {
        self.leaves
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(path)))
            .next_back()
            .map(|(k, v)| (&k[..], &v[..]))
    }

    /// The znode at `path`.
    pub fn get(&self, path: &[u8]) -> Option<ZnodeRef<'_>> {
        let (_, leaf) = self.leaf_of(path)?;
        let leaf = Leaf::parse(leaf);
        let key = path.strip_prefix(leaf.prefix)?;
        for (_, _, node) in leaf.records() {
            match node.key().cmp(key) {
                Ordering::Less => continue,
                Ordering::Equal => return Some(node),
                Ordering::Greater => return None,
            }
        }
        None
    }

    /// The path of the last znode.
    pub fn last_path(&self) -> Option<Vec<u8>> {
        let (_, leaf) = self.leaves.last_key_value()?;
        let leaf = Leaf::parse(leaf);
        let (_, _, node) = leaf.records().last()?;
        Some([leaf.prefix, node.key()].concat())
    }

    /// Znodes in path order, from `lower` on.
    pub fn range_from(&self, lower: Bound<&[u8]>) -> Iter<'_> {
        let start = match lower {
            Bound::Included(l) | Bound::Excluded(l) => self.leaf_of(l).map(|(k, _)| k),
            Bound::Unbounded => None,
        };
        let leaves = match start {
            Some(k) => self
                .leaves
                .range::<[u8], _>((Bound::Included(k), Bound::Unbounded)),
            None => self.leaves.range::<[u8], _>(..),
        };
        let mut iter = Iter {
            leaves,
            prefix: &[],
            records: None,
            pending: None,
        };
        // The leaf the walk starts in can begin below the bound.
        while let Some(e) = iter.next() {
            let below = match lower {
                Bound::Unbounded => false,
                Bound::Included(l) => e.cmp_path(l) == Ordering::Less,
                Bound::Excluded(l) => e.cmp_path(l) != Ordering::Greater,
            };
            if !below {
                iter.pending = Some(e);
                break;
            }
        }
        iter
    }

    /// Adds `node` (at its path), replacing a znode at the same path; returns whether
    /// one was replaced.
    pub fn insert(&mut self, node: &Znode) -> bool {
        self.put(node, true)
    }

    /// Adds `node` unless a znode is at its path already; returns whether it was
    /// added (when not, the set is as it was). One search, where a get first and then
    /// an insert took two: every create.
    pub(super) fn insert_new(&mut self, node: &Znode) -> bool {
        !self.put(node, false)
    }

    /// Adds `node`; returns whether a znode was at its path, which is replaced if
    /// `replace` and else left as it was (and `node` not added).
    fn put(&mut self, node: &Znode, replace: bool) -> bool {
        let path = node.view().key();
        if self.leaves.is_empty() {
            let items = [Item::new(node.view())];
            let base = items[0].base();
            self.put_run(&items, base, None);
            self.len += 1;
            return false;
        }
        if let Some(replaced) = self.splice_in(node, replace) {
            if !replaced {
                self.len += 1;
            }
            return replaced;
        }
        // The leaf is rebuilt (split) below, found again by its key: a path already
        // there is found first, so a refused one leaves the leaf as it was.
        if !replace && self.get(path).is_some() {
            return true;
        }
        let (key, _) = leaf_for(&mut self.leaves, path).expect("the set is not empty");
        let key = key.to_vec();
        if self.is_one_large_other(&key, path) {
            // A leaf of one large znode stays as it is (not copied twice to split it
            // off again): the new znode starts a leaf of its own.
            let items = [Item::new(node.view())];
            let base = items[0].base();
            self.put_run(&items, base, None);
            self.len += 1;
            return false;
        }
        let old = self.leaves.remove(key.as_slice()).expect("leaf just found");
        let leaf = Leaf::parse(&old);
        let mut items: Vec<Item<'_>> = Vec::with_capacity(64);
        let mut at = None;
        let mut replaced = false;
        for it in leaf.items() {
            if at.is_none() {
                match cmp_item(&it, path) {
                    Ordering::Less => {}
                    Ordering::Equal => {
                        at = Some(items.len());
                        items.push(Item::new(node.view()));
                        replaced = true;
                        continue;
                    }
                    Ordering::Greater => {
                        at = Some(items.len());
                        items.push(Item::new(node.view()));
                    }
                }
            }
            items.push(it);
        }
        let at = at.unwrap_or_else(|| {
            items.push(Item::new(node.view()));
            items.len() - 1
        });
        self.put_run(&items, leaf.base, Some(at));
        if !replaced {
            self.len += 1;
        }
        replaced
    }

    /// Whether the leaf at `leaf_key` holds a single znode, larger than half a leaf, at
    /// a path before `path`: the new znode can start a leaf of its own after it. (One
    /// after `path` but still in this leaf's range, which a delete can leave below its
    /// first znode, would then be found in the new leaf.)
    fn is_one_large_other(&self, leaf_key: &[u8], path: &[u8]) -> bool {
        let Some(bytes) = self.leaves.get(leaf_key) else {
            return false;
        };
        let leaf = Leaf::parse(bytes);
        let mut items = leaf.items();
        match (items.next(), items.next()) {
            (Some(only), None) => {
                bytes.len() > LEAF_MAX_BYTES / 2 && cmp_item(&only, path) == Ordering::Less
            }
            _ => false,
        }
    }

    /// Puts `node` into its leaf by copying the leaf around its record
    /// (or over the old record, in place, when the length stays), without decoding the
    /// other records; returns whether a znode was replaced, or `None` when that cannot
    /// be done (the path does not start with the leaf's prefix, or the leaf would pass
    /// [`LEAF_MAX_BYTES`]) and the leaf must be rebuilt. A prefix shared by every path
    /// stays shared after an insert that starts with it, even if no longer the longest.
    /// Unless `replace`, a znode found at the path is left as it is (and `Some(true)`
    /// returned).
    fn splice_in(&mut self, node: &Znode, replace: bool) -> Option<bool> {
        let path = node.view().key();
        let (leaf_key, bytes) = leaf_for(&mut self.leaves, path)?;
        let leaf = Leaf::parse(bytes);
        let key = path.strip_prefix(leaf.prefix)?;
        let (start, end, replaced) = leaf
            .records()
            .find_map(|(s, e, n)| match n.key().cmp(key) {
                Ordering::Equal => Some((s, e, true)),
                Ordering::Greater => Some((s, s, false)),
                Ordering::Less => None,
            })
            .unwrap_or((bytes.len(), bytes.len(), false));
        if replaced && !replace {
            return Some(true);
        }
        let first = start == leaf.records_at;
        let view = node.view();
        let (fields, data_at) = view.fields();
        let rec = &mut self.scratch;
        rec.clear();
        encode_record(rec, key, &[], &fields, leaf.base, &view.bytes()[data_at..]);
        let (len, len_bytes) = znode::varint(rec.len() as u64);
        let len = &len[..len_bytes];
        let new_len = len_bytes + rec.len();
        if replaced && new_len == end - start {
            bytes[start..start + len_bytes].copy_from_slice(len);
            bytes[start + len_bytes..end].copy_from_slice(rec);
            return Some(true);
        }
        let total = bytes.len() - (end - start) + new_len;
        if total > LEAF_MAX_BYTES {
            return None;
        }
        let mut b = Vec::with_capacity(total);
        b.extend_from_slice(&bytes[..start]);
        b.extend_from_slice(len);
        b.extend_from_slice(rec);
        b.extend_from_slice(&bytes[end..]);
        *bytes = b.into_boxed_slice();
        if first && !replaced {
            // A new first znode: the leaf is found by its path now.
            let leaf_key: Box<[u8]> = leaf_key.into();
            let leaf = self.leaves.remove(&leaf_key).expect("leaf just changed");
            self.leaves.insert(path.into(), leaf);
        }
        Some(replaced)
    }

    /// Finds the record at `path`, asks `decide` whether it goes, and if so takes it out
    /// of its leaf by copying the leaf around it. `None` when `path` is not there
    /// (`decide` not called); else `decide`'s answer, and whether the removal is done:
    /// `false` when the leaf would become small enough to merge, and
    /// [`ZnodeSet::rebuild_without`] merges it with its successor or cuts the record
    /// out.
    fn splice_out<R, E>(
        &mut self,
        path: &[u8],
        decide: impl FnOnce(ZnodeRef<'_>) -> Result<R, E>,
    ) -> Option<(Result<R, E>, bool)> {
        let (leaf_key, bytes) = leaf_for(&mut self.leaves, path)?;
        let leaf = Leaf::parse(bytes);
        let key = path.strip_prefix(leaf.prefix)?;
        let mut records = leaf.records();
        let (start, end, node) = records.find(|(_, _, n)| n.key() >= key)?;
        if node.key() != key {
            return None;
        }
        let answer = match decide(node) {
            Ok(r) => r,
            Err(e) => return Some((Err(e), false)),
        };
        let last = records.next().is_none();
        let total = bytes.len() - (end - start);
        if last && start == leaf.records_at {
            // The only znode: the leaf goes.
            let leaf_key: Box<[u8]> = leaf_key.into();
            self.leaves.remove(&leaf_key);
            return Some((Ok(answer), true));
        }
        if total < LEAF_MERGE_BYTES {
            return Some((Ok(answer), false));
        }
        // The leaf keeps its key even when its first znode goes: the key stays at or
        // before every path left in it.
        splice_around(bytes, start, end);
        Some((Ok(answer), true))
    }

    /// Changes header fields of the znode at `path` where it lies: `f` gets them
    /// decoded and changes them. The new header overwrites the old one in its leaf when
    /// it is as long, as it nearly always is (a varint grows a byte only past 2^6,
    /// 2^13, ..., and a field takes its first byte when it leaves zero: a parent's first
    /// child, a znode's first setACL); else the znode is rebuilt and put back. No owned
    /// copy of the znode, one search: a parent's update on every create and delete. `f`
    /// also gets the znode's data (to hash it, see [`super::digest`]); its result is
    /// returned. Returns `None`, without calling `f`, if there is no such znode.
    pub(super) fn update_fields<R>(
        &mut self,
        path: &[u8],
        f: impl FnOnce(&mut Fields, &[u8]) -> R,
    ) -> Option<R> {
        let (_, bytes) = leaf_for(&mut self.leaves, path)?;
        let leaf = Leaf::parse(bytes);
        let key = path.strip_prefix(leaf.prefix)?;
        let (_, end, node) = leaf.records().find(|(_, _, n)| n.key() >= key)?;
        if node.key() != key {
            return None;
        }
        // The record's body ends where the record does.
        let at = end - node.bytes().len();
        let start = node.header_start();
        let (mut fields, data_at) = node.fields();
        let r = f(&mut fields, &node.bytes()[data_at..]);
        let (header, len) = znode::header(&fields, leaf.base);
        if len == data_at - start {
            bytes[at + start..at + data_at].copy_from_slice(&header[..len]);
            return Some(r);
        }
        let rebuilt = Znode::build(path, &fields, &node.bytes()[data_at..]);
        self.insert(&rebuilt);
        Some(r)
    }

    /// Replaces the data of the znode at `path` with `data` where it lies, after `f`
    /// got its header fields decoded (to change them) and its old data (to hash it, see
    /// [`super::digest`]); `f`'s result is returned. One search and no owned copy of
    /// the znode, where a get and an insert took two: every setData. The record is
    /// overwritten in place when its length stays (same data size, as in most
    /// setData), else its leaf is copied around it, or rebuilt (split) if it would
    /// pass [`LEAF_MAX_BYTES`]. Returns `None`, without calling `f`, if there is no
    /// such znode.
    pub(super) fn set_data_with<R>(
        &mut self,
        path: &[u8],
        data: Option<&[u8]>,
        f: impl FnOnce(&mut Fields, &[u8]) -> R,
    ) -> Option<R> {
        let (_, bytes) = leaf_for(&mut self.leaves, path)?;
        let leaf = Leaf::parse(bytes);
        let key = path.strip_prefix(leaf.prefix)?;
        let (start, end, node) = leaf.records().find(|(_, _, n)| n.key() >= key)?;
        if node.key() != key {
            return None;
        }
        let (mut fields, data_at) = node.fields();
        let r = f(&mut fields, &node.bytes()[data_at..]);
        fields.null_data = data.is_none();
        let data = data.unwrap_or(&[]);
        let rec = &mut self.scratch;
        rec.clear();
        encode_record(rec, key, &[], &fields, leaf.base, data);
        let (len, len_bytes) = znode::varint(rec.len() as u64);
        let len = &len[..len_bytes];
        let new_len = len_bytes + rec.len();
        if new_len == end - start {
            bytes[start..start + len_bytes].copy_from_slice(len);
            bytes[start + len_bytes..end].copy_from_slice(rec);
            return Some(r);
        }
        let total = bytes.len() - (end - start) + new_len;
        if total <= LEAF_MAX_BYTES {
            // The znode keeps its place, so the leaf keeps its key.
            let mut b = Vec::with_capacity(total);
            b.extend_from_slice(&bytes[..start]);
            b.extend_from_slice(len);
            b.extend_from_slice(rec);
            b.extend_from_slice(&bytes[end..]);
            *bytes = b.into_boxed_slice();
            return Some(r);
        }
        let rebuilt = Znode::build(path, &fields, data);
        self.insert(&rebuilt);
        Some(r)
    }

    /// Takes the znode at `path` out; `None` if there is none.
    pub fn remove(&mut self, path: &[u8]) -> Option<Znode> {
        let taken = self.remove_with(path, |node| {
            Ok::<_, std::convert::Infallible>(Znode::from_ref(path, node))
        })?;
        match taken {
            Ok(node) => Some(node),
            Err(never) => match never {},
        }
    }

    /// Takes the znode at `path` out if `decide`, which sees it first, says so
    /// (`Ok`); `decide`'s refusal (`Err`) leaves the set as it was. `None`, without
    /// calling `decide`, if there is no such znode. One search, and no owned copy of
    /// the znode: a delete's check (no children) and everything it needs of the znode
    /// (its data's size, owner, ACL and digest) come from `decide`, where a get, a
    /// remove returning the znode and the indexes' own get took three searches.
    pub(super) fn remove_with<R, E>(
        &mut self,
        path: &[u8],
        decide: impl FnOnce(ZnodeRef<'_>) -> Result<R, E>,
    ) -> Option<Result<R, E>> {
        let answer = match self.splice_out(path, decide)? {
            (Err(e), _) => return Some(Err(e)),
            (Ok(r), true) => r,
            (Ok(r), false) => {
                self.rebuild_without(path);
                r
            }
        };
        self.len -= 1;
        Some(Ok(answer))
    }

    /// Takes `path` out of a leaf that becomes small ([`LEAF_MERGE_BYTES`]): rebuilt
    /// and merged with the next leaf when both fit in one, else copied around the
    /// record as [`ZnodeSet::splice_out`] does (re-encoding it would buy nothing: an
    /// ascending run of deletes reaches every leaf's last quarter while the next leaf
    /// is still full). `path` is there ([`ZnodeSet::splice_out`] found it) and is not
    /// the leaf's only znode.
    fn rebuild_without(&mut self, path: &[u8]) {
        let (key, bytes) = self.leaf_of(path).expect("splice_out found the znode");
        let leaf = Leaf::parse(bytes);
        let mut found = None;
        let mut size = 0;
        for (start, end, node) in leaf.records() {
            let it = Item {
                head: leaf.prefix,
                tail: node.key(),
                node,
            };
            if found.is_none() && cmp_item(&it, path) == Ordering::Equal {
                found = Some((start, end));
            } else {
                size += it.size();
            }
        }
        let (start, end) = found.expect("splice_out found the znode in this leaf");
        let merge = size < LEAF_MERGE_BYTES
            && self
                .leaves
                .range::<[u8], _>((Bound::Excluded(key), Bound::Unbounded))
                .next()
                .is_some_and(|(_, b)| size + b.len() <= LEAF_MAX_BYTES);
        let key = key.to_vec();
        if !merge {
            let bytes = self
                .leaves
                .get_mut(key.as_slice())
                .expect("leaf just found");
            splice_around(bytes, start, end);
            return;
        }
        let (key, old) = self
            .leaves
            .remove_entry(key.as_slice())
            .expect("leaf just found");
        let leaf = Leaf::parse(&old);
        let mut items: Vec<Item<'_>> = Vec::with_capacity(64);
        items.extend(
            leaf.items()
                .filter(|it| cmp_item(it, path) != Ordering::Equal),
        );
        let next = self
            .leaves
            .range::<[u8], _>((Bound::Excluded(&key[..]), Bound::Unbounded))
            .next()
            .map(|(k, _)| k.clone());
        let next_leaf = next.and_then(|k| self.leaves.remove(&k));
        if let Some(n) = &next_leaf {
            items.extend(Leaf::parse(n).items());
        }
        self.put_run(&items, leaf.base, None);
    }

    /// Writes `items` (in path order, at least one) as one leaf based on `base`, or as
    /// several if they do not fit in [`LEAF_MAX_BYTES`]; the later ones are based on
    /// their first znode. `new` is where a znode was just inserted: the cut goes right
    /// after it, so the next insert of an ascending run (sequential names, even in the
    /// middle of the tree) appends to a leaf that fills up instead of being halved;
    /// at the very end the new znode starts a leaf of its own. (Such appends rebuild
    /// the leaf instead of splicing into it whenever they shorten its shared prefix,
    /// see [`build_leaf`].)
    fn put_run(&mut self, items: &[Item<'_>], base: Base, new: Option<usize>) {
        build_leaf(items, base, &mut self.scratch);
        if self.scratch.len() <= LEAF_MAX_BYTES || items.len() == 1 {
            let leaf: Box<[u8]> = self.scratch.as_slice().into();
            self.leaves.insert(items[0].path().into_boxed_slice(), leaf);
            return;
        }
        let cut = match new {
            Some(i) if i + 1 < items.len() => i + 1,
            Some(i) if i > 0 => i,
            _ => midpoint(items),
        };
        let (left, right) = items.split_at(cut);
        self.put_run(left, base, None);
        self.put_run(right, right[0].base(), None);
    }

    /// Adds `nodes`, which are in strictly increasing path order and all after every
    /// znode in the set (a snapshot being loaded), as full leaves without searching.
    /// Unless `all`, stops before a last run too small to fill a leaf, so a load can
    /// hand znodes over in batches and still get full leaves; returns how many it took.
    pub fn append_sorted(&mut self, nodes: &[ZnodeRef<'_>], all: bool) -> usize {
        let set = self;
        let items: Vec<Item<'_>> = nodes.iter().map(|&n| Item::new(n)).collect();
        let mut start = 0;
        while start < items.len() {
            // Estimated by whole paths and unbased headers, which overstate: the run
            // grows until the real leaf would pass the limit, then gives back the last.
            let mut end = start + 1;
            let mut size = items[start].size();
            while end < items.len() && size + items[end].size() <= 2 * LEAF_MAX_BYTES {
                size += items[end].size();
                end += 1;
            }
            let base = items[start].base();
            build_leaf(&items[start..end], base, &mut set.scratch);
            if set.scratch.len() > LEAF_MAX_BYTES {
                // Keep the records that fit, as this build encoded them; a shorter run
                // can only share a longer prefix, so the rebuild is no larger.
                let leaf = Leaf::parse(&set.scratch);
                let fit = leaf
                    .records()
                    .take_while(|&(_, rec_end, _)| rec_end <= LEAF_MAX_BYTES)
                    .count();
                end = start + fit.max(1);
                build_leaf(&items[start..end], base, &mut set.scratch);
            } else if end == items.len() && !all {
                // Not full, and the next batch may add to it.
                break;
            }
            let leaf: Box<[u8]> = set.scratch.as_slice().into();
            set.leaves
                .insert(items[start].path().into_boxed_slice(), leaf);
            set.len += end - start;
            start = end;
        }
        start
    }
}

/// Cuts the record at `start..end` out of a leaf by copying the leaf around it: the
/// other records, the prefix (which every path left still shares) and the base stay
/// as they are.
fn splice_around(bytes: &mut Box<[u8]>, start: usize, end: usize) {
    let mut b = Vec::with_capacity(bytes.len() - (end - start));
    b.extend_from_slice(&bytes[..start]);
    b.extend_from_slice(&bytes[end..]);
    *bytes = b.into_boxed_slice();
}

/// The leaf `path` belongs in, found with one search: the last one starting at or
/// before it, else (a path before every leaf) the first.
fn leaf_for<'a>(
    leaves: &'a mut BTreeMap<Box<[u8]>, Box<[u8]>>,
    path: &[u8],
) -> Option<(&'a [u8], &'a mut Box<[u8]>)> {
    let before_all = leaves.first_key_value().is_some_and(|(k, _)| &k[..] > path);
    let (k, v) = if before_all {
        leaves.iter_mut().next()
    } else {
        leaves
            .range_mut::<[u8], _>((Bound::Unbounded, Bound::Included(path)))
            .next_back()
    }?;
    Some((&k[..], v))
}

/// How `it`'s path compares with `path`.
fn cmp_item(it: &Item<'_>, path: &[u8]) -> Ordering {
    let n = it.head.len().min(path.len());
    match it.head[..n].cmp(&path[..n]) {
        Ordering::Equal if path.len() < it.head.len() => Ordering::Greater,
        Ordering::Equal => it.tail.cmp(&path[it.head.len()..]),
        o => o,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::ZnodeMeta;
    use proptest::prelude::*;
    use std::collections::BTreeMap as Model;

    /// A znode whose fields and data are derived from `seed`, so the model can check
    /// every field comes back.
    fn node(path: &str, seed: u64) -> Znode {
        let meta = ZnodeMeta {
            czxid: (1 << 32) + (seed % 5000) as i64,
            mzxid: (1 << 32) + (seed % 7000) as i64,
            pzxid: (seed % 3) as i64 * 1_000_000,
            ctime: 1_764_000_000_000 + (seed % 100_000) as i64,
            mtime: 1_764_000_000_000 + (seed % 90_000) as i64,
            version: (seed % 11) as i32,
            child_creates: (seed % 13) as i32,
            aversion: (seed % 2) as i32,
            ephemeral_owner: if seed.is_multiple_of(4) {
                seed as i64
            } else {
                0
            },
        };
        // Mostly small, some larger than a leaf or than half a leaf, some null.
        let data = match seed % 17 {
            0 => None,
            1 => Some(vec![seed as u8; 5000]),
            2 => Some(vec![seed as u8; 2500]),
            n => Some(vec![seed as u8; (n * 13) as usize]),
        };
        Znode::new(
            path,
            data.as_deref(),
            (seed % 3) as u32,
            &meta,
            (seed % 5) as i32,
        )
    }

    fn same(got: ZnodeRef<'_>, want: &Znode) {
        let want = want.view();
        assert_eq!(got.meta(), want.meta());
        assert_eq!(got.data(), want.data());
        assert_eq!(got.acl_id(), want.acl_id());
        assert_eq!(got.num_children(), want.num_children());
    }

    /// The borrowed forms of `zs`, as [`ZnodeSet::append_sorted`] takes them.
    fn views(zs: &[Znode]) -> Vec<ZnodeRef<'_>> {
        zs.iter().map(Znode::view).collect()
    }

    /// Paths from a small alphabet with '/', so they share prefixes and directories.
    fn path_strategy() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                Just("a"),
                Just("b"),
                Just("k0001"),
                Just("k0002"),
                Just("z")
            ],
            1..5,
        )
        .prop_map(|parts| format!("/{}", parts.join("/")))
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(String, u64),
        /// [`ZnodeSet::insert_new`]: a znode already there stays as it is.
        InsertNew(String, u64),
        Remove(String),
        /// [`ZnodeSet::remove_with`], whose `decide` refuses when the flag is set.
        RemoveIf(String, bool),
        Sequential(String, u16, u64),
        Update(String, u64),
        SetData(String, u64),
    }

    /// A header change derived from `seed` whose varints grow or shrink (or keep
    /// their length), for [`ZnodeSet::update_fields`].
    fn change(seed: u64) -> impl Fn(&mut Fields) {
        move |f: &mut Fields| {
            let big = |bits: u64| (seed >> bits) as i64 & ((1 << (seed % 40)) - 1);
            f.meta.pzxid = f.meta.czxid.wrapping_add(big(3));
            f.num_children = big(11) as i32;
            if seed.is_multiple_of(3) {
                f.meta.child_creates = f.meta.child_creates.wrapping_add(1);
            }
        }
    }

    fn op_strategy() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (path_strategy(), any::<u64>()).prop_map(|(p, s)| Op::Insert(p, s)),
            2 => (path_strategy(), any::<u64>()).prop_map(|(p, s)| Op::InsertNew(p, s)),
            2 => path_strategy().prop_map(Op::Remove),
            2 => (path_strategy(), any::<bool>()).prop_map(|(p, refuse)| Op::RemoveIf(p, refuse)),
            1 => (path_strategy(), 1..200u16, any::<u64>()).prop_map(|(p, n, s)| Op::Sequential(p, n, s)),
            2 => (path_strategy(), any::<u64>()).prop_map(|(p, s)| Op::Update(p, s)),
            2 => (path_strategy(), any::<u64>()).prop_map(|(p, s)| Op::SetData(p, s)),
        ]
    }

    fn check(set: &ZnodeSet, model: &Model<String, Znode>, probes: &[String]) {
        assert_eq!(set.len(), model.len());
        // Each leaf's key is at or before its first path and after the last path of
        // the leaf before it; no leaf is empty.
        let mut last_before: Option<Vec<u8>> = None;
        for (key, bytes) in &set.leaves {
            let leaf = Leaf::parse(bytes);
            let paths: Vec<Vec<u8>> = leaf.items().map(|it| it.path()).collect();
            assert!(!paths.is_empty(), "an empty leaf at {key:?}");
            assert!(key[..] <= paths[0][..], "key {key:?} after its first path");
            if let Some(prev) = &last_before {
                assert!(prev[..] < key[..], "key {key:?} not after {prev:?}");
            }
            last_before = paths.last().cloned();
        }
        // Every znode in order, with its path.
        let all: Vec<(String, ZnodeRef<'_>)> = set
            .range_from(Bound::Unbounded)
            .map(|e| (e.path(), e.node()))
            .collect();
        assert_eq!(all.len(), model.len());
        for ((p, n), (mp, mn)) in all.iter().zip(model) {
            assert_eq!(p, mp);
            same(*n, mn);
        }
        assert_eq!(
            set.last_path(),
            model.keys().next_back().map(|k| k.as_bytes().to_vec())
        );
        for p in probes {
            match (set.get(p.as_bytes()), model.get(p)) {
                (Some(g), Some(w)) => same(g, w),
                (None, None) => {}
                (g, w) => panic!("{p}: set {g:?}, model {w:?}"),
            }
            for (bound, lo) in [
                (Bound::Included(p.as_bytes()), Bound::Included(p.clone())),
                (Bound::Excluded(p.as_bytes()), Bound::Excluded(p.clone())),
            ] {
                let got: Vec<String> = set.range_from(bound).take(5).map(|e| e.path()).collect();
                let want: Vec<String> = model
                    .range((lo, Bound::Unbounded))
                    .take(5)
                    .map(|(k, _)| k.clone())
                    .collect();
                assert_eq!(got, want, "range from {p}");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn behaves_like_an_ordered_map(ops in proptest::collection::vec(op_strategy(), 1..120)) {
            let mut set = ZnodeSet::new();
            let mut model: Model<String, Znode> = Model::new();
            let mut probes = Vec::new();
            for op in ops {
                match op {
                    Op::Insert(p, s) => {
                        let n = node(&p, s);
                        prop_assert_eq!(set.insert(&n), model.insert(p.clone(), n).is_some());
                        probes.push(p);
                    }
                    Op::InsertNew(p, s) => {
                        let n = node(&p, s);
                        let absent = !model.contains_key(&p);
                        prop_assert_eq!(set.insert_new(&n), absent);
                        if absent {
                            model.insert(p.clone(), n);
                        }
                        probes.push(p);
                    }
                    Op::Remove(p) => {
                        let got = set.remove(p.as_bytes());
                        let want = model.remove(&p);
                        prop_assert_eq!(got.is_some(), want.is_some());
                        if let (Some(g), Some(w)) = (got, want) {
                            prop_assert_eq!(g.path(), p.as_str());
                            same(g.view(), &w);
                        }
                        probes.push(p);
                    }
                    Op::RemoveIf(p, refuse) => {
                        // `decide` sees the znode at `p`; refused, nothing changes.
                        let got = set.remove_with(p.as_bytes(), |n| {
                            let seen = (n.data_bytes().to_vec(), n.czxid());
                            if refuse { Err(seen) } else { Ok(seen) }
                        });
                        prop_assert_eq!(got.as_ref().map(Result::is_ok), model.get(&p).map(|_| !refuse));
                        let want = model.get(&p).map(|z| (z.view().data_bytes().to_vec(), z.view().czxid()));
                        prop_assert_eq!(got.map(|r| r.unwrap_or_else(|seen| seen)), want);
                        if !refuse {
                            model.remove(&p);
                        }
                        probes.push(p);
                    }
                    Op::Sequential(dir, n, s) => {
                        for i in 0..n {
                            let p = format!("{dir}/s{:06}", (s as u32 % 1000) + i as u32);
                            let z = node(&p, s.wrapping_add(i as u64));
                            set.insert(&z);
                            model.insert(p, z);
                        }
                    }
                    Op::Update(p, s) => {
                        let found = set.update_fields(p.as_bytes(), |f, _| change(s)(f)).is_some();
                        let want = model.get_mut(&p).map(|z| z.update(change(s)));
                        prop_assert_eq!(found, want.is_some());
                        probes.push(p);
                    }
                    Op::SetData(p, s) => {
                        let old = model.get(&p).map(|z| z.view().data_bytes().to_vec());
                        // The same length (overwritten in place), another that fits,
                        // more than a leaf holds, or null.
                        let data = match s % 4 {
                            0 => old.clone().map(|d| vec![s as u8; d.len()]),
                            1 => Some(vec![s as u8; (s % 300) as usize]),
                            2 => Some(vec![s as u8; 4500]),
                            _ => None,
                        };
                        let mut seen = None;
                        let got = set.set_data_with(p.as_bytes(), data.as_deref(), |f, d| {
                            seen = Some(d.to_vec());
                            f.meta.version = s as i32;
                            f.meta.mzxid = f.meta.czxid.wrapping_add((s >> 7) as i64 & 0xffff_ffff);
                            f.meta.mtime = f.meta.ctime.wrapping_add((s >> 3) as i64 & 0xff_ffff);
                            s
                        });
                        prop_assert_eq!(got, old.as_ref().map(|_| s));
                        prop_assert_eq!(&seen, &old);
                        if let Some(z) = model.get_mut(&p) {
                            let (mut f, _) = z.view().fields();
                            f.meta.version = s as i32;
                            f.meta.mzxid = f.meta.czxid.wrapping_add((s >> 7) as i64 & 0xffff_ffff);
                            f.meta.mtime = f.meta.ctime.wrapping_add((s >> 3) as i64 & 0xff_ffff);
                            f.null_data = data.is_none();
                            *z = Znode::build(p.as_bytes(), &f, data.as_deref().unwrap_or(&[]));
                        }
                        probes.push(p);
                    }
                }
            }
            check(&set, &model, &probes);
            // A set built in one pass from the same znodes reads the same.
            let sorted: Vec<Znode> = model.values().cloned().collect();
            let mut bulk = ZnodeSet::new();
            prop_assert_eq!(bulk.append_sorted(&views(&sorted), true), sorted.len());
            check(&bulk, &model, &probes);
            // And in batches, as a load hands them over.
            let mut batched = ZnodeSet::new();
            let mut pending: Vec<Znode> = Vec::new();
            for z in sorted {
                pending.push(z);
                if pending.len() >= 7 {
                    let taken = batched.append_sorted(&views(&pending), false);
                    pending.drain(..taken);
                }
            }
            prop_assert_eq!(batched.append_sorted(&views(&pending), true), pending.len());
            check(&batched, &model, &probes);
            // Removing everything leaves nothing behind.
            for p in model.keys() {
                prop_assert!(set.remove(p.as_bytes()).is_some());
            }
            prop_assert!(set.is_empty());
            prop_assert_eq!(set.leaves.len(), 0);
        }
    }

    /// A setData that keeps the record's length (same data size, header varints of
    /// the same widths) overwrites it inside its leaf: the leaf is not reallocated.
    #[test]
    fn a_set_data_of_the_same_length_is_written_in_place() {
        let mut set = ZnodeSet::new();
        for i in 0..20u64 {
            set.insert(&node(&format!("/a/k{i:04}"), 2 + 17 * i));
        }
        let leaf_at = |set: &ZnodeSet| set.leaves.values().map(|l| l.as_ptr()).collect::<Vec<_>>();
        let path = b"/a/k0007";
        let old = set.get(path).expect("there").data_bytes().to_vec();
        // A znode changed once already: its first change stores a version where a new
        // znode's header stores none (a zero takes no byte), so that one is a copy.
        set.set_data_with(path, Some(&old), |f, _| f.meta.version = 1)
            .expect("found");
        let before = leaf_at(&set);
        let data = vec![b'n'; old.len()];
        let version = set
            .set_data_with(path, Some(&data), |f, d| {
                assert_eq!(d, &old[..]);
                f.meta.version += 1;
                f.meta.version
            })
            .expect("found");
        assert_eq!(leaf_at(&set), before, "the leaf was reallocated");
        let got = set.get(path).expect("there");
        assert_eq!((got.data_bytes(), got.meta().version), (&data[..], version));
        assert_eq!(set.len(), 20);
        assert!(set.set_data_with(b"/a/k0020", None, |_, _| ()).is_none());
    }

    /// A delete keeps its leaf's key: after the first znode of [small, half-leaf]
    /// goes, the leaf is keyed below its one large znode, and a znode inserted in
    /// between must not start a leaf of its own (the large one would then be looked
    /// up in it).
    #[test]
    fn an_insert_below_a_large_znode_in_a_leaf_keyed_before_it_keeps_it_found() {
        let mut set = ZnodeSet::new();
        let small = Znode::new("/a/1", Some(&[1; 10]), 0, &ZnodeMeta::default(), 0);
        let large = Znode::new("/a/5", Some(&[5; 2500]), 0, &ZnodeMeta::default(), 0);
        let between = Znode::new("/a/3", Some(&[3; 2000]), 0, &ZnodeMeta::default(), 0);
        set.insert(&small);
        set.insert(&large);
        assert_eq!(set.leaves.len(), 1, "both fit in one leaf");
        assert!(set.remove(b"/a/1").is_some());
        set.insert(&between);
        same(set.get(b"/a/5").expect("the large znode is found"), &large);
        same(set.get(b"/a/3").expect("the new znode is found"), &between);
        let paths: Vec<String> = set.range_from(Bound::Unbounded).map(|e| e.path()).collect();
        assert_eq!(paths, ["/a/3", "/a/5"]);
    }

    #[test]
    fn ascending_inserts_fill_leaves() {
        // Four interleaved ascending runs, as four clients creating sequential names.
        let mut set = ZnodeSet::new();
        let data = [b'x'; 100];
        let meta = ZnodeMeta::created(0, 1 << 32, 1_764_000_000_000);
        for i in 0..2500 {
            for s in 0..4 {
                let p = format!("/d/k{:08}", s * 2500 + i);
                set.insert(&Znode::new(&p, Some(&data), 0, &meta, 0));
            }
        }
        let bytes: usize = set.leaves.values().map(|l| l.len()).sum();
        let full = set.leaves.len() * LEAF_MAX_BYTES;
        assert!(
            bytes * 10 >= full * 9,
            "leaves {} of {} bytes hold {bytes}",
            set.leaves.len(),
            LEAF_MAX_BYTES
        );
        // A record is its length, key, header and data: the shared "/d/k0000..." and the
        // whole czxid and ctime are stored once per leaf, a key is the 2-3 digits its
        // leaf's names do not share (with a prefix stopping at the last '/', all 9
        // characters: 115 bytes a znode), and a znode never changed has a header of 4
        // bytes (mask, czxid and ctime from the leaf's, ACL id).
        assert!(
            bytes / set.len() < 100 + 4 + 8,
            "{} bytes a znode",
            bytes / set.len()
        );
    }

    /// A leaf's prefix is the longest start its paths share, but never ends inside a
    /// character: "è" and "é" share their first byte, which stays in the keys.
    #[test]
    fn a_leaf_prefix_stops_at_a_character_boundary() {
        let mut set = ZnodeSet::new();
        let meta = ZnodeMeta::created(0, 1 << 32, 1_764_000_000_000);
        for p in ["/x/k0000000001", "/x/k0000000002"] {
            set.insert(&Znode::new(p, None, 0, &meta, 0));
        }
        let e = set.range_from(Bound::Unbounded).next().unwrap();
        assert_eq!((e.prefix(), e.key()), (&b"/x/k000000000"[..], &b"1"[..]));
        let mut set = ZnodeSet::new();
        for p in ["/x/\u{e8}", "/x/\u{e9}"] {
            set.insert(&Znode::new(p, None, 0, &meta, 0));
        }
        let e = set.range_from(Bound::Unbounded).next().unwrap();
        assert_eq!(e.prefix(), b"/x/");
        assert_eq!(std::str::from_utf8(e.key()), Ok("\u{e8}"));
        assert_eq!(e.path(), "/x/\u{e8}");
    }
}

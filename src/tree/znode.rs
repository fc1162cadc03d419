//! One znode as the tree keeps it: its key (path), a header of persisted Stat fields and
//! its data, packed into one record.
//!
//! A million-znode tree is mostly znodes, so their layout decides the server's memory
//! (issue 5). A record is `[key length | key | header | data]`, the header a mask byte
//! and a run of varints (see [`HeaderBuf::encode`]): eight of the Stat fields are zero
//! (or differences that are zero) until the znode changes, and those take no byte
//! until then. The tree packs records into leaves ([`super::znode_set`]), where the key
//! is the path without the leaf's shared prefix and czxid and ctime are relative to the
//! leaf's [`Base`]; [`ZnodeRef`] reads one there. [`Znode`] is a record on its own, with
//! the whole path, for building and changing one. The ACL is an id into the tree's
//! [`AclCache`](super::acl_cache::AclCache), and a znode's children are the paths below
//! it in path order, so only their count is stored here.

use jute::Stat;

/// ephemeralOwner value that marks a container (ZooKeeper's EphemeralType.CONTAINER).
pub const CONTAINER_OWNER: i64 = i64::MIN;
/// High byte that marks a TTL node; the low 40 bits hold the TTL in ms
/// (ZooKeeper's EphemeralType.TTL).
pub const TTL_MASK: i64 = 0xff00_0000_0000_0000u64 as i64;
/// Largest TTL in ms a TTL node may carry.
pub const MAX_TTL_MS: i64 = 0xff_ffff_ffff;

/// The kind of owner an ephemeralOwner value encodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// A plain persistent znode (owner 0).
    None,
    /// An ephemeral znode owned by this session.
    Session(i64),
    /// A container znode.
    Container,
    /// A TTL znode with this time to live, ms.
    Ttl(i64),
}

impl Owner {
    /// Decodes a stored ephemeralOwner.
    pub fn from_raw(raw: i64) -> Owner {
        if raw == 0 {
            Owner::None
        } else if raw == CONTAINER_OWNER {
            Owner::Container
        } else if raw & TTL_MASK == TTL_MASK {
            Owner::Ttl(raw & MAX_TTL_MS)
        } else {
            Owner::Session(raw)
        }
    }
    /// Encodes as a stored ephemeralOwner.
    pub fn to_raw(self) -> i64 {
        match self {
            Owner::None => 0,
            Owner::Session(s) => s,
            Owner::Container => CONTAINER_OWNER,
            Owner::Ttl(t) => TTL_MASK | (t & MAX_TTL_MS),
        }
    }
}

/// The persisted fixed-size fields of a znode, unpacked: what a snapshot record holds
/// besides path, data and ACL. `child_creates` is what ZooKeeper stores as cversion: the
/// number of child creations, which also numbers sequential children; clients see
/// `2 * child_creates - numChildren` (= creates + deletes), see [`Znode::stat`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ZnodeMeta {
    pub czxid: i64,
    pub mzxid: i64,
    pub pzxid: i64,
    /// ms since the epoch.
    pub ctime: i64,
    /// ms since the epoch.
    pub mtime: i64,
    pub version: i32,
    pub child_creates: i32,
    pub aversion: i32,
    /// Raw ephemeralOwner, including the container and TTL encodings.
    pub ephemeral_owner: i64,
}

impl ZnodeMeta {
    /// The fields of a znode created at `zxid` and time `time_ms` by `owner`.
    pub fn created(owner: i64, zxid: i64, time_ms: i64) -> ZnodeMeta {
        ZnodeMeta {
            czxid: zxid,
            mzxid: zxid,
            pzxid: zxid,
            ctime: time_ms,
            mtime: time_ms,
            version: 0,
            child_creates: 0,
            aversion: 0,
            ephemeral_owner: owner,
        }
    }
}

/// A znode's fields besides path and data, decoded ([`Znode::header`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZnodeHeader {
    pub meta: ZnodeMeta,
    /// Children in the tree now.
    pub num_children: i32,
    /// The ACL's id in the tree's ACL cache.
    pub acl_id: u32,
    /// Data length in bytes (0 for null data).
    pub data_len: usize,
}

/// A znode's fields besides path and data, as its header encodes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Fields {
    pub(super) meta: ZnodeMeta,
    pub(super) num_children: i32,
    pub(super) acl: u32,
    pub(super) null_data: bool,
}

impl Fields {
    /// The fields of a znode with `data` (`None`: null), ACL id `acl`, the persisted
    /// fields `meta` and `num_children` children.
    pub(super) fn new(
        data: Option<&[u8]>,
        acl: u32,
        meta: &ZnodeMeta,
        num_children: i32,
    ) -> Fields {
        Fields {
            meta: *meta,
            num_children,
            acl,
            null_data: data.is_none(),
        }
    }

    /// A child was created at `zxid`: numChildren one up and, if `child_creates` is
    /// above the stored child-create count, that count set to it and pzxid to `zxid`
    /// (ZooKeeper's DataTree.createNode: "only update when it's larger"). So the count
    /// stops at i32::MAX: the create that names a child ...2147483647 carries the
    /// wrapped count i32::MIN, which changes nothing, and the next sequential create
    /// names the same child again (NODEEXISTS), as in ZooKeeper.
    pub(super) fn child_created(&mut self, child_creates: i32, zxid: i64) {
        self.num_children = self.num_children.wrapping_add(1);
        if child_creates > self.meta.child_creates {
            self.meta.child_creates = child_creates;
            self.meta.pzxid = zxid;
        }
    }

    /// The Stat a client sees of a znode with these fields and `data_length` bytes of
    /// data: containers and TTL nodes show ephemeralOwner 0, and cversion counts child
    /// creates plus deletes.
    pub(super) fn stat(&self, data_length: i32) -> Stat {
        let m = &self.meta;
        let owner = match Owner::from_raw(m.ephemeral_owner) {
            Owner::Session(s) => s,
            _ => 0,
        };
        let n = self.num_children;
        Stat {
            czxid: m.czxid,
            mzxid: m.mzxid,
            ctime: m.ctime,
            mtime: m.mtime,
            version: m.version,
            cversion: m.child_creates.wrapping_mul(2).wrapping_sub(n),
            aversion: m.aversion,
            ephemeral_owner: owner,
            data_length,
            num_children: n,
            pzxid: m.pzxid,
        }
    }

    /// A child was removed: numChildren one down (never below 0) and, with `zxid`,
    /// pzxid raised to it (never lowered: a later create in the same multi may
    /// already have set a higher one).
    pub(super) fn child_removed(&mut self, zxid: Option<i64>) {
        self.num_children = self.num_children.saturating_sub(1).max(0);
        if let Some(z) = zxid.filter(|&z| z > self.meta.pzxid) {
            self.meta.pzxid = z;
        }
    }
}

/// Longest header: the mask byte, 10 varints of at most 10 bytes, and the ACL id with
/// the null-data bit (33 bits: at most 5 bytes).
pub(super) const MAX_HEADER: usize = 1 + 10 * 10 + 5;

/// The header `fields` encode to against `base`, on the stack: the bytes and how many
/// of them are used.
pub(super) fn header(fields: &Fields, base: Base) -> ([u8; MAX_HEADER], usize) {
    let h = HeaderBuf::encode(fields, base);
    (h.bytes, h.len)
}

/// A header being encoded, on the stack.
struct HeaderBuf {
    bytes: [u8; MAX_HEADER],
    len: usize,
}

impl HeaderBuf {
    fn new() -> HeaderBuf {
        HeaderBuf {
            bytes: [0; MAX_HEADER],
            len: 0,
        }
    }

    /// `[mask | czxid - base | ctime - base | the nonzero ones of (mzxid - czxid,
    /// pzxid - czxid, mtime - ctime, version, child_creates, aversion, numChildren,
    /// ephemeralOwner) | acl << 1 | null data]`, zigzag varints but the mask (bit i set:
    /// field i is stored) and the last (LEB128).
    fn encode(f: &Fields, base: Base) -> HeaderBuf {
        let mut h = HeaderBuf::new();
        let m = &f.meta;
        // The eight fields besides creation and the ACL, as differences from creation
        // (zxids, times) or as they are: a znode never changed since (most of a large
        // tree) has all of them 0, and only those that are not take bytes, named by a
        // mask first. Creation itself is relative to the leaf's base.
        let rest = [
            m.mzxid.wrapping_sub(m.czxid),
            m.pzxid.wrapping_sub(m.czxid),
            m.mtime.wrapping_sub(m.ctime),
            i64::from(m.version),
            i64::from(m.child_creates),
            i64::from(m.aversion),
            i64::from(f.num_children),
            m.ephemeral_owner,
        ];
        let mask = rest
            .iter()
            .enumerate()
            .fold(0u8, |mask, (i, &v)| mask | (u8::from(v != 0) << i));
        h.bytes[0] = mask;
        h.len = 1;
        h.put_signed(m.czxid.wrapping_sub(base.czxid));
        h.put_signed(m.ctime.wrapping_sub(base.ctime));
        for v in rest.into_iter().filter(|&v| v != 0) {
            h.put_signed(v);
        }
        // The ACL id and whether data is null share one varint.
        h.put((u64::from(f.acl) << 1) | u64::from(f.null_data));
        h
    }

    /// LEB128: 7 bits a byte, low first, high bit set on all but the last.
    fn put(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.bytes[self.len] = v as u8 | 0x80;
            self.len += 1;
            v >>= 7;
        }
        self.bytes[self.len] = v as u8;
        self.len += 1;
    }

    /// Zigzag, so small negative numbers take one byte too.
    fn put_signed(&mut self, v: i64) {
        self.put(((v << 1) ^ (v >> 63)) as u64);
    }

    fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// Appends `v` as a LEB128 varint.
pub(super) fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `v` zigzag-encoded, so small negative numbers take one byte too.
pub(super) fn put_signed(out: &mut Vec<u8>, v: i64) {
    put(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// `v` as a LEB128 varint on the stack: the bytes and how many of them are used.
pub(super) fn varint(v: u64) -> ([u8; 10], usize) {
    let mut h = HeaderBuf::new();
    h.put(v);
    let mut out = [0u8; 10];
    out[..h.len].copy_from_slice(h.as_slice());
    (out, h.len)
}

/// Reads the LEB128 varint at `*at`, moving `*at` past it.
pub(super) fn get(b: &[u8], at: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0u32;
    loop {
        let byte = b[*at];
        *at += 1;
        v |= u64::from(byte & 0x7f).wrapping_shl(shift);
        if byte & 0x80 == 0 {
            return v;
        }
        shift += 7;
    }
}

/// Reads a zigzag varint (see [`put_signed`]).
pub(super) fn get_signed(b: &[u8], at: &mut usize) -> i64 {
    let u = get(b, at);
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

/// What a leaf's records store czxid and ctime relative to ([`super::znode_set`]): the
/// znodes of one leaf were mostly created close together, so the differences take one
/// or two bytes where a zxid of epoch 1 takes five and a time in ms six.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Base {
    pub czxid: i64,
    /// ms since the epoch.
    pub ctime: i64,
}

/// Appends one record, `[key length | key | header | data]`, to `out`. The key is
/// `head` followed by `tail` (a leaf stores a path without the prefix its znodes share,
/// so a record's key can be split across two slices when it is re-encoded).
pub(super) fn encode_record(
    out: &mut Vec<u8>,
    head: &[u8],
    tail: &[u8],
    fields: &Fields,
    base: Base,
    data: &[u8],
) {
    let mut len = HeaderBuf::new();
    len.put((head.len() + tail.len()) as u64);
    let header = HeaderBuf::encode(fields, base);
    out.extend_from_slice(len.as_slice());
    out.extend_from_slice(head);
    out.extend_from_slice(tail);
    out.extend_from_slice(header.as_slice());
    out.extend_from_slice(data);
}

/// A znode in the tree, borrowed: `[key length | key | header | data]`, the header a
/// mask byte and varints (see [`HeaderBuf::encode`]), 4 or 5 bytes for a persistent
/// znode never changed since its creation within 63 zxids and 63 ms of its leaf's
/// base (an ephemeralOwner adds up to 10), where fixed fields took 72. In the tree the
/// key is the path without its leaf's prefix and czxid and ctime are relative to the
/// leaf's [`Base`]; the tree hands out paths separately ([`super::znode_set::Entry`]).
#[derive(Clone, Copy)]
pub struct ZnodeRef<'a> {
    bytes: &'a [u8],
    base: Base,
}

/// A znode on its own (not in the tree): the record form of [`ZnodeRef`] with the whole
/// path as key and a zero [`Base`]. What the tree takes to insert and gives back on
/// removal; its setters change the header in place when its length stays.
#[derive(Clone)]
pub struct Znode(Box<[u8]>);

impl Znode {
    /// A znode at `path` with `data`, ACL id `acl` (see `AclCache`), the persisted
    /// fields `meta` and `num_children` children already in the tree.
    pub fn new(
        path: &str,
        data: Option<&[u8]>,
        acl: u32,
        meta: &ZnodeMeta,
        num_children: i32,
    ) -> Znode {
        let fields = Fields::new(data, acl, meta, num_children);
        Znode::build(path.as_bytes(), &fields, data.unwrap_or(&[]))
    }

    /// Appends to `out` the record [`Znode::new`] would hold with these arguments, so
    /// znodes can be staged back to back in one buffer ([`ZnodeRef::new`] with a
    /// default [`Base`] reads one back).
    pub(super) fn encode_new(
        out: &mut Vec<u8>,
        path: &str,
        data: Option<&[u8]>,
        acl: u32,
        meta: &ZnodeMeta,
        num_children: i32,
    ) {
        let fields = Fields::new(data, acl, meta, num_children);
        encode_record(
            out,
            path.as_bytes(),
            &[],
            &fields,
            Base::default(),
            data.unwrap_or(&[]),
        );
    }

    pub(super) fn build(path: &[u8], fields: &Fields, data: &[u8]) -> Znode {
        // Room for the longest varints; the box is trimmed to the bytes written.
        let mut b = Vec::with_capacity(10 + path.len() + MAX_HEADER + data.len());
        encode_record(&mut b, path, &[], fields, Base::default(), data);
        Znode(b.into_boxed_slice())
    }

    /// `node`, whose path is `path`, as a znode on its own.
    pub(super) fn from_ref(path: &[u8], node: ZnodeRef<'_>) -> Znode {
        let (fields, data_at) = node.fields();
        Znode::build(path, &fields, &node.bytes[data_at..])
    }

    /// The borrowed form, for the getters.
    pub fn view(&self) -> ZnodeRef<'_> {
        ZnodeRef {
            bytes: &self.0,
            base: Base::default(),
        }
    }

    /// The absolute path. Built from a `&str`, so always UTF-8.
    pub fn path(&self) -> &str {
        std::str::from_utf8(self.view().key()).unwrap_or("")
    }

    /// Changes header fields: in place when the new header is as long as the old,
    /// else into a new allocation (a field that grew past its varint's bytes, or went
    /// from zero to nonzero or back: see [`HeaderBuf::encode`]).
    pub(super) fn update(&mut self, f: impl FnOnce(&mut Fields)) {
        let start = self.view().header_start();
        let (mut fields, end) = self.view().fields();
        f(&mut fields);
        let header = HeaderBuf::encode(&fields, Base::default());
        if header.len == end - start {
            self.0[start..end].copy_from_slice(header.as_slice());
        } else {
            let mut b = Vec::with_capacity(self.0.len() - (end - start) + header.len);
            b.extend_from_slice(&self.0[..start]);
            b.extend_from_slice(header.as_slice());
            b.extend_from_slice(&self.0[end..]);
            self.0 = b.into_boxed_slice();
        }
    }

    pub(super) fn set_pzxid(&mut self, v: i64) {
        self.update(|f| f.meta.pzxid = v)
    }
    pub(super) fn set_aversion(&mut self, v: i32) {
        self.update(|f| f.meta.aversion = v)
    }
    pub(super) fn set_num_children(&mut self, v: i32) {
        self.update(|f| f.num_children = v)
    }
    pub(super) fn set_acl_id(&mut self, v: u32) {
        self.update(|f| f.acl = v)
    }

    /// Bytes this znode's allocation holds (header, data and path).
    pub fn allocated_len(&self) -> usize {
        self.0.len()
    }
}

impl<'a> ZnodeRef<'a> {
    /// The record at the start of `bytes` (which holds exactly one), with czxid and
    /// ctime relative to `base`.
    pub(super) fn new(bytes: &'a [u8], base: Base) -> ZnodeRef<'a> {
        ZnodeRef { bytes, base }
    }

    /// A znode at `path` with `data` and the persisted fields as `change` leaves them.
    fn rebuilt(
        &self,
        path: &[u8],
        data: Option<&[u8]>,
        change: impl FnOnce(&mut ZnodeMeta),
    ) -> Znode {
        let (mut fields, _) = self.fields();
        fields.null_data = data.is_none();
        change(&mut fields.meta);
        Znode::build(path, &fields, data.unwrap_or(&[]))
    }

    /// This znode, at `path`, with `data` and the persisted fields `meta`; children and
    /// ACL kept.
    pub(super) fn with_data_and_meta(
        &self,
        path: &[u8],
        data: Option<&[u8]>,
        meta: &ZnodeMeta,
    ) -> Znode {
        self.rebuilt(path, data, |m| *m = *meta)
    }

    /// Everything but path and data, decoded once, for callers that need several
    /// fields (each single-field getter decodes the header again).
    pub fn header(&self) -> ZnodeHeader {
        let (f, data_at) = self.fields();
        ZnodeHeader {
            meta: f.meta,
            num_children: f.num_children,
            acl_id: f.acl,
            data_len: self.bytes.len() - data_at,
        }
    }

    /// The key's offset and length. Hot: every comparison in a leaf search asks.
    #[inline]
    fn key_range(&self) -> (usize, usize) {
        match self.bytes[0] {
            // One length byte: keys shorter than 128 bytes, nearly all of them.
            len @ 0..0x80 => (1, len as usize),
            _ => {
                let mut at = 0;
                let len = get(self.bytes, &mut at) as usize;
                (at, len)
            }
        }
    }

    /// The stored key: the whole path for a [`Znode`], the path without its leaf's
    /// prefix in the tree.
    #[inline]
    pub(super) fn key(&self) -> &'a [u8] {
        let (at, len) = self.key_range();
        &self.bytes[at..at + len]
    }

    /// The whole record.
    pub(super) fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Header and data: the part of the record after the key.
    pub(super) fn body(&self) -> &'a [u8] {
        &self.bytes[self.header_start()..]
    }

    /// Where the header starts (just past the key).
    pub(super) fn header_start(&self) -> usize {
        let (at, len) = self.key_range();
        at + len
    }

    /// The base czxid and ctime are stored relative to.
    pub(super) fn base(&self) -> Base {
        self.base
    }

    /// The header's fields and the offset just past the header (where data starts).
    pub(super) fn fields(&self) -> (Fields, usize) {
        let b = self.bytes;
        let mut at = self.header_start();
        let mask = b[at];
        at += 1;
        let czxid = self.base.czxid.wrapping_add(get_signed(b, &mut at));
        let ctime = self.base.ctime.wrapping_add(get_signed(b, &mut at));
        let mut rest = [0i64; 8];
        if mask != 0 {
            for (i, v) in rest.iter_mut().enumerate() {
                if mask & (1 << i) != 0 {
                    *v = get_signed(b, &mut at);
                }
            }
        }
        let [mzxid, pzxid, mtime, version, child_creates, aversion, num_children, ephemeral_owner] =
            rest;
        let (mzxid, pzxid, mtime) = (
            czxid.wrapping_add(mzxid),
            czxid.wrapping_add(pzxid),
            ctime.wrapping_add(mtime),
        );
        let (version, child_creates, aversion, num_children) = (
            version as i32,
            child_creates as i32,
            aversion as i32,
            num_children as i32,
        );
        let acl_and_null = get(b, &mut at);
        let acl = (acl_and_null >> 1) as u32;
        let null_data = acl_and_null & 1 != 0;
        let meta = ZnodeMeta {
            czxid,
            mzxid,
            pzxid,
            ctime,
            mtime,
            version,
            child_creates,
            aversion,
            ephemeral_owner,
        };
        let fields = Fields {
            meta,
            num_children,
            acl,
            null_data,
        };
        (fields, at)
    }

    /// Data length in bytes (0 for null data).
    pub fn data_len(&self) -> usize {
        self.bytes.len() - self.fields().1
    }

    /// The data; `None` for null data.
    pub fn data(&self) -> Option<&'a [u8]> {
        let (fields, at) = self.fields();
        (!fields.null_data).then(|| &self.bytes[at..])
    }

    /// The data as bytes, null read as empty.
    pub fn data_bytes(&self) -> &'a [u8] {
        &self.bytes[self.fields().1..]
    }

    pub fn czxid(&self) -> i64 {
        self.fields().0.meta.czxid
    }
    pub fn mzxid(&self) -> i64 {
        self.fields().0.meta.mzxid
    }
    pub fn pzxid(&self) -> i64 {
        self.fields().0.meta.pzxid
    }
    /// ms since the epoch.
    pub fn ctime(&self) -> i64 {
        self.fields().0.meta.ctime
    }
    /// ms since the epoch.
    pub fn mtime(&self) -> i64 {
        self.fields().0.meta.mtime
    }
    /// dataVersion.
    pub fn version(&self) -> i32 {
        self.fields().0.meta.version
    }
    /// Child creations (ZooKeeper's stored cversion), see [`ZnodeMeta`].
    pub fn child_creates(&self) -> i32 {
        self.fields().0.meta.child_creates
    }
    /// aclVersion.
    pub fn aversion(&self) -> i32 {
        self.fields().0.meta.aversion
    }
    /// Children in the tree now.
    pub fn num_children(&self) -> i32 {
        self.fields().0.num_children
    }
    /// Raw ephemeralOwner, including the container and TTL encodings.
    pub fn ephemeral_owner(&self) -> i64 {
        self.fields().0.meta.ephemeral_owner
    }
    /// The ACL's id in the tree's ACL cache.
    pub fn acl_id(&self) -> u32 {
        self.fields().0.acl
    }

    /// The persisted fixed-size fields.
    pub fn meta(&self) -> ZnodeMeta {
        self.fields().0.meta
    }

    /// The Stat a client sees: containers and TTL nodes show ephemeralOwner 0, and
    /// cversion counts child creates plus deletes.
    pub fn stat(&self) -> Stat {
        let (f, data_at) = self.fields();
        f.stat((self.bytes.len() - data_at) as i32)
    }

    /// The owner kind.
    pub fn owner(&self) -> Owner {
        Owner::from_raw(self.ephemeral_owner())
    }
}

impl std::fmt::Debug for ZnodeRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Znode")
            .field("key", &String::from_utf8_lossy(self.key()))
            .field("meta", &self.meta())
            .field("num_children", &self.num_children())
            .field("acl_id", &self.acl_id())
            .field("data_len", &self.data().map(<[u8]>::len))
            .finish()
    }
}

impl std::fmt::Debug for Znode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.view().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_through_the_packed_form() {
        let meta = ZnodeMeta {
            czxid: 1,
            mzxid: -2,
            pzxid: i64::MAX,
            ctime: 4,
            mtime: 5,
            version: -6,
            child_creates: 7,
            aversion: i32::MIN,
            ephemeral_owner: CONTAINER_OWNER,
        };
        let mut n = Znode::new("/a/b", Some(b"xyz"), 9, &meta, 3);
        assert_eq!(n.view().meta(), meta);
        assert_eq!(
            (n.path(), n.view().data(), n.view().acl_id()),
            ("/a/b", Some(&b"xyz"[..]), 9)
        );
        assert_eq!(n.view().num_children(), 3);
        n.set_pzxid(11);
        n.set_num_children(2);
        let m = n.view().with_data_and_meta(b"/a/b", None, &n.view().meta());
        assert_eq!(
            (m.path(), m.view().data(), m.view().data_len()),
            ("/a/b", None, 0)
        );
        assert_eq!((m.view().pzxid(), m.view().num_children()), (11, 2));
        let e = Znode::new("/e", Some(b""), 0, &meta, 0);
        assert_eq!((e.view().data(), e.path()), (Some(&b""[..]), "/e"));
        assert_eq!(n.view().stat().ephemeral_owner, 0);
        assert_eq!(n.view().stat().cversion, 7 * 2 - 2);
    }

    #[test]
    fn every_field_keeps_its_extremes_and_grows_in_place_or_moves() {
        let long_path = format!("/{}", "p".repeat(300));
        for v in [i64::MIN, -1, 0, 1, 127, 128, i64::MAX] {
            let meta = ZnodeMeta {
                czxid: v,
                mzxid: v.wrapping_neg(),
                pzxid: v ^ 0x5555,
                ctime: v.rotate_left(7),
                mtime: -v.rotate_left(3),
                version: v as i32,
                child_creates: (v >> 32) as i32,
                aversion: !(v as i32),
                ephemeral_owner: v,
            };
            for path in ["/", "/a", long_path.as_str()] {
                for data in [None, Some(&b""[..]), Some(&[7u8; 200][..])] {
                    let mut n = Znode::new(path, data, v as u32, &meta, v as i32);
                    assert_eq!(n.view().meta(), meta);
                    assert_eq!(
                        (n.path(), n.view().data(), n.view().acl_id()),
                        (path, data, v as u32)
                    );
                    assert_eq!(n.view().num_children(), v as i32);
                    assert_eq!(n.view().data_len(), data.map_or(0, <[u8]>::len));
                    let h = n.view().header();
                    assert_eq!(
                        (h.meta, h.num_children, h.acl_id),
                        (meta, v as i32, v as u32)
                    );
                    assert_eq!(h.data_len, n.view().data_len());
                    // Small to large and back: the header changes length both ways.
                    for pzxid in [i64::MAX, meta.czxid, i64::MIN] {
                        n.set_pzxid(pzxid);
                        assert_eq!(n.view().pzxid(), pzxid);
                        assert_eq!(
                            (n.view().meta().mzxid, n.path(), n.view().data()),
                            (meta.mzxid, path, data)
                        );
                    }
                    n.update(|f| f.child_created(5, 9));
                    // A count not above the stored one leaves count and pzxid.
                    let (creates, pzxid) = if 5 > meta.child_creates {
                        (5, 9)
                    } else {
                        (meta.child_creates, i64::MIN)
                    };
                    assert_eq!(
                        (
                            n.view().num_children(),
                            n.view().child_creates(),
                            n.view().pzxid()
                        ),
                        ((v as i32).wrapping_add(1), creates, pzxid)
                    );
                    assert_eq!(n.view().data(), data);
                }
            }
        }
    }

    #[test]
    fn an_unchanged_znode_header_is_small() {
        // A znode as a client creates it: zxid of epoch 1, a current time in ms, no
        // owner, the first ACL. Path-length byte, path, header, data.
        let meta = ZnodeMeta::created(0, (1 << 32) + 12345, 1_764_500_000_000);
        let n = Znode::new("/bench/k0000123", Some(&[b'x'; 100]), 1, &meta, 0);
        let header = n.allocated_len() - 1 - "/bench/k0000123".len() - 100;
        assert!(
            header <= 21,
            "header {header} bytes (the fixed layout took 72)"
        );
    }
}

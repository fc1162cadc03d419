//! One znode as the tree keeps it: its path, data and persisted Stat fields packed into a
//! single allocation.
//!
//! A million-znode tree is mostly znodes, so their layout decides the server's memory
//! (issue 5). One `Box<[u8]>` holds a fixed little-endian header, then the data, then the
//! path: one malloc chunk per znode, no separate data buffer, path key or children set.
//! The ACL is an id into the tree's [`AclCache`](super::acl_cache::AclCache), and a
//! znode's children are the paths below it in the tree's path-ordered set, so only their
//! count is stored here.

use jute::Stat;
use std::borrow::Borrow;
use std::cmp::Ordering;

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

// Header offsets, bytes. Stat's i32 fields stay i32; the ACL id and data length are u32.
const CZXID: usize = 0;
const MZXID: usize = 8;
const PZXID: usize = 16;
const CTIME: usize = 24;
const MTIME: usize = 32;
const OWNER: usize = 40;
const VERSION: usize = 48;
const CHILD_CREATES: usize = 52;
const AVERSION: usize = 56;
const NUM_CHILDREN: usize = 60;
const ACL: usize = 64;
/// Data length; [`NULL_DATA`] for null data (a client sent a null buffer).
const DATA_LEN: usize = 68;
const HEADER: usize = 72;
/// DATA_LEN value of null data; no real data is this long (jute.maxbuffer is far less).
const NULL_DATA: u32 = u32::MAX;

/// A znode: `[header | data | path]` in one boxed slice. Ordered, compared and looked up
/// (`Borrow<[u8]>`) by its path bytes, which is what lets the tree be a set of znodes.
/// The path never changes after construction; data changes build a new znode
/// ([`Znode::with_data`]). Equality is path equality too, as `Borrow` requires; compare
/// [`Znode::meta`], [`Znode::data`] and the ACL for content.
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
        let data_len = data.map_or(0, <[u8]>::len);
        let mut b = Vec::with_capacity(HEADER + data_len + path.len());
        b.extend_from_slice(&meta.czxid.to_le_bytes());
        b.extend_from_slice(&meta.mzxid.to_le_bytes());
        b.extend_from_slice(&meta.pzxid.to_le_bytes());
        b.extend_from_slice(&meta.ctime.to_le_bytes());
        b.extend_from_slice(&meta.mtime.to_le_bytes());
        b.extend_from_slice(&meta.ephemeral_owner.to_le_bytes());
        b.extend_from_slice(&meta.version.to_le_bytes());
        b.extend_from_slice(&meta.child_creates.to_le_bytes());
        b.extend_from_slice(&meta.aversion.to_le_bytes());
        b.extend_from_slice(&num_children.to_le_bytes());
        b.extend_from_slice(&acl.to_le_bytes());
        // Data longer than u32 cannot arrive: packets are bounded by jute.maxbuffer.
        let stored_len = data.map_or(NULL_DATA, |d| d.len().min(NULL_DATA as usize - 1) as u32);
        b.extend_from_slice(&stored_len.to_le_bytes());
        if let Some(d) = data {
            b.extend_from_slice(&d[..stored_len as usize]);
        }
        b.extend_from_slice(path.as_bytes());
        Znode(b.into_boxed_slice())
    }

    /// This znode with `data` instead of its own; everything else equal.
    pub fn with_data(&self, data: Option<&[u8]>) -> Znode {
        Znode::new(
            self.path(),
            data,
            self.acl_id(),
            &self.meta(),
            self.num_children(),
        )
    }

    fn i64_at(&self, at: usize) -> i64 {
        let mut b = [0; 8];
        b.copy_from_slice(&self.0[at..at + 8]);
        i64::from_le_bytes(b)
    }

    fn i32_at(&self, at: usize) -> i32 {
        let mut b = [0; 4];
        b.copy_from_slice(&self.0[at..at + 4]);
        i32::from_le_bytes(b)
    }

    fn set_i64(&mut self, at: usize, v: i64) {
        self.0[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }

    fn set_i32(&mut self, at: usize, v: i32) {
        self.0[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }

    /// The stored data length field (`NULL_DATA` for null).
    fn stored_data_len(&self) -> u32 {
        self.i32_at(DATA_LEN) as u32
    }

    /// Data length in bytes (0 for null data).
    pub fn data_len(&self) -> usize {
        match self.stored_data_len() {
            NULL_DATA => 0,
            n => n as usize,
        }
    }

    /// The data; `None` for null data.
    pub fn data(&self) -> Option<&[u8]> {
        match self.stored_data_len() {
            NULL_DATA => None,
            n => Some(&self.0[HEADER..HEADER + n as usize]),
        }
    }

    /// The data as bytes, null read as empty.
    pub fn data_bytes(&self) -> &[u8] {
        self.data().unwrap_or(&[])
    }

    /// The path's bytes, the znode's identity in the tree.
    pub fn path_bytes(&self) -> &[u8] {
        &self.0[HEADER + self.data_len()..]
    }

    /// The absolute path. Built from a `&str`, so always UTF-8.
    pub fn path(&self) -> &str {
        std::str::from_utf8(self.path_bytes()).unwrap_or("")
    }

    pub fn czxid(&self) -> i64 {
        self.i64_at(CZXID)
    }
    pub fn mzxid(&self) -> i64 {
        self.i64_at(MZXID)
    }
    pub fn pzxid(&self) -> i64 {
        self.i64_at(PZXID)
    }
    /// ms since the epoch.
    pub fn ctime(&self) -> i64 {
        self.i64_at(CTIME)
    }
    /// ms since the epoch.
    pub fn mtime(&self) -> i64 {
        self.i64_at(MTIME)
    }
    /// dataVersion.
    pub fn version(&self) -> i32 {
        self.i32_at(VERSION)
    }
    /// Child creations (ZooKeeper's stored cversion), see [`ZnodeMeta`].
    pub fn child_creates(&self) -> i32 {
        self.i32_at(CHILD_CREATES)
    }
    /// aclVersion.
    pub fn aversion(&self) -> i32 {
        self.i32_at(AVERSION)
    }
    /// Children in the tree now.
    pub fn num_children(&self) -> i32 {
        self.i32_at(NUM_CHILDREN)
    }
    /// Raw ephemeralOwner, including the container and TTL encodings.
    pub fn ephemeral_owner(&self) -> i64 {
        self.i64_at(OWNER)
    }
    /// The ACL's id in the tree's ACL cache.
    pub fn acl_id(&self) -> u32 {
        self.i32_at(ACL) as u32
    }

    pub(super) fn set_mzxid(&mut self, v: i64) {
        self.set_i64(MZXID, v)
    }
    pub(super) fn set_pzxid(&mut self, v: i64) {
        self.set_i64(PZXID, v)
    }
    pub(super) fn set_mtime(&mut self, v: i64) {
        self.set_i64(MTIME, v)
    }
    pub(super) fn set_version(&mut self, v: i32) {
        self.set_i32(VERSION, v)
    }
    pub(super) fn set_child_creates(&mut self, v: i32) {
        self.set_i32(CHILD_CREATES, v)
    }
    pub(super) fn set_aversion(&mut self, v: i32) {
        self.set_i32(AVERSION, v)
    }
    pub(super) fn set_num_children(&mut self, v: i32) {
        self.set_i32(NUM_CHILDREN, v)
    }
    pub(super) fn set_acl_id(&mut self, v: u32) {
        self.set_i32(ACL, v as i32)
    }

    /// The persisted fixed-size fields.
    pub fn meta(&self) -> ZnodeMeta {
        ZnodeMeta {
            czxid: self.czxid(),
            mzxid: self.mzxid(),
            pzxid: self.pzxid(),
            ctime: self.ctime(),
            mtime: self.mtime(),
            version: self.version(),
            child_creates: self.child_creates(),
            aversion: self.aversion(),
            ephemeral_owner: self.ephemeral_owner(),
        }
    }

    /// The Stat a client sees: containers and TTL nodes show ephemeralOwner 0, and
    /// cversion counts child creates plus deletes.
    pub fn stat(&self) -> Stat {
        let owner = match self.owner() {
            Owner::Session(s) => s,
            _ => 0,
        };
        let n = self.num_children();
        Stat {
            czxid: self.czxid(),
            mzxid: self.mzxid(),
            ctime: self.ctime(),
            mtime: self.mtime(),
            version: self.version(),
            cversion: self.child_creates().wrapping_mul(2).wrapping_sub(n),
            aversion: self.aversion(),
            ephemeral_owner: owner,
            data_length: self.data_len() as i32,
            num_children: n,
            pzxid: self.pzxid(),
        }
    }

    /// The owner kind.
    pub fn owner(&self) -> Owner {
        Owner::from_raw(self.ephemeral_owner())
    }

    /// Bytes this znode's allocation holds (header, data and path).
    pub fn allocated_len(&self) -> usize {
        self.0.len()
    }
}

impl std::fmt::Debug for Znode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Znode")
            .field("path", &self.path())
            .field("meta", &self.meta())
            .field("num_children", &self.num_children())
            .field("acl_id", &self.acl_id())
            .field("data_len", &self.data().map(<[u8]>::len))
            .finish()
    }
}

impl Borrow<[u8]> for Znode {
    fn borrow(&self) -> &[u8] {
        self.path_bytes()
    }
}

impl PartialEq for Znode {
    fn eq(&self, other: &Self) -> bool {
        self.path_bytes() == other.path_bytes()
    }
}

impl Eq for Znode {}

impl Ord for Znode {
    fn cmp(&self, other: &Self) -> Ordering {
        self.path_bytes().cmp(other.path_bytes())
    }
}

impl PartialOrd for Znode {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
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
        assert_eq!(n.meta(), meta);
        assert_eq!(
            (n.path(), n.data(), n.acl_id()),
            ("/a/b", Some(&b"xyz"[..]), 9)
        );
        assert_eq!(n.num_children(), 3);
        n.set_pzxid(11);
        n.set_num_children(2);
        let m = n.with_data(None);
        assert_eq!((m.path(), m.data(), m.data_len()), ("/a/b", None, 0));
        assert_eq!((m.pzxid(), m.num_children()), (11, 2));
        let e = Znode::new("/e", Some(b""), 0, &meta, 0);
        assert_eq!((e.data(), e.path()), (Some(&b""[..]), "/e"));
        assert_eq!(n.stat().ephemeral_owner, 0);
        assert_eq!(n.stat().cversion, 7 * 2 - 2);
    }
}

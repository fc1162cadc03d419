//! One znode: data, ACL and the persisted part of its Stat.

use bytes::Bytes;
use jute::{Acl, Stat};
use std::collections::BTreeSet;
use std::sync::Arc;

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

/// A znode. `child_creates` is what ZooKeeper stores as cversion: the number of child
/// creations, which also numbers sequential children; clients see
/// `2 * child_creates - numChildren` (= creates + deletes), see [`Znode::stat`].
#[derive(Debug, Clone)]
pub struct Znode {
    /// `None` for null data (a client sent a null buffer).
    pub data: Option<Bytes>,
    /// Shared between znodes with equal ACLs, like ZooKeeper's ACL cache.
    pub acl: Arc<Vec<Acl>>,
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
    /// Child names, kept sorted so listings are deterministic.
    pub children: BTreeSet<Box<str>>,
}

impl Znode {
    /// A new znode created at `zxid` and time `time_ms`.
    pub fn new(
        data: Option<Bytes>,
        acl: Arc<Vec<Acl>>,
        owner: i64,
        zxid: i64,
        time_ms: i64,
    ) -> Znode {
        Znode {
            data,
            acl,
            czxid: zxid,
            mzxid: zxid,
            pzxid: zxid,
            ctime: time_ms,
            mtime: time_ms,
            version: 0,
            child_creates: 0,
            aversion: 0,
            ephemeral_owner: owner,
            children: BTreeSet::new(),
        }
    }

    /// The Stat a client sees: containers and TTL nodes show ephemeralOwner 0, and
    /// cversion counts child creates plus deletes.
    pub fn stat(&self) -> Stat {
        let owner = match Owner::from_raw(self.ephemeral_owner) {
            Owner::Session(s) => s,
            _ => 0,
        };
        let n = self.children.len() as i32;
        Stat {
            czxid: self.czxid,
            mzxid: self.mzxid,
            ctime: self.ctime,
            mtime: self.mtime,
            version: self.version,
            cversion: self.child_creates.wrapping_mul(2).wrapping_sub(n),
            aversion: self.aversion,
            ephemeral_owner: owner,
            data_length: self.data_len() as i32,
            num_children: n,
            pzxid: self.pzxid,
        }
    }

    /// Data length in bytes (0 for null data).
    pub fn data_len(&self) -> usize {
        self.data.as_ref().map_or(0, Bytes::len)
    }

    /// The data as bytes, null read as empty.
    pub fn data_bytes(&self) -> &[u8] {
        self.data.as_deref().unwrap_or(&[])
    }

    /// The owner kind.
    pub fn owner(&self) -> Owner {
        Owner::from_raw(self.ephemeral_owner)
    }
}

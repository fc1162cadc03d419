//! A znode as the import rebuilds it: ZooKeeper's DataNode, with an explicit children
//! set. ZooKeeper's replay can leave a znode whose parent was deleted and recreated in
//! its node table without being its new parent's child (unreachable); the import must
//! reproduce that exactly, so here, unlike in keel's tree, children are stored rather
//! than derived from paths. Memory matters less: the import runs once, offline.

use crate::tree::{Owner, ZnodeMeta};
use bytes::Bytes;
use jute::{Acl, Stat};
use std::collections::BTreeSet;
use std::sync::Arc;

/// One znode under import. `child_creates` is ZooKeeper's stored cversion (see
/// [`ZnodeMeta`]).
#[derive(Debug, Clone)]
pub struct ZkNode {
    /// `None` for null data.
    pub data: Option<Bytes>,
    /// Shared between znodes with equal ACLs.
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
    /// Child names, sorted.
    pub children: BTreeSet<Box<str>>,
}

impl ZkNode {
    /// A new znode created at `zxid` and time `time_ms`.
    pub fn new(
        data: Option<Bytes>,
        acl: Arc<Vec<Acl>>,
        owner: i64,
        zxid: i64,
        time_ms: i64,
    ) -> ZkNode {
        ZkNode::with_meta(data, acl, &ZnodeMeta::created(owner, zxid, time_ms))
    }

    /// A childless znode with the persisted fields `m`.
    pub fn with_meta(data: Option<Bytes>, acl: Arc<Vec<Acl>>, m: &ZnodeMeta) -> ZkNode {
        ZkNode {
            data,
            acl,
            czxid: m.czxid,
            mzxid: m.mzxid,
            pzxid: m.pzxid,
            ctime: m.ctime,
            mtime: m.mtime,
            version: m.version,
            child_creates: m.child_creates,
            aversion: m.aversion,
            ephemeral_owner: m.ephemeral_owner,
            children: BTreeSet::new(),
        }
    }

    /// The fixed-size persisted fields, as keel's tree stores them.
    pub fn meta(&self) -> ZnodeMeta {
        ZnodeMeta {
            czxid: self.czxid,
            mzxid: self.mzxid,
            pzxid: self.pzxid,
            ctime: self.ctime,
            mtime: self.mtime,
            version: self.version,
            child_creates: self.child_creates,
            aversion: self.aversion,
            ephemeral_owner: self.ephemeral_owner,
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

    /// The Stat a client would see (ZooKeeper's DataNode.copyStat): containers and TTL
    /// nodes show ephemeralOwner 0; cversion counts child creates plus deletes.
    pub fn stat(&self) -> Stat {
        let owner = match self.owner() {
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

    /// The owner kind.
    pub fn owner(&self) -> Owner {
        Owner::from_raw(self.ephemeral_owner)
    }
}

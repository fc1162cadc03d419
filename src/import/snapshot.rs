//! ZooKeeper's snapshot file, `snapshot.<zxid in hex>` (FileSnap, SerializeUtils,
//! DataTree.serialize, ReferenceCountedACLCache.serialize, SnapStream).
//!
//! Layout, every number big-endian jute:
//! - FileHeader: int magic `ZKSN`, int version (2), long dbid.
//! - Sessions: int count, then per session long id, int timeout (ms).
//! - ACL cache: int count, then per entry long id, vector<ACL>. A znode refers to its
//!   ACL by that id; -1 means world:anyone with every permission (OPEN_ACL_UNSAFE).
//! - Znodes, parents before children: ustring path (the root is ""), then the DataNode:
//!   buffer data, long ACL id, StatPersisted (long czxid, long mzxid, long ctime,
//!   long mtime, int version, int cversion, int aversion, long ephemeralOwner,
//!   long pzxid). The path "/" ends the list.
//! - Seal: long Adler-32 of every byte before it, then the ustring "/".
//! - ZooKeeper 3.6+: the digest (long zxid, int digest version, then a long digest, or
//!   a hex ustring for version < 2), then another seal over everything before it.
//! - ZooKeeper 3.9+ (when enabled): long lastProcessedZxid, then another seal.
//!
//! The snapshot is fuzzy: written while txns kept applying, so it may already reflect
//! some txns after the zxid in its name; replay from that zxid + 1 converges.
//! The cversion stored here counts child creations (clients see creates + deletes),
//! which is what keel keeps as `ZnodeMeta::child_creates`.

use super::input::{adler32, Input, Malformed};
use super::node::ZkNode;
use bytes::Bytes;
use jute::Acl;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// `ZKSN` as ZooKeeper's FileSnap.SNAP_MAGIC.
pub const SNAP_MAGIC: i32 = i32::from_be_bytes(*b"ZKSN");
/// The snapshot format version every ZooKeeper 3.x writes.
pub const SNAP_VERSION: i32 = 2;
/// Bytes of the 3.9+ lastProcessedZxid trailer: a long plus a seal (long, "/").
const LAST_ZXID_TRAILER_BYTES: usize = 8 + 8 + 4 + 1;
/// The ACL id meaning OPEN_ACL_UNSAFE (ReferenceCountedACLCache.OPEN_UNSAFE_ACL_ID).
pub const OPEN_ACL_ID: i64 = -1;

/// The digest a 3.6+ snapshot carries (DataTree.ZxidDigest): ZooKeeper's tree digest
/// after applying the txn `zxid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotDigest {
    pub zxid: i64,
    /// DigestCalculator's version; keel computes version 2.
    pub version: i32,
    pub digest: i64,
}

/// One snapshot file, decoded and verified.
#[derive(Debug)]
pub struct ZkSnapshot {
    /// The zxid from the file name: every txn up to it is reflected.
    pub zxid: i64,
    pub dbid: i64,
    /// (session id, timeout ms), in file order.
    pub sessions: Vec<(i64, i32)>,
    /// Every znode by path ("/" for the root), children linked. `child_creates` holds
    /// ZooKeeper's stored cversion.
    pub nodes: BTreeMap<String, ZkNode>,
    /// Distinct ACL lists, shared by the znodes that use them.
    pub acls: HashMap<Vec<Acl>, Arc<Vec<Acl>>>,
    pub digest: Option<SnapshotDigest>,
    /// The zxid a 3.9+ snapshot records as last processed (informational).
    pub last_processed_zxid: Option<i64>,
}

/// Reads a whole snapshot file. `zxid` is the one in its name; `on_node` is called with
/// the running znode count every 100,000 znodes (progress).
///
/// Errors: bad magic or version, truncation, a znode before its parent or twice, an ACL
/// id missing from the ACL table, a seal whose Adler-32 does not match, or bytes after
/// the last seal; each names the byte offset.
pub fn parse(
    bytes: &[u8],
    zxid: i64,
    on_node: &mut dyn FnMut(usize),
) -> Result<ZkSnapshot, Malformed> {
    parse_checked(bytes, zxid, on_node).map_err(|mut e| {
        // Damage that breaks the structure stops the reader before it reaches a seal;
        // the file's last seal (which covers every byte before it) says whether the
        // bytes are damaged or the format is one this reader does not know.
        if !e.what.contains("checksum mismatch") && !final_seal_verifies(bytes) {
            e.what.push_str(
                "; the file's final Adler-32 does not verify either (checksum mismatch): the snapshot is damaged or cut short",
            );
        }
        e
    })
}

/// Whether the file ends with a seal whose Adler-32 matches every byte before it.
fn final_seal_verifies(bytes: &[u8]) -> bool {
    let n = bytes.len();
    if n < 13 || bytes[n - 5..] != [0, 0, 0, 1, b'/'] {
        return false;
    }
    let mut stored = [0u8; 8];
    stored.copy_from_slice(&bytes[n - 13..n - 5]);
    i64::from_be_bytes(stored) == adler32(&bytes[..n - 13])
}

fn parse_checked(
    bytes: &[u8],
    zxid: i64,
    on_node: &mut dyn FnMut(usize),
) -> Result<ZkSnapshot, Malformed> {
    let mut r = Input::new(bytes);
    let magic = r.int("file header magic")?;
    if magic != SNAP_MAGIC {
        return Err(Malformed::at(
            0,
            format!(
                "magic 0x{magic:08x} is not ZKSN (0x{SNAP_MAGIC:08x}): not a ZooKeeper snapshot"
            ),
        ));
    }
    let version = r.int("file header version")?;
    if version != SNAP_VERSION {
        return Err(Malformed::at(
            4,
            format!("snapshot format version {version}; ZooKeeper 3.x writes {SNAP_VERSION}"),
        ));
    }
    let dbid = r.long("file header dbid")?;

    let n = r.count("session count", 12)?;
    let mut sessions = Vec::with_capacity(n);
    for _ in 0..n {
        let id = r.long("session id")?;
        let timeout = r.int("session timeout")?;
        sessions.push((id, timeout));
    }

    let n = r.count("ACL table size", 12)?;
    let mut by_id: HashMap<i64, Arc<Vec<Acl>>> = HashMap::with_capacity(n + 1);
    let mut acls: HashMap<Vec<Acl>, Arc<Vec<Acl>>> = HashMap::new();
    for _ in 0..n {
        let id = r.long("ACL table id")?;
        if r.clone().int("ACL list")? == -1 {
            // ReferenceCountedACLCache.deserialize refuses a null list.
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
        by_id.insert(id, shared);
    }
    let open = acls
        .entry(crate::tree::acl::open_acl())
        .or_insert_with_key(|k| Arc::new(k.clone()))
        .clone();

    let mut nodes: BTreeMap<String, ZkNode> = BTreeMap::new();
    loop {
        let at = r.offset();
        let raw = r.path("znode path")?;
        if raw == "/" {
            break;
        }
        let path = if raw.is_empty() {
            "/".to_string()
        } else if raw.starts_with('/') && !raw.ends_with('/') {
            raw
        } else {
            return Err(Malformed::at(
                at,
                format!("znode path {raw:?} is not absolute"),
            ));
        };
        let data = r.buffer("znode data")?.map(Bytes::copy_from_slice);
        let acl_at = r.offset();
        let acl_id = r.long("znode ACL id")?;
        let acl = if acl_id == OPEN_ACL_ID {
            open.clone()
        } else {
            by_id.get(&acl_id).cloned().ok_or_else(|| {
                Malformed::at(
                    acl_at,
                    format!("znode {path} refers to ACL id {acl_id}, which the ACL table lacks"),
                )
            })?
        };
        let node = ZkNode {
            data,
            acl,
            czxid: r.long("czxid")?,
            mzxid: r.long("mzxid")?,
            ctime: r.long("ctime")?,
            mtime: r.long("mtime")?,
            version: r.int("version")?,
            child_creates: r.int("cversion")?,
            aversion: r.int("aversion")?,
            ephemeral_owner: r.long("ephemeralOwner")?,
            pzxid: r.long("pzxid")?,
            children: BTreeSet::new(),
        };
        if path != "/" {
            let (parent, name) = crate::tree::path::split(&path);
            match nodes.get_mut(parent) {
                Some(p) => {
                    p.children.insert(name.into());
                }
                // DataTree.deserialize refuses this too ("unable to find parent").
                None => {
                    return Err(Malformed::at(
                        at,
                        format!("znode {path} comes before its parent {parent}"),
                    ))
                }
            }
        } else if !nodes.is_empty() {
            return Err(Malformed::at(at, "the root is not the first znode"));
        }
        if nodes.insert(path.clone(), node).is_some() {
            return Err(Malformed::at(at, format!("znode {path} appears twice")));
        }
        if nodes.len().is_multiple_of(100_000) {
            on_node(nodes.len());
        }
    }
    if !nodes.contains_key("/") {
        return Err(Malformed::at(
            r.offset(),
            "the snapshot holds no root znode",
        ));
    }
    check_seal(&mut r, "checksum after the znodes")?;

    // The 3.6+ digest and the 3.9+ lastProcessedZxid are optional trailers, each
    // followed by its own seal; ZooKeeper reads them only if bytes remain. A trailer
    // counts only if its seal verifies, which also tells the two apart.
    let mut digest = None;
    let mut last_processed_zxid = None;
    if r.remaining() > 0 {
        let mut t = r.clone();
        let parsed = read_digest(&mut t)
            .and_then(|d| check_seal(&mut t, "checksum after the digest").map(|()| d));
        match parsed {
            Ok(d) => {
                digest = Some(d);
                r = t;
            }
            // What is left may be a 3.9+ lastProcessedZxid alone (long + seal).
            Err(_) if r.remaining() == LAST_ZXID_TRAILER_BYTES => {}
            Err(e) => return Err(e),
        }
    }
    if r.remaining() > 0 {
        let mut t = r.clone();
        let z = t.long("lastProcessedZxid")?;
        check_seal(&mut t, "checksum after lastProcessedZxid")?;
        last_processed_zxid = Some(z);
        r = t;
    }
    if r.remaining() > 0 {
        return Err(Malformed::at(
            r.offset(),
            format!("{} unexpected bytes after the last checksum", r.remaining()),
        ));
    }
    Ok(ZkSnapshot {
        zxid,
        dbid,
        sessions,
        nodes,
        acls,
        digest,
        last_processed_zxid,
    })
}

/// Reads a seal (SnapStream.sealStream): the Adler-32 of every byte before it, as a
/// long, then the string "/".
fn check_seal(r: &mut Input<'_>, what: &str) -> Result<(), Malformed> {
    let at = r.offset();
    let computed = adler32(r.consumed());
    let stored = r.long(what)?;
    let end = r.offset();
    let slash = r.ustring(what)?;
    if stored != computed {
        return Err(Malformed::at(
            at,
            format!(
                "{what}: checksum mismatch (Adler-32 stored 0x{stored:x}, computed 0x{computed:x}): the snapshot is damaged"
            ),
        ));
    }
    if slash != "/" {
        return Err(Malformed::at(
            end,
            format!("{what}: seal is not followed by \"/\""),
        ));
    }
    Ok(())
}

fn read_digest(r: &mut Input<'_>) -> Result<SnapshotDigest, Malformed> {
    let zxid = r.long("digest zxid")?;
    let version = r.int("digest version")?;
    let digest = if version < 2 {
        // DigestCalculator version 1 stored the digest as a hex string.
        let at = r.offset();
        let text = r.ustring("digest")?;
        u64::from_str_radix(&text, 16).map_err(|_| Malformed::at(at, "digest is not hex"))? as i64
    } else {
        r.long("digest")?
    };
    Ok(SnapshotDigest {
        zxid,
        version,
        digest,
    })
}

//! ZooKeeper's snapshot file, `snapshot.<zxid in hex>` (FileSnap, SerializeUtils,
//! DataTree.serialize, ReferenceCountedACLCache.serialize, SnapStream).
//!
//! Layout, every number big-endian jute:
//! - FileHeader: int magic `ZKSN`, int version (2), long dbid.
//! - The DataTree stream a leader also sends after SNAP: sessions, the ACL table and
//!   the znodes, ended by the path "/"; read by the one reader of that stream,
//!   [`crate::zab::wire::snap::read_stream`].
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
use crate::zab::wire::snap::read_stream;
pub use crate::zab::wire::snap::{SNAP_MAGIC, SNAP_VERSION};
use bytes::Bytes;
use jute::Acl;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Bytes of the 3.9+ lastProcessedZxid trailer: a long plus a seal (long, "/").
const LAST_ZXID_TRAILER_BYTES: usize = 8 + 8 + 4 + 1;

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

    let mut acls: HashMap<Vec<Acl>, Arc<Vec<Acl>>> = HashMap::new();
    let mut nodes: BTreeMap<String, ZkNode> = BTreeMap::new();
    let sessions = read_stream(&mut r, &mut acls, &mut |n| {
        if n.path != "/" {
            let (parent, name) = crate::tree::path::split(n.path);
            // The stream reader saw the parent first.
            if let Some(p) = nodes.get_mut(parent) {
                p.children.insert(name.into());
            }
        }
        nodes.insert(
            n.path.to_string(),
            ZkNode::with_meta(n.data.map(Bytes::copy_from_slice), n.acl.clone(), &n.meta),
        );
        if nodes.len().is_multiple_of(100_000) {
            on_node(nodes.len());
        }
        Ok(())
    })?;
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

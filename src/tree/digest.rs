//! ZooKeeper's tree digest (DigestCalculator, NodeHashMapImpl, AdHash; 3.6+ with
//! `zookeeper.digest.enabled`, on by default in 3.8): each znode's digest is a CRC-32
//! over its path, its data and nine StatPersisted fields, and the tree's digest is the
//! wrapping 64-bit sum of its znodes' digests, so one change adds and removes only the
//! digests of the znodes it touches. Two trees with equal znodes (paths, data, every
//! persisted Stat field; ACLs and numChildren are not in it) have equal digests, which
//! is how ZooKeeper checks that a member's tree is the leader's after each txn and that
//! a snapshot loaded right.
//!
//! Which znodes count (NodeHashMapImpl.addDigest, DigestCalculator.calculateDigest):
//! every one but those whose path starts with `/zookeeper/` (quota and config nodes are
//! updated locally by each server, so ZooKeeper leaves that subtree out); `/zookeeper`
//! itself counts. The root's path is hashed as "" (DataTree holds it under "" and
//! "/").

use super::ZnodeMeta;

/// DigestCalculator.DIGEST_VERSION: the scheme computed here.
pub const DIGEST_VERSION: i32 = 2;

/// ZooKeeper records the tree digest in its digest log after each txn whose zxid is a
/// multiple of this (DataTree.DIGEST_LOG_INTERVAL).
pub const DIGEST_LOG_INTERVAL: i64 = 128;

/// Entries the digest log keeps, oldest dropped first (DataTree.DIGEST_LOG_LIMIT).
pub const DIGEST_LOG_LIMIT: usize = 1024;

/// Bytes of the Stat fields a znode digest covers.
const META_BYTES: usize = 60;

/// CRC-32 of [`META_BYTES`] zero bytes (checked by a test).
const CRC_OF_ZERO_META: u32 = 0x0412_8908;

/// Whether the znode at `path` is part of the tree digest.
pub fn counts(path: &[u8]) -> bool {
    !path.starts_with(b"/zookeeper/")
}

/// czxid, mzxid, pzxid, ctime, mtime (longs), version, cversion (the stored child
/// create count), aversion (ints), ephemeralOwner (long), big-endian, in
/// DigestCalculator's order.
fn meta_bytes(m: &ZnodeMeta) -> [u8; META_BYTES] {
    let mut b = [0u8; META_BYTES];
    let longs = [m.czxid, m.mzxid, m.pzxid, m.ctime, m.mtime];
    for (i, v) in longs.iter().enumerate() {
        b[i * 8..i * 8 + 8].copy_from_slice(&v.to_be_bytes());
    }
    for (i, v) in [m.version, m.child_creates, m.aversion].iter().enumerate() {
        b[40 + i * 4..44 + i * 4].copy_from_slice(&v.to_be_bytes());
    }
    b[52..].copy_from_slice(&m.ephemeral_owner.to_be_bytes());
    b
}

/// ZooKeeper's digest of the znode at `path` with `data` (null data hashes as empty)
/// and `meta`: 0 for a znode the tree digest leaves out ([`counts`]), else the CRC-32
/// (as a non-negative long) of the path ("" for the root), the data and the Stat bytes.
pub fn node_digest(path: &[u8], data: &[u8], meta: &ZnodeMeta) -> i64 {
    if !counts(path) {
        return 0;
    }
    let mut h = crc32fast::Hasher::new();
    h.update(if path == b"/" { b"" } else { path });
    h.update(data);
    h.update(&meta_bytes(meta));
    i64::from(h.finalize())
}

/// The digest of a znode whose digest was `old_digest` with Stat `old`, after only its
/// Stat changed to `new` (same path, same data), without hashing its path and data
/// again. CRC-32 is affine: for messages of one length, crc(x) ^ crc(y) = raw(x ^ y),
/// raw being the CRC with zero initial and final values, which leading zero bytes do
/// not change; x ^ y is zero up to the Stat bytes, and raw(d) = crc(d) ^ crc(zeros)
/// over those 60 bytes. For a counted znode only ([`counts`]).
pub fn after_meta_change(old_digest: i64, old: &ZnodeMeta, new: &ZnodeMeta) -> i64 {
    let (a, b) = (meta_bytes(old), meta_bytes(new));
    let mut delta = [0u8; META_BYTES];
    for i in 0..META_BYTES {
        delta[i] = a[i] ^ b[i];
    }
    let raw = crc32fast::hash(&delta) ^ CRC_OF_ZERO_META;
    i64::from(old_digest as u32 ^ raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(seed: i64) -> ZnodeMeta {
        ZnodeMeta {
            czxid: seed,
            mzxid: seed + 1,
            pzxid: -seed,
            ctime: seed << 20,
            mtime: i64::MAX - seed,
            version: seed as i32,
            child_creates: 7,
            aversion: -1,
            ephemeral_owner: i64::MIN,
        }
    }

    #[test]
    fn a_stat_change_gives_the_digest_of_hashing_anew() {
        for (path, data) in [
            (&b"/a/b"[..], &b"some data"[..]),
            (b"/", b""),
            (b"/x", &[0u8; 3000][..]),
        ] {
            for s in [0, 1, 0x1_0000_0005, -77] {
                let (old, new) = (meta(s), meta(s * 3 + 11));
                let d = node_digest(path, data, &old);
                assert_eq!(
                    after_meta_change(d, &old, &new),
                    node_digest(path, data, &new)
                );
            }
        }
    }

    #[test]
    fn follows_zookeepers_inclusion_and_root_alias() {
        let m = meta(3);
        assert_eq!(node_digest(b"/zookeeper/quota", b"", &m), 0);
        assert_ne!(node_digest(b"/zookeeper", b"", &m), 0);
        let mut h = crc32fast::Hasher::new();
        h.update(&meta_bytes(&m));
        assert_eq!(node_digest(b"/", b"", &m), i64::from(h.finalize()));
        // java.util.zip.CRC32 of "123456789" is 0xCBF43926: the CRC-32 ZooKeeper uses.
        assert_eq!(crc32fast::hash(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32fast::hash(&[0u8; META_BYTES]), CRC_OF_ZERO_META);
    }
}

//! Snapshot encoding of znodes: a chunk is a sequence of node records in path order.
//!
//! Record: path, data (null kept), ACL, czxid, mzxid, pzxid, ctime, mtime, version,
//! child_creates, aversion, ephemeralOwner. Children are not stored: a znode's children
//! are the paths below it, counted as they load ([`DataTree::insert_loaded`], then
//! [`DataTree::finish_loading`]).

use super::{DataTree, ZnodeMeta};
use bytes::{BufMut, BytesMut};
use jute::codec::Encoder;
use jute::{Acl, Decoder, JuteError, Record};
use std::collections::HashMap;
use std::sync::Arc;

/// Appends node records after `cursor` until `out` holds at least `max_bytes`; returns
/// the last path written (the next cursor), or `None` once every node is written.
pub fn encode_nodes(
    tree: &DataTree,
    cursor: Option<&str>,
    max_bytes: usize,
    out: &mut BytesMut,
) -> Option<String> {
    for e in tree.nodes_after(cursor) {
        let (path, n) = (e.path(), e.node());
        out.ustring(&path);
        match n.data() {
            Some(d) => out.buffer(d),
            None => out.int(-1),
        }
        tree.acl(n).as_ref().encode(out);
        // One decode of the znode's header for all its fields.
        let m = n.meta();
        out.put_i64(m.czxid);
        out.put_i64(m.mzxid);
        out.put_i64(m.pzxid);
        out.put_i64(m.ctime);
        out.put_i64(m.mtime);
        out.put_i32(m.version);
        out.put_i32(m.child_creates);
        out.put_i32(m.aversion);
        out.put_i64(m.ephemeral_owner);
        if out.len() >= max_bytes {
            return Some(path);
        }
    }
    None
}

/// Reads node records from one chunk into `tree`, linking each to its parent. Equal
/// ACLs share one allocation; a record whose ACL bytes equal the previous record's
/// reuses it without decoding (most znodes share their parent's ACL).
///
/// Errors: truncated or malformed records.
pub fn decode_nodes(
    tree: &mut DataTree,
    chunk: &[u8],
    acls: &mut HashMap<Vec<Acl>, Arc<Vec<Acl>>>,
) -> Result<usize, JuteError> {
    let mut d = Decoder::new(chunk);
    let mut count = 0;
    let mut last_acl: Option<(Vec<u8>, Arc<Vec<Acl>>)> = None;
    while !d.is_empty() {
        let path: String = d.record()?;
        let data = d.buffer_opt()?;
        let before = d.remaining();
        let acl = match &last_acl {
            // A record's encoding delimits itself, so a prefix equal to the previous
            // ACL's whole encoding is that same ACL.
            Some((bytes, shared)) if before.starts_with(bytes) => {
                d.skip(bytes.len())?;
                shared.clone()
            }
            _ => {
                let decoded: Vec<Acl> = d.record()?;
                let raw = &before[..before.len() - d.remaining().len()];
                let shared = acls
                    .entry(decoded)
                    .or_insert_with_key(|k| Arc::new(k.clone()))
                    .clone();
                last_acl = Some((raw.to_vec(), shared.clone()));
                shared
            }
        };
        let meta = ZnodeMeta {
            czxid: d.long()?,
            mzxid: d.long()?,
            pzxid: d.long()?,
            ctime: d.long()?,
            mtime: d.long()?,
            version: d.int()?,
            child_creates: d.int()?,
            aversion: d.int()?,
            ephemeral_owner: d.long()?,
        };
        tree.insert_loaded(&path, data, &acl, &meta);
        count += 1;
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_round_trips_in_small_chunks() {
        let mut t = DataTree::new();
        let acl = Arc::new(super::super::acl::open_acl());
        t.create("/a", Some(&b"x"[..]), &acl, 0, 1, 2, 10).unwrap();
        t.create("/a/b", None, &acl, 77, 1, 3, 11).unwrap();
        t.create(
            "/a-c",
            Some(&[][..]),
            &acl,
            super::super::znode::CONTAINER_OWNER,
            2,
            4,
            12,
        )
        .unwrap();
        let mut chunks = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut buf = BytesMut::new();
            let next = encode_nodes(&t, cursor.as_deref(), 1, &mut buf);
            chunks.push(buf);
            match next {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        let mut back = DataTree::empty();
        let mut acls = HashMap::new();
        for c in &chunks {
            decode_nodes(&mut back, c, &mut acls).unwrap();
        }
        back.finish_loading();
        assert_eq!(back.node_count(), t.node_count());
        for p in ["/", "/a", "/a/b", "/a-c", "/zookeeper", "/zookeeper/config"] {
            assert_eq!(back.get(p).unwrap().stat(), t.get(p).unwrap().stat(), "{p}");
            let (b, o) = (back.get(p).unwrap(), t.get(p).unwrap());
            assert_eq!((b.meta(), b.data()), (o.meta(), o.data()), "{p}");
            assert_eq!(back.acl(b), t.acl(o), "{p}");
        }
        assert_eq!(back.ephemerals(77).collect::<Vec<_>>(), vec!["/a/b"]);
        assert!(back.containers().contains("/a-c"));
        assert_eq!(back.approximate_data_size(), t.approximate_data_size());
    }
}

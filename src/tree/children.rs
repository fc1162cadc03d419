//! A znode's children, read from the path-ordered set of znodes instead of a stored set.
//!
//! The children of `P` are the znodes whose paths start with `P/` and have no further
//! `/`. In path (byte) order they come in name order, which is the order getChildren
//! answers in. Each child's own subtree (`P/c/...`) sorts right after `P/c` and before
//! `P/c0` ('0' is '/' + 1), so the walk jumps over it with one seek; a flat directory
//! is a single in-order pass.

use super::Znode;
use std::collections::btree_set::{self, BTreeSet};
use std::ops::Bound;

/// Iterator over the child names of one znode, in name order (`&str` borrowed from the
/// tree). Also yields nothing for a path without children or without a znode.
pub struct Children<'a> {
    nodes: &'a BTreeSet<Znode>,
    /// `P/`, or `/` for the root.
    prefix: Vec<u8>,
    range: btree_set::Range<'a, Znode>,
    /// Set once the walk left the subtree, so later calls do not scan on.
    done: bool,
}

/// `path` with a trailing `/`: what every descendant's path starts with.
pub(super) fn prefix_of(path: &str) -> Vec<u8> {
    let mut p = path.as_bytes().to_vec();
    if p.last() != Some(&b'/') {
        p.push(b'/');
    }
    p
}

/// The key just past every path that starts with `prefix` (which ends with '/'): the
/// same bytes with the final '/' raised to '0'.
pub(super) fn past_prefix(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    if let Some(last) = end.last_mut() {
        *last = b'0';
    }
    end
}

/// Every znode strictly below `path`, in path order.
pub(super) fn subtree<'a>(nodes: &'a BTreeSet<Znode>, path: &str) -> btree_set::Range<'a, Znode> {
    let prefix = prefix_of(path);
    let end = past_prefix(&prefix);
    // The prefix itself is never a znode's path (paths do not end with '/', and the
    // root's prefix "/" is the root itself, which is not below itself).
    nodes.range::<[u8], _>((
        Bound::Excluded(prefix.as_slice()),
        Bound::Excluded(end.as_slice()),
    ))
}

impl<'a> Children<'a> {
    /// The children of `path` in `nodes`.
    pub(super) fn new(nodes: &'a BTreeSet<Znode>, path: &str) -> Children<'a> {
        let prefix = prefix_of(path);
        let range = nodes.range::<[u8], _>((Bound::Excluded(prefix.as_slice()), Bound::Unbounded));
        Children {
            nodes,
            prefix,
            range,
            done: false,
        }
    }
}

impl<'a> Iterator for Children<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        while !self.done {
            let node = self.range.next()?;
            let path = node.path_bytes();
            let Some(rest) = path.strip_prefix(self.prefix.as_slice()) else {
                // Past the subtree: the walk is over for good.
                self.done = true;
                return None;
            };
            match rest.iter().position(|&b| b == b'/') {
                None => return node.path().get(self.prefix.len()..),
                // A descendant: jump past the subtree of the child it lies under (a
                // child already listed, or one whose znode is missing, which a fuzzy
                // snapshot can leave until the log is replayed; not a child then).
                Some(slash) => {
                    let mut seek = Vec::with_capacity(self.prefix.len() + slash + 1);
                    seek.extend_from_slice(&self.prefix);
                    seek.extend_from_slice(&rest[..slash]);
                    seek.push(b'0');
                    self.range = self
                        .nodes
                        .range::<[u8], _>((Bound::Included(seek.as_slice()), Bound::Unbounded));
                }
            }
        }
        None
    }
}

//! A znode's children, read from the path-ordered set of znodes instead of a stored set.
//!
//! The children of `P` are the znodes whose paths start with `P/` and have no further
//! `/`. In path (byte) order they come in name order, which is the order getChildren
//! answers in. Each child's own subtree (`P/c/...`) sorts right after `P/c` and before
//! `P/c0` ('0' is '/' + 1), so the walk jumps over it with one seek; a flat directory
//! is a single in-order pass.

use super::znode_set::{Entry, Iter, ZnodeSet};
use std::ops::Bound;

/// A child's name, borrowed from the tree: the end of its leaf's prefix, then the start
/// of its key (a leaf's prefix can stop inside a name, see [`super::znode_set`]). Both
/// parts are UTF-8, since a prefix ends on a character boundary. `Display` writes it
/// (honouring width and fill); `String::from` copies it out.
#[derive(Clone, Copy)]
pub struct ChildName<'a> {
    head: &'a [u8],
    tail: &'a [u8],
}

impl ChildName<'_> {
    /// The name's length in bytes (what getChildren's byte counts add up).
    pub fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    /// Whether the name is empty (never, for a znode's child).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl std::fmt::Display for ChildName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.head.is_empty() {
            f.pad(&String::from_utf8_lossy(self.tail))
        } else {
            f.pad(&String::from(*self))
        }
    }
}

impl std::fmt::Debug for ChildName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&String::from(*self), f)
    }
}

impl From<ChildName<'_>> for String {
    fn from(n: ChildName<'_>) -> String {
        let mut s = String::with_capacity(n.len());
        s.push_str(&String::from_utf8_lossy(n.head));
        s.push_str(&String::from_utf8_lossy(n.tail));
        s
    }
}

impl PartialEq<&str> for ChildName<'_> {
    fn eq(&self, other: &&str) -> bool {
        let o = other.as_bytes();
        o.len() == self.len() && o.starts_with(self.head) && o.ends_with(self.tail)
    }
}

/// Iterator over the child names of one znode, in name order ([`ChildName`]s borrowed
/// from the tree). Also yields nothing for a path without children or without a znode.
pub struct Children<'a> {
    nodes: &'a ZnodeSet,
    /// `P/`, or `/` for the root.
    prefix: Vec<u8>,
    iter: Iter<'a>,
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

/// Every znode strictly below `path`, in path order.
pub(super) fn subtree<'a>(nodes: &'a ZnodeSet, path: &str) -> impl Iterator<Item = Entry<'a>> {
    let prefix = prefix_of(path);
    // The prefix itself is never a znode's path (paths do not end with '/', and the
    // root's prefix "/" is the root itself, which is not below itself).
    nodes
        .range_from(Bound::Excluded(prefix.as_slice()))
        .take_while(move |e| e.starts_with(&prefix))
}

impl<'a> Children<'a> {
    /// The children of `path` in `nodes`.
    pub(super) fn new(nodes: &'a ZnodeSet, path: &str) -> Children<'a> {
        let prefix = prefix_of(path);
        let iter = nodes.range_from(Bound::Excluded(prefix.as_slice()));
        Children {
            nodes,
            prefix,
            iter,
            done: false,
        }
    }

    /// The children of `path` whose names sort after `after`, starting with one seek (so a
    /// page of a wide parent costs its own length, not the names before it).
    pub(super) fn after(nodes: &'a ZnodeSet, path: &str, after: &str) -> Children<'a> {
        let prefix = prefix_of(path);
        // Just past `P/after`: names such as `after!` sort before its subtree
        // (`P/after/...`), which the walk then jumps over like any descendant.
        let mut seek = prefix.clone();
        seek.extend_from_slice(after.as_bytes());
        let iter = nodes.range_from(Bound::Excluded(seek.as_slice()));
        Children {
            nodes,
            prefix,
            iter,
            done: false,
        }
    }
}

impl<'a> Iterator for Children<'a> {
    type Item = ChildName<'a>;

    fn next(&mut self) -> Option<ChildName<'a>> {
        while !self.done {
            let e = self.iter.next()?;
            if !e.starts_with(&self.prefix) {
                // Past the subtree: the walk is over for good.
                self.done = true;
                return None;
            }
            // The path after `P/`: what is left of the leaf's prefix, then the key.
            let (head, tail) = match e.prefix().get(self.prefix.len()..) {
                Some(head) => (head, e.key()),
                None => (&[][..], &e.key()[self.prefix.len() - e.prefix().len()..]),
            };
            let slash = match head.iter().position(|&b| b == b'/') {
                Some(i) => Some(i),
                None => tail.iter().position(|&b| b == b'/').map(|i| head.len() + i),
            };
            let Some(slash) = slash else {
                return Some(ChildName { head, tail });
            };
            // A descendant: jump past the subtree of the child it lies under (a child
            // already listed, or one whose znode is missing, which a fuzzy snapshot can
            // leave until the log is replayed; not a child then).
            let mut seek = Vec::with_capacity(self.prefix.len() + slash + 1);
            seek.extend_from_slice(&self.prefix);
            seek.extend_from_slice(&head[..slash.min(head.len())]);
            seek.extend_from_slice(&tail[..slash.saturating_sub(head.len())]);
            seek.push(b'0');
            self.iter = self.nodes.range_from(Bound::Included(seek.as_slice()));
        }
        None
    }
}

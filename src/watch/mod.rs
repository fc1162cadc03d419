//! Watches: one-shot data/exists/child watches and persistent (recursive) watches
//! (ZooKeeper's WatchManager and WatcherMode). Watches belong to a connection, as in
//! ZooKeeper; a client re-registers them with setWatches after reconnecting.
//!
//! Two tables, as in ZooKeeper's DataTree: `data` (getData/exists watches, persistent
//! and recursive watches) and `child` (getChildren watches, persistent and recursive
//! watches).

use crate::proto::opcode::event;
use crate::tree::path;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The connection a watch belongs to.
pub type ConnId = u64;

/// Mode bits a connection may hold on one path in one table.
pub const STANDARD: u8 = 1;
/// A persistent watch on exactly this path (addWatch mode 0).
pub const PERSISTENT: u8 = 2;
/// A persistent watch on this path and everything below it (addWatch mode 1).
pub const RECURSIVE: u8 = 4;

/// Which table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Table {
    Data,
    Child,
}

/// Watch tables for all connections.
#[derive(Debug, Default)]
pub struct WatchManager {
    data: HashMap<String, BTreeMap<ConnId, u8>>,
    child: HashMap<String, BTreeMap<ConnId, u8>>,
    /// Reverse index for dropping a connection's watches.
    by_conn: HashMap<ConnId, BTreeSet<(Table, String)>>,
    /// Number of (table, path, conn) entries holding RECURSIVE; parents are scanned only
    /// when > 0.
    recursive_count: usize,
}

impl WatchManager {
    fn table(&mut self, t: Table) -> &mut HashMap<String, BTreeMap<ConnId, u8>> {
        match t {
            Table::Data => &mut self.data,
            Table::Child => &mut self.child,
        }
    }

    /// Adds `mode` for `conn` on `path` in table `t`.
    pub fn add(&mut self, t: Table, path: &str, conn: ConnId, mode: u8) {
        let entry = self
            .table(t)
            .entry(path.to_string())
            .or_default()
            .entry(conn)
            .or_insert(0);
        let had_recursive = *entry & RECURSIVE != 0;
        *entry |= mode;
        if !had_recursive && mode & RECURSIVE != 0 {
            self.recursive_count += 1;
        }
        self.by_conn
            .entry(conn)
            .or_default()
            .insert((t, path.to_string()));
    }

    /// addWatch: a persistent or recursive watch goes in both tables, as ZooKeeper
    /// 3.8's DataTree.addWatch puts it. In the child table a recursive watch answers
    /// checkWatches/removeWatches of the Children type and fires NodeDeleted for the
    /// znodes below it, which the data table already told the connection of unless a
    /// removal of the Data type took the data part away.
    pub fn add_persistent(&mut self, path: &str, conn: ConnId, recursive: bool) {
        let mode = if recursive { RECURSIVE } else { PERSISTENT };
        self.add(Table::Data, path, conn, mode);
        self.add(Table::Child, path, conn, mode);
    }

    /// Fires `event_type` on `path` in table `t`, returning the connections to notify
    /// (never one in `suppress`). One-shot watches fire once and are removed.
    pub fn trigger(
        &mut self,
        t: Table,
        path: &str,
        event_type: i32,
        suppress: &BTreeSet<ConnId>,
    ) -> BTreeSet<ConnId> {
        let mut out = BTreeSet::new();
        let mut emptied: Vec<ConnId> = Vec::new();
        let scan_parents = self.recursive_count > 0;
        let table = match t {
            Table::Data => &mut self.data,
            Table::Child => &mut self.child,
        };
        if let Some(watchers) = table.get_mut(path) {
            watchers.retain(|conn, mode| {
                let fires = *mode & (STANDARD | PERSISTENT) != 0
                    || (*mode & RECURSIVE != 0 && event_type != event::NODE_CHILDREN_CHANGED);
                // A suppressed one-shot watch is still consumed, as in ZooKeeper: the
                // connection was already told of this event by the other table.
                if fires && !suppress.contains(conn) {
                    out.insert(*conn);
                }
                *mode &= !STANDARD;
                if *mode == 0 {
                    emptied.push(*conn);
                }
                *mode != 0
            });
            if watchers.is_empty() {
                table.remove(path);
            }
        }
        if scan_parents && event_type != event::NODE_CHILDREN_CHANGED {
            let mut p = path;
            while p != "/" && !p.is_empty() {
                p = path::split(p).0;
                if let Some(watchers) = table.get(p) {
                    for (conn, mode) in watchers {
                        if *mode & RECURSIVE != 0 && !suppress.contains(conn) {
                            out.insert(*conn);
                        }
                    }
                }
            }
        }
        for conn in emptied {
            if let Some(set) = self.by_conn.get_mut(&conn) {
                set.remove(&(t, path.to_string()));
            }
        }
        out
    }

    /// Whether `conn` holds any watch matching `mask` on `path` in table `t`.
    pub fn contains(&self, t: Table, path: &str, conn: ConnId, mask: u8) -> bool {
        let table = match t {
            Table::Data => &self.data,
            Table::Child => &self.child,
        };
        table
            .get(path)
            .and_then(|w| w.get(&conn))
            .is_some_and(|m| m & mask != 0)
    }

    /// Removes the `mask` bits of `conn`'s watch on `path` in table `t`; true if any bit
    /// was held.
    pub fn remove(&mut self, t: Table, path: &str, conn: ConnId, mask: u8) -> bool {
        let table = match t {
            Table::Data => &mut self.data,
            Table::Child => &mut self.child,
        };
        let Some(watchers) = table.get_mut(path) else {
            return false;
        };
        let Some(mode) = watchers.get_mut(&conn) else {
            return false;
        };
        let held = *mode & mask;
        if held == 0 {
            return false;
        }
        *mode &= !mask;
        if held & RECURSIVE != 0 {
            self.recursive_count -= 1;
        }
        if *mode == 0 {
            watchers.remove(&conn);
            if watchers.is_empty() {
                table.remove(path);
            }
            if let Some(set) = self.by_conn.get_mut(&conn) {
                set.remove(&(t, path.to_string()));
            }
        }
        true
    }

    /// Drops every watch of a closed connection.
    pub fn remove_conn(&mut self, conn: ConnId) {
        let Some(entries) = self.by_conn.remove(&conn) else {
            return;
        };
        for (t, p) in entries {
            let table = match t {
                Table::Data => &mut self.data,
                Table::Child => &mut self.child,
            };
            if let Some(w) = table.get_mut(&p) {
                if let Some(mode) = w.remove(&conn) {
                    if mode & RECURSIVE != 0 {
                        self.recursive_count -= 1;
                    }
                }
                if w.is_empty() {
                    table.remove(&p);
                }
            }
        }
    }

    /// Whether no connection watches anything.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty() && self.child.is_empty()
    }

    /// Total (path, connection, table) watch registrations.
    pub fn watch_count(&self) -> usize {
        self.data.values().map(BTreeMap::len).sum::<usize>()
            + self.child.values().map(BTreeMap::len).sum::<usize>()
    }

    /// Number of distinct watched paths.
    pub fn path_count(&self) -> usize {
        let mut paths: BTreeSet<&String> = self.data.keys().collect();
        paths.extend(self.child.keys());
        paths.len()
    }

    /// The watches of one connection, in (table, path) order: the console's session page
    /// reads a page of them without building the whole index.
    pub fn of_connection(&self, conn: ConnId) -> impl Iterator<Item = (Table, &str)> {
        self.by_conn
            .get(&conn)
            .into_iter()
            .flatten()
            .map(|(t, p)| (*t, p.as_str()))
    }

    /// Number of watches `conn` holds.
    pub fn connection_watch_count(&self, conn: ConnId) -> usize {
        self.by_conn.get(&conn).map_or(0, BTreeSet::len)
    }

    /// Watched paths of each connection (for `wchc`), sorted.
    pub fn by_connection(&self) -> BTreeMap<ConnId, BTreeSet<String>> {
        self.by_conn
            .iter()
            .map(|(c, set)| (*c, set.iter().map(|(_, p)| p.clone()).collect()))
            .collect()
    }

    /// Connections watching each path (for `wchp`), sorted.
    pub fn by_path(&self) -> BTreeMap<String, BTreeSet<ConnId>> {
        let mut out: BTreeMap<String, BTreeSet<ConnId>> = BTreeMap::new();
        for (p, w) in self.data.iter().chain(self.child.iter()) {
            out.entry(p.clone()).or_default().extend(w.keys().copied());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONE: &BTreeSet<ConnId> = &BTreeSet::new();

    #[test]
    fn one_shot_fires_once() {
        let mut w = WatchManager::default();
        w.add(Table::Data, "/a", 1, STANDARD);
        assert_eq!(
            w.trigger(Table::Data, "/a", event::NODE_DATA_CHANGED, NONE),
            BTreeSet::from([1])
        );
        assert!(w
            .trigger(Table::Data, "/a", event::NODE_DATA_CHANGED, NONE)
            .is_empty());
        assert_eq!(w.watch_count(), 0);
    }

    #[test]
    fn persistent_and_recursive() {
        let mut w = WatchManager::default();
        w.add_persistent("/a", 1, false);
        w.add_persistent("/a", 2, true);
        // Data change on /a: both.
        let got = w.trigger(Table::Data, "/a", event::NODE_DATA_CHANGED, NONE);
        assert_eq!(got, BTreeSet::from([1, 2]));
        // Child change on /a: persistent only (recursive watches skip child events).
        let got = w.trigger(Table::Child, "/a", event::NODE_CHILDREN_CHANGED, NONE);
        assert_eq!(got, BTreeSet::from([1]));
        // Creation below /a: recursive only.
        let got = w.trigger(Table::Data, "/a/b/c", event::NODE_CREATED, NONE);
        assert_eq!(got, BTreeSet::from([2]));
        // Still there.
        assert!(w.contains(Table::Data, "/a", 2, RECURSIVE));
        assert!(w.remove(Table::Data, "/a", 2, RECURSIVE));
        assert!(w
            .trigger(Table::Data, "/a/b", event::NODE_CREATED, NONE)
            .is_empty());
    }

    #[test]
    fn suppression_and_conn_removal() {
        let mut w = WatchManager::default();
        w.add(Table::Data, "/a", 1, STANDARD);
        w.add(Table::Child, "/a", 1, STANDARD);
        let fired = w.trigger(Table::Data, "/a", event::NODE_DELETED, NONE);
        let second = w.trigger(Table::Child, "/a", event::NODE_DELETED, &fired);
        assert!(second.is_empty());
        w.add(Table::Child, "/b", 3, STANDARD);
        w.remove_conn(3);
        assert_eq!(
            w.watch_count(),
            0,
            "a suppressed one-shot watch is consumed too"
        );
    }
}

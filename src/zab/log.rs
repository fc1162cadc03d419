//! The core's in-memory view of its own txn log: the window of recent committed txns
//! the leader sends in a DIFF (ZooKeeper's `committedLog`, `zookeeper.commitLogCount`)
//! followed by every logged txn not yet known committed. Older txns live only in
//! storage: for a learner behind the window the leader asks the runtime to read them
//! (`Action::ReadLog`, ZAB-WIRE.md §4.2 rule 5) and sends a SNAP when the on-disk log
//! cannot serve them.

use std::collections::VecDeque;

use super::{Txn, Zxid};

/// Logged txns in zxid order from just after `base`, with the commit point.
#[derive(Clone, Debug)]
pub struct Log {
    /// The zxid just before the first entry: the snapshot the member started from, or
    /// the last committed txn dropped from the window. Every member that logged a txn
    /// with this zxid holds the same txn (one leader per epoch).
    base: Zxid,
    /// Ascending by zxid, all > `base`.
    entries: VecDeque<Txn>,
    /// The highest zxid known committed, `base <= committed <= last()`.
    committed: Zxid,
    /// How many committed entries to keep for DIFFs.
    window: usize,
}

impl Log {
    /// A log that starts after `base` (committed) with `txns` logged after it and not
    /// known committed (recovered from storage).
    pub fn new(base: Zxid, txns: impl IntoIterator<Item = Txn>, window: usize) -> Log {
        let mut log = Log {
            base,
            entries: VecDeque::new(),
            committed: base,
            window: window.max(1),
        };
        for t in txns {
            if t.zxid > log.last() {
                log.entries.push_back(t);
            }
        }
        log
    }

    /// The last logged zxid (ZooKeeper's lastLoggedZxid), `base` if none.
    pub fn last(&self) -> Zxid {
        self.entries.back().map_or(self.base, |t| t.zxid)
    }

    /// The highest committed zxid.
    pub fn committed(&self) -> Zxid {
        self.committed
    }

    /// The zxid before the first entry held.
    pub fn base(&self) -> Zxid {
        self.base
    }

    /// Appends `txn`; false (and nothing changes) unless its zxid is above `last()`.
    pub fn append(&mut self, txn: Txn) -> bool {
        if txn.zxid <= self.last() {
            return false;
        }
        self.entries.push_back(txn);
        true
    }

    /// Appends `txn` if its zxid comes right after `last()`: the next counter in the
    /// same epoch, or the first of a later epoch (a leader numbers its proposals
    /// 1, 2, 3... in its epoch, and a learner's stream carries every one after its
    /// sync point). False (and nothing changes) otherwise: the stream lost a txn, and
    /// logging past the gap would commit a history without it (ZOOKEEPER-4925's
    /// discontinuous committedLog; a learner that sees one syncs again).
    pub fn append_next(&mut self, txn: Txn) -> bool {
        if !follows(self.last(), txn.zxid) {
            return false;
        }
        self.append(txn)
    }

    /// Whether a txn with exactly `zxid` is held.
    pub fn contains(&self, zxid: Zxid) -> bool {
        zxid == self.base || self.position(zxid).is_ok()
    }

    fn position(&self, zxid: Zxid) -> Result<usize, usize> {
        self.entries.binary_search_by_key(&zxid, |t| t.zxid)
    }

    /// Marks every entry up to `zxid` committed and trims the window. Returns false if
    /// `zxid` is not held or not above the commit point.
    pub fn commit_to(&mut self, zxid: Zxid) -> bool {
        self.commit_keeping(zxid, None)
    }

    /// `commit_to`, but the window keeps every entry after `keep_after` (when given),
    /// however many: `base` stays at or below it. The leader pins the window this way
    /// while an on-disk log read for a learner is out (`Action::ReadLog` up to
    /// `keep_after`), so the txns read join the window without a gap however long the
    /// read takes under continuous writes, as ZooKeeper's `syncFollower` holds the
    /// committed log's read lock for the whole sync. The extra entries go at the
    /// first commit after the pin is lifted.
    pub fn commit_keeping(&mut self, zxid: Zxid, keep_after: Option<Zxid>) -> bool {
        if zxid <= self.committed {
            return false;
        }
        // A binary search, not a scan: the window holds commitLogCount entries and this
        // runs once per commit.
        let Ok(at) = self.position(zxid) else {
            return false;
        };
        self.committed = zxid;
        let committed_count = at + 1;
        for _ in self.window..committed_count {
            let front = self.entries.front().expect("counted").zxid;
            if keep_after.is_some_and(|keep| front > keep) {
                break;
            }
            self.entries.pop_front();
            self.base = front;
        }
        true
    }

    /// Drops every entry above `zxid`. Returns false (nothing changes) if that would
    /// drop a committed txn.
    pub fn truncate_after(&mut self, zxid: Zxid) -> bool {
        if zxid < self.committed {
            return false;
        }
        while self.entries.back().is_some_and(|t| t.zxid > zxid) {
            self.entries.pop_back();
        }
        true
    }

    /// Replaces everything with a snapshot of the state at `zxid` (committed).
    pub fn reset(&mut self, zxid: Zxid) {
        self.entries.clear();
        self.base = zxid;
        self.committed = zxid;
    }

    /// Entries with zxid > `after`, ascending.
    pub fn after(&self, after: Zxid) -> impl Iterator<Item = &Txn> {
        let start = match self.position(after) {
            Ok(i) => i + 1,
            Err(i) => i,
        };
        self.entries.range(start..)
    }

    /// The zxid of the entry just before the first one >= `zxid` (`base` if none).
    pub fn before(&self, zxid: Zxid) -> Zxid {
        let i = match self.position(zxid) {
            Ok(i) | Err(i) => i,
        };
        if i == 0 {
            self.base
        } else {
            self.entries[i - 1].zxid
        }
    }

    /// The first entry with zxid >= `zxid`.
    pub fn first_at_or_after(&self, zxid: Zxid) -> Option<&Txn> {
        let i = match self.position(zxid) {
            Ok(i) | Err(i) => i,
        };
        self.entries.get(i)
    }
}

/// Whether `next` is the zxid right after `last` in a leader's history: the next
/// counter of the same epoch, or counter 1 of a later one.
pub fn follows(last: Zxid, next: Zxid) -> bool {
    let (e, c) = (super::epoch_of(last), super::counter_of(last));
    let (ne, nc) = (super::epoch_of(next), super::counter_of(next));
    if ne == e {
        c.checked_add(1) == Some(nc)
    } else {
        ne > e && nc == 1
    }
}

/// The first place where `txns`, logged after `base` (the snapshot's zxid) in
/// ascending order, skip a zxid: `(before, after)` with `after` not [`follows`]
/// `before`. A zxid at or below the one before it (ZooKeeper 3.8 can log a txn twice,
/// ZOOKEEPER-4712) is passed over, as [`Log::new`] passes over it.
///
/// A member's txns after its snapshot always follow one another: it logs a PROPOSAL only
/// right after its last txn (`append_next`), a TRUNC cuts the log's tail, and a SNAP
/// replaces the snapshot and the whole log. A hole means the store is damaged (or was
/// written by a keel before 6170501, whose learners could log a DIFF with a gap): the
/// member's state would miss the txns in it once they commit, and as a leader it would
/// send the hole to its learners.
pub fn first_hole(base: Zxid, txns: &[Txn]) -> Option<(Zxid, Zxid)> {
    let mut last = base;
    for t in txns {
        if t.zxid <= last {
            continue;
        }
        if !follows(last, t.zxid) {
            return Some((last, t.zxid));
        }
        last = t.zxid;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hole_is_named_by_the_zxids_around_it() {
        let txns = |ids: &[(u32, u32)]| -> Vec<Txn> { ids.iter().map(|&(e, c)| t(e, c)).collect() };
        assert_eq!(first_hole(0, &[]), None);
        assert_eq!(
            first_hole(zxid(2, 5), &txns(&[(2, 6), (2, 7), (3, 1)])),
            None
        );
        assert_eq!(
            first_hole(zxid(2, 5), &txns(&[(2, 6), (2, 6), (2, 7)])),
            None,
            "a doubled txn is passed over"
        );
        assert_eq!(
            first_hole(zxid(2, 0), &txns(&[(2, 1)])),
            None,
            "a snapshot at an epoch's start"
        );
        assert_eq!(
            first_hole(zxid(2, 5), &txns(&[(2, 6), (2, 8)])),
            Some((zxid(2, 6), zxid(2, 8)))
        );
        assert_eq!(
            first_hole(zxid(2, 5), &txns(&[(2, 7)])),
            Some((zxid(2, 5), zxid(2, 7))),
            "right after the snapshot"
        );
        assert_eq!(
            first_hole(zxid(2, 5), &txns(&[(2, 6), (3, 2)])),
            Some((zxid(2, 6), zxid(3, 2))),
            "a later epoch from its second txn"
        );
    }

    #[test]
    fn a_learner_appends_only_the_txn_right_after_its_last() {
        assert!(follows(zxid(3, 7), zxid(3, 8)));
        assert!(
            follows(zxid(2, 9), zxid(3, 1)),
            "the first of a later epoch"
        );
        assert!(follows(0, zxid(1, 1)));
        assert!(!follows(zxid(3, 9), zxid(3, 15)), "a gap");
        assert!(
            !follows(zxid(2, 9), zxid(3, 2)),
            "a later epoch from its second txn"
        );
        assert!(!follows(zxid(3, 9), zxid(3, 9)));
        assert!(!follows(zxid(3, 9), zxid(2, 10)));
        let mut log = Log::new(zxid(3, 7), [], 100);
        assert!(log.append_next(t(3, 8)));
        assert!(!log.append_next(t(3, 10)), "3:9 lost");
        assert_eq!(log.last(), zxid(3, 8), "nothing changed");
        assert!(log.append_next(t(3, 9)));
        assert!(log.append_next(t(4, 1)));
    }
    use crate::zab::zxid;
    use bytes::Bytes;

    fn t(e: u32, c: u32) -> Txn {
        Txn {
            zxid: zxid(e, c),
            data: Bytes::new(),
        }
    }

    #[test]
    fn window_trims_only_committed() {
        let mut log = Log::new(0, [t(1, 1), t(1, 2), t(1, 3), t(1, 4)], 2);
        assert_eq!(log.last(), zxid(1, 4));
        assert!(log.commit_to(zxid(1, 3)));
        assert_eq!(log.base(), zxid(1, 1));
        assert_eq!(log.after(0).count(), 3);
        assert!(!log.truncate_after(zxid(1, 2)));
        assert!(log.truncate_after(zxid(1, 3)));
        assert_eq!(log.last(), zxid(1, 3));
        assert_eq!(log.before(zxid(1, 3)), zxid(1, 2));
        assert!(!log.append(t(1, 2)));
        assert!(log.append(t(2, 1)));
        assert_eq!(log.first_at_or_after(zxid(1, 9)).unwrap().zxid, zxid(2, 1));
    }

    #[test]
    fn a_pin_keeps_the_window_from_passing_it() {
        let mut log = Log::new(0, (1..=6).map(|c| t(1, c)), 2);
        assert!(log.commit_keeping(zxid(1, 5), Some(zxid(1, 2))));
        assert_eq!(log.base(), zxid(1, 2), "trimmed only up to the pin");
        assert_eq!(log.after(log.base()).count(), 4);
        assert!(log.commit_keeping(zxid(1, 6), None));
        assert_eq!(
            log.base(),
            zxid(1, 4),
            "the window shrinks back once unpinned"
        );
    }
}

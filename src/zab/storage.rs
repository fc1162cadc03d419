//! What Zab needs durable, in the core's terms: the txn log (append, sync, truncate,
//! read a range), acceptedEpoch and currentEpoch, and a snapshot installed atomically
//! (issue 15 item 4). The core never calls this: the runtime executes the core's
//! actions against it and reports [`super::Input::Durable`]. [`MemStorage`] is the
//! simulation's: a crash loses every write not yet synced; `storage::zab::ZabStore` is
//! the production one, on keel's own txn log and RocksDB store.

use bytes::Bytes;

use super::{Recovered, Txn, Zxid};

/// A member's durable Zab state.
pub trait ZabStorage {
    /// What survives in storage now: epochs, the snapshot's zxid and the synced log
    /// after it.
    fn recover(&self) -> Recovered;
    /// Appends txns (ascending, above the last logged zxid) without syncing.
    fn append(&mut self, txns: &[Txn]);
    /// Makes every appended txn durable; returns the last durable zxid.
    fn sync(&mut self) -> Zxid;
    /// Durably drops every txn above `zxid`, synced or not.
    fn truncate_after(&mut self, zxid: Zxid);
    /// The logged txns with `after < zxid <= upto`, ascending.
    fn read_range(&self, after: Zxid, upto: Zxid) -> Vec<Txn>;
    /// Durably writes acceptedEpoch.
    fn set_accepted_epoch(&mut self, epoch: u32);
    /// Durably writes currentEpoch.
    fn set_current_epoch(&mut self, epoch: u32);
    /// Atomically and durably replaces the state with `snapshot` (as of `zxid`) and
    /// empties the txn log: after a crash either the old state and log or the new.
    fn install_snapshot(&mut self, zxid: Zxid, snapshot: Bytes);
    /// The last snapshot: its zxid and bytes (0 and empty for none).
    fn snapshot(&self) -> (Zxid, Bytes);
    /// The stored size in bytes of the log a DIFF from `after` would read, as ZooKeeper
    /// measures it (`TxnIterator.getStorageSize`: the whole log files after the one
    /// holding `after`, so 0 while the log has not rolled since). The default sums the
    /// payloads of the txns above `after` (the simulation's store, which has no files);
    /// a store with log files overrides it with ZooKeeper's measure.
    fn log_bytes_after(&self, after: Zxid) -> u64 {
        self.read_range(after, Zxid::MAX)
            .iter()
            .map(|t| t.data.len() as u64)
            .sum()
    }
    /// The size in bytes of the newest snapshot (0 for none). The default measures
    /// [`ZabStorage::snapshot`]; a store with snapshot files overrides it.
    fn snapshot_bytes(&self) -> u64 {
        self.snapshot().1.len() as u64
    }
}

/// Executes [`super::Action::ReadLog`]: the logged txns with `after < zxid <= upto` for a
/// DIFF, or `None` for SNAP. ZooKeeper's rule (`ZKDatabase.getProposalsFromTxnLog`,
/// `calculateTxnLogSizeLimit`): the log must hold the txn `after` itself (a learner
/// whose last zxid the log does not reach, or never held, gets a SNAP), and, when the
/// limit `snapshot_size_factor` x the newest snapshot's size is above 0, the log from
/// `after` on must not be larger than it (reading more than a third of a snapshot's
/// worth of log costs more than sending the snapshot). A limit of 0 (no snapshot, or
/// a factor of 0) does not limit; a negative factor disables the read. The sizes are
/// those of [`ZabStorage::log_bytes_after`] and [`ZabStorage::snapshot_bytes`].
pub fn read_for_diff<S: ZabStorage + ?Sized>(
    storage: &S,
    after: Zxid,
    upto: Zxid,
    snapshot_size_factor: f64,
) -> Option<Vec<Txn>> {
    if snapshot_size_factor < 0.0 || after == 0 {
        return None;
    }
    // Zxids are integers: the txn `after` is the only one in (after - 1, after].
    if storage.read_range(after - 1, after).is_empty() {
        return None;
    }
    // The log's size first: it is usually 0 (ZooKeeper's measure counts only log files
    // after the one holding `after`), and then the snapshot need not be read at all.
    let log_bytes = storage.log_bytes_after(after);
    if log_bytes > 0 {
        let limit = (storage.snapshot_bytes() as f64 * snapshot_size_factor) as u64;
        if limit > 0 && log_bytes > limit {
            return None;
        }
    }
    Some(storage.read_range(after, upto))
}

/// In-memory storage for the simulation. Appends sit in an unsynced tail until
/// `sync` (or the split `sync_point` / `sync_to` the simulation uses to model a slow
/// fsync); `crash` drops that tail. Epoch writes, truncation and snapshot installs are
/// durable at once, as the core's ordering rules require.
#[derive(Clone, Debug, Default)]
pub struct MemStorage {
    accepted_epoch: u32,
    current_epoch: u32,
    snapshot_zxid: Zxid,
    snapshot: Bytes,
    /// The txn log, ascending by zxid; the first `synced` entries are durable.
    log: Vec<Txn>,
    synced: usize,
}

impl MemStorage {
    /// Empty storage (a new dataDir).
    pub fn new() -> MemStorage {
        MemStorage::default()
    }

    /// Power loss: every unsynced append is gone.
    pub fn crash(&mut self) {
        self.log.truncate(self.synced);
    }

    /// The mark a sync started now would make durable (group commit: a sync covers
    /// what was appended before it began).
    pub fn sync_point(&self) -> usize {
        self.log.len()
    }

    /// Completes a sync begun at `point`; returns the last durable zxid.
    pub fn sync_to(&mut self, point: usize) -> Zxid {
        self.synced = self.synced.max(point.min(self.log.len()));
        self.last_durable()
    }

    /// The last durable zxid (the snapshot's if the log has none).
    pub fn last_durable(&self) -> Zxid {
        self.synced
            .checked_sub(1)
            .map_or(self.snapshot_zxid, |i| self.log[i].zxid)
    }

    /// Whether appends wait for a sync.
    pub fn has_unsynced(&self) -> bool {
        self.synced < self.log.len()
    }

    /// Replaces the snapshot with a newer local one of the applied state (the server's
    /// periodic snapshot) and drops the log entries it covers. Durable and atomic.
    pub fn save_snapshot(&mut self, zxid: Zxid, snapshot: Bytes) {
        if zxid <= self.snapshot_zxid {
            return;
        }
        let keep_from = self.log.partition_point(|t| t.zxid <= zxid);
        self.log.drain(..keep_from);
        self.synced = self.synced.saturating_sub(keep_from);
        self.snapshot_zxid = zxid;
        self.snapshot = snapshot;
    }

    /// acceptedEpoch and currentEpoch as stored.
    pub fn epochs(&self) -> (u32, u32) {
        (self.accepted_epoch, self.current_epoch)
    }

    /// Every logged txn, synced or not.
    pub fn log(&self) -> &[Txn] {
        &self.log
    }
}

impl ZabStorage for MemStorage {
    fn recover(&self) -> Recovered {
        Recovered {
            accepted_epoch: self.accepted_epoch,
            current_epoch: self.current_epoch,
            snapshot_zxid: self.snapshot_zxid,
            log: self.log[..self.synced].to_vec(),
        }
    }

    fn append(&mut self, txns: &[Txn]) {
        for t in txns {
            let last = self.log.last().map_or(self.snapshot_zxid, |l| l.zxid);
            assert!(
                t.zxid > last,
                "txn log append out of order: {:#x} after {:#x}",
                t.zxid,
                last
            );
            self.log.push(t.clone());
        }
    }

    fn sync(&mut self) -> Zxid {
        self.sync_to(self.log.len())
    }

    fn truncate_after(&mut self, zxid: Zxid) {
        let keep = self.log.partition_point(|t| t.zxid <= zxid);
        self.log.truncate(keep);
        self.synced = self.synced.min(keep);
    }

    fn read_range(&self, after: Zxid, upto: Zxid) -> Vec<Txn> {
        self.log
            .iter()
            .filter(|t| t.zxid > after && t.zxid <= upto)
            .cloned()
            .collect()
    }

    fn set_accepted_epoch(&mut self, epoch: u32) {
        self.accepted_epoch = epoch;
    }

    fn set_current_epoch(&mut self, epoch: u32) {
        self.current_epoch = epoch;
    }

    fn install_snapshot(&mut self, zxid: Zxid, snapshot: Bytes) {
        self.log.clear();
        self.synced = 0;
        self.snapshot_zxid = zxid;
        self.snapshot = snapshot;
    }

    fn snapshot(&self) -> (Zxid, Bytes) {
        (self.snapshot_zxid, self.snapshot.clone())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::zab::zxid;

    fn t(c: u32) -> Txn {
        Txn {
            zxid: zxid(1, c),
            data: Bytes::from(vec![c as u8]),
        }
    }

    /// What every `ZabStorage` must do, whatever its medium: `reopen` is a restart
    /// (for `MemStorage` a crash after the sync); `snapshot` is a snapshot in the form
    /// the medium stores. The production implementation (storage::zab) runs this same
    /// function.
    pub(crate) fn conformance<S: ZabStorage>(mut s: S, reopen: impl Fn(S) -> S, snapshot: Bytes) {
        assert_eq!(s.recover().snapshot_zxid, 0);
        s.append(&[t(1), t(2), t(3)]);
        assert_eq!(s.sync(), zxid(1, 3));
        s.set_accepted_epoch(2);
        s.set_current_epoch(1);
        assert_eq!(s.read_range(zxid(1, 1), zxid(1, 2)), vec![t(2)]);
        s.truncate_after(zxid(1, 2));
        let mut s = reopen(s);
        let r = s.recover();
        assert_eq!((r.accepted_epoch, r.current_epoch), (2, 1));
        assert_eq!(r.log, vec![t(1), t(2)], "a truncation is durable");
        s.append(&[t(4)]);
        s.sync();
        s.install_snapshot(zxid(1, 7), snapshot.clone());
        let s = reopen(s);
        let r = s.recover();
        assert_eq!(r.snapshot_zxid, zxid(1, 7));
        assert!(r.log.is_empty(), "a SNAP replaces the log");
        assert_eq!(s.snapshot(), (zxid(1, 7), snapshot));
    }

    #[test]
    fn read_for_diff_needs_the_txn_and_keeps_to_the_size_rule() {
        let mut s = MemStorage::new();
        s.append(&[t(1), t(2), t(3), t(4)]);
        s.sync();
        assert_eq!(
            read_for_diff(&s, zxid(1, 1), zxid(1, 3), 0.33),
            Some(vec![t(2), t(3)])
        );
        assert_eq!(
            read_for_diff(&s, zxid(1, 1), zxid(1, 3), -1.0),
            None,
            "disabled"
        );
        assert_eq!(
            read_for_diff(&s, 0, zxid(1, 3), 0.33),
            None,
            "zxid 0 is no txn"
        );
        // A snapshot of 4 bytes: a limit of 1 byte, and 3 bytes of log after 1.
        s.save_snapshot(zxid(1, 1), Bytes::from_static(b"snap"));
        assert_eq!(
            read_for_diff(&s, zxid(1, 1), zxid(1, 3), 0.33),
            None,
            "log gone"
        );
        assert_eq!(
            read_for_diff(&s, zxid(1, 2), zxid(1, 3), 0.33),
            None,
            "too large"
        );
        assert_eq!(
            read_for_diff(&s, zxid(1, 2), zxid(1, 3), 0.5),
            Some(vec![t(3)])
        );
        assert_eq!(
            read_for_diff(&s, zxid(1, 2), zxid(1, 4), 0.0),
            Some(vec![t(3), t(4)])
        );
    }

    #[test]
    fn mem_storage_conforms() {
        conformance(
            MemStorage::new(),
            |mut s| {
                s.crash();
                s
            },
            Bytes::from_static(b"state"),
        );
    }

    #[test]
    fn crash_loses_only_unsynced_appends() {
        let mut s = MemStorage::new();
        s.append(&[t(1), t(2)]);
        let point = s.sync_point();
        s.append(&[t(3)]);
        assert_eq!(s.sync_to(point), zxid(1, 2));
        s.set_current_epoch(1);
        s.crash();
        let r = s.recover();
        assert_eq!(r.log, vec![t(1), t(2)]);
        assert_eq!(r.current_epoch, 1);
        s.truncate_after(zxid(1, 1));
        s.append(&[t(5)]);
        s.crash();
        assert_eq!(s.recover().log, vec![t(1)]);
        s.install_snapshot(zxid(1, 9), Bytes::from_static(b"s"));
        assert!(s.recover().log.is_empty());
        assert_eq!(s.recover().snapshot_zxid, zxid(1, 9));
    }
}

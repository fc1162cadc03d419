//! The storage thread of an ensemble member: executes the Zab core's storage actions
//! ([`crate::zab::Action`]) and the state machine's own snapshot writes on a
//! [`ZabStore`], on a blocking thread, in the order they are queued.
//!
//! - Appends are group-committed: every append already queued is written, then one
//!   sync covers them all, then the ACKs of those that carry an [`AckLink`] are sent
//!   (a follower's, [`crate::zab::Action::AppendTxns`]'s `ack_to`), then the highest
//!   durable zxid is published on a watch channel (which never blocks, so the core and
//!   this thread cannot deadlock on full queues). The core feeds it to Zab as
//!   [`crate::zab::Input::Durable`].
//! - acceptedEpoch, currentEpoch, TRUNC and SNAP installs must be durable before the core
//!   runs its next action (the ordering rules in `zab`): they carry a oneshot that this
//!   thread answers once the write is synced, and the core waits for it. Appends queued
//!   before one are written first (one queue, in order), and a truncate syncs them
//!   before it cuts.
//! - A DIFF read ([`crate::zab::Action::ReadLog`]) runs here too, with the log as it is
//!   when it runs; its answer goes back to the core as [`crate::zab::Input::LogRead`].
//! - Autopurge runs after a snapshot when due ([`Purge::due`]), as in the standalone
//!   storage thread: the newest `autopurge.snapRetainCount` snapshots and the log after
//!   the oldest of them stay. A learner whose last zxid went with the log then syncs by
//!   SNAP ([`read_for_diff`] needs that txn), as with ZooKeeper's purged txn logs.
//!
//! A storage error is fatal, as in the standalone storage thread: the process exits,
//! because serving on without knowing what is durable would be a guess.

use super::peer::quorum::AckLink;
use super::persist::Purge;
use crate::server::stats::StorageStats;
use crate::server::StorageOp;
use crate::storage::zab::ZabStore;
use crate::storage::{Storage, StorageError};
use crate::zab::message::Message;
use crate::zab::storage::read_for_diff;
use crate::zab::wire::quorum::{encode_message, Side};
use crate::zab::{Input, Sid, Txn, Zxid};
use bytes::{Bytes, BytesMut};
use std::time::Instant;
use tokio::sync::{mpsc, oneshot, watch, Semaphore};

/// Appends gathered into one group commit at most (one write and one sync).
const MAX_BATCH_TXNS: usize = 4096;

/// One operation for the storage thread.
#[derive(Debug)]
pub enum ZabOp {
    /// Append these txns (ascending, above the log's last zxid); durable once the
    /// published zxid reaches them. With `ack`, an ACK of each goes on that
    /// connection once they are synced, before the zxid is published.
    Append {
        txns: Vec<Txn>,
        ack: Option<AckLink>,
    },
    /// Durably write acceptedEpoch, then answer `done`.
    AcceptedEpoch {
        epoch: u32,
        done: oneshot::Sender<()>,
    },
    /// Durably write currentEpoch, then answer `done`.
    CurrentEpoch {
        epoch: u32,
        done: oneshot::Sender<()>,
    },
    /// Durably drop every logged txn above `after` (synced or not), then answer `done`.
    Truncate {
        after: Zxid,
        done: oneshot::Sender<()>,
    },
    /// Atomically install `snapshot` (keel's snapshot form or a SNAP stream, see
    /// [`crate::storage::zab`]) as the state as of `zxid`, emptying the log, then
    /// answer `done`.
    Install {
        zxid: Zxid,
        snapshot: Bytes,
        done: oneshot::Sender<()>,
    },
    /// Write `snapshot` as it would be installed at `zxid`, without installing it
    /// ([`ZabStore::try_stage_snapshot`]): a learner's SNAP, staged while the core reads
    /// it, so the `Install` of the same bytes that follows only commits. Best effort: a
    /// failure is logged and the install then writes it whole.
    Stage { zxid: Zxid, snapshot: Bytes },
    /// Read the log for a DIFF to `peer` ([`read_for_diff`]) and send the answer on the
    /// events channel.
    ReadLog {
        peer: Sid,
        after: Zxid,
        upto: Zxid,
        snapshot_size_factor: f64,
    },
    /// One of the state machine's own snapshot writes (its periodic local snapshot).
    Server(StorageOp),
}

/// Runs until `rx` closes. `durable` gets the highest durable zxid after each group
/// commit; `events` gets the answers to [`ZabOp::ReadLog`]; `stats` records each sync's
/// and snapshot's time; `chunk_slots` gets a permit back for each snapshot chunk after
/// the header once it is written (the core takes one per chunk it serialises, as for
/// the standalone storage thread); `purge` is autopurge's settings.
pub fn run(
    mut store: ZabStore,
    mut rx: mpsc::Receiver<ZabOp>,
    durable: watch::Sender<Zxid>,
    events: mpsc::Sender<Input>,
    stats: StorageStats,
    chunk_slots: &Semaphore,
    purge: Purge,
) {
    let mut batch = Batch::default();
    let mut snapshots = Snapshots {
        started: None,
        purge,
        last_purge: None,
    };
    while let Some(first) = rx.blocking_recv() {
        let mut next = Some(first);
        while let Some(op) = next.take() {
            match op {
                ZabOp::Append { txns, ack } => {
                    batch.add(txns, ack);
                    if batch.txns.len() < MAX_BATCH_TXNS {
                        next = rx.try_recv().ok();
                        continue;
                    }
                    group_commit(&mut store, &mut batch, &durable, &stats);
                }
                other => {
                    // Everything queued before it is written (and synced) first.
                    group_commit(&mut store, &mut batch, &durable, &stats);
                    execute(
                        &mut store,
                        other,
                        &events,
                        &stats,
                        chunk_slots,
                        &mut snapshots,
                    );
                }
            }
            if next.is_none() {
                next = rx.try_recv().ok();
            }
        }
        group_commit(&mut store, &mut batch, &durable, &stats);
    }
}

/// The appends of one group commit.
#[derive(Default)]
struct Batch {
    txns: Vec<Txn>,
    /// The ACKs to send once they are synced: a connection and the zxids for it, in
    /// the order they were appended (one entry per run of appends for one connection).
    acks: Vec<(AckLink, Vec<Zxid>)>,
}

impl Batch {
    fn add(&mut self, txns: Vec<Txn>, ack: Option<AckLink>) {
        if let Some(link) = ack {
            let zxids = txns.iter().map(|t| t.zxid);
            match self.acks.last_mut() {
                Some((last, run)) if last.same(&link) => run.extend(zxids),
                _ => self.acks.push((link, zxids.collect())),
            }
        }
        self.txns.extend(txns);
    }
}

/// Sends each connection's ACKs as one write: the packets one after another, one per
/// zxid, as ZooKeeper's follower sends them.
fn send_acks(acks: &mut Vec<(AckLink, Vec<Zxid>)>) {
    for (link, zxids) in acks.drain(..) {
        let Some(&last) = zxids.last() else {
            continue;
        };
        let mut out = BytesMut::with_capacity(zxids.len() * ACK_BYTES);
        for zxid in &zxids {
            encode_message(&Message::Ack { zxid: *zxid }, Side::Learner, &mut out)
                .expect("an ACK always encodes");
        }
        link.send(out.freeze(), zxids.len() as u64, last as i64);
    }
}

/// An ACK on the wire: type, zxid, data length (-1), authinfo count.
const ACK_BYTES: usize = 20;

/// Writes `batch` with one sync, sends its ACKs and publishes the durable zxid.
fn group_commit(
    store: &mut ZabStore,
    batch: &mut Batch,
    durable: &watch::Sender<Zxid>,
    stats: &StorageStats,
) {
    if batch.txns.is_empty() {
        return;
    }
    or_exit(store.try_append(&batch.txns));
    batch.txns.clear();
    let t0 = Instant::now();
    let zxid = or_exit(store.try_sync());
    stats.record_fsync(t0.elapsed().as_millis() as u64);
    // Before the core hears it: the ACKs are what the leader waits for.
    send_acks(&mut batch.acks);
    durable.send_if_modified(|d| {
        let up = zxid > *d;
        if up {
            *d = zxid;
        }
        up
    });
}

/// The storage thread's bookkeeping of the periodic snapshots.
struct Snapshots {
    /// The snapshot being written and when its first chunk came.
    started: Option<(i64, Instant)>,
    purge: Purge,
    /// When autopurge last ran in this run.
    last_purge: Option<Instant>,
}

fn execute(
    store: &mut ZabStore,
    op: ZabOp,
    events: &mpsc::Sender<Input>,
    stats: &StorageStats,
    chunk_slots: &Semaphore,
    snapshots: &mut Snapshots,
) {
    match op {
        ZabOp::Append { .. } => unreachable!("appends are batched by the caller"),
        ZabOp::AcceptedEpoch { epoch, done } => {
            or_exit(store.try_set_accepted_epoch(epoch));
            let _ = done.send(());
        }
        ZabOp::CurrentEpoch { epoch, done } => {
            or_exit(store.try_set_current_epoch(epoch));
            let _ = done.send(());
        }
        ZabOp::Truncate { after, done } => {
            or_exit(store.try_truncate_after(after));
            let _ = done.send(());
        }
        ZabOp::Install {
            zxid,
            snapshot,
            done,
        } => {
            let t0 = Instant::now();
            or_exit(store.try_install_snapshot(zxid, &snapshot));
            tracing::info!(
                zxid = format!("0x{zxid:x}"),
                elapsed_ms = t0.elapsed().as_millis() as u64,
                "snapshot installed"
            );
            let _ = done.send(());
        }
        ZabOp::Stage { zxid, snapshot } => {
            let t0 = Instant::now();
            match store.try_stage_snapshot(zxid, snapshot) {
                Ok(()) => tracing::info!(
                    zxid = format!("0x{zxid:x}"),
                    elapsed_ms = t0.elapsed().as_millis() as u64,
                    "the leader's SNAP staged for its install"
                ),
                Err(e) => tracing::warn!(
                    zxid = format!("0x{zxid:x}"),
                    error = %e,
                    "staging the leader's SNAP failed; its install will write it whole"
                ),
            }
        }
        ZabOp::ReadLog {
            peer,
            after,
            upto,
            snapshot_size_factor,
        } => {
            let txns = read_for_diff(&*store, after, upto, snapshot_size_factor);
            // The core gone means the process is stopping.
            let _ = events.blocking_send(Input::LogRead { peer, after, txns });
        }
        ZabOp::Server(StorageOp::SnapshotChunk { zxid, index, data }) => {
            if index == 0 {
                snapshots.started = Some((zxid, Instant::now()));
            }
            or_exit(store.store_mut().put_snapshot_chunk(zxid, index, &data));
            if index > 0 {
                chunk_slots.add_permits(1);
            }
        }
        ZabOp::Server(StorageOp::SnapshotDone { zxid, chunks }) => {
            or_exit(store.store_mut().finish_snapshot(zxid, chunks));
            let elapsed_ms = match snapshots.started.take() {
                Some((z, t0)) if z == zxid => t0.elapsed().as_millis() as u64,
                _ => 0,
            };
            stats.record_snapshot(zxid, elapsed_ms, unix_seconds());
            let purge = snapshots.purge;
            if purge.due(&mut snapshots.last_purge) {
                tracing::info!(retain = purge.retain, "purging old snapshots and txns");
                or_exit(store.store_mut().purge(purge.retain));
            }
        }
        ZabOp::Server(StorageOp::Append(txn)) => {
            // In an ensemble every txn is logged by Zab (as its ZooKeeper bytes); the
            // replica turns the state machine's appends into proposals.
            tracing::error!(
                zxid = txn.zxid,
                "a state-machine append reached the ensemble storage thread; dropped"
            );
        }
    }
}

/// Seconds since the Unix epoch (0 if the clock is before it).
fn unix_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn or_exit<T>(r: Result<T, StorageError>) -> T {
    r.unwrap_or_else(|e| {
        tracing::error!(error = %e, "storage failed; stopping so no unacknowledged write is guessed at");
        std::process::exit(3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zab::zxid;

    fn txn(counter: u32) -> Txn {
        Txn {
            zxid: zxid(1, counter),
            data: Bytes::from(vec![counter as u8; 8]),
        }
    }

    fn open(dir: &std::path::Path) -> ZabStore {
        ZabStore::open(dir, &dir.join("log"), true).unwrap()
    }

    const NO_PURGE: Purge = Purge {
        retain: 3,
        interval_hours: 0,
    };

    /// Snapshot `n` of a store whose log holds txns 1..=10: at txn n, one chunk.
    fn snapshot_ops(n: u32) -> [ZabOp; 2] {
        let zxid = zxid(1, n) as i64;
        [
            ZabOp::Server(StorageOp::SnapshotChunk {
                zxid,
                index: 0,
                data: vec![n as u8; 16],
            }),
            ZabOp::Server(StorageOp::SnapshotDone { zxid, chunks: 1 }),
        ]
    }

    /// Runs the storage thread on the store in `dir` over `ops`, with autopurge set to
    /// `purge`, until they are done.
    fn run_ops(dir: &std::path::Path, ops: Vec<ZabOp>, purge: Purge) {
        let (tx, rx) = mpsc::channel(64);
        for op in ops {
            tx.try_send(op).unwrap();
        }
        drop(tx);
        let (durable_tx, _) = watch::channel(0);
        let (events_tx, _events_rx) = mpsc::channel(4);
        let sem = Semaphore::new(0);
        let stats = StorageStats::default();
        run(open(dir), rx, durable_tx, events_tx, stats, &sem, purge);
    }

    /// Runs a store with txns 1..=10 logged and snapshots at 2, 4, 6 and 8 taken in an
    /// earlier run without autopurge (as before a restart) through one more snapshot at
    /// 9 with autopurge set to `purge`; the snapshots and the first logged txn after.
    fn purged(purge: Purge) -> (Vec<i64>, Zxid) {
        let dir = tempfile::tempdir().unwrap();
        let mut ops = vec![ZabOp::Append {
            txns: (1..=10).map(txn).collect(),
            ack: None,
        }];
        ops.extend([2, 4, 6, 8].into_iter().flat_map(snapshot_ops));
        run_ops(dir.path(), ops, NO_PURGE);
        run_ops(dir.path(), snapshot_ops(9).into(), purge);
        let store = open(dir.path());
        let snapshots = store.store().snapshots().unwrap();
        let first = store.try_read_range(0, zxid(1, 10)).unwrap()[0].zxid;
        (snapshots, first)
    }

    /// An ensemble member purges as ZooKeeper's autopurge does: at the first snapshot
    /// of a run, keeping snapRetainCount snapshots and the log after the oldest kept.
    #[test]
    fn autopurge_keeps_the_newest_snapshots_and_the_log_after_them() {
        let z = |n| zxid(1, n) as i64;
        assert_eq!(
            purged(NO_PURGE),
            (vec![z(2), z(4), z(6), z(8), z(9)], zxid(1, 1)),
            "autopurge off: everything stays"
        );
        let on = Purge {
            retain: 3,
            interval_hours: 1,
        };
        assert_eq!(purged(on), (vec![z(6), z(8), z(9)], zxid(1, 7)));
    }

    /// Appends queued together are made durable; a truncate queued after them waits for
    /// them and cuts exactly after its zxid; epochs are written before `done` answers;
    /// a DIFF read sees the log as it is when it runs.
    #[test]
    fn ops_run_in_queue_order_and_barriers_answer_once_durable() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, rx) = mpsc::channel(64);
        let (durable_tx, durable_rx) = watch::channel(0);
        let (events_tx, mut events_rx) = mpsc::channel(4);
        let (epoch_done, epoch_wait) = oneshot::channel();
        let (trunc_done, trunc_wait) = oneshot::channel();
        tx.try_send(ZabOp::AcceptedEpoch {
            epoch: 1,
            done: epoch_done,
        })
        .unwrap();
        tx.try_send(ZabOp::Append {
            txns: vec![txn(1), txn(2)],
            ack: None,
        })
        .unwrap();
        tx.try_send(ZabOp::Append {
            txns: vec![txn(3)],
            ack: None,
        })
        .unwrap();
        tx.try_send(ZabOp::Truncate {
            after: zxid(1, 2),
            done: trunc_done,
        })
        .unwrap();
        tx.try_send(ZabOp::ReadLog {
            peer: 2,
            after: zxid(1, 1),
            upto: zxid(1, 3),
            snapshot_size_factor: 100.0,
        })
        .unwrap();
        drop(tx);
        let store = open(dir.path());
        run(
            store,
            rx,
            durable_tx,
            events_tx,
            StorageStats::default(),
            &Semaphore::new(0),
            NO_PURGE,
        );
        epoch_wait.blocking_recv().unwrap();
        trunc_wait.blocking_recv().unwrap();
        assert_eq!(
            *durable_rx.borrow(),
            zxid(1, 3),
            "the group commit synced all three"
        );
        match events_rx.try_recv().unwrap() {
            Input::LogRead { peer, after, txns } => {
                assert_eq!((peer, after), (2, zxid(1, 1)));
                let got: Vec<Zxid> = txns.unwrap().iter().map(|t| t.zxid).collect();
                assert_eq!(got, [zxid(1, 2)], "the read ran after the truncate");
            }
            other => panic!("{other:?}"),
        }
        let store = open(dir.path());
        let rec = store.try_recover().unwrap();
        assert_eq!(rec.accepted_epoch, 1);
        let logged: Vec<Zxid> = rec.log.iter().map(|t| t.zxid).collect();
        assert_eq!(logged, [zxid(1, 1), zxid(1, 2)]);
    }
}

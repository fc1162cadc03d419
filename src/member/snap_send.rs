//! A leader's SNAPs to syncing learners, written in steps between its other work.
//!
//! Serializing a whole tree in one step stalls the leader's core for as long as that
//! takes (about 0.3 s per million znodes, seconds when the machine is busy): no
//! proposal, commit or PING goes out meanwhile, and followers past syncLimit go
//! LOOKING. ZooKeeper's LearnerHandler serializes on its own thread while the leader
//! goes on applying txns (a fuzzy snapshot, ZAB-WIRE.md §4.4); keel writes the same
//! fuzzy stream ([`StreamWriter`]) a step of [`SNAP_STEP_BYTES`] at a time,
//! when its core is otherwise idle or between other inputs.
//!
//! Everything the core sends that learner after asking for the SNAP (NEWLEADER, the
//! proposals and commits after the SNAP's zxid, PINGs) is held here, in order, and
//! goes out right after the stream: the learner replays those txns over it. A learner
//! whose connection breaks or is closed meanwhile is forgotten with what was held for
//! it (the core syncs it again when it comes back), as is every SNAP when this member
//! stops leading.

use bytes::BytesMut;

use crate::tree::DataTree;
use crate::zab::message::Message;
use crate::zab::wire::snap::StreamWriter;
use crate::zab::{Sid, Zxid};

/// Stream bytes written per step: about 0.3 ms of one core (0.25 ms per million
/// znodes of 100 bytes, 1.3 GB/s on large data), so the other inputs a step delays
/// wait no longer than a batch of writes takes.
pub const SNAP_STEP_BYTES: usize = 256 << 10;

/// Messages held for one learner before its SNAP is finished at once: about 2 s of
/// writes at 50,000/s (a PROPOSAL and a COMMIT each). Bounds the memory a long SNAP
/// holds; finishing costs one long step, which is what every SNAP cost before steps.
pub const MAX_HELD_MESSAGES: usize = 200_000;

/// Bytes held for one learner (PROPOSAL txns; 32 for any other message) before its SNAP
/// is finished at once: half of the default quorum queue (64 MiB), so that what is
/// released after the stream fits in that queue.
pub const MAX_HELD_BYTES: usize = 32 << 20;

/// One learner's SNAP in progress.
#[derive(Debug)]
struct SnapSend {
    to: Sid,
    zxid: Zxid,
    writer: StreamWriter,
    out: BytesMut,
    /// What the core sent `to` since it asked for the SNAP, in order.
    held: Vec<Message>,
    /// Their size, as [`MAX_HELD_BYTES`] counts it.
    held_bytes: usize,
    steps: u32,
    started_ms: u64,
}

/// A finished SNAP: the SNAP message, then what was held for that learner.
#[derive(Debug)]
pub struct Finished {
    /// The learner.
    pub to: Sid,
    /// `Message::Snap` first, then the held messages in the order the core sent them.
    pub messages: Vec<Message>,
}

/// The SNAPs in progress, at most one per learner.
#[derive(Debug, Default)]
pub struct SnapSends {
    sends: Vec<SnapSend>,
}

impl SnapSends {
    /// Starts the SNAP of `tree` and `sessions` (id, timeout ms), the state at `zxid`,
    /// to `to`, writing its header now; replaces one already in progress to `to` (and
    /// what was held for it: the core started that learner's sync again).
    pub fn start(
        &mut self,
        tree: &DataTree,
        sessions: &[(i64, i32)],
        to: Sid,
        zxid: Zxid,
        now_ms: u64,
    ) {
        self.forget(to);
        // Sized once: the paths and data (approximate_data_size) and, per znode, a path
        // length, a data length, an aclRef and the 60-byte StatPersisted; growing by
        // doubling copied a 200 MB stream about twice over.
        let estimate = usize::try_from(tree.approximate_data_size()).unwrap_or(0)
            + tree.node_count() * (4 + 4 + 8 + 60)
            + sessions.len() * 12
            + 4096;
        let mut out = BytesMut::with_capacity(estimate);
        let writer = StreamWriter::begin(tree, sessions, zxid as i64, &mut out);
        self.sends.push(SnapSend {
            to,
            zxid,
            writer,
            out,
            held: Vec::new(),
            held_bytes: 0,
            steps: 0,
            started_ms: now_ms,
        });
    }

    /// Holds `msg` for `to` if a SNAP to it is in progress; else gives it back. When
    /// that learner's held messages reach [`MAX_HELD_MESSAGES`] or [`MAX_HELD_BYTES`],
    /// its SNAP is finished at once and returned with them.
    /// `applied` is the leader's last applied zxid, for the log.
    pub fn hold(
        &mut self,
        tree: &DataTree,
        applied: Zxid,
        to: Sid,
        msg: Message,
    ) -> Result<Option<Finished>, Message> {
        let Some(i) = self.sends.iter().position(|s| s.to == to) else {
            return Err(msg);
        };
        let s = &mut self.sends[i];
        s.held_bytes += match &msg {
            Message::Proposal { txn, .. } => txn.len(),
            _ => 32,
        };
        s.held.push(msg);
        if s.held.len() < MAX_HELD_MESSAGES && s.held_bytes < MAX_HELD_BYTES {
            return Ok(None);
        }
        tracing::info!(
            sid = to,
            held = s.held.len(),
            held_bytes = s.held_bytes,
            "SNAP to a learner: too much held behind it; finishing it in one step"
        );
        while !s.writer.step(tree, usize::MAX, &mut s.out) {}
        Ok(Some(self.finish(i, applied, None)))
    }

    /// Writes the next step of the oldest SNAP in progress; returns it once finished.
    /// `applied` is the leader's last applied zxid, for the log.
    pub fn step(
        &mut self,
        tree: &DataTree,
        applied: Zxid,
        max_bytes: usize,
        now_ms: u64,
    ) -> Option<Finished> {
        let s = self.sends.first_mut()?;
        s.steps += 1;
        s.writer
            .step(tree, max_bytes, &mut s.out)
            .then(|| self.finish(0, applied, Some(now_ms)))
    }

    /// Takes the SNAP at `i` out, written; `applied` and `now_ms` for the log (`None`
    /// in a step that has no time).
    fn finish(&mut self, i: usize, applied: Zxid, now_ms: Option<u64>) -> Finished {
        let s = self.sends.remove(i);
        let snapshot = s.out.freeze();
        tracing::info!(
            sid = s.to,
            zxid = format!("{:#x}", s.zxid),
            // Past `zxid` when txns applied while it was written (a fuzzy SNAP).
            applied = format!("{applied:#x}"),
            bytes = snapshot.len(),
            steps = s.steps,
            held = s.held.len(),
            elapsed_ms = now_ms.map(|t| t.saturating_sub(s.started_ms)),
            "SNAP to a learner written; sending it and what was held behind it"
        );
        let mut messages = Vec::with_capacity(1 + s.held.len());
        messages.push(Message::Snap {
            zxid: s.zxid,
            snapshot,
        });
        messages.extend(s.held);
        Finished { to: s.to, messages }
    }

    /// Drops the SNAP to `to` and what was held for it (its connection is gone).
    pub fn forget(&mut self, to: Sid) {
        self.sends.retain(|s| s.to != to);
    }

    /// Drops every SNAP in progress (this member no longer leads).
    pub fn clear(&mut self) {
        self.sends.clear();
    }

    /// Whether a SNAP is in progress.
    pub fn is_empty(&self) -> bool {
        self.sends.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn what_is_held_goes_after_the_snap_and_too_much_of_it_finishes_the_snap_at_once() {
        let tree = DataTree::new();
        let mut sends = SnapSends::default();
        sends.start(&tree, &[], 2, 0x1_0000_0001, 0);
        let ping = Message::Ping {
            zxid: 0,
            touched: Vec::new(),
        };
        assert!(
            sends.hold(&tree, 0, 3, ping.clone()).is_err(),
            "no SNAP to 3"
        );
        assert!(
            matches!(sends.hold(&tree, 0, 2, ping.clone()), Ok(None)),
            "held"
        );
        let big = Message::Proposal {
            zxid: 0x1_0000_0002,
            txn: Bytes::from(vec![0u8; MAX_HELD_BYTES]),
        };
        let done = sends
            .hold(&tree, 0x1_0000_0002, 2, big.clone())
            .expect("held")
            .expect("past MAX_HELD_BYTES: finished");
        assert_eq!(done.to, 2);
        assert!(matches!(
            done.messages[0],
            Message::Snap {
                zxid: 0x1_0000_0001,
                ..
            }
        ));
        assert_eq!(done.messages[1..], [ping, big]);
        assert!(sends.is_empty());
        // Forgotten with its connection: nothing is held for it any more.
        sends.start(&tree, &[], 2, 0x1_0000_0002, 0);
        sends.forget(2);
        assert!(sends.is_empty());
    }
}

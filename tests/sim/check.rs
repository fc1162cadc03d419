//! The invariants checked after every step of the simulation.

use std::collections::{BTreeMap, HashMap, VecDeque};

use keel::zab::message::Message;
use keel::zab::quorum::QuorumVerifier;
use keel::zab::reconfig::config_of_txn;
use keel::zab::{Sid, Txn, Zxid};

/// Everything the checker has seen so far.
#[derive(Default)]
pub struct Checker {
    /// The longest committed sequence any member applied: every member's applied
    /// state must be a prefix of it (logs agree on every zxid both hold, no gaps).
    global: Vec<Txn>,
    /// The leader established in each epoch.
    leaders: HashMap<u32, Sid>,
    /// Txns reported committed to the proposing client.
    pub acked: BTreeMap<Zxid, Txn>,
    /// Each config version activated, and the config text it stands for.
    configs: BTreeMap<Zxid, String>,
}

impl Checker {
    /// A member applied `applied[from..]` (its state is `applied`).
    pub fn on_applied(&mut self, sid: Sid, applied: &[Txn], from: usize) -> Result<(), String> {
        for i in from..applied.len() {
            let t = &applied[i];
            if i > 0 && applied[i - 1].zxid >= t.zxid {
                return Err(format!(
                    "member {sid} applied zxid {:#x} after {:#x}: committed zxids must increase",
                    t.zxid,
                    applied[i - 1].zxid
                ));
            }
            match self.global.get(i) {
                Some(g) if g != t => {
                    return Err(format!(
                        "member {sid} committed {:#x} ({:?}) at position {i} where another member committed {:#x} ({:?})",
                        t.zxid, t.data, g.zxid, g.data
                    ))
                }
                Some(_) => {}
                None => self.global.push(t.clone()),
            }
        }
        Ok(())
    }

    /// `sid` activated `config`: one version is one config everywhere, and it is
    /// the config of a reconfig txn committed at that zxid, or the initial config
    /// made versioned by an established leader (ZOOKEEPER-1783: its NEWLEADER zxid).
    pub fn on_config(&mut self, sid: Sid, config: &QuorumVerifier) -> Result<(), String> {
        let v = config.version();
        let text = config.text();
        if let Some(seen) = self.configs.get(&v) {
            if *seen != text {
                return Err(format!(
                    "member {sid} activated config version {v:#x} as {text:?} where another member activated {seen:?}"
                ));
            }
        }
        let committed = self.global.iter().find(|t| t.zxid == v);
        if let Some(t) = committed {
            if let Some(qv) = config_of_txn(&t.data) {
                if qv.text() != text {
                    return Err(format!(
                        "member {sid} activated {text:?} at version {v:#x} where the committed reconfig says {:?}",
                        qv.text()
                    ));
                }
            }
        } else if v & 0xffff_ffff != 0 {
            return Err(format!(
                "member {sid} activated config version {v:#x}, which no committed txn holds (committed up to {:#x})",
                self.global.last().map_or(0, |t| t.zxid)
            ));
        }
        self.configs.insert(v, text);
        Ok(())
    }

    /// How many reconfig txns the committed history holds.
    pub fn reconfigs(&self) -> u64 {
        self.global
            .iter()
            .filter(|t| config_of_txn(&t.data).is_some())
            .count() as u64
    }

    /// The config of the last reconfig committed, if any.
    pub fn last_committed_config(&self) -> Option<QuorumVerifier> {
        self.global
            .iter()
            .rev()
            .find_map(|t| config_of_txn(&t.data))
    }

    /// A leader reported committing `txn` to its client.
    pub fn on_acked(&mut self, txn: Txn) {
        self.acked.insert(txn.zxid, txn);
    }

    /// `sid` established `epoch` holding `held` (its applied state and its log).
    pub fn on_established(
        &mut self,
        epoch: u32,
        sid: Sid,
        held: &BTreeMap<Zxid, Txn>,
    ) -> Result<(), String> {
        if let Some(&other) = self.leaders.get(&epoch) {
            if other != sid {
                return Err(format!(
                    "two established leaders in epoch {epoch}: {other} and {sid}"
                ));
            }
        }
        self.leaders.insert(epoch, sid);
        for (z, t) in &self.acked {
            if held.get(z) != Some(t) {
                return Err(format!(
                    "leader {sid} established epoch {epoch} without acknowledged txn {z:#x} ({:?}); it holds {:?}",
                    t.data,
                    held.get(z).map(|t| &t.data)
                ));
            }
        }
        Ok(())
    }

    /// Every acknowledged txn is in the committed history.
    pub fn acked_committed(&self) -> Result<(), String> {
        for (z, t) in &self.acked {
            if !self.global.iter().any(|g| g == t) {
                return Err(format!(
                    "acknowledged txn {z:#x} is not in the committed history"
                ));
            }
        }
        Ok(())
    }
}

/// What Apache ZooKeeper 3.8's learner does with the stream a leader sends it on one
/// quorum connection (`Learner.syncWithLeader`, `FollowerZooKeeperServer.commit`), as
/// far as the order of PROPOSALs and COMMITs goes: a keel leader must send a stream a
/// ZooKeeper follower takes without failing (a mixed ensemble, issue 17). Found by
/// running ZooKeeper 3.8.0 followers under a keel leader: a COMMIT while no PROPOSAL is
/// pending in the sync throws a NullPointerException in `syncWithLeader` (the follower
/// drops and resyncs, again and again under load); a COMMIT that is not for the oldest
/// pending txn after UPTODATE makes it exit (UNMATCHED_TXN_COMMIT); in a SNAP or TRUNC
/// sync before NEWLEADER a COMMIT not for the oldest pending PROPOSAL is not applied.
#[derive(Default)]
pub struct ZkLearnerStream {
    /// DIFF, SNAP or TRUNC seen.
    syncing: bool,
    /// SNAP or TRUNC: COMMITs before NEWLEADER apply at once (ZooKeeper's
    /// `snapshotNeeded`, `!writeToTxnLog`).
    apply_now: bool,
    newleader: bool,
    uptodate: bool,
    /// `packetsNotCommitted`: PROPOSALs of the sync not yet logged.
    not_committed: VecDeque<Zxid>,
    /// `packetsCommitted`: COMMITs of the sync, committed at UPTODATE.
    committed: Vec<Zxid>,
    /// `pendingTxns`: logged, awaiting their COMMIT.
    pending: VecDeque<Zxid>,
}

impl ZkLearnerStream {
    /// The leader queued `msg` on this connection.
    pub fn on_leader_msg(&mut self, msg: &Message) -> Result<(), String> {
        match *msg {
            Message::Diff { .. } | Message::Snap { .. } | Message::Trunc { .. } => {
                *self = ZkLearnerStream {
                    syncing: true,
                    apply_now: !matches!(msg, Message::Diff { .. }),
                    ..ZkLearnerStream::default()
                };
            }
            _ if !self.syncing => {}
            Message::Proposal { zxid, .. } if self.uptodate => self.pending.push_back(zxid),
            Message::Proposal { zxid, .. } => self.not_committed.push_back(zxid),
            Message::Commit { zxid } | Message::CommitAndActivate { zxid, .. }
                if self.uptodate =>
            {
                self.commit_pending(zxid)?
            }
            Message::CommitAndActivate { zxid, .. } => {
                return Err(format!(
                    "COMMITANDACTIVATE {zxid:#x} before UPTODATE: a keel leader holds COMMITs until then"
                ))
            }
            Message::Commit { zxid } => match self.not_committed.front() {
                None => {
                    return Err(format!(
                        "COMMIT {zxid:#x} during sync with no PROPOSAL pending{}: ZooKeeper's syncWithLeader throws a NullPointerException",
                        if self.newleader { " since NEWLEADER" } else { "" }
                    ))
                }
                Some(&z) if self.apply_now && !self.newleader => {
                    if z != zxid {
                        return Err(format!(
                            "COMMIT {zxid:#x} in a SNAP/TRUNC sync while PROPOSAL {z:#x} is the oldest pending: ZooKeeper does not apply it"
                        ));
                    }
                    self.not_committed.pop_front();
                }
                Some(_) => self.committed.push(zxid),
            },
            Message::NewLeader { .. } => {
                self.newleader = true;
                self.pending.extend(self.not_committed.drain(..));
            }
            Message::UpToDate { .. } => {
                self.uptodate = true;
                self.pending.extend(self.not_committed.drain(..));
                for zxid in std::mem::take(&mut self.committed) {
                    match self.pending.pop_front() {
                        Some(z) if z == zxid => {}
                        other => {
                            return Err(format!(
                                "COMMIT {zxid:#x} of the sync is applied at UPTODATE while the next pending txn is {other:x?}: a ZooKeeper follower exits"
                            ))
                        }
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
    /// A COMMIT after UPTODATE: it must be for the oldest pending txn.
    fn commit_pending(&mut self, zxid: Zxid) -> Result<(), String> {
        match self.pending.front() {
            // A warning only, but one a ZooKeeper leader does not cause here.
            None => Err(format!(
                "COMMIT {zxid:#x} after UPTODATE with no PROPOSAL pending: a ZooKeeper follower logs \"Committing {zxid:x} without seeing txn\""
            )),
            Some(&z) if z == zxid => {
                self.pending.pop_front();
                Ok(())
            }
            Some(&z) => Err(format!(
                "COMMIT {zxid:#x} after UPTODATE while txn {z:#x} is the next pending: a ZooKeeper follower exits"
            )),
        }
    }
}

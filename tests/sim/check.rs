//! The invariants checked after every step of the simulation.

use std::collections::{BTreeMap, HashMap};

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

//! The checks on a finished world's client history: writes and sync'd reads
//! linearizable per znode, every op (plain reads too) sequentially consistent per
//! znode (ZooKeeper's FIFO client order over linearizable writes), and no acknowledged
//! write lost. (Per-session zxid monotonicity and equal trees at equal zxids are
//! checked while the world runs: see world.rs.)

use std::collections::HashMap;

use stateright::semantics::{
    ConsistencyTester, LinearizabilityTester, SequentialConsistencyTester,
};

use crate::model::{Znode, ZnodeOp, ZnodeRet};
use crate::world::{Hist, World, PATHS};

/// The thread of the final read appended to each linearizable history.
const FINAL_READER: u64 = u64::MAX;

/// The events of `history` on `path` (a return belongs to its thread's open op).
fn on_path(history: &[Hist], path: usize) -> Vec<&Hist> {
    let mut open: HashMap<u64, usize> = HashMap::new();
    let mut events = Vec::new();
    for h in history {
        let here = match h {
            Hist::Invoke {
                thread, path: p, ..
            } => {
                open.insert(*thread, *p);
                *p == path
            }
            Hist::Return { thread, .. } => open.remove(thread) == Some(path),
        };
        if here {
            events.push(h);
        }
    }
    events
}

/// The history of `path`, a line an event, for a failure report.
fn render(history: &[Hist], path: usize) -> String {
    let lines: Vec<String> = on_path(history, path)
        .into_iter()
        .map(|h| match h {
            Hist::Invoke {
                thread,
                op,
                linearizable,
                ..
            } => {
                let kind = if *linearizable { "" } else { " (plain)" };
                format!("  t{thread} invoke {op:?}{kind}")
            }
            Hist::Return { thread, ret } => format!("  t{thread} return {ret:?}"),
        })
        .collect();
    lines.join("\n")
}

/// Feeds `path`'s ops (only the linearizable ones if `linearizable_only`) to `tester`.
fn feed<T: ConsistencyTester<u64, Znode>>(
    tester: &mut T,
    history: &[Hist],
    path: usize,
    linearizable_only: bool,
) -> Result<(), String> {
    let mut taken: HashMap<u64, bool> = HashMap::new();
    for h in on_path(history, path) {
        match h {
            Hist::Invoke {
                thread,
                op,
                linearizable,
                ..
            } => {
                let take = *linearizable || !linearizable_only;
                if take {
                    tester.on_invoke(*thread, op.clone())?;
                }
                taken.insert(*thread, take);
            }
            Hist::Return { thread, ret } => {
                if taken.remove(thread) == Some(true) {
                    tester.on_return(*thread, ret.clone())?;
                }
            }
        }
    }
    Ok(())
}

/// Every check on the finished `w`; the first failure, described.
pub fn check(w: &World, paths: usize) -> Result<(), String> {
    for path in 0..paths {
        let name = PATHS[path];
        let fin = w.final_state(path);
        for &(p, version, mzxid) in &w.acked {
            if p != path {
                continue;
            }
            match fin {
                Some((_, v, m)) if v >= version && m >= mzxid => {}
                _ => {
                    return Err(format!(
                        "{name}: a write acknowledged at version {version} (mzxid {mzxid:#x}) is lost: the converged znode is {fin:?}"
                    ))
                }
            }
        }
        let mut lin = LinearizabilityTester::new(Znode::default());
        feed(&mut lin, &w.history, path, true)?;
        let final_ret = match fin {
            Some((v, version, _)) => ZnodeRet::Data(v, version),
            None => ZnodeRet::NoNode,
        };
        lin.on_invoke(FINAL_READER, ZnodeOp::Get)?;
        lin.on_return(FINAL_READER, final_ret.clone())?;
        if !lin.is_consistent() {
            return Err(format!(
                "{name}: writes and sync'd reads are not linearizable (the converged state is {final_ret:?}); history:\n{}",
                render(&w.history, path)
            ));
        }
        let mut sc = SequentialConsistencyTester::new(Znode::default());
        feed(&mut sc, &w.history, path, false)?;
        if !sc.is_consistent() {
            return Err(format!(
                "{name}: the clients' ops are not sequentially consistent; history:\n{}",
                render(&w.history, path)
            ));
        }
    }
    Ok(())
}

//! The checks on a finished world's client history: writes and sync'd reads
//! linearizable per znode, every op (plain reads too) sequentially consistent per
//! znode (ZooKeeper's FIFO client order over linearizable writes), and no acknowledged
//! write lost, and sessions and their ephemerals consistent on every member at the
//! end. (Per-session zxid monotonicity and equal trees at equal zxids are
//! checked while the world runs: see world.rs.)

use std::collections::{HashMap, HashSet};

use stateright::semantics::{ConsistencyTester, LinearizabilityTester};

use crate::model::{Znode, ZnodeOp, ZnodeRet};
use crate::world::{Hist, World, PATHS};

/// The thread of the final read appended to each linearizable history.
const FINAL_READER: u64 = u64::MAX;

/// The events of `history` on `path` (a return belongs to its thread's open op), with
/// the writes whose outcome the client never learned resolved where the history shows
/// them: values are unique, so a read of a lost write's value (at the version it
/// made) proves the write took effect before that read returned, and the write is
/// given that return there. Unresolved ones stay in flight for good (the testers
/// may place them anywhere after their invocation, or nowhere).
fn on_path(history: &[Hist], path: usize) -> Vec<Hist> {
    let mut open: HashMap<u64, (usize, ZnodeOp)> = HashMap::new();
    let mut events = Vec::new();
    for h in history {
        let here = match h {
            Hist::Invoke {
                thread,
                path: p,
                op,
                ..
            } => {
                open.insert(*thread, (*p, op.clone()));
                *p == path
            }
            Hist::Return { thread, .. } => open.remove(thread).is_some_and(|(p, _)| p == path),
        };
        if here {
            events.push(h.clone());
        }
    }
    // What is still open at the end never returned.
    let lost: HashMap<u32, u64> = open
        .into_iter()
        .filter_map(|(thread, (p, op))| match op {
            ZnodeOp::Create(v) | ZnodeOp::Set(v) if p == path => Some((v, thread)),
            _ => None,
        })
        .collect();
    let mut resolved = Vec::with_capacity(events.len());
    let mut done: HashSet<u64> = HashSet::new();
    for h in events {
        if let Hist::Return {
            ret: ZnodeRet::Data(v, version),
            ..
        } = &h
        {
            if let Some(&thread) = lost.get(v) {
                if done.insert(thread) {
                    let ret = if *version == 0 {
                        ZnodeRet::Created
                    } else {
                        ZnodeRet::SetOk(*version)
                    };
                    resolved.push(Hist::Return { thread, ret });
                }
            }
        }
        resolved.push(h);
    }
    resolved
}

/// A path's history, a line an event, for a failure report.
fn render(events: &[Hist]) -> String {
    let lines: Vec<String> = events
        .iter()
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

/// Feeds a path's writes and sync'd reads to `tester`.
fn feed(tester: &mut LinearizabilityTester<u64, Znode>, events: &[Hist]) -> Result<(), String> {
    let mut taken: HashMap<u64, bool> = HashMap::new();
    for h in events {
        match h {
            Hist::Invoke {
                thread,
                op,
                linearizable,
                ..
            } => {
                if *linearizable {
                    tester.on_invoke(*thread, op.clone())?;
                }
                taken.insert(*thread, *linearizable);
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

/// Sessions and ephemerals on the converged ensemble: every member's ephemerals
/// belong to sessions it holds live; every session that expired or was given up is
/// gone on every member, its ephemerals with it; an acknowledged ephemeral of a
/// session still live is there.
fn sessions(w: &World) -> Result<(), String> {
    for (sid, r) in w.replicas() {
        let s = r.server();
        for (owner, paths) in s.tree.all_ephemerals() {
            if !paths.is_empty() && s.sessions.get(*owner).is_none() {
                return Err(format!(
                    "member {sid} holds ephemerals {paths:?} of session {owner:#x}, which it does not hold live"
                ));
            }
        }
        for &gone in &w.gone_sessions {
            if s.sessions.get(gone).is_some() {
                return Err(format!(
                    "member {sid} still holds session {gone:#x}, expired or given up by its client long ago"
                ));
            }
        }
        for (path, owner) in &w.ephemerals {
            let live = s.sessions.get(*owner).is_some();
            let held = s.tree.get(path).map(|n| n.ephemeral_owner() == *owner);
            if live && held != Some(true) {
                return Err(format!(
                    "member {sid}: the acknowledged ephemeral {path} of live session {owner:#x} is {}",
                    if held.is_some() { "someone else's" } else { "gone" }
                ));
            }
        }
    }
    Ok(())
}

/// Every check on the finished `w`; the first failure, described.
pub fn check(w: &World, paths: usize) -> Result<(), String> {
    sessions(w)?;
    for (path, name) in PATHS.iter().enumerate().take(paths) {
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
        let events = on_path(&w.history, path);
        let mut lin = LinearizabilityTester::new(Znode::default());
        feed(&mut lin, &events)?;
        let final_ret = match fin {
            Some((v, version, _)) => ZnodeRet::Data(v, version),
            None => ZnodeRet::NoNode,
        };
        lin.on_invoke(FINAL_READER, ZnodeOp::Get)?;
        lin.on_return(FINAL_READER, final_ret.clone())?;
        let Some(order) = lin.serialized_history() else {
            return Err(format!(
                "{name}: writes and sync'd reads are not linearizable (the converged state is {final_ret:?}); history:\n{}",
                render(&events)
            ));
        };
        sequentially_consistent(&Witness::new(&order), &events).map_err(|e| {
            format!(
                "{name}: the clients' ops are not sequentially consistent: {e}; history:\n{}",
                render(&events)
            )
        })?;
    }
    Ok(())
}

/// The znode's states along one linearization of the writes and sync'd reads
/// (stateright's [`LinearizabilityTester::serialized_history`]): state 0 is the
/// initial one (absent), state i + 1 the one after the i-th op. Values are unique per
/// write, so a successful write, or a read of its value, names its state.
struct Witness {
    /// The first state in which the znode exists (there are no deletes).
    created_at: Option<usize>,
    /// The state each written value made, with its data version.
    value_at: HashMap<u32, (usize, i32)>,
}

impl Witness {
    fn new(order: &[(ZnodeOp, ZnodeRet)]) -> Witness {
        let mut created_at = None;
        let mut value_at = HashMap::new();
        for (i, (op, ret)) in order.iter().enumerate() {
            let made = match (op, ret) {
                (ZnodeOp::Create(v), ZnodeRet::Created) => Some((*v, 0)),
                (ZnodeOp::Set(v), ZnodeRet::SetOk(version)) => Some((*v, *version)),
                _ => None,
            };
            if let Some((v, version)) = made {
                created_at.get_or_insert(i + 1);
                value_at.insert(v, (i + 1, version));
            }
        }
        Witness {
            created_at,
            value_at,
        }
    }
}

/// Sequential consistency of every op on `path`, plain reads too, over the witness's
/// order of the writes: each thread's ops observe states of that order, never an
/// earlier one than the thread observed or made before (ZooKeeper's guarantee: FIFO
/// client order, and a client's view never goes back, even across reconnects). Ops
/// then merge into one total order that every thread's program order respects.
/// (stateright's SequentialConsistencyTester searches all interleavings without
/// memoization: minutes on a few hundred ops. This check is linear and, with the
/// writes' order fixed by their versions and unique values, as strict.)
fn sequentially_consistent(wit: &Witness, events: &[Hist]) -> Result<(), String> {
    // Per thread: its open op, and the earliest state its view may be at.
    let mut open: HashMap<u64, ZnodeOp> = HashMap::new();
    let mut low: HashMap<u64, usize> = HashMap::new();
    for h in events {
        let (thread, ret) = match h {
            Hist::Invoke { thread, op, .. } => {
                open.insert(*thread, op.clone());
                continue;
            }
            Hist::Return { thread, ret } => (*thread, ret),
        };
        let op = open.remove(&thread).expect("a return follows its invoke");
        let at = low.entry(thread).or_insert(0);
        let observed = match (&op, ret) {
            (ZnodeOp::Create(v), ZnodeRet::Created)
            | (ZnodeOp::Set(v), ZnodeRet::SetOk(_))
            | (ZnodeOp::Get, ZnodeRet::Data(v, _)) => {
                let Some(&(state, version)) = wit.value_at.get(v) else {
                    return Err(format!(
                        "t{thread} {op:?} returned {ret:?}: no write made it"
                    ));
                };
                if matches!(ret, ZnodeRet::Data(_, read) if *read != version) {
                    return Err(format!(
                        "t{thread} {op:?} returned {ret:?}: that value's version is {version}"
                    ));
                }
                state
            }
            (ZnodeOp::Create(_), ZnodeRet::NodeExists) => match wit.created_at {
                Some(created) => created.max(*at),
                None => return Err(format!("t{thread} {op:?}: NODEEXISTS, never created")),
            },
            (_, ZnodeRet::NoNode) => {
                if wit.created_at.is_some_and(|created| *at >= created) {
                    return Err(format!(
                        "t{thread} {op:?} returned {ret:?} after its view held the znode"
                    ));
                }
                *at
            }
            _ => return Err(format!("t{thread} {op:?} cannot return {ret:?}")),
        };
        if observed < *at {
            return Err(format!(
                "t{thread} {op:?} returned {ret:?}, state {observed} of the writes' order, after it had seen state {at}"
            ));
        }
        *at = observed;
    }
    Ok(())
}

//! The crash test: keel is killed with SIGKILL in the middle of client traffic, again and
//! again on one dataDir, and after every restart each acknowledged write must be there.
//!
//! Each cycle: four client threads (one session each) write concurrently: creates (null,
//! empty, small and multi-KB data), conditional setData, deletes, sequential creates
//! under a shared parent, multis (check + three creates + setData) and multis that must
//! fail as a whole. Every path has exactly one writing thread, and a thread has at most
//! one write in flight, so the model of what is on disk is exact except for the one
//! write per thread that was in flight at the kill ("in doubt"): after the restart it
//! must have landed completely or not at all, and the model takes whichever it was.
//! Then the restarted server is checked against the model:
//! - every acknowledged write: data, version, czxid and mzxid exactly as acknowledged
//!   (the paths written in the cycle every time; every path every [`FULL_CHECK_EVERY`]
//!   cycles and at the end, with each parent's children compared to the model);
//! - no multi half-applied, and nothing of a failed multi ever applied;
//! - sequential suffixes never reused: a sequential create after the restart gets a
//!   suffix above every suffix that exists or was acknowledged;
//! - zxids never go backwards: the first reply after a restart carries a zxid above
//!   every acknowledged one (the reader's createSession is a txn of the new run), and
//!   the first write gets one above every zxid any reply carried before the kill.
//!
//! The kill comes after a random delay (seeded; the seed is printed, `KEEL_CRASH_SEED`
//! replays it). Most restarts use `snapCount=200` (a snapshot every 101-200 txns), so snapshots are written during the
//! traffic (and some are cut off by the kill) and recovery starts from one; every third
//! uses keel's default, replaying a long log. Autopurge is on (3 snapshots kept), so
//! purges run under traffic too. `crash_50_cycles` keeps `dataLogDir`
//! apart from `dataDir`; `crash_1000_cycles` (ignored by default) shares them.

mod common;

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// Client threads, each with its own session and its own subtree `/crash/w<i>`.
const WORKERS: usize = 4;
/// Cycles that share one group parent (`/crash/w<i>/g<n>`, `/crash/seq/g<n>`), so no
/// parent grows without bound.
const CYCLES_PER_GROUP: u32 = 10;
/// Every this many cycles every znode is checked, not only those written in the cycle.
const FULL_CHECK_EVERY: u32 = 10;
/// The workers' session timeout; their sessions outlive the kill and expire after the
/// restart, which adds closeSession txns to the traffic.
const WORKER_SESSION_TIMEOUT_MS: i32 = 6000;
const VERIFIER_SESSION_TIMEOUT_MS: i32 = 30000;
/// Bounds on one worker's cycle; the kill normally ends it within 400 ms.
const WORKER_OPS_MAX: u32 = 200_000;
const WORKER_TIME_MAX: Duration = Duration::from_secs(30);
/// Above this many znodes a worker deletes more than it creates.
const WORKER_NODES_SOFT_MAX: usize = 1500;
/// The delay before the kill, ms.
const KILL_DELAY_MS_MIN: u64 = 50;
const KILL_DELAY_MS_MAX: u64 = 400;
/// Violations printed when a cycle fails.
const VIOLATIONS_SHOWN_MAX: usize = 30;

#[test]
fn crash_50_cycles() {
    let s = run_crash_test("crash50", 50, true);
    assert!(s.cycles >= 50);
}

#[test]
#[ignore = "long: about 1000 kill/restart cycles"]
fn crash_1000_cycles() {
    let s = run_crash_test("crash1000", 1000, false);
    assert!(s.cycles >= 1000);
}

/// A znode as the model expects it.
#[derive(Clone, PartialEq, Eq)]
struct Node {
    data: Option<Vec<u8>>,
    version: i32,
    czxid: i64,
    mzxid: i64,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "version {} czxid 0x{:x} mzxid 0x{:x} data {:?}",
            self.version,
            self.czxid,
            self.mzxid,
            self.data.as_deref().map(short)
        )
    }
}

/// The write a worker had in flight when its connection died.
#[derive(Debug, Clone)]
enum InDoubt {
    Create {
        path: String,
        data: Option<Vec<u8>>,
    },
    Set {
        path: String,
        data: Option<Vec<u8>>,
    },
    Delete {
        path: String,
    },
    Seq {
        parent: String,
        data: Vec<u8>,
    },
    /// check + three creates + setData of `set_path`.
    Multi {
        creates: Vec<(String, Option<Vec<u8>>)>,
        set_path: String,
        set_data: Option<Vec<u8>>,
    },
}

/// An acknowledged sequential create.
#[derive(Debug, Clone)]
struct SeqNode {
    data: Vec<u8>,
    czxid: i64,
}

/// One client thread's state, moved into its thread for a cycle and back.
struct Worker {
    id: usize,
    rng: StdRng,
    /// Every znode this worker owns (under `/crash/w<id>`), as acknowledged.
    nodes: HashMap<String, Node>,
    /// The keys of `nodes`, for a random pick.
    live: Vec<String>,
    /// Makes every name and data value unique.
    next: u64,
    in_doubt: Option<InDoubt>,
    /// Paths written (or attempted) since the last check; absent from `nodes` means
    /// they must not exist.
    dirty: BTreeSet<String>,
    /// Acknowledged writes since the last check.
    acked: u64,
    /// Sequential creates acknowledged this cycle: (parent, name, node).
    seq_acked: Vec<(String, String, SeqNode)>,
    /// The newest suffix this worker got per sequential parent; its own creates must
    /// get increasing suffixes.
    last_suffix: HashMap<String, i64>,
    /// The highest zxid in any reply this cycle, and in any acknowledged write.
    max_zxid_seen: i64,
    max_acked_zxid: i64,
    violations: Vec<String>,
}

/// How one worker op ended.
enum Step {
    Done,
    /// The connection is gone (the kill): the worker stops for this cycle.
    Lost,
}

impl Worker {
    fn new(id: usize, seed: u64) -> Worker {
        Worker {
            id,
            rng: StdRng::seed_from_u64(
                seed ^ (0x9e37_79b9_7f4a_7c15u64.wrapping_mul(id as u64 + 1)),
            ),
            nodes: HashMap::new(),
            live: Vec::new(),
            next: 0,
            in_doubt: None,
            dirty: BTreeSet::new(),
            acked: 0,
            seq_acked: Vec::new(),
            last_suffix: HashMap::new(),
            max_zxid_seen: 0,
            max_acked_zxid: 0,
            violations: Vec::new(),
        }
    }

    fn group_path(&self, group: u32) -> String {
        format!("/crash/w{}/g{group}", self.id)
    }

    fn insert(&mut self, path: String, node: Node) {
        if self.nodes.insert(path.clone(), node).is_none() {
            self.live.push(path);
        }
    }

    fn remove(&mut self, path: &str) {
        if self.nodes.remove(path).is_some() {
            let i = self.live.iter().position(|p| p == path).expect("live path");
            self.live.swap_remove(i);
        }
    }

    /// Data for a write: null, empty, a few KB, or a short unique string.
    fn make_data(&mut self, tag: &str) -> Option<Vec<u8>> {
        match self.rng.gen_range(0..100) {
            0..=7 => None,
            8..=12 => Some(Vec::new()),
            13..=17 => {
                let len = self.rng.gen_range(1000..6000);
                let mut d = tag.as_bytes().to_vec();
                d.resize(len, b'#');
                Some(d)
            }
            _ => Some(tag.as_bytes().to_vec()),
        }
    }

    fn ack(&mut self, zxid: i64) {
        self.acked += 1;
        self.max_acked_zxid = self.max_acked_zxid.max(zxid);
    }

    fn violation(&mut self, what: String) {
        self.violations.push(format!("worker {}: {what}", self.id));
    }

    /// Handles an error reply: connection loss ends the cycle, any other error is a
    /// violation (the model is exact, so no write of this test should fail).
    fn failed(&mut self, what: &str, err: i32) -> Step {
        if err == CONNECTIONLOSS {
            return Step::Lost;
        }
        self.in_doubt = None;
        self.violation(format!("{what}: unexpected error {err}"));
        Step::Done
    }

    /// Runs traffic until the connection dies (or a bound is hit).
    fn run(mut self, port: u16, cycle: u32) -> Worker {
        let group = cycle / CYCLES_PER_GROUP;
        let Ok(mut c) = Client::connect(port, WORKER_SESSION_TIMEOUT_MS) else {
            return self;
        };
        let t0 = Instant::now();
        for _ in 0..WORKER_OPS_MAX {
            if t0.elapsed() > WORKER_TIME_MAX {
                self.violation(format!("still connected after {WORKER_TIME_MAX:?}"));
                break;
            }
            let crowded = self.nodes.len() > WORKER_NODES_SOFT_MAX;
            let roll = self.rng.gen_range(0..100);
            let step = match roll {
                _ if self.live.is_empty() => self.create(&mut c, cycle, group),
                0..=29 if !crowded => self.create(&mut c, cycle, group),
                0..=29 => self.delete(&mut c),
                30..=57 => self.set(&mut c, cycle),
                58..=69 => self.seq(&mut c, cycle, group),
                70..=81 => self.multi(&mut c, cycle, group),
                82..=84 => self.failing_multi(&mut c, group),
                _ => self.delete(&mut c),
            };
            self.max_zxid_seen = self.max_zxid_seen.max(c.last_zxid());
            if let Step::Lost = step {
                break;
            }
        }
        self
    }

    fn create(&mut self, c: &mut Client, cycle: u32, group: u32) -> Step {
        let k = self.next;
        self.next += 1;
        let path = format!("{}/n{k}", self.group_path(group));
        let data = self.make_data(&format!("{path}@v0c{cycle}"));
        self.dirty.insert(path.clone());
        self.in_doubt = Some(InDoubt::Create {
            path: path.clone(),
            data: data.clone(),
        });
        match c.create(&path, data.as_deref(), CreateMode::Persistent) {
            Ok((created, stat)) => {
                self.in_doubt = None;
                let zxid = c.last_zxid();
                if created != path || stat.version != 0 || stat.czxid != zxid || stat.mzxid != zxid
                {
                    self.violation(format!(
                        "create {path} answered {created} {stat:?} with reply zxid 0x{zxid:x}"
                    ));
                }
                self.insert(
                    path,
                    Node {
                        data,
                        version: 0,
                        czxid: stat.czxid,
                        mzxid: stat.mzxid,
                    },
                );
                self.ack(zxid);
                Step::Done
            }
            Err(e) => self.failed(&format!("create {path}"), e),
        }
    }

    fn pick(&mut self) -> String {
        let i = self.rng.gen_range(0..self.live.len());
        self.live[i].clone()
    }

    fn set(&mut self, c: &mut Client, cycle: u32) -> Step {
        let path = self.pick();
        let old = self.nodes[&path].clone();
        let data = self.make_data(&format!("{path}@v{}c{cycle}", old.version + 1));
        self.dirty.insert(path.clone());
        self.in_doubt = Some(InDoubt::Set {
            path: path.clone(),
            data: data.clone(),
        });
        match c.set_data(&path, data.as_deref(), old.version) {
            Ok(stat) => {
                self.in_doubt = None;
                let zxid = c.last_zxid();
                if stat.version != old.version + 1 || stat.czxid != old.czxid || stat.mzxid != zxid
                {
                    self.violation(format!(
                        "setData {path} (was {old:?}) answered {stat:?} with reply zxid 0x{zxid:x}"
                    ));
                }
                self.insert(
                    path,
                    Node {
                        data,
                        version: stat.version,
                        czxid: stat.czxid,
                        mzxid: stat.mzxid,
                    },
                );
                self.ack(zxid);
                Step::Done
            }
            Err(e) => self.failed(&format!("setData {path} version {}", old.version), e),
        }
    }

    fn delete(&mut self, c: &mut Client) -> Step {
        let path = self.pick();
        let version = self.nodes[&path].version;
        self.dirty.insert(path.clone());
        self.in_doubt = Some(InDoubt::Delete { path: path.clone() });
        match c.delete(&path, version) {
            Ok(()) => {
                self.in_doubt = None;
                self.remove(&path);
                self.ack(c.last_zxid());
                Step::Done
            }
            Err(e) => self.failed(&format!("delete {path} version {version}"), e),
        }
    }

    fn seq(&mut self, c: &mut Client, cycle: u32, group: u32) -> Step {
        let k = self.next;
        self.next += 1;
        let parent = format!("/crash/seq/g{group}");
        let data = format!("w{}-q{k}-c{cycle}", self.id).into_bytes();
        self.in_doubt = Some(InDoubt::Seq {
            parent: parent.clone(),
            data: data.clone(),
        });
        match c.create(
            &format!("{parent}/s-"),
            Some(&data),
            CreateMode::PersistentSequential,
        ) {
            Ok((created, stat)) => {
                self.in_doubt = None;
                let zxid = c.last_zxid();
                let name = created.rsplit('/').next().unwrap_or_default().to_owned();
                match seq_suffix(&name) {
                    Some(suffix) if created.starts_with(&format!("{parent}/s-")) => {
                        let last = self.last_suffix.entry(parent.clone()).or_insert(-1);
                        if suffix <= *last {
                            let last = *last;
                            self.violation(format!(
                                "sequential create got {created} after suffix {last}"
                            ));
                        } else {
                            *last = suffix;
                        }
                    }
                    _ => self.violation(format!("sequential create answered {created}")),
                }
                if stat.czxid != zxid || stat.version != 0 {
                    self.violation(format!(
                        "sequential create {created}: {stat:?}, reply zxid 0x{zxid:x}"
                    ));
                }
                self.seq_acked.push((
                    parent,
                    name,
                    SeqNode {
                        data,
                        czxid: stat.czxid,
                    },
                ));
                self.ack(zxid);
                Step::Done
            }
            Err(e) => self.failed(&format!("sequential create under {parent}"), e),
        }
    }

    /// check + three creates + setData, atomically.
    fn multi(&mut self, c: &mut Client, cycle: u32, group: u32) -> Step {
        let k = self.next;
        self.next += 1;
        let checked = self.pick();
        let check_version = self.nodes[&checked].version;
        let target = self.pick();
        let old = self.nodes[&target].clone();
        let base = format!("{}/m{k}", self.group_path(group));
        let creates: Vec<(String, Option<Vec<u8>>)> = ["a", "b", "c"]
            .iter()
            .map(|s| {
                let path = format!("{base}-{s}");
                let data = self.make_data(&format!("{path}@v0c{cycle}"));
                (path, data)
            })
            .collect();
        let set_data = self.make_data(&format!("{target}@v{}c{cycle}m", old.version + 1));
        let mut ops = vec![Op::Check {
            path: checked.clone(),
            version: check_version,
        }];
        for (path, data) in &creates {
            self.dirty.insert(path.clone());
            ops.push(Op::Create {
                path: path.clone(),
                data: data.clone(),
                mode: CreateMode::Persistent,
            });
        }
        ops.push(Op::SetData {
            path: target.clone(),
            data: set_data.clone(),
            version: old.version,
        });
        self.dirty.insert(target.clone());
        self.in_doubt = Some(InDoubt::Multi {
            creates: creates.clone(),
            set_path: target.clone(),
            set_data: set_data.clone(),
        });
        let results = match c.multi(&ops) {
            Ok(r) => r,
            Err(e) => return self.failed(&format!("multi {base}"), e),
        };
        self.in_doubt = None;
        let zxid = c.last_zxid();
        if let Some(err) = multi_error(&results) {
            self.violation(format!("multi {base} failed with {err}: {results:?}"));
            return Step::Done;
        }
        let mut ok = matches!(results[0], OpResult::Check);
        for ((path, data), r) in creates.into_iter().zip(&results[1..4]) {
            match r {
                // A create in a multi answers with its path only (as ZooKeeper's);
                // the node's Stat is checked against the model when it is read back.
                OpResult::Create { path: p, stat }
                    if *p == path
                        && stat.as_ref().is_none_or(|s| {
                            s.czxid == zxid && s.mzxid == zxid && s.version == 0
                        }) =>
                {
                    self.insert(
                        path,
                        Node {
                            data,
                            version: 0,
                            czxid: zxid,
                            mzxid: zxid,
                        },
                    );
                }
                _ => ok = false,
            }
        }
        match &results[4] {
            OpResult::SetData(stat)
                if stat.version == old.version + 1
                    && stat.mzxid == zxid
                    && stat.czxid == old.czxid =>
            {
                self.insert(
                    target,
                    Node {
                        data: set_data,
                        version: stat.version,
                        czxid: stat.czxid,
                        mzxid: stat.mzxid,
                    },
                );
            }
            _ => ok = false,
        }
        if !ok {
            self.violation(format!(
                "multi {base}: results {results:?} (reply zxid 0x{zxid:x}) do not show one txn"
            ));
        }
        self.ack(zxid);
        Step::Done
    }

    /// Two creates and a check that cannot pass: nothing may be applied, now or after
    /// any restart.
    fn failing_multi(&mut self, c: &mut Client, group: u32) -> Step {
        let k = self.next;
        self.next += 1;
        let checked = self.pick();
        let wrong_version = self.nodes[&checked].version + 1000;
        let base = format!("{}/f{k}", self.group_path(group));
        let mut ops = Vec::new();
        for s in ["a", "b"] {
            let path = format!("{base}-{s}");
            self.dirty.insert(path.clone());
            ops.push(Op::Create {
                path,
                data: Some(b"must never exist".to_vec()),
                mode: CreateMode::Persistent,
            });
        }
        ops.push(Op::Check {
            path: checked,
            version: wrong_version,
        });
        // Nothing can apply, so an interrupted one needs no resolution: its paths are
        // dirty and must be absent.
        self.in_doubt = None;
        match c.multi(&ops) {
            Ok(results) => {
                if multi_error(&results) != Some(BADVERSION) {
                    self.violation(format!("failing multi {base}: {results:?}"));
                }
                match c.exists(&format!("{base}-a"), false) {
                    Ok(None) => Step::Done,
                    Ok(Some(stat)) => {
                        self.violation(format!("failed multi {base} created {base}-a: {stat:?}"));
                        Step::Done
                    }
                    Err(e) => self.failed("exists after a failed multi", e),
                }
            }
            Err(e) => self.failed(&format!("failing multi {base}"), e),
        }
    }
}

/// The number after `s-` in a sequential name: ten digits.
fn seq_suffix(name: &str) -> Option<i64> {
    let digits = name.strip_prefix("s-")?;
    if digits.len() != 10 {
        return None;
    }
    digits.parse().ok()
}

/// What the whole test knows besides the workers.
#[derive(Default)]
struct Model {
    /// Acknowledged sequential creates by parent, then name.
    seq: BTreeMap<String, BTreeMap<String, SeqNode>>,
    /// The highest zxid acknowledged, and carried by any reply, so far.
    max_acked_zxid: i64,
    max_zxid_seen: i64,
    violations: Vec<String>,
    losses: u64,
    acked_checked: u64,
    node_checks: u64,
    in_doubt_landed: u64,
    in_doubt_not_landed: u64,
    snapshots_written: u64,
    restarts_from_snapshot: u64,
}

/// What the test prints at the end.
#[derive(Debug)]
struct Summary {
    cycles: u32,
    acked_checked: u64,
    losses: u64,
}

fn run_crash_test(tag: &str, cycles: u32, separate_log_dir: bool) -> Summary {
    let seed = match std::env::var("KEEL_CRASH_SEED") {
        Ok(s) => s.parse().expect("KEEL_CRASH_SEED must be a u64"),
        Err(_) => rand::random::<u64>(),
    };
    println!("{tag}: seed {seed} (KEEL_CRASH_SEED={seed} repeats the random choices)");
    let t0 = Instant::now();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut keel = Keel::new(
        tag,
        KeelOptions {
            snap_count: Some(200),
            separate_log_dir,
            // keel purges at the first snapshot after each start, so every cycle purges
            // old snapshots and txn log segments under traffic, and the kill may cut a
            // purge short. Without it the kept snapshots filled about 10 GB in 1,000
            // cycles.
            extra: "autopurge.purgeInterval=1\nautopurge.snapRetainCount=3\n".to_owned(),
            ..KeelOptions::default()
        },
    );
    keel.start();
    let mut model = Model::default();
    {
        let mut c = Client::connect(keel.port, VERIFIER_SESSION_TIMEOUT_MS).expect("connect");
        for path in ["/crash", "/crash/seq"] {
            c.create(path, None, CreateMode::Persistent).expect(path);
        }
        for w in 0..WORKERS {
            c.create(&format!("/crash/w{w}"), None, CreateMode::Persistent)
                .expect("worker root");
        }
        ensure_group_parents(&mut c, 0);
        model.max_zxid_seen = c.last_zxid();
        c.close().expect("close");
    }
    let mut workers: Vec<Worker> = (0..WORKERS).map(|i| Worker::new(i, seed)).collect();
    for cycle in 0..cycles {
        let port = keel.port;
        let handles: Vec<_> = workers
            .drain(..)
            .map(|w| std::thread::spawn(move || w.run(port, cycle)))
            .collect();
        let delay_ms = rng.gen_range(KILL_DELAY_MS_MIN..=KILL_DELAY_MS_MAX);
        std::thread::sleep(Duration::from_millis(delay_ms));
        if !keel.is_running() {
            model.violations.push(format!(
                "keel exited on its own during the traffic; stderr:\n{}",
                keel.stderr()
            ));
        }
        keel.kill9();
        for h in handles {
            match h.join() {
                Ok(w) => workers.push(w),
                Err(p) => std::panic::resume_unwind(p),
            }
        }
        for w in &mut workers {
            model.max_zxid_seen = model.max_zxid_seen.max(w.max_zxid_seen);
            model.max_acked_zxid = model.max_acked_zxid.max(w.max_acked_zxid);
            model.violations.append(&mut w.violations);
        }
        // keel's log lines, for the summary only (their wording is not a contract).
        model.snapshots_written += keel.stderr().matches("snapshot written").count() as u64;
        // Every third restart replays the log from the last snapshot with the default
        // snapCount; the rest keep snapshotting every 101-200 txns.
        keel.options.snap_count = if cycle % 3 == 2 { None } else { Some(200) };
        keel.start();
        if keel.stderr().contains("snapshot_zxid=") {
            model.restarts_from_snapshot += 1;
        }
        let full = (cycle + 1) % FULL_CHECK_EVERY == 0 || cycle + 1 == cycles;
        verify(&mut model, &mut workers, keel.port, cycle, full);
        if !model.violations.is_empty() {
            let shown: Vec<_> = model.violations.iter().take(VIOLATIONS_SHOWN_MAX).collect();
            panic!(
                "{tag}: cycle {cycle} (kill after {delay_ms} ms), seed {seed}: {} violations, {} \
                 losses:\n{shown:#?}\nlast keel stderr:\n{}",
                model.violations.len(),
                model.losses,
                keel.stderr()
            );
        }
    }
    let summary = Summary {
        cycles,
        acked_checked: model.acked_checked,
        losses: model.losses,
    };
    println!(
        "{tag}: cycles={} acknowledged_writes_checked={} losses={} node_checks={} \
         in_doubt_landed={} in_doubt_not_landed={} snapshots_written={} restarts_from_snapshot={} \
         seed={seed} elapsed={:.1}s",
        summary.cycles,
        summary.acked_checked,
        summary.losses,
        model.node_checks,
        model.in_doubt_landed,
        model.in_doubt_not_landed,
        model.snapshots_written,
        model.restarts_from_snapshot,
        t0.elapsed().as_secs_f64()
    );
    assert_eq!(summary.losses, 0);
    summary
}

/// Creates the parents of `group` (already there is fine).
fn ensure_group_parents(c: &mut Client, group: u32) {
    let mut paths = vec![format!("/crash/seq/g{group}")];
    paths.extend((0..WORKERS).map(|w| format!("/crash/w{w}/g{group}")));
    for path in paths {
        match c.create(&path, None, CreateMode::Persistent) {
            Ok(_) | Err(NODEEXISTS) => {}
            Err(e) => panic!("create {path}: error {e}"),
        }
    }
}

/// Compares a getData result with the model; the problem, if any.
fn compare(path: &str, expected: Option<&Node>, got: &ZkResult<NodeRead>) -> Option<String> {
    match (expected, got) {
        (None, Err(NONODE)) => None,
        (None, Ok((_, stat))) => Some(format!("{path} must not exist, found {stat:?}")),
        (Some(_), Err(NONODE)) => Some(format!("{path} is missing")),
        (_, Err(e)) => Some(format!("getData {path}: error {e}")),
        (Some(n), Ok((data, stat))) => {
            let len = n.data.as_ref().map_or(0, |d| d.len()) as i32;
            let same = *data == n.data
                && stat.version == n.version
                && stat.czxid == n.czxid
                && stat.mzxid == n.mzxid
                && stat.data_length == len
                && stat.ephemeral_owner == 0;
            (!same).then(|| {
                format!(
                    "{path}: expected version {} czxid 0x{:x} mzxid 0x{:x} data {:?}, found {stat:?} data {:?}",
                    n.version,
                    n.czxid,
                    n.mzxid,
                    n.data.as_deref().map(short),
                    data.as_deref().map(short)
                )
            })
        }
    }
}

/// A getData result for a message.
fn show(r: &ZkResult<NodeRead>) -> String {
    match r {
        Ok((data, stat)) => format!("{stat:?} data {:?}", data.as_deref().map(short)),
        Err(e) => format!("error {e}"),
    }
}

fn short(data: &[u8]) -> String {
    let s = String::from_utf8_lossy(&data[..data.len().min(60)]).into_owned();
    format!("{s}({} bytes)", data.len())
}

/// A parent's children; a missing parent has none (its loss shows as missing children).
fn children(c: &mut Client, parent: &str) -> Vec<String> {
    match c.get_children(parent, false) {
        Ok(names) => names,
        Err(NONODE) => Vec::new(),
        Err(e) => panic!("getChildren {parent}: error {e}"),
    }
}

fn get(c: &mut Client, path: &str) -> ZkResult<NodeRead> {
    match c.get_data(path, false) {
        Err(CONNECTIONLOSS) => panic!("verifier lost its connection reading {path}"),
        other => other,
    }
}

/// Settles a worker's in-doubt write against the restarted server: it landed
/// completely (the model takes it) or not at all.
fn resolve(c: &mut Client, w: &mut Worker, model: &mut Model) {
    let Some(doubt) = w.in_doubt.take() else {
        return;
    };
    let mut landed = false;
    match &doubt {
        InDoubt::Create { path, data } => match get(c, path) {
            Err(NONODE) => {}
            Ok((d, stat)) if d == *data && stat.version == 0 && stat.czxid == stat.mzxid => {
                landed = true;
                w.insert(
                    path.clone(),
                    Node {
                        data: d,
                        version: 0,
                        czxid: stat.czxid,
                        mzxid: stat.mzxid,
                    },
                );
            }
            other => model.violations.push(format!(
                "in-doubt create {path} of {:?} found as {}",
                data.as_deref().map(short),
                show(&other)
            )),
        },
        InDoubt::Set { path, data } => {
            let old = w.nodes[path].clone();
            match get(c, path) {
                Ok((d, stat))
                    if stat.version == old.version && d == old.data && stat.mzxid == old.mzxid => {}
                Ok((d, stat))
                    if stat.version == old.version + 1
                        && d == *data
                        && stat.mzxid > old.mzxid
                        && stat.czxid == old.czxid =>
                {
                    landed = true;
                    w.insert(
                        path.clone(),
                        Node {
                            data: d,
                            version: stat.version,
                            czxid: stat.czxid,
                            mzxid: stat.mzxid,
                        },
                    );
                }
                other => {
                    model.losses += 1;
                    model.violations.push(format!(
                        "in-doubt setData {path}: before it {old:?}, found {}",
                        show(&other)
                    ));
                }
            }
        }
        // Still there: unchanged, which the check of the cycle's paths compares.
        InDoubt::Delete { path } => {
            if let Err(NONODE) = get(c, path) {
                landed = true;
                w.remove(path);
            }
        }
        // Resolved from the parent's children in `check_seq`.
        InDoubt::Seq { .. } => {
            w.in_doubt = Some(doubt);
            return;
        }
        InDoubt::Multi {
            creates,
            set_path,
            set_data,
        } => {
            let old = w.nodes[set_path].clone();
            let found: Vec<_> = creates.iter().map(|(p, _)| get(c, p)).collect();
            let target = get(c, set_path);
            let present = found.iter().filter(|r| r.is_ok()).count();
            let none = present == 0
                && matches!(&target, Ok((d, s)) if *d == old.data && s.version == old.version && s.mzxid == old.mzxid);
            let all = present == creates.len()
                && match &target {
                    Ok((d, s)) => {
                        *d == *set_data
                            && s.version == old.version + 1
                            && found.iter().zip(creates).all(|(r, (_, data))| {
                                matches!(r, Ok((d, cs)) if d == data && cs.czxid == s.mzxid && cs.mzxid == s.mzxid && cs.version == 0)
                            })
                    }
                    Err(_) => false,
                };
            if all {
                landed = true;
                for ((path, data), r) in creates.iter().zip(found) {
                    let stat = r.expect("present").1;
                    w.insert(
                        path.clone(),
                        Node {
                            data: data.clone(),
                            version: 0,
                            czxid: stat.czxid,
                            mzxid: stat.mzxid,
                        },
                    );
                }
                let stat = target.expect("present").1;
                w.insert(
                    set_path.clone(),
                    Node {
                        data: set_data.clone(),
                        version: stat.version,
                        czxid: stat.czxid,
                        mzxid: stat.mzxid,
                    },
                );
            } else if !none {
                model.violations.push(format!(
                    "multi half-applied: creates {:?} found {:?}; setData {set_path} (before {old:?}) found {}",
                    creates.iter().map(|(p, _)| p).collect::<Vec<_>>(),
                    found.iter().map(show).collect::<Vec<_>>(),
                    show(&target)
                ));
            }
        }
    }
    if landed {
        model.in_doubt_landed += 1;
    } else {
        model.in_doubt_not_landed += 1;
    }
}

/// Checks `paths` of worker `w` against its model; returns how many were compared.
fn check_paths(c: &mut Client, w: &Worker, paths: &[String], model: &mut Model) -> u64 {
    let got = c.get_data_many(paths).expect("verifier connection");
    for (path, r) in paths.iter().zip(&got) {
        if let Some(problem) = compare(path, w.nodes.get(path), r) {
            model.losses += 1;
            model.violations.push(problem);
        }
    }
    model.node_checks += paths.len() as u64;
    paths.len() as u64
}

/// Checks a sequential parent: every acknowledged child there with its data and czxid,
/// in-doubt creates resolved, no unknown child. Returns the highest suffix present.
fn check_seq(
    c: &mut Client,
    parent: &str,
    fresh: &BTreeSet<String>,
    workers: &mut [Worker],
    model: &mut Model,
    all: bool,
) -> i64 {
    let children: BTreeSet<String> = children(c, parent).into_iter().collect();
    let mut max_suffix = -1;
    for name in &children {
        match seq_suffix(name) {
            Some(s) => max_suffix = max_suffix.max(s),
            None => model
                .violations
                .push(format!("{parent}/{name}: not a sequential name")),
        }
    }
    let expected = model.seq.entry(parent.to_owned()).or_default();
    // Newly acknowledged children (and, for a full check, all of them) are read back.
    let to_read: BTreeSet<String> = if all {
        expected.keys().cloned().collect()
    } else {
        fresh.clone()
    };
    for (name, node) in expected.iter() {
        max_suffix = max_suffix.max(seq_suffix(name).unwrap_or(-1));
        if !children.contains(name) {
            model.losses += 1;
            model.violations.push(format!(
                "acknowledged {parent}/{name} ({}) is missing",
                short(&node.data)
            ));
        }
    }
    let unknown: Vec<String> = children
        .iter()
        .filter(|n| !expected.contains_key(*n))
        .cloned()
        .collect();
    let paths: Vec<String> = to_read
        .iter()
        .chain(&unknown)
        .map(|n| format!("{parent}/{n}"))
        .collect();
    let got = c.get_data_many(&paths).expect("verifier connection");
    model.node_checks += paths.len() as u64;
    let mut by_name: HashMap<String, NodeRead> = HashMap::new();
    for (path, r) in paths.iter().zip(got) {
        let name = path.rsplit('/').next().unwrap_or_default().to_owned();
        match r {
            Ok(v) => {
                by_name.insert(name, v);
            }
            Err(e) => model.violations.push(format!("getData {path}: error {e}")),
        }
    }
    for name in &to_read {
        let Some(node) = expected.get(name) else {
            continue;
        };
        if let Some((data, stat)) = by_name.get(name) {
            if data.as_deref() != Some(&node.data[..])
                || stat.czxid != node.czxid
                || stat.version != 0
            {
                model.losses += 1;
                model.violations.push(format!(
                    "{parent}/{name}: expected {} czxid 0x{:x}, found {:?} {stat:?}",
                    short(&node.data),
                    node.czxid,
                    data.as_deref().map(short)
                ));
            }
        }
    }
    // An unknown child must be some worker's in-doubt sequential create, at most once.
    for name in unknown {
        let Some((data, stat)) = by_name.get(&name) else {
            continue;
        };
        let owner = workers.iter_mut().find(|w| {
            matches!(&w.in_doubt, Some(InDoubt::Seq { parent: p, data: d }) if p == parent && Some(d) == data.as_ref())
        });
        match owner {
            Some(w) => {
                w.in_doubt = None;
                model.in_doubt_landed += 1;
                expected.insert(
                    name,
                    SeqNode {
                        data: data.clone().unwrap_or_default(),
                        czxid: stat.czxid,
                    },
                );
            }
            None => model.violations.push(format!(
                "{parent}/{name} ({:?}) was never acknowledged nor in flight",
                data.as_deref().map(short)
            )),
        }
    }
    max_suffix
}

/// After a restart: the zxid checks, in-doubt writes, the cycle's paths (or all of
/// them), the sequential parent, and one sequential create.
fn verify(model: &mut Model, workers: &mut [Worker], port: u16, cycle: u32, full: bool) {
    let group = cycle / CYCLES_PER_GROUP;
    let mut c = Client::connect(port, VERIFIER_SESSION_TIMEOUT_MS)
        .unwrap_or_else(|e| panic!("verifier cannot connect after restart: {e}"));
    // The restarted server's last committed zxid is above every acknowledged write: the
    // verifier's own createSession is a txn of the new run.
    c.exists("/crash", false).expect("exists /crash");
    let first = c.last_zxid();
    if first <= model.max_acked_zxid {
        model.violations.push(format!(
            "first reply after restart carries zxid 0x{first:x}, not above acknowledged 0x{:x}",
            model.max_acked_zxid
        ));
    }
    for w in workers.iter_mut() {
        resolve(&mut c, w, model);
    }
    // Sequential children of this cycle's parent, in-doubt ones resolved there.
    let mut fresh: BTreeSet<String> = BTreeSet::new();
    let parent = format!("/crash/seq/g{group}");
    for w in workers.iter_mut() {
        for (p, name, node) in std::mem::take(&mut w.seq_acked) {
            model.acked_checked += 1;
            assert_eq!(p, parent, "workers use this cycle's parent");
            if model
                .seq
                .entry(p)
                .or_default()
                .insert(name.clone(), node)
                .is_some()
            {
                model.violations.push(format!(
                    "sequential name {parent}/{name} acknowledged twice"
                ));
            }
            fresh.insert(name);
        }
    }
    let mut max_suffix = check_seq(&mut c, &parent, &fresh, workers, model, false);
    for w in workers.iter_mut() {
        if let Some(InDoubt::Seq { .. }) = w.in_doubt.take() {
            model.in_doubt_not_landed += 1;
        }
    }
    // Every path written this cycle (and, when full, every path).
    for w in workers.iter_mut() {
        let dirty: Vec<String> = std::mem::take(&mut w.dirty).into_iter().collect();
        check_paths(&mut c, w, &dirty, model);
        model.acked_checked += w.acked;
        w.acked = 0;
    }
    if full {
        full_check(&mut c, workers, model, group);
        for g in 0..=group {
            let none = BTreeSet::new();
            let m = check_seq(
                &mut c,
                &format!("/crash/seq/g{g}"),
                &none,
                workers,
                model,
                true,
            );
            if g == group {
                max_suffix = max_suffix.max(m);
            }
        }
    }
    // A new sequential create: a suffix above every one there or acknowledged, and the
    // first write after the restart gets a zxid above any zxid from before the kill.
    let data = format!("verifier-c{cycle}").into_bytes();
    match c.create(
        &format!("{parent}/s-"),
        Some(&data),
        CreateMode::PersistentSequential,
    ) {
        Ok((created, stat)) => {
            let zxid = c.last_zxid();
            let name = created.rsplit('/').next().unwrap_or_default().to_owned();
            let suffix = seq_suffix(&name).unwrap_or(-1);
            if suffix <= max_suffix {
                model.violations.push(format!(
                    "sequential create after restart got {created}, not above suffix {max_suffix} (reused)"
                ));
            }
            if zxid <= model.max_zxid_seen || zxid <= first {
                model.violations.push(format!(
                    "first write after restart has zxid 0x{zxid:x}, not above 0x{:x} seen before the kill",
                    model.max_zxid_seen
                ));
            }
            model.seq.entry(parent.clone()).or_default().insert(
                name,
                SeqNode {
                    data,
                    czxid: stat.czxid,
                },
            );
            model.max_acked_zxid = model.max_acked_zxid.max(zxid);
            model.max_zxid_seen = model.max_zxid_seen.max(zxid);
        }
        Err(e) => model
            .violations
            .push(format!("sequential create after restart: error {e}")),
    }
    if !model.violations.is_empty() {
        // The caller reports them; the tree may be too damaged to go on.
        return;
    }
    ensure_group_parents(&mut c, (cycle + 1) / CYCLES_PER_GROUP);
    model.max_zxid_seen = model.max_zxid_seen.max(c.last_zxid());
    c.close().expect("verifier close");
}

/// Every znode of every worker, and each group parent's children against the model
/// (a deleted znode come back, or a phantom create, shows up here).
fn full_check(c: &mut Client, workers: &[Worker], model: &mut Model, group: u32) {
    for w in workers {
        let mut all: Vec<String> = w.nodes.keys().cloned().collect();
        all.sort();
        check_paths(c, w, &all, model);
        for g in 0..=group {
            let parent = w.group_path(g);
            let found: BTreeSet<String> = children(c, &parent)
                .into_iter()
                .map(|n| format!("{parent}/{n}"))
                .collect();
            let prefix = format!("{parent}/");
            let expected: BTreeSet<String> = w
                .nodes
                .keys()
                .filter(|p| p.starts_with(&prefix))
                .cloned()
                .collect();
            for p in found.symmetric_difference(&expected) {
                model.losses += 1;
                model.violations.push(if found.contains(p) {
                    format!("{p} exists but the model has no such znode")
                } else {
                    format!("{p} is missing from its parent's children")
                });
            }
        }
    }
}

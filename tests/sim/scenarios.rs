//! Scripted scenarios: the histories of ZooKeeper's own Zab bug reports, as far as
//! the core alone can express them (issue 15 a), plus the TRUNC path. Each runs
//! without random faults; the invariants of check.rs hold throughout.

use keel::zab::message::Message;
use keel::zab::storage::{read_for_diff, ZabStorage};
use keel::zab::{counter_of, epoch_of, Action, RoleChange, Sid};

use super::world::{decode_state, Options, World};

fn world(seed: u64, opts: Options) -> World {
    let mut w = World::new(seed, opts);
    w.workload = false;
    w
}

fn ok(w: &World) {
    if let Some(f) = &w.failure {
        panic!("seed {}: {f}\n{}", w.seed, w.trace_tail());
    }
}

/// Asserts `cond`, printing the trace (KEEL_SIM_TRACE=1) when it fails.
fn expect(w: &World, cond: bool, what: &str) {
    assert!(
        cond,
        "seed {}: {what}; roles {:?}\n{}",
        w.seed,
        roles(w),
        w.trace_tail()
    );
}

fn roles(w: &World) -> Vec<(Sid, Option<RoleChange>)> {
    w.members
        .iter()
        .map(|m| (m.sid, if m.peer.is_some() { m.role } else { None }))
        .collect()
}

/// Runs until one leader is established and every running member serves with it.
fn settle(w: &mut World) -> Sid {
    let held = w.run_until_cond(20_000, |w| {
        let Some(l) = w.leader() else { return false };
        w.members.iter().all(|m| {
            m.peer.is_none()
                || m.sid == l
                || matches!(m.role, Some(RoleChange::LearnerServing { leader, .. }) if leader == l)
        })
    });
    ok(w);
    assert!(held, "no settled leader; roles {:?}", roles(w));
    w.leader().expect("leader")
}

/// Proposes `n` txns on the leader and waits until they are acknowledged.
fn write(w: &mut World, n: usize) {
    let before = w.checker.acked.len();
    let mut proposed = 0;
    while proposed < n {
        if let Some(l) = w.leader() {
            w.propose(l);
            proposed += 1;
        }
        w.run_for(3);
        ok(w);
    }
    let done = w.run_until_cond(10_000, |w| w.checker.acked.len() >= before + n);
    ok(w);
    assert!(done, "{n} writes not acknowledged; roles {:?}", roles(w));
}

/// Waits until every running member applied the same txns.
fn converge(w: &mut World) {
    let same = w.run_until_cond(10_000, |w| {
        let mut lasts = w
            .members
            .iter()
            .filter(|m| m.peer.is_some())
            .map(|m| m.applied.last().map(|t| t.zxid));
        let first = lasts.next().flatten();
        lasts.all(|l| l == first)
    });
    ok(w);
    assert!(
        same,
        "members did not converge: {:?}",
        w.members
            .iter()
            .map(|m| m.applied.len())
            .collect::<Vec<_>>()
    );
    w.checker.acked_committed().unwrap();
}

/// Whether `sid` serves as a learner.
fn serving(w: &World, sid: Sid) -> bool {
    matches!(
        w.members[sid as usize - 1].role,
        Some(RoleChange::LearnerServing { .. })
    )
}

fn followers(w: &World, leader: Sid) -> Vec<Sid> {
    w.members
        .iter()
        .map(|m| m.sid)
        .filter(|&s| s != leader)
        .collect()
}

fn small_window(participants: usize) -> Options {
    Options {
        commit_log_count: 5,
        ..Options::quiet(participants)
    }
}

fn sync_count(w: &World, kind: &str) -> u64 {
    w.syncs.get(kind).copied().unwrap_or(0)
}

/// A settled 3-member ensemble (window 5) whose follower `f` lost its dataDir and is
/// down while 20 writes commit: it must rejoin by SNAP. Returns (world, leader, f).
fn wiped_follower_behind(seed: u64) -> (World, Sid, Sid) {
    let mut w = world(seed, small_window(3));
    let l = settle(&mut w);
    let f = followers(&w, l)[0];
    w.crash(f);
    w.wipe(f);
    write(&mut w, 20);
    (w, l, f)
}

/// Brings `old_leader` back and waits until every member agrees.
fn rejoin(w: &mut World, old_leader: Sid) {
    w.restart(old_leader);
    settle(w);
    converge(w);
}

/// ZOOKEEPER-3104: the leader is killed just after NEWLEADER in a SNAP sync. The
/// learner got the snapshot before NEWLEADER; the survivors keep every write.
#[test]
fn zk3104_leader_killed_after_newleader_in_snap_sync() {
    let (mut w, l, f) = wiped_follower_behind(3104);
    w.crash_on_delivery = Some((f, Box::new(|m| matches!(m, Message::NewLeader { .. })), l));
    w.restart(f);
    w.run_for(2_000);
    ok(&w);
    expect(&w, !w.alive(l), "the leader was to die at NEWLEADER");
    assert!(sync_count(&w, "snap") >= 1);
    let l2 = settle(&mut w);
    assert_ne!(l2, l);
    write(&mut w, 5);
    rejoin(&mut w, l);
}

/// ZOOKEEPER-3642: the leader crashes mid-SNAP, a new leader syncs the learner by
/// DIFF, then the learner restarts.
#[test]
fn zk3642_leader_crash_mid_snap_then_diff_then_restart() {
    let (mut w, l, f) = wiped_follower_behind(3642);
    w.crash_on_delivery = Some((f, Box::new(|m| matches!(m, Message::Snap { .. })), l));
    let diffs = sync_count(&w, "diff");
    w.restart(f);
    w.run_for(2_000);
    ok(&w);
    expect(&w, !w.alive(l), "the leader was to die at the SNAP");
    settle(&mut w);
    let what = format!("the new leader syncs the learner by DIFF: {:?}", w.syncs);
    expect(&w, sync_count(&w, "diff") > diffs, &what);
    write(&mut w, 5);
    w.crash(f);
    w.restart(f);
    settle(&mut w);
    write(&mut w, 5);
    rejoin(&mut w, l);
}

/// ZOOKEEPER-2872: power loss right after a SNAP sync: the snapshot and currentEpoch
/// the learner acknowledged with are on disk.
#[test]
fn zk2872_power_loss_right_after_snap_sync() {
    let (mut w, l, f) = wiped_follower_behind(2872);
    w.crash_after = Some((
        f,
        Box::new(
            |a| matches!(a, Action::Send { msg: Message::Ack { zxid }, .. } if counter_of(*zxid) == 0),
        ),
    ));
    w.restart(f);
    w.run_for(2_000);
    ok(&w);
    assert!(
        !w.alive(f),
        "the learner was to lose power after its NEWLEADER ACK"
    );
    let m = &w.members[f as usize - 1];
    let (snap_zxid, _) = m.storage.snapshot();
    assert!(snap_zxid > 0, "the SNAP survived the power loss");
    assert_eq!(
        m.storage.recover().current_epoch,
        epoch_of(w.members[l as usize - 1].applied.last().unwrap().zxid)
    );
    w.restart(f);
    w.crash(l);
    let l2 = settle(&mut w);
    assert_ne!(l2, l);
    write(&mut w, 5);
    rejoin(&mut w, l);
}

/// ZOOKEEPER-3911 / -4785: a follower with a slow fsync syncs into a new epoch, the
/// NEWLEADER quorum forms, writes commit, every member crashes, and the ensemble
/// restarts without the old leader: nothing acknowledged is lost.
#[test]
fn zk3911_4785_slow_fsync_newleader_quorum_all_crash() {
    let mut w = world(3911, Options::quiet(3));
    let l = settle(&mut w);
    let (f, g) = (followers(&w, l)[0], followers(&w, l)[1]);
    w.crash(f);
    write(&mut w, 20);
    w.crash(g);
    w.set_fsync(f, 800, 1_500);
    // The leader and the slow follower form the NEWLEADER quorum of a new epoch; the
    // moment it is established (its history committed) every member is down.
    w.crash_after = Some((
        l,
        Box::new(|a| matches!(a, Action::RoleChanged(RoleChange::LeaderEstablished { .. }))),
    ));
    w.restart(f);
    let established = w.run_until_cond(10_000, |w| !w.alive(l));
    ok(&w);
    expect(
        &w,
        established,
        "the leader was to establish a new epoch with the slow follower",
    );
    w.crash(f);
    w.set_fsync(f, 1, 5);
    w.restart(f);
    w.restart(g);
    settle(&mut w);
    write(&mut w, 3);
    rejoin(&mut w, l);
}

/// ZOOKEEPER-4643: a crash after currentEpoch is written: by then every txn received
/// before NEWLEADER is durable.
#[test]
fn zk4643_crash_after_current_epoch_written() {
    let mut w = world(4643, Options::quiet(3));
    let l = settle(&mut w);
    let f = followers(&w, l)[0];
    w.crash(f);
    write(&mut w, 20);
    w.set_fsync(f, 500, 1_000);
    w.crash_after = Some((
        f,
        Box::new(|a| matches!(a, Action::PersistCurrentEpoch { .. })),
    ));
    w.restart(f);
    w.run_for(4_000);
    ok(&w);
    assert!(
        !w.alive(f),
        "the learner was to crash after writing currentEpoch"
    );
    let m = &w.members[f as usize - 1];
    let mut held = decode_state(m.storage.snapshot().1);
    held.extend(m.storage.recover().log);
    for t in w.checker.acked.values() {
        assert!(
            held.contains(t),
            "acknowledged {:#x} not durable on the learner when its currentEpoch was",
            t.zxid
        );
    }
    w.crash(l);
    w.restart(f);
    settle(&mut w);
    write(&mut w, 5);
    rejoin(&mut w, l);
}

/// The leader's side of ZOOKEEPER-4643 (found by seed 4424): a follower whose fsync
/// lags is elected with txns that are not durable yet; it must not write the new
/// currentEpoch before they are, or a crash right after the write leaves it with a
/// vote that beats every member holding those acknowledged txns.
#[test]
fn new_leader_writes_current_epoch_only_over_a_durable_history() {
    let mut w = world(4643, Options::quiet(3));
    let l = settle(&mut w);
    // The follower with the higher sid wins a tie of (epoch, zxid).
    let f = *followers(&w, l).iter().max().unwrap();
    w.set_fsync(f, 1_000, 1_500);
    write(&mut w, 10);
    w.crash_after = Some((
        f,
        Box::new(|a| matches!(a, Action::PersistCurrentEpoch { .. })),
    ));
    w.crash(l);
    let crashed = w.run_until_cond(10_000, |w| !w.alive(f));
    ok(&w);
    expect(
        &w,
        crashed,
        "the slow follower was to lead and write currentEpoch",
    );
    w.set_fsync(f, 1, 5);
    w.restart(f);
    w.restart(l);
    settle(&mut w);
    write(&mut w, 3);
    converge(&mut w);
}

/// Crashes learner `sid`, commits 30 txns without it, gives it a slow disk (50-100 ms
/// fsyncs) and restarts it under a write every 2 ms: it must serve within 1 s.
fn rejoin_under_writes(w: &mut World, sid: Sid) {
    w.crash(sid);
    write(w, 30);
    w.set_fsync(sid, 50, 100);
    w.opts.propose_every_ms = 2;
    w.workload = true;
    w.restart(sid);
    let joined = w.run_until_cond(1_000, |w| serving(w, sid));
    ok(w);
    assert!(
        joined,
        "learner {sid} never joined under continuous writes; roles {:?}",
        roles(w)
    );
}

/// ZOOKEEPER-4394: continuous writes during a DIFF join: the joining learner's
/// NEWLEADER ACK waits only for the txns before NEWLEADER, so it gets in.
#[test]
fn zk4394_continuous_writes_during_diff_join() {
    let mut w = world(4394, Options::quiet(3));
    let l = settle(&mut w);
    let f = followers(&w, l)[0];
    // Well within initLimit (1 s): a learner whose ACK waited for every txn, including
    // those streaming in after NEWLEADER, would only get in through a lucky pause.
    rejoin_under_writes(&mut w, f);
    assert!(sync_count(&w, "diff") >= 1);
    w.workload = false;
    converge(&mut w);
}

/// An observer that rejoins under continuous writes with a slow disk: the INFORMs of
/// what commits after its sync was queued reach it before its NEWLEADER ACK (its
/// log is not yet durable) and before UPTODATE. It takes them there, as
/// Learner.syncWithLeader does, instead of going LOOKING each time (it never joined
/// while the writes went on).
#[test]
fn observer_rejoins_under_continuous_writes() {
    let mut w = world(
        4395,
        Options {
            observers: 1,
            ..Options::quiet(3)
        },
    );
    let l = settle(&mut w);
    let o = 4;
    assert_ne!(l, o, "an observer never leads");
    // It holds txns, so it rejoins by a DIFF whose PROPOSALs its slow disk must make
    // durable before its NEWLEADER ACK.
    write(&mut w, 5);
    rejoin_under_writes(&mut w, o);
    // It keeps serving while the writes go on: no INFORM sends it LOOKING.
    w.run_for(2_000);
    ok(&w);
    expect(
        &w,
        serving(&w, o),
        "the observer left the leader under continuous writes",
    );
    w.workload = false;
    converge(&mut w);
}

/// ZOOKEEPER-4925: a follower that was stale and caught up by DIFF under live writes
/// becomes leader and DIFF-syncs a third member: no hole in what it sends.
#[test]
fn zk4925_stale_follower_leads_and_diffs_third() {
    let mut w = world(4925, Options::quiet(3));
    let l = settle(&mut w);
    let (f, g) = (followers(&w, l)[0], followers(&w, l)[1]);
    w.crash(f);
    write(&mut w, 10);
    w.opts.propose_every_ms = 10;
    w.workload = true;
    w.restart(f);
    w.run_for(1_500);
    w.workload = false;
    settle(&mut w);
    w.crash(g);
    write(&mut w, 10);
    w.crash(l);
    let diffs = sync_count(&w, "diff");
    w.restart(g);
    let l2 = settle(&mut w);
    assert_eq!(l2, f, "the once-stale follower has the newest log");
    assert!(sync_count(&w, "diff") > diffs);
    write(&mut w, 5);
    rejoin(&mut w, l);
}

/// A follower down while 30 writes commit, with a window of 5: on restart it is
/// behind the leader's in-memory window. Returns (world, leader, follower), the
/// follower not yet restarted.
fn follower_behind_the_window(seed: u64) -> (World, Sid, Sid) {
    let mut w = world(seed, small_window(3));
    let l = settle(&mut w);
    write(&mut w, 3);
    let f = followers(&w, l)[0];
    w.crash(f);
    write(&mut w, 30);
    (w, l, f)
}

/// Restarts `f`, waits until it serves and every member agrees, and returns how many
/// of each sync the leaders started meanwhile.
fn rejoin_counting(w: &mut World, f: Sid) -> impl Fn(&World, &str) -> u64 {
    let before = w.syncs.clone();
    w.restart(f);
    settle(w);
    write(w, 5);
    converge(w);
    move |w: &World, kind: &str| sync_count(w, kind) - before.get(kind).copied().unwrap_or(0)
}

/// ZAB-WIRE.md §4.2 rule 5: a learner behind the in-memory window whose last txn the
/// leader's on-disk log still holds is synced by DIFF from that log, not by SNAP.
#[test]
fn behind_the_window_diffs_from_the_on_disk_log() {
    let (mut w, _, f) = follower_behind_the_window(2418);
    let synced = rejoin_counting(&mut w, f);
    let what = format!("a DIFF served from the log: {:?}", w.syncs);
    expect(&w, synced(&w, "diff_from_log") >= 1, &what);
    expect(&w, synced(&w, "snap") == 0, &what);
}

/// ZOOKEEPER-4394 behind the window: a learner that needs a DIFF from the on-disk log
/// joins under continuous writes even when the read takes longer than the writes need
/// to move the in-memory window past it (found with real processes: the leader read
/// the log again and again, each answer already behind the window, until initLimit).
/// Messages flow without delay spikes here, so the leader commits all through each
/// read (a spike held up the other follower's ACKs for the whole read, and with the
/// window still the condition never arose). A read takes 600-800 ms, in which more
/// txns commit than the window (5) holds: with 150-200 ms only about 5 committed, the
/// window never passed the read's end, and the leader without the pin passed too
/// (checked on it: with 600-800 ms it re-read 6 times and the learner never joined).
#[test]
fn continuous_writes_during_a_diff_from_the_log() {
    let (mut w, _, f) = follower_behind_the_window(4394);
    w.delay_spikes = false;
    w.log_read_ms = (600, 800);
    w.opts.propose_every_ms = 10;
    w.workload = true;
    let before = w.syncs.clone();
    let since =
        |w: &World, kind: &str| sync_count(w, kind) - before.get(kind).copied().unwrap_or(0);
    w.restart(f);
    let joined = w.run_until_cond(3_000, |w| serving(w, f));
    ok(&w);
    let what = format!("the learner joins after one log read; syncs {:?}", w.syncs);
    expect(&w, joined, &what);
    expect(&w, since(&w, "log_read") == 1, &what);
    expect(&w, since(&w, "diff_from_log") == 1, &what);
    expect(&w, since(&w, "snap") == 0, &what);
    w.workload = false;
    converge(&mut w);
}

/// Asserts that the rejoin `synced` counts read the log (`read`: "log_read" or
/// "log_read_refused") and then sent a SNAP, never a DIFF from the log.
fn expect_snap_after(w: &World, synced: impl Fn(&World, &str) -> u64, read: &str) {
    let what = format!("{read}, then a SNAP: {:?}", w.syncs);
    expect(w, synced(w, read) >= 1, &what);
    expect(w, synced(w, "snap") >= 1, &what);
    expect(w, synced(w, "diff_from_log") == 0, &what);
}

/// The on-disk log no longer reaches back to the learner's last txn (the leader took
/// a snapshot since and dropped the log it covers): SNAP.
#[test]
fn behind_the_on_disk_log_gets_snap() {
    let (mut w, l, f) = follower_behind_the_window(2419);
    w.local_snapshot(l);
    let synced = rejoin_counting(&mut w, f);
    expect_snap_after(&w, synced, "log_read_refused");
}

/// zookeeper.snapshotSizeFactor: a log from the learner's last txn on larger than a
/// third of the newest snapshot costs more to send than the snapshot: SNAP.
#[test]
fn a_log_larger_than_the_snapshot_factor_gets_snap() {
    let mut w = world(2420, small_window(3));
    let l = settle(&mut w);
    write(&mut w, 3);
    // A snapshot of 3 small txns on the leader, taken before the follower's last txn
    // (so the log still holds that), is far smaller than 3 x the 30 txns of log after.
    w.local_snapshot(l);
    write(&mut w, 2);
    let f = followers(&w, l)[0];
    w.crash(f);
    write(&mut w, 30);
    let last = w.members[f as usize - 1]
        .storage
        .recover()
        .log
        .last()
        .unwrap()
        .zxid;
    let leader = &w.members[l as usize - 1].storage;
    let upto = leader.log().last().unwrap().zxid;
    assert!(
        read_for_diff(leader, last, upto, 0.0).is_some(),
        "the log reaches back"
    );
    assert!(
        read_for_diff(leader, last, upto, 0.33).is_none(),
        "but is too large"
    );
    let synced = rejoin_counting(&mut w, f);
    expect_snap_after(&w, synced, "log_read_refused");
}

/// ZOOKEEPER-2418: a gap between the end of what the on-disk log gave and the start of
/// the in-memory window. A DIFF across it would leave the learner without those txns
/// for good; the leader notices and sends a SNAP, and every member agrees.
#[test]
fn zk2418_gap_between_the_log_and_the_window_gets_snap() {
    let (mut w, _, f) = follower_behind_the_window(2418);
    w.log_read_gap = true;
    let synced = rejoin_counting(&mut w, f);
    expect_snap_after(&w, synced, "log_read");
}

/// A hole inside what the on-disk log gave (an older keel's learner could log past
/// a lost txn): the txns still ascend and reach the window, but a DIFF across the
/// hole breaks the learner's stream (it goes LOOKING, again and again); the leader
/// sends a SNAP instead.
#[test]
fn a_hole_in_the_on_disk_log_gets_snap() {
    let (mut w, _, f) = follower_behind_the_window(2421);
    w.log_read_hole = true;
    let synced = rejoin_counting(&mut w, f);
    expect_snap_after(&w, synced, "log_read");
}

/// A former leader holding txns of its epoch that never committed is told TRUNC when
/// it rejoins, and then agrees with the rest.
#[test]
fn trunc_drops_uncommitted_txns_of_an_old_epoch() {
    let mut w = world(14, Options::quiet(3));
    let l = settle(&mut w);
    write(&mut w, 5);
    w.isolate(l);
    for _ in 0..3 {
        w.propose(l);
    }
    let elected = w.run_until_cond(10_000, |w| w.leaders().iter().any(|&s| s != l));
    ok(&w);
    assert!(elected, "the others elect a leader");
    w.heal();
    settle(&mut w);
    write(&mut w, 5);
    converge(&mut w);
    assert!(sync_count(&w, "trunc") >= 1, "syncs {:?}", w.syncs);
}

/// A member with an empty dataDir rejoins by SNAP.
#[test]
fn wiped_member_rejoins_by_snap() {
    let mut w = world(9, Options::quiet(5));
    let l = settle(&mut w);
    write(&mut w, 10);
    let f = followers(&w, l)[2];
    w.crash(f);
    w.wipe(f);
    write(&mut w, 40);
    w.restart(f);
    settle(&mut w);
    assert!(sync_count(&w, "snap") >= 1);
    converge(&mut w);
}

/// A follower restarted on its dataDir while the leader is idle: its log holds
/// committed txns past its snapshot, the DIFF sends none and no later COMMIT comes
/// (none may name a txn the learner got no PROPOSAL of on the connection: a ZooKeeper
/// follower warns); the commit point in UPTODATE makes it apply them.
#[test]
fn restarted_follower_applies_its_committed_log_under_an_idle_leader() {
    for seed in 0..10 {
        let mut w = world(seed, Options::quiet(3));
        let l = settle(&mut w);
        write(&mut w, 10);
        let f = followers(&w, l)[0];
        w.crash(f);
        w.restart(f);
        settle(&mut w);
        converge(&mut w);
    }
}

/// A wiped member (zxid 0) while the leader's window still holds every txn since the
/// ensemble's first: SNAP, as ZooKeeper (its window starts at its first txn and its
/// on-disk log has no txn at zxid 0), not a DIFF of the whole history.
#[test]
fn wiped_member_gets_snap_while_the_window_holds_everything() {
    let mut w = world(10, Options::quiet(3));
    let l = settle(&mut w);
    write(&mut w, 5);
    let f = followers(&w, l)[0];
    w.crash(f);
    w.wipe(f);
    let synced = rejoin_counting(&mut w, f);
    let what = format!("a SNAP, no DIFF: {:?}", w.syncs);
    expect(&w, synced(&w, "snap") >= 1, &what);
    expect(&w, synced(&w, "diff") == 0, &what);
}

/// A learner that decides before its leader has left LOOKING connects to a member
/// that is not leading yet: its FOLLOWERINFO is held until that member's election
/// ends (a ZooKeeper learner does not retry a connection that was accepted and
/// closed), so a fresh ensemble is serving well within initLimit (1 s) instead of
/// waiting it out.
#[test]
fn fresh_ensembles_serve_within_init_limit() {
    for seed in 0..40 {
        let mut w = world(seed, Options::quiet(3));
        let serving = w.run_until_cond(1_000, |w| {
            w.leader().is_some_and(|l| {
                w.members.iter().all(|m| {
                    m.sid == l || matches!(m.role, Some(RoleChange::LearnerServing { .. }))
                })
            })
        });
        ok(&w);
        expect(&w, serving, "a fresh ensemble serves within initLimit");
    }
}

/// A member that promised a newer epoch to a leader that never got a quorum of
/// ACKEPOCHs (acceptedEpoch above the established epoch, found by seed 13893) cannot
/// follow the established leader: the leader steps down so that the next discovery
/// chooses an epoch above that promise, and the member rejoins.
#[test]
fn learner_with_a_newer_accepted_epoch_rejoins() {
    let mut w = world(13893, Options::quiet(3));
    let l = settle(&mut w);
    write(&mut w, 5);
    let Some(RoleChange::LeaderEstablished { epoch }) = w.members[l as usize - 1].role else {
        panic!("the leader's role");
    };
    let f = followers(&w, l)[0];
    w.crash(f);
    w.members[f as usize - 1]
        .storage
        .set_accepted_epoch(epoch + 3);
    write(&mut w, 5);
    w.restart(f);
    let joined = w.run_until_cond(10_000, |w| {
        matches!(
            w.members[f as usize - 1].role,
            Some(RoleChange::LearnerServing { epoch: e, .. }) if e >= epoch + 3
        )
    });
    ok(&w);
    expect(
        &w,
        joined,
        "the member with the newer acceptedEpoch rejoins",
    );
    settle(&mut w);
    write(&mut w, 5);
    converge(&mut w);
}

/// A member that leaves its role says why (the role change's log line): an isolated
/// leader has lost its quorum, and its followers have heard nothing from it within
/// syncLimit, or saw its connection close (the simulated network delivers the close
/// of the leader's stepping down even across the partition). Operators read these
/// lines to tell a stall from a crash (a clean CI once found an ensemble in epoch 2
/// with no way left to tell which).
#[test]
fn a_member_going_looking_says_why() {
    let mut w = world(7, Options::quiet(3));
    let l = settle(&mut w);
    write(&mut w, 3);
    let fs = followers(&w, l);
    w.isolate(l);
    let left = w.run_until_cond(10_000, |w| {
        w.members.iter().all(|m| {
            m.peer
                .as_ref()
                .is_some_and(|p| p.looked_because().is_some())
        })
    });
    ok(&w);
    let why = |sid: Sid| {
        w.members[sid as usize - 1]
            .peer
            .as_ref()
            .unwrap()
            .looked_because()
    };
    expect(&w, left, "every member went LOOKING with a reason");
    expect(
        &w,
        why(l).is_some_and(|r| r.starts_with("lost its quorum")),
        &format!("the isolated leader's reason: {:?}", why(l)),
    );
    for f in fs {
        expect(
            &w,
            matches!(
                why(f),
                Some("nothing from the leader within syncLimit" | "the leader's connection closed")
            ),
            &format!("follower {f}'s reason: {:?}", why(f)),
        );
    }
}

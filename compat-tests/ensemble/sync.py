"""A member rejoins by SNAP, DIFF and TRUNC, each shown by the leader (issue 15 b).

Usage: sync.py ENSEMBLE_DIR

ENSEMBLE_DIR is one that lib.sh start_ensemble started (a 3-member keel ensemble).
Each scenario brings a follower back and asserts how the leader synced it, by the
leader's log line `sync with learner: MODE to sid N, from zxid X to Y` and by its mntr
counters (ZooKeeper's `zk_diff_count` counts DIFF and TRUNC syncs, `zk_snap_count` SNAP
syncs); then every member's full dump (chaos.py's) must be identical and hold every
acknowledged write.
- SNAP: after a few writes, a follower
  is killed, its dataDir wiped (myid kept), writes go on, it restarts: it has no zxid,
  so the leader sends its snapshot.
- DIFF: a follower is killed, a few hundred writes go on, it restarts on its dataDir:
  its last zxid is in the leader's log, so the leader sends the txns after it.
- TRUNC: the leader's two followers are stopped (SIGSTOP) and the leader is sent writes
  it proposes and logs alone; all three are killed, the followers restart and elect a
  new leader (no new write yet), the old leader restarts. Its last zxid is past the new leader's
  last one in an epoch the new leader knows, so it is told to truncate to the new
  leader's last zxid (ZooKeeper's LearnerHandler.syncFollower: peerLastZxid >
  maxCommittedLog). Had the new leader written in its own epoch first, the learner's
  zxid would fall inside the new leader's log before an epoch boundary, where ZooKeeper
  (and keel) send SNAP: a TRUNC may not cross an epoch boundary. Zab commits nothing
  the old leader logged alone: those writes are on no member afterwards.
- CROSS: that other case, shown: as TRUNC, but the new leader writes before the old
  one restarts; the old leader is synced by SNAP.
- FUZZY: a SNAP under load. 2,000 znodes of 20 KB (a stream of about 40 MB, which the
  leader writes in steps of 256 KiB between its other work); a follower is killed and
  wiped and restarts while a client keeps 64 writes in flight through the leader:
  setting data, creating znodes with ACLs new to the leader, changing ACLs, deleting. The leader's log shows
  the SNAP took several steps and txns applied while it was written (its applied zxid
  past the SNAP's): the learner replayed them over a fuzzy stream, and every dump
  (data, ACL, every Stat field) must still be identical, and a quota's usage on /fuzzy
  (its stats znode) equal to what each member's tree holds.

Prints one line per scenario and a summary; exits 1 on any failure.
"""

import logging
import os
import re
import shutil
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chaos import MEMBERS, Member, agreement, dump, four_letter, mode, wait_serving  # noqa: E402,E501

from kazoo.client import KazooClient  # noqa: E402

SYNC_LINE = re.compile(
    r"sync with learner: (DIFF|TRUNC|SNAP) to sid (\d+), from zxid (0x[0-9a-f]+) to (0x[0-9a-f]+)")
# The mode the leader is expected to choose in each scenario; SYNC_EXPECT overrides
# one ("DIFF=SNAP") to show the check fails when the mode is not the one chosen.
EXPECT = {"SNAP": "SNAP", "SNAP-RESTART": "DIFF", "DIFF": "DIFF", "TRUNC": "TRUNC", "CROSS": "SNAP", "FUZZY": "SNAP"}
SNAP_WRITTEN = re.compile(
    r'SNAP to a learner written.*?sid=(\d+) zxid="?(0x[0-9a-f]+)"? applied="?(0x[0-9a-f]+)"?'
    r'.*? steps=(\d+) held=(\d+)')
for override in filter(None, os.environ.get("SYNC_EXPECT", "").split(",")):
    k, v = override.split("=")
    EXPECT[k] = v


class Failed(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failed(what)


def mntr(port):
    out = {}
    for line in four_letter(port, "mntr").splitlines():
        k, _, v = line.partition("\t")
        out[k] = v
    return out


def counters(port):
    m = mntr(port)
    return int(m.get("zk_diff_count", -1)), int(m.get("zk_snap_count", -1))


def log_size(m):
    return os.path.getsize(os.path.join(m.dir, "log"))


def syncs_since(m, offset):
    """The sync lines member m logged after byte `offset` of its log."""
    with open(os.path.join(m.dir, "log"), "rb") as f:
        f.seek(offset)
        text = f.read().decode(errors="replace")
    return [(g[0], int(g[1]), int(g[2], 16), int(g[3], 16)) for g in SYNC_LINE.findall(text)]


def roles(members):
    """(leader, followers) by srvr, or (None, []) if the ensemble is not whole."""
    modes = {m: mode(m.port) for m in members}
    leaders = [m for m, md in modes.items() if md == "leader"]
    followers = [m for m, md in modes.items() if md == "follower"]
    if len(leaders) != 1 or len(followers) != len(members) - 1:
        return None, []
    return leaders[0], followers


def wait_roles(members, deadline_s=60):
    t0 = time.monotonic()
    while time.monotonic() - t0 < deadline_s:
        leader, followers = roles(members)
        if leader is not None:
            return leader, followers
        time.sleep(0.2)
    raise Failed("members %s did not elect a leader within %d s"
                 % ([m.sid for m in members], deadline_s))


def client(members, timeout=10.0):
    zk = KazooClient(hosts=",".join("127.0.0.1:%d" % m.port for m in members),
                     timeout=timeout, randomize_hosts=False)
    zk.start(timeout=30)
    return zk


def write(members, prefix, n, acked):
    """n acknowledged creates through the members' ports; recorded in `acked`."""
    zk = client(members)
    try:
        zk.ensure_path("/sync")
        for i in range(n):
            path = "/sync/%s-%d" % (prefix, i)
            data = ("%s:%d" % (prefix, i)).encode()
            zk.create(path, data)
            acked[path] = data
    finally:
        zk.stop()
        zk.close()


def agree(members, acked, absent=(), dumps=None):
    """Every member's full dump identical, every acknowledged write present, none of
    `absent` anywhere; returns the number of znodes. The dumps (sid -> dump()) go into
    `dumps` when given."""
    got = {m.sid: dump(m.port) for m in members}
    problems, _, _ = agreement(got, acked, absent)
    check(not problems, "; ".join(problems))
    if dumps is not None:
        dumps.update(got)
    return len(got[members[0].sid])


def quota_usage_problems(dumps, path):
    """The members whose quota stats znode for `path` disagrees with the subtree in
    their own dump (znodes at or below `path`, their data bytes)."""
    stat_path = "/zookeeper/quota%s/zookeeper_stats" % path
    problems = []
    for sid, d in sorted(dumps.items()):
        under = [p for p in d if p == path or p.startswith(path + "/")]
        want = "count=%d,bytes=%d" % (len(under), sum(len(d[p][0] or b"") for p in under))
        have = (d.get(stat_path, (None,))[0] or b"").decode()
        if have != want:
            problems.append("sid %d: %s holds %r, its tree %r" % (sid, stat_path, have, want))
    return problems


def the_sync(leader, offset, sid, before, scenario):
    """The one sync line the leader logged for `sid` since `offset`, asserted against
    the expected mode and the leader's counters (`before`: diff, snap)."""
    lines = [s for s in syncs_since(leader, offset) if s[1] == sid]
    check(len(lines) == 1, "%s: the leader (sid %d) logged %d syncs of sid %d: %s"
          % (scenario, leader.sid, len(lines), sid, lines))
    got, _, frm, to = lines[0]
    want = EXPECT[scenario]
    check(got == want, "%s: the leader synced sid %d by %s, expected %s" % (scenario, sid, got, want))
    diff, snap = counters(leader.port)
    want_counts = (before[0] + (got != "SNAP"), before[1] + (got == "SNAP"))
    check((diff, snap) == want_counts, "%s: zk_diff_count, zk_snap_count %s, expected %s"
          % (scenario, (diff, snap), want_counts))
    return got, frm, to, diff, snap


def restart_and_sync(members, m, leader, scenario):
    offset = log_size(leader)
    before = counters(leader.port)
    m.start()
    check(wait_serving(members), "%s: the ensemble did not serve again" % scenario)
    # The sync line comes before UPTODATE; allow the log a moment to be flushed.
    time.sleep(0.3)
    return the_sync(leader, offset, m.sid, before, scenario)


def wipe(m):
    data = os.path.join(m.dir, "data")
    for name in os.listdir(data):
        if name != "myid":
            p = os.path.join(data, name)
            shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)


def snap(members, acked):
    leader, followers = wait_roles(members)
    # A few txns before the wipe, fewer than the leader's in-memory window holds (500):
    # a wiped member's zxid 0 is no txn, so it gets SNAP even while the window still
    # starts at the ensemble's first txn, as from ZooKeeper.
    write(members, "fill", 20, acked)
    f = followers[0]
    f.kill9()
    time.sleep(0.5)
    wipe(f)
    write([leader, followers[1]], "snap", 100, acked)
    got, frm, to, diff, snap_n = restart_and_sync(members, f, leader, "SNAP")
    check(frm == 0, "SNAP: the wiped member reported zxid %#x, expected 0" % frm)
    agree(members, acked)
    # Killed and started again on what it installed (the SNAP stream as it arrived):
    # it reads it back and reports the zxid it had synced to or later, so the leader
    # DIFFs it. A stored snapshot it could not read would stop its start; one read as
    # empty would report zxid 0 and get SNAP again.
    f.kill9()
    time.sleep(0.5)
    write([leader, followers[1]], "after-snap", 10, acked)
    got2, frm2, _, _, _ = restart_and_sync(members, f, leader, "SNAP-RESTART")
    check(frm2 >= to, "SNAP-RESTART: sid %d came back at zxid %#x, below the SNAP's %#x"
          % (f.sid, frm2, to))
    n = agree(members, acked)
    return "SNAP: wiped sid %d rejoined: leader sid %d logged %s from zxid %#x to %#x; " \
           "zk_snap_count %d, zk_diff_count %d; restarted on it: %s from zxid %#x; " \
           "%d znodes equal on all members" \
           % (f.sid, leader.sid, got, frm, to, snap_n, diff, got2, frm2, n)


def diff(members, acked):
    leader, followers = wait_roles(members)
    f = followers[0]
    f.kill9()
    time.sleep(0.5)
    write([leader, followers[1]], "diff", 300, acked)
    got, frm, to, diff_n, snap_n = restart_and_sync(members, f, leader, "DIFF")
    check(frm >> 32 == to >> 32 and to - frm >= 300,
          "DIFF: from %#x to %#x is not the 300 writes of the same epoch" % (frm, to))
    n = agree(members, acked)
    return "DIFF: sid %d restarted after 300 writes: leader sid %d logged %s from zxid %#x " \
           "to %#x (%d txns); zk_diff_count %d; %d znodes equal on all members" \
           % (f.sid, leader.sid, got, frm, to, to - frm, diff_n, n)


def stop(pid, deadline_s=5.0):
    """SIGSTOP `pid` and wait until every one of its threads is stopped: kill(2) only
    sends the signal, and a follower still running for a moment logged and acknowledged
    the first write meant for the leader alone (seen once)."""
    os.kill(pid, signal.SIGSTOP)
    end = time.monotonic() + deadline_s
    task = "/proc/%d/task" % pid
    while time.monotonic() < end:
        states = []
        for tid in os.listdir(task):
            with open("%s/%s/stat" % (task, tid)) as f:
                states.append(f.read().rsplit(")", 1)[1].split()[0])
        if all(st in ("T", "t") for st in states):
            return
        time.sleep(0.01)
    raise Failed("pid %d did not stop within %.0f s of SIGSTOP" % (pid, deadline_s))


def applied_zxid(port):
    """The last zxid member `port` applied, by srvr's `Zxid:` line, or None."""
    for line in four_letter(port, "srvr").splitlines():
        if line.startswith("Zxid:"):
            return int(line.split(":", 1)[1].strip(), 16)
    return None


def wait_same_zxid(members, tag, deadline_s=10.0):
    """Until every member reports the same applied zxid (no txn in flight)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < deadline_s:
        zxids = {m.sid: applied_zxid(m.port) for m in members}
        if None not in zxids.values() and len(set(zxids.values())) == 1:
            return
        time.sleep(0.05)
    raise Failed("%s: the members' zxids did not agree within %.0f s: %s" % (tag, deadline_s, zxids))


def orphan_old_leader(members, acked, tag):
    """The leader logs writes alone and dies with them; the others restart and elect a
    new leader. Returns (old leader, new leader, paths of the writes never
    acknowledged)."""
    old, followers = wait_roles(members)
    zk = client([old])
    zk.ensure_path("/sync")
    zk.create("/sync/before-%s" % tag, b"acked")
    acked["/sync/before-%s" % tag] = b"acked"
    # The create is acknowledged once one follower logged it; the other may not have
    # it yet. Stopped that way, the two followers restart with different zxids and the
    # one holding the create wins the election whatever its sid (seen in CI: "sid 1
    # leads after the orphaning, expected 2", three elections in a row).
    wait_same_zxid(members, tag)
    # Applied is not yet logged: a follower applies a txn the others committed while
    # its own append may still wait behind an fsync (seen: a keel follower that had
    # applied all three txns restarted with none logged). Let the logs catch up.
    time.sleep(1.0)
    try:
        for f in followers:
            stop(f.pid())
        unacked = ["/sync/%s-%d" % (tag, i) for i in range(5)]
        pending = [zk.create_async(p, b"never committed") for p in unacked]
        # Long enough for the old leader to log them (group commit), shorter than
        # syncLimit (it keeps leading meanwhile).
        time.sleep(1.0)
        check(not any(p.ready() and p.successful() for p in pending),
              "%s: a write was acknowledged with both followers stopped" % tag)
        old.kill9()
        # The proposals wait in the stopped followers' socket buffers: resumed, they
        # would log them and the new leader would commit them (Zab may commit what a
        # dead leader proposed). Killed instead, they restart from their logs, which
        # lack them: only the old leader holds them.
        for f in followers:
            f.kill9()
    finally:
        for f in followers:
            try:
                os.kill(f.pid(), signal.SIGCONT)
            except ProcessLookupError:
                pass
    threading.Thread(target=lambda: (zk.stop(), zk.close()), daemon=True).start()
    time.sleep(0.3)
    for f in followers:
        f.start()
    new, _ = wait_roles(followers)
    return old, new, unacked


def trunc(members, acked):
    old, new, unacked = orphan_old_leader(members, acked, "trunc")
    got, frm, to, diff_n, _ = restart_and_sync(members, old, new, "TRUNC")
    check(frm > to and frm >> 32 == to >> 32,
          "TRUNC: from %#x to %#x does not drop txns of one old epoch" % (frm, to))
    write(members, "after-trunc", 50, acked)
    n = agree(members, acked, absent=unacked)
    return "TRUNC: old leader sid %d (%d txns logged alone) rejoined: new leader sid %d " \
           "logged %s from zxid %#x to %#x; zk_diff_count %d; the %d unacknowledged " \
           "writes on no member; %d znodes equal on all members" \
           % (old.sid, frm - to, new.sid, got, frm, to, diff_n, len(unacked), n)


def cross(members, acked):
    """As TRUNC, but the new leader writes in its epoch before the old one returns:
    the old leader's last zxid is now inside the new leader's log, followed by a txn of
    a later epoch, and a TRUNC may not cross an epoch boundary (ZooKeeper's
    LearnerHandler: "Cannot send TRUNC to peer sid ... peer zxid is from different
    epoch"): it gets SNAP."""
    old, new, unacked = orphan_old_leader(members, acked, "cross")
    live = [m for m in members if m is not old]
    write(live, "cross-epoch", 20, acked)
    got, frm, to, _, snap_n = restart_and_sync(members, old, new, "CROSS")
    check(frm >> 32 < to >> 32, "CROSS: from %#x to %#x is not across epochs" % (frm, to))
    n = agree(members, acked, absent=unacked)
    return "CROSS: old leader sid %d (txns logged alone up to %#x) rejoined after the new " \
           "leader sid %d wrote in its epoch: it logged %s from zxid %#x to %#x; " \
           "zk_snap_count %d; %d znodes equal on all members" \
           % (old.sid, frm, new.sid, got, frm, to, snap_n, n)


def fuzzy(members, acked):
    from kazoo.security import make_digest_acl, make_acl
    leader, followers = wait_roles(members)
    zk = client([leader])
    zk.ensure_path("/fuzzy")
    # A quota on /fuzzy (as zkCli's setquota writes it): its usage must follow every
    # write on every member, the learner's too (recounted after it loads the fuzzy
    # stream, as ZooKeeper's DataTree.setupQuota does, then moved by the replayed txns).
    zk.ensure_path("/zookeeper/quota/fuzzy")
    zk.create("/zookeeper/quota/fuzzy/zookeeper_limits", b"count=100000,bytes=-1")
    zk.create("/zookeeper/quota/fuzzy/zookeeper_stats", b"count=0,bytes=0")
    big = b"x" * 20000
    fill = ["/fuzzy/n%d" % i for i in range(2000)]
    for start in range(0, len(fill), 250):
        pending = [zk.create_async(p, big) for p in fill[start:start + 250]]
        for p in pending:
            p.get(timeout=30)
    for p in fill:
        acked[p] = big
    f = followers[0]
    f.kill9()
    time.sleep(0.5)
    wipe(f)
    done = threading.Event()
    deleted, errors, count = set(), [], [0]

    def acl(i):
        # Readable by anyone (the dumps read it), and new to the leader each time.
        return [make_acl("world", "anyone", all=True),
                make_digest_acl("u%d" % i, "p", all=True)]

    def writer():
        # Pipelined, 64 in flight on one session (applied in order), so that txns
        # commit every few ms while the leader writes the SNAP's steps.
        i, inflight = 0, []
        try:
            while not done.is_set() or inflight:
                if len(inflight) >= 64 or (done.is_set() and inflight):
                    kind, path, data, r = inflight.pop(0)
                    r.get(timeout=30)
                    if kind == "delete":
                        acked.pop(path, None)
                        deleted.add(path)
                    elif kind != "acl":
                        acked[path] = data
                    continue
                i += 1
                path = fill[(i * 7919) % len(fill)]
                if i % 4 == 0:
                    data = b"v%d" % i
                    inflight.append(("set", path, data, zk.set_async(path, data)))
                elif i % 4 == 1:
                    c, data = "/fuzzy/c%d" % i, b"c%d" % i
                    inflight.append(("create", c, data, zk.create_async(c, data, acl=acl(i))))
                elif i % 4 == 2:
                    inflight.append(("acl", path, None, zk.set_acls_async(path, acl(i))))
                elif i > 200:
                    c = "/fuzzy/c%d" % (i - 198)
                    inflight.append(("delete", c, None, zk.delete_async(c)))
                count[0] = i
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    offset = log_size(leader)
    t = threading.Thread(target=writer, daemon=True)
    t.start()
    try:
        time.sleep(0.5)
        got, frm, to, _, snap_n = restart_and_sync(members, f, leader, "FUZZY")
        time.sleep(1.0)
    finally:
        done.set()
        t.join(timeout=30)
        threading.Thread(target=lambda: (zk.stop(), zk.close()), daemon=True).start()
    check(not errors, "FUZZY: the writer failed: %s" % errors)
    with open(os.path.join(leader.dir, "log"), "rb") as fh:
        fh.seek(offset)
        written = [m for m in SNAP_WRITTEN.findall(fh.read().decode(errors="replace"))
                   if int(m[0]) == f.sid]
    check(len(written) == 1, "FUZZY: the leader logged %d written SNAPs to sid %d: %s"
          % (len(written), f.sid, written))
    _, zxid, applied, steps, held = written[0]
    zxid, applied, steps, held = int(zxid, 16), int(applied, 16), int(steps), int(held)
    check(steps > 1, "FUZZY: the SNAP took %d step" % steps)
    check(applied > zxid, "FUZZY: no txn applied while the SNAP was written (%#x, %#x)"
          % (zxid, applied))
    dumps = {}
    n = agree(members, acked, absent=deleted, dumps=dumps)
    problems = quota_usage_problems(dumps, "/fuzzy")
    check(not problems, "FUZZY: quota usage: " + "; ".join(problems))
    usage = dumps[leader.sid]["/zookeeper/quota/fuzzy/zookeeper_stats"][0].decode()
    return "FUZZY: wiped sid %d rejoined under load: leader sid %d logged %s from zxid %#x " \
           "to %#x, written in %d steps with %d txns applied meanwhile (%#x to %#x) and %d " \
           "messages held behind it; %d client writes; %d znodes equal on all members; " \
           "quota usage of /fuzzy %s on each, as its tree" \
           % (f.sid, leader.sid, got, frm, to, steps, applied - zxid, zxid, applied, held,
              count[0], n, usage)


def main():
    logging.basicConfig(level=logging.CRITICAL)
    root = sys.argv[1]
    members = [Member(root, i) for i in MEMBERS]
    if not wait_serving(members):
        print("sync: the ensemble is not serving at the start")
        return 1
    acked = {}
    done = []
    t0 = time.monotonic()
    scenarios = (snap, diff, trunc, cross, fuzzy)
    only = os.environ.get("SYNC_ONLY")  # e.g. SYNC_ONLY=FUZZY: one scenario
    if only:
        scenarios = tuple(s for s in scenarios if s.__name__.upper() in only.split(","))
    for scenario in scenarios:
        try:
            line = scenario(members, acked)
        except Failed as e:
            print("sync: FAILED: %s" % e)
            print("sync: %d of %d scenarios passed (%s) before the failure"
                  % (len(done), len(scenarios), " ".join(done)))
            return 1
        print("sync: " + line, flush=True)
        done.append(scenario.__name__.upper())
    print("sync: %d of %d rejoins by the expected mode (%s), %d acknowledged writes on "
          "every member, dumps equal; %.0f s"
          % (len(done), len(scenarios), ", ".join(k if k == EXPECT[k] else "%s by %s" % (k, EXPECT[k]) for k in done),
             len(acked), time.monotonic() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())

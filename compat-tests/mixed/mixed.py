"""Write load on a mixed keel / ZooKeeper ensemble with the leader on each kind in turn
(issue 17 a, a first form).

Usage: mixed.py ENSEMBLE_DIR [HOLD_S]

ENSEMBLE_DIR is one that mixed/lib.sh start_mixed started (m1..m3; a member whose `cmd`
is ensemble/zk-exec.sh runs ZooKeeper, any other keel). Four Kazoo clients write
without pause (chaos.py's Writer; client i first connected to member i % 3). Phases:
the leader of the kind that leads first, then of the other kind, then of the first
again; to move to the next phase the leader is killed (-9) and restarted on its dataDir
until a member of the wanted kind leads. In each phase, under load for HOLD_S (4) s,
a follower of the kind that does not lead is killed, its dataDir wiped (myid kept) and
restarted, so it rejoins by SNAP from the other kind's leader (the leader's snapshot
stream), and then the other follower is killed and restarted on its dataDir (DIFF or
SNAP, as the leader chooses). Then every acknowledged write must be on every member
and full dumps of the members (paths, data, ACLs, every Stat field) identical.

Prints one line per phase and a summary; exits 1 on any lost write or difference.
"""

import logging
import os
import shutil
import sys
import time

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ensemble"))
from chaos import (mode, serving_members, start_writers,  # noqa: E402
                   stop_and_compare, wait_serving)


def kind(m):
    return "zk" if m.cmd.endswith("/zk-exec.sh") else "keel"


def leader_of(members):
    return next((m for m in members if mode(m.port) == "leader"), None)


def restart(members, m, wipe=False):
    """kill -9 member m, wipe its dataDir but for myid when asked, start it again and
    wait until the ensemble serves with three members."""
    m.kill9()
    time.sleep(0.5)
    if wipe:
        data = os.path.join(m.dir, "data")
        for name in os.listdir(data):
            if name != "myid":
                p = os.path.join(data, name)
                shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
    m.start()
    return wait_serving(members)


def lead_with(members, want, tries=12):
    """Kill the leader until a member of kind `want` leads; that leader or None."""
    for _ in range(tries):
        leader = leader_of(members)
        if leader is not None and kind(leader) == want:
            return leader
        if leader is None:
            time.sleep(0.5)
            continue
        if not restart(members, leader):
            return None
    return None


def acked_since(writers, t):
    n = 0
    for w in writers:
        with w.lock:
            n += sum(1 for a in w.ack_times if a > t)
    return n


def main():
    logging.basicConfig(level=logging.ERROR)
    root = sys.argv[1]
    hold = float(sys.argv[2]) if len(sys.argv) > 2 else 4.0
    members = serving_members(root, "mixed")
    if members is None:
        return 1
    print("mixed: members %s" % ", ".join(
        "sid %d %s" % (m.sid, kind(m)) for m in members), flush=True)
    writers = start_writers(members)
    time.sleep(1)
    first = kind(leader_of(members) or members[0])
    other = "keel" if first == "zk" else "zk"
    failed = False
    phases = 0
    for want in (first, other, first):
        t0 = time.monotonic()
        leader = lead_with(members, want)
        if leader is None:
            print("mixed: no %s member came to lead" % want)
            failed = True
            break
        followers = [m for m in members if m is not leader]
        # The follower of the other kind (the first follower if both are of the
        # leader's kind) rejoins by SNAP, the other on its dataDir.
        followers.sort(key=lambda m: kind(m) == want)
        ok = restart(members, followers[0], wipe=True) and restart(members, followers[1])
        time.sleep(hold)
        if leader_of(members) is not leader:
            print("mixed: the %s leader sid %d lost its lead during the phase"
                  % (want, leader.sid))
        n = acked_since(writers, t0)
        print("mixed: phase %d: %s leader sid %d; sid %d (%s) rejoined with a wiped "
              "dataDir, sid %d (%s) on its own; %d writes acknowledged in the phase%s"
              % (phases + 1, want, leader.sid, followers[0].sid, kind(followers[0]),
                 followers[1].sid, kind(followers[1]), n,
                 "" if ok else "; the ensemble did not serve again within 60 s"),
              flush=True)
        if not ok or n == 0:
            failed = True
            break
        phases += 1
    acked, dumps, lost, differ = stop_and_compare(writers, members, "mixed")
    print("mixed: %d phases (leader kinds %s, %s, %s), %d writes acknowledged, %d lost, "
          "%d of %d member dumps differ from sid 1's (%d znodes each)"
          % (phases, first, other, first, len(acked), lost, differ, len(dumps) - 1,
             len(dumps[1])))
    return 1 if failed or lost or differ or phases < 3 else 0


if __name__ == "__main__":
    sys.exit(main())

"""The rolling migration under load (issue 17 b): a running ZooKeeper ensemble has its
members replaced by keel one at a time, then replaced back by ZooKeeper.

Usage: rolling.py ENSEMBLE_DIR KEEL_BIN ZK_EXEC

ENSEMBLE_DIR is a 3-member ensemble of ZooKeeper members that mixed/lib.sh start_mixed
started (m1..m3). Four Kazoo clients write without pause (chaos.py's Writer; client i
first connected to member i % 3); each also holds an ephemeral znode and a data watch.
Steps: member 1, 2, 3 replaced by keel, then 1, 2, 3 by ZooKeeper again; a replacement
stops the member (SIGTERM, as an operator does), empties its dataDir but for myid (the
new member syncs by SNAP from the leader, of either kind), starts the other program on
the same zoo.cfg and server id, and waits until the ensemble serves with three members.
After each step every client's watched znode is set once, and each watch must fire
exactly once (Kazoo re-registers watches on the member it moves to).

Then: no client's session expired (each holds the session it started with, and its
ephemeral names that session as ephemeralOwner on every member), every acknowledged
write is on every member, and the full dumps (paths, data, ACLs, every Stat field) of
the three members are identical. Prints the write gap of each step (the longest pause
between two acknowledged writes of any client while the step ran) and a summary;
exits 1 on any failure.
"""

import logging
import os
import shutil
import signal
import sys
import time

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ensemble"))
from chaos import (Writer, agreement, client_hosts, dump,  # noqa: E402
                   serving_members, start_writers, wait_serving)

from kazoo.client import KazooClient  # noqa: E402
from kazoo.protocol.states import KazooState  # noqa: E402

WATCH_WAIT_S = 15.0


class Client(Writer):
    """A Writer that also holds an ephemeral and a data watch, and notes session loss."""

    def __init__(self, i, hosts):
        super().__init__(i, hosts)
        self.lost = []
        self.fired = []
        self.client.add_listener(self._state)

    def _state(self, state):
        if state == KazooState.LOST:
            self.lost.append(time.monotonic())

    def begin(self):
        self.client.start(timeout=30)
        self.session = self.client.client_id[0]
        self.client.create("/rolling/eph-%d" % self.i, b"", ephemeral=True)
        self.client.ensure_path("/rolling/w-%d" % self.i)
        self.arm()
        self.start()

    def arm(self):
        self.client.exists("/rolling/w-%d" % self.i, watch=self.fired.append)


def stop(m, timeout_s=15.0):
    """SIGTERM the member; False if it had to be killed after timeout_s."""
    try:
        pid = m.pid()
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        try:
            # A member this script started is its child: reap it (a zombie would
            # still answer kill 0).
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
        time.sleep(0.1)
    print("rolling: sid %d did not exit within %.0f s of SIGTERM; killed" % (m.sid, timeout_s))
    m.kill9()
    return False


def replace(members, m, cmd):
    """Stop member m, empty its dataDir (myid kept), start `cmd` on its zoo.cfg; True
    when m stopped on SIGTERM and the ensemble serves again."""
    stopped = stop(m)
    data = os.path.join(m.dir, "data")
    for name in os.listdir(data):
        if name != "myid":
            p = os.path.join(data, name)
            shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
    with open(os.path.join(m.dir, "cmd"), "w") as f:
        f.write(cmd + "\n")
    m.cmd = cmd
    m.start()
    return wait_serving(members, 90) and stopped


def longest_gap(clients, t0, t1):
    times = []
    for c in clients:
        with c.lock:
            times.extend(a for a in c.ack_times if t0 <= a <= t1)
    times.sort()
    if len(times) < 2:
        return t1 - t0
    return max(b - a for a, b in zip([t0] + times, times + [t1]))


def main():
    logging.basicConfig(level=logging.ERROR)
    root, keel_bin, zk_exec = sys.argv[1:4]
    members = serving_members(root, "rolling", ("/chaos", "/rolling"))
    if members is None:
        return 1
    setup = KazooClient(hosts=client_hosts(members, 0))
    setup.start(timeout=30)
    clients = start_writers(members, Client)
    time.sleep(2)
    steps = [(m, keel_bin, "keel") for m in members] + [(m, zk_exec, "zk") for m in members]
    failed = False
    for n, (m, cmd, kind) in enumerate(steps, 1):
        t0 = time.monotonic()
        ok = replace(members, m, cmd)
        time.sleep(1)
        t1 = time.monotonic()
        gap = longest_gap(clients, t0, t1)
        kinds = ",".join(
            "keel" if x.cmd == keel_bin else "zk" for x in members)
        # One setData per watched znode: each client's watch fires once.
        for c in clients:
            setup.set("/rolling/w-%d" % c.i, b"%d" % n)
        deadline = time.monotonic() + WATCH_WAIT_S
        while time.monotonic() < deadline and any(len(c.fired) < n for c in clients):
            time.sleep(0.1)
        time.sleep(0.5)
        watches = [len(c.fired) for c in clients]
        for c in clients:
            if len(c.fired) == n:
                c.arm()
        print("rolling: step %d: sid %d replaced by %s (ensemble %s) in %.1f s; "
              "write gap %.0f ms; watches fired %s (want %d each)%s"
              % (n, m.sid, kind, kinds, t1 - t0, gap * 1000, watches, n,
                 "" if ok else "; FAILED: see above, or the ensemble did not serve again within 90 s"),
              flush=True)
        if not ok or any(w != n for w in watches):
            failed = True
            break
    for c in clients:
        c.stop = True
    for c in clients:
        c.join(timeout=30)
    sessions = {c.i: c.client.client_id[0] for c in clients}
    expired = [c.i for c in clients if c.lost or sessions[c.i] != c.session]
    acked = {}
    for c in clients:
        acked.update(c.acked)
    dumps = {m.sid: dump(m.port) for m in members}
    problems, lost, differ = agreement(dumps, acked)
    for sid, d in dumps.items():
        for c in clients:
            st = d.get("/rolling/eph-%d" % c.i)
            owner = st[2][7] if st else None
            if owner != c.session:
                problems.append("member %d: /rolling/eph-%d has ephemeralOwner %s, "
                                "not session %#x" % (sid, c.i, owner, c.session))
    for c in clients:
        c.client.stop()
    setup.stop()
    for p in problems:
        print("rolling: " + p)
    print("rolling: %d of %d steps, %d writes acknowledged, %d lost, %d of %d member "
          "dumps differ from sid 1's, sessions expired: %s"
          % (n if not failed else n - 1, len(steps), len(acked), lost, differ,
             len(dumps) - 1, expired or "none"))
    return 1 if failed or lost or differ or expired or problems else 0


if __name__ == "__main__":
    sys.exit(main())

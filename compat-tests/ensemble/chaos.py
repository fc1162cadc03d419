"""Kill -9 the leader of a 3-member ensemble under write load, again and again.

Usage: chaos.py ENSEMBLE_DIR CYCLES

ENSEMBLE_DIR is one that lib.sh start_ensemble started (m1..m3, each with its
zoo.cfg, port, pid, log and the command that runs it in `cmd`). Four Kazoo clients
write without pause, client i connected first to member i % 3 (each has every member
in its list, so it moves on when its member dies). Each cycle: find the leader by
`srvr`, kill -9 it, measure the write gap (the longest pause between two acknowledged
writes of any clients, from 2 s before the kill on), restart the member on its own
dataDir and wait until it serves again. Then every acknowledged write must be on every
member, and full dumps of the members (paths, data, ACLs, every Stat field, read after
a `sync` through a client of that member alone) must be identical.

Prints one line per cycle and a summary; exits 1 on any lost write or difference.
"""

import logging
import os
import signal
import subprocess
import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NodeExistsError
from kazoo.retry import KazooRetry
from fourlw import four_letter, mode  # noqa: E402,F401 (four_letter: re-exported for the scripts that import it from here)

MEMBERS = (1, 2, 3)


class Member:
    def __init__(self, root, i):
        self.sid = i
        self.dir = os.path.join(root, "m%d" % i)
        self.port = int(open(os.path.join(self.dir, "port")).read())
        self.cmd = open(os.path.join(self.dir, "cmd")).read().strip()

    def pid(self):
        return int(open(os.path.join(self.dir, "pid")).read())

    def kill9(self):
        try:
            os.kill(self.pid(), signal.SIGKILL)
        except ProcessLookupError:
            pass

    def start(self):
        log = open(os.path.join(self.dir, "log"), "ab")
        p = subprocess.Popen(
            [self.cmd, os.path.join(self.dir, "zoo.cfg")],
            stdout=log, stderr=log, start_new_session=True)
        with open(os.path.join(self.dir, "pid"), "w") as f:
            f.write(str(p.pid))


class Writer(threading.Thread):
    """Creates /chaos/c<i>-<n> without pause; remembers what was acknowledged."""

    def __init__(self, i, hosts):
        super().__init__(daemon=True)
        self.i = i
        self.client = KazooClient(hosts=hosts, randomize_hosts=False, timeout=10.0,
                                  connection_retry=KazooRetry(max_tries=-1, max_delay=0.5))
        self.acked = {}
        self.ack_times = []
        self.lock = threading.Lock()
        self.stop = False

    def begin(self):
        """Starts writing (a subclass may set up more first)."""
        self.start()

    def run(self):
        self.client.start(timeout=30)
        n = 0
        while not self.stop:
            path = "/chaos/c%d-%d" % (self.i, n)
            data = ("%d:%d" % (self.i, n)).encode()
            n += 1
            try:
                self.client.create(path, data)
            except NodeExistsError:
                continue
            except KazooException:
                # Outcome unknown (the connection broke in flight): not acknowledged.
                time.sleep(0.05)
                continue
            now = time.monotonic()
            with self.lock:
                self.acked[path] = data
                self.ack_times.append(now)


def dump(port):
    """Every znode of the member on `port`: path -> (data, acl, stat), after a sync."""
    zk = KazooClient(hosts="127.0.0.1:%d" % port, timeout=10.0)
    zk.start(timeout=30)
    try:
        zk.sync("/")
        out = {}
        stack = ["/"]
        while stack:
            path = stack.pop()
            data, stat = zk.get(path)
            acl, _ = zk.get_acls(path)
            stat = tuple(stat)
            if path == "/zookeeper/config":
                # Each member sets this znode's times when it loads its config
                # (ZooKeeper's members differ here too).
                stat = stat[:2] + stat[4:]
            out[path] = (data, [(a.perms, a.id.scheme, a.id.id) for a in acl], stat)
            for child in zk.get_children(path):
                stack.append(path.rstrip("/") + "/" + child)
        return out
    finally:
        zk.stop()
        zk.close()


def agreement(dumps, acked, absent=()):
    """What is wrong with the members' dumps (sid -> dump()): acknowledged writes
    (path -> data) a member lacks, paths of `absent` a member holds, members whose dump
    differs from the first one's. Returns (problems, lost writes, differing members)."""
    problems, lost, differ = [], 0, 0
    for sid, d in dumps.items():
        missing = [p for p, data in acked.items() if p not in d or d[p][0] != data]
        if missing:
            lost += len(missing)
            problems.append("member %d lacks %d acknowledged writes, e.g. %s"
                            % (sid, len(missing), missing[:3]))
        present = [p for p in absent if p in d]
        if present:
            problems.append("member %d holds writes never acknowledged: %s"
                            % (sid, present[:3]))
    sids = sorted(dumps)
    for sid in sids[1:]:
        a, b = dumps[sids[0]], dumps[sid]
        diff = sorted(p for p in set(a) | set(b) if a.get(p) != b.get(p))
        if diff:
            differ += 1
            problems.append("members %d and %d differ at %d znodes, e.g. %s: %s vs %s"
                            % (sids[0], sid, len(diff), diff[0], a.get(diff[0]),
                               b.get(diff[0])))
    return problems, lost, differ


def stop_and_compare(writers, members, tag):
    """Stops `writers`, dumps every member and checks them against each other and
    against every acknowledged write ([`agreement`]), printing each problem under
    `tag`. Returns (acked writes, dumps by sid, writes lost, dumps that differ)."""
    for w in writers:
        w.stop = True
    for w in writers:
        w.join(timeout=30)
        w.client.stop()
    acked = {}
    for w in writers:
        acked.update(w.acked)
    dumps = {m.sid: dump(m.port) for m in members}
    problems, lost, differ = agreement(dumps, acked)
    for p in problems:
        print(tag + ": " + p)
    return acked, dumps, lost, differ


def wait_serving(members, deadline_s=60):
    t0 = time.monotonic()
    while time.monotonic() - t0 < deadline_s:
        modes = sorted(mode(m.port) for m in members)
        if modes == ["follower", "follower", "leader"]:
            return True
        time.sleep(0.2)
    return False


def client_hosts(members, i):
    """Client i's connect string: every member, member i % n first."""
    order = [members[(i + k) % len(members)] for k in range(len(members))]
    return ",".join("127.0.0.1:%d" % m.port for m in order)


def start_writers(members, make=None, n=4):
    """n writers (`make(i, hosts)`, Writer by default), client i with member i % 3
    first in its connect string, each begun."""
    writers = [(make or Writer)(i, client_hosts(members, i)) for i in range(n)]
    for w in writers:
        w.begin()
    return writers


def serving_members(root, who, paths=("/chaos",)):
    """The members of the ensemble in `root` once it serves, with `paths` created;
    None (after printing why, `who` first) when it does not serve."""
    members = [Member(root, i) for i in MEMBERS]
    if not wait_serving(members):
        print("%s: the ensemble is not serving at the start" % who)
        return None
    setup = KazooClient(hosts=client_hosts(members, 0))
    setup.start(timeout=30)
    for p in paths:
        setup.ensure_path(p)
    setup.stop()
    setup.close()
    return members


def main():
    # A killed member makes every client log its reconnects; only errors matter here.
    logging.basicConfig(level=logging.ERROR)
    root, cycles = sys.argv[1], int(sys.argv[2])
    members = serving_members(root, "chaos")
    if members is None:
        return 1
    writers = start_writers(members)
    time.sleep(2)
    gaps = []
    failed = False
    for cycle in range(1, cycles + 1):
        leader = next((m for m in members if mode(m.port) == "leader"), None)
        if leader is None:
            print("chaos: cycle %d: no leader" % cycle)
            failed = True
            break
        killed_at = time.monotonic()
        leader.kill9()
        time.sleep(0.5)
        leader.start()
        if not wait_serving(members):
            print("chaos: cycle %d: the ensemble did not serve again within 60 s" % cycle)
            failed = True
            break
        time.sleep(1.5)
        times = []
        for w in writers:
            with w.lock:
                times += [t for t in w.ack_times if t > killed_at - 2.0]
        times.sort()
        if not any(t > killed_at for t in times):
            print("chaos: cycle %d: no write acknowledged after the kill" % cycle)
            failed = True
            break
        # The longest pause between two acknowledged writes around the kill: replies
        # to writes committed just before it may still arrive after it.
        gap_ms = max(b - a for a, b in zip(times, times[1:])) * 1000
        gaps.append(gap_ms)
        print("chaos: cycle %d: killed member on port %d (leader); write gap %.0f ms"
              % (cycle, leader.port, gap_ms), flush=True)
    acked, dumps, lost, differ = stop_and_compare(writers, members, "chaos")
    gaps_sorted = sorted(gaps)
    median = gaps_sorted[len(gaps_sorted) // 2] if gaps_sorted else float("nan")
    print("chaos: %d cycles, %d writes acknowledged, %d lost, %d member dumps differ; "
          "write gap median %.0f ms, max %.0f ms"
          % (len(gaps), len(acked), lost, differ, median, max(gaps, default=float("nan"))))
    return 1 if failed or lost or differ or len(gaps) < cycles else 0


if __name__ == "__main__":
    sys.exit(main())

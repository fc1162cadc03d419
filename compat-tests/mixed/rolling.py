"""The rolling migration under load (issue 17 b): a running ZooKeeper ensemble has its
members replaced by keel one at a time, then replaced back by ZooKeeper.

Usage: rolling.py [--keep-data] ENSEMBLE_DIR KEEL_BIN ZK_EXEC

ENSEMBLE_DIR is a 3-member ensemble of ZooKeeper members that mixed/lib.sh start_mixed
started (m1..m3). Four Kazoo clients write without pause (chaos.py's Writer; client i
first connected to member i % 3); each also holds an ephemeral znode and a data watch.
Steps: member 1, 2, 3 replaced by keel, then 1, 2, 3 by ZooKeeper again; a replacement
stops the member (SIGTERM, as an operator does), empties its dataDir but for myid (the
new member syncs by SNAP from the leader, of either kind), starts the other program on
the same zoo.cfg and server id, and waits until the ensemble serves with three members.
After each step every client's watched znode is set once, and each watch must fire
exactly once (Kazoo re-registers watches on the member it moves to).

With --keep-data, each keel member starts on the dataDir its ZooKeeper predecessor left
(keel converts it in place at start-up: issue 17 item 3), so it rejoins by DIFF (or
TRUNC) rather than SNAP: the member's log must say it converted the dataDir, and the
leader's log (either kind's words: syncdiff.py syncs) must show that learner synced by
DIFF or TRUNC (BALLAST_NODES znodes of BALLAST_BYTES each are written first:
rolling.sh says why). One SNAP is ZooKeeper's rule and accepted (`orphan_snap`): a
leader stopped under load can have logged proposals its followers never got; when it
rejoins after the new leader wrote in the new epoch, ZooKeeper's LearnerHandler
(queueCommittedProposals) cannot TRUNC it across the epoch and sends a SNAP
(ensemble/sync.py's CROSS case makes it happen on purpose). A keel leader's SNAP is
accepted on facts from the two members' own logs besides the sync line: the
member's converted last zxid is past the leader's last zxid when it was elected, in
the same old epoch, and the leader's zxid at the sync is of a newer epoch. A
ZooKeeper leader's, when it logged its own "Cannot send TRUNC" warning for the
member. The replaced member starts once the other two serve with a
leader, so that it joins as a follower (with the newest zxid it could otherwise win the
election, and then no sync of it would show). The way back still empties the dataDir:
ZooKeeper cannot read keel's store, and syncs by SNAP.

Then: no client's session expired (each holds the session it started with, and its
ephemeral names that session as ephemeralOwner on every member), every acknowledged
write is on every member, and the full dumps (paths, data, ACLs, every Stat field) of
the three members are identical. Prints the write gap of each step (the longest pause
between two acknowledged writes of any client while the step ran) and a summary;
exits 1 on any failure.
"""

import logging
import os
import re
import shutil
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "ensemble"))
sys.path.insert(0, HERE)
from chaos import (Writer, agreement, client_hosts, dump,  # noqa: E402
                   serving_members, start_writers, wait_serving)

from syncdiff import syncs  # noqa: E402
from sync import Failed, log_size, wait_roles  # noqa: E402

from kazoo.client import KazooClient  # noqa: E402
from kazoo.protocol.states import KazooState  # noqa: E402

WATCH_WAIT_S = 15.0
# --keep-data: znodes of ballast written first, bytes each (see rolling.sh).
BALLAST_NODES, BALLAST_BYTES = 16, 256 * 1024


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


def replace(members, m, cmd, keep_data=False):
    """Stop member m, empty its dataDir (myid kept) unless keep_data, start `cmd` on its
    zoo.cfg; True when m stopped on SIGTERM and the ensemble serves again. With
    keep_data, m starts only once the other two serve with a leader (so it follows)."""
    stopped = stop(m)
    data = os.path.join(m.dir, "data")
    if not keep_data:
        for name in os.listdir(data):
            if name != "myid":
                p = os.path.join(data, name)
                shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
    else:
        try:
            wait_roles([x for x in members if x is not m], 60)
        except Failed as e:
            print("rolling: %s" % e)
            return False
    with open(os.path.join(m.dir, "cmd"), "w") as f:
        f.write(cmd + "\n")
    m.cmd = cmd
    m.start()
    return wait_serving(members, 90) and stopped


CONVERTED = re.compile(r'converted ZooKeeper\'s dataDir in place .*last_zxid="?(0x[0-9a-f]+)')
LEADING = re.compile(r'role change: sid (\d+) LEADING .*last_zxid="?(0x[0-9a-f]+)')
ZK_NO_TRUNC = re.compile(r"Cannot send TRUNC to peer sid: (\d+) peer zxid is from different epoch")


def zxid_text(zxid):
    return "%#x" % zxid if zxid is not None else "no zxid logged"


def orphan_snap(sync, m_last, leader_last):
    """True when `sync` (mode, peer zxid, leader's zxid) is the SNAP ZooKeeper's leader
    sends a learner holding txns of the old epoch past the leader's history, once the
    leader wrote in a newer epoch (no TRUNC may cross an epoch: LearnerHandler
    queueCommittedProposals). `m_last` is the learner's last zxid as it converted its
    dataDir; `leader_last` the leader's when it was elected (LEADING), None if it was
    not elected in this step."""
    mode, peer, upto = sync
    return (mode == "SNAP" and m_last is not None and leader_last is not None
            and peer == m_last and m_last >> 32 == leader_last >> 32
            and m_last > leader_last and upto >> 32 > m_last >> 32)


def check_sync(members, m, offsets):
    """With --keep-data: the problems (a list) with how m rejoined: its log must say it
    converted ZooKeeper's dataDir, and the leader's log, since `offsets` (log sizes by
    sid before the step), must show one sync of m, by DIFF or TRUNC. Also returns the
    leader's sid and the mode."""
    time.sleep(0.5)  # the decision is logged before UPTODATE; let the log be flushed
    with open(os.path.join(m.dir, "log"), "rb") as f:
        f.seek(offsets[m.sid])
        text = f.read().decode(errors="replace")
    converted = "converted ZooKeeper's dataDir in place" in text
    g = CONVERTED.search(text)
    m_last = int(g[1], 16) if g else None
    try:
        leader, _ = wait_roles(members, 10)
    except Failed as e:
        return [str(e)], None, None
    got = syncs(leader, offsets[leader.sid], m.sid)
    with open(os.path.join(leader.dir, "log"), "rb") as f:
        f.seek(offsets[leader.sid])
        leader_text = f.read().decode(errors="replace")
    elected = [int(g[2], 16) for g in LEADING.finditer(leader_text) if int(g[1]) == leader.sid]
    leader_last = elected[-1] if elected else None
    zk_no_trunc = any(int(g[1]) == m.sid for g in ZK_NO_TRUNC.finditer(leader_text))
    problems = [] if converted else ["sid %d did not convert a ZooKeeper dataDir (no \"converted "
                                     "ZooKeeper's dataDir in place\" in its log)" % m.sid]
    if leader is m:
        problems.append("sid %d leads: it was not synced" % m.sid)
    elif len(got) == 1 and got[0][0] == "SNAP" and zk_no_trunc:
        print("rolling: the ZooKeeper leader sid %d logged that it cannot TRUNC sid %d across "
              "an epoch (it held txns nobody else logged): SNAP" % (leader.sid, m.sid), flush=True)
        return problems, leader.sid, "SNAP (orphaned txns)"
    elif len(got) == 1 and orphan_snap(got[0], m_last, leader_last):
        print("rolling: sid %d held txns up to %#x that sid %d (last zxid %#x when elected) "
              "never logged, and sid %d synced it at %#x, in a newer epoch: SNAP, as "
              "ZooKeeper's leader sends it (no TRUNC across an epoch)"
              % (m.sid, m_last, leader.sid, leader_last, leader.sid, got[0][2]), flush=True)
        return problems, leader.sid, "SNAP (orphaned txns)"
    elif len(got) != 1 or got[0][0] not in ("DIFF", "TRUNC"):
        problems.append("the leader sid %d logged syncs of sid %d %s; wanted one DIFF or TRUNC "
                        "(sid %d converted up to %s; sid %d elected with %s)"
                        % (leader.sid, m.sid, got, m.sid, zxid_text(m_last), leader.sid,
                           zxid_text(leader_last)))
    return problems, leader.sid, got[-1][0] if got else None


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
    args = sys.argv[1:]
    keep_data = args[:1] == ["--keep-data"]
    root, keel_bin, zk_exec = args[keep_data:keep_data + 3]
    members = serving_members(root, "rolling", ("/chaos", "/rolling"))
    if members is None:
        return 1
    setup = KazooClient(hosts=client_hosts(members, 0))
    setup.start(timeout=30)
    if keep_data:
        for i in range(BALLAST_NODES):
            setup.create("/rolling/ballast-%d" % i, bytes([i]) * BALLAST_BYTES)
    clients = start_writers(members, Client)
    time.sleep(2)
    steps = [(m, keel_bin, "keel") for m in members] + [(m, zk_exec, "zk") for m in members]
    failed = False
    for n, (m, cmd, kind) in enumerate(steps, 1):
        t0 = time.monotonic()
        offsets = {x.sid: log_size(x) for x in members}
        keep = keep_data and kind == "keel"
        ok = replace(members, m, cmd, keep)
        time.sleep(1)
        t1 = time.monotonic()
        sync_text, sync_problems = "", []
        if keep and ok:
            sync_problems, leader_sid, how = check_sync(members, m, offsets)
            sync_text = "; synced by %s from sid %s" % (how, leader_sid)
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
              "write gap %.0f ms; watches fired %s (want %d each)%s%s"
              % (n, m.sid, kind, kinds, t1 - t0, gap * 1000, watches, n, sync_text,
                 "" if ok else "; FAILED: see above, or the ensemble did not serve again within 90 s"),
              flush=True)
        for p in sync_problems:
            print("rolling: step %d: FAILED: %s" % (n, p), flush=True)
        if not ok or any(w != n for w in watches) or sync_problems:
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

"""What an ensemble with an observer shows a client and an operator (issue 15 item 7).

Usage: observer_check.py ENSEMBLE_DIR

ENSEMBLE_DIR is one that lib.sh start_ensemble started with ENSEMBLE_OBSERVERS=1
(participants m1..m3, observer m4). Prints one `key: value` line per fact, in a fixed
order and with nothing that differs by nature between two runs or two implementations,
so that the output for a ZooKeeper ensemble and for a keel ensemble on the same ports
can be compared with diff:
- srvr `Mode` of every member, and the observer's `conf` lines peerType and membership;
- every member's /zookeeper/config (data, dataVersion, mzxid);
- mntr of the leader: its learner and quorum figures (zk_learners, zk_synced_followers,
  zk_synced_non_voting_followers, zk_synced_observers, zk_pending_syncs, ...);
- a create through the observer is acknowledged and then read, data and Stat, on every
  member (each read after a sync through that member);
- with the two followers killed (kill -9), the leader and the observer alone are no
  quorum: a create through the observer is not acknowledged within 20 s, and no
  member serves after that (srvr says so).
"""

import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chaos import four_letter  # noqa: E402
from kazoo.client import KazooClient  # noqa: E402

LEADER_MNTR_KEYS = [
    "zk_server_state",
    "zk_learners",
    "zk_synced_followers",
    "zk_synced_non_voting_followers",
    "zk_synced_observers",
    "zk_pending_syncs",
    "zk_observer_master_id",
]


def word(port, cmd):
    return four_letter(port, cmd, timeout=5.0)


def mode(port):
    for line in word(port, "srvr").splitlines():
        if line.startswith("Mode: "):
            return line[len("Mode: "):]
    return word(port, "srvr").strip()


def stat_fields(stat):
    return "czxid=%#x mzxid=%#x version=%d dataLength=%d numChildren=%d owner=%#x" % (
        stat.czxid, stat.mzxid, stat.version, stat.dataLength, stat.numChildren,
        stat.ephemeralOwner)


def main():
    d = sys.argv[1]
    members = sorted(int(n[1:]) for n in os.listdir(d) if n.startswith("m"))
    port = {i: int(open(os.path.join(d, "m%d" % i, "port")).read()) for i in members}
    pid = {i: int(open(os.path.join(d, "m%d" % i, "pid")).read()) for i in members}
    modes = {i: mode(port[i]) for i in members}
    # Which participant wins the first election is timing (ZooKeeper's members, started
    # one after the other, sometimes elect sid 2): members are named by role, not sid.
    print("modes: %s" % " ".join(sorted(modes.values())))
    leader = next(i for i in members if modes[i] == "leader")
    observer = next(i for i in members if modes[i] == "observer")
    followers = [i for i in members if modes[i] == "follower"]
    print("the observer is member %d" % observer)
    name = {leader: "the leader", observer: "the observer"}
    name.update({f: "follower %d" % n for n, f in enumerate(followers, 1)})
    by_role = [leader] + followers + [observer]

    conf = word(port[observer], "conf").splitlines()
    for line in conf:
        if line.startswith("peerType=") or line.startswith("server.") or line.startswith("version="):
            print("observer conf: %s" % line)

    mntr = dict(l.split("\t", 1) for l in word(port[leader], "mntr").splitlines() if "\t" in l)
    for k in LEADER_MNTR_KEYS:
        print("leader mntr %s: %s" % (k, mntr.get(k, "<absent>")))
    omntr = dict(l.split("\t", 1) for l in word(port[observer], "mntr").splitlines() if "\t" in l)
    print("observer mntr zk_server_state: %s" % omntr.get("zk_server_state", "<absent>"))

    c = KazooClient("127.0.0.1:%d" % port[observer], timeout=10)
    c.start(timeout=15)
    path = c.create("/observed", b"through the observer")
    print("create through the observer: acknowledged %s" % path)
    for i in by_role:
        r = KazooClient("127.0.0.1:%d" % port[i], timeout=10)
        r.start(timeout=15)
        r.sync("/observed")
        data, stat = r.get("/observed")
        print("%s reads: %r %s" % (name[i], data, stat_fields(stat)))
        config, cstat = r.get("/zookeeper/config")
        print("%s /zookeeper/config: %r version=%d mzxid=%#x" % (
            name[i], config, cstat.version, cstat.mzxid))
        r.stop()
        r.close()

    for i in followers:
        os.kill(pid[i], signal.SIGKILL)
    t0 = time.time()
    try:
        c.create_async("/no-quorum", b"").get(timeout=20)
        print("create with two participants down: acknowledged (WRONG: no quorum)")
    except Exception as e:  # noqa: BLE001 - any failure is "not acknowledged"
        print("create with two participants down: not acknowledged", file=sys.stdout)
        print("  (%s after %.1f s)" % (type(e).__name__, time.time() - t0), file=sys.stderr)
    c.stop()
    c.close()
    # The leader gives up after syncLimit ticks without a quorum, the observer then.
    deadline = time.time() + 20
    while time.time() < deadline and any(mode(port[i]) in ("leader", "observer") for i in (leader, observer)):
        time.sleep(0.2)
    for i in (leader, observer):
        print("%s srvr after: %s" % (name[i], mode(port[i])))


if __name__ == "__main__":
    main()

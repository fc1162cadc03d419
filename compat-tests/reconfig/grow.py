"""Grow a 3-member ensemble to 5 and shrink it to 3 again under write load, one member
at a time (issue 18 check d).

Usage: grow.py ENSEMBLE_DIR BASE LOAD_S

ENSEMBLE_DIR is one that ../ensemble/lib.sh start_ensemble started with a dynamic
config file, reconfigEnabled=true, standaloneEnabled=false and the super digest of
super:test (grow.sh). Member i has client port BASE+10*(i-1)+1, quorum port +2,
election port +3; members 4 and 5 are started here, in ENSEMBLE_DIR/m4 and m5, with the
command of member 1 (DIR/m1/cmd).

Four Kazoo writers, each its own session, writer i connected to member 1 + (i-1) % 3
(members 1..3 stay in every configuration, so no writer has to move), each holding an
ephemeral /grow/e<i>, create /grow/c<i>-<n> and then set its data, without pause,
recording every acknowledged write. The steps, LOAD_S seconds of load after each:
  load     nothing changes (the baseline)
  add-4    start member 4 on the current config plus itself (as ZooKeeper's manual
           says for a joining server), `reconfig -add` it as super, wait until it is a
           follower
  add-5    the same for member 5
  remove-5 `reconfig -remove 5`, then stop member 5
  remove-4 the same for member 4
Each reconfig goes through a super client of member 1. Per step it prints the write gap
(the longest interval between two acknowledged writes of any writers, over the step)
and the throughput. At the end it stops the load and checks, reading through each of
members 1..3 alone after a sync:
  - every acknowledged write is present with its data (a write whose outcome is
    unknown, the connection having broken in flight, may or may not be there; a set
    with an unknown outcome leaves either data acceptable);
  - the members hold the same /grow children with the same data;
  - no session expired: no writer's state listener saw LOST, each still has the session
    it began with, and its ephemeral exists with that session as ephemeralOwner;
  - `config` (/zookeeper/config) is identical on members 1..3 and names exactly the
    participants 1, 2 and 3.
Exits 0 only when every step completed and every check holds; prints each failure.
"""

import logging
import os
import signal
import subprocess
import sys
import threading
import time

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError
from kazoo.retry import KazooRetry
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ensemble"))
from fourlw import mode  # noqa: E402

SUPER_AUTH = ("digest", "super:test")
WRITERS = 4
# A joining member must be a follower within this (it syncs a snapshot of the load's
# znodes first); a reconfig must be acknowledged within REQUEST_S.
JOIN_S = 60.0
REQUEST_S = 30.0


class Ports:
    def __init__(self, base):
        self.base = base

    def client(self, sid):
        return self.base + 10 * (sid - 1) + 1

    def server_line(self, sid):
        b = self.base + 10 * (sid - 1)
        return "server.%d=127.0.0.1:%d:%d:participant;127.0.0.1:%d" % (sid, b + 2, b + 3, b + 1)


class Writer(threading.Thread):
    """Creates /grow/c<i>-<n>, then sets its data, without pause; holds the ephemeral
    /grow/e<i>; remembers every acknowledged write and every state change."""

    def __init__(self, i, hosts):
        super().__init__(daemon=True)
        self.i = i
        self.client = KazooClient(hosts=hosts, randomize_hosts=False, timeout=10.0,
                                  connection_retry=KazooRetry(max_tries=-1, max_delay=0.5))
        self.lock = threading.Lock()
        self.acked = {}       # path -> data of its last acknowledged write
        self.either = {}      # path -> the other data it may hold (a set with unknown outcome)
        self.ack_times = []   # time.monotonic() of each acknowledged write
        self.states = []      # (time, KazooState) of each change
        self.unknown = 0      # writes whose outcome is unknown
        self.stop = False
        self.client.add_listener(lambda s: self.states.append((time.monotonic(), s)))

    def begin(self):
        self.client.start(timeout=30)
        self.session_id = self.client.client_id[0]
        self.client.create("/grow/e%d" % self.i, b"ephemeral", ephemeral=True)
        self.start()

    def acknowledge(self, path, data):
        with self.lock:
            self.acked[path] = data
            self.ack_times.append(time.monotonic())

    def run(self):
        n = 0
        while not self.stop:
            path = "/grow/c%d-%d" % (self.i, n)
            data = ("%d:%d" % (self.i, n)).encode()
            n += 1
            try:
                self.client.create(path, data)
            except NodeExistsError:
                continue
            except KazooException:
                # Outcome unknown (the connection broke in flight): not acknowledged, so
                # the path is not set either.
                self.unknown += 1
                time.sleep(0.05)
                continue
            self.acknowledge(path, data)
            set_data = data + b":set"
            try:
                self.client.set(path, set_data)
            except KazooException:
                self.unknown += 1
                with self.lock:
                    self.either[path] = set_data
                time.sleep(0.05)
                continue
            self.acknowledge(path, set_data)


def all_ack_times(writers):
    times = []
    for w in writers:
        with w.lock:
            times.extend(w.ack_times)
    return sorted(times)


def step_figures(writers, t0, t1):
    """(write gap in s, acknowledged writes, writes per second) over [t0, t1]: the gap
    counts from t0 to the first acknowledgement and from the last one to t1 too."""
    times = [t for t in all_ack_times(writers) if t0 <= t <= t1]
    points = [t0] + times + [t1]
    gap = max(b - a for a, b in zip(points, points[1:]))
    return gap, len(times), len(times) / (t1 - t0)


class Members:
    """Starts and stops members 4 and 5 (the ones this test adds)."""

    def __init__(self, root, ports):
        self.root = root
        self.ports = ports
        self.cmd = open(os.path.join(root, "m1", "cmd")).read().strip()
        self.procs = {}

    def start(self, sid, current_servers):
        """Member `sid` on a dynamic config of `current_servers` (server.N lines) plus
        itself as a participant, with the keys start_ensemble gives members 1..3."""
        m = os.path.join(self.root, "m%d" % sid)
        os.makedirs(os.path.join(m, "data"), exist_ok=True)
        with open(os.path.join(m, "data", "myid"), "w") as f:
            f.write("%d\n" % sid)
        port = self.ports.client(sid)
        with open(os.path.join(m, "zoo.cfg"), "w") as f:
            f.write("\n".join([
                "tickTime=%s" % os.environ.get("ENSEMBLE_TICK_MS", "500"),
                "initLimit=10", "syncLimit=5", "dataDir=%s/data" % m,
                "clientPort=%d" % port, "maxClientCnxns=0", "4lw.commands.whitelist=*",
                "admin.enableServer=false", "dynamicConfigFile=%s/zoo.cfg.dynamic" % m,
                "reconfigEnabled=true", "standaloneEnabled=false"]) + "\n")
        with open(os.path.join(m, "zoo.cfg.dynamic"), "w") as f:
            f.write("\n".join(current_servers + [self.ports.server_line(sid)]) + "\n")
        for name, value in (("port", port), ("cmd", self.cmd)):
            with open(os.path.join(m, name), "w") as f:
                f.write("%s\n" % value)
        log = open(os.path.join(m, "log"), "ab")
        p = subprocess.Popen([self.cmd, os.path.join(m, "zoo.cfg")], stdout=log,
                             stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
        with open(os.path.join(m, "pid"), "w") as f:
            f.write("%d\n" % p.pid)
        self.procs[sid] = p

    def stop(self, sid):
        p = self.procs.pop(sid)
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def config_of(client):
    """(server.N lines, version line) of /zookeeper/config as `client` reads it."""
    data, _ = client.get("/zookeeper/config")
    lines = data.decode().splitlines()
    return [x for x in lines if x.startswith("server.")], [x for x in lines if x.startswith("version=")]


def wait_joined(ports, sid, deadline_s):
    """Seconds until member `sid` is a follower whose own /zookeeper/config (read
    through it, after a sync) names it; None if not within `deadline_s`. Its mode alone
    would not do: a joining member follows the leader before the reconfig adds it."""
    t0 = time.monotonic()
    line = ports.server_line(sid)
    while time.monotonic() - t0 < deadline_s:
        if mode(ports.client(sid)) == "follower":
            zk = KazooClient(hosts="127.0.0.1:%d" % ports.client(sid), timeout=10.0)
            try:
                zk.start(timeout=5)
                zk.sync("/zookeeper/config")
                if line in config_of(zk)[0]:
                    return time.monotonic() - t0
            except Exception:  # noqa: BLE001 - not serving yet: try again
                pass
            finally:
                zk.stop()
                zk.close()
        time.sleep(0.2)
    return None


def read_member(port, paths):
    """path -> data (None when absent) for `paths` and for every /grow child, read
    through a client of the member on `port` alone, after a sync; and the ephemerals'
    owners (path -> ephemeralOwner or None)."""
    zk = KazooClient(hosts="127.0.0.1:%d" % port, timeout=10.0)
    zk.start(timeout=30)
    try:
        zk.sync("/grow")
        children = zk.get_children("/grow")
        wanted = sorted(set(paths) | {"/grow/" + c for c in children})
        out = {}
        for k in range(0, len(wanted), 500):
            batch = wanted[k:k + 500]
            for path, r in zip(batch, [zk.get_async(p) for p in batch]):
                try:
                    data, stat = r.get(timeout=30)
                    out[path] = (data, stat.ephemeralOwner)
                except KazooException:
                    out[path] = None
        return out, sorted(children)
    finally:
        zk.stop()
        zk.close()


def main():
    logging.basicConfig(level=logging.CRITICAL)
    root, base, load_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    ports = Ports(base)
    members = Members(root, ports)
    failures = []

    admin = KazooClient(hosts="127.0.0.1:%d" % ports.client(1), timeout=10.0,
                        auth_data=[SUPER_AUTH])
    admin.start(timeout=30)
    admin.ensure_path("/grow")
    servers, version = config_of(admin)
    print("grow: initial config: %s %s" % (" ".join(servers), " ".join(version)))

    writers = [Writer(i, ",".join("127.0.0.1:%d" % ports.client(1 + (i - 1 + k) % 3)
                                  for k in range(3)))
               for i in range(1, WRITERS + 1)]
    for w in writers:
        w.begin()

    def reconfig(joining=None, leaving=None):
        data, _ = admin.reconfig_async(joining=joining, leaving=leaving,
                                       new_members=None, from_config=-1).get(timeout=REQUEST_S)
        lines = data.decode().splitlines()
        return [x for x in lines if x.startswith("server.")], \
            [x for x in lines if x.startswith("version=")]

    def add(sid):
        current, _ = config_of(admin)
        members.start(sid, current)
        # ZooKeeper's leader lets a server it does not yet count follow it: wait (up
        # to 10 s) for that, so the reconfig finds the new member synced.
        t0 = time.monotonic()
        while time.monotonic() - t0 < 10.0 and mode(ports.client(sid)) != "follower":
            time.sleep(0.2)
        before = "%s after %.1f s" % (mode(ports.client(sid)) or "not serving",
                                      time.monotonic() - t0)
        new, ver = reconfig(joining=ports.server_line(sid))
        joined = wait_joined(ports, sid, JOIN_S)
        if joined is None:
            raise RuntimeError("after reconfig -add (%s), member %d did not become a "
                               "follower within %.0f s (mode '%s')"
                               % (" ".join(ver), sid, JOIN_S, mode(ports.client(sid))))
        return "started member %d (mode then: %s), reconfig -add %d: %d servers, %s; " \
            "member %d a follower in it %.1f s later" \
            % (sid, before, sid, len(new), " ".join(ver), sid, joined)

    def remove(sid):
        new, ver = reconfig(leaving=str(sid))
        members.stop(sid)
        return "reconfig -remove %d: %d servers, %s; member %d stopped" \
            % (sid, len(new), " ".join(ver), sid)

    steps = [("load", lambda: "no change"), ("add-4", lambda: add(4)),
             ("add-5", lambda: add(5)), ("remove-5", lambda: remove(5)),
             ("remove-4", lambda: remove(4))]
    time.sleep(1.0)
    done = 0
    for name, action in steps:
        t0 = time.monotonic()
        step_failed = False
        try:
            what = action()
        except Exception as e:  # noqa: BLE001 - any failure of a step ends the run
            what = "%s: %s" % (type(e).__name__, e)
            step_failed = True
        time.sleep(load_s)
        t1 = time.monotonic()
        gap, n, rate = step_figures(writers, t0, t1)
        live = [1, 2, 3] + [s for s in (4, 5) if s in members.procs]
        modes = " ".join("%d=%s" % (s, mode(ports.client(s)) or "-") for s in live)
        print("grow: step %-8s %.1f s: %s; write gap %.0f ms, %d writes acknowledged, "
              "%.0f/s; modes %s" % (name, t1 - t0, what, gap * 1000, n, rate, modes),
              flush=True)
        if step_failed:
            failures.append("step %s failed: %s (member logs: %s/m*/log)" % (name, what, root))
            break
        done += 1

    for w in writers:
        w.stop = True
    for w in writers:
        w.join(timeout=30)
    t_end = time.monotonic()

    # Sessions: no LOST, the same session id, the ephemeral still present (checked
    # below through each member).
    for w in writers:
        lost = [t for t, s in w.states if s == KazooState.LOST]
        suspended = sum(1 for _, s in w.states if s == KazooState.SUSPENDED)
        if lost:
            failures.append("writer %d's session was lost (%d LOST events)" % (w.i, len(lost)))
        if w.client.client_id is None or w.client.client_id[0] != w.session_id:
            failures.append("writer %d's session changed from 0x%x" % (w.i, w.session_id))
        if suspended:
            print("grow: writer %d saw %d SUSPENDED (connection lost and regained)"
                  % (w.i, suspended))

    acked, either, unknown = {}, {}, 0
    for w in writers:
        acked.update(w.acked)
        either.update(w.either)
        unknown += w.unknown
    ephemerals = {"/grow/e%d" % w.i: w.session_id for w in writers}
    reads = {}
    for sid in (1, 2, 3):
        try:
            reads[sid] = read_member(ports.client(sid), list(acked) + list(ephemerals))
        except Exception as e:  # noqa: BLE001
            failures.append("member %d could not be read: %s: %s" % (sid, type(e).__name__, e))
    for sid, (got, _) in sorted(reads.items()):
        missing = [p for p, data in acked.items()
                   if got.get(p) is None or (got[p][0] != data and got[p][0] != either.get(p))]
        if missing:
            failures.append("member %d lacks %d of %d acknowledged znodes (or holds other "
                            "data), e.g. %s"
                            % (sid, len(missing), len(acked),
                               ["%s: acked %r, read %r" % (p, acked[p], got.get(p)) for p in sorted(missing)[:3]]))
        for path, owner in sorted(ephemerals.items()):
            r = got.get(path)
            if r is None or r[1] != owner:
                failures.append("member %d: ephemeral %s %s (session 0x%x)"
                                % (sid, path, "is gone" if r is None else
                                   "has owner 0x%x" % r[1], owner))
    sids = sorted(reads)
    for sid in sids[1:]:
        a, b = reads[sids[0]], reads[sid]
        if a[1] != b[1]:
            failures.append("members %d and %d hold different /grow children (%d vs %d)"
                            % (sids[0], sid, len(a[1]), len(b[1])))
        diff = [p for p in a[0] if p in b[0] and a[0][p] != b[0][p]]
        if diff:
            failures.append("members %d and %d differ at %d znodes, e.g. %s"
                            % (sids[0], sid, len(diff), diff[0]))

    configs = {}
    for sid in (1, 2, 3):
        zk = KazooClient(hosts="127.0.0.1:%d" % ports.client(sid), timeout=10.0)
        try:
            zk.start(timeout=30)
            zk.sync("/zookeeper/config")
            configs[sid] = zk.get("/zookeeper/config")[0].decode()
        except Exception as e:  # noqa: BLE001
            failures.append("member %d's config could not be read: %s" % (sid, e))
        finally:
            zk.stop()
            zk.close()
    if len(set(configs.values())) != 1:
        failures.append("config differs between members 1..3: %s" % configs)
    want = sorted(ports.server_line(s) for s in (1, 2, 3))
    for sid, c in sorted(configs.items()):
        got = sorted(x for x in c.splitlines() if x.startswith("server."))
        if got != want:
            failures.append("member %d's config is not participants 1..3: %s" % (sid, got))
    final = configs.get(1, "").replace("\n", " ")
    admin.stop()
    admin.close()
    for w in writers:
        w.client.stop()
        w.client.close()
    for sid in list(members.procs):
        members.stop(sid)

    total = all_ack_times(writers)
    print("grow: final config on member 1: %s" % final)
    print("grow: %s; %d of %d steps; %d writes acknowledged (%d with an unknown outcome) "
          "by %d sessions over %.1f s, checked on members 1..3"
          % ("ok" if not failures else "FAILED (%d failures)" % len(failures), done,
             len(steps), len(total), unknown, len(writers),
             t_end - (total[0] if total else t_end)))
    for f in failures:
        print("grow: FAILED: %s" % f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""A leader cut off from the others cannot commit; after healing every member agrees
(issue 15 b).

Usage: partition.py ENSEMBLE_DIR BASE PROXY_BASE KEEL_BIN

Runs a loopback TCP proxy for every member-to-member link (quorum and election ports;
member i dials member j at PROXY_BASE+10*(i-1)+2*(j-1), +1 for election, as lib.sh's
ENSEMBLE_PROXY_BASE writes it into each zoo.cfg), then starts a 3-member keel ensemble
with lib.sh. It then cuts every link of the leader (open connections closed, new ones
closed at once) while a Kazoo client of the other two members writes without pause,
and:
- sends writes to the isolated leader through a client connected to it alone: none may
  be acknowledged (each times out or fails with connection loss);
- measures how long the isolated leader takes to stop being leader (srvr Mode: it must
  step down within syncLimit and refuse clients);
- checks the other two elect a leader and acknowledge writes during the partition;
- heals, waits for a leader and two followers, and checks that every member's full dump
  (chaos.py's) is identical, holds every acknowledged write and none of the writes sent
  to the isolated leader.

Prints the figures and a summary; exits 1 on any failure.
"""

import logging
import os
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chaos import MEMBERS, Member, Writer, agreement, dump, mode, wait_serving  # noqa: E402,E501

from kazoo.client import KazooClient  # noqa: E402
from kazoo.exceptions import KazooException  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
# syncLimit 5 x tickTime 500 ms (lib.sh's zoo.cfg): the isolated leader must have
# stepped down well within this plus an election round.
STEP_DOWN_LIMIT_S = 10.0


class Proxy:
    """Forwards member i's dials to member j's real ports; `isolate(sid, silent)` cuts
    every link of that member, `heal()` restores them. A silent cut drops the bytes of
    open connections without closing them (a pulled cable: the members notice only by
    their timeouts), a loud one closes them; either way new connections on a cut link
    are closed at once (refused). Healing closes the connections a silent cut left
    open, as TCP would after a long partition, so each side reconnects."""

    def __init__(self, base, proxy_base):
        self.lock = threading.Lock()
        self.cut = set()
        self.conns = []  # (i, j, client socket, upstream socket)
        self.listeners = []
        for i in MEMBERS:
            for j in MEMBERS:
                if i == j:
                    continue
                q = proxy_base + 10 * (i - 1) + 2 * (j - 1)
                real = base + 10 * (j - 1) + 2
                for port, target in ((q, real), (q + 1, real + 1)):
                    s = socket.socket()
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    s.bind(("127.0.0.1", port))
                    s.listen(16)
                    self.listeners.append(s)
                    threading.Thread(target=self.accept, args=(s, i, j, target),
                                     daemon=True).start()

    def is_cut(self, i, j):
        return i in self.cut or j in self.cut

    def accept(self, listener, i, j, target):
        while True:
            try:
                c, _ = listener.accept()
            except OSError:
                return
            with self.lock:
                cut = self.is_cut(i, j)
            if cut:
                c.close()
                continue
            try:
                u = socket.create_connection(("127.0.0.1", target), timeout=2)
                u.settimeout(None)
            except OSError:
                c.close()
                continue
            for s in (c, u):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                self.conns.append((i, j, c, u))
            threading.Thread(target=self.pump, args=(c, u, i, j), daemon=True).start()
            threading.Thread(target=self.pump, args=(u, c, i, j), daemon=True).start()

    def pump(self, src, dst, i, j):
        try:
            while True:
                b = src.recv(65536)
                if not b:
                    break
                if self.is_cut(i, j):
                    continue
                dst.sendall(b)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def isolate(self, sid, silent):
        with self.lock:
            self.cut.add(sid)
        if not silent:
            self.close_cut()

    def close_cut(self):
        with self.lock:
            doomed = [x for x in self.conns if self.is_cut(x[0], x[1])]
            self.conns = [x for x in self.conns if not self.is_cut(x[0], x[1])]
        for _, _, c, u in doomed:
            for s in (c, u):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def heal(self):
        self.close_cut()
        with self.lock:
            self.cut.clear()


def modes(members):
    return {m.sid: mode(m.port) for m in members}


def agree(members, acked, absent, failures):
    """Every member's full dump identical, every acknowledged write present, none of
    `absent` anywhere (problems go to `failures`); returns (znodes, member dumps that
    differ)."""
    dumps = {m.sid: dump(m.port) for m in members}
    # Each member's zoo.cfg here names the others by their proxy ports, and
    # /zookeeper/config holds that member's own view of the membership.
    for d in dumps.values():
        config = d.get("/zookeeper/config")
        if config:
            d["/zookeeper/config"] = (b"(each member's own server.N addresses)",) + config[1:]
    problems, _, differ = agreement(dumps, acked, absent)
    failures.extend(problems)
    return len(dumps[members[0].sid]), differ


def isolate_leader(members, proxy, n, silent, acked, failures):
    """One round: cut the leader off (silently or loudly), measure, heal, compare."""
    kind = "silent" if silent else "loud"
    m0 = modes(members)
    leader = next(m for m in members if m0[m.sid] == "leader")
    others = [m for m in members if m is not leader]
    majority = Writer(n, ",".join("127.0.0.1:%d" % m.port for m in others))
    majority.start()
    # A client of the leader alone, its session open before the cut.
    lone = KazooClient(hosts="127.0.0.1:%d" % leader.port, timeout=10.0)
    lone.start(timeout=30)
    before = "/isolated/r%d-before" % n
    lone.create(before, b"acked")
    acked[before] = b"acked"
    time.sleep(2.0)

    t_cut = time.monotonic()
    proxy.isolate(leader.sid, silent)
    # Writes to the isolated leader, each given 3 s to be acknowledged.
    tried, isolated_acked, outcomes = [], [], {}

    def write_isolated():
        for k in range(3):
            path = "/isolated/r%d-w-%d" % (n, k)
            tried.append(path)
            try:
                lone.create_async(path, b"sent to the isolated leader").get(timeout=3.0)
                isolated_acked.append(path)
            except Exception as e:  # noqa: BLE001 - any failure means not acknowledged
                outcomes[type(e).__name__] = outcomes.get(type(e).__name__, 0) + 1

    isolated_writer = threading.Thread(target=write_isolated, daemon=True)
    isolated_writer.start()
    stepped_down_s = elected_s = None
    new_leader = None
    while time.monotonic() - t_cut < 15.0:
        now = modes(members)
        t = time.monotonic() - t_cut
        if stepped_down_s is None and now[leader.sid] != "leader":
            stepped_down_s = t
        if elected_s is None:
            nl = [m for m in others if now[m.sid] == "leader"]
            if nl and any(now[m.sid] == "follower" for m in others):
                elected_s, new_leader = t, nl[0]
        if stepped_down_s is not None and elected_s is not None \
                and not isolated_writer.is_alive() and t > 8.0:
            break
        time.sleep(0.1)
    isolated_mode = modes(members)[leader.sid] or "not serving"
    with majority.lock:
        during = sum(1 for t in majority.ack_times if t > t_cut)
    threading.Thread(target=lambda: (lone.stop(), lone.close()), daemon=True).start()
    round_failures = []
    if isolated_acked:
        round_failures.append("the isolated leader acknowledged %s" % isolated_acked)
    if stepped_down_s is None or stepped_down_s > STEP_DOWN_LIMIT_S:
        round_failures.append("the isolated leader did not step down within %.0f s"
                              % STEP_DOWN_LIMIT_S)
    if isolated_mode == "leader":
        round_failures.append("the isolated member still says it leads")
    if elected_s is None:
        round_failures.append("the majority did not elect a leader")
    if during == 0:
        round_failures.append("the majority acknowledged no write during the partition")

    t_heal = time.monotonic()
    proxy.heal()
    healed = wait_serving(members)
    healed_s = time.monotonic() - t_heal
    time.sleep(1.0)
    majority.stop = True
    majority.join(timeout=30)
    majority.client.stop()
    majority.client.close()
    acked.update(majority.acked)
    znodes, differ = 0, 0
    if healed:
        znodes, differ = agree(members, acked, tried, round_failures)
    else:
        round_failures.append("the ensemble did not serve again within 60 s of healing")
    fmt = lambda x: "%.0f ms" % (x * 1000) if x is not None else "never"  # noqa: E731
    print("partition: round %d (%s cut): isolated leader sid %d: %d of %d writes sent to "
          "it acknowledged (%s); it stopped leading after %s (mode then: %s)"
          % (n, kind, leader.sid, len(isolated_acked), len(tried),
             ", ".join("%s x%d" % kv for kv in sorted(outcomes.items())) or "-",
             fmt(stepped_down_s), isolated_mode))
    print("partition: round %d: majority sids %s elected sid %s after %s and acknowledged "
          "%d writes during the partition; healed in %s; %d znodes, %d member dumps differ"
          % (n, "+".join(str(m.sid) for m in others),
             new_leader.sid if new_leader else "-", fmt(elected_s), during, fmt(healed_s),
             znodes, differ), flush=True)
    for f in round_failures:
        print("partition: round %d: FAILED: %s" % (n, f))
    failures.extend(round_failures)
    return stepped_down_s, during, len(isolated_acked)


def main():
    logging.basicConfig(level=logging.CRITICAL)
    root, base, proxy_base, keel = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    proxy = Proxy(base, proxy_base)
    env = dict(os.environ, ENSEMBLE_PROXY_BASE=str(proxy_base), KEEL_BIN=keel)
    started = subprocess.run(
        ["bash", "-c", 'source "$1/lib.sh" && start_ensemble keel "$2" "$3"', "_",
         HERE, root, str(base)], env=env)
    if started.returncode != 0:
        print("partition: the ensemble did not form through the proxies")
        return 1
    members = [Member(root, i) for i in MEMBERS]
    setup = KazooClient(hosts=",".join("127.0.0.1:%d" % m.port for m in members))
    setup.start(timeout=30)
    setup.ensure_path("/chaos")
    setup.ensure_path("/isolated")
    setup.stop()
    setup.close()
    acked, failures, figures = {}, [], []
    for n, silent in ((1, True), (2, False)):
        figures.append(isolate_leader(members, proxy, n, silent, acked, failures))
    print("partition: %s; 2 rounds (silent, loud cut of the leader); step down after %s; "
          "%d writes acknowledged by the majorities meanwhile, %d by isolated leaders; "
          "%d acknowledged in all, all on every member"
          % ("ok" if not failures else "FAILED (%d failures)" % len(failures),
             " / ".join("%.0f ms" % (f[0] * 1000) if f[0] is not None else "never"
                        for f in figures),
             sum(f[1] for f in figures), sum(f[2] for f in figures), len(acked)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

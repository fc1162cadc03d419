"""Drives one 3-member ensemble (ZooKeeper or keel) through local sessions, dynamic
reconfig and read-only mode, and records every member's `mntr` (and, with
--prometheus, its /metrics) after each step. Run by metrics_ensemble.sh on an ensemble
it started (compat-tests/ensemble/lib.sh's layout: DIR/m<i>/{port,pid,cmd,zoo.cfg,log}),
with localSessionsEnabled, localSessionsUpgradingEnabled, reconfigEnabled, a dynamic
config file, -Dreadonlymode.enabled=true and the super digest of password "test".

The members are named by the part they play, so two ensembles that elected different
servers still compare: L (the first leader), A (a follower: it holds the local session,
and survives alone in read-only mode), B (the other follower: it is reconfigured to an
observer and back, removed and added back, then stopped before L, so that A starts
LOOKING once, when L stops). After the two are restarted the leader may be anyone: the
members are then named by their mode (leader, follower1, follower2 in sid order).

    usage: metrics_ensemble_drive.py DIR OUT.json [--prometheus M1,M2,M3]

OUT.json: {"steps": [{"step": NAME, "members": {NAME: {"sid", "mode", "mntr": {key:
value}, "prom": {"types": {family: type}, "samples": {name: value}}}}}]} (value: the
`mntr` text; prom samples without labels only, summaries' _count/_sum included).
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "ensemble"))
from fourlw import four_letter, mode as port_mode  # noqa: E402

from kazoo.client import KazooClient  # noqa: E402
from kazoo.protocol.states import KeeperState  # noqa: E402

DIR, OUT = sys.argv[1], sys.argv[2]
METRICS = {}
if len(sys.argv) > 4 and sys.argv[3] == "--prometheus":
    METRICS = {i + 1: int(p) for i, p in enumerate(sys.argv[4].split(","))}
MEMBERS = [1, 2, 3]
SETTLE_S = 2.0  # leader pings (tick 500 ms) refresh the learners' sync figures


def member_file(i, name):
    with open(os.path.join(DIR, "m%d" % i, name)) as f:
        return f.read().strip()


PORT = {i: int(member_file(i, "port")) for i in MEMBERS}
RUNNING = set(MEMBERS)


def log(*parts):
    print(" ".join(str(p) for p in parts), file=sys.stderr, flush=True)


def mntr(i):
    out = {}
    for line in four_letter(PORT[i], "mntr").splitlines():
        k, sep, v = line.partition("\t")
        if sep:
            out[k] = v
    return out


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$')


def prom(i):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % METRICS[i], timeout=10) as r:
        text = r.read().decode()
    types, samples = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
        elif line and not line.startswith("#"):
            m = SAMPLE.match(line)
            if m and not m.group(2):
                samples[m.group(1)] = float(m.group(3))
    return {"types": types, "samples": samples}


def wait_mode(i, want, deadline_s=60):
    t0 = time.monotonic()
    while time.monotonic() - t0 < deadline_s:
        if port_mode(PORT[i]) == want:
            return True
        time.sleep(0.2)
    return False


modes = {i: port_mode(PORT[i]) for i in MEMBERS}
L = [i for i in MEMBERS if modes[i] == "leader"][0]
A, B = [i for i in MEMBERS if modes[i] == "follower"]
NAMES = {L: "L", A: "A", B: "B"}
by_mode = False
steps = []


def snapshot(step):
    time.sleep(SETTLE_S)
    members = {}
    live = sorted(RUNNING)
    got = {i: (port_mode(PORT[i]), mntr(i), prom(i) if METRICS else None) for i in live}
    if by_mode:
        followers = [i for i in live if got[i][0] == "follower"]
        names = {i: ("follower%d" % (followers.index(i) + 1) if i in followers else got[i][0])
                 for i in live}
    else:
        names = NAMES
    for i in live:
        members[names[i]] = {"sid": i, "mode": got[i][0], "mntr": got[i][1], "prom": got[i][2]}
    for i in set(MEMBERS) - RUNNING:
        members[names.get(i, "down%d" % i)] = {"sid": i, "mode": "down", "mntr": {}, "prom": None}
    steps.append({"step": step, "members": members})
    log("step", step, {n: m["mode"] for n, m in members.items()})


def client(i, **kw):
    c = KazooClient(hosts="127.0.0.1:%d" % PORT[i], timeout=6, **kw)
    c.start(timeout=15)
    return c


def close(c):
    c.stop()
    c.close()


def start_member(i):
    m = os.path.join(DIR, "m%d" % i)
    with open(os.path.join(m, "log"), "ab") as out:
        p = subprocess.Popen([member_file(i, "cmd"), os.path.join(m, "zoo.cfg")], stdout=out,
                             stderr=subprocess.STDOUT, start_new_session=True)
    with open(os.path.join(m, "pid"), "w") as f:
        f.write(str(p.pid))
    RUNNING.add(i)


def stop_member(i):
    pid = int(member_file(i, "pid"))
    os.kill(pid, signal.SIGTERM)
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except OSError:
            break
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                break
        except ChildProcessError:
            pass
        time.sleep(0.1)
    else:
        os.kill(pid, signal.SIGKILL)
    RUNNING.discard(i)


def server_line(i, role):
    base = PORT[i] - 1
    return "server.%d=127.0.0.1:%d:%d:%s;127.0.0.1:%d" % (i, base + 2, base + 3, role, PORT[i])


def reconfig(**kw):
    sup = client(L, auth_data=[("digest", "super:test")])
    data, _ = sup.reconfig(**kw)
    log("reconfig", kw, "->", data.decode().replace("\n", " | "))
    close(sup)


snapshot("formed")

# Local sessions: a session on follower A is local to it; an ephemeral upgrades it.
a = client(A)
snapshot("local session on A")
a.create("/metrics-ensemble", b"x")
snapshot("local session wrote")
a.create("/metrics-ensemble/eph", b"", ephemeral=True)
snapshot("session upgraded")

# Dynamic reconfig: B turned into an observer, then back into a participant; then B
# removed and added back.
reconfig(joining=server_line(B, "observer"), leaving=None, new_members=None)
assert wait_mode(B, "observer"), "B did not become an observer"
snapshot("B observer")
reconfig(joining=server_line(B, "participant"), leaving=None, new_members=None)
assert wait_mode(B, "follower"), "B did not become a follower again"
snapshot("B participant")

reconfig(joining=None, leaving=str(B), new_members=None)
time.sleep(1)
log("B after removal:", port_mode(PORT[B]))
snapshot("B removed")
reconfig(joining=server_line(B, "participant"), leaving=None, new_members=None)
assert wait_mode(B, "follower"), "B did not follow again"
snapshot("B added back")

close(a)
snapshot("session closed")

# Read-only mode: L and B stopped, A alone turns read-only; a canBeReadOnly client.
# B first: L and A still form a quorum, so A then starts LOOKING once, when L stops.
for i in (B, L):
    stop_member(i)
t0 = time.monotonic()
while port_mode(PORT[A]) != "read-only" and time.monotonic() - t0 < 30:
    time.sleep(0.2)
assert port_mode(PORT[A]) == "read-only", "A did not turn read-only"
snapshot("A read-only")
ro = client(A, read_only=True)
assert ro.client_state == KeeperState.CONNECTED_RO, ro.client_state
ro.get("/metrics-ensemble")
snapshot("read-only client")
close(ro)
snapshot("read-only client closed")

# The quorum restored.
for i in (L, B):
    start_member(i)
t0 = time.monotonic()
while time.monotonic() - t0 < 60:
    ms = sorted(port_mode(PORT[i]) for i in MEMBERS)
    if ms == ["follower", "follower", "leader"]:
        break
    time.sleep(0.2)
by_mode = True
snapshot("restored")
c = client(A)
c.create("/metrics-ensemble/after", b"y")
close(c)
snapshot("restored wrote")

with open(OUT, "w") as f:
    json.dump({"steps": steps}, f, indent=1, sort_keys=True)

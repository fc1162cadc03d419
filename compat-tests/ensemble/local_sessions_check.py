"""Local sessions end to end (issue 18 part 3), run by local_sessions.sh on a 3-member
ensemble it started with localSessionsEnabled=true (and localSessionsUpgradingEnabled
true or false). A Kazoo client on a follower creates a persistent node (its session stays
local: that follower's mntr counts one local session, the leader's global session count
does not move), then an ephemeral (upgrading on: the session is upgraded, every member
counts one more global session, the follower no local one; off: the create fails). A
client of the leader does the same; a second local session is closed, then a third's id
is tried on the other follower (unknown there: expired). Prints one fact per line,
with session ids shown only by their server-id byte, so that a ZooKeeper ensemble and a
keel ensemble print the same lines.

    usage: local_sessions_check.py DIR    (DIR as compat-tests/ensemble/lib.sh's start_ensemble)
"""

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "rawdiff"))
from chaos import four_letter, mode as port_mode  # noqa: E402

from kazoo.client import KazooClient  # noqa: E402
from kazoo.exceptions import KazooException  # noqa: E402

DIR = sys.argv[1]
MEMBERS = [1, 2, 3]


def member_file(i, name):
    with open(os.path.join(DIR, "m%d" % i, name)) as f:
        return f.read().strip()


PORT = {i: int(member_file(i, "port")) for i in MEMBERS}
MODE = {i: port_mode(PORT[i]) for i in MEMBERS}
LEADER = [i for i in MEMBERS if MODE[i] == "leader"][0]
FOLLOWERS = [i for i in MEMBERS if MODE[i] == "follower"]
F1, F2 = FOLLOWERS[0], FOLLOWERS[1]


def fact(*parts):
    print(" ".join(str(p) for p in parts), flush=True)


def sessions(i):
    """(local, global) session counts from member i's mntr."""
    m = {}
    for line in four_letter(PORT[i], "mntr").splitlines():
        k, _, v = line.partition("\t")
        m[k] = v
    return int(m.get("zk_local_sessions", -1)), int(m.get("zk_global_sessions", -1))


def counts(label):
    # Session counts settle once the txns reached every member.
    time.sleep(0.5)
    fact(label, "leader", sessions(LEADER), "follower", sessions(F1), "other", sessions(F2))


def client(i, **kw):
    c = KazooClient(hosts="127.0.0.1:%d" % PORT[i], timeout=6, **kw)
    c.start(timeout=10)
    return c


counts("start")
a = client(F1)
sid, passwd = a.client_id
fact("session high byte is the follower's id:", (sid >> 56) == F1)
counts("connected")
a.create("/persistent", b"x")
counts("after persistent create")
try:
    a.create("/ephemeral", b"", ephemeral=True)
    upgraded = True
    fact("ephemeral create: ok")
except KazooException as ex:
    upgraded = False
    fact("ephemeral create:", type(ex).__name__)
counts("after ephemeral create")
if upgraded:
    fact("ephemeralOwner is the session:", a.exists("/ephemeral").ephemeralOwner == sid)
    # The upgraded session is global now: it may move to another member.
    b = client(F2, client_id=(sid, passwd))
    fact("upgraded session resumes on the other follower:", b.client_id[0] == sid)
    b.stop()
    b.close()
a.stop()
a.close()
counts("first session closed")

# The leader's own client: a local session of the leader's.
g = client(LEADER)
fact("leader session high byte is the leader's id:", (g.client_id[0] >> 56) == LEADER)
counts("leader client connected")
fact("ephemeral gone:", g.exists("/ephemeral") is None)
try:
    g.create("/leader-ephemeral", b"", ephemeral=True)
    fact("leader ephemeral create: ok")
except KazooException as ex:
    fact("leader ephemeral create:", type(ex).__name__)
counts("after leader ephemeral create")
g.stop()
g.close()
counts("leader client closed")

c = client(F1)
counts("second local session")
# A multi that creates an ephemeral: it upgrades the session like a create does, or is
# refused with EPHEMERALONLOCALSESSION as a whole or per op.
t = c.transaction()
t.create("/multi-persistent", b"")
t.create("/multi-ephemeral", b"", ephemeral=True)
try:
    results = t.commit()
    fact("multi with an ephemeral:", [type(r).__name__ if isinstance(r, Exception) else "ok" for r in results])
except KazooException as ex:
    fact("multi with an ephemeral raised:", type(ex).__name__)
fact("multi's persistent node:", c.exists("/multi-persistent") is not None,
     "ephemeral:", c.exists("/multi-ephemeral") is not None)
counts("after multi")
c.stop()
c.close()
counts("local session closed")

d = client(F1)
lost = []
e = KazooClient(hosts="127.0.0.1:%d" % PORT[F2], timeout=6, client_id=d.client_id)
e.add_listener(lambda s: lost.append(str(s)))
e.start(timeout=10)
# Unknown there: the server says expired and Kazoo starts a session of its own.
fact("local session on another member: a new session:", e.client_id[0] != d.client_id[0],
     "states", lost)
fact("still alive on its own member:", d.exists("/persistent") is not None)
counts("end")
d.stop()
d.close()
e.stop()
e.close()

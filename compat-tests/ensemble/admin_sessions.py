"""The sessions admin.sh's second pass shows on a member's operator surfaces (issue 18
part 4), on an ensemble with localSessionsEnabled, localSessionsUpgradingEnabled and
reconfigEnabled: four Kazoo clients, two on the first follower by server id and two on
the leader; on each member one stays local (a persistent create and an exists watch)
and one is upgraded to a global session by an ephemeral create (with a data watch on
the follower). Writes SESSIONS (one `LABEL ID MEMBER` line each, the id in decimal) once
all four are set up, then holds the sessions until it is killed.

    usage: admin_sessions.py DIR SESSIONS   (DIR as lib.sh's start_ensemble)
"""

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from chaos import mode as port_mode  # noqa: E402

from kazoo.client import KazooClient  # noqa: E402

DIR, SESSIONS = sys.argv[1:3]
PORT = {i: int(open(os.path.join(DIR, "m%d" % i, "port")).read()) for i in (1, 2, 3)}
MODE = {i: port_mode(PORT[i]) for i in PORT}
LEADER = [i for i in PORT if MODE[i] == "leader"][0]
FOLLOWER = [i for i in PORT if MODE[i] == "follower"][0]


def client(member):
    c = KazooClient(hosts="127.0.0.1:%d" % PORT[member], timeout=10)
    c.start()
    return c


# follower-local, follower-global, leader-local, leader-global
fl = client(FOLLOWER)
fl.exists("/w1", watch=lambda e: None)
fl.create("/p1", b"x")
fg = client(FOLLOWER)
fg.create("/e1", b"", ephemeral=True)
fg.get("/p1", watch=lambda e: None)
ll = client(LEADER)
ll.exists("/w2", watch=lambda e: None)
lg = client(LEADER)
lg.create("/e2", b"", ephemeral=True)
# Every member has applied the txns once a sync through each has returned.
for c in (fl, lg):
    c.sync("/")
rows = [("fl", fl, FOLLOWER), ("fg", fg, FOLLOWER), ("ll", ll, LEADER), ("lg", lg, LEADER)]
with open(SESSIONS + ".tmp", "w") as f:
    for label, c, member in rows:
        f.write("%s %d %d\n" % (label, c._session_id, member))
os.rename(SESSIONS + ".tmp", SESSIONS)
while True:
    time.sleep(60)

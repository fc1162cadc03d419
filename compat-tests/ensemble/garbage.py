"""Garbage on the peer ports of running members closes only that connection (issue 15 b).

Usage: garbage.py ENSEMBLE_DIR

ENSEMBLE_DIR is one that lib.sh start_ensemble started (a 3-member keel ensemble;
member i's quorum port is its client port + 1, its election port + 2). To the election
and the quorum port of the leader and of a follower, over fresh connections, all at
once: random bytes, a truncated handshake (the write side shut mid-message), an
oversized length (the election handshake's address length, the quorum packet's data
length, both 0x7fffffff), and a well-formed handshake from a sid that has no server.N
line (ZAB-WIRE.md §1 and §3 give the layouts). Each connection must be closed by the
member, and the member's log must say why, on a line naming the connection's own
address. Then every member must still run, the ensemble must still have its leader and
two followers, and a write through each member alone must be acknowledged.

Prints one line per case and a summary; exits 1 on any failure.
"""

import logging
import os
import random
import re
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chaos import MEMBERS, Member, mode, wait_serving  # noqa: E402

from kazoo.client import KazooClient  # noqa: E402

BOGUS_SID = 99
FOLLOWERINFO = 11
# The member closes a connection that sends no complete first message within
# cnxTimeout (election) or initLimit ticks (quorum), both 5 s in lib.sh's zoo.cfg.
CLOSE_WITHIN_S = 8.0


def initial_message(sid, address, length=None):
    """ZooKeeper's election handshake, version 1: long -65536, long sid, int length,
    the initiator's own election address."""
    a = address.encode()
    return struct.pack(">qqi", -65536, sid, len(a) if length is None else length) + a


def follower_info(sid, data_length=None):
    """A QuorumPacket FOLLOWERINFO: int type, long zxid (acceptedEpoch << 32), buffer
    data (LearnerInfo: long sid, int protocolVersion 0x10000, long configVersion),
    vector authinfo (null)."""
    info = struct.pack(">qiq", sid, 0x10000, 0)
    n = len(info) if data_length is None else data_length
    return struct.pack(">iqi", FOLLOWERINFO, 1 << 32, n) + info + struct.pack(">i", -1)


def cases(port_kind, target_sid):
    rng = random.Random(15)
    garbage = bytes(rng.randrange(256) for _ in range(64))
    if port_kind == "election":
        full = initial_message(BOGUS_SID, "127.0.0.1:4999")
        out = [
            ("random bytes", garbage, False),
            ("truncated handshake", initial_message(3, "127.0.0.1:4999")[:23], True),
            ("oversized length", initial_message(2, "127.0.0.1:4999", 0x7FFFFFFF), False),
            ("handshake from sid %d" % BOGUS_SID, full, False),
        ]
        # A handshake as a real larger sid is kept (the tie-break), replacing that
        # member's link: then a frame longer than PACKETMAXSIZE must close it.
        if target_sid < max(MEMBERS):
            real = initial_message(max(MEMBERS), "127.0.0.1:4999")
            out.append(("handshake as sid %d, then an oversized frame" % max(MEMBERS),
                        real + struct.pack(">i", 0x7FFFFFFF), False))
        return out
    return [
        ("random bytes", garbage, False),
        ("truncated packet", follower_info(2)[:25], True),
        ("oversized length", follower_info(2, 0x7FFFFFFF), False),
        ("FOLLOWERINFO from sid %d" % BOGUS_SID, follower_info(BOGUS_SID), False),
    ]


def attack(port, payload, shut_write):
    """Sends `payload` on a fresh connection; returns (local address, seconds until
    the member closed it or None, error)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    local = "%s:%d" % s.getsockname()
    t0 = time.monotonic()
    try:
        s.sendall(payload)
        if shut_write:
            s.shutdown(socket.SHUT_WR)
        s.settimeout(CLOSE_WITHIN_S)
        while True:
            try:
                b = s.recv(4096)
            except ConnectionResetError:
                break
            if not b:
                break
        return local, time.monotonic() - t0, None
    except socket.timeout:
        return local, None, "still open after %.0f s" % CLOSE_WITHIN_S
    except OSError as e:
        return local, None, str(e)
    finally:
        s.close()


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def main():
    logging.basicConfig(level=logging.CRITICAL)
    root = sys.argv[1]
    members = [Member(root, i) for i in MEMBERS]
    if not wait_serving(members):
        print("garbage: the ensemble is not serving at the start")
        return 1
    leader = next(m for m in members if mode(m.port) == "leader")
    follower = next(m for m in members if m is not leader)
    pids = {m.sid: m.pid() for m in members}
    offsets = {m.sid: os.path.getsize(os.path.join(m.dir, "log")) for m in members}
    jobs = []
    for target, role in ((leader, "leader"), (follower, "follower")):
        for port_kind, port in (("election", target.port + 2), ("quorum", target.port + 1)):
            for name, payload, shut in cases(port_kind, target.sid):
                jobs.append({"target": target, "role": role, "port_kind": port_kind,
                             "name": name, "args": (port, payload, shut)})

    def run(job):
        job["result"] = attack(*job["args"])

    threads = [threading.Thread(target=run, args=(j,)) for j in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    time.sleep(0.5)
    failures = []
    logs = {}
    for m in members:
        with open(os.path.join(m.dir, "log"), "rb") as f:
            f.seek(offsets[m.sid])
            logs[m.sid] = f.read().decode(errors="replace")
    for j in jobs:
        local, closed_s, err = j["result"]
        m = j["target"]
        # link.rs: "<port> connection from <addr>: <reason>; closed", or, once the
        # connection is a member's link, "<port> connection to server.N at <addr>: ..."
        found = re.search(r"%s connection (?:from|to server\.\d+ at) %s: (.*); closed"
                          % (j["port_kind"], re.escape(local)), logs[m.sid])
        reason = found.group(1) if found else None
        what = "%s port of the %s (sid %d), %s" % (j["port_kind"], j["role"], m.sid, j["name"])
        if err:
            failures.append("%s: %s" % (what, err))
        if reason is None:
            failures.append("%s: no log line gives the reason the connection from %s closed"
                            % (what, local))
        print("garbage: %s: closed after %s; log: %s"
              % (what, "%.0f ms" % (closed_s * 1000) if closed_s is not None else "never",
                 reason or "-"))
    for m in members:
        if not alive(pids[m.sid]):
            failures.append("member %d exited" % m.sid)
    serving = wait_serving(members, deadline_s=30)
    if not serving:
        failures.append("the ensemble lost its leader or a follower")
    same_leader = mode(leader.port) == "leader"
    writes = 0
    for m in members:
        zk = KazooClient(hosts="127.0.0.1:%d" % m.port, timeout=10.0)
        try:
            zk.start(timeout=15)
            zk.create("/garbage-%d-" % m.sid, b"after garbage", sequence=True)
            writes += 1
        except Exception as e:  # noqa: BLE001 - any failure is the finding
            failures.append("a write through member %d failed: %r" % (m.sid, e))
        finally:
            zk.stop()
            zk.close()
    for f in failures:
        print("garbage: FAILED: " + f)
    print("garbage: %s; %d bad connections to 2 members' election and quorum ports, "
          "%d closed by the member; %d of 3 members running, %s, leader %s; "
          "a write through each member: %d of 3 acknowledged"
          % ("ok" if not failures else "FAILED (%d failures)" % len(failures), len(jobs),
             sum(1 for j in jobs if j["result"][1] is not None),
             sum(1 for m in members if alive(pids[m.sid])), "serving" if serving
             else "NOT serving", "unchanged" if same_leader else "changed", writes))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

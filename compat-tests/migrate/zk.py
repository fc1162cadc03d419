"""Client side of the migration test (run.sh), with stock Kazoo.

  zk.py workload HOSTS DATADIR   writes the tree the test migrates (see workload()), and
                                 leaves 3..5 txns after ZooKeeper's newest snapshot
  zk.py hold HOSTS DIR           holds a session with two ephemerals; writes DIR/session,
                                 then waits for DIR/check and writes DIR/result
  zk.py dump HOSTS OUT           writes every znode (path, data, ACL, every Stat field),
                                 one JSON object per line in path order
  zk.py seq HOSTS PARENT...      creates a sequential child under each PARENT, prints names
"""
import json
import os
import re
import socket
import subprocess
import sys
import time

from kazoo.client import KazooClient, KazooState
from kazoo.retry import KazooRetry
from kazoo.security import make_acl, make_digest_acl

ZKCLI = "/usr/share/zookeeper/bin/zkCli.sh"


def client(hosts, timeout=30.0):
    retry = KazooRetry(max_tries=-1, delay=0.2, backoff=1, max_delay=0.5)
    zk = KazooClient(hosts=hosts, timeout=timeout, connection_retry=retry)
    zk.start(timeout=30)
    zk.add_auth("digest", "alice:secret")
    return zk


def srvr_zxid(hosts):
    host, port = hosts.split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"srvr")
        out = b""
        while True:
            b = s.recv(4096)
            if not b:
                break
            out += b
    return int(re.search(rb"Zxid: 0x([0-9a-f]+)", out).group(1), 16)


def newest_snapshot(datadir):
    v2 = os.path.join(datadir, "version-2")
    zxids = [int(f.split(".")[1], 16) for f in os.listdir(v2) if f.startswith("snapshot.")]
    return max(zxids), len(zxids)


def workload(hosts, datadir):
    zk = client(hosts)
    alice = make_digest_acl("alice", "secret", all=True)
    zk.create("/app", b"root")
    for i in range(5):
        zk.create("/app/node%d" % i, b"x" * i)
    for v in range(4):
        zk.set("/app/node1", b"version %d" % v)
    zk.delete("/app/node3")
    zk.delete("/app/node4")
    seqs = [zk.create("/app/seq-", b"s", sequence=True) for _ in range(3)]
    zk.delete(seqs[1])
    zk.create("/app/a/b/c/d", b"deep", makepath=True)
    zk.create("/app/empty", None)
    zk.create("/secure", b"secret", acl=[alice])
    zk.set_acls("/app/node2", [make_acl("world", "anyone", read=True, write=True)])
    zk.set_acls("/secure", [alice, make_acl("world", "anyone", read=True)])
    t = zk.transaction()
    t.create("/app/m1", b"from multi")
    t.set_data("/app/node0", b"multi")
    t.check("/app/node1", 4)
    t.delete("/app/a/b/c/d")
    t.commit()
    t = zk.transaction()  # fails: logged as an error multi
    t.create("/app/never", b"")
    t.delete("/app/missing")
    t.commit()
    zk.create("/app/counter", b"")
    for i in range(40):
        zk.set("/app/counter", b"%d" % i)
    # Containers, TTL nodes and quotas: Kazoo has no call for them; zkCli.sh does.
    script = "\n".join([
        "create -c /cont c",
        "create /cont/child x",
        "create -s /cont/s- s",
        "create -t 3600000 /ttl t",
        "create -s -t 3600000 /ttl/s- t",
        "setquota -n 100 /app",
        "quit",
    ]) + "\n"
    out = subprocess.run([ZKCLI, "-server", hosts], input=script.encode(),
                         capture_output=True, timeout=120)
    for p in ["/cont/child", "/ttl", "/cont", "/zookeeper/quota/app/zookeeper_stats"]:
        if not zk.exists(p):
            sys.exit("zkCli.sh did not create %s:\n%s" % (p, out.stdout.decode(errors="replace")))
    zk.delete("/app/node0")
    zk.create("/app/node0", b"again")
    # Leave a few txns in the log after the newest snapshot, and few enough that the
    # holder's and dumper's txns cannot trigger another one (ZooKeeper snapshots after
    # more than snapCount/2 = 10 txns).
    for i in range(200):
        time.sleep(0.1)
        snap, _ = newest_snapshot(datadir)
        gap = srvr_zxid(hosts) - snap
        if 3 <= gap <= 5:
            break
        zk.set("/app/counter", b"tail %d" % i)
    else:
        sys.exit("could not leave 3..5 txns after the newest snapshot")
    snap, count = newest_snapshot(datadir)
    print("workload: %d snapshots, newest 0x%x, zxid 0x%x" % (count, snap, srvr_zxid(hosts)))
    zk.stop()
    zk.close()


def hold(hosts, d):
    zk = client(hosts)
    lost = []
    zk.add_listener(lambda s: lost.append(s) if s == KazooState.LOST else None)
    zk.create("/app/eph", b"held", ephemeral=True)
    zk.create("/cont/eph-", b"", ephemeral=True, sequence=True)
    sid = zk.client_id[0]
    with open(os.path.join(d, "session"), "w") as f:
        f.write("%x\n" % sid)
    check = os.path.join(d, "check")
    deadline = time.time() + 600
    while not os.path.exists(check) and time.time() < deadline:
        time.sleep(0.1)
    ok = (zk.state == KazooState.CONNECTED and not lost and zk.client_id[0] == sid
          and zk.exists("/app/eph") is not None
          and zk.exists("/app/eph").ephemeralOwner == sid)
    with open(os.path.join(d, "result"), "w") as f:
        f.write("ok\n" if ok else "session lost: state=%s lost=%s\n" % (zk.state, lost))
    zk.stop()
    zk.close()


def dump(hosts, out):
    zk = client(hosts)
    rows = []
    stack = ["/"]
    while stack:
        p = stack.pop()
        data, st = zk.get(p)
        acls, _ = zk.get_acls(p)
        rows.append({
            "path": p,
            "data": None if data is None else data.hex(),
            "acl": sorted([a.perms, a.id.scheme, a.id.id] for a in acls),
            "stat": {k: getattr(st, k) for k in (
                "czxid", "mzxid", "ctime", "mtime", "version", "cversion", "aversion",
                "ephemeralOwner", "dataLength", "numChildren", "pzxid")},
        })
        for c in zk.get_children(p):
            stack.append(p.rstrip("/") + "/" + c)
    zk.stop()
    zk.close()
    rows.sort(key=lambda r: r["path"])
    with open(out, "w") as f:
        for r in rows:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    print("dump: %d znodes from %s" % (len(rows), hosts))


def seq(hosts, parents):
    zk = client(hosts)
    for p in parents:
        print(zk.create(p.rstrip("/") + "/seq-", b"", sequence=True))
    zk.stop()
    zk.close()


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "workload":
        workload(sys.argv[2], sys.argv[3])
    elif cmd == "hold":
        hold(sys.argv[2], sys.argv[3])
    elif cmd == "dump":
        dump(sys.argv[2], sys.argv[3])
    elif cmd == "seq":
        seq(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(__doc__)

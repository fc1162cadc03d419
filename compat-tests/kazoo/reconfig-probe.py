"""Kazoo TestReconfig's requests, one by one, against an ensemble started by Kazoo's own
harness (kazoo.testing.harness.get_global_cluster, so the same zoo.cfg, -D flags and
launcher as run.sh --cluster). Prints each request and the server's answer (result or
exception class), what each member was given (zoo.cfg's reconfigEnabled/dynamicConfigFile,
the dynamic files next to zoo.cfg, whether the launcher passed on the superDigest -D flag),
and /zookeeper/config as each member serves it. Run through reconfig-probe.sh.
"""
import os
import socket
import sys

from kazoo.client import KazooClient
from kazoo.testing.harness import get_global_cluster


def answer(fn):
    try:
        r = fn()
        if isinstance(r, tuple) and r and isinstance(r[0], bytes):
            return "OK data=%r stat.mzxid=0x%x" % (r[0].decode(), r[1].mzxid)
        return "OK %r" % (r,)
    except Exception as e:  # noqa: BLE001 - the answer is what we print
        return "%s %s" % (type(e).__name__, e)


def show_members(cluster, when):
    for s in cluster:
        cfg = os.path.join(s.working_path, "zoo.cfg")
        keys = [l.strip() for l in open(cfg) if l.split("=")[0] in (
            "reconfigEnabled", "dynamicConfigFile", "standaloneEnabled")]
        log = os.path.join(s.working_path, "zookeeper.log")
        launch = [l for l in open(log, errors="replace") if l.startswith("[launcher")]
        digest = any("superDigest=super:D/InIHSb7yEEbrWz8b9l71RjZJU=" in l for l in launch)
        dyn = sorted(f for f in os.listdir(s.working_path) if ".dynamic." in f)
        print("member %s %s: zoo.cfg %s; dynamic files %s; launcher passed superDigest: %s"
              % (s.server_info.server_id, when, keys, dyn,
                 digest if launch else "n/a (no launcher line)"))


def main():
    cluster = get_global_cluster()
    cluster.start()
    try:
        hosts = ",".join(s.address for s in cluster)
        plain = KazooClient(hosts=hosts, timeout=15)
        plain.start(30)
        sup = KazooClient(hosts=hosts, timeout=15, auth_data=[("digest", "super:test")])
        sup.start(30)
        show_members(cluster, "after connect")
        # free ports, held bound (connect gets a RST), as the test does (ZOOKEEPER-2202)
        socks = [socket.socket() for _ in range(3)]
        for k in socks:
            k.bind(("", 0))
        joining = "server.100=0.0.0.0:%d:%d:observer;0.0.0.0:%d" % tuple(
            k.getsockname()[1] for k in socks)
        print("1 no super auth, joining server.999=0.0.0.0:1234:2345:observer;3456:",
              answer(lambda: plain.reconfig(
                  joining="server.999=0.0.0.0:1234:2345:observer;3456",
                  leaving=None, new_members=None)))
        print("2 no super auth, joining 'some thing':",
              answer(lambda: plain.reconfig(joining="some thing", leaving=None,
                                            new_members=None)))
        print("3 super, joining 'some thing':",
              answer(lambda: sup.reconfig(joining="some thing", leaving=None,
                                          new_members=None)))
        print("4 super, joining %s:" % joining,
              answer(lambda: sup.reconfig(joining=joining, leaving=None, new_members=None)))
        data, _ = sup.reconfig(joining=None, leaving="100", new_members=None)
        print("5 super, leaving 100: OK data=%r" % data.decode())
        cur = int(data.decode().split("\n")[-1].split("=")[1], base=16)
        print("6 no super auth, joining again, from_config=0x%x+1:" % cur,
              answer(lambda: plain.reconfig(joining=joining, leaving=None, new_members=None,
                                            from_config=cur + 1)))
        print("7 super, joining again, from_config=0x%x+1:" % cur,
              answer(lambda: sup.reconfig(joining=joining, leaving=None, new_members=None,
                                          from_config=cur + 1)))
        for s in cluster:
            c = KazooClient(hosts=s.address, timeout=15)
            c.start(30)
            d, _ = c.get("/zookeeper/config")
            print("member %s /zookeeper/config: %r" % (s.server_info.server_id, d.decode()))
            c.stop()
        show_members(cluster, "at end")
        plain.stop()
        sup.stop()
    finally:
        cluster.terminate()
        sys.stdout.flush()


main()

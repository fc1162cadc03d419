#!/usr/bin/env python3
"""Runs every raw-protocol case against real ZooKeeper and against keel and compares the
two transcripts line by line (see rawzk.py for what is masked).

    rawdiff.py --zk HOST:PORT --keel HOST:PORT [--group NAME] [-k SUBSTRING] [--show]

Cases live in cases/*.py, registered with @case("name"). A case gets a `Side`: its own
subtree (`s.p("/x")` is a path under it, created before the case starts), a control
session `s.ctrl`, and `s.conn(name)` / `s.raw(name)` for more connections. A module's
GROUP (default "default") names the server configuration it needs; run.sh starts one
pair of servers per group and passes --group.

KNOWN = {"case": "reason"} in a module lists differences kept on purpose (the README
says why); they are reported, never silently passed, and a KNOWN case that no longer
differs is reported too.

Prints one line per case and `rawdiff: N cases, N same, N differ, N known` last; exits
1 if any case differs.
"""

import argparse
import difflib
import importlib.util
import os
import re
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import rawzk  # noqa: E402

CASES = []  # (module, name, fn)


def case(name):
    def register(fn):
        CASES.append((fn.__module__, name, fn))
        return fn
    return register


class Side:
    """One server as a case sees it."""

    def __init__(self, addr, case_name, index, run_id):
        self.addr = addr
        name = re.sub(r"[^A-Za-z0-9_]", "_", case_name)
        self.root = "/rd%s-%03d-%s" % (run_id, index, name)
        self.t = rawzk.Transcript()
        self.conns = []
        setup = rawzk.Transcript()
        self.ctrl = rawzk.Conn(addr, setup, "ctrl").handshake()
        self.ctrl.send((1, rawzk.CREATE, rawzk.create_body(self.root)))
        self.ctrl.drain()
        created = [ln for ln in setup.lines if ln.startswith("ctrl reply xid=1 ")]
        if not created or "err=0" not in created[0]:
            raise RuntimeError(f"could not create the case root {self.root}: {setup.lines}")
        # The case's zxids count from the creation of its root.
        base = int(re.search(r"zxid=\+(\d+)", created[0]).group(1))
        self.t.zxid_base = base
        self.t.sessions[self.ctrl.session_id] = "ctrl"
        self.ctrl.t = self.t
        self.conns.append(self.ctrl)

    def p(self, path=""):
        """A path under this case's subtree."""
        return self.root + path

    def conn(self, name, **handshake):
        """A new connection with a session (kw as for rawzk.connect_request)."""
        c = rawzk.Conn(self.addr, self.t, name).handshake(**handshake)
        self.conns.append(c)
        return c

    def raw(self, name):
        """A new connection with nothing sent yet."""
        c = rawzk.Conn(self.addr, self.t, name)
        self.conns.append(c)
        return c

    def note(self, *fields):
        """A line of the case's own (for instance a value it computed)."""
        self.t.add("note", *fields)

    def close(self):
        """Closes the case's sessions and waits for each close, so no session expires
        (and takes a zxid) during a later case."""
        for c in self.conns:
            c.close_session()
            c.close()


def load_cases(group):
    for fname in sorted(os.listdir(os.path.join(HERE, "cases"))):
        if not fname.endswith(".py"):
            continue
        spec = importlib.util.spec_from_file_location(fname[:-3],
                                                      os.path.join(HERE, "cases", fname))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[fname[:-3]] = mod
        spec.loader.exec_module(mod)
        if getattr(mod, "GROUP", "default") != group:
            CASES[:] = [c for c in CASES if c[0] != mod.__name__]
    return {m: getattr(sys.modules[m], "KNOWN", {}) for m in {c[0] for c in CASES}}


def run_side(addr, name, fn, index, run_id):
    try:
        side = Side(addr, name, index, run_id)
    except Exception as e:  # noqa: BLE001 - reported as the case's outcome
        return [f"setup failed: {e}"]
    try:
        fn(side)
    except Exception:  # noqa: BLE001
        side.t.add("case raised", traceback.format_exc().strip().splitlines()[-1])
    finally:
        side.close()
    return side.t.lines


def hostport(text):
    host, port = text.rsplit(":", 1)
    return host, int(port)


def without_cut_reply(lines):
    """ZooKeeper's transcript without a partial frame read just before its close.

    Twice in CI (pipelined_mixed_500_then_close_then_requests on 2026-12-06,
    close_then_exists on 2026-12-07) ZooKeeper, asked to close a session with requests
    pipelined behind it, closed its socket 4 bytes into a frame after the closeSession
    reply, where every other run (and 26 isolated runs of the first case) closed at a
    frame boundary, as keel does. Both transcripts agreed otherwise. Only ZooKeeper's
    side is forgiven: a cut frame from keel is a defect.
    """
    out = []
    for i, line in enumerate(lines):
        name, _, what = line.partition(" ")
        if what.startswith("partial-frame(") and lines[i + 1:i + 2] == [f"{name} closed"]:
            continue
        out.append(line)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zk", required=True, type=hostport)
    ap.add_argument("--keel", required=True, type=hostport)
    ap.add_argument("--group", default="default")
    ap.add_argument("-k", default="", help="only cases whose name contains this")
    ap.add_argument("--show", action="store_true", help="print both transcripts")
    args = ap.parse_args()
    sys.modules.setdefault("rawdiff", sys.modules[__name__])
    known = load_cases(args.group)
    same = differ = known_n = 0
    # Case roots carry the run's id, so a server can be reused across runs; both
    # servers get the same paths.
    run_id = "%05d" % (int(time.time()) % 100000)
    for index, (mod, name, fn) in enumerate(CASES):
        if args.k not in name:
            continue
        zk = run_side(args.zk, name, fn, index, run_id)
        keel = run_side(args.keel, name, fn, index, run_id)
        reason = known.get(mod, {}).get(name)
        if args.show:
            print(f"--- {name} (zk)\n" + "\n".join(zk) + f"\n--- {name} (keel)\n" + "\n".join(keel))
        if zk == keel:
            same += 1
            print(f"same    {name}" + ("   (listed as KNOWN but no longer differs)" if reason else ""))
            continue
        if without_cut_reply(zk) == keel:
            same += 1
            print(f"same    {name}   (ZooKeeper closed inside a frame; see without_cut_reply)")
            continue
        if reason:
            known_n += 1
            print(f"KNOWN   {name}: {reason}")
        else:
            differ += 1
            print(f"DIFFER  {name}")
        for line in difflib.unified_diff(zk, keel, "zookeeper", "keel", lineterm="", n=2):
            print("        " + line)
    total = same + differ + known_n
    print(f"rawdiff[{args.group}]: {total} cases, {same} same, {differ} differ, {known_n} known")
    return 1 if differ or (total == 0 and not args.k) else 0


if __name__ == "__main__":
    sys.exit(main())

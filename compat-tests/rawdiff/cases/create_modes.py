"""Node types by opcode and flags (issue 14 items 5 and 6), by enumeration: every create
opcode (create 1, create2 15, createContainer 19, createTTL 21) x every flags value
(0..6 and the invalid -1, 7, 100), alone and inside a multi. For each: the reply (a
multi's result types: create 1 with the path, create2 15 with path and Stat), the
created znode's Stat (ephemeralOwner), and whether the container reaper takes it as a
container (once its child is gone) or a TTL node (its TTL after the last change).

Runs in the `reap` group: extendedTypesEnabled=true and a container check every 200
ms (run.sh passes znode.container.checkIntervalMs to ZooKeeper as a JVM property).

createTTL with a negative TTL and a mode without one is left out: ZooKeeper accepts it
and then halts (its DataTree cannot apply the txn); keel answers BADARGUMENTS
(tests/state_machine.rs covers it)."""

import time

from rawdiff import case
from rawzk import *  # noqa: F401,F403

GROUP = "reap"

OPCODES = [CREATE, CREATE2, CREATE_CONTAINER, CREATE_TTL]
FLAGS = [-1, 0, 1, 2, 3, 4, 5, 6, 7, 100]
# Long enough that no TTL node expires before the case has given it a child (the
# creates and the child creates are one write each, fsynced: seconds on a slow disk).
TTL_MS = 3000
# From the last child delete: past every TTL node's expiry, and two more runs of the
# 200 ms reaper on both servers.
REAP_WAIT_S = 3.5


def create_frame(opcode, path, flags, ttl=TTL_MS):
    return opcode, create_body(path, flags=flags, ttl=ttl if opcode == CREATE_TTL else None)


def replies(t, xid):
    """The `err` of each reply recorded with `xid` in transcript `t`."""
    out = []
    for line in t.lines:
        if f" reply xid={xid} " in line:
            out.append(int(line.split(" err=", 1)[1].split(" ", 1)[0]))
    return out


def check_types(s, wrap):
    """Creates one znode per (opcode, flags); `wrap` turns (opcode, body) into the
    request. Then reads each back and gives each a child, takes every child away in
    one multi, waits for the reaper and reads each again.

    The reaper must not act between two of the case's writes: its txn would take a
    zxid there on one server and elsewhere on the other, and every later zxid would
    differ (seen in CI). A container becomes the reaper's once its child is gone, a
    TTL node once it is childless past its TTL; so the children go in one txn, the
    last write before the wait, and the TTL outlasts the writes before it."""
    c = s.conn("a")
    names = {}
    xid = 1
    for opcode in OPCODES:
        for flags in FLAGS:
            base = s.p(f"/op{opcode}_f{flags}")
            c.send((xid, *wrap(create_frame(opcode, base, flags))))
            c.drain()
            xid += 1
            # The znode's real name: the base, or the base with a sequential suffix.
            names[opcode, flags] = base
    c.send((xid, GET_CHILDREN, path_watch_body(s.p(""))))
    c.drain()
    xid += 1
    kids = {}
    for line in s.t.lines:
        if f"xid={xid - 1} " in line and "children=" in line:
            kids = eval(line.split("children=", 1)[1])  # noqa: S307 - our own transcript
    for key, base in names.items():
        short = base.rsplit("/", 1)[1]
        match = [k for k in kids if k == short or (k.startswith(short) and k[len(short):].isdigit())]
        names[key] = s.p("/" + match[0]) if match else None
    child_xids = {}
    for key, p in names.items():
        if p is None:
            continue
        c.send((xid, EXISTS, path_watch_body(p)),
               (xid + 1, CREATE, create_body(p + "/k")))
        child_xids[p] = xid + 1
        xid += 2
    c.drain()
    # The children this server let the case create (none under an ephemeral); the
    # transcripts compare which.
    children = [p + "/k" for p, x in child_xids.items() if replies(s.t, x) == [0]]
    if children:
        c.send((xid, MULTI, multi_body([(DELETE, path_version_body(k)) for k in children])))
        xid += 1
        c.drain()
    time.sleep(REAP_WAIT_S)
    for key, p in names.items():
        if p is not None:
            c.send((xid, EXISTS, path_watch_body(p)))
            xid += 1
    c.drain()


@case("create_modes_single")
def _(s):
    check_types(s, lambda f: f)


@case("create_modes_in_multi")
def _(s):
    check_types(s, lambda f: (MULTI, multi_body([f])))


@case("create_modes_multi_mixed")
def _(s):
    """Several creates of different kinds in one multi, then one that fails after a TTL
    mode sent as a plain create (a multi error, not MARSHALLINGERROR, since the failed op
    comes first), and one where it comes after a success (MARSHALLINGERROR)."""
    c = s.conn("a")
    ops = [create_frame(op, s.p(f"/m{op}_{f}"), f)
           for op in OPCODES for f in (0, 1, 2, 4, 5)
           if not (op != CREATE_TTL and f == 5)]
    c.send((1, MULTI, multi_body(ops)))
    c.send((2, MULTI, multi_body([create_frame(CREATE, s.p("/absent/x"), 0),
                                  create_frame(CREATE2, s.p("/ttl_as_create"), 5)])))
    c.send((3, MULTI, multi_body([create_frame(CREATE, s.p("/fine"), 0),
                                  create_frame(CREATE_CONTAINER, s.p("/ttl_as_container"), 6)])))
    c.send((4, GET_CHILDREN, path_watch_body(s.p(""))))
    c.send((5, CREATE, create_body(s.p("/after"))))
    c.drain()


@case("create_modes_ttl_values")
def _(s):
    """createTTL with TTL modes and TTLs at and past the limits, alone and in a multi."""
    c = s.conn("a")
    xid = 1
    for flags in (5, 6):
        # No TTL of 1 ms here: the reaper (every 200 ms in this group) would delete such
        # a node at a moment that differs between the servers, and its zxid with it.
        for ttl in (0, 3_600_000, (1 << 40) - 1, 1 << 40, -1):
            for multi in (False, True):
                f = (CREATE_TTL, create_body(s.p(f"/t{flags}_{ttl}_{int(multi)}"), flags=flags, ttl=ttl))
                c.send((xid, *(((MULTI, multi_body([f])) if multi else f))))
                xid += 1
    # Non-TTL modes with a TTL >= 0: BADARGUMENTS alone; in a multi the TTL is dropped.
    for flags in (0, 1, 2, 3, 4):
        for ttl in (0, 100):
            for multi in (False, True):
                f = (CREATE_TTL, create_body(s.p(f"/n{flags}_{ttl}_{int(multi)}"), flags=flags, ttl=ttl))
                c.send((xid, *(((MULTI, multi_body([f])) if multi else f))))
                xid += 1
    c.drain()

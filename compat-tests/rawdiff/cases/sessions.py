"""Session lifecycle (issue 14 items 1 and 2): requests around a closeSession, pipelined
and in one TCP write, and whether any ephemeral outlives its session.

ZooKeeper answers every request before a closeSession in order, then the closeSession,
then closes the connection. What it does with requests after the closeSession depends
on a race between its threads: usually it drops them unanswered (the session is already
closing when they arrive, ZooKeeperServer.touch fails), and sometimes, when its prep
thread lags behind the reader, it answers each with SESSIONEXPIRED (-112), a write also
using a zxid. keel always drops them. So the transcript of a request after the close
keeps only what both outcomes share: `after_close` removes the -112 replies to those
xids, and the control session's later replies have their header zxid masked (the
znodes' own zxids are kept). Everything else (replies before the close, their order,
xids, zxids, the close itself, and what remains in the tree) is compared as it is.
"""

import re

from rawdiff import case
from rawzk import *  # noqa: F401,F403

TTL_MS = 60000


def after_close(s, name, xids):
    """Drops `name`'s replies to `xids` (requests sent after its closeSession), which
    only ZooKeeper's racy outcome has (see the module doc), and masks the header zxid
    of every line recorded from now on by the control session."""
    pat = re.compile(r"^%s reply xid=(-?\d+) " % re.escape(name))
    keep = []
    for line in s.t.lines:
        m = pat.match(line)
        if m and int(m.group(1)) in xids:
            continue
        keep.append(line)
    s.t.lines[:] = keep
    s.mask_from = len(s.t.lines)


def ctrl_check(s, *paths, root_stat=True):
    """What the control session sees of the case's subtree afterwards: the children of
    the case root (with its stat unless `root_stat` is false), and the stat of each
    path (an ephemeral shows its owner)."""
    c = s.ctrl
    frames = [(900, GET_CHILDREN2 if root_stat else GET_CHILDREN, path_watch_body(s.p("")))]
    frames += [(901 + i, EXISTS, path_watch_body(s.p(p))) for i, p in enumerate(paths)]
    c.send(*frames)
    c.drain()
    start = getattr(s, "mask_from", None)
    if start is not None:
        s.t.lines[start:] = [re.sub(r"^(ctrl reply xid=\S+) zxid=\S+", r"\1 zxid=*", ln)
                             for ln in s.t.lines[start:]]


def create_frame(opcode, path, flags):
    ttl = TTL_MS if opcode == CREATE_TTL else None
    return (opcode, create_body(path, b"d", flags=flags, ttl=ttl))


# Every request kind that can follow a closeSession: (label, opcode, body builder on
# the Side). Creates cover each opcode x every flag value 3.8 knows.
CREATE_OPS = (CREATE, CREATE2, CREATE_CONTAINER, CREATE_TTL)
FLAGS = range(7)  # persistent, ephemeral, +sequential, container, TTL, TTL sequential


def other_ops():
    return [
        ("delete", DELETE, lambda s: path_version_body(s.p("/pre"))),
        ("set_data", SET_DATA, lambda s: set_data_body(s.p(""), b"after")),
        ("set_acl", SET_ACL, lambda s: set_acl_body(s.p("/pre"), OPEN_ACL)),
        ("check", CHECK, lambda s: path_version_body(s.p("/pre"), 0)),
        ("sync", SYNC, lambda s: ustring(s.p(""))),
        ("exists", EXISTS, lambda s: path_watch_body(s.p("/pre"), True)),
        ("get_data", GET_DATA, lambda s: path_watch_body(s.p("/pre"), True)),
        ("get_acl", GET_ACL, lambda s: ustring(s.p("/pre"))),
        ("get_children", GET_CHILDREN, lambda s: path_watch_body(s.p(""), True)),
        ("get_children2", GET_CHILDREN2, lambda s: path_watch_body(s.p(""), True)),
        ("ping", PING, lambda s: b""),
        ("multi_create_ephemeral", MULTI,
         lambda s: multi_body([(CREATE, create_body(s.p("/m"), flags=1))])),
        ("multi_persistent_then_ephemeral", MULTI,
         lambda s: multi_body([(CREATE, create_body(s.p("/m"))),
                               (CREATE, create_body(s.p("/m/e"), flags=1))])),
        ("multi_read", MULTI_READ,
         lambda s: multi_body([(GET_CHILDREN, path_watch_body(s.p(""))),
                               (GET_DATA, path_watch_body(s.p("/pre")))])),
        ("check_watches", CHECK_WATCHES, lambda s: ustring(s.p("")) + i32(1)),
        ("remove_watches", REMOVE_WATCHES, lambda s: ustring(s.p("")) + i32(1)),
        ("delete_container", DELETE_CONTAINER, lambda s: ustring(s.p("/pre"))),
        ("set_watches", SET_WATCHES, lambda s: set_watches_body(0, data=[s.p("/pre")])),
        ("set_watches2", SET_WATCHES2,
         lambda s: set_watches_body(0, persistent=[s.p("")], recursive=[s.p("")])),
        ("get_ephemerals", GET_EPHEMERALS, lambda s: ustring(s.p(""))),
        ("get_all_children_number", GET_ALL_CHILDREN_NUMBER, lambda s: ustring(s.p(""))),
        ("add_watch", ADD_WATCH, lambda s: ustring(s.p("")) + i32(1)),
        ("who_am_i", WHO_AM_I, lambda s: b""),
        ("close_session_again", CLOSE_SESSION, lambda s: b""),
        ("auth_digest", AUTH, lambda s: auth_body("digest", "bob:secret")),
    ]


def after_ops():
    ops = []
    for opcode in CREATE_OPS:
        for flags in FLAGS:
            ops.append((f"op{opcode}_flags{flags}", None,
                        lambda s, o=opcode, f=flags: create_frame(o, s.p("/n"), f)))
    for label, opcode, body in other_ops():
        ops.append((label, opcode, lambda s, o=opcode, b=body: (o, b(s))))
    return ops


def xid_for(opcode):
    # ZooKeeper's special xids: a ping and setWatches go out with theirs.
    return {PING: XID_PING, SET_WATCHES: XID_SET_WATCHES,
            SET_WATCHES2: XID_SET_WATCHES, AUTH: XID_AUTH}.get(opcode, 2)


def close_then(s, make, connect_first):
    """closeSession, then the request `make` builds, then a read, in one TCP write; with
    `connect_first` the ConnectRequest goes in the same write (ZOOKEEPER-1208)."""
    s.ctrl.send((1, CREATE, create_body(s.p("/pre"))))
    s.ctrl.drain()
    c = s.raw("a") if connect_first else s.conn("a")
    opcode, body = make(s)
    xid = xid_for(opcode)
    first = [connect_request()] if connect_first else []
    c.send(*first, (1, CLOSE_SESSION, b""), (xid, opcode, body),
           (3, GET_DATA, path_watch_body(s.p("/pre"))))
    c.wait_closed()
    after_close(s, "a", {xid, 3})
    ctrl_check(s, "", "/n", "/m", "/pre")


def register_after_close(label, make):
    case(f"close_then_{label}")(lambda s: close_then(s, make, False))
    case(f"connect_close_then_{label}")(lambda s: close_then(s, make, True))


for _label, _opcode, _make in after_ops():
    register_after_close(_label, _make)


def pipelined(s, n, kind):
    if kind == "write":
        return [(i + 1, SET_DATA, set_data_body(s.p(""), b"v%d" % i)) for i in range(n)]
    if kind == "read":
        return [(i + 1, GET_DATA, path_watch_body(s.p(""))) for i in range(n)]
    if kind == "ephemeral":
        return [(i + 1, CREATE, create_body(s.p("/e%d" % i), flags=1)) for i in range(n)]
    # mixed: a write, a read and an ephemeral create per step
    out = []
    for i in range(n):
        out += [(3 * i + 1, SET_DATA, set_data_body(s.p(""), b"v%d" % i)),
                (3 * i + 2, GET_DATA, path_watch_body(s.p(""))),
                (3 * i + 3, CREATE2, create_body(s.p("/e%d" % i), flags=3))]
    return out


def register_pipelined(n, kind):
    @case(f"pipelined_{kind}_{n}_then_close")
    def _(s):
        # A child watch of the control session sees the ephemerals come and go.
        s.ctrl.send((1, GET_CHILDREN, path_watch_body(s.p(""), True)))
        s.ctrl.drain()
        c = s.conn("a")
        frames = pipelined(s, n, kind)
        close_xid = frames[-1][0] + 1
        c.send(*frames, (close_xid, CLOSE_SESSION, b""))
        c.wait_closed(15)
        s.ctrl.drain()
        ctrl_check(s, "", "/e0")

    @case(f"pipelined_{kind}_{n}_then_close_then_requests")
    def _(s):
        c = s.conn("a")
        frames = pipelined(s, n, kind)
        close_xid = frames[-1][0] + 1
        after = [(close_xid + 1, CREATE, create_body(s.p("/late"), flags=1)),
                 (close_xid + 2, SET_DATA, set_data_body(s.p(""), b"late")),
                 (close_xid + 3, GET_DATA, path_watch_body(s.p("")))]
        c.send(*frames, (close_xid, CLOSE_SESSION, b""), *after)
        c.wait_closed(15)
        after_close(s, "a", {f[0] for f in after})
        ctrl_check(s, "", "/late", "/e0")


for _n in (1, 10, 500):
    for _kind in ("write", "read", "ephemeral", "mixed"):
        register_pipelined(_n, _kind)


@case("ephemerals_then_close_in_one_write_with_connect")
def _(s):
    c = s.raw("a")
    c.send(connect_request(),
           *[(i + 1, CREATE, create_body(s.p("/e%d" % i), flags=1)) for i in range(5)],
           (6, MULTI, multi_body([(CREATE, create_body(s.p("/m"), flags=1)),
                                  (CREATE, create_body(s.p("/q-"), flags=3))])),
           (7, CLOSE_SESSION, b""))
    c.wait_closed()
    ctrl_check(s, "", "/e0", "/m")


@case("session_moved_while_requests_queued")
def _(s):
    """The session's first connection pipelines writes and ephemeral creates; a second
    connection takes the session over at once (same id and password), then closes it.
    How much of the first connection's traffic ZooKeeper handles before it drops that
    connection is a race, so its lines are not compared; what is compared: the second
    connection's handshake, its close, and that no ephemeral is left."""
    a = s.conn("a")
    a.t = Transcript()
    frames = [(i + 1, SET_DATA, set_data_body(s.p(""), b"v%d" % i)) for i in range(200)]
    frames += [(201, CREATE, create_body(s.p("/moved"), flags=1)),
               (202, MULTI, multi_body([(CREATE, create_body(s.p("/moved2"), flags=1))])),
               (203, GET_DATA, path_watch_body(s.p("")))]
    a.send(*frames)
    b = s.conn("b", session_id=a.session_id, passwd=a.passwd)
    b.send((1, CLOSE_SESSION, b""))
    b.wait_closed()
    a.wait_closed()
    # The zxids depend on how many of the first connection's writes were applied.
    s.t.lines[:] = [re.sub(r"^(b reply xid=1) zxid=\S+", r"\1 zxid=*", ln) for ln in s.t.lines]
    after_close(s, "b", set())
    ctrl_check(s, "/moved", "/moved2", root_stat=False)


@case("session_moved_then_new_connection_creates_and_closes")
def _(s):
    a = s.conn("a")
    a.send((1, CREATE, create_body(s.p("/first"), flags=1)))
    a.drain()
    b = s.conn("b", session_id=a.session_id, passwd=a.passwd)
    a.wait_closed()
    b.send((1, CREATE, create_body(s.p("/second"), flags=1)),
           (2, GET_EPHEMERALS, ustring(s.p(""))),
           (3, CLOSE_SESSION, b""))
    b.wait_closed()
    ctrl_check(s, "/first", "/second")

"""Watch events and ACLs (issue 14 item 3, CVE-2024-23944): ZooKeeper checks READ on the
changed znode, for the watcher connection's identities, before it delivers any watch
event. A matrix by enumeration: every watch kind x every event type x the ACL of the
changed node and of its parent (READ for the watcher or not, by world, digest and ip
ids), seen by an authenticated and an unauthenticated watcher.

Each case is one (watch kind, event). Inside it, one subtree per (parent ACL, node ACL)
pair: the watches are set while everything is world-readable, then a writer (digest
`owner`) gives the parent and the node their ACLs with setACL (which fires nothing) and
makes the event happen. The watchers' transcripts then show which events arrived."""

import base64
import hashlib

from rawdiff import case
from rawzk import *  # noqa: F401,F403


def digest_id(user, password):
    raw = hashlib.sha1(f"{user}:{password}".encode()).digest()
    return f"{user}:{base64.b64encode(raw).decode()}"


OWNER = ("digest", digest_id("owner", "pw"))
WATCHER = ("digest", digest_id("w", "pw"))

# ACLs by name; the writer (owner) keeps every permission in all of them.
ACLS = {
    "world": [(31, "world", "anyone")],
    "digest": [(31,) + OWNER, (1,) + WATCHER],
    "ip": [(31,) + OWNER, (1, "ip", "127.0.0.1")],
    # Everything but READ for the world, READ only for ids the watchers do not hold.
    "none": [(31,) + OWNER, (30, "world", "anyone"), (1, "ip", "10.1.2.3"),
             (1, "digest", digest_id("other", "pw"))],
}

# Watch kinds: (name, registration): the registration gets the subtree's parent P and
# node N and returns (opcode, body).
WATCHES = [
    ("data_n", lambda p, n: (GET_DATA, path_watch_body(n, True))),
    ("exists_n", lambda p, n: (EXISTS, path_watch_body(n, True))),
    ("child_n", lambda p, n: (GET_CHILDREN, path_watch_body(n, True))),
    ("child_p", lambda p, n: (GET_CHILDREN, path_watch_body(p, True))),
    ("persistent_n", lambda p, n: (ADD_WATCH, ustring(n) + i32(0))),
    ("persistent_p", lambda p, n: (ADD_WATCH, ustring(p) + i32(0))),
    ("recursive_p", lambda p, n: (ADD_WATCH, ustring(p) + i32(1))),
]

# Events: which node exists before (None, "persistent" or "ephemeral").
EVENTS = {
    "created": None,
    "deleted": "persistent",
    "data_changed": "persistent",
    "children_changed": "persistent",  # a child N/c is created, then deleted
    "ephemeral_close": "ephemeral",  # N is an ephemeral whose session closes
}


def run(s, watch, event):
    writer = s.conn("writer")
    writer.send((XID_AUTH, AUTH, auth_body("digest", b"owner:pw")))
    # One session per ephemeral, so each close deletes one znode (ZooKeeper deletes a
    # closing session's ephemerals in its hash-set order).
    ephs = {}
    w_auth = s.conn("w_auth")
    w_auth.send((XID_AUTH, AUTH, auth_body("digest", b"w:pw")))
    w_anon = s.conn("w_anon")
    combos = [(pa, na) for pa in ACLS for na in ACLS]
    xid = 1
    setup = []
    for pa, na in combos:
        p, n = s.p(f"/{pa}-{na}"), s.p(f"/{pa}-{na}/n")
        setup.append((xid, CREATE, create_body(p)))
        xid += 1
        if EVENTS[event] == "persistent":
            setup.append((xid, CREATE, create_body(n)))
            xid += 1
    writer.send(*setup)
    writer.drain()
    if EVENTS[event] == "ephemeral":
        for pa, na in combos:
            ephs[pa, na] = e = s.conn(f"eph-{pa}-{na}")
            e.send((1, CREATE, create_body(s.p(f"/{pa}-{na}/n"), flags=1)))
            e.drain()
    register = dict(WATCHES)[watch]
    for w in (w_auth, w_anon):
        w.send(*[(100 + i, *register(s.p(f"/{pa}-{na}"), s.p(f"/{pa}-{na}/n")))
                 for i, (pa, na) in enumerate(combos)])
        w.drain()
    acls = []
    for pa, na in combos:
        p, n = s.p(f"/{pa}-{na}"), s.p(f"/{pa}-{na}/n")
        acls.append((xid, SET_ACL, set_acl_body(p, ACLS[pa])))
        xid += 1
        if EVENTS[event] is not None:
            acls.append((xid, SET_ACL, set_acl_body(n, ACLS[na])))
            xid += 1
    writer.send(*acls)
    writer.drain()
    ops = []
    for pa, na in combos:
        p, n = s.p(f"/{pa}-{na}"), s.p(f"/{pa}-{na}/n")
        if event == "created":
            ops.append((xid, CREATE, create_body(n, acl=ACLS[na])))
        elif event == "deleted":
            ops.append((xid, DELETE, path_version_body(n)))
        elif event == "data_changed":
            ops.append((xid, SET_DATA, set_data_body(n, b"changed")))
        elif event == "children_changed":
            ops.append((xid, CREATE, create_body(n + "/c")))
            xid += 1
            ops.append((xid, DELETE, path_version_body(n + "/c")))
        xid += 1
    if event == "ephemeral_close":
        for e in ephs.values():
            e.send((2, CLOSE_SESSION, b""))
            e.wait_closed()
    else:
        writer.send(*ops)
        writer.drain()
    for w in (w_auth, w_anon):
        w.drain()


for _watch, _ in WATCHES:
    for _event in EVENTS:
        case(f"watch_acl_{_watch}_{_event}")(
            lambda s, watch=_watch, event=_event: run(s, watch, event))

"""Every opcode (-12..110 and a few far outside), as a request of its own and as the
only op of a multi (14) and of a multiRead (22), with a well-formed body and with a
malformed one (issue 14 item 8). ZooKeeper answers an unknown opcode with
UNIMPLEMENTED (zxid -1) and closes; a known opcode whose record does not decode with
MARSHALLINGERROR (a zxid used for the write opcodes), connection kept; a multi holding
an op it cannot carry with MARSHALLINGERROR and a zxid; a multiRead with
MARSHALLINGERROR and no zxid (the end-of-results marker after it when every op was a
write)."""

from rawdiff import case
from rawzk import *  # noqa: F401,F403

OPCODES = list(range(-12, 111)) + [200, 1000, 0x7fffffff, -100, -1000, -0x80000000]

# The opcodes ZooKeeper 3.8's Request.isValid accepts; any other is UNIMPLEMENTED.
KNOWN_OPS = {CHECK, CLOSE_SESSION, CREATE, CREATE2, CREATE_TTL, CREATE_CONTAINER,
             CREATE_SESSION, DELETE, DELETE_CONTAINER, EXISTS, GET_ACL, GET_CHILDREN,
             GET_ALL_CHILDREN_NUMBER, GET_CHILDREN2, GET_DATA, GET_EPHEMERALS, MULTI,
             MULTI_READ, PING, RECONFIG, SET_ACL, SET_DATA, SET_WATCHES, SET_WATCHES2, SYNC,
             CHECK_WATCHES, REMOVE_WATCHES, ADD_WATCH, WHO_AM_I, AUTH, SASL}

# Requests after which ZooKeeper closes the connection (closeSession always; auth and
# sasl when their record does not decode). Nothing is sent after them: it would race
# the close.
CLOSING = {CLOSE_SESSION, AUTH, SASL}


def good_body(s, opcode):
    """A well-formed record for `opcode` acting on the case's subtree."""
    p = s.p
    return {
        CREATE: create_body(p("/c")),
        CREATE2: create_body(p("/c2")),
        CREATE_CONTAINER: create_body(p("/cc"), flags=4),
        CREATE_TTL: create_body(p("/t"), flags=5, ttl=60000),
        DELETE: path_version_body(p("/gone")),
        DELETE_CONTAINER: p("/gone").encode(),
        EXISTS: path_watch_body(p()),
        GET_DATA: path_watch_body(p()),
        SET_DATA: set_data_body(p(), b"d"),
        GET_ACL: ustring(p()),
        SET_ACL: set_acl_body(p(), OPEN_ACL),
        GET_CHILDREN: path_watch_body(p()),
        GET_CHILDREN2: path_watch_body(p()),
        SYNC: ustring(p()),
        CHECK: path_version_body(p(), 5),
        MULTI: multi_body([(CHECK, path_version_body(p()))]),
        MULTI_READ: multi_body([(GET_DATA, path_watch_body(p()))]),
        RECONFIG: ustring(None) + ustring(None) + ustring(None) + i64(-1),
        CHECK_WATCHES: ustring(p()) + i32(1),
        REMOVE_WATCHES: ustring(p()) + i32(1),
        SET_WATCHES: set_watches_body(0),
        SET_WATCHES2: set_watches_body(0, persistent=[], recursive=[]),
        GET_EPHEMERALS: ustring(p()),
        GET_ALL_CHILDREN_NUMBER: ustring(p()),
        ADD_WATCH: ustring(p()) + i32(0),
        AUTH: auth_body("digest", "u:p"),
        CREATE_SESSION: i32(30000),
    }.get(opcode, ustring(p()))


def finish(c, opcode, body_kind):
    closes = opcode == CLOSE_SESSION or (opcode in CLOSING and body_kind == "bad")
    if opcode in KNOWN_OPS and not closes:
        c.drain()
    else:
        c.wait_closed()


def single(opcode, body_kind):
    def run(s):
        c = s.conn("a")
        body = good_body(s, opcode) if body_kind == "good" else b"\x00\x00"
        c.send((1, opcode, body))
        finish(c, opcode, body_kind)
    return run


for _op in OPCODES:
    case(f"op_single_{_op}")(single(_op, "good"))
    if _op in KNOWN_OPS:
        case(f"op_single_malformed_{_op}")(single(_op, "bad"))


def sub_op(container, opcode):
    def run(s):
        c = s.conn("a")
        c.send((1, container, multi_body([(opcode, good_body(s, opcode))])),
               (2, EXISTS, path_watch_body(s.p("/c"))))
        c.drain()
    return run


for _op in OPCODES:
    case(f"op_in_multi_{_op}")(sub_op(MULTI, _op))
    case(f"op_in_multiread_{_op}")(sub_op(MULTI_READ, _op))


@case("op_multi_mixed")
def _(s):
    """Reads and writes mixed in both containers, and a bad op after good ones: nothing
    of the multi applies."""
    c = s.conn("a")
    w = (CREATE, create_body(s.p("/m")))
    r = (GET_DATA, path_watch_body(s.p()))
    c.send((1, MULTI, multi_body([w, r])),
           (2, MULTI, multi_body([r, w])),
           (3, MULTI_READ, multi_body([r, w])),
           (4, MULTI_READ, multi_body([w, r])),
           (5, MULTI_READ, multi_body([w, (DELETE, path_version_body(s.p("/m")))])),
           (6, MULTI, multi_body([w, (SET_ACL, set_acl_body(s.p(), OPEN_ACL))])),
           (7, MULTI, multi_body([w, (12345, b"")])),
           (8, EXISTS, path_watch_body(s.p("/m"))))
    c.drain()


@case("op_multi_truncated")
def _(s):
    """A multi and a multiRead whose records end early."""
    c = s.conn("a")
    full = multi_body([(CREATE, create_body(s.p("/m")))])
    c.send((1, MULTI, full[:-9]), (2, MULTI, full[:12]), (3, MULTI_READ, full[:-9]),
           (4, MULTI_READ, multi_body([(GET_DATA, path_watch_body(s.p()))])[:-9]),
           (5, EXISTS, path_watch_body(s.p("/m"))))
    c.drain()


@case("op_unknown_then_more")
def _(s):
    """An unknown opcode closes the connection; the session stays usable elsewhere."""
    c = s.conn("a")
    c.send((1, 555, b""))
    c.wait_closed()
    d = s.conn("b")
    d.send((1, EXISTS, path_watch_body(s.p())))
    d.drain()


@case("op_ping_with_other_xids")
def _(s):
    c = s.conn("a")
    c.send((5, PING, b""), (-4, PING, b""), (77, PING, b"junk"))
    # Every ping reply has xid -2, so drain()'s own ping could not be told apart.
    c.wait_closed(1.0)


@case("op_create_session_again")
def _(s):
    """createSession (-10) as a request: with a timeout in its body ZooKeeper sends the
    ConnectResponse again (a zxid used); without one, MARSHALLINGERROR."""
    c = s.conn("a")
    c.send((1, CREATE_SESSION, i32(4000)))
    c.drain()
    c.send((2, CREATE_SESSION, b""), (3, CREATE_SESSION, i32(30000) + b"tail"),
           (4, EXISTS, path_watch_body(s.p())))
    c.drain()


@case("op_check_alone")
def _(s):
    """check (13) outside a multi: ZooKeeper 3.8 sends no reply when the version
    matches, and an error reply otherwise."""
    c = s.conn("a")
    c.send((1, CHECK, path_version_body(s.p())), (2, CHECK, path_version_body(s.p(), 0)),
           (3, CHECK, path_version_body(s.p(), 1)), (4, CHECK, path_version_body(s.p("/no"))),
           (5, EXISTS, path_watch_body(s.p())))
    c.drain()

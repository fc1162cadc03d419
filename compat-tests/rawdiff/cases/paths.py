"""Path validation (issue 14 item 12): every class of path bytes in every request that
carries a path, single and inside multi/multiRead, as ZooKeeper answers it. ZooKeeper
decodes a string as UTF-8 replacing what is not (so invalid bytes become U+FFFD), keeps
a null (-1) string as null, validates paths only for writes (PathUtils.validatePath:
BADARGUMENTS) and looks reads up as they are (its tree also holds the root under the
empty path)."""

from rawdiff import case
from rawzk import *  # noqa: F401,F403

# Reads of "/" and "" list and stat the root, so these cases get servers of their own.
GROUP = "paths"


def classes(root):
    """(name, path bytes or None) for each class; `root` is the case's subtree (bytes)."""
    r = root
    out = [
        ("empty", b""), ("null", None), ("root", b"/"), ("case_root", r),
        ("relative", b"rel"), ("relative_slash", b"rel/x"),
        ("trailing_slash", r + b"/"), ("double_slash", r + b"//x"),
        ("dot", r + b"/./x"), ("dotdot", r + b"/../x"), ("end_dot", r + b"/."),
        ("end_dotdot", r + b"/.."), ("dot_name", r + b"/.x"), ("dotdot_name", r + b"/..x"),
        ("nul", r + b"/a\x00b"), ("nul_end", r + b"/a\x00"),
        ("zookeeper", b"/zookeeper"), ("zookeeper_quota", b"/zookeeper/quota"),
        ("zookeeper_config", b"/zookeeper/config"), ("zookeeper_missing", b"/zookeeper/none"),
        ("space", r + b"/a b"), ("utf8_e_acute", r + "/é".encode()),
        ("tab", r + b"/a\tb"),
    ]
    for cp in [0x01, 0x1f, 0x7f, 0x80, 0x9f, 0xa0, 0xd7ff, 0xe000, 0xf8ff, 0xf900, 0xffef,
               0xfff0, 0xfffd, 0xffff, 0x10000, 0x1f600, 0x10ffff]:
        out.append((f"u{cp:04x}", r + b"/a" + chr(cp).encode()))
    for name, raw in [("bad_ff", b"\xff"), ("bad_c0_80", b"\xc0\x80"), ("bad_lone_cont", b"\x80"),
                      ("bad_surrogate", b"\xed\xa0\x80"), ("bad_truncated", b"\xe2\x82"),
                      ("bad_overlong", b"\xe0\x80\xaf"), ("bad_f5", b"\xf5\x80\x80\x80")]:
        out.append((name, r + b"/a" + raw))
    return out


# Classes outside the Basic Multilingual Plane: refused by every write, and echoed by
# sync and setWatches events in ZooKeeper's own encoding (see KNOWN).
NON_BMP = {"u10000", "u1f600", "u10ffff"}


def path_str(p):
    """As a jute string: None is null."""
    return buf(p)


# opcode -> (body builder from path bytes, name)
def _bodies():
    return [
        ("create", CREATE, lambda p: path_str(p) + buf(b"") + acl_list(OPEN_ACL) + i32(0)),
        ("create_seq", CREATE, lambda p: path_str(p) + buf(b"") + acl_list(OPEN_ACL) + i32(2)),
        ("create2", CREATE2, lambda p: path_str(p) + buf(b"") + acl_list(OPEN_ACL) + i32(0)),
        ("create_container", CREATE_CONTAINER,
         lambda p: path_str(p) + buf(b"") + acl_list(OPEN_ACL) + i32(4)),
        ("create_ttl", CREATE_TTL,
         lambda p: path_str(p) + buf(b"") + acl_list(OPEN_ACL) + i32(5) + i64(60000)),
        ("delete", DELETE, lambda p: path_str(p) + i32(-1)),
        ("exists", EXISTS, lambda p: path_str(p) + boolean(False)),
        ("exists_watch", EXISTS, lambda p: path_str(p) + boolean(True)),
        ("get_data", GET_DATA, lambda p: path_str(p) + boolean(False)),
        ("set_data", SET_DATA, lambda p: path_str(p) + buf(b"v") + i32(-1)),
        ("get_acl", GET_ACL, lambda p: path_str(p)),
        ("set_acl", SET_ACL, lambda p: path_str(p) + acl_list(OPEN_ACL) + i32(-1)),
        ("get_children", GET_CHILDREN, lambda p: path_str(p) + boolean(False)),
        ("get_children2", GET_CHILDREN2, lambda p: path_str(p) + boolean(False)),
        ("sync", SYNC, lambda p: path_str(p)),
        ("check", CHECK, lambda p: path_str(p) + i32(7)),
        ("get_ephemerals", GET_EPHEMERALS, lambda p: path_str(p)),
        ("get_all_children_number", GET_ALL_CHILDREN_NUMBER, lambda p: path_str(p)),
        ("add_watch", ADD_WATCH, lambda p: path_str(p) + i32(0)),
        ("add_watch_recursive", ADD_WATCH, lambda p: path_str(p) + i32(1)),
        ("check_watches", CHECK_WATCHES, lambda p: path_str(p) + i32(3)),
        ("remove_watches", REMOVE_WATCHES, lambda p: path_str(p) + i32(3)),
        ("delete_container", DELETE_CONTAINER, lambda p: p or b""),
    ]


def single(name, opcode, body, only=None):
    def run(s):
        c = s.conn("a")
        root = s.p().encode()
        xid = 0
        for cls, p in classes(root):
            if only is not None and (cls in only) != only_in:
                continue
            xid += 1
            c.send((xid, opcode, body(p)))
        c.drain()
    only_in = name.endswith("_non_bmp")
    return run


for _name, _op, _body in _bodies():
    if _op == SYNC:
        case(f"path_{_name}")(single(_name, _op, _body, NON_BMP))
        case(f"path_{_name}_non_bmp")(single(f"{_name}_non_bmp", _op, _body, NON_BMP))
    else:
        case(f"path_{_name}")(single(_name, _op, _body))


def in_multi(name, container, opcode, body, null_only=False):
    """Each class as the only op of a multi/multiRead. The null path has cases of its
    own: ZooKeeper spends a zxid on a multi with one (see KNOWN)."""
    def run(s):
        c = s.conn("a")
        root = s.p().encode()
        xid = 0
        for cls, p in classes(root):
            if (cls == "null") != null_only:
                continue
            xid += 1
            c.send((xid, container, multi_body([(opcode, body(p))])))
        c.send((xid + 1, CREATE, create_body(s.p("/after"))))
        c.drain()
    return run


_MULTI_OPS = [
    ("create", CREATE, lambda p: path_str(p) + buf(b"") + acl_list(OPEN_ACL) + i32(0)),
    ("create_seq", CREATE, lambda p: path_str(p) + buf(b"") + acl_list(OPEN_ACL) + i32(2)),
    ("delete", DELETE, lambda p: path_str(p) + i32(-1)),
    ("set_data", SET_DATA, lambda p: path_str(p) + buf(b"v") + i32(-1)),
    ("check", CHECK, lambda p: path_str(p) + i32(-1)),
]
_MULTI_READ_OPS = [
    ("get_data", GET_DATA, lambda p: path_str(p) + boolean(False)),
    ("get_children", GET_CHILDREN, lambda p: path_str(p) + boolean(False)),
]
for _name, _op, _body in _MULTI_OPS:
    case(f"path_multi_{_name}")(in_multi(_name, MULTI, _op, _body))
for _name, _op, _body in _MULTI_READ_OPS:
    case(f"path_multiread_{_name}")(in_multi(_name, MULTI_READ, _op, _body))
    case(f"path_multiread_null_{_name}")(
        in_multi(_name, MULTI_READ, _op, _body, null_only=True))

_NULL_MULTI_REASON = ("ZooKeeper takes a zxid for a multi with a null path and logs no txn "
               "(PrepRequestProcessor.getPendingChanges fails on it after getNextZxid), so "
               "its next write's zxid skips one; keel answers the same MARSHALLINGERROR "
               "without using a zxid (README, differences kept on purpose)")


def set_watches_case(kind, non_bmp=False):
    def run(s):
        c = s.conn("a")
        root = s.p().encode()
        paths = [p for cls, p in classes(root)
                 if p is not None and (cls in NON_BMP) == non_bmp]
        lists = {"data": 0, "exist": 1, "child": 2, "persistent": 3, "recursive": 4}
        body = i64(0)
        n = 5 if kind in ("persistent", "recursive") else 3
        for i in range(n):
            items = paths if i == lists[kind] else []
            body += i32(len(items)) + b"".join(buf(p) for p in items)
        c.send((XID_SET_WATCHES, SET_WATCHES2 if n == 5 else SET_WATCHES, body))
        c.drain()
        # Whatever the watches were set on, changing the root and the case's subtree
        # shows which of them were registered.
        s.ctrl.send((50, SET_DATA, set_data_body(s.p(), b"x")),
                    (51, CREATE, create_body(s.p("/new"))))
        s.ctrl.drain()
        c.drain()
    return run


for _kind in ["data", "exist", "child", "persistent", "recursive"]:
    case(f"path_set_watches_{_kind}")(set_watches_case(_kind))
    case(f"path_set_watches_{_kind}_non_bmp")(set_watches_case(_kind, non_bmp=True))


@case("path_set_watches_null_entry")
def _(s):
    c = s.conn("a")
    c.send((XID_SET_WATCHES, SET_WATCHES, i64(0) + i32(1) + buf(None) + i32(0) + i32(0)))
    c.drain()


@case("path_empty_watch_fires")
def _(s):
    """A watch set through the empty path: is it on the root?"""
    c = s.conn("a")
    c.send((1, EXISTS, path_watch_body("", True)), (2, GET_DATA, path_watch_body("", True)),
           (3, GET_CHILDREN, path_watch_body("", True)))
    c.drain()
    s.ctrl.send((50, CREATE, create_body(s.p("/kid"))))
    s.ctrl.drain()
    c.drain()


# Last in the module: ZooKeeper's zxid skip in these would shift every later case's view
# of older znodes (their zxids relative to the case's start).
for _name, _op, _body in _MULTI_OPS:
    case(f"path_multi_null_{_name}")(in_multi(_name, MULTI, _op, _body, null_only=True))

_NON_BMP_REASON = (
    "a character outside the Basic Multilingual Plane echoed back (sync's path, a "
    "setWatches event's path): ZooKeeper's jute writes each UTF-16 half of it as three "
    "bytes (CESU-8), which no UTF-8 reader takes; keel writes standard UTF-8 (README, "
    "differences kept on purpose)")
KNOWN = {f"path_multi_null_{name}": _NULL_MULTI_REASON for name, _op, _body in _MULTI_OPS}
KNOWN.update({"path_sync_non_bmp": _NON_BMP_REASON})
KNOWN.update({f"path_set_watches_{k}_non_bmp": _NON_BMP_REASON
              for k in ["data", "child"]})

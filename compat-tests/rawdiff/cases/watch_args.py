"""removeWatches (18), checkWatches (17) and addWatch (106) argument checks (issue 14
item 9), by enumeration: every watcher type (-1..5 and 100) for checkWatches and
removeWatches, against every watch state a connection can hold on the path; every
addWatch mode (-1..3); and what a removal leaves behind (later events)."""

from rawdiff import case
from rawzk import *  # noqa: F401,F403

KNOWN = {
    "watch_args_remove_recursive_child": (
        "keel holds a one-shot and a persistent/recursive watch of one connection on one "
        "path independently (ZooKeeper 3.9, ZOOKEEPER-4466); in 3.8.0 the getChildren "
        "watch replaces the recursive one in the child table, so after removing the Data "
        "part 3.8 sends no NodeDeleted for the child and keel does"),
}

TYPES = [-1, 0, 1, 2, 3, 4, 5, 100]
MODES = [-1, 0, 1, 2, 3]

# Watch states: the registrations (opcode, body builder) that set them on path P.
STATES = {
    "none": [],
    "data": [(GET_DATA, lambda p: path_watch_body(p, True))],
    "exists": [(EXISTS, lambda p: path_watch_body(p, True))],
    "child": [(GET_CHILDREN, lambda p: path_watch_body(p, True))],
    "data_child": [(GET_DATA, lambda p: path_watch_body(p, True)),
                   (GET_CHILDREN, lambda p: path_watch_body(p, True))],
    "persistent": [(ADD_WATCH, lambda p: ustring(p) + i32(0))],
    "recursive": [(ADD_WATCH, lambda p: ustring(p) + i32(1))],
    "persistent_data": [(ADD_WATCH, lambda p: ustring(p) + i32(0)),
                        (GET_DATA, lambda p: path_watch_body(p, True))],
    "recursive_child": [(ADD_WATCH, lambda p: ustring(p) + i32(1)),
                        (GET_CHILDREN, lambda p: path_watch_body(p, True))],
    "recursive_parent": [(ADD_WATCH, lambda p: ustring(p.rsplit("/", 1)[0]) + i32(1))],
}


def watches_body(path, wtype):
    return ustring(path) + i32(wtype)


def run(s, opcode, state):
    """For each type: a fresh node with the state's watches, check or remove with that
    type, then a check of every type and a change that shows which watches are left."""
    c = s.conn("a")
    other = s.conn("writer")
    xid = 1
    for wtype in TYPES:
        p = s.p(f"/t{wtype}")
        c.send((xid, CREATE, create_body(p)))
        xid += 1
        c.send(*[(xid + i, op, body(p)) for i, (op, body) in enumerate(STATES[state])])
        xid += len(STATES[state])
        c.send((xid, opcode, watches_body(p, wtype)))
        xid += 1
        c.drain()
        c.send(*[(xid + i, CHECK_WATCHES, watches_body(p, t)) for i, t in enumerate(TYPES)])
        xid += len(TYPES)
        c.drain()
        other.send((1, CREATE, create_body(p + "/kid")), (2, SET_DATA, set_data_body(p, b"x")),
                   (3, DELETE, path_version_body(p + "/kid")))
        other.drain()
        c.drain()


for _state in STATES:
    case(f"watch_args_check_{_state}")(lambda s, st=_state: run(s, CHECK_WATCHES, st))
    case(f"watch_args_remove_{_state}")(lambda s, st=_state: run(s, REMOVE_WATCHES, st))


@case("watch_args_add_modes")
def _(s):
    c = s.conn("a")
    other = s.conn("writer")
    for mode in MODES:
        p = s.p(f"/m{mode}")
        c.send((1, CREATE, create_body(p)), (2, ADD_WATCH, ustring(p) + i32(mode)))
        c.drain()
        c.send(*[(10 + i, CHECK_WATCHES, watches_body(p, t)) for i, t in enumerate(TYPES)])
        c.drain()
        other.send((1, CREATE, create_body(p + "/kid")), (2, SET_DATA, set_data_body(p, b"x")))
        other.drain()
        c.drain()


@case("watch_args_remove_missing_path")
def _(s):
    c = s.conn("a")
    for t in TYPES:
        c.send((1, REMOVE_WATCHES, watches_body(s.p("/absent"), t)),
               (2, CHECK_WATCHES, watches_body(s.p("/absent"), t)))
    c.drain()

"""Basic traffic: creates, reads, a watch fired by another session, a multi. Checks the
harness itself (both servers must agree on all of it)."""

from rawdiff import case
from rawzk import *  # noqa: F401,F403


@case("create_get_set_delete")
def _(s):
    c = s.conn("a")
    c.send((1, CREATE, create_body(s.p("/x"), b"one")),
           (2, GET_DATA, path_watch_body(s.p("/x"), True)),
           (3, SET_DATA, set_data_body(s.p("/x"), b"two")),
           (4, GET_CHILDREN2, path_watch_body(s.p(""))),
           (5, DELETE, path_version_body(s.p("/x"), 5)),
           (6, DELETE, path_version_body(s.p("/x"))),
           (7, EXISTS, path_watch_body(s.p("/x"))))
    c.drain()


@case("watch_fired_by_other_session")
def _(s):
    w = s.conn("w")
    w.send((1, EXISTS, path_watch_body(s.p("/y"), True)))
    w.drain()
    c = s.conn("c")
    c.send((1, CREATE, create_body(s.p("/y"), flags=1)))
    c.drain()
    w.drain()


@case("multi_mixed_results")
def _(s):
    c = s.conn("a")
    c.send((1, MULTI, multi_body([(CREATE, create_body(s.p("/m"))),
                                  (CREATE2, create_body(s.p("/m/k"))),
                                  (SET_DATA, set_data_body(s.p("/m"), b"d")),
                                  (CHECK, path_version_body(s.p("/m"), 1)),
                                  (DELETE, path_version_body(s.p("/m/k")))])),
           (2, MULTI, multi_body([(CREATE, create_body(s.p("/n"))),
                                  (DELETE, path_version_body(s.p("/absent")))])))
    c.drain()

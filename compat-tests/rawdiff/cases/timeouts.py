"""Handshakes (issue 14 items 14, 15): negotiated session timeouts when zoo.cfg says
`minSessionTimeout=-1` and `maxSessionTimeout=-1` (ZooKeeper reads -1 as its default,
2 and 20 ticks), for requested timeouts on both sides of the bounds; and a
ConnectRequest without the trailing readOnly byte (clients before 3.4), which gets a
ConnectResponse without it."""

from rawdiff import case
from rawzk import *  # noqa: F401,F403

# run.sh's group line: tickTime=2000, minSessionTimeout=-1, maxSessionTimeout=-1.
GROUP = "timeouts"

REQUESTED = [-1, 0, 1, 1000, 3999, 4000, 4001, 10000, 39999, 40000, 40001, 120000,
             0x7fffffff]


@case("timeouts_negotiated")
def _(s):
    for ms in REQUESTED:
        s.note("requested", ms)
        c = s.conn("a", timeout_ms=ms)
        c.drain()


@case("timeouts_reconnect_asks_another")
def _(s):
    """A session resumed with another requested timeout gets it (clamped) too."""
    c = s.conn("a", timeout_ms=10000)
    c.drain()
    for ms in (1, 30000, 90000):
        d = s.conn("b", timeout_ms=ms, session_id=c.session_id, passwd=c.passwd)
        d.drain()


@case("handshake_without_read_only")
def _(s):
    for ms in (4000, 30000):
        c = s.conn("old", timeout_ms=ms, with_read_only=False)
        c.send((1, EXISTS, path_watch_body(s.p())))
        c.drain()
    c = s.conn("new", timeout_ms=30000, with_read_only=True, read_only=True)
    c.drain()
    # An old client resuming its session.
    o = s.conn("old2", with_read_only=False)
    o.drain()
    r = s.conn("old2again", with_read_only=False, session_id=o.session_id, passwd=o.passwd)
    r.drain()
    # An old client with a session the server does not know.
    x = s.conn("old3", with_read_only=False, session_id=0x1234, passwd=b"\x01" * 16)
    x.drain()

"""A lock built by hand from EPHEMERAL|SEQUENCE znodes (not kazoo's Lock recipe).

Each contender (its own KazooClient session) creates /lock/c-<seq>, lists the children,
and unless it is lowest sets an exists() watch on its immediate predecessor only,
re-checking when the watch fires. Checks: mutual exclusion, FIFO fairness, every
contender acquires, watches are on the predecessor only (server-side `wchc`/`wchp` and by
construction), and takeover when the holder's session is closed or expires (expiry both
by a second connection closing the session and by a network partition that makes the
server time the session out).
"""
import threading
import time

import pytest
from kazoo.protocol.states import KazooState

from conftest import (BlackholeProxy, StateLog, ZK_HOSTS, expire_by_close, four_letter,
                      parse_wchc, parse_wchp, wait_for)

LOCKDIR = "/lock"


class Contender:
    def __init__(self, client, name):
        self.client = client
        self.name = name
        self.node = None          # basename c-<seq>
        self.watched = []         # every node this contender set an exists() watch on
        self.fired = []           # watch events received (path, type)
        self.acquired = threading.Event()
        self.queued = threading.Event()   # node created and waiting on a predecessor watch
        self.error = None

    @property
    def seq(self):
        return int(self.node[2:])

    def create(self):
        path = self.client.create(LOCKDIR + "/c-", b"", ephemeral=True, sequence=True)
        self.node = path.rsplit("/", 1)[1]
        return self.node

    def acquire(self, timeout=60):
        if self.node is None:
            self.create()
        deadline = time.time() + timeout
        while True:
            children = sorted(c for c in self.client.get_children(LOCKDIR) if c.startswith("c-"))
            if self.node not in children:
                raise RuntimeError("%s: own lock node %s vanished" % (self.name, self.node))
            i = children.index(self.node)
            if i == 0:
                self.acquired.set()
                return
            pred = children[i - 1]
            fired = threading.Event()

            def watch(event, fired=fired):
                self.fired.append((event.path, event.type))
                fired.set()

            self.watched.append(pred)
            if self.client.exists(LOCKDIR + "/" + pred, watch=watch) is None:
                continue  # predecessor already gone: re-check
            self.queued.set()
            if not fired.wait(max(0.0, deadline - time.time())):
                raise TimeoutError("%s: gave up waiting for %s" % (self.name, pred))

    def acquire_in_thread(self, timeout=60):
        def run():
            try:
                self.acquire(timeout)
            except Exception as e:  # recorded, asserted by the test
                self.error = e
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t

    def release(self):
        self.client.delete(LOCKDIR + "/" + self.node)
        self.acquired.clear()


class Guard:
    """Shared state the holders check while holding."""

    def __init__(self):
        self.lock = threading.Lock()
        self.holders = set()
        self.violations = []
        self.order = []

    def enter(self, name):
        with self.lock:
            self.holders.add(name)
            self.order.append(name)
            if len(self.holders) > 1:
                self.violations.append(sorted(self.holders))

    def check(self):
        with self.lock:
            if len(self.holders) > 1:
                self.violations.append(sorted(self.holders))

    def leave(self, name):
        with self.lock:
            self.holders.discard(name)


def make_contenders(clients, namespace, n, **kw):
    cs = []
    for i in range(n):
        c = clients(ZK_HOSTS + namespace, **kw)
        cs.append(Contender(c, "c%d" % i))
    cs[0].client.ensure_path(LOCKDIR)
    return cs


def test_mutual_exclusion_all_acquire_fifo(clients, namespace):
    cs = make_contenders(clients, namespace, 5)
    guard = Guard()
    start = threading.Barrier(5)

    def body(c):
        try:
            start.wait()
            c.acquire(timeout=60)
            guard.enter(c.name)
            for _ in range(6):
                time.sleep(0.05)
                guard.check()
            guard.leave(c.name)
            c.release()
        except Exception as e:
            c.error = e

    threads = [threading.Thread(target=body, args=(c,), daemon=True) for c in cs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert [c.error for c in cs] == [None] * 5
    assert guard.violations == [], "two holders at once"
    assert sorted(guard.order) == sorted(c.name for c in cs), "not every contender acquired"
    by_seq = [c.name for c in sorted(cs, key=lambda c: c.seq)]
    assert guard.order == by_seq, "lock not granted in sequence order"
    # each contender only ever watched its immediate predecessor
    for c in cs:
        preceding = sorted(o.node for o in cs if o.seq < c.seq)
        for w in c.watched:
            assert w in preceding
    assert cs[0].client.get_children(LOCKDIR) == []


def test_watch_on_predecessor_only(clients, namespace):
    cs = make_contenders(clients, namespace, 5)
    for c in cs:  # create in order so that c0 < c1 < ... < c4
        c.create()
    cs[0].acquire(timeout=10)
    assert cs[0].acquired.is_set()
    for c in cs[1:]:
        c.acquire_in_thread(timeout=60)
    assert wait_for(lambda: all(c.queued.is_set() for c in cs[1:]), 15)
    for i, c in enumerate(cs[1:], 1):
        assert c.watched == [cs[i - 1].node], (c.name, c.watched)
        assert not c.acquired.is_set()

    # server side: each waiting session watches exactly its predecessor's node
    full = lambda c: namespace + LOCKDIR + "/" + c.node
    sessions = {c.client.client_id[0]: c for c in cs}
    wchc = parse_wchc(four_letter("wchc"))
    for sid, c in sessions.items():
        paths = {p for p in wchc.get(sid, set()) if p.startswith(namespace)}
        i = cs.index(c)
        expected = {full(cs[i - 1])} if i > 0 else set()
        assert paths == expected, ("wchc", c.name, paths, expected)
    wchp = parse_wchp(four_letter("wchp"))
    for i, c in enumerate(cs):
        watchers = wchp.get(full(c), set()) & set(sessions)
        expected = {cs[i + 1].client.client_id[0]} if i + 1 < len(cs) else set()
        assert watchers == expected, ("wchp", c.name, watchers, expected)

    # releasing wakes only the successor (no herd), and the chain completes in order
    for i in range(len(cs)):
        assert cs[i].acquired.wait(15), "%s never acquired" % cs[i].name
        time.sleep(0.3)
        for later in cs[i + 1:]:
            assert not later.acquired.is_set(), "%s acquired while %s holds" % (later.name, cs[i].name)
        fired_now = [c.name for c in cs[i + 2:] if c.fired]
        assert fired_now == [], "watches fired on non-successors: %s" % fired_now
        cs[i].release()
    assert [c.error for c in cs] == [None] * 5


def _holder_and_waiter(clients, namespace, holder_hosts=None, holder_timeout=10.0):
    holder_client = clients((holder_hosts or ZK_HOSTS) + namespace, timeout=holder_timeout)
    holder = Contender(holder_client, "holder")
    waiter = Contender(clients(ZK_HOSTS + namespace), "waiter")
    holder.client.ensure_path(LOCKDIR)
    holder.acquire(timeout=10)
    waiter.acquire_in_thread(timeout=60)
    assert waiter.queued.wait(10)
    assert waiter.watched == [holder.node]
    time.sleep(0.3)
    assert not waiter.acquired.is_set()
    return holder, waiter


def test_takeover_when_holder_session_closed(clients, namespace):
    holder, waiter = _holder_and_waiter(clients, namespace)
    holder.client.stop()  # closes the session: its ephemeral node goes with it
    assert waiter.acquired.wait(10), "waiter did not take over after the holder closed"
    assert waiter.error is None
    assert holder.node not in waiter.client.get_children(LOCKDIR)


def test_takeover_when_holder_session_expires_closed_elsewhere(clients, namespace):
    holder, waiter = _holder_and_waiter(clients, namespace, holder_timeout=6.0)
    states = StateLog(holder.client)
    t0 = time.time()
    expire_by_close(holder.client)
    assert waiter.acquired.wait(10), "waiter did not take over after the holder's session was closed"
    assert waiter.error is None
    assert holder.node not in waiter.client.get_children(LOCKDIR)
    # the original holder must learn that its session is gone
    assert states.events[KazooState.LOST].wait(30), "holder never saw its session expire: %s" % states.states
    assert time.time() - t0 < 40


def test_takeover_when_holder_session_times_out(clients, namespace, proxy):
    """The holder is partitioned from the server (its proxy drops everything): the server
    must expire the session after the negotiated timeout (4 s) and delete its node."""
    holder, waiter = _holder_and_waiter(clients, namespace, holder_hosts=proxy.address,
                                        holder_timeout=4.0)
    guard = Guard()
    guard.enter("holder")
    states = StateLog(holder.client)

    def step_down(state):  # a careful holder stops acting as holder once disconnected
        if state != KazooState.CONNECTED:
            guard.leave("holder")
    holder.client.add_listener(step_down)

    t0 = time.time()
    proxy.freeze()
    assert waiter.acquired.wait(25), "server did not expire the partitioned holder's session"
    elapsed = time.time() - t0
    guard.enter("waiter")
    assert guard.violations == [], "waiter acquired before the holder noticed the partition"
    assert states.events[KazooState.SUSPENDED].is_set()
    # expiry must not come long before the session timeout (4 s, minus at most one ping gap)
    assert elapsed > 2.0, "session expired after only %.1fs" % elapsed
    assert holder.node not in waiter.client.get_children(LOCKDIR)
    proxy.thaw()
    assert states.events[KazooState.LOST].wait(20), "holder never learned of the expiry: %s" % states.states

"""kazoo's Election recipe: 3 clients contend, exactly one leader function runs at a time,
and when the leader's session is lost (expired) another contender takes over."""
import threading
import time

from kazoo.protocol.states import KazooState
from kazoo.recipe.election import Election

from conftest import BlackholeProxy, StateLog, ZK_HOSTS, expire_by_close, wait_for

ELECTION = "/election"


class Leaders:
    def __init__(self, n):
        self.lock = threading.Lock()
        self.leading = set()
        self.violations = []
        self.history = []
        self.elected = [threading.Event() for _ in range(n)]
        self.stop = [threading.Event() for _ in range(n)]
        self.stepdown = [threading.Event() for _ in range(n)]   # lost the connection/session
        self.zombie = [threading.Event() for _ in range(n)]     # test says: you are no longer leader
        self.errors = []

    def lead(self, i):
        with self.lock:
            self.leading.add(i)
            self.history.append(i)
            if len(self.leading) > 1:
                self.violations.append(sorted(self.leading))
        self.elected[i].set()
        try:
            while not self.stop[i].is_set():
                if self.stepdown[i].is_set() or self.zombie[i].is_set():
                    with self.lock:
                        self.leading.discard(i)
                    if self.stepdown[i].is_set():
                        return
                with self.lock:
                    if len(self.leading) > 1:
                        self.violations.append(sorted(self.leading))
                time.sleep(0.02)
        finally:
            with self.lock:
                self.leading.discard(i)

    def current(self):
        with self.lock:
            return sorted(self.leading)


def start_contenders(clients, namespace, leaders, hosts_list, timeout=10.0):
    cls, threads = [], []
    for i, hosts in enumerate(hosts_list):
        c = clients(hosts + namespace, timeout=timeout)

        def listener(state, i=i):
            if state != KazooState.CONNECTED:
                leaders.stepdown[i].set()
        c.add_listener(listener)
        cls.append(c)
    for i, c in enumerate(cls):
        e = Election(c, ELECTION, identifier="contender-%d" % i)

        def run(e=e, i=i):
            try:
                e.run(leaders.lead, i)
            except Exception as ex:  # a contender whose session died may raise here
                leaders.errors.append((i, repr(ex)))
        t = threading.Thread(target=run, daemon=True)
        t.start()
        threads.append(t)
    return cls, threads


def wait_leader(leaders, exclude=(), timeout=20):
    found = []

    def one():
        cur = [i for i in leaders.current() if i not in exclude]
        if len(cur) == 1:
            found[:] = cur
            return True
        return False
    assert wait_for(one, timeout), "no single leader: %s" % leaders.current()
    return found[0]


def test_one_leader_at_a_time_and_succession(clients, namespace):
    leaders = Leaders(3)
    cls, threads = start_contenders(clients, namespace, leaders, [ZK_HOSTS] * 3)
    seen = []
    for _ in range(3):
        leader = wait_leader(leaders, exclude=seen)
        time.sleep(0.5)
        assert leaders.current() == [leader]
        contenders = Election(cls[0], ELECTION).contenders()
        assert len(contenders) == 3 - len(seen)
        assert contenders[0] == "contender-%d" % leader
        seen.append(leader)
        leaders.stop[leader].set()
    for t in threads:
        t.join(10)
    assert sorted(seen) == [0, 1, 2]
    assert leaders.history == seen
    assert leaders.violations == []
    assert leaders.errors == []


def test_takeover_when_leader_session_expires_by_timeout(clients, namespace):
    """The leader is partitioned away (its proxy drops everything); the server expires its
    session after the 4 s timeout and another contender becomes leader."""
    proxies = [BlackholeProxy() for _ in range(3)]
    try:
        leaders = Leaders(3)
        cls, threads = start_contenders(clients, namespace, leaders,
                                        [p.address for p in proxies], timeout=4.0)
        first = wait_leader(leaders)
        states = StateLog(cls[first])
        time.sleep(0.5)
        t0 = time.time()
        proxies[first].freeze()
        second = wait_leader(leaders, exclude=[first], timeout=25)
        elapsed = time.time() - t0
        assert second != first
        assert leaders.stepdown[first].is_set()
        assert leaders.violations == [], "two leaders at once: %s" % leaders.violations
        assert elapsed > 2.0, "leader's session expired after only %.1fs" % elapsed
        proxies[first].thaw()
        assert states.events[KazooState.LOST].wait(20), states.states
        # the expired contender is out of the race
        assert "contender-%d" % first not in Election(cls[second], ELECTION).contenders()
        # and the new leader is followed by the last one
        leaders.stop[second].set()
        third = wait_leader(leaders, exclude=[first, second], timeout=15)
        assert {first, second, third} == {0, 1, 2}
        leaders.stop[third].set()
        for i in range(3):
            leaders.stop[i].set()
        for t in threads:
            t.join(15)
        assert leaders.violations == []
    finally:
        for p in proxies:
            p.close()


def test_takeover_when_leader_session_closed_elsewhere(clients, namespace):
    leaders = Leaders(3)
    cls, threads = start_contenders(clients, namespace, leaders, [ZK_HOSTS] * 3, timeout=6.0)
    first = wait_leader(leaders)
    states = StateLog(cls[first])
    leaders.zombie[first].set()  # its lead() keeps running, but no longer counts as leader
    assert wait_for(lambda: leaders.current() == [], 5)
    expire_by_close(cls[first])
    second = wait_leader(leaders, exclude=[first], timeout=15)
    assert second != first
    assert states.events[KazooState.LOST].wait(30), states.states
    assert leaders.violations == []
    for i in range(3):
        leaders.stop[i].set()
    for t in threads:
        t.join(15)

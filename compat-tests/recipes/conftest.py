"""Shared helpers for the recipe tests (run against a server at $ZK_HOSTS)."""
import os
import select
import socket
import threading
import time
import uuid

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

ZK_HOSTS = os.environ.get("ZK_HOSTS", "127.0.0.1:2181")


def first_host():
    host, _, port = ZK_HOSTS.split(",")[0].rpartition(":")
    return host, int(port)


def four_letter(cmd, hostport=None):
    """Send a four-letter word and read the whole reply (server closes after it)."""
    host, port = hostport or first_host()
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(cmd.encode())
        chunks = []
        while True:
            b = s.recv(65536)
            if not b:
                break
            chunks.append(b)
    return b"".join(chunks).decode("utf-8", "replace")


def parse_wchc(text):
    """wchc output: a session id line (0x...) followed by tab-indented watched paths."""
    out, cur = {}, None
    for line in text.splitlines():
        if not line.strip():
            continue
        if line[0] in " \t":
            if cur is not None:
                out[cur].add(line.strip())
        elif line.startswith("0x"):
            cur = int(line.strip(), 16)
            out.setdefault(cur, set())
    return out


def parse_wchp(text):
    """wchp output: a path line followed by tab-indented session ids."""
    out, cur = {}, None
    for line in text.splitlines():
        if not line.strip():
            continue
        if line[0] in " \t":
            if cur is not None:
                out[cur].add(int(line.strip(), 16))
        else:
            cur = line.strip()
            out.setdefault(cur, set())
    return out


def wait_for(pred, timeout, interval=0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return pred()


class StateLog:
    """Records a client's KazooState transitions, with events for each state."""

    def __init__(self, client):
        self.states = []
        self.events = {s: threading.Event() for s in (KazooState.SUSPENDED, KazooState.LOST, KazooState.CONNECTED)}
        client.add_listener(self)

    def __call__(self, state):
        self.states.append(state)
        self.events[state].set()


def expire_by_close(client, timeout=10):
    """Expire `client`'s session on the server: a second connection attaches to the same
    session id and password, then closes it (the technique of ZooKeeper's own tests)."""
    sid, passwd = client.client_id
    other = KazooClient(ZK_HOSTS, client_id=(sid, passwd), timeout=timeout)
    other.start(timeout=timeout)
    assert other.client_id[0] == sid, "the second connection did not attach to the session"
    other.stop()
    other.close()


class BlackholeProxy:
    """A TCP proxy to the first server that can be frozen: while frozen nothing is
    forwarded (connections stay open, bytes are dropped), like a network partition.
    The server then hears nothing from clients behind it and must expire their sessions.
    thaw() closes every proxied connection so clients reconnect."""

    def __init__(self, upstream=None):
        self.upstream = upstream or first_host()
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(16)
        self.port = self.lsock.getsockname()[1]
        self.address = "127.0.0.1:%d" % self.port
        self.frozen = threading.Event()
        self.closed = False
        self.socks = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            with self.lock:
                self.socks.append(c)
            if self.frozen.is_set():
                continue  # parked: never connected upstream, closed on thaw
            try:
                u = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                c.close()
                continue
            with self.lock:
                self.socks.append(u)
            threading.Thread(target=self._pump, args=(c, u), daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c), daemon=True).start()

    def _pump(self, src, dst):
        try:
            while not self.closed:
                r, _, _ = select.select([src], [], [], 0.1)
                if not r:
                    continue
                data = src.recv(65536)
                if not data:
                    break
                if self.frozen.is_set():
                    continue  # partitioned: drop
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                try:
                    s.close()
                except OSError:
                    pass

    def freeze(self):
        self.frozen.set()

    def thaw(self):
        with self.lock:
            socks, self.socks = self.socks, []
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        self.frozen.clear()

    def close(self):
        self.closed = True
        self.thaw()
        self.lsock.close()


@pytest.fixture
def namespace():
    """A fresh chroot /keel-recipes-<uuid>; yields the chroot path, removes it afterwards."""
    ns = "/keel-recipes-" + uuid.uuid4().hex[:12]
    admin = KazooClient(ZK_HOSTS, timeout=10)
    admin.start(timeout=15)
    admin.ensure_path(ns)
    yield ns
    try:
        admin.delete(ns, recursive=True)
    except Exception:
        pass
    admin.stop()
    admin.close()


@pytest.fixture
def clients():
    """Factory for KazooClients; every client made is stopped and closed afterwards."""
    made = []

    def make(hosts=None, timeout=10.0, **kw):
        c = KazooClient(hosts or ZK_HOSTS, timeout=timeout, **kw)
        made.append(c)
        c.start(timeout=15)
        return c

    yield make
    for c in made:
        try:
            c.stop()
            c.close()
        except Exception:
            pass


@pytest.fixture
def proxy():
    p = BlackholeProxy()
    yield p
    p.close()

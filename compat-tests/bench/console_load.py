"""Load for the console benchmark (console.sh): SESSIONS sessions on a server, each owning
one ephemeral /eph/s<N>; the first OPEN of them keep their connections open, each with a
data watch on its ephemeral, the rest close their sockets without closing the session
(it lives for its timeout, 600 s). Then every page in PAGES is requested REPS times, one
at a time, and its wall time and the core time its foot states are summarised.

Speaks the client protocol itself (jute over TCP), pipelined per connection, so ten
thousand sessions take seconds. Usage:
  console_load.py sessions HOST PORT SESSIONS OPEN          (then waits for stdin EOF)
  console_load.py pages ADMIN_URL REPS PAGE...
"""

import re
import socket
import statistics
import struct
import sys
import time
import urllib.request


def frame(b):
    return struct.pack(">i", len(b)) + b


def jstr(s):
    b = s.encode()
    return struct.pack(">i", len(b)) + b


def connect_req(timeout_ms):
    return frame(struct.pack(">iqiq", 0, 0, timeout_ms, 0) + struct.pack(">i", 16) + b"\0" * 16 + b"\0")


def create_req(xid, path, ephemeral):
    acl = struct.pack(">i", 1) + struct.pack(">i", 31) + jstr("world") + jstr("anyone")
    body = struct.pack(">ii", xid, 1) + jstr(path) + struct.pack(">i", 0) + acl + struct.pack(">i", 1 if ephemeral else 0)
    return frame(body)


def get_watch_req(xid, path):
    return frame(struct.pack(">ii", xid, 4) + jstr(path) + b"\1")


def read_frame(sock):
    def exactly(n):
        b = b""
        while len(b) < n:
            chunk = sock.recv(n - len(b))
            if not chunk:
                raise EOFError("connection closed")
            b += chunk
        return b
    (n,) = struct.unpack(">i", exactly(4))
    return exactly(n)


def sessions(host, port, count, keep_open):
    kept = []
    s0 = socket.create_connection((host, port))
    s0.sendall(connect_req(600000))
    read_frame(s0)
    s0.sendall(create_req(1, "/eph", False))
    read_frame(s0)
    s0.close()
    t0 = time.time()
    batch = 200
    for start in range(0, count, batch):
        socks = []
        for i in range(start, min(count, start + batch)):
            s = socket.create_connection((host, port))
            s.sendall(connect_req(600000))
            socks.append((i, s))
        for i, s in socks:
            read_frame(s)
            s.sendall(create_req(1, f"/eph/s{i:05d}", True))
            if i < keep_open:
                s.sendall(get_watch_req(2, f"/eph/s{i:05d}"))
        for i, s in socks:
            read_frame(s)
            if i < keep_open:
                read_frame(s)
                kept.append(s)
            else:
                s.close()
    print(f"{count} sessions with an ephemeral each, {len(kept)} connections kept open with a "
          f"watch each, in {time.time() - t0:.1f} s", flush=True)
    sys.stdin.read()


def pages(admin, reps, paths):
    print(f"{'page':<44} {'wall ms p50':>11} {'p99':>7} {'max':>7} {'core us p50':>11} {'max':>7} {'KiB':>5}")
    for p in paths:
        wall, core, size = [], [], 0
        for _ in range(reps):
            t = time.perf_counter()
            with urllib.request.urlopen(admin + p, timeout=30) as r:
                body = r.read()
            wall.append((time.perf_counter() - t) * 1000)
            m = re.search(rb'id="core-us">gathered on the core in (\d+)', body)
            core.append(int(m.group(1)) if m else -1)
            size = len(body)
        wall.sort()
        core.sort()
        p99 = wall[min(len(wall) - 1, int(len(wall) * 0.99))]
        print(f"{p:<44} {statistics.median(wall):>11.2f} {p99:>7.2f} {wall[-1]:>7.2f} "
              f"{statistics.median(core):>11.0f} {core[-1]:>7} {size // 1024:>5}", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "sessions":
        sessions(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    else:
        pages(sys.argv[2], int(sys.argv[3]), sys.argv[4:])

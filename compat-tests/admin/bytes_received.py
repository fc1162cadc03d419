"""`zk_bytes_received_count` by the byte: a raw client sends a ConnectRequest, a create,
a getData, an exists, a delete and a closeSession, each frame of a known size, and
the server's `mntr` value must have grown by exactly the sum of the frames, each with its
4-byte length prefix (ZooKeeper's ServerCnxn.packetReceived(4 + length)), plus 4 for
the `mntr` that reads the value after (a four-letter word counts as a 4-byte packet
before it runs). Run it while no other client is connected.

    usage: bytes_received.py PORT
Prints "bytes_received_count: +N (expected +M)"; exit 1 when they differ.
"""

import os
import socket
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ensemble"))
from fourlw import four_letter  # noqa: E402

PORT = int(sys.argv[1])


def mntr_value():
    for line in four_letter(PORT, "mntr", timeout=10).splitlines():
        key, _, value = line.partition("\t")
        if key == "zk_bytes_received_count":
            return int(value)
    sys.exit("no zk_bytes_received_count in mntr")


def ustring(s):
    b = s.encode()
    return struct.pack(">i", len(b)) + b


def frame(body):
    return struct.pack(">i", len(body)) + body


def read_frame(s):
    head = b""
    while len(head) < 4:
        chunk = s.recv(4 - len(head))
        if not chunk:
            sys.exit("connection closed")
        head += chunk
    (n,) = struct.unpack(">i", head)
    body = b""
    while len(body) < n:
        chunk = s.recv(n - len(body))
        if not chunk:
            sys.exit("connection closed")
        body += chunk
    return body


OPEN_ACL = struct.pack(">i", 1) + struct.pack(">i", 31) + ustring("world") + ustring("anyone")
frames = [
    # ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId, passwd, readOnly
    struct.pack(">iqiq", 0, 0, 30000, 0) + struct.pack(">i", 16) + bytes(16) + b"\x00",
    # create /bytes-received "0123456789" open ACL, persistent
    struct.pack(">ii", 1, 1) + ustring("/bytes-received") + struct.pack(">i", 10)
    + b"0123456789" + OPEN_ACL + struct.pack(">i", 0),
    # getData /bytes-received, no watch
    struct.pack(">ii", 2, 4) + ustring("/bytes-received") + b"\x00",
    # exists /nope, with a watch
    struct.pack(">ii", 3, 3) + ustring("/nope") + b"\x01",
    # delete /bytes-received version -1
    struct.pack(">ii", 4, 2) + ustring("/bytes-received") + struct.pack(">i", -1),
    # closeSession
    struct.pack(">ii", 5, -11),
]
expected = sum(4 + len(f) for f in frames) + 4

before = mntr_value()
with socket.create_connection(("127.0.0.1", PORT), timeout=10) as s:
    for f in frames:
        s.sendall(frame(f))
        read_frame(s)
after = mntr_value()
print("bytes_received_count: +%d (expected +%d)" % (after - before, expected))
sys.exit(0 if after - before == expected else 1)

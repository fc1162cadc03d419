# Probe for the race behind the local-session-ro list's two test_invalid_sasl_auth
# entries; not part of the suite (run.sh collects it only when given its path):
#   LOOPS=300 bash compat-tests/kazoo/run.sh --cluster --variant local-session-ro zk|keel \
#     "$PWD/compat-tests/kazoo/sasl_race_probe.py" -k sasl_race -s
# test_sasl_race_loop repeats test_invalid_sasl_auth (DIGEST-MD5, user baduser) LOOPS
# times (100) on the harness's ensemble and prints what start() raised (the test wants
# AuthFailedError) and how long after CONNECTED the AUTH_FAILED state came.
# test_sasl_race_raw_exchange does the same exchange on a raw socket with every member
# and prints each answer's header (xid, zxid, err), the ConnectResponse's fields, what
# follows the AUTHFAILED reply, and each step's latency, to compare the kinds byte by
# byte.
import collections
import os
import socket
import struct
import time

import puresasl.client

from kazoo.exceptions import AuthFailedError
from kazoo.protocol.states import KeeperState
from kazoo.testing import KazooTestHarness

BAD = {"mechanism": "DIGEST-MD5", "username": "baduser", "password": "badpassword"}


def frame(payload):
    return struct.pack(">i", len(payload)) + payload


def buffer(b):
    return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b


def read_frame(sock):
    def exactly(n):
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    (length,) = struct.unpack(">i", exactly(4))
    return exactly(length)


class TestSaslRaceProbe(KazooTestHarness):
    def setUp(self):
        os.environ["ZOOKEEPER_JAAS_AUTH"] = "digest"
        self.setup_zookeeper()

    def tearDown(self):
        self.teardown_zookeeper()
        os.environ.pop("ZOOKEEPER_JAAS_AUTH", None)

    def test_sasl_race_loop(self):
        outcomes = collections.Counter()
        gaps = collections.defaultdict(list)
        for _ in range(int(os.environ.get("LOOPS", "100"))):
            client = self._get_client(sasl_options=dict(BAD))
            seen = {}
            callback = client._session_callback

            def record(state, callback=callback, seen=seen):
                seen.setdefault(state, time.monotonic())
                return callback(state)

            client._session_callback = record
            try:
                client.start()
                outcome = "no error"
            except AuthFailedError:
                outcome = "AuthFailedError"
            except Exception as e:  # the race gives KazooTimeoutError
                outcome = type(e).__name__
            outcomes[outcome] += 1
            if KeeperState.CONNECTED in seen and KeeperState.AUTH_FAILED in seen:
                gap = seen[KeeperState.AUTH_FAILED] - seen[KeeperState.CONNECTED]
                gaps[outcome].append(gap * 1000)
            client.stop()
            client.close()
        print("\nRESULT", dict(outcomes))
        for outcome, g in sorted(gaps.items()):
            g.sort()
            print("CONNECTED to AUTH_FAILED, %s: n %d, min %.2f median %.2f max %.2f ms"
                  % (outcome, len(g), g[0], g[len(g) // 2], g[-1]))

    def test_sasl_race_raw_exchange(self):
        for server in self.cluster:
            host, port = server.address.rsplit(":", 1)
            sock = socket.create_connection((host, int(port)))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            times = [time.monotonic()]
            # ConnectRequest: protocol 0, lastZxidSeen 0, timeout 10 s, new session.
            sock.sendall(frame(struct.pack(">iqiq", 0, 0, 10000, 0) + buffer(b"\0" * 16) + b"\0"))
            connect = read_frame(sock)
            times.append(time.monotonic())
            protocol, timeout = struct.unpack(">ii", connect[:8])
            sasl = puresasl.client.SASLClient(host="zk-sasl-md5", service="zookeeper", **BAD)
            answers, challenge, xid = [], None, 0
            while True:
                xid += 1
                token = sasl.process(challenge=challenge) or b""
                sock.sendall(frame(struct.pack(">ii", xid, 102) + buffer(token)))
                try:
                    reply = read_frame(sock)
                except EOFError:
                    answers.append("closed")
                    break
                times.append(time.monotonic())
                rxid, zxid, err = struct.unpack(">iqi", reply[:16])
                answers.append("xid=%d zxid=%d err=%d bytes=%d" % (rxid, zxid, err, len(reply)))
                if err:
                    answers.append("then %r" % sock.recv(100))
                    break
                (length,) = struct.unpack(">i", reply[16:20])
                challenge = reply[20:20 + length] if length >= 0 else None
            sock.close()
            steps = " ".join("%.2f" % ((b - a) * 1000) for a, b in zip(times, times[1:]))
            print("\nRAW %s: ConnectResponse protocol=%d timeout=%d readOnly=%d bytes=%d | %s | ms %s"
                  % (server.address, protocol, timeout, connect[-1], len(connect), "; ".join(answers), steps))

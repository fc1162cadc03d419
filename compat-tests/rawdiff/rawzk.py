"""Raw ZooKeeper client protocol for differential tests: frames built byte by byte, sent
exactly as written (several requests in one TCP write when a case asks), and every frame
the server sends back decoded into a transcript that masks only what must differ
between two servers (session ids, passwords, times) and keeps the rest: xids, zxids
relative to the case's start, error codes, bodies, watch events, and where the server
closed the connection.

Layouts are the protocol facts of ../../../shared/PROTOCOL.md (jute: big-endian ints and
longs, int-length buffers and strings with -1 = null, int-count vectors).
"""

import socket
import struct
import time

# Opcodes (PROTOCOL.md "Opcodes").
NOTIFICATION, CREATE, DELETE, EXISTS, GET_DATA, SET_DATA, GET_ACL, SET_ACL = 0, 1, 2, 3, 4, 5, 6, 7
GET_CHILDREN, SYNC, PING, GET_CHILDREN2, CHECK, MULTI, CREATE2, RECONFIG = 8, 9, 11, 12, 13, 14, 15, 16
CHECK_WATCHES, REMOVE_WATCHES, CREATE_CONTAINER, DELETE_CONTAINER, CREATE_TTL, MULTI_READ = (
    17, 18, 19, 20, 21, 22)
AUTH, SET_WATCHES, SASL, GET_EPHEMERALS, GET_ALL_CHILDREN_NUMBER = 100, 101, 102, 103, 104
SET_WATCHES2, ADD_WATCH, WHO_AM_I = 105, 106, 107
CREATE_SESSION, CLOSE_SESSION, ERROR = -10, -11, -1

XID_WATCH, XID_PING, XID_AUTH, XID_SET_WATCHES = -1, -2, -4, -8

OPEN_ACL = [(31, "world", "anyone")]


# ---------------------------------------------------------------- jute encoding

def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


def boolean(v):
    return b"\x01" if v else b"\x00"


def buf(v):
    """A jute buffer: None is null (-1); str is UTF-8; bytes go as they are."""
    if v is None:
        return i32(-1)
    if isinstance(v, str):
        v = v.encode()
    return i32(len(v)) + v


ustring = buf


def vector(items, enc):
    if items is None:
        return i32(-1)
    return i32(len(items)) + b"".join(enc(x) for x in items)


def acl_list(acls):
    return vector(acls, lambda a: i32(a[0]) + ustring(a[1]) + ustring(a[2]))


def frame(payload):
    return i32(len(payload)) + payload


def request(xid, opcode, body=b""):
    """One framed request: RequestHeader {xid, type} then the op's record."""
    return frame(i32(xid) + i32(opcode) + body)


def connect_request(session_id=0, passwd=b"\x00" * 16, timeout_ms=30000,
                    last_zxid_seen=0, read_only=False, with_read_only=True):
    """A framed ConnectRequest; with_read_only=False leaves out the trailing byte, as
    clients before 3.4 do."""
    body = i32(0) + i64(last_zxid_seen) + i32(timeout_ms) + i64(session_id) + buf(passwd)
    if with_read_only:
        body += boolean(read_only)
    return frame(body)


# Op records (the body after the header), for use alone or inside a multi.

def create_body(path, data=b"", acl=OPEN_ACL, flags=0, ttl=None):
    body = ustring(path) + buf(data) + acl_list(acl) + i32(flags)
    if ttl is not None:
        body += i64(ttl)
    return body


def path_version_body(path, version=-1):
    """delete, check."""
    return ustring(path) + i32(version)


def path_watch_body(path, watch=False):
    """exists, getData, getChildren, getChildren2."""
    return ustring(path) + boolean(watch)


def set_data_body(path, data, version=-1):
    return ustring(path) + buf(data) + i32(version)


def set_acl_body(path, acl, version=-1):
    return ustring(path) + acl_list(acl) + i32(version)


def multi_body(ops):
    """ops: [(opcode, body)], each preceded by MultiHeader {type, done=false, err=-1},
    ended by MultiHeader {-1, true, -1}."""
    out = b""
    for opcode, body in ops:
        out += i32(opcode) + boolean(False) + i32(-1) + body
    return out + i32(-1) + boolean(True) + i32(-1)


def auth_body(scheme, auth):
    return i32(0) + ustring(scheme) + buf(auth)


def set_watches_body(relative_zxid, data=(), exist=(), child=(), persistent=None,
                     recursive=None):
    """setWatches (101); with persistent/recursive lists, setWatches2 (105)."""
    body = i64(relative_zxid)
    lists = [list(data), list(exist), list(child)]
    if persistent is not None or recursive is not None:
        lists += [list(persistent or []), list(recursive or [])]
    for paths in lists:
        body += vector(paths, ustring)
    return body


# ---------------------------------------------------------------- jute decoding

class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def left(self):
        return len(self.data) - self.pos

    def take(self, n):
        if n > self.left():
            raise ValueError(f"short record: need {n} bytes, have {self.left()}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def i32(self):
        return struct.unpack(">i", self.take(4))[0]

    def i64(self):
        return struct.unpack(">q", self.take(8))[0]

    def boolean(self):
        return self.take(1) != b"\x00"

    def buf(self):
        n = self.i32()
        return None if n < 0 else self.take(n)

    def ustring(self):
        b = self.buf()
        return None if b is None else b.decode("utf-8", "backslashreplace")

    def vector(self, dec):
        n = self.i32()
        return None if n < 0 else [dec(self) for _ in range(n)]


class Transcript:
    """What one case saw on one server, masked so two servers' transcripts compare."""

    def __init__(self, zxid_base=0):
        self.lines = []
        self.zxid_base = zxid_base
        self.sessions = {}

    def session(self, sid):
        if sid == 0:
            return 0
        return self.sessions.setdefault(sid, f"S{len(self.sessions) + 1}")

    def zxid(self, z):
        """Zxids relative to the case's start; 0 and -1 kept as they are."""
        return z if z <= 0 else f"+{z - self.zxid_base}"

    def add(self, *fields):
        self.lines.append(" ".join(str(f) for f in fields))


def decode_stat(r, t):
    czxid, mzxid, _ctime, _mtime = r.i64(), r.i64(), r.i64(), r.i64()
    version, cversion, aversion = r.i32(), r.i32(), r.i32()
    owner = r.i64()
    data_len, num_children, pzxid = r.i32(), r.i32(), r.i64()
    if owner != 0 and owner in t.sessions:
        owner = t.sessions[owner]
    elif owner != 0 and owner >> 56 in (0xff, -1):
        owner = f"ttl:{owner & 0xffffffffff}"
    elif owner != 0:
        owner = "S?"
    return (f"stat(c={t.zxid(czxid)} m={t.zxid(mzxid)} p={t.zxid(pzxid)} v={version} "
            f"cv={cversion} av={aversion} owner={owner} len={data_len} kids={num_children})")


def decode_acl(r):
    perms = r.i32()
    return f"{perms}:{r.ustring()}:{r.ustring()}"


def decode_result(opcode, r, t):
    """The reply record of a successful request of this opcode, as text."""
    if opcode == CREATE:
        return f"path={r.ustring()!r}"
    if opcode in (CREATE2, CREATE_CONTAINER, CREATE_TTL):
        return f"path={r.ustring()!r} {decode_stat(r, t)}"
    if opcode in (EXISTS, SET_DATA, SET_ACL):
        return decode_stat(r, t)
    if opcode == GET_DATA:
        return f"data={r.buf()!r} {decode_stat(r, t)}"
    if opcode == GET_CHILDREN:
        return f"children={sorted(r.vector(Reader.ustring) or [])}"
    if opcode == GET_CHILDREN2:
        kids = sorted(r.vector(Reader.ustring) or [])
        return f"children={kids} {decode_stat(r, t)}"
    if opcode == GET_ACL:
        acls = r.vector(decode_acl)
        return f"acl={acls} {decode_stat(r, t)}"
    if opcode == SYNC:
        return f"path={r.ustring()!r}"
    if opcode == GET_EPHEMERALS:
        return f"ephemerals={sorted(r.vector(Reader.ustring) or [])}"
    if opcode == GET_ALL_CHILDREN_NUMBER:
        return f"count={r.i32()}"
    if opcode == WHO_AM_I:
        return f"whoami={r.vector(lambda x: (x.ustring(), x.ustring()))}"
    if opcode in (MULTI, MULTI_READ):
        results = []
        while True:
            kind, done, err = r.i32(), r.boolean(), r.i32()
            if done:
                break
            if kind == ERROR:
                results.append(f"error({r.i32()})")
            elif kind in (DELETE, CHECK):
                results.append(f"{kind}()")
            else:
                results.append(f"{kind}({decode_result(kind, r, t)})")
        return "results=[" + ", ".join(results) + "]"
    return ""


class Conn:
    """One TCP connection to a server. Requests are recorded by xid so replies decode
    with the right record; everything received goes to the shared transcript under
    this connection's name."""

    def __init__(self, addr, transcript, name="c", timeout_s=10.0):
        host, port = addr
        self.addr = addr
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.t, self.name = transcript, name
        self.pending = {}
        self.rbuf = b""
        self.closed = False
        self.handshaken = False
        self.session_id = 0
        self.passwd = b""
        self.marker = 0

    def send(self, *frames):
        """Writes the frames in one sendall. A frame is bytes from request()/
        connect_request(), or a tuple (xid, opcode, body), which is recorded so its
        reply decodes."""
        out = b""
        for f in frames:
            if isinstance(f, tuple):
                xid, opcode, body = f
                self.pending.setdefault(xid, []).append(opcode)
                out += request(xid, opcode, body)
            else:
                out += f
        try:
            self.sock.sendall(out)
        except OSError as e:
            self.t.add(self.name, "send-failed", type(e).__name__)
            self.closed = True

    def _frame(self, deadline):
        while True:
            if len(self.rbuf) >= 4:
                n = struct.unpack(">i", self.rbuf[:4])[0]
                if len(self.rbuf) >= 4 + n:
                    payload = self.rbuf[4:4 + n]
                    self.rbuf = self.rbuf[4 + n:]
                    return payload
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(1 << 16)
            except socket.timeout:
                return None
            except OSError:
                chunk = b""
            if not chunk:
                self.closed = True
                if self.rbuf:
                    self.t.add(self.name, f"partial-frame({len(self.rbuf)} bytes)")
                    self.rbuf = b""
                return b""
            self.rbuf += chunk

    def _record(self, payload):
        t = self.t
        if not self.handshaken:
            self.handshaken = True
            r = Reader(payload)
            _proto, timeout, sid, passwd = r.i32(), r.i32(), r.i64(), r.buf()
            tail = r.left()
            if sid != 0:
                self.session_id, self.passwd = sid, passwd
            t.add(self.name, "connected", f"timeout={timeout}", f"session={t.session(sid)}",
                  f"passwd_len={len(passwd or b'')}", f"trailing_bytes={tail}")
            return None
        if self._is_connect_response(payload):
            r = Reader(payload)
            _proto, timeout, sid = r.i32(), r.i32(), r.i64()
            r.buf()
            t.add(self.name, "connect-response-again", f"timeout={timeout}",
                  f"session={t.session(sid)}", f"trailing_bytes={r.left()}")
            return None
        r = Reader(payload)
        xid, zxid, err = r.i32(), r.i64(), r.i32()
        if xid == XID_WATCH:
            etype, state, path = r.i32(), r.i32(), r.ustring()
            t.add(self.name, "event", f"type={etype}", f"state={state}", f"path={path!r}")
            return None
        if xid == XID_PING and self.pending.get(XID_PING) == ["marker"]:
            self.pending.pop(XID_PING)
            return "marker"
        ops = self.pending.get(xid)
        opcode = ops.pop(0) if ops else None
        if ops == []:
            self.pending.pop(xid)
        body = ""
        if err == 0 and opcode is not None and r.left():
            try:
                body = decode_result(opcode, r, t)
            except ValueError as e:
                body = f"undecodable({e})"
        if r.left():
            body += f" +{r.left()} bytes"
        t.add(self.name, "reply", f"xid={xid}", f"zxid={t.zxid(zxid)}", f"err={err}", body)
        return None

    def _is_connect_response(self, payload):
        """A second ConnectResponse on a live session (ZooKeeper sends one for a
        createSession request): protocol version 0, this session's id, a 16-byte
        password, and nothing else but the readOnly byte."""
        if self.session_id == 0 or len(payload) not in (36, 37):
            return False
        return (payload[:4] == b"\0\0\0\0" and payload[8:16] == i64(self.session_id)
                and payload[16:20] == i32(16) and 0 not in self.pending)

    def close_session(self):
        """Ends this connection's session (closeSession, then waits for the close) so
        it does not expire later and take a zxid in another case; nothing recorded."""
        if self.session_id == 0:
            return
        keep, self.t = self.t, Transcript()
        if self.closed:
            # The server closed this connection but the session may live on (an
            # unknown opcode closes the connection, not the session): resume it on a
            # new connection and close it there. A session already gone is answered
            # with timeout 0 and uses no zxid.
            again = Conn(self.addr, Transcript(), self.name)
            again.handshake(session_id=self.session_id, passwd=self.passwd)
            if again.session_id == self.session_id and not again.closed:
                again.send((0x7ffffff0, CLOSE_SESSION, b""))
                again.wait_closed(2.0)
            again.close()
        else:
            self.send((0x7ffffff0, CLOSE_SESSION, b""))
            self.wait_closed(2.0)
        self.t = keep

    def drain(self, timeout_s=5.0):
        """Sends a ping (xid -2) and records every frame until its reply or until the
        server closes; ZooKeeper answers a session's packets in order, so everything
        the requests before it caused has arrived by then (events included). On a
        connection without a session yet, or already closed, reads until close or
        a quiet timeout instead."""
        if not self.closed:
            self.pending[XID_PING] = ["marker"]
            try:
                self.sock.sendall(request(XID_PING, PING))
            except OSError:
                self.closed = True
        deadline = time.monotonic() + timeout_s
        while True:
            payload = self._frame(deadline)
            if payload is None:
                self.t.add(self.name, "timeout")
                return
            if payload == b"" and self.closed:
                self.t.add(self.name, "closed")
                return
            try:
                if self._record(payload) == "marker":
                    return
            except ValueError as e:
                self.t.add(self.name, "undecodable-frame", str(e))

    def wait_closed(self, timeout_s=3.0):
        """Records frames until the server closes the connection (or the timeout)."""
        deadline = time.monotonic() + timeout_s
        while True:
            payload = self._frame(deadline)
            if payload is None:
                self.t.add(self.name, "still-open")
                return
            if payload == b"" and self.closed:
                self.t.add(self.name, "closed")
                return
            self._record(payload)

    def handshake(self, **kw):
        """ConnectRequest and its response; kw as for connect_request()."""
        self.send(connect_request(**kw))
        deadline = time.monotonic() + 5.0
        payload = self._frame(deadline)
        if payload is None or payload == b"":
            self.t.add(self.name, "no-connect-response")
            return self
        self._record(payload)
        return self

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

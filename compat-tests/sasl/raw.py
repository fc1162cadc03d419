#!/usr/bin/env python3
"""Raw-socket SASL (op 102) cases against one server, printing one line per outcome, so
that the transcripts of ZooKeeper and keel can be diffed (run.sh does).
  raw.py PORT
Each case runs on its own connection while a bystander session stays open: after every
case the bystander must still answer (only the offending connection is affected).
DIGEST-MD5 responses are computed here as RFC 2831 2.1.2.1 says."""
import hashlib, re, socket, struct, sys

PORT = int(sys.argv[1])
SASL, EXISTS = 102, 3


def frame(b):
    return struct.pack(">i", len(b)) + b


def buf(b):
    return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b


def connect_request():
    # protocolVersion, lastZxidSeen, timeOut, sessionId, passwd, readOnly
    return frame(struct.pack(">iqiq", 0, 0, 30000, 0) + buf(b"\0" * 16) + b"\0")


class Conn:
    def __init__(self, handshake=True):
        self.s = socket.create_connection(("127.0.0.1", PORT), timeout=10)
        self.xid = 0
        if handshake:
            self.s.sendall(connect_request())
            self.read_frame()

    def read_exact(self, n):
        out = b""
        while len(out) < n:
            chunk = self.s.recv(n - len(out))
            if not chunk:
                raise EOFError
            out += chunk
        return out

    def read_frame(self):
        (n,) = struct.unpack(">i", self.read_exact(4))
        return self.read_exact(n)

    def request(self, op, body):
        self.xid += 1
        try:
            self.s.sendall(frame(struct.pack(">ii", self.xid, op) + body))
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed while we sent: reply() reports it

    def reply(self):
        """(err, token or None) of the next non-watch reply; 'closed' when the server closed."""
        try:
            while True:
                f = self.read_frame()
                xid, _zxid, err = struct.unpack(">iqi", f[:16])
                if xid != -1:
                    return err, f[16:]
        except (EOFError, ConnectionResetError, BrokenPipeError, socket.timeout):
            return "closed", None

    def sasl(self, token):
        self.request(SASL, buf(token))
        err, rest = self.reply()
        if err == "closed":
            return "closed", None
        (n,) = struct.unpack(">i", rest[:4])
        return err, None if n < 0 else rest[4 : 4 + n]

    def closed_after(self):
        """Whether the server closes the connection now (no reply to an exists)."""
        self.request(EXISTS, buf(b"/") + b"\0")
        return self.reply()[0] == "closed"

    def close(self):
        self.s.close()


def directives(challenge):
    out, rest = {}, challenge.decode()
    for part in rest.split(","):
        k, _, v = part.partition("=")
        out[k.strip()] = v.strip().strip('"')
    return out


def digest_response(nonce, user, passwd, cnonce="OA6MHXh6VqTrRk", nc="00000001"):
    realm, uri = "zk-sasl-md5", "zookeeper/zk-sasl-md5"
    h = lambda b: hashlib.md5(b).digest()
    hx = lambda b: hashlib.md5(b).hexdigest()
    a1 = h(f"{user}:{realm}:{passwd}".encode()) + f":{nonce}:{cnonce}".encode()
    a2 = f"AUTHENTICATE:{uri}".encode()
    resp = hx(f"{hx(a1)}:{nonce}:{nc}:{cnonce}:auth:{hx(a2)}".encode())
    return (
        f'charset=utf-8,username="{user}",realm="{realm}",nonce="{nonce}",nc={nc},'
        f'cnonce="{cnonce}",digest-uri="{uri}",maxbuf=65536,response={resp},qop=auth'
    ).encode()


def show(name, outcome):
    # Nonces are random: only their length is compared.
    outcome = re.sub(r'nonce="([^"]*)"', lambda m: f'nonce=<{len(m.group(1))} chars>', str(outcome))
    print(f"{name}: {outcome}", flush=True)


bystander = Conn()


def check_bystander(name):
    bystander.request(EXISTS, buf(b"/") + b"\0")
    err, _ = bystander.reply()
    show(f"  bystander after {name}", "answers" if err == 0 else f"err {err}")


def case(name, fn):
    try:
        outcome = fn()
    except Exception as e:  # noqa: BLE001 - the outcome is what is compared
        outcome = f"exception {type(e).__name__}"
    show(name, outcome)
    check_bystander(name)


def good_exchange():
    c = Conn()
    err, challenge = c.sasl(b"")
    d = directives(challenge)
    keys = ",".join(sorted(d))
    shape = f"challenge keys {keys} realm={d['realm']} charset={d['charset']} algorithm={d['algorithm']} nonce-length={len(d['nonce'])}"
    resp = digest_response(d["nonce"], "alice", "alice_pw")
    err2, rspauth = c.sasl(resp)
    ok = rspauth is not None and rspauth.startswith(b"rspauth=") and len(rspauth) == 40
    out = f"err {err}, {shape}; response err {err2}, rspauth {'ok' if ok else rspauth}; closed after: {c.closed_after()}"
    c.close()
    return out, resp


def replay(recorded):
    c = Conn()
    err, _ = c.sasl(b"")
    err2, tok = c.sasl(recorded)
    return f"challenge err {err}; recorded response err {err2} token {tok}"


def after_challenge(token):
    def run():
        c = Conn()
        c.sasl(b"")
        err, tok = c.sasl(token)
        closed = c.closed_after() if err != "closed" else True
        return f"err {err} token {tok} closed {closed}"

    return run


def first_token(token):
    def run():
        c = Conn()
        err, tok = c.sasl(token)
        closed = c.closed_after() if err != "closed" else True
        return f"err {err} token {tok} closed {closed}"

    return run


def exchange_as(user, passwd):
    c = Conn()
    _, challenge = c.sasl(b"")
    err, tok = c.sasl(digest_response(directives(challenge)["nonce"], user, passwd))
    closed = c.closed_after() if err != "closed" else True
    return f"err {err} token {tok} closed {closed}"


def before_handshake():
    c = Conn(handshake=False)
    c.request(SASL, buf(b""))
    return f"reply {c.reply()[0]}"


def null_token():
    c = Conn()
    c.request(SASL, buf(None))
    return f"reply {c.reply()[0]}"


def twice_complete():
    c = Conn()
    _, challenge = c.sasl(b"")
    d = directives(challenge)
    c.sasl(digest_response(d["nonce"], "alice", "alice_pw"))
    err, tok = c.sasl(b"")
    return f"third token err {err} token {tok}"


if __name__ == "__main__":
    out, recorded = good_exchange()
    show("good exchange", out)
    check_bystander("good exchange")
    case("replayed response on a new connection", lambda: replay(recorded))
    case("wrong password", lambda: exchange_as("alice", "wrong"))
    # An unknown user with a password no user has: ZooKeeper 3.8 checks an unknown user's
    # response against the password of the last user its shared SaslServerCallbackHandler
    # looked up (alice's here), so mallory with alice_pw passes there; keel refuses it.
    case("unknown user", lambda: exchange_as("mallory", "mallory_pw"))
    case("malformed response", after_challenge(b"this is not a digest-response"))
    case("response missing its nonce", after_challenge(b'username="alice",realm="zk-sasl-md5",nc=00000001,cnonce="x",digest-uri="zookeeper/zk-sasl-md5",response=00000000000000000000000000000000,qop=auth'))
    case("non-empty first token", first_token(b"hello"))
    case("token over 4096 bytes (under jute.maxbuffer)", after_challenge(b"a" * 5000))
    case("token over jute.maxbuffer", first_token(b"a" * (1 << 20)))
    case("sasl before the handshake", before_handshake)
    case("null token", null_token)
    case("token after completion", twice_complete)

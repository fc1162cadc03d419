#!/usr/bin/env python3
"""Raw-socket SASL GSSAPI cases against one Kerberos server (its JAAS Server section a
Krb5LoginModule for zookeeper/localhost), one line per outcome, for run.sh to diff
ZooKeeper's against keel's. Needs the `kerberos` module (Kazoo's venv) and a ticket in
the default cache (kinit) for the client principal.
  raw_gssapi.py PORT
Each case runs on its own connection; after each a bystander session must still answer.
The tokens of a good exchange come from the Kerberos library (kerberos.authGSSClient*)."""
import base64, struct, sys

import kerberos

sys.path.insert(0, __import__("os").path.dirname(__file__))
import raw  # noqa: E402 - raw.py's framing and cases harness

SERVICE = "zookeeper@localhost"


def client():
    _, ctx = kerberos.authGSSClientInit(SERVICE)
    kerberos.authGSSClientStep(ctx, "")
    return ctx, base64.b64decode(kerberos.authGSSClientResponse(ctx))


def good_exchange():
    ctx, ap_req = client()
    c = raw.Conn()
    steps, token, established, user = [], ap_req, False, b"?"
    while True:
        err, reply = c.sasl(token)
        steps.append(f"err {err} token {'null' if reply is None else 'bytes'}")
        if err != 0 or reply is None:
            break
        b64 = base64.b64encode(reply).decode()
        if not established:
            # Mutual authentication: the AP-REP completes the context; answer empty.
            step = kerberos.authGSSClientStep(ctx, b64)
            steps.append(f"context complete {step == kerberos.AUTH_GSS_COMPLETE}")
            established, token = True, b""
            continue
        kerberos.authGSSClientUnwrap(ctx, b64)
        offer = base64.b64decode(kerberos.authGSSClientResponse(ctx))
        steps.append(f"offer {offer.hex()}")
        user = kerberos.authGSSClientUserName(ctx).encode()
        answer = struct.pack(">I", (1 << 24) | 65536) + user
        kerberos.authGSSClientWrap(ctx, base64.b64encode(answer).decode())
        token = base64.b64decode(kerberos.authGSSClientResponse(ctx))
    c.request(107, b"")  # whoAmI
    who = c.reply()
    steps.append(f"whoami err {who[0]} has {user.decode()}: {user in (who[1] or b'')}")
    c.close()
    return "; ".join(steps), ap_req


def replay(ap_req):
    c = raw.Conn()
    err, tok = c.sasl(ap_req)
    closed = c.closed_after() if err != "closed" else True
    return f"err {err} token {tok} closed {closed}"


out, recorded = good_exchange()
raw.show("good exchange", out)
raw.check_bystander("good exchange")
raw.case("replayed AP-REQ on a new connection", lambda: replay(recorded))
raw.case("malformed first token", raw.first_token(b"this is not a kerberos token"))
raw.case("empty first token", raw.first_token(b""))
raw.case("token over jute.maxbuffer", raw.first_token(b"a" * (1 << 20)))
raw.case("null token", raw.null_token)

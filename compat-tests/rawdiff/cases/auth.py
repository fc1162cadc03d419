"""auth packets (issue 14 item 11): every scheme x payload x request xid, each on a
fresh connection, then whoAmI to see the identity it added (or the close after
AUTHFAILED). ZooKeeper's ip provider adds the connection's own address whatever the
payload; digest takes any bytes (decoded as UTF-8 with replacement); the reply carries
the request's xid."""

from rawdiff import case
from rawzk import *  # noqa: F401,F403

SCHEMES = ["digest", "ip", "x509", "sasl", "world", "super", "auth", "unknown", "",
           None]
PAYLOADS = [b"bob:pw", b"bob", b"", b":", b"bob:", b":pw", b"b\xffob:p\xc3w",
            "é:pw".encode(), b"a:b:c", b"10.0.0.1", None]
XIDS = [XID_AUTH, 1, 0, XID_SET_WATCHES, -1, 77]


def auth_raw(scheme, payload):
    return i32(0) + buf(scheme) + buf(payload)


def scheme_case(scheme):
    def run(s):
        for payload in PAYLOADS:
            for xid in XIDS:
                s.note("auth", repr(scheme), repr(payload), xid)
                c = s.conn("a")
                c.send((xid, AUTH, auth_raw(scheme, payload)),
                       (9, WHO_AM_I, b""))
                c.drain()
                c.close_session()
                c.close()
    return run


for _scheme in SCHEMES:
    case(f"auth_{_scheme}")(scheme_case(_scheme))


@case("auth_malformed")
def _(s):
    """Auth packets whose record does not decode."""
    for body in [b"", i32(0), i32(0) + ustring("digest"), i32(0) + i32(99) + b"x"]:
        s.note("body", body.hex())
        c = s.conn("a")
        c.send((XID_AUTH, AUTH, body))
        c.drain()


@case("auth_digest_acl_roundtrip")
def _(s):
    """Digest identities from odd bytes: the id ZooKeeper stores (via an auth ACL) and
    whether the same bytes authenticate again."""
    payloads = [b"b\xffob:p\xc3w", "é:pw".encode(), b"bob", b":pw", b"a:b:c", b""]
    xid = 0
    for n, payload in enumerate(payloads):
        c = s.conn(f"c{n}")
        c.send((XID_AUTH, AUTH, auth_raw("digest", payload)))
        xid += 1
        c.send((xid, CREATE, create_body(s.p(f"/n{n}"), acl=[(31, "auth", "")])),
               (xid + 100, GET_ACL, ustring(s.p(f"/n{n}"))))
        c.drain()
        d = s.conn(f"d{n}")
        d.send((XID_AUTH, AUTH, auth_raw("digest", payload)),
               (1, GET_DATA, path_watch_body(s.p(f"/n{n}"))))
        d.drain()


@case("set_watches_xids")
def _(s):
    """setWatches (101) and setWatches2 (105) sent with xids other than -8."""
    for opcode in (SET_WATCHES, SET_WATCHES2):
        for xid in XIDS:
            c = s.conn("a")
            body = set_watches_body(0, data=[s.p()]) if opcode == SET_WATCHES else \
                set_watches_body(0, data=[s.p()], persistent=[], recursive=[])
            c.send((xid, opcode, body))
            c.drain()
            c.close_session()
            c.close()

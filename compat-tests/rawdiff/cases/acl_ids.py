"""ACL validation (issue 14 item 10): every scheme x a spread of ids, and perms values,
in create and setACL, alone and inside multi, as ZooKeeper's providers judge them
(PrepRequestProcessor.fixupACL: world only `anyone`; `auth` expands to the caller's
authenticated ids; digest `user:hash`; ip IPv4 with an optional /bits; x509 and sasl
only when their providers are loaded; anything else INVALIDACL). Each accepted ACL is
read back with getACL."""

from rawdiff import case
from rawzk import *  # noqa: F401,F403

IDS = {
    "world": ["anyone", "", "Anyone", "anyone ", "nobody", None],
    "auth": ["", "x", "bob", None],
    "digest": ["bob:hash", "bob:", ":hash", ":", "", "bob", "a:b:c", "a:b:", "a::", "a::b",
               "bob:" + "A" * 27 + "=", "é:ü", None],
    "ip": ["127.0.0.1", "127.0.0.1/32", "127.0.0.1/0", "127.0.0.1/33", "127.0.0.1/-1",
           "127.0.0.1/", "127.0.0.1/x", "127.0.0.1/+8", "127.0.0.1/08", "127.000.000.001",
           "127.0.0.01", "+127.0.0.1", "127.0.0.256", "127.0.0", "127.0.0.1.5", "1.2.3.4 ",
           " 1.2.3.4", "0.0.0.0/0", "10.0.0.0/8", "localhost", "", "::1", "::1/128", "::",
           "fe80::1", "2001:db8::/32", "2001:0db8:0000:0000:0000:0000:0000:0001",
           "::ffff:127.0.0.1", "[::1]", "127.0.0.1/32/1", "\u0661.2.3.4", None],
    "sasl": ["bob", "bob@EXAMPLE.COM", "", None],
    "super": ["", "bob", None],
    "unknown": ["x"],
    "": ["x"],
    None: ["x"],
    "WORLD": ["anyone"],
    "Digest": ["bob:hash"],
}

PERMS = [0, 1, 2, 4, 8, 16, 31, 32, 63, 127, -1, 0x7fffffff, -0x80000000]


def acl_bytes(perms, scheme, ident):
    return i32(1) + i32(perms) + buf(scheme) + buf(ident)


def create_raw(path, acl):
    return ustring(path) + buf(b"") + acl + i32(0)


def set_acl_raw(path, acl):
    return ustring(path) + acl + i32(-1)


# ZooKeeper loads its x509 provider only with TLS; keel always knows x509 ids.
X509_IDS = {"x509": ["CN=client1", "CN=a,O=b", "client1", "", None]}


def by_scheme(where, ids_by_scheme=IDS):
    def run(s):
        c = s.conn("a")
        xid = 0
        reads = []
        n = 0
        for scheme, ids in ids_by_scheme.items():
            for ident in ids:
                n += 1
                acl = acl_bytes(31, scheme, ident)
                p = s.p(f"/n{n}")
                xid += 1
                if where == "create":
                    c.send((xid, CREATE, create_raw(p, acl)))
                elif where == "set_acl":
                    c.send((xid, CREATE, create_body(p)))
                    xid += 1
                    c.send((xid, SET_ACL, set_acl_raw(p, acl)))
                elif where == "multi_create":
                    c.send((xid, MULTI, multi_body([(CREATE, create_raw(p, acl))])))
                reads.append(p)
        c.drain()
        for p in reads:
            xid += 1
            c.send((xid, GET_ACL, ustring(p)))
        c.drain()
    return run


for _where in ["create", "set_acl", "multi_create"]:
    case(f"acl_ids_{_where}")(by_scheme(_where))
    case(f"acl_ids_x509_{_where}")(by_scheme(_where, X509_IDS))

KNOWN = {f"acl_ids_x509_{where}": "keel accepts x509 ACL ids without a secure port; "
         "ZooKeeper, whose x509 provider is loaded only with TLS, refuses them with "
         "INVALIDACL (README, differences kept on purpose)"
         for where in ["create", "set_acl", "multi_create"]}


@case("acl_perms")
def _(s):
    c = s.conn("a")
    xid = 0
    for n, perms in enumerate(PERMS):
        xid += 1
        c.send((xid, CREATE, create_raw(s.p(f"/p{n}"), acl_bytes(perms, "world", "anyone"))))
        xid += 1
        c.send((xid, CREATE, create_body(s.p(f"/q{n}"))))
        xid += 1
        c.send((xid, SET_ACL, set_acl_raw(s.p(f"/q{n}"), acl_bytes(perms, "world", "anyone"))))
    c.drain()
    for n in range(len(PERMS)):
        for name in ("p", "q"):
            xid += 1
            c.send((xid, GET_ACL, ustring(s.p(f"/{name}{n}"))),
                   (xid + 1000, GET_DATA, path_watch_body(s.p(f"/{name}{n}"))),
                   (xid + 2000, CREATE, create_body(s.p(f"/{name}{n}/kid"))))
    c.drain()


@case("acl_lists")
def _(s):
    """Empty and null ACL lists, duplicates, and a bad entry after good ones."""
    c = s.conn("a")
    good = (31, "world", "anyone")
    lists = [
        ("empty", acl_list([])), ("null", i32(-1)),
        ("dup", acl_list([good, good])),
        ("dup_perms", acl_list([good, (1, "world", "anyone")])),
        ("good_then_bad", acl_list([good, (31, "digest", "nocolon")])),
        ("ip_and_world", acl_list([(1, "ip", "127.0.0.1"), good])),
        ("count_too_big", i32(5) + acl_list([good])[4:]),
    ]
    xid = 0
    for name, acl in lists:
        xid += 1
        c.send((xid, CREATE, create_raw(s.p(f"/{name}"), acl)))
        xid += 1
        c.send((xid, CREATE, create_body(s.p(f"/s_{name}"))))
        xid += 1
        c.send((xid, SET_ACL, set_acl_raw(s.p(f"/s_{name}"), acl)))
        xid += 1
        c.send((xid, MULTI, multi_body([(CREATE, create_raw(s.p(f"/m_{name}"), acl))])))
    c.drain()
    for name, _acl in lists:
        for prefix in ("", "s_", "m_"):
            xid += 1
            c.send((xid, GET_ACL, ustring(s.p(f"/{prefix}{name}"))))
    c.drain()


@case("acl_ip_matches")
def _(s):
    """Which ip ACLs let a 127.0.0.1 client read (and which refuse it)."""
    c = s.conn("a")
    exprs = ["127.0.0.1", "127.0.0.1/32", "127.0.0.0/8", "127.0.0.2/31", "127.0.0.2/32",
             "10.0.0.0/8", "0.0.0.0/0", "127.000.000.001", "127.0.0.01", "127.0.0.1/+8",
             "127.0.0.1/08"]
    xid = 0
    for n, e in enumerate(exprs):
        xid += 1
        c.send((xid, CREATE, create_raw(s.p(f"/i{n}"), acl_bytes(1, "ip", e))))
    c.drain()
    for n in range(len(exprs)):
        xid += 1
        c.send((xid, GET_DATA, path_watch_body(s.p(f"/i{n}"))))
    c.drain()

"""Identity order (issue 14 item 16): whoAmI after each combination of auth packets,
and the ids an `auth` ACL expands to, in ZooKeeper's order (no auth, one digest, two,
the same twice, super, ip added again, a failed scheme last). x509 needs TLS and is
not reachable here."""

from rawdiff import case
from rawzk import *  # noqa: F401,F403

# Servers with a super user (run.sh's group line sets its digest).
GROUP = "identities"

# The super user's password in run.sh's zoo.cfg (DigestAuthenticationProvider.superDigest).
SUPER = ("digest", b"super:test")
BOB, ALICE, ZED = ("digest", b"bob:pw"), ("digest", b"alice:pw"), ("digest", b"zed:pw")
BOB2 = ("digest", b"bob:other")
IP = ("ip", b"")

COMBOS = {
    "none": [],
    "bob": [BOB],
    "bob_alice": [BOB, ALICE],
    "alice_bob": [ALICE, BOB],
    "zed_alice_bob": [ZED, ALICE, BOB],
    "bob_bob": [BOB, BOB],
    "bob_bob_other_password": [BOB, BOB2],
    "super": [SUPER],
    "bob_super": [BOB, SUPER],
    "super_bob": [SUPER, BOB],
    "ip": [IP],
    "bob_ip": [BOB, IP],
    "ip_bob_ip": [IP, BOB, IP],
}


def combo_case(auths):
    def run(s):
        c = s.conn("a")
        for scheme, payload in auths:
            c.send((XID_AUTH, AUTH, i32(0) + ustring(scheme) + buf(payload)))
        c.send((1, WHO_AM_I, b""),
               (2, CREATE, create_body(s.p("/n"), acl=[(31, "auth", "")])),
               (3, CREATE, create_body(s.p("/m"), acl=[(1, "auth", ""), (2, "auth", "x"),
                                                       (31, "world", "anyone")])),
               (4, GET_ACL, ustring(s.p("/n"))), (5, GET_ACL, ustring(s.p("/m"))))
        c.drain()
        c.send((6, SET_ACL, set_acl_body(s.p(), [(31, "auth", ""), (1, "auth", "")])),
               (7, GET_ACL, ustring(s.p())))
        c.drain()
    return run


for _name, _auths in COMBOS.items():
    case(f"identities_{_name}")(combo_case(_auths))

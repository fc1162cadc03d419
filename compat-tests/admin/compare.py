"""Differential check of the admin surface: every four-letter word and every AdminServer
command (primary names and aliases), asked of real ZooKeeper (A) and keel (B), compared
by shape: the same keys/fields must be present with the same value types; values may
differ. Python 3 standard library only.

Usage: compare.py A_CLIENT_PORT A_ADMIN_PORT B_CLIENT_PORT B_ADMIN_PORT
Prints one line per check (`same` or `DIFF` with the difference) and exits 1 on any
difference.
"""
import json
import re
import socket
import struct
import sys
import urllib.error
import urllib.request

A_CLIENT, A_ADMIN, B_CLIENT, B_ADMIN = (int(x) for x in sys.argv[1:5])

# ZooKeeper 3.8's AdminServer commands (Commands.java): primary name and aliases. The
# resets and set_trace_mask change state, so they run last.
COMMANDS = [
    ("monitor", ["mntr"]),
    ("server_stats", ["srvr"]),
    ("stats", ["stat"]),
    ("connections", ["cons"]),
    ("configuration", ["conf", "config"]),
    ("environment", ["env", "envi"]),
    ("watches", ["wchc"]),
    ("watches_by_path", ["wchp"]),
    ("watch_summary", ["wchs"]),
    ("dump", []),
    ("is_read_only", ["isro"]),
    ("ruok", []),
    ("last_snapshot", ["lsnp"]),
    ("hash", []),
    ("leader", ["lead"]),
    ("voting_view", []),
    ("zabstate", []),
    ("system_properties", ["sysp"]),
    ("dirs", []),
    ("initial_configuration", ["icfg"]),
    ("observers", ["obsr"]),
    ("get_trace_mask", ["gtmk"]),
    ("set_trace_mask", ["stmk"]),
    ("set_trace_mask?traceMask=306", []),
    ("stat_reset", ["srst"]),
    ("connection_stat_reset", ["crst"]),
    ("observer_connection_stat_reset", ["orst"]),
    ("no_such_command", []),
]

# Four-letter words; the resets last.
WORDS = ["conf", "cons", "dirs", "dump", "envi", "gtmk", "hash", "isro", "mntr", "ruok",
         "srvr", "stat", "wchc", "wchp", "wchs", "stmk", "srst", "crst"]

# System properties only a JVM has (its VM, runtime, class format, bundled libraries);
# keel has no counterpart, so their absence is expected and listed, not a difference.
JVM_ONLY_PROPERTY = re.compile(
    r"^(java\.vm\.|java\.specification\.|java\.runtime\.|java\.vendor\.url|jdk\.|jetty\.|"
    r"java\.class\.version$|java\.version\.date$|sun\.boot\.|sun\.io\.|sun\.management\.|"
    r"sun\.java\.launcher$)")

failures = []


def report(name, diffs, notes=()):
    if diffs:
        failures.append(name)
        print("DIFF  %s" % name)
        for d in diffs:
            print("        " + d)
    else:
        print("same  %s" % name)
    for n in notes:
        print("        note: " + n)


# ---------------------------------------------------------------- HTTP / JSON


def http_get(port, path):
    url = "http://127.0.0.1:%d%s" % (port, path)
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.headers.get("Content-Type"), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read().decode()


def type_name(v):
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "str"
    if v is None:
        return "null"
    if isinstance(v, list):
        return "list"
    return "object"


def data_keyed(d):
    """Maps keyed by data (session ids, expiry times): every key is a number."""
    return bool(d) and all(re.fullmatch(r"-?\d+", k) for k in d)


def compare_json(a, b, where, diffs, notes, exempt=None):
    ta, tb = type_name(a), type_name(b)
    if ta != tb:
        # null and a value are both legitimate for "error"-like fields only when the
        # other side is null too; anything else is a type difference.
        diffs.append("%s: type %s vs %s" % (where or "<root>", ta, tb))
        return
    if ta == "object":
        if data_keyed(a) or data_keyed(b):
            if data_keyed(a) != data_keyed(b) and a and b:
                diffs.append("%s: keys are ids on one side only: %s vs %s"
                             % (where, sorted(a)[:3], sorted(b)[:3]))
                return
            if len(a) != len(b):
                notes.append("%s: %d vs %d entries" % (where, len(a), len(b)))
            if a and b:
                compare_json(next(iter(a.values())), next(iter(b.values())),
                             where + "{id}", diffs, notes)
            return
        only_a = [k for k in a if k not in b]
        only_b = [k for k in b if k not in a]
        if exempt:
            skipped = [k for k in only_a if exempt.match(k)]
            if skipped:
                notes.append("%s: %d JVM-only keys not in keel (%s, ...)"
                             % (where or "<root>", len(skipped), ", ".join(skipped[:4])))
            only_a = [k for k in only_a if not exempt.match(k)]
        if only_a:
            diffs.append("%s: only in ZooKeeper: %s" % (where or "<root>", only_a))
        if only_b:
            diffs.append("%s: only in keel: %s" % (where or "<root>", only_b))
        for k in a:
            if k in b:
                compare_json(a[k], b[k], "%s.%s" % (where, k) if where else k, diffs, notes)
        if list(k for k in a if k in b) != list(k for k in b if k in a):
            notes.append("%s: key order differs" % (where or "<root>"))
    elif ta == "list":
        if len(a) != len(b):
            notes.append("%s: %d vs %d elements" % (where, len(a), len(b)))
        if a and b:
            compare_json(a[0], b[0], where + "[0]", diffs, notes)
    elif ta in ("str",) and where.endswith("error"):
        if a != b:
            diffs.append("%s: %r vs %r" % (where, a, b))


def check_http():
    # The command listing.
    sa, ca, la = http_get(A_ADMIN, "/commands")
    sb, cb, lb = http_get(B_ADMIN, "/commands")
    diffs = []
    if (sa, ca) != (sb, cb):
        diffs.append("status/content-type %s %s vs %s %s" % (sa, ca, sb, cb))
    links_a = re.findall(r'href="([^"]*)"', la)
    links_b = re.findall(r'href="([^"]*)"', lb)
    if links_a != links_b:
        diffs.append("links only in ZooKeeper: %s; only in keel: %s"
                     % (sorted(set(links_a) - set(links_b)), sorted(set(links_b) - set(links_a))))
    report("http GET /commands (listing, %d links)" % len(links_a), diffs)
    for primary, aliases in COMMANDS:
        for name in [primary] + aliases:
            path = "/commands/" + name
            sa, ca, ta = http_get(A_ADMIN, path)
            sb, cb, tb = http_get(B_ADMIN, path)
            diffs, notes = [], []
            if (sa, ca) != (sb, cb):
                diffs.append("status/content-type %s %s vs %s %s" % (sa, ca, sb, cb))
            try:
                ja, jb = json.loads(ta), json.loads(tb)
            except ValueError as e:
                report("http " + path, ["not JSON: %s" % e])
                continue
            exempt = JVM_ONLY_PROPERTY if primary == "system_properties" else None
            compare_json(ja, jb, "", diffs, notes, exempt)
            for side, j in (("ZooKeeper", ja), ("keel", jb)):
                if "command" not in j or "error" not in j:
                    diffs.append("%s body lacks command/error" % side)
            if ja.get("command") != jb.get("command"):
                diffs.append("command %r vs %r" % (ja.get("command"), jb.get("command")))
            if ja.get("error") != jb.get("error"):
                diffs.append("error %r vs %r" % (ja.get("error"), jb.get("error")))
            report("http %s (%d keys)" % (path, len(ja)), diffs, notes)


# ---------------------------------------------------------------- four-letter words


def ask(port, word):
    payload = word.encode()
    if word == "stmk":
        payload += struct.pack(">q", 306)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(payload)
        chunks = []
        while True:
            c = s.recv(65536)
            if not c:
                break
            chunks.append(c)
    return b"".join(chunks).decode(errors="replace")


CONN_LINE = re.compile(r"^ /\S+\[[0-9a-f]+\]\((.*)\)$")
DATE = re.compile(r"[A-Z][a-z]{2} [A-Z][a-z]{2} \d\d \d\d:\d\d:\d\d \w+ \d{4}")


def line_shape(line):
    """A line with its values masked: numbers, hex ids, dates, addresses."""
    m = CONN_LINE.match(line)
    if m:
        keys = [kv.split("=", 1)[0] for kv in m.group(1).split(",")]
        return " <conn>(" + ",".join(keys) + ")"
    line = DATE.sub("<date>", line)
    line = re.sub(r"/\d+\.\d+\.\d+\.\d+:\d+", "<addr>", line)
    line = re.sub(r"0x[0-9a-f]+", "0x<hex>", line)
    line = re.sub(r"\d+(\.\d+)?", "<n>", line)
    return line


def shape_4lw(word, text):
    lines = text.split("\n")
    if word == "mntr":
        return [l.split("\t", 1)[0] for l in lines if l]
    if word in ("conf", "envi"):
        return [l.split("=", 1)[0] for l in lines if l]
    if word in ("srvr", "stat"):
        return [line_shape(l) if CONN_LINE.match(l) else l.split(":", 1)[0] for l in lines]
    shapes = [line_shape(l) for l in lines]
    if word == "dump":
        # How many expiry buckets the sessions and connections fall into depends on when
        # each last spoke relative to the tick boundaries (seen: two connections in one
        # bucket on one server, in two on the other), so bucket headers are not
        # compared; every session, ephemeral and connection line still is.
        shapes = [l for l in shapes if l != "<n> expire at <date>:"]
    return shapes


def check_4lw():
    for word in WORDS:
        ta, tb = ask(A_CLIENT, word), ask(B_CLIENT, word)
        sa, sb = shape_4lw(word, ta), shape_4lw(word, tb)
        diffs, notes = [], []
        if word in ("mntr", "conf", "envi"):
            only_a = [k for k in sa if k not in sb]
            only_b = [k for k in sb if k not in sa]
            if only_a:
                diffs.append("keys only in ZooKeeper: %s" % only_a)
            if only_b:
                diffs.append("keys only in keel: %s" % only_b)
            if not diffs and sa != sb:
                notes.append("key order differs")
        elif sorted(sa) != sorted(sb):
            diffs.append("ZooKeeper lines: %r" % sa)
            diffs.append("keel lines:      %r" % sb)
        elif sa != sb:
            notes.append("line order differs")
        if ta.endswith("\n") != tb.endswith("\n"):
            diffs.append("final newline: ZooKeeper %s, keel %s"
                         % (ta.endswith("\n"), tb.endswith("\n")))
        report("4lw %s (%d lines)" % (word, len([l for l in sa if l])), diffs, notes)


print("== AdminServer: ZooKeeper on :%d, keel on :%d" % (A_ADMIN, B_ADMIN))
check_http()
print("== four-letter words: ZooKeeper on :%d, keel on :%d" % (A_CLIENT, B_CLIENT))
check_4lw()
print()
if failures:
    print("admin differential: %d difference(s): %s" % (len(failures), ", ".join(failures)))
    sys.exit(1)
print("admin differential: every command has the same shape on both servers")

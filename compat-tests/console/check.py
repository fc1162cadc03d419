"""Checks every console page of a 3-member keel ensemble in headless chromium against the
facts Kazoo reads (see run.sh). Usage: check.py WORK BASE ADMIN_BASE DRIVER_PORT.

The browser is driven over the W3C WebDriver protocol (chromedriver), spoken here with
urllib; each page's facts are read from the DOM the browser built (textContent of the
elements the console marks with ids), so an escaping fault that makes markup from a
name or data shows as a missing or extra element, not only as odd text."""

import base64
import json
import os
import sys
import time
import urllib.parse
import urllib.request

from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import make_digest_acl

WORK, BASE, ADMIN_BASE, DRIVER_PORT = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
SHOTS = os.path.join(WORK, "screenshots")
failures = []
checked = 0


def check(ok, what):
    global checked
    checked += 1
    if not ok:
        failures.append(what)
        print("FAIL:", what, flush=True)


def client_port(i):
    return BASE + 10 * (i - 1) + 1


def admin_url(i, page):
    return f"http://127.0.0.1:{ADMIN_BASE + i}{page}"


class Browser:
    """One chromium session through chromedriver's WebDriver endpoint."""

    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                self._call("GET", "/status")
                break
            except OSError:
                time.sleep(0.1)
        binary = "/usr/lib/chromium/chromium"
        if not os.path.exists(binary):
            binary = "/usr/bin/chromium"
        args = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1000", f"--user-data-dir={WORK}/chromium-profile"]
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": binary, "args": args}}}}
        self.sid = self._call("POST", "/session", caps)["sessionId"]
        self.s = f"/session/{self.sid}"

    def _call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.load(r)["value"]

    def get(self, url):
        self._call("POST", self.s + "/url", {"url": url})

    def js(self, script, *args):
        return self._call("POST", self.s + "/execute/sync", {"script": script, "args": list(args)})

    def screenshot(self, name):
        png = base64.b64decode(self._call("GET", self.s + "/screenshot"))
        path = os.path.join(SHOTS, name + ".png")
        with open(path, "wb") as f:
            f.write(png)
        return path

    def window(self, width, height):
        self._call("POST", self.s + "/window/rect", {"width": width, "height": height})

    def quit(self):
        try:
            self._call("DELETE", self.s)
        except OSError:
            pass


# What a page's DOM holds: every element with an id (its text), every table with an id
# (its rows after the header, cell texts), every list with an id (item texts), links,
# and counts of elements that only a markup leak would create.
FACTS_JS = """
const q = s => Array.from(document.querySelectorAll(s));
return {
  title: document.title,
  h1: (document.querySelector('h1') || {}).textContent,
  ids: Object.fromEntries(q('[id]').map(e => [e.id, e.textContent])),
  tables: Object.fromEntries(q('table[id]').map(t => [t.id,
    Array.from(t.rows).slice(1).map(r => Array.from(r.cells).map(c => c.textContent))])),
  rowclass: Object.fromEntries(q('table[id]').map(t => [t.id,
    Array.from(t.rows).slice(1).map(r => r.className)])),
  lists: Object.fromEntries(q('ul[id]').map(u => [u.id,
    Array.from(u.children).map(li => li.textContent)])),
  links: q('a').map(a => [a.textContent, a.getAttribute('href')]),
  stats: Object.fromEntries(q('td[id^="stat-"]').map(e => [e.id.slice(5), e.textContent])),
  leaks: q('script, img, iframe, b.leak, [onerror], [onclick]').length,
  text: document.body.innerText,
  html: document.documentElement.outerHTML,
};
"""


def load(browser, i, page):
    browser.get(admin_url(i, page))
    return browser.js(FACTS_JS)


def tree_href(path):
    """The console's link for a znode path: unreserved bytes and / as they are."""
    return "/console/tree" + urllib.parse.quote(path, safe="/-._~")


def hexz(z):
    return f"0x{z:x}"


def session_hex(sid):
    return f"0x{sid & 0xFFFFFFFFFFFFFFFF:x}"


def srvr(zk):
    out = zk.command(b"srvr")
    facts = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
    return facts["Mode"], int(facts["Zxid"], 16)


# ---- the facts: sessions, znodes, ephemerals, watches, written with Kazoo ----

def connect(i):
    zk = KazooClient(hosts=f"127.0.0.1:{client_port(i)}", timeout=10.0)
    zk.start(timeout=15)
    return zk


clients = {"c1": (1, connect(1)), "c1b": (1, connect(1)), "c2": (2, connect(2)), "c3": (3, connect(3))}
c1 = clients["c1"][1]
HTML_NAME = "<img src=x onerror=alert(1)>\"q\"'s&amp;<b class=leak>b"
URL_NAME = "q?x=1#f%20 é"
TEXT_DATA = "<script>alert(1)</script> \"double\" 'single' &amp; é".encode()
BIN_DATA = b"\x01\x1b[31m\xff\xfe<b class=leak>\x00\x7f"
SECRET = b"TOPSECRET-data"
WIDE = 250

c1.create("/ct", b"console test")
c1.create("/ct/a", b"alpha")
c1.create("/ct/a/x", b"")
c1.create("/ct/nulldata", None)
c1.create("/ct/" + HTML_NAME, TEXT_DATA)
c1.create("/ct/" + URL_NAME, b"url name")
c1.create("/ct/bin", BIN_DATA)
c1.create("/ct/big", b"z" * 6000)
c1.set("/ct/a", b"alpha2")
c1.set("/ct/a", b"alpha3")
c1.create("/ct/wide", b"")
for chunk in range(0, WIDE, 50):
    t = c1.transaction()
    for k in range(chunk, min(WIDE, chunk + 50)):
        t.create(f"/ct/wide/n{k:04d}", b"")
    t.commit()
c1.create("/ct/secret", SECRET)
c1.create("/ct/secret/hidden-child", b"hidden")
c1.set_acls("/ct/secret", [make_digest_acl("user", "pw", all=True)])
ephemerals = {}
for name, (_, zk) in clients.items():
    ephemerals[name] = [zk.create(f"/ct/eph-{name}", name.encode(), ephemeral=True)]
ephemerals["c2"].append(clients["c2"][1].create("/ct/seq-", b"s", ephemeral=True, sequence=True))
# Watches: per connection, on the member the client is connected to.
c1.get("/ct/a", watch=lambda e: None)
c1.get_children("/ct", watch=lambda e: None)
clients["c2"][1].exists("/ct/missing", watch=lambda e: None)
watches = {"c1": {("data", "/ct/a"), ("child", "/ct")}, "c1b": set(),
           "c2": {("data", "/ct/missing")}, "c3": set()}
for _, zk in clients.values():
    zk.sync("/")

# The znodes whose pages are checked, and the whole tree's size.
def walk(zk, path):
    try:
        kids = zk.get_children(path)
    except NoAuthError:  # /ct/secret: its children (leaves) counted from its Stat
        return [path] + [None] * zk.exists(path).numChildren
    base = "" if path == "/" else path
    out = [path]
    for k in kids:
        out += walk(zk, f"{base}/{k}")
    return out

all_paths = walk(c1, "/")
znode_count = len(all_paths)
paths = ["/", "/zookeeper", "/ct", "/ct/a", "/ct/a/x", "/ct/nulldata", "/ct/" + HTML_NAME,
         "/ct/" + URL_NAME, "/ct/bin", "/ct/big", "/ct/wide", "/ct/wide/n0249", "/ct/secret"] + \
        [p for ps in ephemerals.values() for p in ps]
owner = {p: zk.client_id[0] for name, (_, zk) in clients.items() for p in ephemerals[name]}

browser = Browser(DRIVER_PORT)
t0 = time.time()
pages = 0
try:
    modes = {}
    # ---- ensemble page, on each member ----
    for i in (1, 2, 3):
        zk = next(zk for (m, zk) in clients.values() if m == i)
        mode, zxid = srvr(zk)
        modes[i] = mode
        on_member = sum(1 for (m, _) in clients.values() if m == i)
        f = load(browser, i, "/console/ensemble")
        pages += 1
        ids = f["ids"]
        want_state = {"leader": "leading - broadcast", "follower": "following - broadcast"}[mode]
        check(ids.get("state") == want_state, f"m{i} ensemble state {ids.get('state')!r}, srvr Mode {mode}")
        check(ids.get("server-id") == str(i), f"m{i} server id {ids.get('server-id')!r}")
        check(ids.get("last-applied-zxid") == hexz(zxid), f"m{i} last applied zxid {ids.get('last-applied-zxid')!r}, srvr {hexz(zxid)}")
        check(ids.get("last-logged-zxid") == hexz(zxid), f"m{i} last logged zxid {ids.get('last-logged-zxid')!r}, srvr {hexz(zxid)}")
        check(ids.get("currentEpoch") == str(zxid >> 32), f"m{i} currentEpoch {ids.get('currentEpoch')!r}, zxid epoch {zxid >> 32}")
        check(ids.get("connected-clients") == str(on_member), f"m{i} clients {ids.get('connected-clients')!r}, Kazoo clients on it {on_member}")
        check(ids.get("sessions") == str(len(clients)), f"m{i} sessions {ids.get('sessions')!r}")
        check(ids.get("znodes") == str(znode_count), f"m{i} znodes {ids.get('znodes')!r}, Kazoo counts {znode_count}")
        want_watches = sum(len(watches[n]) for n, (m, _) in clients.items() if m == i)
        check(ids.get("watches") == str(want_watches), f"m{i} watches {ids.get('watches')!r}, set {want_watches}")
        rows = f["tables"].get("members", [])
        check([r[0] for r in rows] == ["1", "2", "3"], f"m{i} members {rows}")
        me = [r[0] for r, c in zip(rows, f["rowclass"].get("members", [])) if c == "me"]
        check(me == [str(i)], f"m{i} marked member {me}")
        check(f["leaks"] == 0, f"m{i} ensemble page has script/img elements")
        browser.screenshot(f"ensemble-m{i}")
    leader = next(i for i, m in modes.items() if m == "leader")
    zxids = {i: srvr(next(zk for (m, zk) in clients.values() if m == i))[1] for i in (1, 2, 3)}
    for i in (1, 2, 3):
        f = load(browser, i, "/console/ensemble")
        check(f["ids"].get("leader") == str(leader), f"m{i} leader {f['ids'].get('leader')!r}, srvr says {leader}")
        # Every member's row: role, zxid, epoch, lag, clients, last election.
        rows = {r[0]: r for r in f["tables"].get("members", [])}
        for j in (1, 2, 3):
            r = rows.get(str(j), [])
            what = f"m{i} members row {j} {r}"
            if len(r) != 11:
                check(False, what + ": not 11 cells")
                continue
            _, _, _, role, zxid, epoch, lag_txns, lag_ms, nclients, election, _ = r
            on_j = sum(1 for (m, _) in clients.values() if m == j)
            if j == i:
                want_role = {"leader": "leading - broadcast", "follower": "following - broadcast"}[modes[j]]
            elif i == leader:
                want_role = "follower, synced"
            else:
                want_role = modes[j]
            check(role == want_role, f"{what}: role, want {want_role!r}")
            if i == leader and j != i:
                check(zxid == f"{hexz(zxids[j])} (acked {hexz(zxids[leader])})", f"{what}: zxid, want {hexz(zxids[j])} acked {hexz(zxids[leader])}")
                check(lag_ms == "0", f"{what}: lag ms")
            else:
                check(zxid == hexz(zxids[j]), f"{what}: zxid, srvr {hexz(zxids[j])}")
            check(epoch == str(zxids[j] >> 32), f"{what}: epoch")
            check(lag_txns == "0", f"{what}: lag txns")
            check(nclients == str(on_j), f"{what}: clients, Kazoo has {on_j} on m{j}")
            if j == i or i == leader:
                check(election.startswith("ended ") and f"sid {leader} leads" in election, f"{what}: election")
        # The slowest and busiest tables list this member's own connections.
        mine = sorted(session_hex(zk.client_id[0]) for (m, zk) in clients.values() if m == i)
        for t in ("slowest", "busiest"):
            listed = sorted(r[0] for r in f["tables"].get(t, []))
            check(listed == mine, f"m{i} {t} lists {listed}, Kazoo's sessions on it {mine}")
        for r in f["tables"].get("busiest", []):
            name = next(n for n, (_, zk) in clients.items() if session_hex(zk.client_id[0]) == r[0])
            check(r[6] == str(len(watches[name])), f"m{i} busiest {name} watches {r[6]}")

    # ---- tree pages, on each member ----
    for i in (1, 2, 3):
        zk = next(zk for (m, zk) in clients.values() if m == i)
        for path in paths:
            f = load(browser, i, tree_href(path))
            pages += 1
            what = f"m{i} tree {path!r}"
            check(f["leaks"] == 0, f"{what}: markup from the tree became elements")
            data, st = zk.get(path) if path != "/ct/secret" else (None, zk.exists(path))
            want = {
                "czxid": hexz(st.czxid), "mzxid": hexz(st.mzxid), "pzxid": hexz(st.pzxid),
                "ctime": f"{st.ctime} ms", "mtime": f"{st.mtime} ms", "version": str(st.version),
                "cversion": str(st.cversion), "aversion": str(st.aversion),
                "ephemeralOwner": "0" if st.ephemeralOwner == 0 else session_hex(st.ephemeralOwner),
                "dataLength": str(st.dataLength), "numChildren": str(st.numChildren),
            }
            check(f["stats"] == want, f"{what}: Stat {f['stats']} != Kazoo {want}")
            check(f["h1"] == path, f"{what}: heading {f['h1']!r}")
            if path in owner:
                link = [h for t, h in f["links"] if t == session_hex(owner[path])]
                check(link == [f"/console/session/{session_hex(owner[path])}"], f"{what}: owner link {link}")
            if path == "/ct/secret":
                # c: neither data nor children, anywhere in the page.
                check("denied" in f["ids"], f"{what}: not marked as denied")
                check("data" not in f["ids"] and "children" not in f["tables"], f"{what}: data or children shown")
                check(SECRET.decode() not in f["html"] and "hidden-child" not in f["html"], f"{what}: secret data or child name in the page")
                check("ACL" not in f["text"], f"{what}: ACL shown without READ or ADMIN")
                if i == 1:
                    browser.screenshot("tree-denied")
                continue
            check("denied" not in f["ids"], f"{what}: marked as denied")
            if data is None:
                check("data-null" in f["ids"], f"{what}: null data not shown as null")
            elif path == "/ct/bin":
                # b: control bytes and invalid UTF-8 as a hex dump.
                shown = f["ids"].get("data", "")
                for k in range(0, len(BIN_DATA), 16):
                    want_hex = f"{k:08x}  " + " ".join(f"{b:02x}" for b in BIN_DATA[k:k + 16])
                    check(want_hex in shown, f"{what}: hex dump {shown!r} lacks {want_hex!r}")
                check(not any(ord(c) < 0x20 and c not in "\n\t" for c in shown), f"{what}: a control character reached the DOM")
            else:
                shown = f["ids"].get("data")
                want_text = data.decode()[:4096]
                check(shown == want_text, f"{what}: data {shown!r:.80} != {want_text!r:.80}")
            kids = sorted(zk.get_children(path))
            names, after = [], ""
            for _ in range(10):
                rows = f["tables"].get("children", [])
                names += [r[0] for r in rows]
                for r in rows:
                    cst = zk.exists(("" if path == "/" else path) + "/" + r[0])
                    check(cst is not None and r[1:3] == [str(cst.numChildren), str(cst.dataLength)],
                          f"{what}: child row {r} vs {cst}")
                nxt = f["ids"].get("next")
                if nxt is None:
                    break
                href = next(h for t, h in f["links"] if t == nxt)
                f = load(browser, i, href)
                pages += 1
            check(names == kids, f"{what}: children {names[:5]}... ({len(names)}) != Kazoo's ({len(kids)})")
            if i == 1 and path in ("/", "/ct", "/ct/" + HTML_NAME, "/ct/bin"):
                name = {"/": "tree-root", "/ct": "tree-ct", "/ct/bin": "tree-binary"}.get(path, "tree-html-name")
                browser.screenshot(name)
        # The links on /ct lead to the children's pages (names with HTML and URL characters).
        f = load(browser, i, tree_href("/ct"))
        for name in (HTML_NAME, URL_NAME):
            href = [h for t, h in f["links"] if t == name]
            check(href == [tree_href("/ct/" + name)], f"m{i} link to {name!r}: {href}")
            f2 = load(browser, i, href[0]) if href else {"h1": None}
            check(f2["h1"] == "/ct/" + name, f"m{i} following the link to {name!r} gave {f2['h1']!r}")
            pages += 1

    # ---- sessions and session pages, on each member ----
    for i in (1, 2, 3):
        f = load(browser, i, "/console/sessions")
        pages += 1
        check(f["ids"].get("total") == f"{len(clients)} sessions", f"m{i} sessions total {f['ids'].get('total')!r}")
        rows = {r[0]: r for r in f["tables"].get("sessions", [])}
        for name, (m, zk) in clients.items():
            sid = session_hex(zk.client_id[0])
            r = rows.get(sid)
            check(r is not None, f"m{i} session {sid} ({name}) not listed")
            if r is None:
                continue
            local = "127.0.0.1:%d" % zk._connection._socket.getsockname()[1]
            want_client = local if m == i else "(not connected here)"
            check(r[1] == "10000", f"m{i} {name} timeout {r[1]}")
            check(r[3] == want_client, f"m{i} {name} client {r[3]!r}, Kazoo's socket {local} on m{m}")
            check(r[4] == str(len(ephemerals[name])), f"m{i} {name} ephemerals {r[4]}")
            check(r[5] == str(len(watches[name]) if m == i else 0), f"m{i} {name} watches {r[5]}")
            g = load(browser, i, f"/console/session/{sid}")
            pages += 1
            check(sorted(g["lists"].get("ephemerals", [])) == sorted(ephemerals[name]),
                  f"m{i} {name} ephemerals {g['lists'].get('ephemerals')} != {ephemerals[name]}")
            want_w = sorted(f"{t}: {p}" for t, p in watches[name]) if m == i else []
            check(sorted(g["lists"].get("watches", [])) == want_w, f"m{i} {name} watches {g['lists'].get('watches')} != {want_w}")
            if i == 1 and name == "c1":
                browser.screenshot("session-c1")
        if i == 1:
            browser.screenshot("sessions")
    # A follower stopped (SIGSTOP) while 20 txns are written: the leader's page shows it
    # 20 txns and at least the time since the first of them behind.
    follower = next(i for i in (1, 2, 3) if i != leader)
    writer = next(zk for (m, zk) in clients.values() if m == leader)
    pid = int(open(os.path.join(WORK, "ensemble", f"m{follower}", "pid")).read())
    os.kill(pid, 19)
    try:
        t_first = time.time()
        for k in range(20):
            writer.create(f"/ct/lag-{k:02d}", b"")
        time.sleep(0.3)
        waited_ms = (time.time() - t_first) * 1000
        f = load(browser, leader, "/console/ensemble")
        browser.screenshot("ensemble-leader-follower-behind")
    finally:
        os.kill(pid, 18)
    r = {r[0]: r for r in f["tables"].get("members", [])}.get(str(follower), [])
    check(len(r) == 11 and r[6] == "20", f"stopped m{follower} lag txns on the leader's page: {r}")
    lag_ms = int(r[7]) if len(r) == 11 and r[7].isdigit() else -1
    check(300 <= lag_ms <= waited_ms + 100, f"stopped m{follower} lag ms {r[7] if r else None}, want 300..{waited_ms:.0f}")
    print(f"leader's page for stopped m{follower}: lag {r[6] if r else '?'} txns, {lag_ms} ms "
          f"(loaded {waited_ms:.0f} ms after the first of the 20 writes)")

    # Phone width.
    browser.window(390, 844)
    browser.get(admin_url(leader, "/console/ensemble"))
    browser.screenshot("phone-ensemble")
    browser.get(admin_url(1, tree_href("/ct")))
    browser.screenshot("phone-tree-ct")
finally:
    browser.quit()
    for _, zk in clients.values():
        zk.stop()

print(f"{pages} console pages loaded in {time.time() - t0:.1f} s; {checked} checks, "
      f"{len(failures)} failed; screenshots in {SHOTS}:")
for n in sorted(os.listdir(SHOTS)):
    print("  " + os.path.join(SHOTS, n))
sys.exit(1 if failures else 0)

"""Compares what metrics_ensemble_drive.py recorded on a ZooKeeper 3.8 ensemble (its
`mntr`: Debian ships no Prometheus provider, and `mntr` prints the same metrics, with a
zk_ prefix) and on a keel ensemble (its /metrics, and its `mntr`), step by step.

For each step and member (paired by the part it plays, see the drive script), and each
metric ZooKeeper shows for local sessions, dynamic reconfig and read-only mode, and the
write path's counters (FEATURES: found by diffing ZooKeeper's `mntr` across the steps):
- exists: when ZooKeeper's `mntr` has it, keel's /metrics has a family of that name and
  ZooKeeper's type with a value; when it has not (a leader's gauges on a follower, the
  quorum gauges on a read-only member), keel's /metrics has no such family either;
- value: `exact` ones equal; `moves` ones change the same way (up, down, unchanged) as
  ZooKeeper's from the member's previous step (when it ran through both); `member` (a
  server id) names the same member;
- `server_state` and `peer_state` (mntr only, not metrics) are present and equal in
  keel's `mntr`.
Then keel's own `mntr` against its /metrics: every numeric `mntr` value has its family,
and the values agree (summaries by count and sum) except those that move by themselves.

    usage: metrics_ensemble_check.py ZK.json KEEL.json
Prints the failures and one summary line; exit 1 on any failure.
"""

import json
import re
import sys

ZK, KEEL = (json.load(open(p))["steps"] for p in sys.argv[1:3])

# name: (ZooKeeper's Prometheus type, how the value is compared)
FEATURES = {
    # local sessions (and the upgraded session's ephemeral)
    "local_sessions": ("gauge", "exact"),
    "global_sessions": ("gauge", "exact"),
    "ephemerals_count": ("gauge", "exact"),
    # the ensemble's shape, as reconfigs change it
    "quorum_size": ("gauge", "exact"),
    "learners": ("gauge", "exact"),
    "synced_followers": ("gauge", "exact"),
    "synced_non_voting_followers": ("gauge", "exact"),
    "synced_observers": ("gauge", "exact"),
    "pending_syncs": ("gauge", "exact"),
    "observer_master_id": ("gauge", "member"),
    "leader_uptime": ("gauge", "moves"),
    # keel's PROPOSALs carry no TxnDigest: 12 bytes less, compared by direction
    "last_proposal_size": ("gauge", "moves"),
    "min_proposal_size": ("gauge", "moves"),
    "max_proposal_size": ("gauge", "moves"),
    "proposal_count": ("counter", "exact"),
    # the write path: a synced learner's PROPOSALs and COMMITs (an observer's INFORMs),
    # the leader's commits
    "learner_proposal_received_count": ("counter", "moves"),
    "learner_commit_received_count": ("counter", "moves"),
    "commit_count": ("counter", "moves"),
    "diff_count": ("counter", "moves"),
    "snap_count": ("counter", "moves"),
    # elections, read-only mode, a reconfig's role change
    "looking_count": ("counter", "moves"),
    "election_time": ("summary", "moves"),
    "follower_sync_time": ("summary", "moves"),
    "observer_sync_time": ("summary", "moves"),
    "unavailable_time": ("summary", "moves"),
    "leader_unavailable_time": ("summary", "moves"),
}
TEXT = ["server_state", "peer_state"]  # dumpMonitorValues: mntr only
# keel mntr vs /metrics: values that move between the two reads by themselves.
VOLATILE = {
    "uptime", "leader_uptime", "open_file_descriptor_count", "packets_received",
    "packets_sent", "avg_latency", "min_latency", "max_latency", "last_client_response_size",
    "min_client_response_size", "max_client_response_size", "bytes_received_count",
    "response_bytes", "num_alive_connections", "outstanding_requests",
}
SUMMARY_PREFIX = re.compile(r"^zk_(avg|min|max|cnt|sum|p50|p95|p99|p999)_(.+)$")

passed = 0
failures = []
# Passed checks by kind: against ZooKeeper, keel's mntr keys found in its /metrics,
# keel's mntr values equal to its /metrics.
kinds = {"zk": 0, "family": 0, "value": 0}


def check(ok, what, kind="zk"):
    global passed
    if ok:
        passed += 1
        kinds[kind] += 1
    else:
        failures.append(what)
        print("FAIL " + what)


def consistency(ok, what):
    check(ok, what, "value")


def summary_entry(mntr, key):
    """(stat, summary name) when `key` is one of a summary's lines (`zk_cnt_X` exists
    for it), else None (`zk_min_latency` is a gauge of its own)."""
    m = SUMMARY_PREFIX.match(key)
    if m and "zk_cnt_" + m.group(2) in mntr:
        return m.groups()
    return None


def zk_value(member, name):
    """ZooKeeper's value of a metric (a summary by its count), None when absent."""
    kind = FEATURES[name][0]
    v = member["mntr"].get("zk_cnt_" + name if kind == "summary" else "zk_" + name)
    return None if v is None else float(v)


def keel_value(member, name):
    kind = FEATURES[name][0]
    return member["prom"]["samples"].get(name + "_count" if kind == "summary" else name)


def by_sid(step, sid):
    for m in step["members"].values():
        if m["sid"] == sid and m["mode"] != "down":
            return m
    return None


def label_of(step, sid):
    for label, m in step["members"].items():
        if m["sid"] == sid:
            return label
    return "sid %s?" % sid


def sign(x):
    return (x > 0) - (x < 0)


# The list itself: every feature metric is one ZooKeeper shows somewhere in the run.
for name, (kind, _) in FEATURES.items():
    key = "zk_cnt_" + name if kind == "summary" else "zk_" + name
    check(any(key in m["mntr"] for s in ZK for m in s["members"].values()),
          "ZooKeeper's mntr shows %s in some step" % name)

check([s["step"] for s in ZK] == [s["step"] for s in KEEL], "the same steps ran")
per_step = []
for i, (zs, ks) in enumerate(zip(ZK, KEEL)):
    before = passed, len(failures)
    for label, zm in sorted(zs["members"].items()):
        km = ks["members"].get(label)
        where = "%s / %s" % (zs["step"], label)
        check(km is not None and km["mode"] == zm["mode"],
              "%s: mode %s on both (keel: %s)" % (where, zm["mode"], km and km["mode"]))
        if km is None or zm["mode"] == "down" or km["mode"] == "down":
            continue
        for name in TEXT:
            z, k = zm["mntr"].get("zk_" + name), km["mntr"].get("zk_" + name)
            check(z == k, "%s: mntr %s %r (keel %r)" % (where, name, z, k))
        zprev = by_sid(ZK[i - 1], zm["sid"]) if i else None
        kprev = by_sid(KEEL[i - 1], km["sid"]) if i else None
        for name, (kind, rule) in FEATURES.items():
            z = zk_value(zm, name)
            ktype = km["prom"]["types"].get(name)
            k = keel_value(km, name)
            if z is None:
                check(ktype is None, "%s: %s absent from /metrics, as from ZooKeeper's mntr "
                      "(keel: %s %s)" % (where, name, ktype, k))
                continue
            check(ktype == kind and k is not None,
                  "%s: /metrics has %s as a %s with a value (keel: %s %s)"
                  % (where, name, kind, ktype, k))
            if k is None:
                continue
            if rule == "exact":
                check(k == z, "%s: %s = %s (keel %s)" % (where, name, z, k))
            elif rule == "member":
                zl, kl = label_of(zs, int(z)), label_of(ks, int(k))
                check(zl == kl, "%s: %s names %s (keel: %s)" % (where, name, zl, kl))
            elif zprev is not None and kprev is not None:
                zp, kp = zk_value(zprev, name), keel_value(kprev, name)
                if zp is not None and kp is not None:
                    check(sign(z - zp) == sign(k - kp),
                          "%s: %s moves as ZooKeeper's: %s -> %s (keel %s -> %s)"
                          % (where, name, zp, z, kp, k))

        # keel's mntr against its /metrics.
        types, samples = km["prom"]["types"], km["prom"]["samples"]
        for key, v in km["mntr"].items():
            try:
                v = float(v)
            except ValueError:
                continue  # text: version, server_state, peer_state
            m = summary_entry(km["mntr"], key)
            if m:
                stat, name = m
                if name.endswith("_per_namespace"):
                    continue  # a summary set's member: labelled samples
                check(types.get(name) == "summary",
                      "%s: keel /metrics has %s as a summary (%s)" % (where, name, types.get(name)),
                      "family")
                if stat in ("cnt", "sum"):
                    s = samples.get(name + ("_count" if stat == "cnt" else "_sum"))
                    consistency(s == v, "%s: keel mntr %s = /metrics %s_%s (%s, %s)"
                                % (where, key, name, "count" if stat == "cnt" else "sum", v, s))
                continue
            name = key[3:]
            check(types.get(name) in ("gauge", "counter"),
                  "%s: keel /metrics has mntr's %s (%s)" % (where, name, types.get(name)),
                  "family")
            if name not in VOLATILE:
                consistency(samples.get(name) == v, "%s: keel mntr %s = /metrics %s (%s, %s)"
                            % (where, key, name, v, samples.get(name)))
    per_step.append((zs["step"], passed - before[0], len(failures) - before[1]))

for step, ok, bad in per_step:
    print("%-4s %s: %d checks passed%s" % ("ok" if not bad else "FAIL", step, ok,
                                            ", %d failed" % bad if bad else ""))

# For the record: what else ZooKeeper's mntr moved across the steps (not checked: tied to
# writes or to ZooKeeper's internals rather than to these features).
moved = set()
for a, b in zip(ZK, ZK[1:]):
    for label, m in b["members"].items():
        p = a["members"].get(label)
        if p and p["sid"] == m["sid"] and p["mode"] != "down" and m["mode"] != "down":
            for k, v in m["mntr"].items():
                if p["mntr"].get(k) not in (None, v):
                    sm = summary_entry(m["mntr"], k)
                    moved.add(sm[1] if sm else k[3:])
checked = set(FEATURES) | set(TEXT)
print("ZooKeeper's mntr also moved (not checked here): %s"
      % " ".join(sorted(n for n in moved - checked if not n.endswith("_per_namespace"))))
print("metrics-ensemble: %d checks passed, %d failed (%d against ZooKeeper's mntr, "
      "%d keel mntr keys found in its /metrics, %d keel mntr values equal to its /metrics)"
      % (passed, len(failures), kinds["zk"], kinds["family"], kinds["value"]))
sys.exit(1 if failures else 0)

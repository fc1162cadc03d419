"""Scrapes keel's Prometheus endpoint, checks ZooKeeper's metric names and types, then
makes traffic with Kazoo and checks the figures move (issue 4, point b).

Usage: metrics_check.py CLIENT_PORT METRICS_PORT
Exit 1 with the failed checks listed.
"""
import re
import sys
import time
import urllib.request

from kazoo.client import KazooClient

CLIENT_PORT, METRICS_PORT = int(sys.argv[1]), int(sys.argv[2])
N = 25

# The names (mntr names without zk_) and the type ZooKeeper's
# PrometheusMetricsProvider gives each.
REQUIRED = {
    "znode_count": "gauge",
    "watch_count": "gauge",
    "ephemerals_count": "gauge",
    "approximate_data_size": "gauge",
    "num_alive_connections": "gauge",
    "outstanding_requests": "gauge",
    "packets_received": "gauge",
    "packets_sent": "gauge",
    "avg_latency": "gauge",
    "min_latency": "gauge",
    "max_latency": "gauge",
    "global_sessions": "gauge",
    "uptime": "gauge",
    "open_file_descriptor_count": "gauge",
    "connection_request_count": "counter",
    "commit_count": "counter",
    "fsynctime": "summary",
    "snapshottime": "summary",
    "readlatency": "summary",
    "updatelatency": "summary",
    "read_per_namespace": "summary",
    "write_per_namespace": "summary",
}
# Quantiles per summary: ADVANCED summaries have three, BASIC ones the median only.
QUANTILES = {"readlatency": {"0.5", "0.9", "0.99"}, "updatelatency": {"0.5", "0.9", "0.99"},
             "fsynctime": {"0.5"}, "snapshottime": {"0.5"}}

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? (\S+)$')
failed = []


def check(ok, what):
    print("%s  %s" % ("ok  " if ok else "FAIL", what))
    if not ok:
        failed.append(what)


def scrape():
    url = "http://127.0.0.1:%d/metrics" % METRICS_PORT
    with urllib.request.urlopen(url, timeout=10) as r:
        ctype = r.headers.get("Content-Type")
        text = r.read().decode()
    types, samples = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
        elif line.startswith("#") or not line:
            continue
        else:
            m = SAMPLE.match(line)
            if not m:
                raise ValueError("unparseable sample line: %r" % line)
            labels = tuple(sorted(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or "")))
            samples[(m.group(1), labels)] = float(m.group(4))
    return ctype, types, samples


def value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))))


ctype, types, s1 = scrape()
check(ctype == "text/plain; version=0.0.4; charset=utf-8", "content type %r" % ctype)
check(not any(n.endswith("_total") for n, _ in s1), "no metric renamed with _total")
for name, kind in REQUIRED.items():
    check(types.get(name) == kind, "%s declared as %s (got %s)" % (name, kind, types.get(name)))
    if kind in ("gauge", "counter"):
        check(value(s1, name) is not None, "%s has a value: %s" % (name, value(s1, name)))
    elif name in QUANTILES:
        for suffix in ("_count", "_sum"):
            check(value(s1, name + suffix) is not None,
                  "%s%s has a value: %s" % (name, suffix, value(s1, name + suffix)))
        got = {dict(l)["quantile"] for (n, l) in s1 if n == name}
        check(got == QUANTILES[name], "%s quantiles %s" % (name, sorted(got)))

client = KazooClient(hosts="127.0.0.1:%d" % CLIENT_PORT, timeout=10)
client.start(timeout=15)
client.ensure_path("/metrics-test")
_, _, s2 = scrape()
for i in range(N):
    client.create("/metrics-test/n%d" % i, b"payload-%d" % i)
client.get("/metrics-test/n0", watch=lambda e: None)
time.sleep(0.05)
_, _, s3 = scrape()


def moved(name, at_least=1, **labels):
    a, b = value(s2, name, **labels), value(s3, name, **labels)
    if labels and a is None:
        a = 0.0  # a labelled series appears with its first value
    check(a is not None and b is not None and b - a >= at_least,
          "%s%s moved by >= %d: %s -> %s" % (name, labels or "", at_least, a, b))


znodes = (value(s2, "znode_count"), value(s3, "znode_count"))
check(znodes[1] - znodes[0] == N, "znode_count grew by exactly %d: %s -> %s" % (N, *znodes))
check(value(s3, "watch_count") - value(s2, "watch_count") == 1,
      "watch_count grew by 1: %s -> %s" % (value(s2, "watch_count"), value(s3, "watch_count")))
moved("packets_received", N + 1)
moved("packets_sent", N + 1)
moved("readlatency_count")
moved("updatelatency_count", N)
moved("fsynctime_count")
moved("approximate_data_size", N)
moved("write_per_namespace_count", N, key="metrics-test")
moved("read_per_namespace_count", 1, key="metrics-test")
check(value(s3, "global_sessions") >= 1 and value(s3, "num_alive_connections") >= 1,
      "a session and a connection are counted")
check(value(s3, "uptime") > value(s1, "uptime"), "uptime advances")
check(value(s3, "max_latency") >= value(s3, "min_latency") >= 0, "min_latency <= max_latency")
client.stop()
client.close()

print()
if failed:
    print("metrics: %d check(s) failed" % len(failed))
    sys.exit(1)
print("metrics: every check passed")

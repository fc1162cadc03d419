#!/usr/bin/env bash
# Prometheus metrics (issue 4, point b): keel with ZooKeeper's PrometheusMetricsProvider
# class serves /metrics; metrics_check.py checks ZooKeeper's names and types, creates N
# znodes and a watch, and checks znode_count grows by exactly N and the latency, packet,
# fsync and per-namespace figures move. Then a keel whose metrics port is taken must
# refuse to start, as ZooKeeper does ("Cannot boot MetricsProvider").
#   usage: metrics.sh       (ports: client 2310/2311, metrics 7300)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib.sh"
WORK=${WORK:-/tmp/keel-compat/metrics}
PORT=2310 PORT2=2311 METRICS=7300
PROVIDER=org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider

if [ ! -x "$KEEL_BIN" ]; then
  echo "keel binary $KEEL_BIN not found (cargo build --release, or set KEEL_BIN)" >&2; exit 2
fi
VENV=$(bash "$HERE/../kazoo/setup.sh" | tail -n1) || { echo "kazoo/setup.sh failed" >&2; exit 2; }
mkdir -p "$WORK"
trap 'stop_server "$WORK/keel"; stop_server "$WORK/keel2"' EXIT

start_server keel "$WORK/keel" $PORT "metricsProvider.className=$PROVIDER
metricsProvider.httpHost=127.0.0.1
metricsProvider.httpPort=$METRICS" || { cat "$WORK/keel/log" >&2; exit 1; }
"$VENV/bin/python" "$HERE/metrics_check.py" $PORT $METRICS || status=1

# The port is taken by the first server: the second must exit with an error naming it.
rm -rf "$WORK/keel2"; mkdir -p "$WORK/keel2/data"
cat > "$WORK/keel2/zoo.cfg" <<CFG
tickTime=2000
dataDir=$WORK/keel2/data
clientPort=$PORT2
admin.enableServer=false
metricsProvider.className=$PROVIDER
metricsProvider.httpPort=$METRICS
CFG
timeout 20 "$KEEL_BIN" "$WORK/keel2/zoo.cfg" > "$WORK/keel2/log" 2>&1
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "Cannot boot MetricsProvider" "$WORK/keel2/log"; then
  echo "ok    busy metrics port: keel exits $rc: $(grep -m1 'Cannot boot' "$WORK/keel2/log")"
else
  echo "FAIL  busy metrics port: keel exit status $rc, log:"; cat "$WORK/keel2/log"; status=1
fi
exit ${status:-0}

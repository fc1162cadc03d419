#!/usr/bin/env bash
# Prometheus metrics on an ensemble (issue 18 part 4): what a member reports of local
# sessions, dynamic reconfig and read-only mode. A 3-member real ZooKeeper 3.8 ensemble,
# then a keel one on the same ports, each with localSessionsEnabled,
# localSessionsUpgradingEnabled, reconfigEnabled (a dynamic config file, a super user),
# -Dreadonlymode.enabled=true and 4lw mntr; keel's members also serve /metrics
# (metricsProvider.className=...PrometheusMetricsProvider, one port each). Debian's
# zookeeper package has no Prometheus provider jar, so ZooKeeper's side is its `mntr`
# (the same metrics, with a zk_ prefix).
# metrics_ensemble_drive.py runs the same steps on each: a local session on a follower,
# a write, an ephemeral that upgrades it; that follower's peer reconfigured to an
# observer and back, removed and added back; the session closed; the other follower and
# then the leader stopped, the survivor read-only, a canBeReadOnly client's session and
# read; the two restarted and a write. After each step it records every member's mntr
# (and keel's /metrics). metrics_ensemble_check.py then checks, step by step and member by
# member, the metrics ZooKeeper shows for these features (see its FEATURES): present in
# keel's /metrics with ZooKeeper's name and type exactly when ZooKeeper's mntr shows
# them, equal where the value is deterministic, moving the same way otherwise; and keel's
# own mntr against its /metrics.
#   usage: metrics_ensemble.sh [BASE]   (18000: members on BASE+1..BASE+23, keel's
#                                        /metrics on BASE+51..BASE+53)
# Exits nonzero on any failed check. Work files: $WORK (/tmp/keel-compat/metrics-ensemble:
# zk.json, keel.json, <kind>/m<i>/log, <kind>.drive.log).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../ensemble/lib.sh"
BASE=${1:-18000}
WORK=${WORK:-/tmp/keel-compat/metrics-ensemble}
PROVIDER=org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider
SUPER_FLAG="-Dzookeeper.DigestAuthenticationProvider.superDigest=super:D/InIHSb7yEEbrWz8b9l71RjZJU="  # "test"
# ZooKeeper members read ZK_JVMFLAGS (zk-exec.sh), keel members SERVER_JVMFLAGS.
export ZK_JVMFLAGS="-Dreadonlymode.enabled=true $SUPER_FLAG"
export SERVER_JVMFLAGS="-Dreadonlymode.enabled=true $SUPER_FLAG"
export ENSEMBLE_DYNAMIC_CONFIG=1
CFG="reconfigEnabled=true
standaloneEnabled=false
localSessionsEnabled=true
localSessionsUpgradingEnabled=true"

# keel's members only: ZooKeeper would fail to load the provider class.
KIND=
member_metrics_cfg() { # I
  [ "$KIND" = keel ] || return 0
  printf 'metricsProvider.className=%s\nmetricsProvider.httpHost=127.0.0.1\nmetricsProvider.httpPort=%d\n' \
    "$PROVIDER" $((BASE + 50 + $1))
}
export ENSEMBLE_MEMBER_CFG=member_metrics_cfg

need_kazoo_and_keel
[ -x /usr/share/zookeeper/bin/zkServer.sh ] || [ -f /usr/share/java/zookeeper.jar ] ||
  { echo "metrics-ensemble: ZooKeeper 3.8 not installed (apt-get install zookeeper)" >&2; exit 2; }
rm -rf "$WORK"; mkdir -p "$WORK"
trap 'stop_ensemble "$WORK/zk"; stop_ensemble "$WORK/keel"' EXIT
trap 'exit 130' INT TERM

t0=$(date +%s)
for KIND in zk keel; do
  start_ensemble "$KIND" "$WORK/$KIND" "$BASE" "$CFG" || { tail -n 20 "$WORK/$KIND"/m*/log >&2; exit 1; }
  disown -a  # the drive stops and starts members: no job notices from this shell
  prom=()
  [ "$KIND" = keel ] && prom=(--prometheus "$((BASE + 51)),$((BASE + 52)),$((BASE + 53))")
  if ! "$VENV/bin/python" "$HERE/metrics_ensemble_drive.py" "$WORK/$KIND" "$WORK/$KIND.json" \
       "${prom[@]}" 2> "$WORK/$KIND.drive.log"; then
    tail -n 20 "$WORK/$KIND.drive.log" >&2
    echo "metrics-ensemble: FAIL (the $KIND ensemble's steps failed; see $WORK)"
    exit 1
  fi
  stop_ensemble "$WORK/$KIND"
done
python3 "$HERE/metrics_ensemble_check.py" "$WORK/zk.json" "$WORK/keel.json" | tee "$WORK/result.txt"
rc=${PIPESTATUS[0]}
echo "metrics-ensemble: $([ "$rc" = 0 ] && echo PASS || echo FAIL) in $(( $(date +%s) - t0 )) s (see $WORK)"
exit "$rc"

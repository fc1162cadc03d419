#!/usr/bin/env bash
# The rolling migration under load (issue 17 b): a 3-member ZooKeeper 3.8 ensemble on
# loopback, 4 Kazoo clients writing and holding ephemerals and watches, its members
# replaced by keel one at a time (same zoo.cfg and server id, an empty dataDir) and
# then back by ZooKeeper (rolling.py). Passes when no session expired, no acknowledged
# write was lost, every watch fired once per step, the members' full dumps are
# identical, and the ZooKeeper members' logs hold no ERROR or WARN beyond those an
# all-ZooKeeper ensemble writes too (mixed/lib.sh zk_log_problems).
# Ports ROLLING_BASE+1..+23 (default 2950); logs in ROLLING_WORK/m*/log.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib.sh"

BASE=${ROLLING_BASE:-2950}
DIR=${ROLLING_WORK:-/tmp/keel-compat/rolling}
need_kazoo_and_keel
export RUST_LOG=${RUST_LOG:-info}
trap 'stop_mixed "$DIR"' EXIT
echo "== rolling migration: zk,zk,zk -> keel one member at a time -> zk again (logs in $DIR/m*/log)"
start_mixed zk,zk,zk "$DIR" "$BASE" || { tail -n 20 "$DIR"/m*/log >&2; exit 1; }
status=0
"$VENV/bin/python" "$HERE/rolling.py" "$DIR" "$KEEL_BIN" "$ENSEMBLE_HERE/zk-exec.sh" || status=1
stop_mixed "$DIR"
check_zk_logs "$DIR" rolling || status=1
exit $status

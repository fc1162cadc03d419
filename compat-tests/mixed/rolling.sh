#!/usr/bin/env bash
# The rolling migration under load (issue 17 b): a 3-member ZooKeeper 3.8 ensemble on
# loopback, 4 Kazoo clients writing and holding ephemerals and watches, its members
# replaced by keel one at a time (same zoo.cfg and server id) and then back by
# ZooKeeper (rolling.py). Two variants, each on a fresh ensemble:
#   plain      each new member starts on an empty dataDir (syncs by SNAP)
#   keep-data  each keel member starts on the dataDir its ZooKeeper predecessor left
#              (converted in place at start-up, issue 17 item 3) and must be synced by
#              DIFF or TRUNC, not SNAP, as the leader's log shows
# Usage: rolling.sh [plain|keep-data]...   (default: both, plain first)
# Passes when, in each, no session expired, no acknowledged write was lost, every watch
# fired once per step, the members' full dumps are identical, and the ZooKeeper
# members' logs hold no ERROR or WARN beyond those an all-ZooKeeper ensemble writes too
# (mixed/lib.sh zk_log_problems).
# Ports ROLLING_BASE+1..+23 (default 2950); logs in ROLLING_WORK/<variant>/m*/log.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib.sh"

BASE=${ROLLING_BASE:-2950}
WORK=${ROLLING_WORK:-/tmp/keel-compat/rolling}
VARIANTS=("$@")
[ ${#VARIANTS[@]} -gt 0 ] || VARIANTS=(plain keep-data)
need_kazoo_and_keel
export RUST_LOG=${RUST_LOG:-info}
DIR=
trap '[ -z "$DIR" ] || stop_mixed "$DIR"' EXIT
status=0
for variant in "${VARIANTS[@]}"; do
  case $variant in
  plain) flag=() ;;
  keep-data) flag=(--keep-data) ;;
  *) echo "rolling.sh: unknown variant $variant (plain, keep-data)" >&2; exit 2 ;;
  esac
  DIR=$WORK/$variant
  echo "== rolling migration ($variant): zk,zk,zk -> keel one member at a time -> zk again (logs in $DIR/m*/log)"
  t0=$SECONDS
  start_mixed zk,zk,zk "$DIR" "$BASE" || { tail -n 20 "$DIR"/m*/log >&2; exit 1; }
  "$VENV/bin/python" "$HERE/rolling.py" "${flag[@]}" "$DIR" "$KEEL_BIN" "$ENSEMBLE_HERE/zk-exec.sh" || status=1
  stop_mixed "$DIR"
  check_zk_logs "$DIR" "rolling ($variant)" || status=1
  echo "rolling ($variant): $((SECONDS - t0)) s"
done
exit $status

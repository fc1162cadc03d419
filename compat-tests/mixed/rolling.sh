#!/usr/bin/env bash
# The rolling migration under load (issue 17 b): a 3-member ZooKeeper 3.8 ensemble on
# loopback, 4 Kazoo clients writing and holding ephemerals and watches, its members
# replaced by keel one at a time (same zoo.cfg and server id) and then back by
# ZooKeeper (rolling.py). Two variants, each on a fresh ensemble:
#   plain      each new member starts on an empty dataDir (syncs by SNAP)
#   keep-data  each keel member starts on the dataDir its ZooKeeper predecessor left
#              (converted in place at start-up, issue 17 item 3) and must be synced by
#              DIFF or TRUNC, not SNAP, as the leader's log shows (but for the SNAP
#              ZooKeeper's rule sends an old leader holding txns nobody else logged:
#              rolling.py orphan_snap). A member behind by
#              more than the leader's in-memory log (500 txns; a step lets about 1,000
#              writes go by) gets DIFF from the txn log only while that log is under a
#              third of the newest snapshot's size (zookeeper.snapshotSizeFactor, which
#              keel follows); so rolling.py writes 4 MiB of ballast first, the members
#              run with snapCount=1000 (snapshots that hold it; the converted ones are
#              then fuzzy snapshots taken under load, with several log files after
#              them) and ZooKeeper with -Dzookeeper.preAllocSize=64 (KiB: ZooKeeper
#              measures its txn log by file size, 64 MiB preallocated by default)
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
ZK_JVMFLAGS_BASE=${ZK_JVMFLAGS:-}
[ ${#VARIANTS[@]} -gt 0 ] || VARIANTS=(plain keep-data)
need_kazoo_and_keel
export RUST_LOG=${RUST_LOG:-info}
DIR=
trap '[ -z "$DIR" ] || stop_mixed "$DIR"' EXIT
status=0
for variant in "${VARIANTS[@]}"; do
  case $variant in
  plain) flag=(); extra=; jvm= ;;
  keep-data) flag=(--keep-data); extra=snapCount=1000; jvm=-Dzookeeper.preAllocSize=64 ;;
  *) echo "rolling.sh: unknown variant $variant (plain, keep-data)" >&2; exit 2 ;;
  esac
  DIR=$WORK/$variant
  echo "== rolling migration ($variant): zk,zk,zk -> keel one member at a time -> zk again (logs in $DIR/m*/log)"
  t0=$SECONDS
  export ZK_JVMFLAGS="${ZK_JVMFLAGS_BASE:-} $jvm"
  start_mixed zk,zk,zk "$DIR" "$BASE" "$extra" || { tail -n 20 "$DIR"/m*/log >&2; exit 1; }
  "$VENV/bin/python" "$HERE/rolling.py" "${flag[@]}" "$DIR" "$KEEL_BIN" "$ENSEMBLE_HERE/zk-exec.sh" || status=1
  stop_mixed "$DIR"
  # snapCount=1000 with 4 MiB snapshots: a ZooKeeper member may still be writing one
  # when the next is due, and skips it with a WARN (an all-ZooKeeper ensemble run so
  # does too).
  [ "$variant" = keep-data ] && benign=$ZK_BENIGN'|Too busy to snap, skipping$' || benign=$ZK_BENIGN
  ZK_BENIGN=$benign check_zk_logs "$DIR" "rolling ($variant)" || status=1
  echo "rolling ($variant): $((SECONDS - t0)) s"
done
exit $status

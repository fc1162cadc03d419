#!/usr/bin/env bash
# Real-process sync tests (issue 15 b): a 3-member keel ensemble on loopback; a member
# rejoins by SNAP (wiped dataDir), by DIFF (stopped while writes went on) and by TRUNC
# (an old leader holding txns of its epoch that never committed), by SNAP when such
# an old leader's TRUNC would cross an epoch boundary, and by SNAP under load (fuzzy),
# each shown by the leader's log line and its zk_diff_count / zk_snap_count; after each,
# every member's full dump is identical and holds every acknowledged write (sync.py).
#   sync.sh             Ports ENSEMBLE_BASE+1..+23 (default 2980).
# SYNC_EXPECT=DIFF=SNAP (say) expects the wrong mode in one scenario, to see it fail;
# SYNC_ONLY=FUZZY (say; a comma-separated list) runs only those scenarios.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib.sh"

BASE=${ENSEMBLE_BASE:-2980}
WORK=${ENSEMBLE_WORK:-/tmp/keel-compat/ensemble-sync}
need_kazoo_and_keel

trap 'stop_ensemble "$WORK"' EXIT
start_ensemble keel "$WORK" "$BASE" || { tail -n 20 "$WORK"/m*/log >&2; exit 1; }
echo "== rejoin by SNAP, DIFF, TRUNC, SNAP across epochs and SNAP under load (logs in $WORK/m*/log)"
"$VENV/bin/python" "$HERE/sync.py" "$WORK"

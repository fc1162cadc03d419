#!/usr/bin/env bash
# Real-process partition test (issue 15 b): a 3-member keel ensemble on loopback whose
# member-to-member links run through a TCP proxy the test owns (partition.py). The
# leader is cut off: writes sent to it are not acknowledged and it steps down, while
# the other two elect a leader and acknowledge writes; after healing every member's
# full dump is identical and holds every acknowledged write.
#   partition.sh     Ports ENSEMBLE_BASE+1..+23 (default 3010), proxies
#                    ENSEMBLE_BASE+50..+75.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib.sh"

BASE=${ENSEMBLE_BASE:-3010}
WORK=${ENSEMBLE_WORK:-/tmp/keel-compat/ensemble-partition}
need_kazoo_and_keel

trap 'stop_ensemble "$WORK"' EXIT
echo "== isolate the leader through the proxies (logs in $WORK/m*/log)"
"$VENV/bin/python" "$HERE/partition.py" "$WORK" "$BASE" "$((BASE + 50))" "$KEEL_BIN"

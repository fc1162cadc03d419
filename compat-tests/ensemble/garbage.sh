#!/usr/bin/env bash
# Real-process peer-port robustness test (issue 15 b): random bytes, truncated and
# oversized handshakes and packets, and handshakes from an unknown sid, sent to the
# election and quorum ports of a running 3-member keel ensemble's leader and of a
# follower (garbage.py): each connection alone is closed, with its reason in the
# member's log; every member keeps running and acknowledges a write.
#   garbage.sh     Ports ENSEMBLE_BASE+1..+23 (default 3100).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib.sh"

BASE=${ENSEMBLE_BASE:-3100}
WORK=${ENSEMBLE_WORK:-/tmp/keel-compat/ensemble-garbage}
need_kazoo_and_keel

trap 'stop_ensemble "$WORK"' EXIT
start_ensemble keel "$WORK" "$BASE" || { tail -n 20 "$WORK"/m*/log >&2; exit 1; }
echo "== garbage on the peer ports (logs in $WORK/m*/log)"
"$VENV/bin/python" "$HERE/garbage.py" "$WORK"

#!/usr/bin/env bash
# Real-process ensemble tests (issue 15 b): a 3-member keel ensemble on loopback.
#   run.sh [keel|zk] [CYCLES]     (default keel, 20 cycles; zk runs the same against
#                                  real ZooKeeper 3.8, to check the harness itself)
# kill -9 the leader under write load from 4 Kazoo clients, CYCLES times, restarting it
# each time; then every acknowledged write must be on every member and the members'
# full dumps identical (chaos.py). Ports ENSEMBLE_BASE+1..+23 (default 2950).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib.sh"

KIND=${1:-keel}
CYCLES=${2:-20}
BASE=${ENSEMBLE_BASE:-2950}
WORK=${ENSEMBLE_WORK:-/tmp/keel-compat/ensemble-$KIND}
VENV=$(bash "$HERE/../kazoo/setup.sh" | tail -n1) || { echo "kazoo/setup.sh failed" >&2; exit 2; }
if [ "$KIND" = keel ] && [ ! -x "$KEEL_BIN" ]; then
  echo "keel binary not found at $KEEL_BIN (build it: cargo build --release, or set KEEL_BIN)" >&2
  exit 2
fi

trap 'stop_ensemble "$WORK"' EXIT
start_ensemble "$KIND" "$WORK" "$BASE" || { tail -n 20 "$WORK"/m*/log >&2; exit 1; }
echo "== kill -9 the leader $CYCLES times under load ($KIND, logs in $WORK/m*/log)"
"$VENV/bin/python" "$HERE/chaos.py" "$WORK" "$CYCLES"

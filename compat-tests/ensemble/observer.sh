#!/usr/bin/env bash
# Observers end to end (issue 15 item 7): a 3-participant + 1-observer real ZooKeeper 3.8
# ensemble, then a keel one on the same ports, each checked by observer_check.py (modes,
# the observer's conf, the leader's mntr learner figures, a write through the observer
# read on every member, no quorum without two participants); the two outputs must be
# identical.
#   usage: observer.sh [BASE]   (4600: members on BASE+1..BASE+33)
# One summary line; exits nonzero on any difference. Work files: $WORK
# (/tmp/keel-compat/ensemble-observer).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib.sh"
BASE=${1:-4600}
WORK=${WORK:-/tmp/keel-compat/ensemble-observer}
export ENSEMBLE_OBSERVERS=1

if [ ! -x "$KEEL_BIN" ]; then
  echo "keel binary $KEEL_BIN not found (cargo build --release, or set KEEL_BIN)" >&2; exit 2
fi
VENV=$(bash "$HERE/../kazoo/setup.sh" | tail -n1) || { echo "kazoo/setup.sh failed" >&2; exit 2; }
rm -rf "$WORK"; mkdir -p "$WORK"
trap 'stop_ensemble "$WORK/zk"; stop_ensemble "$WORK/keel"' EXIT
trap 'exit 130' INT TERM

# Let the leader's first pings settle the learners' figures.
SETTLE_S=2 ensemble_differential observer "$HERE/observer_check.py" "$BASE" "$WORK"

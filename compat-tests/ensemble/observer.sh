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

check() { # KIND
  start_ensemble "$1" "$WORK/$1" "$BASE" || { tail -n 20 "$WORK/$1"/m*/log >&2; return 1; }
  disown -a  # the check kills members: no job notices from this shell
  # Let the leader's first pings settle the learners' figures.
  sleep 2
  "$VENV/bin/python" "$HERE/observer_check.py" "$WORK/$1" > "$WORK/$1.out" 2> "$WORK/$1.err"
  local rc=$?
  stop_ensemble "$WORK/$1"
  [ $rc -eq 0 ] || { tail -n 20 "$WORK/$1.err" >&2; return 1; }
}

check zk || { echo "observer: FAIL (the ZooKeeper ensemble's check failed; see $WORK)"; exit 1; }
check keel || { echo "observer: FAIL (the keel ensemble's check failed; see $WORK)"; exit 1; }
if diff -u --label zk --label keel "$WORK/zk.out" "$WORK/keel.out" > "$WORK/diff"; then
  echo "observer: PASS (zk vs keel: $(wc -l < "$WORK/zk.out") facts identical; see $WORK)"
else
  cat "$WORK/diff"
  echo "observer: FAIL (zk vs keel differ; see $WORK)"
  exit 1
fi

#!/usr/bin/env bash
# Does this machine stop running now and then (a virtual machine's host throttling it)?
# Issue 16: on the project's Firecracker VM the whole guest stops for 10-20 ms on a
# 100 ms beat (aligned to the wall clock) once its CPU use and disk I/O together pass
# its host's budget; every request in flight then waits for the stop, which sets the
# p99 of an ensemble's 4 x 64 mixed phase (ensemble.sh) for keel and ZooKeeper alike.
#
#   bash compat-tests/bench/vm_stalls.sh [DIR]     (DIR: where the sync test writes; /tmp)
#
# Four runs of a few seconds each, with compat-tests/bench/vm_stalls.c:
#  1. 2 spinning threads alone (CPU only);
#  2. 2 processes that append 4 KB and fdatasync in a loop (disk only);
#  3. 3 such processes (more disk);
#  4. 2 spinning threads and 2 such processes together (CPU and disk).
# For each: the spinners' gaps above 5 ms and the syncs above 4 ms. A machine that is not
# throttled shows a few scattered ones; a throttled one shows them every 100 ms, at the
# same milliseconds within the second (the number before the colon), in 3 and 4.
# Needs gcc. Writes 64 MB per sync process into DIR and removes it.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DIR=${1:-/tmp}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
gcc -O2 -pthread -o "$WORK/vm_stalls" "$HERE/vm_stalls.c" -lm
P="$WORK/vm_stalls"

syncers() { # N COUNT: N sync processes at once; prints each one's slow syncs and summary
  local pids=() i
  for i in $(seq "$1"); do "$P" sync "$DIR/vm_stalls.$$.$i" "$2" > "$WORK/sync.$i" & pids+=($!); done
  wait "${pids[@]}"
  for i in $(seq "$1"); do echo "  sync process $i: $(head -c 300 "$WORK/sync.$i" | head -1)"; tail -1 "$WORK/sync.$i" | sed 's/^/    /'; done
}
spinners() { # SECONDS: 2 spinning threads in the background, output to $WORK/spin
  "$P" spin 2 "$1" > "$WORK/spin" & SPIN=$!
}
spin_report() {
  wait "$SPIN"
  echo "  spinners: $(grep -c ' ms at ' "$WORK/spin" || true) gaps above 5 ms; the first:"
  grep ' ms at ' "$WORK/spin" | head -6 | sed 's/^/    /' || true
}

echo "1. 2 spinning threads, 3 s"
spinners 3; spin_report
echo "2. 2 sync processes, 8000 syncs each"
syncers 2 8000
echo "3. 3 sync processes, 8000 syncs each"
syncers 3 8000
echo "4. 2 spinning threads and 2 sync processes"
spinners 4; sleep 0.2; syncers 2 6000; spin_report

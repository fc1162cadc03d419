#!/usr/bin/env bash
# Where a keel ensemble's CPU goes per write (issue 16): 3 keel members on loopback
# (compat-tests/ensemble/lib.sh's zoo.cfg: tickTime 500, fsync on), zkload 4 x 64 through
# a follower.
#
#   bash compat-tests/bench/profile_ensemble.sh [--phases set,create] [--keys K] [--ops N] [--no-record]
#
# For each phase (after a create phase that fills K znodes of 100 bytes):
#  1. perf stat on every member at once during the phase: CPU time, context switches,
#     syscalls by kind and fdatasyncs, each divided by the phase's requests, per role
#     (leader, the follower the clients use, the other follower);
#  2. unless --no-record, perf record (cpu-clock, DWARF call graphs) of the leader and of
#     the clients' follower during a second run: threads, libraries and the top
#     functions by self time of each.
# Reports in $PROFILE_DIR (default /tmp/keel-profile-ensemble); a summary on stdout.
# Needs perf (apt-get install -y linux-perf). KEEL_BIN as in run.sh; ports
# PROFILE_BASE+1..+23 (default 5100). PROFILE_EXTRA_CFG: zoo.cfg lines added to every member
# (e.g. keel.busyPollUs=200 to profile with the busy-poll thread, off in an ensemble by
# default; its spinning counts in a member's CPU time).
# PROFILE_KEEP_DATA=1 keeps the perf record files (PHASE-ROLE.data) and the keel binary they
# sampled, for `perf report -i ... -S SYMBOL -g caller` afterwards.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"
# shellcheck source=../ensemble/lib.sh
source "$HERE/../ensemble/lib.sh"

PHASES=set,create; K=10000; N=200000; RECORD=1
while [ $# -gt 0 ]; do
  case $1 in
  --phases) PHASES=${2:?}; shift ;;
  --keys) K=${2:?}; shift ;;
  --ops) N=${2:?}; shift ;;
  --no-record) RECORD=0 ;;
  -h|--help) sed -n '2,/^set -uo/{/^set -uo/!p}' "$0"; exit 0 ;;
  *) echo "profile_ensemble.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

WORK=${PROFILE_DIR:-/tmp/keel-profile-ensemble}
BASE=${PROFILE_BASE:-5100}
command -v perf >/dev/null || { echo "profile_ensemble.sh: perf missing (apt-get install -y linux-perf)" >&2; exit 1; }
[ -x "$KEEL_BIN" ] || { echo "profile_ensemble.sh: no keel binary at $KEEL_BIN" >&2; exit 1; }
if [ -d "$WORK" ] && [ -n "$(ls -A "$WORK")" ] && [ ! -f "$WORK/values" ]; then
  echo "profile_ensemble.sh: $WORK exists and is not a profile directory; set PROFILE_DIR" >&2; exit 1
fi
rm -rf "$WORK"; mkdir -p "$WORK"; : > "$WORK/values"
ENS=$WORK/ens
PERF_PIDS=()
cleanup() {
  local p
  for p in "${PERF_PIDS[@]}"; do kill -INT "$p" 2>/dev/null; done
  stop_ensemble "$ENS"
  rm -rf "$ENS" "$WORK"/zkload
  # perf report needs the binary the samples came from next to the data.
  [ "${PROFILE_KEEP_DATA:-0}" = 1 ] || rm -rf "$WORK"/keel "$WORK"/*.data
}
trap cleanup EXIT
trap 'exit 130' INT TERM

gcc -O2 -o "$WORK/zkload" "$ZKTOOLS/zkload.c" || exit 1
cp "$KEEL_BIN" "$WORK/keel" || exit 1
KEEL_BIN=$WORK/keel
start_ensemble keel "$ENS" "$BASE" "${PROFILE_EXTRA_CFG:-}" || exit 1
declare -A ROLE PID
leader=$(ensemble_port "$ENS" leader)
for i in 1 2 3; do
  p=$(cat "$ENS/m$i/port"); PID[$i]=$(cat "$ENS/m$i/pid")
  if [ "$p" = "$leader" ]; then ROLE[$i]=leader
  elif [ -z "${S:-}" ]; then ROLE[$i]=client-follower; S=127.0.0.1:$p
  else ROLE[$i]=other-follower; fi
done
log "keel ensemble: $(for i in 1 2 3; do printf 'member %s %s (pid %s)  ' "$i" "${ROLE[$i]}" "${PID[$i]}"; done)"

load() { # PHASE OPS: one zkload run of PHASE on the filled root, prints its line
  "$WORK/zkload" -s "$S" -c 4 -d 64 -k "$K" -n "$2" -z 100 -r 90 -p "$1" -R /p
}
SYSCALLS=(read write recvfrom sendto readv writev epoll_wait futex fdatasync sched_yield)
EVENTS=task-clock,context-switches,raw_syscalls:sys_enter
for s in "${SYSCALLS[@]}"; do EVENTS=$EVENTS,syscalls:sys_enter_$s; done

log "filling $K znodes through $S"
load create "$K" >/dev/null || exit 1
load get "$N" >/dev/null   # warm caches and allocators
IFS=, read -ra PH <<<"$PHASES"
for ph in "${PH[@]}"; do
  [ "$ph" = create ] && load delete "$K" >/dev/null   # create needs the keys gone
  log "phase $ph: perf stat on the three members"
  PERF_PIDS=()
  for i in 1 2 3; do
    perf stat -e "$EVENTS" -p "${PID[$i]}" -o "$WORK/$ph-m$i-perfstat.raw" &
    PERF_PIDS+=($!)
  done
  sleep 0.5
  n=$N; [ "$ph" = create ] && n=$K
  line=$(load "$ph" "$n")
  for p in "${PERF_PIDS[@]}"; do kill -INT "$p"; wait "$p"; done; PERF_PIDS=()
  echo "$line" > "$WORK/$ph-stat.txt"
  ops=$(sed -n 's/.* ops=\([0-9]*\).*/\1/p' <<<"$line")
  for i in 1 2 3; do
    echo "-- member $i, ${ROLE[$i]}" >> "$WORK/$ph-stat.txt"
    awk -v ops="$ops" '
      /task-clock/ { printf "  %-32s %10.2f us per request\n", "CPU time", $1 * 1000 / ops }
      /context-switches|sys_enter/ { gsub(",", "", $1); if ($1 > 0) printf "  %-32s %10.3f per request\n", $2, $1 / ops }
    ' "$WORK/$ph-m$i-perfstat.raw" >> "$WORK/$ph-stat.txt"
  done
  if [ $RECORD = 1 ]; then
    [ "$ph" = create ] && load delete "$K" >/dev/null
    log "phase $ph: perf record of the leader and the clients' follower"
    PERF_PIDS=()
    for i in 1 2 3; do
      [ "${ROLE[$i]}" = other-follower ] && continue
      perf record -e cpu-clock -F 999 --call-graph dwarf,16384 -p "${PID[$i]}" -o "$WORK/$ph-${ROLE[$i]}.data" 2>/dev/null &
      PERF_PIDS+=($!)
    done
    sleep 0.5
    load "$ph" "$n" >> "$WORK/$ph-stat.txt"
    for p in "${PERF_PIDS[@]}"; do kill -INT "$p"; wait "$p"; done; PERF_PIDS=()
    for r in leader client-follower; do
      f=$WORK/$ph-$r.data
      perf report -i "$f" --no-children --sort sym --percent-limit 0.7 --stdio -g none 2>/dev/null \
        | grep -v '^#' | grep -v '^$' > "$WORK/$ph-$r-self.txt"
      perf report -i "$f" --no-children --sort dso --stdio -g none 2>/dev/null \
        | grep -v '^#' | grep -v '^$' > "$WORK/$ph-$r-dso.txt"
      perf report -i "$f" --no-children --sort comm --stdio -g none 2>/dev/null \
        | grep -v '^#' | grep -v '^$' > "$WORK/$ph-$r-threads.txt"
      perf report -i "$f" --children --sort sym --percent-limit 3 --stdio -g none 2>/dev/null \
        | grep -v '^#' | grep -v '^$' > "$WORK/$ph-$r-children.txt"
    done
  fi
done

for ph in "${PH[@]}"; do
  echo "=== $ph: $(head -1 "$WORK/$ph-stat.txt")"
  sed -n '2,$p' "$WORK/$ph-stat.txt"
  [ $RECORD = 1 ] || continue
  for r in leader client-follower; do
    echo "--- $r: threads (share of samples)"; head -8 "$WORK/$ph-$r-threads.txt"
    echo "--- $r: libraries"; head -6 "$WORK/$ph-$r-dso.txt"
    echo "--- $r: top functions, self time"; head -25 "$WORK/$ph-$r-self.txt"
  done
done
echo "(reports in $WORK)"

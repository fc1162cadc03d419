#!/usr/bin/env bash
# Where keel's CPU goes under load: keel alone on core 0, zkload 4 x 64 on core 1.
#
#   bash compat-tests/bench/profile.sh [--phases get,set] [--keys K] [--ops N] [--callgrind] [--no-perf]
#
# For each phase (after a create phase that fills K znodes of 100 bytes):
#  1. perf stat on the keel process during the phase: CPU time, context switches and
#     syscalls by kind, each divided by the number of requests;
#  2. perf record (cpu-clock sampling, DWARF call graphs) during a second run of the
#     phase: the top functions by self time, by library, and inclusive ("children").
# With --callgrind, keel is then restarted under valgrind --tool=callgrind and each phase
# runs again (N/10 ops): instructions per function, exclusive and inclusive (cgtop.py;
# the callgrind.out.* files stay in $PROFILE_DIR). --no-perf skips the perf part.
# Reports in $PROFILE_DIR (default /tmp/keel-profile): PHASE-stat.txt, PHASE-self.txt,
# PHASE-dso.txt, PHASE-children.txt, PHASE-callgrind.txt; a summary on stdout.
# Needs perf (apt-get install -y linux-perf); cpu-clock and tracepoints suffice, no
# hardware counters. KEEL_BIN as in run.sh; port BENCH_PORT+10 (default 2910).
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

PHASES=get,set; K=10000; N=200000; CALLGRIND=0; PERF=1
while [ $# -gt 0 ]; do
  case $1 in
  --phases) PHASES=${2:?}; shift ;;
  --keys) K=${2:?}; shift ;;
  --ops) N=${2:?}; shift ;;
  --callgrind) CALLGRIND=1 ;;
  --no-perf) PERF=0 ;;
  -h|--help) sed -n '2,/^set -uo/{/^set -uo/!p}' "$0"; exit 0 ;;
  *) echo "profile.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

WORK=${PROFILE_DIR:-/tmp/keel-profile}
ZK_HEAP=${ZK_HEAP:-3g}
declare -A PORT; PORT[keel]=$(( ${BENCH_PORT:-2900} + 10 ))
[ $PERF = 0 ] || command -v perf >/dev/null || { echo "profile.sh: perf missing (apt-get install -y linux-perf)" >&2; exit 1; }
[ -x "$KEEL_BIN" ] || { echo "profile.sh: no keel binary at $KEEL_BIN" >&2; exit 1; }
port_free "${PORT[keel]}" || { echo "profile.sh: port ${PORT[keel]} in use" >&2; exit 1; }
if [ -d "$WORK" ] && [ -n "$(ls -A "$WORK")" ] && [ ! -f "$WORK/values" ]; then
  echo "profile.sh: $WORK exists and is not a profile directory; set PROFILE_DIR" >&2; exit 1
fi
rm -rf "$WORK"; mkdir -p "$WORK"
RES=$WORK/values; : > "$RES"
PERF_PID=
SRV=$WORK/srv
cleanup() {
  [ -n "$PERF_PID" ] && kill -INT "$PERF_PID" 2>/dev/null
  stop "$SRV"
  rm -rf "$SRV" "$WORK"/{keel,zkload,firstread} "$WORK"/*.data
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bench_pins
gcc -O2 -o "$WORK/zkload" "$ZKTOOLS/zkload.c" || exit 1
gcc -O2 -o "$WORK/firstread" "$HERE/firstread.c" || exit 1
cp "$KEEL_BIN" "$WORK/keel" || exit 1
KEEL_BIN=$WORK/keel
S=127.0.0.1:${PORT[keel]}

load() { # PHASE OPS: one zkload run of PHASE on the filled root, prints its line
  "${PIN_C[@]}" "$WORK/zkload" -s "$S" -c 4 -d 64 -k "$K" -n "$2" -z 100 -r 90 -p "$1" -R /p
}

IFS=, read -ra PH <<<"$PHASES"
SYSCALLS=(read write recvfrom sendto readv writev epoll_wait epoll_pwait futex fdatasync fsync sched_yield)
EVENTS=task-clock,context-switches,raw_syscalls:sys_enter
for s in "${SYSCALLS[@]}"; do EVENTS=$EVENTS,syscalls:sys_enter_$s; done

if [ $PERF = 1 ]; then
write_cfg keel "$SRV"
spawn keel "$SRV" / -1 60 >/dev/null || { echo "profile.sh: keel did not start" >&2; exit 1; }
PID=$(cat "$SRV/pid")
log "keel pid $PID; filling $K znodes"
load create "$K" >/dev/null || exit 1
load get "$N" >/dev/null   # warm caches and allocator
for ph in "${PH[@]}"; do
  log "phase $ph: perf stat"
  "${PIN_C[@]}" perf stat -e "$EVENTS" -p "$PID" -o "$WORK/$ph-perfstat.raw" &
  PERF_PID=$!; sleep 0.5
  line=$(load "$ph" "$N"); kill -INT "$PERF_PID"; wait "$PERF_PID"; PERF_PID=
  echo "$line" > "$WORK/$ph-stat.txt"
  ops=$(sed -n 's/.* ops=\([0-9]*\).*/\1/p' <<<"$line")
  awk -v ops="$ops" '
    /task-clock/ { printf "%-34s %10.2f us per request\n", "keel CPU time", $1 * 1000 / ops }
    /context-switches|sys_enter/ { gsub(",", "", $1); printf "%-34s %10.3f per request (%s)\n", $2, $1 / ops, $1 }
  ' "$WORK/$ph-perfstat.raw" >> "$WORK/$ph-stat.txt"
  log "phase $ph: perf record"
  "${PIN_C[@]}" perf record -e cpu-clock -F 1999 --call-graph dwarf,16384 -p "$PID" -o "$WORK/$ph.data" 2>/dev/null &
  PERF_PID=$!; sleep 0.5
  load "$ph" "$N" >> "$WORK/$ph-stat.txt"; kill -INT "$PERF_PID"; wait "$PERF_PID"; PERF_PID=
  perf report -i "$WORK/$ph.data" --no-children --sort sym --percent-limit 0.7 --stdio -g none 2>/dev/null \
    | grep -v '^#' | grep -v '^$' > "$WORK/$ph-self.txt"
  perf report -i "$WORK/$ph.data" --no-children --sort dso --stdio -g none 2>/dev/null \
    | grep -v '^#' | grep -v '^$' > "$WORK/$ph-dso.txt"
  perf report -i "$WORK/$ph.data" --children --sort sym --percent-limit 3 --stdio -g none 2>/dev/null \
    | grep -v '^#' | grep -v '^$' > "$WORK/$ph-children.txt"
  perf report -i "$WORK/$ph.data" --no-children --sort comm --stdio -g none 2>/dev/null \
    | grep -v '^#' | grep -v '^$' > "$WORK/$ph-threads.txt"
done
stop "$SRV"
fi

if [ $CALLGRIND = 1 ]; then
  command -v valgrind >/dev/null || { echo "profile.sh: valgrind missing" >&2; exit 1; }
  rm -rf "$SRV"; write_cfg keel "$SRV"
  KEEL_REAL=$KEEL_BIN
  server_cmd() { CMD=("${PIN_S[@]}" valgrind --tool=callgrind --callgrind-out-file="$WORK/callgrind.out.%p"
                      --dump-instr=no --collect-atstart=yes "$KEEL_REAL" "$2/zoo.cfg"); }
  spawn keel "$SRV" / -1 300 >/dev/null || { echo "profile.sh: keel under callgrind did not start" >&2; exit 1; }
  PID=$(cat "$SRV/pid")
  load create "$K" >/dev/null || exit 1
  for ph in "${PH[@]}"; do
    callgrind_control -z "$PID" >/dev/null
    load "$ph" $((N / 10)) > "$WORK/$ph-callgrind-load.txt"
    callgrind_control -d "$ph" "$PID" >/dev/null
    f=$(ls -t "$WORK"/callgrind.out.*"$ph"* 2>/dev/null | head -1)
    [ -n "$f" ] || f=$(ls -t "$WORK"/callgrind.out.* | head -1)
    # cgtop.py rather than callgrind_annotate, which puts every instruction under `clone`.
    { cat "$WORK/$ph-callgrind-load.txt"; python3 "$HERE/cgtop.py" "$f" 30; } > "$WORK/$ph-callgrind.txt"
  done
  stop "$SRV"
fi

for ph in "${PH[@]}"; do
  [ $PERF = 1 ] || break
  echo "=== $ph: $(head -1 "$WORK/$ph-stat.txt")"
  sed -n '2,$p' "$WORK/$ph-stat.txt"
  echo "--- threads (share of samples)"; head -8 "$WORK/$ph-threads.txt"
  echo "--- libraries"; head -8 "$WORK/$ph-dso.txt"
  echo "--- top functions, self time"; head -30 "$WORK/$ph-self.txt"
done
if [ $CALLGRIND = 1 ]; then
  for ph in "${PH[@]}"; do
    echo "=== $ph under callgrind: $(head -1 "$WORK/$ph-callgrind.txt")"
    sed -n '2,/^-- inclusive/p' "$WORK/$ph-callgrind.txt" | head -26
  done
fi
echo "(reports in $WORK)"

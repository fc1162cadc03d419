#!/usr/bin/env bash
# keel against real ZooKeeper 3.8, side by side: throughput, tail latency, memory,
# restart and watch fan-out, with the ratio keel/ZooKeeper marked against issue 5's targets.
#
#   bash compat-tests/bench/run.sh [--quick] [--rounds N] [--only LIST] [--keep]
#   bash compat-tests/bench/run.sh --ensemble [options]   (ensembles: see ensemble.sh)
#
#   --quick     small sizes and 1 round (after the warm-up): checks the harness itself
#   --rounds N  measured rounds per workload (default 3), after one warm-up round each
#   --only LIST comma-separated sections: load, memory (fill, RSS, restart), fanout
#   --keep      keep the server data directories and binaries (default: removed at exit)
#
# Same settings for both servers (zoo.cfg from lib.sh: tickTime=2000, forceSync=yes,
# snapCount=100000, maxClientCnxns=0, 4lw allowed, admin.enableServer=false, dataDir
# under $BENCH_DIR on the same disk); ZooKeeper runs with -Xmx$ZK_HEAP (default 3g, as
# durability.sh). Server on core 0, every client on core 1 (taskset).
#
# 1. load: both servers up for the whole section. Per round, for each workload,
#    ZooKeeper then keel: zkload 4 sessions x 64 in flight, zkload 1 x 1, and zkbench
#    (the stock C client) 4 x 64; K znodes of 100 bytes, phases create, get, set,
#    mixed (90% reads), delete; ops/s and p50/p99/p999 latency per phase.
# 2. memory: a fresh server each, RSS (/proc/PID/status VmRSS) before and after creating
#    FILL znodes of 100 bytes (zkload 4 x 64); growth per znode. Then restart time:
#    spawn to the first successful getData of the last znode (firstread.c), alternating
#    servers, median. ZooKeeper's live heap after a full GC (jcmd) is shown for reference.
# 3. fanout: a fresh server each; fanout.c opens N sessions, each sets a data watch on one
#    znode, one setData from another session; time from the setData write to the last
#    of the N notifications read. A warm-up round, then rounds alternating servers.
# While one server is measured in sections 1 and 3, the other is paused (SIGSTOP, then
# SIGCONT after the run): both are pinned to core 0, and a JVM goes on working after a
# run (JIT compilation, GC: measured 0.35 CPU-s in the 0.5 s after a 4 x 64 run), which
# would otherwise be taken from the next run, keel's, on that core.
# Final table: median of rounds for each server, ratio keel/ZooKeeper, target, ok/MISS.
# Exit status 0 when every run succeeded (whatever the targets), 1 when one failed.
# Output: stdout and $BENCH_DIR/results.txt, SVG charts of the load section in
# $BENCH_DIR/charts/standalone-*.svg (charts.py); raw client output in $BENCH_DIR/raw, server
# logs in $BENCH_DIR/logs (each run replaces the last). Every server started here is
# stopped on exit (also on Ctrl-C or a failure), and its data directory removed.
#
# Environment: KEEL_BIN (default ~/.cache/keel-target/release/keel; copied into
# $BENCH_DIR so a rebuild during the run changes nothing), ZK_HEAP (3g), BENCH_DIR
# (/tmp/keel-bench-run), BENCH_PORT (ZooKeeper's port, keel uses +1; default 2900).
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

QUICK=0; ROUNDS=3; KEEP=0; ONLY=load,memory,fanout
while [ $# -gt 0 ]; do
  case $1 in
  --quick) QUICK=1; ROUNDS=1 ;;
  --rounds) ROUNDS=${2:?--rounds N}; shift ;;
  --only) ONLY=${2:?--only LIST}; shift ;;
  --keep) KEEP=1 ;;
  --ensemble) shift; exec bash "$HERE/ensemble.sh" "$@" ;;
  -h|--help) sed -n '2,/^set -uo/{/^set -uo/!p}' "$0"; exit 0 ;;
  *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
want() { [[ ,$ONLY, == *,$1,* ]]; }

WORK=${BENCH_DIR:-/tmp/keel-bench-run}
ZK_HEAP=${ZK_HEAP:-3g}
declare -A PORT NOTE
PORT[zk]=${BENCH_PORT:-2900}; PORT[keel]=$((PORT[zk] + 1))
SIZE=100
if [ $QUICK = 1 ]; then
  K=1000; N=10000; K1=300; N1=1000; FILL=50000; FAN=1000; RESTARTS=1
else
  K=10000; N=100000; K1=10000; N1=5000; FILL=1000000; FAN=10000; RESTARTS=3
fi
LAST=$(printf '/zkload/k%08d' $((FILL - 1)))
PHASES=(create get set mixed delete)
KINDS=(zk keel)

# ---- setup ----------------------------------------------------------------------------
if [ ! -x "$KEEL_BIN" ]; then
  echo "run.sh: no keel binary at $KEEL_BIN; build it first:" >&2
  echo "  CARGO_TARGET_DIR=\$HOME/.cache/keel-target cargo build --release" >&2
  exit 1
fi
for k in "${KINDS[@]}"; do
  port_free "${PORT[$k]}" || { echo "run.sh: port ${PORT[$k]} is in use (another run?)" >&2; exit 1; }
done
# Servers left by an earlier run of this script that was killed hard: stop only
# processes whose command line names this work directory.
for f in "$WORK"/srv-*/pid; do
  [ -f "$f" ] || continue
  if tr '\0' ' ' < "/proc/$(cat "$f")/cmdline" 2>/dev/null | grep -q "$WORK/srv-"; then stop "$(dirname "$f")"; fi
done
# Each run replaces the previous one's results; refuse a directory that is not ours.
if [ -d "$WORK" ] && [ -n "$(ls -A "$WORK")" ] && [ ! -d "$WORK/raw" ]; then
  echo "run.sh: $WORK exists and is not a benchmark directory; set BENCH_DIR" >&2; exit 1
fi
rm -rf "$WORK"; mkdir -p "$WORK/raw" "$WORK/logs"
RES=$WORK/raw/values; : > "$RES"
CLIENT_PID=   # the client running now, if any

cleanup() {
  local d
  [ -n "$CLIENT_PID" ] && kill "$CLIENT_PID" 2>/dev/null
  for d in "$WORK"/srv-*; do
    [ -d "$d" ] || continue
    stop "$d"
    for f in "$d"/log.*; do [ -f "$f" ] && cp "$f" "$WORK/logs/$(basename "$d")-$(basename "$f")"; done
    [ $KEEP = 1 ] || rm -rf "$d"
  done
  [ $KEEP = 1 ] || rm -f "$WORK"/{keel,zkload,zkbench,firstread,fanout}
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bench_pins
log "building clients into $WORK"
gcc -O2 -o "$WORK/zkload" "$ZKTOOLS/zkload.c" || exit 1
gcc -O2 -o "$WORK/firstread" "$HERE/firstread.c" || exit 1
gcc -O2 -o "$WORK/fanout" "$HERE/fanout.c" || exit 1
HAVE_ZKBENCH=1
gcc -O2 -o "$WORK/zkbench" "$ZKTOOLS/zkbench.c" -lzookeeper_mt -lpthread -lm 2>"$WORK/raw/zkbench-build.txt" \
  || { HAVE_ZKBENCH=0; echo "note: zkbench did not build (apt-get install -y libzookeeper-mt-dev); skipped" >&2; }
cp "$KEEL_BIN" "$WORK/keel" || exit 1
KEEL_SRC_BIN=$KEEL_BIN; KEEL_BIN=$WORK/keel

# 10,000 watcher sessions need as many descriptors in the client and in the server.
ulimit -n "$(ulimit -Hn)" 2>/dev/null
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt $((FAN + 100)) ]; then
  FAN=$(( $(ulimit -n) - 100 ))
  echo "note: ulimit -n is $(ulimit -n); fan-out reduced to $FAN sessions" >&2
fi
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

FAILED=0   # runs that failed (the exit status)

start() { # KIND DIR: a fresh server, waits until it serves a read
  local line
  stop "$2"; rm -rf "$2"; write_cfg "$1" "$2"
  if line=$(spawn "$1" "$2" / -1 60); then log "$1 up in $2: $line"; return 0; fi
  log "$1 failed to start: $line (see $2/log.0)"; note "$1" "$(basename "$2"): failed to start"
  stop "$2"; return 1
}


# pause_others KIND SECTION: SIGSTOP every other server of SECTION (load, fan) while
# KIND is measured; resume SECTION: SIGCONT them all. stop() resumes a paused server.
pause_others() {
  local o p
  for o in "${UP[@]}"; do
    [ "$o" = "$1" ] && continue
    p=$(cat "$WORK/srv-$o-$2/pid" 2>/dev/null) && kill -STOP "$p" 2>/dev/null
  done
  return 0
}
resume() {
  local o p
  for o in "${UP[@]}"; do
    p=$(cat "$WORK/srv-$o-$1/pid" 2>/dev/null) && kill -CONT "$p" 2>/dev/null
  done
  return 0
}


# ---- 1. load --------------------------------------------------------------------------
if want load; then
  UP=()
  for k in "${KINDS[@]}"; do start "$k" "$WORK/srv-$k-load" && UP+=("$k"); done
  PH=$(IFS=,; echo "${PHASES[*]}")
  for r in $(seq 0 "$ROUNDS"); do
    what=$([ "$r" = 0 ] && echo warm-up || echo "round $r/$ROUNDS")
    for w in c4 c1 zb; do
      [ $w = zb ] && [ $HAVE_ZKBENCH = 0 ] && continue
      for k in "${UP[@]}"; do
        s=127.0.0.1:${PORT[$k]}; tag=$w-r$r
        log "$what: $k, $w"
        pause_others "$k" load
        case $w in
        c4) client "$k" "$tag" "$WORK/zkload" -s "$s" -c 4 -d 64 -k $K -n $N -z $SIZE -r 90 -p "$PH" -R "/$tag" ;;
        c1) client "$k" "$tag" "$WORK/zkload" -s "$s" -c 1 -d 1 -k $K1 -n $N1 -z $SIZE -r 90 -p "$PH" -R "/$tag" ;;
        zb) client "$k" "$tag" "$WORK/zkbench" -s "$s" -c 4 -d 64 -k $K -n $N -z $SIZE -r 90 -p "$PH" -R "/$tag" ;;
        esac && [ "$r" != 0 ] && record "$k" "$tag" "$w"
        resume load
      done
    done
  done
  for k in "${KINDS[@]}"; do stop "$WORK/srv-$k-load"; done
fi

# ---- 2. memory and restart ------------------------------------------------------------
# zk_heap_used_kb PID: Java heap in use after a full GC, KiB (jcmd), or NA. Summed over the
# generations: pinned to one core the JVM picks the serial collector (young + tenured).
zk_heap_used_kb() {
  command -v jcmd >/dev/null || { echo NA; return; }
  timeout 60 jcmd "$1" GC.run >/dev/null 2>&1 || { echo NA; return; }
  timeout 60 jcmd "$1" GC.heap_info 2>/dev/null |
    awk 'match($0, /total [0-9]+K, used [0-9]+K/) { split(substr($0, RSTART, RLENGTH), w, /[ K,]+/); u += w[4]; n++ }
         END { if (n) print u; else print "NA" }'
}
if want memory; then
  FILLED=()
  for k in "${KINDS[@]}"; do
    d=$WORK/srv-$k-fill
    start "$k" "$d" || continue
    sleep 2
    before=$(rss_kb "$d")
    [ "$k" = zk ] && heap0=$(zk_heap_used_kb "$(cat "$d/pid")")
    log "filling $k with $FILL znodes of $SIZE bytes (zkload -c 4 -d 64); RSS before: $before KiB"
    if client "$k" fill "$WORK/zkload" -s "127.0.0.1:${PORT[$k]}" -c 4 -d 64 -k $FILL -z $SIZE -p create; then
      sleep 2
      after=$(rss_kb "$d")
      put mem.before "$k" "$(awk -v a="$before" 'BEGIN {printf "%.1f", a/1024}')"
      put mem.after "$k" "$(awk -v a="$after" 'BEGIN {printf "%.1f", a/1024}')"
      put mem.per_znode "$k" "$(awk -v a="$after" -v b="$before" -v n=$FILL 'BEGIN {printf "%.0f", (a-b)*1024/n}')"
      put fill.ops "$k" "$(field "$WORK/raw/$k-fill.txt" create ops_per_s)"
      e=$(field "$WORK/raw/$k-fill.txt" create errors); [ "${e:-0}" != 0 ] && note "$k" "fill: $e errors"
      if [ "$k" = zk ]; then
        heap1=$(zk_heap_used_kb "$(cat "$d/pid")")
        log "ZooKeeper heap in use after a full GC: $heap0 KiB before the fill, $heap1 KiB after"
        [[ $heap0 =~ ^[0-9]+$ && $heap1 =~ ^[0-9]+$ ]] &&
          put mem.zkheap "$k" "$(awk -v a="$heap1" -v b="$heap0" -v n=$FILL 'BEGIN {printf "%.0f", (a-b)*1024/n}')"
      fi
      FILLED+=("$k")
    fi
    stop "$d"
  done
  for i in $(seq 1 "$RESTARTS"); do
    for k in "${FILLED[@]}"; do
      d=$WORK/srv-$k-fill
      log "restart $i/$RESTARTS: $k (spawn to the first getData of $LAST)"
      line=$(spawn "$k" "$d" "$LAST" $SIZE 900); rc=$?
      log "  $k restart $i: $line"
      v=$(sed -n 's/.*first_read_s=\([0-9.]*\) .*/\1/p' <<<"$line")
      if [ $rc = 0 ] && [ -n "$v" ]; then
        put restart.secs "$k" "$v"; [ "$i" = 1 ] && put restart.first "$k" "$v"
      else
        put restart.secs "$k" FAIL; note "$k" "restart $i: ${line:-server exited (rc $rc)}"
      fi
      stop "$d"
    done
  done
fi

# ---- 3. watch fan-out -----------------------------------------------------------------
if want fanout; then
  UP=()
  for k in "${KINDS[@]}"; do start "$k" "$WORK/srv-$k-fan" && UP+=("$k"); done
  for r in $(seq 0 "$ROUNDS"); do
    for k in "${UP[@]}"; do
      log "$([ "$r" = 0 ] && echo warm-up || echo "round $r/$ROUNDS"): $k, fan-out to $FAN sessions"
      pause_others "$k" fan
      ok=0
      client "$k" fan-r$r "$WORK/fanout" -s "127.0.0.1:${PORT[$k]}" -n $FAN -P "/fan-r$r" -z $SIZE -t 600 && ok=1
      resume fan
      if [ $ok = 1 ] && [ "$r" != 0 ]; then
        f=$WORK/raw/$k-fan-r$r.txt
        for x in last_ms first_ms p50_ms set_reply_ms connect_s; do
          put "fan.$x" "$k" "$(sed -n "s/.* $x=\([0-9.]*\).*/\1/p" "$f")"
        done
      fi
    done
  done
  for k in "${KINDS[@]}"; do stop "$WORK/srv-$k-fan"; done
fi

# ---- table ----------------------------------------------------------------------------
MET=0; MISSED=0
{
  echo "keel vs ZooKeeper 3.8, side by side -- $(date -u +%Y-%m-%dT%H:%MZ), $(hostname), $(nproc) cores"
  echo "mode: $([ $QUICK = 1 ] && echo quick || echo full); rounds: $ROUNDS measured after 1 warm-up, median per server; restarts: $RESTARTS"
  echo "server pinned: ${PIN_S[*]:-none}; clients pinned: ${PIN_C[*]:-none}; fsync on (forceSync=yes) for both"
  echo "ZooKeeper: -Xmx$ZK_HEAP; keel: $KEEL_SRC_BIN"
  echo "load average at start: $LOAD_START; at end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  printf '%-46s %11s %11s %8s %7s %5s\n' figure ZooKeeper keel keel/ZK target ""
  declare -A TPUT=([create]='>=3' [get]='>=5' [set]='>=3' [mixed]='>=4' [delete]='>=3')
  if want load; then
    section "zkload, 4 sessions x 64 in flight, $K znodes of $SIZE B, $N ops per get/set/mixed"
    for ph in "${PHASES[@]}"; do
      row "c4.$ph.ops" "$ph ops/s" %.0f "${TPUT[$ph]}"
      row "c4.$ph.p50" "$ph p50 us" %.0f
      row "c4.$ph.p99" "$ph p99 us" %.0f '<=0.3'
      row "c4.$ph.p999" "$ph p999 us" %.0f
    done
    if [ $HAVE_ZKBENCH = 1 ]; then
      section "zkbench (stock C client), 4 sessions x 64 in flight, same sizes"
      for ph in "${PHASES[@]}"; do
        row "zb.$ph.ops" "$ph ops/s" %.0f "${TPUT[$ph]}"
        row "zb.$ph.p99" "$ph p99 us" %.0f '<=0.3'
      done
    fi
    section "zkload, 1 session x 1 in flight, $K1 znodes, $N1 ops per get/set/mixed"
    for ph in "${PHASES[@]}"; do
      row "c1.$ph.p50" "$ph p50 us" %.0f '<=0.7'
      row "c1.$ph.p99" "$ph p99 us" %.0f
      row "c1.$ph.ops" "$ph ops/s" %.0f
    done
  fi
  if want memory; then
    section "memory and restart, $FILL znodes of $SIZE B"
    row mem.before "RSS before the fill, MiB" %.0f
    row mem.after "RSS after the fill, MiB" %.0f
    row mem.per_znode "RSS growth per znode, bytes" %.0f '<=0.2'
    row mem.zkheap "(ZooKeeper live heap per znode after GC, B)" %.0f
    row fill.ops "fill rate, creates/s" %.0f
    row restart.secs "restart: spawn to first read, s (median)" %.3f '<=0.25'
    row restart.first "(first restart right after the fill, s)" %.3f
  fi
  if want fanout; then
    section "watch fan-out, $FAN sessions watching one znode"
    row fan.last_ms "setData to last notification, ms" %.1f '<=0.5'
    row fan.p50_ms "setData to median notification, ms" %.1f
    row fan.first_ms "setData to first notification, ms" %.1f
    row fan.set_reply_ms "setData to its reply, ms" %.1f
    row fan.connect_s "open $FAN sessions, s" %.2f
  fi
  echo
  echo "targets met: $MET of $((MET + MISSED)). ops/s: higher is better; latency, time, memory: lower."
  echo "Ratios are of the medians. Rows in parentheses are for reference only."
  for k in "${KINDS[@]}"; do [ -n "${NOTE[$k]:-}" ] && echo "note ($k):${NOTE[$k]}"; done
  if [ $QUICK = 1 ]; then echo "quick mode: sizes too small for real figures; this checks the harness."; fi
} | tee "$WORK/results.txt"
# The load section as SVG charts (ops/s and p99 per phase, ZooKeeper and keel): $WORK/charts.
want load && python3 "$HERE/charts.py" "$RES" "$WORK/charts" standalone | sed 's/^/chart: /'
# Exit status: 0 when every run succeeded (targets missed or not), 1 when a run failed.
[ $FAILED = 0 ]

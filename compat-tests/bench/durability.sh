#!/usr/bin/env bash
# Durability benchmark: keel against real ZooKeeper 3.8, side by side, fsync on.
#
#   bash compat-tests/bench/durability.sh [--quick] [--rounds N] [--no-keel] [--no-zk]
#
# 1. Write throughput with fsync on (forceSync=yes, the default in both): 1 writer
#    (zkload -c 1 -d 1) and 64 concurrent writers (-c 64 -d 1), phases create then set.
#    Both servers stay up for the whole section; a warm-up round for each first (JIT),
#    then N rounds alternating ZooKeeper / keel; the median is reported.
# 2. Restart time with K znodes of 100 bytes (1,000,000; --quick: 100,000): fill once
#    per server (zkload -c 4 -d 64 -p create), stop cleanly (SIGTERM, wait for exit),
#    then time from process spawn to the first successful getData of the last znode
#    created (firstread.c, a raw-protocol client that retries connect+read). Three
#    restarts per server, alternating, median. RSS after fill and after restart is
#    recorded.
# Server on core 0, clients on core 1 (taskset; skipped when absent). Ratios are
# keel/ZooKeeper: for ops/s higher is better for keel, for latency/time/memory lower.
# Output: a table on stdout and in $BENCH_DIR/results.txt; raw zkload output, server
# logs and data dirs under $BENCH_DIR (default /tmp/keel-bench).
#
# Environment: KEEL_BIN (default: the release build), ZK_HEAP (default 3g),
# BENCH_DIR, BENCH_PORT (ZooKeeper uses it, keel BENCH_PORT+1; default 2510).
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"   # ZK_CP, KEEL_BIN, server control (write_cfg, spawn, stop), median

QUICK=0; ROUNDS=3; DO_KEEL=1; DO_ZK=1
while [ $# -gt 0 ]; do
  case $1 in
  --quick) QUICK=1; ROUNDS=1 ;;
  --rounds) ROUNDS=$2; shift ;;
  --no-keel) DO_KEEL=0 ;;
  --no-zk) DO_ZK=0 ;;
  -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
  *) echo "durability.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

WORK=${BENCH_DIR:-/tmp/keel-bench}
ZK_HEAP=${ZK_HEAP:-3g}
PORT_ZK=${BENCH_PORT:-2510}; PORT_KEEL=$((PORT_ZK + 1))
if [ $QUICK = 1 ]; then
  N1=500; N64=5000; FILL=100000; RESTARTS=1
else
  N1=3000; N64=20000; FILL=1000000; RESTARTS=3
fi
SIZE=100
LAST=$(printf '/zkload/k%08d' $((FILL - 1)))

bench_pins

mkdir -p "$WORK/raw"
gcc -O2 -o "$WORK/zkload" "${ZKLOAD_SRC:-$ROOT/../shared/tools/zkload.c}" || exit 1
gcc -O2 -o "$WORK/firstread" "$HERE/firstread.c" || exit 1
RES=$WORK/raw/values      # lines: KEY KIND VALUE
: > "$RES"

KINDS=()
[ $DO_ZK = 1 ] && KINDS+=(zk)
if [ $DO_KEEL = 1 ]; then
  if [ -x "$KEEL_BIN" ]; then KINDS+=(keel); else echo "note: no keel binary at $KEEL_BIN; ZooKeeper only" >&2; DO_KEEL=0; fi
fi
declare -A NOTE PORT
PORT[zk]=$PORT_ZK; PORT[keel]=$PORT_KEEL

cleanup() { for k in zk keel; do stop "$WORK/w-$k"; stop "$WORK/r-$k"; done; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# zkload KIND TAG ARGS... : runs, saves raw output, records create/set ops/s, p99 and errors
zkrun() {
  local kind=$1 tag=$2; shift 2
  local out=$WORK/raw/$kind-$tag.txt
  if ! "${PIN_C[@]}" "$WORK/zkload" -s "127.0.0.1:${PORT[$kind]}" "$@" > "$out" 2>&1; then
    log "$kind $tag: zkload failed: $(tail -1 "$out")"; return 1
  fi
  cat "$out" >&2
  return 0
}

# ---- 1. write throughput --------------------------------------------------------------
UP=()
for k in "${KINDS[@]}"; do
  d=$WORK/w-$k; stop "$d"; rm -rf "$d"; write_cfg "$k" "$d"
  if line=$(spawn "$k" "$d" / -1 30); then log "$k up for write tests: $line"; UP+=("$k")
  else log "$k failed to start: $line (see $d/log.0)"; NOTE[$k]=" write: failed to start ($line);"; stop "$d"; fi
done

for r in $(seq 0 "$ROUNDS"); do
  for w in 1 64; do
    n=$([ $w = 1 ] && echo "$N1" || echo "$N64")
    for k in "${UP[@]}"; do
      tag=w$w-r$r
      log "round $r ($([ "$r" = 0 ] && echo warm-up || echo measured)): $k, $w writer(s), $n creates + $n sets"
      if zkrun "$k" "$tag" -c "$w" -d 1 -k "$n" -n "$n" -z "$SIZE" -p create,set -R "/w$w-r$r"; then
        [ "$r" = 0 ] && continue
        f=$WORK/raw/$k-$tag.txt
        for ph in create set; do
          put "w$w.$ph.ops" "$k" "$(field "$f" $ph ops_per_s)"
          put "w$w.$ph.p99" "$k" "$(field "$f" $ph p99_us)"
          e=$(field "$f" $ph errors); [ "${e:-0}" != 0 ] && NOTE[$k]="${NOTE[$k]:-} $tag/$ph: $e errors;"
        done
      else
        NOTE[$k]="${NOTE[$k]:-} $tag failed;"
      fi
    done
  done
done
for k in "${UP[@]}"; do stop "$WORK/w-$k"; done

# ---- 2. fill, then restart time -------------------------------------------------------
FILLED=()
for k in "${KINDS[@]}"; do
  d=$WORK/r-$k; stop "$d"; rm -rf "$d"; write_cfg "$k" "$d"
  if ! line=$(spawn "$k" "$d" / -1 30); then
    log "$k failed to start for the fill: $line"; NOTE[$k]="${NOTE[$k]:-} fill: failed to start ($line);"; stop "$d"; continue
  fi
  log "filling $k with $FILL znodes of $SIZE bytes (zkload -c 4 -d 64)"
  if zkrun "$k" fill -c 4 -d 64 -k "$FILL" -z "$SIZE" -p create; then
    f=$WORK/raw/$k-fill.txt
    put fill.secs "$k" "$(field "$f" create secs)"
    put fill.ops "$k" "$(field "$f" create ops_per_s)"
    e=$(field "$f" create errors); [ "${e:-0}" != 0 ] && NOTE[$k]="${NOTE[$k]:-} fill: $e errors;"
    put rss.fill "$k" "$(rss_mb "$d")"
    FILLED+=("$k")
  else
    NOTE[$k]="${NOTE[$k]:-} fill failed;"
  fi
  t0=$(date +%s.%N); stop "$d"; t1=$(date +%s.%N)
  put stop.secs "$k" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}')"
  put disk.mb "$k" "$(du -sm "$d/data" | cut -f1)"
done

for i in $(seq 1 "$RESTARTS"); do
  for k in "${FILLED[@]}"; do
    d=$WORK/r-$k
    log "restart $i: $k (spawn to first getData $LAST)"
    [ "$k" = zk ] && ZK_SPAWNED=$(date +%H:%M:%S.%3N)
    line=$(spawn "$k" "$d" "$LAST" "$SIZE" 900); rc=$?
    log "$k restart $i: $line"
    v=$(sed -n 's/.*first_read_s=\([^ ]*\).*/\1/p' <<<"$line")
    if [ $rc = 0 ]; then
      put restart.secs "$k" "$v"
      [ "$i" = 1 ] && put restart.first "$k" "$v"
      put restart.port "$k" "$(sed -n 's/.*connect_s=\([^ ]*\).*/\1/p' <<<"$line")"
      put rss.restart "$k" "$(rss_mb "$d")"
    else
      put restart.secs "$k" FAIL
      [ "$i" = 1 ] && put restart.first "$k" FAIL
      NOTE[$k]="${NOTE[$k]:-} restart $i: ${line:-server exited (rc $rc)};"
    fi
    stop "$d"
  done
done

# ---- table ----------------------------------------------------------------------------
{
  echo "keel vs ZooKeeper 3.8 -- durability (fsync on), $(date -u +%Y-%m-%dT%H:%MZ), $(hostname)"
  echo "mode: $([ $QUICK = 1 ] && echo quick || echo full); write rounds: $ROUNDS (+1 warm-up), median; restarts: $RESTARTS, median"
  echo "server pinned: ${PIN_S[*]:-none}; client pinned: ${PIN_C[*]:-none}; ZooKeeper heap -Xmx$ZK_HEAP; keel: $KEEL_BIN"
  echo
  printf '%-44s %12s %12s %10s\n' figure ZooKeeper keel keel/ZK
  row() { # KEY LABEL FORMAT
    local z k r
    z=$(median "$1" zk); k=$(median "$1" keel)
    if [[ $z =~ ^[0-9.]+$ && $k =~ ^[0-9.]+$ ]] && awk -v z="$z" 'BEGIN{exit !(z>0)}'; then
      r=$(awk -v z="$z" -v k="$k" 'BEGIN{printf "%.2f", k/z}')
    else r=-; fi
    [[ $z =~ ^[0-9.]+$ ]] && z=$(printf "$3" "$z")
    [[ $k =~ ^[0-9.]+$ ]] && k=$(printf "$3" "$k")
    printf '%-44s %12s %12s %10s\n' "$2" "$z" "$k" "$r"
  }
  for w in 1 64; do
    row "w$w.create.ops" "create ops/s, $w writer(s)" %.0f
    row "w$w.create.p99" "create p99 us, $w writer(s)" %.0f
    row "w$w.set.ops" "set ops/s, $w writer(s)" %.0f
    row "w$w.set.p99" "set p99 us, $w writer(s)" %.0f
  done
  row fill.secs "fill $FILL znodes: seconds" %.1f
  row fill.ops "fill $FILL znodes: creates/s" %.0f
  row rss.fill "RSS after fill, MB" %.0f
  row disk.mb "dataDir after fill, MB" %.0f
  row stop.secs "clean stop (SIGTERM to exit), s" %.2f
  row restart.port "restart: spawn to port open, median, s" %.3f
  row restart.first "first restart after fill: to first read, s" %.3f
  row restart.secs "restart: spawn to first read, median, s" %.3f
  row rss.restart "RSS after restart, MB" %.0f
  echo
  echo "ops/s: higher is better; p99, seconds, MB: lower is better. Per round and server: $N1 creates then $N1 sets (1 writer), $N64 + $N64 (64 writers)."
  for k in zk keel; do [ -n "${NOTE[$k]:-}" ] && echo "note ($k):${NOTE[$k]}"; done
  if [ -d "$WORK/r-zk" ]; then
    lz=$(ls -t "$WORK"/r-zk/log.* 2>/dev/null | head -1)
    if [ -n "$lz" ]; then
      echo
      echo "ZooKeeper's last restart, from its log (spawned at ${ZK_SPAWNED:-?}; it loads the newest"
      echo "snapshot, replays the txn log after it, then writes a fresh snapshot before serving):"
      grep -E 'Reading configuration|Reading snapshot|Snapshot loaded|txns loaded|Snapshotting|Snapshot taken|binding to port|PrepRequestProcessor.*started' "$lz" \
        | sed -E 's/ (org\.apache\.zookeeper\.)[^ ]*\.([A-Za-z]+) - / \2 - /' | cut -c1-160 | sed 's/^/  /' | head -20
    fi
  fi
} | tee "$WORK/results.txt"

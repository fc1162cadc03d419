#!/usr/bin/env bash
# A 3-member keel ensemble against a 3-member ZooKeeper 3.8 ensemble, side by side on
# loopback: throughput and tail latency through a follower and through the leader, and
# resident memory per member. Run through `compat-tests/bench/run.sh --ensemble`.
#
#   bash compat-tests/bench/ensemble.sh [--quick] [--rounds N] [--only LIST] [--keep]
#
#   --quick     small sizes, 1 round after the warm-up: checks the harness itself
#   --rounds N  measured rounds (default 3), after one warm-up round
#   --only LIST comma-separated sections: load, memory, failover, catchup (default: all)
#   --keep      keep the ensembles' directories (default: removed at exit)
#
# Both ensembles get the same zoo.cfg (compat-tests/ensemble/lib.sh: tickTime 500,
# initLimit 10, syncLimit 5, fsync on as both default, maxClientCnxns 0; plus
# snapCount=100000); ZooKeeper members run with -Xmx$ZK_HEAP (default 1g). Nothing is
# pinned: 3 members and the client share the machine's cores, the same for both.
# 1. load: both ensembles up for the whole section. Per round, ZooKeeper then keel, the
#    other ensemble paused (SIGSTOP of its 3 members, SIGCONT after the run, then a wait
#    until it has elected and formed again): zkload
#    4 sessions x 64 in flight and 1 x 1 through a follower, then both again through the
#    leader; K znodes of 100 bytes, phases create, get, set, mixed (90% reads), delete;
#    ops/s and p50/p99/p999 per phase. Medians of the rounds, ratio keel/ZooKeeper.
# 2. memory: a fresh ensemble each; RSS of every member before and after FILL znodes of
#    100 bytes are created through a follower (zkload 4 x 64); growth per znode of the
#    member that grew most, and of the leader.
# 3. failover: a fresh ensemble each; KILLS times (5): failover.c's 4 sessions x 64 sets
#    in flight on K znodes through the two followers, reconnecting at once to the next
#    server when a connection breaks; 3 s in, kill -9 the leader; the write gap (longest
#    time without an acknowledged set from the last ack before the kill on) and the time
#    from the kill until a 500 ms window runs at 90 % of the rate before it
#    (failover.py); then the killed member is started again and the ensemble re-forms.
#    Medians of the kills.
# 4. catchup: a fresh ensemble each; a follower stopped (SIGTERM) while FILL znodes of 100
#    bytes are created through the other follower; started again: time from its start
#    until srvr shows it a follower (it serves only once synced) -- each server picks
#    DIFF or SNAP itself; then stopped again, its dataDir emptied (myid kept), started:
#    the same time, a SNAP for both; then once more, wiped, while failover.c keeps 4 x 64
#    sets in flight through the leader and the other follower: the time, and the
#    longest time without an acknowledged set from its start on (failover.py).
# Output: stdout and $BENCH_DIR/results.txt, SVG charts of the load section in
# $BENCH_DIR/charts/ensemble-*.svg (charts.py); raw client output in $BENCH_DIR/raw. Exit 0
# when every run succeeded (targets met or not), 1 when one failed.
# Environment: KEEL_BIN (copied into $BENCH_DIR), ZK_HEAP (1g), BENCH_DIR
# (/tmp/keel-bench-ensemble), BENCH_PORT (ZooKeeper's base port 2940; keel's is +30),
# BENCH_KINDS ("zk keel"; "keel" alone to look at one side: its table has no ratios).
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"
# shellcheck source=../ensemble/lib.sh
source "$HERE/../ensemble/lib.sh"

QUICK=0; ROUNDS=3; KEEP=0; ONLY=load,memory,failover,catchup
while [ $# -gt 0 ]; do
  case $1 in
  --quick) QUICK=1; ROUNDS=1 ;;
  --rounds) ROUNDS=${2:?--rounds N}; shift ;;
  --only) ONLY=${2:?--only LIST}; shift ;;
  --keep) KEEP=1 ;;
  -h|--help) sed -n '2,/^set -uo/{/^set -uo/!p}' "$0"; exit 0 ;;
  *) echo "ensemble.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
want() { [[ ,$ONLY, == *,$1,* ]]; }

WORK=${BENCH_DIR:-/tmp/keel-bench-ensemble}
ZK_HEAP=${ZK_HEAP:-1g}
declare -A BASE NOTE
BASE[zk]=${BENCH_PORT:-2940}; BASE[keel]=$((BASE[zk] + 30))
SIZE=100
if [ $QUICK = 1 ]; then K=1000; N=10000; K1=200; N1=1000; FILL=50000; KILLS=2; FO_MS=9000
else K=10000; N=100000; K1=2000; N1=5000; FILL=1000000; KILLS=5; FO_MS=15000; fi
FO_BEFORE_S=3   # failover: seconds of load before the kill
CU_LOAD_MS=$([ $QUICK = 1 ] && echo 6000 || echo 15000)   # catch-up under load: its length
PHASES=(create get set mixed delete)
read -r -a KINDS <<< "${BENCH_KINDS:-zk keel}"
EXTRA_CFG=snapCount=100000

if [ ! -x "$KEEL_BIN" ]; then
  echo "ensemble.sh: no keel binary at $KEEL_BIN; build it first:" >&2
  echo "  CARGO_TARGET_DIR=\$HOME/.cache/keel-target cargo build --release" >&2
  exit 1
fi
for k in "${KINDS[@]}"; do
  for i in 1 2 3; do
    p=$((BASE[$k] + 10 * (i - 1)))
    for q in 1 2 3; do
      port_free $((p + q)) || { echo "ensemble.sh: port $((p + q)) is in use (another run?)" >&2; exit 1; }
    done
  done
done
if [ -d "$WORK" ] && [ -n "$(ls -A "$WORK")" ] && [ ! -d "$WORK/raw" ]; then
  echo "ensemble.sh: $WORK exists and is not a benchmark directory; set BENCH_DIR" >&2; exit 1
fi
rm -rf "$WORK"; mkdir -p "$WORK/raw"
RES=$WORK/raw/values; : > "$RES"
CLIENT_PID=

cleanup() {
  local d
  [ -n "$CLIENT_PID" ] && kill "$CLIENT_PID" 2>/dev/null
  for d in "$WORK"/ens-*; do
    [ -d "$d" ] || continue
    stop_ensemble "$d"
    [ $KEEP = 1 ] || rm -rf "$d"
  done
  [ $KEEP = 1 ] || rm -f "$WORK"/{keel,zkload,failover}
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "building zkload into $WORK"
gcc -O2 -o "$WORK/zkload" "$ZKTOOLS/zkload.c" || exit 1
gcc -O2 -o "$WORK/failover" "$HERE/failover.c" || exit 1
cp "$KEEL_BIN" "$WORK/keel" || exit 1
KEEL_SRC_BIN=$KEEL_BIN; KEEL_BIN=$WORK/keel
export ZK_JVMFLAGS="${ZK_JVMFLAGS:-} -Xmx$ZK_HEAP"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

FAILED=0
PIN_C=()   # nothing pinned: members and client share the cores alike

up() { # KIND DIR: a fresh ensemble of KIND, formed (a leader and two followers)
  if start_ensemble "$1" "$2" "${BASE[$1]}" "$EXTRA_CFG"; then
    disown -a  # members are killed on purpose (failover): no job notices
    log "$1 ensemble up in $2: leader on port $(ensemble_port "$2" leader)"; return 0
  fi
  note "$1" "$(basename "$2"): ensemble did not form"; stop_ensemble "$2"; return 1
}


signal_ensemble() { # SIGNAL DIR
  local p
  for p in "$2"/m*/pid; do [ -f "$p" ] && kill "-$1" "$(cat "$p")" 2>/dev/null; done
  return 0
}


# ---- 1. load --------------------------------------------------------------------------
if want load; then
  UP=()
  for k in "${KINDS[@]}"; do up "$k" "$WORK/ens-$k-load" && UP+=("$k"); done
  PH=$(IFS=,; echo "${PHASES[*]}")
  for r in $(seq 0 "$ROUNDS"); do
    what=$([ "$r" = 0 ] && echo warm-up || echo "round $r/$ROUNDS")
    for k in "${UP[@]}"; do
      for o in "${UP[@]}"; do [ "$o" != "$k" ] && signal_ensemble STOP "$WORK/ens-$o-load"; done
      for role in follower leader; do
        p=$(ensemble_port "$WORK/ens-$k-load" "$role") || { note "$k" "round $r: no $role"; continue; }
        s=127.0.0.1:$p; x=${role:0:1}
        for w in c4 c1; do
          tag=$w$x-r$r
          log "$what: $k, $w through the $role ($s)"
          case $w in
          c4) client "$k" "$tag" "$WORK/zkload" -s "$s" -c 4 -d 64 -k $K -n $N -z $SIZE -r 90 -p "$PH" -R "/$tag" ;;
          c1) client "$k" "$tag" "$WORK/zkload" -s "$s" -c 1 -d 1 -k $K1 -n $N1 -z $SIZE -r 90 -p "$PH" -R "/$tag" ;;
          esac && [ "$r" != 0 ] && record "$k" "$tag" "$w$x"
        done
      done
      for o in "${UP[@]}"; do signal_ensemble CONT "$WORK/ens-$o-load"; done
      # On resuming, a paused ensemble's members time each other out (the pause outlasts
      # syncLimit) and elect again, ZooKeeper's as keel's: wait until it has formed.
      for o in "${UP[@]}"; do
        wait_ensemble "$WORK/ens-$o-load" || note "$o" "round $r: did not form again after the pause"
      done
    done
  done
  for k in "${KINDS[@]}"; do stop_ensemble "$WORK/ens-$k-load"; done
fi

# ---- 2. memory ------------------------------------------------------------------------
member_rss_kb() { # DIR I
  awk '/^VmRSS/ {print $2}' "/proc/$(cat "$1/m$2/pid")/status" 2>/dev/null || echo NA
}
if want memory; then
  for k in "${KINDS[@]}"; do
    d=$WORK/ens-$k-fill
    up "$k" "$d" || continue
    sleep 2
    declare -A before=()
    for i in 1 2 3; do before[$i]=$(member_rss_kb "$d" $i); done
    p=$(ensemble_port "$d" follower)
    log "filling the $k ensemble with $FILL znodes of $SIZE B through a follower (port $p)"
    if client "$k" fill "$WORK/zkload" -s "127.0.0.1:$p" -c 4 -d 64 -k $FILL -z $SIZE -p create; then
      sleep 3
      leader=$(ensemble_port "$d" leader)
      worst=0
      for i in 1 2 3; do
        after=$(member_rss_kb "$d" $i)
        [[ ${before[$i]} =~ ^[0-9]+$ && $after =~ ^[0-9]+$ ]] || { note "$k" "member $i: no RSS"; continue; }
        per=$(awk -v a="$after" -v b="${before[$i]}" -v n=$FILL 'BEGIN {printf "%.0f", (a-b)*1024/n}')
        log "  $k member $i: RSS ${before[$i]} KiB before, $after KiB after: $per B per znode"
        [ "$per" -gt "$worst" ] && worst=$per
        [ "$(cat "$d/m$i/port")" = "$leader" ] && put mem.leader "$k" "$per"
        put mem.after "$k" "$(awk -v a="$after" 'BEGIN {printf "%.1f", a/1024}')"
      done
      put mem.worst "$k" "$worst"
      put fill.ops "$k" "$(field "$WORK/raw/$k-fill.txt" create ops_per_s)"
    fi
    stop_ensemble "$d"
  done
fi

member_at() { # DIR PORT -> the member I whose client port is PORT
  local i
  for i in 1 2 3; do [ "$(cat "$1/m$i/port")" = "$2" ] && { echo "$i"; return 0; }; done
  return 1
}
stop_member() { # DIR I: SIGTERM, then SIGKILL after 60 s
  local pid; pid=$(cat "$1/m$2/pid")
  kill "$pid" 2>/dev/null
  for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null; sleep 0.5
}
start_member() { # DIR I: again on its zoo.cfg and dataDir
  local m=$1/m$2
  setsid "$(cat "$m/cmd")" "$m/zoo.cfg" >>"$m/log" 2>&1 &
  echo $! > "$m/pid"
  disown
}

# ---- 3. failover ----------------------------------------------------------------------
if want failover; then
  for k in "${KINDS[@]}"; do
    d=$WORK/ens-$k-failover
    up "$k" "$d" || continue
    for n in $(seq "$KILLS"); do
      leader=$(ensemble_port "$d" leader) || { note "$k" "failover $n: no leader"; break; }
      li=$(member_at "$d" "$leader")
      to=$(for i in 1 2 3; do [ "$i" != "$li" ] && printf '127.0.0.1:%s,' "$(cat "$d/m$i/port")"; done)
      out=$WORK/raw/$k-failover-$n
      "${PIN_C[@]}" timeout 120 "$WORK/failover" -s "${to%,}" -c 4 -d 64 -k $K -z $SIZE -t $FO_MS \
        -o "$out.timeline" > "$out.txt" 2>&1 &
      CLIENT_PID=$!
      for _ in $(seq 600); do grep -q '^start_ms' "$out.txt" && break; sleep 0.1; done
      sleep $FO_BEFORE_S
      kill_ms=$(date +%s%3N)
      kill -9 "$(cat "$d/m$li/pid")"
      wait "$CLIENT_PID" || note "$k" "failover $n: client failed: $(tail -1 "$out.txt")"
      CLIENT_PID=
      read -r gap rec base < <(python3 "$HERE/failover.py" "$out.timeline" "$kill_ms")
      log "$k failover $n: killed leader member $li; write gap $gap ms, back to 90 % of $base sets/s after $rec ms ($(tail -1 "$out.txt"))"
      put fo.gap "$k" "$gap"; put fo.recover "$k" "$rec"; put fo.base "$k" "$base"
      start_member "$d" "$li"
      wait_ensemble "$d" || { note "$k" "failover $n: did not form again"; break; }
      sleep 2
    done
    stop_ensemble "$d"
  done
fi

# ---- 4. catch-up ----------------------------------------------------------------------
if want catchup; then
  for k in "${KINDS[@]}"; do
    d=$WORK/ens-$k-catchup
    up "$k" "$d" || continue
    leader=$(ensemble_port "$d" leader)
    fs=(); for i in 1 2 3; do [ "$(cat "$d/m$i/port")" != "$leader" ] && fs+=("$i"); done
    late=${fs[0]}; via=$(cat "$d/m${fs[1]}/port")
    stop_member "$d" "$late"
    log "$k catch-up: member $late stopped; filling $FILL znodes through port $via"
    if client "$k" catchup-fill "$WORK/zkload" -s "127.0.0.1:$via" -c 4 -d 64 -k $FILL -z $SIZE -p create; then
      for how in restart wiped; do
        if [ $how = wiped ]; then
          stop_member "$d" "$late"
          find "$d/m$late/data" -mindepth 1 -maxdepth 1 ! -name myid -exec rm -rf {} +
        fi
        t0=$(date +%s%3N); start_member "$d" "$late"; ms=FAIL
        for _ in $(seq 6000); do
          [ "$(member_mode "$(cat "$d/m$late/port")")" = follower ] && { ms=$(( $(date +%s%3N) - t0 )); break; }
          sleep 0.05
        done
        log "$k catch-up ($how): member $late serving as a follower after $ms ms"
        put "cu.$how" "$k" "$ms"
      done
      # Wiped again, under failover.c's 4 x 64 sets through the leader and the other
      # follower: how long it takes then, and the longest time without an acknowledged
      # set from its start on (a leader that serializes its tree in one go stalls).
      stop_member "$d" "$late"
      find "$d/m$late/data" -mindepth 1 -maxdepth 1 ! -name myid -exec rm -rf {} +
      out=$WORK/raw/$k-catchup-load
      "${PIN_C[@]}" timeout 120 "$WORK/failover" -s "127.0.0.1:$leader,127.0.0.1:$via" -c 4 -d 64 \
        -k $K -z $SIZE -t $CU_LOAD_MS -o "$out.timeline" > "$out.txt" 2>&1 &
      CLIENT_PID=$!
      for _ in $(seq 600); do grep -q '^start_ms' "$out.txt" && break; sleep 0.1; done
      sleep 1
      t0=$(date +%s%3N); start_member "$d" "$late"; ms=FAIL
      for _ in $(seq 6000); do
        [ "$(member_mode "$(cat "$d/m$late/port")")" = follower ] && { ms=$(( $(date +%s%3N) - t0 )); break; }
        sleep 0.05
      done
      wait "$CLIENT_PID" || note "$k" "catch-up under load: client failed: $(tail -1 "$out.txt")"
      CLIENT_PID=
      read -r gap _ base < <(python3 "$HERE/failover.py" "$out.timeline" "$t0")
      log "$k catch-up (wiped, under load): member $late serving after $ms ms; longest write stall $gap ms ($base sets/s before)"
      put cu.load "$k" "$ms"; put cu.stall "$k" "$gap"
    fi
    stop_ensemble "$d"
  done
fi

# ---- table ----------------------------------------------------------------------------
MET=0; MISSED=0
{
  echo "keel ensemble vs ZooKeeper 3.8 ensemble (3 members each, loopback) -- $(date -u +%Y-%m-%dT%H:%MZ), $(hostname), $(nproc) cores"
  echo "mode: $([ $QUICK = 1 ] && echo quick || echo full); rounds: $ROUNDS measured after 1 warm-up, median per ensemble"
  echo "tickTime 500, initLimit 10, syncLimit 5, fsync on, snapCount 100000; nothing pinned"
  echo "ZooKeeper: -Xmx$ZK_HEAP per member; keel: $KEEL_SRC_BIN"
  echo "load average at start: $LOAD_START; at end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  printf '%-46s %11s %11s %8s %7s %5s\n' figure ZooKeeper keel keel/ZK target ""
  declare -A TPUT=([create]='>=4' [get]='>=6' [set]='>=4' [mixed]='>=5' [delete]='>=4')
  if want load; then
    for x in f l; do
      via=$([ $x = f ] && echo "a follower" || echo "the leader")
      section "zkload through $via, 4 sessions x 64 in flight, $K znodes of $SIZE B, $N ops per get/set/mixed"
      for ph in "${PHASES[@]}"; do
        # The throughput targets are for clients on a follower (issue 16).
        row "c4$x.$ph.ops" "$ph ops/s" %.0f "$([ $x = f ] && echo "${TPUT[$ph]}")"
        row "c4$x.$ph.p50" "$ph p50 us" %.0f
        row "c4$x.$ph.p99" "$ph p99 us" %.0f '<=0.3'
        row "c4$x.$ph.p999" "$ph p999 us" %.0f
      done
      section "zkload through $via, 1 session x 1 in flight, $K1 znodes, $N1 ops per get/set/mixed"
      for ph in "${PHASES[@]}"; do
        case $ph in get) t= ;; mixed) t= ;; *) t='<=0.7' ;; esac
        row "c1$x.$ph.p50" "$ph p50 us" %.0f "$t"
        row "c1$x.$ph.p99" "$ph p99 us" %.0f
        row "c1$x.$ph.ops" "$ph ops/s" %.0f
      done
    done
  fi
  if want memory; then
    section "memory, $FILL znodes of $SIZE B created through a follower"
    row mem.worst "RSS growth per znode, member that grew most, B" %.0f '<=0.2'
    row mem.leader "RSS growth per znode, leader, B" %.0f '<=0.2'
    row mem.after "RSS after the fill, per member, MiB (median)" %.0f
    row fill.ops "fill rate, creates/s" %.0f
  fi
  if want failover; then
    section "failover: kill -9 the leader under 4 x 64 sets through the followers, median of $KILLS kills"
    row fo.gap "write gap, ms" %.0f '<=0.5'
    row fo.recover "back to 90 % of the rate, ms after the kill" %.0f
    row fo.base "sets/s before the kill" %.0f
  fi
  if want catchup; then
    section "catch-up: a follower back after $FILL znodes were created without it"
    row cu.restart "restarted on its dataDir: serving after, ms" %.0f '<=0.25'
    row cu.wiped "restarted with an empty dataDir (SNAP): ms" %.0f '<=0.25'
    row cu.load "the same under 4 x 64 sets: ms" %.0f
    row cu.stall "longest write stall meanwhile, ms" %.0f
  fi
  echo
  echo "targets met: $MET of $((MET + MISSED)). ops/s: higher is better; latency, memory: lower."
  echo "Ratios are of the medians."
  for k in "${KINDS[@]}"; do [ -n "${NOTE[$k]:-}" ] && echo "note ($k):${NOTE[$k]}"; done
  if [ $QUICK = 1 ]; then echo "quick mode: sizes too small for real figures; this checks the harness."; fi
} | tee "$WORK/results.txt"
# The load section as SVG charts (ops/s and p99 per phase, ZooKeeper and keel): $WORK/charts.
want load && python3 "$HERE/charts.py" "$RES" "$WORK/charts" ensemble | sed 's/^/chart: /'
[ $FAILED = 0 ]

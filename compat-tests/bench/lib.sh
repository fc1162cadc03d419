#!/usr/bin/env bash
# Shared pieces of the benchmarks (durability.sh, run.sh, ensemble.sh): zoo.cfg, spawning a
# server pinned to core 0 and timing it to its first read, a clean stop, RSS, medians,
# the results table's rows.
# Source this file; do not run it. Before calling its functions the caller sets:
#   WORK       the work directory (holds firstread and the server directories)
#   ZK_HEAP    ZooKeeper's -Xmx
#   PORT       an associative array: PORT[zk], PORT[keel]
#   RES        the results file, lines "KEY KIND VALUE" (put / median)
# and calls bench_pins (PIN_S / PIN_C: taskset prefixes for server and client).
# KEEL_BIN: the keel binary (default: the release build in $CARGO_TARGET_DIR, else
# ~/.cache/keel-target, where the project builds).

BENCH_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KEEL_BIN=${KEEL_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/keel-target}/release/keel}
# shellcheck source=../lib.sh
source "$BENCH_HERE/../lib.sh"   # ZK_CP, ROOT
ZKTOOLS=${ZKTOOLS:-$ROOT/../shared/tools}

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
put() { echo "$1 $2 $3" >> "$RES"; }
# field FILE PHASE NAME: a value from a zkload/zkbench line "phase=P ... NAME=V ..."
field() { sed -n "s/.*phase=$2 .*$3=\([0-9.]*\).*/\1/p" "$1"; }

bench_pins() { # server on core 0, clients on core 1
  if command -v taskset >/dev/null; then PIN_S=(taskset -c 0); PIN_C=(taskset -c 1)
  else PIN_S=(); PIN_C=(); echo "note: taskset missing, running unpinned" >&2; fi
}

write_cfg() { # KIND DIR: the same settings for both servers, fsync on
  local port=${PORT[$1]}
  mkdir -p "$2/data"
  cat > "$2/zoo.cfg" <<CFG
tickTime=2000
dataDir=$2/data
clientPort=$port
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=*
snapCount=100000
forceSync=yes
CFG
}

server_cmd() { # KIND DIR -> command words in CMD (pinned to the server core)
  case $1 in
  zk) CMD=("${PIN_S[@]}" /usr/bin/java "-Xmx$ZK_HEAP" -cp "$ZK_CP" ${ZK_JVMFLAGS:-}
           -Dorg.slf4j.simpleLogger.showDateTime=true -Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS
           org.apache.zookeeper.server.quorum.QuorumPeerMain "$2/zoo.cfg") ;;
  keel) CMD=("${PIN_S[@]}" "$KEEL_BIN" "$2/zoo.cfg") ;;
  esac
}

# spawn KIND DIR PATH EXPECTLEN TIMEOUT -> prints firstread's line; pid in DIR/pid.
# The server's output goes to DIR/log.N (N counts the starts of that directory).
spawn() {
  local kind=$1 dir=$2 path=$3 len=$4 to=$5 n
  server_cmd "$kind" "$dir"
  n=$(ls "$dir"/log.* 2>/dev/null | wc -l)
  "${PIN_C[@]}" "$WORK/firstread" -s "127.0.0.1:${PORT[$kind]}" -P "$path" -z "$len" -t "$to" \
    -l "$dir/log.$n" -o "$dir/pid" -- "${CMD[@]}"
}

alive() { # PID: some thread still running. A JVM's leader thread can show as a zombie
  # while its other threads (and the listening socket) live on, so count tasks.
  [ -d "/proc/$1" ] || return 1
  grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null || return 0
  [ "$(ls "/proc/$1/task" 2>/dev/null | wc -l)" -gt 1 ]
}

port_free() { # PORT: nothing accepts connections on it any more
  ! timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
}

stop() { # DIR: SIGTERM, wait for exit (up to 120 s), then SIGKILL
  local dir=$1 pid
  [ -f "$dir/pid" ] || return 0
  pid=$(cat "$dir/pid"); rm -f "$dir/pid"
  # A server paused with SIGSTOP (run.sh pauses the one not being measured) must run
  # again to handle SIGTERM.
  kill -CONT "$pid" 2>/dev/null
  kill -TERM "$pid" 2>/dev/null || return 0
  local gone=0
  for _ in $(seq 1200); do alive "$pid" || { gone=1; break; }; sleep 0.1; done
  if [ $gone = 0 ]; then
    echo "warning: pid $pid did not exit 120 s after SIGTERM; killing" >&2
    kill -9 "$pid" 2>/dev/null || true
  fi
  local port; port=$(sed -n 's/^clientPort=//p' "$dir/zoo.cfg")
  for _ in $(seq 300); do port_free "$port" && return 0; sleep 0.1; done
  echo "warning: port $port still accepting connections after pid $pid exited" >&2
}

rss_kb() { # DIR: VmRSS of the server whose pid is in DIR/pid, KiB
  local pid; pid=$(cat "$1/pid" 2>/dev/null) || { echo NA; return; }
  awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo NA
}
rss_mb() { # DIR: the same in MiB
  local kb; kb=$(rss_kb "$1")
  [[ $kb =~ ^[0-9]+$ ]] && awk -v k="$kb" 'BEGIN {printf "%.0f", k/1024}' || echo NA
}

median() { # KEY KIND -> median of numeric values in $RES, FAIL if any failed, NA if none
  local vals; vals=$(awk -v k="$1" -v s="$2" '$1==k && $2==s {print $3}' "$RES")
  if [ -z "$vals" ]; then echo NA; return; fi
  if grep -qv '^[0-9.]*$' <<<"$vals"; then echo FAIL; return; fi
  sort -g <<<"$vals" | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; print m}'
}

# The results table. row counts targets in MET and MISSED (the caller sets both to 0).
# row KEY LABEL FORMAT [TARGET]: TARGET ">=X" (ratio at least X) or "<=X" (at most X)
row() {
  local z k r=- mark=""
  z=$(median "$1" zk); k=$(median "$1" keel)
  if [[ $z =~ ^[0-9.]+$ && $k =~ ^[0-9.]+$ ]] && awk -v z="$z" 'BEGIN{exit !(z>0)}'; then
    r=$(awk -v z="$z" -v k="$k" 'BEGIN{printf "%.2f", k/z}')
  fi
  if [ -n "${4:-}" ]; then
    if [ "$r" = - ]; then mark="n/a"
    elif awk -v r="$r" -v t="${4:2}" -v op="${4:0:2}" 'BEGIN{exit !(op==">=" ? r>=t : r<=t)}'; then
      mark=ok; MET=$((MET + 1))
    else mark=MISS; MISSED=$((MISSED + 1)); fi
  fi
  [[ $z =~ ^[0-9.]+$ ]] && z=$(printf "$3" "$z")
  [[ $k =~ ^[0-9.]+$ ]] && k=$(printf "$3" "$k")
  printf '%-46s %11s %11s %8s %7s %5s\n' "$2" "$z" "$k" "$r" "${4:-}" "$mark"
}
section() { echo; echo "-- $* --"; }

# Runs and their figures. The caller sets WORK, RES, PHASES, PIN_C, FAILED=0, CLIENT_PID=
# and `declare -A NOTE`.
# note KIND TEXT: a failed run, reported under the table; counts in FAILED.
note() { NOTE[$1]="${NOTE[$1]:-} $2;"; FAILED=$((FAILED + 1)); }

# client KIND TAG CMD...: runs a client (prefixed by PIN_C), output in raw/KIND-TAG.txt.
# In the background with `wait`, so a signal reaches the trap at once (cleanup ends it).
client() {
  local kind=$1 tag=$2 rc; shift 2
  local out=$WORK/raw/$kind-$tag.txt
  "${PIN_C[@]}" timeout --foreground 900 "$@" > "$out" 2>&1 &
  CLIENT_PID=$!
  wait "$CLIENT_PID"; rc=$?
  CLIENT_PID=
  if [ $rc != 0 ]; then
    log "$kind $tag failed: $(tail -1 "$out")"; note "$kind" "$tag failed"; return 1
  fi
  sed "s/^/  $kind $tag: /" "$out" >&2
}

# record KIND TAG PREFIX: per-phase figures of a zkload/zkbench run into $RES
record() {
  local f=$WORK/raw/$1-$2.txt ph e
  for ph in "${PHASES[@]}"; do
    put "$3.$ph.ops" "$1" "$(field "$f" "$ph" ops_per_s)"
    put "$3.$ph.p50" "$1" "$(field "$f" "$ph" p50_us)"
    put "$3.$ph.p99" "$1" "$(field "$f" "$ph" p99_us)"
    put "$3.$ph.p999" "$1" "$(field "$f" "$ph" p999_us)"
    e=$(field "$f" "$ph" errors); [ "${e:-0}" != 0 ] && note "$1" "$2/$ph: $e errors"
  done
}

#!/usr/bin/env bash
# What a console page costs the core with a large tree and many sessions (issue 20 d):
# a standalone keel (forceSync=no, to fill fast) with FILL znodes of 100 B under one
# parent (/wide: the widest possible parent, zkload -c 4 -d 64), SESSIONS sessions each
# owning an ephemeral under /eph, OPEN of them connected with a data watch each. Every
# console page is then requested REPS times, one at a time (console_load.py pages):
# wall time per request and the core time the page's foot states (its gathering, timed
# on the core task). Last, client get latency (zkload 1 session x 1 in flight) without
# and with a loop fetching the costliest pages, to show what the console takes from
# clients. A benchmark, not a timed test: it prints figures and fails only when the
# server or a tool fails.
#   console.sh [--quick]   (quick: 100,000 znodes, 1,000 sessions)
# Ports: CONSOLE_BENCH_PORT (3560) for clients, +1 for the AdminServer.
# Work files: $WORK (/tmp/keel-compat/bench-console).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib.sh"
FILL=1000000; SESSIONS=10000; OPEN=1000; REPS=50
[ "${1:-}" = --quick ] && { FILL=100000; SESSIONS=1000; OPEN=200; REPS=20; }
PORT_C=${CONSOLE_BENCH_PORT:-3560}
PORT_A=$((PORT_C + 1))
WORK=${WORK:-/tmp/keel-compat/bench-console}
VENV=$(bash "$HERE/../kazoo/setup.sh" | tail -n1) || exit 2
[ -x "$KEEL_BIN" ] || { echo "keel binary $KEEL_BIN not found" >&2; exit 2; }
rm -rf "$WORK"; mkdir -p "$WORK/keel/data"
gcc -O2 -o "$WORK/zkload" "$ZKTOOLS/zkload.c" || exit 1
cat > "$WORK/keel/zoo.cfg" <<CFG
tickTime=2000
dataDir=$WORK/keel/data
clientPort=$PORT_C
maxClientCnxns=0
maxSessionTimeout=600000
forceSync=no
admin.enableServer=true
admin.serverPort=$PORT_A
4lw.commands.whitelist=*
CFG
LOAD_PID=; HAMMER_PID=
cleanup() {
  [ -n "$HAMMER_PID" ] && kill "$HAMMER_PID" 2>/dev/null
  [ -n "$LOAD_PID" ] && kill "$LOAD_PID" 2>/dev/null
  stop_server "$WORK/keel"
}
trap cleanup EXIT
ulimit -n 8192 2>/dev/null || true
setsid "$KEEL_BIN" "$WORK/keel/zoo.cfg" >"$WORK/keel/log" 2>&1 &
echo $! > "$WORK/keel/pid"
wait_ruok "$PORT_C" || { echo "keel did not start, see $WORK/keel/log" >&2; exit 1; }
log "filling /wide with $FILL znodes of 100 B"
"$WORK/zkload" -s "127.0.0.1:$PORT_C" -c 4 -d 64 -k $FILL -z 100 -p create -R /wide || exit 1
log "$SESSIONS sessions, $OPEN kept connected"
mkfifo "$WORK/hold"
"$VENV/bin/python" "$HERE/console_load.py" sessions 127.0.0.1 "$PORT_C" $SESSIONS $OPEN < "$WORK/hold" > "$WORK/sessions.out" &
LOAD_PID=$!
exec 9>"$WORK/hold"
for _ in $(seq 600); do grep -q sessions "$WORK/sessions.out" 2>/dev/null && break; sleep 0.5; done
cat "$WORK/sessions.out"
srvr=$(bash -c 'exec 3<>/dev/tcp/127.0.0.1/$1; printf mntr >&3; cat <&3' _ "$PORT_C")
echo "$srvr" | grep -E 'zk_znode_count|zk_global_sessions|zk_num_alive_connections|zk_watch_count'
first=$(curl -s "http://127.0.0.1:$PORT_A/console/sessions" | grep -o '/console/session/0x[0-9a-f]*' | head -1)
mid=$(curl -s "http://127.0.0.1:$PORT_A/console/sessions?after=${first##*/}" | grep -o 'after=0x[0-9a-f]*' | tail -1)
PAGES=(/console/ensemble /console/tree/ /console/tree/wide
       "/console/tree/wide?after=k$(printf %08d $((FILL / 2)))" /console/tree/wide/k00000001
       /console/tree/eph /console/sessions "/console/sessions?$mid" "$first")
log "each page $REPS times"
"$VENV/bin/python" "$HERE/console_load.py" pages "http://127.0.0.1:$PORT_A" $REPS "${PAGES[@]}" || exit 1
log "client gets (zkload 1 x 1, 5000 gets) without, then with, a loop fetching /console/tree/wide and /console/sessions"
"$WORK/zkload" -s "127.0.0.1:$PORT_C" -c 1 -d 1 -k 1000 -n 5000 -z 100 -p get -R /wide | sed 's/^/without: /'
( while :; do curl -s -o /dev/null "http://127.0.0.1:$PORT_A/console/tree/wide"; curl -s -o /dev/null "http://127.0.0.1:$PORT_A/console/sessions"; done ) &
HAMMER_PID=$!
sleep 0.5
"$WORK/zkload" -s "127.0.0.1:$PORT_C" -c 1 -d 1 -k 1000 -n 5000 -z 100 -p get -R /wide | sed 's/^/with:    /'
kill "$HAMMER_PID"; HAMMER_PID=
exec 9>&-

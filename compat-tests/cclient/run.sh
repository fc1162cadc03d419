#!/usr/bin/env bash
# C client test: drive the stock ZooKeeper C client shell (cli_mt, libzookeeper-mt 3.8)
# against a fresh server and assert on what it prints.
#   usage: run.sh [KIND]       KIND = keel (default) | zk
# Prints "N passed, N failed"; exits non-zero on any failure.
# Env: CCLIENT_PORT (2120), CLI_MT (/usr/lib/zookeeper/bin/cli_mt), KEEL_BIN (../lib.sh).
# The transcript is kept in $WORK (/tmp/keel-compat/cclient).
#
# cli_mt is asynchronous and answers rc = -116 to anything still pending when its input
# ends, so commands go through a FIFO that stays open, one at a time: each command is
# sent only after the previous one's completion ("... rc = N" line) has been printed.
# All of cli_mt's output goes to stderr. Formats (cli.c):
#   create:  "Creating [P] node (mode: M)", "[P]: rc = N", "\tname = NAME"
#   get:     "P: rc = N", " value_len = L", VALUE, "", "Stat:", dumpStat | "null"
#   set:     "P: rc = N Stat:", dumpStat | "null"
#   ls:      "P: rc = N", "\tCHILD"...           delete: "P: rc = N"
#   dumpStat "\tctime = DATE\tczxid=HEX", "\tmtime=DATE\tmzxid=HEX",
#            "\tversion=HEX\taversion=HEX", "\tephemeralOwner = HEX"
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib.sh
source "$HERE/../lib.sh"

KIND=${1:-keel}
case $KIND in zk|keel) ;; *) echo "usage: $0 [zk|keel]" >&2; exit 2 ;; esac
PORT=${CCLIENT_PORT:-2120}
CLI_MT=${CLI_MT:-/usr/lib/zookeeper/bin/cli_mt}
WORK=${WORK:-/tmp/keel-compat/cclient}
SRV=$WORK/server-$KIND
OUT=$WORK/cli_mt-$KIND.log
FIFO=$WORK/cli_mt-$KIND.in

PASS=0; FAIL=0
ok()   { PASS=$((PASS + 1)); echo "ok   - $*"; }
fail() { FAIL=$((FAIL + 1)); echo "FAIL - $*"; }

CLI_PID=
cleanup() {
  exec 3>&- 2>/dev/null
  if [ -n "$CLI_PID" ] && kill -0 "$CLI_PID" 2>/dev/null; then kill "$CLI_PID" 2>/dev/null; fi
  stop_server "$SRV"
  rm -f "$FIFO"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$WORK"
if [ "$KIND" = keel ] && [ ! -x "$KEEL_BIN" ]; then
  fail "keel binary $KEEL_BIN not found (build it or set KEEL_BIN)"
  echo "$PASS passed, $FAIL failed"; exit 1
fi
if ! start_server "$KIND" "$SRV" "$PORT"; then
  fail "start $KIND server on port $PORT (see $SRV/log)"
  echo "$PASS passed, $FAIL failed"; exit 1
fi

rm -f "$FIFO"; mkfifo "$FIFO"; : > "$OUT"
"$CLI_MT" -h "127.0.0.1:$PORT" < "$FIFO" > "$OUT" 2>&1 &
CLI_PID=$!
exec 3> "$FIFO"

# wait_for REGEX [TIMEOUT_TENTHS]: wait until the transcript has a line matching REGEX
wait_for() {
  local i
  for i in $(seq "${2:-100}"); do
    grep -Eq -- "$1" "$OUT" && return 0
    kill -0 "$CLI_PID" 2>/dev/null || break
    sleep 0.1
  done
  grep -Eq -- "$1" "$OUT"
}

# cmd LINE: send one command, wait for its completion line ("rc = "), and leave the
# output it produced in $R (for get, also the value and Stat lines that follow rc).
cmd() {
  local before after i
  before=$(wc -l < "$OUT"); local nrc; nrc=$(grep -c 'rc = ' "$OUT")
  printf '%s\n' "$1" >&3
  for i in $(seq 100); do
    [ "$(grep -c 'rc = ' "$OUT")" -gt "$nrc" ] && break
    kill -0 "$CLI_PID" 2>/dev/null || break
    sleep 0.1
  done
  sleep 0.2 # the completion prints its remaining lines in the same callback
  R=$(tail -n +"$((before + 1))" "$OUT")
  printf '>>> %s\n%s\n' "$1" "$R" >> "$WORK/steps-$KIND.log"
}

has()   { printf '%s\n' "$R" | grep -Eq -- "$1"; }            # R has a line matching ERE
check() { if has "$2"; then ok "$1"; else fail "$1: expected /$2/ in:"; printf '%s\n' "$R" | sed 's/^/    | /'; fi; }
field() { printf '%s\n' "$R" | grep -Eo -- "$1=[0-9a-f]+" | head -1 | cut -d= -f2; } # hex

: > "$WORK/steps-$KIND.log"

if wait_for 'state = CONNECTED_STATE' 150; then ok "session established (CONNECTED_STATE)"
else fail "no CONNECTED_STATE within 15 s"; fi
if grep -Eq 'Got a new session id: 0x[0-9a-f]+' "$OUT" && ! grep -q 'Got a new session id: 0x0$' "$OUT"
then ok "non-zero session id"; else fail "no session id"; fi

N=/cc-test
# --- create
cmd "create $N"
check "create $N: rc = 0" "^\[$N\]: rc = 0$"
check "create $N: returns the created path" "^	name = $N$"

# --- get: cli_mt creates with data \"new\"
cmd "get $N"
check "get $N: rc = 0" "^$N: rc = 0$"
check "get $N: value_len = 3" "^ value_len = 3$"
check "get $N: data 'new'" "^new$"
check "get $N: version=0 aversion=0" "^	version=0	aversion=0$"
check "get $N: ephemeralOwner = 0" "^	ephemeralOwner = 0$"
CZ=$(field czxid); MZ=$(field mzxid)
if [ -n "$CZ" ] && [ "$CZ" != 0 ] && [ "$CZ" = "$MZ" ]; then ok "get $N: czxid = mzxid = $CZ (non-zero)"
else fail "get $N: czxid '$CZ' / mzxid '$MZ' (want equal, non-zero)"; fi
if has '^	ctime = .*1970' ; then fail "get $N: ctime is the epoch"; else ok "get $N: ctime is set"; fi

# --- ls
cmd "ls /"
check "ls /: rc = 0" "^/: rc = 0$"
check "ls /: lists ${N#/}" "^	${N#/}$"
check "ls /: lists zookeeper" "^	zookeeper$"
if [ "$(printf '%s\n' "$R" | grep -c '^	[^	]*$')" = 2 ]; then ok "ls /: exactly 2 children"
else fail "ls /: expected exactly 2 children"; printf '%s\n' "$R" | sed 's/^/    | /'; fi

# --- set (data with a blank in it)
cmd "set $N hello keel"
check "set $N: rc = 0" "^$N: rc = 0 Stat:$"
check "set $N: version=1" "^	version=1	aversion=0$"
SMZ=$(field mzxid); SCZ=$(field czxid)
if [ -n "$SMZ" ] && [ "$SCZ" = "$CZ" ] && [ $((16#$SMZ)) -gt $((16#$CZ)) ]; then
  ok "set $N: czxid unchanged ($SCZ), mzxid advanced ($SMZ)"
else fail "set $N: czxid '$SCZ' (want $CZ), mzxid '$SMZ' (want > $CZ)"; fi

cmd "get $N"
check "get after set: rc = 0" "^$N: rc = 0$"
check "get after set: value_len = 10" "^ value_len = 10$"
check "get after set: data 'hello keel'" "^hello keel$"
check "get after set: version=1" "^	version=1	aversion=0$"
if [ "$(field mzxid)" = "$SMZ" ]; then ok "get after set: mzxid = $SMZ"; else fail "get after set: mzxid '$(field mzxid)' (want $SMZ)"; fi

# --- children: plain, sequential, ephemeral; errors
cmd "create $N/a"
check "create $N/a: rc = 0" "^\[$N/a\]: rc = 0$"
cmd "create +s $N/s-"
check "create +s $N/s-: rc = 0" "^\[$N/s-\]: rc = 0$"
check "create +s: sequence number 0000000001" "^	name = $N/s-0000000001$"
cmd "create +e $N/e"
check "create +e $N/e: rc = 0" "^	name = $N/e$"
cmd "ls $N"
check "ls $N: rc = 0" "^$N: rc = 0$"
for c in a s-0000000001 e; do check "ls $N: lists $c" "^	$c$"; done
cmd "ls2 $N"
check "ls2 $N: rc = 0" "^$N: rc = 0$"
check "ls2 $N: stat czxid" "^	czxid=$CZ$"
check "ls2 $N: stat version=1" "^	version=1	aversion=0$"
cmd "create $N"
check "create existing: rc = -110 (NODEEXISTS)" "^\[$N\]: rc = -110$"
cmd "create $N/e/x"
check "create under ephemeral: rc = -108 (NOCHILDRENFOREPHEMERALS)" "^\[$N/e/x\]: rc = -108$"
cmd "create $N/missing/x"
check "create under missing parent: rc = -101 (NONODE)" "^\[$N/missing/x\]: rc = -101$"
cmd "delete $N"
check "delete non-empty: rc = -111 (NOTEMPTY)" "^$N: rc = -111$"
cmd "set /cc-nope x"
check "set missing: rc = -101 (NONODE)" "^/cc-nope: rc = -101 Stat:$"
cmd "sync $N"
check "sync $N: rc = 0" "^\[$N\]: rc = 0$"

# --- delete
for c in a s-0000000001 e; do
  cmd "delete $N/$c"
  check "delete $N/$c: rc = 0" "^$N/$c: rc = 0$"
done
cmd "delete $N"
check "delete $N: rc = 0" "^$N: rc = 0$"
cmd "get $N"
check "get after delete: rc = -101 (NONODE)" "^$N: rc = -101$"
check "get after delete: no stat" "^null$"
cmd "delete $N"
check "delete again: rc = -101 (NONODE)" "^$N: rc = -101$"
cmd "ls /"
if has "^	${N#/}$"; then fail "ls / after delete still lists ${N#/}"; else ok "ls / after delete: ${N#/} gone"; fi

printf 'quit\n' >&3
exec 3>&-
for _ in $(seq 50); do kill -0 "$CLI_PID" 2>/dev/null || break; sleep 0.1; done
if grep -q 'rc = -116' "$OUT"; then fail "some request was still pending at exit (rc = -116)"; else ok "no request left pending"; fi
if grep -q 'Quitting' "$OUT"; then ok "cli_mt quit cleanly"; else fail "cli_mt did not quit cleanly"; fi

echo "$PASS passed, $FAIL failed  (cclient vs $KIND; transcript $OUT, steps $WORK/steps-$KIND.log)"
[ "$FAIL" -eq 0 ]

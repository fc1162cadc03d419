#!/usr/bin/env bash
# Differential test of the admin surface (issue 4, point a): real ZooKeeper 3.8 and keel,
# each with the AdminServer enabled and 4lw.commands.whitelist=*, get the same little
# traffic (one Kazoo session: znodes, an ephemeral, watches, a setData); then every
# four-letter word and every AdminServer command (primary names and aliases, the command
# listing, an unknown command) is asked of both and compared by shape (compare.py): the
# same keys and fields with the same value types; values may differ. Before the traffic,
# bytes_received.py checks zk_bytes_received_count by the byte on both.
#   usage: run.sh            (ports: clients 2300/2301, AdminServer 8300/8301)
# Exits nonzero on any difference. Work files: $WORK (/tmp/keel-compat/admin).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib.sh"
WORK=${WORK:-/tmp/keel-compat/admin}
ZK_PORT=2300 ZK_ADMIN=8300 KEEL_PORT=2301 KEEL_ADMIN=8301

if [ ! -x "$KEEL_BIN" ]; then
  echo "keel binary $KEEL_BIN not found (cargo build --release, or set KEEL_BIN)" >&2; exit 2
fi
VENV=$(bash "$HERE/../kazoo/setup.sh" | tail -n1) || { echo "kazoo/setup.sh failed" >&2; exit 2; }
# ZooKeeper's AdminServer needs Jetty and Jackson on the classpath (Debian ships them);
# without them it silently runs without one.
for j in jetty9-server jetty9-servlet jetty9-util jetty9-http jetty9-io jetty9-security \
         jetty9-util-ajax servlet-api jackson-core jackson-databind jackson-annotations; do
  ZK_CP=$ZK_CP:/usr/share/java/$j.jar
done

mkdir -p "$WORK"
TRAFFIC_PIDS=()
cleanup() {
  for p in "${TRAFFIC_PIDS[@]}"; do kill "$p" 2>/dev/null; done
  stop_server "$WORK/zk"; stop_server "$WORK/keel"
}
trap cleanup EXIT

start_server zk "$WORK/zk" $ZK_PORT "admin.enableServer=true
admin.serverPort=$ZK_ADMIN" || { cat "$WORK/zk/log" >&2; exit 1; }
start_server keel "$WORK/keel" $KEEL_PORT "admin.enableServer=true
admin.serverPort=$KEEL_ADMIN" || { cat "$WORK/keel/log" >&2; exit 1; }

# zk_bytes_received_count by the byte, on both, while no other client is connected.
for kind in zk keel; do
  port=$ZK_PORT; [ $kind = keel ] && port=$KEEL_PORT
  if out=$(python3 "$HERE/bytes_received.py" $port 2>&1); then
    echo "same  $kind $out"
  else
    echo "DIFF  $kind $out"; BYTES_FAILED=1
  fi
done

# One session per server that stays open while the commands are asked.
for kind in zk keel; do
  port=$ZK_PORT; [ $kind = keel ] && port=$KEEL_PORT
  "$VENV/bin/python" "$HERE/traffic.py" 127.0.0.1:$port 300 > "$WORK/traffic-$kind.log" 2>&1 &
  TRAFFIC_PIDS+=($!)
done
for kind in zk keel; do
  for _ in $(seq 100); do grep -q ready "$WORK/traffic-$kind.log" 2>/dev/null && break; sleep 0.2; done
  grep -q ready "$WORK/traffic-$kind.log" || { echo "traffic against $kind failed:" >&2; cat "$WORK/traffic-$kind.log" >&2; exit 1; }
done

python3 "$HERE/compare.py" $ZK_PORT $ZK_ADMIN $KEEL_PORT $KEEL_ADMIN | tee "$WORK/result.txt"
status=${PIPESTATUS[0]}
[ "${BYTES_FAILED:-0}" = 1 ] && status=1

# An AdminServer port that cannot be bound stops start-up: ZooKeeper exits with status 4
# ("Unable to start AdminServer, exiting abnormally"); keel must do the same. Each tries
# the port the other server already holds.
echo "== AdminServer port already taken"
declare -A got
for kind in zk keel; do
  dir=$WORK/busy-$kind; rm -rf "$dir"; mkdir -p "$dir/data"
  port=2302 taken=$KEEL_ADMIN; [ $kind = keel ] && port=2303 taken=$ZK_ADMIN
  printf 'tickTime=2000\ndataDir=%s\nclientPort=%s\nadmin.serverPort=%s\n' "$dir/data" $port $taken > "$dir/zoo.cfg"
  if [ $kind = zk ]; then
    timeout 60 /usr/bin/java -cp "$ZK_CP" org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg" > "$dir/log" 2>&1
  else
    timeout 60 "$KEEL_BIN" "$dir/zoo.cfg" > "$dir/log" 2>&1
  fi
  rc=$?
  msg=$(grep -c "Unable to start AdminServer, exiting abnormally" "$dir/log")
  got[$kind]="exit $rc, message printed: $([ "$msg" -gt 0 ] && echo yes || echo no)"
  echo "      $kind: ${got[$kind]}"
done
if [ "${got[zk]}" = "${got[keel]}" ] && [ "${got[zk]}" = "exit 4, message printed: yes" ]; then
  echo "same  busy AdminServer port"
else
  echo "DIFF  busy AdminServer port"; status=1
fi
exit "$status"

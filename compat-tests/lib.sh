#!/usr/bin/env bash
# Shared helpers for the compat suites: start and stop a fresh real ZooKeeper or a fresh
# keel on loopback, each in its own directory. Source this file; do not run it.
#   start_server KIND DIR PORT [EXTRA_CFG_LINES]   KIND = zk | keel; waits for `ruok`
#   stop_server DIR
#   check NAME COMMAND...   runs COMMAND: prints "ok   NAME" or "FAIL NAME" and counts
#                           it in $passed / $failed (failed names in $failures)
# KEEL_BIN overrides the keel binary (default: the release build in CARGO_TARGET_DIR,
# ~/.cache/keel-target when unset, as both README commands build there).

COMPAT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$COMPAT_DIR/.." && pwd)
KEEL_BIN=${KEEL_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/keel-target}/release/keel}

ZK_CP=/usr/share/java/zookeeper.jar:/usr/share/java/zookeeper-jute.jar:/usr/share/java/slf4j-api.jar:/usr/share/java/slf4j-simple.jar
for j in netty-handler netty-common netty-buffer netty-transport netty-codec netty-resolver \
         netty-transport-native-epoll netty-transport-native-unix-common metrics-core commons-cli \
         snappy-java commons-io jline; do ZK_CP=$ZK_CP:/usr/share/java/$j.jar; done
export ZK_CP

passed=0; failed=0; failures=()
check() { # NAME COMMAND...   (pass when the command succeeds)
  local name=$1; shift
  if "$@"; then passed=$((passed + 1)); echo "ok   $name"
  else failed=$((failed + 1)); failures+=("$name"); echo "FAIL $name"; fi
}

# Each try is bounded: ZooKeeper 3.8 can leave a `ruok` connection open when it arrives
# while the server is still starting (NPE in removeCnxn), which would hang a plain read.
wait_ruok() { # PORT
  local _
  for _ in $(seq 100); do
    if [ "$(timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf ruok >&3 && cat <&3' _ "$1" 2>/dev/null)" = imok ]; then return 0; fi
    sleep 0.2
  done
  return 1
}

start_server() { # KIND DIR PORT [EXTRA_CFG]
  local kind=$1 dir=$2 port=$3 extra=${4:-}
  rm -rf "$dir"; mkdir -p "$dir/data"
  cat > "$dir/zoo.cfg" <<CFG
tickTime=2000
dataDir=$dir/data
clientPort=$port
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=*
$extra
CFG
  case $kind in
  zk)
    setsid /usr/bin/java -Xmx512m -cp "$ZK_CP" ${ZK_JVMFLAGS:-} \
      org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg" >"$dir/log" 2>&1 &
    echo $! > "$dir/pid" ;;
  keel)
    setsid "$KEEL_BIN" "$dir/zoo.cfg" >"$dir/log" 2>&1 &
    echo $! > "$dir/pid" ;;
  *) echo "start_server: unknown kind $kind" >&2; return 2 ;;
  esac
  wait_ruok "$port" || { echo "start_server: $kind on port $port did not answer, see $dir/log" >&2; return 1; }
}

stop_server() { # DIR
  local dir=$1
  if [ -f "$dir/pid" ]; then
    local pid; pid=$(cat "$dir/pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$dir/pid"
  fi
}

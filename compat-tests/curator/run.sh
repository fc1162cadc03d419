#!/usr/bin/env bash
# Curator 5.4 recipe compatibility check.
#   bash compat-tests/curator/run.sh [zk|keel]      (default: keel)
# Compiles CuratorCompat.java (cached by checksum), starts a fresh server of the given kind
# with TTL nodes enabled and a 1 s container check interval, runs the checks, stops the
# server and exits with the checks' status.
# Environment: CURATOR_PORT (first port to try, 2250-2299), CURATOR_WORK (work dir),
# KEEL_BIN (see lib.sh). CURATOR_SERVER=HOST:PORT runs the checks against a server of the
# given kind that already runs there (for example an ensemble member, as
# ../ensemble/clients.sh does, started with TTL nodes and a 1 s container check interval)
# instead of starting one.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib.sh"

KIND=${1:-keel}
case $KIND in zk|keel) ;; *) echo "usage: $0 [zk|keel]" >&2; exit 2 ;; esac

WORK=${CURATOR_WORK:-${TMPDIR:-/tmp}/keel-compat-curator-$(id -u)}
mkdir -p "$WORK"

J=/usr/share/java
CP=$J/curator-client.jar:$J/curator-framework.jar:$J/curator-recipes.jar:$J/zookeeper.jar
CP=$CP:$J/zookeeper-jute.jar:$J/guava.jar:$J/slf4j-api.jar:$J/slf4j-nop.jar
for j in netty-handler netty-common netty-buffer netty-transport netty-codec netty-resolver \
         netty-transport-native-epoll netty-transport-native-unix-common; do
  [ -f "$J/$j.jar" ] && CP=$CP:$J/$j.jar
done
for j in failureaccess; do [ -f "$J/$j.jar" ] && CP=$CP:$J/$j.jar; done

# --- compile (cached on the source's checksum)
SUM=$(sha256sum "$HERE/CuratorCompat.java" | cut -c1-16)
CLASSES=$WORK/classes-$SUM
if [ ! -f "$CLASSES/CuratorCompat.class" ]; then
  rm -rf "$CLASSES.tmp"; mkdir -p "$CLASSES.tmp"
  if ! javac -nowarn -Xlint:none -cp "$CP" -d "$CLASSES.tmp" "$HERE/CuratorCompat.java"; then
    echo "run.sh: javac failed" >&2; rm -rf "$CLASSES.tmp"; exit 2
  fi
  rm -rf "$CLASSES"; mv "$CLASSES.tmp" "$CLASSES"
  for d in "$WORK"/classes-*; do [ "$d" = "$CLASSES" ] || rm -rf "$d"; done  # older builds
fi

if [ -n "${CURATOR_SERVER:-}" ]; then
  echo "run.sh: $KIND at $CURATOR_SERVER (not started here)" >&2
  timeout -k 5 150 java -Xmx256m -cp "$CLASSES:$CP" CuratorCompat "$CURATOR_SERVER"
  exit $?
fi

if [ "$KIND" = keel ] && [ ! -x "$KEEL_BIN" ]; then
  echo "run.sh: keel binary $KEEL_BIN not found (cargo build --release, or set KEEL_BIN)" >&2
  exit 2
fi

# --- pick a free port in 2250-2299
port_busy() { (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null; }  # subshell: fd 3 not kept
PORT=${CURATOR_PORT:-2250}
while port_busy "$PORT"; do
  PORT=$((PORT + 1))
  if [ "$PORT" -gt 2299 ]; then echo "run.sh: no free port in 2250-2299" >&2; exit 2; fi
done

SRV=$WORK/server-$KIND-$$
cleanup() { stop_server "$SRV"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ "$KIND" = zk ]; then
  # The container manager reads this as a JVM system property, not from zoo.cfg.
  export ZK_JVMFLAGS="${ZK_JVMFLAGS:-} -Dznode.container.checkIntervalMs=1000"
fi
EXTRA='extendedTypesEnabled=true
znode.container.checkIntervalMs=1000'
if ! start_server "$KIND" "$SRV" "$PORT" "$EXTRA"; then
  tail -n 30 "$SRV/log" >&2 2>/dev/null
  exit 2
fi
echo "run.sh: $KIND on 127.0.0.1:$PORT ($SRV)" >&2

timeout -k 5 150 java -Xmx256m -cp "$CLASSES:$CP" CuratorCompat "127.0.0.1:$PORT"
STATUS=$?
stop_server "$SRV"
if [ $STATUS -ne 0 ]; then echo "run.sh: CuratorCompat exited with $STATUS; server log: $SRV/log" >&2
else rm -rf "$SRV"; fi
exit $STATUS

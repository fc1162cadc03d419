#!/usr/bin/env bash
# Stock Java client check (issue 14 items 4 and 5): MultiCheck.java, compiled against
# Debian's ZooKeeper 3.8 jar, runs zk.multi(...) with read ops (multiRead) and with
# creates of every mode against a fresh real ZooKeeper and a fresh keel (one JVM per
# server) and the two printed outputs must be the same.
#   bash compat-tests/javaclient/run.sh
# Environment: JAVACLIENT_PORT (first of two ports, default 2350), JAVACLIENT_WORK
# (work dir), KEEL_BIN (see lib.sh).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib.sh"

WORK=${JAVACLIENT_WORK:-${TMPDIR:-/tmp}/keel-compat-javaclient-$(id -u)}
PORT=${JAVACLIENT_PORT:-2350}
mkdir -p "$WORK"
[ -x "$KEEL_BIN" ] || { echo "run.sh: keel binary $KEEL_BIN not found (cargo build --release, or set KEEL_BIN)" >&2; exit 2; }

CP=$ZK_CP
SUM=$(sha256sum "$HERE/MultiCheck.java" | cut -c1-16)
CLASSES=$WORK/classes-$SUM
if [ ! -f "$CLASSES/MultiCheck.class" ]; then
  rm -rf "$CLASSES.tmp"; mkdir -p "$CLASSES.tmp"
  javac -nowarn -Xlint:none -cp "$CP" -d "$CLASSES.tmp" "$HERE/MultiCheck.java" \
    || { echo "run.sh: javac failed" >&2; rm -rf "$CLASSES.tmp"; exit 2; }
  rm -rf "$CLASSES"; mv "$CLASSES.tmp" "$CLASSES"
  for d in "$WORK"/classes-*; do [ "$d" = "$CLASSES" ] || rm -rf "$d"; done
fi

cleanup() { stop_server "$WORK/zk"; stop_server "$WORK/keel"; }
trap cleanup EXIT
CFG=extendedTypesEnabled=true
rc=0
for kind in zk keel; do
  port=$PORT; [ $kind = keel ] && port=$((PORT + 1))
  start_server $kind "$WORK/$kind" $port "$CFG" || { tail -n 30 "$WORK/$kind/log" >&2; exit 2; }
  timeout -k 5 60 java -Xmx128m -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$CLASSES:$CP" \
    MultiCheck 127.0.0.1:$port >"$WORK/$kind.out" 2>"$WORK/$kind.err" || { echo "run.sh: MultiCheck against $kind exited $?" >&2; rc=1; }
  stop_server "$WORK/$kind"
done
if diff -u "$WORK/zk.out" "$WORK/keel.out"; then
  echo "javaclient: same output ($(wc -l <"$WORK/zk.out") lines)"
else
  echo "javaclient: outputs differ (- zookeeper, + keel)"; rc=1
fi
exit $rc

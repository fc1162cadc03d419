#!/usr/bin/env bash
# Sequential names at the int32 boundary (issue 14 item 7), against real ZooKeeper 3.8:
#  1. ZooKeeper (digests off, so the patched txn below carries none) creates /q and
#     /q/x and deletes /q/x; it is stopped and the create of /q/x in its txn log is
#     given parentCVersion 2147483645 (patch_zklog.py), so replaying it leaves /q with
#     2147483645 child creates;
#  2. ZooKeeper restarted on a copy of that dataDir, and keel on
#     `keel import-zookeeper` of it, answer the same sequential creates (client.py):
#     names ...2147483645 to ...2147483647, then NODEEXISTS; in a multi the second
#     create gets ...-2147483648. The two transcripts must be identical.
#   run.sh      (ports ${SEQWRAP_PORT:-2410} and the next one; work dir $SEQWRAP_WORK)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib.sh"
PORT=${SEQWRAP_PORT:-2410}
WORK=${SEQWRAP_WORK:-/tmp/keel-compat/seqwrap}
[ -x "$KEEL_BIN" ] || { echo "keel binary $KEEL_BIN not found (cargo build --release, or set KEEL_BIN)" >&2; exit 2; }
cleanup() { for d in zk zk2 keel; do stop_server "$WORK/$d"; done; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

# Starts KIND on DIR/data as it stands (lib.sh's start_server starts from empty).
launch() { # KIND DIR PORT
  local kind=$1 dir=$2 port=$3
  printf 'tickTime=2000\ndataDir=%s/data\nclientPort=%s\nmaxClientCnxns=0\nadmin.enableServer=false\n4lw.commands.whitelist=*\ndigest.enabled=false\n' \
    "$dir" "$port" > "$dir/zoo.cfg"
  case $kind in
  zk) setsid /usr/bin/java -Xmx256m -cp "$ZK_CP" \
        org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg" >"$dir/log" 2>&1 & ;;
  keel) setsid "$KEEL_BIN" "$dir/zoo.cfg" >"$dir/log" 2>&1 & ;;
  esac
  echo $! > "$dir/pid"
  wait_ruok "$port" || { echo "$kind on port $port did not answer, see $dir/log" >&2; return 1; }
}
# ZooKeeper may drop a session request that comes right after its first `ruok`.
client() { # MODE PORT OUT
  for _ in 1 2 3 4 5; do
    python3 "$HERE/client.py" "$1" "$2" > "$3" && ! grep -q no-connect-response "$3" && return 0
    sleep 0.5
  done
  return 1
}

rm -rf "$WORK"; mkdir -p "$WORK/zk2" "$WORK/keel"
start_server zk "$WORK/zk" "$PORT" "digest.enabled=false" || fail "ZooKeeper did not start"
client setup "$PORT" "$WORK/setup.txt" || fail "setup: $(cat "$WORK/setup.txt")"
stop_server "$WORK/zk"
python3 "$HERE/patch_zklog.py" "$WORK/zk/data/version-2/log.1" /q/x 2147483645 || fail "patch"
cp -a "$WORK/zk/data" "$WORK/zk2/data"
launch zk "$WORK/zk2" "$PORT" || fail "ZooKeeper did not restart on the patched log"
client check "$PORT" "$WORK/zk.txt" || fail "check against ZooKeeper: $(cat "$WORK/zk.txt")"
stop_server "$WORK/zk2"
"$KEEL_BIN" import-zookeeper "$WORK/zk/data" "$WORK/keel/data" 2> "$WORK/import.log" \
  || fail "import: $(cat "$WORK/import.log")"
launch keel "$WORK/keel" "$((PORT + 1))" || fail "keel did not start on the import"
client check "$((PORT + 1))" "$WORK/keel.txt" || fail "check against keel: $(cat "$WORK/keel.txt")"
grep -q "s-2147483647'" "$WORK/zk.txt" || fail "ZooKeeper did not reach the boundary: $(cat "$WORK/zk.txt")"
if diff -u "$WORK/zk.txt" "$WORK/keel.txt"; then
  echo "seqwrap: same transcript ($(wc -l < "$WORK/zk.txt") lines)"
else
  fail "keel differs from ZooKeeper at the int32 boundary (- zookeeper, + keel)"
fi

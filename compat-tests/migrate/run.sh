#!/usr/bin/env bash
# Migration from a real ZooKeeper dataDir (issue 4, point d):
#  1. real ZooKeeper 3.8 (snapCount=20, so snapshots happen mid-way; autopurge off)
#     takes creates (persistent, sequential, ephemeral, container, TTL, nested), sets,
#     deletes, setAcl (digest and world), multis, a quota; a held Kazoo session owns
#     ephemerals;
#     some txns stay in the log after the newest snapshot;
#  2. the full tree is dumped (path, data, ACL, every Stat field), ZooKeeper is stopped
#     while the session is kept alive, `keel import-zookeeper` imports the dataDir,
#     keel starts on the same port and the dump from keel must be identical; the held
#     session must resume on keel;
#  3. ZooKeeper restarted from a copy of the dataDir dumps the same tree, and a
#     sequential create gets the same name there and on keel;
#  4. damage is refused: a flipped byte in a txn record, in the only snapshot (a
#     damaged newest snapshot with older ones present falls back, as ZooKeeper does,
#     and still gives the same tree), and an existing keel store; nothing is written.
#   run.sh      (ports ${MIGRATE_PORT:-2801} and ${MIGRATE_PORT2:-2802})
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib.sh"

PORT=${MIGRATE_PORT:-2801}
PORT2=${MIGRATE_PORT2:-2802}
WORK=${MIGRATE_WORK:-/tmp/keel-compat/migrate}
VENV=$(bash "$HERE/../kazoo/setup.sh" | tail -n1) || { echo "kazoo/setup.sh failed" >&2; exit 2; }
PY="$VENV/bin/python"
ZKPY="$HERE/zk.py"
HOSTS=127.0.0.1:$PORT
if [ ! -x "$KEEL_BIN" ]; then
  echo "keel binary not found at $KEEL_BIN (build it: cargo build --release, or set KEEL_BIN)" >&2
  exit 2
fi

HOLDER=
cleanup() {
  [ -n "$HOLDER" ] && kill "$HOLDER" 2>/dev/null
  for d in zk keel zk2 keel2; do stop_server "$WORK/$d"; done
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok: $*"; }

# Starts KIND on DIR/data as it stands (lib.sh's start_server starts from empty).
launch() { # KIND DIR PORT
  local kind=$1 dir=$2 port=$3
  cat > "$dir/zoo.cfg" <<CFG
tickTime=2000
dataDir=$dir/data
clientPort=$port
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=*
extendedTypesEnabled=true
CFG
  case $kind in
  zk) setsid /usr/bin/java -Xmx512m -cp "$ZK_CP" \
        org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg" >"$dir/log" 2>&1 & ;;
  keel) setsid "$KEEL_BIN" "$dir/zoo.cfg" >"$dir/log" 2>&1 & ;;
  esac
  echo $! > "$dir/pid"
  wait_ruok "$port" || { echo "$kind on port $port did not answer, see $dir/log" >&2; return 1; }
}

flip() { # FILE OFFSET: invert one byte
  python3 -c 'import sys; p, o = sys.argv[1], int(sys.argv[2]); b = bytearray(open(p, "rb").read()); b[o] ^= 0xff; open(p, "wb").write(b)' "$1" "$2"
}

tree_sum() { # DIR: a digest of every file under DIR (names and contents)
  (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha1sum | sha1sum)
}

rm -rf "$WORK"; mkdir -p "$WORK/holder"

# 1. Real ZooKeeper builds the dataDir.
start_server zk "$WORK/zk" "$PORT" "snapCount=20
autopurge.purgeInterval=0
extendedTypesEnabled=true" || fail "ZooKeeper did not start"
"$PY" "$ZKPY" workload "$HOSTS" "$WORK/zk/data" || fail "workload"
"$PY" "$ZKPY" hold "$HOSTS" "$WORK/holder" > "$WORK/holder/log" 2>&1 &
HOLDER=$!
for _ in $(seq 100); do [ -s "$WORK/holder/session" ] && break; sleep 0.2; done
[ -s "$WORK/holder/session" ] || fail "holder did not start: $(cat "$WORK/holder/log")"
SESSION=$(cat "$WORK/holder/session")
"$PY" "$ZKPY" dump "$HOSTS" "$WORK/dump-zk.jsonl" || fail "dump from ZooKeeper"
grep -q "\"ephemeralOwner\": $((16#$SESSION))" "$WORK/dump-zk.jsonl" || fail "no ephemeral of session 0x$SESSION in the dump"
stop_server "$WORK/zk"
V2=$WORK/zk/data/version-2
SNAPS=$(ls "$V2" | grep -c '^snapshot\.')
[ "$SNAPS" -ge 2 ] || fail "expected ZooKeeper to take a snapshot mid-way: $(ls "$V2")"
ok "ZooKeeper dataDir: $(ls "$V2" | tr '\n' ' ')"
cp -a "$WORK/zk/data" "$WORK/zkcopy"

# 2. Import, start keel on the same port, compare.
"$KEEL_BIN" import-zookeeper "$WORK/zk/data" "$WORK/keel/data" 2> "$WORK/import.log"
rc=$?
cat "$WORK/import.log"
[ $rc -eq 0 ] || fail "import exited $rc"
TXNS=$(sed -n 's/.* plus \([0-9]*\) txns in .*/\1/p' "$WORK/import.log")
DIGESTS=$(sed -n 's/.*; \([0-9]*\) ZooKeeper digests matched.*/\1/p' "$WORK/import.log")
[ "${TXNS:-0}" -ge 1 ] || fail "expected txns after the newest snapshot to be replayed"
[ "${DIGESTS:-0}" -ge 1 ] || fail "expected ZooKeeper's digests to be compared"
ok "import replayed $TXNS txns after the snapshot; $DIGESTS ZooKeeper digests matched"
launch keel "$WORK/keel" "$PORT" || fail "keel did not start on the imported store"
"$PY" "$ZKPY" dump "$HOSTS" "$WORK/dump-keel.jsonl" || fail "dump from keel"
diff "$WORK/dump-zk.jsonl" "$WORK/dump-keel.jsonl" > "$WORK/diff-keel.txt" \
  || { head -40 "$WORK/diff-keel.txt"; fail "keel's tree differs from ZooKeeper's"; }
ok "keel's tree is ZooKeeper's: $(wc -l < "$WORK/dump-keel.jsonl") znodes identical (data, ACLs, every Stat field)"
touch "$WORK/holder/check"
for _ in $(seq 150); do [ -s "$WORK/holder/result" ] && break; sleep 0.2; done
[ "$(cat "$WORK/holder/result" 2>/dev/null)" = ok ] \
  || fail "held session did not resume on keel: $(cat "$WORK/holder/result" "$WORK/holder/log" 2>/dev/null)"
wait "$HOLDER" 2>/dev/null; HOLDER=
ok "session 0x$SESSION held across the move resumed on keel"

# 3. ZooKeeper restarted from a copy of the same dataDir agrees, sequential names too.
mkdir -p "$WORK/zk2" && cp -a "$WORK/zkcopy" "$WORK/zk2/data"
launch zk "$WORK/zk2" "$PORT2" || fail "ZooKeeper did not restart on the copy"
"$PY" "$ZKPY" dump "127.0.0.1:$PORT2" "$WORK/dump-zk2.jsonl" || fail "dump from restarted ZooKeeper"
diff "$WORK/dump-zk.jsonl" "$WORK/dump-zk2.jsonl" > "$WORK/diff-zk2.txt" \
  || { head -40 "$WORK/diff-zk2.txt"; fail "restarted ZooKeeper differs from the original"; }
SEQ_KEEL=$("$PY" "$ZKPY" seq "$HOSTS" /app /cont / | tr '\n' ' ')
SEQ_ZK=$("$PY" "$ZKPY" seq "127.0.0.1:$PORT2" /app /cont / | tr '\n' ' ')
[ -n "$SEQ_KEEL" ] && [ "$SEQ_KEEL" = "$SEQ_ZK" ] || fail "sequential names differ: keel [$SEQ_KEEL] ZooKeeper [$SEQ_ZK]"
ok "restarted ZooKeeper dumps the same tree; next sequential names agree: $SEQ_KEEL"
stop_server "$WORK/keel"
stop_server "$WORK/zk2"

# 4. Damage and existing stores are refused; nothing is written.
newest() { # PREFIX: the file in $V2 named PREFIX.<hex zxid> with the highest zxid
  ls "$V2" | grep "^$1\." | while read -r f; do echo "$((16#${f#"$1".})) $f"; done | sort -n | tail -1 | cut -d' ' -f2
}
NEWEST_LOG=$(newest log)
NEWEST_SNAP=$(newest snapshot)
refuse() { # NAME ZKDIR KEELDIR PATTERN: import must fail, say PATTERN, leave KEELDIR as it was
  local before after
  before=$( [ -e "$3" ] && tree_sum "$3" || echo absent)
  "$KEEL_BIN" import-zookeeper "$2" "$3" 2> "$WORK/$1.log"
  local rc=$?
  cat "$WORK/$1.log"
  after=$( [ -e "$3" ] && tree_sum "$3" || echo absent)
  [ $rc -ne 0 ] || fail "$1: import succeeded"
  grep -q -- "$4" "$WORK/$1.log" || fail "$1: message lacks \"$4\""
  [ "$before" = "$after" ] || fail "$1: $3 was changed"
  ok "$1: refused, exit $rc, $3 unchanged"
}
# A flipped byte inside the first record of the newest log (its payload starts at
# 16 header + 12 record header bytes).
cp -a "$WORK/zkcopy" "$WORK/badlog"
flip "$WORK/badlog/version-2/$NEWEST_LOG" $((16 + 12 + 30))
refuse badlog "$WORK/badlog" "$WORK/absent1" "$NEWEST_LOG: at byte offset 16: record checksum mismatch"
mkdir -p "$WORK/occupied" && echo keep > "$WORK/occupied/marker"
refuse badlog-existing-dir "$WORK/badlog" "$WORK/occupied" "checksum mismatch"
# A flipped byte in the only snapshot (older ones purged).
cp -a "$WORK/zkcopy" "$WORK/badsnap"
for f in $(ls "$WORK/badsnap/version-2" | grep '^snapshot\.'); do
  [ "$f" = "$NEWEST_SNAP" ] || rm "$WORK/badsnap/version-2/$f"
done
SIZE=$(stat -c %s "$WORK/badsnap/version-2/$NEWEST_SNAP")
flip "$WORK/badsnap/version-2/$NEWEST_SNAP" $((SIZE / 2))
refuse badsnap "$WORK/badsnap" "$WORK/absent2" "no valid snapshot: .*$NEWEST_SNAP: at byte offset [0-9]*: .*checksum mismatch"
refuse existing-store "$WORK/zkcopy" "$WORK/keel/data" "already holds a keel store"

# A damaged newest snapshot with older ones present: ZooKeeper falls back to an older
# snapshot and replays more of the log; so does the import, and the tree is the same.
cp -a "$WORK/zkcopy" "$WORK/fallback"
flip "$WORK/fallback/version-2/$NEWEST_SNAP" $((SIZE / 2))
"$KEEL_BIN" import-zookeeper "$WORK/fallback" "$WORK/keel2/data" 2> "$WORK/fallback.log" || { cat "$WORK/fallback.log"; fail "fallback import"; }
cat "$WORK/fallback.log"
grep -q "warning: .*$NEWEST_SNAP: at byte offset" "$WORK/fallback.log" || fail "fallback: no warning naming $NEWEST_SNAP"
grep -q "imported .* from .*snapshot\." "$WORK/fallback.log" && ! grep -q "from .*/$NEWEST_SNAP " "$WORK/fallback.log" \
  || fail "fallback: did not start from an older snapshot"
launch keel "$WORK/keel2" "$PORT" || fail "keel did not start on the fallback import"
"$PY" "$ZKPY" dump "$HOSTS" "$WORK/dump-fallback.jsonl" || fail "dump from keel (fallback)"
diff "$WORK/dump-zk.jsonl" "$WORK/dump-fallback.jsonl" > "$WORK/diff-fallback.txt" \
  || { head -40 "$WORK/diff-fallback.txt"; fail "fallback import differs from ZooKeeper's tree"; }
ok "damaged newest snapshot: fell back to an older one, replayed more of the log, same tree"

echo "migrate: all checks passed"

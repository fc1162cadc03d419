#!/usr/bin/env bash
# Differential zkCli.sh test: run script.txt through zkCli.sh against a fresh server of
# kind A and a fresh server of kind B, mask what must differ, diff the transcripts.
#   usage: run.sh [A_KIND] [B_KIND]      (kinds: zk | keel; default: zk keel)
#          run.sh --mask < RAW          (print the masked form of a raw transcript)
# Exit 0 when the masked transcripts are identical, 1 (printing the diff) otherwise.
# Transcripts (raw and masked) and server dirs are kept in $WORK (/tmp/keel-compat/zkcli).
# Env: ZKCLI_PORT_A / ZKCLI_PORT_B (2110 / 2111), KEEL_BIN (see ../lib.sh).
#      ZKCLI_EXTERNAL=1: servers of kinds A and B already run on ZKCLI_PORT_A and
#      ZKCLI_PORT_B (for example a follower of each of two ensembles, as
#      ../ensemble/clients.sh does, started with this file's EXTRA_CFG); neither is started
#      nor stopped here, so each must be fresh.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib.sh
source "$HERE/../lib.sh"

A_KIND=${1:-zk}
B_KIND=${2:-keel}
PORT_A=${ZKCLI_PORT_A:-2110}
PORT_B=${ZKCLI_PORT_B:-2111}
WORK=${WORK:-/tmp/keel-compat/zkcli}
ZKCLI=${ZKCLI:-/usr/share/zookeeper/bin/zkCli.sh}
SCRIPT=$HERE/script.txt

# Same settings for both kinds. ZooKeeper reads the container/TTL reaper interval only as
# a JVM property, keel as a zoo.cfg key: give both (each ignores the other's form).
EXTRA_CFG=$'extendedTypesEnabled=true\nenforceQuota=true\nznode.container.checkIntervalMs=500'
export ZK_JVMFLAGS="-Dznode.container.checkIntervalMs=500"

# Feed the script: drop comments and blank lines, honour `#sleep N` pauses. After each
# pause, when zkCli has printed everything for the commands so far, append a segment
# marker to the transcript (zkCli writes it with O_APPEND too, so the marker lands
# between complete lines, at a point that does not depend on thread timing).
MARK='@@keel-compat-segment@@'
feed() { # TRANSCRIPT
  local line
  while IFS= read -r line || [ -n "$line" ]; do
    case $line in
    '#sleep '*) sleep "${line#\#sleep }"; printf '%s\n' "$MARK" >> "$1" ;;
    '#'*|'') ;;
    *) printf '%s\n' "$line" ;;
    esac
  done < "$SCRIPT"
}

# zkCli prints a watch event from its event thread as two printlns, "\nWATCHER::" and
# "\nWatchedEvent ...", while the main thread may still be printing the output of the
# command that fired it (stat of `set -s`, "Created ..." on stderr): that interleaving is
# decided by thread scheduling. The script ends every watch-firing command with a pause,
# so within one segment between markers, events can only race with the output of that
# last command. canon() puts each segment's event lines (each "" + "WATCHER::" and
# "" + "WatchedEvent ..." pair, in their own order) after the segment's other lines, and
# drops the markers. Events and their order are still compared, with two exceptions that
# the client alone decides: the "SyncConnected type:None" connection-state events are
# dropped (zkCli prints the first one whenever its event thread gets to it, which under
# load can be many commands later), and the *WatchRemoved events of one segment are
# sorted among themselves (the Java client raises them for one removewatches -a in an
# order its own threads decide).
canon() {
  awk -v mark="$MARK" '
    function flush(   i, j, k, x, nrm) {
      for (i = 1; i <= nr; i++) print rest[i]
      nrm = 0
      for (i = 2; i <= ne; i += 2) if (ev[i] ~ /WatchRemoved path:/) { slot[++nrm] = i; rm[nrm] = ev[i] }
      for (i = 2; i <= nrm; i++) { x = rm[i]; j = i - 1
        while (j > 0 && rm[j] > x) { rm[j + 1] = rm[j]; j-- }
        rm[j + 1] = x }
      for (k = 1; k <= nrm; k++) ev[slot[k]] = rm[k]
      for (i = 1; i <= ne; i += 2) {
        if (ev[i + 1] == "WATCHER::" && ev[i + 3] == "WatchedEvent state:SyncConnected type:None path:null") { i += 2; continue }
        if (ev[i + 1] == "WatchedEvent state:SyncConnected type:None path:null") continue
        print ev[i]; print ev[i + 1]
      }
      nr = 0; ne = 0
    }
    { line[++n] = $0 }
    END {
      for (i = 1; i <= n; i++) {
        if (line[i] == mark) { flush(); continue }
        if (line[i] == "" && i < n && (line[i+1] == "WATCHER::" || line[i+1] ~ /^WatchedEvent /)) {
          ev[++ne] = line[i]; ev[++ne] = line[i+1]; i++; continue
        }
        rest[++nr] = line[i]
      }
      flush()
    }'
}

# Mask only what must differ between two servers (or two runs of one server):
#  - SLF4J / jline / log4j noise on stderr;
#  - the port in the "Connecting to" banner;
#  - the ports in the `server.N=host:quorumPort:electionPort:type[;addr:clientPort]` lines
#    of an ensemble's /zookeeper/config (two ensembles side by side have different ones);
#  - ctime/mtime values, except the epoch (system nodes have ctime 0 and must keep it);
#  - ephemeralOwner values that are session ids: each distinct id becomes <session-N> in
#    order of first appearance (so "same session" vs "other session" is still checked);
#    0x0, container (0x8000000000000000) and TTL (0xff..) owners are not session ids;
#  - the order of getEphemerals results (ZooKeeper returns them in hash-set order): the
#    elements of a line "[/a, /b]" are sorted.  ls output is already sorted by zkCli;
#  - the order of whoami's identity lines (ZooKeeper keeps a session's auth ids in a
#    hash set): the "scheme: id" lines after "Auth scheme: User" are sorted.
mask() {
  canon | awk '
    /^SLF4J:/ { next }
    /[Jj][Ll]ine/ && !/^JLine support is disabled$/ { next }
    /^log4j:/ { next }
    /^Connecting to / { sub(/:[0-9]+$/, ":<port>"); print; next }
    /^server\.[0-9]+=/ { gsub(/:[0-9]+/, ":<port>"); print; next }
    /^[cm]time = / {
      if ($0 !~ /= Thu Jan 01 00:00:00 UTC 1970$/) sub(/= .*/, "= <date>")
      print; next
    }
    /^ephemeralOwner = 0x/ {
      v = $3
      if (v != "0x0" && v != "0x8000000000000000" && v !~ /^0xff/) {
        if (!(v in sid)) sid[v] = "<session-" (++nsid) ">"
        $3 = sid[v]
      }
      print; next
    }
    function flushwho(   i, j, x) {
      for (i = 2; i <= nw; i++) { x = who[i]; j = i - 1
        while (j > 0 && who[j] > x) { who[j + 1] = who[j]; j-- }
        who[j + 1] = x }
      for (i = 1; i <= nw; i++) print who[i]
      nw = 0; inwho = 0
    }
    inwho && /^[a-z0-9]+: / { who[++nw] = $0; next }
    inwho { flushwho() }
    /^Auth scheme: User$/ { print; inwho = 1; next }
    /^\[\/.*\]$/ {
      s = substr($0, 2, length($0) - 2)
      n = split(s, el, ", ")
      for (i = 2; i <= n; i++) { x = el[i]; j = i - 1
        while (j > 0 && el[j] > x) { el[j + 1] = el[j]; j-- }
        el[j + 1] = x }
      out = "["; for (i = 1; i <= n; i++) out = out (i > 1 ? ", " : "") el[i]
      print out "]"; next
    }
    { print }
    END { if (inwho) flushwho() }
  '
}

# `run.sh --mask < RAW` prints the masked form of a raw transcript (for inspection).
if [ "${1:-}" = --mask ]; then mask; exit 0; fi

for k in "$A_KIND" "$B_KIND"; do
  case $k in
  zk|keel) ;;
  *) echo "usage: $0 [zk|keel] [zk|keel]    or: $0 --mask < RAW_TRANSCRIPT" >&2; exit 2 ;;
  esac
  if [ "$k" = keel ] && [ ! -x "$KEEL_BIN" ]; then
    echo "zkcli: FAIL (keel binary $KEEL_BIN not found; build it or set KEEL_BIN)" >&2; exit 1
  fi
done

mkdir -p "$WORK"
DIR_A=$WORK/a-$A_KIND
DIR_B=$WORK/b-$B_KIND
EXTERNAL=${ZKCLI_EXTERNAL:-}
cleanup() { [ -n "$EXTERNAL" ] || { stop_server "$DIR_A"; stop_server "$DIR_B"; }; }
trap cleanup EXIT
trap 'exit 130' INT TERM


run_one() { # KIND DIR PORT LABEL
  local kind=$1 dir=$2 port=$3 label=$4
  if [ -z "$EXTERNAL" ] && ! start_server "$kind" "$dir" "$port" "$EXTRA_CFG"; then
    echo "FAIL: could not start $kind ($label)" >&2
    return 1
  fi
  # stdout and stderr go to one O_APPEND file: zkCli prints errors and "Created" on
  # stderr, the rest on stdout, both autoflushed per line, so their order is preserved.
  : > "$WORK/$label.raw"
  feed "$WORK/$label.raw" | TZ=UTC timeout 300 "$ZKCLI" -server "127.0.0.1:$port" >> "$WORK/$label.raw" 2>&1
  local rc=$?
  [ -n "$EXTERNAL" ] || stop_server "$dir"
  if [ $rc -ne 0 ]; then echo "note: zkCli.sh against $kind exited $rc" >&2; fi
  mask < "$WORK/$label.raw" > "$WORK/$label.masked"
}

run_one "$A_KIND" "$DIR_A" "$PORT_A" "a-$A_KIND" || exit 1
run_one "$B_KIND" "$DIR_B" "$PORT_B" "b-$B_KIND" || exit 1

if diff -u --label "$A_KIND (masked)" --label "$B_KIND (masked)" \
     "$WORK/a-$A_KIND.masked" "$WORK/b-$B_KIND.masked" > "$WORK/diff"; then
  echo "zkcli: PASS ($A_KIND vs $B_KIND: $(wc -l < "$WORK/a-$A_KIND.masked") lines identical after masking; transcripts in $WORK)"
  exit 0
else
  cat "$WORK/diff"
  echo "zkcli: FAIL ($A_KIND vs $B_KIND differ; transcripts in $WORK)"
  exit 1
fi

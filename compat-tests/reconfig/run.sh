#!/usr/bin/env bash
# Differential zkCli.sh test of a dynamic-reconfig session (issue 18 check b): a
# 3-member ensemble with reconfigEnabled=true, a dynamicConfigFile, standaloneEnabled=false
# and a super user; one zkCli.sh session against a follower runs script.txt (reconfig
# without auth, add/remove/observer/participant changes with a 4th member started midway,
# the BADVERSION, BADARGUMENTS and NEWCONFIGNOQUORUM cases, -file, RECONFIGINPROGRESS
# from a second session while member 2 is frozen, the leader removed); then `config` on
# every member and each member's mode. A second pass runs script-disabled.txt on an
# ensemble with reconfigEnabled=false (RECONFIGDISABLED). The transcript is masked and
# the kinds compared.
#   usage: run.sh [KIND]   KIND = zk | keel | both (default: $KIND, else both), or A,B
#                          (zk,zk runs ZooKeeper twice: the masked transcript must be
#                          stable). One kind: runs it and prints the masked transcript.
#          run.sh --mask < RAW   (print the masked form of a raw transcript)
# Exit 0 when the masked transcripts are identical (one kind: when its session ran and
# every member ended with the same configuration), 1 otherwise (printing the diff), 2 on
# bad usage or a missing keel binary.
# Env: RECONFIG_BASE (12000; script.txt's addresses are written for it; the second pass
# uses BASE+100..), KEEL_BIN (../lib.sh). Work files: $WORK (/tmp/keel-compat/reconfig):
# <label>.raw, <label>.masked, <label>/m<i>/ (zoo.cfg, zoo.cfg.dynamic*, log),
# <label>/session2.out, <label>-disabled/ (the second pass's members), <label>.feeder.log
# (.side: the leader-removing session's answer), diff.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../ensemble/lib.sh
source "$HERE/../ensemble/lib.sh"

BASE=${RECONFIG_BASE:-12000}
WORK=${WORK:-/tmp/keel-compat/reconfig}
ZKCLI=${ZKCLI:-/usr/share/zookeeper/bin/zkCli.sh}
SCRIPT=$HERE/script.txt
SCRIPT_DISABLED=$HERE/script-disabled.txt
SUPER_DIGEST='super:D/InIHSb7yEEbrWz8b9l71RjZJU='   # password "test"
SUPER_FLAG="-Dzookeeper.DigestAuthenticationProvider.superDigest=$SUPER_DIGEST"
# ZooKeeper members read ZK_JVMFLAGS (zk-exec.sh), keel members SERVER_JVMFLAGS (as
# zkServer.sh passes it); each kind ignores the other's variable.
export ZK_JVMFLAGS=$SUPER_FLAG SERVER_JVMFLAGS=$SUPER_FLAG
export ENSEMBLE_DYNAMIC_CONFIG=1
EXTRA_CFG=$'reconfigEnabled=true\nstandaloneEnabled=false'
# The second pass's ensemble: the same but reconfigEnabled=false, on ports of its own
# (members BASE+101.., as script-disabled.txt's addresses have them).
DISABLED_BASE=$((BASE + 100))
DISABLED_CFG=$'reconfigEnabled=false\nstandaloneEnabled=false'

# Mask what must differ between two runs and between ZooKeeper and keel:
#  - SLF4J / jline noise, and the connection-state events zkCli prints on its event
#    thread (the blank line + "WATCHER::" + "WatchedEvent state:SyncConnected ..."): the
#    session sets no watches, so no other event is expected (a Disconnected one is kept);
#  - the port in the "Connecting to" banner (which follower it is depends on the
#    election);
#  - zxids: every `version=HEX` and every `[cm]Zxid = 0xHEX` other than 0 becomes
#    <zxid-N>, N numbering distinct values in order of first appearance, so "the same
#    version as before" and "a newer one" are still compared, the values are not (0 is
#    kept: ZooKeeper's leader replaces an initial version 0 with its first zxid,
#    ZOOKEEPER-1783, and a server that does not must show);
#  - mtime/ctime values other than the epoch;
#  - the label lines: "Node does not exist: /--NAME" becomes "=== NAME"; the feeder's
#    `#settle` markers (/--settle-N) are dropped.
# Ports in server.N lines are not masked: they are fixed by sid (same BASE for both
# kinds, one after the other).
mask() {
  awk '
    /^SLF4J:/ { next }
    /[Jj][Ll]ine/ { next }
    /^log4j:/ { next }
    /^$/ || /^WATCHER::$/ || /^WatchedEvent state:SyncConnected type:None path:null$/ { next }
    /^Connecting to / { sub(/:[0-9]+$/, ":<port>"); print; next }
    /^Node does not exist: \/--settle-[0-9]+$/ { next }
    /^Node does not exist: \/--/ { sub(/^Node does not exist: \/--/, "=== "); print; next }
    function zx(v) { v = tolower(v); if (!(v in seen)) seen[v] = "<zxid-" (++nz) ">"; return seen[v] }
    /^version=[0-9a-fA-F]+$/ { v = substr($0, 9); print "version=" (v == "0" ? v : zx(v)); next }
    /^[cm]Zxid = 0x/ { v = substr($3, 3); if (v != "0") $3 = zx(v); print; next }
    /^[cm]time = / { if ($0 !~ /= Thu Jan 01 00:00:00 UTC 1970$/) sub(/= .*/, "= <date>"); print; next }
    { print }
  '
}

if [ "${1:-}" = --mask ]; then mask; exit 0; fi

KINDS=${1:-${KIND:-both}}
[ "$KINDS" = both ] && KINDS=zk,keel
IFS=, read -r -a KIND_LIST <<< "$KINDS"
if [ ${#KIND_LIST[@]} -lt 1 ] || [ ${#KIND_LIST[@]} -gt 2 ]; then
  echo "usage: $0 [zk|keel|both|A,B]    or: $0 --mask < RAW_TRANSCRIPT" >&2; exit 2
fi
for k in "${KIND_LIST[@]}"; do
  case $k in
  zk) [ -x "$ZKCLI" ] || { echo "reconfig: FAIL (zkCli.sh not found at $ZKCLI; apt-get install zookeeper)" >&2; exit 2; } ;;
  keel) [ -x "$KEEL_BIN" ] || { echo "reconfig: FAIL (keel binary $KEEL_BIN not found; build it or set KEEL_BIN)" >&2; exit 2; } ;;
  *) echo "usage: $0 [zk|keel|both|A,B]    or: $0 --mask < RAW_TRANSCRIPT" >&2; exit 2 ;;
  esac
done
if [ "$BASE" != 12000 ]; then
  echo "reconfig: script.txt's server addresses are written for RECONFIG_BASE=12000" >&2; exit 2
fi

rm -rf "$WORK"; mkdir -p "$WORK"
CURRENT=""
cleanup() { [ -z "$CURRENT" ] || stop_ensemble "$CURRENT"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

server_line() { # SID ROLE
  local b=$((BASE + 10 * ($1 - 1)))
  echo "server.$1=127.0.0.1:$((b + 2)):$((b + 3)):$2;127.0.0.1:$((b + 1))"
}

# Member 4 as start_ensemble writes members 1..3 (same keys), on a dynamic config of
# members 1..4 with itself a participant: the configuration the session has just
# committed. It is started with the kind of the others.
start_member4() { # DIR KIND
  local m=$1/m4 cmd
  cmd=$(member_cmd "$2") || return 1
  mkdir -p "$m/data"; echo 4 > "$m/data/myid"
  {
    echo "tickTime=${ENSEMBLE_TICK_MS:-500}"; echo "initLimit=10"; echo "syncLimit=5"
    echo "dataDir=$m/data"; echo "clientPort=$((BASE + 31))"
    echo "maxClientCnxns=0"; echo "4lw.commands.whitelist=*"; echo "admin.enableServer=false"
    echo "dynamicConfigFile=$m/zoo.cfg.dynamic"
    echo "$EXTRA_CFG"
  } > "$m/zoo.cfg"
  for i in 1 2 3 4; do server_line "$i" participant; done > "$m/zoo.cfg.dynamic"
  echo "$((BASE + 31))" > "$m/port"; echo "$cmd" > "$m/cmd"
  setsid "$cmd" "$m/zoo.cfg" > "$m/log" 2>&1 < /dev/null &
  echo $! > "$m/pid"
}

wait_mode() { # PORT MODE: up to 30 s
  local _
  for _ in $(seq 60); do [ "$(member_mode "$1")" = "$2" ] && return 0; sleep 0.5; done
  return 1
}

# Feed the script to zkCli: drop comments and blank lines, run the directives. The
# feeder never writes into the transcript (zkCli may still be printing); what it did goes
# to FEEDER_LOG, and a failed wait to FEEDER_LOG.failed.
feed() { # DIR KIND FILE FEEDER_LOG SCRIPT RAW
  local dir=$1 kind=$2 file=$3 log=$4 script=$5 raw=$6 line s2pid= settles=0 _
  while IFS= read -r line || [ -n "$line" ]; do
    case $line in
    '#sleep '*) sleep "${line#\#sleep }" ;;
    '#settle')
      # Until zkCli has answered every line before this one (a marker command whose
      # answer shows in the transcript: the feeder runs ahead of zkCli, as the pipe
      # buffers) and no member holds a reconfig it has seen but not activated (its
      # <zoo.cfg>.dynamic.next: QuorumPeer.setLastSeenQuorumVerifier writes it, and
      # setQuorumVerifier removes it), so the next reconfig is not refused as
      # RECONFIGINPROGRESS on one kind only.
      settles=$((settles + 1))
      printf 'get /--settle-%d\n' "$settles"
      for _ in $(seq 300); do grep -qx "Node does not exist: /--settle-$settles" "$raw" && break; sleep 0.1; done
      for _ in $(seq 100); do compgen -G "$dir/m*/zoo.cfg.dynamic.next" > /dev/null || break; sleep 0.1; done
      echo "settle $settles: $(grep -cx "Node does not exist: /--settle-$settles" "$raw") marker(s) answered, pending: $(compgen -G "$dir/m*/zoo.cfg.dynamic.next" | tr '\n' ' ')" >> "$log" ;;
    '#member4 start') echo "start member 4 ($kind)" >> "$log"; start_member4 "$dir" "$kind" >> "$log" 2>&1 ;;
    '#member4 moved '*)
      set -- ${line#\#member4 moved }
      echo "$1" > "$dir/m4/port"
      if wait_mode "$1" "$2"; then
        echo "member 4 is $2 at client port $1" >> "$log"
      else
        echo "member 4 did not become $2 at client port $1 (mode '$(member_mode "$1")')" | tee -a "$log" >> "$log.failed"
      fi ;;
    '#member4 wait '*)
      # After one failed wait member 4 is taken to be broken: later waits are skipped
      # rather than each costing the whole timeout.
      if [ -s "$log.failed" ]; then
        echo "skipped: wait for ${line#\#member4 wait }" >> "$log"
      elif wait_mode "$(cat "$dir/m4/port")" "${line#\#member4 wait }"; then
        echo "member 4 is ${line#\#member4 wait }" >> "$log"
      else
        echo "member 4 did not become ${line#\#member4 wait } (mode '$(member_mode "$(cat "$dir/m4/port")")')" | tee -a "$log" >> "$log.failed"
      fi ;;
    '#leader '*)
      # The step after it names this member: the transcript is only comparable when both
      # kinds elected the same one.
      if [ "$(member_mode "$(cat "$dir/m${line#\#leader }/port")")" = leader ]; then
        echo "member ${line#\#leader } leads" >> "$log"
      else
        echo "member ${line#\#leader } does not lead" | tee -a "$log" >> "$log.failed"
      fi ;;
    '#remove-leader '*)
      # Another session, on the leader itself, removes it. Its answer is ZooKeeper's race,
      # so it stays out of the transcript: the member a client is on drops its clients
      # when it starts following the designated leader, and the client learns the outcome
      # (`Committed new configuration` with the new members) only if that reply leaves
      # before the drop, else it sees ConnectionLoss (ZooKeeper 3.8 printed each in one of
      # three runs). Either is accepted here; the session's `config` afterwards and the
      # config-on-member blocks show what was committed.
      set -- ${line#\#remove-leader }
      printf 'addauth digest super:test\nreconfig -remove %s\n' "$1" \
        | TZ=UTC timeout 60 "$ZKCLI" -server "127.0.0.1:$(cat "$dir/m$1/port")" > "$log.side" 2>&1
      if grep -q '^Committed new configuration:$' "$log.side" && ! grep -q "^server\.$1=" "$log.side"; then
        echo "another session removed member $1: committed" >> "$log"
      elif grep -q '^KeeperErrorCode = ConnectionLoss' "$log.side"; then
        echo "another session removed member $1: ConnectionLoss (its member dropped it first)" >> "$log"
      else
        echo "another session's reconfig -remove $1 answered neither the new configuration nor ConnectionLoss (see $log.side)" \
          | tee -a "$log" >> "$log.failed"
      fi ;;
    '#freeze '*) kill -STOP "$(cat "$dir/m${line#\#freeze }/pid")"; echo "member ${line#\#freeze } frozen" >> "$log" ;;
    '#thaw '*) kill -CONT "$(cat "$dir/m${line#\#thaw }/pid")"; echo "member ${line#\#thaw } thawed" >> "$log" ;;
    '#session2 start '*)
      # A second zkCli session, on member N, fed through a fifo the feeder holds open
      # (fd 7): its transcript, DIR/session2.out, goes after the first session's.
      mkfifo "$dir/session2.fifo"
      TZ=UTC timeout 120 "$ZKCLI" -server "127.0.0.1:$(cat "$dir/m${line#\#session2 start }/port")" \
        < "$dir/session2.fifo" > "$dir/session2.out" 2>&1 &
      s2pid=$!
      exec 7> "$dir/session2.fifo"
      echo "session 2 started on member ${line#\#session2 start }" >> "$log" ;;
    '#session2 end')
      exec 7>&-
      wait "$s2pid"  # (not a bare wait: member 4, started from here, is a child too)
      echo "session 2 ended" >> "$log" ;;
    '#session2 '*) printf '%s\n' "${line#\#session2 }" >&7 ;;
    '#'*|'') ;;
    *) printf '%s\n' "${line//@FILE@/$file}" ;;
    esac
  done < "$script"
  true  # failures are in $log.failed; the pipeline's status is zkCli's
}

# run_one KIND LABEL: the ensemble, the session, then `config` on each member; the
# transcript is WORK/LABEL.raw (zkCli's stdout and stderr in one O_APPEND file: zkCli
# prints errors on stderr and the rest on stdout, each line flushed, so the order of
# lines holds).
run_one() {
  local kind=$1 label=$2 dir=$WORK/$2 raw=$WORK/$2.raw port i rc=0 rc2
  CURRENT=$dir
  if ! start_ensemble "$kind" "$dir" "$BASE" "$EXTRA_CFG"; then
    tail -n 20 "$dir"/m*/log >&2
    echo "reconfig: FAIL (the $kind ensemble did not form; see $dir)"
    return 1
  fi
  disown -a  # member 4 is started and all are stopped from here: no job notices
  port=$(ensemble_port "$dir" follower) || { echo "reconfig: FAIL (no follower in $dir)"; return 1; }
  {
    for i in 1 2 3; do server_line "$i" participant; done
    server_line 4 observer
  } > "$dir/reconfig-file.cfg"
  : > "$raw"; : > "$WORK/$label.feeder.log"
  feed "$dir" "$kind" "$dir/reconfig-file.cfg" "$WORK/$label.feeder.log" "$SCRIPT" "$raw" \
    | TZ=UTC timeout 300 "$ZKCLI" -server "127.0.0.1:$port" >> "$raw" 2>&1
  rc=$?
  [ $rc -eq 0 ] || echo "note: zkCli.sh against $kind exited $rc" >&2
  printf 'Node does not exist: /--session-2\n' >> "$raw"
  cat "$dir/session2.out" >> "$raw" 2>/dev/null || echo "no session 2" >> "$raw"
  # Each member's own view of the last configuration, after the session's last commit
  # has had a second to reach every member.
  for i in 1 2 3 4; do
    printf 'Node does not exist: /--config-on-member-%s\n' "$i" >> "$raw"
    if [ "$(timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf ruok >&3 && cat <&3' _ "$(cat "$dir/m$i/port")" 2>/dev/null)" != imok ]; then
      echo "member $i does not answer ruok" >> "$raw"; continue
    fi
    printf 'config\n' | TZ=UTC timeout 60 "$ZKCLI" -server "127.0.0.1:$(cat "$dir/m$i/port")" 2>&1 \
      | grep -Ev '^(Connecting to |Welcome to ZooKeeper!$)' >> "$raw"
  done
  # Each member's mode, by sid: after the leader's removal ZooKeeper's new leader is
  # its designated one (the first voter of the new configuration that acked the
  # reconfig, in sid order: member 1), and the removed member 3 follows it.
  printf 'Node does not exist: /--modes\n' >> "$raw"
  for i in 1 2 3 4; do echo "member $i: $(member_mode "$(cat "$dir/m$i/port")")"; done >> "$raw"
  stop_ensemble "$dir"; CURRENT=""
  # Second pass: RECONFIGDISABLED needs an ensemble with reconfigEnabled=false; its own
  # ports (DISABLED_BASE), a follower's session running script-disabled.txt.
  printf 'Node does not exist: /--ensemble-with-reconfigEnabled=false\n' >> "$raw"
  dir=$WORK/$label-disabled; CURRENT=$dir
  if ! start_ensemble "$kind" "$dir" "$DISABLED_BASE" "$DISABLED_CFG"; then
    tail -n 20 "$dir"/m*/log >&2
    echo "reconfig: FAIL (the $kind ensemble with reconfigEnabled=false did not form; see $dir)"
    return 1
  fi
  disown -a
  port=$(ensemble_port "$dir" follower) || { echo "reconfig: FAIL (no follower in $dir)"; return 1; }
  feed "$dir" "$kind" "" "$WORK/$label.feeder.log" "$SCRIPT_DISABLED" "$raw" \
    | TZ=UTC timeout 120 "$ZKCLI" -server "127.0.0.1:$port" >> "$raw" 2>&1
  rc2=$?
  [ $rc2 -eq 0 ] || { echo "note: zkCli.sh against $kind (reconfigEnabled=false) exited $rc2" >&2; rc=$rc2; }
  stop_ensemble "$dir"; CURRENT=""
  mask < "$raw" > "$WORK/$label.masked"
  if [ -s "$WORK/$label.feeder.log.failed" ]; then
    cat "$WORK/$label.feeder.log.failed" >&2; return 1
  fi
  # Every member must end with the same configuration (the blocks after each
  # config-on-member label, up to the next label).
  if [ "$(awk '/^=== config-on-member-/ { n++; next } /^=== / { n = 0 } n && /^(server\.|version=)/ { b[n] = b[n] $0 "|" }
               END { for (i = 2; i <= 4; i++) if (b[i] != b[1] || b[1] == "") { print "differ"; exit } }' "$WORK/$label.masked")" = differ ]; then
    echo "note: the members of the $kind ensemble ended with different configurations (see $WORK/$label.masked)" >&2
    return 1
  fi
  return $rc
}

status=0
labels=()
for n in "${!KIND_LIST[@]}"; do
  label=$((n + 1))-${KIND_LIST[$n]}
  labels+=("$label")
  run_one "${KIND_LIST[$n]}" "$label" || status=1
done

if [ ${#labels[@]} -eq 1 ]; then
  cat "$WORK/${labels[0]}.masked"
  if [ $status -eq 0 ]; then
    echo "reconfig: PASS (${KIND_LIST[0]} session ran, members agree; $(wc -l < "$WORK/${labels[0]}.masked") lines in $WORK/${labels[0]}.masked)"
  else
    echo "reconfig: FAIL (${KIND_LIST[0]}; see $WORK)"
  fi
  exit $status
fi
a=${labels[0]} b=${labels[1]}
if diff -u --label "$a (masked)" --label "$b (masked)" "$WORK/$a.masked" "$WORK/$b.masked" > "$WORK/diff" && [ $status -eq 0 ]; then
  echo "reconfig: PASS ($a vs $b: $(wc -l < "$WORK/$a.masked") lines identical after masking; transcripts in $WORK)"
  exit 0
fi
cat "$WORK/diff"
echo "reconfig: FAIL ($a vs $b differ or a run failed; transcripts in $WORK)"
exit 1

#!/usr/bin/env bash
# Differential test of an ensemble member's operator surfaces (issue 15 item 8): a
# 3-member real ZooKeeper 3.8 ensemble, then a 3-member keel ensemble on the same ports,
# each asked the same four-letter words (srvr, stat, mntr, conf) and AdminServer commands
# (leader, voting_view, zabstate, server_stats, configuration, monitor, observers) on its
# leader and on a follower; admin_compare.py compares them after masking what differs by
# nature (times, packet and byte counts, file descriptors, client ports of the asker).
#   usage: admin.sh [BASE]   (BASE 3400: members on BASE+1..BASE+23, AdminServers on
#                             BASE+41..BASE+43)
# Exits nonzero on any difference. Work files: $WORK (/tmp/keel-compat/ensemble-admin).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib.sh"
BASE=${1:-3400}
WORK=${WORK:-/tmp/keel-compat/ensemble-admin}
export ENSEMBLE_ADMIN_BASE=$((BASE + 40))
# ZooKeeper's AdminServer needs Jetty and Jackson on the classpath (Debian ships them).
ZK_CP_EXTRA=
for j in jetty9-server jetty9-servlet jetty9-util jetty9-http jetty9-io jetty9-security \
         jetty9-util-ajax servlet-api jackson-core jackson-databind jackson-annotations; do
  ZK_CP_EXTRA=$ZK_CP_EXTRA:/usr/share/java/$j.jar
done
export ZK_CP_EXTRA

if [ ! -x "$KEEL_BIN" ]; then
  echo "keel binary $KEEL_BIN not found (cargo build --release, or set KEEL_BIN)" >&2; exit 2
fi
trap 'stop_ensemble "$WORK/zk"; stop_ensemble "$WORK/keel"' EXIT

word() { # PORT WORD
  timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf %s "$2" >&3 && cat <&3' _ "$1" "$2"
}

capture() { # KIND [LEADER_SID]
  local kind=$1 want=${2:-} dir=$WORK/$1 out=$WORK/out-$1 mode i p w c try
  # Which member a fresh ensemble elects is start-up timing (ZooKeeper elected sid 2 in
  # one CI run, keel sid 3): the figures compared name the sid, so the second ensemble
  # is restarted (up to 5 times) until it has the first one's leader.
  for try in 1 2 3 4 5; do
    start_ensemble "$kind" "$dir" "$BASE" || { tail -n 30 "$dir"/m*/log >&2; return 1; }
    [ -z "$want" ] && break
    [ "$(member_mode "$(cat "$dir/m$want/port")")" = leader ] && break
    echo "$kind elected another leader than sid $want (try $try); restarting it" >&2
    stop_ensemble "$dir"
  done
  # Let the followers' sync figures settle (the leader's first pings).
  sleep 2
  rm -rf "$out"; mkdir -p "$out"
  for mode in leader follower; do
    for i in 1 2 3; do
      p=$(cat "$dir/m$i/port"); [ "$(member_mode "$p")" = "$mode" ] && break
    done
    echo "$i" > "$out/$mode.sid"
    for w in srvr stat mntr conf; do word "$p" $w > "$out/$mode.$w"; done
    for c in leader voting_view zabstate server_stats configuration monitor observers; do
      curl -s "http://127.0.0.1:$((ENSEMBLE_ADMIN_BASE + i))/commands/$c" > "$out/$mode.$c.json"
    done
  done
  stop_ensemble "$dir"
}

capture keel || exit 1
capture zk "$(cat "$WORK/out-keel/leader.sid")" || exit 1
python3 "$HERE/admin_compare.py" "$WORK/out-zk" "$WORK/out-keel" "$WORK" | tee "$WORK/result.txt"
exit "${PIPESTATUS[0]}"

#!/usr/bin/env bash
# The sync-mode differential (issue 17 d): the same scripted sequences (syncdiff.py:
# TRUNC of an old leader's uncommitted txns, DIFF after a few writes, a follower
# stopped past ZooKeeper's committed log, a wiped follower, an old leader that rejoins
# after the new one wrote: SNAP) on a ZooKeeper-led ensemble (zk,zk,zk) and on
# a keel-led one (zk,keel,zk), the synced member a ZooKeeper follower in both. Passes
# when every case's dumps agree on all members in both runs and both leaders chose the
# same DIFF / TRUNC / SNAP in every case (read from their logs), and the ZooKeeper
# members' logs hold no unexpected ERROR or WARN (mixed/lib.sh zk_log_problems).
#   syncdiff.sh [LEADER_KIND...]   default: zk keel
# Ports SYNCDIFF_BASE+1..+23 (default 3040); logs in SYNCDIFF_WORK/<kind>-led/m*/log.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib.sh"

BASE=${SYNCDIFF_BASE:-3040}
WORK=${SYNCDIFF_WORK:-/tmp/keel-compat/syncdiff}
[ $# -gt 0 ] || set -- zk keel
export RUST_LOG=${RUST_LOG:-info}
need_kazoo_and_keel
# What a ZooKeeper-only run of these sequences logs too: the follower of the killed
# leader giving up its connection, and the TRUNC case's truncation itself.
ZK_BENIGN="$ZK_BENIGN|Learner - Unexpected exception, retries exceeded|Learner - Failed connect to|Truncating log to get in sync with the leader"

status=0; results=()
for lead in "$@"; do
  dir=$WORK/$lead-led
  trap 'stop_mixed "$dir"' EXIT
  echo "== zk,$lead,zk: sid 2 ($lead) leads after the TRUNC case (logs in $dir/m*/log)"
  if ! start_mixed "zk,$lead,zk" "$dir" "$BASE"; then
    tail -n 20 "$dir"/m*/log >&2; stop_mixed "$dir"; status=1; continue
  fi
  "$VENV/bin/python" "$HERE/syncdiff.py" "$dir" "$dir/result.json" || status=1
  stop_mixed "$dir"
  check_zk_logs "$dir" "syncdiff: $lead-led" || status=1
  [ -f "$dir/result.json" ] && results+=("$dir/result.json")
done
if [ ${#results[@]} -eq 2 ]; then
  "$VENV/bin/python" "$HERE/syncdiff.py" --compare "${results[@]}" || status=1
fi
exit $status

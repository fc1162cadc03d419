#!/usr/bin/env bash
# Mixed keel / ZooKeeper 3.8 ensembles (issue 17 a, a first form).
#   run.sh [KINDS...]    default: zk,zk,keel keel,keel,zk (one ensemble each, in turn)
# The kind with one member has the highest sid: of members with the same zxid the
# highest sid wins an election, so killing the leader moves the lead to each kind
# (with that member at sid 1, the other kind would always win).
# For each KINDS (one kind per member, member i the i-th), start a 3-member loopback
# ensemble and run mixed.py on it: 4 Kazoo clients write while the leader is moved to
# each kind in turn (kill -9 the leader until the other kind leads) and a follower of
# the kind that does not lead rejoins by SNAP, another on its dataDir; then every
# acknowledged write must be on every member and the members' full dumps identical.
# Afterwards the ZooKeeper members' logs must hold no ERROR or WARN line beyond those an
# all-ZooKeeper ensemble writes too (mixed/lib.sh zk_log_problems), no digest mismatch.
# Ports MIXED_BASE+1..+23 (default 2920); logs in MIXED_WORK/<kinds>/m*/log.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib.sh"

BASE=${MIXED_BASE:-2920}
WORK=${MIXED_WORK:-/tmp/keel-compat/mixed}
[ $# -gt 0 ] || set -- zk,zk,keel keel,keel,zk
export RUST_LOG=${RUST_LOG:-info,keel::member=debug}
need_kazoo_and_keel

status=0
for kinds in "$@"; do
  dir=$WORK/${kinds//,/-}
  trap 'stop_mixed "$dir"' EXIT
  echo "== $kinds: leader on each kind in turn under load (logs in $dir/m*/log)"
  if ! start_mixed "$kinds" "$dir" "$BASE"; then
    tail -n 20 "$dir"/m*/log >&2; stop_mixed "$dir"; status=1; continue
  fi
  "$VENV/bin/python" "$HERE/mixed.py" "$dir" || status=1
  stop_mixed "$dir"
  check_zk_logs "$dir" "mixed: $kinds" || status=1
done
exit $status

#!/usr/bin/env bash
# Local sessions end to end (issue 18 part 3): a 3-member real ZooKeeper 3.8 ensemble,
# then a keel one on the same ports, both with localSessionsEnabled=true, twice: with
# localSessionsUpgradingEnabled=true, then with its default (false).
# local_sessions_check.py counts local and global sessions (mntr) as a follower's client
# creates a persistent node, then an ephemeral, as a leader's client creates an
# ephemeral, and tries a local session on another member. Each pair of transcripts must
# be identical.
#   usage: local_sessions.sh [BASE]   (14000: members on BASE+1..BASE+23)
# One summary line per run; exits nonzero on any difference. Work files: $WORK
# (/tmp/keel-compat/ensemble-local-sessions).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib.sh"
BASE=${1:-14000}
WORK=${WORK:-/tmp/keel-compat/ensemble-local-sessions}

need_kazoo_and_keel
rm -rf "$WORK"; mkdir -p "$WORK"
trap 'for d in "$WORK"/*/zk "$WORK"/*/keel; do stop_ensemble "$d"; done' EXIT
trap 'exit 130' INT TERM

rc=0
mkdir -p "$WORK/upgrading" "$WORK/no-upgrading"
ensemble_differential local-sessions-upgrading "$HERE/local_sessions_check.py" "$BASE" \
  "$WORK/upgrading" "localSessionsEnabled=true
localSessionsUpgradingEnabled=true" || rc=1
ensemble_differential local-sessions-no-upgrading "$HERE/local_sessions_check.py" "$BASE" \
  "$WORK/no-upgrading" "localSessionsEnabled=true" || rc=1
exit $rc

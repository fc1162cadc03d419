#!/usr/bin/env bash
# Local sessions end to end (issue 18 part 3): a 3-member real ZooKeeper 3.8 ensemble,
# then a keel one on the same ports, both with localSessionsEnabled=true and
# localSessionsUpgradingEnabled=true; local_sessions_check.py counts local and global
# sessions (mntr) as a follower's client creates a persistent node, then an ephemeral,
# and tries a local session on another member. The two transcripts must be identical.
#   usage: local_sessions.sh [BASE]   (44000: members on BASE+1..BASE+23)
# One summary line; exits nonzero on any difference. Work files: $WORK
# (/tmp/keel-compat/ensemble-local-sessions).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib.sh"
BASE=${1:-44000}
WORK=${WORK:-/tmp/keel-compat/ensemble-local-sessions}
CFG="localSessionsEnabled=true
localSessionsUpgradingEnabled=true"

need_kazoo_and_keel
rm -rf "$WORK"; mkdir -p "$WORK"
trap 'stop_ensemble "$WORK/zk"; stop_ensemble "$WORK/keel"' EXIT
trap 'exit 130' INT TERM

ensemble_differential local-sessions "$HERE/local_sessions_check.py" "$BASE" "$WORK" "$CFG"

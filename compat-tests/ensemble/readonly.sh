#!/usr/bin/env bash
# Read-only mode end to end (issue 18 part 2): a 3-member real ZooKeeper 3.8 ensemble,
# then a keel one on the same ports, both with -Dreadonlymode.enabled=true and
# localSessionsEnabled=true (as Kazoo's TestReadOnlyMode runs it). readonly_check.py
# stops the leader and a follower, checks what the survivor answers (isro, srvr, mntr,
# who is refused and how, reads, NOTREADONLY for writes and sync, a read-only session's
# reconnects, Kazoo's read-only client), restarts the two and sees the client go
# read-write. The two transcripts must be identical.
#   usage: readonly.sh [BASE]   (3700: members on BASE+1..BASE+23)
# One summary line; exits nonzero on any difference. Work files: $WORK
# (/tmp/keel-compat/ensemble-readonly).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib.sh"
BASE=${1:-3700}
WORK=${WORK:-/tmp/keel-compat/ensemble-readonly}
# ZooKeeper reads the property from the JVM's flags (zk-exec.sh), keel from
# SERVER_JVMFLAGS, as zkServer.sh passes it.
export ZK_JVMFLAGS="-Dreadonlymode.enabled=true"
export SERVER_JVMFLAGS="-Dreadonlymode.enabled=true"
CFG="localSessionsEnabled=true
localSessionsUpgradingEnabled=true"

need_kazoo_and_keel
rm -rf "$WORK"; mkdir -p "$WORK"
trap 'stop_ensemble "$WORK/zk"; stop_ensemble "$WORK/keel"' EXIT
trap 'exit 130' INT TERM

ensemble_differential readonly "$HERE/readonly_check.py" "$BASE" "$WORK" "$CFG"

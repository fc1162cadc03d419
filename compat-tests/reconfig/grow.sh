#!/usr/bin/env bash
# Grow a 3-member ensemble to 5 and shrink it to 3 again under write load, one member at
# a time, with no acknowledged write lost and no session expired (issue 18 check d).
# Members 1..3 start with reconfigEnabled=true, standaloneEnabled=false, a
# dynamicConfigFile whose server.N lines carry `;127.0.0.1:PORT`, and the super digest
# of super:test; grow.py runs the load, adds members 4 and 5, removes 5 and 4, and checks.
#   usage: grow.sh [KIND]   KIND = keel (default: $KIND, else keel) | zk (real ZooKeeper
#                           3.8 members: the harness's own check)
# Exit 0 when every step completed and every check held, 1 otherwise, 2 on bad usage or
# a missing prerequisite.
# Env: GROW_BASE (13000; member i's ports BASE+10*(i-1)+1..+3, members 1..5), GROW_LOAD_S
# (4: seconds of load after each step), KEEL_BIN (../lib.sh). Work files: $WORK
# (/tmp/keel-compat/reconfig-grow): m<i>/ (zoo.cfg, zoo.cfg.dynamic*, log), grow.out.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../ensemble/lib.sh
source "$HERE/../ensemble/lib.sh"

KIND=${1:-${KIND:-keel}}
BASE=${GROW_BASE:-13000}
WORK=${WORK:-/tmp/keel-compat/reconfig-grow}
case $KIND in
keel) need_kazoo_and_keel ;;
zk) VENV=$(bash "$HERE/../kazoo/setup.sh" | tail -n1) || { echo "kazoo/setup.sh failed" >&2; exit 2; } ;;
*) echo "usage: $0 [keel|zk]" >&2; exit 2 ;;
esac

SUPER_FLAG='-Dzookeeper.DigestAuthenticationProvider.superDigest=super:D/InIHSb7yEEbrWz8b9l71RjZJU='
# ZooKeeper members read ZK_JVMFLAGS (zk-exec.sh), keel members SERVER_JVMFLAGS (as
# zkServer.sh passes it); members 4 and 5, started by grow.py, inherit them.
export ZK_JVMFLAGS=$SUPER_FLAG SERVER_JVMFLAGS=$SUPER_FLAG
export ENSEMBLE_DYNAMIC_CONFIG=1

trap 'stop_ensemble "$WORK"' EXIT
trap 'exit 130' INT TERM
if ! start_ensemble "$KIND" "$WORK" "$BASE" $'reconfigEnabled=true\nstandaloneEnabled=false'; then
  tail -n 20 "$WORK"/m*/log >&2
  echo "reconfig-grow-shrink: FAIL (the $KIND ensemble did not form; see $WORK)"
  exit 1
fi
disown -a  # grow.py starts and stops members 4 and 5: no job notices from this shell
"$VENV/bin/python" "$HERE/grow.py" "$WORK" "$BASE" "${GROW_LOAD_S:-4}" | tee "$WORK/grow.out"
rc=${PIPESTATUS[0]}
if [ "$rc" -eq 0 ]; then
  echo "reconfig-grow-shrink: PASS ($KIND: 3 -> 5 -> 3 members under load; see $WORK)"
else
  echo "reconfig-grow-shrink: FAIL ($KIND; see $WORK/grow.out and $WORK/m*/log)"
fi
exit "$rc"

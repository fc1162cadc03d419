#!/usr/bin/env bash
# Client differential on ensembles (issue 15 acceptance d): the zkCli script, the Curator
# suite and the recipe tests, each run with the client on a follower of a 3-member real
# ZooKeeper 3.8 ensemble and on a follower of a 3-member keel ensemble, the two ensembles
# side by side. Same results are required:
#   zkcli    the masked transcripts are identical (../zkcli/run.sh with ZKCLI_EXTERNAL=1);
#   curator  the same checks pass and fail (CuratorCompat's `PASS name` / `FAIL name` lines);
#   recipes  the same tests pass and fail (pytest's junit outcomes per test).
#   usage: clients.sh [ZK_BASE [KEEL_BASE]]   (4400 4500: members on BASE+1..BASE+23)
# One summary line per part; exits nonzero on any difference. Work files: $WORK
# (/tmp/keel-compat/ensemble-clients).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib.sh"
ZK_BASE=${1:-4400}
KEEL_BASE=${2:-4500}
WORK=${WORK:-/tmp/keel-compat/ensemble-clients}

if [ ! -x "$KEEL_BIN" ]; then
  echo "keel binary $KEEL_BIN not found (cargo build --release, or set KEEL_BIN)" >&2; exit 2
fi
rm -rf "$WORK"; mkdir -p "$WORK"
stop_both() { stop_ensemble "$WORK/zk"; stop_ensemble "$WORK/keel"; }
trap stop_both EXIT
trap 'exit 130' INT TERM

# start_both EXTRA_CFG JVM_FLAGS: a fresh ZooKeeper ensemble and a fresh keel ensemble
# with the same zoo.cfg additions (ZooKeeper reads the container reaper interval only as a
# JVM property, keel as a zoo.cfg key); sets ZK_F and KEEL_F to a follower's client port.
# The ensembles of an earlier part are kept as $WORK/zk.N and $WORK/keel.N (N = 1 for the
# first part), so a failure's member logs survive the parts after it.
parts_started=0
start_both() {
  local kind
  if [ "$parts_started" -gt 0 ]; then
    for kind in zk keel; do [ -d "$WORK/$kind" ] && mv "$WORK/$kind" "$WORK/$kind.$parts_started"; done
  fi
  parts_started=$((parts_started + 1))
  ZK_JVMFLAGS=$2 start_ensemble zk "$WORK/zk" "$ZK_BASE" "$1" \
    || { tail -n 20 "$WORK"/zk/m*/log >&2; return 1; }
  start_ensemble keel "$WORK/keel" "$KEEL_BASE" "$1" \
    || { tail -n 20 "$WORK"/keel/m*/log >&2; return 1; }
  ZK_F=$(ensemble_port "$WORK/zk" follower) && KEEL_F=$(ensemble_port "$WORK/keel" follower)
}

# keel_roles: each keel member's role changes, printed when a part fails, so the CI log
# alone says how the ensemble got to the epoch it was in (a clean CI once saw the keel
# ensemble in epoch 2 at the zkCli part, its logs gone with the run's machine).
keel_roles() {
  local log
  for log in "$WORK"/keel/m*/log; do
    echo "--- $log: role changes"
    grep -a 'role change:' "$log" | tail -n 30
  done
}

# results KIND FILE: the sorted `name outcome` lines of one run's output.
curator_results() { sed -n 's/^\(PASS\|FAIL\) \([^:]*\).*/\2 \1/p' "$1" | sort; }
recipes_results() { # JUNIT_XML
  python3 - "$1" <<'PY'
import sys, xml.etree.ElementTree as ET
for case in sorted(ET.parse(sys.argv[1]).iter("testcase"), key=lambda c: (c.get("classname"), c.get("name"))):
    tags = {child.tag for child in case}
    outcome = "FAIL" if tags & {"failure", "error"} else "SKIP" if "skipped" in tags else "PASS"
    print(case.get("classname"), case.get("name"), outcome)
PY
}

# compare PART A_FILE B_FILE: one summary line; 0 when the results agree.
compare() {
  local part=$1 a=$2 b=$3 n f
  n=$(wc -l < "$a"); f=$(grep -c ' FAIL$' "$a")
  if [ "$n" -gt 0 ] && diff -u --label "zk follower" --label "keel follower" "$a" "$b" > "$WORK/$part.diff"; then
    echo "$part: PASS (zk vs keel follower: $n results identical, $f of them failures on both)"
    return 0
  fi
  cat "$WORK/$part.diff"
  echo "$part: FAIL (zk vs keel follower results differ, or none; see $WORK)"
  return 1
}

status=0

# --- zkCli: the settings of ../zkcli/run.sh, both ensembles fresh.
if start_both $'extendedTypesEnabled=true\nenforceQuota=true\nznode.container.checkIntervalMs=500' \
     "-Dznode.container.checkIntervalMs=500"; then
  ZKCLI_EXTERNAL=1 ZKCLI_PORT_A=$ZK_F ZKCLI_PORT_B=$KEEL_F WORK=$WORK/zkcli \
    bash "$HERE/../zkcli/run.sh" zk keel > "$WORK/zkcli.out" 2>&1
  rc=$?
  [ $rc -eq 0 ] || { grep -v '^zkcli: ' "$WORK/zkcli.out" | head -n 60; keel_roles; status=1; }
  grep '^zkcli: ' "$WORK/zkcli.out" | sed 's/(zk vs keel/(zk vs keel follower/' \
    || { echo "zkcli: FAIL (no result; see $WORK/zkcli.out)"; status=1; }
else
  echo "zkcli: FAIL (ensembles did not start)"; status=1
fi
stop_both

# --- Curator and recipes: the settings of ../curator/run.sh, both ensembles fresh; the
# recipes work in namespaces of their own, so they share the ensembles.
if start_both $'extendedTypesEnabled=true\nznode.container.checkIntervalMs=1000' \
     "-Dznode.container.checkIntervalMs=1000"; then
  for kind in zk keel; do
    port=$ZK_F; [ $kind = keel ] && port=$KEEL_F
    CURATOR_SERVER=127.0.0.1:$port bash "$HERE/../curator/run.sh" $kind \
      > "$WORK/curator-$kind.out" 2> "$WORK/curator-$kind.err"
    curator_results "$WORK/curator-$kind.out" > "$WORK/curator-$kind.results"
  done
  compare curator "$WORK/curator-zk.results" "$WORK/curator-keel.results" || { keel_roles; status=1; }
  for kind in zk keel; do
    port=$ZK_F; [ $kind = keel ] && port=$KEEL_F
    RECIPES_SERVER=127.0.0.1:$port RECIPES_WORK=$WORK/recipes-$kind \
      bash "$HERE/../recipes/run.sh" $kind > "$WORK/recipes-$kind.out" 2>&1
    recipes_results "$WORK/recipes-$kind/junit.xml" > "$WORK/recipes-$kind.results" 2>/dev/null
  done
  compare recipes "$WORK/recipes-zk.results" "$WORK/recipes-keel.results" || { keel_roles; status=1; }
else
  echo "curator: FAIL (ensembles did not start)"; echo "recipes: FAIL (ensembles did not start)"
  status=1
fi
exit $status

#!/usr/bin/env bash
# The README's test command: sets up prerequisites, builds keel, and runs every test:
# the Rust tests, then each stock-client suite against keel (zkCli.sh differential
# against real ZooKeeper, the C client, Curator, the two recipes, Kazoo's own suite).
# Prints one line per suite and a final "suites: N passed, N failed".
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
cd "$ROOT"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/keel-target}
export KEEL_BIN=$CARGO_TARGET_DIR/release/keel

bash "$HERE/setup.sh" || { echo "setup failed"; exit 1; }
cargo build --release --locked || { echo "build failed"; exit 1; }

# Each suite's output also goes to $SUITE_LOGS/<name>.log; a failed suite's last lines
# are printed again after the summary, so a view of only the run's end still shows why.
SUITE_LOGS=${SUITE_LOGS:-/tmp/keel-compat/suite-logs}
rm -rf "$SUITE_LOGS"; mkdir -p "$SUITE_LOGS"
passed=0; failed=0; failures=()
suite() { # NAME CMD...
  local name=$1; shift
  echo; echo "=== $name: $*"
  local t0; t0=$(date +%s)
  # A process substitution, not a pipe: a daemon a suite leaves behind holding its
  # stdout must not keep the run waiting.
  if "$@" > >(tee "$SUITE_LOGS/$name.log") 2>&1; then
    passed=$((passed + 1)); echo "=== $name: PASS ($(( $(date +%s) - t0 ))s)"
  else
    failed=$((failed + 1)); failures+=("$name"); echo "=== $name: FAIL ($(( $(date +%s) - t0 ))s)"
  fi
}

suite rust cargo test --release --locked --workspace
suite zkcli-differential bash "$HERE/zkcli/run.sh" zk keel
suite raw-differential bash "$HERE/rawdiff/run.sh"
suite java-client bash "$HERE/javaclient/run.sh"
suite sequential-wrap bash "$HERE/seqwrap/run.sh"
suite admin-differential bash "$HERE/admin/run.sh"
suite metrics bash "$HERE/admin/metrics.sh"
# Prometheus metrics on an ensemble: local sessions, reconfig, read-only (issue 18 part 4).
suite metrics-ensemble bash "$HERE/admin/metrics_ensemble.sh"
suite c-client bash "$HERE/cclient/run.sh" keel
suite curator bash "$HERE/curator/run.sh" keel
suite recipes bash "$HERE/recipes/run.sh" keel
suite kazoo bash "$HERE/kazoo/run.sh" keel
suite kazoo-cluster bash "$HERE/kazoo/run.sh" --cluster keel
suite kazoo-cluster-local-session-ro bash "$HERE/kazoo/run.sh" --cluster --variant local-session-ro keel
suite kazoo-cluster-observer bash "$HERE/kazoo/run.sh" --cluster --variant observer keel
suite kazoo-mixed bash "$HERE/kazoo/run.sh" --cluster keel,keel,zk
suite tls bash "$HERE/tls/run.sh"
suite sasl bash "$HERE/sasl/run.sh"
suite mixed bash "$HERE/mixed/run.sh"
suite rolling-migration bash "$HERE/mixed/rolling.sh" plain
suite rolling-migration-keep-data bash "$HERE/mixed/rolling.sh" keep-data
suite sync-differential bash "$HERE/mixed/syncdiff.sh"
suite migrate bash "$HERE/migrate/run.sh"
suite ensemble bash "$HERE/ensemble/run.sh" keel 20
suite ensemble-admin-differential bash "$HERE/ensemble/admin.sh"
suite ensemble-sync bash "$HERE/ensemble/sync.sh"
suite ensemble-partition bash "$HERE/ensemble/partition.sh"
suite ensemble-garbage bash "$HERE/ensemble/garbage.sh"
suite ensemble-clients-differential bash "$HERE/ensemble/clients.sh"
suite ensemble-observer-differential bash "$HERE/ensemble/observer.sh"
suite console-browser bash "$HERE/console/run.sh"
suite ensemble-readonly-differential bash "$HERE/ensemble/readonly.sh"
suite ensemble-local-sessions-differential bash "$HERE/ensemble/local_sessions.sh"
suite ensemble-quorum-tls bash "$HERE/ensemble/quorum_tls.sh"
suite ensemble-quorum-sasl bash "$HERE/ensemble/quorum_sasl.sh"
# The zkCli reconfig-session differential (issue 18 check b).
suite reconfig-differential bash "$HERE/reconfig/run.sh" both
# Grow 3 -> 5 -> 3 members under write load, one at a time (issue 18 check d).
suite reconfig-grow-shrink bash "$HERE/reconfig/grow.sh" keel

for name in "${failures[@]}"; do
  echo; echo "--- $name: its last 30 lines (all in $SUITE_LOGS/$name.log)"
  tail -n 30 "$SUITE_LOGS/$name.log"
done
echo
[ ${#failures[@]} -eq 0 ] || echo "failed suites: ${failures[*]}"
echo "suites: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

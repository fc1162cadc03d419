#!/usr/bin/env bash
# Recipe tests (hand-built lock, kazoo Election) against a fresh server.
#   run.sh [zk|keel] [extra pytest args...]     (default: keel)
# Starts the server on ${RECIPES_PORT:-2281} (lib.sh start_server), runs pytest on this
# folder with ZK_HOSTS set, stops the server. Exit code = pytest's.
# RECIPES_SERVER=HOST:PORT runs the tests against a server of the given kind that already
# runs there (for example an ensemble member, as ../ensemble/clients.sh does) instead of
# starting one.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib.sh"

KIND=${1:-keel}
shift || true
case $KIND in zk|keel) ;; *) echo "usage: $0 [zk|keel] [pytest args...]" >&2; exit 2 ;; esac
PORT=${RECIPES_PORT:-2281}
WORK=${RECIPES_WORK:-/tmp/keel-compat/recipes-$KIND}
VENV=$(bash "$HERE/../kazoo/setup.sh" | tail -n1) || { echo "kazoo/setup.sh failed" >&2; exit 2; }

mkdir -p "$WORK"
if [ -n "${RECIPES_SERVER:-}" ]; then
  echo "== recipes against $KIND at $RECIPES_SERVER (not started here)"
  cd "$HERE" && exec env ZK_HOSTS="$RECIPES_SERVER" "$VENV/bin/python" -m pytest "$HERE" \
    -p no:cacheprovider --timeout=180 -q -rfE --junitxml="$WORK/junit.xml" "$@"
fi

if [ "$KIND" = keel ] && [ ! -x "$KEEL_BIN" ]; then
  echo "keel binary not found at $KEEL_BIN (build it: cargo build --release, or set KEEL_BIN)" >&2
  exit 2
fi

trap 'stop_server "$WORK/server"' EXIT
mkdir -p "$WORK"
start_server "$KIND" "$WORK/server" "$PORT" || { cat "$WORK/server/log" >&2; exit 1; }
echo "== recipes against $KIND on 127.0.0.1:$PORT (log: $WORK/server/log)"
cd "$HERE" && ZK_HOSTS=127.0.0.1:$PORT "$VENV/bin/python" -m pytest "$HERE" \
  -p no:cacheprovider --timeout=180 -q -rfE --junitxml="$WORK/junit.xml" "$@"

#!/usr/bin/env bash
# The web console in a browser (issue 20 a, b, c): a 3-member keel ensemble with its
# AdminServers on, holding znodes (a wide parent that pages, names with HTML, quotes and
# URL characters, data with markup, control bytes and invalid UTF-8), 4 Kazoo sessions
# spread over the members with ephemerals and watches, and a znode whose ACL denies the
# console's identity. Debian's chromium, headless, driven by chromedriver over the
# WebDriver protocol (check.py speaks it with Python's standard library), loads every
# console page of every member and checks what the page's DOM shows against the same
# facts read with Kazoo: roles and zxids (srvr), Stat fields, data, children, ephemeral
# owners, sessions, their ephemerals and watches; escaping by the DOM (no element made
# from a name or data, text shown as written); the denied znode's data and children on
# no page. Screenshots (1280 px and phone width) go to $WORK/screenshots.
#   run.sh       Members on CONSOLE_BASE+1..+23 (default 3500), AdminServers on
#                CONSOLE_BASE+41..+43, chromedriver on CONSOLE_BASE+50.
# Work files: $WORK (/tmp/keel-compat/console). Exits nonzero on any mismatch.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../ensemble/lib.sh"

BASE=${CONSOLE_BASE:-3500}
WORK=${CONSOLE_WORK:-/tmp/keel-compat/console}
export ENSEMBLE_ADMIN_BASE=$((BASE + 40))
# The server.N lines name each member's client port, so a member's ensemble page can
# ask the others' srvr.
export ENSEMBLE_SERVER_CLIENT_PORTS=1
DRIVER_PORT=$((BASE + 50))
need_kazoo_and_keel
for b in chromium chromedriver; do
  command -v $b >/dev/null || { echo "$b not found (compat-tests/setup.sh installs it)" >&2; exit 2; }
done

rm -rf "$WORK"; mkdir -p "$WORK/screenshots"
DRIVER_PID=
cleanup() {
  [ -n "$DRIVER_PID" ] && kill "$DRIVER_PID" 2>/dev/null
  stop_ensemble "$WORK/ensemble"
}
trap cleanup EXIT
start_ensemble keel "$WORK/ensemble" "$BASE" || { tail -n 20 "$WORK"/ensemble/m*/log >&2; exit 1; }
chromedriver --port="$DRIVER_PORT" --allowed-ips=127.0.0.1 >"$WORK/chromedriver.log" 2>&1 &
DRIVER_PID=$!
"$VENV/bin/python" "$HERE/check.py" "$WORK" "$BASE" "$ENSEMBLE_ADMIN_BASE" "$DRIVER_PORT"

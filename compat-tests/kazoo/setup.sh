#!/usr/bin/env bash
# Idempotent: create a Python venv with stock Kazoo 2.11.0 and its test dependencies.
# Prints the venv path on the last line. VENV overrides the location.
set -euo pipefail
VENV=${VENV:-${KEEL_CACHE:-$HOME/.cache/keel}/venv}
PKGS=(kazoo==2.11.0 pytest pytest-timeout objgraph gevent eventlet pyjks 'pyOpenSSL<26.2' pure-sasl kerberos)
if [ ! -x "$VENV/bin/python" ]; then
  mkdir -p "$(dirname "$VENV")"
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" - <<'PY' 2>/dev/null
import importlib.metadata as m, sys
need = ["pytest", "pytest-timeout", "objgraph", "gevent", "eventlet", "pyjks", "pyOpenSSL", "pure-sasl", "kerberos"]
assert m.version("kazoo") == "2.11.0"
for n in need: m.version(n)
import kazoo.tests, kazoo.testing
PY
then
  "$VENV/bin/pip" install -q --disable-pip-version-check "${PKGS[@]}" >&2
fi
echo "$VENV"

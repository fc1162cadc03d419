#!/usr/bin/env bash
# Installs what the test suites need on a fresh Debian machine (idempotent):
# real ZooKeeper 3.8 and zkCli.sh (the oracle), the C client, Curator jars, a JDK with
# javac, and Kazoo 2.11.0 with its test dependencies in a venv; MIT Kerberos (a KDC the
# GSSAPI tests start, kinit, and libkrb5-dev for keel's GSSAPI and Python's kerberos);
# chromium and chromium-driver for the console's browser test (console/run.sh).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
PKGS=(zookeeper zookeeper-bin libzookeeper-mt-dev libcurator-client-java
      libcurator-framework-java libcurator-recipes-java openjdk-17-jdk-headless
      gcc clang libclang-dev python3-venv procps
      krb5-kdc krb5-admin-server krb5-user libkrb5-dev chromium chromium-driver)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
command -v cargo >/dev/null || { echo "setup: cargo not found (install Rust: https://rustup.rs)" >&2; exit 1; }
bash "$HERE/kazoo/setup.sh" >/dev/null
echo "setup: ok"

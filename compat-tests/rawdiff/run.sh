#!/usr/bin/env bash
# Raw-protocol differential suite (issue 14): the same frames to real ZooKeeper 3.8 and
# to keel, every reply and watch event compared (rawdiff.py). One pair of servers per
# configuration group; a group's zoo.cfg lines are below.
#   usage: run.sh [-k SUBSTRING] [--show]     (ports from $RAWDIFF_PORT_BASE, default 2400, two per group; work files in $WORK)
# Exits nonzero if any case differs.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib.sh"
WORK=${WORK:-/tmp/keel-compat/rawdiff}
[ -x "$KEEL_BIN" ] || { echo "keel binary $KEEL_BIN not found (cargo build --release, or set KEEL_BIN)" >&2; exit 2; }
mkdir -p "$WORK"

# group name | extra zoo.cfg lines (\n-separated)
GROUPS_CFG=(
  "default|extendedTypesEnabled=true"
  "reap|extendedTypesEnabled=true\nznode.container.checkIntervalMs=200"
  "paths|extendedTypesEnabled=true"
  "identities|DigestAuthenticationProvider.superDigest=super:D/InIHSb7yEEbrWz8b9l71RjZJU="
  "timeouts|minSessionTimeout=-1\nmaxSessionTimeout=-1"
)

cleanup() { for g in "${GROUPS_CFG[@]}"; do n=${g%%|*}; stop_server "$WORK/$n-zk"; stop_server "$WORK/$n-keel"; done; }
trap cleanup EXIT

rc=0; port=${RAWDIFF_PORT_BASE:-2400}
for g in "${GROUPS_CFG[@]}"; do
  name=${g%%|*}; cfg=$(printf '%b' "${g#*|}")
  zk_port=$port; keel_port=$((port + 1)); port=$((port + 2))
  # ZooKeeper reads znode.container.checkIntervalMs only as a JVM property.
  jvm=$(printf '%s\n' "$cfg" | sed -n 's/^\(znode\.container\.checkIntervalMs=.*\)$/-D\1/p')
  ZK_JVMFLAGS="${ZK_JVMFLAGS:-} $jvm" start_server zk "$WORK/$name-zk" $zk_port "$cfg" || { cat "$WORK/$name-zk/log" >&2; exit 1; }
  start_server keel "$WORK/$name-keel" $keel_port "$cfg" || { cat "$WORK/$name-keel/log" >&2; exit 1; }
  python3 "$HERE/rawdiff.py" --zk 127.0.0.1:$zk_port --keel 127.0.0.1:$keel_port --group "$name" "$@" || rc=1
  stop_server "$WORK/$name-zk"; stop_server "$WORK/$name-keel"
done
exit $rc

#!/usr/bin/env bash
# TestReconfig's requests and each server's answer (reconfig-probe.py), on a 3-member
# ensemble started by Kazoo's harness through ./launcher exactly as run.sh --cluster does.
#   reconfig-probe.sh [zk|keel|KINDS]     (default keel; KAZOO_PORT_OFFSET, default 17000)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib.sh"
export TARGET=${1:-keel} KEEL_BIN
VENV=$(bash "$HERE/setup.sh" | tail -n1) || exit 2
export ZOOKEEPER_VERSION=3.8.0 ZOOKEEPER_PATH=/usr/share/java ZOOKEEPER_CLASSPATH=$ZK_CP
export ZOOKEEPER_CLUSTER_SIZE=3 ZOOKEEPER_PORT_OFFSET=${KAZOO_PORT_OFFSET:-17000}
export PATH=$HERE/launcher:$VENV/bin:$PATH
unset ZOOKEEPER_JAAS_AUTH ZOOKEEPER_OBSERVER_START_ID ZOOKEEPER_LOCAL_SESSION_RO
echo "== TestReconfig's requests against $TARGET (3 members, port offset $ZOOKEEPER_PORT_OFFSET)"
exec "$VENV/bin/python" "$HERE/reconfig-probe.py"

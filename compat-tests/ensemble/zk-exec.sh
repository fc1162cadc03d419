#!/usr/bin/env bash
# Runs real ZooKeeper 3.8 (Debian's package) on the zoo.cfg given, in the foreground:
# the command start_ensemble uses for a ZooKeeper member. ZK_CP_EXTRA (":a.jar:b.jar")
# is added to the classpath.
source "$(cd "$(dirname "$0")" && pwd)/../lib.sh"
exec /usr/bin/java -Xmx256m -cp "$ZK_CP${ZK_CP_EXTRA:-}" ${ZK_JVMFLAGS:-} org.apache.zookeeper.server.quorum.QuorumPeerMain "$1"

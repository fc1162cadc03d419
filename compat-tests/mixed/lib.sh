#!/usr/bin/env bash
# Mixed keel / ZooKeeper 3.8 ensembles on loopback (issue 17). Source this file.
#   start_mixed KINDS DIR BASE [EXTRA_CFG]   KINDS = one kind per member, e.g. zk,zk,keel:
#                                          member i runs the i-th (ensemble/lib.sh
#                                          start_ensemble: same zoo.cfg keys, server ids
#                                          and ports for both kinds); waits for one
#                                          leader and two followers
#   stop_mixed DIR
#   member_kind DIR I                      keel | zk: what member I runs
#   zk_log_problems DIR                    the ERROR and WARN lines of the ZooKeeper
#                                          members' logs, less those a ZooKeeper-only
#                                          ensemble writes too (peers killed or stopped,
#                                          the first zxid of an epoch; ZooKeeper 3.8.0's
#                                          double-logged txns when zk_txnlog_dups.py finds
#                                          the copies identical: ZOOKEEPER-4712)
#   check_zk_logs DIR LABEL                prints those lines (20 at most) or that there
#                                          are none; fails when there are
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../ensemble/lib.sh"

start_mixed() { start_ensemble "$@"; }

stop_mixed() { stop_ensemble "$1"; }

member_kind() { # DIR I   (DIR/mI/kind if present: kazoo/launcher/java writes it)
  if [ -f "$1/m$2/kind" ]; then cat "$1/m$2/kind"; return; fi
  case $(cat "$1/m$2/cmd") in
  */zk-exec.sh) echo zk ;;
  *) echo keel ;;
  esac
}

# What a ZooKeeper member logs in an all-ZooKeeper ensemble too when peers die, restart
# or a new epoch begins: election connections broken (a peer stopped) and retried,
# the SendWorker of a killed peer failing its last message, sessions closed, the learner's "Exception when following the leader" when its
# leader dies, the shutdown race of its SyncThread (SendAckRequestProcessor on a null
# socket) and of its FollowerRequestProcessor (a request forwarded on the leader's
# socket as it closes: "Socket closed", ZooKeeperCriticalThread's "Severe unrecoverable
# error"; seen once in rolling-migration when the leader was stopped) and the txns it logged before that race and gets again in the next DIFF
# ("Current zxid ... is <="), JMX names registered by the previous follow, and "Got
# zxid X expected 0x1" for the first PROPOSAL of every sync (Learner.syncWithLeader
# starts lastQueued at 0); as a leader, a killed learner's broken connection and a
# wiped learner's "proposals for zxid 0x0" it cannot find in its txn log (SNAP then); a
# client that closed its socket
# (NIOServerCnxn's "Unexpected exception", an EndOfStreamException), and a client
# reconnecting while the follower drops its leader (WorkerService's "Unexpected
# exception", an NPE in LearnerZooKeeperServer.revalidateSession); as a leader, a
# killed old leader rejoining with proposals of its epoch that no quorum logged, once
# this leader has written in its own epoch (LearnerHandler.queueCommittedProposals:
# "Cannot send TRUNC ... peer zxid is from different epoch", then syncFollower's
# "Unhandled scenario ... fall back to use snapshot": ZooKeeper sends SNAP there by
# design, whichever kind the old leader is; mixed.py checks that no acknowledged
# write is lost and the dumps agree after it); as a leader, a ZooKeeper learner synced by
# a DIFF that holds uncommitted proposals acknowledging one of them before NEWLEADER
# ("NEWLEADER ACK from sid: N is from a different epoch": ZOOKEEPER-4685, the race of
# ZooKeeper's QuorumPeer and SyncThread threads in Learner.syncWithLeader; the leader
# does not count that ACK and re-elects after initLimit; seen once in
# rolling-migration-keep-data's last step, where all three members are ZooKeeper); a
# client connection closed while another one from the same address is being accepted
# ("Unexpected remote address /127.0.0.1 when removing cnxn ...": ZooKeeper's
# per-address count for maxClientCnxns is already gone. NettyServerCnxnFactory.addCnxn
# puts a new connection in cnxns before it counts it in ipMap, so a closeAll (the
# member's server shutting down as it loses its leader) or a client's close can
# uncount it first; then a close from that address finds no count: of that connection
# itself (seen once, recved=0,sent=0) or, before the new one is counted, of another
# (an established session, seen once, recved=1,sent=1). Only client connections are
# counted there, the same in an all-ZooKeeper ensemble: keel's members never
# dial a client port, the test's clients do; both seen in kazoo-mixed); a
# four-letter word's answer written to a client that had already given up on it
# (NIOServerCnxn.sendBufferSync's "Error sending data synchronously": only 4lw output
# is written that way, and the tests' probes, ensemble/fourlw.py, close after 2 s; seen
# once in syncdiff on the 2-core CI machine, a member slower than 2 s to answer); a
# ZooKeeper learner that exhausts its connect tries to a member an election chose from a
# stale LOOKING vote ("Unexpected exception, retries exceeded. tries=", "Failed connect
# to": seen once in rolling-migration's last step, where all three members are
# ZooKeeper: sid 2 hit ZooKeeper's own NPE in Learner.syncWithLeader, ZOOKEEPER-4394,
# and went LOOKING for a moment; the starting sid 3 elected it from that vote, could not
# connect, and joined the real leader on its next election; the members' logs say which).
# Anything else (a digest mismatch, an unexpected packet, a bad snapshot) is reported.
ZK_BENIGN='maxCnxns is not configured|Connection broken for id|Interrupting SendWorker thread|Interrupted while waiting for message on queue|Send worker leaving thread|Failed to send last message|Unexpected exception, tries=|Close of session|GOODBYE|Unexpected exception in LearnerHandler|Got zxid 0x[0-9a-f]* expected 0x1$|Got zxid 0x[0-9a-f]*00000001 expected 0x|Exception when following the leader|PeerState set to LOOKING|Cannot open channel to|Exception when using channel: for id|Closing connection to leader, exception during packet send|Severe unrecoverable error, from thread : SyncThread|Severe unrecoverable error, from thread : FollowerRequestProcessor|Current zxid [0-9]+ is <= [0-9]+ for|Failed to register MBean|Failed to register with JMX|Exception while sending packets in LearnerHandler|Unable to find proposals from txnlog for zxid: 0x0$|NIOServerCnxn - Unexpected exception$|WorkerService - Unexpected exception$|Cannot send TRUNC to peer sid: [0-9]+ peer zxid is from different epoch$|Unhandled scenario for peer sid: [0-9]+ fall back to use snapshot$|NEWLEADER ACK from sid: [0-9]+ is from a different epoch - current 0x[0-9a-f]+ received 0x[0-9a-f]+$|Unexpected remote address /[0-9.]+ when removing cnxn |NIOServerCnxn - Error sending data synchronously ?$|Unexpected exception, retries exceeded\. tries=|Learner - Failed connect to /'

# What a ZooKeeper 3.8.0 member restarted on a dataDir whose txn log holds txns twice
# writes for each (FileTxnSnapLog's "highestZxid > next log", DataTree's digest
# mismatch). Accepted only when zk_txnlog_dups.py finds that every doubled zxid's
# copies are the same txn: ZOOKEEPER-4712 (a learner's SyncThread left running when it
# loses its leader writes the txns it had queued after the member read its log; its
# next DIFF brings them again), and when each of those lines names a doubled zxid (a
# digest mismatch at a zxid logged once is a real one). Different txns under one zxid
# fail the check.
ZK_DOUBLE_LOGGED='\(highestZxid\) > [0-9]+\(next log\) for type|First digest mismatch on txn|Digests are not matching'

zk_log_problems() { # DIR
  local i lines dups
  for i in $(ensemble_members); do
    [ "$(member_kind "$1" "$i")" = zk ] || continue
    lines=$( { grep -E '\] (ERROR|WARN) ' "$1/m$i/log" | grep -vE "$ZK_BENIGN"
               grep -iE 'digests? (are not|mismatch)|digest.*not matching' "$1/m$i/log"; } | sort -u)
    [ -n "$lines" ] || continue
    if ! grep -qvE "$ZK_DOUBLE_LOGGED" <<< "$lines"; then
      # Only the double-logging lines: benign if the doubled txns are the same txns.
      if dups=$(python3 "$(dirname "${BASH_SOURCE[0]}")/zk_txnlog_dups.py" "$1/m$i/data" <(cat <<< "$lines")) \
         && [ "$dups" != "duplicates 0" ]; then
        echo "m$i: ZooKeeper's own double-logged txns (ZOOKEEPER-4712), $(wc -l <<< "$lines") log lines, each at a doubled zxid; txn logs: $dups" >&2
        continue
      fi
      lines="$lines"$'\n'"txn logs: $dups"
    fi
    sed "s|^|m$i: |" <<< "$lines"
  done
  true
}

check_zk_logs() { # DIR LABEL
  local problems
  problems=$(zk_log_problems "$1")
  if [ -n "$problems" ]; then
    echo "$2: ZooKeeper members logged $(wc -l <<< "$problems") unexpected ERROR/WARN lines:"
    head -n 20 <<< "$problems"
    return 1
  fi
  echo "$2: ZooKeeper members' logs: no unexpected ERROR or WARN, no digest mismatch"
}

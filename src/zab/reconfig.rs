//! Dynamic reconfiguration's part of the core (ZooKeeper 3.5+, ZAB-WIRE.md §3 and §5:
//! COMMITANDACTIVATE, INFORMANDACTIVATE, NEWLEADER's config; `QuorumPeer`'s
//! `quorumVerifier` and `lastSeenQuorumVerifier`, `Leader.tryToCommit`,
//! `Leader.getDesignatedLeader`, `SyncedLearnerTracker`). A member holds two
//! configurations: the current one, committed and active, and the last one it has
//! seen, which is newer while a reconfig txn is proposed but not committed. While they
//! differ every proposal needs a quorum of both.

use super::quorum::QuorumVerifier;
use super::wire::config::parse_quorum_config;
use super::wire::txn::{parse_payload, ZkTxn};
use super::{Sid, Zxid};
use crate::proto::opcode as op;

/// The config a reconfig txn installs: the txn payload (TxnHeader type 16 and a
/// SetDataTxn whose data is the config text, PrepRequestProcessor) read into its
/// verifier. `None` for any other txn, or a reconfig whose text does not parse (a
/// ZooKeeper member would fail on it; keel keeps going with its config unchanged).
pub fn config_of_txn(payload: &[u8]) -> Option<QuorumVerifier> {
    if !is_reconfig_txn(payload) {
        return None;
    }
    match parse_payload(payload, 0).ok()? {
        (_, ZkTxn::SetData { data, .. }, _) => {
            parse_quorum_config(std::str::from_utf8(data.as_deref()?).ok()?).ok()
        }
        _ => None,
    }
}

/// Whether a txn payload is a reconfig's (TxnHeader type 16): the type is the header's
/// last field, bytes 28..32, read without decoding the rest.
pub fn is_reconfig_txn(payload: &[u8]) -> bool {
    payload
        .get(28..32)
        .is_some_and(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]) == op::RECONFIG)
}

/// The verifiers a proposal or the NEWLEADER quorum must satisfy: the current config,
/// and the last seen one when it is newer (`Leader.propose`, `Leader.lead`).
pub fn active<'a>(
    current: &'a QuorumVerifier,
    last_seen: &'a QuorumVerifier,
) -> impl Iterator<Item = &'a QuorumVerifier> {
    let newer = (last_seen.version() > current.version()).then_some(last_seen);
    std::iter::once(current).chain(newer)
}

/// The highest zxid acknowledged by a quorum of `qv`: `acks` gives each member's
/// highest durable zxid (the leader's own included); non-voters of `qv` do not count.
/// 0 when the voters heard from are not a quorum.
pub fn quorum_point(qv: &QuorumVerifier, acks: &[(Sid, Zxid)]) -> Zxid {
    // Once per commit: no heap allocation for ensembles of up to 16 voters.
    let mut acked: smallvec::SmallVec<[Zxid; 16]> = acks
        .iter()
        .filter(|(s, _)| qv.is_participant(*s))
        .map(|&(_, z)| z)
        .collect();
    acked.sort_unstable_by(|a, b| b.cmp(a));
    let need = qv.quorum_size();
    if acked.len() >= need {
        acked[need - 1]
    } else {
        0
    }
}

/// The leader of the new config once a reconfig at `reconfig` commits
/// (`Leader.getDesignatedLeader`): this leader when it is a voter of `new` at the same
/// quorum address; else, among the voters of `new` that acknowledged the reconfig,
/// the one that acknowledged the most of the txns after it (`acks` as in
/// [`quorum_point`]; ties go to the lowest sid). When no other voter of `new`
/// acknowledged it, a leader that is itself a voter of `new` (its quorum address
/// moved, and it is the only voter) stays: ZooKeeper's leader fails there (an empty
/// candidate set), keel's moves its quorum port and goes on. `None` when this leader
/// is no voter of `new` and no other voter acknowledged it (the reconfig could not
/// have committed).
pub fn designated_leader(
    me: Sid,
    old: &QuorumVerifier,
    new: &QuorumVerifier,
    reconfig: Zxid,
    acks: &[(Sid, Zxid)],
) -> Option<Sid> {
    if new.is_participant(me) && same_quorum_address(me, old, new) {
        return Some(me);
    }
    acks.iter()
        .filter(|&&(s, z)| s != me && new.is_participant(s) && z >= reconfig)
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .map(|&(s, _)| s)
        .or_else(|| new.is_participant(me).then_some(me))
}

/// Whether `sid` keeps its quorum address (host and quorum port) from `old` to `new`;
/// true when either config lacks it (`QuorumPeer.processReconfig` compares the
/// leader's quorum address to decide whether a learner must reconnect).
pub fn same_quorum_address(sid: Sid, old: &QuorumVerifier, new: &QuorumVerifier) -> bool {
    match (old.server(sid), new.server(sid)) {
        (Some(a), Some(b)) => a.host == b.host && a.quorum_port == b.quorum_port,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zab::wire::config::ServerLine;
    use crate::zab::wire::txn::{encode_payload, TxnHeader};
    use bytes::Bytes;

    fn reconfig_payload(kind: i32, text: &str) -> Vec<u8> {
        let header = TxnHeader {
            session_id: 0x1234,
            cxid: 7,
            zxid: 0x1_0000_0005,
            time_ms: 1_700_000_000_000,
            kind,
        };
        let txn = ZkTxn::SetData {
            path: "/zookeeper/config".into(),
            data: Some(Bytes::copy_from_slice(text.as_bytes())),
            version: -1,
        };
        encode_payload(&header, &txn, None)
            .expect("encodes")
            .to_vec()
    }

    #[test]
    fn reads_the_config_of_a_reconfig_txn_only() {
        let text = "server.1=127.0.0.1:2:3:participant\nserver.2=127.0.0.1:4:5:participant\n\
                    server.3=127.0.0.1:6:7:observer;0.0.0.0:2181\nversion=100000005";
        let qv = config_of_txn(&reconfig_payload(op::RECONFIG, text)).expect("a config");
        assert_eq!(qv.version(), 0x1_0000_0005);
        assert_eq!(qv.text(), text);
        assert!(config_of_txn(&reconfig_payload(op::SET_DATA, text)).is_none());
        assert!(config_of_txn(&reconfig_payload(op::RECONFIG, "version=1")).is_none());
        assert!(config_of_txn(&[0; 10]).is_none());
    }

    #[test]
    fn a_pending_reconfig_needs_both_quorums() {
        let old = QuorumVerifier::new([1, 2, 3], []);
        let new = QuorumVerifier::new([1, 4, 5], []).with_version(9);
        let both: Vec<_> = active(&old, &new).collect();
        assert_eq!(both.len(), 2);
        assert_eq!(active(&new, &old).count(), 1);
        let acks = [(1, 10), (2, 8), (3, 3), (4, 6), (5, 2)];
        assert_eq!(quorum_point(&old, &acks), 8);
        assert_eq!(quorum_point(&new, &acks), 6);
        assert_eq!(quorum_point(&new, &[(1, 10)]), 0);
    }

    fn line(sid: Sid, port: u16) -> ServerLine {
        ServerLine {
            sid,
            host: "127.0.0.1".into(),
            quorum_port: port,
            election_port: port + 1,
            observer: false,
            client: None,
        }
    }

    #[test]
    fn the_designated_leader_is_this_one_or_the_most_up_to_date_new_voter() {
        let old = QuorumVerifier::from_servers([line(1, 10), line(2, 20), line(3, 30)], 0).unwrap();
        let keeps = QuorumVerifier::from_servers([line(1, 10), line(2, 20)], 5).unwrap();
        let acks = [(1, 9), (2, 7), (3, 8)];
        assert_eq!(designated_leader(1, &old, &keeps, 5, &acks), Some(1));
        let moved =
            QuorumVerifier::from_servers([line(1, 11), line(2, 20), line(3, 30)], 5).unwrap();
        assert_eq!(designated_leader(1, &old, &moved, 5, &acks), Some(3));
        let without_me = QuorumVerifier::from_servers([line(2, 20), line(3, 30)], 5).unwrap();
        assert_eq!(designated_leader(1, &old, &without_me, 5, &acks), Some(3));
        assert_eq!(
            designated_leader(1, &old, &without_me, 5, &[(2, 8), (3, 8)]),
            Some(2)
        );
        assert_eq!(designated_leader(1, &old, &without_me, 5, &[(2, 4)]), None);
        // The only voter left, at a moved quorum address: it stays the leader.
        let alone_moved = QuorumVerifier::from_servers([line(1, 11)], 5).unwrap();
        assert_eq!(
            designated_leader(1, &old, &alone_moved, 5, &[(1, 9), (2, 9)]),
            Some(1)
        );
    }
}

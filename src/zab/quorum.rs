//! Who votes and what counts as a quorum: ZooKeeper's `QuorumMaj` (ZAB-WIRE.md §5,
//! `Q/flexible/QuorumMaj.java`): a set of participants is a quorum when it holds more
//! than half of them; observers never count. A verifier is one configuration of the
//! ensemble: its members (with their addresses when known) and its version, the zxid
//! of the reconfig txn that made it (0 for a zoo.cfg that names none; dynamic
//! reconfiguration, ZooKeeper 3.5+).

use std::collections::{BTreeMap, BTreeSet};

use super::wire::config::{quorum_config_text, ServerLine};
use super::{Sid, Zxid};

/// The ensemble's members by kind (the server.N lines, `:participant` / `:observer`),
/// at one config version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumVerifier {
    participants: BTreeSet<Sid>,
    observers: BTreeSet<Sid>,
    /// The config version (`version=` of the config text, hex there).
    version: Zxid,
    /// The server lines by sid; empty for a verifier made from sids alone
    /// ([`QuorumVerifier::new`], the simulation's).
    servers: BTreeMap<Sid, ServerLine>,
}

impl QuorumVerifier {
    /// A verifier over `participants` (voters) and `observers`, version 0, without
    /// addresses. Panics if a sid is in both or there are no participants (config
    /// validation refuses both first).
    pub fn new(
        participants: impl IntoIterator<Item = Sid>,
        observers: impl IntoIterator<Item = Sid>,
    ) -> QuorumVerifier {
        let participants: BTreeSet<Sid> = participants.into_iter().collect();
        let observers: BTreeSet<Sid> = observers.into_iter().collect();
        assert!(!participants.is_empty(), "an ensemble needs a participant");
        assert!(participants.is_disjoint(&observers), "a sid is one kind");
        QuorumVerifier {
            participants,
            observers,
            version: 0,
            servers: BTreeMap::new(),
        }
    }

    /// A verifier over server lines at `version`; a later line for the same sid wins.
    /// Errors: no participant among them.
    pub fn from_servers(
        servers: impl IntoIterator<Item = ServerLine>,
        version: Zxid,
    ) -> Result<QuorumVerifier, String> {
        let servers: BTreeMap<Sid, ServerLine> = servers.into_iter().map(|s| (s.sid, s)).collect();
        let participants: BTreeSet<Sid> = servers
            .values()
            .filter(|s| !s.observer)
            .map(|s| s.sid)
            .collect();
        if participants.is_empty() {
            return Err("a configuration needs at least one participant".to_string());
        }
        let observers = servers
            .values()
            .filter(|s| s.observer)
            .map(|s| s.sid)
            .collect();
        Ok(QuorumVerifier {
            participants,
            observers,
            version,
            servers,
        })
    }

    /// The config version: the zxid of the reconfig txn that made it (0: none).
    pub fn version(&self) -> Zxid {
        self.version
    }

    /// The same members at another version (ZOOKEEPER-1783: an established leader
    /// gives the initial config its NEWLEADER zxid as version).
    pub fn with_version(&self, version: Zxid) -> QuorumVerifier {
        QuorumVerifier {
            version,
            ..self.clone()
        }
    }

    /// `sid`'s server line, when the verifier has addresses.
    pub fn server(&self, sid: Sid) -> Option<&ServerLine> {
        self.servers.get(&sid)
    }

    /// The server lines, ascending by sid (empty without addresses).
    pub fn servers(&self) -> impl Iterator<Item = &ServerLine> + '_ {
        self.servers.values()
    }

    /// The config text members exchange (notifications, NEWLEADER, the reconfig txn,
    /// `/zookeeper/config`): [`quorum_config_text`] of the lines and the version.
    pub fn text(&self) -> String {
        let lines: Vec<ServerLine> = self.servers.values().cloned().collect();
        quorum_config_text(&lines, self.version)
    }

    /// Whether two verifiers are the same configuration as ZooKeeper's
    /// `QuorumMaj.equals` decides it: the same version, or the same members with the
    /// same kind and addresses (sids alone when either has no addresses).
    pub fn same_config(&self, other: &QuorumVerifier) -> bool {
        if self.version == other.version {
            return true;
        }
        if self.participants != other.participants || self.observers != other.observers {
            return false;
        }
        self.servers.is_empty() || other.servers.is_empty() || self.servers == other.servers
    }

    /// Whether `sid` votes (ZooKeeper's weight != 0).
    pub fn is_participant(&self, sid: Sid) -> bool {
        self.participants.contains(&sid)
    }

    /// Whether `sid` is an observer.
    pub fn is_observer(&self, sid: Sid) -> bool {
        self.observers.contains(&sid)
    }

    /// Whether `sid` is a member of either kind.
    pub fn is_member(&self, sid: Sid) -> bool {
        self.is_participant(sid) || self.is_observer(sid)
    }

    /// The voters, ascending.
    pub fn participants(&self) -> impl Iterator<Item = Sid> + '_ {
        self.participants.iter().copied()
    }

    /// Every member, voters first.
    pub fn members(&self) -> impl Iterator<Item = Sid> + '_ {
        self.participants
            .iter()
            .chain(self.observers.iter())
            .copied()
    }

    /// Whether the sids yielded (duplicates and non-voters ignored) are a majority of
    /// the participants: more than half.
    pub fn contains_quorum(&self, sids: impl IntoIterator<Item = Sid>) -> bool {
        let voters: BTreeSet<Sid> = sids
            .into_iter()
            .filter(|s| self.participants.contains(s))
            .collect();
        voters.len() * 2 > self.participants.len()
    }

    /// The number of voters a quorum needs.
    pub fn quorum_size(&self) -> usize {
        self.participants.len() / 2 + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn majority_of_participants_only() {
        let qv = QuorumVerifier::new([1, 2, 3], [4]);
        assert!(!qv.contains_quorum([1]));
        assert!(!qv.contains_quorum([1, 4]));
        assert!(!qv.contains_quorum([1, 1]));
        assert!(qv.contains_quorum([1, 3]));
        assert_eq!(qv.quorum_size(), 2);
        let five = QuorumVerifier::new([1, 2, 3, 4, 5], []);
        assert!(!five.contains_quorum([1, 2]));
        assert!(five.contains_quorum([1, 2, 5]));
    }

    fn line(sid: Sid, observer: bool, port: u16) -> ServerLine {
        ServerLine {
            sid,
            host: "127.0.0.1".into(),
            quorum_port: port,
            election_port: port + 1,
            observer,
            client: None,
        }
    }

    /// QuorumMaj.equals: equal versions are equal whatever the members; otherwise the
    /// members, their kinds and addresses decide.
    #[test]
    fn same_config_as_zookeeper_decides_it() {
        let a = QuorumVerifier::from_servers([line(1, false, 10), line(2, false, 20)], 5).unwrap();
        let b = QuorumVerifier::from_servers(
            [line(1, false, 10), line(2, true, 20), line(3, false, 30)],
            5,
        )
        .unwrap();
        assert!(a.same_config(&b));
        let c = a.with_version(6);
        assert!(a.same_config(&c));
        let moved =
            QuorumVerifier::from_servers([line(1, false, 10), line(2, false, 40)], 7).unwrap();
        assert!(!a.same_config(&moved));
        let observer =
            QuorumVerifier::from_servers([line(1, false, 10), line(2, true, 20)], 7).unwrap();
        assert!(!a.same_config(&observer));
        assert!(QuorumVerifier::from_servers([line(1, true, 10)], 1).is_err());
        assert_eq!(b.quorum_size(), 2);
        assert!(b.is_member(2) && !b.is_participant(2));
    }
}

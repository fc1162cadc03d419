//! Who votes and what counts as a quorum: ZooKeeper's `QuorumMaj` (ZAB-WIRE.md §5,
//! `Q/flexible/QuorumMaj.java`): a set of participants is a quorum when it holds more
//! than half of them; observers never count.

use std::collections::BTreeSet;

use super::Sid;

/// The ensemble's members by kind (the server.N lines, `:participant` / `:observer`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumVerifier {
    participants: BTreeSet<Sid>,
    observers: BTreeSet<Sid>,
}

impl QuorumVerifier {
    /// A verifier over `participants` (voters) and `observers`. Panics if a sid is in
    /// both or there are no participants (config validation refuses both first).
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
        }
    }

    /// Whether `sid` votes (ZooKeeper's weight != 0).
    pub fn is_participant(&self, sid: Sid) -> bool {
        self.participants.contains(&sid)
    }

    /// Whether `sid` is an observer.
    pub fn is_observer(&self, sid: Sid) -> bool {
        self.observers.contains(&sid)
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
}

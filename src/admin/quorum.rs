//! What the admin surface shows of an ensemble member's Zab side: a plain view the
//! ensemble core task fills from its replica (`member::ensemble`), read by the
//! four-letter words (`mntr`, `conf`), the AdminServer (`leader`, `voting_view`,
//! `zabstate`) and the metrics. A standalone server has none.

/// One learner connected to the leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LearnerView {
    /// The learner's server id.
    pub sid: u64,
    /// It registered as an observer.
    pub observer: bool,
    /// Its sync is queued and proposals are forwarded to it (ZooKeeper's forwarding
    /// followers / observing learners).
    pub synced: bool,
}

/// An ensemble member's Zab state at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnsembleView {
    /// This member's server id (`myid`).
    pub my_id: u64,
    /// ZooKeeper's `QuorumPeer.getDetailedPeerState`: the peer state and the Zab state,
    /// lower case, e.g. `leading - broadcast`, `following - synchronization`,
    /// `looking - election` (`zk_peer_state`).
    pub peer_state: String,
    /// The Zab state alone, lower case (`broadcast`; the `zabstate` command).
    pub zab_state: String,
    /// The leader's server id: this member while it leads, the one it learns from, none
    /// while electing.
    pub leader_id: Option<u64>,
    /// acceptedEpoch and currentEpoch.
    pub accepted_epoch: u32,
    /// See `accepted_epoch`.
    pub current_epoch: u32,
    /// The last txn in Zab's log.
    pub last_logged_zxid: i64,
    /// While leading: every connected learner, ascending by sid.
    pub learners: Vec<LearnerView>,
    /// While leading: ms since this member started leading (`zk_leader_uptime`).
    pub leader_uptime_ms: Option<u64>,
    /// Learners this member synced as leader with DIFF or TRUNC since it started
    /// (ZooKeeper's `ServerMetrics.DIFF_COUNT`, `zk_diff_count`).
    pub diff_count: u64,
    /// Learners this member synced as leader with SNAP since it started
    /// (ZooKeeper's `ServerMetrics.SNAP_COUNT`, `zk_snap_count`).
    pub snap_count: u64,
}

impl EnsembleView {
    /// Whether this member leads.
    pub fn is_leader(&self) -> bool {
        self.leader_id == Some(self.my_id)
    }
}

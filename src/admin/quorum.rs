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
    /// It is a participant of the leader's current config (a follower that is not,
    /// e.g. one a reconfig removed, is a non-voting follower:
    /// `zk_synced_non_voting_followers`).
    pub voting: bool,
    /// Its sync is queued and proposals are forwarded to it (ZooKeeper's forwarding
    /// followers / observing learners).
    pub synced: bool,
    /// The highest zxid it acknowledged as durable (0 before its NEWLEADER ACK; an
    /// observer never acknowledges).
    pub acked_zxid: i64,
    /// Txns of the leader's log after `acked_zxid`; `None` when that count is not a
    /// zxid difference (an observer, or an ACK from an older epoch than the log's end).
    pub lag_txns: Option<u64>,
    /// ms since the leader proposed the first txn it has not acknowledged (0 when it
    /// acknowledged every one); `None` as for `lag_txns`. `lag_ms_at_least` marks a
    /// lower bound (that proposal is older than the times the leader keeps).
    pub lag_ms: Option<u64>,
    /// See `lag_ms`.
    pub lag_ms_at_least: bool,
    /// ms since the leader last heard from it.
    pub last_heard_ms_ago: u64,
    /// When it connected to this leader (its election's end), ms since the Unix epoch.
    pub connected_at_ms: u64,
    /// Its quorum connection's address and figures (`observers`), while it is up.
    pub link: Option<crate::net::peer::quorum::QuorumLinkInfo>,
}

/// One finished election of this member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElectionView {
    /// When it started looking, ms since the Unix epoch.
    pub started_ms: u64,
    /// When it ended, ms since the Unix epoch.
    pub ended_ms: u64,
    /// The leader it chose.
    pub leader: u64,
    /// The winning vote's last zxid and currentEpoch, when known.
    pub vote: Option<(i64, u32)>,
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
    /// Proposals this member made as leader since it started (`zk_proposal_count`).
    pub proposal_count: u64,
    /// While leading: this leadership's proposal sizes last/min/max, bytes (-1 before
    /// the first; `Proposal sizes last/min/max`, `zk_*_proposal_size`).
    pub proposal_sizes: (i64, i64, i64),
    /// Voting members of this member's current config, the reconfigs it activated
    /// included (ZooKeeper's `getQuorumSize`, `zk_quorum_size`).
    pub voting_members: u64,
    /// Its role changes' election and sync figures (`zk_looking_count`,
    /// `zk_election_time`, `zk_follower_sync_time`, ...).
    pub role_metrics: crate::member::replica::RoleMetrics,
    /// This member's last finished election (`None` before the first ends).
    pub last_election: Option<ElectionView>,
    /// While electing: since when, ms since the Unix epoch.
    pub looking_since_ms: Option<u64>,
    /// The current config as `/zookeeper/config` and `conf` show it (`QuorumMaj
    /// .toString`, [`crate::zab::quorum::QuorumVerifier::text`]); it changes with each
    /// reconfig this member activates. Empty: not known (zoo.cfg's is shown).
    pub config_text: String,
}

impl EnsembleView {
    /// Whether this member leads.
    pub fn is_leader(&self) -> bool {
        self.leader_id == Some(self.my_id)
    }
}

//! What members say to each other: FastLeaderElection notifications on the election
//! port and QuorumPacket-shaped messages on the quorum port, one variant per ZooKeeper
//! packet type (../shared/ZAB-WIRE.md §2, §3), so the codec that puts them on the
//! wire ([`super::wire`]) is a pure translation with no protocol decisions of its own.

use bytes::Bytes;
use jute::Id;

use super::{Sid, Zxid};

/// A non-voter's own vote: ZooKeeper's Long.MIN_VALUE as leader, zxid and peerEpoch
/// (FastLeaderElection `getInitId`, `getInitLastLoggedZxid`, `getPeerEpoch`), as
/// its bit pattern. It names no participant, so any voter's vote beats it.
pub const NO_VOTE: u64 = i64::MIN as u64;

/// A member's state as it appears in a notification (ZooKeeper's `ServerState`; wire
/// values LOOKING 0, FOLLOWING 1, LEADING 2, OBSERVING 3, ZAB-WIRE.md §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ServerState {
    /// Electing a leader.
    Looking,
    /// Following `Notification::leader`.
    Following,
    /// Leading.
    Leading,
    /// Observing `Notification::leader` (never votes).
    Observing,
}

impl ServerState {
    /// ZooKeeper's wire number for the state.
    pub fn wire(self) -> i32 {
        match self {
            ServerState::Looking => 0,
            ServerState::Following => 1,
            ServerState::Leading => 2,
            ServerState::Observing => 3,
        }
    }
}

/// A FastLeaderElection notification (ZAB-WIRE.md §2, 44+N bytes on the wire).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notification {
    /// The sender's state.
    pub state: ServerState,
    /// The sid the sender proposes (LOOKING) or follows/is (FOLLOWING, LEADING).
    pub leader: Sid,
    /// The proposed leader's last logged zxid.
    pub zxid: Zxid,
    /// The sender's logical clock: the round it votes in, or decided in.
    pub election_epoch: u64,
    /// The proposed leader's currentEpoch (after a sync: the new epoch, ZOOKEEPER-1732).
    pub peer_epoch: u64,
    /// The sender's quorum config text (`server.N=...` lines and `version=`), opaque
    /// here; empty while reconfig is off and the codec fills in the static config.
    pub config: Bytes,
}

impl Notification {
    /// A non-voter's LOOKING notification in round `round`: its own vote, [`NO_VOTE`]
    /// as leader, zxid and peerEpoch, as ZooKeeper's observers send it.
    pub fn non_voter(round: u64) -> Notification {
        Notification {
            state: ServerState::Looking,
            leader: NO_VOTE,
            zxid: NO_VOTE,
            election_epoch: round,
            peer_epoch: NO_VOTE,
            config: Bytes::new(),
        }
    }
}

/// One message between members. `Notification` travels on the election port; every
/// other variant is a QuorumPacket on the quorum port, named and numbered as in
/// ZooKeeper's `Leader.java` (ZAB-WIRE.md §3); [`super::wire::quorum`] maps each to its
/// packet. Txn payloads are opaque bytes: on the wire ZooKeeper's TxnHeader plus txn
/// record (ZAB-WIRE.md §5, [`super::wire::txn`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// Election port: a vote (§2).
    Notification(Notification),
    /// 11, learner -> leader, first packet of a follower: zxid = acceptedEpoch<<32,
    /// data = LearnerInfo.
    FollowerInfo {
        /// The learner's acceptedEpoch.
        accepted_epoch: u32,
        /// LearnerInfo.serverid.
        sid: Sid,
        /// LearnerInfo.protocolVersion (0x10000).
        protocol_version: i32,
        /// LearnerInfo.configVersion.
        config_version: i64,
    },
    /// 16, observer -> leader: as `FollowerInfo`, never counted toward a quorum.
    ObserverInfo {
        /// The observer's acceptedEpoch.
        accepted_epoch: u32,
        /// LearnerInfo.serverid.
        sid: Sid,
        /// LearnerInfo.protocolVersion (0x10000).
        protocol_version: i32,
        /// LearnerInfo.configVersion.
        config_version: i64,
    },
    /// 17, leader -> learner: zxid = newEpoch<<32, data = int protocol version 0x10000.
    LeaderInfo {
        /// The epoch the leader proposes.
        new_epoch: u32,
        /// The leader's protocol version (0x10000).
        protocol_version: i32,
    },
    /// 18, learner -> leader: zxid = the learner's last logged zxid, data = int
    /// currentEpoch, or -1 when it had already accepted this epoch (not counted).
    AckEpoch {
        /// The learner's last logged zxid.
        last_logged_zxid: Zxid,
        /// The learner's currentEpoch, or -1.
        current_epoch: i32,
    },
    /// 13, leader -> learner: the learner's log is a prefix of the leader's up to `zxid`
    /// (the leader's last zxid at the decision); PROPOSALs follow.
    Diff {
        /// The zxid the diff runs to.
        zxid: Zxid,
    },
    /// 14, leader -> learner: drop every txn after `zxid`, then PROPOSALs follow.
    Trunc {
        /// The truncate-to zxid (kept).
        zxid: Zxid,
    },
    /// 15, leader -> learner: the leader's state as of `zxid` (on the wire ZooKeeper's
    /// DataTree serialization, §4.4, not yet produced or read), then PROPOSALs follow.
    Snap {
        /// The zxid of the last txn the snapshot holds.
        zxid: Zxid,
        /// The serialized state, opaque to the core.
        snapshot: Bytes,
    },
    /// 10, leader -> learner: the end of the sync; zxid = newEpoch<<32.
    NewLeader {
        /// The new epoch.
        epoch: u32,
        /// The leader's quorum config text, opaque here.
        config: Bytes,
    },
    /// 12, leader -> learner: start serving. ZooKeeper's leader sends zxid -1 and its
    /// learner does not read it (`Learner.syncWithLeader`); a keel leader sends the
    /// commit point within what the learner synced, so that a keel learner whose log
    /// already held committed txns (a DIFF that sent none) applies them without a
    /// COMMIT that a ZooKeeper learner would log as "without seeing txn".
    UpToDate {
        /// The learner's log is committed up to here; None for -1 (ZooKeeper).
        committed: Option<Zxid>,
    },
    /// 2, leader -> follower: a txn to log.
    Proposal {
        /// The txn's zxid.
        zxid: Zxid,
        /// The txn payload.
        txn: Bytes,
    },
    /// 3, learner -> leader: `zxid` is durable in the learner's log (NEWLEADER and
    /// UPTODATE are acknowledged with zxid = newEpoch<<32).
    Ack {
        /// The acknowledged zxid.
        zxid: Zxid,
    },
    /// 4, leader -> follower: every txn up to `zxid` is committed.
    Commit {
        /// The committed zxid.
        zxid: Zxid,
    },
    /// 8, leader -> observer: a committed txn, payload included.
    Inform {
        /// The txn's zxid.
        zxid: Zxid,
        /// The txn payload.
        txn: Bytes,
    },
    /// 9, leader -> follower: COMMIT of a reconfig txn, which also activates its
    /// config; data = the designated leader's sid, long (`Leader.commitAndActivate`).
    CommitAndActivate {
        /// The reconfig txn's zxid.
        zxid: Zxid,
        /// Who leads the new config (`Leader.getDesignatedLeader`).
        leader: Sid,
    },
    /// 19, leader -> observer: INFORM of a reconfig txn; data = the designated
    /// leader's sid, long, then the txn bytes (`Leader.informAndActivate`).
    InformAndActivate {
        /// The reconfig txn's zxid.
        zxid: Zxid,
        /// Who leads the new config.
        leader: Sid,
        /// The txn payload.
        txn: Bytes,
    },
    /// 5, both ways: the leader's liveness probe (zxid = last proposed), echoed by the
    /// learner with the sessions its clients touched since its last echo (data = pairs
    /// of sessionId long and timeout int, LearnerSessionTracker.snapshot).
    Ping {
        /// The leader's last proposed zxid, echoed.
        zxid: Zxid,
        /// Learner -> leader: (session id, timeout ms) of each touched session; empty
        /// from the leader. The core echoes it empty; the member fills it in.
        touched: Vec<(i64, i32)>,
    },
    /// 1, learner -> leader: a client's write or session operation, for the leader's
    /// state machine (REQUEST: data = sessionId long, cxid int, type int, then the
    /// request record as the client sent it; authinfo = the client's identities). The
    /// core passes it on ([`super::Action::Deliver`]) once the learner is synced.
    Request {
        /// The client's session.
        session_id: i64,
        /// The client's xid.
        cxid: i32,
        /// The request's opcode.
        opcode: i32,
        /// The request record's bytes.
        body: Bytes,
        /// The client connection's identities.
        auth: Vec<Id>,
    },
    /// 6, learner -> leader: is a session that reconnected to the learner still alive?
    /// (REVALIDATE: data = sessionId long, timeout int.) Passed on to the state machine.
    Revalidate {
        /// The session.
        session_id: i64,
        /// The timeout the client asked for, ms.
        timeout_ms: i32,
    },
    /// 6, leader -> learner: the answer (REVALIDATE: data = sessionId long, valid
    /// boolean). Passed on to the state machine.
    RevalidateReply {
        /// The session.
        session_id: i64,
        /// Whether it is alive (the learner then owns it).
        valid: bool,
    },
    /// 7, leader -> learner: the oldest sync the learner forwarded is answered (no data:
    /// a learner answers its forwarded syncs in the order it sent them). Passed on to
    /// the state machine, after the COMMITs before it.
    Sync,
}

/// Which of a member's two ports a message travels on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Channel {
    /// The election port (QuorumCnxManager, ZAB-WIRE.md §1).
    Election,
    /// The quorum port (learner -> leader TCP stream, §4).
    Quorum,
}

impl Message {
    /// The port the message travels on.
    pub fn channel(&self) -> Channel {
        match self {
            Message::Notification(_) => Channel::Election,
            _ => Channel::Quorum,
        }
    }

    /// Whether this is one of the broadcast's steady messages: PROPOSAL, ACK, COMMIT,
    /// INFORM, PING, REQUEST, REVALIDATE and its answer. None of them opens, closes or
    /// resyncs a connection or changes a config (as FOLLOWERINFO, the sync's messages,
    /// COMMITANDACTIVATE and INFORMANDACTIVATE do), so a runtime may hold them briefly
    /// to send a turn's worth at once.
    pub fn is_steady(&self) -> bool {
        matches!(
            self,
            Message::Proposal { .. }
                | Message::Ack { .. }
                | Message::Commit { .. }
                | Message::Inform { .. }
                | Message::Ping { .. }
                | Message::Request { .. }
                | Message::Revalidate { .. }
                | Message::RevalidateReply { .. }
        )
    }

    /// ZooKeeper's QuorumPacket type number (`Leader.java`), None for a notification.
    pub fn packet_type(&self) -> Option<i32> {
        Some(match self {
            Message::Notification(_) => return None,
            Message::Proposal { .. } => 2,
            Message::Ack { .. } => 3,
            Message::Commit { .. } => 4,
            Message::Ping { .. } => 5,
            Message::Request { .. } => 1,
            Message::Revalidate { .. } | Message::RevalidateReply { .. } => 6,
            Message::Sync => 7,
            Message::Inform { .. } => 8,
            Message::CommitAndActivate { .. } => 9,
            Message::InformAndActivate { .. } => 19,
            Message::NewLeader { .. } => 10,
            Message::FollowerInfo { .. } => 11,
            Message::UpToDate { .. } => 12,
            Message::Diff { .. } => 13,
            Message::Trunc { .. } => 14,
            Message::Snap { .. } => 15,
            Message::ObserverInfo { .. } => 16,
            Message::LeaderInfo { .. } => 17,
            Message::AckEpoch { .. } => 18,
        })
    }
}

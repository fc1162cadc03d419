//! ZooKeeper 3.8's server-to-server wire formats as a pure, sans-I/O codec for the Zab
//! core: bytes in, [`Message`](super::message::Message)s out, and back, with no
//! protocol decisions (what to send, when, to whom is the core's; where the bytes go is
//! the runtime's). Facts from ../shared/ZAB-WIRE.md and ZooKeeper's own source.
//!
//! - [`election`]: the election port (QuorumCnxManager): the connection's initial
//!   message, the sid tie-break, the int-length frames and the FastLeaderElection
//!   notification in each.
//! - [`packet`]: the quorum port's unit, jute's QuorumPacket, read from a byte stream
//!   (a partial packet asks for more bytes).
//! - [`quorum`]: [`Message`](super::message::Message) <-> QuorumPacket, with the data of
//!   each packet type (LearnerInfo, LEADERINFO, ACKEPOCH, NEWLEADER, PING).
//! - [`txn`]: PROPOSAL / INFORM data, ZooKeeper's TxnHeader plus txn record, and the
//!   one conversion between them and keel's [`crate::server::txn::Txn`].
//! - [`snap_frame`]: where the DataTree stream after a SNAP packet ends (it has no
//!   length in front), for the runtime that reads it off the quorum port.
//! - [`config`]: the quorum config text notifications and NEWLEADER carry.
//! - [`snap`]: the SNAP stream, ZooKeeper's DataTree serialization (also the body of
//!   its snapshot files), written from and read into keel's tree.
//! - [`reader`]: the offset-aware jute reader they decode with (the importer too).
//!
//! Numbers the core keeps unsigned (sids, zxids, epochs) are Java longs on the wire and
//! convert by bit pattern, so ZooKeeper's Long.MIN_VALUE "no vote" and -1 zxids
//! survive both ways.
//!
//! Malformed input is a [`WireError`], never a panic.

pub mod config;
pub mod election;
pub mod packet;
pub mod quorum;
pub mod reader;
pub mod snap;
pub mod snap_frame;
pub mod txn;

pub use self::reader::Malformed;

/// ZooKeeper's default `jute.maxbuffer`, bytes.
pub const DEFAULT_JUTE_MAXBUFFER: usize = 0xfffff;

/// The longest buffer or string a jute reader accepts with this `jute.maxbuffer`:
/// BinaryInputArchive allows the buffer size plus `zookeeper.jute.maxbuffer.extrasize`,
/// which defaults to the buffer size and is at least 1024.
pub fn max_buffer_bytes(jute_maxbuffer: usize) -> usize {
    jute_maxbuffer.saturating_add(jute_maxbuffer.max(1024))
}

/// Why bytes did not decode, or a value has no ZooKeeper form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// A record's bytes are malformed (offset and what, from the reader).
    #[error("malformed: {0}")]
    Malformed(#[from] Malformed),
    /// An election-port frame length outside 1..=`max` (QuorumCnxManager drops the
    /// connection).
    #[error("election frame length {len} is outside 1..={max} (PACKETMAXSIZE)")]
    FrameLength {
        /// The length read or asked for.
        len: i64,
        /// The bound.
        max: usize,
    },
    /// An election connection's first long is neither a sid (>= 0) nor a known
    /// protocol version.
    #[error("election handshake: unrecognized protocol version {0}")]
    ProtocolVersion(i64),
    /// The initial message's address text has a length outside 1..=2048.
    #[error("election handshake: address length {0} is outside 1..=2048")]
    AddressLength(i32),
    /// The initial message's address text is not `host:port[|host:port...]`.
    #[error("election handshake: badly formed address {0:?}")]
    Address(String),
    /// A notification's state is not 0..=3 (ZooKeeper skips the message).
    #[error("notification state {0} is not LOOKING, FOLLOWING, LEADING or OBSERVING")]
    UnknownState(i32),
    /// A notification too short for any layout ZooKeeper reads, or cut inside one.
    #[error("notification of {len} bytes: {what}")]
    Notification {
        /// Its length.
        len: usize,
        /// What did not fit.
        what: String,
    },
    /// A quorum packet past the size bound (its buffers, or all of it).
    #[error("quorum packet: {what} of {len} bytes exceeds the bound of {max}")]
    TooLarge {
        /// What was too long.
        what: &'static str,
        /// Its length (or count).
        len: i64,
        /// The bound.
        max: usize,
    },
    /// A quorum packet type ZooKeeper does not define.
    #[error("unknown quorum packet type {0}")]
    UnknownPacketType(i32),
    /// A packet type the core has no message for yet.
    #[error("quorum packet type {kind} ({name}) has no Message variant yet")]
    NoMessage {
        /// The type number.
        kind: i32,
        /// ZooKeeper's name for it.
        name: &'static str,
    },
    /// A packet whose data does not fit its type.
    #[error("{name} packet: {what}")]
    PacketData {
        /// The packet type's name.
        name: &'static str,
        /// What is wrong.
        what: String,
    },
    /// A message that never travels on this port (a notification on the quorum port).
    #[error("{0} does not travel on this port")]
    WrongPort(&'static str),
    /// A txn with no ZooKeeper form, or a ZooKeeper txn with no keel form.
    #[error("txn has no {to} form: {what}")]
    Untranslatable {
        /// "ZooKeeper" or "keel".
        to: &'static str,
        /// Why.
        what: String,
    },
}

/// Test bytes written as hex, whitespace ignored (golden vectors).
#[cfg(test)]
pub(crate) fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digits"))
        .collect()
}

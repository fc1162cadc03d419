//! The election port (ZooKeeper's QuorumCnxManager and FastLeaderElection's message
//! layout, ZAB-WIRE.md §1, §2).
//!
//! A connection starts with the initiator's [`InitialMessage`]; nothing is written
//! back. [`incoming`] and [`initiator_keeps`] say which side keeps a connection (only
//! one initiated by the larger sid survives). After that each direction is a sequence
//! of frames, int length + body ([`encode_frame`], [`decode_frame`]), each body one
//! notification ([`encode_notification`], [`decode_notification`]).

use bytes::{BufMut, Bytes, BytesMut};

use super::reader::Input;
use super::WireError;
use crate::zab::message::{Notification, ServerState};
use crate::zab::Sid;

/// The initial message's protocol version of 3.5+ (one address).
pub const PROTOCOL_VERSION_V1: i64 = -65536;
/// The initial message's protocol version with several addresses (3.6+, sent only
/// with `zookeeper.multiAddress.enabled`).
pub const PROTOCOL_VERSION_V2: i64 = -65535;
/// The longest address text an initial message may carry (QuorumCnxManager.maxBuffer).
pub const MAX_ADDRESS_BYTES: usize = 2048;
/// The longest frame body (QuorumCnxManager.PACKETMAXSIZE, 512 KiB).
pub const PACKET_MAX_SIZE: usize = 512 * 1024;
/// The sid an observer without one announces (QuorumPeer.OBSERVER_ID, Long.MAX_VALUE).
pub const OBSERVER_ID: Sid = i64::MAX as u64;
/// The notification layout version ZooKeeper 3.5+ writes (Notification.CURRENTVERSION).
pub const NOTIFICATION_VERSION: i32 = 2;
/// The bytes of a version-2 notification before its config text (state, leader, zxid,
/// electionEpoch, peerEpoch, version, config length).
pub const NOTIFICATION_HEADER_BYTES: usize = 44;
/// The longest config text a notification can carry within [`PACKET_MAX_SIZE`]: a
/// configuration longer than this could never be sent in an election again, so keel's
/// leader refuses a reconfig to one (ZooKeeper commits it and its elections then fail).
pub const MAX_CONFIG_BYTES: usize = PACKET_MAX_SIZE - NOTIFICATION_HEADER_BYTES;

/// Which form of the initial message a peer sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handshake {
    /// Before 3.5: the first long is the sid itself, nothing follows.
    Legacy,
    /// [`PROTOCOL_VERSION_V1`]: sid, then one `host:port`.
    V1,
    /// [`PROTOCOL_VERSION_V2`]: sid, then `host:port|host:port...`.
    V2,
}

/// One election address as the initial message names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElectionAddress {
    /// The host as written (an IPv6 literal without its brackets).
    pub host: String,
    /// The port.
    pub port: u16,
}

/// The first bytes on an election connection, from its initiator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitialMessage {
    /// The form it came in.
    pub handshake: Handshake,
    /// The initiator's sid ([`OBSERVER_ID`] for an observer without one).
    pub sid: Sid,
    /// The initiator's election addresses to dial back, wildcard hosts left out (as
    /// ZooKeeper, ZOOKEEPER-2164); empty for [`Handshake::Legacy`] or when every host
    /// was a wildcard.
    pub addresses: Vec<ElectionAddress>,
}

impl InitialMessage {
    /// The 3.8 form ZooKeeper sends by default: V1 with one address.
    pub fn v1(sid: Sid, address: ElectionAddress) -> InitialMessage {
        InitialMessage {
            handshake: Handshake::V1,
            sid,
            addresses: vec![address],
        }
    }

    /// The bytes to write in one go (the receiver reads the address with a single
    /// read): protocol version, sid, int length + address text; the legacy form is the
    /// sid alone. IPv6 hosts are written as `[host]:port` (NetUtils.formatInetAddr).
    ///
    /// Errors: V1 without exactly one address, V2 without any, or an address text past
    /// [`MAX_ADDRESS_BYTES`].
    pub fn encode(&self) -> Result<Bytes, WireError> {
        let mut b = BytesMut::new();
        let version = match self.handshake {
            Handshake::Legacy => {
                b.put_i64(self.sid as i64);
                return Ok(b.freeze());
            }
            Handshake::V1 if self.addresses.len() != 1 => {
                return Err(WireError::Address(format!(
                    "V1 carries one address, not {}",
                    self.addresses.len()
                )))
            }
            Handshake::V1 => PROTOCOL_VERSION_V1,
            Handshake::V2 => PROTOCOL_VERSION_V2,
        };
        let text = self
            .addresses
            .iter()
            .map(|a| {
                if a.host.contains(':') {
                    format!("[{}]:{}", a.host, a.port)
                } else {
                    format!("{}:{}", a.host, a.port)
                }
            })
            .collect::<Vec<_>>()
            .join("|");
        if text.is_empty() || text.len() > MAX_ADDRESS_BYTES {
            return Err(WireError::AddressLength(text.len() as i32));
        }
        b.put_i64(version);
        b.put_i64(self.sid as i64);
        b.put_i32(text.len() as i32);
        b.put_slice(text.as_bytes());
        Ok(b.freeze())
    }

    /// Reads the initial message from the front of `buf`: `Ok(None)` until all of it
    /// has arrived, else the message and how many bytes it took (QuorumCnxManager
    /// `handleConnection`, `InitialMessage.parse`).
    ///
    /// Errors: a negative first long that is not V1/V2, an address length outside
    /// 1..=2048, an address that is not `host:port` with a numeric port.
    pub fn decode(buf: &[u8]) -> Result<Option<(InitialMessage, usize)>, WireError> {
        if buf.len() < 8 {
            return Ok(None);
        }
        let mut r = Input::new(buf);
        let first = r.long("initial message protocol version")?;
        let handshake = match first {
            v if v >= 0 => {
                let msg = InitialMessage {
                    handshake: Handshake::Legacy,
                    sid: v as u64,
                    addresses: Vec::new(),
                };
                return Ok(Some((msg, 8)));
            }
            PROTOCOL_VERSION_V1 => Handshake::V1,
            PROTOCOL_VERSION_V2 => Handshake::V2,
            other => return Err(WireError::ProtocolVersion(other)),
        };
        if buf.len() < 20 {
            return Ok(None);
        }
        let sid = r.long("initial message sid")? as u64;
        let len = r.int("initial message address length")?;
        if len <= 0 || len as usize > MAX_ADDRESS_BYTES {
            return Err(WireError::AddressLength(len));
        }
        if r.remaining() < len as usize {
            return Ok(None);
        }
        let text = String::from_utf8_lossy(r.take(len as usize, "address")?).into_owned();
        let mut addresses = Vec::new();
        for a in text.split('|') {
            let addr = parse_address(a)?;
            if !is_wildcard(&addr.host) {
                addresses.push(addr);
            }
        }
        let msg = InitialMessage {
            handshake,
            sid,
            addresses,
        };
        Ok(Some((msg, 20 + len as usize)))
    }
}

/// `host:port` or `[v6]:port` (ConfigUtils.getHostAndPort), port numeric.
fn parse_address(a: &str) -> Result<ElectionAddress, WireError> {
    let bad = || WireError::Address(a.to_string());
    let (host, port) = if let Some(rest) = a.strip_prefix('[') {
        let (host, port) = rest.split_once("]:").ok_or_else(bad)?;
        (host, port)
    } else {
        let (host, port) = a.split_once(':').ok_or_else(bad)?;
        if port.contains(':') {
            return Err(bad());
        }
        (host, port)
    };
    let port = port.parse::<u16>().map_err(|_| bad())?;
    Ok(ElectionAddress {
        host: host.to_string(),
        port,
    })
}

/// The wildcard literals ZooKeeper leaves out (it resolves names; a codec cannot, so a
/// host name that resolves to a wildcard is kept).
fn is_wildcard(host: &str) -> bool {
    matches!(host, "0.0.0.0" | "::" | "0:0:0:0:0:0:0:0")
}

/// What a member does with an election connection another member opened, by the sids
/// (QuorumCnxManager `handleConnection`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Incoming {
    /// The initiator's sid is larger: keep the connection, finishing any older one to
    /// that sid.
    Keep,
    /// The initiator's sid is smaller: close it and dial the initiator (at the address
    /// it sent, else the configured one), so the larger sid's connection survives. An
    /// [`OBSERVER_ID`] initiator lands here too: ZooKeeper gives it a fresh negative id,
    /// which has no address to dial.
    CloseAndConnectBack,
    /// Our own sid: ZooKeeper only logs a warning (a configuration error).
    OwnSid,
}

/// The tie-break on the receiving side: `my_sid` got a connection from `initiator`.
/// Sids compare as ZooKeeper's signed longs.
pub fn incoming(my_sid: Sid, initiator: Sid) -> Incoming {
    if initiator == OBSERVER_ID {
        return Incoming::CloseAndConnectBack;
    }
    match (initiator as i64).cmp(&(my_sid as i64)) {
        std::cmp::Ordering::Less => Incoming::CloseAndConnectBack,
        std::cmp::Ordering::Equal => Incoming::OwnSid,
        std::cmp::Ordering::Greater => Incoming::Keep,
    }
}

/// The tie-break on the initiating side: after sending its initial message to
/// `target`, `my_sid` keeps the connection unless the target's sid is larger (it then
/// closes it and waits for the target to dial back) (QuorumCnxManager
/// `startConnection`).
pub fn initiator_keeps(my_sid: Sid, target: Sid) -> bool {
    (target as i64) <= (my_sid as i64)
}

/// One frame: int length + `body`.
///
/// Errors: an empty body or one past [`PACKET_MAX_SIZE`] (the receiver would drop the
/// connection).
pub fn encode_frame(body: &[u8]) -> Result<Bytes, WireError> {
    if body.is_empty() || body.len() > PACKET_MAX_SIZE {
        return Err(WireError::FrameLength {
            len: body.len() as i64,
            max: PACKET_MAX_SIZE,
        });
    }
    let mut b = BytesMut::with_capacity(4 + body.len());
    b.put_i32(body.len() as i32);
    b.put_slice(body);
    Ok(b.freeze())
}

/// The first frame in `buf`: `Ok(None)` until it has fully arrived, else its body and
/// the bytes it took (RecvWorker).
///
/// Errors: a length outside 1..=[`PACKET_MAX_SIZE`] (checked as soon as the length
/// is in, so a hostile length never makes the caller buffer more).
pub fn decode_frame(buf: &[u8]) -> Result<Option<(&[u8], usize)>, WireError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if len <= 0 || len as usize > PACKET_MAX_SIZE {
        return Err(WireError::FrameLength {
            len: i64::from(len),
            max: PACKET_MAX_SIZE,
        });
    }
    let end = 4 + len as usize;
    if buf.len() < end {
        return Ok(None);
    }
    Ok(Some((&buf[4..end], end)))
}

fn state_of(v: i32) -> Result<ServerState, WireError> {
    Ok(match v {
        0 => ServerState::Looking,
        1 => ServerState::Following,
        2 => ServerState::Leading,
        3 => ServerState::Observing,
        other => return Err(WireError::UnknownState(other)),
    })
}

/// A notification's body in the version-2 layout (FastLeaderElection.buildMsg): int
/// state, long leader, long zxid, long electionEpoch, long peerEpoch, int version 2,
/// int config length, config text. `n.config` goes as it is, or `static_config` when
/// it is empty (ZooKeeper always sends its quorum verifier's text: `server.N=...`
/// lines and `version=`).
pub fn encode_notification(n: &Notification, static_config: &[u8]) -> Bytes {
    let config: &[u8] = if n.config.is_empty() {
        static_config
    } else {
        &n.config
    };
    let mut b = BytesMut::with_capacity(NOTIFICATION_HEADER_BYTES + config.len());
    b.put_i32(n.state.wire());
    b.put_i64(n.leader as i64);
    b.put_i64(n.zxid as i64);
    b.put_i64(n.election_epoch as i64);
    b.put_i64(n.peer_epoch as i64);
    b.put_i32(NOTIFICATION_VERSION);
    b.put_i32(config.len() as i32);
    b.put_slice(config);
    b.freeze()
}

/// Reads a notification body in any layout ZooKeeper 3.8 accepts (WorkerReceiver):
/// - 28 bytes (before ZOOKEEPER-107): no peerEpoch; it is the zxid's epoch;
/// - 40 bytes: version 0, whatever the last int says; no config;
/// - otherwise peerEpoch and version are read, and with version > 1 the config
///   (length 0..=body length, within the body); bytes after it are ignored, as with
///   version <= 1 everything after the version.
///
/// The layout's version is not kept: the core compares votes without it (ZooKeeper
/// uses it only for version-0 senders, before 3.4.6).
///
/// Errors: fewer than 28 bytes, a layout cut inside a field, a config length out of
/// range, a state other than 0..=3 (ZooKeeper ignores all of these).
pub fn decode_notification(body: &[u8]) -> Result<Notification, WireError> {
    let len = body.len();
    let short = |what: &str| WireError::Notification {
        len,
        what: what.to_string(),
    };
    if len < 28 {
        return Err(short("shorter than the 28 bytes of the oldest layout"));
    }
    let mut r = Input::new(body);
    let state = r.int("state")?;
    let leader = r.long("leader")? as u64;
    let zxid = r.long("zxid")?;
    let election_epoch = r.long("electionEpoch")? as u64;
    let (peer_epoch, version) = if len == 28 {
        // ZxidUtils.getEpochFromZxid: a signed shift.
        (zxid >> 32, 0)
    } else {
        let pe = r
            .long("peerEpoch")
            .map_err(|_| short("cut inside peerEpoch"))?;
        if len == 40 {
            (pe, 0)
        } else {
            (
                pe,
                r.int("version").map_err(|_| short("cut inside version"))?,
            )
        }
    };
    let mut config = Bytes::new();
    if version > 1 {
        let clen = r
            .int("config length")
            .map_err(|_| short("cut inside the config length"))?;
        if clen < 0 || clen as usize > len || clen as usize > r.remaining() {
            return Err(short(&format!("config length {clen} does not fit")));
        }
        config = Bytes::copy_from_slice(r.take(clen as usize, "config")?);
    }
    Ok(Notification {
        state: state_of(state)?,
        leader,
        zxid: zxid as u64,
        election_epoch,
        peer_epoch: peer_epoch as u64,
        config,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zab::message::NO_VOTE;
    use crate::zab::wire::hex;
    use proptest::prelude::*;

    /// ZAB-WIRE.md §1: V1 version, sid, int length + `host:port`.
    #[test]
    fn initial_message_golden_bytes() {
        let m = InitialMessage::v1(
            3,
            ElectionAddress {
                host: "127.0.0.1".into(),
                port: 3133,
            },
        );
        let want = hex("FFFFFFFFFFFF0000 0000000000000003 0000000E 3132372e302e302e313a33313333");
        assert_eq!(m.encode().unwrap()[..], want[..]);
        assert_eq!(
            InitialMessage::decode(&want).unwrap(),
            Some((m, want.len()))
        );
        for cut in 0..want.len() {
            assert_eq!(InitialMessage::decode(&want[..cut]).unwrap(), None, "{cut}");
        }
    }

    #[test]
    fn initial_message_old_forms_and_refusals() {
        let legacy = 7i64.to_be_bytes();
        let (m, used) = InitialMessage::decode(&legacy).unwrap().unwrap();
        assert_eq!((m.handshake, m.sid, used), (Handshake::Legacy, 7, 8));
        let mut v2 = hex("FFFFFFFFFFFF0001 0000000000000009");
        let text = b"[::1]:3100|0.0.0.0:3101|h:3102";
        v2.extend_from_slice(&(text.len() as i32).to_be_bytes());
        v2.extend_from_slice(text);
        let (m, _) = InitialMessage::decode(&v2).unwrap().unwrap();
        assert_eq!(m.handshake, Handshake::V2);
        assert_eq!(
            m.addresses,
            vec![
                ElectionAddress {
                    host: "::1".into(),
                    port: 3100
                },
                ElectionAddress {
                    host: "h".into(),
                    port: 3102
                }
            ],
            "the wildcard is left out"
        );
        assert_eq!(
            InitialMessage::decode(&hex("FFFFFFFFFFFF0002 00")),
            Err(WireError::ProtocolVersion(-65534))
        );
        assert_eq!(
            InitialMessage::decode(&hex("FFFFFFFFFFFF0000 0000000000000001 00000801")),
            Err(WireError::AddressLength(2049))
        );
        assert_eq!(
            InitialMessage::decode(&hex("FFFFFFFFFFFF0000 0000000000000001 00000000")),
            Err(WireError::AddressLength(0))
        );
        let two = InitialMessage {
            handshake: Handshake::V1,
            sid: 1,
            addresses: m.addresses.clone(),
        };
        assert!(two.encode().is_err(), "V1 names one address");
        let mut bad = hex("FFFFFFFFFFFF0000 0000000000000001 00000004");
        bad.extend_from_slice(b"h:xx");
        assert!(matches!(
            InitialMessage::decode(&bad),
            Err(WireError::Address(_))
        ));
    }

    #[test]
    fn the_larger_sid_keeps_the_connection() {
        assert_eq!(incoming(2, 3), Incoming::Keep);
        assert_eq!(incoming(3, 2), Incoming::CloseAndConnectBack);
        assert_eq!(incoming(3, 3), Incoming::OwnSid);
        assert_eq!(incoming(3, OBSERVER_ID), Incoming::CloseAndConnectBack);
        assert!(initiator_keeps(3, 2));
        assert!(!initiator_keeps(2, 3));
        for (a, b) in [(1u64, 2u64), (5, 1), (10, 11)] {
            // Exactly one of the two connections a pair may open survives.
            let a_to_b = initiator_keeps(a, b) && incoming(b, a) == Incoming::Keep;
            let b_to_a = initiator_keeps(b, a) && incoming(a, b) == Incoming::Keep;
            assert!(a_to_b != b_to_a, "{a} {b}");
        }
    }

    #[test]
    fn frames_are_bounded() {
        let f = encode_frame(b"abc").unwrap();
        assert_eq!(&f[..], &hex("00000003 616263")[..]);
        assert_eq!(decode_frame(&f).unwrap(), Some((&b"abc"[..], 7)));
        assert_eq!(decode_frame(&f[..6]).unwrap(), None);
        assert_eq!(decode_frame(&f[..2]).unwrap(), None);
        let too_big = ((PACKET_MAX_SIZE + 1) as i32).to_be_bytes();
        assert!(matches!(
            decode_frame(&too_big),
            Err(WireError::FrameLength { len: 524_289, .. })
        ));
        assert!(decode_frame(&0i32.to_be_bytes()).is_err());
        assert!(decode_frame(&(-1i32).to_be_bytes()).is_err());
        assert!(encode_frame(&[]).is_err());
        assert!(encode_frame(&vec![0; PACKET_MAX_SIZE + 1]).is_err());
        assert!(encode_frame(&vec![0; PACKET_MAX_SIZE]).is_ok());
    }

    /// ZAB-WIRE.md §2's table: 44 + N bytes.
    #[test]
    fn notification_golden_bytes() {
        let n = Notification {
            state: ServerState::Following,
            leader: 3,
            zxid: 0x2_0000_0005,
            election_epoch: 4,
            peer_epoch: 2,
            config: Bytes::from_static(b"version=0"),
        };
        let want = hex(
            "00000001 0000000000000003 0000000200000005 0000000000000004 0000000000000002
             00000002 00000009 76657273696f6e3d30",
        );
        assert_eq!(encode_notification(&n, b"unused")[..], want[..]);
        assert_eq!(decode_notification(&want).unwrap(), n);
        let empty = Notification {
            config: Bytes::new(),
            ..n.clone()
        };
        assert_eq!(encode_notification(&empty, b"version=0")[..], want[..]);
    }

    /// An observer's own vote is ZooKeeper's Long.MIN_VALUE triple.
    #[test]
    fn a_non_voters_vote_is_long_min_value() {
        let n = Notification::non_voter(1);
        assert_eq!(
            (n.leader, n.zxid, n.peer_epoch),
            (NO_VOTE, NO_VOTE, NO_VOTE)
        );
        let b = encode_notification(&n, b"x");
        assert_eq!(&b[4..12], &i64::MIN.to_be_bytes());
        assert_eq!(&b[12..20], &i64::MIN.to_be_bytes());
        assert_eq!(&b[28..36], &i64::MIN.to_be_bytes());
        let back = decode_notification(&b).unwrap();
        assert_eq!((back.leader, back.peer_epoch), (NO_VOTE, NO_VOTE));
    }

    #[test]
    fn older_layouts_decode() {
        let mut b28 = Vec::new();
        b28.extend_from_slice(&2i32.to_be_bytes());
        b28.extend_from_slice(&1i64.to_be_bytes());
        b28.extend_from_slice(&0x5_0000_0007i64.to_be_bytes());
        b28.extend_from_slice(&9i64.to_be_bytes());
        let n = decode_notification(&b28).unwrap();
        assert_eq!(
            (n.state, n.peer_epoch, n.zxid),
            (ServerState::Leading, 5, 0x5_0000_0007)
        );
        let mut b40 = b28.clone();
        b40.extend_from_slice(&6i64.to_be_bytes());
        b40.extend_from_slice(&7i32.to_be_bytes());
        let n = decode_notification(&b40).unwrap();
        assert_eq!(
            (n.peer_epoch, n.config.len()),
            (6, 0),
            "a 40-byte message is version 0"
        );
        // Version 1 (3.4.6+ before reconfig): no config, extra bytes ignored.
        let mut b44 = b40.clone();
        b44[36..40].copy_from_slice(&1i32.to_be_bytes());
        b44.extend_from_slice(&[0xff; 4]);
        assert_eq!(decode_notification(&b44).unwrap().peer_epoch, 6);
    }

    #[test]
    fn malformed_notifications_are_errors() {
        let good = encode_notification(
            &Notification {
                state: ServerState::Looking,
                leader: 1,
                zxid: 0,
                election_epoch: 1,
                peer_epoch: 0,
                config: Bytes::from_static(b"abc"),
            },
            b"",
        );
        for cut in 0..good.len() {
            if cut == 28 || cut == 40 {
                continue;
            }
            assert!(decode_notification(&good[..cut]).is_err(), "{cut}");
        }
        let mut bad_state = good.to_vec();
        bad_state[..4].copy_from_slice(&4i32.to_be_bytes());
        assert_eq!(
            decode_notification(&bad_state),
            Err(WireError::UnknownState(4))
        );
        let mut huge = good.to_vec();
        huge[40..44].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(decode_notification(&huge).is_err());
        let mut negative = good.to_vec();
        negative[40..44].copy_from_slice(&(-1i32).to_be_bytes());
        assert!(decode_notification(&negative).is_err());
    }

    fn state() -> impl Strategy<Value = ServerState> {
        prop_oneof![
            Just(ServerState::Looking),
            Just(ServerState::Following),
            Just(ServerState::Leading),
            Just(ServerState::Observing),
        ]
    }

    proptest! {
        #[test]
        fn notifications_round_trip(
            state in state(),
            leader: u64, zxid: u64, election_epoch: u64, peer_epoch: u64,
            config in proptest::collection::vec(any::<u8>(), 1..200),
        ) {
            let n = Notification { state, leader, zxid, election_epoch, peer_epoch, config: Bytes::from(config) };
            let body = encode_notification(&n, b"");
            let frame = encode_frame(&body).unwrap();
            let (got, used) = decode_frame(&frame).unwrap().unwrap();
            prop_assert_eq!(used, frame.len());
            prop_assert_eq!(decode_notification(got).unwrap(), n);
        }

        #[test]
        fn initial_messages_round_trip(sid in 0u64..=i64::MAX as u64 - 1, port: u16, v2: bool, host in "[a-z][a-z0-9.]{0,30}") {
            let addr = ElectionAddress { host, port };
            let m = InitialMessage {
                handshake: if v2 { Handshake::V2 } else { Handshake::V1 },
                sid,
                addresses: if v2 { vec![addr.clone(), addr] } else { vec![addr] },
            };
            let b = m.encode().unwrap();
            prop_assert_eq!(InitialMessage::decode(&b).unwrap(), Some((m, b.len())));
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..120)) {
            let _ = decode_notification(&b);
            let _ = InitialMessage::decode(&b);
            let _ = decode_frame(&b);
        }
    }
}

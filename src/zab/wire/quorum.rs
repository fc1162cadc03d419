//! [`Message`] <-> [`QuorumPacket`] for the quorum port, every variant both ways, with
//! each type's data as ZooKeeper lays it out (ZAB-WIRE.md §3, §4; Learner.java,
//! LearnerHandler.java, Leader.java).
//!
//! Data by type:
//! - FOLLOWERINFO / OBSERVERINFO: [`LearnerInfo`], zxid = acceptedEpoch<<32;
//! - LEADERINFO: int protocol version, zxid = newEpoch<<32;
//! - ACKEPOCH: int currentEpoch (or -1), zxid = last logged zxid;
//! - NEWLEADER: the quorum config text, zxid = newEpoch<<32;
//! - PROPOSAL / INFORM: the txn bytes ([`super::txn`]); UPTODATE: zxid -1;
//! - PING: null from the leader; from a learner the sessions it touched, `{long
//!   sessionId; int timeoutMs}*` ([`touched_sessions`]), echoing the leader's zxid
//!   and authinfo;
//! - ACK, COMMIT, DIFF, TRUNC, SNAP: null.
//!
//! SNAP is followed on the stream by ZooKeeper's DataTree serialization (§4.4) and the
//! string `"BenWasHere"`, which are not a QuorumPacket: [`encode_message`] writes them
//! after the packet, and [`from_packet`] reports [`Inbound::Snap`] so the caller reads
//! them next. Reading that stream (and producing it from keel's tree) is not built
//! yet: it needs ZooKeeper's session list, ACL cache (reference-counted ACL lists by
//! long id, -1 = OPEN_ACL_UNSAFE) and pre-order znodes with StatPersisted, as
//! src/import/snapshot.rs reads them from a snapshot file without its file header and
//! checksums.

use bytes::{BufMut, Bytes, BytesMut};
use jute::Record;

use super::packet::QuorumPacket;
use super::reader::Input;
use super::WireError;
use crate::zab::message::Message;
use crate::zab::{epoch_of, zxid, Sid};

/// ZooKeeper's quorum packet type numbers (Leader.java).
pub mod kind {
    /// A learner forwards a client request.
    pub const REQUEST: i32 = 1;
    /// A txn to log.
    pub const PROPOSAL: i32 = 2;
    /// A txn is durable on the learner.
    pub const ACK: i32 = 3;
    /// Txns up to zxid are committed.
    pub const COMMIT: i32 = 4;
    /// Liveness, both ways.
    pub const PING: i32 = 5;
    /// Session revalidation, both ways.
    pub const REVALIDATE: i32 = 6;
    /// A sync request is answered.
    pub const SYNC: i32 = 7;
    /// A committed txn for an observer.
    pub const INFORM: i32 = 8;
    /// Commit plus reconfig activation.
    pub const COMMITANDACTIVATE: i32 = 9;
    /// The end of a sync.
    pub const NEWLEADER: i32 = 10;
    /// A follower's first packet.
    pub const FOLLOWERINFO: i32 = 11;
    /// Start serving.
    pub const UPTODATE: i32 = 12;
    /// Sync by the txns after a zxid.
    pub const DIFF: i32 = 13;
    /// Sync by truncating first.
    pub const TRUNC: i32 = 14;
    /// Sync by a snapshot.
    pub const SNAP: i32 = 15;
    /// An observer's first packet.
    pub const OBSERVERINFO: i32 = 16;
    /// The proposed epoch.
    pub const LEADERINFO: i32 = 17;
    /// The answer to LEADERINFO.
    pub const ACKEPOCH: i32 = 18;
    /// Inform plus reconfig activation.
    pub const INFORMANDACTIVATE: i32 = 19;
}

/// The protocol version 3.4+ leaders and learners announce (0x10000).
pub const PROTOCOL_VERSION: i32 = 0x10000;

/// What the signature after a SNAP stream reads (LearnerHandler).
pub const SNAP_SIGNATURE: &str = "BenWasHere";

/// ZooKeeper's name of a packet type, None for a type it does not define.
pub fn kind_name(k: i32) -> Option<&'static str> {
    Some(match k {
        kind::REQUEST => "REQUEST",
        kind::PROPOSAL => "PROPOSAL",
        kind::ACK => "ACK",
        kind::COMMIT => "COMMIT",
        kind::PING => "PING",
        kind::REVALIDATE => "REVALIDATE",
        kind::SYNC => "SYNC",
        kind::INFORM => "INFORM",
        kind::COMMITANDACTIVATE => "COMMITANDACTIVATE",
        kind::NEWLEADER => "NEWLEADER",
        kind::FOLLOWERINFO => "FOLLOWERINFO",
        kind::UPTODATE => "UPTODATE",
        kind::DIFF => "DIFF",
        kind::TRUNC => "TRUNC",
        kind::SNAP => "SNAP",
        kind::OBSERVERINFO => "OBSERVERINFO",
        kind::LEADERINFO => "LEADERINFO",
        kind::ACKEPOCH => "ACKEPOCH",
        kind::INFORMANDACTIVATE => "INFORMANDACTIVATE",
        _ => return None,
    })
}

/// Which end of a quorum connection writes: the one difference is PING's data (null
/// from the leader, a touched-session list, possibly empty, from a learner: a leader
/// reads a null one as an error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The leader's end.
    Leader,
    /// A follower's or observer's end.
    Learner,
}

/// jute `LearnerInfo{long serverid; int protocolVersion; long configVersion}`, the data
/// of FOLLOWERINFO and OBSERVERINFO (20 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LearnerInfo {
    /// The learner's sid.
    pub sid: Sid,
    /// Its protocol version ([`PROTOCOL_VERSION`]).
    pub protocol_version: i32,
    /// Its quorum config version.
    pub config_version: i64,
}

impl LearnerInfo {
    /// The 20 bytes.
    pub fn to_bytes(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(20);
        b.put_i64(self.sid as i64);
        b.put_i32(self.protocol_version);
        b.put_i64(self.config_version);
        b.freeze()
    }

    /// Reads the first 20 bytes; more are ignored, as LearnerHandler reads them.
    ///
    /// Errors: fewer than 20 bytes. ZooKeeper also takes 8 (sid only, before 3.4) and 12
    /// (no config version, before 3.5); neither can sync with a 3.8 leader's protocol,
    /// and keel's message has no way to say "no config version", so they are refused.
    pub fn decode(data: &[u8]) -> Result<LearnerInfo, WireError> {
        if data.len() < 20 {
            return Err(WireError::PacketData {
                name: "LearnerInfo",
                what: format!("{} bytes, not the 20 of ZooKeeper 3.5+", data.len()),
            });
        }
        let mut r = Input::new(data);
        Ok(LearnerInfo {
            sid: r.long("serverid")? as u64,
            protocol_version: r.int("protocolVersion")?,
            config_version: r.long("configVersion")?,
        })
    }
}

/// One entry of a learner's PING data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TouchedSession {
    /// The session.
    pub session_id: i64,
    /// Its timeout, ms.
    pub timeout_ms: i32,
}

/// The sessions a learner's PING reports (LearnerHandler: read until the data runs
/// out); [`from_packet`] puts them in [`Message::Ping`]'s `touched`.
///
/// Errors: data that is not a whole number of 12-byte entries.
pub fn touched_sessions(data: &[u8]) -> Result<Vec<TouchedSession>, WireError> {
    if !data.len().is_multiple_of(12) {
        return Err(WireError::PacketData {
            name: "PING",
            what: format!("{} bytes of sessions, not a multiple of 12", data.len()),
        });
    }
    let mut r = Input::new(data);
    let mut out = Vec::with_capacity(data.len() / 12);
    while r.remaining() > 0 {
        out.push(TouchedSession {
            session_id: r.long("sessionId")?,
            timeout_ms: r.int("timeout")?,
        });
    }
    Ok(out)
}

fn int_data(v: i32) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(&v.to_be_bytes()))
}

fn epoch_zxid(epoch: u32) -> i64 {
    zxid(epoch, 0) as i64
}

/// The packet `msg` travels as, written by `side`.
///
/// Errors: a notification (election port).
pub fn to_packet(msg: &Message, side: Side) -> Result<QuorumPacket, WireError> {
    use kind as k;
    let p = |t, z: u64, data| QuorumPacket::new(t, z as i64, data);
    Ok(match msg {
        Message::Notification(_) => return Err(WireError::WrongPort("a notification")),
        Message::FollowerInfo {
            accepted_epoch,
            sid,
            protocol_version,
            config_version,
        }
        | Message::ObserverInfo {
            accepted_epoch,
            sid,
            protocol_version,
            config_version,
        } => {
            let t = if matches!(msg, Message::FollowerInfo { .. }) {
                k::FOLLOWERINFO
            } else {
                k::OBSERVERINFO
            };
            let info = LearnerInfo {
                sid: *sid,
                protocol_version: *protocol_version,
                config_version: *config_version,
            };
            QuorumPacket::new(t, epoch_zxid(*accepted_epoch), Some(info.to_bytes()))
        }
        Message::LeaderInfo {
            new_epoch,
            protocol_version,
        } => QuorumPacket::new(
            k::LEADERINFO,
            epoch_zxid(*new_epoch),
            int_data(*protocol_version),
        ),
        Message::AckEpoch {
            last_logged_zxid,
            current_epoch,
        } => p(k::ACKEPOCH, *last_logged_zxid, int_data(*current_epoch)),
        Message::Diff { zxid } => p(k::DIFF, *zxid, None),
        Message::Trunc { zxid } => p(k::TRUNC, *zxid, None),
        Message::Snap { zxid, .. } => p(k::SNAP, *zxid, None),
        Message::NewLeader { epoch, config } => {
            QuorumPacket::new(k::NEWLEADER, epoch_zxid(*epoch), Some(config.clone()))
        }
        Message::UpToDate { committed } => {
            QuorumPacket::new(k::UPTODATE, committed.map_or(-1, |z| z as i64), None)
        }
        Message::Proposal { zxid, txn } => p(k::PROPOSAL, *zxid, Some(txn.clone())),
        Message::Ack { zxid } => p(k::ACK, *zxid, None),
        Message::Commit { zxid } => p(k::COMMIT, *zxid, None),
        Message::Inform { zxid, txn } => p(k::INFORM, *zxid, Some(txn.clone())),
        Message::CommitAndActivate { zxid, leader } => p(
            k::COMMITANDACTIVATE,
            *zxid,
            Some(Bytes::copy_from_slice(&leader.to_be_bytes())),
        ),
        Message::InformAndActivate { zxid, leader, txn } => {
            let mut b = BytesMut::with_capacity(8 + txn.len());
            b.put_u64(*leader);
            b.put_slice(txn);
            p(k::INFORMANDACTIVATE, *zxid, Some(b.freeze()))
        }
        Message::Ping { zxid, touched } => {
            let data = match side {
                Side::Leader => None,
                Side::Learner => {
                    let mut b = BytesMut::with_capacity(touched.len() * 12);
                    for (session_id, timeout_ms) in touched {
                        b.put_i64(*session_id);
                        b.put_i32(*timeout_ms);
                    }
                    Some(b.freeze())
                }
            };
            p(k::PING, *zxid, data)
        }
        Message::Request {
            session_id,
            cxid,
            opcode,
            body,
            auth,
        } => {
            let mut b = BytesMut::with_capacity(REQUEST_HEADER_BYTES + body.len());
            put_request_data(&mut b, *session_id, *cxid, *opcode, body);
            let mut packet = QuorumPacket::new(k::REQUEST, -1, Some(b.freeze()));
            packet.authinfo = Some(auth.clone());
            packet
        }
        Message::Revalidate {
            session_id,
            timeout_ms,
        } => {
            let mut b = BytesMut::with_capacity(12);
            b.put_i64(*session_id);
            b.put_i32(*timeout_ms);
            QuorumPacket::new(k::REVALIDATE, -1, Some(b.freeze()))
        }
        Message::RevalidateReply { session_id, valid } => {
            let mut b = BytesMut::with_capacity(9);
            b.put_i64(*session_id);
            b.put_u8(u8::from(*valid));
            QuorumPacket::new(k::REVALIDATE, -1, Some(b.freeze()))
        }
        Message::Sync => QuorumPacket::new(k::SYNC, 0, None),
    })
}

/// Bytes before a REQUEST's body in its data: sessionId (8), cxid (4), type (4).
const REQUEST_HEADER_BYTES: usize = 16;

/// Writes a REQUEST packet's data, the learner's forwarded client request: sessionId
/// (i64), cxid (i32), type (i32), then the request's body as the client sent it
/// (ZAB-WIRE.md §8, REQUEST). `to_packet` and `encode_message` both write it here.
fn put_request_data(out: &mut BytesMut, session_id: i64, cxid: i32, opcode: i32, body: &[u8]) {
    out.put_i64(session_id);
    out.put_i32(cxid);
    out.put_i32(opcode);
    out.put_slice(body);
}

/// Writes `msg` as `side` would on the quorum stream: its packet, and for SNAP the
/// snapshot bytes (which must be ZooKeeper's DataTree serialization, §4.4) and the
/// signature after it.
///
/// Errors: as [`to_packet`].
pub fn encode_message(msg: &Message, side: Side, out: &mut BytesMut) -> Result<(), WireError> {
    // The packets of every write are written from the message: the packet `to_packet`
    // builds would copy a REQUEST's body, clone its Ids (three allocations) and clone a
    // txn's `Bytes` (an atomic count shared with the storage thread and the other
    // learners' copies). Issue 16.
    match msg {
        Message::Request {
            session_id,
            cxid,
            opcode,
            body,
            auth,
        } => {
            out.put_i32(kind::REQUEST);
            out.put_i64(-1);
            out.put_i32((REQUEST_HEADER_BYTES + body.len()) as i32);
            put_request_data(out, *session_id, *cxid, *opcode, body);
            out.put_i32(auth.len() as i32);
            for id in auth {
                id.encode(out);
            }
        }
        Message::Proposal { zxid, txn } => put_packet(out, kind::PROPOSAL, *zxid, Some(txn)),
        Message::Inform { zxid, txn } => put_packet(out, kind::INFORM, *zxid, Some(txn)),
        Message::Ack { zxid } => put_packet(out, kind::ACK, *zxid, None),
        Message::Commit { zxid } => put_packet(out, kind::COMMIT, *zxid, None),
        _ => {
            to_packet(msg, side)?.encode(out);
            if let Message::Snap { snapshot, .. } = msg {
                out.put_slice(snapshot);
                out.put_i32(SNAP_SIGNATURE.len() as i32);
                out.put_slice(SNAP_SIGNATURE.as_bytes());
            }
        }
    }
    Ok(())
}

/// A packet of `kind` with `zxid`, `data` (`None`: jute's null) and null authinfo, as
/// [`QuorumPacket::encode`] writes it.
fn put_packet(out: &mut BytesMut, kind: i32, zxid: u64, data: Option<&[u8]>) {
    out.put_i32(kind);
    out.put_i64(zxid as i64);
    match data {
        Some(d) => {
            out.put_i32(d.len() as i32);
            out.put_slice(d);
        }
        None => out.put_i32(-1),
    }
    out.put_i32(-1);
}

/// What a quorum packet says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Inbound {
    /// A message.
    Message(Message),
    /// SNAP with the leader's zxid: the DataTree stream and the signature follow on the
    /// connection; [`Message::Snap`] is whole only once they are read.
    Snap {
        /// The zxid of the snapshot's state.
        zxid: u64,
    },
}

fn data_int(p: &QuorumPacket, name: &'static str) -> Result<i32, WireError> {
    match p.data.as_deref() {
        Some(d) if d.len() >= 4 => Ok(i32::from_be_bytes([d[0], d[1], d[2], d[3]])),
        other => Err(WireError::PacketData {
            name,
            what: format!(
                "data of {} bytes, not an int",
                other.map_or(-1, |d| d.len() as i64)
            ),
        }),
    }
}

/// The message a packet carries. Authinfo is part of REQUEST only; a zxid field a type does not use (UPTODATE's -1)
/// is not checked, and neither is data a type does not use, as ZooKeeper reads
/// neither. An int datum (LEADERINFO, ACKEPOCH) is the first 4 bytes, as
/// ByteBuffer.getInt reads it.
///
/// Errors: an unknown type; data that does not fit the type (a COMMITANDACTIVATE or
/// INFORMANDACTIVATE without its 8-byte leader sid, a
/// REQUEST under 16 bytes, a REVALIDATE neither 12 nor 9 bytes, (LearnerInfo under 20 bytes, an int
/// under 4, a null PROPOSAL or INFORM, a learner PING with data that is not whole
/// session entries).
pub fn from_packet(mut p: QuorumPacket) -> Result<Inbound, WireError> {
    use kind as k;
    let name = kind_name(p.kind).ok_or(WireError::UnknownPacketType(p.kind))?;
    let z = p.zxid as u64;
    // Moved out, not cloned: a REQUEST's Ids are three allocations to copy, and a
    // clone of data copied from the read buffer allocates its shared count (issue 16).
    let txn = |p: &mut QuorumPacket| {
        p.data.take().ok_or_else(|| WireError::PacketData {
            name,
            what: "null txn data".into(),
        })
    };
    let msg = match p.kind {
        k::FOLLOWERINFO | k::OBSERVERINFO => {
            let info = LearnerInfo::decode(p.data.as_deref().unwrap_or_default())?;
            let accepted_epoch = epoch_of(z);
            if p.kind == k::FOLLOWERINFO {
                Message::FollowerInfo {
                    accepted_epoch,
                    sid: info.sid,
                    protocol_version: info.protocol_version,
                    config_version: info.config_version,
                }
            } else {
                Message::ObserverInfo {
                    accepted_epoch,
                    sid: info.sid,
                    protocol_version: info.protocol_version,
                    config_version: info.config_version,
                }
            }
        }
        k::LEADERINFO => Message::LeaderInfo {
            new_epoch: epoch_of(z),
            protocol_version: data_int(&p, name)?,
        },
        k::ACKEPOCH => Message::AckEpoch {
            last_logged_zxid: z,
            current_epoch: data_int(&p, name)?,
        },
        k::DIFF => Message::Diff { zxid: z },
        k::TRUNC => Message::Trunc { zxid: z },
        k::SNAP => return Ok(Inbound::Snap { zxid: z }),
        k::NEWLEADER => Message::NewLeader {
            epoch: epoch_of(z),
            config: p.data.take().unwrap_or_default(),
        },
        k::UPTODATE => Message::UpToDate {
            committed: (p.zxid >= 0).then_some(z),
        },
        k::PROPOSAL => Message::Proposal {
            zxid: z,
            txn: txn(&mut p)?,
        },
        k::ACK => Message::Ack { zxid: z },
        k::COMMIT => Message::Commit { zxid: z },
        k::INFORM => Message::Inform {
            zxid: z,
            txn: txn(&mut p)?,
        },
        k::COMMITANDACTIVATE | k::INFORMANDACTIVATE => {
            let d = txn(&mut p)?;
            if d.len() < 8 {
                return Err(WireError::PacketData {
                    name,
                    what: format!("data of {} bytes, not a long leader sid", d.len()),
                });
            }
            let leader = u64::from_be_bytes(d[..8].try_into().expect("8 bytes"));
            if p.kind == k::COMMITANDACTIVATE {
                Message::CommitAndActivate { zxid: z, leader }
            } else {
                Message::InformAndActivate {
                    zxid: z,
                    leader,
                    txn: d.slice(8..),
                }
            }
        }
        k::PING => {
            let touched = match &p.data {
                Some(d) => touched_sessions(d)?
                    .into_iter()
                    .map(|t| (t.session_id, t.timeout_ms))
                    .collect(),
                None => Vec::new(),
            };
            Message::Ping { zxid: z, touched }
        }
        k::REQUEST => {
            let d = p.data.take().unwrap_or_default();
            let mut r = Input::new(&d);
            let session_id = r.long("sessionId")?;
            let cxid = r.int("cxid")?;
            let opcode = r.int("type")?;
            Message::Request {
                session_id,
                cxid,
                opcode,
                body: d.slice(REQUEST_HEADER_BYTES..),
                auth: p.authinfo.take().unwrap_or_default(),
            }
        }
        // The same type both ways: the learner's question is a long and an int (12
        // bytes), the leader's answer a long and a boolean (9 bytes).
        k::REVALIDATE => {
            let d = p.data.take().unwrap_or_default();
            let mut r = Input::new(&d);
            let session_id = r.long("sessionId")?;
            match d.len() {
                12 => Message::Revalidate {
                    session_id,
                    timeout_ms: r.int("timeout")?,
                },
                9 => Message::RevalidateReply {
                    session_id,
                    valid: d[8] != 0,
                },
                n => {
                    return Err(WireError::PacketData {
                        name,
                        what: format!("{n} bytes, neither a question (12) nor an answer (9)"),
                    })
                }
            }
        }
        k::SYNC => Message::Sync,
        other => return Err(WireError::NoMessage { kind: other, name }),
    };
    Ok(Inbound::Message(msg))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zab::wire::hex;
    use crate::zab::wire::packet::Limits;
    use jute::Id;
    use proptest::prelude::*;

    fn round_trip(msg: &Message, side: Side) -> Message {
        let mut b = BytesMut::new();
        encode_message(msg, side, &mut b).unwrap();
        let (p, used) = QuorumPacket::decode(&b, Limits::default())
            .unwrap()
            .unwrap();
        match from_packet(p.clone()).unwrap() {
            Inbound::Message(m) => {
                assert_eq!(used, b.len());
                m
            }
            Inbound::Snap { zxid } => {
                // The stream follows the packet verbatim, then the signature.
                let Message::Snap { snapshot, .. } = msg else {
                    panic!("SNAP from {msg:?}")
                };
                let rest = &b[used..];
                assert_eq!(&rest[..snapshot.len()], &snapshot[..]);
                assert_eq!(&rest[snapshot.len() + 4..], SNAP_SIGNATURE.as_bytes());
                Message::Snap {
                    zxid,
                    snapshot: snapshot.clone(),
                }
            }
        }
    }

    #[test]
    fn the_packets_of_a_write_are_written_as_to_packet_builds_them() {
        let ids = |n: usize| {
            (0..n)
                .map(|i| Id {
                    scheme: format!("scheme{i}"),
                    id: format!("id{i}"),
                })
                .collect::<Vec<_>>()
        };
        for (body, auth) in [
            (Bytes::new(), Vec::new()),
            (Bytes::from_static(b"\0\0\0\x02/a\xff\xff\xff\xff"), ids(1)),
            (Bytes::from(vec![7u8; 300]), ids(3)),
        ] {
            let msg = Message::Request {
                session_id: 0x1234_5678_9abc,
                cxid: -7,
                opcode: 5,
                body,
                auth,
            };
            let mut b = BytesMut::new();
            encode_message(&msg, Side::Learner, &mut b).unwrap();
            assert_eq!(b.to_vec(), bytes_of(&msg, Side::Learner), "{msg:?}");
            assert_eq!(round_trip(&msg, Side::Learner), msg);
        }
        let txn = Bytes::from(vec![3u8; 150]);
        for msg in [
            Message::Proposal {
                zxid: 0x5_0000_0007,
                txn: txn.clone(),
            },
            Message::Inform {
                zxid: 0x5_0000_0008,
                txn: Bytes::new(),
            },
            Message::Ack {
                zxid: 0x5_0000_0007,
            },
            Message::Commit {
                zxid: 0x5_0000_0007,
            },
        ] {
            for side in [Side::Leader, Side::Learner] {
                let mut b = BytesMut::new();
                encode_message(&msg, side, &mut b).unwrap();
                assert_eq!(b.to_vec(), bytes_of(&msg, side), "{msg:?}");
            }
        }
    }

    fn bytes_of(msg: &Message, side: Side) -> Vec<u8> {
        to_packet(msg, side).unwrap().to_bytes().to_vec()
    }

    /// Byte layouts from ZAB-WIRE.md §3, §4.1.
    #[test]
    fn golden_bytes() {
        let fi = Message::FollowerInfo {
            accepted_epoch: 2,
            sid: 4,
            protocol_version: PROTOCOL_VERSION,
            config_version: 0,
        };
        assert_eq!(
            bytes_of(&fi, Side::Learner),
            hex("0000000B 0000000200000000 00000014 0000000000000004 00010000 0000000000000000 FFFFFFFF")
        );
        let li = Message::LeaderInfo {
            new_epoch: 3,
            protocol_version: PROTOCOL_VERSION,
        };
        assert_eq!(
            bytes_of(&li, Side::Leader),
            hex("00000011 0000000300000000 00000004 00010000 FFFFFFFF")
        );
        let ae = Message::AckEpoch {
            last_logged_zxid: 0x2_0000_0007,
            current_epoch: -1,
        };
        assert_eq!(
            bytes_of(&ae, Side::Learner),
            hex("00000012 0000000200000007 00000004 FFFFFFFF FFFFFFFF")
        );
        assert_eq!(
            bytes_of(&Message::UpToDate { committed: None }, Side::Leader),
            hex("0000000C FFFFFFFFFFFFFFFF FFFFFFFF FFFFFFFF")
        );
        let ping = Message::Ping {
            zxid: 0x3_0000_0001,
            touched: Vec::new(),
        };
        assert_eq!(
            bytes_of(&ping, Side::Leader),
            hex("00000005 0000000300000001 FFFFFFFF FFFFFFFF")
        );
        assert_eq!(
            bytes_of(&ping, Side::Learner),
            hex("00000005 0000000300000001 00000000 FFFFFFFF"),
            "a learner's ping has a (here empty) session list, never null"
        );
        let nl = Message::NewLeader {
            epoch: 3,
            config: Bytes::from_static(b"version=0"),
        };
        assert_eq!(
            bytes_of(&nl, Side::Leader),
            hex("0000000A 0000000300000000 00000009 76657273696f6e3d30 FFFFFFFF")
        );
    }

    /// REQUEST, REVALIDATE and SYNC as Learner.request, Learner.validateSession,
    /// LearnerHandler's REVALIDATE answer and Leader.sendSync write them.
    #[test]
    fn requests_revalidations_and_syncs_have_zookeepers_layout() {
        let req = Message::Request {
            session_id: 0x0200_0000_0000_0001,
            cxid: 7,
            opcode: 1,
            body: Bytes::from_static(b"\x00\x00\x00\x02/a"),
            auth: vec![Id {
                scheme: "ip".into(),
                id: "127.0.0.1".into(),
            }],
        };
        assert_eq!(
            bytes_of(&req, Side::Learner),
            hex("00000001 FFFFFFFFFFFFFFFF 00000016 0200000000000001 00000007 00000001 00000002 2F61 \
                 00000001 00000002 6970 00000009 3132372E302E302E31")
        );
        let q = Message::Revalidate {
            session_id: 2,
            timeout_ms: 30_000,
        };
        assert_eq!(
            bytes_of(&q, Side::Learner),
            hex("00000006 FFFFFFFFFFFFFFFF 0000000C 0000000000000002 00007530 FFFFFFFF")
        );
        let a = Message::RevalidateReply {
            session_id: 2,
            valid: true,
        };
        assert_eq!(
            bytes_of(&a, Side::Leader),
            hex("00000006 FFFFFFFFFFFFFFFF 00000009 0000000000000002 01 FFFFFFFF")
        );
        assert_eq!(
            bytes_of(&Message::Sync, Side::Leader),
            hex("00000007 0000000000000000 FFFFFFFF FFFFFFFF")
        );
        for m in [req, q, a, Message::Sync] {
            assert_eq!(round_trip(&m, Side::Learner), m);
        }
        let odd = QuorumPacket::new(kind::REVALIDATE, -1, Some(Bytes::from_static(&[0; 10])));
        assert!(from_packet(odd.clone()).is_err());
        let short = QuorumPacket::new(kind::REQUEST, -1, Some(Bytes::from_static(&[0; 15])));
        assert!(from_packet(short.clone()).is_err());
    }

    #[test]
    fn learner_pings_carry_sessions() {
        let mut d = Vec::new();
        d.extend_from_slice(&0x1000_0000_0000_0001i64.to_be_bytes());
        d.extend_from_slice(&30_000i32.to_be_bytes());
        assert_eq!(
            touched_sessions(&d).unwrap(),
            vec![TouchedSession {
                session_id: 0x1000_0000_0000_0001,
                timeout_ms: 30_000
            }]
        );
        let p = QuorumPacket::new(kind::PING, 5, Some(Bytes::from(d.clone())));
        assert_eq!(
            from_packet(p.clone()).unwrap(),
            Inbound::Message(Message::Ping {
                zxid: 5,
                touched: vec![(0x1000_0000_0000_0001, 30_000)]
            })
        );
        let ping = Message::Ping {
            zxid: 5,
            touched: vec![(0x1000_0000_0000_0001, 30_000)],
        };
        assert_eq!(
            bytes_of(&ping, Side::Learner),
            hex("00000005 0000000000000005 0000000C 1000000000000001 00007530 FFFFFFFF")
        );
        let p = QuorumPacket::new(kind::PING, 5, Some(Bytes::copy_from_slice(&d[..11])));
        assert!(from_packet(p.clone()).is_err());
    }

    #[test]
    fn packets_without_a_message_are_typed_errors() {
        // COMMITANDACTIVATE and INFORMANDACTIVATE need their 8-byte leader sid.
        for t in [9, 19] {
            let p = QuorumPacket::new(t, 0, Some(Bytes::from_static(&[0; 7])));
            assert!(matches!(
                from_packet(p.clone()),
                Err(WireError::PacketData { .. })
            ));
        }
        for t in [0, 20, -1, i32::MAX] {
            let p = QuorumPacket::new(t, 0, None);
            assert_eq!(from_packet(p.clone()), Err(WireError::UnknownPacketType(t)));
        }
        let short = QuorumPacket::new(kind::FOLLOWERINFO, 0, Some(Bytes::from_static(&[0; 12])));
        assert!(matches!(
            from_packet(short.clone()),
            Err(WireError::PacketData { .. })
        ));
        let null = QuorumPacket::new(kind::OBSERVERINFO, 0, None);
        assert!(from_packet(null.clone()).is_err());
        let null = QuorumPacket::new(kind::LEADERINFO, 0, None);
        assert!(from_packet(null.clone()).is_err());
        let short = QuorumPacket::new(kind::ACKEPOCH, 0, Some(Bytes::from_static(&[0; 3])));
        assert!(from_packet(short.clone()).is_err());
        for t in [kind::PROPOSAL, kind::INFORM] {
            assert!(from_packet(QuorumPacket::new(t, 1, None)).is_err());
        }
        assert_eq!(
            to_packet(
                &Message::Notification(crate::zab::message::Notification {
                    state: crate::zab::message::ServerState::Looking,
                    leader: 1,
                    zxid: 0,
                    election_epoch: 0,
                    peer_epoch: 0,
                    config: Bytes::new(),
                }),
                Side::Leader
            ),
            Err(WireError::WrongPort("a notification"))
        );
    }

    fn bytes() -> impl Strategy<Value = Bytes> {
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(Bytes::from)
    }

    /// Every quorum-port variant.
    fn message() -> impl Strategy<Value = Message> {
        prop_oneof![
            (any::<u32>(), any::<u64>(), any::<i32>(), any::<i64>()).prop_map(|(a, s, p, c)| {
                Message::FollowerInfo {
                    accepted_epoch: a,
                    sid: s,
                    protocol_version: p,
                    config_version: c,
                }
            }),
            (any::<u32>(), any::<u64>(), any::<i32>(), any::<i64>()).prop_map(|(a, s, p, c)| {
                Message::ObserverInfo {
                    accepted_epoch: a,
                    sid: s,
                    protocol_version: p,
                    config_version: c,
                }
            }),
            (any::<u32>(), any::<i32>()).prop_map(|(e, p)| Message::LeaderInfo {
                new_epoch: e,
                protocol_version: p
            }),
            (any::<u64>(), any::<i32>()).prop_map(|(z, e)| Message::AckEpoch {
                last_logged_zxid: z,
                current_epoch: e
            }),
            any::<u64>().prop_map(|zxid| Message::Diff { zxid }),
            any::<u64>().prop_map(|zxid| Message::Trunc { zxid }),
            (any::<u64>(), bytes()).prop_map(|(zxid, snapshot)| Message::Snap { zxid, snapshot }),
            (any::<u32>(), bytes())
                .prop_map(|(epoch, config)| Message::NewLeader { epoch, config }),
            proptest::option::of(0..i64::MAX as u64)
                .prop_map(|committed| Message::UpToDate { committed }),
            (any::<u64>(), bytes()).prop_map(|(zxid, txn)| Message::Proposal { zxid, txn }),
            any::<u64>().prop_map(|zxid| Message::Ack { zxid }),
            any::<u64>().prop_map(|zxid| Message::Commit { zxid }),
            (any::<u64>(), bytes()).prop_map(|(zxid, txn)| Message::Inform { zxid, txn }),
            (any::<u64>(), any::<u64>())
                .prop_map(|(zxid, leader)| Message::CommitAndActivate { zxid, leader }),
            (any::<u64>(), any::<u64>(), bytes())
                .prop_map(|(zxid, leader, txn)| Message::InformAndActivate { zxid, leader, txn }),
            any::<u64>().prop_map(|zxid| Message::Ping {
                zxid,
                touched: Vec::new()
            }),
            (
                any::<i64>(),
                any::<i32>(),
                any::<i32>(),
                bytes(),
                proptest::collection::vec(("[a-z]{0,8}", "[ -~]{0,16}"), 0..3)
            )
                .prop_map(|(session_id, cxid, opcode, body, ids)| Message::Request {
                    session_id,
                    cxid,
                    opcode,
                    body,
                    auth: ids
                        .into_iter()
                        .map(|(scheme, id)| Id { scheme, id })
                        .collect(),
                }),
            (any::<i64>(), any::<i32>()).prop_map(|(session_id, timeout_ms)| Message::Revalidate {
                session_id,
                timeout_ms
            }),
            (any::<i64>(), any::<bool>())
                .prop_map(|(session_id, valid)| Message::RevalidateReply { session_id, valid }),
            Just(Message::Sync),
        ]
    }

    proptest! {
        #[test]
        fn every_message_round_trips(msg in message(), leader_side: bool) {
            let side = if leader_side { Side::Leader } else { Side::Learner };
            prop_assert_eq!(round_trip(&msg, side), msg);
        }

        #[test]
        fn learner_pings_round_trip_their_sessions(zxid: u64, touched in proptest::collection::vec((any::<i64>(), any::<i32>()), 0..8)) {
            let msg = Message::Ping { zxid, touched };
            prop_assert_eq!(round_trip(&msg, Side::Learner), msg);
        }

        #[test]
        fn arbitrary_packets_never_panic(kind in 0i32..21, zxid: i64, data in proptest::option::of(bytes())) {
            let _ = from_packet(QuorumPacket::new(kind, zxid, data));
        }
    }
}

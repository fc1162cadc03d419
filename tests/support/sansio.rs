//! Decoding what a sans-I/O [`Server`](keel::server::Server) sends, for the tests that
//! drive the state machine directly (tests/state_machine.rs, tests/member.rs).

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use bytes::Bytes;
use jute::*;
use keel::server::{Input, Outbound, Settings};

/// The settings these tests start from: tickTime 2 s, session timeouts 4–40 s, the
/// super user `super:test`, extended types on, no storage (txns apply at once), no
/// snapshots. A test changes what it needs with `Settings { .., ..settings() }`.
pub fn settings() -> Settings {
    let mut s = Settings {
        super_digest: Some(keel::tree::acl::digest_id("super:test")),
        container_check_interval_ms: 1000,
        durable: false,
        ..Settings::default()
    };
    s.prep.extended_types = true;
    s
}

/// As [`settings`], without a super user and with txns that wait for
/// [`Input::Durable`] (the runtime's storage, or an ensemble's commit).
pub fn logged_settings() -> Settings {
    Settings {
        super_digest: None,
        durable: true,
        ..settings()
    }
}

/// A connection `conn` accepted from 127.0.0.1:5000.
pub fn connected(conn: u64) -> Input {
    Input::Connected {
        conn,
        addr: "127.0.0.1:5000".parse().unwrap(),
    }
}

/// The ConnectRequest of a new session asking for `timeout_ms`.
pub fn new_session(conn: u64, timeout_ms: i32) -> Input {
    Input::Handshake {
        conn,
        req: ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            time_out_ms: timeout_ms,
            session_id: 0,
            passwd: Bytes::from_static(&[0; 16]),
            read_only: false,
        },
    }
}

/// A create of `path` open to everyone (flags: 0 persistent, 1 ephemeral).
pub fn create_request(path: &str, data: &[u8], flags: i32) -> CreateRequest {
    CreateRequest {
        path: path.into(),
        data: Some(Bytes::copy_from_slice(data)),
        acl: vec![Acl {
            perms: 31,
            id: Id {
                scheme: "world".into(),
                id: "anyone".into(),
            },
        }],
        flags,
    }
}

/// A decoded packet the server sent.
#[derive(Debug, Clone, PartialEq)]
pub enum Got {
    Reply {
        xid: i32,
        zxid: i64,
        err: i32,
        body: Bytes,
    },
    Event {
        event_type: i32,
        path: String,
    },
    Connected {
        session_id: i64,
        timeout_ms: i32,
        passwd: Bytes,
        /// The readOnly byte: the server is a read-only one.
        read_only: bool,
    },
    Close,
}

/// Decodes one output of the server: a ConnectResponse, a reply, a watch event, or Close.
pub fn decode(o: Outbound) -> Got {
    let Outbound::Packet(p) = o else {
        return Got::Close;
    };
    let body = &p[4..];
    // A ConnectResponse is 4 + 4 + 8 + 4 + 16 + 1 = 37 bytes; a reply header is 16.
    if body.len() == 37 {
        if let Ok(r) = decode_all::<ConnectResponse>(body) {
            return Got::Connected {
                session_id: r.session_id,
                timeout_ms: r.time_out_ms,
                passwd: r.passwd,
                read_only: r.read_only,
            };
        }
    }
    let mut d = Decoder::new(body);
    let h = ReplyHeader::decode(&mut d).unwrap();
    if h.xid == -1 {
        let e = WatcherEvent::decode(&mut d).unwrap();
        return Got::Event {
            event_type: e.event_type,
            path: e.path,
        };
    }
    Got::Reply {
        xid: h.xid,
        zxid: h.zxid,
        err: h.err,
        body: Bytes::copy_from_slice(d.remaining()),
    }
}

//! ZooKeeper's answers to odd requests (issue 14 part B), through the sans-I/O server:
//! unknown opcodes, records that do not decode, createSession again, auth schemes and
//! xids, identity order, old clients' handshakes. Requests are decoded from wire bytes
//! as the listener decodes them (`proto::wire`). The expected answers were measured on
//! ZooKeeper 3.8 (compat-tests/rawdiff/cases/).

use bytes::{BufMut, Bytes, BytesMut};
use jute::{ConnectRequest, Decoder, Record, ReplyHeader};
use keel::proto::{opcode as op, wire};
use keel::server::{Input, Outbound, Server};

#[path = "support/sansio.rs"]
mod sansio;

const T0: i64 = 1_700_000_000_000;

fn server() -> Server {
    Server::new(sansio::settings(), 0, T0, 7)
}

/// What the server sent one connection: packets (without their length) and closes.
#[derive(Debug, PartialEq)]
enum Out {
    Packet(Vec<u8>),
    Close,
}

fn out(s: &mut Server) -> Vec<Out> {
    s.drain_outbox()
        .into_iter()
        .map(|(_, o)| match o {
            Outbound::Packet(p) => Out::Packet(p[4..].to_vec()),
            Outbound::Close => Out::Close,
        })
        .collect()
}

fn header(packet: &Out) -> (i32, i64, i32) {
    let Out::Packet(p) = packet else {
        panic!("not a packet: {packet:?}")
    };
    let h = ReplyHeader::decode(&mut Decoder::new(p)).unwrap();
    (h.xid, h.zxid, h.err)
}

fn ustring(v: &[u8]) -> Vec<u8> {
    let mut out = (v.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(v);
    out
}

/// A connection with a session; returns the handshake's raw ConnectResponse.
fn connect(s: &mut Server, conn: u64, old_client: bool) -> Vec<u8> {
    s.handle(
        T0,
        Input::Connected {
            conn,
            addr: "127.0.0.1:5000".parse().unwrap(),
        },
    );
    if old_client {
        s.handle(T0, Input::OldClient { conn });
    }
    let req = ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 0,
        time_out_ms: 30000,
        session_id: 0,
        passwd: Bytes::from_static(&[0; 16]),
        read_only: false,
    };
    s.handle(T0, Input::Handshake { conn, req });
    match out(s).as_slice() {
        [Out::Packet(p)] => p.clone(),
        other => panic!("handshake answered {other:?}"),
    }
}

/// Sends one request as wire bytes.
fn send(s: &mut Server, conn: u64, xid: i32, opcode: i32, body: &[u8]) {
    let req = wire::decode_request(opcode, body).expect("decodes");
    s.handle(
        T0,
        Input::Request {
            conn,
            xid,
            opcode,
            req,
            body: Bytes::copy_from_slice(body),
        },
    );
}

#[test]
fn unknown_opcode_is_unimplemented_with_zxid_minus_one_then_closed() {
    let mut s = server();
    connect(&mut s, 1, false);
    send(&mut s, 1, 5, 23, b"");
    let got = out(&mut s);
    assert_eq!(header(&got[0]), (5, -1, -6));
    assert_eq!(got[1], Out::Close);
}

#[test]
fn malformed_records_are_marshalling_errors_and_keep_the_connection() {
    let mut s = server();
    connect(&mut s, 1, false);
    let before = s.last_zxid;
    // A read: no zxid used.
    send(&mut s, 1, 1, op::GET_DATA, b"\0\0");
    // A write: an error txn.
    send(&mut s, 1, 2, op::CREATE, b"\0\0");
    // A multi holding a read op.
    let mut multi = BytesMut::new();
    multi.put_i32(op::GET_DATA);
    multi.put_u8(0);
    multi.put_i32(-1);
    multi.put_slice(&ustring(b"/"));
    multi.put_u8(0);
    multi.put_i32(-1);
    multi.put_u8(1);
    multi.put_i32(-1);
    send(&mut s, 1, 3, op::MULTI, &multi);
    let got = out(&mut s);
    assert_eq!(header(&got[0]), (1, before, -5));
    assert_eq!(header(&got[1]), (2, before + 1, -5));
    assert_eq!(header(&got[2]), (3, before + 2, -5));
    assert_eq!(got.len(), 3, "no close: {got:?}");
}

#[test]
fn create_session_again_resends_the_connect_response() {
    let mut s = server();
    let first = connect(&mut s, 1, false);
    let before = s.last_zxid;
    send(&mut s, 1, 7, op::CREATE_SESSION, &4000i32.to_be_bytes());
    let got = out(&mut s);
    assert_eq!(got, vec![Out::Packet(first)]);
    assert_eq!(s.last_zxid, before + 1);
}

#[test]
fn old_clients_get_no_read_only_byte() {
    let mut s = server();
    let new = connect(&mut s, 1, false);
    let old = connect(&mut s, 2, true);
    assert_eq!(new.len(), 37);
    assert_eq!(old.len(), 36);
}

fn auth(scheme: &str, payload: &[u8]) -> Vec<u8> {
    [
        0i32.to_be_bytes().to_vec(),
        ustring(scheme.as_bytes()),
        ustring(payload),
    ]
    .concat()
}

/// whoAmI's (scheme, user) list.
fn who_am_i(s: &mut Server, conn: u64) -> Vec<(String, String)> {
    send(s, conn, 99, op::WHO_AM_I, b"");
    let got = out(s);
    let Some(Out::Packet(p)) = got.last() else {
        panic!("no whoAmI reply: {got:?}")
    };
    let mut d = Decoder::new(&p[16..]);
    d.vector(|d| Ok((d.ustring()?, d.ustring()?))).unwrap()
}

#[test]
fn auth_replies_echo_the_xid_and_ip_auth_is_accepted() {
    let mut s = server();
    connect(&mut s, 1, false);
    send(&mut s, 1, 42, op::AUTH, &auth("ip", b"10.0.0.1"));
    send(&mut s, 1, -4, op::AUTH, &auth("digest", b"b\xffob:pw"));
    let got = out(&mut s);
    assert_eq!(header(&got[0]), (42, 0, 0));
    assert_eq!(header(&got[1]), (-4, 0, 0));
    // The ip scheme adds the connection's own address (already there); the digest
    // user keeps U+FFFD for the byte that is not UTF-8; ZooKeeper's set order.
    assert_eq!(
        who_am_i(&mut s, 1),
        [
            ("digest".to_string(), "b\u{fffd}ob".to_string()),
            ("ip".to_string(), "127.0.0.1".to_string())
        ]
    );
    send(&mut s, 1, 0, op::AUTH, &auth("sasl", b"x"));
    let got = out(&mut s);
    assert_eq!(header(&got[0]), (0, 0, -115));
    assert_eq!(got[1], Out::Close);
}

#[test]
fn identities_in_zookeepers_order() {
    let mut s = server();
    connect(&mut s, 1, false);
    for user in [&b"zed:pw"[..], b"alice:pw", b"bob:pw"] {
        send(&mut s, 1, -4, op::AUTH, &auth("digest", user));
    }
    out(&mut s);
    let users: Vec<String> = who_am_i(&mut s, 1).into_iter().map(|(_, u)| u).collect();
    assert_eq!(users, ["bob", "zed", "127.0.0.1", "alice"]);
    let mut s = server();
    connect(&mut s, 1, false);
    send(&mut s, 1, -4, op::AUTH, &auth("digest", b"super:test"));
    out(&mut s);
    let schemes: Vec<String> = who_am_i(&mut s, 1).into_iter().map(|(k, _)| k).collect();
    assert_eq!(schemes, ["super", "ip", "digest"]);
}

#[test]
fn set_watches_reply_echoes_the_xid() {
    let mut s = server();
    connect(&mut s, 1, false);
    let mut body = 0i64.to_be_bytes().to_vec();
    for _ in 0..3 {
        body.extend(0i32.to_be_bytes());
    }
    send(&mut s, 1, 12, op::SET_WATCHES, &body);
    assert_eq!(header(&out(&mut s)[0]).0, 12);
}

#[test]
fn empty_path_reads_are_the_root() {
    let mut s = server();
    connect(&mut s, 1, false);
    let mut body = ustring(b"");
    body.push(0);
    send(&mut s, 1, 1, op::EXISTS, &body);
    send(&mut s, 1, 2, op::GET_CHILDREN, &body);
    let got = out(&mut s);
    assert_eq!(header(&got[0]).2, 0);
    let Out::Packet(p) = &got[1] else { panic!() };
    let mut d = Decoder::new(&p[16..]);
    assert_eq!(d.string_vector().unwrap(), ["zookeeper"]);
    // A path outside the Basic Multilingual Plane is refused.
    let create = [
        ustring("/a\u{1f600}".as_bytes()),
        (-1i32).to_be_bytes().to_vec(),
        1i32.to_be_bytes().to_vec(),
        31i32.to_be_bytes().to_vec(),
        ustring(b"world"),
        ustring(b"anyone"),
        0i32.to_be_bytes().to_vec(),
    ]
    .concat();
    send(&mut s, 1, 3, op::CREATE, &create);
    assert_eq!(header(&out(&mut s)[0]).2, -8);
}

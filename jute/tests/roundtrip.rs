//! Every record survives encode -> decode unchanged, and no byte string makes a decoder
//! panic or over-allocate.

use bytes::{Bytes, BytesMut};
use jute::*;
use proptest::prelude::*;

fn round_trip<R: Record + PartialEq + std::fmt::Debug>(r: &R) {
    let mut buf = BytesMut::new();
    r.encode(&mut buf);
    let back: R = decode_all(&buf).expect("decodes what it encoded");
    assert_eq!(&back, r);
    // Every strict prefix is truncated input, never a panic.
    for cut in 0..buf.len() {
        assert!(
            decode_all::<R>(&buf[..cut]).is_err(),
            "prefix {cut} accepted"
        );
    }
}

fn string() -> impl Strategy<Value = String> {
    "[a-z/0-9é]{0,12}"
}

fn bytes() -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), 0..16).prop_map(Bytes::from)
}

fn stat() -> impl Strategy<Value = Stat> {
    (
        any::<[i64; 4]>(),
        any::<[i32; 3]>(),
        any::<i64>(),
        any::<[i32; 2]>(),
        any::<i64>(),
    )
        .prop_map(|(l, v, owner, n, pzxid)| Stat {
            czxid: l[0],
            mzxid: l[1],
            ctime: l[2],
            mtime: l[3],
            version: v[0],
            cversion: v[1],
            aversion: v[2],
            ephemeral_owner: owner,
            data_length: n[0],
            num_children: n[1],
            pzxid,
        })
}

fn acls() -> impl Strategy<Value = Vec<Acl>> {
    proptest::collection::vec(
        (any::<i32>(), string(), string()).prop_map(|(perms, scheme, id)| Acl {
            perms,
            id: Id { scheme, id },
        }),
        0..4,
    )
}

fn strings() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(string(), 0..5)
}

proptest! {
    #[test]
    fn connect_records(pv in any::<i32>(), z in any::<i64>(), t in any::<i32>(), s in any::<i64>(), p in bytes(), ro in any::<bool>()) {
        round_trip(&ConnectRequest { protocol_version: pv, last_zxid_seen: z, time_out_ms: t, session_id: s, passwd: p.clone(), read_only: ro });
        round_trip(&ConnectResponse { protocol_version: pv, time_out_ms: t, session_id: s, passwd: p, read_only: ro });
    }

    #[test]
    fn headers_and_events(x in any::<i32>(), z in any::<i64>(), e in any::<i32>(), path in string()) {
        round_trip(&RequestHeader { xid: x, op_type: e });
        round_trip(&ReplyHeader { xid: x, zxid: z, err: e });
        round_trip(&WatcherEvent { event_type: x, state: e, path });
        round_trip(&MultiHeader { op_type: x, done: z % 2 == 0, err: e });
        round_trip(&ErrorResponse { err: e });
    }

    #[test]
    fn data_records(path in string(), data in bytes(), acl in acls(), flags in any::<i32>(), ttl in any::<i64>(), st in stat(), v in any::<i32>()) {
        round_trip(&CreateRequest { path: path.clone(), data: Some(data.clone()), acl: acl.clone(), flags });
        round_trip(&CreateTtlRequest { path: path.clone(), data: Some(data.clone()), acl: acl.clone(), flags, ttl_ms: ttl });
        round_trip(&CreateResponse { path: path.clone() });
        round_trip(&Create2Response { path: path.clone(), stat: st.clone() });
        round_trip(&DeleteRequest { path: path.clone(), version: v });
        round_trip(&PathWatchRequest { path: path.clone(), watch: v % 2 == 0 });
        round_trip(&PathRequest { path: path.clone() });
        round_trip(&StatResponse { stat: st.clone() });
        round_trip(&GetDataResponse { data: Some(data.clone()), stat: st.clone() });
        round_trip(&SetDataRequest { path: path.clone(), data: None, version: v });
        round_trip(&GetAclResponse { acl: acl.clone(), stat: st.clone() });
        round_trip(&SetAclRequest { path: path.clone(), acl, version: v });
        round_trip(&CheckVersionRequest { path: path.clone(), version: v });
        round_trip(&WatchesRequest { path: path.clone(), watcher_type: v });
        round_trip(&AddWatchRequest { path, mode: v });
    }

    #[test]
    fn list_records(a in strings(), b in strings(), c in strings(), d in strings(), e in strings(), z in any::<i64>(), st in stat(), n in any::<i32>(), scheme in string(), auth in bytes()) {
        round_trip(&GetChildrenResponse { children: a.clone() });
        round_trip(&GetChildren2Response { children: a.clone(), stat: st });
        round_trip(&SetWatches { relative_zxid: z, data_watches: a.clone(), exist_watches: b.clone(), child_watches: c.clone() });
        round_trip(&SetWatches2 { relative_zxid: z, data_watches: a.clone(), exist_watches: b, child_watches: c, persistent_watches: d, persistent_recursive_watches: e });
        round_trip(&GetEphemeralsResponse { ephemerals: a.clone() });
        round_trip(&GetAllChildrenNumberResponse { total_number: n });
        round_trip(&AuthPacket { auth_type: n, scheme: scheme.clone(), auth });
        round_trip(&WhoAmIResponse { client_info: a.iter().map(|u| ClientInfo { auth_scheme: scheme.clone(), user: u.clone() }).collect() });
        round_trip(&ReconfigRequest { joining_servers: Some(scheme.clone()), leaving_servers: None, new_members: Some(scheme), cur_config_id: z });
    }

    #[test]
    fn garbage_never_panics(input in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode_all::<ConnectRequest>(&input);
        let _ = ConnectRequest::decode_lenient(&input);
        let _ = decode_all::<CreateRequest>(&input);
        let _ = decode_all::<CreateTtlRequest>(&input);
        let _ = decode_all::<SetAclRequest>(&input);
        let _ = decode_all::<SetWatches2>(&input);
        let _ = decode_all::<GetChildren2Response>(&input);
        let _ = decode_all::<WhoAmIResponse>(&input);
        let _ = decode_all::<AuthPacket>(&input);
    }
}

#[test]
fn hostile_lengths_are_rejected_before_allocating() {
    // A vector claiming 2^31-1 items in 8 bytes of input.
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&i32::MAX.to_be_bytes());
    buf.extend_from_slice(&[0; 4]);
    assert!(matches!(
        decode_all::<GetChildrenResponse>(&buf),
        Err(JuteError::BadLength(_))
    ));
    // A buffer of length -2.
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&(-2i32).to_be_bytes());
    assert_eq!(
        decode_all::<PathRequest>(&buf),
        Err(JuteError::BadLength(-2))
    );
    // Null (-1) strings and vectors read as empty, as ZooKeeper treats them.
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&(-1i32).to_be_bytes());
    assert_eq!(
        decode_all::<PathRequest>(&buf),
        Ok(PathRequest {
            path: String::new()
        })
    );
    // Trailing bytes are an error for a whole-packet decode.
    let mut buf = BytesMut::new();
    PathRequest { path: "/a".into() }.encode(&mut buf);
    buf.extend_from_slice(&[1]);
    assert_eq!(decode_all::<PathRequest>(&buf), Err(JuteError::Trailing(1)));
}

#[test]
fn connect_request_without_read_only_byte() {
    let req = ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 5,
        time_out_ms: 30000,
        session_id: 0,
        passwd: Bytes::from_static(&[0; 16]),
        read_only: false,
    };
    let mut buf = BytesMut::new();
    req.encode(&mut buf);
    let without = &buf[..buf.len() - 1];
    assert_eq!(ConnectRequest::decode_lenient(without), Ok(req));
}

/// Strings decode as ZooKeeper's Java reads them (measured through sync's echo on
/// ZooKeeper 3.8): invalid bytes become U+FFFD, an encoded surrogate one U+FFFD for
/// its three bytes; a null string is `None` only through `ustring_opt`.
#[test]
fn strings_decode_as_java_reads_them() {
    use jute::codec::java_string;
    assert_eq!(java_string(b"/a\xff"), "/a\u{fffd}");
    assert_eq!(java_string(b"/a\xc0\x80"), "/a\u{fffd}\u{fffd}");
    assert_eq!(java_string(b"/a\xed\xa0\x80"), "/a\u{fffd}");
    assert_eq!(java_string(b"/a\xe2\x82"), "/a\u{fffd}");
    assert_eq!(java_string(b"/a\xe0\x80\xaf"), "/a\u{fffd}\u{fffd}\u{fffd}");
    assert_eq!(java_string("/é".as_bytes()), "/é");
    let null = [0xffu8; 4];
    assert_eq!(Decoder::new(&null).ustring_opt(), Ok(None));
    assert_eq!(Decoder::new(&null).ustring(), Ok(String::new()));
    let bad = [0, 0, 0, 1, 0xff];
    assert_eq!(Decoder::new(&bad).ustring(), Ok("\u{fffd}".to_string()));
}

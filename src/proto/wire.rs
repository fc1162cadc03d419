//! From a request packet's opcode and body to a [`Request`], answering every malformed
//! or odd input as ZooKeeper 3.8 does rather than closing the connection.
//!
//! What ZooKeeper does, measured with the raw differential suite
//! (compat-tests/rawdiff/cases/opcodes.py, paths.py, acl_ids.py):
//! - an opcode its `Request.isValid` does not know: UNIMPLEMENTED with zxid -1, then it
//!   closes the connection ([`Request::Unknown`]);
//! - a known opcode whose record does not decode: MARSHALLINGERROR, the connection
//!   kept; the write opcodes log an error txn, so a zxid is used (PrepRequestProcessor
//!   deserializes them), the reads do not (FinalRequestProcessor does); a multiRead
//!   whose ops all decode as writes is answered with an empty multi result after it;
//! - an auth or sasl packet that does not decode: the connection is closed (these are
//!   decoded in ZooKeeperServer.processPacket, whose IOException ends the connection);
//! - a null (-1) path, which Java keeps null: per opcode, the code its
//!   NullPointerException or check gives (see [`null_path`]); an ACL entry of scheme
//!   world, digest or ip with a null id: MARSHALLINGERROR (fixupACL and the providers'
//!   isValid dereference it);
//! - exists with a NUL in its path: BADARGUMENTS (the one read that checks);
//!   checkWatches on a path without a '/': MARSHALLINGERROR;
//! - createSession (-10) sent as a request: a createSession txn for the same session
//!   whose reply is the ConnectResponse again; with fewer than 4 body bytes (its
//!   timeout), MARSHALLINGERROR with a zxid.

use super::opcode as op;
use super::request::{decode_record, Rejection, RejectionBody, Request};
use super::ErrorCode;
use jute::{AuthPacket, Decoder, JuteError};

/// The opcodes ZooKeeper 3.8's `Request.isValid` accepts (auth and sasl are handled
/// before that check).
fn is_known(opcode: i32) -> bool {
    matches!(
        opcode,
        op::CHECK
            | op::CLOSE_SESSION
            | op::CREATE
            | op::CREATE2
            | op::CREATE_TTL
            | op::CREATE_CONTAINER
            | op::CREATE_SESSION
            | op::DELETE
            | op::DELETE_CONTAINER
            | op::EXISTS
            | op::GET_ACL
            | op::GET_CHILDREN
            | op::GET_ALL_CHILDREN_NUMBER
            | op::GET_CHILDREN2
            | op::GET_DATA
            | op::GET_EPHEMERALS
            | op::MULTI
            | op::MULTI_READ
            | op::PING
            | op::RECONFIG
            | op::SET_ACL
            | op::SET_DATA
            | op::SET_WATCHES
            | op::SET_WATCHES2
            | op::SYNC
            | op::CHECK_WATCHES
            | op::REMOVE_WATCHES
            | op::ADD_WATCH
            | op::WHO_AM_I
            | op::AUTH
            | op::SASL
    )
}

/// Whether ZooKeeper's PrepRequestProcessor deserializes this opcode's record, so a
/// record that fails (or is refused before the tree) still becomes an error txn.
fn is_txn_opcode(opcode: i32) -> bool {
    matches!(
        opcode,
        op::CREATE
            | op::CREATE2
            | op::CREATE_CONTAINER
            | op::CREATE_TTL
            | op::DELETE
            | op::DELETE_CONTAINER
            | op::SET_DATA
            | op::SET_ACL
            | op::CHECK
            | op::MULTI
            | op::CREATE_SESSION
    )
}

fn rejected(code: ErrorCode, txn: bool, body: RejectionBody) -> Request {
    Request::Rejected(Rejection { code, txn, body })
}

/// Decodes the body of a request with opcode `opcode` as ZooKeeper would take it.
///
/// Errors: only for an auth or sasl packet whose record does not decode; the caller
/// closes the connection, as ZooKeeper does. Every other malformed body becomes a
/// [`Request::Rejected`] answered with ZooKeeper's code.
pub fn decode_request(opcode: i32, body: &[u8]) -> Result<Request, JuteError> {
    if !is_known(opcode) {
        return Ok(Request::Unknown(opcode));
    }
    match opcode {
        op::AUTH => return decode_auth(body),
        op::SASL => {
            // GetSASLRequest {buffer token}: it must decode, or the connection closes.
            // A null token closes it too (ZooKeeper's processSasl reads its length and
            // fails with a NullPointerException outside its SaslException handling).
            return match Decoder::new(body).buffer_opt()? {
                Some(token) => Ok(Request::Sasl(token.to_vec())),
                None => Err(JuteError::BadLength(-1)),
            };
        }
        op::CREATE_SESSION => {
            return Ok(match body.get(..4) {
                Some(b) => Request::CreateSession {
                    timeout_ms: i32::from_be_bytes([b[0], b[1], b[2], b[3]]),
                },
                None => rejected(ErrorCode::MarshallingError, true, RejectionBody::Empty),
            });
        }
        _ => {}
    }
    if let Some(r) = null_path(opcode, body) {
        return Ok(r);
    }
    if null_acl_id(opcode, body) {
        return Ok(rejected(
            ErrorCode::MarshallingError,
            is_txn_opcode(opcode),
            RejectionBody::Empty,
        ));
    }
    let req = match Request::decode(opcode, body) {
        Ok(req) => req,
        Err(_) => {
            let body = if opcode == op::MULTI_READ && all_write_ops(body) {
                RejectionBody::MultiEnd
            } else {
                RejectionBody::Empty
            };
            return Ok(rejected(
                ErrorCode::MarshallingError,
                is_txn_opcode(opcode),
                body,
            ));
        }
    };
    match &req {
        Request::Exists(r) if r.path.contains('\0') => {
            return Ok(rejected(
                ErrorCode::BadArguments,
                false,
                RejectionBody::Empty,
            ));
        }
        // ZooKeeper's watch lookup walks the path's parents, computing each as the text
        // before its last '/': for a path with none that fails (MARSHALLINGERROR).
        Request::CheckWatches(w) if !w.path.is_empty() && !w.path.contains('/') => {
            return Ok(rejected(
                ErrorCode::MarshallingError,
                false,
                RejectionBody::Empty,
            ));
        }
        _ => {}
    }
    Ok(req)
}

/// An auth packet. Digest auth data that is null fails in ZooKeeper (its provider
/// reads `new String(null)`), so such a packet is passed on under a scheme no provider
/// has, and fails the same way (AUTHFAILED, then the connection is closed).
fn decode_auth(body: &[u8]) -> Result<Request, JuteError> {
    let mut pkt: AuthPacket = decode_record(body)?;
    let mut d = Decoder::new(body);
    d.int()?;
    d.buffer()?;
    if d.buffer_opt()?.is_none() && pkt.scheme == "digest" {
        pkt.scheme = "digest (null auth data)".into();
    }
    Ok(Request::Auth(pkt))
}

/// Whether the body's first field, a string, is null (-1).
fn starts_null(body: &[u8]) -> bool {
    body.get(..4) == Some(&[0xff; 4])
}

/// What ZooKeeper answers a request whose path is null, by opcode (measured; `None`
/// where it answers as for the empty string, which the rest of keel does).
fn null_path(opcode: i32, body: &[u8]) -> Option<Request> {
    use ErrorCode::{BadArguments, MarshallingError};
    if opcode == op::MULTI || opcode == op::MULTI_READ {
        // Both reach the null path outside any per-op error handling: the whole
        // request fails, its reply the end of an empty result list. (ZooKeeper also
        // spends a zxid on the multi without logging a txn; keel does not.)
        return multi_null_path(body)
            .then(|| rejected(MarshallingError, false, RejectionBody::MultiEnd));
    }
    if opcode == op::SET_WATCHES || opcode == op::SET_WATCHES2 {
        return set_watches_null_path(body)
            .then(|| rejected(MarshallingError, false, RejectionBody::Empty));
    }
    if !starts_null(body) {
        return None;
    }
    let (code, txn, body) = match opcode {
        op::CREATE | op::CREATE2 | op::CREATE_CONTAINER | op::CREATE_TTL | op::DELETE => {
            (MarshallingError, true, RejectionBody::Empty)
        }
        op::SET_DATA | op::SET_ACL | op::CHECK => (BadArguments, true, RejectionBody::Empty),
        op::EXISTS
        | op::GET_DATA
        | op::GET_ACL
        | op::GET_CHILDREN
        | op::GET_CHILDREN2
        | op::GET_ALL_CHILDREN_NUMBER
        | op::ADD_WATCH
        | op::CHECK_WATCHES => (MarshallingError, false, RejectionBody::Empty),
        // sync echoes its path, null included.
        op::SYNC => (ErrorCode::Ok, false, RejectionBody::NullString),
        _ => return None,
    };
    Some(rejected(code, txn, body))
}

/// Walks a multi/multiRead body: calls `each(opcode, record)` for every op, where
/// `record` starts at the op's record; stops (false) when the body does not hold the
/// records Java's MultiOperationRecord reads.
fn walk_multi(body: &[u8], mut each: impl FnMut(i32, &[u8]) -> bool) -> bool {
    let mut d = Decoder::new(body);
    loop {
        let (Ok(op_type), Ok(done), Ok(_err)) = (d.int(), d.bool(), d.int()) else {
            return false;
        };
        if done {
            return true;
        }
        let record = d.remaining();
        if !each(op_type, record) || skip_sub_record(&mut d, op_type).is_err() {
            return false;
        }
    }
}

/// Skips one multi op's record, laid out as ZooKeeper's records (a read op's record
/// carries its watch byte, as GetDataRequest and GetChildrenRequest do).
fn skip_sub_record(d: &mut Decoder<'_>, op_type: i32) -> Result<(), JuteError> {
    d.buffer_opt()?;
    match op_type {
        op::CREATE | op::CREATE2 | op::CREATE_CONTAINER | op::CREATE_TTL => {
            d.buffer_opt()?;
            d.vector(|d| {
                d.int()?;
                d.buffer_opt()?;
                d.buffer_opt()?;
                Ok(())
            })?;
            d.int()?;
            if op_type == op::CREATE_TTL {
                d.long()?;
            }
        }
        op::DELETE | op::CHECK => {
            d.int()?;
        }
        op::SET_DATA => {
            d.buffer_opt()?;
            d.int()?;
        }
        op::GET_DATA | op::GET_CHILDREN => {
            d.bool()?;
        }
        other => return Err(JuteError::BadType(other)),
    }
    Ok(())
}

/// Whether some op of a well-formed multi body has a null path.
fn multi_null_path(body: &[u8]) -> bool {
    let mut found = false;
    let whole = walk_multi(body, |_, record| {
        found |= starts_null(record);
        true
    });
    whole && found
}

/// Whether a multiRead body holds only (well-formed) write ops: ZooKeeper's
/// MultiOperationRecord then decodes, and the read loop fails on the first op after
/// starting an empty result list.
fn all_write_ops(body: &[u8]) -> bool {
    let mut count = 0;
    let whole = walk_multi(body, |op_type, _| {
        count += 1;
        !matches!(op_type, op::GET_DATA | op::GET_CHILDREN)
    });
    whole && count > 0
}

/// Whether a setWatches/setWatches2 body lists a null path.
fn set_watches_null_path(body: &[u8]) -> bool {
    let mut d = Decoder::new(body);
    if d.long().is_err() {
        return false;
    }
    let mut found = false;
    while !d.is_empty() {
        let Ok(list) = d.vector(|d| d.ustring_opt()) else {
            return false;
        };
        found |= list.iter().any(Option::is_none);
    }
    found
}

/// Whether a create or setACL (alone or as a multi's create) carries an ACL entry of
/// scheme world, digest or ip whose id is null.
fn null_acl_id(opcode: i32, body: &[u8]) -> bool {
    fn acl_has_null(d: &mut Decoder<'_>) -> bool {
        let mut found = false;
        let ok = d.vector(|d| {
            d.int()?;
            let scheme = d.ustring_opt()?;
            let id = d.buffer_opt()?;
            found |= id.is_none() && matches!(scheme.as_deref(), Some("world" | "digest" | "ip"));
            Ok(())
        });
        ok.is_ok() && found
    }
    fn create_has_null(record: &[u8]) -> bool {
        let mut d = Decoder::new(record);
        d.buffer_opt().is_ok() && d.buffer_opt().is_ok() && acl_has_null(&mut d)
    }
    match opcode {
        op::CREATE | op::CREATE2 | op::CREATE_CONTAINER | op::CREATE_TTL => create_has_null(body),
        op::SET_ACL => {
            let mut d = Decoder::new(body);
            d.buffer_opt().is_ok() && acl_has_null(&mut d)
        }
        op::MULTI => {
            let mut found = false;
            let whole = walk_multi(body, |op_type, record| {
                if matches!(
                    op_type,
                    op::CREATE | op::CREATE2 | op::CREATE_CONTAINER | op::CREATE_TTL
                ) {
                    found |= create_has_null(record);
                }
                true
            });
            whole && found
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Vec<u8> {
        let mut out = (v.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(v.as_bytes());
        out
    }
    const NULL: [u8; 4] = [0xff; 4];

    fn rejection(r: Request) -> (ErrorCode, bool, RejectionBody) {
        match r {
            Request::Rejected(r) => (r.code, r.txn, r.body),
            other => panic!("not rejected: {other:?}"),
        }
    }

    #[test]
    fn unknown_opcodes_and_malformed_records() {
        for opcode in [-12, -9, 0, 10, 23, 99, 108, 1000, i32::MIN] {
            assert_eq!(decode_request(opcode, &[]), Ok(Request::Unknown(opcode)));
        }
        use ErrorCode::MarshallingError as M;
        assert_eq!(
            rejection(decode_request(op::CREATE, &[0, 0]).unwrap()),
            (M, true, RejectionBody::Empty)
        );
        assert_eq!(
            rejection(decode_request(op::GET_DATA, &[]).unwrap()),
            (M, false, RejectionBody::Empty)
        );
        assert_eq!(
            rejection(decode_request(op::SET_WATCHES, &[1]).unwrap()),
            (M, false, RejectionBody::Empty)
        );
        assert_eq!(
            rejection(decode_request(op::CREATE_SESSION, &[0, 0]).unwrap()),
            (M, true, RejectionBody::Empty)
        );
        assert_eq!(
            decode_request(op::CREATE_SESSION, &[0, 0, 0x75, 0x30, 9]),
            Ok(Request::CreateSession { timeout_ms: 30000 })
        );
        assert!(decode_request(op::AUTH, &[0, 0]).is_err());
        assert!(decode_request(op::SASL, &[0, 0]).is_err());
        // A null token closes the connection; a token is carried as sent.
        assert!(decode_request(op::SASL, &[0xff; 4]).is_err());
        assert_eq!(
            decode_request(op::SASL, &[0, 0, 0, 1, 7]),
            Ok(Request::Sasl(vec![7]))
        );
        assert_eq!(decode_request(op::PING, b"junk"), Ok(Request::Ping));
    }

    #[test]
    fn multis_that_cannot_decode() {
        let header = |t: i32, done: bool| {
            let mut h = t.to_be_bytes().to_vec();
            h.push(done as u8);
            h.extend_from_slice(&(-1i32).to_be_bytes());
            h
        };
        let mut create = header(op::CREATE, false);
        create.extend(s("/a"));
        create.extend((-1i32).to_be_bytes()); // null data
        create.extend(0i32.to_be_bytes()); // no ACL entries
        create.extend(0i32.to_be_bytes()); // flags
        let end = header(-1, true);
        let mut get = header(op::GET_DATA, false);
        get.extend(s("/a"));
        get.push(0);
        // A read op in a multi: MARSHALLINGERROR with a txn.
        let multi = [get.clone(), end.clone()].concat();
        let (code, txn, _) = rejection(decode_request(op::MULTI, &multi).unwrap());
        assert_eq!((code, txn), (ErrorCode::MarshallingError, true));
        // A multiRead holding writes decodes as a multiRead (or MultiReadMalformed when
        // reads and writes mix); `server::reads` answers it MARSHALLINGERROR, with the
        // result list's end when every op is a write (rawdiff cases op_multi_*).
        let read = [create.clone(), end.clone()].concat();
        assert!(matches!(
            decode_request(op::MULTI_READ, &read).unwrap(),
            Request::MultiRead(ops) if ops.len() == 1
        ));
    }

    #[test]
    fn null_paths_and_acl_ids() {
        let with_null = |rest: &[u8]| [&NULL[..], rest].concat();
        assert_eq!(
            rejection(decode_request(op::EXISTS, &with_null(&[0])).unwrap()),
            (ErrorCode::MarshallingError, false, RejectionBody::Empty)
        );
        assert_eq!(
            rejection(decode_request(op::SET_DATA, &with_null(&[0; 8])).unwrap()),
            (ErrorCode::BadArguments, true, RejectionBody::Empty)
        );
        assert_eq!(
            rejection(decode_request(op::SYNC, &NULL).unwrap()),
            (ErrorCode::Ok, false, RejectionBody::NullString)
        );
        // exists alone checks for NUL.
        let nul = [s("/a\0b"), vec![0]].concat();
        assert_eq!(
            rejection(decode_request(op::EXISTS, &nul).unwrap()),
            (ErrorCode::BadArguments, false, RejectionBody::Empty)
        );
        // world with a null id.
        let mut create = s("/a");
        create.extend((-1i32).to_be_bytes());
        create.extend(1i32.to_be_bytes());
        create.extend(31i32.to_be_bytes());
        create.extend(s("world"));
        create.extend(NULL);
        create.extend(0i32.to_be_bytes());
        let (code, txn, _) = rejection(decode_request(op::CREATE, &create).unwrap());
        assert_eq!((code, txn), (ErrorCode::MarshallingError, true));
    }
}

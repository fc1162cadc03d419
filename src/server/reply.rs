//! Encoding of outgoing packets: length prefix, reply header, body.

use bytes::{BufMut, Bytes, BytesMut};
use jute::{Record, ReplyHeader, WatcherEvent};

use crate::proto::opcode;

/// Frames a packet: 4-byte big-endian length, then what `body` writes.
pub fn frame(body: impl FnOnce(&mut BytesMut)) -> Bytes {
    // Most replies (a Stat, or ~100 bytes of data plus a Stat) fit without regrowing.
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0);
    body(&mut buf);
    let len = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    buf.freeze()
}

/// A reply: header then an optional record.
pub fn reply<R: Record>(xid: i32, zxid: i64, err: i32, body: Option<&R>) -> Bytes {
    frame(|buf| {
        ReplyHeader { xid, zxid, err }.encode(buf);
        if let Some(b) = body {
            b.encode(buf);
        }
    })
}

/// A reply with a header only.
pub fn header_only(xid: i32, zxid: i64, err: i32) -> Bytes {
    frame(|buf| ReplyHeader { xid, zxid, err }.encode(buf))
}

/// A watch notification (xid -1, zxid -1 as ZooKeeper 3.8 sends it).
pub fn notification(event_type: i32, state: i32, path: &str) -> Bytes {
    frame(|buf| {
        ReplyHeader {
            xid: opcode::XID_NOTIFICATION,
            zxid: -1,
            err: 0,
        }
        .encode(buf);
        WatcherEvent {
            event_type,
            state,
            path: path.to_string(),
        }
        .encode(buf);
    })
}

//! Jute: the record encoding of Apache ZooKeeper's wire protocol.
//!
//! Layout:
//! - [`codec`]: the primitive encodings (int, long, bool, buffer, ustring, vector) and the
//!   [`Record`] trait every protocol record implements.
//! - [`records`]: the client protocol records (ConnectRequest, RequestHeader, Stat, ACL,
//!   the per-opcode requests and responses), field for field as in ZooKeeper's
//!   `zookeeper.jute` schema (see shared/PROTOCOL.md, "Framing" and "Requests and replies").
//!
//! Decoding never panics and never allocates more than the input could describe: a
//! length or count larger than the bytes left is rejected before any allocation.

pub mod codec;
pub mod records;

pub use codec::{decode_all, Decoder, JuteError, Record};
pub use records::*;

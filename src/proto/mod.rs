//! The client protocol as Rust types: opcodes, error codes, decoded requests.
//!
//! Records themselves live in the `jute` crate; this layer turns a (header, body) pair
//! into a typed [`Request`] and names the numbers of shared/PROTOCOL.md.

pub mod error;
pub mod opcode;
pub mod request;
pub mod wire;

pub use error::ErrorCode;
pub use request::{CreateMode, MultiOp, Rejection, RejectionBody, Request};

//! The runtime layer, the only one that does I/O: the client listener and connections
//! ([`listener`]) and the storage thread ([`persist`]).
pub mod listener;
pub mod persist;

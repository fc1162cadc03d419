//! The runtime layer, the only one that does I/O: the client listener and connections
//! ([`listener`]), TLS on the secure client port ([`tls`], reading key and trust stores
//! with [`keystore`]) and the storage thread ([`persist`], with its sync threads in
//! [`syncer`]), and the lowest-priority thread that keeps a CPU awake while serving
//! ([`busy_poll`]).
pub mod busy_poll;
pub mod keystore;
pub mod listener;
pub mod persist;
pub mod syncer;
pub mod tls;

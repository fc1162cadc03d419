//! The runtime layer, the only one that does I/O, and only moves bytes: the client ports
//! and connections ([`client`]), the election and quorum ports between members
//! ([`peer`], with quorum TLS in [`peer::tls`]), TLS on the secure client port and the
//! rustls configurations of the peer ports ([`tls`], reading key and trust stores
//! with [`keystore`], checking client certificates with [`client_cert`]), Kerberos
//! contexts for SASL GSSAPI ([`gss`]), the storage
//! thread ([`persist`], with its sync threads in [`syncer`]), an ensemble member's storage thread for the Zab core's
//! writes ([`zab_persist`]), and the lowest-priority thread that keeps a CPU awake while
//! serving ([`busy_poll`]). What the bytes mean is decided above it (src/member).
pub mod busy_poll;
pub mod client;
pub mod client_cert;
pub mod gss;
pub mod keystore;
pub mod peer;
pub mod persist;
pub mod syncer;
pub mod tls;
pub mod zab_persist;

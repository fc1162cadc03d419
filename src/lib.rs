//! keel: a coordination server that speaks Apache ZooKeeper's client protocol.
//!
//! One write travels: `net` (framing, handshake) -> `server` (prep: validate and turn the
//! request into a deterministic `Txn`; commit; apply to the `tree`, fire `watch`es) ->
//! `net` (watch events, then replies, to each session in order). Reads are answered by
//! `server` in the session's request order. See shared/DESIGN.md.
//!
//! Layout:
//! - [`config`]: zoo.cfg -> typed, validated [`config::Config`].
//! - [`proto`]: opcodes, error codes, requests and responses as Rust enums.
//! - [`tree`]: the DataTree of znodes, Stat, ACL checks. Pure data, no I/O.
//! - [`session`]: the session table and expiry in tick buckets (time is an input).
//! - [`watch`]: one-shot, persistent and recursive watches.
//! - [`server`]: the request pipeline over the state machine (prep, apply, reads).
//! - [`net`]: tokio listeners and connections, the storage thread; the only layer that
//!   does I/O, and it only moves bytes.
//! - [`member`]: one member process wired up (start-up, recovery, the core task that owns
//!   the state machine), above `net` and `admin`, as ZooKeeper's QuorumPeerMain; and the
//!   sans-I/O replica that makes one ensemble member of the Zab core and the state
//!   machine ([`member::replica`]).
//! - [`storage`]: what lives in dataDir and dataLogDir: the txn log (keel's own segment
//!   files), snapshots and metadata (RocksDB).
//! - [`zab`]: the sans-I/O Zab core (election, discovery, sync, broadcast) and the
//!   storage it needs as a trait; time, messages and storage completions are inputs.
//! - [`admin`]: four-letter words, the AdminServer (HTTP, JSON), Prometheus metrics.
//! - [`import`]: `keel import-zookeeper`: a ZooKeeper dataDir into a new keel store.
//! - [`logging`]: log level from RUST_LOG, zoo.cfg or `zookeeper.root.logger`.
//! - [`sasl`]: SASL for clients: the JAAS file and the DIGEST-MD5 mechanism, sans-I/O.
//! - [`allocator`]: mimalloc as the global allocator of the binary and the examples.

pub mod admin;
pub mod allocator;
pub mod config;
pub mod import;
pub mod logging;
pub mod member;
pub mod net;
pub mod proto;
pub mod sasl;
pub mod server;
pub mod session;
pub mod storage;
pub mod tree;
pub mod watch;
pub mod zab;

/// The state machine's settings from a loaded zoo.cfg.
pub fn server_settings(config: &config::Config) -> server::Settings {
    server::Settings {
        tick_ms: config.tick_time_ms,
        min_session_timeout_ms: config.min_session_timeout_ms,
        max_session_timeout_ms: config.max_session_timeout_ms,
        super_digest: config.super_digest.clone(),
        prep: server::prep::PrepSettings {
            extended_types: config.extended_types_enabled,
            enforce_quota: config.enforce_quota,
            sasl_acls: config.client_auth.sasl_provider(),
        },
        container_check_interval_ms: config.container_check_interval_ms,
        reconfig_enabled: config.reconfig_enabled,
        durable: true,
        snap_count: config.snap_count,
        sasl: config
            .client_auth
            .sasl_server
            .clone()
            .map(std::sync::Arc::new),
        allow_sasl_failed_clients: config.client_auth.allow_sasl_failed_clients,
        enforced_schemes: config.client_auth.enforced_schemes().ok().flatten(),
        local_sessions_enabled: config.local_sessions_enabled,
        local_sessions_upgrading_enabled: config.local_sessions_upgrading_enabled,
    }
}

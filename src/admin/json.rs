//! The AdminServer's commands: names, aliases and JSON bodies of the same shape as
//! Apache ZooKeeper 3.8's (`server/admin/Commands.java`: same keys, nesting, value types
//! and key order), rendered from an [`AdminView`] gathered on the core task.
//!
//! Every body is an object whose command-specific keys come first, then `"command"` (the
//! primary name) and `"error"` (`null`, or the reason), as `CommandResponse.toMap` builds
//! it. [`to_jackson_pretty`] prints it the way ZooKeeper's `JsonOutputter` (Jackson with
//! `INDENT_OUTPUT`) does, so a body is byte-comparable apart from the figures.
//!
//! keel runs standalone, so the quorum commands answer as a standalone ZooKeeper does:
//! `leader` with ZooKeeper's "server is not initialized" error, empty `voting_view`,
//! not-voting `zabstate`, no observers.

use super::fourlw::{
    java_hex, java_socket_addr, mntr_entries, round4_half_up, ConnectionSnapshot, MntrValue,
    ServerSnapshot,
};
use super::quorum::EnsembleView;
use super::snapshot;
use crate::config::{Config, ServerSpec};
use crate::net::peer::quorum::QuorumLinkInfo;
use crate::server::stats::LastSnapshot;
use crate::server::Server;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::io;

/// One AdminServer command: its primary name, its other names, and whether it needs a
/// serving server (ZooKeeper's `CommandBase.serverRequired`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Command {
    pub primary: &'static str,
    pub aliases: &'static [&'static str],
    pub server_required: bool,
}

const fn cmd(
    primary: &'static str,
    aliases: &'static [&'static str],
    server_required: bool,
) -> Command {
    Command {
        primary,
        aliases,
        server_required,
    }
}

/// Every command ZooKeeper 3.8 registers (`Commands` static block), sorted by primary
/// name as the command listing prints them. `stat_reset` and `connection_stat_reset`
/// reset (the HTTP layer does it before answering); keel keeps no trace mask, so
/// `set_trace_mask` answers as ZooKeeper does without changing anything, like `stmk`;
/// `observer_connection_stat_reset` has no observers to reset.
pub const COMMANDS: [Command; 26] = [
    cmd("configuration", &["conf", "config"], true),
    cmd("connection_stat_reset", &["crst"], true),
    cmd("connections", &["cons"], true),
    cmd("dirs", &[], true),
    cmd("dump", &[], true),
    cmd("environment", &["env", "envi"], false),
    cmd("get_trace_mask", &["gtmk"], false),
    cmd("hash", &[], true),
    cmd("initial_configuration", &["icfg"], true),
    cmd("is_read_only", &["isro"], true),
    cmd("last_snapshot", &["lsnp"], true),
    cmd("leader", &["lead"], true),
    cmd("monitor", &["mntr"], false),
    cmd("observer_connection_stat_reset", &["orst"], true),
    cmd("observers", &["obsr"], true),
    cmd("ruok", &[], true),
    cmd("server_stats", &["srvr"], true),
    cmd("set_trace_mask", &["stmk"], false),
    cmd("stat_reset", &["srst"], true),
    cmd("stats", &["stat"], true),
    cmd("system_properties", &["sysp"], false),
    cmd("voting_view", &[], true),
    cmd("watch_summary", &["wchs"], true),
    cmd("watches", &["wchc"], true),
    cmd("watches_by_path", &["wchp"], true),
    cmd("zabstate", &[], false),
];

/// The command called `name` (primary name or alias, case-sensitive as in ZooKeeper).
pub fn lookup(name: &str) -> Option<&'static Command> {
    COMMANDS
        .iter()
        .find(|c| c.primary == name || c.aliases.contains(&name))
}

/// What the commands report, gathered at one instant on the core task by [`gather`].
#[derive(Debug, Clone)]
pub struct AdminView {
    /// The figures the four-letter words print.
    pub snap: ServerSnapshot,
    /// The newest complete snapshot (`last_snapshot`).
    pub last_snapshot: Option<LastSnapshot>,
    /// zoo.cfg as read at start-up (`initial_configuration`); `None` on an ensemble
    /// member, which ZooKeeper 3.8 answers `null` (QuorumPeerMain never hands the text
    /// it read to its QuorumPeer).
    pub initial_config: Option<String>,
    /// `system_properties`, sorted by name.
    pub system_properties: BTreeMap<String, String>,
    /// The server.N lines (`voting_view`, `zabstate`, the leader's address).
    pub servers: Vec<ServerSpec>,
    /// This member's client listen address, `addr:port` (ZooKeeper's `0.0.0.0:port`
    /// without clientPortAddress); empty without a client port.
    pub client_address: String,
    /// `reconfigEnabled` (`voting_view`'s client address of this member).
    pub reconfig_enabled: bool,
}

/// Gathers an [`AdminView`] of `server`; runs on the core task (see
/// `admin::core_handle::CoreHandle::query`), so it must stay quick.
pub fn gather(server: &Server, config: &Config, ensemble: Option<&EnsembleView>) -> AdminView {
    let snap = snapshot::build(server, config, ensemble);
    AdminView {
        last_snapshot: server.stats.metrics.storage.figures().last_snapshot,
        initial_config: (!config.is_distributed()).then(|| config.initial_config.clone()),
        system_properties: system_properties(config),
        servers: config.servers.clone(),
        client_address: config.client_port.map_or(String::new(), |port| {
            let addr = config.client_port_address.as_deref().unwrap_or("0.0.0.0");
            format!("{addr}:{port}")
        }),
        reconfig_enabled: config.reconfig_enabled,
        snap,
    }
}

/// zoo.cfg keys ZooKeeper's `QuorumPeerConfig.parseProperties` reads itself; every other
/// key it turns into the system property `zookeeper.<key>`.
const ZK_OWN_KEYS: &[&str] = &[
    "dataDir",
    "dataLogDir",
    "clientPort",
    "localSessionsEnabled",
    "localSessionsUpgradingEnabled",
    "clientPortAddress",
    "secureClientPort",
    "secureClientPortAddress",
    "observerMasterPort",
    "clientPortListenBacklog",
    "tickTime",
    "maxClientCnxns",
    "minSessionTimeout",
    "maxSessionTimeout",
    "initLimit",
    "syncLimit",
    "connectToLearnerMasterLimit",
    "electionAlg",
    "quorumListenOnAllIPs",
    "peerType",
    "syncEnabled",
    "dynamicConfigFile",
    "autopurge.snapRetainCount",
    "autopurge.purgeInterval",
    "standaloneEnabled",
    "reconfigEnabled",
    "sslQuorum",
    "portUnification",
    "sslQuorumReloadCertFiles",
    "quorum.auth.enableSasl",
    "quorum.auth.serverRequireSasl",
    "quorum.auth.learnerRequireSasl",
    "quorum.auth.learner.saslLoginContext",
    "quorum.auth.server.saslLoginContext",
    "quorum.auth.kerberos.servicePrincipal",
    "quorum.cnxn.threads.size",
    "jvm.pause.info-threshold.ms",
    "jvm.pause.warn-threshold.ms",
    "jvm.pause.sleep.time.ms",
    "jvm.pause.monitor",
    "multiAddress.enabled",
    "multiAddress.reachabilityCheckTimeoutMs",
    "multiAddress.reachabilityCheckEnabled",
    "oraclePath",
];

/// keel's answer to ZooKeeper's `System.getProperties()`: the standard properties that
/// describe the process and its platform (JVM internals such as `java.vm.*` have no
/// counterpart and are left out), every `-D` property given, then `zookeeper.<key>` for
/// each zoo.cfg key ZooKeeper does not read itself (it copies those over `-D` values).
fn system_properties(config: &Config) -> BTreeMap<String, String> {
    let mut props = BTreeMap::new();
    let env: HashMap<String, String> = super::fourlw::keel_environment().into_iter().collect();
    let mut put = |k: &str, v: String| {
        props.insert(k.to_string(), v);
    };
    for key in [
        "java.version",
        "java.vendor",
        "java.home",
        "java.class.path",
        "java.io.tmpdir",
        "os.name",
        "os.arch",
        "os.version",
        "user.name",
        "user.home",
        "user.dir",
    ] {
        if let Some(v) = env.get(key) {
            put(key, v.clone());
        }
    }
    put(
        "java.library.path",
        std::env::var("LD_LIBRARY_PATH").unwrap_or_default(),
    );
    put("file.encoding", "UTF-8".into());
    put("native.encoding", "UTF-8".into());
    put("sun.jnu.encoding", "UTF-8".into());
    put("file.separator", "/".into());
    put("path.separator", ":".into());
    put("line.separator", "\n".into());
    put("sun.arch.data.model", (usize::BITS as usize).to_string());
    put(
        "sun.cpu.endian",
        if cfg!(target_endian = "little") {
            "little"
        } else {
            "big"
        }
        .into(),
    );
    put(
        "sun.java.command",
        std::env::args().collect::<Vec<_>>().join(" "),
    );
    let language = std::env::var("LANG")
        .ok()
        .and_then(|l| l.split(['_', '.']).next().map(str::to_string))
        .filter(|l| !l.is_empty() && l != "C" && l != "POSIX")
        .unwrap_or_else(|| "en".to_string());
    put("user.language", language);
    put(
        "user.timezone",
        std::env::var("TZ").unwrap_or_else(|_| "Etc/UTC".to_string()),
    );
    for (name, value) in jvm_flag_properties(
        std::env::var("SERVER_JVMFLAGS").ok().as_deref(),
        std::env::args().skip(1),
    ) {
        put(&name, value);
    }
    for (key, value) in &config.entries {
        let own = ZK_OWN_KEYS.contains(&key.as_str())
            || key.starts_with("server.")
            || key.starts_with("group")
            || key.starts_with("weight")
            || key.starts_with("metricsProvider.");
        if !own {
            put(&format!("zookeeper.{key}"), value.clone());
        }
    }
    props
}

/// The `-Dname=value` properties keel was started with, as main.rs reads them: first
/// from the `SERVER_JVMFLAGS` flag string, then from the command line (`-Dname=value` or
/// `-D name=value`); `-Dname` alone is the empty string, as in Java.
fn jvm_flag_properties(
    jvm_flags: Option<&str>,
    mut args: impl Iterator<Item = String>,
) -> Vec<(String, String)> {
    let split = |p: &str| {
        let (k, v) = p.split_once('=').unwrap_or((p, ""));
        (k.to_string(), v.to_string())
    };
    let mut out: Vec<(String, String)> = jvm_flags
        .map(crate::config::split_shell_words)
        .unwrap_or_default()
        .iter()
        .filter_map(|t| t.strip_prefix("-D"))
        .map(split)
        .collect();
    while let Some(a) = args.next() {
        if a == "-D" {
            if let Some(p) = args.next() {
                out.push(split(&p));
            }
        } else if let Some(p) = a.strip_prefix("-D") {
            out.push(split(p.strip_prefix('=').unwrap_or(p)));
        }
    }
    out
}

/// The body of command `name` (a primary name or alias) with request parameters
/// `params`, as `Commands.runCommand` builds it: an unknown name gives
/// `{"command": name, "error": "Unknown command: name"}`, as ZooKeeper answers (with
/// HTTP 200).
pub fn run(name: &str, params: &HashMap<String, String>, view: &AdminView) -> Value {
    let Some(command) = lookup(name) else {
        return response(name, Map::new(), Some(format!("Unknown command: {name}")));
    };
    if command.server_required && !view.snap.serving {
        return response(
            name,
            Map::new(),
            Some(super::fourlw::ZK_NOT_SERVING.to_string()),
        );
    }
    let snap = &view.snap;
    let mut data = Map::new();
    let mut put = |k: &str, v: Value| {
        data.insert(k.to_string(), v);
    };
    match command.primary {
        "configuration" => {
            let c = &snap.conf;
            put("client_port", json!(c.client_port));
            put("data_dir", json!(c.data_dir));
            put("data_log_dir", json!(c.data_log_dir));
            put("tick_time", json!(c.tick_time_ms));
            put("max_client_cnxns", json!(c.max_client_cnxns));
            put("min_session_timeout", json!(c.min_session_timeout_ms));
            put("max_session_timeout", json!(c.max_session_timeout_ms));
            put("server_id", json!(c.server_id));
            put(
                "client_port_listen_backlog",
                json!(c.client_port_listen_backlog),
            );
        }
        "connections" => {
            let cons: Vec<Value> = snap
                .connections
                .iter()
                .map(|c| connection_info(c, false))
                .collect();
            put("connections", Value::Array(cons));
            put("secure_connections", json!([]));
        }
        "dirs" => {
            put("datadir_size", json!(snap.data_dir_size));
            put("logdir_size", json!(snap.data_log_size));
        }
        "dump" => {
            // getSessionExpiryMap: a learner's is empty (LearnerSessionTracker); a
            // leader's is its local sessions' map with the global one put over it, so a
            // global bucket replaces a local one due at the same instant
            // (LeaderSessionTracker).
            let mut by_time: BTreeMap<i64, &Vec<i64>> = BTreeMap::new();
            if snap.learner_global_sessions.is_none() {
                for b in snap.local_session_expiry.iter().flatten() {
                    by_time.insert(b.expire_at_ms, &b.session_ids);
                }
                for b in &snap.session_expiry {
                    by_time.insert(b.expire_at_ms, &b.session_ids);
                }
            }
            let expiry: Map<String, Value> = by_time
                .into_iter()
                .map(|(at, ids)| (at.to_string(), json!(ids)))
                .collect();
            put("expiry_time_to_session_ids", Value::Object(expiry));
            let ephemerals: Map<String, Value> = snap
                .ephemerals
                .iter()
                .map(|(s, paths)| (s.to_string(), json!(paths)))
                .collect();
            put("session_id_to_ephemeral_paths", Value::Object(ephemerals));
        }
        "environment" => {
            put("zookeeper.version", json!(snap.full_version()));
            for (k, v) in &snap.environment {
                put(k, json!(v));
            }
        }
        "get_trace_mask" => put("tracemask", json!(snap.trace_mask)),
        "hash" => {
            // ZooKeeper's `ZxidDigest` as Jackson writes it, in its key order
            // (measured against ZooKeeper 3.8); version 2 is its
            // `DigestCalculator.DIGEST_VERSION`, the scheme `digest_log` entries follow.
            let digests: Vec<Value> = snap
                .digest_log
                .iter()
                .map(|(zxid, digest)| json!({"zxid": zxid, "digest": digest, "digest_version": 2}))
                .collect();
            put("digests", Value::Array(digests));
        }
        "initial_configuration" => put("initial_configuration", json!(view.initial_config)),
        "is_read_only" => put("read_only", json!(snap.read_only)),
        "last_snapshot" => {
            let (zxid, timestamp) = view
                .last_snapshot
                .map_or((-1, -1), |s| (s.zxid, s.timestamp_s));
            put("zxid", json!(java_hex(zxid)));
            put("timestamp", json!(timestamp));
        }
        "leader" => match &snap.ensemble {
            None => put("error", json!("server is not initialized")),
            Some(e) => {
                let leader = e
                    .leader_id
                    .and_then(|id| view.servers.iter().find(|s| s.id == id));
                put("is_leader", json!(e.is_leader()));
                put("leader_id", json!(e.leader_id.map_or(-1, |id| id as i64)));
                put("leader_ip", json!(leader.map_or("", |s| s.host.as_str())));
            }
        },
        "monitor" => {
            for (k, v) in mntr_entries(snap) {
                let v = match v {
                    MntrValue::Text(t) => json!(t),
                    MntrValue::Int(i) => json!(i),
                    MntrValue::Float(f) => json!(f),
                };
                put(&k, v);
            }
        }
        "observers" => {
            // SyncedObserverConsCommand: a leader's observing learners (synced ones),
            // each as LearnerHandler.getLearnerHandlerInfo; elsewhere none (a follower
            // lists observers only as an observer master, which keel is not).
            let observers: Vec<Value> = snap
                .ensemble
                .as_ref()
                .filter(|e| e.is_leader())
                .map(|e| {
                    e.learners
                        .iter()
                        .filter(|l| l.observer && l.synced)
                        .map(observer_info)
                        .collect()
                })
                .unwrap_or_default();
            put("synced_observers", json!(observers.len()));
            put("observers", Value::Array(observers));
        }
        "server_stats" | "stats" => {
            server_stats(snap, &mut put);
            if command.primary == "stats" {
                let cons: Vec<Value> = snap
                    .connections
                    .iter()
                    .map(|c| connection_info(c, true))
                    .collect();
                put("connections", Value::Array(cons));
                put("secure_connections", json!([]));
            }
        }
        "set_trace_mask" => match params.get("traceMask") {
            None => put(
                "error",
                json!("setTraceMask requires long traceMask argument"),
            ),
            Some(v) => match v.parse::<i64>() {
                Ok(mask) => put("tracemask", json!(mask)),
                Err(_) => put(
                    "error",
                    json!(format!(
                        "setTraceMask requires long traceMask argument, got {v}"
                    )),
                ),
            },
        },
        "system_properties" => {
            for (k, v) in &view.system_properties {
                put(k, json!(v));
            }
        }
        "voting_view" => {
            let mut config = Map::new();
            if let Some(e) = &snap.ensemble {
                for s in view.servers.iter().filter(|s| !s.observer) {
                    config.insert(s.id.to_string(), server_view(s, e.my_id, view));
                }
            }
            put("current_config", Value::Object(config));
        }
        "watch_summary" => {
            let paths: std::collections::BTreeSet<&String> =
                snap.data_watches.iter().flat_map(|(_, p)| p).collect();
            let total: usize = snap.data_watches.iter().map(|(_, p)| p.len()).sum();
            put("num_connections", json!(snap.data_watches.len()));
            put("num_paths", json!(paths.len()));
            put("num_total_watches", json!(total));
        }
        "watches" => {
            let by_session: Map<String, Value> = snap
                .data_watches
                .iter()
                .map(|(s, paths)| (s.to_string(), json!(paths)))
                .collect();
            put("session_id_to_watched_paths", Value::Object(by_session));
        }
        "watches_by_path" => {
            let mut by_path: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
            for (session, paths) in &snap.data_watches {
                for p in paths {
                    by_path.entry(p.as_str()).or_default().push(*session);
                }
            }
            let by_path: Map<String, Value> = by_path
                .into_iter()
                .map(|(p, s)| (p.to_string(), json!(s)))
                .collect();
            put("path_to_session_ids", Value::Object(by_path));
        }
        "zabstate" => match &snap.ensemble {
            None => {
                put("voting", json!(false));
                put("zabstate", json!(""));
            }
            Some(e) => {
                let me = view.servers.iter().find(|s| s.id == e.my_id);
                put("myid", json!(e.my_id));
                put("is_leader", json!(e.is_leader()));
                if let Some(me) = me {
                    put(
                        "quorum_address",
                        multiple_addresses(&me.host, me.quorum_port),
                    );
                    put(
                        "election_address",
                        multiple_addresses(&me.host, me.election_port),
                    );
                }
                // With reconfig on, a member whose server.N line has no client part has
                // no client address in the config it runs (see `server_view`): null.
                let none = view.reconfig_enabled && me.is_some_and(|s| s.client_port.is_none());
                put(
                    "client_address",
                    if none {
                        Value::Null
                    } else {
                        json!(view.client_address)
                    },
                );
                put("voting", json!(me.is_some_and(|s| !s.observer)));
                put(
                    "last_zxid",
                    json!(format!("0x{}", java_hex(snap.last_zxid))),
                );
                put("zab_epoch", json!(snap.last_zxid >> 32));
                put("zab_counter", json!(snap.last_zxid & 0xffff_ffff));
                put("zabstate", json!(e.zab_state));
            }
        },
        // ruok, the resets: nothing beyond command and error.
        _ => {}
    }
    response(command.primary, data, None)
}

/// One observer as the leader's `observers` lists it (LearnerHandler's info, in its
/// key order; `queued_packets_size` is the bytes queued to it).
fn observer_info(l: &super::quorum::LearnerView) -> Value {
    let link = l.link.unwrap_or(QuorumLinkInfo {
        remote: None,
        packets_received: 0,
        packets_sent: 0,
        requests: 0,
        last_zxid: -1,
        queued_packets: 0,
        queued_bytes: 0,
    });
    let remote = link
        .remote
        .map_or_else(|| "<null>".to_string(), |a| java_socket_addr(&a));
    json!({
        "remote_socket_address": remote,
        "sid": l.sid,
        "established": l.connected_at_ms,
        "queued_packets": link.queued_packets,
        "queued_packets_size": link.queued_bytes,
        "packets_received": link.packets_received,
        "packets_sent": link.packets_sent,
        "requests": link.requests,
        "last_zxid": link.last_zxid,
    })
}

/// One voting member as `voting_view` shows it (ZooKeeper's `QuorumServerView`): its
/// addresses, and its client address where known (its server.N line's client part, or
/// this member's own client port unless reconfig is on: with reconfigEnabled the
/// leader re-parses its static config from its text at establishment (ZOOKEEPER-1783)
/// and every member takes that config, whose servers have no client address unless
/// their line has one: ZooKeeper 3.8 then shows "" for this member too).
fn server_view(s: &ServerSpec, my_id: u64, view: &AdminView) -> Value {
    let client = match (s.client_port, s.id == my_id) {
        (Some(port), _) => format!(
            "{}:{port}",
            s.client_address.as_deref().unwrap_or("0.0.0.0")
        ),
        (None, true) if !view.reconfig_enabled => view.client_address.clone(),
        (None, _) => String::new(),
    };
    json!({
        "server_addresses": [format!("{}:{}", s.host, s.quorum_port)],
        "election_addresses": [format!("{}:{}", s.host, s.election_port)],
        "client_address": client,
        "learner_type": if s.observer { "observer" } else { "participant" },
    })
}

/// A one-address `MultipleAddresses` as Jackson serialises its getters (`zabstate`).
fn multiple_addresses(host: &str, port: u16) -> Value {
    let one = format!("{host}:{port}");
    json!({
        "empty": false,
        "all_addresses": [one],
        "all_reachable_addresses": [one],
        "one": one,
        "reachable_address": one,
        "wildcard_addresses": [format!("0.0.0.0:{port}")],
        "all_ports": [port],
        "all_host_strings": [host],
        "all_reachable_addresses_or_all": [one],
        "reachable_or_one": one,
    })
}

/// `CommandResponse.toMap`: the command's keys, then `command` and `error`; an `error`
/// the command set itself keeps its place and its value.
fn response(command: &str, mut m: Map<String, Value>, error: Option<String>) -> Value {
    m.insert("command".into(), json!(command));
    if !m.contains_key("error") {
        m.insert("error".into(), json!(error));
    }
    Value::Object(m)
}

/// `ServerCnxn.getConnectionInfo(brief)`; Jackson writes the socket address as
/// `host:port` (IPv6 in brackets).
fn connection_info(c: &ConnectionSnapshot, brief: bool) -> Value {
    let addr = java_socket_addr(&c.remote);
    let mut m = Map::new();
    m.insert(
        "remote_socket_address".into(),
        json!(addr.strip_prefix('/').unwrap_or(&addr)),
    );
    m.insert("interest_ops".into(), json!(c.interest_ops));
    m.insert("outstanding_requests".into(), json!(c.queued));
    m.insert("packets_received".into(), json!(c.received));
    m.insert("packets_sent".into(), json!(c.sent));
    if !brief {
        m.insert("session_id".into(), json!(c.session_id));
        m.insert("last_operation".into(), json!(c.last_op));
        m.insert("established".into(), json!(c.established_ms));
        m.insert("session_timeout".into(), json!(c.session_timeout_ms));
        m.insert("last_cxid".into(), json!(c.last_cxid));
        m.insert("last_zxid".into(), json!(c.last_zxid));
        m.insert("last_response_time".into(), json!(c.last_response_ms));
        m.insert("last_latency".into(), json!(c.last_latency_ms));
        m.insert("min_latency".into(), json!(c.min_latency_ms));
        m.insert("avg_latency".into(), json!(c.avg_latency_ms));
        m.insert("max_latency".into(), json!(c.max_latency_ms));
    }
    Value::Object(m)
}

/// The keys `srvr`/`server_stats` share with `stats` (`SrvrCommand.run`; the
/// `ServerStats` object as Jackson writes its getters).
/// `server_stats` keys of an ensemble member, in ZooKeeper 3.8's order.
const ENSEMBLE_SERVER_STATS_ORDER: [&str; 18] = [
    "packets_sent",
    "packets_received",
    "fsync_threshold_exceed_count",
    "client_response_stats",
    "provider_null",
    "server_state",
    "outstanding_requests",
    "min_latency",
    "avg_latency",
    "max_latency",
    "data_dir_size",
    "log_dir_size",
    "last_processed_zxid",
    "num_alive_client_connections",
    "uptime",
    "auth_failed_count",
    "non_mtlsremote_conn_count",
    "non_mtlslocal_conn_count",
];

fn server_stats(snap: &ServerSnapshot, put: &mut impl FnMut(&str, Value)) {
    let (last, min, max) = snap.client_response_size_last_min_max;
    let buffer = json!({"last_buffer_size": last, "min_buffer_size": min, "max_buffer_size": max});
    let counter = |name: &str| {
        snap.mntr_counters
            .iter()
            .find(|(k, _)| k == name)
            .map_or(0, |(_, v)| *v)
    };
    let mut stats = Map::new();
    let mut s = |k: &str, v: Value| {
        stats.insert(k.to_string(), v);
    };
    s("packets_sent", json!(snap.packets_sent));
    s("packets_received", json!(snap.packets_received));
    s("fsync_threshold_exceed_count", json!(0));
    s("client_response_stats", buffer.clone());
    s("data_dir_size", json!(snap.data_dir_size));
    s("log_dir_size", json!(snap.data_log_size));
    s("provider_null", json!(false));
    s("server_state", json!(snap.mode));
    s("last_processed_zxid", json!(snap.last_zxid));
    s("outstanding_requests", json!(snap.outstanding_requests));
    s("avg_latency", json!(round4_half_up(snap.latency_avg_ms)));
    s("max_latency", json!(snap.latency_max_ms));
    s("min_latency", json!(snap.latency_min_ms));
    s(
        "num_alive_client_connections",
        json!(snap.connections.len()),
    );
    s("uptime", json!(snap.uptime_ms));
    s("auth_failed_count", json!(counter("auth_failed_count")));
    s(
        "non_mtlsremote_conn_count",
        json!(counter("non_mtls_remote_conn_count")),
    );
    s(
        "non_mtlslocal_conn_count",
        json!(counter("non_mtls_local_conn_count")),
    );
    if snap.ensemble.is_some() {
        // A quorum server's `ServerStats` serialises its getters in another order
        // (captured from a ZooKeeper 3.8 ensemble).
        stats = ENSEMBLE_SERVER_STATS_ORDER
            .iter()
            .filter_map(|&k| stats.get(k).map(|v| (k.to_string(), v.clone())))
            .collect();
    }
    put("version", json!(snap.full_version()));
    put("read_only", json!(snap.read_only));
    put("server_stats", Value::Object(stats));
    put("client_response", buffer);
    if snap.mode == "leader" {
        let (last, min, max) = snap.proposal_sizes_last_min_max;
        put(
            "proposal_stats",
            json!({"last_buffer_size": last, "min_buffer_size": min, "max_buffer_size": max}),
        );
    }
    put("node_count", json!(snap.node_count));
}

/// `value` printed as ZooKeeper's `JsonOutputter` prints it: Jackson's default pretty
/// printer (objects one entry per line, two-space indent, `"key" : value`; arrays inline
/// as `[ a, b ]`; empty ones as `{ }` and `[ ]`), no newline at the end.
pub fn to_jackson_pretty(value: &Value) -> String {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, JacksonFormatter::default());
    // Serializing a Value into memory cannot fail.
    let _ = serde::Serialize::serialize(value, &mut ser);
    String::from_utf8(out).unwrap_or_default()
}

/// Jackson's `DefaultPrettyPrinter` as a serde_json formatter: objects indent, arrays
/// stay on one line (its `FixedSpaceIndenter`) and do not add a level.
#[derive(Default)]
struct JacksonFormatter {
    /// Objects open around the current value.
    depth: usize,
    /// Whether the innermost container written so far has an element.
    has_value: bool,
}

impl JacksonFormatter {
    fn newline_indent<W: ?Sized + io::Write>(&self, w: &mut W) -> io::Result<()> {
        w.write_all(b"\n")?;
        for _ in 0..self.depth {
            w.write_all(b"  ")?;
        }
        Ok(())
    }
}

impl serde_json::ser::Formatter for JacksonFormatter {
    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        w.write_all(b"{")
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            self.newline_indent(w)?;
        } else {
            w.write_all(b" ")?;
        }
        w.write_all(b"}")
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if !first {
            w.write_all(b",")?;
        }
        self.newline_indent(w)
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b" : ")
    }

    fn end_object_value<W: ?Sized + io::Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.has_value = false;
        w.write_all(b"[")
    }

    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b" ]")
    }

    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        w.write_all(if first { b" " } else { b", " })
    }

    fn end_array_value<W: ?Sized + io::Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::fourlw::ConnectionSnapshot;

    fn view() -> AdminView {
        AdminView {
            snap: ServerSnapshot::default(),
            last_snapshot: None,
            initial_config: Some("tickTime=2000\n".into()),
            system_properties: BTreeMap::new(),
            servers: Vec::new(),
            client_address: String::new(),
            reconfig_enabled: false,
        }
    }

    fn body(name: &str) -> String {
        to_jackson_pretty(&run(name, &HashMap::new(), &view()))
    }

    #[test]
    fn jackson_layout_as_zookeeper_prints_it() {
        // Captured from ZooKeeper 3.8.0 (`curl .../commands/ruok`, `.../nosuch`).
        assert_eq!(
            body("ruok"),
            "{\n  \"command\" : \"ruok\",\n  \"error\" : null\n}"
        );
        assert_eq!(
            body("nosuch"),
            "{\n  \"command\" : \"nosuch\",\n  \"error\" : \"Unknown command: nosuch\"\n}"
        );
        // A list of objects, an empty list, an empty object.
        let v = json!({"connections": [{"a": 1, "b": 2.5}], "secure_connections": [], "m": {}});
        assert_eq!(
            to_jackson_pretty(&v),
            "{\n  \"connections\" : [ {\n    \"a\" : 1,\n    \"b\" : 2.5\n  } ],\n  \
             \"secure_connections\" : [ ],\n  \"m\" : { }\n}"
        );
        assert_eq!(to_jackson_pretty(&json!([1, "x"])), "[ 1, \"x\" ]");
    }

    #[test]
    fn aliases_answer_with_the_primary_name() {
        for c in COMMANDS {
            for name in std::iter::once(c.primary).chain(c.aliases.iter().copied()) {
                let v = run(name, &HashMap::new(), &view());
                assert_eq!(v["command"], json!(c.primary), "{name}");
                assert!(v.get("error").is_some(), "{name}");
            }
        }
        assert!(lookup("MNTR").is_none());
    }

    /// `leader`, `voting_view` and `zabstate` of a follower (myid 1) of a 3-member
    /// ensemble led by 3, as ZooKeeper 3.8.0 answers them (captured).
    #[test]
    fn ensemble_answers_of_the_quorum_commands() {
        use crate::admin::quorum::LearnerView;
        let text = "tickTime=500\ninitLimit=10\nsyncLimit=5\ndataDir=/d\nclientPort=3401\n\
                    server.1=127.0.0.1:3402:3403\nserver.2=127.0.0.1:3412:3413\n\
                    server.3=127.0.0.1:3422:3423\n";
        let mut config = Config::parse(text).unwrap();
        config.set_my_id(1).unwrap();
        let server = Server::new(crate::server_settings(&config), 0, 0, 1);
        let e = EnsembleView {
            my_id: 1,
            peer_state: "following - broadcast".into(),
            zab_state: "broadcast".into(),
            leader_id: Some(3),
            accepted_epoch: 1,
            current_epoch: 1,
            last_logged_zxid: 0,
            learners: Vec::new(),
            leader_uptime_ms: None,
            diff_count: 0,
            snap_count: 0,
            proposal_count: 0,
            proposal_sizes: (-1, -1, -1),
            voting_members: 3,
            role_metrics: Default::default(),
            last_election: None,
            looking_since_ms: None,
            config_text: String::new(),
        };
        let v = gather(&server, &config, Some(&e));
        let body = |name: &str| to_jackson_pretty(&run(name, &HashMap::new(), &v));
        assert_eq!(
            body("leader"),
            "{\n  \"is_leader\" : false,\n  \"leader_id\" : 3,\n  \"leader_ip\" : \"127.0.0.1\",\n  \
             \"command\" : \"leader\",\n  \"error\" : null\n}"
        );
        let voting = run("voting_view", &HashMap::new(), &v);
        let one = &voting["current_config"]["1"];
        assert_eq!(one["server_addresses"], json!(["127.0.0.1:3402"]));
        assert_eq!(one["election_addresses"], json!(["127.0.0.1:3403"]));
        assert_eq!(one["client_address"], json!("0.0.0.0:3401"));
        assert_eq!(one["learner_type"], json!("participant"));
        assert_eq!(voting["current_config"]["2"]["client_address"], json!(""));
        let z = run("zabstate", &HashMap::new(), &v);
        let keys: Vec<&String> = z.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "myid",
                "is_leader",
                "quorum_address",
                "election_address",
                "client_address",
                "voting",
                "last_zxid",
                "zab_epoch",
                "zab_counter",
                "zabstate",
                "command",
                "error"
            ]
        );
        assert_eq!(
            z["quorum_address"]["wildcard_addresses"],
            json!(["0.0.0.0:3402"])
        );
        assert_eq!(z["election_address"]["all_ports"], json!([3403]));
        assert_eq!(z["voting"], json!(true));
        assert_eq!(z["last_zxid"], json!("0x0"));
        assert_eq!(z["zabstate"], json!("broadcast"));
        assert_eq!(z["client_address"], json!("0.0.0.0:3401"));
        // An ensemble member: no initial configuration (ZooKeeper 3.8: null).
        let icfg = run("initial_configuration", &HashMap::new(), &v);
        assert_eq!(icfg["initial_configuration"], Value::Null);
        // With reconfig on, this member's own server line has no client address.
        config.reconfig_enabled = true;
        let v = gather(&server, &config, Some(&e));
        let voting = run("voting_view", &HashMap::new(), &v);
        assert_eq!(voting["current_config"]["1"]["client_address"], json!(""));
        let z = run("zabstate", &HashMap::new(), &v);
        assert_eq!(z["client_address"], Value::Null);
        // The leader lists its synced observers as LearnerHandler info (captured shape).
        let observer = LearnerView {
            sid: 4,
            observer: true,
            voting: false,
            synced: true,
            acked_zxid: 0,
            lag_txns: None,
            lag_ms: None,
            lag_ms_at_least: false,
            last_heard_ms_ago: 0,
            connected_at_ms: 1796306247456,
            link: Some(QuorumLinkInfo {
                remote: Some("127.0.0.1:34000".parse().unwrap()),
                packets_received: 25,
                packets_sent: 30,
                requests: 0,
                last_zxid: 0x100000005,
                queued_packets: 0,
                queued_bytes: 0,
            }),
        };
        let leader = EnsembleView {
            my_id: 3,
            leader_id: Some(3),
            peer_state: "leading - broadcast".into(),
            learners: vec![
                LearnerView {
                    observer: false,
                    voting: true,
                    sid: 2,
                    ..observer
                },
                observer,
            ],
            ..e
        };
        let v = gather(&server, &config, Some(&leader));
        assert_eq!(
            serde_json::to_string(&run("observers", &HashMap::new(), &v)).unwrap(),
            "{\"synced_observers\":1,\"observers\":[{\"remote_socket_address\":\"/127.0.0.1:34000\",\
             \"sid\":4,\"established\":1796306247456,\"queued_packets\":0,\"queued_packets_size\":0,\
             \"packets_received\":25,\"packets_sent\":30,\"requests\":0,\"last_zxid\":4294967301}],\
             \"command\":\"observers\",\"error\":null}"
        );
    }

    #[test]
    fn standalone_answers_of_the_quorum_commands() {
        // ZooKeeper's standalone `leader`: its error comes first, then the command.
        assert_eq!(
            body("leader"),
            "{\n  \"error\" : \"server is not initialized\",\n  \"command\" : \"leader\"\n}"
        );
        let z = run("zabstate", &HashMap::new(), &view());
        assert_eq!(z["voting"], json!(false));
        assert_eq!(z["zabstate"], json!(""));
        assert_eq!(
            run("voting_view", &HashMap::new(), &view())["current_config"],
            json!({})
        );
    }

    #[test]
    fn set_trace_mask_needs_a_long() {
        let mut p = HashMap::new();
        let v = run("stmk", &p, &view());
        assert_eq!(
            v["error"],
            json!("setTraceMask requires long traceMask argument")
        );
        p.insert("traceMask".to_string(), "x".to_string());
        let v = run("stmk", &p, &view());
        assert_eq!(
            v["error"],
            json!("setTraceMask requires long traceMask argument, got x")
        );
        p.insert("traceMask".to_string(), "306".to_string());
        let v = run("set_trace_mask", &p, &view());
        assert_eq!(
            (v["tracemask"].clone(), v["error"].clone()),
            (json!(306), Value::Null)
        );
    }

    #[test]
    fn jvm_flags_then_command_line() {
        let args = ["-Da=1", "-D", "b=2", "-D=c=3", "-Dflag", "zoo.cfg"].map(String::from);
        assert_eq!(
            jvm_flag_properties(Some("-Xmx1g -Dz='x y' -cp q"), args.into_iter()),
            [
                ("z", "x y"),
                ("a", "1"),
                ("b", "2"),
                ("c", "3"),
                ("flag", "")
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
        );
    }

    #[test]
    fn shapes_of_the_server_commands() {
        let mut v = view();
        v.snap.connections.push(ConnectionSnapshot {
            remote: "127.0.0.1:57000".parse().unwrap(),
            interest_ops: 1,
            queued: 0,
            received: 10,
            sent: 10,
            session_id: 72058349666041856,
            last_op: "SETD".into(),
            established_ms: 1,
            session_timeout_ms: 10000,
            last_cxid: 9,
            last_zxid: 7,
            last_response_ms: 2,
            last_latency_ms: 2,
            min_latency_ms: 0,
            avg_latency_ms: 3,
            max_latency_ms: 13,
        });
        v.snap.data_watches = vec![(5, vec!["/a".into(), "/b".into()]), (6, vec!["/a".into()])];
        let cons = run("cons", &HashMap::new(), &v);
        let c = &cons["connections"][0];
        assert_eq!(c["remote_socket_address"], json!("127.0.0.1:57000"));
        assert_eq!(c.as_object().unwrap().len(), 16);
        let stats = run("stats", &HashMap::new(), &v);
        assert_eq!(stats["connections"][0].as_object().unwrap().len(), 5);
        assert!(stats["server_stats"]["avg_latency"].is_f64());
        assert_eq!(
            stats["server_stats"]["client_response_stats"]["last_buffer_size"],
            json!(-1)
        );
        let keys: Vec<&String> = stats.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "version",
                "read_only",
                "server_stats",
                "client_response",
                "node_count",
                "connections",
                "secure_connections",
                "command",
                "error"
            ]
        );
        let s = run("wchs", &HashMap::new(), &v);
        assert_eq!(
            (
                &s["num_connections"],
                &s["num_paths"],
                &s["num_total_watches"]
            ),
            (&json!(2), &json!(2), &json!(3))
        );
        let p = run("wchp", &HashMap::new(), &v);
        assert_eq!(p["path_to_session_ids"]["/a"], json!([5, 6]));
        let w = run("wchc", &HashMap::new(), &v);
        assert_eq!(w["session_id_to_watched_paths"]["5"], json!(["/a", "/b"]));
        let l = run("lsnp", &HashMap::new(), &v);
        assert_eq!(
            (&l["zxid"], &l["timestamp"]),
            (&json!("ffffffffffffffff"), &json!(-1))
        );
        let m = run("mntr", &HashMap::new(), &v);
        assert!(m["avg_latency"].is_f64() && m["znode_count"].is_i64());
        assert_eq!(m["server_state"], json!("standalone"));
    }
}

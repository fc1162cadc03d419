//! Gathers the figures the four-letter words, the AdminServer and `/metrics` report from
//! the running [`Server`].

use super::fourlw::{
    java_hash_order, java_long_hash, java_string_hash, keel_environment, ConfSnapshot,
    ConnectionExpiryBucket, ConnectionSnapshot, JavaTable, ServerSnapshot, SessionExpiryBucket,
    Summary,
};
use super::quorum::EnsembleView;
use crate::config::Config;
use crate::member::replica::RoleMetrics;
use crate::server::stats::SummaryStat;
use crate::server::{Role, Server};
use crate::session::SessionTracker;
use crate::storage::{rocks, txnlog, zab};
use crate::watch::Table;
use std::collections::BTreeMap;
use std::net::SocketAddr;

/// The percentiles `mntr` prints for an advanced summary (`AvgMinMaxPercentileCounter`).
const MNTR_QUANTILES: [f64; 4] = [0.5, 0.95, 0.99, 0.999];

/// A [`SummaryStat`] as `mntr` prints it; percentiles truncated to integers as ZooKeeper
/// casts them (`(long) snapshot.getValue(q)`).
pub fn mntr_summary(s: &SummaryStat) -> Summary {
    let q = s.quantiles(&MNTR_QUANTILES);
    let whole = |v: f64| if v.is_nan() { 0 } else { v as u64 };
    Summary {
        count: s.count(),
        sum: s.sum(),
        min: s.min(),
        max: s.max(),
        p50: whole(q[0]),
        p95: whole(q[1]),
        p99: whole(q[2]),
        p999: whole(q[3]),
    }
}

/// The `mntr` summaries (ZooKeeper's BASIC `ServerMetrics` summaries) an ensemble
/// member's role changes feed, by name.
pub fn role_summaries(m: &RoleMetrics) -> [(&'static str, &SummaryStat); 5] {
    [
        ("election_time", &m.election_time),
        ("follower_sync_time", &m.follower_sync_time),
        ("observer_sync_time", &m.observer_sync_time),
        ("unavailable_time", &m.unavailable_time),
        ("leader_unavailable_time", &m.leader_unavailable_time),
    ]
}

/// ZooKeeper's `zookeeper.nio.sessionlessCnxnTimeout` default, ms: the timeout of a
/// connection without a session, and the bucket width of its connection expiry queue.
const SESSIONLESS_CNXN_TIMEOUT_MS: i64 = 10_000;

/// ZooKeeper's connection expiry queue (`NIOServerCnxnFactory.touchCnxn`): each
/// connection expires its session timeout (or [`SESSIONLESS_CNXN_TIMEOUT_MS`]) after its
/// last request, rounded up to the next multiple of [`SESSIONLESS_CNXN_TIMEOUT_MS`].
fn connection_expiry(server: &Server) -> Vec<ConnectionExpiryBucket> {
    let mut buckets: BTreeMap<i64, Vec<(SocketAddr, i64)>> = BTreeMap::new();
    for c in server.conns.values() {
        let timeout_ms = server
            .sessions
            .get(c.session_id)
            .map_or(SESSIONLESS_CNXN_TIMEOUT_MS, |s| s.timeout_ms as i64);
        let last_ms = c.stats.last_response_ms.max(c.stats.established_ms);
        let expire_at_ms = ((last_ms + timeout_ms) / SESSIONLESS_CNXN_TIMEOUT_MS + 1)
            * SESSIONLESS_CNXN_TIMEOUT_MS;
        buckets
            .entry(expire_at_ms)
            .or_default()
            .push((c.addr, c.session_id));
    }
    buckets
        .into_iter()
        .map(|(expire_at_ms, connections)| ConnectionExpiryBucket {
            expire_at_ms,
            connections,
        })
        .collect()
}

/// Open file descriptors of this process (entries of `/proc/self/fd`, as the JVM's
/// `UnixOperatingSystemMXBean` counts them); `None` where `/proc` is missing.
fn open_file_descriptor_count() -> Option<u64> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count() as u64)
}

/// The soft limit on open file descriptors (`Max open files` in `/proc/self/limits`).
fn max_file_descriptor_count() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// A snapshot for the four-letter word asked on the connection from `asker`: that
/// connection is listed too, as ZooKeeper lists it (`cons`, `stat`, the connections in
/// `dump`): no session, one packet received, none sent yet, interest ops 0.
pub fn build_for_word(
    server: &Server,
    config: &Config,
    ensemble: Option<&EnsembleView>,
    asker: SocketAddr,
) -> ServerSnapshot {
    let mut snap = build(server, config, ensemble);
    let now = server.now_ms();
    snap.connections.push(ConnectionSnapshot {
        remote: asker,
        interest_ops: 0,
        queued: 0,
        received: 1,
        sent: 0,
        session_id: 0,
        last_op: "NA".into(),
        established_ms: now,
        session_timeout_ms: SESSIONLESS_CNXN_TIMEOUT_MS,
        last_cxid: -1,
        last_zxid: -1,
        last_response_ms: 0,
        last_latency_ms: 0,
        min_latency_ms: 0,
        avg_latency_ms: 0,
        max_latency_ms: 0,
    });
    let expire_at_ms = (now + SESSIONLESS_CNXN_TIMEOUT_MS) / SESSIONLESS_CNXN_TIMEOUT_MS
        * SESSIONLESS_CNXN_TIMEOUT_MS
        + SESSIONLESS_CNXN_TIMEOUT_MS;
    match snap
        .connection_expiry
        .iter_mut()
        .find(|b| b.expire_at_ms == expire_at_ms)
    {
        Some(b) => b.connections.push((asker, 0)),
        None => snap.connection_expiry.push(ConnectionExpiryBucket {
            expire_at_ms,
            connections: vec![(asker, 0)],
        }),
    }
    snap
}

/// The `Mode:` / `zk_server_state` name of the server's role and whether it serves
/// (ZooKeeper's `ServerStats.getServerState` and `isRunning`): `standalone`, `leader`,
/// `follower` or `observer` (the Zab core observes: a reconfig may have made this member
/// one; without the core's view, this member's server.N line says `:observer`); an
/// ensemble member that is electing or syncing does not serve, and most words then
/// answer [`super::fourlw::ZK_NOT_SERVING`].
fn mode_of(
    server: &Server,
    config: &Config,
    ensemble: Option<&EnsembleView>,
) -> (&'static str, bool) {
    match server.role() {
        Role::Standalone => ("standalone", true),
        Role::Leader { .. } => ("leader", true),
        Role::Learner => {
            let observer = match ensemble {
                Some(e) => e.peer_state.starts_with("observing"),
                None => config
                    .servers
                    .iter()
                    .any(|s| Some(s.id) == config.my_id && s.observer),
            };
            (if observer { "observer" } else { "follower" }, true)
        }
        Role::NotServing => ("follower", false),
        // ReadOnlyZooKeeperServer.getState.
        Role::ReadOnly => ("read-only", true),
    }
}

/// The lines `conf` adds after `serverId` on an ensemble member
/// (`QuorumPeer`'s part of `dumpConf`): the limits, `electionAlg=3`, this member's ports,
/// `peerType` (0 participant, 1 observer), then `membership: ` and the dynamic config
/// (the member's current config, `config_text`, else [`Config::membership`]).
fn quorum_lines(config: &Config, config_text: &str) -> Vec<String> {
    let me = config.servers.iter().find(|s| Some(s.id) == config.my_id);
    let mut lines = vec![
        format!("initLimit={}", config.init_limit),
        format!("syncLimit={}", config.sync_limit),
        "electionAlg=3".to_string(),
        format!(
            "electionPort={}",
            me.map_or(-1, |s| i32::from(s.election_port))
        ),
        format!("quorumPort={}", me.map_or(-1, |s| i32::from(s.quorum_port))),
        format!("peerType={}", u8::from(me.is_some_and(|s| s.observer))),
        "membership: ".to_string(),
    ];
    match config_text {
        "" => lines.extend(config.membership().lines().map(str::to_string)),
        text => lines.extend(text.lines().map(str::to_string)),
    }
    lines
}

/// A snapshot of `server` for the admin surface (four-letter words without the asking
/// connection, AdminServer, metrics); `ensemble` is an ensemble member's Zab side.
pub fn build(server: &Server, config: &Config, ensemble: Option<&EnsembleView>) -> ServerSnapshot {
    let now = server.now_ms();
    let session_of = |conn: u64| server.conns.get(&conn).map(|c| c.session_id).unwrap_or(0);
    let connections = server
        .conns
        .iter()
        .map(|(&id, c)| ConnectionSnapshot {
            remote: c.addr,
            interest_ops: 1,
            queued: server.conn_outstanding_requests(id),
            received: c.stats.received,
            sent: c.stats.sent,
            session_id: c.session_id,
            last_op: c.stats.last_op.to_string(),
            established_ms: c.stats.established_ms,
            session_timeout_ms: server
                .sessions
                .get(c.session_id)
                .or_else(|| server.local_session(c.session_id))
                .map(|s| s.timeout_ms as i64)
                .unwrap_or(0),
            last_cxid: c.stats.last_cxid as i64,
            last_zxid: c.stats.last_zxid,
            last_response_ms: c.stats.last_response_ms,
            last_latency_ms: c.stats.latency.last_ms as i64,
            min_latency_ms: c.stats.latency.min_ms as i64,
            avg_latency_ms: c.stats.latency.avg_ms() as i64,
            max_latency_ms: c.stats.latency.max_ms as i64,
        })
        .collect();
    let mut data_watches: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for (conn, paths) in server.watches.by_connection() {
        let sid = session_of(conn);
        for p in paths {
            if server.watches.contains(Table::Data, &p, conn, 0xff) {
                data_watches.entry(sid).or_default().push(p);
            }
        }
    }
    let expiry_buckets = |sessions: &SessionTracker| {
        let mut buckets: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
        for s in sessions.iter() {
            buckets.entry(s.expires_at_ms).or_default().push(s.id);
        }
        buckets
            .into_iter()
            .map(|(expire_at_ms, session_ids)| SessionExpiryBucket {
                expire_at_ms,
                session_ids,
            })
            .collect::<Vec<_>>()
    };
    let data_dir = config.data_dir.join("version-2").display().to_string();
    let data_log_dir = config.data_log_dir.join("version-2").display().to_string();
    let m = &server.stats.metrics;
    let storage = m.storage.figures();
    let mut summary_sets = Vec::new();
    for (suffix, stats) in [
        ("read_per_namespace", &m.read_per_namespace),
        ("write_per_namespace", &m.write_per_namespace),
    ] {
        // ZooKeeper's counter sets keep them in a ConcurrentHashMap: its order.
        let mut namespaces: Vec<(&str, &SummaryStat)> = stats.iter().collect();
        java_hash_order(&mut namespaces, JavaTable::Concurrent, |(n, _)| {
            java_string_hash(n)
        });
        for (namespace, s) in namespaces {
            summary_sets.push((format!("{namespace}_{suffix}"), mntr_summary(s)));
        }
    }
    let (mode, serving) = mode_of(server, config, ensemble);
    ServerSnapshot {
        mode: mode.to_string(),
        serving,
        read_only: server.role() == Role::ReadOnly,
        latency_min_ms: m.request_latency.min(),
        latency_avg_ms: m.request_latency.avg(),
        latency_max_ms: m.request_latency.max(),
        outstanding_requests: server.outstanding_requests(),
        client_response_size_last_min_max: (
            m.response_size.last,
            m.response_size.min,
            m.response_size.max,
        ),
        open_file_descriptor_count: open_file_descriptor_count(),
        max_file_descriptor_count: max_file_descriptor_count(),
        mntr_counters: [
            (
                "connection_request_count".to_string(),
                m.connection_requests as i64,
            ),
            ("bytes_received_count".to_string(), m.bytes_received as i64),
            (
                "local_sessions".to_string(),
                server.local_session_count() as i64,
            ),
        ]
        .into_iter()
        .chain(ensemble.into_iter().flat_map(|e| {
            [
                ("diff_count".to_string(), e.diff_count as i64),
                (
                    "learner_proposal_received_count".to_string(),
                    e.role_metrics.learner_proposals_received as i64,
                ),
                (
                    "learner_commit_received_count".to_string(),
                    e.role_metrics.learner_commits_received as i64,
                ),
                (
                    "commit_count".to_string(),
                    e.role_metrics.leader_commits as i64,
                ),
                (
                    "looking_count".to_string(),
                    e.role_metrics.looking_count as i64,
                ),
                ("proposal_count".to_string(), e.proposal_count as i64),
                ("snap_count".to_string(), e.snap_count as i64),
            ]
        }))
        .collect(),
        mntr_summaries: vec![
            ("readlatency".into(), mntr_summary(&m.read_latency)),
            ("updatelatency".into(), mntr_summary(&m.update_latency)),
            ("fsynctime".into(), mntr_summary(&storage.fsync_time)),
            ("snapshottime".into(), mntr_summary(&storage.snapshot_time)),
        ]
        .into_iter()
        .chain(ensemble.into_iter().flat_map(|e| {
            role_summaries(&e.role_metrics)
                .into_iter()
                .map(|(name, s)| (name.to_string(), mntr_summary(s)))
        }))
        .collect(),
        mntr_summary_sets: summary_sets,
        packets_received: server.stats.packets_received,
        packets_sent: server.stats.packets_sent,
        connections,
        // A leader's last processed zxid starts at its epoch's first zxid once it is
        // established (ZooKeeper's `Leader.startZkServer` sets it to `makeZxid(epoch, 0)`).
        last_zxid: match server.role() {
            Role::Leader { epoch } => (i64::from(epoch) << 32).max(server.last_zxid),
            _ => server.last_zxid,
        },
        // ZooKeeper's DataTree holds the root under both "" and "/", and reports the
        // size of that map (a fresh server has 5); keel keeps the root once.
        node_count: server.tree.node_count() as u64 + 1,
        watch_count: server.watches.watch_count() as u64,
        approximate_data_size: server.tree.approximate_data_size().max(0) as u64,
        uptime_ms: (now - server.stats.started_ms).max(0) as u64,
        conf: ConfSnapshot {
            client_port: config.client_port.map(i32::from).unwrap_or(-1),
            secure_client_port: config.secure_client_port.map(i32::from).unwrap_or(-1),
            data_dir,
            data_log_dir,
            tick_time_ms: config.tick_time_ms as i64,
            max_client_cnxns: config.max_client_cnxns as i64,
            min_session_timeout_ms: config.min_session_timeout_ms as i64,
            max_session_timeout_ms: config.max_session_timeout_ms as i64,
            client_port_listen_backlog: -1,
            // A zoo.cfg that is not distributed runs as ZooKeeperServerMain, which has no
            // server id: `conf` says serverId=0 there even with a myid file and one
            // server.N line (measured with ZooKeeper 3.8).
            server_id: if config.is_distributed() {
                config.my_id.unwrap_or(0) as i64
            } else {
                0
            },
            quorum_lines: match ensemble {
                Some(e) => quorum_lines(config, &e.config_text),
                None => Vec::new(),
            },
        },
        environment: keel_environment(),
        data_watches: data_watches.into_iter().collect(),
        ephemerals: ephemerals(server),
        digest_log: server.tree.digest_log().collect(),
        connection_expiry: connection_expiry(server),
        session_expiry: expiry_buckets(&server.sessions),
        local_session_expiry: server.local_session_table().map(expiry_buckets),
        // A learner's session tracker lists the replicated session table.
        learner_global_sessions: matches!(mode, "follower" | "observer" | "read-only").then(|| {
            server
                .sessions
                .iter()
                .map(|s| (s.id, s.timeout_ms))
                .collect()
        }),
        // ZooKeeper's `getQuorumSize` is the voting view's size: the member's current
        // config's.
        quorum_size: ensemble.map_or(0, |e| e.voting_members),
        proposal_sizes_last_min_max: ensemble.map_or((-1, -1, -1), |e| e.proposal_sizes),
        ensemble: ensemble.cloned(),
        data_dir_size: [rocks::DB_DIR, zab::SNAP_DIR]
            .iter()
            .map(|d| dir_size(&config.data_dir.join(d)))
            .sum(),
        data_log_size: [txnlog::TXNLOG_DIR, rocks::WAL_DIR]
            .iter()
            .map(|d| dir_size(&config.data_log_dir.join(d)))
            .sum(),
        ..ServerSnapshot::default()
    }
}

/// Ephemeral paths by owner session in the order ZooKeeper's `dump` lists them: the
/// DataTree's ConcurrentHashMap of sessions, each one's paths a HashSet.
fn ephemerals(server: &Server) -> Vec<(i64, Vec<String>)> {
    let mut out: Vec<(i64, Vec<String>)> = server
        .tree
        .all_ephemerals()
        .iter()
        .map(|(s, paths)| {
            let mut paths: Vec<String> = paths.iter().cloned().collect();
            java_hash_order(&mut paths, JavaTable::Plain, |p| java_string_hash(p));
            (*s, paths)
        })
        .collect();
    out.sort_unstable_by_key(|(s, _)| *s);
    java_hash_order(&mut out, JavaTable::Concurrent, |(s, _)| java_long_hash(*s));
    out
}

/// Bytes in the files under `dir`, recursively; 0 where it is missing. ZooKeeper's
/// `dataDirSize`/`dataLogSize` sum its snapshot and txn log directories
/// (`ZKDatabase`/`FileTxnSnapLog` sizes); keel's own files live in `keel-db` (snapshots
/// and metadata; `version-2` holds an ensemble member's epoch files) and `keel-txnlog`
/// (`keel-wal`: RocksDB's log), preallocated segments counted at their length as
/// ZooKeeper counts its preallocated logs.
fn dir_size(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            Ok(_) => e.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_id_of(text: &str, my_id: Option<u64>) -> i64 {
        let mut config = Config::parse(text).unwrap();
        if let Some(id) = my_id {
            config.set_my_id(id).unwrap();
        }
        let server = Server::new(crate::server_settings(&config), 0, 0, 1);
        build(&server, &config, None).conf.server_id
    }

    #[test]
    fn a_standalone_server_has_no_server_id_even_with_a_myid() {
        let one = "tickTime=2000\ndataDir=/d\nclientPort=2181\nserver.1=127.0.0.1:2888:3888\n";
        assert_eq!(
            server_id_of(one, Some(1)),
            0,
            "ZooKeeperServerMain: serverId=0"
        );
        let three = "tickTime=2000\ninitLimit=5\nsyncLimit=2\ndataDir=/d\nclientPort=2181\n\
                     server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.1:2889:3889\n\
                     server.3=127.0.0.1:2890:3890\n";
        assert_eq!(server_id_of(three, Some(2)), 2);
    }

    /// An ensemble member's `conf` ends with ZooKeeper's quorum lines (captured from a
    /// ZooKeeper 3.8.0 member, myid 3), the last one unended; the leader's `Zxid` is its
    /// epoch's first zxid.
    #[test]
    fn ensemble_conf_and_leader_zxid_match_capture() {
        let text = "tickTime=500\ninitLimit=10\nsyncLimit=5\ndataDir=/d\nclientPort=3521\n\
                    server.1=127.0.0.1:3502:3503\nserver.2=127.0.0.1:3512:3513\n\
                    server.3=127.0.0.1:3522:3523\n";
        let mut config = Config::parse(text).unwrap();
        config.set_my_id(3).unwrap();
        let mut server = Server::new(crate::server_settings(&config), 0, 0, 1);
        server.handle(0, crate::server::Input::Role(Role::Leader { epoch: 1 }));
        let view = EnsembleView {
            my_id: 3,
            peer_state: "leading - broadcast".into(),
            zab_state: "broadcast".into(),
            leader_id: Some(3),
            accepted_epoch: 1,
            current_epoch: 1,
            last_logged_zxid: 0,
            learners: Vec::new(),
            leader_uptime_ms: Some(0),
            diff_count: 2,
            snap_count: 1,
            proposal_count: 0,
            proposal_sizes: (-1, -1, -1),
            voting_members: 3,
            role_metrics: Default::default(),
            last_election: None,
            looking_since_ms: None,
            config_text: String::new(),
        };
        let snap = build(&server, &config, Some(&view));
        let conf = super::super::fourlw::render("conf", &snap).unwrap();
        let tail = conf.split_once("serverId=").unwrap().1;
        assert_eq!(
            tail,
            "3\ninitLimit=10\nsyncLimit=5\nelectionAlg=3\nelectionPort=3523\nquorumPort=3522\n\
             peerType=0\nmembership: \nserver.1=127.0.0.1:3502:3503:participant\n\
             server.2=127.0.0.1:3512:3513:participant\n\
             server.3=127.0.0.1:3522:3523:participant\nversion=0"
        );
        assert_eq!(snap.last_zxid, 0x1_0000_0000);
        assert_eq!(snap.quorum_size, 3);
        // The leader's sync counters are mntr's (ZooKeeper's ServerMetrics names).
        let mntr = super::super::fourlw::mntr_entries(&snap);
        let value = |k: &str| mntr.iter().find(|(n, _)| n == k).unwrap().1.render();
        assert_eq!(
            (value("diff_count"), value("snap_count")),
            ("2".into(), "1".into())
        );
        // Standalone: no quorum lines.
        assert!(build(&server, &config, None).conf.quorum_lines.is_empty());
    }

    /// `Mode:` follows the server's role; an electing member does not serve; an
    /// `:observer` line makes a learner an observer.
    #[test]
    fn mode_follows_the_role() {
        let text = "tickTime=2000\ninitLimit=5\nsyncLimit=2\ndataDir=/d\nclientPort=2181\n\
                    server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.1:2889:3889\n\
                    server.3=127.0.0.1:2890:3890:observer\n";
        let mode = |my_id: u64, role: Role| {
            let mut config = Config::parse(text).unwrap();
            config.set_my_id(my_id).unwrap();
            let mut server = Server::new(crate::server_settings(&config), 0, 0, 1);
            server.handle(0, crate::server::Input::Role(role));
            let snap = build(&server, &config, None);
            (snap.mode, snap.serving)
        };
        assert_eq!(mode(1, Role::Leader { epoch: 1 }), ("leader".into(), true));
        assert_eq!(mode(2, Role::Learner), ("follower".into(), true));
        assert_eq!(mode(3, Role::Learner), ("observer".into(), true));
        assert!(!mode(2, Role::NotServing).1);
        let standalone = Config::parse("dataDir=/d\n").unwrap();
        let server = Server::new(crate::server_settings(&standalone), 0, 0, 1);
        assert_eq!(build(&server, &standalone, None).mode, "standalone");
    }
}

//! Gathers the figures the four-letter words print from the running [`Server`].

use super::fourlw::{
    keel_environment, ConfSnapshot, ConnectionSnapshot, ServerSnapshot, SessionExpiryBucket,
};
use crate::config::Config;
use crate::server::Server;
use crate::watch::Table;
use std::collections::BTreeMap;

/// A snapshot of `server` for rendering a four-letter word.
pub fn build(server: &Server, config: &Config) -> ServerSnapshot {
    let now = server.now_ms();
    let session_of = |conn: u64| server.conns.get(&conn).map(|c| c.session_id).unwrap_or(0);
    let connections = server
        .conns
        .values()
        .map(|c| ConnectionSnapshot {
            remote: c.addr,
            interest_ops: 1,
            queued: 0,
            received: c.stats.received,
            sent: c.stats.sent,
            session_id: c.session_id,
            last_op: c.stats.last_op.to_string(),
            established_ms: c.stats.established_ms,
            session_timeout_ms: server
                .sessions
                .get(c.session_id)
                .map(|s| s.timeout_ms as i64)
                .unwrap_or(0),
            last_cxid: c.stats.last_cxid as i64,
            last_zxid: c.stats.last_zxid,
            last_response_ms: c.stats.last_response_ms,
            last_latency_ms: 0,
            min_latency_ms: 0,
            avg_latency_ms: 0,
            max_latency_ms: 0,
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
    let mut buckets: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for s in server.sessions.iter() {
        buckets.entry(s.expires_at_ms).or_default().push(s.id);
    }
    let data_dir = config.data_dir.join("version-2").display().to_string();
    let data_log_dir = config.data_log_dir.join("version-2").display().to_string();
    ServerSnapshot {
        packets_received: server.stats.packets_received,
        packets_sent: server.stats.packets_sent,
        connections,
        last_zxid: server.last_zxid,
        node_count: server.tree.node_count() as u64,
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
            server_id: config.my_id.unwrap_or(0) as i64,
            quorum_lines: Vec::new(),
        },
        environment: keel_environment(),
        data_watches: data_watches.into_iter().collect(),
        ephemerals: server
            .tree
            .all_ephemerals()
            .iter()
            .map(|(s, paths)| (*s, paths.iter().cloned().collect()))
            .collect(),
        session_expiry: buckets
            .into_iter()
            .map(|(expire_at_ms, session_ids)| SessionExpiryBucket {
                expire_at_ms,
                session_ids,
            })
            .collect(),
        ..ServerSnapshot::default()
    }
}

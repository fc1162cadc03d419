//! The figures behind `mntr`, `srvr`, the AdminServer and `/metrics`: request latencies,
//! per-namespace read and write sizes, reply sizes, and the storage thread's fsync and
//! snapshot times.
//!
//! Everything here is bounded: a [`SummaryStat`] keeps all-time count/sum/min/max plus a
//! fixed window of recent values for percentiles, and [`NamespaceStats`] tracks at most
//! [`MAX_NAMESPACES`] top-level znodes. Time still comes in as a value: the state machine
//! records `now_ms - arrival_ms`; only the storage thread measures with its own clock,
//! because fsync time is what it measures (ZooKeeper's `FileTxnLog` does the same).
//!
//! Source of the rules: ZooKeeper 3.8 `ServerStats.updateLatency` (every request that
//! reaches FinalRequestProcessor counts; a request with a txn header is an update, the
//! rest reads), `ServerCnxn.updateStatsForResponse` (per-connection latency),
//! `DataTree.updateReadStat`/`updateWriteStat` (per-namespace sizes), `BufferStats`
//! (reply sizes) and `AvgMinMaxPercentileCounter` (percentiles of a uniform sample).

use super::txn::{Txn, TxnOp};
use super::Server;
use crate::proto::opcode as op;
use crate::proto::Request;
use crate::watch::ConnId;
use parking_lot::Mutex;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// Recent values kept per summary for percentiles (ZooKeeper's reservoirs hold 1028).
pub const SUMMARY_WINDOW: usize = 1024;

/// Recent values kept per namespace summary (only the median is reported for them).
pub const NAMESPACE_WINDOW: usize = 64;

/// Top-level namespaces tracked by [`NamespaceStats`]; values for further namespaces are
/// not recorded, so a tree with a million top-level znodes cannot grow this without bound.
pub const MAX_NAMESPACES: usize = 1024;

/// ZooKeeper's `DataTree.STAT_OVERHEAD_BYTES`: a Stat's longs and ints, counted into every
/// read's size.
const STAT_OVERHEAD_BYTES: u64 = 6 * 8 + 5 * 4;

/// Count, sum, min and max of every value ever added (units are the caller's: ms for
/// latencies, bytes for sizes), plus the last [`SummaryStat::window`] values for
/// percentiles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryStat {
    count: u64,
    sum: u64,
    /// `u64::MAX` before the first value.
    min: u64,
    max: u64,
    recent: VecDeque<u64>,
    window: usize,
}

impl Default for SummaryStat {
    fn default() -> Self {
        SummaryStat::new(SUMMARY_WINDOW)
    }
}

impl SummaryStat {
    /// An empty summary keeping the last `window` values (at least 1) for percentiles.
    pub fn new(window: usize) -> SummaryStat {
        SummaryStat {
            count: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
            recent: VecDeque::new(),
            window: window.max(1),
        }
    }

    /// Records one value.
    pub fn add(&mut self, value: u64) {
        self.count += 1;
        self.sum = self.sum.saturating_add(value);
        self.min = self.min.min(value);
        self.max = self.max.max(value);
        if self.recent.len() == self.window {
            self.recent.pop_front();
        }
        self.recent.push_back(value);
    }

    /// Forgets every value (`srst`).
    pub fn reset(&mut self) {
        *self = SummaryStat::new(self.window);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Sum of the values recorded.
    pub fn sum(&self) -> u64 {
        self.sum
    }

    /// Smallest value, 0 before any (ZooKeeper's `AvgMinMaxCounter.getMin`).
    pub fn min(&self) -> u64 {
        if self.count == 0 {
            0
        } else {
            self.min
        }
    }

    /// Largest value, 0 before any.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Mean value, 0.0 before any (not rounded; ZooKeeper rounds it half-up to 4 places
    /// when it prints it).
    pub fn avg(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    /// The `q` quantiles (each in 0..=1) of the recent window, interpolated between
    /// neighbouring sorted values as Dropwizard's `UniformSnapshot.getValue` does (the
    /// reservoir behind ZooKeeper's percentiles); NaN for each when nothing was recorded
    /// (what Prometheus' summaries report then).
    pub fn quantiles(&self, qs: &[f64]) -> Vec<f64> {
        if self.recent.is_empty() {
            return vec![f64::NAN; qs.len()];
        }
        let mut sorted: Vec<u64> = self.recent.iter().copied().collect();
        sorted.sort_unstable();
        qs.iter()
            .map(|&q| {
                let pos = q.clamp(0.0, 1.0) * (sorted.len() + 1) as f64;
                if pos < 1.0 {
                    return sorted[0] as f64;
                }
                if pos >= sorted.len() as f64 {
                    return sorted[sorted.len() - 1] as f64;
                }
                let index = pos as usize;
                let lower = sorted[index - 1] as f64;
                let upper = sorted[index] as f64;
                lower + (pos - pos.floor()) * (upper - lower)
            })
            .collect()
    }
}

/// A [`SummaryStat`] per top-level namespace (`/app/x` belongs to `app`), at most
/// [`MAX_NAMESPACES`] of them (ZooKeeper's `read_per_namespace` / `write_per_namespace`).
#[derive(Debug, Clone, Default)]
pub struct NamespaceStats {
    by_namespace: BTreeMap<String, SummaryStat>,
}

impl NamespaceStats {
    /// Records `bytes` for the namespace of `path`; nothing for `/` or a path without one.
    pub fn add(&mut self, path: &str, bytes: u64) {
        let Some(namespace) = top_namespace(path) else {
            return;
        };
        if let Some(s) = self.by_namespace.get_mut(namespace) {
            s.add(bytes);
        } else if self.by_namespace.len() < MAX_NAMESPACES {
            let mut s = SummaryStat::new(NAMESPACE_WINDOW);
            s.add(bytes);
            self.by_namespace.insert(namespace.to_string(), s);
        }
    }

    /// Every namespace with its summary, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &SummaryStat)> {
        self.by_namespace.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Zeroes every namespace's summary (`srst`); the namespaces stay listed, as in
    /// ZooKeeper's `AvgMinMaxCounterSet.reset`.
    pub fn reset(&mut self) {
        self.by_namespace.values_mut().for_each(SummaryStat::reset);
    }
}

/// ZooKeeper's `PathUtils.getTopNamespace`: the first component of an absolute path.
fn top_namespace(path: &str) -> Option<&str> {
    let rest = path.strip_prefix('/')?;
    let first = rest.split('/').next()?;
    (!first.is_empty()).then_some(first)
}

/// Sizes of the replies sent, in bytes without the 4-byte length prefix (ZooKeeper's
/// `BufferStats`): -1 before the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferStats {
    pub last: i64,
    pub min: i64,
    pub max: i64,
}

impl Default for BufferStats {
    fn default() -> Self {
        BufferStats {
            last: -1,
            min: -1,
            max: -1,
        }
    }
}

impl BufferStats {
    /// Records one reply of `size` bytes.
    pub fn record(&mut self, size: i64) {
        self.last = size;
        if self.min < 0 || size < self.min {
            self.min = size;
        }
        self.max = self.max.max(size);
    }
}

/// One connection's request latencies in ms (`cons`: `llat`, `minlat`, `avglat`,
/// `maxlat`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnLatency {
    pub last_ms: u64,
    /// 0 before the first request (ZooKeeper prints 0 then, not its sentinel).
    pub min_ms: u64,
    pub max_ms: u64,
    pub total_ms: u64,
    pub count: u64,
}

impl ConnLatency {
    /// Records one answered request.
    pub fn add(&mut self, latency_ms: u64) {
        self.last_ms = latency_ms;
        self.min_ms = if self.count == 0 {
            latency_ms
        } else {
            self.min_ms.min(latency_ms)
        };
        self.max_ms = self.max_ms.max(latency_ms);
        self.total_ms = self.total_ms.saturating_add(latency_ms);
        self.count += 1;
    }

    /// Mean latency with Java's integer division, as ZooKeeper prints `avglat`.
    pub fn avg_ms(&self) -> u64 {
        self.total_ms.checked_div(self.count).unwrap_or(0)
    }
}

/// The snapshot most recently completed (`last_snapshot` / `lsnp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastSnapshot {
    pub zxid: i64,
    /// When it completed, seconds since the Unix epoch; -1 when unknown (a snapshot
    /// found at start-up: keel's store does not record when it was written).
    pub timestamp_s: i64,
}

/// What the storage thread measured: fsync time per group commit and snapshot time, ms.
#[derive(Debug, Clone, Default)]
pub struct StorageFigures {
    /// `fsynctime`: one value per synced batch of txns.
    pub fsync_time: SummaryStat,
    /// `snapshottime`: from the first chunk of a snapshot to its completion.
    pub snapshot_time: SummaryStat,
    pub last_snapshot: Option<LastSnapshot>,
}

/// A handle on [`StorageFigures`] shared by the storage thread (which writes them) and the
/// admin surface (which reads them). The lock is held only to add a value or copy the
/// figures, never across I/O.
#[derive(Debug, Clone, Default)]
pub struct StorageStats(Arc<Mutex<StorageFigures>>);

impl StorageStats {
    /// Records one sync of the txn log that took `ms`.
    pub fn record_fsync(&self, ms: u64) {
        self.0.lock().fsync_time.add(ms);
    }

    /// Records a snapshot at `zxid` completed at `timestamp_s` after `elapsed_ms`.
    pub fn record_snapshot(&self, zxid: i64, elapsed_ms: u64, timestamp_s: i64) {
        let mut f = self.0.lock();
        f.snapshot_time.add(elapsed_ms);
        f.last_snapshot = Some(LastSnapshot { zxid, timestamp_s });
    }

    /// Records the newest snapshot found in the store at start-up.
    pub fn found_snapshot(&self, zxid: i64) {
        self.0.lock().last_snapshot = Some(LastSnapshot {
            zxid,
            timestamp_s: -1,
        });
    }

    /// Forgets the fsync and snapshot times (`srst`); the last snapshot stays known.
    pub fn reset_times(&self) {
        let mut f = self.0.lock();
        f.fsync_time.reset();
        f.snapshot_time.reset();
    }

    /// A copy of the figures as they are now.
    pub fn figures(&self) -> StorageFigures {
        self.0.lock().clone()
    }
}

/// Server-wide figures kept by the state machine (plus the storage thread's handle).
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    /// Every answered request (`Latency min/avg/max`, `zk_avg_latency`, ...).
    pub request_latency: SummaryStat,
    /// Requests without a txn (reads, pings, sync, setWatches): `readlatency`.
    pub read_latency: SummaryStat,
    /// Requests with a txn: `updatelatency`.
    pub update_latency: SummaryStat,
    /// Bytes read per namespace: path + data (or child names) + a Stat.
    pub read_per_namespace: NamespaceStats,
    /// Bytes written per namespace: path + data.
    pub write_per_namespace: NamespaceStats,
    /// Reply sizes (`zk_last_client_response_size`, ...).
    pub response_size: BufferStats,
    /// Client connections registered with the state machine (`connection_request_count`;
    /// four-letter-word connections are not, as in ZooKeeper).
    pub connection_requests: u64,
    /// Bytes of client frames read (`bytes_received_count`, see
    /// [`super::Input::Received`]).
    pub bytes_received: u64,
    /// Filled by the storage thread.
    pub storage: StorageStats,
}

impl Metrics {
    /// Clears what ZooKeeper's `srst` clears (`ServerStats.reset`: request latency, reply
    /// sizes and, through `ServerMetrics.resetAll`, every summary and counter); the
    /// caller zeroes the packet counters.
    pub fn reset(&mut self) {
        self.request_latency.reset();
        self.read_latency.reset();
        self.update_latency.reset();
        self.read_per_namespace.reset();
        self.write_per_namespace.reset();
        self.response_size = BufferStats::default();
        self.connection_requests = 0;
        self.bytes_received = 0;
        self.storage.reset_times();
    }
}

impl Server {
    /// `srst` / the AdminServer's `stat_reset`: zeroes the packet counters and clears the
    /// latencies, sizes and times (ZooKeeper's `ServerStats.reset`).
    pub fn reset_stats(&mut self) {
        self.stats.packets_received = 0;
        self.stats.packets_sent = 0;
        self.stats.metrics.reset();
    }

    /// `crst` / `connection_stat_reset`: every connection's figures start over, as
    /// ZooKeeper's `ServerCnxn.resetStats` does (last op `NA`, no last cxid or zxid).
    pub fn reset_connection_stats(&mut self) {
        for c in self.conns.values_mut() {
            c.stats = super::ConnStats {
                last_op: "NA",
                last_cxid: -1,
                last_zxid: -1,
                established_ms: c.stats.established_ms,
                ..super::ConnStats::default()
            };
        }
    }

    /// Requests received and not yet answered, over every connection (`Outstanding:`).
    pub fn outstanding_requests(&self) -> u64 {
        self.conns.values().map(|c| c.inflight.len() as u64).sum()
    }

    /// Requests of connection `conn` received and not yet answered (`cons`: `queued`).
    pub fn conn_outstanding_requests(&self, conn: ConnId) -> u64 {
        self.conns.get(&conn).map_or(0, |c| c.inflight.len() as u64)
    }

    /// Notes a read about to be answered at the current time: its latency since
    /// `arrived_ms`. Auth packets do not count (ZooKeeper answers them before its
    /// request pipeline). The bytes it reads are noted as it reads them
    /// ([`Server::note_read_bytes`]).
    pub(super) fn note_read(&mut self, conn: ConnId, opcode: i32, req: &Request, arrived_ms: i64) {
        if opcode == op::AUTH
            || matches!(
                req,
                Request::Auth(_) | Request::Sasl(_) | Request::SaslGssapi(_)
            )
        {
            return;
        }
        let latency_ms = (self.now_ms - arrived_ms).max(0) as u64;
        self.stats.metrics.read_latency.add(latency_ms);
        self.note_latency(conn, latency_ms);
    }

    /// `DataTree.updateReadStat`: a getData (`body_bytes` its data's length) or
    /// getChildren (the child names' bytes) that found its znode and passed the ACL
    /// check, as ZooKeeper's FinalRequestProcessor checks the ACL before reading; an
    /// exists (0) whenever it finds its znode (ZooKeeper checks no ACL for exists).
    /// Called by the read with the znode in hand: a second lookup only to count its
    /// bytes was 8 % of a follower's CPU under a 90 % read load (issue 16).
    pub(super) fn note_read_bytes(&mut self, path: &str, body_bytes: u64) {
        let bytes = path.len() as u64 + body_bytes + STAT_OVERHEAD_BYTES;
        self.stats.metrics.read_per_namespace.add(path, bytes);
    }

    /// Notes a txn just applied: the bytes it wrote per namespace and, when a client
    /// waits for it on `conn`, its latency since it was proposed.
    pub(super) fn note_txn(&mut self, txn: &Txn, conn: Option<ConnId>) {
        self.note_write(&txn.op);
        if let Some(conn) = conn {
            let latency_ms = (self.now_ms - txn.time_ms).max(0) as u64;
            self.stats.metrics.update_latency.add(latency_ms);
            self.note_latency(conn, latency_ms);
        }
    }

    fn note_write(&mut self, op: &TxnOp) {
        let w = &mut self.stats.metrics.write_per_namespace;
        match op {
            TxnOp::Create { path, data, .. } | TxnOp::SetData { path, data, .. } => {
                let len = data.as_ref().map_or(0, |d| d.len());
                w.add(path, (path.len() + len) as u64);
            }
            // DataTree.setData counts a reconfig's write too.
            TxnOp::Reconfig { data } => {
                let path = super::reconfig::CONFIG_NODE;
                w.add(path, (path.len() + data.len()) as u64);
            }
            TxnOp::Delete { path } => w.add(path, path.len() as u64),
            TxnOp::CloseSession { ephemerals } => {
                for path in ephemerals {
                    w.add(path, path.len() as u64);
                }
            }
            TxnOp::Multi(ops) => {
                for o in ops {
                    self.note_write(o);
                }
            }
            _ => {}
        }
    }

    fn note_latency(&mut self, conn: ConnId, latency_ms: u64) {
        self.stats.metrics.request_latency.add(latency_ms);
        if let Some(c) = self.conns.get_mut(&conn) {
            c.stats.latency.add(latency_ms);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_tracks_all_time_and_window() {
        let mut s = SummaryStat::new(4);
        assert_eq!((s.count(), s.min(), s.max(), s.avg()), (0, 0, 0, 0.0));
        assert!(s.quantiles(&[0.5])[0].is_nan());
        for v in [10, 1, 2, 3, 4] {
            s.add(v);
        }
        assert_eq!((s.count(), s.sum(), s.min(), s.max()), (5, 20, 1, 10));
        assert_eq!(s.avg(), 4.0);
        // The window holds 1, 2, 3, 4: the 10 fell out.
        assert_eq!(s.quantiles(&[0.0, 0.5, 1.0]), vec![1.0, 2.5, 4.0]);
        s.reset();
        assert_eq!(s.count(), 0);
    }

    #[test]
    fn quantiles_match_a_uniform_snapshot() {
        // Seven values with the count, sum, min and max of a captured ZooKeeper
        // `updatelatency` (7, 28, 1, 13) give its captured p50 = 2 and p95 = p99 = 13.
        let mut s = SummaryStat::default();
        for v in [1, 1, 2, 2, 4, 5, 13] {
            s.add(v);
        }
        let q = s.quantiles(&[0.5, 0.95, 0.99]);
        assert_eq!(q, vec![2.0, 13.0, 13.0]);
    }

    #[test]
    fn namespaces_are_top_level_and_bounded() {
        assert_eq!(top_namespace("/app/x/y"), Some("app"));
        assert_eq!(top_namespace("/app"), Some("app"));
        assert_eq!(top_namespace("/"), None);
        assert_eq!(top_namespace("relative"), None);
        let mut n = NamespaceStats::default();
        for i in 0..MAX_NAMESPACES + 10 {
            n.add(&format!("/n{i}"), 1);
        }
        n.add("/n0/child", 5);
        assert_eq!(n.iter().count(), MAX_NAMESPACES);
        assert_eq!(n.by_namespace["n0"].count(), 2);
    }

    #[test]
    fn buffer_and_connection_figures() {
        let mut b = BufferStats::default();
        assert_eq!((b.last, b.min, b.max), (-1, -1, -1));
        b.record(84);
        b.record(16);
        assert_eq!((b.last, b.min, b.max), (16, 16, 84));
        let mut c = ConnLatency::default();
        assert_eq!((c.min_ms, c.avg_ms()), (0, 0));
        for v in [2, 0, 13, 1] {
            c.add(v);
        }
        assert_eq!((c.last_ms, c.min_ms, c.max_ms, c.avg_ms()), (1, 0, 13, 4));
    }

    /// A durable server with one session on connection 1, at time `t0`.
    fn server_with_session(t0: i64) -> Server {
        let settings = crate::server::Settings::default();
        let mut s = Server::new(settings, 0, t0, 1);
        let addr = "127.0.0.1:5000".parse().unwrap();
        s.handle(t0, crate::server::Input::Connected { conn: 1, addr });
        let req = jute::ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            time_out_ms: 10_000,
            session_id: 0,
            passwd: bytes::Bytes::from_static(&[0; 16]),
            read_only: false,
        };
        s.handle(t0, crate::server::Input::Handshake { conn: 1, req });
        s.handle(t0, crate::server::Input::Durable { zxid: 1 });
        s
    }

    fn create(path: &str, data: &'static [u8]) -> Request {
        Request::Create(crate::proto::request::CreateOp {
            opcode: op::CREATE,
            path: path.into(),
            data: Some(bytes::Bytes::from_static(data)),
            acl: vec![jute::Acl {
                perms: 31,
                id: jute::Id {
                    scheme: "world".into(),
                    id: "anyone".into(),
                },
            }],
            flags: 0,
            ttl_ms: None,
        })
    }

    #[test]
    fn the_state_machine_times_requests_with_the_time_it_is_given() {
        use crate::server::Input;
        let t0 = 1_700_000_000_000;
        let mut s = server_with_session(t0);
        // Session creation is not timed.
        assert_eq!(s.stats.metrics.request_latency.count(), 0);
        let get = |p: &str| {
            Request::GetData(jute::PathWatchRequest {
                path: p.into(),
                watch: false,
            })
        };
        // A create proposed at t0+10 and durable at t0+40 took 30 ms (it fails, /app is
        // missing, but a refused write still takes a zxid and is timed, as in
        // ZooKeeper); the read queued behind it arrived at t0+20 and is answered at
        // t0+40: 20 ms.
        let input = |xid, opcode, req| Input::Request {
            conn: 1,
            xid,
            opcode,
            req,
            body: bytes::Bytes::new(),
        };
        s.handle(t0 + 10, input(1, op::CREATE, create("/app/x", b"hello")));
        s.handle(t0 + 20, input(2, op::GET_DATA, get("/app")));
        assert_eq!(s.outstanding_requests(), 2);
        s.handle(t0 + 40, Input::Durable { zxid: 2 });
        assert_eq!(s.outstanding_requests(), 0);
        let m = &s.stats.metrics;
        assert_eq!((m.update_latency.count(), m.update_latency.max()), (1, 30));
        // A read is timed whatever its answer.
        assert_eq!((m.read_latency.count(), m.read_latency.max()), (1, 20));
        assert_eq!((m.request_latency.min(), m.request_latency.max()), (20, 30));
        let c = &s.conns[&1].stats.latency;
        assert_eq!((c.last_ms, c.min_ms, c.max_ms, c.count), (20, 20, 30, 2));
        assert!(m.response_size.max > 0);
        // A ping answered at once takes 0 ms.
        s.handle(t0 + 50, input(-2, op::PING, Request::Ping));
        assert_eq!(s.stats.metrics.read_latency.min(), 0);
        assert_eq!(s.conns[&1].stats.last_cxid, 2, "a ping's xid is not a cxid");

        s.reset_stats();
        s.reset_connection_stats();
        let m = &s.stats.metrics;
        assert_eq!(
            (m.request_latency.count(), s.stats.packets_received),
            (0, 0)
        );
        assert_eq!(s.conns[&1].stats.last_op, "NA");
        assert_eq!(s.conns[&1].stats.last_cxid, -1);
    }

    #[test]
    fn namespaces_count_what_is_written_and_read() {
        use crate::server::Input;
        let t0 = 1_700_000_000_000;
        let mut s = server_with_session(t0);
        let input = |xid, opcode, req| Input::Request {
            conn: 1,
            xid,
            opcode,
            req,
            body: bytes::Bytes::new(),
        };
        s.handle(t0, input(1, op::CREATE, create("/app", b"12345")));
        s.handle(t0, Input::Durable { zxid: 2 });
        let read = Request::GetData(jute::PathWatchRequest {
            path: "/app".into(),
            watch: false,
        });
        s.handle(t0, input(2, op::GET_DATA, read));
        let missing = Request::Exists(jute::PathWatchRequest {
            path: "/nothere".into(),
            watch: false,
        });
        s.handle(t0, input(3, op::EXISTS, missing));
        let found = Request::Exists(jute::PathWatchRequest {
            path: "/app".into(),
            watch: false,
        });
        s.handle(t0, input(4, op::EXISTS, found));
        let w: Vec<_> = s.stats.metrics.write_per_namespace.iter().collect();
        assert_eq!(w.len(), 1);
        assert_eq!((w[0].0, w[0].1.sum()), ("app", 4 + 5));
        let r: Vec<_> = s.stats.metrics.read_per_namespace.iter().collect();
        // getData: path + data + a Stat; exists: path + a Stat; the exists of a
        // missing znode reads nothing.
        assert_eq!(r.len(), 1);
        assert_eq!(
            (r[0].0, r[0].1.sum()),
            (
                "app",
                (4 + 5 + STAT_OVERHEAD_BYTES) + (4 + STAT_OVERHEAD_BYTES)
            )
        );
        assert_eq!(r[0].1.count(), 2);
    }

    #[test]
    fn storage_stats_are_shared() {
        let a = StorageStats::default();
        let b = a.clone();
        a.record_fsync(3);
        b.record_snapshot(0x10, 7, 1_700_000_000);
        let f = a.figures();
        assert_eq!(f.fsync_time.count(), 1);
        assert_eq!(f.snapshot_time.sum(), 7);
        assert_eq!(
            f.last_snapshot,
            Some(LastSnapshot {
                zxid: 0x10,
                timestamp_s: 1_700_000_000
            })
        );
    }
}

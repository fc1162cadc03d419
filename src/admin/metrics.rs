//! The Prometheus endpoint: `GET /metrics` on `metricsProvider.httpHost:httpPort` when
//! `metricsProvider.className` names ZooKeeper's `PrometheusMetricsProvider`, with
//! ZooKeeper's metric names and types.
//!
//! ZooKeeper 3.8's provider (`zookeeper-prometheus-metrics`, Prometheus `simpleclient`
//! 0.9.0) registers every `mntr` value under its `mntr` name without `zk_`:
//! - gauges (`ZooKeeperServer.registerMetrics`: `znode_count`, `avg_latency`, ...);
//!   an ensemble member's own (`quorum_size`, a leader's `learners`, `synced_followers`,
//!   ..., an observer's `observer_master_id`) only while it plays that part, as
//!   ZooKeeper registers them when that part starts and unregisters them when it ends
//!   (a read-only member has none of them),
//! - counters (`ServerMetrics.getCounter`: `connection_request_count`, ...), named
//!   exactly so (that simpleclient adds no `_total`),
//! - summaries with `_count`, `_sum` and `quantile` samples: 0.5 for BASIC ones
//!   (`fsynctime`, `snapshottime`), 0.5/0.9/0.99 for ADVANCED ones (`readlatency`,
//!   `updatelatency`); summary sets (`read_per_namespace`, ...) add a `key` label.
//!
//! The body is the Prometheus text exposition format 0.0.4 as simpleclient writes it
//! (`TextFormat.write004`: `# HELP name name`, `# TYPE`, values as Java doubles, labels
//! with a trailing comma). The `prometheus-client` crate cannot produce it: it has no
//! summary type and always appends `_total` to counters, which would rename ZooKeeper's
//! metrics; the exposition is small enough to write directly.
//!
//! JVM metrics (`jvm_*`, from the provider's `exportJvmInfo`) have no counterpart and
//! are not exported.

use super::fourlw::{
    java_double, mntr_ensemble_gauge_names, mntr_entries, mntr_metric_names, MntrKind, MntrValue,
};
use super::quorum::EnsembleView;
use super::snapshot;
use super::BoundedListener;
use crate::admin::core_handle::CoreHandle;
use crate::config::Config;
use crate::server::stats::SummaryStat;
use crate::server::Server;
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, Method, Request, StatusCode};
use axum::response::Response;
use axum::Router;
use std::collections::HashSet;
use std::fmt::Write;
use std::sync::Arc;
use tokio::net::TcpListener;

/// ZooKeeper's Prometheus provider class; any class name ending in
/// `PrometheusMetricsProvider` is taken as it.
pub const PROMETHEUS_PROVIDER: &str =
    "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider";

/// ZooKeeper's providers without an exporter: the default (`mntr` only) and the null one.
const NO_EXPORTER_PROVIDERS: [&str; 2] = [
    "org.apache.zookeeper.metrics.impl.DefaultMetricsProvider",
    "org.apache.zookeeper.metrics.impl.NullMetricsProvider",
];

/// Connections served at once; more wait in the kernel's accept backlog.
pub const MAX_CONNECTIONS: usize = 64;

/// The content type simpleclient's `MetricsServlet` answers with.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Quantiles of a BASIC summary (`PrometheusSummary`, median only).
const BASIC_QUANTILES: [f64; 1] = [0.5];
/// Quantiles of an ADVANCED summary.
const ADVANCED_QUANTILES: [f64; 3] = [0.5, 0.9, 0.99];

/// Summary sets ZooKeeper registers (`ServerMetrics.getSummarySet`), with their level.
const SUMMARY_SETS: [(&str, MntrKind); 5] = [
    ("write_per_namespace", MntrKind::BasicSummary),
    ("read_per_namespace", MntrKind::BasicSummary),
    ("learner_handler_qp_size", MntrKind::BasicSummary),
    ("learner_handler_qp_time_ms", MntrKind::AdvancedSummary),
    ("ack_latency", MntrKind::AdvancedSummary),
];

/// Labelled gauges ZooKeeper registers for quotas (`QuotaMetricsUtils`); keel reports
/// them without samples for now.
const GAUGE_SETS: [&str; 4] = [
    "quota_count_limit_per_namespace",
    "quota_bytes_limit_per_namespace",
    "quota_count_usage_per_namespace",
    "quota_bytes_usage_per_namespace",
];

/// Labelled counters ZooKeeper registers (`quota_exceeded_error_per_namespace`).
const COUNTER_SETS: [&str; 1] = ["quota_exceeded_error_per_namespace"];

/// Whether `metricsProvider.className` asks for the Prometheus exporter.
///
/// Errors: a class keel does not know (ZooKeeper fails to start then too, unable to load
/// the class); the message names the value.
pub fn prometheus_enabled(config: &Config) -> Result<bool, String> {
    match config.metrics_provider_class_name.as_deref() {
        None => Ok(false),
        Some(c) if c.ends_with("PrometheusMetricsProvider") => Ok(true),
        Some(c) if NO_EXPORTER_PROVIDERS.contains(&c) => Ok(false),
        Some(c) => Err(format!(
            "metricsProvider.className={c}: unknown metrics provider (keel knows \
             {PROMETHEUS_PROVIDER} and ZooKeeper's DefaultMetricsProvider and \
             NullMetricsProvider)"
        )),
    }
}

/// Everything one scrape reports, copied from the core at one instant.
#[derive(Debug, Clone)]
pub struct Scrape {
    /// The `mntr` entries (gauges and counters are read from them).
    entries: Vec<(String, MntrValue)>,
    /// Summaries keel measures, by name; the others are reported empty.
    summaries: Vec<(&'static str, SummaryStat)>,
    /// Per-namespace summaries by set name, then namespace.
    summary_sets: Vec<(&'static str, Vec<(String, SummaryStat)>)>,
}

/// Copies what a scrape reports from `server`; runs on the core task.
pub fn gather(server: &Server, config: &Config, ensemble: Option<&EnsembleView>) -> Scrape {
    let snap = snapshot::build(server, config, ensemble);
    let m = &server.stats.metrics;
    let storage = m.storage.figures();
    let copy = |n: &crate::server::stats::NamespaceStats| {
        n.iter()
            .map(|(k, s)| (k.to_string(), s.clone()))
            .collect::<Vec<_>>()
    };
    Scrape {
        entries: mntr_entries(&snap),
        summaries: [
            ("readlatency", m.read_latency.clone()),
            ("updatelatency", m.update_latency.clone()),
            ("fsynctime", storage.fsync_time),
            ("snapshottime", storage.snapshot_time),
        ]
        .into_iter()
        .chain(ensemble.into_iter().flat_map(|e| {
            snapshot::role_summaries(&e.role_metrics)
                .into_iter()
                .map(|(name, s)| (name, s.clone()))
        }))
        .collect(),
        summary_sets: vec![
            ("read_per_namespace", copy(&m.read_per_namespace)),
            ("write_per_namespace", copy(&m.write_per_namespace)),
        ],
    }
}

/// A value as simpleclient prints it (`Collector.doubleToGoString`).
fn go_double(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_string()
    } else if v == f64::INFINITY {
        "+Inf".to_string()
    } else if v == f64::NEG_INFINITY {
        "-Inf".to_string()
    } else {
        java_double(v)
    }
}

/// A label value with `\`, `"` and newlines escaped (text format 0.0.4).
fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The exposition of `scrape`; with `only` set, just the families named in it
/// (simpleclient's `name[]` parameter).
pub fn encode(scrape: &Scrape, only: Option<&HashSet<String>>) -> String {
    let mut out = String::new();
    let wanted = |name: &str| only.is_none_or(|set| set.contains(name));
    let header = |out: &mut String, name: &str, kind: &str| {
        let _ = writeln!(out, "# HELP {name} {name}\n# TYPE {name} {kind}");
    };
    let empty = SummaryStat::new(1);
    for (name, kind) in mntr_metric_names() {
        if !wanted(name) {
            continue;
        }
        match kind {
            MntrKind::Gauge | MntrKind::Counter => {
                let type_name = if kind == MntrKind::Gauge {
                    "gauge"
                } else {
                    "counter"
                };
                header(&mut out, name, type_name);
                let value = scrape.entries.iter().find(|(k, _)| k == name);
                match value {
                    Some((_, MntrValue::Int(i))) => {
                        let _ = writeln!(out, "{name} {}", go_double(*i as f64));
                    }
                    Some((_, MntrValue::Float(f))) => {
                        let _ = writeln!(out, "{name} {}", go_double(*f));
                    }
                    // Not measurable here (e.g. file descriptors without /proc).
                    Some((_, MntrValue::Text(_))) | None => {}
                }
            }
            MntrKind::BasicSummary | MntrKind::AdvancedSummary => {
                header(&mut out, name, "summary");
                let s = scrape
                    .summaries
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map_or(&empty, |(_, s)| s);
                summary_samples(&mut out, name, None, s, kind);
            }
        }
    }
    // The ensemble's gauges, while the member plays the part that registers them.
    for name in mntr_ensemble_gauge_names() {
        if !wanted(name) {
            continue;
        }
        if let Some((_, value)) = scrape.entries.iter().find(|(k, _)| k == name) {
            header(&mut out, name, "gauge");
            let v = match value {
                MntrValue::Int(i) => *i as f64,
                MntrValue::Float(f) => *f,
                MntrValue::Text(_) => continue,
            };
            let _ = writeln!(out, "{name} {}", go_double(v));
        }
    }
    for (name, kind) in SUMMARY_SETS {
        if !wanted(name) {
            continue;
        }
        header(&mut out, name, "summary");
        if let Some((_, sets)) = scrape.summary_sets.iter().find(|(k, _)| *k == name) {
            for (key, s) in sets {
                summary_samples(&mut out, name, Some(key), s, kind);
            }
        }
    }
    for name in GAUGE_SETS {
        if wanted(name) {
            header(&mut out, name, "gauge");
        }
    }
    for name in COUNTER_SETS {
        if wanted(name) {
            header(&mut out, name, "counter");
        }
    }
    out
}

/// The quantile, `_count` and `_sum` samples of one summary (with a `key` label for a
/// summary set member).
fn summary_samples(
    out: &mut String,
    name: &str,
    key: Option<&str>,
    s: &SummaryStat,
    kind: MntrKind,
) {
    let qs: &[f64] = if kind == MntrKind::AdvancedSummary {
        &ADVANCED_QUANTILES
    } else {
        &BASIC_QUANTILES
    };
    let key_label = key.map_or(String::new(), |k| format!("key=\"{}\",", escape_label(k)));
    for (q, v) in qs.iter().zip(s.quantiles(qs)) {
        let _ = writeln!(
            out,
            "{name}{{{key_label}quantile=\"{}\",}} {}",
            java_double(*q),
            go_double(v)
        );
    }
    let labels = if key_label.is_empty() {
        String::new()
    } else {
        format!("{{{key_label}}}")
    };
    let _ = writeln!(out, "{name}_count{labels} {}", go_double(s.count() as f64));
    let _ = writeln!(out, "{name}_sum{labels} {}", go_double(s.sum() as f64));
}

/// A bound `/metrics` endpoint, not yet serving.
pub struct MetricsServer {
    listener: TcpListener,
    /// Idle connections close after this long, ms (`admin.idleTimeout` serves here too:
    /// the Prometheus provider's Jetty has no key of its own).
    idle_timeout_ms: u32,
}

impl MetricsServer {
    /// Binds `metricsProvider.httpHost:httpPort`.
    ///
    /// Errors: the address does not resolve or the port cannot be bound (ZooKeeper then
    /// fails to start: "Cannot boot MetricsProvider").
    pub async fn bind(config: &Config) -> std::io::Result<MetricsServer> {
        let addr = (
            config.metrics_provider_http_host.as_str(),
            config.metrics_provider_http_port,
        );
        Ok(MetricsServer {
            listener: TcpListener::bind(addr).await?,
            idle_timeout_ms: config.admin_idle_timeout_ms,
        })
    }

    /// The bound address (for logs and tests).
    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until the process ends; `core` supplies the figures of each scrape.
    pub async fn serve(self, core: CoreHandle) {
        let app = Router::new().fallback(handle).with_state(Arc::new(core));
        let listener = BoundedListener::new(self.listener, MAX_CONNECTIONS, self.idle_timeout_ms);
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "metrics endpoint stopped");
        }
    }
}

async fn handle(State(core): State<Arc<CoreHandle>>, req: Request<Body>) -> Response {
    let status = |code: StatusCode, text: &'static str| {
        let mut r = Response::new(Body::from(text));
        *r.status_mut() = code;
        r
    };
    if req.uri().path() != "/metrics" {
        return status(StatusCode::NOT_FOUND, "not found\n");
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return status(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
    }
    let only: Option<HashSet<String>> = req.uri().query().and_then(|q| {
        let names: HashSet<String> = q
            .split('&')
            .filter_map(|p| p.split_once('='))
            .filter(|(k, _)| *k == "name[]" || *k == "name%5B%5D")
            .map(|(_, v)| v.to_string())
            .collect();
        (!names.is_empty()).then_some(names)
    });
    let Some(scrape) = core.query(gather).await else {
        return status(StatusCode::SERVICE_UNAVAILABLE, "server is stopping\n");
    };
    let mut resp = Response::new(Body::from(encode(&scrape, only.as_ref())));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(CONTENT_TYPE),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrape() -> Scrape {
        let mut read = SummaryStat::default();
        for v in [1, 2, 3] {
            read.add(v);
        }
        let mut ns = SummaryStat::new(8);
        ns.add(80);
        ns.add(81);
        Scrape {
            entries: vec![
                ("znode_count".into(), MntrValue::Int(10)),
                ("avg_latency".into(), MntrValue::Float(3.2)),
                ("commit_count".into(), MntrValue::Int(4)),
            ],
            summaries: vec![("readlatency", read)],
            summary_sets: vec![("read_per_namespace", vec![("a\"b".into(), ns)])],
        }
    }

    #[test]
    fn gauges_counters_and_summaries_in_simpleclient_format() {
        let text = encode(&scrape(), None);
        assert!(text.contains(
            "# HELP znode_count znode_count\n# TYPE znode_count gauge\nznode_count 10.0\n"
        ));
        assert!(text.contains("avg_latency 3.2\n"));
        // A counter keeps ZooKeeper's name: no `_total`.
        assert!(text.contains("# TYPE commit_count counter\ncommit_count 4.0\n"));
        assert!(!text.contains("_total"));
        assert!(text.contains(
            "# TYPE readlatency summary\n\
             readlatency{quantile=\"0.5\",} 2.0\n\
             readlatency{quantile=\"0.9\",} 3.0\n\
             readlatency{quantile=\"0.99\",} 3.0\n\
             readlatency_count 3.0\n\
             readlatency_sum 6.0\n"
        ));
        // A basic summary with nothing recorded: the median only, NaN.
        assert!(text.contains(
            "# TYPE fsynctime summary\nfsynctime{quantile=\"0.5\",} NaN\n\
             fsynctime_count 0.0\nfsynctime_sum 0.0\n"
        ));
        assert!(text.contains(
            "read_per_namespace{key=\"a\\\"b\",quantile=\"0.5\",} 80.5\n\
             read_per_namespace_count{key=\"a\\\"b\",} 2.0\n\
             read_per_namespace_sum{key=\"a\\\"b\",} 161.0\n"
        ));
        assert!(text.contains("# TYPE quota_exceeded_error_per_namespace counter\n"));
        // No sample without a value (file descriptors unknown here), but the family is
        // still declared.
        assert!(text.contains("# TYPE open_file_descriptor_count gauge\n# HELP"));
    }

    /// An ensemble member's own gauges are exported while `mntr` shows them (a leader's
    /// learners, a member's quorum size) and not at all otherwise, as ZooKeeper
    /// registers and unregisters them.
    #[test]
    fn ensemble_gauges_only_while_shown() {
        let mut s = scrape();
        let text = encode(&s, None);
        assert!(!text.contains("quorum_size"));
        assert!(!text.contains("learners"));
        s.entries.push(("quorum_size".into(), MntrValue::Int(3)));
        s.entries.push(("learners".into(), MntrValue::Int(2)));
        let text = encode(&s, None);
        assert!(text.contains("# TYPE quorum_size gauge\nquorum_size 3.0\n"));
        assert!(text.contains("# TYPE learners gauge\nlearners 2.0\n"));
        assert!(!text.contains("synced_observers"));
    }

    #[test]
    fn name_filter_keeps_only_the_named_families() {
        let only: HashSet<String> = ["znode_count".to_string()].into();
        let text = encode(&scrape(), Some(&only));
        assert_eq!(
            text,
            "# HELP znode_count znode_count\n# TYPE znode_count gauge\nznode_count 10.0\n"
        );
    }

    #[test]
    fn provider_class_names() {
        let mut c = Config::default();
        assert_eq!(prometheus_enabled(&c), Ok(false));
        c.metrics_provider_class_name = Some(PROMETHEUS_PROVIDER.into());
        assert_eq!(prometheus_enabled(&c), Ok(true));
        c.metrics_provider_class_name = Some("com.example.PrometheusMetricsProvider".into());
        assert_eq!(prometheus_enabled(&c), Ok(true));
        c.metrics_provider_class_name = Some(NO_EXPORTER_PROVIDERS[0].into());
        assert_eq!(prometheus_enabled(&c), Ok(false));
        c.metrics_provider_class_name = Some("com.example.Nope".into());
        assert!(prometheus_enabled(&c)
            .unwrap_err()
            .contains("com.example.Nope"));
    }
}

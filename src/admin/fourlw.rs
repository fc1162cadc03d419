//! The four-letter words: ZooKeeper's plain-text admin commands (`ruok`, `srvr`, `mntr`,
//! ...), rendered byte for byte as Apache ZooKeeper 3.8 renders them.
//!
//! The network layer reads the first 4 bytes of a new connection, asks
//! [`is_four_letter_word`], checks the whitelist ([`is_whitelisted`], or answers
//! [`not_whitelisted`]), gathers the server's figures into a [`ServerSnapshot`] and calls
//! [`render`]; it writes the returned text in one write (kazoo reads `envi` with a single
//! `recv`) and closes. Rendering is pure: no clock, no I/O, no locks.
//!
//! Source of every format: ZooKeeper 3.8 `server/command/*Command.java`,
//! `ServerStats.toString`, `ServerCnxn.dumpConnectionInfo`, `ZooKeeperServer.dumpConf`,
//! `ExpiryQueue.dump`, `WatchManager.dumpWatches`, `DataTree.dumpEphemerals` and
//! `DefaultMetricsProvider.dump`, checked against the output of a running 3.8.0 server
//! (the tests below hold those captures).

use super::quorum::EnsembleView;
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};

/// Every four-letter word ZooKeeper 3.8 knows (`FourLetterCommands.cmd2String`, minus the
/// telnet close sequence), sorted.
pub const WORDS: [&str; 18] = [
    "conf", "cons", "crst", "dirs", "dump", "envi", "gtmk", "hash", "isro", "mntr", "ruok", "srst",
    "srvr", "stat", "stmk", "wchc", "wchp", "wchs",
];

/// What keel reports as `zookeeper.version` / `Zookeeper version:`. Clients parse the
/// leading digits and dots: kazoo's `server_version()` takes `([\d\.]*)` from the `envi`
/// line and its CI test asserts it equals `ZOOKEEPER_VERSION` (e.g. `3.8.0`), so the text
/// after the digits must start with something other than a digit or a dot.
pub const DEFAULT_ZOOKEEPER_VERSION: &str = "3.8.0-keel";

/// ZooKeeper's `ZooTrace` default text trace mask (what `gtmk` answers on a fresh server).
pub const DEFAULT_TRACE_MASK: i64 = 306;

/// The line most words print while the server is not serving (`AbstractFourLetterCommand`).
pub const ZK_NOT_SERVING: &str = "This ZooKeeper instance is not currently serving requests";

/// True when the first 4 bytes of a new connection are a known four-letter word, i.e. the
/// connection is an admin command and not a length-prefixed ConnectRequest. Fewer than 4
/// bytes is never a word; bytes after the fourth are ignored (`stmk` carries 8 more: the
/// new trace mask as a big-endian long).
pub fn is_four_letter_word(first4: &[u8]) -> bool {
    first4.len() >= 4 && WORDS.iter().any(|w| w.as_bytes() == &first4[..4])
}

/// ZooKeeper's whitelist rule (`FourLetterCommands.isEnabled`): `whitelist` is the value of
/// `4lw.commands.whitelist` (`None` when the key is absent), a comma-separated list where
/// `*` enables every word. `srvr` is always enabled (zkServer.sh needs it) and `isro` is
/// enabled when `readonlymode.enabled` is true.
pub fn is_whitelisted(word: &str, whitelist: Option<&str>, read_only_mode_enabled: bool) -> bool {
    if word == "srvr" || (word == "isro" && read_only_mode_enabled) {
        return true;
    }
    let Some(list) = whitelist else {
        return false;
    };
    for entry in list.split(',').map(str::trim) {
        if entry == "*" {
            return WORDS.contains(&word);
        }
        if entry == word {
            return true;
        }
    }
    false
}

/// ZooKeeper's exact reply to a known word that is not in `4lw.commands.whitelist`
/// (`NIOServerCnxn.checkFourLetterWord`, printed with `println`).
pub fn not_whitelisted(word: &str) -> String {
    format!("{word} is not executed because it is not in the whitelist.\n")
}

/// The `lop=` abbreviation ZooKeeper's FinalRequestProcessor records for an opcode
/// (PROTOCOL.md "Opcodes"); `NA` for opcodes it does not record (auth, sasl, unknown),
/// which is also the value before a connection's first request.
pub fn last_op_name(opcode: i32) -> &'static str {
    match opcode {
        11 => "PING",
        -10 => "SESS",
        14 => "MULT",
        22 => "MLTR",
        1 | 15 | 19 | 21 => "CREA",
        2 | 20 => "DELE",
        5 => "SETD",
        16 => "RECO",
        7 => "SETA",
        -11 => "CLOS",
        9 => "SYNC",
        13 => "CHEC",
        3 => "EXIS",
        4 => "GETD",
        101 => "SETW",
        105 => "STW2",
        106 => "ADDW",
        6 => "GETA",
        8 | 12 => "GETC",
        104 => "GETACN",
        17 => "CHKW",
        18 => "REMW",
        107 => "HOMI",
        103 => "GETE",
        _ => "NA",
    }
}

/// One client connection as `cons` and `stat` print it (`ServerCnxn.dumpConnectionInfo`).
/// List the connection asking the four-letter word too: ZooKeeper does (it shows up as
/// `[0](queued=0,recved=1,sent=0)`) and counts it in `Connections:`.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionSnapshot {
    /// Peer address, printed Java-style: `/127.0.0.1:48274`, `/[0:0:0:0:0:0:0:1]:5000`.
    pub remote: SocketAddr,
    /// NIO interest ops (1 = read, 4 = write), printed in hex; 0 for a 4lw connection.
    pub interest_ops: u32,
    /// Requests received but not yet answered (`queued=`).
    pub queued: u64,
    /// Packets received on this connection, the 4 bytes of a word included (`recved=`).
    pub received: u64,
    /// Packets sent on this connection (`sent=`).
    pub sent: u64,
    /// Session id; 0 = no session yet, and then only the brief form is printed.
    pub session_id: i64,
    /// Last operation, as [`last_op_name`] gives it (`NA` before the first request).
    pub last_op: String,
    /// When the connection was established, ms since the Unix epoch (`est=`).
    pub established_ms: i64,
    /// Negotiated session timeout in ms (`to=`).
    pub session_timeout_ms: i64,
    /// Last client xid; negative (ZooKeeper starts at -1) leaves `lcxid=` out.
    pub last_cxid: i64,
    /// Zxid of the last reply; -1 before any (printed as 64-bit two's complement hex).
    pub last_zxid: i64,
    /// When the last reply went out, in ms of the server's monotonic clock (`lresp=`).
    pub last_response_ms: i64,
    /// Latency of the last request in ms (`llat=`).
    pub last_latency_ms: i64,
    /// Smallest request latency in ms, 0 before any (`minlat=`).
    pub min_latency_ms: i64,
    /// Mean request latency in ms, integer division as in ZooKeeper (`avglat=`).
    pub avg_latency_ms: i64,
    /// Largest request latency in ms (`maxlat=`).
    pub max_latency_ms: i64,
}

/// One bucket of the session expiry queue (`dump`): the sessions that expire at one
/// tick-rounded instant. Empty buckets are printed too, as ZooKeeper does.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionExpiryBucket {
    /// Expiry instant, ms since the Unix epoch (printed as a Java `Date`, in UTC).
    pub expire_at_ms: i64,
    /// Session ids expiring then.
    pub session_ids: Vec<i64>,
}

/// One bucket of the idle-connection expiry queue (`dump`, "Connections dump").
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionExpiryBucket {
    /// Expiry instant, ms since the Unix epoch (printed as a Java `Date`, in UTC).
    pub expire_at_ms: i64,
    /// (peer address, session id or 0) of each connection expiring then.
    pub connections: Vec<(SocketAddr, i64)>,
}

/// Figures of one ZooKeeper `AvgMinMaxCounter` / `AvgMinMaxPercentileCounter`, as `mntr`
/// prints them (`zk_avg_X`, `zk_min_X`, `zk_max_X`, `zk_cnt_X`, `zk_sum_X`, and for the
/// percentile summaries `zk_p50_X` .. `zk_p999_X`). All zero = nothing recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Summary {
    /// Number of samples.
    pub count: u64,
    /// Sum of the samples; the average printed is `sum / count` rounded to 4 places.
    pub sum: u64,
    /// Smallest sample (0 before any).
    pub min: u64,
    /// Largest sample.
    pub max: u64,
    /// Median (percentile summaries only).
    pub p50: u64,
    /// 95th percentile (percentile summaries only).
    pub p95: u64,
    /// 99th percentile (percentile summaries only).
    pub p99: u64,
    /// 99.9th percentile (percentile summaries only).
    pub p999: u64,
}

/// The settings `conf` prints (`ZooKeeperServer.dumpConf`): ZooKeeper's derived view,
/// not zoo.cfg's text.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfSnapshot {
    /// `clientPort`.
    pub client_port: i32,
    /// `secureClientPort`, -1 when not configured.
    pub secure_client_port: i32,
    /// Snapshot directory: ZooKeeper prints `<dataDir>/version-2`, absolute.
    pub data_dir: String,
    /// Txn log directory: `<dataLogDir>/version-2`, absolute (= data_dir by default).
    pub data_log_dir: String,
    /// `tickTime` in ms.
    pub tick_time_ms: i64,
    /// `maxClientCnxns` (per host; 0 = unlimited).
    pub max_client_cnxns: i64,
    /// Effective `minSessionTimeout` in ms (2 x tickTime by default).
    pub min_session_timeout_ms: i64,
    /// Effective `maxSessionTimeout` in ms (20 x tickTime by default).
    pub max_session_timeout_ms: i64,
    /// `clientPortListenBacklog`, -1 when not configured.
    pub client_port_listen_backlog: i32,
    /// `serverId` (myid), 0 standalone.
    pub server_id: i64,
    /// Lines ZooKeeper adds in an ensemble (`initLimit`, `syncLimit`, `electionAlg`,
    /// `electionPort`, `quorumPort`, `peerType`, then `membership: ` and the dynamic
    /// config): printed verbatim after `serverId`, each followed by a newline but the
    /// last (ZooKeeper prints the dynamic config's text as it is, `version=0` unended).
    pub quorum_lines: Vec<String>,
}

/// Everything the four-letter words print, gathered by the caller at one instant. Plain
/// data: the caller fills what keel knows, [`ServerSnapshot::default`] fills the rest.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSnapshot {
    /// False while the server is not serving (e.g. during election): most words then print
    /// [`ZK_NOT_SERVING`].
    pub serving: bool,
    /// True when serving read-only (partitioned ensemble member): `isro` says `ro`, `stat`
    /// and `srvr` add the READ-ONLY line.
    pub read_only: bool,
    /// Version reported everywhere ([`DEFAULT_ZOOKEEPER_VERSION`]).
    pub zookeeper_version: String,
    /// Build date, ZooKeeper's `yyyy-MM-dd HH:mm 'UTC'` (the full version is
    /// `<version>, built on <date>`).
    pub build_date: String,
    /// `standalone`, `leader`, `follower`, `observer` (`Mode:`, `zk_server_state`).
    pub mode: String,
    /// Smallest request latency in ms (0 before any request).
    pub latency_min_ms: u64,
    /// Mean request latency in ms; printed rounded half-up to 4 places, Java-style.
    pub latency_avg_ms: f64,
    /// Largest request latency in ms.
    pub latency_max_ms: u64,
    /// Packets received, server-wide (a four-letter word counts as one).
    pub packets_received: u64,
    /// Packets sent, server-wide.
    pub packets_sent: u64,
    /// Open client connections, this one included (`Connections:` is their count).
    pub connections: Vec<ConnectionSnapshot>,
    /// Requests in flight (`Outstanding:`).
    pub outstanding_requests: u64,
    /// Last processed zxid (`Zxid: 0x..`).
    pub last_zxid: i64,
    /// Znodes in the DataTree, the system nodes included (a fresh server has 5).
    pub node_count: u64,
    /// All watches, data and child (`zk_watch_count`).
    pub watch_count: u64,
    /// Approximate data size in bytes: sum of path lengths plus data lengths.
    pub approximate_data_size: u64,
    /// Open file descriptors; `None` leaves `zk_open_file_descriptor_count` out, as
    /// ZooKeeper does on non-Unix systems.
    pub open_file_descriptor_count: Option<u64>,
    /// File descriptor limit; `None` leaves `zk_max_file_descriptor_count` out.
    pub max_file_descriptor_count: Option<u64>,
    /// Milliseconds since the server started (`zk_uptime`).
    pub uptime_ms: u64,
    /// Size of the last/smallest/largest reply in bytes, -1 before any.
    pub client_response_size_last_min_max: (i64, i64, i64),
    /// Leader only: proposal sizes last/min/max in bytes, -1 before any.
    pub proposal_sizes_last_min_max: (i64, i64, i64),
    /// The settings `conf` prints.
    pub conf: ConfSnapshot,
    /// Bytes in the snapshot directory (`dataDirSize`, `datadir_size`).
    pub data_dir_size: u64,
    /// Bytes in the txn log directory (`dataLogSize`, `logdir_size`).
    pub data_log_size: u64,
    /// `envi` entries after `zookeeper.version`, in order ([`keel_environment`]).
    pub environment: Vec<(String, String)>,
    /// Data and exists watches by session, in print order (`wchs`, `wchc`, `wchp`; like
    /// ZooKeeper these three words leave child watches out).
    pub data_watches: Vec<(i64, Vec<String>)>,
    /// Ephemeral znode paths by owner session (`dump`).
    pub ephemerals: Vec<(i64, Vec<String>)>,
    /// Session expiry queue, in any order (`dump` sorts by time).
    pub session_expiry: Vec<SessionExpiryBucket>,
    /// An ensemble member's local sessions (`localSessionsEnabled`): their expiry queue,
    /// which `dump` prints first ("Local Session Sets", the UpgradeableSessionTracker's
    /// LocalSessionTracker); `None` without local sessions.
    pub local_session_expiry: Option<Vec<SessionExpiryBucket>>,
    /// A learner's (follower, observer, read-only server) global sessions and their
    /// timeouts, which its `dump` lists in place of an expiry queue
    /// (`LearnerSessionTracker.dumpSessions`: "Global Sessions(N):"); `None` elsewhere.
    pub learner_global_sessions: Option<Vec<(i64, i32)>>,
    /// Connection expiry queue, in any order (`dump` sorts by time).
    pub connection_expiry: Vec<ConnectionExpiryBucket>,
    /// (zxid, digest) history of the DataTree digest (`hash`), oldest first.
    pub digest_log: Vec<(i64, i64)>,
    /// Text trace mask: `gtmk` prints it; for `stmk` set it to the mask just read.
    pub trace_mask: i64,
    /// Further `mntr` single values by name without `zk_` (e.g. `bytes_received_count`,
    /// `auth_failed_count`, `commit_count`); names not given print 0.
    pub mntr_counters: Vec<(String, i64)>,
    /// `mntr` summaries by name (e.g. `readlatency`, `fsynctime`); names not given
    /// print as empty summaries.
    pub mntr_summaries: Vec<(String, Summary)>,
    /// Summary sets printed last, e.g. `a_read_per_namespace` (5 lines each).
    pub mntr_summary_sets: Vec<(String, Summary)>,
    /// Voting members of the ensemble (`zk_quorum_size`); 0 standalone.
    pub quorum_size: u64,
    /// An ensemble member's Zab side (`mntr` adds `zk_peer_state`, a leader its
    /// learners; the quorum AdminServer commands); `None` standalone.
    pub ensemble: Option<EnsembleView>,
}

impl Default for ConfSnapshot {
    fn default() -> Self {
        ConfSnapshot {
            client_port: 2181,
            secure_client_port: -1,
            data_dir: String::new(),
            data_log_dir: String::new(),
            tick_time_ms: 3000,
            max_client_cnxns: 60,
            min_session_timeout_ms: 6000,
            max_session_timeout_ms: 60000,
            client_port_listen_backlog: -1,
            server_id: 0,
            quorum_lines: Vec::new(),
        }
    }
}

impl Default for ServerSnapshot {
    fn default() -> Self {
        ServerSnapshot {
            serving: true,
            read_only: false,
            zookeeper_version: DEFAULT_ZOOKEEPER_VERSION.to_string(),
            build_date: build_date(option_env!("KEEL_BUILD_EPOCH_S")),
            mode: "standalone".to_string(),
            latency_min_ms: 0,
            latency_avg_ms: 0.0,
            latency_max_ms: 0,
            packets_received: 0,
            packets_sent: 0,
            connections: Vec::new(),
            outstanding_requests: 0,
            last_zxid: 0,
            node_count: 5,
            watch_count: 0,
            approximate_data_size: 0,
            open_file_descriptor_count: None,
            max_file_descriptor_count: None,
            uptime_ms: 0,
            client_response_size_last_min_max: (-1, -1, -1),
            proposal_sizes_last_min_max: (-1, -1, -1),
            conf: ConfSnapshot::default(),
            data_dir_size: 0,
            data_log_size: 0,
            environment: Vec::new(),
            data_watches: Vec::new(),
            ephemerals: Vec::new(),
            session_expiry: Vec::new(),
            local_session_expiry: None,
            learner_global_sessions: None,
            connection_expiry: Vec::new(),
            digest_log: Vec::new(),
            trace_mask: DEFAULT_TRACE_MASK,
            mntr_counters: Vec::new(),
            mntr_summaries: Vec::new(),
            mntr_summary_sets: Vec::new(),
            quorum_size: 0,
            ensemble: None,
        }
    }
}

impl ServerSnapshot {
    /// ZooKeeper's `Version.getFullVersion()`: `<version>, built on <date>`.
    pub fn full_version(&self) -> String {
        format!("{}, built on {}", self.zookeeper_version, self.build_date)
    }
}

/// The `envi` entries after `zookeeper.version`, with ZooKeeper's keys in ZooKeeper's order
/// (`Environment.list`) and keel's own values where a Java one makes no sense: the keel
/// version for `java.version`, `keel` for `java.vendor`, the executable for
/// `java.class.path`, the process's resident size for `os.memory.total`, physical memory
/// for `os.memory.max` and 0 for `os.memory.free` (keel has no heap). Reads the process
/// environment and /proc, so the caller gathers it (once, or per request); `<NA>` where a
/// value cannot be read, as ZooKeeper prints.
pub fn keel_environment() -> Vec<(String, String)> {
    let na = || "<NA>".to_string();
    let read_trim = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .ok()
            .filter(|s| !s.is_empty())
    };
    let exe = std::env::current_exe().ok();
    let os_name = match std::env::consts::OS {
        "linux" => "Linux".to_string(),
        "macos" => "Mac OS X".to_string(),
        "windows" => "Windows".to_string(),
        other => other.to_string(),
    };
    let os_arch = match std::env::consts::ARCH {
        "x86_64" => "amd64".to_string(),
        "x86" => "x86".to_string(),
        other => other.to_string(),
    };
    let kb_field = |file: &str, key: &str| {
        let text = read_trim(file)?;
        let line = text.lines().find(|l| l.starts_with(key))?;
        Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? / 1024)
    };
    let rss_mb = kb_field("/proc/self/status", "VmRSS:");
    let mem_total_mb = kb_field("/proc/meminfo", "MemTotal:");
    let mb = |v: Option<u64>| format!("{}MB", v.unwrap_or(0));
    vec![
        (
            "host.name".into(),
            read_trim("/proc/sys/kernel/hostname").unwrap_or_else(na),
        ),
        ("java.version".into(), env!("CARGO_PKG_VERSION").to_string()),
        ("java.vendor".into(), "keel".to_string()),
        (
            "java.home".into(),
            exe.as_ref()
                .and_then(|e| e.parent())
                .map(|d| d.display().to_string())
                .unwrap_or_else(na),
        ),
        (
            "java.class.path".into(),
            exe.as_ref()
                .map(|e| e.display().to_string())
                .unwrap_or_else(na),
        ),
        ("java.library.path".into(), na()),
        (
            "java.io.tmpdir".into(),
            std::env::temp_dir().display().to_string(),
        ),
        ("java.compiler".into(), na()),
        ("os.name".into(), os_name),
        ("os.arch".into(), os_arch),
        (
            "os.version".into(),
            read_trim("/proc/sys/kernel/osrelease").unwrap_or_else(na),
        ),
        ("user.name".into(), user_name().unwrap_or_else(na)),
        (
            "user.home".into(),
            std::env::var("HOME").unwrap_or_else(|_| na()),
        ),
        (
            "user.dir".into(),
            std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_else(|_| na()),
        ),
        ("os.memory.free".into(), mb(Some(0))),
        ("os.memory.max".into(), mb(mem_total_mb)),
        ("os.memory.total".into(), mb(rss_mb)),
    ]
}

/// The login name of the process's user, as Java's `user.name`: `$USER`, else the
/// `/etc/passwd` entry of the real uid.
fn user_name() -> Option<String> {
    if let Ok(user) = std::env::var("USER") {
        return Some(user);
    }
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let uid = status
        .lines()
        .find(|l| l.starts_with("Uid:"))?
        .split_whitespace()
        .nth(1)?
        .to_string();
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let fields: Vec<&str> = l.split(':').collect();
        (fields.len() > 2 && fields[2] == uid).then(|| fields[0].to_string())
    })
}

/// The reply text of `word` for the server described by `snap`, exactly as ZooKeeper 3.8
/// prints it (line endings `\n`; `ruok`, `isro`, `gtmk`, `stmk` end without one). `None`
/// when `word` is not one of [`WORDS`]. The caller performs the side effects of `srst`,
/// `crst` and `stmk` itself; `render` only gives their replies. For `stmk` the caller
/// first reads the 8 bytes after the word (the new mask, a big-endian long) and passes it
/// as `snap.trace_mask`.
pub fn render(word: &str, snap: &ServerSnapshot) -> Option<String> {
    if !WORDS.contains(&word) {
        return None;
    }
    let mut out = String::new();
    // These four never look at the server's state (they work while it is not serving).
    match word {
        "ruok" => return Some("imok".to_string()),
        "envi" => return Some(envi(snap)),
        "gtmk" | "stmk" => return Some(snap.trace_mask.to_string()),
        _ => {}
    }
    if !snap.serving {
        return Some(match word {
            "isro" => "null".to_string(),
            "hash" => ZK_NOT_SERVING.to_string(),
            _ => format!("{ZK_NOT_SERVING}\n"),
        });
    }
    match word {
        "isro" => out.push_str(if snap.read_only { "ro" } else { "rw" }),
        "srvr" => stat(&mut out, snap, false),
        "stat" => stat(&mut out, snap, true),
        "cons" => {
            for c in &snap.connections {
                connection_info(&mut out, c, false);
                out.push('\n');
            }
            out.push('\n');
        }
        "conf" => conf(&mut out, snap),
        "dirs" => {
            let _ = writeln!(out, "datadir_size: {}", snap.data_dir_size);
            let _ = writeln!(out, "logdir_size: {}", snap.data_log_size);
        }
        "dump" => dump(&mut out, snap),
        "wchs" => {
            let total: usize = snap.data_watches.iter().map(|(_, p)| p.len()).sum();
            let _ = writeln!(
                out,
                "{} connections watching {} paths\nTotal watches:{}",
                snap.data_watches.len(),
                watches_by_path(snap).len(),
                total
            );
        }
        "wchc" => {
            for (session, paths) in &snap.data_watches {
                let _ = writeln!(out, "0x{}", java_hex(*session));
                for p in paths {
                    let _ = writeln!(out, "\t{p}");
                }
            }
            out.push('\n');
        }
        "wchp" => {
            for (path, sessions) in watches_by_path(snap) {
                let _ = writeln!(out, "{path}");
                for s in sessions {
                    let _ = writeln!(out, "\t0x{}", java_hex(s));
                }
            }
            out.push('\n');
        }
        "hash" => {
            for (zxid, digest) in &snap.digest_log {
                let _ = writeln!(out, "{}: {digest}", java_hex(*zxid));
            }
        }
        "srst" => out.push_str("Server stats reset.\n"),
        "crst" => out.push_str("Connection stats reset.\n"),
        "mntr" => mntr(&mut out, snap),
        _ => return None,
    }
    Some(out)
}

/// `envi` (`EnvCommand`): a header, the full version, then the environment entries.
fn envi(snap: &ServerSnapshot) -> String {
    let mut out = String::from("Environment:\n");
    let _ = writeln!(out, "zookeeper.version={}", snap.full_version());
    for (k, v) in &snap.environment {
        let _ = writeln!(out, "{k}={v}");
    }
    out
}

/// `srvr` and `stat` (`StatCommand` + `ServerStats.toString`).
fn stat(out: &mut String, snap: &ServerSnapshot, with_clients: bool) {
    let _ = writeln!(out, "Zookeeper version: {}", snap.full_version());
    if snap.read_only {
        out.push_str("READ-ONLY mode; serving only read-only clients\n");
    }
    if with_clients {
        out.push_str("Clients:\n");
        for c in &snap.connections {
            connection_info(out, c, true);
            out.push('\n');
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "Latency min/avg/max: {}/{}/{}",
        snap.latency_min_ms,
        java_double(round4_half_up(snap.latency_avg_ms)),
        snap.latency_max_ms
    );
    let _ = writeln!(out, "Received: {}", snap.packets_received);
    let _ = writeln!(out, "Sent: {}", snap.packets_sent);
    let _ = writeln!(out, "Connections: {}", snap.connections.len());
    let _ = writeln!(out, "Outstanding: {}", snap.outstanding_requests);
    let _ = writeln!(out, "Zxid: 0x{}", java_hex(snap.last_zxid));
    let _ = writeln!(out, "Mode: {}", snap.mode);
    let _ = writeln!(out, "Node count: {}", snap.node_count);
    if snap.mode == "leader" {
        let (last, min, max) = snap.proposal_sizes_last_min_max;
        let _ = writeln!(out, "Proposal sizes last/min/max: {last}/{min}/{max}");
    }
}

/// One connection line without its newline (`ServerCnxn.dumpConnectionInfo`).
fn connection_info(out: &mut String, c: &ConnectionSnapshot, brief: bool) {
    let _ = write!(
        out,
        " {}[{:x}](queued={},recved={},sent={}",
        java_socket_addr(&c.remote),
        c.interest_ops,
        c.queued,
        c.received,
        c.sent
    );
    if !brief && c.session_id != 0 {
        let _ = write!(
            out,
            ",sid=0x{},lop={},est={},to={}",
            java_hex(c.session_id),
            c.last_op,
            c.established_ms,
            c.session_timeout_ms
        );
        if c.last_cxid >= 0 {
            let _ = write!(out, ",lcxid=0x{}", java_hex(c.last_cxid));
        }
        let _ = write!(
            out,
            ",lzxid=0x{},lresp={},llat={},minlat={},avglat={},maxlat={}",
            java_hex(c.last_zxid),
            c.last_response_ms,
            c.last_latency_ms,
            c.min_latency_ms,
            c.avg_latency_ms,
            c.max_latency_ms
        );
    }
    out.push(')');
}

/// `conf` (`ZooKeeperServer.dumpConf`, plus `QuorumZooKeeperServer`'s lines).
fn conf(out: &mut String, snap: &ServerSnapshot) {
    let c = &snap.conf;
    let _ = writeln!(out, "clientPort={}", c.client_port);
    let _ = writeln!(out, "secureClientPort={}", c.secure_client_port);
    let _ = writeln!(out, "dataDir={}", c.data_dir);
    let _ = writeln!(out, "dataDirSize={}", snap.data_dir_size);
    let _ = writeln!(out, "dataLogDir={}", c.data_log_dir);
    let _ = writeln!(out, "dataLogSize={}", snap.data_log_size);
    let _ = writeln!(out, "tickTime={}", c.tick_time_ms);
    let _ = writeln!(out, "maxClientCnxns={}", c.max_client_cnxns);
    let _ = writeln!(out, "minSessionTimeout={}", c.min_session_timeout_ms);
    let _ = writeln!(out, "maxSessionTimeout={}", c.max_session_timeout_ms);
    let _ = writeln!(
        out,
        "clientPortListenBacklog={}",
        c.client_port_listen_backlog
    );
    let _ = writeln!(out, "serverId={}", c.server_id);
    if let Some((last, lines)) = c.quorum_lines.split_last() {
        for line in lines {
            let _ = writeln!(out, "{line}");
        }
        out.push_str(last);
    }
}

/// "Session Sets (N)/(M):" and the buckets (`SessionTrackerImpl.dumpSessions`, an
/// ExpiryQueue's `dump`), in time order.
fn session_sets(out: &mut String, buckets: &[SessionExpiryBucket]) {
    let mut sessions: Vec<&SessionExpiryBucket> = buckets.iter().collect();
    sessions.sort_by_key(|b| b.expire_at_ms);
    let total: usize = sessions.iter().map(|b| b.session_ids.len()).sum();
    let _ = writeln!(out, "Session Sets ({})/({}):", sessions.len(), total);
    for b in sessions {
        let _ = writeln!(
            out,
            "{} expire at {}:",
            b.session_ids.len(),
            java_date(b.expire_at_ms)
        );
        for id in &b.session_ids {
            let _ = writeln!(out, "\t0x{}", java_hex(*id));
        }
    }
}

/// `dump` (`DumpCommand`): session tracker, ephemerals, connection expiry queue.
/// The session tracker's part is ZooKeeper's `dumpSessions` of the tracker the server
/// runs: a standalone server's or a leader's expiry queue ("Session Sets"), a learner's
/// global sessions with their timeouts ("Global Sessions(N)"); with local sessions the
/// local tracker's queue comes first ("Local Session Sets") and a leader's global queue
/// is then headed "Global Session Sets" (Leader/LearnerSessionTracker).
fn dump(out: &mut String, snap: &ServerSnapshot) {
    out.push_str("SessionTracker dump:\n");
    if let Some(local) = &snap.local_session_expiry {
        out.push_str("Local ");
        session_sets(out, local);
    }
    match &snap.learner_global_sessions {
        Some(global) => {
            let _ = writeln!(out, "Global Sessions({}):", global.len());
            // A TreeSet<Long>: ordered as signed ids.
            let mut global = global.clone();
            global.sort_unstable();
            for (id, timeout_ms) in global {
                let _ = writeln!(out, "0x{}\t{timeout_ms}ms", java_hex(id));
            }
        }
        None => {
            if snap.local_session_expiry.is_some() {
                out.push_str("Global ");
            }
            session_sets(out, &snap.session_expiry);
        }
    }
    out.push_str("ephemeral nodes dump:\n");
    let _ = writeln!(out, "Sessions with Ephemerals ({}):", snap.ephemerals.len());
    for (session, paths) in &snap.ephemerals {
        let _ = writeln!(out, "0x{}:", java_hex(*session));
        for p in paths {
            let _ = writeln!(out, "\t{p}");
        }
    }
    out.push_str("Connections dump:\n");
    let mut cnxns: Vec<&ConnectionExpiryBucket> = snap.connection_expiry.iter().collect();
    cnxns.sort_by_key(|b| b.expire_at_ms);
    let total: usize = cnxns.iter().map(|b| b.connections.len()).sum();
    let _ = writeln!(out, "Connections Sets ({})/({}):", cnxns.len(), total);
    for b in cnxns {
        let _ = writeln!(
            out,
            "{} expire at {}:",
            b.connections.len(),
            java_date(b.expire_at_ms)
        );
        for (addr, session) in &b.connections {
            let _ = writeln!(
                out,
                "\tip: {} sessionId: 0x{}",
                java_socket_addr(addr),
                java_hex(*session)
            );
        }
    }
}

/// Data watches inverted to path -> sessions, in first-seen path order.
fn watches_by_path(snap: &ServerSnapshot) -> Vec<(&str, Vec<i64>)> {
    let mut by_path: Vec<(&str, Vec<i64>)> = Vec::new();
    for (session, paths) in &snap.data_watches {
        for p in paths {
            match by_path.iter_mut().find(|(q, _)| q == p) {
                Some((_, sessions)) => sessions.push(*session),
                None => by_path.push((p.as_str(), vec![*session])),
            }
        }
    }
    by_path
}

/// `mntr` single values after `zk_version` and `zk_server_state`, in the order ZooKeeper
/// 3.8.0 standalone prints them (its metrics maps' iteration order, captured).
const MNTR_SINGLES: [&str; 71] = [
    "ephemerals_count",
    "num_alive_connections",
    "avg_latency",
    "outstanding_requests",
    "znode_count",
    "global_sessions",
    "non_mtls_remote_conn_count",
    "last_client_response_size",
    "packets_sent",
    "packets_received",
    "max_client_response_size",
    "connection_drop_probability",
    "watch_count",
    "auth_failed_count",
    "min_latency",
    "max_file_descriptor_count",
    "approximate_data_size",
    "open_file_descriptor_count",
    "local_sessions",
    "uptime",
    "max_latency",
    "outstanding_tls_handshake",
    "min_client_response_size",
    "non_mtls_local_conn_count",
    "proposal_count",
    "watch_bytes",
    "outstanding_changes_removed",
    "throttled_ops",
    "stale_requests_dropped",
    "large_requests_rejected",
    "insecure_admin_count",
    "connection_rejected",
    "cnxn_closed_without_zk_server_running",
    "sessionless_connections_expired",
    "looking_count",
    "dead_watchers_queued",
    "stale_requests",
    "connection_drop_count",
    "learner_proposal_received_count",
    "digest_mismatches_count",
    "dead_watchers_cleared",
    "response_packet_cache_hits",
    "bytes_received_count",
    "add_dead_watcher_stall_time",
    "request_throttle_wait_count",
    "requests_not_forwarded_to_commit_processor",
    "response_packet_cache_misses",
    "ensemble_auth_success",
    "prep_processor_request_queued",
    "learner_commit_received_count",
    "stale_replies",
    "connection_request_count",
    "response_bytes",
    "ensemble_auth_fail",
    "diff_count",
    "response_packet_get_children_cache_misses",
    "connection_revalidate_count",
    "quit_leading_due_to_disloyal_voter",
    "snap_count",
    "unrecoverable_error_count",
    "unsuccessful_handshake",
    "commit_count",
    "stale_sessions_expired",
    "response_packet_get_children_cache_hits",
    "sync_processor_request_queued",
    "outstanding_changes_queued",
    "request_commit_queued",
    "ensemble_auth_skip",
    "skip_learner_request_to_next_processor_count",
    "tls_handshake_exceeded",
    "revalidate_count",
];

/// `mntr` single values an ensemble member adds, each after the standalone value named
/// first (ZooKeeper 3.8.0's order, captured from a 3-member ensemble): a follower or
/// observer adds `quorum_size`, a leader also its proposal sizes and learners.
const MNTR_ENSEMBLE_SINGLES: [(&str, &str); 1] = [("non_mtls_local_conn_count", "quorum_size")];

/// See [`MNTR_ENSEMBLE_SINGLES`]: the leader's own values.
const MNTR_LEADER_SINGLES: [(&str, &str); 9] = [
    ("avg_latency", "min_proposal_size"),
    ("packets_received", "max_proposal_size"),
    ("max_client_response_size", "synced_followers"),
    ("watch_count", "synced_non_voting_followers"),
    ("watch_count", "synced_observers"),
    ("open_file_descriptor_count", "last_proposal_size"),
    ("open_file_descriptor_count", "pending_syncs"),
    ("open_file_descriptor_count", "leader_uptime"),
    ("outstanding_tls_handshake", "learners"),
];

/// The gauges only an ensemble member registers, each while it plays the part that
/// registers it (`QuorumZooKeeperServer`: `quorum_size`; `LeaderZooKeeperServer`: the
/// leader's; `ObserverZooKeeperServer`: `observer_master_id`): `mntr` shows them then,
/// and `/metrics` exports them then only, as ZooKeeper unregisters a part's gauges when
/// it ends.
pub fn mntr_ensemble_gauge_names() -> impl Iterator<Item = &'static str> {
    MNTR_ENSEMBLE_SINGLES
        .iter()
        .chain(MNTR_LEADER_SINGLES.iter())
        .map(|&(_, name)| name)
        .chain(std::iter::once("observer_master_id"))
}

/// The value of an ensemble-only `mntr` single (see [`MNTR_LEADER_SINGLES`]).
fn ensemble_single(key: &str, snap: &ServerSnapshot, e: &EnsembleView) -> MntrValue {
    let voting = |l: &&crate::admin::quorum::LearnerView| l.synced && !l.observer;
    let (last, min, max) = snap.proposal_sizes_last_min_max;
    MntrValue::Int(match key {
        "quorum_size" => snap.quorum_size as i64,
        "min_proposal_size" => min,
        "max_proposal_size" => max,
        "last_proposal_size" => last,
        "synced_followers" => e.learners.iter().filter(voting).count() as i64,
        // Followers outside the current config's voters (`Leader.getNonVotingFollowers`).
        "synced_non_voting_followers" => e
            .learners
            .iter()
            .filter(|l| l.synced && !l.observer && !l.voting)
            .count() as i64,
        "synced_observers" => e.learners.iter().filter(|l| l.synced && l.observer).count() as i64,
        // A sync is answered once the txns before it commit, never parked: none pend.
        "pending_syncs" => 0,
        "leader_uptime" => e.leader_uptime_ms.unwrap_or(0) as i64,
        "learners" => e.learners.len() as i64,
        _ => 0,
    })
}

/// `mntr` avg/min/max/cnt/sum summaries, in ZooKeeper 3.8.0's order.
const MNTR_SUMMARIES: [&str; 41] = [
    "socket_closing_time",
    "proposal_process_time",
    "leader_unavailable_time",
    "node_created_watch_count",
    "session_queues_drained",
    "write_commit_proc_req_queued",
    "connection_token_deficit",
    "read_commit_proc_req_queued",
    "node_deleted_watch_count",
    "startup_txns_load_time",
    "sync_processor_queue_size",
    "follower_sync_time",
    "prep_processor_queue_size",
    "fsynctime",
    "inflight_snap_count",
    "reads_issued_from_session_queue",
    "learner_request_processor_queue_size",
    "snapshottime",
    "unavailable_time",
    "startup_txns_loaded",
    "reads_after_write_in_session_queue",
    "requests_in_session_queue",
    "write_commit_proc_issued",
    "prep_process_time",
    "pending_session_queue_size",
    "time_waiting_empty_pool_in_commit_processor_read_ms",
    "commit_process_time",
    "dbinittime",
    "inflight_diff_count",
    "netty_queued_buffer_capacity",
    "election_time",
    "commit_commit_proc_req_queued",
    "sync_processor_batch_size",
    "node_children_watch_count",
    "write_batch_time_in_commit_processor",
    "read_commit_proc_issued",
    "concurrent_request_processing_in_commit_processor",
    "observer_sync_time",
    "node_changed_watch_count",
    "sync_process_time",
    "startup_snap_load_time",
];

/// `mntr` summaries that add p50/p95/p99/p999, in ZooKeeper 3.8.0's order.
const MNTR_PERCENTILE_SUMMARIES: [&str; 23] = [
    "prep_processor_queue_time_ms",
    "jvm_pause_time_ms",
    "close_session_prep_time",
    "read_commitproc_time_ms",
    "updatelatency",
    "local_write_committed_time_ms",
    "request_throttle_queue_time_ms",
    "readlatency",
    "quorum_ack_latency",
    "om_commit_process_time_ms",
    "read_final_proc_time_ms",
    "commit_propagation_latency",
    "dead_watchers_cleaner_latency",
    "write_final_proc_time_ms",
    "proposal_ack_creation_latency",
    "proposal_latency",
    "om_proposal_process_time_ms",
    "sync_processor_queue_and_flush_time_ms",
    "propagation_latency",
    "server_write_committed_time_ms",
    "sync_processor_queue_time_ms",
    "sync_processor_queue_flush_time_ms",
    "write_commitproc_time_ms",
];

/// One `mntr` value as ZooKeeper's `MonitorCommand` gathers it: the text words print it
/// (integers plainly, doubles Java-style), the AdminServer's `monitor` keeps its JSON type.
#[derive(Debug, Clone, PartialEq)]
pub enum MntrValue {
    Text(String),
    Int(i64),
    /// Already rounded half-up to 4 places where ZooKeeper rounds.
    Float(f64),
}

impl MntrValue {
    /// The value as `mntr` prints it.
    pub fn render(&self) -> String {
        match self {
            MntrValue::Text(t) => t.clone(),
            MntrValue::Int(i) => i.to_string(),
            MntrValue::Float(f) => java_double(*f),
        }
    }
}

/// How ZooKeeper's metrics provider keeps an `mntr` name (`ServerMetrics`,
/// `ZooKeeperServer.registerMetrics`): it decides the Prometheus type of the metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MntrKind {
    /// A value sampled when read (`registerGauge`).
    Gauge,
    /// A running total (`getCounter`).
    Counter,
    /// `getSummary(.., BASIC)`: avg/min/max/cnt/sum.
    BasicSummary,
    /// `getSummary(.., ADVANCED)`: plus p50/p95/p99/p999.
    AdvancedSummary,
}

/// Names ZooKeeper registers as gauges (`ZooKeeperServer.registerMetrics`); every other
/// single `mntr` value is a counter.
pub const MNTR_GAUGES: [&str; 24] = [
    "avg_latency",
    "max_latency",
    "min_latency",
    "packets_received",
    "packets_sent",
    "num_alive_connections",
    "outstanding_requests",
    "uptime",
    "znode_count",
    "watch_count",
    "ephemerals_count",
    "approximate_data_size",
    "global_sessions",
    "local_sessions",
    "open_file_descriptor_count",
    "max_file_descriptor_count",
    "connection_drop_probability",
    "last_client_response_size",
    "max_client_response_size",
    "min_client_response_size",
    "outstanding_tls_handshake",
    "auth_failed_count",
    "non_mtls_remote_conn_count",
    "non_mtls_local_conn_count",
];

/// Every metric `mntr` reports, in its order, with its kind: the single values, then the
/// basic and the advanced summaries (summary sets such as `read_per_namespace` are
/// per-namespace and not listed).
pub fn mntr_metric_names() -> impl Iterator<Item = (&'static str, MntrKind)> {
    let singles = MNTR_SINGLES.iter().map(|&n| {
        let kind = if MNTR_GAUGES.contains(&n) {
            MntrKind::Gauge
        } else {
            MntrKind::Counter
        };
        (n, kind)
    });
    singles
        .chain(MNTR_SUMMARIES.iter().map(|&n| (n, MntrKind::BasicSummary)))
        .chain(
            MNTR_PERCENTILE_SUMMARIES
                .iter()
                .map(|&n| (n, MntrKind::AdvancedSummary)),
        )
}

/// The `mntr` entries without the `zk_` prefix, in ZooKeeper 3.8.0's order, with their
/// types: what `mntr` prints and the AdminServer's `monitor` returns.
pub fn mntr_entries(snap: &ServerSnapshot) -> Vec<(String, MntrValue)> {
    let mut out: Vec<(String, MntrValue)> = Vec::new();
    let mut push = |key: &str, value: MntrValue| out.push((key.to_string(), value));
    push("version", MntrValue::Text(snap.full_version()));
    push("server_state", MntrValue::Text(snap.mode.clone()));
    // A read-only member runs ZooKeeper's ReadOnlyZooKeeperServer, not a
    // QuorumZooKeeperServer: no `peer_state`, no quorum gauges.
    let ensemble = snap.ensemble.as_ref().filter(|_| !snap.read_only);
    if let Some(e) = ensemble {
        push("peer_state", MntrValue::Text(e.peer_state.clone()));
        // ObserverZooKeeperServer's gauge: the server it observes (its learner master,
        // the leader here).
        if snap.mode == "observer" {
            if let Some(leader) = e.leader_id {
                push("observer_master_id", MntrValue::Int(leader as i64));
            }
        }
    }
    let ephemerals: usize = snap.ephemerals.iter().map(|(_, p)| p.len()).sum();
    let sessions: usize = snap
        .session_expiry
        .iter()
        .map(|b| b.session_ids.len())
        .sum();
    let (last_size, min_size, max_size) = snap.client_response_size_last_min_max;
    let int = |v: u64| MntrValue::Int(v as i64);
    for key in MNTR_SINGLES {
        let value = match key {
            "ephemerals_count" => int(ephemerals as u64),
            "num_alive_connections" => int(snap.connections.len() as u64),
            "avg_latency" => MntrValue::Float(round4_half_up(snap.latency_avg_ms)),
            "outstanding_requests" => int(snap.outstanding_requests),
            "znode_count" => int(snap.node_count),
            "global_sessions" => int(sessions as u64),
            "last_client_response_size" => MntrValue::Int(last_size),
            "packets_sent" => int(snap.packets_sent),
            "packets_received" => int(snap.packets_received),
            "max_client_response_size" => MntrValue::Int(max_size),
            "connection_drop_probability" => MntrValue::Float(0.0),
            "watch_count" => int(snap.watch_count),
            "min_latency" => int(snap.latency_min_ms),
            "max_file_descriptor_count" => match snap.max_file_descriptor_count {
                Some(n) => int(n),
                None => continue,
            },
            "approximate_data_size" => int(snap.approximate_data_size),
            "open_file_descriptor_count" => match snap.open_file_descriptor_count {
                Some(n) => int(n),
                None => continue,
            },
            "uptime" => int(snap.uptime_ms),
            "max_latency" => int(snap.latency_max_ms),
            "min_client_response_size" => MntrValue::Int(min_size),
            other => MntrValue::Int(
                snap.mntr_counters
                    .iter()
                    .find(|(k, _)| k == other)
                    .map_or(0, |(_, v)| *v),
            ),
        };
        push(key, value);
        if let Some(e) = ensemble {
            let leader = e.is_leader();
            let extra = MNTR_ENSEMBLE_SINGLES
                .iter()
                .chain(MNTR_LEADER_SINGLES.iter().filter(|_| leader));
            for (_, name) in extra.filter(|(after, _)| *after == key) {
                push(name, ensemble_single(name, snap, e));
            }
        }
    }
    let find = |name: &str| {
        snap.mntr_summaries
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, s)| *s)
            .unwrap_or_default()
    };
    for name in MNTR_SUMMARIES {
        summary_entries(&mut push, name, &find(name), false);
    }
    for name in MNTR_PERCENTILE_SUMMARIES {
        summary_entries(&mut push, name, &find(name), true);
    }
    for (name, s) in &snap.mntr_summary_sets {
        summary_entries(&mut push, name, s, false);
    }
    out
}

/// `mntr` (`MonitorCommand`): `zk_<key>\t<value>` lines; integers as integers, floating
/// point values Java-style (`0.0`, `6.3846`).
fn mntr(out: &mut String, snap: &ServerSnapshot) {
    for (key, value) in mntr_entries(snap) {
        let _ = writeln!(out, "zk_{key}\t{}", value.render());
    }
}

/// The entries of one summary (`AvgMinMaxCounter.values`, `AvgMinMaxPercentileCounter`).
fn summary_entries(push: &mut impl FnMut(&str, MntrValue), name: &str, s: &Summary, pct: bool) {
    let avg = if s.count == 0 {
        0.0
    } else {
        round4_half_up(s.sum as f64 / s.count as f64)
    };
    let int = |v: u64| MntrValue::Int(v as i64);
    push(&format!("avg_{name}"), MntrValue::Float(avg));
    push(&format!("min_{name}"), int(s.min));
    push(&format!("max_{name}"), int(s.max));
    push(&format!("cnt_{name}"), int(s.count));
    push(&format!("sum_{name}"), int(s.sum));
    if pct {
        push(&format!("p50_{name}"), int(s.p50));
        push(&format!("p95_{name}"), int(s.p95));
        push(&format!("p99_{name}"), int(s.p99));
        push(&format!("p999_{name}"), int(s.p999));
    }
}

/// Which Java hash table an order is that of: they grow at slightly different sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JavaTable {
    /// `ConcurrentHashMap`: a table of n bins holds fewer than 3n/4 entries.
    Concurrent,
    /// `HashMap` / `HashSet`: at most 3n/4.
    Plain,
}

/// Orders `items` as a fresh Java hash table (16 bins, grown as entries came) of that
/// many entries iterates them: by bin, the spread hash (`h ^ h >>> 16`) masked by the
/// table size; entries of one bin keep their order here (the table's own insertion
/// order within a bin is not known). `hash` is the key's Java `hashCode`.
pub(crate) fn java_hash_order<T>(items: &mut [T], table: JavaTable, hash: impl Fn(&T) -> i32) {
    let mut bins = 16usize;
    let full = |bins: usize| match table {
        JavaTable::Concurrent => items.len() >= bins - bins / 4,
        JavaTable::Plain => items.len() > bins - bins / 4,
    };
    while full(bins) {
        bins *= 2;
    }
    items.sort_by_key(|t| {
        let h = hash(t);
        let spread = (h ^ ((h as u32) >> 16) as i32) & 0x7fff_ffff;
        spread as usize & (bins - 1)
    });
}

/// Java's `String.hashCode`.
pub(crate) fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// Java's `Long.hashCode`.
pub(crate) fn java_long_hash(v: i64) -> i32 {
    (v ^ ((v as u64) >> 32) as i64) as i32
}

/// Java's `Long.toHexString`: lower-case hex of the 64-bit two's complement.
pub(crate) fn java_hex(v: i64) -> String {
    format!("{:x}", v as u64)
}

/// `new BigDecimal(x).setScale(4, RoundingMode.HALF_UP).doubleValue()`. Rust's fixed
/// precision formatting is exact but rounds ties to even; a double is exactly halfway
/// between two 4-place decimals only when it is an odd multiple of 1/32 (10^4 = 2^4 * 625),
/// and those ties round away from zero here.
pub(crate) fn round4_half_up(x: f64) -> f64 {
    let scaled32 = x * 32.0;
    if x.is_finite() && scaled32.fract() == 0.0 && (scaled32 % 2.0).abs() == 1.0 {
        let scaled = x * 10_000.0;
        let away = scaled.trunc() + scaled.signum();
        return away / 10_000.0;
    }
    format!("{x:.4}").parse().unwrap_or(x)
}

/// Java's `Double.toString`: plain decimal with at least one fraction digit when
/// 10^-3 <= |x| < 10^7, else computerized scientific notation (`1.0E-4`, `1.5E7`).
pub(crate) fn java_double(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return if x.is_nan() {
            "NaN".to_string()
        } else if x.is_infinite() {
            if x > 0.0 { "Infinity" } else { "-Infinity" }.to_string()
        } else {
            "0.0".to_string()
        };
    }
    let abs = x.abs();
    if (1e-3..1e7).contains(&abs) {
        let s = format!("{x}");
        if s.contains('.') {
            s
        } else {
            format!("{s}.0")
        }
    } else {
        let s = format!("{x:e}");
        let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
        if mantissa.contains('.') {
            format!("{mantissa}E{exp}")
        } else {
            format!("{mantissa}.0E{exp}")
        }
    }
}

/// Java's `InetSocketAddress.toString` for a resolved address without a host name:
/// `/1.2.3.4:port`, `/[0:0:0:0:0:0:0:1]:port` (Java writes IPv6 groups unabbreviated and
/// turns IPv4-mapped IPv6 addresses into IPv4).
pub(crate) fn java_socket_addr(addr: &SocketAddr) -> String {
    match addr.ip() {
        IpAddr::V4(v4) => format!("/{v4}:{}", addr.port()),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => format!("/{v4}:{}", addr.port()),
            None => {
                let groups: Vec<String> = v6.segments().iter().map(|g| format!("{g:x}")).collect();
                let scope = match addr {
                    SocketAddr::V6(a) if a.scope_id() != 0 => format!("%{}", a.scope_id()),
                    _ => String::new(),
                };
                format!("/[{}{scope}]:{}", groups.join(":"), addr.port())
            }
        },
    }
}

/// The build date as ZooKeeper prints it (`yyyy-MM-dd HH:mm 'UTC'`, Maven's build
/// timestamp) from `epoch_s`, seconds since the Unix epoch as `build.rs` stamps them
/// (`KEEL_BUILD_EPOCH_S`: the commit's time or `SOURCE_DATE_EPOCH`); the epoch itself
/// when unknown.
fn build_date(epoch_s: Option<&str>) -> String {
    let secs = epoch_s.and_then(|s| s.parse::<i64>().ok()).unwrap_or(0);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        sod / 3600,
        sod % 3600 / 60
    )
}

/// Java's `Date.toString` (`EEE MMM dd HH:mm:ss zzz yyyy`) for ms since the Unix epoch,
/// in UTC (keel runs its clocks in UTC).
fn java_date(epoch_ms: i64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = epoch_ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{} {} {:02} {:02}:{:02}:{:02} UTC {}",
        DAYS[days.rem_euclid(7) as usize],
        MONTHS[(m - 1) as usize],
        d,
        sod / 3600,
        sod % 3600 / 60,
        sod % 60,
        y
    )
}

/// Proleptic Gregorian (year, month 1-12, day 1-31) of a day count since 1970-01-01
/// (Howard Hinnant's `civil_from_days`).
pub(crate) fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    //! Expected texts are captures from a real ZooKeeper 3.8.0 (Debian package, standalone,
    //! `4lw.commands.whitelist=*`) with two zkCli sessions connected: session ...0000 set
    //! data watches on /a and /a/b and owns /eph1; session ...0001 set a data watch on /a
    //! and owns /eph2 and /a/seq0000000001. The snapshots below carry those figures.

    use super::*;

    const ZK_VERSION: &str = "3.8.0-${mvngit.commit.id}";
    const ZK_BUILD: &str = "2024-12-29 17:54 UTC";
    const S0: i64 = 0x1000003a7fe0000;
    const S1: i64 = 0x1000003a7fe0001;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn four_lw_cnxn(port: u16) -> ConnectionSnapshot {
        ConnectionSnapshot {
            remote: addr(&format!("127.0.0.1:{port}")),
            interest_ops: 0,
            queued: 0,
            received: 1,
            sent: 0,
            session_id: 0,
            last_op: "NA".into(),
            established_ms: 0,
            session_timeout_ms: 0,
            last_cxid: -1,
            last_zxid: -1,
            last_response_ms: 0,
            last_latency_ms: 0,
            min_latency_ms: 0,
            avg_latency_ms: 0,
            max_latency_ms: 0,
        }
    }

    /// The server of the capture, as seen by the `cons` request.
    fn captured() -> ServerSnapshot {
        let c1 = ConnectionSnapshot {
            remote: addr("127.0.0.1:48274"),
            interest_ops: 1,
            queued: 0,
            received: 5,
            sent: 5,
            session_id: S1,
            last_op: "GETC".into(),
            established_ms: 1796002504512,
            session_timeout_ms: 30000,
            last_cxid: 4,
            last_zxid: 7,
            last_response_ms: 255596,
            last_latency_ms: 1,
            min_latency_ms: 0,
            avg_latency_ms: 2,
            max_latency_ms: 5,
        };
        let c0 = ConnectionSnapshot {
            remote: addr("127.0.0.1:48258"),
            received: 8,
            sent: 9,
            session_id: S0,
            last_op: "PING".into(),
            established_ms: 1796002500606,
            last_cxid: 6,
            last_response_ms: 260799,
            last_latency_ms: 0,
            avg_latency_ms: 9,
            max_latency_ms: 28,
            ..c1.clone()
        };
        ServerSnapshot {
            zookeeper_version: ZK_VERSION.into(),
            build_date: ZK_BUILD.into(),
            latency_min_ms: 0,
            latency_avg_ms: 83.0 / 13.0,
            latency_max_ms: 28,
            packets_received: 16,
            packets_sent: 16,
            connections: vec![four_lw_cnxn(39386), c1, c0],
            last_zxid: 7,
            node_count: 10,
            watch_count: 4,
            conf: ConfSnapshot {
                client_port: 2401,
                data_dir: "/tmp/fourlw-zk/data/version-2".into(),
                data_log_dir: "/tmp/fourlw-zk/data/version-2".into(),
                tick_time_ms: 2000,
                max_client_cnxns: 0,
                min_session_timeout_ms: 4000,
                max_session_timeout_ms: 40000,
                ..ConfSnapshot::default()
            },
            data_dir_size: 67109337,
            data_log_size: 67109337,
            data_watches: vec![
                (S1, vec!["/a".into()]),
                (S0, vec!["/a".into(), "/a/b".into()]),
            ],
            ephemerals: vec![
                (S1, vec!["/eph2".into(), "/a/seq0000000001".into()]),
                (S0, vec!["/eph1".into()]),
            ],
            session_expiry: vec![
                SessionExpiryBucket {
                    expire_at_ms: 1796002540000,
                    session_ids: vec![S0],
                },
                SessionExpiryBucket {
                    expire_at_ms: 1796002530000,
                    session_ids: vec![],
                },
                SessionExpiryBucket {
                    expire_at_ms: 1796002534000,
                    session_ids: vec![S1],
                },
            ],
            connection_expiry: vec![
                ConnectionExpiryBucket {
                    expire_at_ms: 1796002518000,
                    connections: vec![],
                },
                ConnectionExpiryBucket {
                    expire_at_ms: 1796002528000,
                    connections: vec![(addr("127.0.0.1:39426"), 0)],
                },
                ConnectionExpiryBucket {
                    expire_at_ms: 1796002538000,
                    connections: vec![(addr("127.0.0.1:48274"), S1)],
                },
                ConnectionExpiryBucket {
                    expire_at_ms: 1796002548000,
                    connections: vec![(addr("127.0.0.1:48258"), S0)],
                },
            ],
            ..ServerSnapshot::default()
        }
    }

    fn lines(s: &str) -> Vec<&str> {
        s.split('\n').collect()
    }

    /// Compares line by line first, so a failure names the first differing line.
    fn assert_text(actual: &str, expected: &str) {
        for (i, (a, e)) in lines(actual).iter().zip(lines(expected)).enumerate() {
            assert_eq!(*a, e, "line {}", i + 1);
        }
        assert_eq!(lines(actual).len(), lines(expected).len(), "line count");
        assert_eq!(actual, expected);
    }

    #[test]
    fn srvr_matches_capture() {
        let mut snap = captured();
        snap.connections.truncate(3);
        let expected = "Zookeeper version: 3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC
Latency min/avg/max: 0/6.3846/28
Received: 16
Sent: 16
Connections: 3
Outstanding: 0
Zxid: 0x7
Mode: standalone
Node count: 10
";
        assert_text(&render("srvr", &snap).unwrap(), expected);
    }

    #[test]
    fn stat_matches_capture() {
        let mut snap = captured();
        snap.packets_received = 17;
        snap.packets_sent = 17;
        snap.connections[0].remote = addr("127.0.0.1:39344");
        snap.connections[2].sent = 9;
        let expected = "Zookeeper version: 3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC
Clients:
 /127.0.0.1:39344[0](queued=0,recved=1,sent=0)
 /127.0.0.1:48274[1](queued=0,recved=5,sent=5)
 /127.0.0.1:48258[1](queued=0,recved=8,sent=9)

Latency min/avg/max: 0/6.3846/28
Received: 17
Sent: 17
Connections: 3
Outstanding: 0
Zxid: 0x7
Mode: standalone
Node count: 10
";
        assert_text(&render("stat", &snap).unwrap(), expected);
    }

    #[test]
    fn cons_matches_capture() {
        let expected = " /127.0.0.1:39386[0](queued=0,recved=1,sent=0)
 /127.0.0.1:48274[1](queued=0,recved=5,sent=5,sid=0x1000003a7fe0001,lop=GETC,est=1796002504512,to=30000,lcxid=0x4,lzxid=0x7,lresp=255596,llat=1,minlat=0,avglat=2,maxlat=5)
 /127.0.0.1:48258[1](queued=0,recved=8,sent=9,sid=0x1000003a7fe0000,lop=PING,est=1796002500606,to=30000,lcxid=0x6,lzxid=0x7,lresp=260799,llat=0,minlat=0,avglat=9,maxlat=28)

";
        assert_text(&render("cons", &captured()).unwrap(), expected);
    }

    #[test]
    fn cons_omits_negative_cxid_and_prints_unsigned_zxid() {
        let mut c = four_lw_cnxn(1);
        c.session_id = S0;
        let snap = ServerSnapshot {
            connections: vec![c],
            ..ServerSnapshot::default()
        };
        let out = render("cons", &snap).unwrap();
        assert!(
            out.contains(",to=0,lzxid=0xffffffffffffffff,lresp="),
            "{out}"
        );
    }

    #[test]
    fn watch_words_match_capture() {
        let snap = captured();
        assert_text(
            &render("wchs", &snap).unwrap(),
            "2 connections watching 2 paths\nTotal watches:3\n",
        );
        assert_text(
            &render("wchc", &snap).unwrap(),
            "0x1000003a7fe0001\n\t/a\n0x1000003a7fe0000\n\t/a\n\t/a/b\n\n",
        );
        assert_text(
            &render("wchp", &snap).unwrap(),
            "/a\n\t0x1000003a7fe0001\n\t0x1000003a7fe0000\n/a/b\n\t0x1000003a7fe0000\n\n",
        );
        let empty = ServerSnapshot::default();
        assert_text(
            &render("wchs", &empty).unwrap(),
            "0 connections watching 0 paths\nTotal watches:0\n",
        );
        assert_text(&render("wchc", &empty).unwrap(), "\n");
    }

    #[test]
    fn dump_matches_capture() {
        let expected = "SessionTracker dump:
Session Sets (3)/(2):
0 expire at Mon Nov 30 01:35:30 UTC 2026:
1 expire at Mon Nov 30 01:35:34 UTC 2026:
\t0x1000003a7fe0001
1 expire at Mon Nov 30 01:35:40 UTC 2026:
\t0x1000003a7fe0000
ephemeral nodes dump:
Sessions with Ephemerals (2):
0x1000003a7fe0001:
\t/eph2
\t/a/seq0000000001
0x1000003a7fe0000:
\t/eph1
Connections dump:
Connections Sets (4)/(3):
0 expire at Mon Nov 30 01:35:18 UTC 2026:
1 expire at Mon Nov 30 01:35:28 UTC 2026:
\tip: /127.0.0.1:39426 sessionId: 0x0
1 expire at Mon Nov 30 01:35:38 UTC 2026:
\tip: /127.0.0.1:48274 sessionId: 0x1000003a7fe0001
1 expire at Mon Nov 30 01:35:48 UTC 2026:
\tip: /127.0.0.1:48258 sessionId: 0x1000003a7fe0000
";
        assert_text(&render("dump", &captured()).unwrap(), expected);
    }

    /// ZooKeeper 3.8's mntr listed the write_per_namespace summaries of /e1, /e2 and /p1
    /// as p1, e1, e2 (String hashes 3180, 3181, 3521: bins 12, 13, 1 of 16).
    #[test]
    fn java_hash_order_is_a_java_hash_tables() {
        let mut names = vec!["e1", "e2", "p1"];
        java_hash_order(&mut names, JavaTable::Concurrent, |n| java_string_hash(n));
        assert_eq!(names, ["p1", "e1", "e2"]);
        // "p" hashes to 112: bin 0 of 16, bin 16 of 32 (from 12 entries on); "a".."k"
        // to 97..107, bins 1..11 of either.
        let order = |n: usize| {
            let mut v: Vec<String> = ('a'..='k').take(n - 1).map(String::from).collect();
            v.push("p".into());
            java_hash_order(&mut v, JavaTable::Concurrent, |s| java_string_hash(s));
            v.concat()
        };
        assert_eq!(order(11), "pabcdefghij");
        assert_eq!(order(12), "abcdefghijkp");
        // A HashSet of 12 still has 16 bins.
        let mut v: Vec<String> = ('a'..='k').map(String::from).collect();
        v.push("p".into());
        java_hash_order(&mut v, JavaTable::Plain, |s| java_string_hash(s));
        assert_eq!(v.concat(), "pabcdefghijk");
        // Session ids (Long.hashCode): ZooKeeper's dump listed 0x10004fd55fb0001 before
        // 0x30004fd547b0001 (both bin 7); 0x1000003a7fe0001 before 0x1000003a7fe0000
        // (bins 12 and 13), as in dump_matches_capture.
        let mut ids = vec![0x30004fd547b0001_i64, 0x10004fd55fb0001];
        ids.sort_unstable();
        java_hash_order(&mut ids, JavaTable::Concurrent, |&v| java_long_hash(v));
        assert_eq!(ids, [0x10004fd55fb0001, 0x30004fd547b0001]);
        let mut ids = vec![0x1000003a7fe0000_i64, 0x1000003a7fe0001];
        java_hash_order(&mut ids, JavaTable::Concurrent, |&v| java_long_hash(v));
        assert_eq!(ids, [0x1000003a7fe0001, 0x1000003a7fe0000]);
    }

    /// The session tracker part of `dump` on ensemble members with local sessions, as a
    /// ZooKeeper 3.8 ensemble printed it (localSessionsEnabled and UpgradingEnabled; on
    /// a follower and the leader, each with one local session and two upgraded ones).
    #[test]
    fn dump_lists_local_and_global_sessions() {
        let bucket = |expire_at_ms, session_ids| SessionExpiryBucket {
            expire_at_ms,
            session_ids,
        };
        let (l1, g1, l3, g3) = (
            0x10004fd55fb0000,
            0x10004fd55fb0001,
            0x30004fd547b0000,
            0x30004fd547b0001,
        );
        let follower = ServerSnapshot {
            mode: "follower".into(),
            session_expiry: vec![bucket(1796304463000, vec![g3, g1])],
            local_session_expiry: Some(vec![bucket(1796304460000, vec![l1])]),
            learner_global_sessions: Some(vec![(g3, 10000), (g1, 10000)]),
            ..ServerSnapshot::default()
        };
        let text = render("dump", &follower).unwrap();
        let expected = "SessionTracker dump:
Local Session Sets (1)/(1):
1 expire at Thu Dec 03 13:27:40 UTC 2026:
\t0x10004fd55fb0000
Global Sessions(2):
0x10004fd55fb0001\t10000ms
0x30004fd547b0001\t10000ms
ephemeral nodes dump:
";
        assert_text(&text[..expected.len()], expected);
        let leader = ServerSnapshot {
            mode: "leader".into(),
            session_expiry: vec![
                bucket(1796304463500, vec![g1]),
                bucket(1796304463000, vec![g3]),
            ],
            local_session_expiry: Some(vec![bucket(1796304463000, vec![l3])]),
            ..ServerSnapshot::default()
        };
        let text = render("dump", &leader).unwrap();
        let expected = "SessionTracker dump:
Local Session Sets (1)/(1):
1 expire at Thu Dec 03 13:27:43 UTC 2026:
\t0x30004fd547b0000
Global Session Sets (2)/(2):
1 expire at Thu Dec 03 13:27:43 UTC 2026:
\t0x30004fd547b0001
1 expire at Thu Dec 03 13:27:43 UTC 2026:
\t0x10004fd55fb0001
ephemeral nodes dump:
";
        assert_text(&text[..expected.len()], expected);
        // Without local sessions a learner still lists the global ones its way.
        let plain = ServerSnapshot {
            local_session_expiry: None,
            ..follower
        };
        assert!(render("dump", &plain).unwrap().starts_with(
            "SessionTracker dump:\nGlobal Sessions(2):\n0x10004fd55fb0001\t10000ms\n"
        ));
    }

    #[test]
    fn conf_and_dirs_match_capture() {
        let expected = "clientPort=2401
secureClientPort=-1
dataDir=/tmp/fourlw-zk/data/version-2
dataDirSize=67109337
dataLogDir=/tmp/fourlw-zk/data/version-2
dataLogSize=67109337
tickTime=2000
maxClientCnxns=0
minSessionTimeout=4000
maxSessionTimeout=40000
clientPortListenBacklog=-1
serverId=0
";
        assert_text(&render("conf", &captured()).unwrap(), expected);
        assert_text(
            &render("dirs", &captured()).unwrap(),
            "datadir_size: 67109337\nlogdir_size: 67109337\n",
        );
    }

    #[test]
    fn envi_matches_capture() {
        let mut snap = captured();
        snap.environment = [
            ("host.name", "localhost"),
            ("java.version", "17.0.15"),
            ("java.vendor", "Debian"),
            ("java.home", "/usr/lib/jvm/java-17-openjdk-amd64"),
            ("java.class.path", "/usr/share/java/zookeeper.jar"),
            ("java.library.path", "/usr/java/packages/lib:/usr/lib/x86_64-linux-gnu/jni:/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu:/usr/lib/jni:/lib:/usr/lib"),
            ("java.io.tmpdir", "/tmp"),
            ("java.compiler", "<NA>"),
            ("os.name", "Linux"),
            ("os.arch", "amd64"),
            ("os.version", "6.18.44-fc-v657"),
            ("user.name", "root"),
            ("user.home", "/root"),
            ("user.dir", "/tmp"),
            ("os.memory.free", "363MB"),
            ("os.memory.max", "512MB"),
            ("os.memory.total", "380MB"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let expected = "Environment:
zookeeper.version=3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC
host.name=localhost
java.version=17.0.15
java.vendor=Debian
java.home=/usr/lib/jvm/java-17-openjdk-amd64
java.class.path=/usr/share/java/zookeeper.jar
java.library.path=/usr/java/packages/lib:/usr/lib/x86_64-linux-gnu/jni:/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu:/usr/lib/jni:/lib:/usr/lib
java.io.tmpdir=/tmp
java.compiler=<NA>
os.name=Linux
os.arch=amd64
os.version=6.18.44-fc-v657
user.name=root
user.home=/root
user.dir=/tmp
os.memory.free=363MB
os.memory.max=512MB
os.memory.total=380MB
";
        assert_text(&render("envi", &snap).unwrap(), expected);
    }

    /// Kazoo's `server_version()`: split `envi` lines on the first `=`, take
    /// `zookeeper.version`, keep the leading `[\d.]*`, split on dots into integers; its CI
    /// test joins them with dots and compares with ZOOKEEPER_VERSION.
    fn kazoo_server_version(envi: &str) -> String {
        let value = envi
            .lines()
            .filter_map(|l| l.split_once('='))
            .find(|(k, _)| k.trim() == "zookeeper.version")
            .map(|(_, v)| v.trim())
            .unwrap_or("");
        let digits: String = value
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let parts: Vec<u32> = digits.split('.').map(|d| d.parse().unwrap()).collect();
        parts
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(".")
    }

    #[test]
    fn default_version_satisfies_kazoo() {
        let snap = ServerSnapshot {
            environment: keel_environment(),
            ..ServerSnapshot::default()
        };
        let envi = render("envi", &snap).unwrap();
        assert_eq!(kazoo_server_version(&envi), "3.8.0");
        let keys: Vec<&str> = envi
            .lines()
            .skip(1)
            .map(|l| l.split_once('=').unwrap().0)
            .collect();
        assert_eq!(
            keys,
            [
                "zookeeper.version",
                "host.name",
                "java.version",
                "java.vendor",
                "java.home",
                "java.class.path",
                "java.library.path",
                "java.io.tmpdir",
                "java.compiler",
                "os.name",
                "os.arch",
                "os.version",
                "user.name",
                "user.home",
                "user.dir",
                "os.memory.free",
                "os.memory.max",
                "os.memory.total",
            ]
        );
        let srvr = render("srvr", &snap).unwrap();
        assert!(srvr.starts_with("Zookeeper version: 3.8.0-keel, built on "));
    }

    #[test]
    fn short_replies_match_capture() {
        let snap = captured();
        assert_eq!(render("ruok", &snap).unwrap(), "imok");
        assert_eq!(render("isro", &snap).unwrap(), "rw");
        assert_eq!(render("gtmk", &snap).unwrap(), "306");
        assert_eq!(render("stmk", &snap).unwrap(), "306");
        assert_eq!(render("srst", &snap).unwrap(), "Server stats reset.\n");
        assert_eq!(render("crst", &snap).unwrap(), "Connection stats reset.\n");
        assert_eq!(render("hash", &snap).unwrap(), "");
        assert_eq!(render("xyzw", &snap), None);
        assert_eq!(
            not_whitelisted("stat"),
            "stat is not executed because it is not in the whitelist.\n"
        );
    }

    #[test]
    fn hash_prints_hex_zxid_and_decimal_digest() {
        let snap = ServerSnapshot {
            digest_log: vec![(0x100000080, 1234567890123), (0x100000100, -5)],
            ..ServerSnapshot::default()
        };
        assert_eq!(
            render("hash", &snap).unwrap(),
            "100000080: 1234567890123\n100000100: -5\n"
        );
    }

    #[test]
    fn read_only_and_not_serving() {
        let snap = ServerSnapshot {
            read_only: true,
            ..ServerSnapshot::default()
        };
        assert_eq!(render("isro", &snap).unwrap(), "ro");
        let srvr = render("srvr", &snap).unwrap();
        assert_eq!(
            lines(&srvr)[1],
            "READ-ONLY mode; serving only read-only clients"
        );
        let down = ServerSnapshot {
            serving: false,
            ..ServerSnapshot::default()
        };
        let not_serving = format!("{ZK_NOT_SERVING}\n");
        for w in [
            "srvr", "stat", "cons", "conf", "dump", "mntr", "wchs", "dirs", "srst",
        ] {
            assert_eq!(render(w, &down).unwrap(), not_serving, "{w}");
        }
        assert_eq!(render("isro", &down).unwrap(), "null");
        assert_eq!(render("hash", &down).unwrap(), ZK_NOT_SERVING);
        assert_eq!(render("ruok", &down).unwrap(), "imok");
    }

    #[test]
    fn leader_adds_proposal_sizes() {
        let snap = ServerSnapshot {
            mode: "leader".into(),
            ..ServerSnapshot::default()
        };
        let srvr = render("srvr", &snap).unwrap();
        assert!(
            srvr.ends_with("Mode: leader\nNode count: 5\nProposal sizes last/min/max: -1/-1/-1\n")
        );
    }

    /// `mntr` of a fresh standalone ZooKeeper 3.8.0 (one 4lw connection, no sessions).
    const MNTR_FRESH: &str = r"zk_version	3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC
zk_server_state	standalone
zk_ephemerals_count	0
zk_num_alive_connections	1
zk_avg_latency	0.0
zk_outstanding_requests	0
zk_znode_count	5
zk_global_sessions	0
zk_non_mtls_remote_conn_count	0
zk_last_client_response_size	-1
zk_packets_sent	1
zk_packets_received	2
zk_max_client_response_size	-1
zk_connection_drop_probability	0.0
zk_watch_count	0
zk_auth_failed_count	0
zk_min_latency	0
zk_max_file_descriptor_count	20000
zk_approximate_data_size	44
zk_open_file_descriptor_count	42
zk_local_sessions	0
zk_uptime	665
zk_max_latency	0
zk_outstanding_tls_handshake	0
zk_min_client_response_size	-1
zk_non_mtls_local_conn_count	0
zk_proposal_count	0
zk_watch_bytes	0
zk_outstanding_changes_removed	0
zk_throttled_ops	0
zk_stale_requests_dropped	0
zk_large_requests_rejected	0
zk_insecure_admin_count	0
zk_connection_rejected	0
zk_cnxn_closed_without_zk_server_running	0
zk_sessionless_connections_expired	0
zk_looking_count	0
zk_dead_watchers_queued	0
zk_stale_requests	0
zk_connection_drop_count	0
zk_learner_proposal_received_count	0
zk_digest_mismatches_count	0
zk_dead_watchers_cleared	0
zk_response_packet_cache_hits	0
zk_bytes_received_count	8
zk_add_dead_watcher_stall_time	0
zk_request_throttle_wait_count	0
zk_requests_not_forwarded_to_commit_processor	0
zk_response_packet_cache_misses	0
zk_ensemble_auth_success	0
zk_prep_processor_request_queued	0
zk_learner_commit_received_count	0
zk_stale_replies	0
zk_connection_request_count	0
zk_response_bytes	0
zk_ensemble_auth_fail	0
zk_diff_count	0
zk_response_packet_get_children_cache_misses	0
zk_connection_revalidate_count	0
zk_quit_leading_due_to_disloyal_voter	0
zk_snap_count	0
zk_unrecoverable_error_count	0
zk_unsuccessful_handshake	0
zk_commit_count	0
zk_stale_sessions_expired	0
zk_response_packet_get_children_cache_hits	0
zk_sync_processor_request_queued	0
zk_outstanding_changes_queued	0
zk_request_commit_queued	0
zk_ensemble_auth_skip	0
zk_skip_learner_request_to_next_processor_count	0
zk_tls_handshake_exceeded	0
zk_revalidate_count	0
zk_avg_socket_closing_time	0.0
zk_min_socket_closing_time	0
zk_max_socket_closing_time	0
zk_cnt_socket_closing_time	0
zk_sum_socket_closing_time	0
zk_avg_proposal_process_time	0.0
zk_min_proposal_process_time	0
zk_max_proposal_process_time	0
zk_cnt_proposal_process_time	0
zk_sum_proposal_process_time	0
zk_avg_leader_unavailable_time	0.0
zk_min_leader_unavailable_time	0
zk_max_leader_unavailable_time	0
zk_cnt_leader_unavailable_time	0
zk_sum_leader_unavailable_time	0
zk_avg_node_created_watch_count	0.0
zk_min_node_created_watch_count	0
zk_max_node_created_watch_count	0
zk_cnt_node_created_watch_count	0
zk_sum_node_created_watch_count	0
zk_avg_session_queues_drained	0.0
zk_min_session_queues_drained	0
zk_max_session_queues_drained	0
zk_cnt_session_queues_drained	0
zk_sum_session_queues_drained	0
zk_avg_write_commit_proc_req_queued	0.0
zk_min_write_commit_proc_req_queued	0
zk_max_write_commit_proc_req_queued	0
zk_cnt_write_commit_proc_req_queued	0
zk_sum_write_commit_proc_req_queued	0
zk_avg_connection_token_deficit	0.0
zk_min_connection_token_deficit	0
zk_max_connection_token_deficit	0
zk_cnt_connection_token_deficit	0
zk_sum_connection_token_deficit	0
zk_avg_read_commit_proc_req_queued	0.0
zk_min_read_commit_proc_req_queued	0
zk_max_read_commit_proc_req_queued	0
zk_cnt_read_commit_proc_req_queued	0
zk_sum_read_commit_proc_req_queued	0
zk_avg_node_deleted_watch_count	0.0
zk_min_node_deleted_watch_count	0
zk_max_node_deleted_watch_count	0
zk_cnt_node_deleted_watch_count	0
zk_sum_node_deleted_watch_count	0
zk_avg_startup_txns_load_time	0.0
zk_min_startup_txns_load_time	0
zk_max_startup_txns_load_time	0
zk_cnt_startup_txns_load_time	0
zk_sum_startup_txns_load_time	0
zk_avg_sync_processor_queue_size	0.0
zk_min_sync_processor_queue_size	0
zk_max_sync_processor_queue_size	0
zk_cnt_sync_processor_queue_size	1
zk_sum_sync_processor_queue_size	0
zk_avg_follower_sync_time	0.0
zk_min_follower_sync_time	0
zk_max_follower_sync_time	0
zk_cnt_follower_sync_time	0
zk_sum_follower_sync_time	0
zk_avg_prep_processor_queue_size	0.0
zk_min_prep_processor_queue_size	0
zk_max_prep_processor_queue_size	0
zk_cnt_prep_processor_queue_size	1
zk_sum_prep_processor_queue_size	0
zk_avg_fsynctime	0.0
zk_min_fsynctime	0
zk_max_fsynctime	0
zk_cnt_fsynctime	0
zk_sum_fsynctime	0
zk_avg_inflight_snap_count	0.0
zk_min_inflight_snap_count	0
zk_max_inflight_snap_count	0
zk_cnt_inflight_snap_count	0
zk_sum_inflight_snap_count	0
zk_avg_reads_issued_from_session_queue	0.0
zk_min_reads_issued_from_session_queue	0
zk_max_reads_issued_from_session_queue	0
zk_cnt_reads_issued_from_session_queue	0
zk_sum_reads_issued_from_session_queue	0
zk_avg_learner_request_processor_queue_size	0.0
zk_min_learner_request_processor_queue_size	0
zk_max_learner_request_processor_queue_size	0
zk_cnt_learner_request_processor_queue_size	0
zk_sum_learner_request_processor_queue_size	0
zk_avg_snapshottime	1.0
zk_min_snapshottime	1
zk_max_snapshottime	1
zk_cnt_snapshottime	1
zk_sum_snapshottime	1
zk_avg_unavailable_time	0.0
zk_min_unavailable_time	0
zk_max_unavailable_time	0
zk_cnt_unavailable_time	0
zk_sum_unavailable_time	0
zk_avg_startup_txns_loaded	0.0
zk_min_startup_txns_loaded	0
zk_max_startup_txns_loaded	0
zk_cnt_startup_txns_loaded	0
zk_sum_startup_txns_loaded	0
zk_avg_reads_after_write_in_session_queue	0.0
zk_min_reads_after_write_in_session_queue	0
zk_max_reads_after_write_in_session_queue	0
zk_cnt_reads_after_write_in_session_queue	0
zk_sum_reads_after_write_in_session_queue	0
zk_avg_requests_in_session_queue	0.0
zk_min_requests_in_session_queue	0
zk_max_requests_in_session_queue	0
zk_cnt_requests_in_session_queue	0
zk_sum_requests_in_session_queue	0
zk_avg_write_commit_proc_issued	0.0
zk_min_write_commit_proc_issued	0
zk_max_write_commit_proc_issued	0
zk_cnt_write_commit_proc_issued	0
zk_sum_write_commit_proc_issued	0
zk_avg_prep_process_time	0.0
zk_min_prep_process_time	0
zk_max_prep_process_time	0
zk_cnt_prep_process_time	0
zk_sum_prep_process_time	0
zk_avg_pending_session_queue_size	0.0
zk_min_pending_session_queue_size	0
zk_max_pending_session_queue_size	0
zk_cnt_pending_session_queue_size	0
zk_sum_pending_session_queue_size	0
zk_avg_time_waiting_empty_pool_in_commit_processor_read_ms	0.0
zk_min_time_waiting_empty_pool_in_commit_processor_read_ms	0
zk_max_time_waiting_empty_pool_in_commit_processor_read_ms	0
zk_cnt_time_waiting_empty_pool_in_commit_processor_read_ms	0
zk_sum_time_waiting_empty_pool_in_commit_processor_read_ms	0
zk_avg_commit_process_time	0.0
zk_min_commit_process_time	0
zk_max_commit_process_time	0
zk_cnt_commit_process_time	0
zk_sum_commit_process_time	0
zk_avg_dbinittime	21.0
zk_min_dbinittime	21
zk_max_dbinittime	21
zk_cnt_dbinittime	1
zk_sum_dbinittime	21
zk_avg_inflight_diff_count	0.0
zk_min_inflight_diff_count	0
zk_max_inflight_diff_count	0
zk_cnt_inflight_diff_count	0
zk_sum_inflight_diff_count	0
zk_avg_netty_queued_buffer_capacity	0.0
zk_min_netty_queued_buffer_capacity	0
zk_max_netty_queued_buffer_capacity	0
zk_cnt_netty_queued_buffer_capacity	0
zk_sum_netty_queued_buffer_capacity	0
zk_avg_election_time	0.0
zk_min_election_time	0
zk_max_election_time	0
zk_cnt_election_time	0
zk_sum_election_time	0
zk_avg_commit_commit_proc_req_queued	0.0
zk_min_commit_commit_proc_req_queued	0
zk_max_commit_commit_proc_req_queued	0
zk_cnt_commit_commit_proc_req_queued	0
zk_sum_commit_commit_proc_req_queued	0
zk_avg_sync_processor_batch_size	0.0
zk_min_sync_processor_batch_size	0
zk_max_sync_processor_batch_size	0
zk_cnt_sync_processor_batch_size	0
zk_sum_sync_processor_batch_size	0
zk_avg_node_children_watch_count	0.0
zk_min_node_children_watch_count	0
zk_max_node_children_watch_count	0
zk_cnt_node_children_watch_count	0
zk_sum_node_children_watch_count	0
zk_avg_write_batch_time_in_commit_processor	0.0
zk_min_write_batch_time_in_commit_processor	0
zk_max_write_batch_time_in_commit_processor	0
zk_cnt_write_batch_time_in_commit_processor	0
zk_sum_write_batch_time_in_commit_processor	0
zk_avg_read_commit_proc_issued	0.0
zk_min_read_commit_proc_issued	0
zk_max_read_commit_proc_issued	0
zk_cnt_read_commit_proc_issued	0
zk_sum_read_commit_proc_issued	0
zk_avg_concurrent_request_processing_in_commit_processor	0.0
zk_min_concurrent_request_processing_in_commit_processor	0
zk_max_concurrent_request_processing_in_commit_processor	0
zk_cnt_concurrent_request_processing_in_commit_processor	0
zk_sum_concurrent_request_processing_in_commit_processor	0
zk_avg_observer_sync_time	0.0
zk_min_observer_sync_time	0
zk_max_observer_sync_time	0
zk_cnt_observer_sync_time	0
zk_sum_observer_sync_time	0
zk_avg_node_changed_watch_count	0.0
zk_min_node_changed_watch_count	0
zk_max_node_changed_watch_count	0
zk_cnt_node_changed_watch_count	0
zk_sum_node_changed_watch_count	0
zk_avg_sync_process_time	0.0
zk_min_sync_process_time	0
zk_max_sync_process_time	0
zk_cnt_sync_process_time	0
zk_sum_sync_process_time	0
zk_avg_startup_snap_load_time	3.0
zk_min_startup_snap_load_time	3
zk_max_startup_snap_load_time	3
zk_cnt_startup_snap_load_time	1
zk_sum_startup_snap_load_time	3
zk_avg_prep_processor_queue_time_ms	0.0
zk_min_prep_processor_queue_time_ms	0
zk_max_prep_processor_queue_time_ms	0
zk_cnt_prep_processor_queue_time_ms	0
zk_sum_prep_processor_queue_time_ms	0
zk_p50_prep_processor_queue_time_ms	0
zk_p95_prep_processor_queue_time_ms	0
zk_p99_prep_processor_queue_time_ms	0
zk_p999_prep_processor_queue_time_ms	0
zk_avg_jvm_pause_time_ms	0.0
zk_min_jvm_pause_time_ms	0
zk_max_jvm_pause_time_ms	0
zk_cnt_jvm_pause_time_ms	0
zk_sum_jvm_pause_time_ms	0
zk_p50_jvm_pause_time_ms	0
zk_p95_jvm_pause_time_ms	0
zk_p99_jvm_pause_time_ms	0
zk_p999_jvm_pause_time_ms	0
zk_avg_close_session_prep_time	0.0
zk_min_close_session_prep_time	0
zk_max_close_session_prep_time	0
zk_cnt_close_session_prep_time	0
zk_sum_close_session_prep_time	0
zk_p50_close_session_prep_time	0
zk_p95_close_session_prep_time	0
zk_p99_close_session_prep_time	0
zk_p999_close_session_prep_time	0
zk_avg_read_commitproc_time_ms	0.0
zk_min_read_commitproc_time_ms	0
zk_max_read_commitproc_time_ms	0
zk_cnt_read_commitproc_time_ms	0
zk_sum_read_commitproc_time_ms	0
zk_p50_read_commitproc_time_ms	0
zk_p95_read_commitproc_time_ms	0
zk_p99_read_commitproc_time_ms	0
zk_p999_read_commitproc_time_ms	0
zk_avg_updatelatency	0.0
zk_min_updatelatency	0
zk_max_updatelatency	0
zk_cnt_updatelatency	0
zk_sum_updatelatency	0
zk_p50_updatelatency	0
zk_p95_updatelatency	0
zk_p99_updatelatency	0
zk_p999_updatelatency	0
zk_avg_local_write_committed_time_ms	0.0
zk_min_local_write_committed_time_ms	0
zk_max_local_write_committed_time_ms	0
zk_cnt_local_write_committed_time_ms	0
zk_sum_local_write_committed_time_ms	0
zk_p50_local_write_committed_time_ms	0
zk_p95_local_write_committed_time_ms	0
zk_p99_local_write_committed_time_ms	0
zk_p999_local_write_committed_time_ms	0
zk_avg_request_throttle_queue_time_ms	0.0
zk_min_request_throttle_queue_time_ms	0
zk_max_request_throttle_queue_time_ms	0
zk_cnt_request_throttle_queue_time_ms	0
zk_sum_request_throttle_queue_time_ms	0
zk_p50_request_throttle_queue_time_ms	0
zk_p95_request_throttle_queue_time_ms	0
zk_p99_request_throttle_queue_time_ms	0
zk_p999_request_throttle_queue_time_ms	0
zk_avg_readlatency	0.0
zk_min_readlatency	0
zk_max_readlatency	0
zk_cnt_readlatency	0
zk_sum_readlatency	0
zk_p50_readlatency	0
zk_p95_readlatency	0
zk_p99_readlatency	0
zk_p999_readlatency	0
zk_avg_quorum_ack_latency	0.0
zk_min_quorum_ack_latency	0
zk_max_quorum_ack_latency	0
zk_cnt_quorum_ack_latency	0
zk_sum_quorum_ack_latency	0
zk_p50_quorum_ack_latency	0
zk_p95_quorum_ack_latency	0
zk_p99_quorum_ack_latency	0
zk_p999_quorum_ack_latency	0
zk_avg_om_commit_process_time_ms	0.0
zk_min_om_commit_process_time_ms	0
zk_max_om_commit_process_time_ms	0
zk_cnt_om_commit_process_time_ms	0
zk_sum_om_commit_process_time_ms	0
zk_p50_om_commit_process_time_ms	0
zk_p95_om_commit_process_time_ms	0
zk_p99_om_commit_process_time_ms	0
zk_p999_om_commit_process_time_ms	0
zk_avg_read_final_proc_time_ms	0.0
zk_min_read_final_proc_time_ms	0
zk_max_read_final_proc_time_ms	0
zk_cnt_read_final_proc_time_ms	0
zk_sum_read_final_proc_time_ms	0
zk_p50_read_final_proc_time_ms	0
zk_p95_read_final_proc_time_ms	0
zk_p99_read_final_proc_time_ms	0
zk_p999_read_final_proc_time_ms	0
zk_avg_commit_propagation_latency	0.0
zk_min_commit_propagation_latency	0
zk_max_commit_propagation_latency	0
zk_cnt_commit_propagation_latency	0
zk_sum_commit_propagation_latency	0
zk_p50_commit_propagation_latency	0
zk_p95_commit_propagation_latency	0
zk_p99_commit_propagation_latency	0
zk_p999_commit_propagation_latency	0
zk_avg_dead_watchers_cleaner_latency	0.0
zk_min_dead_watchers_cleaner_latency	0
zk_max_dead_watchers_cleaner_latency	0
zk_cnt_dead_watchers_cleaner_latency	0
zk_sum_dead_watchers_cleaner_latency	0
zk_p50_dead_watchers_cleaner_latency	0
zk_p95_dead_watchers_cleaner_latency	0
zk_p99_dead_watchers_cleaner_latency	0
zk_p999_dead_watchers_cleaner_latency	0
zk_avg_write_final_proc_time_ms	0.0
zk_min_write_final_proc_time_ms	0
zk_max_write_final_proc_time_ms	0
zk_cnt_write_final_proc_time_ms	0
zk_sum_write_final_proc_time_ms	0
zk_p50_write_final_proc_time_ms	0
zk_p95_write_final_proc_time_ms	0
zk_p99_write_final_proc_time_ms	0
zk_p999_write_final_proc_time_ms	0
zk_avg_proposal_ack_creation_latency	0.0
zk_min_proposal_ack_creation_latency	0
zk_max_proposal_ack_creation_latency	0
zk_cnt_proposal_ack_creation_latency	0
zk_sum_proposal_ack_creation_latency	0
zk_p50_proposal_ack_creation_latency	0
zk_p95_proposal_ack_creation_latency	0
zk_p99_proposal_ack_creation_latency	0
zk_p999_proposal_ack_creation_latency	0
zk_avg_proposal_latency	0.0
zk_min_proposal_latency	0
zk_max_proposal_latency	0
zk_cnt_proposal_latency	0
zk_sum_proposal_latency	0
zk_p50_proposal_latency	0
zk_p95_proposal_latency	0
zk_p99_proposal_latency	0
zk_p999_proposal_latency	0
zk_avg_om_proposal_process_time_ms	0.0
zk_min_om_proposal_process_time_ms	0
zk_max_om_proposal_process_time_ms	0
zk_cnt_om_proposal_process_time_ms	0
zk_sum_om_proposal_process_time_ms	0
zk_p50_om_proposal_process_time_ms	0
zk_p95_om_proposal_process_time_ms	0
zk_p99_om_proposal_process_time_ms	0
zk_p999_om_proposal_process_time_ms	0
zk_avg_sync_processor_queue_and_flush_time_ms	0.0
zk_min_sync_processor_queue_and_flush_time_ms	0
zk_max_sync_processor_queue_and_flush_time_ms	0
zk_cnt_sync_processor_queue_and_flush_time_ms	0
zk_sum_sync_processor_queue_and_flush_time_ms	0
zk_p50_sync_processor_queue_and_flush_time_ms	0
zk_p95_sync_processor_queue_and_flush_time_ms	0
zk_p99_sync_processor_queue_and_flush_time_ms	0
zk_p999_sync_processor_queue_and_flush_time_ms	0
zk_avg_propagation_latency	0.0
zk_min_propagation_latency	0
zk_max_propagation_latency	0
zk_cnt_propagation_latency	0
zk_sum_propagation_latency	0
zk_p50_propagation_latency	0
zk_p95_propagation_latency	0
zk_p99_propagation_latency	0
zk_p999_propagation_latency	0
zk_avg_server_write_committed_time_ms	0.0
zk_min_server_write_committed_time_ms	0
zk_max_server_write_committed_time_ms	0
zk_cnt_server_write_committed_time_ms	0
zk_sum_server_write_committed_time_ms	0
zk_p50_server_write_committed_time_ms	0
zk_p95_server_write_committed_time_ms	0
zk_p99_server_write_committed_time_ms	0
zk_p999_server_write_committed_time_ms	0
zk_avg_sync_processor_queue_time_ms	0.0
zk_min_sync_processor_queue_time_ms	0
zk_max_sync_processor_queue_time_ms	0
zk_cnt_sync_processor_queue_time_ms	0
zk_sum_sync_processor_queue_time_ms	0
zk_p50_sync_processor_queue_time_ms	0
zk_p95_sync_processor_queue_time_ms	0
zk_p99_sync_processor_queue_time_ms	0
zk_p999_sync_processor_queue_time_ms	0
zk_avg_sync_processor_queue_flush_time_ms	0.0
zk_min_sync_processor_queue_flush_time_ms	0
zk_max_sync_processor_queue_flush_time_ms	0
zk_cnt_sync_processor_queue_flush_time_ms	0
zk_sum_sync_processor_queue_flush_time_ms	0
zk_p50_sync_processor_queue_flush_time_ms	0
zk_p95_sync_processor_queue_flush_time_ms	0
zk_p99_sync_processor_queue_flush_time_ms	0
zk_p999_sync_processor_queue_flush_time_ms	0
zk_avg_write_commitproc_time_ms	0.0
zk_min_write_commitproc_time_ms	0
zk_max_write_commitproc_time_ms	0
zk_cnt_write_commitproc_time_ms	0
zk_sum_write_commitproc_time_ms	0
zk_p50_write_commitproc_time_ms	0
zk_p95_write_commitproc_time_ms	0
zk_p99_write_commitproc_time_ms	0
zk_p999_write_commitproc_time_ms	0
";

    #[test]
    fn mntr_matches_fresh_capture() {
        let snap = ServerSnapshot {
            zookeeper_version: ZK_VERSION.into(),
            build_date: ZK_BUILD.into(),
            connections: vec![four_lw_cnxn(1)],
            packets_sent: 1,
            packets_received: 2,
            max_file_descriptor_count: Some(20000),
            open_file_descriptor_count: Some(42),
            approximate_data_size: 44,
            uptime_ms: 665,
            mntr_counters: vec![("bytes_received_count".into(), 8)],
            mntr_summaries: [
                ("sync_processor_queue_size", 1, 0),
                ("prep_processor_queue_size", 1, 0),
                ("snapshottime", 1, 1),
                ("dbinittime", 1, 21),
                ("startup_snap_load_time", 1, 3),
            ]
            .iter()
            .map(|&(name, count, value)| {
                let s = Summary {
                    count,
                    sum: value,
                    min: value,
                    max: value,
                    ..Summary::default()
                };
                (name.to_string(), s)
            })
            .collect(),
            ..ServerSnapshot::default()
        };
        assert_text(&render("mntr", &snap).unwrap(), MNTR_FRESH);
    }

    /// The Zab side of a 3-member ensemble as `mntr` shows it.
    fn ensemble_snapshot(leader: bool) -> ServerSnapshot {
        let learner = |sid| crate::admin::quorum::LearnerView {
            sid,
            observer: false,
            voting: true,
            synced: true,
            acked_zxid: 0,
            lag_txns: Some(0),
            lag_ms: Some(0),
            lag_ms_at_least: false,
            last_heard_ms_ago: 0,
            connected_at_ms: 0,
            link: None,
        };
        ServerSnapshot {
            mode: if leader { "leader" } else { "follower" }.into(),
            open_file_descriptor_count: Some(48),
            max_file_descriptor_count: Some(20000),
            quorum_size: 3,
            ensemble: Some(EnsembleView {
                my_id: 3,
                peer_state: if leader {
                    "leading - broadcast"
                } else {
                    "following - broadcast"
                }
                .into(),
                zab_state: "broadcast".into(),
                leader_id: Some(if leader { 3 } else { 1 }),
                accepted_epoch: 1,
                current_epoch: 1,
                last_logged_zxid: 0,
                learners: if leader {
                    vec![learner(1), learner(2)]
                } else {
                    Vec::new()
                },
                leader_uptime_ms: leader.then_some(2707),
                diff_count: 0,
                snap_count: 0,
                proposal_count: 0,
                proposal_sizes: (-1, -1, -1),
                voting_members: 3,
                role_metrics: Default::default(),
                last_election: None,
                looking_since_ms: None,
                config_text: String::new(),
            }),
            ..ServerSnapshot::default()
        }
    }

    /// A leader's and a follower's `mntr` single values, in the order of a ZooKeeper
    /// 3.8.0 3-member ensemble (captured: tickTime 500, fresh, 2 followers synced).
    #[test]
    fn ensemble_mntr_matches_capture_order() {
        let leader_keys = "peer_state ephemerals_count num_alive_connections avg_latency min_proposal_size outstanding_requests znode_count global_sessions non_mtls_remote_conn_count last_client_response_size packets_sent packets_received max_proposal_size max_client_response_size synced_followers connection_drop_probability watch_count synced_non_voting_followers synced_observers auth_failed_count min_latency max_file_descriptor_count approximate_data_size open_file_descriptor_count last_proposal_size pending_syncs leader_uptime local_sessions uptime max_latency outstanding_tls_handshake learners min_client_response_size non_mtls_local_conn_count quorum_size proposal_count";
        let leader: Vec<String> = mntr_entries(&ensemble_snapshot(true))
            .into_iter()
            .skip(2)
            .take(leader_keys.split(' ').count())
            .map(|(k, _)| k)
            .collect();
        assert_eq!(leader.join(" "), leader_keys);
        let values: std::collections::HashMap<String, String> =
            mntr_entries(&ensemble_snapshot(true))
                .into_iter()
                .map(|(k, v)| (k, v.render()))
                .collect();
        for (k, v) in [
            ("peer_state", "leading - broadcast"),
            ("synced_followers", "2"),
            ("synced_non_voting_followers", "0"),
            ("synced_observers", "0"),
            ("pending_syncs", "0"),
            ("learners", "2"),
            ("leader_uptime", "2707"),
            ("quorum_size", "3"),
            ("min_proposal_size", "-1"),
        ] {
            assert_eq!(values[k], v, "{k}");
        }
        // A follower adds only its peer state and the quorum size.
        let follower: Vec<String> = mntr_entries(&ensemble_snapshot(false))
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        let standalone: Vec<String> = mntr_entries(&ServerSnapshot {
            open_file_descriptor_count: Some(48),
            max_file_descriptor_count: Some(20000),
            ..ServerSnapshot::default()
        })
        .into_iter()
        .map(|(k, _)| k)
        .collect();
        let added: Vec<&String> = follower
            .iter()
            .filter(|k| !standalone.contains(k))
            .collect();
        assert_eq!(added, ["peer_state", "quorum_size"]);
        assert_eq!(follower[2], "peer_state");
    }

    /// An observer adds `observer_master_id` (the leader it observes) after its peer
    /// state; a read-only member (ZooKeeper's ReadOnlyZooKeeperServer) shows no peer
    /// state and no quorum size; a follower a reconfig removed counts as a synced
    /// non-voting follower on the leader (ZooKeeper 3.8 ensembles, captured).
    #[test]
    fn observer_read_only_and_non_voting_mntr() {
        let keys = |snap: &ServerSnapshot| -> Vec<String> {
            mntr_entries(snap).into_iter().map(|(k, _)| k).collect()
        };
        let mut observer = ensemble_snapshot(false);
        observer.mode = "observer".into();
        if let Some(e) = observer.ensemble.as_mut() {
            e.peer_state = "observing - broadcast".into();
            e.leader_id = Some(2);
        }
        let entries = mntr_entries(&observer);
        assert_eq!(entries[2].0, "peer_state");
        assert_eq!(entries[3], ("observer_master_id".into(), MntrValue::Int(2)));
        assert!(!keys(&ensemble_snapshot(false)).contains(&"observer_master_id".into()));

        let mut ro = ensemble_snapshot(false);
        ro.mode = "read-only".into();
        ro.read_only = true;
        let ro_keys = keys(&ro);
        assert_eq!(ro_keys[1], "server_state");
        assert!(!ro_keys.contains(&"peer_state".into()));
        assert!(!ro_keys.contains(&"quorum_size".into()));

        let mut leader = ensemble_snapshot(true);
        if let Some(e) = leader.ensemble.as_mut() {
            e.learners[1].voting = false;
        }
        let value = |k: &str| {
            mntr_entries(&leader)
                .into_iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v)
        };
        assert_eq!(value("synced_followers"), Some(MntrValue::Int(2)));
        assert_eq!(
            value("synced_non_voting_followers"),
            Some(MntrValue::Int(1))
        );
    }

    #[test]
    fn mntr_figures_and_summaries() {
        let mut snap = captured();
        snap.mntr_summaries = vec![(
            "updatelatency".into(),
            Summary {
                count: 13,
                sum: 83,
                min: 0,
                max: 28,
                p50: 5,
                p95: 28,
                p99: 28,
                p999: 28,
            },
        )];
        snap.mntr_summary_sets = vec![(
            "a_read_per_namespace".into(),
            Summary {
                count: 4,
                sum: 1,
                max: 1,
                ..Summary::default()
            },
        )];
        snap.open_file_descriptor_count = None;
        let out = render("mntr", &snap).unwrap();
        for line in [
            "zk_ephemerals_count\t3",
            "zk_num_alive_connections\t3",
            "zk_avg_latency\t6.3846",
            "zk_znode_count\t10",
            "zk_global_sessions\t2",
            "zk_watch_count\t4",
            "zk_avg_updatelatency\t6.3846",
            "zk_p50_updatelatency\t5",
            "zk_p999_updatelatency\t28",
            "zk_avg_readlatency\t0.0",
        ] {
            assert!(out.lines().any(|l| l == line), "missing {line}");
        }
        assert!(!out.contains("zk_open_file_descriptor_count"));
        assert!(out.ends_with(
            "zk_avg_a_read_per_namespace\t0.25\nzk_min_a_read_per_namespace\t0\n\
             zk_max_a_read_per_namespace\t1\nzk_cnt_a_read_per_namespace\t4\n\
             zk_sum_a_read_per_namespace\t1\n"
        ));
    }

    #[test]
    fn java_number_formats() {
        assert_eq!(java_double(round4_half_up(0.0)), "0.0");
        assert_eq!(java_double(round4_half_up(0.25)), "0.25");
        assert_eq!(java_double(round4_half_up(83.0 / 13.0)), "6.3846");
        assert_eq!(java_double(round4_half_up(1.0 / 13.0)), "0.0769");
        assert_eq!(java_double(round4_half_up(3.0)), "3.0");
        // 1/32 = 0.03125 is an exact tie: HALF_UP gives 0.0313 where half-even gives 0.0312.
        assert_eq!(java_double(round4_half_up(1.0 / 32.0)), "0.0313");
        assert_eq!(java_double(round4_half_up(0.0001)), "1.0E-4");
        assert_eq!(java_double(round4_half_up(1.0 / 3000.0)), "3.0E-4");
        assert_eq!(java_double(12_345_678.0), "1.2345678E7");
        assert_eq!(java_hex(-1), "ffffffffffffffff");
        assert_eq!(java_hex(0x1a), "1a");
    }

    #[test]
    fn java_address_and_date_formats() {
        assert_eq!(java_socket_addr(&addr("127.0.0.1:2181")), "/127.0.0.1:2181");
        assert_eq!(
            java_socket_addr(&addr("[::1]:5000")),
            "/[0:0:0:0:0:0:0:1]:5000"
        );
        assert_eq!(
            java_socket_addr(&addr("[::ffff:10.0.0.1]:7")),
            "/10.0.0.1:7"
        );
        assert_eq!(java_date(0), "Thu Jan 01 00:00:00 UTC 1970");
        assert_eq!(java_date(1796002530000), "Mon Nov 30 01:35:30 UTC 2026");
        assert_eq!(java_date(951_782_400_000), "Tue Feb 29 00:00:00 UTC 2000");
    }

    #[test]
    fn the_build_date_is_printed_as_zookeeper_prints_its_own() {
        // ZooKeeper 3.8.0's Debian build: "built on 2024-12-29 17:54 UTC".
        assert_eq!(build_date(Some("1735494840")), "2024-12-29 17:54 UTC");
        assert_eq!(build_date(Some("1796002530")), "2026-11-30 01:35 UTC");
        assert_eq!(build_date(None), "1970-01-01 00:00 UTC");
        assert_eq!(build_date(Some("soon")), "1970-01-01 00:00 UTC");
    }

    #[test]
    fn words_and_whitelist() {
        assert!(is_four_letter_word(b"ruok"));
        assert!(is_four_letter_word(b"stmk\0\0\0\0\0\0\x01\x32"));
        assert!(!is_four_letter_word(b"ruo"));
        assert!(!is_four_letter_word(&[0, 0, 0, 44]));
        assert!(!is_four_letter_word(b"kill"));
        for w in WORDS {
            assert!(render(w, &ServerSnapshot::default()).is_some(), "{w}");
            assert!(is_whitelisted(w, Some("*"), false));
        }
        assert!(is_whitelisted("srvr", None, false));
        assert!(!is_whitelisted("ruok", None, false));
        assert!(is_whitelisted("ruok", Some("stat, ruok"), false));
        assert!(!is_whitelisted("mntr", Some("stat, ruok"), false));
        assert!(is_whitelisted("isro", None, true));
        assert!(!is_whitelisted("kill", Some("*"), false));
        assert_eq!(last_op_name(8), "GETC");
        assert_eq!(last_op_name(100), "NA");
    }
}

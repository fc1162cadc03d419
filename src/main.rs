//! `keel [-Dname=value ...] PATH/zoo.cfg`: start a server from a ZooKeeper-style
//! zoo.cfg, like ZooKeeper's QuorumPeerMain. `-D` properties (and `-D` flags found in
//! the SERVER_JVMFLAGS environment variable) are read as ZooKeeper reads JVM system
//! properties, e.g. `-Dzookeeper.DigestAuthenticationProvider.superDigest=...`.
//!
//! `keel import-zookeeper [--log-dir DIR] ZK_DATADIR KEEL_DATADIR`: move a ZooKeeper
//! dataDir into a new keel store (see `keel::import`); progress and the reason for a
//! refusal go to stderr, and a refusal exits non-zero with nothing written.

use clap::Parser;
use keel::config::Config;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    version,
    about = "A coordination server that speaks ZooKeeper's client protocol",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Args {
    /// A JVM-style system property, NAME=VALUE (repeatable).
    #[arg(short = 'D', value_name = "NAME=VALUE")]
    properties: Vec<String>,
    /// Path to zoo.cfg.
    #[arg(required = true, value_name = "CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Import an Apache ZooKeeper 3.x dataDir (its newest valid snapshot and the txn
    /// logs after it) into a new keel store: znodes, ACLs, every Stat field, sessions
    /// and their ephemerals, at ZooKeeper's last zxid.
    ImportZookeeper(ImportArgs),
}

#[derive(clap::Args, Debug)]
struct ImportArgs {
    /// ZooKeeper's dataDir (or its version-2 folder); only read.
    #[arg(value_name = "ZK_DATADIR")]
    zk_data_dir: PathBuf,
    /// keel's dataDir: the store is created as KEEL_DATADIR/keel-db, which must not
    /// exist yet.
    #[arg(value_name = "KEEL_DATADIR")]
    keel_data_dir: PathBuf,
    /// ZooKeeper's dataLogDir, when its txn logs live apart from its dataDir.
    #[arg(long, value_name = "DIR")]
    log_dir: Option<PathBuf>,
    /// keel's dataLogDir, when keel will run with one set apart from its dataDir.
    #[arg(long, value_name = "DIR")]
    keel_log_dir: Option<PathBuf>,
    /// The jute.maxbuffer ZooKeeper ran with, bytes (bounds a txn log record).
    #[arg(long, value_name = "BYTES", default_value_t = keel::import::txnlog::DEFAULT_JUTE_MAXBUFFER)]
    jute_maxbuffer: usize,
    /// Import even if the tree digests ZooKeeper recorded disagree with the rebuilt tree.
    #[arg(long)]
    ignore_digests: bool,
    /// Make an ensemble member's store (the snapshot and the txns logged after it, and
    /// the epoch files), so keel replacing that ZooKeeper member rejoins by DIFF.
    #[arg(long)]
    ensemble: bool,
}

/// zoo.cfg key for the log level (keel's own; ZooKeeper sets levels in log4j files).
const LOG_LEVEL_KEY: &str = "keel.logLevel";
/// The system property zkServer.sh fills from `ZOO_LOG4J_PROP` (`LEVEL,APPENDER`).
const ROOT_LOGGER_PROPERTY: &str = "zookeeper.root.logger";

/// The allocator for keel's own (Rust) allocations: mimalloc instead of glibc malloc.
///
/// Why: a znode is one long-lived allocation, and each request makes short-lived ones
/// between them. glibc carves both from the same heap, so freed request buffers leave
/// holes between znodes that later znodes fit only partly; after 1M creates of 100
/// bytes about 54 MB of the worker's arena sat free in holes smaller than a page
/// (`malloc_stats`), and `malloc_trim` returned none of it. mimalloc keeps each size
/// class in its own pages, so znodes pack densely. Measured figures are in
/// `tune_allocator`, which covers what still uses glibc.
#[global_allocator]
static ALLOCATOR: keel::allocator::Allocator = keel::allocator::Allocator;

/// Allocator settings made first thing in `main`.
///
/// RocksDB's C++ allocations still go to glibc malloc: its large transient buffers
/// (memtable arena blocks) get their own mappings, returned to the OS when freed,
/// instead of heap space that later small allocations pin.
///
/// Why: glibc raises its mmap threshold each time a mapped block is freed (up to
/// 32 MB), so after the first such block every later one came from the heap. A fixed
/// threshold turns that adjustment off (mallopt(3), M_MMAP_THRESHOLD; the default
/// start value, 128 KiB). Measured with 1M znodes of 100 bytes (`compat-tests/bench`,
/// resident memory per znode): glibc alone 286, glibc with this 257-278, mimalloc
/// without this 257-268, mimalloc with this 215-228 bytes.
fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a glibc allocator parameter; it is called once, first
    // thing in main, before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
    // mimalloc returns a freed page to the OS 1 ms after it went free, not 1000 (the
    // default of mimalloc v3, which libmimalloc-sys builds; v2's is 10), unless
    // MIMALLOC_PURGE_DELAY says otherwise. Why: a member that goes quiet after a burst
    // of writes kept what went free in its last second resident. Measured (1,000,000
    // znodes of 100 B created through a follower, RSS growth per znode 3 s after):
    // leader 128-133 B with the default, 123 B with 1 ms (followers 123-134 and 123),
    // as with 0 ms; set throughput through the leader the same or better (three
    // alternated runs of 400,000 sets: 6.0/5.4/4.6 s against 6.5/6.0/4.9 s).
    let named = |v| std::env::var_os(v).is_some();
    // v3 also reads the option under its old name.
    if !named("MIMALLOC_PURGE_DELAY") && !named("MIMALLOC_RESET_DELAY") {
        // mimalloc.h's mi_option_e: purge_delay is the 16th in v2 and v3 alike
        // (libmimalloc-sys exports only some options as constants). Checked against
        // the documented defaults first, so a mimalloc with another order is left as
        // it is. (`MIMALLOC_VERBOSE=1` prints the options as they were before this.)
        const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
        // SAFETY: mi_option_get/set read and write mimalloc's option table; not thread
        // safe, and no other thread exists yet.
        unsafe {
            if matches!(
                libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY),
                10 | 1000
            ) {
                libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 1);
            }
        }
    }
    // No transparent huge pages for this process (prctl(2), PR_SET_THP_DISABLE). Why:
    // with them, each first touch of a 2 MB region zeroes all of it, and memory the
    // allocators give back and take again is zeroed again in 2 MB steps. perf on a
    // restart with 1M znodes: 53% of the time in the kernel's clear_page; restart
    // to first read 2.1-2.8 s with them, 1.0-1.5 s without (glibc alone: 1.4-1.9 s).
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with PR_SET_THP_DISABLE takes integer arguments only and sets a
    // flag of this process; failure (an old kernel) leaves THP as the system set it.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

fn main() -> ExitCode {
    tune_allocator();
    let args = Args::parse();
    let rust_log = std::env::var("RUST_LOG").ok();
    if let Some(Command::ImportZookeeper(a)) = args.command {
        match keel::logging::filter(rust_log.as_deref(), None) {
            Ok(f) => keel::logging::init(f),
            Err(e) => eprintln!("keel: {e}"),
        }
        return import_zookeeper(a);
    }
    let Some(config_path) = args.config.as_ref() else {
        eprintln!("keel: missing PATH/zoo.cfg");
        return ExitCode::from(2);
    };
    let mut config = match Config::load(config_path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("keel: {e}");
            return ExitCode::from(2);
        }
    };
    if let Ok(flags) = std::env::var("SERVER_JVMFLAGS") {
        if let Err(e) = config.apply_jvm_flags(&flags) {
            eprintln!("keel: SERVER_JVMFLAGS: {e}");
            return ExitCode::from(2);
        }
    }
    for prop in &args.properties {
        let (name, value) = prop.split_once('=').unwrap_or((prop.as_str(), ""));
        if let Err(e) = config.apply_system_property(name, value) {
            eprintln!("keel: -D{prop}: {e}");
            return ExitCode::from(2);
        }
    }
    if let Err(e) = config.load_jaas() {
        eprintln!("keel: {e}");
        return ExitCode::from(2);
    }
    // Before any thread starts: the keytab is named by an environment variable.
    if let Some(login) = config
        .client_auth
        .sasl_server
        .as_ref()
        .and_then(|s| s.kerberos.as_ref())
    {
        keel::net::gss::Acceptor::prepare(login);
    }
    // Quorum SASL with Kerberos: the learner's keytab, and the server's (the Kerberos
    // library takes one acceptor keytab per process: the client SASL one, if any, must
    // be the same file).
    if let (true, Some(jaas)) = (config.quorum_sasl.enabled, config.jaas.as_ref()) {
        if let Ok(q) = keel::sasl::quorum::QuorumSasl::from_jaas(config.quorum_sasl.clone(), jaas) {
            if let Some(login) = &q.learner_kerberos {
                keel::net::gss::Initiator::prepare(login);
            }
            if let Some(login) = &q.server_kerberos {
                let client_keytab = config
                    .client_auth
                    .sasl_server
                    .as_ref()
                    .and_then(|s| s.kerberos.as_ref())
                    .map(|k| k.keytab.clone());
                if let Some(other) = client_keytab.filter(|k| *k != login.keytab) {
                    eprintln!(
                        "keel: JAAS section '{}': keyTab {:?} differs from the client SASL \
                         section's {:?}; keel takes one acceptor keytab per process",
                        config.quorum_sasl.server_context, login.keytab, other
                    );
                    std::process::exit(1);
                }
                keel::net::gss::Acceptor::prepare(login);
            }
        }
    }
    // The level: RUST_LOG, else zoo.cfg's keel.logLevel, else -Dzookeeper.root.logger
    // (as an argument or in SERVER_JVMFLAGS), else info.
    let jvm_flags = std::env::var("SERVER_JVMFLAGS").unwrap_or_default();
    let configured = config
        .entries
        .iter()
        .rev()
        .find(|(k, _)| k == LOG_LEVEL_KEY)
        .map(|(_, v)| v.clone())
        .or_else(|| {
            let from_args = args.properties.iter().filter_map(|p| {
                p.strip_prefix(ROOT_LOGGER_PROPERTY)?
                    .strip_prefix('=')
                    .map(str::to_string)
            });
            let from_flags = jvm_flags.split_whitespace().filter_map(|t| {
                t.strip_prefix("-D")?
                    .strip_prefix(ROOT_LOGGER_PROPERTY)?
                    .strip_prefix('=')
                    .map(str::to_string)
            });
            from_args.chain(from_flags).last()
        });
    match keel::logging::filter(rust_log.as_deref(), configured.as_deref()) {
        Ok(f) => keel::logging::init(f),
        Err(e) => {
            let source = match config
                .unknown_keys
                .iter()
                .rev()
                .find(|(_, k)| k == LOG_LEVEL_KEY)
            {
                Some((line, _)) => format!("zoo.cfg line {line}: {LOG_LEVEL_KEY}"),
                None => format!("-D{ROOT_LOGGER_PROPERTY}"),
            };
            eprintln!("keel: {source}: {e}");
            return ExitCode::from(2);
        }
    }
    for (line, key) in &config.unknown_keys {
        if key != LOG_LEVEL_KEY {
            tracing::info!(line, key = %key, "zoo.cfg key not used by keel; ignored");
        }
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.worker_threads(cpus))
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("keel: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(keel::member::run(config, shutdown_signal()));
    // Connections may still be open: do not wait for their tasks.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("keel: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `keel import-zookeeper`: runs the import, printing progress and a summary on stderr.
fn import_zookeeper(a: ImportArgs) -> ExitCode {
    let opts = keel::import::Options {
        zk_data_dir: a.zk_data_dir,
        zk_log_dir: a.log_dir,
        keel_data_dir: a.keel_data_dir,
        keel_log_dir: a.keel_log_dir,
        jute_maxbuffer: a.jute_maxbuffer,
        check_digests: !a.ignore_digests,
    };
    let mut report = |line: &str| eprintln!("keel import-zookeeper: {line}");
    if a.ensemble {
        return match keel::import::ensemble::convert(&opts, &mut report) {
            Ok(c) => {
                for w in &c.warnings {
                    eprintln!("keel import-zookeeper: warning: {w}");
                }
                eprintln!(
                    "keel import-zookeeper: ensemble member store: snapshot 0x{:x} ({} znodes, {} sessions) from {} plus {} logged txns in {} log files, last zxid 0x{:x}; epochs kept",
                    c.snapshot_zxid, c.znodes, c.sessions, c.snapshot.display(), c.logged_txns, c.log_files, c.last_zxid
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("keel import-zookeeper: refused: {e}");
                ExitCode::FAILURE
            }
        };
    }
    match keel::import::run(&opts, &mut report) {
        Ok(s) => {
            for w in &s.warnings {
                eprintln!("keel import-zookeeper: warning: {w}");
            }
            if s.unreachable > 0 || s.dead_session_ephemerals > 0 {
                eprintln!(
                    "keel import-zookeeper: left out {} unreachable znodes and {} ephemerals of sessions that no longer exist, as ZooKeeper does",
                    s.unreachable, s.dead_session_ephemerals
                );
            }
            eprintln!(
                "keel import-zookeeper: imported {} znodes ({} ephemeral) and {} sessions at zxid 0x{:x} from {} (zxid 0x{:x}) plus {} txns in {} log files; {} ZooKeeper digests matched; {} written in {:.2} s",
                s.written.znodes,
                s.written.ephemerals,
                s.written.sessions,
                s.last_zxid,
                s.snapshot.display(),
                s.snapshot_zxid,
                s.replay.txns,
                s.log_files,
                s.replay.digests_matched,
                opts.keel_data_dir.join(keel::storage::rocks::DB_DIR).display(),
                s.elapsed.as_secs_f64()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("keel import-zookeeper: refused: {e}");
            eprintln!(
                "keel import-zookeeper: nothing was written to {}",
                opts.keel_data_dir.display()
            );
            ExitCode::FAILURE
        }
    }
}

/// Resolves on SIGTERM or SIGINT.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

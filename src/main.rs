//! `keel [-Dname=value ...] PATH/zoo.cfg`: start a server from a ZooKeeper-style
//! zoo.cfg, like ZooKeeper's QuorumPeerMain. `-D` properties (and `-D` flags found in
//! the SERVER_JVMFLAGS environment variable) are read as ZooKeeper reads JVM system
//! properties, e.g. `-Dzookeeper.DigestAuthenticationProvider.superDigest=...`.

use clap::Parser;
use keel::config::Config;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    version,
    about = "A coordination server that speaks ZooKeeper's client protocol"
)]
struct Args {
    /// A JVM-style system property, NAME=VALUE (repeatable).
    #[arg(short = 'D', value_name = "NAME=VALUE")]
    properties: Vec<String>,
    /// Path to zoo.cfg.
    config: PathBuf,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let mut config = match Config::load(&args.config) {
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
    for (line, key) in &config.unknown_keys {
        tracing::info!(line, key = %key, "zoo.cfg key not used by keel; ignored");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("keel: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(keel::net::listener::run(config, shutdown_signal()));
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

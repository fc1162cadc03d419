//! Log set-up: one line per event on stderr through `tracing`.
//!
//! The level comes from, in order: `RUST_LOG` (a full `tracing` filter, e.g.
//! `keel=debug`), else the `keel.logLevel` key of zoo.cfg, else the
//! `zookeeper.root.logger` system property that ZooKeeper's zkServer.sh passes
//! (`-Dzookeeper.root.logger=DEBUG,CONSOLE`, from `ZOO_LOG4J_PROP`), else `info`.

use tracing_subscriber::EnvFilter;

/// Turns a log4j level (`TRACE`, `DEBUG`, `INFO`, `WARN`, `ERROR`, `FATAL`, `OFF`,
/// any case, optionally followed by `,APPENDER...` as in `zookeeper.root.logger`)
/// into a `tracing` filter directive.
///
/// Errors: an unknown level name, returned as the reason.
pub fn level_directive(spec: &str) -> Result<&'static str, String> {
    let level = spec.split(',').next().unwrap_or("").trim();
    Ok(match level.to_ascii_uppercase().as_str() {
        "TRACE" | "ALL" => "trace",
        "DEBUG" => "debug",
        "INFO" => "info",
        "WARN" | "WARNING" => "warn",
        "ERROR" | "FATAL" => "error",
        "OFF" => "off",
        _ => {
            return Err(format!(
                "unknown log level {level:?} (expected TRACE, DEBUG, INFO, WARN, ERROR or OFF)"
            ))
        }
    })
}

/// Picks the filter: `rust_log` (the `RUST_LOG` value) wins when set and valid; then
/// `configured` (a level name from zoo.cfg or `zookeeper.root.logger`); else `info`.
///
/// Errors: `configured` names an unknown level.
pub fn filter(rust_log: Option<&str>, configured: Option<&str>) -> Result<EnvFilter, String> {
    if let Some(spec) = rust_log.filter(|s| !s.trim().is_empty()) {
        if let Ok(f) = EnvFilter::try_new(spec) {
            return Ok(f);
        }
    }
    let directive = match configured {
        Some(spec) => level_directive(spec)?,
        None => "info",
    };
    Ok(EnvFilter::new(directive))
}

/// Installs the global subscriber: stderr, no module targets, colour only on a terminal.
/// Call once, before anything logs.
pub fn init(filter: EnvFilter) {
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        // A log reader that went away (a closed pipe) must not stop the server: the
        // line is dropped, as log4j drops it, instead of reporting the failed write
        // on stderr (which panics when stderr is that same closed pipe).
        .log_internal_errors(false)
        .init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log4j_levels_map_to_tracing() {
        assert_eq!(level_directive("DEBUG,CONSOLE"), Ok("debug"));
        assert_eq!(level_directive("warn"), Ok("warn"));
        assert_eq!(level_directive("FATAL"), Ok("error"));
        assert!(level_directive("LOUD").unwrap_err().contains("LOUD"));
    }

    #[test]
    fn rust_log_wins_over_configured_level() {
        let f = filter(Some("debug"), Some("ERROR")).unwrap();
        assert_eq!(f.to_string(), "debug");
        let f = filter(None, Some("WARN,ROLLINGFILE")).unwrap();
        assert_eq!(f.to_string(), "warn");
        let f = filter(Some(""), None).unwrap();
        assert_eq!(f.to_string(), "info");
        assert!(filter(None, Some("nope")).is_err());
    }
}

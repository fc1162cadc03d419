//! The quorum config text members exchange: in every notification (§2) and as
//! NEWLEADER's data (§4.3). ZooKeeper writes its QuorumVerifier's `toString`
//! (QuorumMaj.toString, QuorumPeer.QuorumServer.toString): one line per server,
//! `server.<sid>=<host>:<quorum port>:<election port>:participant|observer`, with
//! `;<client host>:<client port>` when the server line gave one, then
//! `version=<hex config version>` with no newline after it. Receivers parse it as Java
//! Properties.

use std::fmt::Write;

use crate::config::{parse_server, read_properties};
use crate::zab::quorum::QuorumVerifier;
use crate::zab::Sid;

/// One `server.N` line of the config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerLine {
    /// N.
    pub sid: Sid,
    /// The host of the quorum and election addresses.
    pub host: String,
    /// The quorum (learner -> leader) port.
    pub quorum_port: u16,
    /// The election port.
    pub election_port: u16,
    /// `:observer` rather than `:participant`.
    pub observer: bool,
    /// The `;host:port` client address, when the server line has one.
    pub client: Option<(String, u16)>,
}

impl From<&crate::config::ServerSpec> for ServerLine {
    /// The zoo.cfg `server.N` line as the config text writes it.
    fn from(s: &crate::config::ServerSpec) -> ServerLine {
        ServerLine {
            sid: s.id,
            host: s.host.clone(),
            quorum_port: s.quorum_port,
            election_port: s.election_port,
            observer: s.observer,
            // `;2181` alone is the wildcard address (QuorumServer: a port-only
            // client address is `new InetSocketAddress(port)`).
            client: s.client_port.map(|port| {
                let host = s.client_address.clone();
                (host.unwrap_or_else(|| "0.0.0.0".to_string()), port)
            }),
        }
    }
}

/// A host as NetUtils writes it: IPv6 literals in brackets.
fn delimited(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

/// The config text of `servers` at config `version` (0 while reconfig is off). Lines
/// come in ascending sid order: ZooKeeper iterates a Java HashMap, which gives that
/// order for sids below its table size (16 up to 12 servers); with larger sids its
/// order can differ, which no receiver reads (they parse Properties).
pub fn quorum_config_text(servers: &[ServerLine], version: u64) -> String {
    let mut sorted: Vec<&ServerLine> = servers.iter().collect();
    sorted.sort_by_key(|s| s.sid);
    let mut out = String::new();
    for s in sorted {
        let role = if s.observer {
            "observer"
        } else {
            "participant"
        };
        let _ = write!(
            out,
            "server.{}={}:{}:{}:{role}",
            s.sid,
            delimited(&s.host),
            s.quorum_port,
            s.election_port
        );
        if let Some((host, port)) = &s.client {
            let _ = write!(out, ";{}:{port}", delimited(host));
        }
        out.push('\n');
    }
    let _ = write!(out, "version={version:x}");
    out
}

/// Reads a config text as ZooKeeper's `QuorumPeer.configFromString` does (Java
/// Properties, then `QuorumMaj(Properties)`): `server.N` lines (the form of zoo.cfg's,
/// [`crate::config::ServerSpec`]; a later line for the same N wins) and `version`
/// (hex; 0 when absent); other keys are ignored. Errors: a server line or version
/// that does not parse (named with its key), or no participant.
pub fn parse_quorum_config(text: &str) -> Result<QuorumVerifier, String> {
    let mut servers = Vec::new();
    let mut version = 0;
    for (_, key, value) in read_properties(text) {
        if let Some(n) = key.strip_prefix("server.") {
            let sid: Sid = n
                .parse()
                .map_err(|_| format!("{key}: {n:?} is not a server id"))?;
            let spec = parse_server(sid, &value).map_err(|e| format!("{key}={value}: {e}"))?;
            servers.push(ServerLine::from(&spec));
        } else if key == "version" {
            version = u64::from_str_radix(&value, 16)
                .map_err(|_| format!("version={value}: not a hex number"))?;
        }
    }
    QuorumVerifier::from_servers(servers, version)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(sid: Sid, observer: bool, client: Option<(String, u16)>) -> ServerLine {
        ServerLine {
            sid,
            host: "127.0.0.1".into(),
            quorum_port: 3140 + sid as u16 * 10 + 2,
            election_port: 3140 + sid as u16 * 10 + 3,
            observer,
            client,
        }
    }

    /// The text a real ZooKeeper 3.8 member sent in its notifications
    /// (tests/zab_wire_zk.rs compares it live too).
    #[test]
    fn matches_zookeepers_text() {
        let servers = [
            line(3, false, None),
            line(1, false, None),
            line(2, false, None),
        ];
        assert_eq!(
            quorum_config_text(&servers, 0),
            "server.1=127.0.0.1:3152:3153:participant\nserver.2=127.0.0.1:3162:3163:participant\nserver.3=127.0.0.1:3172:3173:participant\nversion=0"
        );
    }

    #[test]
    fn observers_client_addresses_and_ipv6() {
        let mut v6 = line(4, true, Some(("::1".into(), 2181)));
        v6.host = "::1".into();
        assert_eq!(
            quorum_config_text(&[v6], 0x1_0000_0002),
            "server.4=[::1]:3182:3183:observer;[::1]:2181\nversion=100000002"
        );
    }

    #[test]
    fn parses_what_it_writes() {
        let servers = [
            line(1, false, None),
            line(2, true, Some(("0.0.0.0".into(), 2181))),
        ];
        let text = quorum_config_text(&servers, 0x2_0000_0003);
        let qv = parse_quorum_config(&text).unwrap();
        assert_eq!(qv.version(), 0x2_0000_0003);
        assert_eq!(qv.text(), text);
        assert!(qv.is_participant(1) && qv.is_observer(2));
        assert_eq!(qv.server(2).unwrap().client, Some(("0.0.0.0".into(), 2181)));
        assert_eq!(
            parse_quorum_config("server.1=a:1:2\n").unwrap().version(),
            0
        );
        assert!(parse_quorum_config("server.1=a:1:2\nversion=xyz").is_err());
        assert!(parse_quorum_config("server.x=a:1:2").is_err());
        assert!(parse_quorum_config("server.1=a:1").is_err());
        assert!(parse_quorum_config("version=1").is_err());
    }
}

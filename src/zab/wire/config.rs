//! The quorum config text members exchange: in every notification (§2) and as
//! NEWLEADER's data (§4.3). ZooKeeper writes its QuorumVerifier's `toString`
//! (QuorumMaj.toString, QuorumPeer.QuorumServer.toString): one line per server,
//! `server.<sid>=<host>:<quorum port>:<election port>:participant|observer`, with
//! `;<client host>:<client port>` when the server line gave one, then
//! `version=<hex config version>` with no newline after it. Receivers parse it as Java
//! Properties.

use std::fmt::Write;

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
}

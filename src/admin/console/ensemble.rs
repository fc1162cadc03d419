//! The console's ensemble page, `/console/ensemble` (and `/`): every configured member
//! with this one marked, and what this member knows: its role, epochs, zxids, connected
//! clients, and while it leads, each learner's state.
//!
//! A member knows its own Zab state and, while it leads, which learners are connected and
//! synced; other members' zxids and lags are theirs to report (each member's console
//! shows its own). Work on the core: a copy of this member's view and one pass over the
//! configured servers.

use super::html;
use crate::admin::quorum::EnsembleView;
use crate::config::Config;
use crate::server::Server;
use std::fmt::Write as _;

/// A configured member as the page lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRow {
    pub id: u64,
    pub address: String,
    pub observer: bool,
    /// What this member knows of its state: `this member`, `leader`, `learner, synced`…
    pub state: String,
}

/// What the page shows, gathered on the core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnsemblePage {
    /// `standalone`, or the peer state (`leading - broadcast`, `following - …`).
    pub peer_state: String,
    pub my_id: Option<u64>,
    pub leader_id: Option<u64>,
    pub accepted_epoch: Option<u32>,
    pub current_epoch: Option<u32>,
    /// The last applied zxid.
    pub last_zxid: i64,
    /// The last logged zxid (Zab's log), on an ensemble member.
    pub last_logged_zxid: Option<i64>,
    pub clients: usize,
    pub sessions: usize,
    pub znodes: usize,
    pub watches: usize,
    pub leader_uptime_ms: Option<u64>,
    pub members: Vec<MemberRow>,
}

/// Reads the page's facts on the core.
pub fn gather(server: &Server, config: &Config, ensemble: Option<&EnsembleView>) -> EnsemblePage {
    let members = config
        .servers
        .iter()
        .map(|s| {
            let state = match ensemble {
                Some(e) if e.my_id == s.id => "this member".to_string(),
                Some(e) if e.leader_id == Some(s.id) => "leader".to_string(),
                Some(e) if e.is_leader() => match e.learners.iter().find(|l| l.sid == s.id) {
                    Some(l) if l.synced => "learner, synced".to_string(),
                    Some(_) => "learner, syncing".to_string(),
                    None => "not connected to this leader".to_string(),
                },
                _ => String::new(),
            };
            MemberRow {
                id: s.id,
                address: format!("{}:{}:{}", s.host, s.quorum_port, s.election_port),
                observer: s.observer,
                state,
            }
        })
        .collect();
    EnsemblePage {
        peer_state: ensemble.map_or("standalone".to_string(), |e| e.peer_state.clone()),
        my_id: ensemble.map(|e| e.my_id),
        leader_id: ensemble.and_then(|e| e.leader_id),
        accepted_epoch: ensemble.map(|e| e.accepted_epoch),
        current_epoch: ensemble.map(|e| e.current_epoch),
        last_zxid: server.last_zxid,
        last_logged_zxid: ensemble.map(|e| e.last_logged_zxid),
        clients: server.conns.len(),
        sessions: server.sessions.len(),
        znodes: server.tree.node_count(),
        watches: server.watches.watch_count(),
        leader_uptime_ms: ensemble.and_then(|e| e.leader_uptime_ms),
        members,
    }
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or("-".to_string(), |v| v.to_string())
}

/// The page.
pub fn render(p: &EnsemblePage) -> String {
    let mut b = String::from("<table id=\"member\">");
    let rows: [(&str, String); 12] = [
        ("state", html::text(&p.peer_state)),
        ("server id", opt(p.my_id)),
        ("leader", opt(p.leader_id)),
        ("acceptedEpoch", opt(p.accepted_epoch)),
        ("currentEpoch", opt(p.current_epoch)),
        ("last applied zxid", format!("0x{:x}", p.last_zxid)),
        (
            "last logged zxid",
            opt(p.last_logged_zxid.map(|z| format!("0x{z:x}"))),
        ),
        ("connected clients", p.clients.to_string()),
        ("sessions", p.sessions.to_string()),
        ("znodes", p.znodes.to_string()),
        ("watches", p.watches.to_string()),
        (
            "leading for",
            opt(p.leader_uptime_ms.map(|ms| format!("{ms} ms"))),
        ),
    ];
    for (k, v) in rows {
        let id = k.replace(' ', "-");
        let _ = write!(b, "<tr><th>{k}</th><td id=\"{id}\">{v}</td></tr>");
    }
    b.push_str("</table>\n");
    if !p.members.is_empty() {
        b.push_str(
            "<h2>Members</h2><div class=\"wide\"><table id=\"members\"><tr><th>id</th>\
             <th>address (quorum:election)</th><th>type</th><th>as this member sees it</th></tr>",
        );
        for m in &p.members {
            let me = if p.my_id == Some(m.id) {
                " class=\"me\""
            } else {
                ""
            };
            let _ = write!(
                b,
                "<tr{me}><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                m.id,
                html::text(&m.address),
                if m.observer {
                    "observer"
                } else {
                    "participant"
                },
                html::text(&m.state)
            );
        }
        b.push_str("</table></div>\n");
    }
    html::page("Ensemble", &b)
}

//! The console's ensemble page, `/console/ensemble` (and `/`): this member's state, every
//! configured member (this one marked) with its role, zxid, epoch, lag behind the
//! leader, connected clients and last election, then this member's watches and its
//! slowest and busiest client connections.
//!
//! Where each member's figures come from:
//! - this member: its own Zab state, election record and state machine;
//! - while this member leads, each learner as the leader knows it: the zxid it last
//!   acknowledged, how many txns of the leader's log follow it and how long ago the
//!   first of them was proposed (its lag), when the leader last heard from it, and when
//!   it connected (the end of its election, whose outcome was this leader);
//! - every other member with a client address in its `server.N` line (`;[addr:]port`):
//!   its `srvr` answer, asked by the AdminServer task when the page is loaded (not by
//!   the core; at most [`SRVR_TIMEOUT`] per member, all at once): its mode, last zxid,
//!   and connected clients. A follower's page computes lags from those zxids (txns only:
//!   the time of a proposal is the leader's to know).
//!
//! Work on the core: a copy of this member's Zab view, one pass over the configured
//! servers, and one pass over the client connections keeping the [`TOP`] slowest and
//! busiest (a bounded heap each).

use super::html;
use super::tree::session_hex;
use crate::admin::quorum::{EnsembleView, LearnerView};
use crate::config::Config;
use crate::server::Server;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt::Write as _;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Connections listed as slowest and as busiest.
pub const TOP: usize = 10;
/// How long the page waits for another member's `srvr` answer.
pub const SRVR_TIMEOUT: Duration = Duration::from_millis(1000);
/// The most bytes of a `srvr` answer read (ZooKeeper's is about 300).
const SRVR_MAX_BYTES: u64 = 16 * 1024;

/// A configured member as the page lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRow {
    pub id: u64,
    pub address: String,
    pub observer: bool,
    /// `host:port` of its client port, when its `server.N` line names one.
    pub client: Option<String>,
    /// While this member leads and it is connected: the leader's view of it.
    pub learner: Option<LearnerView>,
}

/// One client connection in the slowest / busiest tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientRow {
    pub session_id: i64,
    pub address: String,
    pub received: u64,
    pub sent: u64,
    pub queued: u64,
    pub min_latency_ms: u64,
    pub avg_latency_ms: u64,
    pub max_latency_ms: u64,
    pub watches: usize,
    pub last_op: &'static str,
}

/// What the page shows, gathered on the core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnsemblePage {
    /// Wall-clock ms when gathered.
    pub now_ms: i64,
    /// `standalone`, or the peer state (`leading - broadcast`, `following - …`).
    pub peer_state: String,
    pub ensemble: Option<EnsembleView>,
    /// The last applied zxid.
    pub last_zxid: i64,
    pub clients: usize,
    pub sessions: usize,
    pub znodes: usize,
    pub watches: usize,
    pub watched_paths: usize,
    pub members: Vec<MemberRow>,
    /// The [`TOP`] connections with the largest max latency, largest first.
    pub slowest: Vec<ClientRow>,
    /// The [`TOP`] connections with the most packets received, most first.
    pub busiest: Vec<ClientRow>,
}

/// Another member's `srvr` answer, as far as the page uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Srvr {
    /// `leader`, `follower`, `observer`, `standalone`.
    pub mode: String,
    pub zxid: i64,
    /// Its `Connections:` less the page's own `srvr` connection, which it counts.
    pub clients: u64,
}

/// Reads the page's facts on the core.
pub fn gather(server: &Server, config: &Config, ensemble: Option<&EnsembleView>) -> EnsemblePage {
    let members = config
        .servers
        .iter()
        .map(|s| MemberRow {
            id: s.id,
            address: format!("{}:{}:{}", s.host, s.quorum_port, s.election_port),
            observer: s.observer,
            client: s.client_port.map(|port| {
                let host = match s.client_address.as_deref() {
                    None | Some("0.0.0.0" | "::" | "0:0:0:0:0:0:0:0") => s.host.as_str(),
                    Some(a) => a,
                };
                if host.contains(':') {
                    format!("[{host}]:{port}")
                } else {
                    format!("{host}:{port}")
                }
            }),
            learner: ensemble
                .filter(|e| e.is_leader())
                .and_then(|e| e.learners.iter().find(|l| l.sid == s.id).copied()),
        })
        .collect();
    let (slowest, busiest) = top_clients(server);
    EnsemblePage {
        now_ms: server.now_ms(),
        peer_state: ensemble.map_or("standalone".to_string(), |e| e.peer_state.clone()),
        ensemble: ensemble.cloned(),
        last_zxid: server.last_zxid,
        clients: server.conns.len(),
        sessions: server.sessions.len(),
        znodes: server.tree.node_count(),
        watches: server.watches.watch_count(),
        watched_paths: server.watches.path_count(),
        members,
        slowest,
        busiest,
    }
}

/// One pass over the connections, keeping the [`TOP`] by max latency and by packets
/// received (ties: the smaller connection id first).
fn top_clients(server: &Server) -> (Vec<ClientRow>, Vec<ClientRow>) {
    let mut slow = BinaryHeap::with_capacity(TOP + 1);
    let mut busy = BinaryHeap::with_capacity(TOP + 1);
    for (&id, c) in &server.conns {
        let l = &c.stats.latency;
        slow.push(Reverse((l.max_ms, l.avg_ms(), Reverse(id))));
        busy.push(Reverse((c.stats.received, 0, Reverse(id))));
        if slow.len() > TOP {
            slow.pop();
        }
        if busy.len() > TOP {
            busy.pop();
        }
    }
    let rows = |heap: BinaryHeap<Reverse<(u64, u64, Reverse<u64>)>>| -> Vec<ClientRow> {
        heap.into_sorted_vec()
            .into_iter()
            .filter_map(|Reverse((_, _, Reverse(id)))| {
                let c = server.conns.get(&id)?;
                let l = &c.stats.latency;
                Some(ClientRow {
                    session_id: c.session_id,
                    address: c.addr.to_string(),
                    received: c.stats.received,
                    sent: c.stats.sent,
                    queued: server.conn_outstanding_requests(id),
                    min_latency_ms: l.min_ms,
                    avg_latency_ms: l.avg_ms(),
                    max_latency_ms: l.max_ms,
                    watches: server.watches.connection_watch_count(id),
                    last_op: c.stats.last_op,
                })
            })
            .collect()
    };
    (rows(slow), rows(busy))
}

/// Asks `addr` (`host:port`) for `srvr`, within [`SRVR_TIMEOUT`].
///
/// Errors: no connection, no answer in time, or no `Mode:`/`Zxid:` in it (a member
/// whose whitelist lacks `srvr` answers that it is not executed).
pub async fn ask_srvr(addr: String) -> Result<Srvr, String> {
    let ask = async {
        let mut s = tokio::net::TcpStream::connect(&addr)
            .await
            .map_err(|e| e.to_string())?;
        s.write_all(b"srvr").await.map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        s.take(SRVR_MAX_BYTES)
            .read_to_end(&mut out)
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>(String::from_utf8_lossy(&out).into_owned())
    };
    let text = tokio::time::timeout(SRVR_TIMEOUT, ask)
        .await
        .map_err(|_| format!("no answer within {} ms", SRVR_TIMEOUT.as_millis()))??;
    parse_srvr(&text).ok_or_else(|| format!("not a srvr answer: {:.60}", text.trim()))
}

/// The mode, zxid and clients of a `srvr` answer.
pub fn parse_srvr(text: &str) -> Option<Srvr> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(": "))
            .map(str::trim)
    };
    let zxid = field("Zxid")?;
    Some(Srvr {
        mode: field("Mode")?.to_string(),
        zxid: u64::from_str_radix(zxid.strip_prefix("0x").unwrap_or(zxid), 16).ok()? as i64,
        clients: field("Connections")?.parse::<u64>().ok()?.saturating_sub(1),
    })
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or("-".to_string(), |v| v.to_string())
}

/// ms since the Unix epoch as `2026-12-02 14:30:01.123 UTC`.
pub fn utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (y, m, d) = crate::admin::fourlw::civil_from_days(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    format!(
        "{y}-{m:02}-{d:02} {:02}:{:02}:{:02}.{:03} UTC",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60,
        ms.rem_euclid(1000)
    )
}

fn ago(now_ms: i64, at_ms: u64) -> String {
    format!(
        "{} ({:.1} s ago)",
        utc(at_ms as i64),
        (now_ms - at_ms as i64) as f64 / 1000.0
    )
}

fn hexz(z: i64) -> String {
    format!("0x{z:x}")
}

/// One member's cells: role, zxid, epoch, lag txns, lag ms, clients, last election.
struct Cells {
    role: String,
    zxid: String,
    epoch: String,
    lag_txns: String,
    lag_ms: String,
    clients: String,
    election: String,
    source: &'static str,
}

/// Txns from zxid `from` to `to` as a lag: their difference within one epoch; 0 when
/// `to` starts an epoch (its leader has proposed nothing in it yet, and a member
/// answering srvr is synced with what came before); `-` across epochs otherwise.
fn lag_between(from: i64, to: i64) -> String {
    if from >= to || to & 0xffff_ffff == 0 {
        "0".into()
    } else if from >> 32 == to >> 32 {
        (to - from).to_string()
    } else {
        "-".into()
    }
}

fn own_cells(p: &EnsemblePage, e: &EnsembleView, leader_zxid: Option<i64>) -> Cells {
    let election = match (e.looking_since_ms, e.last_election) {
        (Some(since), _) => format!("electing since {}", ago(p.now_ms, since)),
        (None, Some(el)) => {
            let vote = el
                .vote
                .map(|(z, epoch)| format!(" (its last zxid {}, currentEpoch {epoch})", hexz(z)))
                .unwrap_or_default();
            format!(
                "ended {}, took {} ms: sid {} leads{vote}",
                ago(p.now_ms, el.ended_ms),
                el.ended_ms.saturating_sub(el.started_ms),
                el.leader
            )
        }
        (None, None) => "-".into(),
    };
    Cells {
        role: p.peer_state.clone(),
        zxid: hexz(p.last_zxid),
        epoch: e.current_epoch.to_string(),
        lag_txns: if e.is_leader() {
            "0".into()
        } else {
            leader_zxid.map_or("-".into(), |lz| lag_between(p.last_zxid, lz))
        },
        lag_ms: if e.is_leader() {
            "0".into()
        } else {
            "-".into()
        },
        clients: p.clients.to_string(),
        election,
        source: "this member",
    }
}

fn learner_cells(p: &EnsemblePage, l: &LearnerView, srvr: Option<&Srvr>) -> Cells {
    let role = match (l.observer, l.synced) {
        (false, true) => "follower, synced",
        (false, false) => "follower, syncing",
        (true, true) => "observer, synced",
        (true, false) => "observer, syncing",
    };
    let lag_ms = match l.lag_ms {
        Some(ms) if l.lag_ms_at_least => format!("≥ {ms}"),
        v => opt(v),
    };
    let zxid = match srvr {
        Some(s) => format!("{} (acked {})", hexz(s.zxid), hexz(l.acked_zxid)),
        None => format!("acked {}", hexz(l.acked_zxid)),
    };
    Cells {
        role: role.into(),
        epoch: srvr.map_or((l.acked_zxid >> 32).to_string(), |s| {
            (s.zxid >> 32).to_string()
        }),
        zxid,
        lag_txns: opt(l.lag_txns),
        lag_ms,
        clients: srvr.map_or("-".into(), |s| s.clients.to_string()),
        election: format!(
            "ended {}: sid {} leads (it connected to this leader; heard from {} ms ago)",
            ago(p.now_ms, l.connected_at_ms),
            p.ensemble.as_ref().map_or(0, |e| e.my_id),
            l.last_heard_ms_ago
        ),
        source: "the leader (this member)",
    }
}

fn srvr_cells(s: &Srvr, leader_zxid: Option<i64>) -> Cells {
    Cells {
        role: s.mode.clone(),
        zxid: hexz(s.zxid),
        epoch: (s.zxid >> 32).to_string(),
        lag_txns: if s.mode == "leader" {
            "0".into()
        } else {
            leader_zxid.map_or("-".into(), |lz| lag_between(s.zxid, lz))
        },
        lag_ms: if s.mode == "leader" {
            "0".into()
        } else {
            "-".into()
        },
        clients: s.clients.to_string(),
        election: "-".into(),
        source: "its srvr",
    }
}

/// The page; `srvr` holds the other members' `srvr` answers (by server id) where
/// asked.
pub fn render(p: &EnsemblePage, srvr: &[(u64, Result<Srvr, String>)]) -> String {
    let answer = |id: u64| srvr.iter().find(|(s, _)| *s == id).map(|(_, r)| r);
    let e = p.ensemble.as_ref();
    let mut b = String::from("<table id=\"member\">");
    let rows: [(&str, String); 14] = [
        ("state", html::text(&p.peer_state)),
        ("server id", opt(e.map(|e| e.my_id))),
        ("leader", opt(e.and_then(|e| e.leader_id))),
        ("acceptedEpoch", opt(e.map(|e| e.accepted_epoch))),
        ("currentEpoch", opt(e.map(|e| e.current_epoch))),
        ("last applied zxid", hexz(p.last_zxid)),
        ("last logged zxid", opt(e.map(|e| hexz(e.last_logged_zxid)))),
        ("connected clients", p.clients.to_string()),
        ("sessions", p.sessions.to_string()),
        ("znodes", p.znodes.to_string()),
        ("watches", p.watches.to_string()),
        ("watched paths", p.watched_paths.to_string()),
        (
            "leading for",
            opt(e
                .and_then(|e| e.leader_uptime_ms)
                .map(|ms| format!("{ms} ms"))),
        ),
        ("page time", utc(p.now_ms)),
    ];
    for (k, v) in rows {
        let id = k.replace(' ', "-");
        let _ = write!(b, "<tr><th>{k}</th><td id=\"{id}\">{v}</td></tr>");
    }
    b.push_str("</table>\n");
    if let Some(e) = e.filter(|_| !p.members.is_empty()) {
        // The leader's last zxid, for the lag in txns on a learner's page.
        let leader_zxid = if e.is_leader() {
            Some(e.last_logged_zxid)
        } else {
            e.leader_id
                .and_then(answer)
                .and_then(|r| r.as_ref().ok())
                .map(|s| s.zxid)
        };
        b.push_str(
            "<h2>Members</h2><div class=\"wide\"><table id=\"members\"><tr><th>id</th>\
             <th>address (quorum:election)</th><th>type</th><th>role</th><th>zxid</th>\
             <th>epoch</th><th>lag (txns)</th><th>lag (ms)</th><th>clients</th>\
             <th>last election</th><th>from</th></tr>",
        );
        for m in &p.members {
            let reply = answer(m.id);
            let cells = if m.id == e.my_id {
                Some(own_cells(p, e, leader_zxid))
            } else if let Some(l) = &m.learner {
                Some(learner_cells(p, l, reply.and_then(|r| r.as_ref().ok())))
            } else {
                reply
                    .and_then(|r| r.as_ref().ok())
                    .map(|s| srvr_cells(s, leader_zxid))
            };
            let me = if m.id == e.my_id { " class=\"me\"" } else { "" };
            let kind = if m.observer {
                "observer"
            } else {
                "participant"
            };
            let _ = write!(
                b,
                "<tr{me} id=\"member-{}\"><td>{}</td><td>{}</td><td>{kind}</td>",
                m.id,
                m.id,
                html::text(&m.address)
            );
            match cells {
                Some(c) => {
                    let _ = write!(
                        b,
                        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
                         <td>{}</td><td>{}</td></tr>",
                        html::text(&c.role),
                        c.zxid,
                        c.epoch,
                        c.lag_txns,
                        html::text(&c.lag_ms),
                        c.clients,
                        html::text(&c.election),
                        c.source
                    );
                }
                None => {
                    let why = match (reply, &m.client, e.leader_id == Some(m.id)) {
                        (Some(Err(err)), Some(c), _) => format!("srvr on {c}: {err}"),
                        (_, None, true) => "the leader; no client address in its server line \
                                            to ask it"
                            .to_string(),
                        (_, None, false) => {
                            "no client address in its server line to ask it".to_string()
                        }
                        _ => "not asked".to_string(),
                    };
                    let _ = write!(b, "<td colspan=\"8\">{}</td></tr>", html::text(&why));
                }
            }
        }
        b.push_str("</table></div>\n");
        b.push_str(
            "<p>Lags: on the leader, txns of its log after the zxid each learner \
             acknowledged and ms since the first of them was proposed; elsewhere txns \
             between its zxid and the leader's (their srvr answers), and the ms only the \
             leader knows. Epoch: this member's currentEpoch; for the others, the epoch \
             of their zxid.</p>\n",
        );
    }
    for (id, title, rows) in [
        ("slowest", "Slowest clients (by max latency)", &p.slowest),
        (
            "busiest",
            "Busiest clients (by packets received)",
            &p.busiest,
        ),
    ] {
        let _ = write!(
            b,
            "<h2>{title}</h2><div class=\"wide\"><table id=\"{id}\"><tr><th>session</th>\
             <th>client</th><th>received</th><th>sent</th><th>queued</th>\
             <th>latency min/avg/max ms</th><th>watches</th><th>last op</th></tr>"
        );
        for c in rows.iter() {
            let session = if c.session_id == 0 {
                "-".to_string()
            } else {
                let hex = session_hex(c.session_id);
                format!("<a href=\"/console/session/{hex}\">{hex}</a>")
            };
            let _ = write!(
                b,
                "<tr><td>{session}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
                 <td>{}/{}/{}</td><td>{}</td><td>{}</td></tr>",
                html::text(&c.address),
                c.received,
                c.sent,
                c.queued,
                c.min_latency_ms,
                c.avg_latency_ms,
                c.max_latency_ms,
                c.watches,
                c.last_op
            );
        }
        b.push_str("</table></div>\n");
    }
    html::page("Ensemble", &b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn srvr_answers_parse() {
        let text = "Zookeeper version: 3.8.0-keel\nLatency min/avg/max: 0/0.0/0\n\
                    Received: 5\nSent: 4\nConnections: 3\nOutstanding: 0\n\
                    Zxid: 0x100000007\nMode: follower\nNode count: 9\n";
        assert_eq!(
            parse_srvr(text),
            Some(Srvr {
                mode: "follower".into(),
                zxid: 0x1_0000_0007,
                clients: 2
            })
        );
        assert_eq!(
            parse_srvr("srvr is not executed because it is not in the whitelist.\n"),
            None
        );
    }

    #[test]
    fn times_and_lags_read_as_written() {
        assert_eq!(utc(1_764_685_801_123), "2025-12-02 14:30:01.123 UTC");
        assert_eq!(lag_between(0x1_0000_0003, 0x1_0000_0007), "4");
        assert_eq!(lag_between(0x1_0000_0009, 0x1_0000_0007), "0");
        assert_eq!(lag_between(0x1_0000_0003, 0x2_0000_0001), "-");
        assert_eq!(lag_between(0x1_0000_0003, 0x2_0000_0000), "0");
    }
}

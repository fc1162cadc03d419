//! The console's session pages: `/console/sessions` (every session, a page at a time, by
//! id) and `/console/session/<id in hex>` (one session: its timeout, deadline, client
//! connection, ephemerals and watches).
//!
//! Work on the core per page: the list scans the session table once to pick the [`PAGE`]
//! smallest ids after the cursor (a bounded heap, no copy of the table: about 10 µs for
//! 10,000 sessions), plus per listed session one ephemeral-set and one connection lookup;
//! the session page reads at most [`ITEMS`] ephemerals and watches.

use super::html;
use super::tree::session_hex;
use crate::server::Server;
use crate::watch::Table;
use std::collections::BinaryHeap;
use std::fmt::Write as _;

/// Sessions listed per page.
pub const PAGE: usize = 100;
/// Ephemerals and watches listed at most on a session's page.
pub const ITEMS: usize = 1000;

/// One session as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRow {
    pub id: i64,
    pub timeout_ms: i32,
    /// ms from now until its expiry bucket.
    pub expires_in_ms: i64,
    /// The client's address when it is connected to this member.
    pub client: Option<String>,
    pub ephemerals: usize,
    pub watches: usize,
}

/// A page of the session list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionList {
    pub total: usize,
    pub rows: Vec<SessionRow>,
    /// The id to resume after, when there are more.
    pub next_after: Option<i64>,
}

/// One session in full.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionView {
    pub row: SessionRow,
    pub closing: bool,
    /// Its ephemeral znodes, at most [`ITEMS`], in path order.
    pub ephemerals: Vec<String>,
    /// Its watches, at most [`ITEMS`]: (table, path).
    pub watches: Vec<(&'static str, String)>,
}

fn row(server: &Server, id: i64) -> Option<SessionRow> {
    let s = server.sessions.get(id)?;
    let conn = server.session_connection(id);
    Some(SessionRow {
        id,
        timeout_ms: s.timeout_ms,
        expires_in_ms: s.expires_at_ms - server.now_ms(),
        client: conn.map(|(_, c)| c.addr.to_string()),
        ephemerals: server.tree.all_ephemerals().get(&id).map_or(0, |e| e.len()),
        watches: conn.map_or(0, |(cid, _)| server.watches.connection_watch_count(cid)),
    })
}

/// The sessions with ids after `after` (all when `None`), [`PAGE`] of them, by id.
pub fn gather_list(server: &Server, after: Option<i64>) -> SessionList {
    let mut smallest: BinaryHeap<i64> = BinaryHeap::with_capacity(PAGE + 2);
    let mut beyond = 0usize;
    for s in server.sessions.iter() {
        if after.is_some_and(|a| s.id <= a) {
            continue;
        }
        smallest.push(s.id);
        if smallest.len() > PAGE {
            smallest.pop();
            beyond += 1;
        }
    }
    let ids = smallest.into_sorted_vec();
    SessionList {
        total: server.sessions.len(),
        next_after: (beyond > 0).then(|| ids.last().copied()).flatten(),
        rows: ids.iter().filter_map(|&id| row(server, id)).collect(),
    }
}

/// The session `id`, `None` when there is none.
pub fn gather_session(server: &Server, id: i64) -> Option<SessionView> {
    let row = row(server, id)?;
    let closing = server.sessions.get(id).is_some_and(|s| s.closing);
    let ephemerals = server.tree.ephemerals(id).take(ITEMS).cloned().collect();
    let watches = server
        .session_connection(id)
        .map(|(cid, _)| {
            server
                .watches
                .of_connection(cid)
                .take(ITEMS)
                .map(|(t, p)| {
                    let table = match t {
                        Table::Data => "data",
                        Table::Child => "child",
                    };
                    (table, p.to_string())
                })
                .collect()
        })
        .unwrap_or_default();
    Some(SessionView {
        row,
        closing,
        ephemerals,
        watches,
    })
}

/// The session list page.
pub fn render_list(list: &SessionList) -> String {
    let mut b = String::new();
    let _ = write!(b, "<p id=\"total\">{} sessions</p>", list.total);
    b.push_str(
        "<div class=\"wide\"><table id=\"sessions\"><tr><th>session</th><th>timeout ms</th>\
         <th>expires in ms</th><th>client</th><th>ephemerals</th><th>watches</th></tr>",
    );
    for r in &list.rows {
        let hex = session_hex(r.id);
        let _ = write!(
            b,
            "<tr><td><a href=\"/console/session/{hex}\">{hex}</a></td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td></tr>",
            r.timeout_ms,
            r.expires_in_ms,
            html::text(r.client.as_deref().unwrap_or("(not connected here)")),
            r.ephemerals,
            r.watches
        );
    }
    b.push_str("</table></div>\n");
    if let Some(after) = list.next_after {
        let _ = write!(
            b,
            "<p><a id=\"next\" href=\"/console/sessions?after={}\">next {PAGE}</a></p>",
            session_hex(after)
        );
    }
    html::page("Sessions", &b)
}

/// One session's page; `None` gives the page for an unknown id.
pub fn render_session(id: i64, view: Option<&SessionView>) -> String {
    let hex = session_hex(id);
    let title = format!("Session {hex}");
    let Some(v) = view else {
        return html::page(
            &title,
            "<p class=\"denied\">No such session (it expired or was closed).</p>",
        );
    };
    let r = &v.row;
    let mut b = String::from("<table>");
    let rows: [(&str, String); 6] = [
        ("timeout", format!("{} ms", r.timeout_ms)),
        ("expires in", format!("{} ms", r.expires_in_ms)),
        (
            "client",
            html::text(
                r.client
                    .as_deref()
                    .unwrap_or("(not connected to this member)"),
            ),
        ),
        ("closing", v.closing.to_string()),
        ("ephemerals", r.ephemerals.to_string()),
        ("watches", r.watches.to_string()),
    ];
    for (k, val) in rows {
        let _ = write!(b, "<tr><th>{k}</th><td>{val}</td></tr>");
    }
    b.push_str("</table>\n<h2>Ephemerals</h2><ul id=\"ephemerals\">");
    for p in &v.ephemerals {
        let _ = write!(
            b,
            "<li><a href=\"/console/tree{}\">{}</a></li>",
            html::path_href(p),
            html::text(p)
        );
    }
    b.push_str("</ul>\n<h2>Watches</h2><ul id=\"watches\">");
    for (t, p) in &v.watches {
        let _ = write!(
            b,
            "<li>{t}: <a href=\"/console/tree{}\">{}</a></li>",
            html::path_href(p),
            html::text(p)
        );
    }
    b.push_str("</ul>\n");
    html::page(&title, &b)
}

/// A session id from a page URL or cursor: hex with or without `0x`.
pub fn parse_id(s: &str) -> Option<i64> {
    let digits = s.strip_prefix("0x").unwrap_or(s);
    u64::from_str_radix(digits, 16).ok().map(|v| v as i64)
}

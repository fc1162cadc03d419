//! The console's tree page, `/console/tree/<znode path>`: one znode's Stat, data, ACL and
//! ephemeral owner, and one page of its children.
//!
//! What the console may read follows the ACL as on the client port (issue 20): the data
//! and the children list need READ for the console's identities, the ACL needs READ or
//! ADMIN (ZooKeeper 3.8's getACL); the Stat is shown as `exists` shows it, which needs no
//! permission. Work on the core per page: one lookup for the znode and one seek plus
//! [`PAGE`] steps and lookups for the children, whatever the parent's width.

use super::html;
use crate::proto::opcode::perm;
use crate::server::Server;
use crate::tree::acl;
use jute::{Acl, Id, Stat};
use std::fmt::Write as _;

/// Children listed per page.
pub const PAGE: usize = 100;
/// Data bytes shown at most.
pub const DATA_CAP: usize = 4096;

/// One child in the listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildView {
    pub name: String,
    pub num_children: i32,
    pub data_length: i32,
    pub ephemeral_owner: i64,
}

/// A znode as the console's identities may see it, gathered on the core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeView {
    pub path: String,
    /// `None`: no znode at `path`.
    pub stat: Option<Stat>,
    /// The data, at most [`DATA_CAP`] bytes; `None` when READ is denied (or the znode's
    /// data is null: see `null_data`).
    pub data: Option<Vec<u8>>,
    pub null_data: bool,
    pub readable: bool,
    /// The ACL, when READ or ADMIN is allowed.
    pub acl: Option<Vec<Acl>>,
    /// A page of children (empty when READ is denied).
    pub children: Vec<ChildView>,
    /// The name to resume after when there are more children.
    pub next_after: Option<String>,
}

/// Reads `path` and the children after `after` (all when empty) as `identities`.
pub fn gather(server: &Server, path: &str, after: &str, identities: &[Id]) -> TreeView {
    let tree = &server.tree;
    let mut view = TreeView {
        path: path.to_string(),
        stat: None,
        data: None,
        null_data: false,
        readable: false,
        acl: None,
        children: Vec::new(),
        next_after: None,
    };
    let Some(node) = tree.get(path) else {
        return view;
    };
    view.stat = Some(node.stat());
    let node_acl = tree.acl(node);
    view.readable = acl::check(node_acl, perm::READ, identities).is_ok();
    if acl::check(node_acl, perm::READ | perm::ADMIN, identities).is_ok() {
        view.acl = Some(node_acl.as_ref().clone());
    }
    if !view.readable {
        return view;
    }
    match node.data() {
        Some(d) => view.data = Some(d[..d.len().min(DATA_CAP)].to_vec()),
        None => view.null_data = true,
    }
    let base = if path == "/" {
        String::new()
    } else {
        path.to_string()
    };
    let mut names = tree.children_after(path, after);
    for name in names.by_ref().take(PAGE) {
        let child = tree.get(&format!("{base}/{name}")).map(|c| c.stat());
        view.children.push(ChildView {
            name: name.to_string(),
            num_children: child.as_ref().map_or(0, |s| s.num_children),
            data_length: child.as_ref().map_or(0, |s| s.data_length),
            ephemeral_owner: child.as_ref().map_or(0, |s| s.ephemeral_owner),
        });
    }
    if names.next().is_some() {
        view.next_after = view.children.last().map(|c| c.name.clone());
    }
    view
}

/// A session id as the console writes it and `/console/session/<id>` takes it.
pub fn session_hex(id: i64) -> String {
    format!("0x{:x}", id as u64)
}

/// The link to a session's page, or `0` for no owner.
fn owner_link(id: i64) -> String {
    if id == 0 {
        return "0".to_string();
    }
    let hex = session_hex(id);
    format!("<a href=\"/console/session/{hex}\">{hex}</a>")
}

fn child_path(parent: &str, name: &str) -> String {
    if parent == "/" {
        format!("/{name}")
    } else {
        format!("{parent}/{name}")
    }
}

/// The page for `view`.
pub fn render(view: &TreeView) -> String {
    let mut b = String::new();
    // Breadcrumbs: every ancestor a link.
    b.push_str("<p><a href=\"/console/tree/\">/</a>");
    let mut at = String::new();
    for part in view.path.split('/').filter(|p| !p.is_empty()) {
        at.push('/');
        at.push_str(part);
        let _ = write!(
            b,
            " <a href=\"/console/tree{}\">{}</a> /",
            html::path_href(&at),
            html::text(part)
        );
    }
    b.push_str("</p>\n");
    let Some(stat) = &view.stat else {
        b.push_str("<p class=\"denied\">No znode at this path.</p>\n");
        return html::page(&html::text(&view.path), &b);
    };
    b.push_str("<h2>Stat</h2><table>");
    let rows: [(&str, String); 11] = [
        ("czxid", format!("0x{:x}", stat.czxid)),
        ("mzxid", format!("0x{:x}", stat.mzxid)),
        ("pzxid", format!("0x{:x}", stat.pzxid)),
        ("ctime", format!("{} ms", stat.ctime)),
        ("mtime", format!("{} ms", stat.mtime)),
        ("version", stat.version.to_string()),
        ("cversion", stat.cversion.to_string()),
        ("aversion", stat.aversion.to_string()),
        ("ephemeralOwner", owner_link(stat.ephemeral_owner)),
        ("dataLength", stat.data_length.to_string()),
        ("numChildren", stat.num_children.to_string()),
    ];
    for (k, v) in rows {
        let _ = write!(b, "<tr><th>{k}</th><td id=\"stat-{k}\">{v}</td></tr>");
    }
    b.push_str("</table>\n");
    if !view.readable {
        b.push_str(
            "<p class=\"denied\" id=\"denied\">Not readable by the console's identity: \
             data and children are not shown.</p>\n",
        );
    }
    if let Some(acl) = &view.acl {
        b.push_str("<h2>ACL</h2><table><tr><th>scheme</th><th>id</th><th>perms</th></tr>");
        for a in acl {
            let _ = write!(
                b,
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                html::text(&a.id.scheme),
                html::text(&a.id.id),
                perms(a.perms)
            );
        }
        b.push_str("</table>\n");
    }
    if view.readable {
        b.push_str("<h2>Data</h2>");
        match &view.data {
            _ if view.null_data => b.push_str("<p id=\"data-null\">null</p>"),
            Some(d) => {
                let (shown, as_text) = html::data(d, DATA_CAP);
                let _ = write!(
                    b,
                    "<p>{} bytes{}{}</p><pre id=\"data\">{shown}</pre>",
                    stat.data_length,
                    if as_text { ", as text" } else { ", as hex" },
                    if stat.data_length as usize > DATA_CAP {
                        format!(", the first {DATA_CAP} shown")
                    } else {
                        String::new()
                    }
                );
            }
            None => {}
        }
        let _ = write!(b, "\n<h2>Children ({})</h2>", stat.num_children);
        b.push_str(
            "<div class=\"wide\"><table id=\"children\"><tr><th>name</th><th>children</th>\
             <th>data bytes</th><th>ephemeralOwner</th></tr>",
        );
        for c in &view.children {
            let _ = write!(
                b,
                "<tr><td><a href=\"/console/tree{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td></tr>",
                html::path_href(&child_path(&view.path, &c.name)),
                html::text(&c.name),
                c.num_children,
                c.data_length,
                owner_link(c.ephemeral_owner)
            );
        }
        b.push_str("</table></div>\n");
        if let Some(after) = &view.next_after {
            let _ = writeln!(
                b,
                "<p><a id=\"next\" href=\"/console/tree{}?after={}\">next {PAGE}</a></p>",
                html::path_href(&view.path),
                html::query_value(after)
            );
        }
    }
    html::page(&html::text(&view.path), &b)
}

/// ACL permission bits as ZooKeeper's zkCli prints them (`cdrwa` order).
fn perms(p: i32) -> String {
    [
        (perm::CREATE, 'c'),
        (perm::DELETE, 'd'),
        (perm::READ, 'r'),
        (perm::WRITE, 'w'),
        (perm::ADMIN, 'a'),
    ]
    .iter()
    .filter(|(bit, _)| p & bit != 0)
    .map(|(_, c)| *c)
    .collect()
}

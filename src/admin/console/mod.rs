//! A read-only web console on the AdminServer port (issue 20): server-rendered HTML, no
//! script, no external asset.
//!
//! Pages: `/` and `/console/ensemble` ([`ensemble`]; it also asks the other members'
//! `srvr` on their client ports, from the AdminServer task), `/console/tree/<znode path>`
//! ([`tree`]; `/console/tree/` is the root; `?after=<name>` pages the children),
//! `/console/sessions` (`?after=<id>`) and `/console/session/<id in hex>` ([`sessions`]).
//! Each page is gathered in one [`CoreHandle::query`], so it shows one instant, and each
//! costs the core a bounded amount of work (stated per page, and measured at the foot of
//! every page); the HTML is made off the core. Nothing on the console
//! changes data. The console reads as `ip:<the browser's address>`, plus the digest
//! identity of `admin.console.identity` (`user:password`) when set, and ACLs apply to it
//! as to a client.

pub mod ensemble;
pub mod html;
pub mod sessions;
pub mod tree;

use crate::admin::core_handle::CoreHandle;
use crate::admin::quorum::EnsembleView;
use crate::config::Config;
use crate::server::Server;
use crate::tree::acl;
use jute::Id;
use std::net::IpAddr;

/// A console page a path leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Page {
    /// `/` or `/console/ensemble`.
    Ensemble,
    /// `/console/tree/<path>`: the decoded znode path.
    Tree(String),
    /// `/console/sessions`.
    Sessions,
    /// `/console/session/<hex>`.
    Session(i64),
    /// Under `/console/` but nothing there.
    NotFound,
}

/// The page `path` names, `None` when it is not a console path. `root` is whether `/`
/// belongs to the console (not when `admin.commandURL` is `/`).
pub fn route(path: &str, root: bool) -> Option<Page> {
    if path == "/" && root {
        return Some(Page::Ensemble);
    }
    let rest = path.strip_prefix("/console")?;
    Some(match rest {
        "" | "/" | "/ensemble" => Page::Ensemble,
        "/sessions" => Page::Sessions,
        _ => {
            if let Some(p) = rest.strip_prefix("/tree") {
                match percent_decode_path(p) {
                    Some(p) if p.is_empty() || p == "/" => Page::Tree("/".to_string()),
                    Some(p) if p.starts_with('/') && !p.ends_with('/') => Page::Tree(p),
                    _ => Page::NotFound,
                }
            } else if let Some(id) = rest.strip_prefix("/session/") {
                sessions::parse_id(id).map_or(Page::NotFound, Page::Session)
            } else {
                Page::NotFound
            }
        }
    })
}

/// `%XX` escapes decoded (a `+` stays a `+` in a path); `None` for a malformed escape or
/// bytes that are not UTF-8 (no znode path has them: paths are Java strings).
fn percent_decode_path(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The identities the console reads with: `ip:<peer>`, and `digest:<user>:<hash>` from
/// `admin.console.identity` (`user:password`) when set.
pub fn identities(peer: IpAddr, console_identity: Option<&str>) -> Vec<Id> {
    let mut ids = vec![Id {
        scheme: "ip".into(),
        id: peer.to_string(),
    }];
    if let Some(user_password) = console_identity {
        ids.push(Id {
            scheme: "digest".into(),
            id: acl::digest_id(user_password),
        });
    }
    ids
}

/// Renders `page` from one query of the core; `None` when the core has stopped.
/// `after` is the `after` request parameter (paging). Only the gathering runs on the
/// core (its time is shown at the foot of the page, `#core-us`); the HTML is made on the
/// AdminServer task.
pub async fn render(
    core: &CoreHandle,
    page: Page,
    after: Option<String>,
    ids: Vec<Id>,
) -> Option<String> {
    let (html, core_us) = match page {
        Page::Ensemble => {
            let (page, us) = timed(core, ensemble::gather).await?;
            // The other members' srvr answers, asked here (not on the core), at once.
            let my_id = page.ensemble.as_ref().map(|e| e.my_id);
            let asks: Vec<_> = page
                .members
                .iter()
                .filter(|m| Some(m.id) != my_id)
                .filter_map(|m| {
                    let addr = m.client.clone()?;
                    Some((m.id, tokio::spawn(ensemble::ask_srvr(addr))))
                })
                .collect();
            let mut answers = Vec::with_capacity(asks.len());
            for (id, task) in asks {
                let answer = task.await.unwrap_or_else(|e| Err(e.to_string()));
                answers.push((id, answer));
            }
            (ensemble::render(&page, &answers), us)
        }
        Page::Tree(path) => {
            let after = after.unwrap_or_default();
            let (view, us) =
                timed(core, move |s, _, _| tree::gather(s, &path, &after, &ids)).await?;
            (tree::render(&view), us)
        }
        Page::Sessions => {
            let after = after.as_deref().and_then(sessions::parse_id);
            let (list, us) = timed(core, move |s, _, _| sessions::gather_list(s, after)).await?;
            (sessions::render_list(&list), us)
        }
        Page::Session(id) => {
            let (view, us) = timed(core, move |s, _, _| sessions::gather_session(s, id)).await?;
            (sessions::render_session(id, view.as_ref()), us)
        }
        Page::NotFound => return Some(html::page(
            "Not found",
            "<p>No console page here. Start at <a href=\"/console/ensemble\">the ensemble</a>.</p>",
        )),
    };
    Some(html.replace(
        html::FOOT_MARK,
        &format!("<footer id=\"core-us\">gathered on the core in {core_us} µs</footer>"),
    ))
}

/// Runs `f` on the core and measures it there: (its result, µs it took).
async fn timed<R, F>(core: &CoreHandle, f: F) -> Option<(R, u128)>
where
    R: Send + 'static,
    F: FnOnce(&Server, &Config, Option<&EnsembleView>) -> R + Send + 'static,
{
    core.query(move |s, c, e| {
        let t0 = std::time::Instant::now();
        let r = f(s, c, e);
        (r, t0.elapsed().as_micros())
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_lead_to_pages() {
        assert_eq!(route("/", true), Some(Page::Ensemble));
        assert_eq!(route("/", false), None);
        assert_eq!(route("/console/ensemble", false), Some(Page::Ensemble));
        assert_eq!(route("/console/tree/", true), Some(Page::Tree("/".into())));
        assert_eq!(route("/console/tree", true), Some(Page::Tree("/".into())));
        assert_eq!(
            route("/console/tree/a%20b/c+d/%3Cx%3E", true),
            Some(Page::Tree("/a b/c+d/<x>".into()))
        );
        assert_eq!(route("/console/tree/a/", true), Some(Page::NotFound));
        assert_eq!(route("/console/tree/%zz", true), Some(Page::NotFound));
        assert_eq!(route("/console/tree/%ff", true), Some(Page::NotFound));
        assert_eq!(route("/console/sessions", true), Some(Page::Sessions));
        assert_eq!(
            route("/console/session/0x1a", true),
            Some(Page::Session(0x1a))
        );
        assert_eq!(
            route("/console/session/ffffffffffffffff", true),
            Some(Page::Session(-1))
        );
        assert_eq!(route("/console/session/xyz", true), Some(Page::NotFound));
        assert_eq!(route("/console/other", true), Some(Page::NotFound));
        assert_eq!(route("/commands/ruok", true), None);
    }
}

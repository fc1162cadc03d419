//! The AdminServer: ZooKeeper's HTTP command endpoint (`JettyAdminServer`), served with
//! axum at `http://{admin.serverAddress}:{admin.serverPort}{admin.commandURL}/<command>`.
//!
//! Behaviour follows ZooKeeper 3.8's `JettyAdminServer.CommandServlet`:
//! - `GET {commandURL}` or `{commandURL}/` lists every command as
//!   `<a href="{commandURL}/{name}">{name}</a>` and `<br/>` lines, sorted;
//! - `GET {commandURL}/{name}?k=v` runs the command (a primary name or an alias) and
//!   answers 200 with its JSON body ([`super::json`]), unknown names included (their body
//!   carries the error);
//! - other methods answer 405, other paths 404;
//! - `/` and `/console/...` are keel's read-only console ([`super::console`]).
//!
//! Each command reads the state machine through [`CoreHandle::query`], so a body
//! describes one instant; `stat_reset` and `connection_stat_reset` first reset the
//! figures through [`CoreHandle::update`]. At most [`MAX_CONNECTIONS`] connections are served at once.

use super::console;
use super::json;
use super::BoundedListener;
use crate::admin::core_handle::CoreHandle;
use crate::config::Config;
use axum::body::Body;
use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::extract::State;
use axum::http::{header, Method, Request, StatusCode};
use axum::response::Response;
use axum::serve::IncomingStream;
use axum::Router;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::net::TcpListener;

/// Connections served at once; more wait in the kernel's accept backlog.
pub const MAX_CONNECTIONS: usize = 64;

/// A bound AdminServer, not yet serving.
pub struct AdminServer {
    listener: TcpListener,
    /// `admin.commandURL` without trailing slashes (`/commands`).
    command_url: String,
    /// `admin.idleTimeout`, ms.
    idle_timeout_ms: u32,
    console_identity: Option<String>,
}

/// What a request handler needs.
struct AdminState {
    core: CoreHandle,
    command_url: String,
    /// `admin.console.identity` (`user:password`), the console's digest identity.
    console_identity: Option<String>,
}

/// The address of the peer of an AdminServer connection, for the console's `ip`
/// identity.
#[derive(Debug, Clone, Copy)]
struct PeerAddr(std::net::SocketAddr);

impl Connected<IncomingStream<'_, BoundedListener>> for PeerAddr {
    fn connect_info(stream: IncomingStream<'_, BoundedListener>) -> Self {
        PeerAddr(*stream.remote_addr())
    }
}

impl AdminServer {
    /// Binds `admin.serverAddress:admin.serverPort`.
    ///
    /// Errors: the address does not resolve or the port cannot be bound (ZooKeeper then
    /// stops with "Unable to start AdminServer"; see [`super::Endpoints::bind`]).
    pub async fn bind(config: &Config) -> std::io::Result<AdminServer> {
        let addr = (
            config.admin_server_address.as_str(),
            config.admin_server_port,
        );
        let listener = TcpListener::bind(addr).await?;
        Ok(AdminServer {
            listener,
            command_url: config.admin_command_url.trim_end_matches('/').to_string(),
            idle_timeout_ms: config.admin_idle_timeout_ms,
            console_identity: config.admin_console_identity.clone(),
        })
    }

    /// The bound address (for logs and tests).
    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until the process ends; `core` answers the commands.
    pub async fn serve(self, core: CoreHandle) {
        let state = Arc::new(AdminState {
            core,
            command_url: self.command_url,
            console_identity: self.console_identity,
        });
        let app = Router::new().fallback(handle).with_state(state);
        let listener = BoundedListener::new(self.listener, MAX_CONNECTIONS, self.idle_timeout_ms);
        let service = app.into_make_service_with_connect_info::<PeerAddr>();
        if let Err(e) = axum::serve(listener, service).await {
            tracing::error!(error = %e, "AdminServer stopped");
        }
    }
}

/// Where a request path leads under the command URL.
#[derive(Debug, PartialEq, Eq)]
enum Target<'a> {
    /// `{commandURL}` or `{commandURL}/`: the command listing.
    Listing,
    /// `{commandURL}/{name}` (everything after the slash, as the servlet's path info).
    Command(&'a str),
}

fn target<'a>(path: &'a str, command_url: &str) -> Option<Target<'a>> {
    let rest = path.strip_prefix(command_url)?;
    match rest {
        "" | "/" => Some(Target::Listing),
        _ => rest.strip_prefix('/').map(Target::Command),
    }
}

/// Request parameters, first value of each name (the servlet's `getParameterMap()[0]`),
/// percent-decoded; `+` is a space as in HTML forms.
fn parameters(query: Option<&str>) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        out.entry(percent_decode(k))
            .or_insert_with(|| percent_decode(v));
    }
    out
}

/// Decodes `%XX` escapes and `+`; malformed escapes are kept as written.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The command listing `JettyAdminServer.commandLinks` prints.
fn listing(command_url: &str) -> String {
    let mut out = String::new();
    for c in json::COMMANDS {
        out.push_str(&format!(
            "<a href=\"{command_url}/{0}\">{0}</a>\n<br/>\n",
            c.primary
        ));
    }
    out
}

async fn handle(
    State(state): State<Arc<AdminState>>,
    ConnectInfo(PeerAddr(peer)): ConnectInfo<PeerAddr>,
    req: Request<Body>,
) -> Response {
    // HttpServlet answers GET (and HEAD, without the body); the rest are not allowed.
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
    }
    let path = req.uri().path();
    // The console owns `/console/...`, and `/` unless the command URL is `/` itself.
    if let Some(page) = console::route(path, !state.command_url.is_empty()) {
        let status = if page == console::Page::NotFound {
            StatusCode::NOT_FOUND
        } else {
            StatusCode::OK
        };
        let after = parameters(req.uri().query()).remove("after");
        let ids = console::identities(peer.ip(), state.console_identity.as_deref());
        let body = console::render(&state.core, page, after, ids)
            .await
            .unwrap_or_else(|| {
                console::html::page("Not serving", "<p>The server is stopping.</p>")
            });
        let mut resp = Response::new(Body::from(body));
        *resp.status_mut() = status;
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("text/html; charset=utf-8"),
        );
        return resp;
    }
    let Some(t) = target(path, &state.command_url) else {
        return plain(StatusCode::NOT_FOUND, "not found\n");
    };
    let name = match t {
        Target::Listing => {
            // Jetty sends the listing without a content type.
            return Response::new(Body::from(listing(&state.command_url)));
        }
        Target::Command(name) => name.to_string(),
    };
    let params = parameters(req.uri().query());
    // The two resets change figures, so they go through `update` first.
    match json::lookup(&name).map(|c| c.primary) {
        Some("stat_reset") => {
            state.core.update(|s, _| s.reset_stats()).await;
        }
        Some("connection_stat_reset") => {
            state.core.update(|s, _| s.reset_connection_stats()).await;
        }
        _ => {}
    }
    let body = match state.core.query(json::gather).await {
        Some(view) => json::run(&name, &params, &view),
        None => serde_json::json!({
            "command": name,
            "error": super::fourlw::ZK_NOT_SERVING,
        }),
    };
    let mut resp = Response::new(Body::from(json::to_jackson_pretty(&body)));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    resp
}

fn plain(status: StatusCode, text: &'static str) -> Response {
    let mut resp = Response::new(Body::from(text));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_under_the_command_url() {
        assert_eq!(target("/commands", "/commands"), Some(Target::Listing));
        assert_eq!(target("/commands/", "/commands"), Some(Target::Listing));
        assert_eq!(
            target("/commands/mntr", "/commands"),
            Some(Target::Command("mntr"))
        );
        assert_eq!(
            target("/commands/a/b", "/commands"),
            Some(Target::Command("a/b"))
        );
        assert_eq!(target("/commandsx", "/commands"), None);
        assert_eq!(target("/other", "/commands"), None);
        // commandURL "/" is trimmed to "": every path is a command.
        assert_eq!(target("/ruok", ""), Some(Target::Command("ruok")));
        assert_eq!(target("/", ""), Some(Target::Listing));
    }

    #[test]
    fn parameters_take_the_first_value_decoded() {
        let p = parameters(Some("traceMask=306&traceMask=1&a+b=c%2Fd&bad=%zz&flag"));
        assert_eq!(p["traceMask"], "306");
        assert_eq!(p["a b"], "c/d");
        assert_eq!(p["bad"], "%zz");
        assert_eq!(p["flag"], "");
        assert!(parameters(None).is_empty());
    }

    #[test]
    fn listing_links_every_primary_name_in_order() {
        let l = listing("/commands");
        assert!(l.starts_with(
            "<a href=\"/commands/configuration\">configuration</a>\n<br/>\n\
             <a href=\"/commands/connection_stat_reset\">connection_stat_reset</a>\n<br/>\n"
        ));
        assert_eq!(l.matches("<br/>").count(), json::COMMANDS.len());
        assert!(l.ends_with("<a href=\"/commands/zabstate\">zabstate</a>\n<br/>\n"));
    }
}

//! The leader's prep of a reconfig request (opcode 16): ZooKeeper 3.8's
//! `PrepRequestProcessor.pRequest2Txn`, case `OpCode.reconfig`, with
//! `QuorumPeerConfig.parseDynamicConfig`, `QuorumPeer.QuorumServer` and
//! `Leader.isQuorumSynced`.
//!
//! ZooKeeper checks, in this order: reconfigEnabled (RECONFIGDISABLED), the session,
//! that this server leads (UNIMPLEMENTED otherwise), that no reconfig is in progress
//! (RECONFIGINPROGRESS: the last seen config is not the current one), the client's
//! expected config version (BADVERSION), the new membership (BADARGUMENTS, or
//! MARSHALLINGERROR where ZooKeeper's parsing throws an unchecked exception), the
//! number of voters it keeps (BADARGUMENTS), that a quorum of it is synced with the
//! leader now (NEWCONFIGNOQUORUM), and WRITE on `/zookeeper/config` (NOAUTH: world may
//! only READ it, ZOOKEEPER-2014, so in practice only the super user passes). The txn is
//! a SetDataTxn of `/zookeeper/config` at version -1 under header type 16, whose data
//! is the new configuration's text; its version is the txn's zxid. The first two
//! checks and the last one are [`Server`](super::Server)'s and [`Prep`]'s;
//! [`new_config`] does the rest.

use std::collections::BTreeMap;
use std::net::IpAddr;

use bytes::Bytes;
use jute::ReconfigRequest;

use super::prep::Prep;
use super::txn::TxnOp;
use crate::config::{parse_server, read_properties, split_host_and_ports};
use crate::proto::ErrorCode;
use crate::zab::quorum::QuorumVerifier;
use crate::zab::wire::config::ServerLine;
use crate::zab::{Sid, Zxid};

/// The znode that holds the ensemble's configuration text (ZooDefs.CONFIG_NODE).
pub const CONFIG_NODE: &str = "/zookeeper/config";

/// What the leader's Zab core knows that prepping a reconfig needs; the member runtime
/// sets it ([`super::Server::set_reconfig_context`]) before a reconfig request reaches
/// prep. Both verifiers must carry their server lines (an incremental reconfig starts
/// from the last seen config's lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconfigContext {
    /// The committed, active configuration (`QuorumPeer.getQuorumVerifier`).
    pub current: QuorumVerifier,
    /// The newest configuration proposed (`getLastSeenQuorumVerifier`); newer than
    /// `current` while a reconfig txn is not yet committed.
    pub last_seen: QuorumVerifier,
    /// The leader itself and its synced forwarding followers (not observers): the
    /// members `Leader.isQuorumSynced` counts.
    pub synced_voters: Vec<Sid>,
    /// The zxid the reconfig txn will get, which becomes the new config's version.
    /// [`super::Server`] uses the zxid its own proposal gets instead.
    pub next_zxid: Zxid,
    /// `standaloneEnabled` (default true): a new config then needs 2 voters, else 1.
    pub standalone_enabled: bool,
}

/// The configuration a reconfig request asks for, at version `ctx.next_zxid`, checked
/// as ZooKeeper's leader checks it after the session (PrepRequestProcessor).
///
/// `new_members` (not null) replaces the membership: commas become newlines and the
/// text is read as Java Properties of `server.N` and `version` keys only. Otherwise the
/// change is incremental from `ctx.last_seen`: the comma-separated ids of
/// `leaving_servers` are removed (an id that is not a member changes nothing), then
/// each comma-separated `server.N=host:quorumPort:electionPort[:role];[host:]clientPort`
/// of `joining_servers` is added or replaces server N (a role change included); a
/// joiner needs its client port and may not share an address with another server.
///
/// Errors, in ZooKeeper's order and with its codes:
/// - RECONFIGINPROGRESS: `last_seen` and `current` differ in version;
/// - BADVERSION: `cur_config_id` is neither -1 nor `last_seen`'s version;
/// - MARSHALLINGERROR where ZooKeeper's parsing throws an unchecked exception, which
///   its prep answers so: a leaving id, joiner id, server id key or `version` value
///   that is not a (hex, for `version`) number, a port number outside 0-65535, and a
///   `new_members` without voters but with observers, with one voter and observers,
///   or without voters when standalone is disabled (parseDynamicConfig's
///   IllegalArgumentException);
/// - BADARGUMENTS: any other parse problem (a key other than `server.N` and `version`
///   in `new_members`, a bad server line, a joiner that is not `name=value`, a joiner
///   without a client port or whose address another server has), or fewer than 2
///   voters (1 with standalone disabled) in the result;
/// - NEWCONFIGNOQUORUM: `synced_voters` hold no quorum of the new config's voters.
///
/// Where keel cannot do exactly what ZooKeeper does it refuses with BADARGUMENTS:
/// negative server ids (Java's long ids allow them), hierarchical quorums (`group`
/// and `weight` keys), port 0 for the quorum or election port, and a server line with
/// a trailing `;`. Addresses clash as ZooKeeper compares resolved addresses, except
/// that host names are compared as names (keel resolves none).
pub fn new_config(
    req: &ReconfigRequest,
    ctx: &ReconfigContext,
) -> Result<QuorumVerifier, ErrorCode> {
    if ctx.last_seen.version() != ctx.current.version() {
        return Err(ErrorCode::ReconfigInProgress);
    }
    if req.cur_config_id != -1 && req.cur_config_id != ctx.last_seen.version() as i64 {
        return Err(ErrorCode::BadVersion);
    }
    let servers = match &req.new_members {
        Some(members) => whole_membership(members, ctx.standalone_enabled)?,
        None => incremental(req, &ctx.last_seen)?,
    };
    let voters = servers.values().filter(|s| !s.observer).count();
    let least = if ctx.standalone_enabled { 2 } else { 1 };
    if voters < least {
        return Err(ErrorCode::BadArguments);
    }
    let qv = QuorumVerifier::from_servers(servers.into_values(), ctx.next_zxid)
        .map_err(|_| ErrorCode::BadArguments)?;
    // Leader.isQuorumSynced: the leader and its synced followers that vote in the new
    // config must be a quorum of it (contains_quorum counts only its voters).
    if !qv.contains_quorum(ctx.synced_voters.iter().copied()) {
        return Err(ErrorCode::NewConfigNoQuorum);
    }
    Ok(qv)
}

/// Preps a reconfig on the leader once the session checks passed: [`new_config`] at
/// version `next_zxid` (the zxid the txn gets), then WRITE on `/zookeeper/config`
/// ([`Prep::reconfig`]), giving [`TxnOp::Reconfig`] with the new config's text.
///
/// Errors: as [`new_config`], then NOAUTH.
pub fn prep(
    p: &mut Prep<'_>,
    req: &ReconfigRequest,
    ctx: &ReconfigContext,
    next_zxid: Zxid,
) -> Result<TxnOp, ErrorCode> {
    if next_zxid != ctx.next_zxid {
        tracing::debug!(
            context = format!("0x{:x}", ctx.next_zxid),
            proposal = format!("0x{next_zxid:x}"),
            "reconfig versioned by the zxid its proposal gets"
        );
    }
    let at = ReconfigContext {
        next_zxid,
        ..ctx.clone()
    };
    let qv = new_config(req, &at)?;
    p.reconfig(Bytes::from(qv.text()))
}

/// Java's `String.split(sep)`: empty strings at the end are dropped (all of them,
/// so a string of separators gives none); a string without `sep` is itself.
fn java_split(s: &str, sep: char) -> Vec<&str> {
    let mut parts: Vec<&str> = s.split(sep).collect();
    if parts.len() > 1 {
        while parts.last() == Some(&"") {
            parts.pop();
        }
    }
    parts
}

/// ZooKeeper's `StringUtils.split`: Java split, each part trimmed (Java's `trim`:
/// characters up to U+0020), empty parts dropped.
fn split_trimmed(s: &str, sep: char) -> Vec<&str> {
    s.split(sep)
        .map(|p| p.trim_matches(|c: char| c <= ' '))
        .filter(|p| !p.is_empty())
        .collect()
}

/// A server id as Java's `Long.parseLong` reads it: not a number is MARSHALLINGERROR
/// (its NumberFormatException reaches prep's catch-all); a negative id, which keel's
/// ids cannot hold, is BADARGUMENTS.
fn server_id(text: &str) -> Result<Sid, ErrorCode> {
    let id: i64 = text.parse().map_err(|_| ErrorCode::MarshallingError)?;
    Sid::try_from(id).map_err(|_| ErrorCode::BadArguments)
}

/// Whether Java's `Integer.parseInt` reads `text` as a number that is no port:
/// `new InetSocketAddress` then throws IllegalArgumentException.
fn port_out_of_range(text: &str) -> bool {
    matches!(text.parse::<i32>(), Ok(p) if !(0..=65535).contains(&p))
}

/// The code ZooKeeper's `QuorumServer(sid, value)` refusal gives, following its order
/// of checks: ConfigException (BADARGUMENTS) for the form and a port that is not a
/// number, IllegalArgumentException (MARSHALLINGERROR) for a number outside 0-65535.
/// Called only for a value [`parse_server`] refused.
fn server_refusal(value: &str) -> ErrorCode {
    let server_client = java_split(value, ';');
    // ";;" splits into nothing: ZooKeeper then indexes past the end of the array.
    let Some(server) = server_client.first() else {
        return ErrorCode::MarshallingError;
    };
    if server_client.len() == 2 {
        let Ok(client) = split_host_and_ports(server_client[1]) else {
            return ErrorCode::BadArguments;
        };
        if client.len() > 2 {
            return ErrorCode::BadArguments;
        }
        let port = client[client.len() - 1];
        if port_out_of_range(port) {
            return ErrorCode::MarshallingError;
        }
        if port.parse::<i32>().is_err() {
            return ErrorCode::BadArguments;
        }
    }
    if server.contains('|') {
        // Several addresses per server: multiAddress.enabled is false by default.
        return ErrorCode::BadArguments;
    }
    let Ok(parts) = split_host_and_ports(server) else {
        return ErrorCode::BadArguments;
    };
    if server_client.len() > 2 || !(3..=4).contains(&parts.len()) {
        return ErrorCode::BadArguments;
    }
    for port in &parts[1..3] {
        if port.parse::<i32>().is_err() {
            return ErrorCode::BadArguments;
        }
        if port_out_of_range(port) {
            return ErrorCode::MarshallingError;
        }
    }
    ErrorCode::BadArguments
}

/// One `server.N` value as ZooKeeper's QuorumServer reads it.
///
/// Errors: see [`server_refusal`].
fn server_line(sid: Sid, value: &str) -> Result<ServerLine, ErrorCode> {
    match parse_server(sid, value) {
        Ok(spec) => Ok(ServerLine::from(&spec)),
        Err(why) => {
            tracing::info!(sid, value, why, "reconfig: server line refused");
            Err(server_refusal(value))
        }
    }
}

/// A non-incremental membership (`newMembers`), read as parseDynamicConfig reads it.
///
/// Errors: see [`new_config`].
fn whole_membership(
    members: &str,
    standalone_enabled: bool,
) -> Result<BTreeMap<Sid, ServerLine>, ErrorCode> {
    let text = members.replace(',', "\n");
    // Java Properties: a later line for the same key replaces the earlier one before
    // anything reads the values.
    let mut props: Vec<(String, String)> = Vec::new();
    for (_, key, value) in read_properties(&text) {
        props.retain(|(k, _)| *k != key);
        props.push((key, value));
    }
    // parseDynamicConfig refuses unknown keys before it reads any value.
    for (key, _) in &props {
        if key.starts_with("group") || key.starts_with("weight") {
            tracing::info!(
                key,
                "reconfig: hierarchical quorums are not supported by keel"
            );
            return Err(ErrorCode::BadArguments);
        }
        if !key.starts_with("server.") && key != "version" {
            return Err(ErrorCode::BadArguments);
        }
    }
    // QuorumMaj(Properties). ZooKeeper visits the keys in hash order, so which of two
    // bad values answers is not defined there; keel takes them in text order.
    let mut servers = BTreeMap::new();
    for (key, value) in &props {
        if let Some(n) = key.strip_prefix("server.") {
            let sid = server_id(n)?;
            servers.insert(sid, server_line(sid, value)?);
        } else {
            // The version given is replaced by the txn's zxid, but must be hex.
            i64::from_str_radix(value, 16).map_err(|_| ErrorCode::MarshallingError)?;
        }
    }
    let voters = servers.values().filter(|s| !s.observer).count();
    let observers = servers.len() - voters;
    // parseDynamicConfig's IllegalArgumentExceptions.
    let refused = match voters {
        0 => !standalone_enabled || observers > 0,
        1 => standalone_enabled && observers > 0,
        _ => false,
    };
    if refused {
        return Err(ErrorCode::MarshallingError);
    }
    Ok(servers)
}

/// An incremental change (`leavingServers`, then `joiningServers`) of `last_seen`.
///
/// Errors: see [`new_config`].
fn incremental(
    req: &ReconfigRequest,
    last_seen: &QuorumVerifier,
) -> Result<BTreeMap<Sid, ServerLine>, ErrorCode> {
    let mut next: BTreeMap<Sid, ServerLine> =
        last_seen.servers().map(|s| (s.sid, s.clone())).collect();
    for leaving in split_trimmed(req.leaving_servers.as_deref().unwrap_or(""), ',') {
        let id: i64 = leaving.parse().map_err(|_| ErrorCode::MarshallingError)?;
        if let Ok(sid) = Sid::try_from(id) {
            next.remove(&sid);
        }
    }
    for joiner in split_trimmed(req.joining_servers.as_deref().unwrap_or(""), ',') {
        let parts = split_trimmed(joiner, '=');
        let [name, value] = parts[..] else {
            return Err(ErrorCode::BadArguments);
        };
        // The id is what follows the name's last dot ("server.4", or "4").
        let sid = server_id(&name[name.rfind('.').map_or(0, |i| i + 1)..])?;
        let line = server_line(sid, value)?;
        if line.client.is_none() {
            return Err(ErrorCode::BadArguments);
        }
        if next
            .values()
            .any(|other| other.sid != sid && addresses_clash(&line, other))
        {
            return Err(ErrorCode::BadArguments);
        }
        next.insert(sid, line);
    }
    Ok(next)
}

/// A host:port as `QuorumServer.checkAddressDuplicate` compares them: wildcard and
/// loopback addresses are left out (unresolved ones too, which keel has none of: a host
/// name stands for itself, any case).
fn comparable(host: &str, port: u16) -> Option<(String, u16)> {
    match host.parse::<IpAddr>() {
        Ok(ip) => {
            let ip = ip.to_canonical();
            (!ip.is_unspecified() && !ip.is_loopback()).then(|| (ip.to_string(), port))
        }
        Err(_) if host.eq_ignore_ascii_case("localhost") => None,
        Err(_) => Some((host.to_ascii_lowercase(), port)),
    }
}

/// The quorum, client and election addresses of `s` that take part in duplicate checks.
fn addresses(s: &ServerLine) -> Vec<(String, u16)> {
    let client = s.client.as_ref().map(|(h, p)| (h.as_str(), *p));
    [
        Some((s.host.as_str(), s.quorum_port)),
        client,
        Some((s.host.as_str(), s.election_port)),
    ]
    .into_iter()
    .flatten()
    .filter_map(|(h, p)| comparable(h, p))
    .collect()
}

/// Whether the joining server `a` uses an address of server `b`.
fn addresses_clash(a: &ServerLine, b: &ServerLine) -> bool {
    let theirs = addresses(b);
    addresses(a).iter().any(|mine| theirs.contains(mine))
}

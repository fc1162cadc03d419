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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

use bytes::Bytes;
use jute::ReconfigRequest;

use super::prep::Prep;
use super::txn::TxnOp;
use crate::config::{parse_server, read_properties, split_host_and_ports};
use crate::proto::ErrorCode;
use crate::zab::quorum::QuorumVerifier;
use crate::zab::wire::config::ServerLine;
use crate::zab::wire::election::MAX_CONFIG_BYTES;
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
/// and `weight` keys), port 0 for the quorum or election port, a server line with a
/// trailing `;`, and a new config whose text is longer than [`MAX_CONFIG_BYTES`]
/// (ZooKeeper commits it, and then no election notification can carry it). Addresses
/// clash as ZooKeeper compares resolved addresses, except that host names are compared
/// as names (keel resolves none).
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
    let text_len = qv.text().len();
    if text_len > MAX_CONFIG_BYTES {
        tracing::info!(
            text_len,
            max = MAX_CONFIG_BYTES,
            "reconfig refused: the new config would not fit in an election notification"
        );
        return Err(ErrorCode::BadArguments);
    }
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
    // anything reads the values. Keys are kept in the order of their last line, found
    // by a map: a request is up to jute.maxbuffer, and a scan per line would let one
    // client stall the leader for seconds.
    let mut slots: Vec<Option<(String, String)>> = Vec::new();
    let mut slot_of: HashMap<String, usize> = HashMap::new();
    for (_, key, value) in read_properties(&text) {
        if let Some(old) = slot_of.insert(key.clone(), slots.len()) {
            slots[old] = None;
        }
        slots.push(Some((key, value)));
    }
    let props: Vec<(String, String)> = slots.into_iter().flatten().collect();
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
    let mut taken = TakenAddresses::default();
    for leaving in split_trimmed(req.leaving_servers.as_deref().unwrap_or(""), ',') {
        let id: i64 = leaving.parse().map_err(|_| ErrorCode::MarshallingError)?;
        if let Ok(sid) = Sid::try_from(id) {
            next.remove(&sid);
        }
    }
    for s in next.values() {
        taken.add(s);
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
        if taken.clash(&line) {
            return Err(ErrorCode::BadArguments);
        }
        // The replaced line's addresses go first: the new line may keep some of them.
        if let Some(old) = next.get(&sid) {
            taken.remove(old);
        }
        taken.add(&line);
        next.insert(sid, line);
    }
    Ok(next)
}

/// The addresses the servers of a config being built use, each with the servers that
/// use it, so that each joiner is checked in time of its own addresses alone (a
/// joiner list is up to jute.maxbuffer: a scan of every server per joiner would let
/// one request stall the leader).
#[derive(Default)]
struct TakenAddresses {
    users: HashMap<(String, u16), BTreeSet<Sid>>,
}

impl TakenAddresses {
    fn add(&mut self, s: &ServerLine) {
        for a in addresses(s) {
            self.users.entry(a).or_default().insert(s.sid);
        }
    }

    fn remove(&mut self, s: &ServerLine) {
        for a in addresses(s) {
            if let Some(users) = self.users.get_mut(&a) {
                users.remove(&s.sid);
                if users.is_empty() {
                    self.users.remove(&a);
                }
            }
        }
    }

    /// Whether the joining server `s` uses an address another server uses.
    fn clash(&self, s: &ServerLine) -> bool {
        addresses(s).iter().any(|a| {
            self.users
                .get(a)
                .is_some_and(|users| users.iter().any(|&u| u != s.sid))
        })
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zab::wire::config::parse_quorum_config;

    /// Version of the test ensemble's config.
    const V: Zxid = 0x1_0000_0000;
    /// The zxid the reconfig txn gets.
    const NEXT: Zxid = 0x1_0000_0007;

    /// Three voters on 127.0.0.1 (which duplicate checks leave out, as ZooKeeper's do).
    fn three() -> QuorumVerifier {
        parse_quorum_config(
            "server.1=127.0.0.1:3012:3013:participant;0.0.0.0:2181\n\
             server.2=127.0.0.1:3022:3023:participant;0.0.0.0:2182\n\
             server.3=127.0.0.1:3032:3033:participant;0.0.0.0:2183\n\
             version=100000000",
        )
        .unwrap()
    }

    fn ctx() -> ReconfigContext {
        ReconfigContext {
            current: three(),
            last_seen: three(),
            synced_voters: vec![1, 2, 3],
            next_zxid: NEXT,
            standalone_enabled: true,
        }
    }

    fn incremental(joining: Option<&str>, leaving: Option<&str>) -> ReconfigRequest {
        ReconfigRequest {
            joining_servers: joining.map(str::to_string),
            leaving_servers: leaving.map(str::to_string),
            new_members: None,
            cur_config_id: -1,
        }
    }

    fn whole(members: &str) -> ReconfigRequest {
        ReconfigRequest {
            joining_servers: None,
            leaving_servers: None,
            new_members: Some(members.to_string()),
            cur_config_id: -1,
        }
    }

    fn run(req: &ReconfigRequest) -> Result<QuorumVerifier, ErrorCode> {
        new_config(req, &ctx())
    }

    fn members(qv: &QuorumVerifier) -> (Vec<Sid>, Vec<Sid>) {
        let voters: Vec<Sid> = qv.participants().collect();
        let observers = qv.members().filter(|s| qv.is_observer(*s)).collect();
        (voters, observers)
    }

    /// RECONFIGINPROGRESS comes before everything else new_config checks.
    #[test]
    fn a_reconfig_in_progress_refuses_the_next() {
        let mut c = ctx();
        c.last_seen = three().with_version(V + 5);
        let mut req = incremental(Some("nonsense"), Some("x"));
        req.cur_config_id = 99;
        assert_eq!(new_config(&req, &c), Err(ErrorCode::ReconfigInProgress));
    }

    /// BADVERSION unless curConfigId is -1 or the last seen version; before parsing.
    #[test]
    fn the_expected_version_must_be_the_last_seen() {
        let mut req = incremental(None, Some("x"));
        req.cur_config_id = V as i64 + 1;
        assert_eq!(run(&req), Err(ErrorCode::BadVersion));
        let mut req = incremental(None, None);
        req.cur_config_id = V as i64;
        assert_eq!(run(&req).unwrap().participants().count(), 3);
    }

    /// The new config's text: server lines in sid order, its version the txn's zxid.
    #[test]
    fn a_joiner_is_added_and_the_version_is_the_txns_zxid() {
        let qv = run(&incremental(
            Some("server.4=127.0.0.1:3042:3043:observer;2184"),
            None,
        ))
        .unwrap();
        assert_eq!(qv.version(), NEXT);
        assert_eq!(
            qv.text(),
            "server.1=127.0.0.1:3012:3013:participant;0.0.0.0:2181\n\
             server.2=127.0.0.1:3022:3023:participant;0.0.0.0:2182\n\
             server.3=127.0.0.1:3032:3033:participant;0.0.0.0:2183\n\
             server.4=127.0.0.1:3042:3043:observer;0.0.0.0:2184\n\
             version=100000007"
        );
        // Without a role a joiner is a participant; without "server." the id is the name.
        let qv = run(&incremental(
            Some(" 4 = 127.0.0.1:3042:3043;127.0.0.1:2184 ,, server.5=127.0.0.1:3052:3053;2185"),
            None,
        ))
        .unwrap();
        assert_eq!(members(&qv), (vec![1, 2, 3, 4, 5], vec![]));
        assert_eq!(
            qv.server(4).unwrap().client,
            Some(("127.0.0.1".to_string(), 2184))
        );
    }

    /// Leaving ids are removed before joiners are added; one that is not a member
    /// changes nothing; blanks and empty items are skipped (StringUtils.split).
    #[test]
    fn leaving_servers() {
        let qv = run(&incremental(None, Some(" 3 ,, 9, "))).unwrap();
        assert_eq!(members(&qv), (vec![1, 2], vec![]));
        // Removing and re-adding in one request: the joiner's line wins.
        let qv = run(&incremental(
            Some("server.3=127.0.0.1:4032:4033;2183"),
            Some("3"),
        ))
        .unwrap();
        assert_eq!(qv.server(3).unwrap().quorum_port, 4032);
        // A negative id is a number: it removes nothing.
        assert_eq!(
            run(&incremental(None, Some("-1")))
                .unwrap()
                .members()
                .count(),
            3
        );
        // Long.parseLong's NumberFormatException reaches prep's catch-all.
        assert_eq!(
            run(&incremental(None, Some("2,x"))),
            Err(ErrorCode::MarshallingError)
        );
        assert_eq!(
            run(&incremental(None, Some("server.2"))),
            Err(ErrorCode::MarshallingError)
        );
    }

    /// Empty and null lists change nothing: the config is the same members at the
    /// new version.
    #[test]
    fn empty_and_null_lists_change_nothing() {
        for req in [
            incremental(None, None),
            incremental(Some(""), Some("")),
            incremental(Some(" , "), None),
        ] {
            let qv = run(&req).unwrap();
            assert_eq!(qv.text(), three().with_version(NEXT).text());
        }
    }

    /// A joiner with an id that is there already replaces it: observer <-> participant.
    #[test]
    fn a_joiner_can_change_a_members_role() {
        let qv = run(&incremental(
            Some("server.3=127.0.0.1:3032:3033:observer;2183"),
            None,
        ))
        .unwrap();
        assert_eq!(members(&qv), (vec![1, 2], vec![3]));
        let mut c = ctx();
        c.current = qv.clone();
        c.last_seen = qv.clone();
        c.synced_voters = vec![1, 2];
        let req = incremental(Some("server.3=127.0.0.1:3032:3033:Participant;2183"), None);
        let back = new_config(&req, &c).unwrap();
        assert_eq!(members(&back), (vec![1, 2, 3], vec![]));
    }

    #[test]
    fn a_joiner_must_be_a_full_server_line() {
        let bad = |joining: &str| run(&incremental(Some(joining), None));
        // Not name=value.
        assert_eq!(bad("server.4"), Err(ErrorCode::BadArguments));
        assert_eq!(bad("server.4=a=b"), Err(ErrorCode::BadArguments));
        // No client port: "each server should have 3 ports specified".
        assert_eq!(
            bad("server.4=127.0.0.1:3042:3043"),
            Err(ErrorCode::BadArguments)
        );
        assert_eq!(
            bad("server.4=127.0.0.1:3042:3043:participant"),
            Err(ErrorCode::BadArguments)
        );
        // ConfigExceptions of QuorumServer.
        assert_eq!(
            bad("server.4=127.0.0.1:3042;2184"),
            Err(ErrorCode::BadArguments)
        );
        assert_eq!(bad("server.4=h:x:3043;2184"), Err(ErrorCode::BadArguments));
        assert_eq!(
            bad("server.4=h:3042:3042;2184"),
            Err(ErrorCode::BadArguments)
        );
        assert_eq!(
            bad("server.4=h:1:2:voter;2184"),
            Err(ErrorCode::BadArguments)
        );
        assert_eq!(bad("server.4=h:1:2;a:b:2184"), Err(ErrorCode::BadArguments));
        assert_eq!(bad("server.4=h:1:2;x"), Err(ErrorCode::BadArguments));
        assert_eq!(
            bad("server.4=h:1:2|g:1:2;2184"),
            Err(ErrorCode::BadArguments)
        );
        // Unchecked exceptions: a bad id, a port number no socket address takes.
        assert_eq!(bad("server.x=h:1:2;2184"), Err(ErrorCode::MarshallingError));
        assert_eq!(bad("server.=h:1:2;2184"), Err(ErrorCode::MarshallingError));
        assert_eq!(
            bad("server.4=h:70000:2;2184"),
            Err(ErrorCode::MarshallingError)
        );
        assert_eq!(bad("server.4=h:1:2;-5"), Err(ErrorCode::MarshallingError));
        assert_eq!(bad("server.4=h:1:2;a:2184;b"), Err(ErrorCode::BadArguments));
        // keel's ids are unsigned (ZooKeeper would take -4).
        assert_eq!(bad("server.-4=h:1:2;2184"), Err(ErrorCode::BadArguments));
    }

    /// checkAddressDuplicate: a joiner may not use another server's quorum, election or
    /// client address; loopback and wildcard addresses never clash; the server it
    /// replaces is not compared.
    #[test]
    fn a_joiner_may_not_take_another_servers_address() {
        let lan = parse_quorum_config(
            "server.1=10.0.0.1:2888:3888:participant;10.0.0.1:2181\n\
             server.2=10.0.0.2:2888:3888:participant;0.0.0.0:2181\n\
             server.3=node3:2888:3888:participant;2181\n\
             version=100000000",
        )
        .unwrap();
        let mut c = ctx();
        c.current = lan.clone();
        c.last_seen = lan;
        let join = |j: &str| new_config(&incremental(Some(j), None), &c);
        assert_eq!(
            join("server.4=10.0.0.1:2888:3999;2181"),
            Err(ErrorCode::BadArguments)
        );
        // Its client address is server 1's.
        assert_eq!(
            join("server.4=10.0.0.4:2888:3888;10.0.0.1:2181"),
            Err(ErrorCode::BadArguments)
        );
        // Its quorum address is server 1's election address.
        assert_eq!(
            join("server.4=10.0.0.1:3888:2999;2181"),
            Err(ErrorCode::BadArguments)
        );
        // Host names compare as names, in any case.
        assert_eq!(
            join("server.4=NODE3:2888:3999;2181"),
            Err(ErrorCode::BadArguments)
        );
        // Wildcard client addresses are left out: servers 2 and 4 both listen on 0.0.0.0:2181.
        assert!(join("server.4=10.0.0.4:2888:3888;2181").is_ok());
        // Server 1 moving its election port is compared with the others only.
        assert!(join("server.1=10.0.0.1:2888:3999;10.0.0.1:2181").is_ok());
        // Two joiners of one request are checked against each other too.
        assert_eq!(
            join("server.4=10.0.0.4:2888:3888;2181,server.5=10.0.0.4:2888:3999;2185"),
            Err(ErrorCode::BadArguments)
        );
        // On loopback (as in the tests of ZooKeeper itself) nothing clashes.
        assert!(run(&incremental(
            Some("server.4=127.0.0.1:3012:3013;2181"),
            None
        ))
        .is_ok());
        // A server that moves frees its old addresses for a later joiner, and keeps
        // those it still uses.
        assert!(
            join("server.1=10.0.0.9:2888:3888;10.0.0.1:2181,server.4=10.0.0.1:2888:3888;2181")
                .is_ok()
        );
        assert_eq!(
            join("server.1=10.0.0.9:2888:3888;10.0.0.1:2181,server.4=10.0.0.4:2888:3888;10.0.0.1:2181"),
            Err(ErrorCode::BadArguments)
        );
        // Leaving frees nothing here: leavers are removed before the joiners come.
        assert!(new_config(
            &incremental(Some("server.4=10.0.0.2:2888:3888;2181"), Some("2")),
            &c
        )
        .is_ok());
    }

    #[test]
    fn big_requests_are_read_in_one_pass() {
        // Each line of a big newMembers replaces the last with the same key (Java
        // Properties); the last of 100,000 lines for server.2 is the one kept.
        let mut text = String::from("server.1=127.0.0.1:3012:3013");
        for port in 0..100_000u32 {
            text.push_str(&format!(
                ",server.2=127.0.0.1:{}:3023",
                10_000 + port % 50_000
            ));
        }
        let qv = run(&whole(&text)).unwrap();
        assert!(
            qv.text().contains("server.2=127.0.0.1:59999:3023"),
            "{}",
            qv.text()
        );
        // 260,000 continued lines (`\\\` pieces, each a line ending in an odd run of
        // backslashes): one logical line, read in one pass (was 30 s, rescanning the
        // growing backslash run per line), then refused as a malformed member.
        let mut text = String::from("server.1=127.0.0.1:3012:3013,server.2=");
        text.push_str(&"\\\\\\,".repeat(260_000));
        assert_eq!(run(&whole(&text)), Err(ErrorCode::BadArguments));
        // 60,000 distinct keys: read, then refused as too long for a notification.
        let text: Vec<String> = (1..=60_000u32)
            .map(|i| format!("server.{i}=127.0.0.1:{}:{}", i % 60_000 + 1, 3023))
            .collect();
        assert_eq!(run(&whole(&text.join(","))), Err(ErrorCode::BadArguments));
        // 8,000 joiners (the most whose config still fits a notification), each checked against the others' addresses.
        let joiners: Vec<String> = (0..8_000u32)
            .map(|i| {
                format!(
                    "server.{}=10.1.{}.{}:2888:3888:observer;2181",
                    i + 10,
                    i / 250,
                    i % 250
                )
            })
            .collect();
        let qv = run(&incremental(Some(&joiners.join(",")), None)).unwrap();
        assert_eq!(members(&qv).1.len(), 8_000);
        let mut clash = joiners[..1000].to_vec();
        clash.push("server.99999=10.1.3.7:3888:2888:observer;2181".into());
        assert_eq!(
            run(&incremental(Some(&clash.join(",")), None)),
            Err(ErrorCode::BadArguments)
        );
    }

    #[test]
    fn a_config_too_long_for_an_election_notification_is_refused() {
        let observers = |n: u32| -> Vec<String> {
            (0..n)
                .map(|i| {
                    format!(
                        "server.{}=observer-{i:06}.example.com:2888:3888:observer;2181",
                        i + 10
                    )
                })
                .collect()
        };
        let fits = run(&incremental(Some(&observers(100).join(",")), None)).unwrap();
        assert!(fits.text().len() < MAX_CONFIG_BYTES);
        let many = observers(12_000);
        let qv = run(&incremental(Some(&many[..5000].join(",")), None)).unwrap();
        assert!(qv.text().len() < MAX_CONFIG_BYTES, "5,000 observers fit");
        assert_eq!(
            run(&incremental(Some(&many.join(",")), None)),
            Err(ErrorCode::BadArguments)
        );
    }

    /// Fewer than 2 voters is BADARGUMENTS (standaloneEnabled), fewer than 1 without it.
    #[test]
    fn the_new_config_needs_voters() {
        assert_eq!(
            run(&incremental(None, Some("2,3"))),
            Err(ErrorCode::BadArguments)
        );
        assert_eq!(
            run(&incremental(
                Some("server.2=127.0.0.1:3022:3023:observer;2182"),
                Some("3")
            )),
            Err(ErrorCode::BadArguments)
        );
        let mut c = ctx();
        c.standalone_enabled = false;
        let one = new_config(&incremental(None, Some("2,3")), &c).unwrap();
        assert_eq!(members(&one), (vec![1], vec![]));
        assert_eq!(
            new_config(&incremental(None, Some("1,2,3")), &c),
            Err(ErrorCode::BadArguments)
        );
    }

    /// Leader.isQuorumSynced: the synced voters of the new config must be a majority
    /// of its voters; observers and strangers do not count. Checked after the voters.
    #[test]
    fn a_quorum_of_the_new_config_must_be_synced() {
        let mut c = ctx();
        c.synced_voters = vec![1];
        let req = incremental(None, None);
        assert_eq!(new_config(&req, &c), Err(ErrorCode::NewConfigNoQuorum));
        c.synced_voters = vec![1, 2];
        assert!(new_config(&req, &c).is_ok());
        // Servers 4 and 5 join as voters, not synced: 2 of 5 is no quorum.
        let grow = incremental(
            Some("server.4=127.0.0.1:3042:3043;2184,server.5=127.0.0.1:3052:3053;2185"),
            None,
        );
        assert_eq!(new_config(&grow, &c), Err(ErrorCode::NewConfigNoQuorum));
        // Server 3 becomes an observer: synced or not, it counts no more.
        c.synced_voters = vec![1, 3];
        let demote = incremental(
            Some("server.3=127.0.0.1:3032:3033:observer;2183,server.4=127.0.0.1:3042:3043;2184"),
            None,
        );
        assert_eq!(new_config(&demote, &c), Err(ErrorCode::NewConfigNoQuorum));
        // The leader may remove itself; the rest must then be a quorum.
        c.synced_voters = vec![1, 2, 3];
        let qv = new_config(&incremental(None, Some("1")), &c).unwrap();
        assert_eq!(members(&qv), (vec![2, 3], vec![]));
        // Too few voters answers before too few synced.
        c.synced_voters = vec![];
        assert_eq!(
            new_config(&incremental(None, Some("2,3")), &c),
            Err(ErrorCode::BadArguments)
        );
    }

    /// newMembers replaces the membership: commas or newlines, Properties syntax,
    /// no client port needed, any version given replaced by the txn's zxid.
    #[test]
    fn new_members_replace_the_membership() {
        let qv = run(&whole(
            "server.1=127.0.0.1:3012:3013:participant;2181,server.2 = 127.0.0.1:3022:3023\n\
             server.5:127.0.0.1:3052:3053:observer,version=abc",
        ))
        .unwrap();
        assert_eq!(
            qv.text(),
            "server.1=127.0.0.1:3012:3013:participant;0.0.0.0:2181\n\
             server.2=127.0.0.1:3022:3023:participant\n\
             server.5=127.0.0.1:3052:3053:observer\n\
             version=100000007"
        );
        // A later line for the same server replaces the earlier, before it is read.
        let qv = run(&whole(
            "server.1=bad,server.1=127.0.0.1:3012:3013,server.2=127.0.0.1:3022:3023",
        ))
        .unwrap();
        assert_eq!(members(&qv), (vec![1, 2], vec![]));
    }

    #[test]
    fn new_members_errors() {
        let bad = |m: &str| run(&whole(m));
        let two = "server.1=127.0.0.1:3012:3013,server.2=127.0.0.1:3022:3023";
        // Unrecognised parameter, checked before any value.
        assert_eq!(
            bad(&format!("{two},clientPort=2181")),
            Err(ErrorCode::BadArguments)
        );
        assert_eq!(
            bad("server.x=h:1:2,tickTime=5"),
            Err(ErrorCode::BadArguments)
        );
        // Hierarchical quorums: keel has none.
        assert_eq!(
            bad(&format!("{two},group.1=1:2")),
            Err(ErrorCode::BadArguments)
        );
        // QuorumMaj(Properties)'s NumberFormatExceptions.
        assert_eq!(
            bad(&format!("{two},server.x=h:1:2")),
            Err(ErrorCode::MarshallingError)
        );
        assert_eq!(
            bad(&format!("{two},version=xyz")),
            Err(ErrorCode::MarshallingError)
        );
        // A server line QuorumServer refuses.
        assert_eq!(
            bad(&format!("{two},server.3=h:1")),
            Err(ErrorCode::BadArguments)
        );
        assert_eq!(
            bad(&format!("{two},server.3=h:1:99999")),
            Err(ErrorCode::MarshallingError)
        );
        // Empty: no voters (BADARGUMENTS after parsing); one voter likewise.
        assert_eq!(bad(""), Err(ErrorCode::BadArguments));
        assert_eq!(
            bad("server.1=127.0.0.1:3012:3013"),
            Err(ErrorCode::BadArguments)
        );
        // parseDynamicConfig's IllegalArgumentExceptions.
        assert_eq!(
            bad("server.1=127.0.0.1:3012:3013:observer"),
            Err(ErrorCode::MarshallingError)
        );
        assert_eq!(
            bad("server.1=127.0.0.1:3012:3013,server.2=127.0.0.1:3022:3023:observer"),
            Err(ErrorCode::MarshallingError)
        );
        let mut c = ctx();
        c.standalone_enabled = false;
        assert_eq!(new_config(&whole(""), &c), Err(ErrorCode::MarshallingError));
        c.synced_voters = vec![1];
        let one = new_config(
            &whole("server.1=127.0.0.1:3012:3013,server.2=127.0.0.1:3022:3023:observer"),
            &c,
        )
        .unwrap();
        assert_eq!(members(&one), (vec![1], vec![2]));
        // Not synced.
        assert_eq!(
            bad("server.7=127.0.0.1:3072:3073,server.8=127.0.0.1:3082:3083"),
            Err(ErrorCode::NewConfigNoQuorum)
        );
    }

    /// An empty newMembers is a non-incremental reconfig (no servers), while a null
    /// one leaves the joining and leaving lists in charge.
    #[test]
    fn empty_new_members_is_not_null() {
        let mut req = incremental(None, Some("3"));
        req.new_members = Some(String::new());
        assert_eq!(run(&req), Err(ErrorCode::BadArguments));
        req.new_members = None;
        assert_eq!(members(&run(&req).unwrap()), (vec![1, 2], vec![]));
    }

    #[test]
    fn java_splitting() {
        assert_eq!(java_split("a;", ';'), ["a"]);
        assert_eq!(java_split(";a", ';'), ["", "a"]);
        assert!(java_split(";;", ';').is_empty());
        assert_eq!(java_split("", ';'), [""]);
        assert_eq!(split_trimmed(" a ,\t, b", ','), ["a", "b"]);
        assert_eq!(server_refusal(";;"), ErrorCode::MarshallingError);
    }
}

/// The reconfig request through [`super::Server`]: the checks around
/// [`new_config`], the txn, its apply and reply.
#[cfg(test)]
mod server_tests {
    use super::*;
    use crate::proto::opcode as op;
    use crate::proto::Request;
    use crate::server::{Input, Outbound, Server, Settings};
    use crate::zab::wire::config::parse_quorum_config;
    use jute::{Decoder, GetDataResponse, Id, ReplyHeader, WatcherEvent};

    const T0: i64 = 1_700_000_000_000;
    const TEXT: &str = "server.1=127.0.0.1:3012:3013:participant;0.0.0.0:2181\n\
                        server.2=127.0.0.1:3022:3023:participant;0.0.0.0:2182\n\
                        version=100000000";

    /// A server (applying at once unless `durable`) with one session on connection 1,
    /// whose identities include `super` when `superuser`.
    fn server(reconfig_enabled: bool, superuser: bool, durable: bool) -> Server {
        let settings = Settings {
            reconfig_enabled,
            durable,
            ..Settings::default()
        };
        let mut s = Server::new(settings, 1, T0, 1);
        let addr = "127.0.0.1:5000".parse().unwrap();
        s.handle(T0, Input::Connected { conn: 1, addr });
        if superuser {
            let ids = vec![Id {
                scheme: "super".into(),
                id: String::new(),
            }];
            s.handle(T0, Input::Authenticated { conn: 1, ids });
        }
        let req = jute::ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            time_out_ms: 10_000,
            session_id: 0,
            passwd: Bytes::from_static(&[0; 16]),
            read_only: false,
        };
        s.handle(T0, Input::Handshake { conn: 1, req });
        s.handle(
            T0,
            Input::Durable {
                zxid: 0x1_0000_0001,
            },
        );
        s.drain_outbox();
        s.drain_storage();
        s
    }

    fn context() -> ReconfigContext {
        let qv = parse_quorum_config(TEXT).unwrap();
        ReconfigContext {
            current: qv.clone(),
            last_seen: qv,
            synced_voters: vec![1, 2],
            next_zxid: 0,
            standalone_enabled: true,
        }
    }

    fn send(s: &mut Server, xid: i32, opcode: i32, req: Request) {
        let input = Input::Request {
            conn: 1,
            xid,
            opcode,
            req,
            body: Bytes::new(),
        };
        s.handle(T0 + 10, input);
    }

    fn join3() -> Request {
        Request::Reconfig(ReconfigRequest {
            joining_servers: Some("server.3=127.0.0.1:3032:3033;2183".into()),
            leaving_servers: None,
            new_members: None,
            cur_config_id: -1,
        })
    }

    /// The packets sent on connection 1, each as its reply header and body.
    fn replies(s: &mut Server) -> Vec<(ReplyHeader, Vec<u8>)> {
        s.drain_outbox()
            .into_iter()
            .filter_map(|(conn, o)| match o {
                Outbound::Packet(p) if conn == 1 => {
                    let mut d = Decoder::new(&p[4..]);
                    let h: ReplyHeader = d.record().unwrap();
                    Some((h, d.remaining().to_vec()))
                }
                _ => None,
            })
            .collect()
    }

    fn error_of(s: &mut Server) -> i32 {
        let r = replies(s);
        assert_eq!(r.len(), 1, "{r:?}");
        r[0].0.err
    }

    /// Without a context (standalone, or not the leader) the answers stay those of a
    /// server that cannot reconfigure; RECONFIGDISABLED comes first with one too.
    #[test]
    fn without_a_leaders_context_or_when_disabled() {
        let mut s = server(true, true, false);
        send(&mut s, 1, op::RECONFIG, join3());
        assert_eq!(error_of(&mut s), ErrorCode::Unimplemented.code());
        let mut s = server(false, true, false);
        s.set_reconfig_context(Some(context()));
        send(&mut s, 1, op::RECONFIG, join3());
        assert_eq!(error_of(&mut s), ErrorCode::ReconfigDisabled.code());
    }

    /// WRITE on /zookeeper/config is checked last: a client without super passes the
    /// config checks and gets NOAUTH; a config error answers before it.
    #[test]
    fn only_the_super_user_may_reconfigure() {
        let mut s = server(true, false, false);
        s.set_reconfig_context(Some(context()));
        send(&mut s, 1, op::RECONFIG, join3());
        assert_eq!(error_of(&mut s), ErrorCode::NoAuth.code());
        let leave_all = Request::Reconfig(ReconfigRequest {
            joining_servers: None,
            leaving_servers: Some("1".into()),
            new_members: None,
            cur_config_id: -1,
        });
        send(&mut s, 2, op::RECONFIG, leave_all);
        assert_eq!(error_of(&mut s), ErrorCode::BadArguments.code());
    }

    /// The txn sets /zookeeper/config to the new text at dataVersion -1 with the
    /// txn's zxid and time, fires NodeDataChanged first, and the reply is a
    /// GetDataResponse of the text and the Stat after it.
    #[test]
    fn a_reconfig_sets_the_config_node_and_answers_with_it() {
        let mut s = server(true, true, false);
        s.set_reconfig_context(Some(context()));
        let watch = jute::PathWatchRequest {
            path: CONFIG_NODE.into(),
            watch: true,
        };
        send(&mut s, 1, op::GET_DATA, Request::GetData(watch));
        replies(&mut s);
        send(&mut s, 2, op::RECONFIG, join3());
        let zxid = 0x1_0000_0002;
        let want = "server.1=127.0.0.1:3012:3013:participant;0.0.0.0:2181\n\
                    server.2=127.0.0.1:3022:3023:participant;0.0.0.0:2182\n\
                    server.3=127.0.0.1:3032:3033:participant;0.0.0.0:2183\n\
                    version=100000002";
        let r = replies(&mut s);
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!(r[0].0.xid, -1);
        let event: WatcherEvent = Decoder::new(&r[0].1).record().unwrap();
        assert_eq!((event.event_type, event.path.as_str()), (3, CONFIG_NODE));
        assert_eq!((r[1].0.xid, r[1].0.zxid, r[1].0.err), (2, zxid, 0));
        let resp: GetDataResponse = Decoder::new(&r[1].1).record().unwrap();
        assert_eq!(resp.data.as_deref(), Some(want.as_bytes()));
        assert_eq!(
            (resp.stat.version, resp.stat.mzxid, resp.stat.mtime),
            (-1, zxid, T0 + 10)
        );
        assert_eq!(resp.stat.data_length as usize, want.len());
        let node = s.tree.get(CONFIG_NODE).unwrap();
        assert_eq!(node.data_bytes(), want.as_bytes());
    }

    /// A later write prepped before the reconfig applies sees it (outstanding
    /// changes): a setData of /zookeeper/config at version -1 makes dataVersion 0,
    /// not the tree's version + 1.
    #[test]
    fn later_preps_see_the_proposed_reconfig() {
        let mut s = server(true, true, true);
        s.set_reconfig_context(Some(context()));
        assert_eq!(s.tree.get(CONFIG_NODE).unwrap().stat().version, 0);
        send(&mut s, 1, op::RECONFIG, join3());
        let set = jute::SetDataRequest {
            path: CONFIG_NODE.into(),
            data: Some(Bytes::from_static(b"x")),
            version: 0,
        };
        send(&mut s, 2, op::SET_DATA, Request::SetData(set));
        s.handle(
            T0 + 20,
            Input::Durable {
                zxid: 0x1_0000_0003,
            },
        );
        let r = replies(&mut s);
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!(r[0].0.err, 0);
        // Version 0 expected, but the reconfig leaves -1.
        assert_eq!(r[1].0.err, ErrorCode::BadVersion.code());
        let ops: Vec<TxnOp> = s
            .drain_storage()
            .into_iter()
            .filter_map(|o| match o {
                crate::server::StorageOp::Append(t) => Some(t.op),
                _ => None,
            })
            .collect();
        assert!(matches!(
            ops[..],
            [TxnOp::Reconfig { .. }, TxnOp::Error(ErrorCode::BadVersion)]
        ));
    }
}

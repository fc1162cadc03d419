//! Quorum SASL over a peer connection (`quorum.auth.enableSasl`; the mechanism and the
//! packets are [`crate::sasl::quorum`]): the side that connects runs the learner's half
//! right after its election initial message or its TCP (and TLS) connect to a quorum
//! port; the side that accepts runs the server's half right after reading the initial
//! message, or first thing on a quorum connection, as ZooKeeper's QuorumCnxManager,
//! Learner.connectToLeader and LearnerHandler.run call SaslQuorumAuthLearner and
//! SaslQuorumAuthServer.
//!
//! Failures as ZooKeeper's: a learner that gets ERROR, a bad rspauth or a malformed
//! packet gives up the connection; a server that requires SASL closes a connection
//! that does not start with the auth magic or fails the exchange, and one that does not
//! require it answers ERROR and lets the connection go on. Bytes the peer sent after
//! the exchange stay in the caller's buffer.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tracing::{info, warn};

use super::link::{invalid, PeerStream, READ_CHUNK};
use crate::net::gss::{Context, InitContext, QuorumKerberos};
use crate::sasl::digest_md5::{
    self, DigestMd5Client, DigestMd5Server, QUORUM_NAMES, RAW_NONCE_SIZE,
};
use crate::sasl::gssapi::{self, GssapiClient, GssapiServer, KerberosName};
use crate::sasl::quorum::{starts_with_magic, AuthPacket, AuthStatus, QuorumSasl};

/// The learner's mechanism on one connection: GSSAPI when its JAAS section logs in
/// with Kerberos, else DIGEST-MD5 (SecurityUtils.createSaslClient).
enum LearnerMech {
    Digest(DigestMd5Client),
    Gssapi(GssapiClient<InitContext>),
}

impl LearnerMech {
    /// The mechanism for a connection to `host` (the peer's server line host, which
    /// replaces `_HOST` in `quorum.auth.kerberos.servicePrincipal`).
    fn new(sasl: &QuorumSasl, kerberos: Option<&QuorumKerberos>, host: &str) -> io::Result<Self> {
        match kerberos.and_then(|k| k.initiator.as_ref()) {
            Some(initiator) if sasl.learner_kerberos.is_some() => {
                let target = service_principal(&sasl.settings.service_principal, host);
                let context = initiator.context(&target).map_err(refused)?;
                Ok(LearnerMech::Gssapi(GssapiClient::new(
                    context,
                    initiator.principal(),
                )))
            }
            _ => Ok(LearnerMech::Digest(DigestMd5Client::new(
                QUORUM_NAMES,
                &sasl.learner_username,
                &sasl.learner_password,
                rand::random::<[u8; RAW_NONCE_SIZE]>(),
            ))),
        }
    }

    fn initial(&mut self) -> io::Result<Vec<u8>> {
        match self {
            LearnerMech::Digest(_) => Ok(Vec::new()),
            LearnerMech::Gssapi(c) => c.initial_response().map_err(refused),
        }
    }

    /// The answer to the server's `token` (`None`: complete, nothing to send).
    fn step(&mut self, token: &[u8]) -> io::Result<Option<Vec<u8>>> {
        match self {
            LearnerMech::Digest(c) => c.evaluate(token).map_err(refused),
            LearnerMech::Gssapi(c) => c.evaluate(token).map(Some).map_err(refused),
        }
    }

    fn is_complete(&self) -> bool {
        match self {
            LearnerMech::Digest(c) => c.is_complete(),
            LearnerMech::Gssapi(c) => c.is_complete(),
        }
    }

    fn user<'a>(&self, sasl: &'a QuorumSasl) -> &'a str {
        match self {
            LearnerMech::Digest(_) => &sasl.learner_username,
            LearnerMech::Gssapi(_) => sasl
                .learner_kerberos
                .as_ref()
                .and_then(|k| k.principal.as_deref())
                .unwrap_or(""),
        }
    }
}

/// `quorum.auth.kerberos.servicePrincipal` for a connection to `host`: `_HOST`
/// replaced by the host in lower case (SecurityUtils.getServerPrincipal), the realm
/// kept if given (none: the Kerberos configuration's default).
fn service_principal(configured: &str, host: &str) -> String {
    configured.replace("_HOST", &host.to_lowercase())
}

/// The server's mechanism on one connection: GSSAPI when its JAAS section logs in with
/// Kerberos, else DIGEST-MD5 (SecurityUtils.createSaslServer).
enum ServerMech {
    Digest(DigestMd5Server),
    Gssapi(GssapiServer<Context>),
}

/// What a server step gives: a challenge, or the learner authenticated as `user` with
/// the final token (`None` for GSSAPI, whose last step returns null).
enum ServerStep {
    Challenge(Vec<u8>),
    Done {
        token: Option<Vec<u8>>,
        user: String,
    },
}

impl ServerMech {
    fn new(sasl: &QuorumSasl, kerberos: Option<&QuorumKerberos>) -> Self {
        match kerberos.and_then(|k| k.acceptor.as_ref()) {
            Some(acceptor) if sasl.server_kerberos.is_some() => {
                ServerMech::Gssapi(GssapiServer::new(acceptor.context()))
            }
            _ => ServerMech::Digest(DigestMd5Server::with_names(
                rand::random::<[u8; RAW_NONCE_SIZE]>(),
                QUORUM_NAMES,
            )),
        }
    }

    /// Evaluates the learner's `token`; a GSSAPI learner is authorized as
    /// SaslQuorumServerCallbackHandler does: its principal must be the identity it
    /// asks for, and a `service/host@REALM` principal's host one of `authz_hosts` (the
    /// hosts of the configuration's server lines).
    fn step(
        &mut self,
        sasl: &QuorumSasl,
        token: &[u8],
        authz_hosts: &[String],
    ) -> io::Result<ServerStep> {
        match self {
            ServerMech::Digest(s) => match s.evaluate(token, |user| sasl.password(user)) {
                Ok(digest_md5::Step::Challenge(c)) => Ok(ServerStep::Challenge(c)),
                Ok(digest_md5::Step::Complete {
                    token,
                    authorization_id,
                }) => Ok(ServerStep::Done {
                    token: Some(token),
                    user: authorization_id,
                }),
                Err(e) => Err(refused(e)),
            },
            ServerMech::Gssapi(s) => match s.evaluate(token) {
                Ok(gssapi::Step::Challenge(c)) => Ok(ServerStep::Challenge(c)),
                Ok(gssapi::Step::Complete {
                    authentication_id,
                    authorization_id,
                }) => {
                    let host_ok = match KerberosName::parse(&authorization_id) {
                        Some(KerberosName {
                            host: Some(host), ..
                        }) => authz_hosts.iter().any(|h| h == host),
                        _ => true,
                    };
                    if authentication_id != authorization_id || !host_ok {
                        return Err(refused(format!(
                            "SASL authorization completed, {authorization_id} is not \
                             authorized to connect (authenticated as {authentication_id})"
                        )));
                    }
                    Ok(ServerStep::Done {
                        token: None,
                        user: authorization_id,
                    })
                }
                Err(e) => Err(refused(e)),
            },
        }
    }
}

/// Challenges a server sends before it gives up on a learner
/// (SaslQuorumAuthServer.MAX_RETRIES).
const MAX_RETRIES: u32 = 5;

/// The learner's half, on a connection this member opened to `peer` (for the log) at
/// `host`: nothing unless `quorum.auth.learnerRequireSasl`, else DIGEST-MD5 with the
/// QuorumLearner section's user, or GSSAPI with its Kerberos login (`kerberos`) for
/// the service principal on `host`, within `timeout`. Bytes read past the server's
/// last packet are left in `rest`.
///
/// The Kerberos library's first context step for a service fetches tickets from the
/// KDC synchronously (as Java's does), on this task's thread.
///
/// Errors: the server answered ERROR, its rspauth does not match, the Kerberos library
/// refused, a packet is malformed, the connection closed or `timeout` passed.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn learn(
    sasl: &QuorumSasl,
    kerberos: Option<&QuorumKerberos>,
    stream: &mut PeerStream,
    rest: &mut BytesMut,
    timeout: Duration,
    host: &str,
    peer: &str,
) -> io::Result<()> {
    if !sasl.settings.learner_require {
        return Ok(());
    }
    let mut client = LearnerMech::new(sasl, kerberos, host)?;
    let user = client.user(sasl).to_string();
    let exchange = async {
        let initial = client.initial()?;
        send(stream, AuthStatus::InProgress, Some(&initial)).await?;
        loop {
            let packet = read_packet(stream, rest).await?;
            let token = packet.token.unwrap_or_default();
            match packet.status {
                AuthStatus::Error => {
                    return Err(refused(format!("{peer} refused this member's credentials")))
                }
                AuthStatus::InProgress => match client.step(&token)? {
                    Some(response) => send(stream, AuthStatus::InProgress, Some(&response)).await?,
                    None => return Err(refused("exchange complete but the server goes on")),
                },
                AuthStatus::Success => {
                    if !client.is_complete() && client.step(&token)?.is_some() {
                        return Err(refused(
                            "Protocol error: attempting to send response after completion",
                        ));
                    }
                    if !client.is_complete() {
                        return Err(refused("SUCCESS before the exchange completed"));
                    }
                    return Ok(());
                }
            }
        }
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(Ok(())) => {
            info!("quorum SASL: authenticated to {peer} as {user}");
            Ok(())
        }
        Ok(Err(e)) => {
            warn!("quorum SASL: authentication against {peer} failed: {e}");
            Err(e)
        }
        Err(_) => Err(invalid(format!(
            "quorum SASL: no answer from {peer} within {timeout:?}"
        ))),
    }
}

/// The server's half, on a connection `from` opened, whose bytes so far are in `buf`:
/// waits for 8 bytes; without the auth magic the connection goes on unless
/// `quorum.auth.serverRequireSasl`; with it, DIGEST-MD5 against the QuorumServer
/// section's users, or GSSAPI with its Kerberos login (a learner principal's host one
/// of `authz_hosts`), within `timeout`. Returns the authenticated user, if any.
///
/// Errors: SASL required and not done or failed; a malformed packet; the connection
/// closed (`UnexpectedEof`: before 8 bytes came, which a smaller-sid initiator that
/// does not authenticate does right after its initial message); `timeout`.
pub(crate) async fn serve(
    sasl: &QuorumSasl,
    kerberos: Option<&QuorumKerberos>,
    authz_hosts: &[String],
    stream: &mut PeerStream,
    buf: &mut BytesMut,
    timeout: Duration,
    from: SocketAddr,
) -> io::Result<Option<String>> {
    let required = sasl.settings.server_require;
    let exchange = async {
        while buf.len() < 8 {
            buf.reserve(READ_CHUNK);
            if stream.read_buf(buf).await? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "closed before its first 8 bytes",
                ));
            }
        }
        if !starts_with_magic(buf) {
            if required {
                return Err(refused(
                    "Learner not trying to authenticate and authentication is required",
                ));
            }
            return Ok(None);
        }
        let mut server = ServerMech::new(sasl, kerberos);
        let mut tries = 0;
        loop {
            let packet = read_packet(stream, buf).await?;
            let token = packet.token.unwrap_or_default();
            match server.step(sasl, &token, authz_hosts) {
                Ok(ServerStep::Challenge(challenge)) => {
                    tries += 1;
                    if tries > MAX_RETRIES {
                        send(stream, AuthStatus::Error, Some(&challenge)).await?;
                        return Err(refused(format!("retries={tries} exceeded")));
                    }
                    send(stream, AuthStatus::InProgress, Some(&challenge)).await?;
                }
                Ok(ServerStep::Done { token, user }) => {
                    send(stream, AuthStatus::Success, token.as_deref()).await?;
                    return Ok(Some(user));
                }
                Err(e) => {
                    send(stream, AuthStatus::Error, Some(&[])).await?;
                    return Err(e);
                }
            }
        }
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(Ok(Some(user))) => {
            info!("quorum SASL: learner {from} authenticated as {user}");
            Ok(Some(user))
        }
        Ok(Ok(None)) => Ok(None),
        Ok(Err(e)) if e.kind() == io::ErrorKind::UnexpectedEof => Err(e),
        Ok(Err(e)) if required => {
            warn!("quorum SASL: failed to authenticate learner {from}: {e}");
            Err(e)
        }
        Ok(Err(e)) if e.kind() == io::ErrorKind::PermissionDenied => {
            // Not required: ZooKeeper keeps the connection ("Maintaining learner
            // connection despite SASL authentication failure").
            warn!(
                "quorum SASL: learner {from} failed to authenticate ({e}); kept, \
                 quorum.auth.serverRequireSasl is false"
            );
            Ok(None)
        }
        Ok(Err(e)) => Err(e),
        Err(_) => Err(invalid(format!(
            "quorum SASL: learner {from} did not finish within {timeout:?}"
        ))),
    }
}

/// An authentication refusal (kind PermissionDenied, which the callers tell from a
/// broken connection).
fn refused(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, e.to_string())
}

async fn send(stream: &mut PeerStream, status: AuthStatus, token: Option<&[u8]>) -> io::Result<()> {
    let packet = AuthPacket {
        status,
        token: token.map(<[u8]>::to_vec),
    };
    stream.write_all(&packet.encode()).await?;
    stream.flush().await
}

/// The next QuorumAuthPacket from `buf`, reading more as needed; what follows it stays
/// in `buf`.
async fn read_packet(stream: &mut PeerStream, buf: &mut BytesMut) -> io::Result<AuthPacket> {
    loop {
        if let Some((packet, used)) = AuthPacket::decode(buf).map_err(invalid)? {
            buf.advance(used);
            return Ok(packet);
        }
        buf.reserve(READ_CHUNK);
        if stream.read_buf(buf).await? == 0 {
            return Err(invalid("closed inside a quorum auth packet"));
        }
    }
}

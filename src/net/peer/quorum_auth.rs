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
use crate::sasl::digest_md5::{
    DigestMd5Client, DigestMd5Server, Step, QUORUM_NAMES, RAW_NONCE_SIZE,
};
use crate::sasl::quorum::{starts_with_magic, AuthPacket, AuthStatus, QuorumSasl};

/// Challenges a server sends before it gives up on a learner
/// (SaslQuorumAuthServer.MAX_RETRIES).
const MAX_RETRIES: u32 = 5;

/// The learner's half, on a connection this member opened to `peer` (for the log):
/// nothing unless `quorum.auth.learnerRequireSasl`, else DIGEST-MD5 with the
/// QuorumLearner section's user, within `timeout`. Bytes read past the server's last
/// packet are left in `rest`.
///
/// Errors: the server answered ERROR, its rspauth does not match, a packet is
/// malformed, the connection closed or `timeout` passed.
pub(crate) async fn learn(
    sasl: &QuorumSasl,
    stream: &mut PeerStream,
    rest: &mut BytesMut,
    timeout: Duration,
    peer: &str,
) -> io::Result<()> {
    if !sasl.settings.learner_require {
        return Ok(());
    }
    let exchange = async {
        let mut client = DigestMd5Client::new(
            QUORUM_NAMES,
            &sasl.learner_username,
            &sasl.learner_password,
            rand::random::<[u8; RAW_NONCE_SIZE]>(),
        );
        send(stream, AuthStatus::InProgress, Some(&[])).await?;
        loop {
            let packet = read_packet(stream, rest).await?;
            let token = packet.token.unwrap_or_default();
            match packet.status {
                AuthStatus::Error => {
                    return Err(refused(format!("{peer} refused this member's credentials")))
                }
                AuthStatus::InProgress => match client.evaluate(&token).map_err(refused)? {
                    Some(response) => send(stream, AuthStatus::InProgress, Some(&response)).await?,
                    None => return Err(refused("exchange complete but the server goes on")),
                },
                AuthStatus::Success => {
                    if !client.is_complete() && client.evaluate(&token).map_err(refused)?.is_some()
                    {
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
            info!(
                "quorum SASL: authenticated to {peer} as {}",
                sasl.learner_username
            );
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
/// section's users, within `timeout`. Returns the authenticated user, if any.
///
/// Errors: SASL required and not done or failed; a malformed packet; the connection
/// closed (`UnexpectedEof`: before 8 bytes came, which a smaller-sid initiator that
/// does not authenticate does right after its initial message); `timeout`.
pub(crate) async fn serve(
    sasl: &QuorumSasl,
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
        let mut server =
            DigestMd5Server::with_names(rand::random::<[u8; RAW_NONCE_SIZE]>(), QUORUM_NAMES);
        let mut tries = 0;
        loop {
            let packet = read_packet(stream, buf).await?;
            let token = packet.token.unwrap_or_default();
            match server.evaluate(&token, |user| sasl.password(user)) {
                Ok(Step::Challenge(challenge)) => {
                    tries += 1;
                    if tries > MAX_RETRIES {
                        send(stream, AuthStatus::Error, Some(&challenge)).await?;
                        return Err(refused(format!("retries={tries} exceeded")));
                    }
                    send(stream, AuthStatus::InProgress, Some(&challenge)).await?;
                }
                Ok(Step::Complete {
                    token,
                    authorization_id,
                }) => {
                    send(stream, AuthStatus::Success, Some(&token)).await?;
                    return Ok(Some(authorization_id));
                }
                Err(e) => {
                    send(stream, AuthStatus::Error, Some(&[])).await?;
                    return Err(refused(e));
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

//! SASL (op 102) and authentication enforcement, as ZooKeeper 3.8's
//! ZooKeeperServer.processSasl and AuthenticationHelper.enforceAuthentication.

use super::{reply, Server};
use crate::proto::ErrorCode;
use crate::sasl::digest_md5::{DigestMd5Server, Step, RAW_NONCE_SIZE};
use crate::tree::acl;
use crate::watch::ConnId;
use bytes::BufMut;
use jute::{Id, Record, ReplyHeader};
use rand::RngCore;

impl Server {
    /// Answers a sasl request carrying the client's next `token`. The reply is a
    /// SetSASLResponse with xid the request's and zxid 0: the mechanism's next token, or
    /// a null one when SASL is off (no JAAS server section: ZooKeeper's connection has
    /// no SASL server). When the exchange completes the connection gets `sasl:<user>`
    /// (and `super:` for a `zookeeper.superUser`). A token the mechanism refuses is
    /// answered AUTHFAILED (SESSIONCLOSEDREQUIRESASLAUTH when SASL is required) with a
    /// null token and the connection is closed, unless `allowSaslFailedClients` keeps
    /// it (then OK with a null token). A Kerberos-only section (GSSAPI, not implemented
    /// yet) answers UNIMPLEMENTED.
    pub(super) fn sasl(&mut self, conn: ConnId, xid: i32, token: &[u8]) {
        let Some(config) = self.settings.sasl.clone() else {
            return self.send(conn, sasl_reply(xid, 0, None));
        };
        if config.kerberos {
            tracing::warn!(conn, "SASL GSSAPI (Kerberos) is not implemented");
            let zxid = self.last_zxid;
            return self.send(
                conn,
                reply::header_only(xid, zxid, ErrorCode::Unimplemented.code()),
            );
        }
        let mut random = [0u8; RAW_NONCE_SIZE];
        let needs_server = self.conns.get(&conn).is_some_and(|c| c.sasl.is_none());
        if needs_server {
            self.rng.fill_bytes(&mut random);
        }
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let mechanism = c.sasl.get_or_insert_with(|| DigestMd5Server::new(random));
        let session = format!("0x{:x}", c.session_id);
        match mechanism.evaluate(token, |user| config.password(user)) {
            Ok(Step::Challenge(challenge)) => self.send(conn, sasl_reply(xid, 0, Some(&challenge))),
            Ok(Step::Complete {
                token,
                authorization_id,
            }) => {
                tracing::info!(
                    session,
                    authorization_id,
                    "adding SASL authorization for authorizationID"
                );
                let superuser = config.is_super_user(&authorization_id);
                acl::add_identity(
                    &mut c.identities,
                    Id {
                        scheme: "sasl".into(),
                        id: authorization_id,
                    },
                );
                if superuser {
                    acl::add_identity(
                        &mut c.identities,
                        Id {
                            scheme: "super".into(),
                            id: String::new(),
                        },
                    );
                }
                self.send(conn, sasl_reply(xid, 0, Some(&token)));
            }
            Err(e) => {
                let addr = c.addr;
                tracing::warn!(conn, %addr, error = %e, "client failed to SASL authenticate");
                let required = self.sasl_required();
                if self.settings.allow_sasl_failed_clients && !required {
                    tracing::warn!(
                        "maintaining client connection despite SASL authentication failure"
                    );
                    return self.send(conn, sasl_reply(xid, 0, None));
                }
                let code = if required {
                    ErrorCode::SessionClosedRequireSaslAuth
                } else {
                    ErrorCode::AuthFailed
                };
                tracing::warn!(conn, error = ?code, "closing client connection: SASL authentication failed");
                self.send(conn, sasl_reply(xid, code.code(), None));
                self.close(conn);
            }
        }
    }

    /// Whether SASL identities are required (`sessionRequireClientSASLAuth`, or `sasl`
    /// among `enforce.auth.schemes`; AuthenticationHelper.isSaslAuthRequired).
    fn sasl_required(&self) -> bool {
        self.settings
            .enforced_schemes
            .as_ref()
            .is_some_and(|s| s.iter().any(|s| s == "sasl"))
    }

    /// Whether `conn` may send a request other than auth and sasl: with authentication
    /// enforced it needs an identity of an enforced scheme. If not, the request is
    /// answered SESSIONCLOSEDREQUIRESASLAUTH (zxid 0) and the connection is closed; the
    /// session stays until it expires (AuthenticationHelper.enforceAuthentication).
    pub(super) fn authenticated(&mut self, conn: ConnId, xid: i32) -> bool {
        let Some(schemes) = &self.settings.enforced_schemes else {
            return true;
        };
        let Some(c) = self.conns.get(&conn) else {
            return false;
        };
        if c.identities.iter().any(|i| schemes.contains(&i.scheme)) {
            return true;
        }
        tracing::error!(
            conn,
            schemes = ?c.identities.iter().map(|i| i.scheme.as_str()).collect::<Vec<_>>(),
            expected = ?schemes,
            "client authentication scheme(s) do not match the expected ones; closing the connection"
        );
        self.send(
            conn,
            reply::header_only(xid, 0, ErrorCode::SessionClosedRequireSaslAuth.code()),
        );
        self.close(conn);
        false
    }
}

/// A reply to a sasl request: the header, then SetSASLResponse's token (`None`: null).
fn sasl_reply(xid: i32, err: i32, token: Option<&[u8]>) -> bytes::Bytes {
    reply::frame(|b| {
        ReplyHeader { xid, zxid: 0, err }.encode(b);
        match token {
            Some(t) => {
                b.put_i32(t.len() as i32);
                b.put_slice(t);
            }
            None => b.put_i32(-1),
        }
    })
}

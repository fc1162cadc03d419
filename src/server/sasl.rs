//! SASL (op 102) and authentication enforcement, as ZooKeeper 3.8's
//! ZooKeeperServer.processSasl and AuthenticationHelper.enforceAuthentication.

use super::{reply, Server};
use crate::proto::ErrorCode;
use crate::sasl::digest_md5::{DigestMd5Server, Step, RAW_NONCE_SIZE};
use crate::sasl::{gssapi, SaslServerConfig};
use crate::tree::acl;
use crate::watch::ConnId;
use bytes::BufMut;
use jute::{Id, Record, ReplyHeader};
use rand::RngCore;

/// What one step of a connection's mechanism gives the server to do.
enum Outcome {
    /// Send this token; the exchange goes on.
    Challenge(Vec<u8>),
    /// Send this token (`None`: null) and add `sasl:<authorization_id>`.
    Complete {
        token: Option<Vec<u8>>,
        authorization_id: String,
    },
    /// The mechanism refused the token (the reason is for the log).
    Failed(String),
}

impl Server {
    /// Answers a sasl request carrying the client's next `token`. The reply is a
    /// SetSASLResponse with xid the request's and zxid 0: the mechanism's next token, or
    /// a null one when SASL is off (no JAAS server section: ZooKeeper's connection has
    /// no SASL server). When the exchange completes the connection gets `sasl:<user>`
    /// (and `super:` for a `zookeeper.superUser`). A token the mechanism refuses is
    /// answered AUTHFAILED (SESSIONCLOSEDREQUIRESASLAUTH when SASL is required) with a
    /// null token and the connection is closed, unless `allowSaslFailedClients` keeps
    /// it (then OK with a null token). On a Kerberos server the connection task runs
    /// GSSAPI and sends [`Server::sasl_gssapi`] instead; a raw token then fails.
    pub(super) fn sasl(&mut self, conn: ConnId, xid: i32, token: &[u8]) {
        let Some(config) = self.settings.sasl.clone() else {
            return self.send(conn, sasl_reply(xid, 0, None));
        };
        if config.kerberos.is_some() {
            let reason = "GSSAPI token did not pass through a Kerberos context".to_string();
            return self.sasl_outcome(conn, xid, &config, Outcome::Failed(reason));
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
        let outcome = match mechanism.evaluate(token, |user| config.password(user)) {
            Ok(Step::Challenge(challenge)) => Outcome::Challenge(challenge),
            Ok(Step::Complete {
                token,
                authorization_id,
            }) => Outcome::Complete {
                token: Some(token),
                authorization_id,
            },
            Err(e) => Outcome::Failed(e.to_string()),
        };
        self.sasl_outcome(conn, xid, &config, outcome);
    }

    /// Answers a sasl request on a Kerberos server: `step` is what the connection's
    /// GSSAPI exchange made of the token (`net::gss`). A completed exchange names the
    /// client by [`crate::sasl::gssapi::NameRules::authorized_id`] and gets a null
    /// token (Java's GssKrb5Server's last step returns null). Otherwise as
    /// [`Server::sasl`].
    pub(super) fn sasl_gssapi(
        &mut self,
        conn: ConnId,
        xid: i32,
        step: Result<gssapi::Step, gssapi::GssapiError>,
    ) {
        let Some(config) = self.settings.sasl.clone() else {
            return self.send(conn, sasl_reply(xid, 0, None));
        };
        let outcome = match step {
            Ok(gssapi::Step::Challenge(token)) => Outcome::Challenge(token),
            Ok(gssapi::Step::Complete {
                authentication_id,
                authorization_id,
            }) => {
                tracing::info!(
                    authentication_id,
                    authorization_id,
                    "successfully authenticated client"
                );
                let id = config
                    .name_rules
                    .authorized_id(&authentication_id, &authorization_id);
                tracing::info!(authorized_id = id, "setting authorizedID");
                Outcome::Complete {
                    token: None,
                    authorization_id: id,
                }
            }
            Err(e) => Outcome::Failed(e.to_string()),
        };
        self.sasl_outcome(conn, xid, &config, outcome);
    }

    fn sasl_outcome(
        &mut self,
        conn: ConnId,
        xid: i32,
        config: &SaslServerConfig,
        outcome: Outcome,
    ) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let session = format!("0x{:x}", c.session_id);
        match outcome {
            Outcome::Challenge(challenge) => self.send(conn, sasl_reply(xid, 0, Some(&challenge))),
            Outcome::Complete {
                token,
                authorization_id,
            } => {
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
                self.send(conn, sasl_reply(xid, 0, token.as_deref()));
            }
            Outcome::Failed(e) => {
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

#[cfg(test)]
mod tests {
    use super::super::{Input, Outbound, Server, Settings};
    use crate::proto::{opcode as op, ErrorCode, Request};
    use crate::sasl::digest_md5::client_response;
    use crate::sasl::gssapi::{GssapiError, NameRules, Step as GssStep};
    use crate::sasl::{Krb5Login, SaslServerConfig};
    use bytes::Bytes;

    /// The time the tests run at, ms (it seeds session ids, which must not be 0).
    const T: i64 = 1_700_000_000_000;

    fn server(enforced: Option<&[&str]>) -> Server {
        let mut sasl = SaslServerConfig::default();
        sasl.credentials.insert("alice".into(), "alice_pw".into());
        let mut settings = Settings {
            durable: false,
            sasl: Some(std::sync::Arc::new(sasl)),
            enforced_schemes: enforced.map(|s| s.iter().map(|s| s.to_string()).collect()),
            ..Settings::default()
        };
        settings.prep.sasl_acls = true;
        Server::new(settings, 0, T, 1)
    }

    /// Connects `conn` with a new session; returns nothing but clears the outbox.
    fn connect(s: &mut Server, conn: u64) {
        let addr = "127.0.0.1:5000".parse().unwrap();
        s.handle(T, Input::Connected { conn, addr });
        let req = jute::ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            time_out_ms: 10_000,
            session_id: 0,
            passwd: Bytes::from_static(&[0; 16]),
            read_only: false,
        };
        s.handle(T, Input::Handshake { conn, req });
        s.drain_outbox();
    }

    fn send(s: &mut Server, conn: u64, xid: i32, opcode: i32, req: Request) {
        s.handle(
            T,
            Input::Request {
                conn,
                xid,
                opcode,
                req,
                body: Bytes::new(),
            },
        );
    }

    /// (error code, token or None, closed) of what `conn` got.
    fn replies(s: &mut Server, conn: u64) -> Vec<(i32, Option<Vec<u8>>, bool)> {
        let mut out = Vec::new();
        for (c, o) in s.drain_outbox() {
            assert_eq!(c, conn, "only the connection concerned gets anything");
            match o {
                Outbound::Close => out.push((0, None, true)),
                Outbound::Packet(p) => {
                    let err = i32::from_be_bytes(p[16..20].try_into().unwrap());
                    let token = (p.len() >= 24).then(|| {
                        let n = i32::from_be_bytes(p[20..24].try_into().unwrap());
                        usize::try_from(n)
                            .ok()
                            .and_then(|n| p.get(24..24 + n))
                            .map(<[u8]>::to_vec)
                    });
                    out.push((err, token.flatten(), false));
                }
            }
        }
        out
    }

    fn exists(s: &mut Server, conn: u64) {
        let req = Request::Exists(jute::PathWatchRequest {
            path: "/".into(),
            watch: false,
        });
        send(s, conn, 9, op::EXISTS, req);
    }

    /// Runs a DIGEST-MD5 exchange on `conn` as `user`/`passwd`; returns the last replies.
    fn authenticate(s: &mut Server, conn: u64, passwd: &str) -> Vec<(i32, Option<Vec<u8>>, bool)> {
        send(s, conn, 1, op::SASL, Request::Sasl(Vec::new()));
        let got = replies(s, conn);
        let challenge = String::from_utf8(got[0].1.clone().unwrap()).unwrap();
        let nonce = challenge
            .split("nonce=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        let resp = client_response("alice", passwd, nonce, "cn");
        send(s, conn, 2, op::SASL, Request::Sasl(resp.into_bytes()));
        replies(s, conn)
    }

    #[test]
    fn exchange_adds_the_sasl_identity() {
        let mut s = server(None);
        connect(&mut s, 1);
        let got = authenticate(&mut s, 1, "alice_pw");
        assert_eq!(got.len(), 1);
        assert!(got[0].1.as_ref().unwrap().starts_with(b"rspauth="));
        assert!(s.conns[&1]
            .identities
            .iter()
            .any(|i| i.scheme == "sasl" && i.id == "alice"));
    }

    #[test]
    fn failure_is_authfailed_then_close() {
        let mut s = server(None);
        connect(&mut s, 1);
        connect(&mut s, 2);
        let got = authenticate(&mut s, 1, "wrong");
        assert_eq!(
            got,
            vec![(ErrorCode::AuthFailed.code(), None, false), (0, None, true)]
        );
        // The other connection is untouched.
        exists(&mut s, 2);
        assert_eq!(replies(&mut s, 2)[0].0, 0);
    }

    #[test]
    fn enforced_sasl_refuses_requests_until_authenticated() {
        let mut s = server(Some(&["sasl"]));
        connect(&mut s, 1);
        exists(&mut s, 1);
        let code = ErrorCode::SessionClosedRequireSaslAuth.code();
        assert_eq!(
            replies(&mut s, 1),
            vec![(code, None, false), (0, None, true)]
        );
        connect(&mut s, 2);
        // A failed exchange with SASL required answers SESSIONCLOSEDREQUIRESASLAUTH.
        assert_eq!(authenticate(&mut s, 2, "wrong")[0].0, code);
        connect(&mut s, 3);
        authenticate(&mut s, 3, "alice_pw");
        exists(&mut s, 3);
        let got = replies(&mut s, 3);
        assert_eq!((got.len(), got[0].0, got[0].2), (1, 0, false));
    }

    /// A Kerberos server (GSSAPI run by the connection task) with `rules`.
    fn kerberos_server(rules: NameRules) -> Server {
        let mut s = server(None);
        let sasl = SaslServerConfig {
            kerberos: Some(Krb5Login::default()),
            name_rules: rules,
            super_users: vec!["admin".into()],
            ..SaslServerConfig::default()
        };
        s.settings.sasl = Some(std::sync::Arc::new(sasl));
        s
    }

    fn gssapi(s: &mut Server, conn: u64, step: Result<GssStep, GssapiError>) {
        send(s, conn, 3, op::SASL, Request::SaslGssapi(step));
    }

    #[test]
    fn gssapi_completion_names_the_principal_by_the_rules() {
        let rules = NameRules {
            default_realm: "KEEL.TEST".into(),
            remove_host: true,
            remove_realm: false,
        };
        let mut s = kerberos_server(rules);
        connect(&mut s, 1);
        gssapi(&mut s, 1, Ok(GssStep::Challenge(b"ap-rep".to_vec())));
        assert_eq!(
            replies(&mut s, 1),
            vec![(0, Some(b"ap-rep".to_vec()), false)]
        );
        let done = GssStep::Complete {
            authentication_id: "svc/host.example@KEEL.TEST".into(),
            authorization_id: "someone-else".into(),
        };
        gssapi(&mut s, 1, Ok(done));
        // The last reply's token is null, as Java's GssKrb5Server's.
        assert_eq!(replies(&mut s, 1), vec![(0, None, false)]);
        let ids: Vec<_> = s.conns[&1]
            .identities
            .iter()
            .map(|i| format!("{}:{}", i.scheme, i.id))
            .collect();
        assert!(ids.contains(&"sasl:svc@KEEL.TEST".to_string()), "{ids:?}");
        assert!(!ids.iter().any(|i| i.starts_with("super:")));
    }

    #[test]
    fn gssapi_super_user_and_failure() {
        let rules = NameRules {
            default_realm: "KEEL.TEST".into(),
            remove_host: false,
            remove_realm: true,
        };
        let mut s = kerberos_server(rules);
        connect(&mut s, 1);
        let done = GssStep::Complete {
            authentication_id: "admin@KEEL.TEST".into(),
            authorization_id: "admin@KEEL.TEST".into(),
        };
        gssapi(&mut s, 1, Ok(done));
        replies(&mut s, 1);
        assert!(s.conns[&1].identities.iter().any(|i| i.scheme == "super"));
        connect(&mut s, 2);
        gssapi(&mut s, 2, Err(GssapiError::UnsupportedLayer(4)));
        assert_eq!(
            replies(&mut s, 2),
            vec![(ErrorCode::AuthFailed.code(), None, false), (0, None, true)]
        );
        // A raw token never reaches a Kerberos server's exchange: refused the same way.
        connect(&mut s, 3);
        send(&mut s, 3, 1, op::SASL, Request::Sasl(b"ap-req".to_vec()));
        assert_eq!(replies(&mut s, 3)[0].0, ErrorCode::AuthFailed.code());
    }

    #[test]
    fn enforced_ip_scheme_passes_every_connection() {
        let mut s = server(Some(&["ip"]));
        connect(&mut s, 1);
        exists(&mut s, 1);
        assert_eq!(replies(&mut s, 1)[0].0, 0);
    }
}

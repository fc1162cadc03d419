//! The GSSAPI (Kerberos V5) SASL mechanism, server side (RFC 4752), as ZooKeeper 3.8
//! runs it for clients: Java's `GssKrb5Server` created by `SecurityUtils.createSaslServer`
//! for the JAAS server principal, offering no security layer (qop `auth` only), and
//! ZooKeeper's `SaslServerCallbackHandler` naming the authorized identity.
//!
//! Sans-I/O but for the Kerberos library: the security context is behind
//! [`SecurityContext`] (gss_accept_sec_context, gss_wrap, gss_unwrap; its real
//! implementation, over the system's GSSAPI library, is `net::gss`), and this module
//! only runs the exchange over it:
//! 1. each client token goes to the context until it is established; its output tokens
//!    go back (with mutual authentication the last one is the AP-REP, and the client
//!    then answers with an empty token);
//! 2. once established (and the client's empty token, if a token went out last), the
//!    server sends the wrapped 4-byte security layer offer: the layers it supports
//!    (bit mask, [`LAYER_NONE`] only) and its maximum receive size;
//! 3. the client answers wrapped with its chosen layer, its maximum size and the
//!    authorization id it asks for; the exchange completes with a null token.

/// The "no security layer" bit of the offer (RFC 4752 3.3; Java's NO_PROTECTION).
pub const LAYER_NONE: u8 = 1;
/// The maximum receive buffer size ZooKeeper's server offers, bytes: Java's default of
/// `javax.security.sasl.maxbuffer`, which ZooKeeper does not set.
pub const MAX_RECV_SIZE: u32 = 65536;

/// The Kerberos library calls the exchange needs, on one connection's acceptor context.
/// Errors are the library's messages (for the server's log).
pub trait SecurityContext {
    /// gss_accept_sec_context on the client's `token`: the token to send back, if any.
    fn accept(&mut self, token: &[u8]) -> Result<Option<Vec<u8>>, String>;
    /// Whether the context is established (after the last [`SecurityContext::accept`]).
    fn is_established(&self) -> bool;
    /// The client's principal (`name/host@REALM` or `name@REALM`) once established.
    fn source_name(&mut self) -> Result<String, String>;
    /// gss_wrap with integrity only (no confidentiality), as Java's MessageProp(0, false).
    fn wrap(&mut self, message: &[u8]) -> Result<Vec<u8>, String>;
    /// gss_unwrap.
    fn unwrap(&mut self, token: &[u8]) -> Result<Vec<u8>, String>;
}

/// Why a token was refused. The client only sees AUTHFAILED (ZooKeeper's processSasl);
/// the text is for the server's log, worded as Java's SaslExceptions.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GssapiError {
    #[error("GSS initiate failed: {0}")]
    Kerberos(String),
    #[error("Final handshake step failed: expected empty response from client")]
    ExpectedEmpty,
    #[error("Final handshake failed: expected at least 4 bytes, got {0}")]
    ShortLayerAnswer(usize),
    #[error("Client selected unsupported protection: {0}")]
    UnsupportedLayer(u8),
    #[error("GSSAPI: authorization id is not UTF-8")]
    AuthzidNotUtf8,
    #[error("GSSAPI: server at illegal state")]
    IllegalState,
}

/// What a successful [`GssapiServer::evaluate`] gives the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The next token for the client; the exchange goes on.
    Challenge(Vec<u8>),
    /// The exchange is complete (the reply's token is null, as Java's last
    /// `evaluateResponse` returns null): the client is `authentication_id` (its
    /// principal) and asked to act as `authorization_id` (its principal if it named none).
    Complete {
        authentication_id: String,
        authorization_id: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Tokens go to the context until it is established.
    Accepting,
    /// The context is established and its last token went out: the client's next
    /// token must be empty, then the offer goes out.
    Established,
    /// The offer went out: the next token is the client's wrapped answer.
    Offered,
    /// Completed or failed: every further token is refused.
    Done,
}

/// One connection's GSSAPI exchange over its acceptor context `C`.
pub struct GssapiServer<C> {
    context: C,
    state: State,
}

impl<C: SecurityContext> GssapiServer<C> {
    /// A new exchange on a fresh acceptor context.
    pub fn new(context: C) -> Self {
        GssapiServer {
            context,
            state: State::Accepting,
        }
    }

    /// Evaluates the client's next token. Any error ends the exchange: later tokens
    /// get [`GssapiError::IllegalState`].
    ///
    /// Errors: see [`GssapiError`]; the checks are those of Java's
    /// `GssKrb5Server.evaluateResponse` (doHandshake0, 1 and 2).
    pub fn evaluate(&mut self, token: &[u8]) -> Result<Step, GssapiError> {
        let state = std::mem::replace(&mut self.state, State::Done);
        let step = match state {
            State::Accepting => self.accept(token)?,
            State::Established => {
                if !token.is_empty() {
                    return Err(GssapiError::ExpectedEmpty);
                }
                self.offer()?
            }
            State::Offered => return self.answer(token),
            State::Done => return Err(GssapiError::IllegalState),
        };
        Ok(step)
    }

    fn accept(&mut self, token: &[u8]) -> Result<Step, GssapiError> {
        let out = self.context.accept(token).map_err(GssapiError::Kerberos)?;
        if !self.context.is_established() {
            self.state = State::Accepting;
            return Ok(Step::Challenge(out.unwrap_or_default()));
        }
        match out {
            Some(out) if !out.is_empty() => {
                self.state = State::Established;
                Ok(Step::Challenge(out))
            }
            _ => self.offer(),
        }
    }

    /// Sends the wrapped offer: the layers supported, then the maximum receive size in
    /// 3 bytes, network order (RFC 4752 3.1).
    fn offer(&mut self) -> Result<Step, GssapiError> {
        let size = MAX_RECV_SIZE.to_be_bytes();
        let offer = [LAYER_NONE, size[1], size[2], size[3]];
        let wrapped = self.context.wrap(&offer).map_err(GssapiError::Kerberos)?;
        self.state = State::Offered;
        Ok(Step::Challenge(wrapped))
    }

    /// Reads the client's wrapped answer: its layer (one the offer has), its maximum
    /// size and the authorization id (the rest, UTF-8; empty: its own principal).
    fn answer(&mut self, token: &[u8]) -> Result<Step, GssapiError> {
        let answer = self.context.unwrap(token).map_err(GssapiError::Kerberos)?;
        if answer.len() < 4 {
            return Err(GssapiError::ShortLayerAnswer(answer.len()));
        }
        if answer[0] & LAYER_NONE == 0 {
            return Err(GssapiError::UnsupportedLayer(answer[0]));
        }
        let authentication_id = self.context.source_name().map_err(GssapiError::Kerberos)?;
        let authzid = std::str::from_utf8(&answer[4..]).map_err(|_| GssapiError::AuthzidNotUtf8)?;
        let authorization_id = if authzid.is_empty() {
            authentication_id.clone()
        } else {
            authzid.to_string()
        };
        Ok(Step::Complete {
            authentication_id,
            authorization_id,
        })
    }
}

/// The Kerberos library calls the client side needs, on one connection's initiator
/// context (its real implementation is `net::gss`). Errors are the library's messages.
pub trait InitiatorContext {
    /// gss_init_sec_context on the server's `token` (empty the first time): the token
    /// to send, if any.
    fn init(&mut self, token: &[u8]) -> Result<Option<Vec<u8>>, String>;
    /// Whether the context is established (after the last [`InitiatorContext::init`]).
    fn is_established(&self) -> bool;
    /// gss_wrap with integrity only.
    fn wrap(&mut self, message: &[u8]) -> Result<Vec<u8>, String>;
    /// gss_unwrap.
    fn unwrap(&mut self, token: &[u8]) -> Result<Vec<u8>, String>;
}

/// One connection's GSSAPI exchange, client side (RFC 4752 3.1), as Java's
/// `GssKrb5Client` runs it for ZooKeeper's quorum learner: an initial response (the
/// context's first token); the server's tokens go to the context until it is
/// established (then an empty token answers, as Java's client sends); the server's
/// wrapped security layer offer is answered wrapped with no security layer, a
/// maximum size of 0 and `authzid` (Java's client names its own principal).
pub struct GssapiClient<C> {
    context: C,
    authzid: String,
    /// The context is established: the next server token is the offer.
    established: bool,
    complete: bool,
}

impl<C: InitiatorContext> GssapiClient<C> {
    /// A new exchange on a fresh initiator context, asking to act as `authzid`.
    pub fn new(context: C, authzid: &str) -> Self {
        GssapiClient {
            context,
            authzid: authzid.to_string(),
            established: false,
            complete: false,
        }
    }

    /// Whether the answer to the offer went out.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// The initial response: the context's first token.
    ///
    /// Errors: the library's (no ticket for the server's principal, no credential).
    pub fn initial_response(&mut self) -> Result<Vec<u8>, GssapiError> {
        let out = self.context.init(&[]).map_err(GssapiError::Kerberos)?;
        self.established = self.context.is_established();
        Ok(out.unwrap_or_default())
    }

    /// Evaluates the server's next token: the token to send back.
    ///
    /// Errors: the library's; an offer without the no-layer bit
    /// ([`GssapiError::UnsupportedLayer`]) or shorter than 4 bytes; a token after
    /// completion ([`GssapiError::IllegalState`]).
    pub fn evaluate(&mut self, token: &[u8]) -> Result<Vec<u8>, GssapiError> {
        if self.complete {
            return Err(GssapiError::IllegalState);
        }
        if !self.established {
            let out = self.context.init(token).map_err(GssapiError::Kerberos)?;
            self.established = self.context.is_established();
            return Ok(out.unwrap_or_default());
        }
        let offer = self.context.unwrap(token).map_err(GssapiError::Kerberos)?;
        if offer.len() < 4 {
            return Err(GssapiError::ShortLayerAnswer(offer.len()));
        }
        if offer[0] & LAYER_NONE == 0 {
            return Err(GssapiError::UnsupportedLayer(offer[0]));
        }
        let mut answer = vec![LAYER_NONE, 0, 0, 0];
        answer.extend_from_slice(self.authzid.as_bytes());
        let wrapped = self.context.wrap(&answer).map_err(GssapiError::Kerberos)?;
        self.complete = true;
        Ok(wrapped)
    }
}

/// The parts of a Kerberos principal `service/host@REALM` (ZooKeeper's KerberosName).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KerberosName<'a> {
    pub service: &'a str,
    pub host: Option<&'a str>,
    pub realm: Option<&'a str>,
}

impl<'a> KerberosName<'a> {
    /// Splits `name` as KerberosName's pattern `([^/@]*)(/([^/@]*))?@([^/@]*)` does; a
    /// name without `@` (and without `/`) is a bare service name. `None`: malformed
    /// (Java throws "Malformed Kerberos name").
    pub fn parse(name: &'a str) -> Option<Self> {
        let Some((principal, realm)) = name.split_once('@') else {
            return (!name.contains('/')).then_some(KerberosName {
                service: name,
                host: None,
                realm: None,
            });
        };
        if realm.contains(['/', '@']) {
            return None;
        }
        let (service, host) = match principal.split_once('/') {
            Some((_, h)) if h.contains('/') => return None,
            Some((s, h)) => (s, Some(h)),
            None => (principal, None),
        };
        Some(KerberosName {
            service,
            host,
            realm: Some(realm),
        })
    }

    /// The short name by the DEFAULT auth_to_local rule (`zookeeper.security.auth_to_local`
    /// unset): the service name of a principal of `default_realm` or of a bare name;
    /// `None` for another realm (Java: NoMatchingRule).
    pub fn short_name(&self, default_realm: &str) -> Option<&'a str> {
        match self.realm {
            None if self.host.is_none() => Some(self.service),
            Some(realm) if realm == default_realm => Some(self.service),
            _ => None,
        }
    }
}

/// How ZooKeeper names a Kerberos client (SaslServerCallbackHandler.handleAuthorizeCallback):
/// the default realm of the Kerberos configuration and the
/// `zookeeper.kerberos.removeHostFromPrincipal` / `removeRealmFromPrincipal` properties.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NameRules {
    pub default_realm: String,
    pub remove_host: bool,
    pub remove_realm: bool,
}

impl NameRules {
    /// The identity a completed exchange gets (`sasl:<it>`): the short name of the
    /// authenticated principal, then `/host` unless removed, then `@REALM` unless
    /// removed. When no rule gives a short name (another realm, a malformed name)
    /// ZooKeeper logs the error and keeps the `authorization_id` the client asked for.
    pub fn authorized_id(&self, authentication_id: &str, authorization_id: &str) -> String {
        let Some(name) = KerberosName::parse(authentication_id) else {
            return authorization_id.to_string();
        };
        let Some(short) = name.short_name(&self.default_realm) else {
            return authorization_id.to_string();
        };
        let mut id = short.to_string();
        if let (Some(host), false) = (name.host, self.remove_host) {
            id.push('/');
            id.push_str(host);
        }
        if let (Some(realm), false) = (name.realm, self.remove_realm) {
            id.push('@');
            id.push_str(realm);
        }
        id
    }
}

/// The `default_realm` of a krb5.conf's `[libdefaults]` section, if set.
pub fn default_realm(krb5_conf: &str) -> Option<String> {
    let mut in_libdefaults = false;
    for line in krb5_conf.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_libdefaults = line == "[libdefaults]";
        } else if in_libdefaults {
            if let Some((key, value)) = line.split_once('=') {
                if key.trim() == "default_realm" {
                    return Some(value.trim().to_string());
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fakes' "wrap": a `W` prefix.
    fn fake_wrap(message: &[u8]) -> Vec<u8> {
        [b"W".as_slice(), message].concat()
    }

    fn fake_unwrap(token: &[u8]) -> Result<Vec<u8>, String> {
        token
            .strip_prefix(b"W")
            .map(<[u8]>::to_vec)
            .ok_or_else(|| "Defective token".into())
    }

    /// A context that "wraps" by prefixing `W` and establishes after `rounds` tokens,
    /// answering each with `rounds_left` in one byte (the last one with `final_token`).
    struct Fake {
        rounds: usize,
        final_token: Option<Vec<u8>>,
        established: bool,
    }

    impl SecurityContext for Fake {
        fn accept(&mut self, token: &[u8]) -> Result<Option<Vec<u8>>, String> {
            if token == b"bad" {
                return Err("Checksum failed".into());
            }
            self.rounds -= 1;
            if self.rounds == 0 {
                self.established = true;
                return Ok(self.final_token.clone());
            }
            Ok(Some(vec![self.rounds as u8]))
        }
        fn is_established(&self) -> bool {
            self.established
        }
        fn source_name(&mut self) -> Result<String, String> {
            Ok("client@KEEL.TEST".into())
        }
        fn wrap(&mut self, message: &[u8]) -> Result<Vec<u8>, String> {
            Ok(fake_wrap(message))
        }
        fn unwrap(&mut self, token: &[u8]) -> Result<Vec<u8>, String> {
            fake_unwrap(token)
        }
    }

    fn server(rounds: usize, final_token: Option<&[u8]>) -> GssapiServer<Fake> {
        GssapiServer::new(Fake {
            rounds,
            final_token: final_token.map(<[u8]>::to_vec),
            established: false,
        })
    }

    const OFFER: [u8; 5] = [b'W', 1, 0x01, 0x00, 0x00];

    /// An initiator that sends "ap-req", is established by "ap-rep", wraps as [`Fake`].
    struct FakeInitiator {
        established: bool,
    }

    impl InitiatorContext for FakeInitiator {
        fn init(&mut self, token: &[u8]) -> Result<Option<Vec<u8>>, String> {
            match token {
                b"" => Ok(Some(b"ap-req".to_vec())),
                b"ap-rep" => {
                    self.established = true;
                    Ok(None)
                }
                _ => Err("Defective token".into()),
            }
        }
        fn is_established(&self) -> bool {
            self.established
        }
        fn wrap(&mut self, message: &[u8]) -> Result<Vec<u8>, String> {
            Ok(fake_wrap(message))
        }
        fn unwrap(&mut self, token: &[u8]) -> Result<Vec<u8>, String> {
            fake_unwrap(token)
        }
    }

    #[test]
    fn client_and_server_complete_with_mutual_authentication() {
        let mut c = GssapiClient::new(FakeInitiator { established: false }, "learner/h@KEEL.TEST");
        let mut s = server(1, Some(b"ap-rep"));
        let mut token = c.initial_response().unwrap();
        assert_eq!(token, b"ap-req");
        let outcome = loop {
            match s.evaluate(&token).unwrap() {
                Step::Challenge(challenge) => token = c.evaluate(&challenge).unwrap(),
                done @ Step::Complete { .. } => break done,
            }
        };
        assert!(c.is_complete());
        assert_eq!(
            outcome,
            Step::Complete {
                authentication_id: "client@KEEL.TEST".into(),
                authorization_id: "learner/h@KEEL.TEST".into(),
            }
        );
        assert_eq!(c.evaluate(b""), Err(GssapiError::IllegalState));
        // An offer without the no-layer bit is refused.
        let mut c = GssapiClient::new(FakeInitiator { established: true }, "x");
        c.established = true;
        assert_eq!(
            c.evaluate(&[b'W', 4, 0, 0, 0]),
            Err(GssapiError::UnsupportedLayer(4))
        );
    }

    #[test]
    fn mutual_authentication_waits_for_an_empty_token_then_offers() {
        let mut s = server(1, Some(b"ap-rep"));
        assert_eq!(
            s.evaluate(b"ap-req"),
            Ok(Step::Challenge(b"ap-rep".to_vec()))
        );
        assert_eq!(s.evaluate(b""), Ok(Step::Challenge(OFFER.to_vec())));
        assert_eq!(
            s.evaluate(b"W\x01\x00\x10\x00alice@KEEL.TEST"),
            Ok(Step::Complete {
                authentication_id: "client@KEEL.TEST".into(),
                authorization_id: "alice@KEEL.TEST".into(),
            })
        );
        assert_eq!(s.evaluate(b""), Err(GssapiError::IllegalState));
    }

    #[test]
    fn no_output_token_offers_at_once_and_empty_authzid_is_the_principal() {
        let mut s = server(2, None);
        assert_eq!(s.evaluate(b"t1"), Ok(Step::Challenge(vec![1])));
        assert_eq!(s.evaluate(b"t2"), Ok(Step::Challenge(OFFER.to_vec())));
        assert_eq!(
            s.evaluate(b"W\x01\x00\x00\x00"),
            Ok(Step::Complete {
                authentication_id: "client@KEEL.TEST".into(),
                authorization_id: "client@KEEL.TEST".into(),
            })
        );
    }

    #[test]
    fn bad_tokens_fail_and_end_the_exchange() {
        let mut s = server(1, Some(b"ap-rep"));
        assert!(matches!(s.evaluate(b"bad"), Err(GssapiError::Kerberos(_))));
        assert_eq!(s.evaluate(b"ap-req"), Err(GssapiError::IllegalState));

        let mut s = server(1, Some(b"ap-rep"));
        s.evaluate(b"ap-req").unwrap();
        assert_eq!(s.evaluate(b"x"), Err(GssapiError::ExpectedEmpty));

        let mut s = server(1, None);
        s.evaluate(b"ap-req").unwrap();
        assert_eq!(
            s.evaluate(b"W\x04\x00\x00\x00"),
            Err(GssapiError::UnsupportedLayer(4))
        );
        let mut s = server(1, None);
        s.evaluate(b"ap-req").unwrap();
        assert_eq!(
            s.evaluate(b"W\x01\x00"),
            Err(GssapiError::ShortLayerAnswer(2))
        );
        let mut s = server(1, None);
        s.evaluate(b"ap-req").unwrap();
        assert!(matches!(
            s.evaluate(b"\x01\x00\x00\x00"),
            Err(GssapiError::Kerberos(_))
        ));
    }

    #[test]
    fn default_realm_is_read_from_libdefaults_only() {
        let conf = "[realms]\n default_realm = NO\n[libdefaults]\n  rdns = false\n  default_realm = KEEL.TEST\n";
        assert_eq!(default_realm(conf).as_deref(), Some("KEEL.TEST"));
        assert_eq!(default_realm("[realms]\ndefault_realm = NO\n"), None);
    }

    #[test]
    fn kerberos_names_split_as_zookeeper() {
        let n = KerberosName::parse("zookeeper/127.0.0.1@KEEL.TEST").unwrap();
        assert_eq!(
            (n.service, n.host, n.realm),
            ("zookeeper", Some("127.0.0.1"), Some("KEEL.TEST"))
        );
        let n = KerberosName::parse("client@KEEL.TEST").unwrap();
        assert_eq!(
            (n.service, n.host, n.realm),
            ("client", None, Some("KEEL.TEST"))
        );
        let n = KerberosName::parse("bare").unwrap();
        assert_eq!((n.service, n.host, n.realm), ("bare", None, None));
        assert_eq!(KerberosName::parse("a/b/c@R"), None);
        assert_eq!(KerberosName::parse("a@R@S"), None);
        assert_eq!(KerberosName::parse("a/b"), None);
    }

    #[test]
    fn authorized_id_applies_the_remove_properties() {
        let mut rules = NameRules {
            default_realm: "KEEL.TEST".into(),
            ..NameRules::default()
        };
        let host = "zk/h1.example@KEEL.TEST";
        assert_eq!(rules.authorized_id(host, host), "zk/h1.example@KEEL.TEST");
        assert_eq!(
            rules.authorized_id("client@KEEL.TEST", "x"),
            "client@KEEL.TEST"
        );
        rules.remove_host = true;
        assert_eq!(rules.authorized_id(host, host), "zk@KEEL.TEST");
        rules.remove_realm = true;
        assert_eq!(rules.authorized_id(host, host), "zk");
        assert_eq!(rules.authorized_id("client@KEEL.TEST", "x"), "client");
        // Another realm has no short name: the authorization id asked for stays.
        assert_eq!(
            rules.authorized_id("client@OTHER.TEST", "client@OTHER.TEST"),
            "client@OTHER.TEST"
        );
    }
}

//! The DIGEST-MD5 SASL mechanism, server side (RFC 2831), as ZooKeeper 3.8 runs it for
//! clients: Java's `DigestMD5Server` created by `SecurityUtils.createSaslServer` with
//! protocol `zookeeper` and server name `zk-sasl-md5` (so the realm offered is
//! `zk-sasl-md5` and the digest-uri expected `zookeeper/zk-sasl-md5`), qop `auth` only.
//!
//! Sans-I/O: the nonce is made from randomness the caller passes in, and passwords come
//! from a lookup the caller passes in; [`DigestMd5Server::evaluate`] only computes.
//!
//! The exchange: the client's first token is empty (RFC 2831 2.1: DIGEST-MD5 has no
//! initial response; ZooKeeper's server, run, ignores what a first token holds) and the
//! server answers the digest-challenge (2.1.1); the client's digest-response (2.1.2) is checked
//! and answered with `rspauth=...` (2.1.3), after which the exchange is complete. Any
//! other token, any token after the first failure or after completion, is an error
//! (Java's server is then in its invalid step 0).

use base64::Engine;
use md5::{Digest, Md5};
use std::fmt::Write as _;

/// The protocol (service) name ZooKeeper's server passes to `Sasl.createSaslServer`.
pub const PROTOCOL: &str = "zookeeper";
/// The server name ZooKeeper passes for DIGEST-MD5 (`SecurityUtils.createSaslServer`),
/// which Java's DIGEST-MD5 server also offers as its only realm.
pub const SERVER_NAME: &str = "zk-sasl-md5";
/// The names a DIGEST-MD5 exchange runs under: the protocol and server name given to
/// `Sasl.createSaslServer` / `createSaslClient` (the realm offered is the server name,
/// the digest-uri `protocol/server name`), and whether an authzid other than the user
/// is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Names {
    /// The protocol (service) name.
    pub protocol: &'static str,
    /// The server name, also the only realm offered.
    pub server_name: &'static str,
    /// Refuse a response whose authzid differs from its username (ZooKeeper's
    /// SaslQuorumServerCallbackHandler: authenticationID must equal authorizationID);
    /// the client handler authorizes every user under its own name.
    pub authzid_must_match: bool,
}

/// Client SASL (op 102): `zookeeper` / `zk-sasl-md5` (SecurityUtils.createSaslServer).
pub const CLIENT_NAMES: Names = Names {
    protocol: PROTOCOL,
    server_name: SERVER_NAME,
    authzid_must_match: false,
};

/// Quorum SASL between members: `zookeeper-quorum` / `zk-quorum-sasl-md5`
/// (QuorumAuth.QUORUM_SERVER_PROTOCOL_NAME, QUORUM_SERVER_SASL_DIGEST; ZAB-WIRE.md
/// "Quorum SASL").
pub const QUORUM_NAMES: Names = Names {
    protocol: "zookeeper-quorum",
    server_name: "zk-quorum-sasl-md5",
    authzid_must_match: true,
};

/// Longest token Java's DigestMD5Server evaluates (`MAX_RESPONSE_LENGTH`), bytes.
pub const MAX_RESPONSE_LENGTH: usize = 4096;
/// Random bytes in a nonce (Java's `RAW_NONCE_SIZE`); base64, 40 characters on the wire.
pub const RAW_NONCE_SIZE: usize = 30;

/// Why a token was refused. The client only ever sees AUTHFAILED (ZooKeeper's
/// processSasl); the text is for the server's log, worded as Java's SaslExceptions.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DigestError {
    #[error(
        "DIGEST-MD5: Invalid digest response length. Got: {0} Expected < {MAX_RESPONSE_LENGTH}"
    )]
    TooLong(usize),
    #[error("DIGEST-MD5: Server at illegal state")]
    IllegalState,
    #[error("DIGEST-MD5: digest response format violation: {0}")]
    Format(String),
    #[error("DIGEST-MD5: peer sent more than one {0} directive")]
    Duplicate(String),
    #[error("DIGEST-MD5: cannot acquire password for {0} in realm : {1}")]
    UnknownUser(String, String),
    #[error("DIGEST-MD5: digest response format violation. Mismatched response.")]
    MismatchedResponse,
    #[error("DIGEST-MD5: {0} is not authorized to act as {1}")]
    NotAuthorized(String, String),
    /// Client side: the server's challenge cannot be answered.
    #[error("DIGEST-MD5: {0}")]
    BadChallenge(String),
    /// Client side: the server's rspauth is not the one this password gives: the
    /// server does not know the password (or is not the server it claims).
    #[error("DIGEST-MD5: mismatched response-auth")]
    MismatchedResponseAuth,
}

/// What a successful [`DigestMd5Server::evaluate`] gives the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The digest-challenge; the exchange goes on.
    Challenge(Vec<u8>),
    /// The response-auth (`rspauth=...`): the client is authenticated as
    /// `authorization_id` (ZooKeeper's SaslServerCallbackHandler authorizes every
    /// authenticated user under its own name, whatever authzid it asked for).
    Complete {
        token: Vec<u8>,
        authorization_id: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Waiting for the client's empty first token.
    Start,
    /// The challenge with this nonce went out; waiting for the digest-response.
    Challenged,
    /// Completed or failed: every further token is refused.
    Done,
}

/// One connection's DIGEST-MD5 exchange.
#[derive(Debug, Clone)]
pub struct DigestMd5Server {
    state: State,
    nonce: String,
    names: Names,
}

/// The directives of a digest-response this server reads (RFC 2831 2.1.2).
#[derive(Default)]
struct Response {
    username: Option<String>,
    realm: Option<String>,
    nonce: Option<String>,
    cnonce: Option<String>,
    nc: Option<String>,
    qop: Option<String>,
    digest_uri: Option<String>,
    response: Option<String>,
    charset: Option<String>,
    authzid: Option<String>,
}

impl DigestMd5Server {
    /// A new exchange whose nonce is `random` in base64 (Java's `generateNonce`: 30
    /// random bytes, 40 base64 characters). `random` must be fresh per connection: it
    /// is what makes a recorded response useless on another connection.
    pub fn new(random: [u8; RAW_NONCE_SIZE]) -> Self {
        Self::with_names(random, CLIENT_NAMES)
    }

    /// As [`DigestMd5Server::new`], under `names` ([`QUORUM_NAMES`] between members).
    pub fn with_names(random: [u8; RAW_NONCE_SIZE], names: Names) -> Self {
        DigestMd5Server {
            state: State::Start,
            nonce: base64::engine::general_purpose::STANDARD.encode(random),
            names,
        }
    }

    /// This exchange's nonce.
    pub fn nonce(&self) -> &str {
        &self.nonce
    }

    /// Evaluates the client's next token. `password` gives the password of a user
    /// (`None`: unknown, which fails as Java's server does when its callback finds no
    /// password). Any error ends the exchange: later tokens get
    /// [`DigestError::IllegalState`].
    ///
    /// Errors: see [`DigestError`]; the checks and their order are those of Java's
    /// `DigestMD5Server.evaluateResponse` and `validateClientResponse`.
    pub fn evaluate(
        &mut self,
        token: &[u8],
        password: impl FnOnce(&str) -> Option<String>,
    ) -> Result<Step, DigestError> {
        if token.len() > MAX_RESPONSE_LENGTH {
            return Err(DigestError::TooLong(token.len()));
        }
        match self.state {
            State::Start => {
                self.state = State::Challenged;
                Ok(Step::Challenge(self.challenge()))
            }
            State::Challenged => {
                // Java sets its invalid step before validating: one attempt only.
                self.state = State::Done;
                self.validate(token, password)
            }
            State::Done => Err(DigestError::IllegalState),
        }
    }

    /// The digest-challenge (RFC 2831 2.1.1) as ZooKeeper's server sends it: realm,
    /// nonce, charset (utf-8 offered), algorithm. No qop directive: `auth`, the only
    /// qop offered, is the default (Java writes qop only for other settings).
    fn challenge(&self) -> Vec<u8> {
        format!(
            "realm=\"{}\",nonce=\"{}\",charset=utf-8,algorithm=md5-sess",
            self.names.server_name, self.nonce
        )
        .into_bytes()
    }

    fn validate(
        &self,
        token: &[u8],
        password: impl FnOnce(&str) -> Option<String>,
    ) -> Result<Step, DigestError> {
        let r = parse_response(token)?;
        let format = |what: &str| DigestError::Format(what.to_string());
        if r.charset.as_deref().is_some_and(|c| c != "utf-8") {
            return Err(format("Incompatible charset value"));
        }
        let username = r.username.ok_or_else(|| format("Missing username."))?;
        let realm = r.realm.unwrap_or_default();
        if realm != self.names.server_name {
            return Err(DigestError::Format(format!("Nonexistent realm: {realm}")));
        }
        let nonce = r.nonce.ok_or_else(|| format("Missing nonce."))?;
        if nonce != self.nonce {
            return Err(format("Mismatched nonce."));
        }
        let cnonce = r.cnonce.ok_or_else(|| format("Missing cnonce."))?;
        // RFC 2831 2.1.2: nc counts this nonce's uses; the first (only) one is 1.
        if let Some(nc) = &r.nc {
            if u32::from_str_radix(nc, 16) != Ok(1) {
                return Err(DigestError::Format(format!(
                    "Nonce count does not match: {nc}"
                )));
            }
        }
        let qop = r.qop.unwrap_or_else(|| "auth".to_string());
        if qop != "auth" {
            return Err(DigestError::Format(format!("Invalid QOP: {qop}")));
        }
        let expected_uri = format!("{}/{}", self.names.protocol, self.names.server_name);
        let digest_uri = r
            .digest_uri
            .filter(|u| u.eq_ignore_ascii_case(&expected_uri))
            .ok_or_else(|| format("Mismatched URI"))?;
        let response = r.response.ok_or_else(|| format("Missing response."))?;
        let Some(passwd) = password(&username) else {
            return Err(DigestError::UnknownUser(username, realm));
        };
        let parts = Parts {
            username: &username,
            realm: &realm,
            passwd: &passwd,
            nonce: &self.nonce,
            cnonce: &cnonce,
            authzid: r.authzid.as_deref(),
            qop: &qop,
            digest_uri: &digest_uri,
        };
        if response.as_bytes() != parts.response_value("AUTHENTICATE").as_bytes() {
            return Err(DigestError::MismatchedResponse);
        }
        if let Some(authzid) = r.authzid.as_deref() {
            if self.names.authzid_must_match && authzid != username {
                return Err(DigestError::NotAuthorized(username, authzid.to_string()));
            }
        }
        let token = format!("rspauth={}", parts.response_value("")).into_bytes();
        Ok(Step::Complete {
            token,
            authorization_id: username,
        })
    }
}

/// A client's digest-response to `nonce` for `user` and `passwd` (RFC 2831 2.1.2,
/// as ZooKeeper's Java client sends it), for tests that play the client.
#[cfg(test)]
pub(crate) fn client_response(user: &str, passwd: &str, nonce: &str, cnonce: &str) -> String {
    let parts = Parts {
        username: user,
        realm: SERVER_NAME,
        passwd,
        nonce,
        cnonce,
        authzid: None,
        qop: "auth",
        digest_uri: "zookeeper/zk-sasl-md5",
    };
    format!(
        "charset=utf-8,username=\"{user}\",realm=\"{SERVER_NAME}\",nonce=\"{nonce}\",\
         nc=00000001,cnonce=\"{cnonce}\",digest-uri=\"zookeeper/zk-sasl-md5\",\
         maxbuf=65536,response={},qop=auth",
        parts.response_value("AUTHENTICATE")
    )
}

/// One connection's DIGEST-MD5 exchange, client side (RFC 2831 2.1.2), as Java's
/// `DigestMD5Client` runs it for ZooKeeper's quorum learner: no initial response; the
/// digest-challenge is answered with a digest-response for qop `auth` (charset utf-8
/// when offered, the first realm offered, no authzid); the server's rspauth is then
/// checked, which completes the exchange. Sans-I/O: the cnonce comes from randomness
/// the caller passes in.
#[derive(Debug, Clone)]
pub struct DigestMd5Client {
    names: Names,
    username: String,
    password: String,
    cnonce: String,
    /// The rspauth the server must send, once the digest-response went out.
    expected_rspauth: Option<String>,
    complete: bool,
}

impl DigestMd5Client {
    /// A client for `username` / `password` under `names`; `random` makes the cnonce
    /// (30 bytes, base64, as Java's).
    pub fn new(names: Names, username: &str, password: &str, random: [u8; RAW_NONCE_SIZE]) -> Self {
        DigestMd5Client {
            names,
            username: username.to_string(),
            password: password.to_string(),
            cnonce: base64::engine::general_purpose::STANDARD.encode(random),
            expected_rspauth: None,
            complete: false,
        }
    }

    /// Whether the server's rspauth was checked.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// Evaluates the server's next token: the digest-challenge gives `Some(response)`;
    /// the `rspauth=...` after it gives `None` and completes the exchange.
    ///
    /// Errors: [`DigestError::BadChallenge`] for a challenge without a nonce, with an
    /// algorithm other than md5-sess or without qop `auth`, or a token after
    /// completion; [`DigestError::MismatchedResponseAuth`] for a wrong rspauth.
    pub fn evaluate(&mut self, token: &[u8]) -> Result<Option<Vec<u8>>, DigestError> {
        let bad = |what: &str| DigestError::BadChallenge(what.to_string());
        if self.complete {
            return Err(bad("token after completion"));
        }
        if let Some(expected) = self.expected_rspauth.take() {
            let directives = parse_directives(token)?;
            let got = directives
                .iter()
                .find(|(k, _)| k == "rspauth")
                .map(|(_, v)| v.as_str());
            if got != Some(expected.as_str()) {
                return Err(DigestError::MismatchedResponseAuth);
            }
            self.complete = true;
            return Ok(None);
        }
        if token.len() > MAX_RESPONSE_LENGTH {
            return Err(bad("challenge too long"));
        }
        let directives = parse_directives(token)?;
        let first = |key: &str| {
            directives
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
        };
        let nonce = first("nonce").ok_or_else(|| bad("challenge without a nonce"))?;
        if !first("algorithm").is_some_and(|a| a.eq_ignore_ascii_case("md5-sess")) {
            return Err(bad("challenge without algorithm=md5-sess"));
        }
        if let Some(qops) = first("qop") {
            if !qops.split(',').any(|q| q.trim() == "auth") {
                return Err(bad("qop auth not offered"));
            }
        }
        let realm = first("realm");
        let digest_uri = format!("{}/{}", self.names.protocol, self.names.server_name);
        let parts = Parts {
            username: &self.username,
            realm: realm.as_deref().unwrap_or(""),
            passwd: &self.password,
            nonce: &nonce,
            cnonce: &self.cnonce,
            authzid: None,
            qop: "auth",
            digest_uri: &digest_uri,
        };
        let mut out = String::new();
        if first("charset").is_some_and(|c| c.eq_ignore_ascii_case("utf-8")) {
            out.push_str("charset=utf-8,");
        }
        let _ = write!(out, "username={}", quoted(&self.username));
        if let Some(realm) = &realm {
            let _ = write!(out, ",realm={}", quoted(realm));
        }
        let _ = write!(
            out,
            ",nonce={},nc=00000001,cnonce={},digest-uri={},maxbuf=65536,response={},qop=auth",
            quoted(&nonce),
            quoted(&self.cnonce),
            quoted(&digest_uri),
            parts.response_value("AUTHENTICATE")
        );
        self.expected_rspauth = Some(parts.response_value(""));
        Ok(Some(out.into_bytes()))
    }
}

/// A quoted-string (RFC 2831 1.2): `"` and `\` escaped with a backslash.
fn quoted(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// What the response-value is computed from (RFC 2831 2.1.2.1).
struct Parts<'a> {
    username: &'a str,
    realm: &'a str,
    passwd: &'a str,
    nonce: &'a str,
    cnonce: &'a str,
    authzid: Option<&'a str>,
    qop: &'a str,
    digest_uri: &'a str,
}

impl Parts<'_> {
    /// `HEX(KD(HEX(H(A1)), nonce:nc:cnonce:qop:HEX(H(A2))))` with
    /// `A1 = H(user:realm:passwd):nonce:cnonce[:authzid]` and `A2 = method:digest-uri`:
    /// method `AUTHENTICATE` for the client's response, empty for rspauth (2.1.3).
    fn response_value(&self, method: &str) -> String {
        let mut secret = Md5::new();
        secret.update(latin1_or_utf8(self.username));
        secret.update(b":");
        secret.update(latin1_or_utf8(self.realm));
        secret.update(b":");
        secret.update(latin1_or_utf8(self.passwd));
        let mut a1 = Md5::new();
        a1.update(secret.finalize());
        a1.update(format!(":{}:{}", self.nonce, self.cnonce));
        if let Some(authzid) = self.authzid {
            a1.update(b":");
            a1.update(authzid.as_bytes());
        }
        let a2 = Md5::digest(format!("{method}:{}", self.digest_uri));
        let kd = Md5::digest(format!(
            "{}:{}:00000001:{}:{}:{}",
            hex(&a1.finalize()),
            self.nonce,
            self.cnonce,
            self.qop,
            hex(&a2)
        ));
        hex(&kd)
    }
}

/// RFC 2831 2.1.2.1: with charset=utf-8, user name, realm and password are hashed in
/// ISO 8859-1 when every character fits it, in UTF-8 otherwise.
fn latin1_or_utf8(s: &str) -> Vec<u8> {
    if s.chars().all(|c| (c as u32) < 0x100) {
        s.chars().map(|c| c as u8).collect()
    } else {
        s.as_bytes().to_vec()
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Parses a digest-response: `1#(key=value)` with values a token or a quoted-string
/// (backslash quotes the next character), list elements separated by commas with
/// optional white space, empty elements allowed (RFC 2831 1.2's `#rule`). Keys are
/// case-insensitive; unknown ones are ignored; a known one twice is an error (realm
/// included: the response carries one realm).
fn parse_response(token: &[u8]) -> Result<Response, DigestError> {
    let mut r = Response::default();
    for (key, value) in parse_directives(token)? {
        let slot = match key.as_str() {
            "username" => &mut r.username,
            "realm" => &mut r.realm,
            "nonce" => &mut r.nonce,
            "cnonce" => &mut r.cnonce,
            "nc" => &mut r.nc,
            "qop" => &mut r.qop,
            "digest-uri" => &mut r.digest_uri,
            "response" => &mut r.response,
            "charset" => &mut r.charset,
            "authzid" => &mut r.authzid,
            _ => continue,
        };
        if slot.is_some() {
            return Err(DigestError::Duplicate(key));
        }
        *slot = Some(value);
    }
    Ok(r)
}

/// Splits a DIGEST-MD5 token into its `(lower-case key, unquoted value)` directives in
/// order (the `#rule` of RFC 2831 1.2, see [`parse_response`]).
fn parse_directives(token: &[u8]) -> Result<Vec<(String, String)>, DigestError> {
    let text = std::str::from_utf8(token)
        .map_err(|_| DigestError::Format("response is not UTF-8".to_string()))?;
    let mut out = Vec::new();
    let mut rest = text;
    loop {
        rest = rest.trim_start_matches([' ', '\t', '\r', '\n', ',']);
        if rest.is_empty() {
            return Ok(out);
        }
        let eq = rest
            .find('=')
            .ok_or_else(|| DigestError::Format("directive without a value".to_string()))?;
        let key = rest[..eq].trim().to_ascii_lowercase();
        if key.is_empty() || key.contains([',', '"', ' ']) {
            return Err(DigestError::Format("malformed directive name".to_string()));
        }
        rest = rest[eq + 1..].trim_start();
        let value;
        if let Some(quoted) = rest.strip_prefix('"') {
            let mut v = String::new();
            let mut chars = quoted.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => match chars.next() {
                        Some((_, e)) => v.push(e),
                        None => break,
                    },
                    '"' => {
                        end = Some(i + 1);
                        break;
                    }
                    c => v.push(c),
                }
            }
            let end =
                end.ok_or_else(|| DigestError::Format("unterminated quoted value".to_string()))?;
            value = v;
            rest = quoted[end..].trim_start();
            if !(rest.is_empty() || rest.starts_with(',')) {
                return Err(DigestError::Format("text after a quoted value".to_string()));
            }
        } else {
            let end = rest.find(',').unwrap_or(rest.len());
            value = rest[..end].trim().to_string();
            rest = &rest[end..];
        }
        out.push((key, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users(user: &str) -> Option<String> {
        (user == "jaasuser").then(|| "jaas_password".to_string())
    }

    fn challenged(seed: u8) -> DigestMd5Server {
        let mut s = DigestMd5Server::new([seed; RAW_NONCE_SIZE]);
        assert!(matches!(s.evaluate(b"", users), Ok(Step::Challenge(_))));
        s
    }

    #[test]
    fn rfc2831_example() {
        // RFC 2831 section 4: chris / secret at elwood.innosoft.com, IMAP.
        let parts = Parts {
            username: "chris",
            realm: "elwood.innosoft.com",
            passwd: "secret",
            nonce: "OA6MG9tEQGm2hh",
            cnonce: "OA6MHXh6VqTrRk",
            authzid: None,
            qop: "auth",
            digest_uri: "imap/elwood.innosoft.com",
        };
        assert_eq!(
            parts.response_value("AUTHENTICATE"),
            "d388dad90d4bbd760a152321f2143af7"
        );
        assert_eq!(parts.response_value(""), "ea40f60335c427b5527b84dbabcdfffd");
    }

    #[test]
    fn challenge_as_java_writes_it() {
        let mut s = DigestMd5Server::new([0; RAW_NONCE_SIZE]);
        let Ok(Step::Challenge(c)) = s.evaluate(b"", users) else {
            panic!("no challenge");
        };
        assert_eq!(
            String::from_utf8(c).unwrap(),
            format!(
                "realm=\"zk-sasl-md5\",nonce=\"{}\",charset=utf-8,algorithm=md5-sess",
                "A".repeat(40)
            )
        );
    }

    #[test]
    fn client_answers_the_rfc2831_example() {
        // RFC 2831 section 4's IMAP example, played by the client side.
        let names = Names {
            protocol: "imap",
            server_name: "elwood.innosoft.com",
            authzid_must_match: false,
        };
        let mut c = DigestMd5Client::new(names, "chris", "secret", [0; RAW_NONCE_SIZE]);
        c.cnonce = "OA6MHXh6VqTrRk".into();
        let response = c
            .evaluate(
                b"realm=\"elwood.innosoft.com\",nonce=\"OA6MG9tEQGm2hh\",qop=\"auth\",\
                  algorithm=md5-sess,charset=utf-8",
            )
            .unwrap()
            .unwrap();
        let response = String::from_utf8(response).unwrap();
        assert!(
            response.contains("response=d388dad90d4bbd760a152321f2143af7"),
            "{response}"
        );
        assert!(response.contains("digest-uri=\"imap/elwood.innosoft.com\""));
        assert!(!c.is_complete());
        assert_eq!(
            c.clone()
                .evaluate(b"rspauth=00000000000000000000000000000000"),
            Err(DigestError::MismatchedResponseAuth)
        );
        assert_eq!(
            c.evaluate(b"rspauth=ea40f60335c427b5527b84dbabcdfffd"),
            Ok(None)
        );
        assert!(c.is_complete());
        assert!(c.evaluate(b"").is_err(), "nothing after completion");
    }

    #[test]
    fn quorum_client_and_server_complete_and_refuse_a_wrong_password() {
        let quorum_users = |u: &str| (u == "test").then(|| "mypassword".to_string());
        let run = |password: &str| {
            let mut server = DigestMd5Server::with_names([3; RAW_NONCE_SIZE], QUORUM_NAMES);
            let mut client =
                DigestMd5Client::new(QUORUM_NAMES, "test", password, [4; RAW_NONCE_SIZE]);
            let Ok(Step::Challenge(challenge)) = server.evaluate(b"", quorum_users) else {
                panic!("no challenge");
            };
            assert!(String::from_utf8_lossy(&challenge).contains("realm=\"zk-quorum-sasl-md5\""));
            let response = client.evaluate(&challenge).unwrap().unwrap();
            let step = server.evaluate(&response, quorum_users)?;
            let Step::Complete {
                token,
                authorization_id,
            } = step
            else {
                panic!("not complete");
            };
            assert_eq!(authorization_id, "test");
            assert_eq!(client.evaluate(&token), Ok(None));
            assert!(client.is_complete());
            Ok::<_, DigestError>(())
        };
        assert_eq!(run("mypassword"), Ok(()));
        assert_eq!(run("wrong"), Err(DigestError::MismatchedResponse));
    }

    #[test]
    fn quorum_server_refuses_another_authzid() {
        let mut s = DigestMd5Server::with_names([5; RAW_NONCE_SIZE], QUORUM_NAMES);
        assert!(matches!(s.evaluate(b"", users), Ok(Step::Challenge(_))));
        let nonce = s.nonce().to_string();
        let parts = Parts {
            username: "jaasuser",
            realm: "zk-quorum-sasl-md5",
            passwd: "jaas_password",
            nonce: &nonce,
            cnonce: "c",
            authzid: Some("other"),
            qop: "auth",
            digest_uri: "zookeeper-quorum/zk-quorum-sasl-md5",
        };
        let resp = format!(
            "username=\"jaasuser\",realm=\"zk-quorum-sasl-md5\",nonce=\"{nonce}\",nc=00000001,\
             cnonce=\"c\",digest-uri=\"zookeeper-quorum/zk-quorum-sasl-md5\",authzid=\"other\",\
             response={},qop=auth",
            parts.response_value("AUTHENTICATE")
        );
        assert_eq!(
            s.evaluate(resp.as_bytes(), users),
            Err(DigestError::NotAuthorized(
                "jaasuser".into(),
                "other".into()
            ))
        );
    }

    #[test]
    fn full_exchange() {
        let mut s = challenged(7);
        let nonce = s.nonce().to_string();
        let resp = client_response("jaasuser", "jaas_password", &nonce, "abc");
        let Ok(Step::Complete {
            token,
            authorization_id,
        }) = s.evaluate(resp.as_bytes(), users)
        else {
            panic!("not complete");
        };
        assert_eq!(authorization_id, "jaasuser");
        let parts = Parts {
            username: "jaasuser",
            realm: SERVER_NAME,
            passwd: "jaas_password",
            nonce: &nonce,
            cnonce: "abc",
            authzid: None,
            qop: "auth",
            digest_uri: "zookeeper/zk-sasl-md5",
        };
        assert_eq!(
            token,
            format!("rspauth={}", parts.response_value("")).into_bytes()
        );
        // Complete: nothing more is taken.
        assert_eq!(s.evaluate(b"", users), Err(DigestError::IllegalState));
    }

    #[test]
    fn wrong_password_and_unknown_user() {
        let mut s = challenged(1);
        let resp = client_response("jaasuser", "nope", s.nonce(), "c");
        assert_eq!(
            s.evaluate(resp.as_bytes(), users),
            Err(DigestError::MismatchedResponse)
        );
        // One attempt per exchange, even with the right password after.
        let resp = client_response("jaasuser", "jaas_password", s.nonce(), "c");
        assert_eq!(
            s.evaluate(resp.as_bytes(), users),
            Err(DigestError::IllegalState)
        );
        let mut s = challenged(2);
        let resp = client_response("baduser", "badpassword", s.nonce(), "c");
        assert!(matches!(
            s.evaluate(resp.as_bytes(), users),
            Err(DigestError::UnknownUser(..))
        ));
    }

    #[test]
    fn replayed_response_on_a_new_exchange() {
        let first = challenged(3);
        let recorded = client_response("jaasuser", "jaas_password", first.nonce(), "c");
        let mut second = challenged(4);
        assert_eq!(
            second.evaluate(recorded.as_bytes(), users),
            Err(DigestError::Format("Mismatched nonce.".into()))
        );
        // A second use of the nonce (nc 2) is refused too.
        let mut s = challenged(5);
        let resp = client_response("jaasuser", "jaas_password", s.nonce(), "c")
            .replace("nc=00000001", "nc=00000002");
        assert!(matches!(
            s.evaluate(resp.as_bytes(), users),
            Err(DigestError::Format(_))
        ));
    }

    #[test]
    fn malformed_tokens() {
        // A first token's content is ignored, as ZooKeeper's server does.
        let mut s = DigestMd5Server::new([0; RAW_NONCE_SIZE]);
        assert!(matches!(s.evaluate(b"x", users), Ok(Step::Challenge(_))));
        let long = vec![b'a'; MAX_RESPONSE_LENGTH + 1];
        assert_eq!(
            challenged(0).evaluate(&long, users),
            Err(DigestError::TooLong(MAX_RESPONSE_LENGTH + 1))
        );
        let good = client_response("jaasuser", "jaas_password", &"A".repeat(40), "c");
        for bad in [
            "garbage".to_string(),
            "username=\"jaasuser".to_string(),
            good.replace("realm=\"zk-sasl-md5\",", ""),
            good.replace("digest-uri=\"zookeeper/zk-sasl-md5\"", "digest-uri=\"x/y\""),
            good.replace("qop=auth", "qop=auth-conf"),
            good.replace("charset=utf-8", "charset=latin1"),
            format!("{good},username=\"x\""),
            good.replace(",cnonce=\"c\"", ""),
            String::from_utf8_lossy(&[0xff, 0xfe]).into_owned() + "=",
        ] {
            let r = challenged(0).evaluate(bad.as_bytes(), users);
            assert!(r.is_err(), "{bad}: {r:?}");
        }
        assert!(matches!(
            challenged(0).evaluate(&[0xff, b'='], users),
            Err(DigestError::Format(_))
        ));
        assert!(matches!(
            challenged(0).evaluate(good.as_bytes(), users),
            Ok(Step::Complete { .. })
        ));
    }
}

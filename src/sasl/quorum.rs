//! Quorum SASL between members (`quorum.auth.enableSasl`), as ZooKeeper 3.8's
//! `server/quorum/auth` runs it (ZAB-WIRE.md "Quorum SASL"): the member that connects
//! (the learner side: the initiator of an election connection, a learner dialing the
//! leader's quorum port) authenticates to the one it reaches with DIGEST-MD5 from its
//! JAAS `QuorumLearner` section; that one checks it against the `user_NAME` entries of
//! its `QuorumServer` section. Sans-I/O: the packet codec, the settings and the JAAS
//! reading; the exchange over a socket is `net::peer::quorum_auth`.
//!
//! The exchange, in `QuorumAuthPacket{long magic; int status; buffer token}` records
//! written raw on the stream (no length prefix): the learner sends IN_PROGRESS with an
//! empty token (DIGEST-MD5 has no initial response); the server answers IN_PROGRESS
//! with the digest-challenge; the learner sends IN_PROGRESS with the digest-response;
//! the server answers SUCCESS with the rspauth, or ERROR. A learner sends only with
//! `quorum.auth.learnerRequireSasl`; a server looks at the first 8 bytes and, without
//! the magic, lets the connection through unless `quorum.auth.serverRequireSasl`.

use super::digest_md5::MAX_RESPONSE_LENGTH;
use super::jaas::JaasConfig;
use super::{Krb5Login, SaslServerConfig};

/// The first field of every QuorumAuthPacket (QuorumAuth.QUORUM_AUTH_MAGIC_NUMBER,
/// Java's `-0xa0dbcafecafe1234L`, bytes `5F 24 35 01 35 01 ED CC`: ZooKeeper's comment
/// calls it negative, but the Java hex literal is already a negative long, so the
/// negation is positive). Its first 4 bytes read as a frame length far above
/// PACKETMAXSIZE and as no QuorumPacket type, so a peer without SASL closes on it.
pub const QUORUM_AUTH_MAGIC: i64 = 0x5F24_3501_3501_EDCC;

/// The longest token keel reads in a QuorumAuthPacket, bytes: a DIGEST-MD5 token is at
/// most [`MAX_RESPONSE_LENGTH`]; a GSSAPI one is a Kerberos ticket (a few KiB), so the
/// bound leaves room for it and keeps a garbage length from allocating.
pub const MAX_TOKEN_BYTES: usize = 64 * 1024;

const _: () = assert!(MAX_RESPONSE_LENGTH < MAX_TOKEN_BYTES);

/// A QuorumAuthPacket's status (QuorumAuth.Status).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthStatus {
    /// 0: the exchange goes on.
    InProgress,
    /// 1: the server authenticated the learner.
    Success,
    /// -1: the server refused the learner (or any other value: ZooKeeper's getStatus
    /// maps unknown ones to ERROR).
    Error,
}

impl AuthStatus {
    fn code(self) -> i32 {
        match self {
            AuthStatus::InProgress => 0,
            AuthStatus::Success => 1,
            AuthStatus::Error => -1,
        }
    }

    fn from_code(code: i32) -> AuthStatus {
        match code {
            0 => AuthStatus::InProgress,
            1 => AuthStatus::Success,
            _ => AuthStatus::Error,
        }
    }
}

/// One QuorumAuthPacket; `token: None` is the null buffer (length -1) ZooKeeper's
/// server sends in an IN_PROGRESS with no challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthPacket {
    /// The packet's status.
    pub status: AuthStatus,
    /// The SASL token.
    pub token: Option<Vec<u8>>,
}

/// Why bytes are not a QuorumAuthPacket.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PacketError {
    /// The first 8 bytes are not [`QUORUM_AUTH_MAGIC`].
    #[error("not a quorum auth packet (magic {0:#x})")]
    BadMagic(i64),
    /// The token length is below -1 or above [`MAX_TOKEN_BYTES`].
    #[error("quorum auth token length {0} out of range")]
    BadLength(i32),
}

impl AuthPacket {
    /// The packet's bytes: magic, status, token (int length, -1 for none, + bytes).
    pub fn encode(&self) -> Vec<u8> {
        let token = self.token.as_deref();
        let mut out = Vec::with_capacity(16 + token.map_or(0, <[u8]>::len));
        out.extend_from_slice(&QUORUM_AUTH_MAGIC.to_be_bytes());
        out.extend_from_slice(&self.status.code().to_be_bytes());
        match token {
            Some(t) => {
                out.extend_from_slice(&(t.len() as i32).to_be_bytes());
                out.extend_from_slice(t);
            }
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        }
        out
    }

    /// Decodes a packet at the start of `buf`: `Ok(None)` when more bytes are needed,
    /// else the packet and the bytes it took.
    ///
    /// Errors: [`PacketError`].
    pub fn decode(buf: &[u8]) -> Result<Option<(AuthPacket, usize)>, PacketError> {
        if buf.len() < 16 {
            if buf.len() >= 8 && !starts_with_magic(buf) {
                return Err(PacketError::BadMagic(i64::from_be_bytes(
                    buf[..8].try_into().expect("8 bytes"),
                )));
            }
            return Ok(None);
        }
        let magic = i64::from_be_bytes(buf[..8].try_into().expect("8 bytes"));
        if magic != QUORUM_AUTH_MAGIC {
            return Err(PacketError::BadMagic(magic));
        }
        let status = AuthStatus::from_code(i32::from_be_bytes(buf[8..12].try_into().expect("4")));
        let len = i32::from_be_bytes(buf[12..16].try_into().expect("4"));
        if len < -1 || len > MAX_TOKEN_BYTES as i32 {
            return Err(PacketError::BadLength(len));
        }
        if len == -1 {
            return Ok(Some((
                AuthPacket {
                    status,
                    token: None,
                },
                16,
            )));
        }
        let end = 16 + len as usize;
        if buf.len() < end {
            return Ok(None);
        }
        let token = Some(buf[16..end].to_vec());
        Ok(Some((AuthPacket { status, token }, end)))
    }
}

/// Whether `buf` (at least 8 bytes) starts with [`QUORUM_AUTH_MAGIC`]
/// (QuorumAuth.nextPacketIsAuth).
pub fn starts_with_magic(buf: &[u8]) -> bool {
    buf.len() >= 8 && buf[..8] == QUORUM_AUTH_MAGIC.to_be_bytes()
}

/// The zoo.cfg side of quorum SASL (QuorumPeerConfig).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumSaslSettings {
    /// `quorum.auth.enableSasl` (false): both sides are set up (both JAAS sections must
    /// exist), each used as the two flags below say.
    pub enabled: bool,
    /// `quorum.auth.serverRequireSasl` (false): a learner that does not authenticate,
    /// or fails to, is refused.
    pub server_require: bool,
    /// `quorum.auth.learnerRequireSasl` (false): this member authenticates when it
    /// connects (without it, it never does).
    pub learner_require: bool,
    /// `quorum.auth.learner.saslLoginContext` ("QuorumLearner").
    pub learner_context: String,
    /// `quorum.auth.server.saslLoginContext` ("QuorumServer").
    pub server_context: String,
    /// `quorum.auth.kerberos.servicePrincipal` ("zkquorum/localhost"): GSSAPI only.
    pub service_principal: String,
}

impl Default for QuorumSaslSettings {
    fn default() -> Self {
        QuorumSaslSettings {
            enabled: false,
            server_require: false,
            learner_require: false,
            learner_context: "QuorumLearner".to_string(),
            server_context: "QuorumServer".to_string(),
            service_principal: "zkquorum/localhost".to_string(),
        }
    }
}

impl QuorumSaslSettings {
    /// The combinations QuorumPeerConfig refuses, with its words.
    ///
    /// Errors: a require flag without `quorum.auth.enableSasl`; serverRequireSasl
    /// without learnerRequireSasl (the member could not join its own quorum).
    pub fn check(&self) -> Result<(), String> {
        let enable = "quorum.auth.enableSasl";
        let server = "quorum.auth.serverRequireSasl";
        let learner = "quorum.auth.learnerRequireSasl";
        if !self.enabled && self.server_require {
            return Err(format!("{enable} is disabled, so cannot enable {server}"));
        }
        if !self.enabled && self.learner_require {
            return Err(format!("{enable} is disabled, so cannot enable {learner}"));
        }
        if !self.learner_require && self.server_require {
            return Err(format!("{learner} is disabled, so cannot enable {server}"));
        }
        Ok(())
    }
}

/// What a member with quorum SASL on authenticates with: the settings and both JAAS
/// sections, read at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumSasl {
    /// The zoo.cfg settings.
    pub settings: QuorumSaslSettings,
    /// The learner's DIGEST-MD5 user and password (`username`, `password` options of
    /// its section's DigestLoginModule entry).
    pub learner_username: String,
    /// See `learner_username`.
    pub learner_password: String,
    /// The server section's `user_NAME="password"` entries.
    pub server_credentials: std::collections::HashMap<String, String>,
    /// The learner section logs in with Kerberos (a Krb5LoginModule entry): the
    /// learner runs GSSAPI instead of DIGEST-MD5 (ZooKeeper's SecurityUtils picks
    /// GSSAPI for a subject with a Kerberos principal).
    pub learner_kerberos: Option<Krb5Login>,
    /// The server section logs in with Kerberos: the server side runs GSSAPI.
    pub server_kerberos: Option<Krb5Login>,
}

impl QuorumSasl {
    /// Reads both sections from the JAAS file, as SaslQuorumAuthServer and
    /// SaslQuorumAuthLearner do when `quorum.auth.enableSasl` is on. A section with a
    /// Krb5LoginModule entry logs in with Kerberos (its `principal` and `keyTab`).
    ///
    /// Errors (the text names the section): a section that is missing ("SASL-
    /// authentication failed because the specified JAAS configuration section ... could
    /// not be found", ZooKeeper's words); a DIGEST-MD5 learner section without
    /// `username` and `password`; a Kerberos learner section without `principal`.
    pub fn from_jaas(
        settings: QuorumSaslSettings,
        jaas: &JaasConfig,
    ) -> Result<QuorumSasl, String> {
        let section = |name: &str| {
            let entries = jaas
                .section(name)
                .filter(|e| !e.is_empty())
                .ok_or_else(|| {
                    format!(
                        "SASL-authentication failed because the specified JAAS configuration \
                     section '{name}' could not be found."
                    )
                })?;
            let kerberos = SaslServerConfig::from_jaas(jaas, name).and_then(|c| c.kerberos);
            Ok::<_, String>((entries, kerberos))
        };
        let (learner, learner_kerberos) = section(&settings.learner_context)?;
        let (server, server_kerberos) = section(&settings.server_context)?;
        if let Some(k) = &learner_kerberos {
            if k.principal.is_none() {
                return Err(format!(
                    "JAAS section '{}': the Krb5LoginModule entry names no principal",
                    settings.learner_context
                ));
            }
        }
        let option = |key: &str| {
            learner
                .iter()
                .flat_map(|e| e.options.iter())
                .rev()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
        };
        let (learner_username, learner_password) = match (option("username"), option("password")) {
            (Some(u), Some(p)) => (u, p),
            _ if learner_kerberos.is_some() => (String::new(), String::new()),
            _ => {
                return Err(format!(
                    "JAAS section '{}' has no username and password for DIGEST-MD5",
                    settings.learner_context
                ))
            }
        };
        let server_credentials = server
            .iter()
            .flat_map(|e| e.options.iter())
            .filter_map(|(k, v)| Some((k.strip_prefix("user_")?.to_string(), v.clone())))
            .collect();
        Ok(QuorumSasl {
            settings,
            learner_username,
            learner_password,
            server_credentials,
            learner_kerberos,
            server_kerberos,
        })
    }

    /// The password the server side checks `user` against.
    pub fn password(&self, user: &str) -> Option<String> {
        self.server_credentials.get(user).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_as_zookeeper_writes_them() {
        let p = AuthPacket {
            status: AuthStatus::InProgress,
            token: Some(Vec::new()),
        };
        let bytes = p.encode();
        // The magic as ZAB-WIRE.md gives it, status 0, an empty buffer.
        assert_eq!(
            bytes,
            [0x5F, 0x24, 0x35, 0x01, 0x35, 0x01, 0xED, 0xCC, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(AuthPacket::decode(&bytes), Ok(Some((p, 16))));
        let none = AuthPacket {
            status: AuthStatus::InProgress,
            token: None,
        };
        assert_eq!(&none.encode()[12..], &[0xff; 4]);
        let ok = AuthPacket {
            status: AuthStatus::Success,
            token: Some(b"rspauth=x".to_vec()),
        };
        let mut bytes = ok.encode();
        bytes.extend_from_slice(b"next");
        assert_eq!(AuthPacket::decode(&bytes[..20]), Ok(None));
        assert_eq!(AuthPacket::decode(&bytes), Ok(Some((ok, bytes.len() - 4))));
        // A FOLLOWERINFO's first bytes, a bad length, an unknown status.
        assert!(matches!(
            AuthPacket::decode(&[0, 0, 0, 11, 0, 0, 0, 1]),
            Err(PacketError::BadMagic(_))
        ));
        let mut bad = none.encode();
        bad[12..16].copy_from_slice(&(MAX_TOKEN_BYTES as i32 + 1).to_be_bytes());
        assert_eq!(
            AuthPacket::decode(&bad),
            Err(PacketError::BadLength(MAX_TOKEN_BYTES as i32 + 1))
        );
        let mut odd = none.encode();
        odd[8..12].copy_from_slice(&7i32.to_be_bytes());
        assert_eq!(
            AuthPacket::decode(&odd).unwrap().unwrap().0.status,
            AuthStatus::Error
        );
        assert!(starts_with_magic(&QUORUM_AUTH_MAGIC.to_be_bytes()));
    }

    #[test]
    fn settings_combinations_as_quorum_peer_config() {
        let s = |enabled, server_require, learner_require| QuorumSaslSettings {
            enabled,
            server_require,
            learner_require,
            ..QuorumSaslSettings::default()
        };
        assert_eq!(s(false, false, false).check(), Ok(()));
        assert_eq!(s(true, false, false).check(), Ok(()));
        assert_eq!(s(true, true, true).check(), Ok(()));
        assert_eq!(s(true, false, true).check(), Ok(()));
        assert!(s(false, true, true)
            .check()
            .unwrap_err()
            .contains("serverRequireSasl"));
        assert!(s(false, false, true)
            .check()
            .unwrap_err()
            .contains("learnerRequireSasl"));
        assert_eq!(
            s(true, true, false).check(),
            Err(
                "quorum.auth.learnerRequireSasl is disabled, so cannot enable \
                 quorum.auth.serverRequireSasl"
                    .into()
            )
        );
    }

    #[test]
    fn jaas_sections_as_zookeeper_documents_them() {
        let jaas = JaasConfig::parse(
            "QuorumServer {\n org.apache.zookeeper.server.auth.DigestLoginModule required\n \
             user_test=\"mypassword\";\n};\nQuorumLearner {\n \
             org.apache.zookeeper.server.auth.DigestLoginModule required\n username=\"test\"\n \
             password=\"mypassword\";\n};\n",
        )
        .unwrap();
        let q = QuorumSasl::from_jaas(QuorumSaslSettings::default(), &jaas).unwrap();
        assert_eq!(
            (q.learner_username.as_str(), q.learner_password.as_str()),
            ("test", "mypassword")
        );
        assert_eq!(q.password("test").as_deref(), Some("mypassword"));
        assert_eq!(q.password("other"), None);
        let settings = QuorumSaslSettings {
            learner_context: "Elsewhere".into(),
            ..QuorumSaslSettings::default()
        };
        let err = QuorumSasl::from_jaas(settings, &jaas).unwrap_err();
        assert!(err.contains("'Elsewhere' could not be found"), "{err}");
        let krb = JaasConfig::parse(
            "QuorumServer { com.sun.security.auth.module.Krb5LoginModule required \
             keyTab=\"/k/q.keytab\" principal=\"zkquorum/localhost@KEEL.TEST\"; };\n\
             QuorumLearner { com.sun.security.auth.module.Krb5LoginModule required \
             keyTab=\"/k/q.keytab\" principal=\"learner/127.0.0.1@KEEL.TEST\"; };",
        )
        .unwrap();
        let q = QuorumSasl::from_jaas(QuorumSaslSettings::default(), &krb).unwrap();
        assert_eq!(
            q.learner_kerberos.and_then(|k| k.principal).as_deref(),
            Some("learner/127.0.0.1@KEEL.TEST")
        );
        assert_eq!(
            q.server_kerberos.and_then(|k| k.keytab).as_deref(),
            Some("/k/q.keytab")
        );
        let no_principal = JaasConfig::parse(
            "QuorumServer { com.sun.security.auth.module.Krb5LoginModule required; };\n\
             QuorumLearner { com.sun.security.auth.module.Krb5LoginModule required; };",
        )
        .unwrap();
        let err = QuorumSasl::from_jaas(QuorumSaslSettings::default(), &no_principal).unwrap_err();
        assert!(err.contains("names no principal"), "{err}");
    }
}

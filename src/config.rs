//! zoo.cfg -> typed, validated [`Config`].
//!
//! The file is a Java properties file: `#`/`!` comments, `key=value`, `key = value`,
//! `key:value` or `key value`, backslash line continuations and escapes, as
//! `java.util.Properties.load` reads it.
//!
//! Keys, defaults and validation rules follow ZooKeeper 3.8's `QuorumPeerConfig`
//! (PROTOCOL.md, section "zoo.cfg keys honoured"). ZooKeeper turns every zoo.cfg key it
//! does not parse itself into the JVM system property `zookeeper.<key>`; keel reads those
//! keys straight from zoo.cfg, and also accepts them as system properties through
//! [`Config::apply_system_property`] and [`Config::apply_jvm_flags`].
//!
//! Keys keel does not act on are never fatal: they are listed in
//! [`Config::unknown_keys`] for the caller to log. Values of ZooKeeper's own keys are
//! still checked where ZooKeeper checks them, so a file ZooKeeper refuses is refused here.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The four-letter words (`ruok`, `stat`, `mntr`, ...) the client port answers.
///
/// Source: ZooKeeper 3.8 `FourLetterCommands.isEnabled` and the admin guide's
/// `4lw.commands.whitelist`. `srvr` is always allowed, whatever the list says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FourLetterWhitelist {
    /// Every four-letter word (`4lw.commands.whitelist=*`).
    All,
    /// Only these words, exactly as written (case-sensitive); always holds `srvr`.
    Only(BTreeSet<String>),
}

impl Default for FourLetterWhitelist {
    /// ZooKeeper's default whitelist: `srvr` alone.
    fn default() -> Self {
        FourLetterWhitelist::Only(BTreeSet::from(["srvr".to_string()]))
    }
}

impl FourLetterWhitelist {
    /// Parses a `4lw.commands.whitelist` value: words separated by commas (ZooKeeper's
    /// separator) or whitespace (keel also accepts it, since no word contains a space),
    /// each trimmed; a `*` anywhere allows every word. Never fails: unknown words are
    /// kept and simply never match a command, as in ZooKeeper.
    pub fn parse(value: &str) -> Self {
        let mut words = BTreeSet::from(["srvr".to_string()]);
        for word in value.split(|c: char| c == ',' || c.is_whitespace()) {
            match word.trim() {
                "" => {}
                "*" => return FourLetterWhitelist::All,
                word => {
                    words.insert(word.to_string());
                }
            }
        }
        FourLetterWhitelist::Only(words)
    }

    /// Whether the four-letter word `word` (e.g. `"ruok"`) is in the whitelist. `isro` is
    /// also answered when read-only mode is on ([`Config::allows_four_letter_word`]).
    pub fn allows(&self, word: &str) -> bool {
        match self {
            FourLetterWhitelist::All => true,
            FourLetterWhitelist::Only(words) => words.contains(word),
        }
    }
}

/// `ssl.clientAuth`: whether the secure client port asks for a client certificate.
///
/// Source: ZooKeeper 3.8 `X509Util.ClientAuth`; the value is matched case-insensitively
/// and an empty value means `need`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ClientAuth {
    /// Require a certificate the trust store vouches for (ZooKeeper's default).
    #[default]
    Need,
    /// Ask for one; a client without a certificate may still connect.
    Want,
    /// Do not ask.
    None,
}

/// The file formats ZooKeeper accepts for `ssl.keyStore.type` / `ssl.trustStore.type`
/// (ZooKeeper 3.8 `KeyStoreFileType`). keel reads PEM and JKS; see `net::keystore`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreType {
    /// PEM text: certificates and (in a key store) a private key.
    Pem,
    /// Java's original key store format.
    Jks,
    /// PKCS #12 (`.p12`).
    Pkcs12,
    /// Bouncy Castle FIPS key store.
    Bcfks,
}

impl StoreType {
    /// Parses a `*.type` value as ZooKeeper does (case-insensitive name; empty = unset).
    fn parse(value: &str) -> Result<Option<StoreType>, String> {
        match value.to_ascii_uppercase().as_str() {
            "" => Ok(None),
            "PEM" => Ok(Some(StoreType::Pem)),
            "JKS" => Ok(Some(StoreType::Jks)),
            "PKCS12" => Ok(Some(StoreType::Pkcs12)),
            "BCFKS" => Ok(Some(StoreType::Bcfks)),
            _ => Err("expected PEM, JKS, PKCS12 or BCFKS".to_string()),
        }
    }
}

/// One set of TLS settings, ZooKeeper's `X509Util` keys under one prefix: `ssl.*`
/// (`ClientX509Util`) for the secure client port, `ssl.quorum.*` (`QuorumX509Util`)
/// for the election and quorum ports with `sslQuorum`; from zoo.cfg or as
/// `zookeeper.ssl.*` / `zookeeper.ssl.quorum.*` system properties. Values are kept as
/// given; `net::tls` reads the files and checks that the settings fit together when
/// the port that uses them is on. The field docs name the client keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SslConfig {
    /// `ssl.keyStore.location`: the server's private key and certificate chain.
    pub key_store_location: Option<PathBuf>,
    /// `ssl.keyStore.password` (empty = none).
    pub key_store_password: Option<String>,
    /// `ssl.keyStore.passwordPath`: a file holding the password; wins over the password.
    pub key_store_password_path: Option<PathBuf>,
    /// `ssl.keyStore.type`; `None` = from the file name's extension, as ZooKeeper does.
    pub key_store_type: Option<StoreType>,
    /// `ssl.trustStore.location`: the certificates that vouch for client certificates.
    pub trust_store_location: Option<PathBuf>,
    /// `ssl.trustStore.password` (empty = none).
    pub trust_store_password: Option<String>,
    /// `ssl.trustStore.passwordPath`: a file holding the password; wins over the password.
    pub trust_store_password_path: Option<PathBuf>,
    /// `ssl.trustStore.type`; `None` = from the file name's extension.
    pub trust_store_type: Option<StoreType>,
    /// `ssl.clientAuth` (need).
    pub client_auth: ClientAuth,
    /// `ssl.protocol` ("TLSv1.2"): the protocol enabled when `ssl.enabledProtocols` is unset.
    pub protocol: String,
    /// `ssl.enabledProtocols`: comma-separated protocol names.
    pub enabled_protocols: Option<Vec<String>>,
    /// `ssl.ciphersuites`: comma-separated cipher suite names (Java/IANA names).
    pub cipher_suites: Option<Vec<String>>,
    /// `ssl.hostnameVerification` (true). ZooKeeper's server never checks client host
    /// names on the client port, so keel only records it.
    pub hostname_verification: bool,
    /// `ssl.crl` (false): certificate revocation lists; keel refuses `true`.
    pub crl: bool,
    /// `ssl.ocsp` (false): OCSP revocation checks; keel refuses `true`.
    pub ocsp: bool,
    /// `ssl.context.supplier.class`: a Java class keel cannot load; refused when set.
    pub context_supplier_class: Option<String>,
    /// `ssl.handshakeDetectionTimeoutMillis` (5000): with port unification, how long a
    /// new connection's first bytes may take before it is taken for plaintext
    /// (ZooKeeper's `UnifiedServerSocket`; used on the quorum ports).
    pub handshake_detection_timeout_ms: u32,
}

/// ZooKeeper's `X509Util.DEFAULT_HANDSHAKE_DETECTION_TIMEOUT_MILLIS`.
pub const DEFAULT_HANDSHAKE_DETECTION_TIMEOUT_MS: u32 = 5000;

impl Default for SslConfig {
    fn default() -> Self {
        SslConfig {
            key_store_location: None,
            key_store_password: None,
            key_store_password_path: None,
            key_store_type: None,
            trust_store_location: None,
            trust_store_password: None,
            trust_store_password_path: None,
            trust_store_type: None,
            client_auth: ClientAuth::Need,
            protocol: "TLSv1.2".to_string(),
            enabled_protocols: None,
            cipher_suites: None,
            hostname_verification: true,
            crl: false,
            ocsp: false,
            context_supplier_class: None,
            handshake_detection_timeout_ms: DEFAULT_HANDSHAKE_DETECTION_TIMEOUT_MS,
        }
    }
}

impl SslConfig {
    /// Applies one key of this set, named without its prefix (`keyStore.location` for
    /// `ssl.keyStore.location` or `ssl.quorum.keyStore.location`, as ZooKeeper's
    /// `X509Util` builds its property names from `getConfigPrefix()`). Returns whether
    /// keel uses it. Booleans are read like ZooKeeper's `ZKConfig.getBoolean`: `true` in
    /// any case is true, anything else false.
    fn apply(&mut self, key: &str, value: &str) -> Result<bool, String> {
        let text = |v: &str| Some(v.to_string()).filter(|v| !v.is_empty());
        let path = |v: &str| Some(PathBuf::from(v)).filter(|_| !v.is_empty());
        let list = |v: &str| {
            Some(
                v.split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>(),
            )
        };
        let flag = |v: &str| v.trim().eq_ignore_ascii_case("true");
        match key {
            "keyStore.location" => self.key_store_location = path(value),
            "keyStore.password" => self.key_store_password = text(value),
            "keyStore.passwordPath" => self.key_store_password_path = path(value),
            "keyStore.type" => self.key_store_type = StoreType::parse(value)?,
            "trustStore.location" => self.trust_store_location = path(value),
            "trustStore.password" => self.trust_store_password = text(value),
            "trustStore.passwordPath" => self.trust_store_password_path = path(value),
            "trustStore.type" => self.trust_store_type = StoreType::parse(value)?,
            "clientAuth" => {
                self.client_auth = match value.to_ascii_lowercase().as_str() {
                    "" | "need" => ClientAuth::Need,
                    "want" => ClientAuth::Want,
                    "none" => ClientAuth::None,
                    _ => return Err("expected need, want or none".to_string()),
                }
            }
            "protocol" => {
                self.protocol = if value.is_empty() {
                    "TLSv1.2".to_string()
                } else {
                    value.to_string()
                }
            }
            "enabledProtocols" => self.enabled_protocols = list(value),
            "ciphersuites" => self.cipher_suites = list(value),
            "hostnameVerification" => self.hostname_verification = flag(value),
            "crl" => self.crl = flag(value),
            "ocsp" => self.ocsp = flag(value),
            "context.supplier.class" => self.context_supplier_class = text(value),
            "handshakeDetectionTimeoutMillis" => {
                let ms = value
                    .trim()
                    .parse::<i32>()
                    .map_err(|_| not_integer(value))?;
                // SSLContextAndOptions: below 1 falls back to the default, logged.
                self.handshake_detection_timeout_ms = if ms < 1 {
                    tracing::warn!("handshakeDetectionTimeoutMillis {ms} is below 1; using 5000");
                    DEFAULT_HANDSHAKE_DETECTION_TIMEOUT_MS
                } else {
                    ms as u32
                };
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// One `server.N=host:quorumPort:electionPort[:participant|observer][;[clientAddr:]clientPort]`
/// line: a member of the ensemble.
///
/// Source: ZooKeeper 3.8 `QuorumPeer.QuorumServer(long, String)`. IPv6 hosts are written
/// in brackets (`[::1]:2888:3888`) and stored without them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// The server id `N` (the `myid` of that server).
    pub id: u64,
    /// Host name or address for the quorum and election ports.
    pub host: String,
    /// Port followers and observers connect to the leader on (ZooKeeper's 2888).
    pub quorum_port: u16,
    /// Port for leader election (ZooKeeper's 3888).
    pub election_port: u16,
    /// `true` for `:observer`: the server learns but never votes.
    pub observer: bool,
    /// Client listen address from the `;addr:port` part. `Some("0.0.0.0")` when only a
    /// port was given, as ZooKeeper does; `None` when there is no client part.
    pub client_address: Option<String>,
    /// Client listen port from the `;[addr:]port` part, if any.
    pub client_port: Option<u16>,
}

/// Why a configuration was refused. Display texts name the key, the value and the
/// 1-based line (`zoo.cfg line 3: bad value "abc" for tickTime: not an integer`);
/// errors from [`Config::load`] name the file instead of `zoo.cfg`.
/// The class name of ZooKeeper's SASL auth provider, as `authProvider.N` names it.
pub const SASL_AUTH_PROVIDER: &str = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider";

/// Client authentication settings beyond digest and x509: ZooKeeper's `authProvider.N`
/// (ProviderRegistry), SASL (ZooKeeperServer.processSasl, SaslServerCallbackHandler)
/// and enforcement (AuthenticationHelper). Each is a zoo.cfg key or the system property
/// `zookeeper.<key>`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientAuthConfig {
    /// `authProvider.N` class names, by N.
    pub auth_providers: Vec<(String, String)>,
    /// `sasl.serverconfig`: the JAAS section of the server's login (default `Server`).
    pub sasl_login_context: Option<String>,
    /// `SASLAuthenticationProvider.superPassword`: the SASL password of user `super`.
    pub sasl_super_password: Option<String>,
    /// `superUser` and `superUser.*`: SASL identities that are also `super:`.
    pub super_users: Vec<(String, String)>,
    /// `sessionRequireClientSASLAuth`: every request needs a `sasl` identity first.
    pub session_require_client_sasl_auth: bool,
    /// `enforce.auth.enabled`: every request needs an identity of a scheme in
    /// `enforce.auth.schemes` first.
    pub enforce_auth_enabled: bool,
    /// `enforce.auth.schemes`: comma-separated schemes, blanks trimmed and dropped.
    pub enforce_auth_schemes: Vec<String>,
    /// `allowSaslFailedClients`: a failed SASL exchange keeps its connection.
    pub allow_sasl_failed_clients: bool,
    /// `kerberos.removeHostFromPrincipal`: a Kerberos identity drops its `/host`.
    pub kerberos_remove_host: bool,
    /// `kerberos.removeRealmFromPrincipal`: a Kerberos identity drops its `@REALM`.
    pub kerberos_remove_realm: bool,
    /// The SASL server from the JAAS file's server section; set by
    /// [`Config::load_jaas`] (`None`: no file, or no such section: SASL is off).
    pub sasl_server: Option<crate::sasl::SaslServerConfig>,
}

impl ClientAuthConfig {
    fn is_key(key: &str) -> bool {
        key.starts_with("authProvider.")
            || key == "superUser"
            || key.starts_with("superUser.")
            || matches!(
                key,
                "sasl.serverconfig"
                    | "SASLAuthenticationProvider.superPassword"
                    | "sessionRequireClientSASLAuth"
                    | "enforce.auth.enabled"
                    | "enforce.auth.schemes"
                    | "allowSaslFailedClients"
                    | "kerberos.removeHostFromPrincipal"
                    | "kerberos.removeRealmFromPrincipal"
            )
    }

    fn apply(&mut self, key: &str, value: &str) -> Result<(), String> {
        // Java's Boolean.parseBoolean: "true" in any case is true, anything else false.
        let java_bool = |v: &str| v.eq_ignore_ascii_case("true");
        match key {
            "sasl.serverconfig" => self.sasl_login_context = Some(value.to_string()),
            "SASLAuthenticationProvider.superPassword" => {
                self.sasl_super_password = Some(value.to_string())
            }
            "sessionRequireClientSASLAuth" => {
                self.session_require_client_sasl_auth = java_bool(value)
            }
            "enforce.auth.enabled" => self.enforce_auth_enabled = java_bool(value),
            "enforce.auth.schemes" => {
                self.enforce_auth_schemes = value
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            }
            "allowSaslFailedClients" => self.allow_sasl_failed_clients = java_bool(value),
            "kerberos.removeHostFromPrincipal" => self.kerberos_remove_host = java_bool(value),
            "kerberos.removeRealmFromPrincipal" => self.kerberos_remove_realm = java_bool(value),
            _ if key.starts_with("authProvider.") => {
                set_keyed(&mut self.auth_providers, key, value)
            }
            _ => set_keyed(&mut self.super_users, key, value),
        }
        Ok(())
    }

    /// Whether `authProvider.N` loads ZooKeeper's SASL provider, which makes `sasl` an
    /// ACL scheme.
    pub fn sasl_provider(&self) -> bool {
        self.auth_providers
            .iter()
            .any(|(_, class)| class == SASL_AUTH_PROVIDER)
    }

    /// The schemes every request needs an identity of, or `None` when authentication
    /// is not enforced (AuthenticationHelper.initConfigurations:
    /// `sessionRequireClientSASLAuth` means `sasl` and wins over `enforce.auth.*`).
    ///
    /// Errors (ZooKeeper refuses to start): enforcement without schemes, or a scheme
    /// no provider serves (ip, digest, x509 and the `authProvider.N` ones).
    pub fn enforced_schemes(&self) -> Result<Option<Vec<String>>, ConfigError> {
        if self.session_require_client_sasl_auth {
            return Ok(Some(vec!["sasl".to_string()]));
        }
        if !self.enforce_auth_enabled {
            return Ok(None);
        }
        if self.enforce_auth_schemes.is_empty() {
            return Err(ConfigError::invalid(
                "zookeeper.enforce.auth.enabled is true zookeeper.enforce.auth.schemes must be  configured.",
            ));
        }
        for scheme in &self.enforce_auth_schemes {
            let known = matches!(scheme.as_str(), "ip" | "digest" | "x509")
                || (scheme == "sasl" && self.sasl_provider());
            if !known {
                return Err(ConfigError::invalid(format!(
                    "Authentication scheme {scheme} is not available."
                )));
            }
        }
        Ok(Some(self.enforce_auth_schemes.clone()))
    }
}

/// The default realm of the Kerberos configuration the library reads (`KRB5_CONFIG`'s
/// first file, else /etc/krb5.conf), which ZooKeeper's KerberosName reads from Java's
/// (`java.security.krb5.conf`, the same file in a deployment). `None`: no readable
/// file or no `default_realm` (ZooKeeper then uses the empty realm).
fn krb5_default_realm() -> Option<String> {
    let path = std::env::var("KRB5_CONFIG").unwrap_or_else(|_| "/etc/krb5.conf".into());
    let first = path.split(':').next()?;
    let text = std::fs::read_to_string(first).ok()?;
    crate::sasl::gssapi::default_realm(&text)
}

/// Sets `key`'s value in a list of keyed values (a key given twice keeps the last).
fn set_keyed(list: &mut Vec<(String, String)>, key: &str, value: &str) {
    match list.iter_mut().find(|(k, _)| k == key) {
        Some(entry) => entry.1 = value.to_string(),
        None => list.push((key.to_string(), value.to_string())),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file (zoo.cfg, `myid`, the dynamic config file) could not be read.
    #[error("cannot read {}: {source}", .path.display())]
    Io {
        /// The file that could not be read.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A key's value does not parse or is out of range.
    #[error("zoo.cfg line {line}: bad value {value:?} for {key}: {reason}")]
    BadValue {
        /// 1-based line number where the key starts.
        line: usize,
        /// The key as written.
        key: String,
        /// The value as written (trimmed, escapes resolved).
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A system property (`-Dname=value`) has a value that does not parse.
    #[error("bad value {value:?} for system property {name}: {reason}")]
    BadProperty {
        /// The property name, e.g. `zookeeper.extendedTypesEnabled`.
        name: String,
        /// The value as given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A key ZooKeeper requires is absent (`dataDir`).
    #[error("zoo.cfg: {key} is not set")]
    Missing {
        /// The missing key.
        key: String,
    },
    /// The values parse but do not fit together (e.g. minSessionTimeout above
    /// maxSessionTimeout, observers without participants, no `myid` in an ensemble).
    #[error("zoo.cfg: {reason}")]
    Invalid {
        /// What is inconsistent.
        reason: String,
    },
    /// An error in the file at `path`, as reported by [`Config::load`].
    #[error("{}", .error.describe(&.path.display().to_string()))]
    InFile {
        /// The configuration file.
        path: PathBuf,
        /// The error found in it.
        error: Box<ConfigError>,
    },
}

impl ConfigError {
    /// The message with `origin` (a file path) in place of the word `zoo.cfg`.
    fn describe(&self, origin: &str) -> String {
        match self {
            ConfigError::BadValue {
                line,
                key,
                value,
                reason,
            } => format!("{origin} line {line}: bad value {value:?} for {key}: {reason}"),
            ConfigError::Missing { key } => format!("{origin}: {key} is not set"),
            ConfigError::Invalid { reason } => format!("{origin}: {reason}"),
            other => other.to_string(),
        }
    }

    fn invalid(reason: impl Into<String>) -> Self {
        ConfigError::Invalid {
            reason: reason.into(),
        }
    }
}

/// A validated zoo.cfg. All durations are in milliseconds unless the name says otherwise.
///
/// Build it with [`Config::parse`] or [`Config::load`]; [`Default`] gives ZooKeeper's
/// defaults with an empty `data_dir` and is meant for tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `tickTime`: the basic time unit, in ms (default 3000; samples use 2000). Must be > 0.
    pub tick_time_ms: u32,
    /// `initLimit`: ticks a follower may take to connect and sync to the leader (10).
    /// ZooKeeper requires it to be set explicitly in an ensemble.
    pub init_limit: u32,
    /// `syncLimit`: ticks a follower may lag behind the leader (5). ZooKeeper requires it
    /// to be set explicitly in an ensemble.
    pub sync_limit: u32,
    /// `dataDir`: snapshots and `myid` (required, as in ZooKeeper).
    pub data_dir: PathBuf,
    /// `dataLogDir`: transaction logs (defaults to `data_dir`).
    pub data_log_dir: PathBuf,
    /// `clientPort`: plain client port. `None` when unset or 0; ZooKeeper 3.8 then starts
    /// without a plain client listener. In an ensemble, the `;port` of this server's
    /// `server.N` line takes precedence.
    pub client_port: Option<u16>,
    /// `clientPortAddress`: address to bind the client port to (default: all interfaces).
    pub client_port_address: Option<String>,
    /// `secureClientPort`: TLS client port; `None` when unset or 0.
    pub secure_client_port: Option<u16>,
    /// `secureClientPortAddress`: address to bind the secure client port to (default:
    /// all interfaces).
    pub secure_client_port_address: Option<String>,
    /// The `ssl.*` settings of the secure client port.
    pub ssl: SslConfig,
    /// `sslQuorum` (false): the election and quorum ports speak TLS, both ways, with
    /// [`Config::quorum_ssl`] (ZooKeeper's `QuorumPeerConfig`, `QuorumCnxManager`,
    /// `Learner`, `Leader`).
    pub ssl_quorum: bool,
    /// `portUnification` (false): the election and quorum ports accept TLS and
    /// plaintext peers alike (ZooKeeper's `UnifiedServerSocket`), for a rolling switch
    /// to or from `sslQuorum`; what this member dials follows `sslQuorum`.
    pub port_unification: bool,
    /// `sslQuorumReloadCertFiles` (false): ZooKeeper re-reads the quorum key and trust
    /// stores when their files change; keel reads them once at start and logs that.
    pub ssl_quorum_reload_cert_files: bool,
    /// The `ssl.quorum.*` settings of the election and quorum ports.
    pub quorum_ssl: SslConfig,
    /// `X509AuthenticationProvider.superUser` / property
    /// `zookeeper.X509AuthenticationProvider.superUser`: the subject DN (RFC 2253, as
    /// Java prints it) of a client certificate that passes every ACL check.
    pub x509_super_user: Option<String>,
    /// The JVM property `java.security.auth.login.config`: a JAAS file, whose server
    /// section (see [`ClientAuthConfig`]) gives the SASL users; read by
    /// [`Config::load_jaas`].
    pub jaas_login_config: Option<String>,
    /// Client authentication: auth providers, SASL, enforcement.
    pub client_auth: ClientAuthConfig,
    /// The `quorum.auth.*` keys: SASL between members ([`crate::sasl::quorum`]).
    pub quorum_sasl: crate::sasl::quorum::QuorumSaslSettings,
    /// The JAAS file of `java.security.auth.login.config` as [`Config::load_jaas`]
    /// parsed it (`None`: no file), for the quorum SASL sections read when the
    /// ensemble starts.
    pub jaas: Option<crate::sasl::jaas::JaasConfig>,
    /// `maxClientCnxns`: connections allowed per client IP (60; 0 = unlimited).
    pub max_client_cnxns: u32,
    /// `minSessionTimeout` in ms; 2 x tickTime when not given or -1 (ZooKeeper's rule,
    /// applied on its own even when only maxSessionTimeout is given). Signed, as
    /// ZooKeeper reads it: another negative value is kept and clamps nothing from below.
    pub min_session_timeout_ms: i32,
    /// `maxSessionTimeout` in ms; 20 x tickTime when not given or -1. Never below the
    /// minimum.
    pub max_session_timeout_ms: i32,
    /// `globalOutstandingLimit`: requests queued before the server throttles reads (1000).
    pub global_outstanding_limit: u32,
    /// `keel.busyPollUs` (keel's own): how long, in microseconds, a lowest-priority
    /// thread keeps a CPU awake after client activity or a txn log sync, so the next
    /// packet or disk completion is not delayed by waking a halted CPU (see
    /// `net::busy_poll`). 0 turns it off. `None` when zoo.cfg does not set it: then
    /// [`Config::busy_poll_us`] gives the mode's default.
    pub busy_poll_us: Option<u64>,
    /// `keel.workerThreads` (keel's own): the threads of the async runtime that serve the
    /// client connections, the peer links and the member's core. 0 (the default) means
    /// half the CPUs, at least 1 ([`Config::worker_threads`]).
    pub worker_threads: u32,
    /// `keel.storageAcks` (keel's own, ensembles): whether a follower's storage thread
    /// sends the ACK of each PROPOSAL as soon as it has synced it, rather than handing
    /// the core the news to send it (`zab::Config::storage_acks`; ZooKeeper's
    /// SyncRequestProcessor thread writes its ACKs itself, too). True by default.
    pub storage_acks: bool,
    /// `snapCount`: transactions between snapshots (100000; ZooKeeper raises values
    /// below 2 to 2).
    pub snap_count: u64,
    /// `autopurge.snapRetainCount`: snapshots kept by autopurge (3; values below 3 are
    /// raised to 3, as ZooKeeper does).
    pub autopurge_snap_retain_count: u32,
    /// `autopurge.purgeInterval`: hours between purges (0 = autopurge off).
    pub autopurge_purge_interval_hours: u32,
    /// `4lw.commands.whitelist`: four-letter words answered (default `srvr` only).
    pub four_letter_words: FourLetterWhitelist,
    /// `admin.enableServer`: run the AdminServer HTTP endpoint (true).
    pub admin_enable_server: bool,
    /// `admin.serverAddress`: AdminServer bind address ("0.0.0.0").
    pub admin_server_address: String,
    /// `admin.serverPort`: AdminServer port (8080).
    pub admin_server_port: u16,
    /// `admin.commandURL`: AdminServer URL prefix for commands ("/commands").
    pub admin_command_url: String,
    /// `admin.console.identity` (keel's): `user:password` whose digest identity the web
    /// console reads with, besides `ip:<browser address>` (none).
    pub admin_console_identity: Option<String>,
    /// `admin.idleTimeout`: an AdminServer or metrics connection that sends nothing for
    /// this long is closed, ms (30000, Jetty's idle timeout in ZooKeeper).
    pub admin_idle_timeout_ms: u32,
    /// `metricsProvider.className`: `None` means ZooKeeper's default (no exporter).
    pub metrics_provider_class_name: Option<String>,
    /// `metricsProvider.httpPort`: Prometheus exporter port (7000).
    pub metrics_provider_http_port: u16,
    /// `metricsProvider.httpHost`: Prometheus exporter bind address ("0.0.0.0"), as
    /// ZooKeeper's `PrometheusMetricsProvider.configure` reads it.
    pub metrics_provider_http_host: String,
    /// `reconfigEnabled`: allow the `reconfig` operation (false).
    pub reconfig_enabled: bool,
    /// `localSessionsEnabled` (false): a new session on an ensemble member is local to
    /// that member (see [`crate::server::local_sessions`]).
    pub local_sessions_enabled: bool,
    /// `localSessionsUpgradingEnabled` (false, as ZooKeeper 3.8's QuorumPeerConfig and
    /// zookeeperAdmin.md give it): a local session that creates an ephemeral becomes
    /// global; without it that create fails with EPHEMERALONLOCALSESSION.
    pub local_sessions_upgrading_enabled: bool,
    /// The system property `readonlymode.enabled` (false): an ensemble member that has
    /// lost its quorum serves read-only clients (ZooKeeper's QuorumPeer reads it with
    /// `Boolean.getBoolean`, from `-D` only: a zoo.cfg line does not set it).
    pub read_only_mode_enabled: bool,
    /// `standaloneEnabled`: a single participant runs standalone (true). When false, even
    /// one `server.N` line forms an ensemble of one.
    pub standalone_enabled: bool,
    /// `quorumListenOnAllIPs`: bind the election and quorum ports on every address
    /// rather than the server.N host's (false).
    pub quorum_listen_on_all_ips: bool,
    /// `cnxTimeout` / `zookeeper.cnxTimeout`: how long a connect to a peer's election
    /// port may take, ms (QuorumCnxManager's cnxTO, 5000).
    pub cnx_timeout_ms: u32,
    /// `server.N` lines (or the dynamic config file's), sorted by id; a repeated id keeps
    /// the last line, as Java properties do.
    pub servers: Vec<ServerSpec>,
    /// The contents of `dataDir/myid`, when present (set by [`Config::load`] or
    /// [`Config::set_my_id`]).
    pub my_id: Option<u64>,
    /// `extendedTypesEnabled` / `zookeeper.extendedTypesEnabled`: TTL nodes (false; when
    /// false createTTL answers UNIMPLEMENTED).
    pub extended_types_enabled: bool,
    /// `DigestAuthenticationProvider.superDigest` / property
    /// `zookeeper.DigestAuthenticationProvider.superDigest`: `super:<base64 sha1>`.
    pub super_digest: Option<String>,
    /// `enforceQuota` / `zookeeper.enforceQuota`: fail writes over a hard quota (false).
    pub enforce_quota: bool,
    /// `znode.container.checkIntervalMs` (a JVM property in ZooKeeper, also a zoo.cfg key
    /// in keel): ms between container and TTL node sweeps (60000).
    pub container_check_interval_ms: u64,
    /// `jute.maxbuffer` (a JVM property in ZooKeeper, also a zoo.cfg key in keel): largest
    /// packet or znode payload accepted, in bytes (0xfffff).
    pub jute_max_buffer: usize,
    /// `forceSync` / `zookeeper.forceSync`: fsync the transaction log before acknowledging
    /// (true; written `yes` or `no`).
    pub force_sync: bool,
    /// `dynamicConfigFile`: file holding the `server.N` lines; read by [`Config::load`].
    pub dynamic_config_file: Option<PathBuf>,
    /// The config version of the `server.N` lines: the hex suffix after the last `.`
    /// of the dynamic config file's name (`zoo.cfg.dynamic.100000003`), 0 without one
    /// or for lines in zoo.cfg itself (`QuorumPeerConfig.getVersionFromFilename`).
    pub config_version: u64,
    /// The zoo.cfg this config was read from ([`Config::load`]); the dynamic config
    /// files a reconfig writes are named after it (`<path>.dynamic.<hex version>`,
    /// `<path>.dynamic.next`, as ZooKeeper's `QuorumPeer` names them).
    pub config_file: Option<PathBuf>,
    /// Keys keel does not act on, with their 1-based line: ZooKeeper settings keel has no
    /// use for (`ssl.*`, `serverCnxnFactory`, ...) and keys nobody knows (typos). The
    /// caller logs them; they are never fatal.
    pub unknown_keys: Vec<(usize, String)>,
    /// Every key and value in file order (duplicates included), for the `conf` command.
    pub entries: Vec<(String, String)>,
    /// The zoo.cfg text as [`Config::load`] read it (ZooKeeper's `initialConfig`, which
    /// the AdminServer's `initial_configuration` shows); empty after [`Config::parse`].
    pub initial_config: String,
}

impl Default for Config {
    fn default() -> Self {
        let tick_time_ms = 3000;
        Config {
            tick_time_ms,
            init_limit: 10,
            sync_limit: 5,
            data_dir: PathBuf::new(),
            data_log_dir: PathBuf::new(),
            client_port: None,
            client_port_address: None,
            secure_client_port: None,
            secure_client_port_address: None,
            ssl: SslConfig::default(),
            ssl_quorum: false,
            port_unification: false,
            ssl_quorum_reload_cert_files: false,
            quorum_ssl: SslConfig::default(),
            x509_super_user: None,
            jaas_login_config: None,
            client_auth: ClientAuthConfig::default(),
            quorum_sasl: crate::sasl::quorum::QuorumSaslSettings::default(),
            jaas: None,
            max_client_cnxns: 60,
            min_session_timeout_ms: ticks_ms(tick_time_ms, 2),
            max_session_timeout_ms: ticks_ms(tick_time_ms, 20),
            global_outstanding_limit: 1000,
            snap_count: 100_000,
            busy_poll_us: None,
            worker_threads: 0,
            storage_acks: true,
            autopurge_snap_retain_count: 3,
            autopurge_purge_interval_hours: 0,
            four_letter_words: FourLetterWhitelist::default(),
            admin_enable_server: true,
            admin_server_address: "0.0.0.0".to_string(),
            admin_server_port: 8080,
            admin_command_url: "/commands".to_string(),
            admin_idle_timeout_ms: 30_000,
            admin_console_identity: None,
            metrics_provider_class_name: None,
            metrics_provider_http_port: 7000,
            metrics_provider_http_host: "0.0.0.0".to_string(),
            reconfig_enabled: false,
            local_sessions_enabled: false,
            local_sessions_upgrading_enabled: false,
            read_only_mode_enabled: false,
            standalone_enabled: true,
            servers: Vec::new(),
            my_id: None,
            extended_types_enabled: false,
            super_digest: None,
            enforce_quota: false,
            container_check_interval_ms: 60_000,
            jute_max_buffer: 0xfffff,
            force_sync: true,
            dynamic_config_file: None,
            quorum_listen_on_all_ips: false,
            cnx_timeout_ms: 5000,
            unknown_keys: Vec::new(),
            entries: Vec::new(),
            initial_config: String::new(),
            config_version: 0,
            config_file: None,
        }
    }
}

/// `keel.busyPollUs` of a standalone server when zoo.cfg does not set it,
/// microseconds. An ensemble member's is 0 ([`Config::busy_poll_us`]).
pub const DEFAULT_BUSY_POLL_US: u64 = 200;
/// The largest `keel.busyPollUs` accepted (100 ms): a longer window only burns CPU.
pub const MAX_BUSY_POLL_US: u64 = 100_000;
/// The largest `keel.workerThreads` accepted.
pub const MAX_WORKER_THREADS: u32 = 1024;

/// ZooKeeper's own keys (parsed by `QuorumPeerConfig`) that keel accepts but does not
/// use; listed so their values are still checked the way ZooKeeper checks them.
const ZK_BOOLEAN_KEYS: &[&str] = &[
    "syncEnabled",
    "jvm.pause.monitor",
    "multiAddress.enabled",
    "multiAddress.reachabilityCheckEnabled",
];

/// ZooKeeper's own integer keys that keel accepts but does not use.
const ZK_INTEGER_KEYS: &[&str] = &[
    "observerMasterPort",
    "clientPortListenBacklog",
    "connectToLearnerMasterLimit",
    "quorum.cnxn.threads.size",
    "multiAddress.reachabilityCheckTimeoutMs",
    "jvm.pause.info-threshold.ms",
    "jvm.pause.warn-threshold.ms",
    "jvm.pause.sleep.time.ms",
];

/// Settings ZooKeeper reads as the system property `zookeeper.<key>`, so they may come
/// from zoo.cfg or from `-Dzookeeper.<key>=...`.
const PASS_THROUGH_KEYS: &[&str] = &[
    "globalOutstandingLimit",
    "snapCount",
    "forceSync",
    "4lw.commands.whitelist",
    "admin.enableServer",
    "admin.serverAddress",
    "admin.serverPort",
    "admin.commandURL",
    "admin.idleTimeout",
    "admin.console.identity",
    "extendedTypesEnabled",
    "DigestAuthenticationProvider.superDigest",
    "X509AuthenticationProvider.superUser",
    "enforceQuota",
    "cnxTimeout",
    "sasl.serverconfig",
    "SASLAuthenticationProvider.superPassword",
    "superUser",
    "sessionRequireClientSASLAuth",
    "enforce.auth.enabled",
    "enforce.auth.schemes",
    "allowSaslFailedClients",
    "kerberos.removeHostFromPrincipal",
    "kerberos.removeRealmFromPrincipal",
];

/// Whether ZooKeeper reads `zookeeper.<key>` for this zoo.cfg key (see
/// [`PASS_THROUGH_KEYS`]; `ssl.*`, `authProvider.*` and `superUser.*` by prefix).
fn is_pass_through(key: &str) -> bool {
    PASS_THROUGH_KEYS.contains(&key)
        || key.starts_with("ssl.")
        || key.starts_with("authProvider.")
        || key.starts_with("superUser.")
}

/// The system property that turns on read-only mode (ZooKeeper's QuorumPeer.run).
const READ_ONLY_MODE_PROPERTY: &str = "readonlymode.enabled";

/// Settings ZooKeeper reads only as JVM properties of exactly this name; keel also takes
/// them as zoo.cfg keys (PROTOCOL.md).
const JVM_ONLY_KEYS: &[&str] = &[
    "jute.maxbuffer",
    "znode.container.checkIntervalMs",
    "java.security.auth.login.config",
];

/// Values collected while reading the file that only become fields once every line has
/// been seen (defaults that depend on other keys, pairs checked together).
#[derive(Default)]
struct Pending {
    data_dir: Option<PathBuf>,
    data_log_dir: Option<PathBuf>,
    min_session_timeout_ms: Option<i32>,
    max_session_timeout_ms: Option<i32>,
    init_limit_set: bool,
    sync_limit_set: bool,
    secure_client_port_address: bool,
    hierarchical_quorum_line: Option<usize>,
}

impl Config {
    /// Whether the four-letter word `word` is answered: it is in
    /// `4lw.commands.whitelist`, or it is `isro` and read-only mode is on (ZooKeeper's
    /// FourLetterCommands whitelists `isro` then).
    pub fn allows_four_letter_word(&self, word: &str) -> bool {
        self.four_letter_words.allows(word) || (word == "isro" && self.read_only_mode_enabled)
    }

    /// The async runtime's worker threads: `keel.workerThreads` when set, else half of
    /// `cpus` (the CPUs this process may use), at least 1.
    ///
    /// Why half: a write crosses the client connection, the core, the peer links and the
    /// storage thread; with as many workers as CPUs each hand-off between tasks is a
    /// cross-thread wake-up (a futex and a context switch), and the storage thread and
    /// the kernel's network stack want CPU too. Measured on 2 CPUs with 3 members and
    /// zkload 4 x 64 sets (compat-tests/bench/profile_ensemble.sh): 2 workers 88-97 us of
    /// CPU per write across the members and 16-17k sets/s, 1 worker 64-67 us and
    /// 24-25k/s; a standalone server measured the same either way.
    pub fn worker_threads(&self, cpus: usize) -> usize {
        match self.worker_threads {
            0 => (cpus / 2).max(1),
            n => n as usize,
        }
    }

    /// Parses zoo.cfg text.
    ///
    /// Errors: [`ConfigError::BadValue`] for a value that does not parse (naming line,
    /// key and value), [`ConfigError::Missing`] without `dataDir`, and
    /// [`ConfigError::Invalid`] for ZooKeeper's consistency rules: minSessionTimeout above
    /// maxSessionTimeout, clientPortAddress without clientPort, observers without
    /// participants, `standaloneEnabled=false` without servers, an ensemble without
    /// explicit initLimit/syncLimit, `server.N` next to `dynamicConfigFile`, and
    /// hierarchical quorums (`group.N`/`weight.N`, which keel does not implement).
    /// The `myid` rules need the data directory and are checked by [`Config::load`].
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        let mut config = Config::default();
        let mut pending = Pending::default();
        for (line, key, value) in read_properties(text) {
            config.entries.push((key.clone(), value.clone()));
            let used = config
                .apply_file_key(&mut pending, line, &key, &value)
                .map_err(|reason| ConfigError::BadValue {
                    line,
                    key: key.clone(),
                    value: value.clone(),
                    reason,
                })?;
            if !used {
                config.unknown_keys.push((line, key));
            }
        }
        config.finish(pending)?;
        Ok(config)
    }

    /// Reads and parses the zoo.cfg at `path`, then the dynamic config file if
    /// `dynamicConfigFile` names one, then `myid` from `dataDir` when that file exists
    /// (ZooKeeper reads it whenever present; a standalone server may have none).
    ///
    /// Errors: [`ConfigError::Io`] when a file cannot be read; any error of
    /// [`Config::parse`] or [`Config::set_my_id`], wrapped in [`ConfigError::InFile`] so
    /// the message names `path`; `myid` that is not a number; an ensemble without `myid`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let in_file = |error: ConfigError| match error {
            ConfigError::Io { .. } | ConfigError::InFile { .. } => error,
            error => ConfigError::InFile {
                path: path.to_path_buf(),
                error: Box::new(error),
            },
        };
        let text = read_file(path)?;
        let mut config = Config::parse(&text).map_err(in_file)?;
        config.initial_config = text;
        config.config_file = Some(path.to_path_buf());
        if let Some(dynamic) = config.dynamic_config_file.clone() {
            config.read_dynamic_config(&dynamic)?;
        }
        let myid_path = config.data_dir.join("myid");
        if myid_path.is_file() {
            let text = read_file(&myid_path)?;
            let first_line = text.lines().next().unwrap_or("").trim();
            let id = first_line.parse::<u64>().map_err(|_| ConfigError::InFile {
                path: myid_path.clone(),
                error: Box::new(ConfigError::invalid(format!(
                    "serverid {first_line:?} is not a number"
                ))),
            })?;
            config.set_my_id(id).map_err(in_file)?;
        } else if config.is_distributed() {
            return Err(in_file(ConfigError::invalid(format!(
                "myid file is missing: {} (an ensemble member needs its server id)",
                myid_path.display()
            ))));
        }
        Ok(config)
    }

    /// Records this server's id and applies what follows from it, as ZooKeeper's
    /// `setupClientPort` does: when this server's `server.N` line has a client part, that
    /// address and port become `client_port_address`/`client_port`.
    ///
    /// Errors ([`ConfigError::Invalid`]): in an ensemble, `id` has no `server.N` line;
    /// the static clientPort/clientPortAddress disagree with this server's `;addr:port`;
    /// `extendedTypesEnabled` with an id above 254 (ZooKeeper's `EphemeralType` limit,
    /// since TTL session ids embed the server id in one byte).
    pub fn set_my_id(&mut self, id: u64) -> Result<(), ConfigError> {
        self.my_id = Some(id);
        if self.extended_types_enabled && id > 254 {
            return Err(ConfigError::invalid(format!(
                "extendedTypesEnabled is true but server id {id} is larger than 254"
            )));
        }
        let Some(spec) = self.servers.iter().find(|s| s.id == id) else {
            if self.is_distributed() {
                return Err(ConfigError::invalid(format!(
                    "myid is {id} but there is no server.{id} line"
                )));
            }
            return Ok(());
        };
        if let Some(spec_port) = spec.client_port {
            let spec_address = spec.client_address.clone();
            if let Some(static_port) = self.client_port {
                let static_address = self.client_port_address.as_deref().unwrap_or("0.0.0.0");
                let same = static_port == spec_port
                    && (is_wildcard(static_address)
                        || Some(static_address) == spec_address.as_deref());
                if !same {
                    return Err(ConfigError::invalid(format!(
                        "client address for this server (id = {id}) in static config is \
                         {static_address}:{static_port}, different from server.{id}'s \
                         {}:{spec_port}",
                        spec_address.as_deref().unwrap_or("0.0.0.0")
                    )));
                }
            }
            self.client_port = Some(spec_port);
            self.client_port_address = spec_address;
        }
        Ok(())
    }

    /// The busy-poll window in microseconds (`keel.busyPollUs`), 0 for none: as set, or
    /// when not set [`DEFAULT_BUSY_POLL_US`] for a standalone server and 0 for an
    /// ensemble member. Why the two differ, measured on this project's 2-vCPU VM,
    /// alternated runs (medians of 6 each, zkload 1 x 1, p50): standalone, the poller took
    /// sets from 359 to 313 us with gets unchanged (50 / 49 us); in a 3-member ensemble,
    /// through a follower, it made writes slower, create 727 -> 931 us, set 676 -> 854,
    /// delete 704 -> 834, gets unchanged (50 / 48 us). There three members and the
    /// client share the CPUs, and the polled CPU is time the other members' threads
    /// and the host's disk emulation on the write's path do not get.
    pub fn busy_poll_us(&self) -> u64 {
        match self.busy_poll_us {
            Some(us) => us,
            None if self.is_distributed() => 0,
            None => DEFAULT_BUSY_POLL_US,
        }
    }

    /// Whether this configuration forms an ensemble rather than a standalone server:
    /// more than one participant, or any participant with `standaloneEnabled=false`
    /// (ZooKeeper's `QuorumPeerConfig.isDistributed`). A single `server.N` line with
    /// standalone enabled still runs standalone, as in ZooKeeper.
    pub fn is_distributed(&self) -> bool {
        let participants = self.servers.iter().filter(|s| !s.observer).count();
        participants > 1 || (!self.standalone_enabled && participants > 0)
    }

    /// The ensemble's membership as ZooKeeper's `QuorumMaj.toString` writes it, which is
    /// what `/zookeeper/config` holds on a member and `conf` prints after `membership: `:
    /// one `server.N=host:quorumPort:electionPort:participant|observer` line per server,
    /// with `;clientAddress:clientPort` when the line gave a client part
    /// (`QuorumServer.toString`; IPv6 hosts in brackets), each ended by `\n`, then
    /// `version=` and the hex [`Config::config_version`] (0 for a static configuration), no newline.
    ///
    /// The servers come in the iteration order of ZooKeeper's `HashMap<Long, _>` of
    /// members: by bucket of the id's hash in a table of the size that many entries
    /// grow it to, then (for ids sharing a bucket, which ZooKeeper keeps in insertion
    /// order) by id. For ids 1..N of an ensemble of up to 12 that is ascending id.
    pub fn membership(&self) -> String {
        let mut table = 16usize;
        while self.servers.len() > table / 4 * 3 {
            table *= 2;
        }
        let bucket = |id: u64| {
            let h = (id ^ (id >> 32)) as u32;
            (h ^ (h >> 16)) as usize & (table - 1)
        };
        let mut servers: Vec<&ServerSpec> = self.servers.iter().collect();
        servers.sort_by_key(|s| (bucket(s.id), s.id));
        let delimited = |host: &str| {
            if host.contains(':') {
                format!("[{host}]")
            } else {
                host.to_string()
            }
        };
        let mut out = String::new();
        for s in servers {
            let role = if s.observer {
                "observer"
            } else {
                "participant"
            };
            out.push_str(&format!(
                "server.{}={}:{}:{}:{role}",
                s.id,
                delimited(&s.host),
                s.quorum_port,
                s.election_port
            ));
            if let Some(port) = s.client_port {
                let addr = s.client_address.as_deref().unwrap_or("0.0.0.0");
                out.push_str(&format!(";{}:{port}", delimited(addr)));
            }
            out.push('\n');
        }
        out.push_str(&format!("version={:x}", self.config_version));
        out
    }

    /// Applies one JVM-style system property, the way ZooKeeper reads it:
    /// `zookeeper.<key>` for the keys ZooKeeper passes through from zoo.cfg
    /// (`zookeeper.extendedTypesEnabled`, `zookeeper.DigestAuthenticationProvider.superDigest`,
    /// `zookeeper.enforceQuota`, `zookeeper.snapCount`, `zookeeper.globalOutstandingLimit`,
    /// `zookeeper.forceSync`, `zookeeper.4lw.commands.whitelist`, `zookeeper.admin.*`,
    /// `zookeeper.ssl.*`, `zookeeper.X509AuthenticationProvider.superUser`),
    /// and the bare names `jute.maxbuffer` and `znode.container.checkIntervalMs`;
    /// `readonlymode.enabled` (true when "true" in any case, as Java's
    /// `Boolean.getBoolean`, never an error). Other properties are ignored.
    ///
    /// A key also set in zoo.cfg keeps the file's value: ZooKeeper copies zoo.cfg keys
    /// into system properties after the JVM starts, overwriting `-D` flags.
    ///
    /// Errors: [`ConfigError::BadProperty`] when the value does not parse.
    pub fn apply_system_property(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        if name == READ_ONLY_MODE_PROPERTY {
            // Java's Boolean.getBoolean: "true" in any case is true, anything else false.
            self.read_only_mode_enabled = value.trim().eq_ignore_ascii_case("true");
            return Ok(());
        }
        let key = match name.strip_prefix("zookeeper.") {
            Some(key) if is_pass_through(key) => key,
            _ if JVM_ONLY_KEYS.contains(&name) => name,
            _ => return Ok(()),
        };
        if self.entries.iter().any(|(k, _)| k == key) {
            tracing::debug!(property = name, "zoo.cfg sets {key}, ignoring the property");
            return Ok(());
        }
        self.apply_setting(key, value.trim())
            .map(|_| ())
            .map_err(|reason| ConfigError::BadProperty {
                name: name.to_string(),
                value: value.to_string(),
                reason,
            })
    }

    /// Reads the JAAS file of `java.security.auth.login.config`, if set, into
    /// [`ClientAuthConfig::sasl_server`], and checks the enforcement settings. Call it
    /// once every zoo.cfg key and system property is applied. As ZooKeeper's
    /// ServerCnxnFactory.configureSaslLogin: a file without the server section means no
    /// SASL server; a file that cannot be read or parsed stops the server.
    ///
    /// Errors: [`ConfigError::Io`] for an unreadable file, [`ConfigError::Invalid`] for
    /// one that does not parse and for the enforcement settings ZooKeeper refuses
    /// ([`ClientAuthConfig::enforced_schemes`]).
    pub fn load_jaas(&mut self) -> Result<(), ConfigError> {
        self.client_auth.enforced_schemes()?;
        self.quorum_sasl.check().map_err(ConfigError::invalid)?;
        let Some(path) = self.jaas_login_config.clone() else {
            return Ok(());
        };
        let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Io {
            path: PathBuf::from(&path),
            source,
        })?;
        let jaas = crate::sasl::jaas::JaasConfig::parse(&text)
            .map_err(|e| ConfigError::invalid(format!("{path}: {e}")))?;
        self.jaas = Some(jaas.clone());
        let section = self
            .client_auth
            .sasl_login_context
            .as_deref()
            .unwrap_or(crate::sasl::DEFAULT_SERVER_SECTION);
        let Some(mut server) = crate::sasl::SaslServerConfig::from_jaas(&jaas, section) else {
            return Ok(());
        };
        server.super_password = self.client_auth.sasl_super_password.clone();
        server.super_users = self
            .client_auth
            .super_users
            .iter()
            .map(|(_, v)| v.clone())
            .collect();
        if server.kerberos.is_some() {
            server.name_rules = crate::sasl::gssapi::NameRules {
                default_realm: krb5_default_realm().unwrap_or_default(),
                remove_host: self.client_auth.kerberos_remove_host,
                remove_realm: self.client_auth.kerberos_remove_realm,
            };
        }
        self.client_auth.sasl_server = Some(server);
        Ok(())
    }

    /// Applies every `-Dname=value` token of a JVM flag string such as `SERVER_JVMFLAGS`
    /// (`-Dname` alone sets the empty string, as Java does). Tokens are split on
    /// whitespace with shell-style single and double quotes and backslash escapes;
    /// tokens that are not `-D` flags (`-Xmx1g`, `-cp x`) are ignored.
    ///
    /// Errors: the first [`ConfigError::BadProperty`] from
    /// [`Config::apply_system_property`].
    pub fn apply_jvm_flags(&mut self, flags: &str) -> Result<(), ConfigError> {
        for token in split_shell_words(flags) {
            if let Some(property) = token.strip_prefix("-D") {
                let (name, value) = property.split_once('=').unwrap_or((property, ""));
                self.apply_system_property(name, value)?;
            }
        }
        Ok(())
    }

    /// Applies one zoo.cfg key. Returns whether keel uses the key; `Err` holds the reason
    /// a value is bad.
    fn apply_file_key(
        &mut self,
        pending: &mut Pending,
        line: usize,
        key: &str,
        value: &str,
    ) -> Result<bool, String> {
        match key {
            "tickTime" => {
                self.tick_time_ms = parse_u32(value)?;
                if self.tick_time_ms == 0 {
                    return Err("must be greater than 0".to_string());
                }
            }
            "initLimit" => {
                self.init_limit = parse_u32(value)?;
                pending.init_limit_set = true;
            }
            "syncLimit" => {
                self.sync_limit = parse_u32(value)?;
                pending.sync_limit_set = true;
            }
            "dataDir" => pending.data_dir = Some(parse_path(value)?),
            "dataLogDir" => pending.data_log_dir = Some(parse_path(value)?),
            "clientPort" => self.client_port = parse_optional_port(value)?,
            "clientPortAddress" => self.client_port_address = Some(value.to_string()),
            "secureClientPort" => self.secure_client_port = parse_optional_port(value)?,
            "maxClientCnxns" => self.max_client_cnxns = parse_u32(value)?,
            "keel.busyPollUs" => {
                let us = value.parse::<u64>().map_err(|_| not_integer(value))?;
                if us > MAX_BUSY_POLL_US {
                    return Err(format!("at most {MAX_BUSY_POLL_US} (microseconds)"));
                }
                self.busy_poll_us = Some(us);
            }
            "keel.storageAcks" => self.storage_acks = parse_bool(value)?,
            "keel.workerThreads" => {
                let n = value.parse::<u32>().map_err(|_| not_integer(value))?;
                if n > MAX_WORKER_THREADS {
                    return Err(format!("at most {MAX_WORKER_THREADS}"));
                }
                self.worker_threads = n;
            }
            "minSessionTimeout" => pending.min_session_timeout_ms = parse_session_timeout(value)?,
            "maxSessionTimeout" => pending.max_session_timeout_ms = parse_session_timeout(value)?,
            "autopurge.snapRetainCount" => {
                let count = parse_u32(value)?;
                if count < 3 {
                    tracing::warn!(
                        "invalid autopurge.snapRetainCount {count}, using 3 (ZooKeeper's minimum)"
                    );
                }
                self.autopurge_snap_retain_count = count.max(3);
            }
            "autopurge.purgeInterval" => self.autopurge_purge_interval_hours = parse_u32(value)?,
            "metricsProvider.className" => {
                self.metrics_provider_class_name = Some(value.to_string())
            }
            "metricsProvider.httpPort" => self.metrics_provider_http_port = parse_port(value)?,
            "metricsProvider.httpHost" => self.metrics_provider_http_host = value.to_string(),
            "reconfigEnabled" => self.reconfig_enabled = parse_bool(value)?,
            "localSessionsEnabled" => self.local_sessions_enabled = parse_bool(value)?,
            "localSessionsUpgradingEnabled" => {
                self.local_sessions_upgrading_enabled = parse_bool(value)?
            }
            "standaloneEnabled" => self.standalone_enabled = parse_bool(value)?,
            "quorumListenOnAllIPs" => self.quorum_listen_on_all_ips = parse_bool(value)?,
            "sslQuorum" => self.ssl_quorum = parse_bool(value)?,
            "quorum.auth.enableSasl" => self.quorum_sasl.enabled = parse_bool(value)?,
            "quorum.auth.serverRequireSasl" => self.quorum_sasl.server_require = parse_bool(value)?,
            "quorum.auth.learnerRequireSasl" => {
                self.quorum_sasl.learner_require = parse_bool(value)?
            }
            "quorum.auth.learner.saslLoginContext" => {
                self.quorum_sasl.learner_context = value.to_string()
            }
            "quorum.auth.server.saslLoginContext" => {
                self.quorum_sasl.server_context = value.to_string()
            }
            "quorum.auth.kerberos.servicePrincipal" => {
                self.quorum_sasl.service_principal = value.to_string()
            }
            "portUnification" => self.port_unification = parse_bool(value)?,
            "sslQuorumReloadCertFiles" => self.ssl_quorum_reload_cert_files = parse_bool(value)?,
            "dynamicConfigFile" => self.dynamic_config_file = Some(parse_path(value)?),
            "secureClientPortAddress" => {
                pending.secure_client_port_address = true;
                self.secure_client_port_address = Some(value.to_string());
            }
            "electionAlg" => {
                if value.parse::<i32>() != Ok(3) {
                    return Err("only 3 (fast leader election) is supported".to_string());
                }
                return Ok(false);
            }
            "peerType" => {
                parse_peer_type(value)?;
                return Ok(false);
            }
            _ if key.starts_with("server.") => {
                let id = key["server.".len()..]
                    .parse::<u64>()
                    .map_err(|_| "the server id after \"server.\" is not a number".to_string())?;
                let spec = parse_server(id, value)?;
                match self.servers.iter_mut().find(|s| s.id == id) {
                    Some(existing) => *existing = spec,
                    None => self.servers.push(spec),
                }
            }
            _ if key.starts_with("group") || key.starts_with("weight") => {
                pending.hierarchical_quorum_line.get_or_insert(line);
                return Ok(false);
            }
            _ if ZK_BOOLEAN_KEYS.contains(&key) => {
                parse_bool(value)?;
                return Ok(false);
            }
            _ if ZK_INTEGER_KEYS.contains(&key) => {
                value
                    .parse::<i64>()
                    .map_err(|_| "not an integer".to_string())?;
                return Ok(false);
            }
            _ => return self.apply_setting(key, value),
        }
        Ok(true)
    }

    /// Applies a key that may also arrive as a system property. Returns whether the key
    /// is one of them.
    fn apply_setting(&mut self, key: &str, value: &str) -> Result<bool, String> {
        match key {
            "globalOutstandingLimit" => self.global_outstanding_limit = parse_u32(value)?,
            "snapCount" => {
                let count = value.parse::<u64>().map_err(|_| not_integer(value))?;
                // ZooKeeperServer.getSnapCount raises values below 2 to 2.
                self.snap_count = count.max(2);
            }
            "forceSync" => {
                self.force_sync = match value {
                    "yes" => true,
                    "no" => false,
                    _ => return Err("expected yes or no".to_string()),
                }
            }
            "4lw.commands.whitelist" => {
                self.four_letter_words = FourLetterWhitelist::parse(value);
            }
            "admin.enableServer" => self.admin_enable_server = parse_bool(value)?,
            "admin.serverAddress" => self.admin_server_address = value.to_string(),
            "admin.serverPort" => self.admin_server_port = parse_port(value)?,
            // Jetty refuses a servlet path spec that does not start with "/".
            "admin.commandURL" if !value.is_empty() && !value.starts_with('/') => {
                return Err("must start with \"/\" (e.g. /commands)".to_string())
            }
            "admin.commandURL" => self.admin_command_url = value.to_string(),
            "admin.idleTimeout" => self.admin_idle_timeout_ms = parse_u32(value)?,
            "admin.console.identity" if !value.contains(':') => {
                return Err("expected user:password".to_string())
            }
            "admin.console.identity" => self.admin_console_identity = Some(value.to_string()),
            "extendedTypesEnabled" => self.extended_types_enabled = parse_bool(value)?,
            "DigestAuthenticationProvider.superDigest" => {
                self.super_digest = Some(value.to_string())
            }
            "enforceQuota" => self.enforce_quota = parse_bool(value)?,
            "cnxTimeout" => {
                self.cnx_timeout_ms = parse_u32(value)?;
                if self.cnx_timeout_ms == 0 {
                    return Err("must be greater than 0 (ms)".to_string());
                }
            }
            "X509AuthenticationProvider.superUser" => {
                self.x509_super_user = Some(value.to_string())
            }
            "java.security.auth.login.config" => self.jaas_login_config = Some(value.to_string()),
            _ if key.starts_with("ssl.quorum.") => {
                return self.quorum_ssl.apply(&key["ssl.quorum.".len()..], value)
            }
            _ if key.starts_with("ssl.") => return self.ssl.apply(&key["ssl.".len()..], value),
            _ if ClientAuthConfig::is_key(key) => self.client_auth.apply(key, value)?,
            "jute.maxbuffer" => {
                self.jute_max_buffer = value.parse::<usize>().map_err(|_| not_integer(value))?;
                if self.jute_max_buffer == 0 {
                    return Err("must be greater than 0".to_string());
                }
            }
            "znode.container.checkIntervalMs" => {
                self.container_check_interval_ms =
                    value.parse::<u64>().map_err(|_| not_integer(value))?;
                if self.container_check_interval_ms == 0 {
                    return Err("must be greater than 0".to_string());
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Applies defaults that depend on other keys and checks the rules that span keys
    /// (ZooKeeper's `parseProperties` after its loop, and `parseDynamicConfig`).
    fn finish(&mut self, mut pending: Pending) -> Result<(), ConfigError> {
        self.data_dir = pending
            .data_dir
            .take()
            .ok_or_else(|| ConfigError::Missing {
                key: "dataDir".to_string(),
            })?;
        self.data_log_dir = pending
            .data_log_dir
            .take()
            .unwrap_or_else(|| self.data_dir.clone());
        if self.client_port.is_none() && self.client_port_address.is_some() {
            return Err(ConfigError::invalid(
                "clientPortAddress is set but clientPort is not set",
            ));
        }
        if self.secure_client_port.is_none() && pending.secure_client_port_address {
            return Err(ConfigError::invalid(
                "secureClientPortAddress is set but secureClientPort is not set",
            ));
        }
        self.min_session_timeout_ms = pending
            .min_session_timeout_ms
            .unwrap_or(ticks_ms(self.tick_time_ms, 2));
        self.max_session_timeout_ms = pending
            .max_session_timeout_ms
            .unwrap_or(ticks_ms(self.tick_time_ms, 20));
        if self.min_session_timeout_ms > self.max_session_timeout_ms {
            return Err(ConfigError::invalid(format!(
                "minSessionTimeout ({} ms) must not be larger than maxSessionTimeout ({} ms)",
                self.min_session_timeout_ms, self.max_session_timeout_ms
            )));
        }
        if let Some(line) = pending.hierarchical_quorum_line {
            return Err(ConfigError::invalid(format!(
                "line {line}: hierarchical quorums (group.N / weight.N) are not supported by keel"
            )));
        }
        self.servers.sort_by_key(|s| s.id);
        if self.dynamic_config_file.is_some() {
            if let Some(spec) = self.servers.first() {
                return Err(ConfigError::invalid(format!(
                    "server.{} must be in the separate dynamic config file",
                    spec.id
                )));
            }
            // The server list comes from the dynamic file; Config::load checks it then.
            return Ok(());
        }
        self.check_servers(&pending)
    }

    /// ZooKeeper's `parseDynamicConfig` and `checkValidity` rules on the server list.
    fn check_servers(&self, pending: &Pending) -> Result<(), ConfigError> {
        let participants = self.servers.iter().filter(|s| !s.observer).count();
        let observers = self.servers.len() - participants;
        if participants == 0 {
            if !self.standalone_enabled {
                return Err(ConfigError::invalid(
                    "standaloneEnabled is false but there is no participant server.N line",
                ));
            }
            if observers > 0 {
                return Err(ConfigError::invalid(
                    "observers without participants is an invalid configuration",
                ));
            }
        } else if participants == 1 && self.standalone_enabled {
            if observers > 0 {
                return Err(ConfigError::invalid(
                    "observers without a quorum is an invalid configuration",
                ));
            }
            tracing::warn!("only one server specified, running standalone (as ZooKeeper does)");
        }
        if self.is_distributed() {
            if !pending.init_limit_set || self.init_limit == 0 {
                return Err(ConfigError::invalid(
                    "initLimit is not set (an ensemble requires it)",
                ));
            }
            if !pending.sync_limit_set || self.sync_limit == 0 {
                return Err(ConfigError::invalid(
                    "syncLimit is not set (an ensemble requires it)",
                ));
            }
        }
        Ok(())
    }

    /// Reads `server.N` lines from the dynamic config file (ZooKeeper allows only
    /// `server.N`, `group.N`, `weight.N` and `version` there).
    fn read_dynamic_config(&mut self, path: &Path) -> Result<(), ConfigError> {
        let in_file = |error: ConfigError| ConfigError::InFile {
            path: path.to_path_buf(),
            error: Box::new(error),
        };
        let text = read_file(path)?;
        let mut pending = Pending {
            init_limit_set: self.entries.iter().any(|(k, _)| k == "initLimit"),
            sync_limit_set: self.entries.iter().any(|(k, _)| k == "syncLimit"),
            ..Pending::default()
        };
        for (line, key, value) in read_properties(&text) {
            if key.starts_with("server.") {
                self.apply_file_key(&mut pending, line, &key, &value)
                    .map_err(|reason| {
                        in_file(ConfigError::BadValue {
                            line,
                            key: key.clone(),
                            value: value.clone(),
                            reason,
                        })
                    })?;
            } else if key.starts_with("group") || key.starts_with("weight") {
                return Err(in_file(ConfigError::invalid(format!(
                    "line {line}: hierarchical quorums (group.N / weight.N) are not supported by keel"
                ))));
            } else if key == "version" {
                return Err(in_file(ConfigError::invalid(format!(
                    "line {line}: a dynamic config file has no version inside (it is the \
                     file name's hex suffix)"
                ))));
            } else {
                return Err(in_file(ConfigError::invalid(format!(
                    "line {line}: unrecognised parameter {key} in a dynamic config file"
                ))));
            }
        }
        self.config_version = version_of_file_name(path);
        self.servers.sort_by_key(|s| s.id);
        self.check_servers(&pending).map_err(in_file)
    }
}

/// The config version a dynamic config file's name gives: the hex after its last `.`,
/// 0 when that is no hex number (`QuorumPeerConfig.getVersionFromFilename`).
fn version_of_file_name(path: &Path) -> u64 {
    let name = path.to_string_lossy();
    name.rsplit_once('.')
        .and_then(|(_, hex)| u64::from_str_radix(hex, 16).ok())
        .unwrap_or(0)
}

fn read_file(path: &Path) -> Result<String, ConfigError> {
    fs::read_to_string(path).map_err(|source| ConfigError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn is_wildcard(address: &str) -> bool {
    matches!(address, "0.0.0.0" | "::" | "[::]" | "0:0:0:0:0:0:0:0")
}

fn not_integer(value: &str) -> String {
    if value.parse::<i128>().is_ok() {
        "out of range".to_string()
    } else {
        "not an integer".to_string()
    }
}

/// A non-negative 32-bit integer. ZooKeeper's `Integer.parseInt` also takes negative
/// numbers, but none of the keys parsed with this has a meaning below zero.
/// `minSessionTimeout`/`maxSessionTimeout`: a Java int; -1 means "the default" (`None`),
/// as ZooKeeper's QuorumPeerConfig reads it.
fn parse_session_timeout(value: &str) -> Result<Option<i32>, String> {
    let ms = value.parse::<i32>().map_err(|_| not_integer(value))?;
    Ok(Some(ms).filter(|&ms| ms != -1))
}

/// `n` ticks in ms, as an i32 (saturating; a tickTime that large is refused elsewhere).
fn ticks_ms(tick_time_ms: u32, n: u32) -> i32 {
    i32::try_from(tick_time_ms.saturating_mul(n)).unwrap_or(i32::MAX)
}

fn parse_u32(value: &str) -> Result<u32, String> {
    value.parse::<u32>().map_err(|_| not_integer(value))
}

fn parse_port(value: &str) -> Result<u16, String> {
    value
        .parse::<u16>()
        .map_err(|_| format!("{}: a port is 0-65535", not_integer(value)))
}

/// `clientPort`/`secureClientPort`: 0 means unset, as in ZooKeeper.
fn parse_optional_port(value: &str) -> Result<Option<u16>, String> {
    Ok(Some(parse_port(value)?).filter(|&port| port != 0))
}

/// ZooKeeper's `QuorumPeerConfig.parseBoolean`: `true` or `false`, any case.
fn parse_bool(value: &str) -> Result<bool, String> {
    if value.eq_ignore_ascii_case("true") {
        Ok(true)
    } else if value.eq_ignore_ascii_case("false") {
        Ok(false)
    } else {
        Err("expected true or false".to_string())
    }
}

fn parse_path(value: &str) -> Result<PathBuf, String> {
    if value.is_empty() {
        return Err("empty path".to_string());
    }
    Ok(PathBuf::from(value))
}

/// `observer` or `participant`, any case; returns whether it is an observer.
fn parse_peer_type(value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "observer" => Ok(true),
        "participant" => Ok(false),
        _ => Err(format!(
            "unrecognised peer type {:?}: expected participant or observer",
            value.trim()
        )),
    }
}

/// Splits `host:port[:...]` where host may be a bracketed IPv6 literal, like ZooKeeper's
/// `ConfigUtils.getHostAndPort`.
pub(crate) fn split_host_and_ports(text: &str) -> Result<Vec<&str>, String> {
    if let Some(rest) = text.strip_prefix('[') {
        let end = rest
            .find("]:")
            .ok_or_else(|| format!("{text:?} starts with '[' but has no matching ']:'"))?;
        let mut parts = vec![&rest[..end]];
        parts.extend(rest[end + 2..].split(':'));
        Ok(parts)
    } else {
        Ok(text.split(':').collect())
    }
}

/// Parses the value of `server.N` (see [`ServerSpec`]). Errors: the reason, without
/// the key or line (callers add them).
pub(crate) fn parse_server(id: u64, value: &str) -> Result<ServerSpec, String> {
    const FORM: &str = "expected host:quorumPort:electionPort[:participant|observer]\
                        [;[clientAddress:]clientPort]";
    let (server_part, client_part) = match value.split_once(';') {
        Some((server, client)) if !client.contains(';') => (server, client),
        Some(_) => return Err(FORM.to_string()),
        None => (value, ""),
    };
    if server_part.contains('|') {
        return Err(
            "several addresses per server (multiAddress.enabled) are not supported \
                    by keel"
                .to_string(),
        );
    }
    let parts = split_host_and_ports(server_part)?;
    if !(3..=4).contains(&parts.len()) || parts[0].is_empty() {
        return Err(FORM.to_string());
    }
    let server_port = |text: &str| match text.parse::<u16>() {
        Ok(port) if port != 0 => Ok(port),
        _ => Err(format!("{text:?} is not a port number (1-65535)")),
    };
    let quorum_port = server_port(parts[1])?;
    let election_port = server_port(parts[2])?;
    if quorum_port == election_port {
        return Err("the quorum port and the election port must be different".to_string());
    }
    let observer = match parts.get(3) {
        Some(peer_type) => parse_peer_type(peer_type)?,
        None => false,
    };
    // Java's String.split drops a trailing empty part, so "host:1:2;" has no client part.
    let (client_address, client_port) = if client_part.is_empty() {
        (None, None)
    } else {
        let client = split_host_and_ports(client_part)?;
        let (address, port) = match client.as_slice() {
            [port] => ("0.0.0.0", *port),
            [address, port] if !address.is_empty() => (*address, *port),
            _ => return Err(FORM.to_string()),
        };
        let port = port
            .parse::<u16>()
            .map_err(|_| format!("client port {port:?} is not a port number (0-65535)"))?;
        (Some(address.to_string()), Some(port))
    };
    Ok(ServerSpec {
        id,
        host: parts[0].to_string(),
        quorum_port,
        election_port,
        observer,
        client_address,
        client_port,
    })
}

/// Reads Java properties text (`java.util.Properties.load`) into
/// `(1-based line, key, value)` triples in file order, keys and values trimmed.
///
/// Syntax, as in Java: lines whose first non-blank character is `#` or `!` are comments;
/// the key ends at the first unescaped `=`, `:` or whitespace, and one `=` or `:` after
/// optional whitespace is skipped (so `k=v`, `k = v`, `k:v` and `k v` are all the same);
/// a line ending in an odd number of backslashes continues on the next line (its leading
/// blanks dropped); `\t`, `\n`, `\r`, `\f`, `\uXXXX` are escapes and `\x` is `x`. The
/// line number reported is the line where the key starts.
pub(crate) fn read_properties(text: &str) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    let mut lines = text.split('\n').enumerate();
    while let Some((index, raw)) = lines.next() {
        let first = raw.strip_suffix('\r').unwrap_or(raw);
        let first = first.trim_start_matches([' ', '\t', '\u{c}']);
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        let mut logical = String::from(first);
        // Decided per physical line, as Java's LineReader (its backslash count starts
        // again on each line): counting on the growing logical line instead rescans a
        // run of backslashes carried over from earlier lines, quadratic in a long
        // reconfig request.
        let mut continues = ends_with_odd_backslashes(first);
        while continues {
            logical.pop();
            match lines.next() {
                Some((_, next)) => {
                    let next = next.strip_suffix('\r').unwrap_or(next);
                    let next = next.trim_start_matches([' ', '\t', '\u{c}']);
                    continues = ends_with_odd_backslashes(next);
                    logical.push_str(next);
                }
                None => break,
            }
        }
        let (key, value) = split_key_value(&logical);
        out.push((
            index + 1,
            unescape(key).trim().to_string(),
            unescape(value).trim().to_string(),
        ));
    }
    out
}

/// Whether a Java Properties line goes on on the next one (an odd number of `\` at
/// its end).
pub(crate) fn ends_with_odd_backslashes(line: &str) -> bool {
    line.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
}

/// Splits a logical line at the key separator; both halves are still escaped.
fn split_key_value(line: &str) -> (&str, &str) {
    let mut escaped = false;
    let mut key_end = line.len();
    let mut separator = None;
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '=' || c == ':' {
            key_end = i;
            separator = Some(c);
            break;
        } else if matches!(c, ' ' | '\t' | '\u{c}') {
            key_end = i;
            break;
        }
    }
    let key = &line[..key_end];
    let mut rest = &line[key_end..];
    if separator.is_some() {
        rest = &rest[1..];
    } else {
        rest = rest.trim_start_matches([' ', '\t', '\u{c}']);
        if let Some(stripped) = rest.strip_prefix(['=', ':']) {
            rest = stripped;
        }
    }
    (key, rest.trim_start_matches([' ', '\t', '\u{c}']))
}

/// Resolves Java properties escapes. A malformed `\u` keeps the text as written (Java
/// throws instead; keel prefers a readable bad value later).
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.clone().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(decoded) if hex.len() == 4 => {
                        out.push(decoded);
                        for _ in 0..4 {
                            chars.next();
                        }
                    }
                    _ => out.push_str("\\u"),
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// Splits a flag string into words: whitespace separates, single quotes keep everything,
/// double quotes keep everything but `\"` and `\\`, and a backslash outside quotes
/// escapes the next character.
pub(crate) fn split_shell_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                word.extend(chars.by_ref().take_while(|&c| c != '\''));
            }
            '"' => {
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => match chars.next() {
                            Some(next @ ('"' | '\\')) => word.push(next),
                            Some(next) => {
                                word.push('\\');
                                word.push(next);
                            }
                            None => word.push('\\'),
                        },
                        c => word.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(next) = chars.next() {
                    word.push(next);
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn parse(text: &str) -> Config {
        Config::parse(text).unwrap_or_else(|e| panic!("{e}"))
    }

    fn error(text: &str) -> String {
        Config::parse(text)
            .expect_err("should be refused")
            .to_string()
    }

    /// The peer-connection settings: QuorumCnxManager's cnxTO from zoo.cfg's
    /// `cnxTimeout` or the `zookeeper.cnxTimeout` property (5000 ms by default), and
    /// `quorumListenOnAllIPs`; bad values are refused by key.
    #[test]
    fn peer_connection_settings() {
        let c = parse("dataDir=/d\n");
        assert_eq!(
            (c.cnx_timeout_ms, c.quorum_listen_on_all_ips),
            (5000, false)
        );
        let c = parse("dataDir=/d\ncnxTimeout=1500\nquorumListenOnAllIPs=true\n");
        assert_eq!((c.cnx_timeout_ms, c.quorum_listen_on_all_ips), (1500, true));
        let mut c = parse("dataDir=/d\n");
        c.apply_system_property("zookeeper.cnxTimeout", "700")
            .unwrap();
        assert_eq!(c.cnx_timeout_ms, 700);
        assert!(error("dataDir=/d\ncnxTimeout=0\n").contains("cnxTimeout"));
        assert!(error("dataDir=/d\ncnxTimeout=soon\n").contains("cnxTimeout"));
        assert!(error("dataDir=/d\nquorumListenOnAllIPs=maybe\n").contains("quorumListenOnAllIPs"));
    }

    #[test]
    fn admin_keys_refused_or_kept_as_jetty_would() {
        let e = error("dataDir=/d\nadmin.commandURL=commands\n");
        assert!(
            e.contains("admin.commandURL") && e.contains("line 2"),
            "{e}"
        );
        assert_eq!(
            parse("dataDir=/d\nadmin.commandURL=\n").admin_command_url,
            ""
        );
        assert_eq!(parse("dataDir=/d\n").admin_idle_timeout_ms, 30_000);
        assert_eq!(
            parse("dataDir=/d\nadmin.idleTimeout=1500\n").admin_idle_timeout_ms,
            1500
        );
        assert!(error("dataDir=/d\nadmin.idleTimeout=soon\n").contains("admin.idleTimeout"));
    }

    /// A fresh directory under the system temp dir, unique to this test run.
    fn scratch_dir() -> PathBuf {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "keel-config-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn defaults() {
        let c = parse("dataDir=/d\n");
        let expected = Config {
            data_dir: PathBuf::from("/d"),
            data_log_dir: PathBuf::from("/d"),
            entries: vec![("dataDir".into(), "/d".into())],
            ..Config::default()
        };
        assert_eq!(c, expected);
        assert_eq!(c.tick_time_ms, 3000);
        assert_eq!(c.min_session_timeout_ms, 6000);
        assert_eq!(c.max_session_timeout_ms, 60000);
        assert_eq!(c.jute_max_buffer, 0xfffff);
        assert!(c.four_letter_words.allows("srvr"));
        assert!(!c.four_letter_words.allows("ruok"));
        assert!(!c.is_distributed());
    }

    #[test]
    fn every_key() {
        let c = parse(
            "tickTime=2000\ninitLimit=7\nsyncLimit=3\ndataDir=/d\ndataLogDir=/l\n\
             clientPort=2181\nclientPortAddress=127.0.0.1\nsecureClientPort=2281\n\
             maxClientCnxns=0\nminSessionTimeout=1000\nmaxSessionTimeout=90000\n\
             globalOutstandingLimit=50\nsnapCount=10\nautopurge.snapRetainCount=5\n\
             autopurge.purgeInterval=24\n4lw.commands.whitelist=ruok, stat\n\
             admin.enableServer=false\nadmin.serverAddress=127.0.0.1\nadmin.serverPort=9090\n\
             admin.commandURL=/cmd\n\
             metricsProvider.className=org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider\n\
             metricsProvider.httpPort=7001\nreconfigEnabled=TRUE\nstandaloneEnabled=false\n\
             server.1=127.0.0.1:2888:3888\nextendedTypesEnabled=true\n\
             DigestAuthenticationProvider.superDigest=super:D/InIHSb7yEEbrWz8b9l71RjZJU=\n\
             enforceQuota=true\nznode.container.checkIntervalMs=100\njute.maxbuffer=4194304\n\
             forceSync=no\n",
        );
        assert_eq!(c.tick_time_ms, 2000);
        assert_eq!((c.init_limit, c.sync_limit), (7, 3));
        assert_eq!(c.data_dir, PathBuf::from("/d"));
        assert_eq!(c.data_log_dir, PathBuf::from("/l"));
        assert_eq!(c.client_port, Some(2181));
        assert_eq!(c.client_port_address.as_deref(), Some("127.0.0.1"));
        assert_eq!(c.secure_client_port, Some(2281));
        assert_eq!(c.max_client_cnxns, 0);
        assert_eq!(c.min_session_timeout_ms, 1000);
        assert_eq!(c.max_session_timeout_ms, 90000);
        assert_eq!(c.global_outstanding_limit, 50);
        assert_eq!(c.snap_count, 10);
        assert_eq!(c.autopurge_snap_retain_count, 5);
        assert_eq!(c.autopurge_purge_interval_hours, 24);
        assert!(c.four_letter_words.allows("ruok") && c.four_letter_words.allows("stat"));
        assert!(!c.four_letter_words.allows("mntr"));
        assert!(!c.admin_enable_server);
        assert_eq!(c.admin_server_address, "127.0.0.1");
        assert_eq!(c.admin_server_port, 9090);
        assert_eq!(c.admin_command_url, "/cmd");
        assert!(c
            .metrics_provider_class_name
            .as_deref()
            .unwrap()
            .ends_with("PrometheusMetricsProvider"));
        assert_eq!(c.metrics_provider_http_port, 7001);
        assert!(c.reconfig_enabled);
        assert!(!c.standalone_enabled);
        assert!(c.is_distributed());
        assert_eq!(c.servers.len(), 1);
        assert!(c.extended_types_enabled);
        assert_eq!(
            c.super_digest.as_deref(),
            Some("super:D/InIHSb7yEEbrWz8b9l71RjZJU=")
        );
        assert!(c.enforce_quota);
        assert_eq!(c.container_check_interval_ms, 100);
        assert_eq!(c.jute_max_buffer, 4194304);
        assert!(!c.force_sync);
        assert!(c.unknown_keys.is_empty(), "{:?}", c.unknown_keys);
        assert_eq!(c.entries.len(), 31);
        assert_eq!(c.entries[0], ("tickTime".into(), "2000".into()));
    }

    #[test]
    fn kazoo_harness_config() {
        let text = "tickTime=500\ndataDir=/tmp/kazoo/data\nclientPort=20000\n\
                    secureClientPort=20001\nmaxClientCnxns=0\nadmin.serverPort=20002\n\
                    serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n\
                    authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n\
                    ssl.keyStore.location=/tmp/kazoo/ssl/keystore.jks\n\
                    ssl.keyStore.password=password\n\
                    ssl.trustStore.location=/tmp/kazoo/ssl/truststore.jks\n\
                    ssl.trustStore.password=password\n4lw.commands.whitelist=*\n\
                    reconfigEnabled=true\nlocalSessionsEnabled=true\n\
                    localSessionsUpgradingEnabled=true\n";
        let c = parse(text);
        assert_eq!(c.tick_time_ms, 500);
        assert_eq!(c.client_port, Some(20000));
        assert_eq!(c.secure_client_port, Some(20001));
        assert_eq!(c.admin_server_port, 20002);
        assert_eq!(c.four_letter_words, FourLetterWhitelist::All);
        assert!(c.reconfig_enabled);
        assert_eq!(
            (c.min_session_timeout_ms, c.max_session_timeout_ms),
            (1000, 10000)
        );
        let unknown: Vec<&str> = c.unknown_keys.iter().map(|(_, k)| k.as_str()).collect();
        assert_eq!(unknown, ["serverCnxnFactory"]);
        assert!(c.local_sessions_enabled);
        assert!(c.local_sessions_upgrading_enabled);
        assert_eq!(c.unknown_keys[0].0, 7);
        assert!(c.client_auth.sasl_provider());
        assert_eq!(c.entries.len(), 16);
        assert_eq!(
            c.ssl.key_store_location,
            Some(PathBuf::from("/tmp/kazoo/ssl/keystore.jks"))
        );
        assert_eq!(c.ssl.key_store_password.as_deref(), Some("password"));
        assert_eq!(c.ssl.trust_store_password.as_deref(), Some("password"));
    }

    #[test]
    fn ssl_keys_from_file_and_properties() {
        let mut c = parse(
            "dataDir=/d\nsecureClientPort=2281\nsecureClientPortAddress=127.0.0.1\n\
             ssl.keyStore.location=/k.pem\nssl.keyStore.type=pem\nssl.clientAuth=WANT\n\
             ssl.enabledProtocols=TLSv1.2, TLSv1.3\nssl.hostnameVerification=no\n\
             ssl.quorum.keyStore.location=/q.jks\n",
        );
        assert_eq!(c.secure_client_port_address.as_deref(), Some("127.0.0.1"));
        assert_eq!(c.ssl.key_store_location, Some(PathBuf::from("/k.pem")));
        assert_eq!(c.ssl.key_store_type, Some(StoreType::Pem));
        assert_eq!(c.ssl.client_auth, ClientAuth::Want);
        assert_eq!(
            c.ssl.enabled_protocols,
            Some(vec!["TLSv1.2".to_string(), "TLSv1.3".to_string()])
        );
        assert!(!c.ssl.hostname_verification);
        assert_eq!(c.ssl.protocol, "TLSv1.2");
        let unknown: Vec<&str> = c.unknown_keys.iter().map(|(_, k)| k.as_str()).collect();
        assert!(unknown.is_empty(), "{unknown:?}");
        assert_eq!(
            c.quorum_ssl.key_store_location,
            Some(PathBuf::from("/q.jks"))
        );
        assert_eq!(c.ssl.key_store_location, Some(PathBuf::from("/k.pem")));
        // System properties fill what zoo.cfg leaves unset; zoo.cfg wins otherwise.
        c.apply_system_property("zookeeper.ssl.trustStore.location", "/t.pem")
            .unwrap();
        c.apply_system_property("zookeeper.ssl.keyStore.location", "/other.pem")
            .unwrap();
        c.apply_system_property("zookeeper.X509AuthenticationProvider.superUser", "CN=root")
            .unwrap();
        assert_eq!(c.ssl.trust_store_location, Some(PathBuf::from("/t.pem")));
        assert_eq!(c.ssl.key_store_location, Some(PathBuf::from("/k.pem")));
        assert_eq!(c.x509_super_user.as_deref(), Some("CN=root"));
        assert_eq!(c.quorum_ssl.trust_store_location, None);
        assert!(!c.ssl_quorum && !c.port_unification);
    }

    #[test]
    fn quorum_ssl_keys_are_their_own_set() {
        let mut c = parse(
            "dataDir=/d\nsslQuorum=true\nportUnification=TRUE\n\
             ssl.quorum.keyStore.location=/q.p12\nssl.quorum.keyStore.type=pkcs12\n\
             ssl.quorum.hostnameVerification=false\nssl.quorum.clientAuth=none\n\
             ssl.quorum.handshakeDetectionTimeoutMillis=250\nssl.clientAuth=want\n",
        );
        assert!(c.ssl_quorum && c.port_unification && !c.ssl_quorum_reload_cert_files);
        assert_eq!(c.quorum_ssl.key_store_type, Some(StoreType::Pkcs12));
        assert!(!c.quorum_ssl.hostname_verification);
        assert_eq!(c.quorum_ssl.client_auth, ClientAuth::None);
        assert_eq!(c.quorum_ssl.handshake_detection_timeout_ms, 250);
        assert_eq!(c.ssl.client_auth, ClientAuth::Want);
        assert!(c.ssl.hostname_verification);
        assert!(c.unknown_keys.is_empty(), "{:?}", c.unknown_keys);
        c.apply_system_property("zookeeper.ssl.quorum.trustStore.location", "/qt.pem")
            .unwrap();
        assert_eq!(
            c.quorum_ssl.trust_store_location,
            Some(PathBuf::from("/qt.pem"))
        );
        assert_eq!(c.ssl.trust_store_location, None);
        let err = Config::parse("dataDir=/d\nsslQuorum=yes\n").unwrap_err();
        assert!(err.to_string().contains("sslQuorum"), "{err}");
        assert!(c
            .apply_system_property("zookeeper.ssl.trustStore.type", "zip")
            .is_err());
        assert!(error("dataDir=/d\nssl.keyStore.type=zip\n").contains("ssl.keyStore.type"));
        assert!(error("dataDir=/d\nssl.clientAuth=maybe\n").contains("ssl.clientAuth"));
    }

    #[test]
    fn bad_values_name_line_key_and_value() {
        assert_eq!(
            error("# comment\ndataDir=/d\ntickTime=abc\n"),
            "zoo.cfg line 3: bad value \"abc\" for tickTime: not an integer"
        );
        let e = Config::parse("dataDir=/d\nclientPort=70000\n").unwrap_err();
        assert!(
            matches!(&e, ConfigError::BadValue { line: 2, key, value, .. }
                if key == "clientPort" && value == "70000"),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "zoo.cfg line 2: bad value \"70000\" for clientPort: out of range: a port is 0-65535"
        );
        assert_eq!(
            error("dataDir=/d\n\nforceSync=maybe\n"),
            "zoo.cfg line 3: bad value \"maybe\" for forceSync: expected yes or no"
        );
        assert_eq!(
            error("server.x=127.0.0.1:2888:3888\ndataDir=/d\n"),
            "zoo.cfg line 1: bad value \"127.0.0.1:2888:3888\" for server.x: \
             the server id after \"server.\" is not a number"
        );
        assert!(error("dataDir=/d\nreconfigEnabled=yes\n").contains("line 2"));
        assert!(error("dataDir=/d\ntickTime=0\n").contains("must be greater than 0"));
        assert!(error("dataDir=/d\ntickTime=-5\n").contains("out of range"));
        assert!(error("dataDir=/d\nlocalSessionsEnabled=sure\n").contains("localSessionsEnabled"));
        assert!(error("dataDir=/d\nelectionAlg=1\n").contains("only 3"));
        assert!(error("dataDir=/d\npeerType=voter\n").contains("peer type"));
        assert!(error("dataDir=/d\nobserverMasterPort=x\n").contains("observerMasterPort"));
        assert!(error("dataDir=/d\nextendedTypesEnabled=1\n").contains("extendedTypesEnabled"));
        assert!(error("dataDir=/d\njute.maxbuffer=big\n").contains("jute.maxbuffer"));
    }

    #[test]
    fn cross_key_rules() {
        assert_eq!(error("clientPort=2181\n"), "zoo.cfg: dataDir is not set");
        assert!(matches!(
            Config::parse("tickTime=2000\n"),
            Err(ConfigError::Missing { key }) if key == "dataDir"
        ));
        // Only one bound given: the other still defaults from tickTime (ZooKeeper 3.8).
        assert!(
            error("tickTime=2000\ndataDir=/d\nminSessionTimeout=50000\n")
                .contains("must not be larger than maxSessionTimeout")
        );
        assert!(error("tickTime=2000\ndataDir=/d\nmaxSessionTimeout=1000\n")
            .contains("must not be larger than maxSessionTimeout"));
        let c = parse("tickTime=2000\ndataDir=/d\nmaxSessionTimeout=100000\n");
        assert_eq!(
            (c.min_session_timeout_ms, c.max_session_timeout_ms),
            (4000, 100000)
        );
        let c = parse("tickTime=2000\ndataDir=/d\nminSessionTimeout=100\n");
        assert_eq!(
            (c.min_session_timeout_ms, c.max_session_timeout_ms),
            (100, 40000)
        );
        // -1 is ZooKeeper's "default" for either bound (issue 14 item 14); another
        // negative value is kept as ZooKeeper keeps it.
        let c = parse("tickTime=2000\ndataDir=/d\nminSessionTimeout=-1\nmaxSessionTimeout=-1\n");
        assert_eq!(
            (c.min_session_timeout_ms, c.max_session_timeout_ms),
            (4000, 40000)
        );
        let c = parse("tickTime=2000\ndataDir=/d\nminSessionTimeout=-1\nmaxSessionTimeout=9000\n");
        assert_eq!(
            (c.min_session_timeout_ms, c.max_session_timeout_ms),
            (4000, 9000)
        );
        let c = parse("tickTime=2000\ndataDir=/d\nminSessionTimeout=-5\n");
        assert_eq!(
            (c.min_session_timeout_ms, c.max_session_timeout_ms),
            (-5, 40000)
        );
        assert!(error("tickTime=2000\ndataDir=/d\nmaxSessionTimeout=-2\n")
            .contains("must not be larger than maxSessionTimeout"));
        assert!(error("dataDir=/d\nclientPortAddress=127.0.0.1\n")
            .contains("clientPortAddress is set but clientPort is not set"));
        assert!(error("dataDir=/d\nsecureClientPortAddress=127.0.0.1\n")
            .contains("secureClientPortAddress is set"));
        // ZooKeeper 3.8 starts without any client port, so keel accepts it too.
        let c = parse("dataDir=/d\n");
        assert_eq!((c.client_port, c.secure_client_port), (None, None));
        assert_eq!(parse("dataDir=/d\nclientPort=0\n").client_port, None);
        assert_eq!(
            parse("dataDir=/d\nautopurge.snapRetainCount=1\n").autopurge_snap_retain_count,
            3
        );
        assert_eq!(parse("dataDir=/d\nsnapCount=1\n").snap_count, 2);
        assert!(error("dataDir=/d\ngroup.1=1:2:3\n").contains("hierarchical"));
    }

    #[test]
    fn properties_syntax() {
        let c = parse(
            "# hash comment\n! bang comment\n   \n  dataDir = /d  \nclientPort:2181\r\n\
             tickTime 2500\n4lw.commands.whitelist=ruok,\\\n    stat\n\
             admin.commandURL=/a\\tb\\u0041\\\\\nadmin.serverAddress=\n",
        );
        assert_eq!(c.data_dir, PathBuf::from("/d"));
        assert_eq!(c.client_port, Some(2181));
        assert_eq!(c.tick_time_ms, 2500);
        assert!(error("dataDir=/d\nmaxClientCnxns = : 7\n").contains("\": 7\""));
        assert!(c.four_letter_words.allows("stat"));
        assert_eq!(c.admin_command_url, "/a\tbA\\");
        assert_eq!(c.admin_server_address, "");
        // The continued line reports the line where its key starts.
        let c = parse("dataDir=/d\nfoo=a\\\n  b\nbar=1\n");
        assert_eq!(c.unknown_keys, vec![(2, "foo".into()), (4, "bar".into())]);
        assert_eq!(c.entries[1], ("foo".into(), "ab".into()));
        // A repeated key: the last value wins, both stay in `entries`.
        let c = parse("dataDir=/a\ndataDir=/b\n");
        assert_eq!(c.data_dir, PathBuf::from("/b"));
        assert_eq!(c.entries.len(), 2);
        assert_eq!(
            read_properties("a\\=b=c\nkey\n"),
            vec![(1, "a=b".into(), "c".into()), (2, "key".into(), "".into())]
        );
    }

    #[test]
    fn whitelist() {
        assert_eq!(FourLetterWhitelist::parse("*"), FourLetterWhitelist::All);
        assert_eq!(
            FourLetterWhitelist::parse(" ruok , * "),
            FourLetterWhitelist::All
        );
        let w = FourLetterWhitelist::parse(" ruok,stat  mntr,, ");
        for word in ["ruok", "stat", "mntr", "srvr"] {
            assert!(w.allows(word), "{word}");
        }
        assert!(!w.allows("dump"));
        assert!(
            !w.allows("RUOK"),
            "words are case-sensitive, as in ZooKeeper"
        );
        let w = FourLetterWhitelist::parse("");
        assert_eq!(w, FourLetterWhitelist::default());
        assert!(w.allows("srvr") && !w.allows("ruok"));
        assert!(FourLetterWhitelist::All.allows("anything"));
    }

    /// `Config::membership` is QuorumMaj.toString: the client part only when the line
    /// has one, IPv6 hosts in brackets, servers in ZooKeeper's HashMap order (id 17
    /// shares id 1's bucket of 16, so it comes before 2), `version=0` last.
    #[test]
    fn membership_as_zookeeper_writes_it() {
        let c = Config::parse(
            "dataDir=/d\nclientPort=2181\ninitLimit=5\nsyncLimit=2\n\
             server.2=b:2888:3888;2182\n\
             server.17=[::1]:2888:3888:participant;[::1]:2183\n\
             server.1=a:2888:3888\n\
             server.3=c:2888:3888:observer\n",
        )
        .unwrap();
        assert_eq!(
            c.membership(),
            "server.1=a:2888:3888:participant\n\
             server.17=[::1]:2888:3888:participant;[::1]:2183\n\
             server.2=b:2888:3888:participant;0.0.0.0:2182\n\
             server.3=c:2888:3888:observer\n\
             version=0"
        );
    }

    #[test]
    fn server_lines() {
        let spec = |value: &str| parse_server(9, value).unwrap();
        assert_eq!(
            spec("127.0.0.1:2888:3888"),
            ServerSpec {
                id: 9,
                host: "127.0.0.1".into(),
                quorum_port: 2888,
                election_port: 3888,
                observer: false,
                client_address: None,
                client_port: None,
            }
        );
        let s = spec("host:2888:3888:observer");
        assert!(s.observer && s.host == "host" && s.client_port.is_none());
        let s = spec("host:2888:3888;2181");
        assert_eq!(
            (s.client_address.as_deref(), s.client_port),
            (Some("0.0.0.0"), Some(2181))
        );
        let s = spec("host:2888:3888:participant;0.0.0.0:2181");
        assert!(!s.observer);
        assert_eq!(
            (s.client_address.as_deref(), s.client_port),
            (Some("0.0.0.0"), Some(2181))
        );
        let s = spec("[::1]:2888:3888:Observer;[::1]:2181");
        assert_eq!(s.host, "::1");
        assert!(s.observer);
        assert_eq!(s.client_address.as_deref(), Some("::1"));
        assert_eq!(spec("h:1:2;").client_port, None);
        for bad in [
            "host:2888",
            "host:2888:3888:observer:x",
            "host:2888:2888",
            "host:0:3888",
            "host:2888:3888:voter",
            "host:2888:3888;a:b:c",
            "host:2888:3888;1;2",
            "host:2888:3888;99999",
            "a:1:2|b:1:2",
            "[::1:2888:3888",
            ":2888:3888",
        ] {
            assert!(parse_server(1, bad).is_err(), "{bad}");
        }

        let c = parse(
            "dataDir=/d\ninitLimit=5\nsyncLimit=2\nserver.3=c:2888:3888;2181\n\
             server.1=127.0.0.1:2888:3888\nserver.2=b:2888:3888:observer\n\
             server.4=d:2888:3888:participant;0.0.0.0:2181\n",
        );
        let ids: Vec<u64> = c.servers.iter().map(|s| s.id).collect();
        assert_eq!(ids, [1, 2, 3, 4]);
        assert!(c.is_distributed());
        assert!(c.unknown_keys.is_empty());
        let e = error("dataDir=/d\nserver.1=h:2888:3888:voter\n");
        assert!(
            e.starts_with("zoo.cfg line 2: bad value \"h:2888:3888:voter\" for server.1:"),
            "{e}"
        );
    }

    #[test]
    fn ensemble_rules() {
        // A single participant with standalone enabled runs standalone, like ZooKeeper.
        let c = parse("dataDir=/d\nserver.1=a:1:2\n");
        assert!(!c.is_distributed());
        assert!(
            error("dataDir=/d\nserver.1=a:1:2\nserver.2=b:1:2:observer\n")
                .contains("observers without a quorum")
        );
        assert!(error("dataDir=/d\nserver.2=b:1:2:observer\n")
            .contains("observers without participants"));
        assert!(error("dataDir=/d\nstandaloneEnabled=false\n").contains("no participant"));
        // initLimit and syncLimit must be given explicitly for an ensemble.
        assert!(
            error("dataDir=/d\nserver.1=a:1:2\nserver.2=b:1:2\nsyncLimit=2\n")
                .contains("initLimit is not set")
        );
        assert!(
            error("dataDir=/d\nserver.1=a:1:2\nserver.2=b:1:2\ninitLimit=2\n")
                .contains("syncLimit is not set")
        );
        assert!(error("dataDir=/d\ndynamicConfigFile=/x\nserver.1=a:1:2\n")
            .contains("dynamic config file"));
        // The last line for a repeated id wins.
        let c = parse("dataDir=/d\nserver.1=a:1:2\nserver.1=b:1:2\n");
        assert_eq!(c.servers.len(), 1);
        assert_eq!(c.servers[0].host, "b");
    }

    #[test]
    fn my_id_applies_the_servers_client_address() {
        let text = "dataDir=/d\ninitLimit=5\nsyncLimit=2\nserver.1=a:1:2;127.0.0.1:2191\n\
                    server.2=b:1:2;2192\nserver.3=c:1:2\n";
        let mut c = parse(text);
        c.set_my_id(1).unwrap();
        assert_eq!(c.client_port, Some(2191));
        assert_eq!(c.client_port_address.as_deref(), Some("127.0.0.1"));
        let mut c = parse(text);
        c.set_my_id(3).unwrap();
        assert_eq!(c.client_port, None);
        let mut c = parse(&format!("{text}clientPort=2181\n"));
        assert!(c
            .set_my_id(2)
            .unwrap_err()
            .to_string()
            .contains("different"));
        let mut c = parse(&format!("{text}clientPort=2192\n"));
        c.set_my_id(2).unwrap();
        assert_eq!(c.client_port, Some(2192));
        let mut c = parse(text);
        assert!(c
            .set_my_id(7)
            .unwrap_err()
            .to_string()
            .contains("no server.7"));
        let mut c = parse("dataDir=/d\nextendedTypesEnabled=true\n");
        assert!(c.set_my_id(255).is_err());
        let mut c = parse("dataDir=/d\n");
        c.set_my_id(255).unwrap();
        assert_eq!(c.my_id, Some(255));
    }

    #[test]
    fn load_reads_files_and_names_them() {
        let dir = scratch_dir();
        let data = dir.join("data");
        fs::create_dir_all(&data).unwrap();
        let cfg = dir.join("zoo.cfg");

        let missing = dir.join("nope.cfg");
        let e = Config::load(&missing).unwrap_err();
        assert!(matches!(e, ConfigError::Io { .. }));
        assert!(e.to_string().contains("nope.cfg"), "{e}");

        fs::write(&cfg, format!("dataDir={}\ntickTime=abc\n", data.display())).unwrap();
        let e = Config::load(&cfg).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "{} line 2: bad value \"abc\" for tickTime: not an integer",
                cfg.display()
            )
        );

        let ensemble = format!(
            "dataDir={}\ninitLimit=5\nsyncLimit=2\nclientPort=2181\n\
             server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.1:2889:3889\n",
            data.display()
        );
        fs::write(&cfg, &ensemble).unwrap();
        let e = Config::load(&cfg).unwrap_err().to_string();
        assert!(
            e.contains("myid file is missing") && e.contains("zoo.cfg"),
            "{e}"
        );

        fs::write(data.join("myid"), "2\n").unwrap();
        let c = Config::load(&cfg).unwrap();
        assert_eq!(c.my_id, Some(2));
        assert!(c.is_distributed());

        fs::write(data.join("myid"), "two\n").unwrap();
        let e = Config::load(&cfg).unwrap_err().to_string();
        assert!(e.contains("myid") && e.contains("not a number"), "{e}");

        // Standalone: myid is optional.
        fs::remove_file(data.join("myid")).unwrap();
        fs::write(
            &cfg,
            format!("dataDir={}\nclientPort=2181\n", data.display()),
        )
        .unwrap();
        assert_eq!(Config::load(&cfg).unwrap().my_id, None);

        // Dynamic config file.
        let dynamic = dir.join("zoo.cfg.dynamic.100000000");
        fs::write(
            &dynamic,
            "server.1=127.0.0.1:2888:3888:participant;127.0.0.1:2181\n\
             server.2=127.0.0.1:2889:3889:participant;127.0.0.1:2182\n\
             server.3=127.0.0.1:2890:3890:observer;127.0.0.1:2183\n",
        )
        .unwrap();
        fs::write(data.join("myid"), "3").unwrap();
        fs::write(
            &cfg,
            format!(
                "dataDir={}\ninitLimit=5\nsyncLimit=2\ndynamicConfigFile={}\n",
                data.display(),
                dynamic.display()
            ),
        )
        .unwrap();
        let c = Config::load(&cfg).unwrap();
        assert_eq!(c.servers.len(), 3);
        assert_eq!(c.client_port, Some(2183));
        assert_eq!(c.dynamic_config_file.as_deref(), Some(dynamic.as_path()));
        // The version is the file name's hex suffix; the membership text ends with it.
        assert_eq!(c.config_version, 0x1_0000_0000);
        assert!(
            c.membership().ends_with("\nversion=100000000"),
            "{}",
            c.membership()
        );
        assert_eq!(c.config_file.as_deref(), Some(cfg.as_path()));
        fs::write(&dynamic, "server.1=a:1:2\nserver.2=b:1:2\nversion=1\n").unwrap();
        let e = Config::load(&cfg).unwrap_err().to_string();
        assert!(e.contains("no version inside"), "{e}");
        fs::write(&dynamic, "server.1=a:1:2\nserver.2=b:1:2\ntickTime=5\n").unwrap();
        let e = Config::load(&cfg).unwrap_err().to_string();
        assert!(e.contains("unrecognised parameter tickTime"), "{e}");

        fs::remove_dir_all(&dir).unwrap();
    }

    /// `-Dreadonlymode.enabled` (Java's Boolean.getBoolean) turns read-only mode on and
    /// whitelists `isro`; a zoo.cfg line of that name does not (ZooKeeper reads only the
    /// system property). `localSessionsEnabled` is read from zoo.cfg.
    #[test]
    fn read_only_mode_comes_from_the_system_property_only() {
        let mut c = parse("dataDir=/d\nreadonlymode.enabled=true\nlocalSessionsEnabled=true\n");
        assert!(!c.read_only_mode_enabled);
        assert!(c.local_sessions_enabled);
        assert!(!c.allows_four_letter_word("isro"));
        c.apply_jvm_flags("-Xmx1g -Dreadonlymode.enabled=TRUE")
            .unwrap();
        assert!(c.read_only_mode_enabled);
        assert!(c.allows_four_letter_word("isro"));
        assert!(!c.allows_four_letter_word("ruok"));
        c.apply_system_property("readonlymode.enabled", "yes")
            .unwrap();
        assert!(!c.read_only_mode_enabled);
    }

    #[test]
    fn system_properties() {
        let mut c = parse("dataDir=/d\n");
        c.apply_system_property("zookeeper.extendedTypesEnabled", "true")
            .unwrap();
        c.apply_system_property(
            "zookeeper.DigestAuthenticationProvider.superDigest",
            "super:abc=",
        )
        .unwrap();
        c.apply_system_property("zookeeper.enforceQuota", "true")
            .unwrap();
        c.apply_system_property("jute.maxbuffer", "2000000")
            .unwrap();
        c.apply_system_property("znode.container.checkIntervalMs", "500")
            .unwrap();
        c.apply_system_property("zookeeper.snapCount", "42")
            .unwrap();
        c.apply_system_property("zookeeper.forceSync", "no")
            .unwrap();
        c.apply_system_property("zookeeper.4lw.commands.whitelist", "*")
            .unwrap();
        c.apply_system_property("zookeeper.admin.enableServer", "false")
            .unwrap();
        assert!(c.extended_types_enabled && c.enforce_quota && !c.force_sync);
        assert_eq!(c.super_digest.as_deref(), Some("super:abc="));
        assert_eq!(c.jute_max_buffer, 2_000_000);
        assert_eq!(c.container_check_interval_ms, 500);
        assert_eq!(c.snap_count, 42);
        assert_eq!(c.four_letter_words, FourLetterWhitelist::All);
        assert!(!c.admin_enable_server);

        // Ignored: not read by ZooKeeper as properties, or unrelated.
        let before = c.clone();
        c.apply_system_property("zookeeper.tickTime", "1").unwrap();
        c.apply_system_property("zookeeper.jute.maxbuffer", "1")
            .unwrap();
        c.apply_system_property("extendedTypesEnabled", "false")
            .unwrap();
        c.apply_system_property("java.io.tmpdir", "/x").unwrap();
        assert_eq!(c, before);

        let e = c
            .apply_system_property("zookeeper.enforceQuota", "maybe")
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "bad value \"maybe\" for system property zookeeper.enforceQuota: \
             expected true or false"
        );

        // zoo.cfg wins over a property, as in ZooKeeper.
        let mut c = parse("dataDir=/d\nextendedTypesEnabled=false\njute.maxbuffer=100\n");
        c.apply_system_property("zookeeper.extendedTypesEnabled", "true")
            .unwrap();
        c.apply_system_property("jute.maxbuffer", "200").unwrap();
        assert!(!c.extended_types_enabled);
        assert_eq!(c.jute_max_buffer, 100);
    }

    #[test]
    fn jvm_flags() {
        let mut c = parse("dataDir=/d\n");
        c.apply_jvm_flags(
            "-Xmx1g -cp /x:/y -Dzookeeper.extendedTypesEnabled=true \
             -Djute.maxbuffer=4194304 \
             '-Dzookeeper.DigestAuthenticationProvider.superDigest=super:a b=' \
             -Dzookeeper.admin.serverAddress=\"1.2.3.4\" -Dflag -Dznode.container.checkIntervalMs=10",
        )
        .unwrap();
        assert!(c.extended_types_enabled);
        assert_eq!(c.jute_max_buffer, 4194304);
        assert_eq!(c.super_digest.as_deref(), Some("super:a b="));
        assert_eq!(c.admin_server_address, "1.2.3.4");
        assert_eq!(c.container_check_interval_ms, 10);
        let e = c
            .apply_jvm_flags("-Xss1m -Djute.maxbuffer=lots")
            .unwrap_err();
        assert!(matches!(e, ConfigError::BadProperty { ref name, .. } if name == "jute.maxbuffer"));
        c.apply_jvm_flags("").unwrap();
        assert_eq!(
            split_shell_words(r#" a  "b \" c" 'd e'f\ g "#),
            ["a", "b \" c", "d ef g"]
        );
    }

    #[test]
    fn worker_threads_default_to_half_the_cpus_and_are_bounded() {
        let c = parse("dataDir=/d\n");
        assert_eq!(
            (
                c.worker_threads(1),
                c.worker_threads(2),
                c.worker_threads(8)
            ),
            (1, 1, 4)
        );
        let c = parse("dataDir=/d\nkeel.workerThreads=3\n");
        assert!(c.unknown_keys.is_empty(), "{:?}", c.unknown_keys);
        assert_eq!((c.worker_threads(2), c.worker_threads(64)), (3, 3));
        assert_eq!(
            error("dataDir=/d\nkeel.workerThreads=1025\n"),
            "zoo.cfg line 2: bad value \"1025\" for keel.workerThreads: at most 1024"
        );
        assert_eq!(
            error("dataDir=/d\nkeel.workerThreads=two\n"),
            "zoo.cfg line 2: bad value \"two\" for keel.workerThreads: not an integer"
        );
    }

    #[test]
    fn storage_acks_default_on_and_parse_as_a_boolean() {
        assert!(parse("dataDir=/d\n").storage_acks);
        let c = parse("dataDir=/d\nkeel.storageAcks=false\n");
        assert!(!c.storage_acks);
        assert!(c.unknown_keys.is_empty(), "{:?}", c.unknown_keys);
        assert_eq!(
            error("dataDir=/d\nkeel.storageAcks=maybe\n"),
            "zoo.cfg line 2: bad value \"maybe\" for keel.storageAcks: expected true or false"
        );
    }

    #[test]
    fn busy_poll_window_is_parsed_bounded_and_defaulted() {
        assert_eq!(parse("dataDir=/d\n").busy_poll_us(), DEFAULT_BUSY_POLL_US);
        let c = parse("dataDir=/d\nkeel.busyPollUs=0\n");
        assert_eq!(c.busy_poll_us(), 0);
        assert!(c.unknown_keys.is_empty(), "{:?}", c.unknown_keys);
        assert_eq!(
            parse("dataDir=/d\nkeel.busyPollUs=750\n").busy_poll_us(),
            750
        );
        // An ensemble member polls only when told to.
        let ensemble = "dataDir=/d\ninitLimit=10\nsyncLimit=5\nserver.1=a:1:2\nserver.2=b:1:2\nserver.3=c:1:2\n";
        assert_eq!(parse(ensemble).busy_poll_us(), 0);
        let told = format!("{ensemble}keel.busyPollUs=200\n");
        assert_eq!(parse(&told).busy_poll_us(), 200);
        // A single server line runs standalone, with the standalone default.
        assert_eq!(
            parse("dataDir=/d\nserver.1=a:1:2\n").busy_poll_us(),
            DEFAULT_BUSY_POLL_US
        );
        assert_eq!(
            error("dataDir=/d\nkeel.busyPollUs=-1\n"),
            "zoo.cfg line 2: bad value \"-1\" for keel.busyPollUs: out of range"
        );
        assert_eq!(
            error("dataDir=/d\nkeel.busyPollUs=fast\n"),
            "zoo.cfg line 2: bad value \"fast\" for keel.busyPollUs: not an integer"
        );
        assert_eq!(
            error("dataDir=/d\nkeel.busyPollUs=100001\n"),
            "zoo.cfg line 2: bad value \"100001\" for keel.busyPollUs: \
             at most 100000 (microseconds)"
        );
    }

    #[test]
    fn sample_config_parses() {
        let text = include_str!("../conf/zoo.cfg");
        let c = parse(text);
        assert_eq!(c.tick_time_ms, 2000);
        assert_eq!(c.client_port, Some(2181));
        assert_eq!(c.four_letter_words, FourLetterWhitelist::All);
        assert!(c.unknown_keys.is_empty(), "{:?}", c.unknown_keys);
    }
}

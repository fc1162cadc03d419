//! TLS on the secure client port (`secureClientPort`), configured from ZooKeeper's own
//! `ssl.*` keys, and the `x509` identity a client certificate gives; and the rustls
//! configurations of the election and quorum ports (`sslQuorum`) from the `ssl.quorum.*`
//! keys, which `net::peer::tls` uses both ways ([`server_config`] for the connections
//! a member accepts, [`client_config`] for the ones it dials).
//!
//! Sources: ZooKeeper 3.8 `X509Util`, `SSLContextAndOptions` (protocols, cipher suites,
//! client auth), `NettyServerCnxnFactory.CertificateVerifier` and
//! `X509AuthenticationProvider` (the identity), and the JDK's `X500Principal.getName()`
//! (`sun.security.x509.AVA.toRFC2253String`) for the subject DN text.
//!
//! What follows ZooKeeper:
//! - `ssl.clientAuth` need (default) / want / none. With need or want, a client
//!   certificate must chain to a certificate of the trust store; the client is then
//!   `x509:<subject DN>` from the moment it connects, plus `super:<DN>` when the DN equals
//!   `zookeeper.X509AuthenticationProvider.superUser`.
//! - `ssl.protocol` (default TLSv1.2) is the one protocol enabled unless
//!   `ssl.enabledProtocols` lists them; `ssl.ciphersuites` (Java/IANA names) defaults to
//!   ZooKeeper's list, of which rustls offers the four ECDHE AES-GCM suites.
//!
//! Where keel differs: only TLS 1.2 and 1.3 exist in rustls (older protocol names are
//! skipped with a warning); when `ssl.ciphersuites` is unset the TLS 1.3 suites are
//! offered too, so `ssl.protocol=TLSv1.3` works (ZooKeeper's default list has none);
//! revocation checks (`ssl.crl`, `ssl.ocsp`), `ssl.context.supplier.class` and custom
//! `ssl.authProvider` classes are refused or ignored. (ZooKeeper registers its x509
//! provider by itself whenever secureClientPort is set, `QuorumPeerConfig.configureSSLAuth`,
//! so a certificate always authenticates there too.)

use crate::config::{ClientAuth, SslConfig, StoreType};
use crate::net::client_cert::ClientCertCheck;
use crate::net::keystore;
use jute::Id;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{ring, CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::danger::ClientCertVerifier;
use rustls::server::{ParsedCertificate, WebPkiClientVerifier};
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::{
    ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme,
    SupportedProtocolVersion,
};
use std::path::Path;
use std::sync::Arc;
use x509_parser::prelude::{FromDer, X509Certificate};
use x509_parser::x509::{AttributeTypeAndValue, X509Name};

/// A TLS setting that stops start-up: the key to fix and why.
#[derive(Debug, thiserror::Error)]
#[error("{key}: {reason}")]
pub struct TlsError {
    /// The zoo.cfg key (also read as `zookeeper.<key>`), e.g. `ssl.keyStore.location`
    /// or `ssl.quorum.keyStore.location`.
    pub key: String,
    /// What is wrong.
    pub reason: String,
}

/// The key prefix of the secure client port's settings (ZooKeeper's `ClientX509Util`).
pub const CLIENT_PREFIX: &str = "ssl.";

/// The key prefix of the election and quorum ports' settings (`QuorumX509Util`).
pub const QUORUM_PREFIX: &str = "ssl.quorum.";

/// Which key set a configuration is built from: its prefix names the keys in errors,
/// and what the stores are for goes into the reasons.
#[derive(Clone, Copy)]
struct Keys {
    prefix: &'static str,
    /// What the key store serves, e.g. "the secure client port".
    user: &'static str,
    /// Whose certificates the trust store checks when accepting, e.g. "client".
    callers: &'static str,
}

impl Keys {
    fn of(prefix: &'static str) -> Keys {
        let (user, callers) = if prefix == QUORUM_PREFIX {
            (
                "sslQuorum (the election and quorum ports)",
                "dialing members'",
            )
        } else {
            ("the secure client port", "client")
        };
        Keys {
            prefix,
            user,
            callers,
        }
    }

    fn fail(&self, name: &str, reason: impl Into<String>) -> TlsError {
        TlsError {
            key: format!("{}{name}", self.prefix),
            reason: reason.into(),
        }
    }
}

/// The cipher suites ZooKeeper 3.8 enables when `ssl.ciphersuites` is unset
/// (`X509Util.DEFAULT_CIPHERS_JAVA9`); rustls implements the AES-GCM ones.
const ZOOKEEPER_DEFAULT_SUITES: &[&str] = &[
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
];

/// Builds a rustls server configuration from the settings `ssl` under key `prefix`
/// ([`CLIENT_PREFIX`] for the secure client port, [`QUORUM_PREFIX`] for the peer
/// ports), reading the key store and trust store files. `clientAuth` need (the
/// default) or want asks the other end for a certificate that chains to the trust
/// store.
///
/// Errors: [`TlsError`] naming the key: a store that is missing, unreadable, of an
/// unsupported format or without the expected key/certificates; a wrong JKS password;
/// no trust store while client certificates are requested; no usable protocol or cipher
/// suite; revocation checks or a Java SSLContext supplier requested.
pub fn server_config(ssl: &SslConfig, prefix: &'static str) -> Result<Arc<ServerConfig>, TlsError> {
    let keys = Keys::of(prefix);
    refuse_unsupported(ssl, keys)?;
    let (location, identity) = key_store(ssl, keys)?;
    let roots = match &ssl.trust_store_location {
        Some(location) => Some(trust_roots(ssl, location, keys)?),
        None if ssl.client_auth == ClientAuth::None => None,
        None => {
            return Err(keys.fail(
                "trustStore.location",
                format!(
                    "not set; it is needed to check {} certificates ({}clientAuth is need \
                     or want; set it to none to accept them without certificates)",
                    keys.callers, keys.prefix
                ),
            ))
        }
    };
    let provider = Arc::new(provider(ssl, keys)?);
    let versions = protocol_versions(ssl, keys)?;
    let verifier: Arc<dyn ClientCertVerifier> = match (ssl.client_auth, roots) {
        (ClientAuth::None, _) | (_, None) => WebPkiClientVerifier::no_client_auth(),
        (auth, Some((roots, anchors))) => {
            let builder = WebPkiClientVerifier::builder_with_provider(roots, provider.clone());
            let builder = if auth == ClientAuth::Want {
                builder.allow_unauthenticated()
            } else {
                builder
            };
            let webpki = builder
                .build()
                .map_err(|e| keys.fail("trustStore.location", e.to_string()))?;
            Arc::new(ClientCertCheck::new(
                webpki,
                anchors,
                provider.signature_verification_algorithms,
            ))
        }
    };
    let certified = certified_key(identity, &provider, location, keys)?;
    let config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| no_suite_fits(ssl, keys, e))?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(Arc::new(SingleCertAndKey::from(certified)));
    Ok(Arc::new(config))
}

/// Builds the rustls client configuration a member dials its peers with (`sslQuorum`)
/// from the settings `ssl` under key `prefix` ([`QUORUM_PREFIX`]): the key store's
/// certificate is presented to the peer, and the peer's certificate must chain to the
/// trust store. The peer's host is not checked here: ZooKeeper's `ZKTrustManager`
/// matches it against the address dialed (and its reverse-DNS name), which
/// `net::peer::tls` does once the handshake is done.
///
/// Errors: as [`server_config`]; the trust store is required (ZooKeeper would fall
/// back to the JVM's default trust store, which keel does not have).
pub fn client_config(ssl: &SslConfig, prefix: &'static str) -> Result<Arc<ClientConfig>, TlsError> {
    let keys = Keys::of(prefix);
    refuse_unsupported(ssl, keys)?;
    let (location, identity) = key_store(ssl, keys)?;
    let trust_location = ssl.trust_store_location.as_deref().ok_or_else(|| {
        keys.fail(
            "trustStore.location",
            format!(
                "not set; {} needs it to check the peers' certificates",
                keys.user
            ),
        )
    })?;
    let (roots, anchors) = trust_roots(ssl, trust_location, keys)?;
    let provider = Arc::new(provider(ssl, keys)?);
    let versions = protocol_versions(ssl, keys)?;
    let algorithms = provider.signature_verification_algorithms;
    let webpki = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
        .build()
        .map_err(|e| keys.fail("trustStore.location", e.to_string()))?;
    let verifier = Arc::new(PeerCertCheck {
        roots,
        algorithms,
        check: ClientCertCheck::new(webpki, anchors, algorithms),
    });
    let certified = certified_key(identity, &provider, location, keys)?;
    let config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| no_suite_fits(ssl, keys, e))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_client_cert_resolver(Arc::new(SingleCertAndKey::from(certified)));
    Ok(Arc::new(config))
}

/// The error for protocols that no enabled cipher suite fits.
fn no_suite_fits(ssl: &SslConfig, keys: Keys, e: rustls::Error) -> TlsError {
    let name = if ssl.enabled_protocols.is_some() {
        "enabledProtocols"
    } else {
        "protocol"
    };
    keys.fail(
        name,
        format!(
            "no enabled cipher suite ({}ciphersuites) fits these protocols: {e}",
            keys.prefix
        ),
    )
}

/// Refuses what keel cannot do: a Java SSLContext supplier, revocation checks.
fn refuse_unsupported(ssl: &SslConfig, keys: Keys) -> Result<(), TlsError> {
    if let Some(class) = &ssl.context_supplier_class {
        return Err(keys.fail(
            "context.supplier.class",
            format!("keel cannot load the Java class {class}; configure the key and trust stores instead"),
        ));
    }
    if ssl.crl || ssl.ocsp {
        let name = if ssl.crl { "crl" } else { "ocsp" };
        return Err(keys.fail(
            name,
            "certificate revocation checks are not supported by keel",
        ));
    }
    Ok(())
}

/// The key store's location and what it holds (required).
fn key_store(ssl: &SslConfig, keys: Keys) -> Result<(&Path, keystore::KeyMaterial), TlsError> {
    let location = ssl.key_store_location.as_deref().ok_or_else(|| {
        keys.fail(
            "keyStore.location",
            format!(
                "not set; {} needs this server's private key and certificate",
                keys.user
            ),
        )
    })?;
    let (key_store_type, password) = store_access(
        keys,
        "keyStore",
        location,
        ssl.key_store_type,
        ssl.key_store_password.as_deref(),
        ssl.key_store_password_path.as_deref(),
    )?;
    let identity = keystore::load_key_store(location, password.as_deref(), key_store_type)
        .map_err(|e| keys.fail("keyStore.location", format!("{}: {e}", location.display())))?;
    Ok((location, identity))
}

/// The check of a peer's certificate when this member dials (ZooKeeper's
/// `ZKTrustManager.checkServerTrusted` without its host part): the chain must lead to
/// a trust-store certificate (webpki: validity, signatures, basic constraints, and the
/// serverAuth extended key usage when the certificate lists usages, as Java's PKIX
/// checks); an X.509 v1 leaf, which webpki cannot parse and Java accepts, is checked
/// as on the accepting side ([`ClientCertCheck`]), as are handshake signatures.
#[derive(Debug)]
struct PeerCertCheck {
    roots: Arc<RootCertStore>,
    algorithms: WebPkiSupportedAlgorithms,
    /// The accepting side's check over the same trust store: v1 leaves, signatures.
    check: ClientCertCheck,
}

impl ServerCertVerifier for PeerCertCheck {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Some(v1) = self.check.verify_v1(end_entity, now) {
            return v1.map(|()| ServerCertVerified::assertion());
        }
        let cert = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.algorithms.all,
        )?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        ClientCertVerifier::verify_tls12_signature(&self.check, message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        ClientCertVerifier::verify_tls13_signature(&self.check, message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// The server's signing key with its chain, the key checked against the leaf
/// certificate. rustls' own check (`with_single_cert`) parses the leaf with webpki,
/// which refuses X.509 v1 certificates; Java serves them (Kazoo's test harness makes
/// one), so the public keys are compared here with x509-parser instead.
fn certified_key(
    identity: keystore::KeyMaterial,
    provider: &CryptoProvider,
    location: &Path,
    keys: Keys,
) -> Result<CertifiedKey, TlsError> {
    let unusable = |reason: String| {
        keys.fail(
            "keyStore.location",
            format!("{}: {reason}", location.display()),
        )
    };
    let key = provider
        .key_provider
        .load_private_key(identity.key)
        .map_err(|e| unusable(format!("the private key cannot be used: {e}")))?;
    let first = identity
        .chain
        .first()
        .ok_or_else(|| unusable("no certificate".to_string()))?;
    let (_, leaf) = X509Certificate::from_der(first)
        .map_err(|e| unusable(format!("the certificate cannot be parsed: {e}")))?;
    if let Some(spki) = key.public_key() {
        if spki.as_ref() != leaf.public_key().raw {
            return Err(unusable(
                "the private key does not belong to the first certificate".to_string(),
            ));
        }
    }
    Ok(CertifiedKey::new(identity.chain, key))
}

/// How to open the store `store` (`keyStore` or `trustStore`) at `location`: its type
/// (`<store>.type`, else from the file name) and its password: the file named by
/// `<store>.passwordPath` (one trailing line break dropped, as ZooKeeper's
/// `SecretUtils.readSecret` does) when set, else `<store>.password`.
fn store_access(
    keys: Keys,
    store: &str,
    location: &Path,
    store_type: Option<StoreType>,
    password: Option<&str>,
    path: Option<&Path>,
) -> Result<(StoreType, Option<String>), TlsError> {
    let store_type = keystore::resolve_type(store_type, location)
        .map_err(|e| keys.fail(&format!("{store}.type"), e))?;
    let Some(path) = path else {
        return Ok((store_type, password.map(str::to_string)));
    };
    let text = std::fs::read_to_string(path).map_err(|e| {
        keys.fail(
            &format!("{store}.passwordPath"),
            format!("cannot read {}: {e}", path.display()),
        )
    })?;
    let password = text.strip_suffix('\n').unwrap_or(&text).to_string();
    Ok((store_type, Some(password)))
}

/// The trust store as rustls' roots, and its certificates as loaded (DER).
type TrustStore = (Arc<RootCertStore>, Vec<CertificateDer<'static>>);

fn trust_roots(ssl: &SslConfig, location: &Path, keys: Keys) -> Result<TrustStore, TlsError> {
    let key = "trustStore.location";
    let (store_type, password) = store_access(
        keys,
        "trustStore",
        location,
        ssl.trust_store_type,
        ssl.trust_store_password.as_deref(),
        ssl.trust_store_password_path.as_deref(),
    )?;
    let certs = keystore::load_trust_store(location, password.as_deref(), store_type)
        .map_err(|e| keys.fail(key, format!("{}: {e}", location.display())))?;
    let mut roots = RootCertStore::empty();
    for (i, cert) in certs.iter().enumerate() {
        roots.add(cert.clone()).map_err(|e| {
            keys.fail(
                key,
                format!(
                    "{}: certificate {} is not usable: {e}",
                    location.display(),
                    i + 1
                ),
            )
        })?;
    }
    Ok((Arc::new(roots), certs))
}

/// A cipher suite's name as Java and IANA write it (rustls prefixes the TLS 1.3 ones
/// with `TLS13_`).
fn suite_name(suite: &rustls::SupportedCipherSuite) -> String {
    let name = format!("{:?}", suite.suite());
    match name.strip_prefix("TLS13_") {
        Some(rest) => format!("TLS_{rest}"),
        None => name,
    }
}

/// The ring provider with the cipher suites `ssl.ciphersuites` (or ZooKeeper's default
/// list, plus the TLS 1.3 suites) allows, in the provider's preference order.
fn provider(ssl: &SslConfig, keys: Keys) -> Result<CryptoProvider, TlsError> {
    let mut provider = ring::default_provider();
    let all = std::mem::take(&mut provider.cipher_suites);
    let names: Vec<String> = all.iter().map(suite_name).collect();
    match &ssl.cipher_suites {
        None => {
            provider.cipher_suites = all
                .into_iter()
                .zip(&names)
                .filter(|(s, name)| {
                    s.version() == &rustls::version::TLS13
                        || ZOOKEEPER_DEFAULT_SUITES.contains(&name.as_str())
                })
                .map(|(s, _)| s)
                .collect();
        }
        Some(wanted) => {
            for w in wanted {
                if !names.contains(w) {
                    tracing::warn!(suite = %w, "{}ciphersuites: suite not offered by keel; skipped", keys.prefix);
                }
            }
            provider.cipher_suites = all
                .into_iter()
                .zip(&names)
                .filter(|(_, name)| wanted.contains(name))
                .map(|(s, _)| s)
                .collect();
            if provider.cipher_suites.is_empty() {
                return Err(keys.fail(
                    "ciphersuites",
                    format!(
                        "none of these suites is offered by keel; it offers {}",
                        names.join(",")
                    ),
                ));
            }
        }
    }
    Ok(provider)
}

/// The protocol versions `ssl.enabledProtocols` lists, or else `ssl.protocol` alone (as
/// ZooKeeper's `SSLContextAndOptions.getEnabledProtocols`). `TLS` means both.
fn protocol_versions(
    ssl: &SslConfig,
    keys: Keys,
) -> Result<Vec<&'static SupportedProtocolVersion>, TlsError> {
    let (key, names) = match &ssl.enabled_protocols {
        Some(list) => ("enabledProtocols", list.clone()),
        None => ("protocol", vec![ssl.protocol.clone()]),
    };
    let prefix = keys.prefix;
    let mut versions: Vec<&'static SupportedProtocolVersion> = Vec::new();
    let mut add = |v: &'static SupportedProtocolVersion| {
        if !versions.iter().any(|x| x.version == v.version) {
            versions.push(v);
        }
    };
    for name in &names {
        match name.as_str() {
            "TLSv1.3" => add(&rustls::version::TLS13),
            "TLSv1.2" => add(&rustls::version::TLS12),
            "TLS" => {
                add(&rustls::version::TLS13);
                add(&rustls::version::TLS12);
            }
            "TLSv1.1" | "TLSv1" | "SSLv3" | "SSLv2Hello" => {
                tracing::warn!(protocol = %name, "{prefix}{key}: protocol not offered by keel (TLS 1.2 and 1.3 only); skipped");
            }
            _ => return Err(keys.fail(key, format!("unknown protocol {name:?}"))),
        }
    }
    if versions.is_empty() {
        return Err(keys.fail(
            key,
            format!(
                "none of {} is offered by keel (it offers TLSv1.2 and TLSv1.3)",
                names.join(",")
            ),
        ));
    }
    Ok(versions)
}

/// The identities a client certificate chain (already verified against the trust
/// store during the handshake) gives the connection, as ZooKeeper's
/// `X509AuthenticationProvider.handleAuthentication` adds them: `super:<DN>` when the
/// leaf's subject DN equals `super_user`, then `x509:<DN>`. No chain, no identity.
///
/// Errors: the leaf certificate cannot be parsed.
pub fn x509_identities(
    chain: Option<&[CertificateDer<'_>]>,
    super_user: Option<&str>,
) -> Result<Vec<Id>, String> {
    let Some(leaf) = chain.and_then(|c| c.first()) else {
        return Ok(Vec::new());
    };
    let dn = subject_dn(leaf)?;
    let mut ids = Vec::new();
    if super_user == Some(dn.as_str()) {
        ids.push(Id {
            scheme: "super".into(),
            id: dn.clone(),
        });
    }
    ids.push(Id {
        scheme: "x509".into(),
        id: dn,
    });
    Ok(ids)
}

/// The certificate's subject DN as Java's `X500Principal.getName()` prints it
/// (RFC 2253): RDNs last to first, separated by `,`; the AVAs of one RDN joined by `+`.
///
/// Errors: the certificate is not valid DER X.509.
pub fn subject_dn(cert_der: &[u8]) -> Result<String, String> {
    let (_, cert) = X509Certificate::from_der(cert_der)
        .map_err(|e| format!("cannot parse the client certificate: {e}"))?;
    Ok(rfc2253(cert.subject()))
}

fn rfc2253(name: &X509Name<'_>) -> String {
    let rdns: Vec<String> = name
        .iter()
        .map(|rdn| rdn.iter().map(ava).collect::<Vec<_>>().join("+"))
        .collect();
    rdns.into_iter().rev().collect::<Vec<_>>().join(",")
}

/// Universal tag numbers of the string types Java prints as text (`AVA.isDerString`).
const UTF8_STRING: u32 = 12;
const PRINTABLE_STRING: u32 = 19;
const T61_STRING: u32 = 20;
const IA5_STRING: u32 = 22;
const GENERAL_STRING: u32 = 27;
const BMP_STRING: u32 = 30;

/// One `type=value` in Java's RFC 2253 form: the keywords RFC 2253 defines (CN, C, L,
/// ST, O, OU, STREET, DC, UID) by name, other types as dotted OIDs; a string value
/// escaped, any other value (and every value of an OID-named type) as `#` and the
/// lowercase hex of its DER encoding.
fn ava(atv: &AttributeTypeAndValue<'_>) -> String {
    let oid = atv.attr_type().to_id_string();
    let keyword = match oid.as_str() {
        "2.5.4.3" => Some("CN"),
        "2.5.4.6" => Some("C"),
        "2.5.4.7" => Some("L"),
        "2.5.4.8" => Some("ST"),
        "2.5.4.10" => Some("O"),
        "2.5.4.11" => Some("OU"),
        "2.5.4.9" => Some("STREET"),
        "0.9.2342.19200300.100.1.25" => Some("DC"),
        "0.9.2342.19200300.100.1.1" => Some("UID"),
        _ => None,
    };
    let value = atv.attr_value();
    let header = &value.header;
    let universal_primitive = header.class() == x509_parser::der_parser::asn1_rs::Class::Universal
        && !header.is_constructed();
    let text = match header.tag().0 {
        _ if !universal_primitive => None,
        UTF8_STRING => Some(String::from_utf8_lossy(value.data).into_owned()),
        PRINTABLE_STRING | T61_STRING | IA5_STRING | GENERAL_STRING => {
            Some(value.data.iter().map(|&b| b as char).collect())
        }
        BMP_STRING => {
            let units: Vec<u16> = value
                .data
                .chunks(2)
                .map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))
                .collect();
            Some(String::from_utf16_lossy(&units))
        }
        _ => None,
    };
    match (keyword, text) {
        (Some(k), Some(text)) => format!("{k}={}", escape_value(&text)),
        (k, _) => {
            let mut out = format!("{}=#", k.unwrap_or(&oid));
            for b in der_encoding(
                header.class() as u8,
                header.is_constructed(),
                header.tag().0,
                value.data,
            ) {
                out.push_str(&format!("{b:02x}"));
            }
            out
        }
    }
}

/// Java's escaping in `AVA.toRFC2253String`: a backslash before each of `,=+<>#;"\`,
/// `\00` for NUL, and a backslash before each leading or trailing space or CR.
fn escape_value(text: &str) -> String {
    let mut escaped: Vec<char> = Vec::with_capacity(text.len());
    for c in text.chars() {
        if ",=+<>#;\"\\".contains(c) {
            escaped.push('\\');
            escaped.push(c);
        } else if c == '\0' {
            escaped.extend(['\\', '0', '0']);
        } else {
            escaped.push(c);
        }
    }
    let blank = |c: &char| *c == ' ' || *c == '\r';
    let lead = escaped.iter().take_while(|c| blank(c)).count();
    let trail = escaped.iter().rev().take_while(|c| blank(c)).count();
    let mut out = String::with_capacity(escaped.len() + 4);
    let n = escaped.len();
    for (i, c) in escaped.into_iter().enumerate() {
        if i < lead || i >= n - trail.min(n - lead) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The DER encoding of an element: identifier octets, definite length, contents.
fn der_encoding(class: u8, constructed: bool, tag: u32, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 8);
    let first = (class << 6) | if constructed { 0x20 } else { 0 };
    if tag < 31 {
        out.push(first | tag as u8);
    } else {
        out.push(first | 0x1f);
        let mut groups = Vec::new();
        let mut t = tag;
        loop {
            groups.push((t & 0x7f) as u8);
            t >>= 7;
            if t == 0 {
                break;
            }
        }
        for (i, g) in groups.iter().enumerate().rev() {
            out.push(if i > 0 { g | 0x80 } else { *g });
        }
    }
    let len = data.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend(&bytes[skip..]);
    }
    out.extend(data);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_follows_java() {
        assert_eq!(escape_value("client"), "client");
        assert_eq!(escape_value("a,b+c=d"), "a\\,b\\+c\\=d");
        assert_eq!(escape_value("#x"), "\\#x");
        assert_eq!(escape_value(" x "), "\\ x\\ ");
        assert_eq!(escape_value("  "), "\\ \\ ");
        assert_eq!(escape_value("a\"b\\"), "a\\\"b\\\\");
        assert_eq!(escape_value("n\0"), "n\\00");
        assert_eq!(escape_value("x_y@z.org"), "x_y@z.org");
    }

    #[test]
    fn der_lengths_and_tags() {
        assert_eq!(der_encoding(0, false, 22, b"ab"), vec![0x16, 2, b'a', b'b']);
        let long = vec![0u8; 300];
        assert_eq!(
            &der_encoding(0, false, 4, &long)[..4],
            &[0x04, 0x82, 0x01, 0x2c]
        );
        assert_eq!(&der_encoding(2, true, 40, b"")[..], &[0xbf, 0x28, 0x00]);
    }

    #[test]
    fn default_suites_are_zookeepers_plus_tls13() {
        let keys = Keys::of(CLIENT_PREFIX);
        let p = provider(&SslConfig::default(), keys).unwrap();
        let mut names: Vec<String> = p.cipher_suites.iter().map(suite_name).collect();
        names.sort();
        assert_eq!(
            names,
            [
                "TLS_AES_128_GCM_SHA256",
                "TLS_AES_256_GCM_SHA384",
                "TLS_CHACHA20_POLY1305_SHA256",
                "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
                "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
                "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
            ]
        );
        let only = SslConfig {
            cipher_suites: Some(vec![
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".into(),
                "NOPE".into(),
            ]),
            ..SslConfig::default()
        };
        assert_eq!(provider(&only, keys).unwrap().cipher_suites.len(), 1);
        let none = SslConfig {
            cipher_suites: Some(vec!["NOPE".into()]),
            ..SslConfig::default()
        };
        assert_eq!(provider(&none, keys).unwrap_err().key, "ssl.ciphersuites");
        let quorum = Keys::of(QUORUM_PREFIX);
        assert_eq!(
            provider(&none, quorum).unwrap_err().key,
            "ssl.quorum.ciphersuites"
        );
    }

    #[test]
    fn protocols_follow_zookeeper_defaults() {
        let keys = Keys::of(CLIENT_PREFIX);
        let v = protocol_versions(&SslConfig::default(), keys).unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].version, rustls::ProtocolVersion::TLSv1_2);
        let both = SslConfig {
            enabled_protocols: Some(vec!["TLSv1.3".into(), "TLSv1.1".into(), "TLSv1.2".into()]),
            ..SslConfig::default()
        };
        assert_eq!(protocol_versions(&both, keys).unwrap().len(), 2);
        let old = SslConfig {
            protocol: "TLSv1.1".into(),
            ..SslConfig::default()
        };
        assert_eq!(
            protocol_versions(&old, keys).unwrap_err().key,
            "ssl.protocol"
        );
    }

    fn first_cert(pem: &str) -> CertificateDer<'static> {
        rustls_pemfile::certs(&mut pem.as_bytes())
            .next()
            .unwrap()
            .unwrap()
    }

    /// The dialing side's check trusting `ca_pem` alone.
    fn peer_check(ca_pem: &str) -> PeerCertCheck {
        let provider = Arc::new(ring::default_provider());
        let ca = first_cert(ca_pem);
        let mut roots = RootCertStore::empty();
        roots.add(ca.clone()).unwrap();
        let roots = Arc::new(roots);
        let webpki = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .unwrap();
        let algorithms = provider.signature_verification_algorithms;
        PeerCertCheck {
            roots,
            algorithms,
            check: ClientCertCheck::new(webpki, vec![ca], algorithms),
        }
    }

    #[test]
    fn a_dialed_peers_certificate_must_chain_to_the_trust_store() {
        // Fixtures: tests/data/tls/README.md; 2030 is inside all of them.
        let at = UnixTime::since_unix_epoch(std::time::Duration::from_secs(1_893_456_000));
        // The name is not checked here (net::peer::tls does ZooKeeper's host check).
        let name = ServerName::try_from("elsewhere.invalid").unwrap();
        let verify = |check: &PeerCertCheck, pem: &str| {
            check.verify_server_cert(&first_cert(pem), &[], &name, &[], at)
        };
        let quorum = peer_check(include_str!("../../tests/data/tls/quorum/ca.pem"));
        assert!(verify(
            &quorum,
            include_str!("../../tests/data/tls/quorum/member.pem")
        )
        .is_ok());
        assert_eq!(
            verify(
                &quorum,
                include_str!("../../tests/data/tls/quorum/intruder.pem")
            )
            .unwrap_err(),
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer)
        );
        // X.509 v1, which Java accepts from a trusted issuer.
        let v1 = peer_check(include_str!("../../tests/data/tls/ca.pem"));
        assert!(verify(&v1, include_str!("../../tests/data/tls/v1-leaf.pem")).is_ok());
        assert_eq!(
            verify(&v1, include_str!("../../tests/data/tls/v1-leaf-rogue.pem")).unwrap_err(),
            rustls::Error::InvalidCertificate(rustls::CertificateError::BadSignature)
        );
    }

    #[test]
    fn missing_stores_name_the_key() {
        let err = server_config(&SslConfig::default(), CLIENT_PREFIX).unwrap_err();
        assert_eq!(err.key, "ssl.keyStore.location");
        let missing = SslConfig {
            key_store_location: Some("/nonexistent/keel/key.pem".into()),
            ..SslConfig::default()
        };
        let err = server_config(&missing, CLIENT_PREFIX).unwrap_err();
        assert_eq!(err.key, "ssl.keyStore.location");
        assert!(
            err.to_string().contains("/nonexistent/keel/key.pem"),
            "{err}"
        );
        let jks_typed = SslConfig {
            key_store_location: Some("/nonexistent/keel/key".into()),
            ..SslConfig::default()
        };
        assert_eq!(
            server_config(&jks_typed, CLIENT_PREFIX).unwrap_err().key,
            "ssl.keyStore.type"
        );
        let err = client_config(&missing, QUORUM_PREFIX).unwrap_err();
        assert_eq!(err.key, "ssl.quorum.keyStore.location");
        assert!(
            err.to_string().contains("/nonexistent/keel/key.pem"),
            "{err}"
        );
    }
}

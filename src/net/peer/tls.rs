//! TLS on the election and quorum ports, as ZooKeeper 3.8 runs it with `sslQuorum` and
//! `portUnification` (QuorumCnxManager, Learner, Leader, `UnifiedServerSocket`,
//! `QuorumX509Util`, `ZKTrustManager`, `ZKHostnameVerifier`).
//!
//! - `sslQuorum=true`: every connection this member dials is TLS (it presents the
//!   `ssl.quorum.keyStore` certificate, the peer's must chain to
//!   `ssl.quorum.trustStore`); every connection it accepts must open with a TLS record,
//!   else it is closed ("Blocked insecure connection attempt" in ZooKeeper), and must
//!   present a certificate the trust store vouches for (`ssl.quorum.clientAuth`, need
//!   by default).
//! - `portUnification=true`: an accepted connection is TLS when its first 5 bytes are a
//!   TLS record header (Netty's `SslHandler.isEncrypted`), else plaintext; no bytes
//!   within `ssl.quorum.handshakeDetectionTimeoutMillis` (5000) means plaintext. What
//!   this member dials follows `sslQuorum`. This is the rolling switch between the two.
//! - Host verification (`ssl.quorum.hostnameVerification`, true): on both ends, once
//!   the chain is verified, the peer's certificate must name the peer's IP address (a
//!   subjectAltName iPAddress; the subject CN when there are no subjectAltNames) or,
//!   failing that, the name its address reverse-resolves to (a subjectAltName dNSName,
//!   `*.` wildcards for one label; else the CN). ZooKeeper checks the accepted side too:
//!   `QuorumX509Util.shouldVerifyClientHostname` is true.
//!
//! A refused connection is closed alone, its reason logged by the port's listener or
//! the dialing link; the member keeps serving. Differences from ZooKeeper: the host
//! check runs right after the handshake rather than inside it (the peer sees a closed
//! connection instead of a TLS alert); certificate files are read once at start
//! (`sslQuorumReloadCertFiles` is logged and ignored).

use std::ffi::CStr;
use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};
use tracing::{info, warn};
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

use super::link::{invalid, Either, PeerStream};
use crate::config::Config;
use crate::net::tls::{self, TlsError, QUORUM_PREFIX};

/// What an accepted connection may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Accept {
    /// TLS only (`sslQuorum` without `portUnification`).
    TlsOnly,
    /// TLS or plaintext, told apart by the first bytes (`portUnification`).
    Either,
}

/// The peer ports' TLS settings, built once at start ([`PeerTls::from_config`]).
pub struct PeerTls {
    /// For accepted connections; `None` with `portUnification` alone and no
    /// `ssl.quorum.keyStore.location`, where a TLS peer is refused.
    acceptor: Option<TlsAcceptor>,
    /// For dialed connections; `Some` exactly with `sslQuorum`.
    connector: Option<TlsConnector>,
    accept: Accept,
    /// `ssl.quorum.handshakeDetectionTimeoutMillis`.
    detection_timeout: Duration,
    /// `ssl.quorum.hostnameVerification`.
    hostname_verification: bool,
}

impl fmt::Debug for PeerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeerTls")
            .field("accept", &self.accept)
            .field("accepts_tls", &self.acceptor.is_some())
            .field("dials_tls", &self.connector.is_some())
            .field("detection_timeout", &self.detection_timeout)
            .field("hostname_verification", &self.hostname_verification)
            .finish()
    }
}

impl PeerTls {
    /// The TLS settings of `config`'s peer ports: `None` when neither `sslQuorum` nor
    /// `portUnification` is on (plaintext, as before).
    ///
    /// Errors: [`TlsError`] naming the `ssl.quorum.*` key: the stores as
    /// [`tls::server_config`] and [`tls::client_config`] check them (with `sslQuorum`
    /// the key store and the trust store are both required).
    pub fn from_config(config: &Config) -> Result<Option<Arc<PeerTls>>, TlsError> {
        if !config.ssl_quorum && !config.port_unification {
            return Ok(None);
        }
        let ssl = &config.quorum_ssl;
        if config.ssl_quorum_reload_cert_files {
            warn!("sslQuorumReloadCertFiles: keel reads the ssl.quorum.* stores once at start; restart it to take new certificates");
        }
        let acceptor = if config.ssl_quorum || ssl.key_store_location.is_some() {
            Some(TlsAcceptor::from(tls::server_config(ssl, QUORUM_PREFIX)?))
        } else {
            warn!("portUnification without ssl.quorum.keyStore.location: the peer ports accept plaintext only");
            None
        };
        let connector = if config.ssl_quorum {
            Some(TlsConnector::from(tls::client_config(ssl, QUORUM_PREFIX)?))
        } else {
            None
        };
        let accept = if config.port_unification {
            Accept::Either
        } else {
            Accept::TlsOnly
        };
        info!(
            ssl_quorum = config.ssl_quorum,
            port_unification = config.port_unification,
            hostname_verification = ssl.hostname_verification,
            "peer ports: TLS configured"
        );
        Ok(Some(Arc::new(PeerTls {
            acceptor,
            connector,
            accept,
            detection_timeout: Duration::from_millis(u64::from(ssl.handshake_detection_timeout_ms)),
            hostname_verification: ssl.hostname_verification,
        })))
    }

    /// Takes an accepted connection from `remote` through the TLS handshake, or keeps
    /// it plaintext where `portUnification` allows. The caller bounds the time.
    ///
    /// Errors: a plaintext connection where TLS is required, a failed handshake, no
    /// certificate or one that does not chain to the trust store (with clientAuth
    /// need), a certificate not naming the peer's host.
    pub(crate) async fn accept(
        &self,
        stream: TcpStream,
        remote: SocketAddr,
    ) -> io::Result<PeerStream> {
        let tls = looks_like_tls(&stream, self.detection_timeout).await?;
        if !tls {
            return match self.accept {
                Accept::Either => Ok(Either::Plain(stream)),
                Accept::TlsOnly => Err(invalid(
                    "not a TLS connection; sslQuorum is on and portUnification off, so \
                     plaintext peers are refused (ZooKeeper: blocked insecure connection attempt)",
                )),
            };
        }
        let Some(acceptor) = &self.acceptor else {
            return Err(invalid(
                "a TLS connection, but no ssl.quorum.keyStore.location is set",
            ));
        };
        let stream = acceptor
            .accept(stream)
            .await
            .map_err(|e| invalid(format!("TLS handshake failed: {e}")))?;
        let chain = stream.get_ref().1.peer_certificates();
        if let Some(leaf) = chain.and_then(|c| c.first()) {
            self.check_host(leaf, remote.ip()).await?;
        }
        let state = stream.get_ref().1;
        info!(
            "accepted TLS connection from {remote} - {:?} - {:?}",
            state.protocol_version(),
            state.negotiated_cipher_suite().map(|s| s.suite())
        );
        Ok(Either::Tls(Box::new(stream.into())))
    }

    /// Takes a connection this member dialed to `remote` through the TLS handshake
    /// when `sslQuorum` is on; else keeps it plaintext. The caller bounds the time.
    ///
    /// Errors: a failed handshake (among them a peer certificate not chaining to the
    /// trust store, or our certificate refused by the peer), a certificate not naming
    /// the peer's host.
    pub(crate) async fn dial(
        &self,
        stream: TcpStream,
        remote: SocketAddr,
    ) -> io::Result<PeerStream> {
        let Some(connector) = &self.connector else {
            return Ok(Either::Plain(stream));
        };
        let name = ServerName::IpAddress(remote.ip().into());
        let stream = connector
            .connect(name, stream)
            .await
            .map_err(|e| invalid(format!("TLS handshake with {remote} failed: {e}")))?;
        let leaf = stream
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
            .ok_or_else(|| invalid(format!("{remote} presented no certificate")))?;
        self.check_host(leaf, remote.ip()).await?;
        Ok(Either::Tls(Box::new(stream.into())))
    }

    /// `ZKTrustManager.performHostVerification`: the certificate names `ip`, or the
    /// name `ip` reverse-resolves to.
    async fn check_host(&self, leaf: &CertificateDer<'_>, ip: IpAddr) -> io::Result<()> {
        if !self.hostname_verification {
            return Ok(());
        }
        let by_address = match host_matches(leaf, &ip.to_string()) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        let name = tokio::task::spawn_blocking(move || reverse_name(ip))
            .await
            .ok()
            .flatten();
        match name {
            Some(name) => host_matches(leaf, &name).map_err(|by_name| {
                invalid(format!(
                    "the peer's certificate names neither its address ({by_address}) nor \
                     its host name {name} ({by_name}); ssl.quorum.hostnameVerification is on"
                ))
            }),
            None => Err(invalid(format!(
                "the peer's certificate does not name its address ({by_address}) and the \
                 address has no host name; ssl.quorum.hostnameVerification is on"
            ))),
        }
    }
}

/// Whether the connection opens with a TLS record header (Netty's
/// `SslUtils.getEncryptedPacketLength`: content type 20-23, major version 3, a
/// length beyond the header), peeking at most 5 bytes within `timeout`. Fewer bytes
/// in that time, or none, is plaintext (`UnifiedServerSocket.detectMode`).
///
/// Errors: the peek fails.
async fn looks_like_tls(stream: &TcpStream, timeout: Duration) -> io::Result<bool> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut litmus = [0u8; 5];
    loop {
        let n = match tokio::time::timeout_at(deadline, stream.peek(&mut litmus)).await {
            Err(_) => return Ok(false),
            Ok(r) => r?,
        };
        if n == 0 {
            return Ok(false);
        }
        if n == litmus.len() {
            return Ok(is_tls_record(&litmus));
        }
        // Part of the header: the rest is on its way (peek would return at once).
        if tokio::time::Instant::now() + Duration::from_millis(5) >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A TLS record header (see [`looks_like_tls`]).
fn is_tls_record(header: &[u8; 5]) -> bool {
    let content_type_ok = (20..=23).contains(&header[0]);
    let length = usize::from(u16::from_be_bytes([header[3], header[4]])) + 5;
    content_type_ok && header[1] == 3 && length > 5
}

/// `ZKHostnameVerifier.verify(host, cert)`: with subjectAltNames, an IP `host` must
/// equal an iPAddress entry and a name a dNSName entry (case-insensitive, a leading
/// `*.` matching one label); without any, the subject's CN is matched as a name.
///
/// Errors: what the certificate names instead, for the log.
fn host_matches(leaf: &CertificateDer<'_>, host: &str) -> Result<(), String> {
    let (_, cert) = X509Certificate::from_der(leaf.as_ref())
        .map_err(|e| format!("cannot parse the certificate: {e}"))?;
    let ip: Option<IpAddr> = host.parse().ok();
    let mut ips = Vec::new();
    let mut names = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            match n {
                GeneralName::DNSName(d) => names.push(d.to_string()),
                GeneralName::IPAddress(b) => {
                    if let Some(a) = ip_from_bytes(b) {
                        ips.push(a);
                    }
                }
                _ => {}
            }
        }
    }
    if ips.is_empty() && names.is_empty() {
        let cn = cert
            .subject()
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok().map(str::to_string))
            .ok_or_else(|| "no subjectAltName and no CN".to_string())?;
        return if name_matches(host, &cn) {
            Ok(())
        } else {
            Err(format!("<{host}> is not the CN {cn}"))
        };
    }
    let matched = match ip {
        Some(ip) => ips.contains(&ip),
        None => names.iter().any(|n| name_matches(host, n)),
    };
    if matched {
        Ok(())
    } else {
        Err(format!(
            "<{host}> matches none of the subjectAltNames {names:?} {ips:?}"
        ))
    }
}

fn ip_from_bytes(b: &[u8]) -> Option<IpAddr> {
    match b.len() {
        4 => Some(IpAddr::from(<[u8; 4]>::try_from(b).ok()?)),
        16 => Some(IpAddr::from(<[u8; 16]>::try_from(b).ok()?)),
        _ => None,
    }
}

/// A host name against a certificate name, case-insensitively; `*.rest` matches one
/// non-empty label before `rest` (DefaultHostnameVerifier's strict matching).
fn name_matches(host: &str, pattern: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let pattern = pattern.trim_end_matches('.').to_ascii_lowercase();
    match pattern.strip_prefix("*.") {
        Some(rest) => host
            .split_once('.')
            .is_some_and(|(label, tail)| !label.is_empty() && tail == rest),
        None => host == pattern,
    }
}

/// The host name `ip` reverse-resolves to (`InetAddress.getHostName`), if any.
/// Blocking: run it off the runtime's threads.
fn reverse_name(ip: IpAddr) -> Option<String> {
    // SAFETY: sockaddr_storage is plain data; all-zero is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match ip {
        IpAddr::V4(v4) => {
            // SAFETY: sockaddr_storage is large and aligned enough for any sockaddr.
            let sa = unsafe {
                &mut *(&mut storage as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>()
            };
            sa.sin_family = libc::AF_INET as libc::sa_family_t;
            sa.sin_addr.s_addr = u32::from_ne_bytes(v4.octets());
            std::mem::size_of::<libc::sockaddr_in>()
        }
        IpAddr::V6(v6) => {
            // SAFETY: as above.
            let sa = unsafe {
                &mut *(&mut storage as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
            };
            sa.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sa.sin6_addr.s6_addr = v6.octets();
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    let mut host = [0 as libc::c_char; 1025];
    // SAFETY: `storage` holds a sockaddr of `len` bytes; `host` is a writable buffer of
    // the length given; no service name is asked for.
    let rc = unsafe {
        libc::getnameinfo(
            (&storage as *const libc::sockaddr_storage).cast(),
            len as libc::socklen_t,
            host.as_mut_ptr(),
            host.len() as libc::socklen_t,
            std::ptr::null_mut(),
            0,
            libc::NI_NAMEREQD,
        )
    };
    if rc != 0 {
        return None;
    }
    // SAFETY: getnameinfo succeeded, so `host` holds a NUL-terminated string.
    let name = unsafe { CStr::from_ptr(host.as_ptr()) };
    name.to_str().ok().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Fixtures: tests/data/tls/README.md.
    const CA: &str = include_str!("../../../tests/data/tls/ca.pem");
    const V1_LEAF: &str = include_str!("../../../tests/data/tls/v1-leaf.pem");

    fn der(pem: &str) -> CertificateDer<'static> {
        rustls_pemfile::certs(&mut pem.as_bytes())
            .next()
            .unwrap()
            .unwrap()
    }

    #[test]
    fn tls_records_are_told_from_peer_protocol_openings() {
        // A TLS 1.2/1.3 ClientHello record.
        assert!(is_tls_record(&[22, 3, 1, 0, 200]));
        assert!(is_tls_record(&[21, 3, 3, 0, 2]));
        // The election port's initial message starts with protocol version -65536.
        assert!(!is_tls_record(&[0xff, 0xff, 0xff, 0xff, 0xff]));
        // A quorum packet's length prefix.
        assert!(!is_tls_record(&[0, 0, 0, 40, 0]));
        assert!(!is_tls_record(&[22, 2, 0, 0, 10]));
        assert!(!is_tls_record(&[22, 3, 1, 0, 0]));
    }

    #[test]
    fn names_match_as_zookeepers_verifier() {
        assert!(name_matches("localhost", "LOCALHOST"));
        assert!(name_matches("zk1.example.com", "*.example.com"));
        assert!(!name_matches("a.zk1.example.com", "*.example.com"));
        assert!(!name_matches("example.com", "*.example.com"));
        assert!(!name_matches("zk1.example.org", "*.example.com"));
        assert!(name_matches("zk1.example.com.", "zk1.example.com"));
    }

    #[test]
    fn a_certificate_without_alt_names_is_matched_by_its_cn() {
        let leaf = der(V1_LEAF);
        let (_, cert) = X509Certificate::from_der(leaf.as_ref()).unwrap();
        let cn = cert
            .subject()
            .iter_common_name()
            .next()
            .unwrap()
            .as_str()
            .unwrap()
            .to_string();
        assert!(host_matches(&leaf, &cn).is_ok());
        let err = host_matches(&leaf, "127.0.0.1").unwrap_err();
        assert!(err.contains("is not the CN"), "{err}");
        assert!(host_matches(&der(CA), "no-such-host.invalid").is_err());
    }

    #[test]
    fn loopback_reverse_resolves_or_not_without_panicking() {
        // The name depends on the host's resolver; only the call's safety is checked.
        let _ = reverse_name("127.0.0.1".parse().unwrap());
        let _ = reverse_name("::1".parse().unwrap());
    }

    #[tokio::test]
    async fn detection_reads_the_first_bytes_and_times_out_to_plaintext() {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        for (bytes, tls) in [
            (vec![22u8, 3, 1, 0, 100, 1], true),
            (vec![0u8, 0, 0, 40, 0, 0], false),
            (vec![], false),
        ] {
            let mut client = TcpStream::connect(addr).await.unwrap();
            let (server, _) = listener.accept().await.unwrap();
            client.write_all(&bytes).await.unwrap();
            let seen = looks_like_tls(&server, Duration::from_millis(200))
                .await
                .unwrap();
            assert_eq!(seen, tls, "{bytes:?}");
        }
    }
}

//! The check of a client certificate on the secure client port and of a member's
//! certificate on the peer ports (`sslQuorum`, both ends): webpki's, and for an X.509
//! version 1 leaf, which webpki refuses to parse, the same checks done here.
//!
//! Why: Java's PKIX trust manager, and so ZooKeeper, accepts a v1 client certificate
//! issued by a trust-store certificate (Kazoo's test harness makes exactly such a
//! certificate), while rustls' `WebPkiClientVerifier` refuses every v1 certificate
//! (`UnsupportedCertVersion`) and cannot check a handshake signature made with its key.
//!
//! A v1 leaf is accepted when (RFC 5280 §6.1, reduced to a chain of one): its issuer name
//! equals the subject of a trust-store certificate; its signature verifies with that
//! certificate's public key under an algorithm the crypto provider supports; and `now` is
//! within its validity. A v1 certificate has no extensions, so there is no key usage or
//! extended key usage to check. A v1 leaf issued by an intermediate is refused (webpki
//! could not check a v1 intermediate's child either). Handshake signatures (TLS 1.2
//! ServerKeyExchange-style `CertificateVerify`, TLS 1.3 `CertificateVerify`) made with a
//! v1 leaf's key are checked with the provider's algorithms for the signature scheme
//! whose public-key algorithm matches the leaf's SubjectPublicKeyInfo.

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, Error, PeerIncompatible,
    SignatureScheme,
};
use std::sync::Arc;
use x509_parser::der_parser::asn1_rs::Any;
use x509_parser::prelude::{FromDer, X509Certificate, X509Version};
use x509_parser::time::ASN1Time;

/// A [`ClientCertVerifier`] that is `webpki` for X.509 v3 leaves and the module's own
/// check for v1 leaves (module doc).
#[derive(Debug)]
pub struct ClientCertCheck {
    webpki: Arc<dyn ClientCertVerifier>,
    /// The trust store's certificates, DER, as loaded (the issuers a v1 leaf may name).
    anchors: Vec<CertificateDer<'static>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ClientCertCheck {
    /// `webpki` checks every v3 leaf and decides whether a certificate is asked for or
    /// required; `anchors` are the trust store's certificates (DER) and `algorithms` the
    /// crypto provider's signature verification algorithms.
    pub fn new(
        webpki: Arc<dyn ClientCertVerifier>,
        anchors: Vec<CertificateDer<'static>>,
        algorithms: WebPkiSupportedAlgorithms,
    ) -> Self {
        ClientCertCheck {
            webpki,
            anchors,
            algorithms,
        }
    }

    fn verify_v1_leaf(
        &self,
        leaf_der: &[u8],
        leaf: &X509Certificate<'_>,
        now: UnixTime,
    ) -> Result<(), Error> {
        let bad = |e: CertificateError| Error::InvalidCertificate(e);
        let now = i64::try_from(now.as_secs())
            .ok()
            .and_then(|secs| ASN1Time::from_timestamp(secs).ok())
            .ok_or(bad(CertificateError::BadEncoding))?;
        if now < leaf.validity().not_before {
            return Err(bad(CertificateError::NotValidYet));
        }
        if now > leaf.validity().not_after {
            return Err(bad(CertificateError::Expired));
        }
        let (tbs, signature_alg, signature) =
            signed_parts(leaf_der).ok_or(bad(CertificateError::BadEncoding))?;
        let issuers = self.anchors.iter().filter_map(|der| {
            let (_, anchor) = X509Certificate::from_der(der).ok()?;
            (anchor.subject().as_raw() == leaf.issuer().as_raw()).then_some(anchor)
        });
        let mut named_issuer = false;
        for issuer in issuers {
            named_issuer = true;
            let Some((key_alg, key)) = spki_parts(issuer.public_key().raw) else {
                continue;
            };
            let verified = self.algorithms.all.iter().any(|alg| {
                alg.signature_alg_id().as_ref() == signature_alg
                    && alg.public_key_alg_id().as_ref() == key_alg
                    && alg.verify_signature(key, tbs, signature).is_ok()
            });
            if verified {
                return Ok(());
            }
        }
        Err(bad(if named_issuer {
            CertificateError::BadSignature
        } else {
            CertificateError::UnknownIssuer
        }))
    }

    fn verify_v1_signature(
        &self,
        message: &[u8],
        leaf: &X509Certificate<'_>,
        scheme: SignatureScheme,
        signature: &[u8],
    ) -> Result<HandshakeSignatureValid, Error> {
        let (key_alg, key) = spki_parts(leaf.public_key().raw)
            .ok_or(Error::InvalidCertificate(CertificateError::BadEncoding))?;
        let algorithms = self
            .algorithms
            .mapping
            .iter()
            .find(|(offered, _)| *offered == scheme)
            .map(|(_, algorithms)| *algorithms)
            .ok_or(Error::PeerIncompatible(
                PeerIncompatible::NoSignatureSchemesInCommon,
            ))?;
        let verified = algorithms.iter().any(|alg| {
            alg.public_key_alg_id().as_ref() == key_alg
                && alg.verify_signature(key, message, signature).is_ok()
        });
        if verified {
            Ok(HandshakeSignatureValid::assertion())
        } else {
            Err(Error::InvalidCertificate(CertificateError::BadSignature))
        }
    }
}

impl ClientCertCheck {
    /// The module's check of `end_entity` when it is an X.509 v1 certificate (issuer,
    /// signature, validity at `now`); `None` for any other, which is webpki's to check.
    pub fn verify_v1(
        &self,
        end_entity: &CertificateDer<'_>,
        now: UnixTime,
    ) -> Option<Result<(), Error>> {
        let leaf = v1_leaf(end_entity)?;
        Some(self.verify_v1_leaf(end_entity.as_ref(), &leaf, now))
    }

    /// A `CertificateVerify` signature: webpki's check for a v3 certificate, the module's
    /// for a v1 leaf.
    fn handshake_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
        tls13: bool,
    ) -> Result<HandshakeSignatureValid, Error> {
        match v1_leaf(cert) {
            // TLS 1.3 allows fewer schemes than 1.2 (no PKCS #1 v1.5: RFC 8446 §4.2.3).
            Some(_) if tls13 && !allowed_in_tls13(dss.scheme) => Err(Error::PeerMisbehaved(
                rustls::PeerMisbehaved::SignedHandshakeWithUnadvertisedSigScheme,
            )),
            Some(leaf) => self.verify_v1_signature(message, &leaf, dss.scheme, dss.signature()),
            None if tls13 => self.webpki.verify_tls13_signature(message, cert, dss),
            None => self.webpki.verify_tls12_signature(message, cert, dss),
        }
    }
}

/// The leaf parsed, when it is an X.509 v1 certificate (anything webpki can parse, or
/// nothing x509-parser can, is left to webpki and its errors).
fn v1_leaf<'a>(der: &'a CertificateDer<'_>) -> Option<X509Certificate<'a>> {
    let (_, cert) = X509Certificate::from_der(der.as_ref()).ok()?;
    (cert.version() == X509Version::V1).then_some(cert)
}

/// The signature schemes TLS 1.3 allows in CertificateVerify (RFC 8446 §4.2.3: no
/// PKCS #1 v1.5, no SHA-1).
fn allowed_in_tls13(scheme: SignatureScheme) -> bool {
    use SignatureScheme::*;
    matches!(
        scheme,
        ECDSA_NISTP256_SHA256
            | ECDSA_NISTP384_SHA384
            | ECDSA_NISTP521_SHA512
            | ED25519
            | ED448
            | RSA_PSS_SHA256
            | RSA_PSS_SHA384
            | RSA_PSS_SHA512
    )
}

/// A Certificate's (RFC 5280 §4.1) signed bytes, the contents of its signatureAlgorithm
/// (the form `AlgorithmIdentifier` values take in rustls) and the signature bits.
fn signed_parts(cert_der: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
    let (_, cert) = Any::from_der(cert_der).ok()?;
    let body = cert.data;
    let (rest, _) = Any::from_der(body).ok()?;
    let tbs = &body[..body.len() - rest.len()];
    let (rest, signature_alg) = Any::from_der(rest).ok()?;
    let (_, signature) = Any::from_der(rest).ok()?;
    Some((tbs, signature_alg.data, bit_string_bytes(signature.data)?))
}

/// A SubjectPublicKeyInfo's algorithm (contents of its AlgorithmIdentifier) and
/// subjectPublicKey bits.
fn spki_parts(spki_der: &[u8]) -> Option<(&[u8], &[u8])> {
    let (_, spki) = Any::from_der(spki_der).ok()?;
    let (rest, alg) = Any::from_der(spki.data).ok()?;
    let (_, key) = Any::from_der(rest).ok()?;
    Some((alg.data, bit_string_bytes(key.data)?))
}

/// A BIT STRING's bytes: keys and signatures are whole bytes (no unused bits).
fn bit_string_bytes(contents: &[u8]) -> Option<&[u8]> {
    match contents.split_first() {
        Some((0, bytes)) => Some(bytes),
        _ => None,
    }
}

impl ClientCertVerifier for ClientCertCheck {
    fn offer_client_auth(&self) -> bool {
        self.webpki.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.webpki.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.webpki.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        match self.verify_v1(end_entity, now) {
            Some(v1) => v1.map(|()| ClientCertVerified::assertion()),
            None => self
                .webpki
                .verify_client_cert(end_entity, intermediates, now),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.handshake_signature(message, cert, dss, false)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.handshake_signature(message, cert, dss, true)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::crypto::ring::default_provider;
    use rustls::server::WebPkiClientVerifier;
    use rustls::RootCertStore;

    // Fixtures: tests/data/tls/README.md.
    const CA: &str = include_str!("../../tests/data/tls/ca.pem");
    const LEAF: &str = include_str!("../../tests/data/tls/v1-leaf.pem");
    const ROGUE_LEAF: &str = include_str!("../../tests/data/tls/v1-leaf-rogue.pem");
    const LEAF_KEY: &str = include_str!("../../tests/data/tls/v1-leaf.key");
    /// 2030-01-01T00:00:00Z, inside every fixture's validity.
    const IN_2030: u64 = 1_893_456_000;

    fn der(pem: &str) -> CertificateDer<'static> {
        rustls_pemfile::certs(&mut pem.as_bytes())
            .next()
            .unwrap()
            .unwrap()
    }

    /// webpki trusting `ca.pem`, and the v1 check with `anchors` as the trust store.
    fn check_with(anchors: Vec<CertificateDer<'static>>) -> ClientCertCheck {
        let provider = Arc::new(default_provider());
        let mut roots = RootCertStore::empty();
        roots.add(der(CA)).unwrap();
        let webpki = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .unwrap();
        ClientCertCheck::new(webpki, anchors, provider.signature_verification_algorithms)
    }

    fn check() -> ClientCertCheck {
        check_with(vec![der(CA)])
    }

    fn at(secs: u64) -> UnixTime {
        UnixTime::since_unix_epoch(std::time::Duration::from_secs(secs))
    }

    #[test]
    fn webpki_alone_refuses_the_v1_leaf() {
        // Why this module exists: if webpki ever accepts v1, the fallback can go.
        let check = check();
        assert!(check
            .webpki
            .verify_client_cert(&der(LEAF), &[], at(IN_2030))
            .is_err());
    }

    #[test]
    fn a_v1_leaf_from_the_trusted_ca_is_accepted_in_its_validity() {
        let check = check();
        assert!(check
            .verify_client_cert(&der(LEAF), &[], at(IN_2030))
            .is_ok());
        let expired = check.verify_client_cert(&der(LEAF), &[], at(IN_2030 * 3));
        assert_eq!(
            expired.unwrap_err(),
            Error::InvalidCertificate(CertificateError::Expired)
        );
        let early = check.verify_client_cert(&der(LEAF), &[], at(1_000_000_000));
        assert_eq!(
            early.unwrap_err(),
            Error::InvalidCertificate(CertificateError::NotValidYet)
        );
    }

    #[test]
    fn a_v1_leaf_whose_issuer_name_matches_but_signature_does_not_is_refused() {
        let refused = check().verify_client_cert(&der(ROGUE_LEAF), &[], at(IN_2030));
        assert_eq!(
            refused.unwrap_err(),
            Error::InvalidCertificate(CertificateError::BadSignature)
        );
    }

    #[test]
    fn a_v1_leaf_from_an_unknown_issuer_is_refused() {
        // The leaf checked against a trust store holding only itself: no subject matches
        // its issuer name.
        let check = check_with(vec![der(LEAF)]);
        let refused = check.verify_client_cert(&der(LEAF), &[], at(IN_2030));
        assert_eq!(
            refused.unwrap_err(),
            Error::InvalidCertificate(CertificateError::UnknownIssuer)
        );
    }

    #[test]
    fn a_handshake_signature_by_the_v1_leafs_key_verifies_and_a_forged_one_does_not() {
        let provider = default_provider();
        let key = rustls_pemfile::private_key(&mut LEAF_KEY.as_bytes())
            .unwrap()
            .unwrap();
        let key = provider.key_provider.load_private_key(key).unwrap();
        let scheme = SignatureScheme::ECDSA_NISTP256_SHA256;
        let signer = key.choose_scheme(&[scheme]).unwrap();
        let message = b"the handshake transcript";
        let signature = signer.sign(message).unwrap();
        let leaf_der = der(LEAF);
        let leaf = v1_leaf(&leaf_der).unwrap();
        let check = check();
        assert!(check
            .verify_v1_signature(message, &leaf, scheme, &signature)
            .is_ok());
        assert!(check
            .verify_v1_signature(b"another transcript", &leaf, scheme, &signature)
            .is_err());
        // An RSA scheme cannot verify with the leaf's EC key.
        assert!(check
            .verify_v1_signature(message, &leaf, SignatureScheme::RSA_PSS_SHA256, &signature)
            .is_err());
        assert!(!allowed_in_tls13(SignatureScheme::RSA_PKCS1_SHA256));
        assert!(allowed_in_tls13(scheme));
    }

    #[test]
    fn a_v3_certificate_is_left_to_webpki() {
        assert!(v1_leaf(&der(CA)).is_none());
        assert!(v1_leaf(&der(LEAF)).is_some());
    }
}

//! Reading ZooKeeper's key and trust stores: the files named by `ssl.keyStore.location`
//! and `ssl.trustStore.location`, in the two formats keel understands.
//!
//! - PEM (ZooKeeper 3.8 `PEMFileLoader`/`PemReader`): a key store is one file with the
//!   private key and the certificate chain, leaf first; a trust store is a file of
//!   certificates. ZooKeeper wants PKCS #8 keys (`BEGIN PRIVATE KEY`); keel also takes
//!   PKCS #1 (`BEGIN RSA PRIVATE KEY`) and SEC1 (`BEGIN EC PRIVATE KEY`). Encrypted PEM
//!   keys are refused: keel has no password-based decryption for them.
//! - JKS (Java's original `JavaKeyStore` format): read so that configurations written
//!   for ZooKeeper (Kazoo's test harness, for one) keep working. Private keys are
//!   protected with the JDK's `KeyProtector` scheme (a SHA-1 keystream keyed by the store
//!   password) and the file ends with a SHA-1 integrity digest over the password; both
//!   are checked as Java checks them.
//!
//! PKCS #12, JCEKS and BCFKS stores are refused with an error that says how to convert
//! them to PEM.

use crate::config::StoreType;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use sha1::{Digest, Sha1};
use std::path::Path;

/// A server identity read from a key store.
#[derive(Debug)]
pub struct KeyMaterial {
    /// The certificate chain, leaf first, as stored.
    pub chain: Vec<CertificateDer<'static>>,
    /// The private key of the leaf certificate.
    pub key: PrivateKeyDer<'static>,
}

/// The store type to read `location` as: `given`, or else the one its file name's
/// extension names (`.pem`, `.jks`, `.p12`, `.bcfks`), as ZooKeeper's
/// `KeyStoreFileType.fromPropertyValueOrFileName` decides.
///
/// Errors: no type given and the extension is none of those.
pub fn resolve_type(given: Option<StoreType>, location: &Path) -> Result<StoreType, String> {
    if let Some(t) = given {
        return Ok(t);
    }
    let name = location.to_string_lossy();
    let extension = name.rfind('.').map(|i| &name[i..]).unwrap_or("");
    match extension {
        ".pem" => Ok(StoreType::Pem),
        ".jks" => Ok(StoreType::Jks),
        ".p12" => Ok(StoreType::Pkcs12),
        ".bcfks" => Ok(StoreType::Bcfks),
        _ => Err(format!(
            "cannot tell the store type from the file name {name:?} (expected .pem, .jks, \
             .p12 or .bcfks); set the matching .type key"
        )),
    }
}

/// Reads a key store of type `store_type` (see [`resolve_type`]) at `location`.
///
/// Errors (the reason, for the caller to prefix with the key's name): the file cannot be
/// read; no private key or no certificate in it; an encrypted PEM key; a JKS store whose
/// integrity digest or key check fails (wrong password or damaged file); an unsupported
/// store type.
pub fn load_key_store(
    location: &Path,
    password: Option<&str>,
    store_type: StoreType,
) -> Result<KeyMaterial, String> {
    let bytes = read(location)?;
    match store_type {
        StoreType::Pem => pem_key_store(&bytes, password),
        StoreType::Jks => {
            let store = Jks::parse(&bytes, password.unwrap_or(""))?;
            let Some((encrypted, chain)) = store.private_keys.into_iter().next() else {
                return Err("the JKS key store holds no private key entry".to_string());
            };
            if chain.is_empty() {
                return Err("the JKS key entry has no certificate chain".to_string());
            }
            let pkcs8 = jks_recover_key(&encrypted, password.unwrap_or(""))?;
            Ok(KeyMaterial {
                chain,
                key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pkcs8)),
            })
        }
        StoreType::Pkcs12 => Err(PKCS12_UNSUPPORTED.to_string()),
        StoreType::Bcfks => Err(BCFKS_UNSUPPORTED.to_string()),
    }
}

/// Reads a trust store at `location`: every certificate of a PEM file, or every trusted
/// certificate entry of a JKS store (Java's PKIX trust anchors are those entries).
///
/// Errors: as [`load_key_store`]; also a store without any certificate.
pub fn load_trust_store(
    location: &Path,
    password: Option<&str>,
    store_type: StoreType,
) -> Result<Vec<CertificateDer<'static>>, String> {
    let bytes = read(location)?;
    let certs = match store_type {
        StoreType::Pem => {
            let (certs, _) = pem_items(&bytes)?;
            certs
        }
        StoreType::Jks => Jks::parse(&bytes, password.unwrap_or(""))?.trusted,
        StoreType::Pkcs12 => return Err(PKCS12_UNSUPPORTED.to_string()),
        StoreType::Bcfks => return Err(BCFKS_UNSUPPORTED.to_string()),
    };
    if certs.is_empty() {
        return Err("the trust store holds no certificate".to_string());
    }
    Ok(certs)
}

fn read(location: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(location).map_err(|e| format!("cannot read {}: {e}", location.display()))
}

/// Why a PKCS #12 store is refused, and how to convert it.
const PKCS12_UNSUPPORTED: &str = "PKCS12 stores are not supported by keel; convert to PEM: \
                                  openssl pkcs12 -in STORE.p12 -nodes -out STORE.pem";
/// Why a BCFKS store is refused.
const BCFKS_UNSUPPORTED: &str = "BCFKS stores are not supported by keel; use PEM (or JKS)";

/// The certificates (in file order) and the first private key of a PEM file.
fn pem_items(
    bytes: &[u8],
) -> Result<(Vec<CertificateDer<'static>>, Option<PrivateKeyDer<'static>>), String> {
    use rustls_pemfile::Item;
    let mut certs = Vec::new();
    let mut key = None;
    let mut reader = bytes;
    for item in rustls_pemfile::read_all(&mut reader) {
        match item.map_err(|e| format!("not a valid PEM file: {e}"))? {
            Item::X509Certificate(c) => certs.push(c),
            Item::Pkcs8Key(k) if key.is_none() => key = Some(PrivateKeyDer::Pkcs8(k)),
            Item::Pkcs1Key(k) if key.is_none() => key = Some(PrivateKeyDer::Pkcs1(k)),
            Item::Sec1Key(k) if key.is_none() => key = Some(PrivateKeyDer::Sec1(k)),
            _ => {}
        }
    }
    Ok((certs, key))
}

fn pem_key_store(bytes: &[u8], password: Option<&str>) -> Result<KeyMaterial, String> {
    let text = String::from_utf8_lossy(bytes);
    if text.contains("BEGIN ENCRYPTED PRIVATE KEY") || text.contains("Proc-Type: 4,ENCRYPTED") {
        return Err(
            "the private key is encrypted, which keel cannot read; store it \
                    unencrypted (openssl pkcs8 -topk8 -nocrypt) and protect the file instead"
                .to_string(),
        );
    }
    let (chain, key) = pem_items(bytes)?;
    let Some(key) = key else {
        return Err("no private key found (expected a PEM block BEGIN PRIVATE KEY)".to_string());
    };
    if chain.is_empty() {
        return Err("no certificate found (expected PEM blocks BEGIN CERTIFICATE)".to_string());
    }
    if password.is_some() {
        tracing::warn!("ssl.keyStore.password is set but the PEM private key is not encrypted");
    }
    Ok(KeyMaterial { chain, key })
}

/// A parsed JKS file.
struct Jks {
    /// Private key entries: the protected key (an EncryptedPrivateKeyInfo) and its chain.
    private_keys: Vec<(Vec<u8>, Vec<CertificateDer<'static>>)>,
    /// Trusted certificate entries.
    trusted: Vec<CertificateDer<'static>>,
}

/// `0xFEEDFEED`, the JKS magic number; JCEKS stores start with `0xCECECECE`.
const JKS_MAGIC: u32 = 0xfeed_feed;
const JCEKS_MAGIC: u32 = 0xcece_cece;
/// Entries in one store, at most: bounds the work a damaged count can cause.
const JKS_MAX_ENTRIES: u32 = 100_000;

/// A big-endian reader over a byte slice whose reads fail instead of panicking.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.bytes.len() - self.pos < n {
            return Err("the JKS file is truncated".to_string());
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn u16(&mut self) -> Result<u16, String> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Java's `DataInput.readUTF`: a u16 length, then modified UTF-8.
    fn utf(&mut self) -> Result<String, String> {
        let n = self.u16()? as usize;
        Ok(String::from_utf8_lossy(self.take(n)?).into_owned())
    }

    /// A u32 length, then that many bytes.
    fn blob(&mut self) -> Result<&'a [u8], String> {
        let n = self.u32()? as usize;
        self.take(n)
    }
}

/// Java's password bytes for JKS: each UTF-16 code unit, big-endian.
fn jks_password_bytes(password: &str) -> Vec<u8> {
    password.encode_utf16().flat_map(u16::to_be_bytes).collect()
}

impl Jks {
    /// Parses a JKS file (versions 1 and 2) and checks its integrity digest:
    /// SHA-1(password bytes, "Mighty Aphrodite", everything before the digest).
    fn parse(bytes: &[u8], password: &str) -> Result<Jks, String> {
        let mut r = Reader { bytes, pos: 0 };
        let magic = r.u32()?;
        if magic == JCEKS_MAGIC {
            return Err(
                "this is a JCEKS store, which keel cannot read; convert it to PEM \
                        (keytool -importkeystore -deststoretype PKCS12, then openssl pkcs12 \
                        -nodes)"
                    .to_string(),
            );
        }
        if magic != JKS_MAGIC {
            let hint = if bytes.first() == Some(&0x30) {
                " (it looks like PKCS12, which keel cannot read; convert it to PEM: \
                 openssl pkcs12 -in STORE -nodes -out STORE.pem)"
            } else {
                ""
            };
            return Err(format!("not a JKS file{hint}"));
        }
        let version = r.u32()?;
        if version != 1 && version != 2 {
            return Err(format!("unknown JKS version {version}"));
        }
        let count = r.u32()?;
        if count > JKS_MAX_ENTRIES {
            return Err(format!("implausible JKS entry count {count}"));
        }
        let mut store = Jks {
            private_keys: Vec::new(),
            trusted: Vec::new(),
        };
        let cert = |r: &mut Reader| -> Result<CertificateDer<'static>, String> {
            if version == 2 {
                let kind = r.utf()?;
                if kind != "X.509" {
                    return Err(format!("JKS certificate of type {kind:?}, expected X.509"));
                }
            }
            Ok(CertificateDer::from(r.blob()?.to_vec()))
        };
        for _ in 0..count {
            let tag = r.u32()?;
            let _alias = r.utf()?;
            let _date_ms = r.take(8)?;
            match tag {
                1 => {
                    let key = r.blob()?.to_vec();
                    let n = r.u32()?;
                    if n > JKS_MAX_ENTRIES {
                        return Err(format!("implausible JKS chain length {n}"));
                    }
                    let mut chain = Vec::new();
                    for _ in 0..n {
                        chain.push(cert(&mut r)?);
                    }
                    store.private_keys.push((key, chain));
                }
                2 => store.trusted.push(cert(&mut r)?),
                _ => return Err(format!("unknown JKS entry tag {tag}")),
            }
        }
        let body = &bytes[..r.pos];
        let stored = r.take(20)?;
        let digest = Sha1::new()
            .chain_update(jks_password_bytes(password))
            .chain_update(b"Mighty Aphrodite")
            .chain_update(body)
            .finalize();
        if digest.as_slice() != stored {
            return Err(
                "JKS integrity check failed: the password is wrong or the file \
                        is damaged"
                    .to_string(),
            );
        }
        Ok(store)
    }
}

/// The JDK `KeyProtector` algorithm's OID, 1.3.6.1.4.1.42.2.17.1.1, DER-encoded.
const KEY_PROTECTOR_OID: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x2a, 0x02, 0x11, 0x01, 0x01];

/// Recovers the PKCS #8 key from a JKS-protected EncryptedPrivateKeyInfo:
/// `salt(20) || key XOR keystream || SHA-1(password bytes, key)`, where the keystream's
/// blocks are `d(i) = SHA-1(password bytes, d(i-1))` with `d(0) = salt`.
fn jks_recover_key(encrypted_info: &[u8], password: &str) -> Result<Vec<u8>, String> {
    let bad = || "the JKS private key entry is malformed".to_string();
    let (info, _) = der_take(encrypted_info, 0x30).ok_or_else(bad)?;
    let (algorithm, rest) = der_take(info, 0x30).ok_or_else(bad)?;
    let (oid, _) = der_take(algorithm, 0x06).ok_or_else(bad)?;
    if oid != KEY_PROTECTOR_OID {
        return Err(
            "the JKS private key is protected with an algorithm keel cannot \
                    read (only the JDK's own JKS key protection is supported)"
                .to_string(),
        );
    }
    let (data, _) = der_take(rest, 0x04).ok_or_else(bad)?;
    if data.len() < 40 {
        return Err(bad());
    }
    let (salt, rest) = data.split_at(20);
    let (protected, check) = rest.split_at(rest.len() - 20);
    let pass = jks_password_bytes(password);
    let mut key = Vec::with_capacity(protected.len());
    let mut block: Vec<u8> = salt.to_vec();
    for chunk in protected.chunks(20) {
        block = Sha1::new()
            .chain_update(&pass)
            .chain_update(&block)
            .finalize()
            .to_vec();
        key.extend(chunk.iter().zip(&block).map(|(a, b)| a ^ b));
    }
    let digest = Sha1::new()
        .chain_update(&pass)
        .chain_update(&key)
        .finalize();
    if digest.as_slice() != check {
        return Err("cannot recover the JKS private key: the password is wrong".to_string());
    }
    Ok(key)
}

/// Splits one DER element with tag `tag` off the front of `bytes`: its contents and
/// what follows it. `None` when the tag differs or the length is malformed.
fn der_take(bytes: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    if bytes.len() < 2 || bytes[0] != tag {
        return None;
    }
    let (len, header) = match bytes[1] {
        n if n < 0x80 => (n as usize, 2),
        0x81..=0x84 => {
            let n = (bytes[1] & 0x7f) as usize;
            let len_bytes = bytes.get(2..2 + n)?;
            let len = len_bytes.iter().fold(0usize, |a, b| (a << 8) | *b as usize);
            (len, 2 + n)
        }
        _ => return None,
    };
    let end = header.checked_add(len)?;
    if end > bytes.len() {
        return None;
    }
    Some((&bytes[header..end], &bytes[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn store_type_from_extension_like_zookeeper() {
        let t = |name: &str| resolve_type(None, &PathBuf::from(name));
        assert_eq!(t("/a/key.pem"), Ok(StoreType::Pem));
        assert_eq!(t("/a/key.jks"), Ok(StoreType::Jks));
        assert_eq!(t("/a/key.p12"), Ok(StoreType::Pkcs12));
        assert!(t("/a/key.PEM").is_err());
        assert!(t("/a/key").is_err());
        assert_eq!(
            resolve_type(Some(StoreType::Pem), &PathBuf::from("/a/key")),
            Ok(StoreType::Pem)
        );
    }

    /// Builds a JKS file the way the JDK writes one.
    /// One JKS entry for the test builder: tag, key or certificate bytes, chain.
    type JksEntry<'a> = (u32, &'a [u8], &'a [&'a [u8]]);

    fn jks_file(password: &str, entries: &[JksEntry]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend(JKS_MAGIC.to_be_bytes());
        out.extend(2u32.to_be_bytes());
        out.extend((entries.len() as u32).to_be_bytes());
        for (tag, key, certs) in entries {
            out.extend(tag.to_be_bytes());
            out.extend(5u16.to_be_bytes());
            out.extend(b"alias");
            out.extend(0u64.to_be_bytes());
            let put_cert = |out: &mut Vec<u8>, c: &[u8]| {
                out.extend(5u16.to_be_bytes());
                out.extend(b"X.509");
                out.extend((c.len() as u32).to_be_bytes());
                out.extend(c);
            };
            if *tag == 1 {
                out.extend((key.len() as u32).to_be_bytes());
                out.extend(*key);
                out.extend((certs.len() as u32).to_be_bytes());
            }
            for c in *certs {
                put_cert(&mut out, c);
            }
        }
        let digest = Sha1::new()
            .chain_update(jks_password_bytes(password))
            .chain_update(b"Mighty Aphrodite")
            .chain_update(&out)
            .finalize();
        out.extend(digest);
        out
    }

    /// Protects `key` with the JDK KeyProtector scheme (the inverse of
    /// `jks_recover_key`), wrapped in an EncryptedPrivateKeyInfo.
    fn protect(key: &[u8], password: &str) -> Vec<u8> {
        let pass = jks_password_bytes(password);
        let salt = [7u8; 20];
        let mut data = salt.to_vec();
        let mut block = salt.to_vec();
        for chunk in key.chunks(20) {
            block = Sha1::new()
                .chain_update(&pass)
                .chain_update(&block)
                .finalize()
                .to_vec();
            data.extend(chunk.iter().zip(&block).map(|(a, b)| a ^ b));
        }
        data.extend(Sha1::new().chain_update(&pass).chain_update(key).finalize());
        let mut alg = vec![0x06, KEY_PROTECTOR_OID.len() as u8];
        alg.extend(KEY_PROTECTOR_OID);
        alg.extend([0x05, 0x00]);
        let der = |tag: u8, body: &[u8]| {
            let mut v = vec![tag];
            if body.len() < 0x80 {
                v.push(body.len() as u8);
            } else {
                v.extend([0x82, (body.len() >> 8) as u8, body.len() as u8]);
            }
            v.extend(body);
            v
        };
        let mut info = der(0x30, &alg);
        info.extend(der(0x04, &data));
        der(0x30, &info)
    }

    #[test]
    fn jks_round_trip_and_password_checks() {
        let key: Vec<u8> = (0..=255u8).cycle().take(1217).collect();
        let protected = protect(&key, "apassword");
        let file = jks_file(
            "apassword",
            &[(1, &protected, &[b"leaf", b"ca"]), (2, b"", &[b"trusted"])],
        );
        let store = Jks::parse(&file, "apassword").unwrap();
        assert_eq!(store.trusted, vec![CertificateDer::from(&b"trusted"[..])]);
        let (enc, chain) = &store.private_keys[0];
        assert_eq!(chain.len(), 2);
        assert_eq!(jks_recover_key(enc, "apassword").unwrap(), key);
        assert!(jks_recover_key(enc, "other")
            .unwrap_err()
            .contains("password"));
        assert!(Jks::parse(&file, "other")
            .err()
            .unwrap()
            .contains("integrity"));
        assert!(Jks::parse(&file[..file.len() - 30], "apassword").is_err());
        assert!(Jks::parse(&[0x30, 0x82, 0, 0], "")
            .err()
            .unwrap()
            .contains("PKCS12"));
    }

    #[test]
    fn encrypted_pem_keys_are_refused() {
        let pem =
            b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n";
        assert!(pem_key_store(pem, Some("x"))
            .unwrap_err()
            .contains("encrypted"));
        assert!(pem_key_store(b"", None)
            .unwrap_err()
            .contains("no private key"));
    }
}

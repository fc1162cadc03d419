//! ACL schemes and the permission check (shared/PROTOCOL.md, "ACLs"; ZooKeeper's
//! ZooKeeperServer.checkACL and PrepRequestProcessor.fixupACL).
//!
//! A connection's identities are a list of [`Id`]s: `ip:<addr>` from the socket, plus
//! `digest:<user>:<hash>` and possibly `super:` after `addauth`, `x509:<subject DN>` (and
//! possibly `super:<DN>`) from a TLS client certificate.

use crate::proto::ErrorCode;
use base64::Engine;
use jute::{Acl, Id};
use sha1::{Digest, Sha1};
use std::net::IpAddr;

/// `base64(sha1("user:password"))` prefixed with `user:`, the digest scheme's id form.
pub fn digest_id(user_password: &str) -> String {
    let user = user_password.split(':').next().unwrap_or("");
    let hash = Sha1::digest(user_password.as_bytes());
    format!(
        "{user}:{}",
        base64::engine::general_purpose::STANDARD.encode(hash)
    )
}

/// The ACL `world:anyone` with all permissions, ZooKeeper's OPEN_ACL_UNSAFE.
pub fn open_acl() -> Vec<Acl> {
    vec![Acl {
        perms: crate::proto::opcode::perm::ALL,
        id: Id {
            scheme: "world".into(),
            id: "anyone".into(),
        },
    }]
}

/// Whether an `ip` scheme ACL expression (`addr` or `addr/bits`) matches `addr`.
pub fn ip_matches(client: &str, expr: &str) -> bool {
    let (net, bits) = match expr.split_once('/') {
        Some((n, b)) => match b.parse::<u32>() {
            Ok(b) => (n, Some(b)),
            Err(_) => return false,
        },
        None => (expr, None),
    };
    let (Ok(net), Ok(client)) = (net.parse::<IpAddr>(), client.parse::<IpAddr>()) else {
        return false;
    };
    let (net, client, width) = match (net, client) {
        (IpAddr::V4(n), IpAddr::V4(c)) => (u32::from(n) as u128, u32::from(c) as u128, 32),
        (IpAddr::V6(n), IpAddr::V6(c)) => (u128::from(n), u128::from(c), 128),
        _ => return false,
    };
    let bits = bits.unwrap_or(width).min(width);
    if bits == 0 {
        return true;
    }
    let shift = width - bits;
    (net >> shift) == (client >> shift)
}

fn ip_valid(expr: &str) -> bool {
    let (net, bits) = match expr.split_once('/') {
        Some((n, b)) => (n, b.parse::<u32>().ok()),
        None => (expr, Some(0)),
    };
    match (net.parse::<IpAddr>(), bits) {
        (Ok(IpAddr::V4(_)), Some(b)) => b <= 32,
        (Ok(IpAddr::V6(_)), Some(b)) => b <= 128,
        _ => false,
    }
}

/// Splits `text` on the separators that are neither backslash-escaped nor inside
/// double quotes (the quoting rules of Java's `X500Name` string parser).
fn split_dn<'a>(text: &'a str, separators: &[char]) -> Vec<&'a str> {
    let mut parts = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in text.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '"' {
            quoted = !quoted;
        } else if !quoted && separators.contains(&c) {
            parts.push(&text[start..i]);
            start = i + c.len_utf8();
        }
    }
    parts.push(&text[start..]);
    parts
}

/// The attribute keywords Java's `X500Principal(String)` knows (`AVAKeyword`).
const DN_KEYWORDS: &[&str] = &[
    "CN",
    "C",
    "L",
    "S",
    "ST",
    "O",
    "OU",
    "T",
    "IP",
    "STREET",
    "DC",
    "DNQUALIFIER",
    "DNQ",
    "SURNAME",
    "GIVENNAME",
    "INITIALS",
    "GENERATION",
    "EMAIL",
    "EMAILADDRESS",
    "UID",
    "SERIALNUMBER",
];

/// Whether an `x509` ACL id is a distinguished name ZooKeeper accepts: its
/// X509AuthenticationProvider.isValid parses it with `new X500Principal(id)`. This
/// checks the shape that parser requires: the empty name, or RDNs separated by `,` or
/// `;`, each of `+`-joined `keyword=value` pairs whose keyword is a known name (any
/// case) or a dotted OID (optionally `OID.`-prefixed). Value escapes are not checked.
pub fn x509_valid(dn: &str) -> bool {
    if dn.is_empty() {
        return true;
    }
    let keyword_ok = |k: &str| {
        let k = k.trim().to_ascii_uppercase();
        if DN_KEYWORDS.contains(&k.as_str()) {
            return true;
        }
        let oid = k.strip_prefix("OID.").unwrap_or(&k);
        let arcs: Vec<&str> = oid.split('.').collect();
        arcs.len() >= 2
            && arcs
                .iter()
                .all(|a| !a.is_empty() && a.bytes().all(|b| b.is_ascii_digit()))
    };
    split_dn(dn, &[',', ';']).into_iter().all(|rdn| {
        split_dn(rdn, &['+'])
            .into_iter()
            .all(|ava| ava.split_once('=').is_some_and(|(k, _)| keyword_ok(k)))
    })
}

/// Checks that one of `identities` holds one of the `perm` bits on a znode with `acl`.
///
/// Errors: NOAUTH. An empty ACL allows everything; a `super` identity passes always.
pub fn check(acl: &[Acl], perm: i32, identities: &[Id]) -> Result<(), ErrorCode> {
    if acl.is_empty() || identities.iter().any(|i| i.scheme == "super") {
        return Ok(());
    }
    for a in acl {
        if a.perms & perm == 0 {
            continue;
        }
        if a.id.scheme == "world" && a.id.id == "anyone" {
            return Ok(());
        }
        let matched = identities.iter().any(|who| {
            who.scheme == a.id.scheme
                && match a.id.scheme.as_str() {
                    "ip" => ip_matches(&who.id, &a.id.id),
                    "digest" | "x509" | "sasl" => who.id == a.id.id,
                    _ => false,
                }
        });
        if matched {
            return Ok(());
        }
    }
    Err(ErrorCode::NoAuth)
}

/// Turns a client's ACL list into the one stored: `auth` entries become the
/// connection's authenticated identities, duplicates are dropped, and every entry must
/// name a known scheme with a valid id.
///
/// Errors: INVALIDACL for an empty list, an unknown scheme, a malformed id, or `auth`
/// with no authenticated identity.
pub fn fixup(acl: &[Acl], identities: &[Id]) -> Result<Vec<Acl>, ErrorCode> {
    if acl.is_empty() {
        return Err(ErrorCode::InvalidAcl);
    }
    let mut out: Vec<Acl> = Vec::with_capacity(acl.len());
    let push = |a: Acl, out: &mut Vec<Acl>| {
        if !out.contains(&a) {
            out.push(a);
        }
    };
    for a in acl {
        match a.id.scheme.as_str() {
            "world" if a.id.id == "anyone" => push(a.clone(), &mut out),
            "auth" => {
                let mut any = false;
                for who in identities {
                    if matches!(who.scheme.as_str(), "digest" | "x509" | "sasl") {
                        any = true;
                        push(
                            Acl {
                                perms: a.perms,
                                id: who.clone(),
                            },
                            &mut out,
                        );
                    }
                }
                if !any {
                    return Err(ErrorCode::InvalidAcl);
                }
            }
            "digest" if a.id.id.split(':').count() == 2 => push(a.clone(), &mut out),
            "ip" if ip_valid(&a.id.id) => push(a.clone(), &mut out),
            "x509" if x509_valid(&a.id.id) => push(a.clone(), &mut out),
            "sasl" => push(a.clone(), &mut out),
            _ => return Err(ErrorCode::InvalidAcl),
        }
    }
    Ok(out)
}

/// The user name a whoAmI reply shows for an identity: the part before ':' for digest.
pub fn user_name(id: &Id) -> String {
    match id.scheme.as_str() {
        "digest" => id.id.split(':').next().unwrap_or("").to_string(),
        _ => id.id.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(scheme: &str, id: &str) -> Id {
        Id {
            scheme: scheme.into(),
            id: id.into(),
        }
    }

    #[test]
    fn digest_matches_zookeeper() {
        // The super digest kazoo's harness uses is for password "test".
        assert_eq!(
            digest_id("super:test"),
            "super:D/InIHSb7yEEbrWz8b9l71RjZJU="
        );
    }

    #[test]
    fn ip_prefixes() {
        assert!(ip_matches("127.0.0.1", "127.0.0.1"));
        assert!(ip_matches("127.0.0.9", "127.0.0.0/24"));
        assert!(!ip_matches("127.0.1.9", "127.0.0.0/24"));
        assert!(!ip_matches("127.0.0.1", "bad"));
    }

    #[test]
    fn x509_ids_must_be_distinguished_names() {
        for ok in [
            "",
            "CN=client1",
            "CN=a+OU=b",
            "cn=x, o=y",
            "CN=Keel\\, Inc.,O=k",
            "CN=\"a,b\";O=k",
            "1.2.840.113549.1.9.1=#160b6332",
            "OID.2.5.4.3=x",
        ] {
            assert!(x509_valid(ok), "{ok}");
        }
        for bad in ["client1", " ", "CN=a,", "XX=a", "CN=a,foo", "1=x", "2.5.=x"] {
            assert!(!x509_valid(bad), "{bad}");
        }
        let acl = |id: &str| {
            vec![Acl {
                perms: 31,
                id: Id {
                    scheme: "x509".into(),
                    id: id.into(),
                },
            }]
        };
        assert!(fixup(&acl("CN=client1"), &[]).is_ok());
        assert_eq!(fixup(&acl("client1"), &[]), Err(ErrorCode::InvalidAcl));
    }

    #[test]
    fn check_and_fixup() {
        let acl = vec![Acl {
            perms: 1,
            id: id("digest", "u:h"),
        }];
        assert_eq!(
            check(&acl, 1, &[id("ip", "1.2.3.4")]),
            Err(ErrorCode::NoAuth)
        );
        assert_eq!(check(&acl, 1, &[id("digest", "u:h")]), Ok(()));
        assert_eq!(
            check(&acl, 2, &[id("digest", "u:h")]),
            Err(ErrorCode::NoAuth)
        );
        assert_eq!(check(&acl, 2, &[id("super", "")]), Ok(()));
        let auth = vec![Acl {
            perms: 31,
            id: id("auth", ""),
        }];
        assert_eq!(
            fixup(&auth, &[id("ip", "1.2.3.4")]),
            Err(ErrorCode::InvalidAcl)
        );
        let fixed = fixup(&auth, &[id("ip", "1.2.3.4"), id("digest", "u:h")]).unwrap();
        assert_eq!(
            fixed,
            vec![Acl {
                perms: 31,
                id: id("digest", "u:h")
            }]
        );
        assert_eq!(fixup(&[], &[]), Err(ErrorCode::InvalidAcl));
        let bad = vec![Acl {
            perms: 31,
            id: id("nope", "x"),
        }];
        assert_eq!(fixup(&bad, &[]), Err(ErrorCode::InvalidAcl));
    }
}

//! ACL schemes and the permission check (shared/PROTOCOL.md, "ACLs"; ZooKeeper's
//! ZooKeeperServer.checkACL and PrepRequestProcessor.fixupACL).
//!
//! A connection's identities are a list of [`Id`]s: `ip:<addr>` from the socket, plus
//! `digest:<user>:<hash>` and possibly `super:` after `addauth`, `x509:<subject DN>` (and
//! possibly `super:<DN>`) from a TLS client certificate, `sasl:<user>` (and possibly
//! `super:`) after a SASL exchange.

use crate::proto::ErrorCode;
use base64::Engine;
use jute::{Acl, Id};
use sha1::{Digest, Sha1};

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

/// The first code point of each run of ten decimal digits (Unicode category Nd) in the
/// Basic Multilingual Plane, which Java's `Character.digit(char, 10)` reads as 0-9.
const DECIMAL_ZEROS: &[u32] = &[
    0x30, 0x660, 0x6f0, 0x7c0, 0x966, 0x9e6, 0xa66, 0xae6, 0xb66, 0xbe6, 0xc66, 0xce6, 0xd66,
    0xde6, 0xe50, 0xed0, 0xf20, 0x1040, 0x1090, 0x17e0, 0x1810, 0x1946, 0x19d0, 0x1a80, 0x1a90,
    0x1b50, 0x1bb0, 0x1c40, 0x1c50, 0xa620, 0xa8d0, 0xa900, 0xa9d0, 0xa9f0, 0xaa50, 0xabf0, 0xff10,
];

/// Java's `Integer.parseInt(text)`: an optional `+` or `-`, then one or more decimal
/// digits of any script, within i32. ZooKeeper's ip provider parses octets and mask bits
/// with it, so `+1`, `007` and Arabic-Indic digits all count.
fn java_parse_int(text: &str) -> Option<i32> {
    let (negative, digits) = match text.chars().next()? {
        '-' => (true, &text[1..]),
        '+' => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() {
        return None;
    }
    let mut value: i64 = 0;
    for c in digits.chars() {
        let c = c as u32;
        let digit = DECIMAL_ZEROS
            .iter()
            .find(|&&zero| (zero..zero + 10).contains(&c))
            .map(|zero| c - zero)?;
        value = value * 10 + digit as i64;
        if value > i32::MAX as i64 + 1 {
            return None;
        }
    }
    let value = if negative { -value } else { value };
    i32::try_from(value).ok()
}

/// An IPv4 address as ZooKeeper's IPAuthenticationProvider reads one: exactly four
/// `.`-separated octets, each [`java_parse_int`] in 0..=255. It has no IPv6 form, so an
/// IPv6 address is not an address to it.
fn ip_v4_bytes(addr: &str) -> Option<u32> {
    let parts: Vec<&str> = addr.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let mut out = 0u32;
    for part in parts {
        let v = java_parse_int(part).filter(|v| (0..=255).contains(v))?;
        out = (out << 8) | v as u32;
    }
    Some(out)
}

/// An `ip` ACL expression `addr[/bits]` as (address, prefix bits), or `None` when
/// ZooKeeper's provider finds it invalid (the bits are everything after the first `/`).
fn ip_expr(expr: &str) -> Option<(u32, u32)> {
    let (addr, bits) = match expr.split_once('/') {
        Some((addr, bits)) => (addr, Some(bits)),
        None => (expr, None),
    };
    let net = ip_v4_bytes(addr)?;
    let bits = match bits {
        Some(b) => java_parse_int(b).filter(|b| (0..=32).contains(b))? as u32,
        None => 32,
    };
    Some((net, bits))
}

/// Whether an `ip` scheme ACL expression (`addr` or `addr/bits`) matches the client
/// address `client`, as ZooKeeper's IPAuthenticationProvider.matches: IPv4 only.
pub fn ip_matches(client: &str, expr: &str) -> bool {
    let (Some((net, bits)), Some(client)) = (ip_expr(expr), ip_v4_bytes(client)) else {
        return false;
    };
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    };
    net & mask == client & mask
}

fn ip_valid(expr: &str) -> bool {
    ip_expr(expr).is_some()
}

/// Whether a digest ACL id has ZooKeeper's `user:hash` form: Java's `id.split(":")`
/// (which drops trailing empty parts) gives exactly two parts. So `:hash` and `a:b:`
/// pass, `bob:`, `:` and `a::b` do not.
fn digest_valid(id: &str) -> bool {
    let mut parts: Vec<&str> = id.split(':').collect();
    while parts.last() == Some(&"") {
        parts.pop();
    }
    parts.len() == 2
}

/// Java's `String.hashCode` over the UTF-16 code units of `s`.
fn java_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(unit as i32))
}

/// The bucket an identity falls in within ZooKeeper's per-connection identity set (a
/// `ConcurrentHashMap` of `table` buckets keyed by the jute-generated `Id.hashCode`).
fn identity_bucket(id: &Id, table: usize) -> usize {
    let h = 17i32
        .wrapping_mul(37)
        .wrapping_add(java_hash(&id.scheme))
        .wrapping_mul(37)
        .wrapping_add(java_hash(&id.id));
    let spread = ((h ^ ((h as u32) >> 16) as i32) & 0x7fff_ffff) as usize;
    spread & (table - 1)
}

/// Adds `id` to a connection's identities unless it is there already, keeping the list
/// in the order ZooKeeper iterates its identity set, which is the order whoAmI lists
/// them and an `auth` ACL expands to: by hash bucket (16 buckets, doubling each time
/// the set reaches three quarters of them), then in the order added. So `digest:bob`
/// comes before the connection's `ip:127.0.0.1`.
pub fn add_identity(ids: &mut Vec<Id>, id: Id) {
    if ids.contains(&id) {
        return;
    }
    ids.push(id);
    let mut table = 16;
    while ids.len() >= table * 3 / 4 {
        table *= 2;
    }
    // Stable: ids in one bucket stay in the order they were added.
    ids.sort_by_key(|i| identity_bucket(i, table));
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

/// Whether a `sasl` ACL id is valid: SASLAuthenticationProvider.isValid takes any id
/// `new KerberosName(id)` accepts: one without `@`, or `name[/host]@realm` with no
/// further `/` or `@` in the parts.
pub fn sasl_valid(id: &str) -> bool {
    let Some((principal, realm)) = id.split_once('@') else {
        return true;
    };
    let (name, host) = principal.split_once('/').unwrap_or((principal, ""));
    ![name, host, realm].iter().any(|p| p.contains(['/', '@']))
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
                    "digest" | "x509" => who.id == a.id.id,
                    // SASLAuthenticationProvider.matches: the identity `super` matches
                    // every sasl ACL.
                    "sasl" => who.id == a.id.id || who.id == "super",
                    _ => false,
                }
        });
        if matched {
            return Ok(());
        }
    }
    Err(ErrorCode::NoAuth)
}

/// Turns a client's ACL list into the one stored, as ZooKeeper's
/// PrepRequestProcessor.fixupACL: duplicates in the list are dropped first, then
/// `auth` entries become the connection's authenticated identities (in the
/// connection's identity order; two `auth` entries may so expand to equal ones, which
/// stay), and every other entry must name a loaded provider with a valid id: `world`
/// only as `anyone`, `digest` as `user:hash`, `ip` as IPv4 `addr[/bits]`, `x509` as a
/// distinguished name (keel takes x509 ids without a secure port; see the README),
/// `sasl` (only with `sasl_acls`: `authProvider.N` loads ZooKeeper's
/// SASLAuthenticationProvider) as a Kerberos-shaped name ([`sasl_valid`]). `super` has
/// no provider. Perms are not checked.
///
/// Errors: INVALIDACL for an empty list, an unknown scheme, a malformed id, or `auth`
/// with no authenticated identity.
pub fn fixup(acl: &[Acl], identities: &[Id], sasl_acls: bool) -> Result<Vec<Acl>, ErrorCode> {
    let mut unique: Vec<&Acl> = Vec::with_capacity(acl.len());
    for a in acl {
        if !unique.contains(&a) {
            unique.push(a);
        }
    }
    if unique.is_empty() {
        return Err(ErrorCode::InvalidAcl);
    }
    let mut out: Vec<Acl> = Vec::with_capacity(unique.len());
    for a in unique {
        let valid = match a.id.scheme.as_str() {
            "world" => a.id.id == "anyone",
            "auth" => {
                let before = out.len();
                for who in identities {
                    let authenticated = match who.scheme.as_str() {
                        "digest" | "x509" => true,
                        "sasl" => sasl_acls,
                        _ => false,
                    };
                    if authenticated {
                        out.push(Acl {
                            perms: a.perms,
                            id: who.clone(),
                        });
                    }
                }
                if out.len() == before {
                    return Err(ErrorCode::InvalidAcl);
                }
                continue;
            }
            "digest" => digest_valid(&a.id.id),
            "ip" => ip_valid(&a.id.id),
            "x509" => x509_valid(&a.id.id),
            "sasl" => sasl_acls && sasl_valid(&a.id.id),
            _ => false,
        };
        if !valid {
            return Err(ErrorCode::InvalidAcl);
        }
        out.push(a.clone());
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
        assert!(ip_matches("127.0.0.1", "127.000.000.001"));
        assert!(ip_matches("127.0.0.1", "10.0.0.0/0"));
        assert!(!ip_matches("127.0.0.1", "127.0.0.2/31"));
        assert!(ip_matches("127.0.0.3", "127.0.0.2/+31"));
    }

    #[test]
    fn ids_valid_as_zookeepers_providers() {
        // Java's Integer.parseInt: signs, leading zeros and other scripts' digits.
        for ok in [
            "127.0.0.1",
            "127.0.0.1/0",
            "127.0.0.1/32",
            "127.0.0.1/+8",
            "127.0.0.1/08",
            "127.000.000.001",
            "+127.0.0.1",
            "-0.0.0.0",
            "\u{661}.2.3.4",
        ] {
            assert!(ip_valid(ok), "{ok}");
        }
        for bad in [
            "127.0.0.1/33",
            "127.0.0.1/-1",
            "127.0.0.1/",
            "127.0.0.1/32/1",
            "127.0.0.256",
            "127.0.0",
            "1.2.3.4.",
            " 1.2.3.4",
            "::1",
            "::1/128",
            "::ffff:127.0.0.1",
            "fe80::1",
            "",
            "localhost",
        ] {
            assert!(!ip_valid(bad), "{bad}");
        }
        for ok in ["bob:hash", ":hash", "a:b:", "a:b::"] {
            assert!(digest_valid(ok), "{ok}");
        }
        for bad in ["bob:", ":", "", "bob", "a:b:c", "a::", "a::b"] {
            assert!(!digest_valid(bad), "{bad}");
        }
        let one = |scheme: &str, ident: &str| {
            fixup(
                &[Acl {
                    perms: 31,
                    id: id(scheme, ident),
                }],
                &[],
                false,
            )
        };
        assert!(one("world", "anyone").is_ok());
        for (scheme, ident) in [
            ("world", ""),
            ("world", "Anyone"),
            ("sasl", "bob"),
            ("super", ""),
            ("WORLD", "anyone"),
            ("", "x"),
        ] {
            assert_eq!(
                one(scheme, ident),
                Err(ErrorCode::InvalidAcl),
                "{scheme}:{ident}"
            );
        }
    }

    #[test]
    fn identities_in_zookeepers_set_order() {
        // Orders measured with whoAmI on ZooKeeper 3.8.
        let mut ids = vec![id("ip", "127.0.0.1")];
        add_identity(&mut ids, id("digest", "alice:V55/p2T0OpjQ+low3NVAH4aLvm0="));
        add_identity(&mut ids, id("digest", "bob:ikIaKsbtGweaHnb/jKn7OHqbunM="));
        add_identity(&mut ids, id("digest", "bob:ikIaKsbtGweaHnb/jKn7OHqbunM="));
        let names: Vec<String> = ids.iter().map(user_name).collect();
        assert_eq!(names, ["bob", "127.0.0.1", "alice"]);
        let mut ids = vec![id("ip", "127.0.0.1")];
        add_identity(&mut ids, id("super", ""));
        add_identity(&mut ids, id("digest", "super:D/InIHSb7yEEbrWz8b9l71RjZJU="));
        add_identity(&mut ids, id("digest", "zed:j0KlZkOm2mvZ0jqdPTkbv3EkIts="));
        let schemes: Vec<&str> = ids.iter().map(|i| i.scheme.as_str()).collect();
        // super and zed share a bucket: the one added first stays first.
        assert_eq!(schemes, ["super", "digest", "ip", "digest"]);
        assert_eq!(user_name(&ids[1]), "zed");
    }

    #[test]
    fn auth_expands_after_duplicates_are_dropped() {
        let bob = id("digest", "bob:h");
        let auth = |perms: i32, ident: &str| Acl {
            perms,
            id: id("auth", ident),
        };
        let fixed = fixup(
            &[auth(31, ""), auth(31, "x"), auth(31, "")],
            std::slice::from_ref(&bob),
            false,
        )
        .unwrap();
        assert_eq!(fixed.len(), 2);
        assert!(fixed.iter().all(|a| a.id == bob));
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
        assert!(fixup(&acl("CN=client1"), &[], false).is_ok());
        assert_eq!(
            fixup(&acl("client1"), &[], false),
            Err(ErrorCode::InvalidAcl)
        );
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
            fixup(&auth, &[id("ip", "1.2.3.4")], false),
            Err(ErrorCode::InvalidAcl)
        );
        let fixed = fixup(&auth, &[id("ip", "1.2.3.4"), id("digest", "u:h")], false).unwrap();
        assert_eq!(
            fixed,
            vec![Acl {
                perms: 31,
                id: id("digest", "u:h")
            }]
        );
        assert_eq!(fixup(&[], &[], false), Err(ErrorCode::InvalidAcl));
        let bad = vec![Acl {
            perms: 31,
            id: id("nope", "x"),
        }];
        assert_eq!(fixup(&bad, &[], false), Err(ErrorCode::InvalidAcl));
    }

    #[test]
    fn sasl_scheme() {
        let acl = vec![Acl {
            perms: 31,
            id: id("sasl", "jaasuser"),
        }];
        // Only with the SASL provider loaded is `sasl` a scheme.
        assert_eq!(fixup(&acl, &[], false), Err(ErrorCode::InvalidAcl));
        assert_eq!(fixup(&acl, &[], true), Ok(acl.clone()));
        assert_eq!(check(&acl, 1, &[id("sasl", "jaasuser")]), Ok(()));
        assert_eq!(
            check(&acl, 1, &[id("sasl", "other")]),
            Err(ErrorCode::NoAuth)
        );
        assert_eq!(check(&acl, 1, &[id("sasl", "super")]), Ok(()));
        let auth = vec![Acl {
            perms: 31,
            id: id("auth", ""),
        }];
        let me = [id("ip", "127.0.0.1"), id("sasl", "jaasuser")];
        assert_eq!(fixup(&auth, &me, true), Ok(acl));
        assert_eq!(fixup(&auth, &me, false), Err(ErrorCode::InvalidAcl));
        for (name, ok) in [
            ("a", true),
            ("a/b/c", true),
            ("a/h@R", true),
            ("a@R", true),
            ("a@b@c", false),
            ("a/b/c@R", false),
        ] {
            assert_eq!(sasl_valid(name), ok, "{name}");
        }
    }
}

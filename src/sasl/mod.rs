//! SASL for clients (op 102), as ZooKeeper 3.8 runs it: the JAAS file's server section
//! ([`jaas`]) gives the DIGEST-MD5 users, and each connection runs its own
//! [`digest_md5::DigestMd5Server`]; or it logs in with Kerberos, and each connection
//! runs [`gssapi::GssapiServer`] over a Kerberos context. Pure data and computation:
//! the file is read by the caller, nonces come from the caller's randomness, and the
//! Kerberos library calls are behind [`gssapi::SecurityContext`].

pub mod digest_md5;
pub mod gssapi;
pub mod jaas;
pub mod quorum;

use std::collections::HashMap;

/// The JAAS section ZooKeeper's server logs in with unless `zookeeper.sasl.serverconfig`
/// names another (ZooKeeperSaslServer.DEFAULT_LOGIN_CONTEXT_NAME).
pub const DEFAULT_SERVER_SECTION: &str = "Server";

/// The option prefix of a DIGEST-MD5 user in the server section
/// (SaslServerCallbackHandler.USER_PREFIX).
const USER_PREFIX: &str = "user_";

/// How a server authenticates SASL clients, from its JAAS server section.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SaslServerConfig {
    /// DIGEST-MD5 users and passwords: every `user_NAME="password"` option of every
    /// entry of the section (SaslServerCallbackHandler reads them from all entries).
    pub credentials: HashMap<String, String>,
    /// The section logs in with Kerberos (a `Krb5LoginModule` entry): ZooKeeper's
    /// server then offers GSSAPI only (SecurityUtils.createSaslServer: the subject has
    /// a Kerberos principal), run by the connection tasks (`net::gss`).
    pub kerberos: Option<Krb5Login>,
    /// How a Kerberos client's identity is named (the configuration's default realm,
    /// `kerberos.removeHostFromPrincipal`, `kerberos.removeRealmFromPrincipal`).
    pub name_rules: gssapi::NameRules,
    /// `zookeeper.SASLAuthenticationProvider.superPassword`: the password of user
    /// `super`, over the file's (SaslServerCallbackHandler.handlePasswordCallback).
    pub super_password: Option<String>,
    /// `zookeeper.superUser` (and `zookeeper.superUser.*`): a SASL identity that also
    /// gets `super:` (ZooKeeperServer.isSaslSuperUser).
    pub super_users: Vec<String>,
}

/// A Krb5LoginModule entry's options keel uses (useKeyTab, storeKey, isInitiator are
/// what an acceptor needs anyway: its key comes from the keytab).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Krb5Login {
    /// `principal`: the server's principal, e.g. `zookeeper/host@REALM` (`None`: any
    /// key of the keytab).
    pub principal: Option<String>,
    /// `keyTab`: the keytab file (`None`: the library's default, `KRB5_KTNAME`).
    pub keytab: Option<String>,
}

impl SaslServerConfig {
    /// The server's SASL set-up from a parsed JAAS file and the name of its server
    /// section; `None` when the file has no such section (ZooKeeper then runs without
    /// a SASL server: configureSaslLogin returns).
    pub fn from_jaas(jaas: &jaas::JaasConfig, section: &str) -> Option<SaslServerConfig> {
        let entries = jaas.section(section)?;
        let mut config = SaslServerConfig::default();
        for entry in entries {
            if entry.module.ends_with("Krb5LoginModule") {
                let option = |key: &str| {
                    entry
                        .options
                        .iter()
                        .rev()
                        .find(|(k, _)| k == key)
                        .map(|(_, v)| v.clone())
                };
                config.kerberos = Some(Krb5Login {
                    principal: option("principal"),
                    keytab: option("keyTab"),
                });
            }
            for (key, value) in &entry.options {
                if let Some(user) = key.strip_prefix(USER_PREFIX) {
                    config.credentials.insert(user.to_string(), value.clone());
                }
            }
        }
        Some(config)
    }

    /// The password DIGEST-MD5 checks `user` against, if the user is known.
    pub fn password(&self, user: &str) -> Option<String> {
        if user == "super" {
            if let Some(p) = &self.super_password {
                return Some(p.clone());
            }
        }
        self.credentials.get(user).cloned()
    }

    /// Whether SASL identity `id` is a super user.
    pub fn is_super_user(&self, id: &str) -> bool {
        !id.is_empty() && self.super_users.iter().any(|s| s == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn krb5_login_module_gives_the_kerberos_login() {
        // The Server section Kazoo's harness writes for its GSSAPI tests.
        let jaas = jaas::JaasConfig::parse(
            "Server {\n  com.sun.security.auth.module.Krb5LoginModule required\n  debug=true\n  \
             isInitiator=false\n  useKeyTab=true\n  keyTab=\"/k/server.keytab\"\n  storeKey=true\n  \
             useTicketCache=false\n  principal=\"zookeeper/127.0.0.1@KAZOOTEST.ORG\";\n};",
        )
        .unwrap();
        let config = SaslServerConfig::from_jaas(&jaas, DEFAULT_SERVER_SECTION).unwrap();
        assert_eq!(
            config.kerberos,
            Some(Krb5Login {
                principal: Some("zookeeper/127.0.0.1@KAZOOTEST.ORG".into()),
                keytab: Some("/k/server.keytab".into()),
            })
        );
        assert!(config.credentials.is_empty());
        let digest = jaas::JaasConfig::parse(
            "Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_a=\"b\"; };",
        )
        .unwrap();
        let config = SaslServerConfig::from_jaas(&digest, DEFAULT_SERVER_SECTION).unwrap();
        assert_eq!(config.kerberos, None);
    }
}

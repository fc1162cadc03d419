//! Kerberos acceptor contexts for SASL GSSAPI, over the system's GSSAPI library
//! (libgssapi). They live here, in the connection tasks, not in the server state
//! machine: accepting a context reads the keytab and writes the replay cache, I/O that
//! src/server must not do. Each connection task owns its exchange
//! ([`crate::sasl::gssapi::GssapiServer`] over a [`Context`]) and hands the core only
//! the outcome of each step (`Request::SaslGssapi`); the exchange's logic is
//! `sasl::gssapi`, sans-I/O.

use crate::sasl::gssapi::SecurityContext;
use crate::sasl::Krb5Login;
use libgssapi::context::{ClientCtx, CtxFlags, SecurityContext as _, ServerCtx};
use libgssapi::credential::{Cred, CredUsage};
use libgssapi::name::Name;
use libgssapi::oid::{OidSet, GSS_MECH_KRB5, GSS_NT_KRB5_PRINCIPAL};

/// The server's Kerberos credential, acquired once at start-up from the JAAS login's
/// keytab and principal; every connection's context accepts with it.
pub struct Acceptor {
    cred: Cred,
}

impl Acceptor {
    /// Points the Kerberos library at the login's keytab (`KRB5_KTNAME`). Call it before
    /// any thread starts: it sets a process environment variable.
    pub fn prepare(login: &Krb5Login) {
        if let Some(keytab) = &login.keytab {
            std::env::set_var("KRB5_KTNAME", format!("FILE:{keytab}"));
        }
    }

    /// Acquires the accepting credential of `login`'s principal (any key of the keytab
    /// without one), as ZooKeeper's Krb5LoginModule login does at start-up.
    ///
    /// Errors: the library's, e.g. a principal the keytab has no key for; ZooKeeper then
    /// fails to start too (ServerCnxnFactory.configureSaslLogin).
    pub fn acquire(login: &Krb5Login) -> Result<Acceptor, String> {
        let name = login
            .principal
            .as_deref()
            .map(|p| Name::new(p.as_bytes(), Some(GSS_NT_KRB5_PRINCIPAL)))
            .transpose()
            .map_err(|e| e.to_string())?;
        let mechs = OidSet::singleton(GSS_MECH_KRB5).map_err(|e| e.to_string())?;
        let cred = Cred::acquire(name.as_ref(), None, CredUsage::Accept, Some(&mechs))
            .map_err(|e| format!("{e}"))?;
        Ok(Acceptor { cred })
    }

    /// The acceptor of a server whose JAAS server section logs in with Kerberos
    /// (`None`: no such section).
    ///
    /// Errors: [`Acceptor::acquire`]'s, as an I/O error that stops the start-up.
    pub fn for_config(
        config: &crate::config::Config,
    ) -> std::io::Result<Option<std::sync::Arc<Acceptor>>> {
        let Some(login) = config
            .client_auth
            .sasl_server
            .as_ref()
            .and_then(|s| s.kerberos.as_ref())
        else {
            return Ok(None);
        };
        let acceptor = Acceptor::acquire(login).map_err(|e| {
            std::io::Error::other(format!(
                "Kerberos login of {:?} failed: {e}",
                login.principal.as_deref().unwrap_or("(keytab's)")
            ))
        })?;
        tracing::info!(principal = ?login.principal, keytab = ?login.keytab, "Kerberos login for SASL GSSAPI");
        Ok(Some(std::sync::Arc::new(acceptor)))
    }

    /// A fresh acceptor context for one connection.
    pub fn context(&self) -> Context {
        Context(ServerCtx::new(Some(self.cred.clone())))
    }
}

/// One connection's acceptor context.
pub struct Context(ServerCtx);

impl SecurityContext for Context {
    fn accept(&mut self, token: &[u8]) -> Result<Option<Vec<u8>>, String> {
        self.0
            .step(token, None)
            .map(|out| out.map(|b| b.to_vec()))
            .map_err(|e| e.to_string())
    }

    fn is_established(&self) -> bool {
        self.0.is_complete()
    }

    fn source_name(&mut self) -> Result<String, String> {
        self.0
            .source_name()
            .map(|n| n.to_string())
            .map_err(|e| e.to_string())
    }

    fn wrap(&mut self, message: &[u8]) -> Result<Vec<u8>, String> {
        self.0
            .wrap(false, message)
            .map(|b| b.to_vec())
            .map_err(|e| e.to_string())
    }

    fn unwrap(&mut self, token: &[u8]) -> Result<Vec<u8>, String> {
        self.0
            .unwrap(token)
            .map(|b| b.to_vec())
            .map_err(|e| e.to_string())
    }
}

/// A learner's Kerberos credential for quorum SASL GSSAPI (the QuorumLearner JAAS
/// section's Krb5LoginModule: its principal, from its keytab), acquired once at
/// start-up; every connection it opens runs a fresh initiator context with it.
pub struct Initiator {
    cred: Cred,
    principal: String,
}

impl Initiator {
    /// Points the Kerberos library at the learner's keytab (`KRB5_CLIENT_KTNAME`, from
    /// which MIT Kerberos gets initial tickets itself) and a private in-memory ticket
    /// cache. Call it before any thread starts: it sets process environment variables.
    pub fn prepare(login: &Krb5Login) {
        if let Some(keytab) = &login.keytab {
            std::env::set_var("KRB5_CLIENT_KTNAME", format!("FILE:{keytab}"));
        }
        std::env::set_var("KRB5CCNAME", "MEMORY:keel-quorum-learner");
    }

    /// Acquires the initiating credential of `login`'s principal.
    ///
    /// Errors: no principal in the section; the library's (no key for it in the
    /// keytab, no KDC).
    pub fn acquire(login: &Krb5Login) -> Result<Initiator, String> {
        let principal = login
            .principal
            .clone()
            .ok_or("the Krb5LoginModule entry names no principal")?;
        let name = Name::new(principal.as_bytes(), Some(GSS_NT_KRB5_PRINCIPAL))
            .map_err(|e| e.to_string())?;
        let mechs = OidSet::singleton(GSS_MECH_KRB5).map_err(|e| e.to_string())?;
        let cred = Cred::acquire(Some(&name), None, CredUsage::Initiate, Some(&mechs))
            .map_err(|e| format!("{e}"))?;
        Ok(Initiator { cred, principal })
    }

    /// The learner's principal, which it asks to act as (Java's client names it).
    pub fn principal(&self) -> &str {
        &self.principal
    }

    /// A fresh initiator context for one connection to `target`, a Kerberos principal
    /// such as `zkquorum/localhost` (no realm: the default one), with mutual
    /// authentication as Java's client asks for it.
    ///
    /// Errors: a malformed target name.
    pub fn context(&self, target: &str) -> Result<InitContext, String> {
        let name =
            Name::new(target.as_bytes(), Some(GSS_NT_KRB5_PRINCIPAL)).map_err(|e| e.to_string())?;
        let flags = CtxFlags::GSS_C_MUTUAL_FLAG | CtxFlags::GSS_C_INTEG_FLAG;
        Ok(InitContext {
            ctx: ClientCtx::new(Some(self.cred.clone()), name, flags, Some(GSS_MECH_KRB5)),
            started: false,
        })
    }
}

/// One connection's initiator context.
pub struct InitContext {
    ctx: ClientCtx,
    started: bool,
}

impl crate::sasl::gssapi::InitiatorContext for InitContext {
    fn init(&mut self, token: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let input = std::mem::replace(&mut self.started, true).then_some(token);
        self.ctx
            .step(input, None)
            .map(|out| out.map(|b| b.to_vec()))
            .map_err(|e| e.to_string())
    }

    fn is_established(&self) -> bool {
        self.ctx.is_complete()
    }

    fn wrap(&mut self, message: &[u8]) -> Result<Vec<u8>, String> {
        self.ctx
            .wrap(false, message)
            .map(|b| b.to_vec())
            .map_err(|e| e.to_string())
    }

    fn unwrap(&mut self, token: &[u8]) -> Result<Vec<u8>, String> {
        self.ctx
            .unwrap(token)
            .map(|b| b.to_vec())
            .map_err(|e| e.to_string())
    }
}

/// What quorum SASL GSSAPI runs with: the learner's credential (QuorumLearner logs in
/// with Kerberos) and the server's (QuorumServer does), each `None` when that section
/// uses DIGEST-MD5.
#[derive(Default)]
pub struct QuorumKerberos {
    /// The learner side's credential.
    pub initiator: Option<Initiator>,
    /// The server side's credential.
    pub acceptor: Option<Acceptor>,
}

impl std::fmt::Debug for QuorumKerberos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuorumKerberos")
            .field("initiator", &self.initiator.as_ref().map(|i| &i.principal))
            .field("acceptor", &self.acceptor.is_some())
            .finish()
    }
}

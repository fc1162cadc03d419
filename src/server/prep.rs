//! Prep: validate a write against the tree (plus the earlier ops of the same multi)
//! and turn it into a deterministic [`TxnOp`] (ZooKeeper's PrepRequestProcessor).
//!
//! The checks run in ZooKeeper's order, so a request that breaks several rules gets the
//! same error code from keel as from ZooKeeper.

use super::txn::TxnOp;
use crate::proto::opcode::{self as op, perm};
use crate::proto::request::{CreateOp, MultiOp};
use crate::proto::{CreateMode, ErrorCode};
use crate::tree::{acl, path, quota, znode, DataTree, Owner};
use jute::{Acl, Id};
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

/// Settings prep needs from zoo.cfg.
#[derive(Debug, Clone)]
pub struct PrepSettings {
    /// `extendedTypesEnabled`: TTL nodes allowed.
    pub extended_types: bool,
    /// `enforceQuota`: hard quota limits refuse writes.
    pub enforce_quota: bool,
    /// `authProvider.N` loads the SASL provider: `sasl` is an ACL scheme.
    pub sasl_acls: bool,
}

/// A znode as prep sees it (ZooKeeper's ChangeRecord).
#[derive(Debug, Clone)]
pub struct NodeView {
    version: i32,
    aversion: i32,
    child_creates: i32,
    num_children: i32,
    owner: i64,
    acl: Arc<Vec<Acl>>,
    data_len: i64,
    /// The data of a quota limits node (`/zookeeper/quota/<path>/zookeeper_limits`),
    /// kept so that a hard quota set or removed by a txn not yet applied is seen;
    /// `None` for every other znode.
    limits: Option<bytes::Bytes>,
}

/// The quota'd path whose limits node `p` is, if it is one (ZooKeeper's Quotas
/// .limitPath read backwards; a quota on the root is never kept, as in the tree).
fn limits_root(p: &str) -> Option<&str> {
    let root = p
        .strip_prefix(quota::QUOTA_ROOT)?
        .strip_suffix(quota::LIMIT_NODE)?
        .strip_suffix('/')?;
    (root.len() > 1 && root.starts_with('/')).then_some(root)
}

impl NodeView {
    /// The raw ephemeralOwner.
    pub fn owner(&self) -> i64 {
        self.owner
    }
}

/// Changes made by txns that are proposed but not yet applied (ZooKeeper's
/// outstandingChanges): path -> (zxid of the latest txn touching it, the znode after
/// it, `None` = deleted). Prep reads through them, so a request is checked against
/// every earlier write, durable or not.
pub type Outstanding = HashMap<String, (i64, Option<NodeView>)>;

/// One prep pass: the tree, then the outstanding changes, then an overlay of changes
/// made by earlier ops of the same request (`None` = deleted). The overlay is merged
/// into the outstanding changes only if the request succeeds, so a failed multi leaves
/// nothing behind.
pub struct Prep<'a> {
    tree: &'a DataTree,
    outstanding: &'a Outstanding,
    settings: &'a PrepSettings,
    identities: &'a [Id],
    session_id: i64,
    overlay: HashMap<String, Option<NodeView>>,
    /// The code an ephemeral create fails with: the session is local (see
    /// [`Prep::refuse_ephemerals`]).
    ephemeral_refusal: Option<ErrorCode>,
}

fn check_version(current: i32, expected: i32) -> Result<i32, ErrorCode> {
    if expected != -1 && expected != current {
        return Err(ErrorCode::BadVersion);
    }
    Ok(current.wrapping_add(1))
}

fn is_special(p: &str) -> bool {
    matches!(
        p,
        "/" | "/zookeeper" | "/zookeeper/quota" | "/zookeeper/config"
    )
}

impl<'a> Prep<'a> {
    /// A prep pass for a request from `session_id` with the connection's `identities`.
    pub fn new(
        tree: &'a DataTree,
        outstanding: &'a Outstanding,
        settings: &'a PrepSettings,
        identities: &'a [Id],
        session_id: i64,
    ) -> Prep<'a> {
        Prep {
            tree,
            outstanding,
            settings,
            identities,
            session_id,
            overlay: HashMap::default(),
            ephemeral_refusal: None,
        }
    }

    /// Makes every ephemeral create of this pass fail with `code`, where ZooKeeper's
    /// `validateCreateRequest` refuses a session that is not global: after the mode and
    /// TTL checks, before the path's. The leader's own local session gets
    /// EPHEMERALONLOCALSESSION (the exception its LeaderRequestProcessor attached);
    /// a learner's local session SESSIONEXPIRED (`checkGlobalSession`). In a multi
    /// that is the failing op's code, the others RolledBack/RuntimeInconsistency.
    /// EPHEMERALONLOCALSESSION applies to create and create2 only; other create
    /// opcodes get SESSIONEXPIRED (see [`Prep::create`]).
    pub fn refuse_ephemerals(&mut self, code: ErrorCode) {
        self.ephemeral_refusal = Some(code);
    }

    /// The changes this pass made, to be recorded as outstanding under its txn's zxid.
    pub fn into_changes(self) -> HashMap<String, Option<NodeView>> {
        self.overlay
    }

    fn view(&self, p: &str) -> Option<NodeView> {
        if let Some(v) = self.overlay.get(p) {
            return v.clone();
        }
        self.proposed_view(p)
    }

    /// The znode at `p` after every proposed txn, without this request's own earlier
    /// ops.
    fn proposed_view(&self, p: &str) -> Option<NodeView> {
        if let Some((_, v)) = self.outstanding.get(p) {
            return v.clone();
        }
        self.tree.get(p).map(|n| {
            // One decode of the znode's header (see `tree::Znode`) for all fields.
            let h = n.header();
            NodeView {
                version: h.meta.version,
                aversion: h.meta.aversion,
                child_creates: h.meta.child_creates,
                num_children: h.num_children,
                owner: h.meta.ephemeral_owner,
                acl: self.tree.acl_by_id(h.acl_id).clone(),
                data_len: h.data_len as i64,
                limits: limits_root(p).map(|_| bytes::Bytes::copy_from_slice(n.data_bytes())),
            }
        })
    }

    fn node(&self, p: &str) -> Result<NodeView, ErrorCode> {
        self.view(p).ok_or(ErrorCode::NoNode)
    }

    fn check_acl(&self, node: &NodeView, perm: i32) -> Result<(), ErrorCode> {
        acl::check(&node.acl, perm, self.identities)
    }

    fn validate(p: &str) -> Result<(), ErrorCode> {
        if path::is_valid(p, false) {
            Ok(())
        } else {
            Err(ErrorCode::BadArguments)
        }
    }

    /// Hard quota check for a change of `count_delta` znodes and `bytes_delta` bytes
    /// under `p` (only with `enforceQuota`), as ZooKeeperServer.checkQuota: the deepest
    /// quota'd path at or above `p`, its countHardLimit and byteHardLimit, its usage.
    ///
    /// ZooKeeper reads limits and usage from its applied DataTree, so a write prepped
    /// before an earlier one applies is checked without it: through a follower, a
    /// client's next create can reach the leader before the leader applied the
    /// previous one (the follower applied it and answered first). keel reads both
    /// after every proposed txn (the outstanding changes), so a client that waits for
    /// each answer sees ZooKeeper's sequential outcome whatever the timing. Earlier ops
    /// of the same multi are not counted, as in ZooKeeper (each op is checked against
    /// the tree as it was before the multi).
    fn check_quota(&self, p: &str, count_delta: i64, bytes_delta: i64) -> Result<(), ErrorCode> {
        if !self.settings.enforce_quota || (count_delta == 0 && bytes_delta == 0) {
            return Ok(());
        }
        let Some((root, limits)) = self.proposed_limits_for(p) else {
            return Ok(());
        };
        let count_hard = limits.extra("countHardLimit").filter(|_| count_delta != 0);
        let bytes_hard = limits.extra("byteHardLimit").filter(|_| bytes_delta != 0);
        if count_hard.is_none() && bytes_hard.is_none() {
            return Ok(());
        }
        let Some((count, bytes)) = self.proposed_usage(&root) else {
            return Ok(());
        };
        if count_hard.is_some_and(|hard| count + count_delta > hard)
            || bytes_hard.is_some_and(|hard| bytes + bytes_delta > hard)
        {
            return Err(ErrorCode::QuotaExceeded);
        }
        Ok(())
    }

    /// The deepest quota'd path at or above `p` and its limits, after every proposed
    /// txn: the tree's quota'd paths and those whose limits node a proposed txn
    /// created, less those whose limits node a proposed txn deleted.
    fn proposed_limits_for(&self, p: &str) -> Option<(String, quota::StatsTrack)> {
        let mut roots: Vec<&str> = self
            .tree
            .quota_roots()
            .chain(self.outstanding.keys().filter_map(|k| limits_root(k)))
            .filter(|root| path::is_under(p, root))
            .collect();
        roots.sort_unstable_by_key(|root| std::cmp::Reverse(root.len()));
        roots.dedup();
        roots.into_iter().find_map(|root| {
            let view = self.proposed_view(&quota::node_path(root, quota::LIMIT_NODE))?;
            let data = view.limits.unwrap_or_default();
            Some((root.to_string(), quota::StatsTrack::parse(&data)))
        })
    }

    /// (znode count, data bytes) under the quota'd `root` after every proposed txn:
    /// the usage in its stats node (or, when only a proposed txn creates that node,
    /// the subtree's usage, as the tree counts it on creation) plus what the proposed
    /// changes under `root` add or take away. `None` without a stats node.
    fn proposed_usage(&self, root: &str) -> Option<(i64, i64)> {
        let stat_path = quota::node_path(root, quota::STAT_NODE);
        let (mut count, mut bytes) = match self.tree.get(&stat_path) {
            Some(n) => {
                let t = quota::StatsTrack::parse(n.data_bytes());
                (t.count, t.bytes)
            }
            None => {
                self.proposed_view(&stat_path)?;
                self.tree.usage_of(root)
            }
        };
        for (k, (_, view)) in self.outstanding {
            if !path::is_under(k, root) {
                continue;
            }
            let applied = self.tree.get(k).map(|n| n.data_len() as i64);
            let proposed = view.as_ref().map(|v| v.data_len);
            count += i64::from(proposed.is_some()) - i64::from(applied.is_some());
            bytes += proposed.unwrap_or(0) - applied.unwrap_or(0);
        }
        Some((count, bytes))
    }

    /// Preps one create, in ZooKeeper's order of checks (PrepRequestProcessor
    /// .pRequest2TxnCreate).
    ///
    /// The created znode's type comes from the opcode, as ZooKeeper's txns carry it:
    /// createContainer makes a container and createTTL a TTL node whatever the flags;
    /// create and create2 make an ephemeral for an ephemeral mode and a persistent
    /// znode otherwise (the CONTAINER flag included). Inside a multi the opcode was
    /// derived from the flags ([`CreateOp`]). Prep's own view of the new znode takes
    /// its owner from the flags, as ZooKeeper's ChangeRecord does, so later requests
    /// prepped before this one applies see that owner.
    pub fn create(&mut self, c: &CreateOp) -> Result<TxnOp, ErrorCode> {
        let mode = CreateMode::from_flags(c.flags).ok_or(ErrorCode::BadArguments)?;
        if mode.is_ttl() && !self.settings.extended_types {
            return Err(ErrorCode::Unimplemented);
        }
        // Records without a TTL count as -1, as ZooKeeper's prep sets it.
        let ttl_ms = c.ttl_ms.unwrap_or(-1);
        if mode.is_ttl() {
            if ttl_ms <= 0 || ttl_ms > znode::MAX_TTL_MS {
                return Err(ErrorCode::BadArguments);
            }
        } else if ttl_ms >= 0 {
            return Err(ErrorCode::BadArguments);
        }
        if let (true, Some(code)) = (mode.is_ephemeral(), self.ephemeral_refusal) {
            // ZooKeeper's checkUpgradeSession (the EPHEMERALONLOCALSESSION) looks at
            // create and create2 only; an ephemeral-flagged createContainer or createTTL
            // of a local session reaches checkGlobalSession: SESSIONEXPIRED.
            if code == ErrorCode::EphemeralOnLocalSession
                && !matches!(c.opcode, op::CREATE | op::CREATE2)
            {
                return Err(ErrorCode::SessionExpired);
            }
            return Err(code);
        }
        if c.opcode == op::CREATE_TTL && !mode.is_ttl() {
            // A createTTL with a negative TTL and a mode without one passes
            // ZooKeeper's checks, and then its DataTree cannot apply the txn (it throws
            // and the server halts). keel refuses it as a TTL out of range.
            return Err(ErrorCode::BadArguments);
        }
        if c.path.rfind('/').is_none() || c.path.contains('\0') {
            return Err(ErrorCode::BadArguments);
        }
        let (parent_path, _) = path::split(&c.path);
        let acl = acl::fixup(&c.acl, self.identities, self.settings.sasl_acls)?;
        let parent = self.node(parent_path)?;
        self.check_acl(&parent, perm::CREATE)?;
        let final_path = if mode.is_sequential() {
            format!("{}{:010}", c.path, parent.child_creates)
        } else {
            c.path.clone()
        };
        Self::validate(&final_path)?;
        if self.view(&final_path).is_some() {
            return Err(ErrorCode::NodeExists);
        }
        if matches!(Owner::from_raw(parent.owner), Owner::Session(_)) {
            return Err(ErrorCode::NoChildrenForEphemerals);
        }
        let data_len = c.data.as_ref().map_or(0, bytes::Bytes::len) as i64;
        self.check_quota(&final_path, 1, data_len)?;
        let ephemeral = if mode.is_ephemeral() {
            self.session_id
        } else {
            0
        };
        let owner = match c.opcode {
            op::CREATE_CONTAINER => znode::CONTAINER_OWNER,
            op::CREATE_TTL => Owner::Ttl(ttl_ms).to_raw(),
            _ => ephemeral,
        };
        let view_owner = if mode.is_container() {
            znode::CONTAINER_OWNER
        } else if mode.is_ttl() {
            Owner::Ttl(ttl_ms).to_raw()
        } else {
            ephemeral
        };
        let parent_creates = parent.child_creates.wrapping_add(1);
        let mut new_parent = parent;
        new_parent.child_creates = parent_creates;
        new_parent.num_children += 1;
        self.overlay
            .insert(parent_path.to_string(), Some(new_parent));
        self.overlay.insert(
            final_path.clone(),
            Some(NodeView {
                version: 0,
                aversion: 0,
                child_creates: 0,
                num_children: 0,
                owner: view_owner,
                acl: Arc::new(acl.clone()),
                data_len,
                limits: limits_root(&final_path).map(|_| c.data.clone().unwrap_or_default()),
            }),
        );
        Ok(TxnOp::Create {
            opcode: c.opcode,
            path: final_path,
            data: c.data.clone(),
            acl,
            owner,
            parent_creates,
        })
    }

    /// Preps a closeSession that deletes `ephemerals` (the session's, as they will be
    /// once every proposed txn applies): records each as deleted and its parent with
    /// one child fewer, without ACL or version checks, as ZooKeeper's
    /// PrepRequestProcessor adds a change record per ephemeral. Requests prepped after
    /// the close then see them gone before the close applies.
    pub fn close_session(&mut self, ephemerals: Vec<String>) -> TxnOp {
        for p in &ephemerals {
            let (parent_path, _) = path::split(p);
            if let Some(mut parent) = self.view(parent_path) {
                parent.num_children -= 1;
                self.overlay.insert(parent_path.to_string(), Some(parent));
            }
            self.overlay.insert(p.clone(), None);
        }
        TxnOp::CloseSession { ephemerals }
    }

    /// Preps one delete.
    pub fn delete(&mut self, p: &str, version: i32) -> Result<TxnOp, ErrorCode> {
        if p.rfind('/').is_none() || p.contains('\0') || is_special(p) {
            return Err(ErrorCode::BadArguments);
        }
        let (parent_path, _) = path::split(p);
        let parent = self.node(parent_path)?;
        self.check_acl(&parent, perm::DELETE)?;
        let node = self.node(p)?;
        check_version(node.version, version)?;
        if node.num_children > 0 {
            return Err(ErrorCode::NotEmpty);
        }
        let mut new_parent = parent;
        new_parent.num_children -= 1;
        self.overlay
            .insert(parent_path.to_string(), Some(new_parent));
        self.overlay.insert(p.to_string(), None);
        Ok(TxnOp::Delete {
            path: p.to_string(),
        })
    }

    /// Preps a deleteContainer (ZooKeeper's checks: no ACL check, the znode must be
    /// childless and not a session's ephemeral). The container reaper sends it for
    /// empty containers and expired TTL nodes; a client's always names a path with a
    /// NUL byte ([`crate::proto::Request::DeleteContainer`]) and gets BADARGUMENTS.
    pub fn delete_container(&mut self, p: &str) -> Result<TxnOp, ErrorCode> {
        if p.rfind('/').is_none() || p.contains('\0') || is_special(p) {
            return Err(ErrorCode::BadArguments);
        }
        let node = self.node(p)?;
        if node.num_children > 0 {
            return Err(ErrorCode::NotEmpty);
        }
        if matches!(Owner::from_raw(node.owner), Owner::Session(_)) {
            return Err(ErrorCode::BadVersion);
        }
        let (parent_path, _) = path::split(p);
        let mut parent = self.node(parent_path)?;
        parent.num_children -= 1;
        self.overlay.insert(parent_path.to_string(), Some(parent));
        self.overlay.insert(p.to_string(), None);
        Ok(TxnOp::Delete {
            path: p.to_string(),
        })
    }

    /// Preps one setData.
    pub fn set_data(
        &mut self,
        p: &str,
        data: &Option<bytes::Bytes>,
        version: i32,
    ) -> Result<TxnOp, ErrorCode> {
        Self::validate(p)?;
        let node = self.node(p)?;
        self.check_acl(&node, perm::WRITE)?;
        let new_len = data.as_ref().map_or(0, bytes::Bytes::len) as i64;
        self.check_quota(p, 0, new_len - node.data_len)?;
        let new_version = check_version(node.version, version)?;
        let mut updated = node;
        updated.version = new_version;
        updated.data_len = new_len;
        if limits_root(p).is_some() {
            updated.limits = Some(data.clone().unwrap_or_default());
        }
        self.overlay.insert(p.to_string(), Some(updated));
        Ok(TxnOp::SetData {
            path: p.to_string(),
            data: data.clone(),
            version: new_version,
        })
    }

    /// Preps the txn of a reconfig whose new configuration text is `data`, as
    /// ZooKeeper's prep ends one: WRITE on `/zookeeper/config` (whose ACL lets world
    /// only READ, ZOOKEEPER-2014, so the super user passes), then a setData of it at
    /// dataVersion -1 (PrepRequestProcessor, case reconfig).
    ///
    /// Errors: NOAUTH; NONODE if the config node is missing (never, in a tree made by
    /// [`DataTree::new`]).
    pub fn reconfig(&mut self, data: bytes::Bytes) -> Result<TxnOp, ErrorCode> {
        let p = super::reconfig::CONFIG_NODE;
        let node = self.node(p)?;
        self.check_acl(&node, perm::WRITE)?;
        let mut updated = node;
        updated.version = -1;
        updated.data_len = data.len() as i64;
        self.overlay.insert(p.to_string(), Some(updated));
        Ok(TxnOp::Reconfig { data })
    }

    /// Preps one setACL.
    pub fn set_acl(&mut self, p: &str, acl_in: &[Acl], version: i32) -> Result<TxnOp, ErrorCode> {
        Self::validate(p)?;
        let acl = acl::fixup(acl_in, self.identities, self.settings.sasl_acls)?;
        let node = self.node(p)?;
        self.check_acl(&node, perm::ADMIN)?;
        let aversion = check_version(node.aversion, version)?;
        let mut updated = node;
        updated.aversion = aversion;
        updated.acl = Arc::new(acl.clone());
        self.overlay.insert(p.to_string(), Some(updated));
        Ok(TxnOp::SetAcl {
            path: p.to_string(),
            acl,
            aversion,
        })
    }

    /// Preps one version check.
    pub fn check(&mut self, p: &str, version: i32) -> Result<TxnOp, ErrorCode> {
        Self::validate(p)?;
        let node = self.node(p)?;
        self.check_acl(&node, perm::READ)?;
        let version = check_version(node.version, version)?;
        Ok(TxnOp::Check {
            path: p.to_string(),
            version,
        })
    }

    /// Preps a multi: all ops pass and become one `Multi`, or the first failure makes a
    /// `MultiError` with ZooKeeper's per-op codes.
    pub fn multi(&mut self, ops: &[MultiOp]) -> TxnOp {
        let mut out = Vec::with_capacity(ops.len());
        for (i, o) in ops.iter().enumerate() {
            let r = match o {
                // A TTL mode in a create, create2 or createContainer record: ZooKeeper
                // preps it as a createTTL and fails to read the TTL the record lacks
                // (a ClassCastException), which answers the whole multi
                // MARSHALLINGERROR. It is reached only if no earlier op failed.
                MultiOp::Create(c) if c.opcode == op::CREATE_TTL && c.ttl_ms.is_none() => {
                    self.overlay.clear();
                    return TxnOp::Error(ErrorCode::MarshallingError);
                }
                MultiOp::Create(c) => self.create(c),
                MultiOp::Delete(d) => self.delete(&d.path, d.version),
                MultiOp::SetData(s) => self.set_data(&s.path, &s.data, s.version),
                MultiOp::Check(c) => self.check(&c.path, c.version),
                MultiOp::GetChildren(_) | MultiOp::GetData(_) => Err(ErrorCode::BadArguments),
            };
            match r {
                Ok(t) => out.push(t),
                Err(code) => {
                    self.overlay.clear();
                    let mut codes = vec![ErrorCode::Ok; i];
                    codes.push(code);
                    codes.resize(ops.len(), ErrorCode::RuntimeInconsistency);
                    return TxnOp::MultiError(codes);
                }
            }
        }
        TxnOp::Multi(out)
    }
}

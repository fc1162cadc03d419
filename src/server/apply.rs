//! Apply: a committed txn mutates the tree and fires watches (ZooKeeper's
//! DataTree.processTxn and FinalRequestProcessor), then the result is encoded as the
//! reply the client expects for its opcode.

use super::reconfig::CONFIG_NODE;
use super::reply;
use super::txn::{Txn, TxnOp};
use super::Server;
use crate::proto::opcode::{self as op, event, perm, state};
use crate::proto::ErrorCode;
use crate::tree::{acl, path, Owner};
use crate::watch::{ConnId, Table};
use bytes::Bytes;
use jute::{
    Acl, Create2Response, CreateResponse, ErrorResponse, GetDataResponse, MultiHeader, Record,
    Stat, StatResponse,
};
use std::collections::BTreeSet;
use std::sync::Arc;

/// What applying one txn (or one op of a multi) produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    Session,
    Create {
        opcode: i32,
        path: String,
        stat: Stat,
    },
    Delete,
    SetData(Stat),
    /// A reconfig's reply is a GetDataResponse (FinalRequestProcessor): the new config
    /// text and the Stat of `/zookeeper/config` after the txn.
    Reconfig {
        data: Bytes,
        stat: Stat,
    },
    SetAcl(Stat),
    Check,
    Multi(Vec<OpResult>),
    MultiError(Vec<ErrorCode>),
    Error(ErrorCode),
}

impl Server {
    /// Applies a committed txn, then logs the tree digest after it
    /// ([`crate::tree::DataTree::txn_applied`]).
    pub(crate) fn apply(&mut self, txn: &Txn) -> OpResult {
        let r = self.apply_txn(txn);
        self.tree.txn_applied(txn.zxid);
        r
    }

    /// Writes an ensemble member's membership text ([`crate::config::Config::membership`])
    /// into `/zookeeper/config` outside any txn, as ZooKeeper's
    /// `ZKDatabase.initConfigInZKDatabase` does at start and after each sync with a
    /// leader: dataVersion -1, mzxid the configuration's version (0 for a static
    /// configuration), mtime `now_ms`, and NodeDataChanged to its data watchers. The
    /// tree digest does not count `/zookeeper/` nodes, so it does not move.
    pub fn init_config_node(&mut self, membership: &[u8], now_ms: i64) {
        // mzxid: the config's version, the hex of the text's last `version=` line.
        let version = std::str::from_utf8(membership)
            .ok()
            .and_then(|t| t.lines().last())
            .and_then(|l| l.strip_prefix("version="))
            .and_then(|hex| i64::from_str_radix(hex, 16).ok())
            .unwrap_or(0);
        let _ = self.set_config_node(membership, version, now_ms);
    }

    /// Sets `/zookeeper/config`'s data (dataVersion -1, mzxid `zxid`) and fires
    /// NodeDataChanged to its data watchers.
    fn set_config_node(&mut self, data: &[u8], zxid: i64, time_ms: i64) -> Result<Stat, ErrorCode> {
        let stat = self
            .tree
            .set_data(CONFIG_NODE, Some(data), -1, zxid, time_ms)?;
        self.fire(
            Table::Data,
            CONFIG_NODE,
            event::NODE_DATA_CHANGED,
            &BTreeSet::new(),
            |s| s.acl_of(CONFIG_NODE),
        );
        Ok(stat)
    }

    fn apply_txn(&mut self, txn: &Txn) -> OpResult {
        match &txn.op {
            TxnOp::CreateSession { timeout_ms, passwd } => {
                // Armed from now, not from the txn's time: a leader applies txns of
                // earlier epochs when it starts leading, and ZooKeeper's commitSession
                // arms a session at the current time.
                self.sessions
                    .add(txn.session_id, *timeout_ms, *passwd, self.now_ms);
                OpResult::Session
            }
            TxnOp::CloseSession { ephemerals } => {
                for p in ephemerals {
                    if self.lenient(txn.zxid) {
                        self.tree.delete_if_present(p, txn.zxid);
                    } else {
                        let _ = self.delete_and_fire(p, txn.zxid);
                    }
                }
                self.sessions.remove(txn.session_id);
                OpResult::Session
            }
            TxnOp::Multi(ops) => OpResult::Multi(
                ops.iter()
                    .map(|o| self.apply_op(o, txn.zxid, txn.time_ms))
                    .collect(),
            ),
            TxnOp::MultiError(codes) => OpResult::MultiError(codes.clone()),
            other => self.apply_op(other, txn.zxid, txn.time_ms),
        }
    }

    /// Sets the zxid up to which committed txns apply leniently (see `lenient_upto`):
    /// an ensemble member's last logged zxid at start-up.
    pub fn set_lenient_upto(&mut self, zxid: i64) {
        self.lenient_upto = zxid;
    }

    /// Whether the txn `zxid` applies leniently: during recovery, or up to
    /// `lenient_upto`.
    fn lenient(&self, zxid: i64) -> bool {
        self.replaying || zxid <= self.lenient_upto
    }

    fn apply_op(&mut self, o: &TxnOp, zxid: i64, time_ms: i64) -> OpResult {
        if self.lenient(zxid) {
            self.replay_op(o, zxid, time_ms);
            return OpResult::Check;
        }
        let r = match o {
            TxnOp::Create { path, owner, .. } if !self.owner_alive(*owner) => {
                tracing::error!(
                    zxid,
                    path,
                    session = format!("0x{owner:x}"),
                    "create of an ephemeral whose session is closed refused"
                );
                Err(ErrorCode::SessionExpired)
            }
            TxnOp::Create {
                opcode,
                path,
                data,
                acl,
                owner,
                parent_creates,
            } => self
                .tree
                .create(
                    path,
                    data.as_deref(),
                    &Arc::new(acl.clone()),
                    *owner,
                    *parent_creates,
                    zxid,
                    time_ms,
                )
                .map(|stat| {
                    self.fire_created(path);
                    OpResult::Create {
                        opcode: *opcode,
                        path: path.clone(),
                        stat,
                    }
                }),
            TxnOp::Delete { path } => self.delete_and_fire(path, zxid).map(|()| OpResult::Delete),
            TxnOp::SetData {
                path,
                data,
                version,
            } => self
                .tree
                .set_data(path, data.as_deref(), *version, zxid, time_ms)
                .map(|stat| {
                    self.fire(
                        Table::Data,
                        path,
                        event::NODE_DATA_CHANGED,
                        &BTreeSet::new(),
                        |s| s.acl_of(path),
                    );
                    OpResult::SetData(stat)
                }),
            // DataTree.processTxn applies a reconfig as a setData of the config node.
            TxnOp::Reconfig { data } => {
                self.set_config_node(data, zxid, time_ms)
                    .map(|stat| OpResult::Reconfig {
                        data: data.clone(),
                        stat,
                    })
            }
            TxnOp::SetAcl {
                path,
                acl,
                aversion,
            } => self
                .tree
                .set_acl(path, &Arc::new(acl.clone()), *aversion)
                .map(OpResult::SetAcl),
            TxnOp::Check { .. } => Ok(OpResult::Check),
            TxnOp::Error(code) => Ok(OpResult::Error(*code)),
            TxnOp::CreateSession { .. }
            | TxnOp::CloseSession { .. }
            | TxnOp::Multi(_)
            | TxnOp::MultiError(_) => Err(ErrorCode::RuntimeInconsistency),
        };
        r.unwrap_or_else(|code| {
            tracing::error!(
                zxid,
                ?code,
                "txn did not apply: the tree and the log disagree"
            );
            OpResult::Error(code)
        })
    }

    /// Whether a znode with this raw ephemeralOwner may be created: anything but an
    /// ephemeral of a session that is not in the session table. Prep never proposes
    /// such a create (a closing session's requests are dropped, and the closeSession
    /// deletes the ephemerals proposed before it); this guards the tree against a log
    /// that holds one anyway, as keel before issue 14 could write, so that no ephemeral
    /// outlives its session (ZooKeeper's PrepRequestProcessor refuses a create of a
    /// closing session with SESSIONEXPIRED).
    fn owner_alive(&self, owner: i64) -> bool {
        match Owner::from_raw(owner) {
            Owner::Session(id) => self.sessions.get(id).is_some(),
            Owner::None | Owner::Container | Owner::Ttl(_) => true,
        }
    }

    /// Applies one op during recovery, leniently (see `recovery`); no watches exist yet.
    fn replay_op(&mut self, o: &TxnOp, zxid: i64, time_ms: i64) {
        match o {
            TxnOp::Create { path, owner, .. } if !self.owner_alive(*owner) => {
                tracing::warn!(
                    zxid,
                    path,
                    session = format!("0x{owner:x}"),
                    "replayed create of an ephemeral whose session was closed skipped"
                );
            }
            TxnOp::Create {
                path,
                data,
                acl,
                owner,
                parent_creates,
                ..
            } => {
                let acl = Arc::new(acl.clone());
                let r = self.tree.create_or_replace(
                    path,
                    data.as_deref(),
                    &acl,
                    *owner,
                    *parent_creates,
                    zxid,
                    time_ms,
                );
                if let Err(code) = r {
                    tracing::warn!(zxid, path, ?code, "replayed create did not apply");
                }
            }
            TxnOp::Delete { path } => self.tree.delete_if_present(path, zxid),
            TxnOp::SetData {
                path,
                data,
                version,
            } => {
                let _ = self
                    .tree
                    .set_data(path, data.as_deref(), *version, zxid, time_ms);
            }
            TxnOp::Reconfig { data } => {
                let _ = self
                    .tree
                    .set_data(CONFIG_NODE, Some(&data[..]), -1, zxid, time_ms);
            }
            TxnOp::SetAcl {
                path,
                acl,
                aversion,
            } => {
                let _ = self.tree.set_acl(path, &Arc::new(acl.clone()), *aversion);
            }
            TxnOp::Multi(ops) => {
                for op in ops {
                    self.replay_op(op, zxid, time_ms);
                }
            }
            _ => {}
        }
    }

    /// The ACL of the znode at `p`, if it exists.
    fn acl_of(&self, p: &str) -> Option<Arc<Vec<Acl>>> {
        self.tree.get(p).map(|n| self.tree.acl(n).clone())
    }

    /// Fires `event_type` on `p` in table `t` and sends the event to each watcher
    /// whose connection may READ under the ACL of the changed znode, which `acl` gives
    /// (asked only when a watch fired). This is CVE-2024-23944's fix: ZooKeeper's
    /// ServerCnxn.process checks READ before it delivers any event; no ACL (`None`)
    /// delivers, as ZooKeeper does for a null one. Returns every watcher the trigger
    /// consumed, delivered or not: ZooKeeper suppresses all of them in the second
    /// table of a delete.
    fn fire(
        &mut self,
        t: Table,
        p: &str,
        event_type: i32,
        suppress: &BTreeSet<ConnId>,
        acl: impl FnOnce(&Self) -> Option<Arc<Vec<Acl>>>,
    ) -> BTreeSet<ConnId> {
        let conns = self.watches.trigger(t, p, event_type, suppress);
        if conns.is_empty() {
            return conns;
        }
        let acl = acl(self);
        let packet = reply::notification(event_type, state::SYNC_CONNECTED, p);
        for c in &conns {
            let may_read = match (&acl, self.conns.get(c)) {
                (Some(acl), Some(conn)) => acl::check(acl, perm::READ, &conn.identities).is_ok(),
                _ => true,
            };
            if may_read {
                self.send(*c, packet.clone());
            } else {
                tracing::trace!(
                    conn = c,
                    path = p,
                    event_type,
                    "watch event filtered by ACL"
                );
            }
        }
        conns
    }

    /// NodeCreated on the new znode (checked against its own ACL) and
    /// NodeChildrenChanged on its parent (checked against the parent's ACL), as
    /// ZooKeeper's DataTree.createNode triggers them.
    fn fire_created(&mut self, p: &str) {
        self.fire(Table::Data, p, event::NODE_CREATED, &BTreeSet::new(), |s| {
            s.acl_of(p)
        });
        self.fire_parent_changed(p);
    }

    /// NodeChildrenChanged on the parent of `p`, checked against the parent's ACL.
    fn fire_parent_changed(&mut self, p: &str) {
        let parent = path::split(p).0;
        self.fire(
            Table::Child,
            parent,
            event::NODE_CHILDREN_CHANGED,
            &BTreeSet::new(),
            |s| s.acl_of(parent),
        );
    }

    /// Deletes `p` and fires NodeDeleted on it (checked against the ACL it had) and
    /// NodeChildrenChanged on its parent (checked against the parent's ACL), as
    /// ZooKeeper's DataTree.deleteNode does.
    ///
    /// Errors: as [`crate::tree::DataTree::delete`]; nothing fires then.
    fn delete_and_fire(&mut self, p: &str, zxid: i64) -> Result<(), ErrorCode> {
        // Taken before the znode goes; only needed if someone watches something.
        let acl = if self.watches.is_empty() {
            None
        } else {
            self.acl_of(p)
        };
        self.tree.delete(p, zxid)?;
        let none = BTreeSet::new();
        let told = self.fire(Table::Data, p, event::NODE_DELETED, &none, |_| acl.clone());
        self.fire(Table::Child, p, event::NODE_DELETED, &told, |_| acl);
        self.fire_parent_changed(p);
        Ok(())
    }
}

fn encode_op(buf: &mut bytes::BytesMut, r: &OpResult) {
    match r {
        OpResult::Create { opcode, path, stat } => {
            if *opcode == op::CREATE {
                CreateResponse { path: path.clone() }.encode(buf)
            } else {
                Create2Response {
                    path: path.clone(),
                    stat: stat.clone(),
                }
                .encode(buf)
            }
        }
        OpResult::SetData(stat) | OpResult::SetAcl(stat) => {
            StatResponse { stat: stat.clone() }.encode(buf)
        }
        OpResult::Reconfig { data, stat } => GetDataResponse {
            data: Some(data.clone()),
            stat: stat.clone(),
        }
        .encode(buf),
        _ => {}
    }
}

/// A multi result's header type, as ZooKeeper's MultiResponse writes it: a create
/// result is create (1, the path only) or create2 (15, path and Stat); ZooKeeper has
/// no createContainer or createTTL result, those are create2.
fn multi_type(r: &OpResult) -> i32 {
    match r {
        OpResult::Create { opcode, .. } if *opcode == op::CREATE => op::CREATE,
        OpResult::Create { .. } => op::CREATE2,
        OpResult::Delete => op::DELETE,
        OpResult::SetData(_) => op::SET_DATA,
        OpResult::SetAcl(_) => op::SET_ACL,
        OpResult::Check => op::CHECK,
        _ => op::ERROR,
    }
}

/// Encodes the reply to a write whose txn had `zxid`; the result knows which record
/// its opcode expects.
pub fn encode_result(xid: i32, zxid: i64, r: &OpResult) -> Bytes {
    match r {
        OpResult::Error(code) => reply::header_only(xid, zxid, code.code()),
        OpResult::Multi(results) => reply::frame(|buf| {
            jute::ReplyHeader { xid, zxid, err: 0 }.encode(buf);
            for res in results {
                MultiHeader {
                    op_type: multi_type(res),
                    done: false,
                    err: 0,
                }
                .encode(buf);
                encode_op(buf, res);
            }
            end_multi(buf);
        }),
        OpResult::MultiError(codes) => reply::frame(|buf| {
            jute::ReplyHeader { xid, zxid, err: 0 }.encode(buf);
            for code in codes {
                MultiHeader {
                    op_type: op::ERROR,
                    done: false,
                    err: code.code(),
                }
                .encode(buf);
                ErrorResponse { err: code.code() }.encode(buf);
            }
            end_multi(buf);
        }),
        other => reply::frame(|buf| {
            jute::ReplyHeader { xid, zxid, err: 0 }.encode(buf);
            encode_op(buf, other);
        }),
    }
}

/// Writes the header that ends a multi reply.
pub fn end_multi(buf: &mut bytes::BytesMut) {
    MultiHeader {
        op_type: -1,
        done: true,
        err: -1,
    }
    .encode(buf);
}

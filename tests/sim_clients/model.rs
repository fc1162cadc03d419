//! The reference object the client histories are checked against: one znode as
//! ZooKeeper's data model has it (absent, or a value with its data version), as a
//! stateright [`SequentialSpec`].

use stateright::semantics::SequentialSpec;

/// One znode: `None` while it does not exist, else its data and data version.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Znode(pub Option<(u32, i32)>);

/// A client operation on the znode.
#[derive(Clone, Debug, PartialEq)]
pub enum ZnodeOp {
    /// create with this data (fails with NODEEXISTS if the znode exists).
    Create(u32),
    /// setData with this data, any version (fails with NONODE if absent).
    Set(u32),
    /// getData (from a sync'd or a plain read: see the testers in check.rs).
    Get,
}

/// What the operation returned, as the client saw it.
#[derive(Clone, Debug, PartialEq)]
pub enum ZnodeRet {
    /// create succeeded.
    Created,
    /// create failed: NODEEXISTS.
    NodeExists,
    /// setData succeeded; the new data version.
    SetOk(i32),
    /// setData or getData failed: NONODE.
    NoNode,
    /// getData succeeded: the data and its data version.
    Data(u32, i32),
}

impl SequentialSpec for Znode {
    type Op = ZnodeOp;
    type Ret = ZnodeRet;

    fn invoke(&mut self, op: &ZnodeOp) -> ZnodeRet {
        match (op, self.0) {
            (ZnodeOp::Create(v), None) => {
                self.0 = Some((*v, 0));
                ZnodeRet::Created
            }
            (ZnodeOp::Create(_), Some(_)) => ZnodeRet::NodeExists,
            (ZnodeOp::Set(_), None) | (ZnodeOp::Get, None) => ZnodeRet::NoNode,
            (ZnodeOp::Set(v), Some((_, version))) => {
                self.0 = Some((*v, version + 1));
                ZnodeRet::SetOk(version + 1)
            }
            (ZnodeOp::Get, Some((v, version))) => ZnodeRet::Data(v, version),
        }
    }
}

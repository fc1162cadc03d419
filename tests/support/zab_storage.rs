//! Executing the Zab core's storage actions on a [`ZabStorage`], for the tests that
//! drive members sans-I/O (tests/replica.rs, tests/sim_clients.rs).

use keel::zab::storage::ZabStorage;
use keel::zab::Action;

/// Executes `a` on `storage` if it is a storage action (AppendTxns,
/// PersistAcceptedEpoch, PersistCurrentEpoch, TruncateLog, InstallSnapshot); any
/// other action is handed back.
pub fn execute<S: ZabStorage>(storage: &mut S, a: Action) -> Result<(), Action> {
    match a {
        Action::AppendTxns { txns, .. } => storage.append(&txns),
        Action::PersistAcceptedEpoch { epoch } => storage.set_accepted_epoch(epoch),
        Action::PersistCurrentEpoch { epoch } => storage.set_current_epoch(epoch),
        Action::TruncateLog { after } => storage.truncate_after(after),
        Action::InstallSnapshot { zxid, snapshot } => storage.install_snapshot(zxid, snapshot),
        other => return Err(other),
    }
    Ok(())
}

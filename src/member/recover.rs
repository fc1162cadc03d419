//! Start-up recovery: the store in dataDir (txn log in dataLogDir) read back into the
//! state machine, refusing a damaged store without writing to it.

use super::now_ms;
use crate::config::Config;
use crate::server::Server;
use crate::storage::rocks::RocksStorage;
use crate::storage::zab::META_TXN_FORM;
use crate::storage::{Storage, StorageError};

/// Opens the store in dataDir (txn log in dataLogDir) and rebuilds the state machine
/// from it.
///
/// Errors: the store is corrupt, of another format version, or cannot be opened; the
/// error names the path and position and nothing is rewritten.
pub fn recover(config: &Config) -> std::io::Result<(Server, Box<dyn Storage>)> {
    let to_io = |e: StorageError| std::io::Error::other(e.to_string());
    let t0 = std::time::Instant::now();
    let db = config.data_dir.join(crate::storage::rocks::DB_DIR);
    let settings = crate::server_settings(config);
    // Recover from a read-only view first: every record is read and checked before
    // RocksDB may write anything, so a refused store is left exactly as it was.
    let recovered = match RocksStorage::open_read_only(&config.data_dir, &config.data_log_dir)
        .map_err(to_io)?
    {
        Some(ro) => {
            if ro.get_meta(META_TXN_FORM).map_err(to_io)?.is_some() {
                return Err(std::io::Error::other(format!(
                    "{}: an ensemble member's store (its txn log holds ZooKeeper's txn \
                     records); a standalone server does not start on it",
                    db.display()
                )));
            }
            Some(
                Server::recover(settings.clone(), &ro, &db, now_ms(), rand::random())
                    .map_err(to_io)?,
            )
        }
        None => None,
    };
    let read_ms = t0.elapsed().as_millis() as u64;
    let storage = RocksStorage::open(&config.data_dir, &config.data_log_dir, config.force_sync)
        .map_err(to_io)?;
    tracing::debug!(
        read_ms,
        reopen_ms = t0.elapsed().as_millis() as u64 - read_ms,
        "store read, then opened for writing"
    );
    let (server, stats) = match recovered {
        Some(r) => r,
        None => {
            Server::recover(settings, &storage, &db, now_ms(), rand::random()).map_err(to_io)?
        }
    };
    tracing::info!(
        data_dir = %config.data_dir.display(),
        snapshot_zxid = stats.snapshot_zxid.map(|z| format!("0x{z:x}")),
        txns_replayed = stats.txns_replayed,
        znodes = stats.znodes,
        sessions = stats.sessions,
        last_zxid = format!("0x{:x}", server.last_zxid),
        elapsed_ms = t0.elapsed().as_millis() as u64,
        "recovered"
    );
    Ok((server, Box::new(storage)))
}

//! Writes the rebuilt state into a new keel store as one complete snapshot at
//! ZooKeeper's last zxid, in exactly the format the server's own snapshots use (chunk 0
//! from `server::recovery::encode_snapshot_header`, then `tree::snapshot::encode_nodes`
//! chunks), so keel recovers it like any snapshot of its own and its next zxid follows
//! ZooKeeper's. The log stays empty.
//!
//! Then it reads the store back through `Server::recover` from a read-only view and
//! compares every znode, ACL, Stat and session with what was meant to be written.

use super::passwd::session_passwd;
use super::replay::Replayed;
use super::ImportError;
use crate::server::{recovery, Server};
use crate::session::SessionTracker;
use crate::storage::rocks::{RocksStorage, DB_DIR, WAL_DIR};
use crate::storage::Storage;
use crate::tree::{snapshot::encode_nodes, DataTree};
use bytes::BytesMut;
use std::path::{Path, PathBuf};

/// Largest snapshot chunk, bytes (the server writes chunks of the same size).
const CHUNK_BYTES: usize = 1 << 20;

/// Where the store goes: keel's `dataDir` and `dataLogDir` (the same unless set apart).
#[derive(Debug, Clone)]
pub struct Target {
    pub data_dir: PathBuf,
    pub log_dir: PathBuf,
}

impl Target {
    /// The database directory, `dataDir/keel-db`.
    pub fn db(&self) -> PathBuf {
        self.data_dir.join(DB_DIR)
    }

    /// The write-ahead log directory when `dataLogDir` is set apart.
    fn wal(&self) -> Option<PathBuf> {
        let same = match (
            std::fs::canonicalize(&self.data_dir),
            std::fs::canonicalize(&self.log_dir),
        ) {
            (Ok(a), Ok(b)) => a == b,
            _ => self.data_dir == self.log_dir,
        };
        (!same).then(|| self.log_dir.join(WAL_DIR))
    }

    /// Refuses a target that already holds (part of) a keel store: an import never
    /// writes over one.
    ///
    /// Errors: [`ImportError::Refused`] naming the directory found.
    pub fn check_empty(&self) -> Result<(), ImportError> {
        for dir in std::iter::once(self.db()).chain(self.wal()) {
            let exists = dir.try_exists().map_err(|e| ImportError::io(&dir, e))?;
            if exists {
                return Err(ImportError::Refused(format!(
                    "{} already exists: KEEL_DATADIR already holds a keel store, which an import never overwrites (choose an empty directory)",
                    dir.display()
                )));
            }
        }
        Ok(())
    }
}

/// What was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    pub znodes: usize,
    pub sessions: usize,
    pub ephemerals: usize,
    pub chunks: u32,
    pub zxid: i64,
}

/// Directories this import created, removed again if it fails.
struct Created(Vec<PathBuf>);

impl Created {
    fn mkdir_all(&mut self, dir: &Path) -> Result<(), ImportError> {
        // Record the outermost missing ancestor, so cleaning up leaves nothing behind.
        let mut missing = None;
        let mut cur = Some(dir);
        while let Some(d) = cur {
            if d.as_os_str().is_empty() || d.exists() {
                break;
            }
            missing = Some(d.to_path_buf());
            cur = d.parent();
        }
        std::fs::create_dir_all(dir).map_err(|e| ImportError::io(dir, e))?;
        if let Some(m) = missing {
            self.0.push(m);
        }
        Ok(())
    }

    fn remove(&self) {
        for d in self.0.iter().rev() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// `state` as keel's tree and session table (passwords ZooKeeper's derivation from
/// the id), and its zxid.
pub fn server_state(state: Replayed) -> (DataTree, SessionTracker, i64) {
    let mut sessions = SessionTracker::new(2000, 0);
    for (&id, &timeout_ms) in &state.sessions {
        sessions.add(id, timeout_ms, session_passwd(id), 0);
    }
    let mut tree = DataTree::empty();
    for (path, node) in state.nodes {
        tree.insert_loaded(&path, node.data.as_deref(), &node.acl, &node.meta());
    }
    // As every load of a keel store recounts (a restart, and the read-back below): the
    // replay moved only the deepest quota's usage (DataTree.updateQuotaStat), which a
    // recount of nested quotas would change, and the read-back would refuse the store.
    tree.recount_quotas();
    (tree, sessions, state.last_zxid)
}

/// Writes `state` as a new store in `target`, then verifies it. On any failure every
/// directory the call created is removed again.
///
/// Errors: the target already holds a store; storage errors; a read-back that differs.
pub fn write_store(
    state: Replayed,
    target: &Target,
    report: &mut dyn FnMut(&str),
) -> Result<Written, ImportError> {
    target.check_empty()?;
    let (tree, sessions, zxid) = server_state(state);

    let mut created = Created(Vec::new());
    let result = (|| {
        created.mkdir_all(&target.data_dir)?;
        created.mkdir_all(&target.log_dir)?;
        created.0.push(target.db());
        if let Some(w) = target.wal() {
            created.0.push(w);
        }
        let written = write(&tree, &sessions, zxid, target, report)?;
        report(&format!(
            "written ({} chunks); reading it back as keel will, to verify",
            written.chunks
        ));
        verify(&tree, &sessions, zxid, target)?;
        Ok(written)
    })();
    if result.is_err() {
        created.remove();
    }
    result
}

fn write(
    tree: &DataTree,
    sessions: &SessionTracker,
    zxid: i64,
    target: &Target,
    report: &mut dyn FnMut(&str),
) -> Result<Written, ImportError> {
    let mut storage = RocksStorage::open(&target.data_dir, &target.log_dir, true)?;
    storage.put_snapshot_chunk(zxid, 0, &recovery::encode_snapshot_header(zxid, sessions))?;
    let mut index = 1u32;
    let mut cursor: Option<String> = None;
    let mut written_nodes = 0usize;
    loop {
        let mut buf = BytesMut::with_capacity(CHUNK_BYTES + 4096);
        let next = encode_nodes(tree, cursor.as_deref(), CHUNK_BYTES, &mut buf);
        storage.put_snapshot_chunk(zxid, index, &buf)?;
        index += 1;
        match next {
            Some(c) => {
                written_nodes += tree
                    .nodes_after(cursor.as_deref())
                    .take_while(|e| e.cmp_path(c.as_bytes()).is_le())
                    .count();
                if index.is_multiple_of(64) {
                    report(&format!("  ... {written_nodes} znodes written"));
                }
                cursor = Some(c);
            }
            None => break,
        }
    }
    storage.finish_snapshot(zxid, index)?;
    // Move everything out of RocksDB's write-ahead log into table files in dataDir, so
    // the store does not depend on where keel's dataLogDir will be.
    storage.close()?;
    Ok(Written {
        znodes: tree.node_count(),
        sessions: sessions.len(),
        ephemerals: tree.ephemeral_count(),
        chunks: index,
        zxid,
    })
}

/// Reads the store back as the server will and compares it with what was written.
fn verify(
    tree: &DataTree,
    sessions: &SessionTracker,
    zxid: i64,
    target: &Target,
) -> Result<(), ImportError> {
    let differ = |what: String| {
        ImportError::Refused(format!(
            "the written store does not read back as written ({what}); it was removed"
        ))
    };
    let ro = RocksStorage::open_read_only(&target.data_dir, &target.log_dir)?
        .ok_or_else(|| differ("no database".into()))?;
    // Settings only shape a running server; recovery reads the store the same way
    // whatever they are.
    let settings = crate::server_settings(&crate::config::Config::default());
    let (server, _) = Server::recover(settings, &ro, &target.db(), 0, 0)?;
    if server.last_zxid != zxid {
        return Err(differ(format!(
            "last zxid 0x{:x}, expected 0x{zxid:x}",
            server.last_zxid
        )));
    }
    if server.tree.node_count() != tree.node_count() {
        return Err(differ(format!(
            "{} znodes, expected {}",
            server.tree.node_count(),
            tree.node_count()
        )));
    }
    for e in tree.nodes_after(None) {
        let (path, want) = (e.path(), e.node());
        let path = path.as_str();
        let got = server
            .tree
            .get(path)
            .ok_or_else(|| differ(format!("znode {path} missing")))?;
        if got.stat() != want.stat()
            || got.data() != want.data()
            || server.tree.acl(got) != tree.acl(want)
            || got.meta() != want.meta()
        {
            return Err(differ(format!("znode {path} differs")));
        }
    }
    if server.sessions.len() != sessions.len() {
        return Err(differ(format!(
            "{} sessions, expected {}",
            server.sessions.len(),
            sessions.len()
        )));
    }
    for s in sessions.iter() {
        let got = server
            .sessions
            .get(s.id)
            .ok_or_else(|| differ(format!("session 0x{:x} missing", s.id)))?;
        if got.timeout_ms != s.timeout_ms || got.passwd != s.passwd {
            return Err(differ(format!("session 0x{:x} differs", s.id)));
        }
    }
    Ok(())
}

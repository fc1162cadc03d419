//! The files a member writes when its configuration changes (dynamic reconfiguration,
//! ZooKeeper 3.5+), named after the zoo.cfg it was started from, as ZooKeeper's
//! `QuorumPeer` names them:
//! - `<zoo.cfg>.dynamic.next`: the last seen config, once a reconfig is proposed and
//!   before it commits (`setLastSeenQuorumVerifier`), with its `version=` line;
//! - `<zoo.cfg>.dynamic.<hex version>`: each config activated (`setQuorumVerifier`),
//!   without a version line (the name carries it), and zoo.cfg rewritten to point at it
//!   (`QuorumPeerConfig.editStaticConfig`): its `server.N`, `group`, `weight`,
//!   `peerType` and `dynamicConfigFile` lines dropped (and `clientPort` /
//!   `clientPortAddress` when this member's server line now gives its client address),
//!   `dynamicConfigFile=<absolute path>` added; the `.next` file is removed once the
//!   activated config is the last seen one.
//!
//! A restart reads zoo.cfg and the dynamic file it names ([`crate::config::Config`]),
//! so the member starts on the last config it activated; a reconfig committed but not
//! yet written is found again in its txn log by the Zab core. Each file is written to
//! a temporary name and renamed over the old one, so a crash leaves the old file or
//! the new one, never half of one.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::config::ends_with_odd_backslashes;
use crate::zab::quorum::QuorumVerifier;
use crate::zab::Sid;

/// `<zoo.cfg>.dynamic.next`.
pub fn next_file(config_file: &Path) -> PathBuf {
    with_suffix(config_file, ".dynamic.next")
}

/// `<zoo.cfg>.dynamic.<hex version>`.
pub fn versioned_file(config_file: &Path, version: u64) -> PathBuf {
    with_suffix(config_file, &format!(".dynamic.{version:x}"))
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// The dynamic file's text (`QuorumPeerConfig.writeDynamicConfig`): the config's
/// `key=value` lines sorted as strings, joined by newlines, no newline at the end;
/// the `version` line only when `keep_version`.
pub fn dynamic_text(qv: &QuorumVerifier, keep_version: bool) -> String {
    let mut lines: Vec<String> = qv
        .text()
        .lines()
        .filter(|l| keep_version || !l.starts_with("version"))
        .map(str::to_string)
        .collect();
    lines.sort();
    lines.join("\n")
}

/// `<zoo.cfg>.bak`.
pub fn backup_file(config_file: &Path) -> PathBuf {
    with_suffix(config_file, ".bak")
}

/// Copies zoo.cfg to `<zoo.cfg>.bak` (`QuorumPeerConfig.backupOldConfig`): an ensemble
/// member with reconfig on whose zoo.cfg still holds the `server.N` lines (no
/// `dynamicConfigFile`) keeps its original, since its first activated config rewrites
/// zoo.cfg.
///
/// Errors: zoo.cfg cannot be read or the copy written.
pub fn back_up_static(config_file: &Path) -> io::Result<()> {
    let text = std::fs::read(config_file)?;
    write_atomically(&backup_file(config_file), &text)
}

/// Writes `qv` as the last seen config (`<zoo.cfg>.dynamic.next`).
///
/// Errors: the file cannot be written.
pub fn write_next(config_file: &Path, qv: &QuorumVerifier) -> io::Result<()> {
    write_atomically(&next_file(config_file), dynamic_text(qv, true).as_bytes())
}

/// Writes the activated config `qv` (`<zoo.cfg>.dynamic.<hex version>`), points
/// zoo.cfg at it, and removes `.dynamic.next` when `qv` is also the last seen config.
/// `my_sid` decides whether zoo.cfg's client port lines go (this member's server line
/// in `qv` names its client address).
///
/// Errors: a file cannot be read or written; zoo.cfg is left as it was then.
pub fn write_activated(
    config_file: &Path,
    qv: &QuorumVerifier,
    my_sid: Sid,
    last_seen_version: u64,
) -> io::Result<()> {
    let dynamic = versioned_file(config_file, qv.version());
    write_atomically(&dynamic, dynamic_text(qv, false).as_bytes())?;
    let dynamic = std::fs::canonicalize(&dynamic)?;
    let erase_client = qv.server(my_sid).is_some_and(|s| s.client.is_some());
    let old = std::fs::read_to_string(config_file)?;
    let text = edit_static(&old, &dynamic, erase_client);
    write_atomically(config_file, text.as_bytes())?;
    if qv.version() == last_seen_version {
        match std::fs::remove_file(next_file(config_file)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// zoo.cfg's text with the quorum lines dropped and `dynamicConfigFile` set
/// (`editStaticConfig`). ZooKeeper rewrites the file from its Java Properties, losing
/// comments and order; keel keeps the file's own lines, comments, blank lines and order,
/// and drops whole logical lines: a line ending in an odd number of `\` goes on on the
/// next one (Java Properties), so a dropped `server.N` line takes its continuation
/// lines with it, and a file ending inside a continued line gets a blank line before
/// the `dynamicConfigFile` line so that line is not read as part of it.
pub fn edit_static(old: &str, dynamic: &Path, erase_client: bool) -> String {
    let mut out = String::new();
    let mut lines = old.lines();
    let mut open_continuation = false;
    while let Some(first) = lines.next() {
        let comment = first.trim_start().starts_with(['#', '!']);
        let mut logical = vec![first];
        // Comment lines never continue (Properties.load).
        let mut continues = !comment && ends_with_odd_backslashes(first);
        while continues {
            match lines.next() {
                Some(next) => {
                    continues = ends_with_odd_backslashes(next);
                    logical.push(next);
                }
                None => break,
            }
        }
        let key = first
            .trim_start()
            .split(['=', ':', ' ', '\t', '\x0c'])
            .next()
            .unwrap_or("");
        let drop = !comment
            && (key.starts_with("server.")
                || key.starts_with("group")
                || key.starts_with("weight")
                || key.starts_with("dynamicConfigFile")
                || key.starts_with("peerType")
                || (erase_client && key.starts_with("clientPort")));
        if !drop {
            for line in logical {
                out.push_str(line);
                out.push('\n');
            }
            open_continuation = continues;
        }
    }
    if open_continuation {
        out.push('\n');
    }
    out.push_str(&format!("dynamicConfigFile={}\n", dynamic.display()));
    out
}

fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = with_suffix(path, ".tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    // The rename is durable only once the directory is (a crash could otherwise bring
    // back the old file after the new config was acted on).
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // A directory that cannot be synced (some file systems refuse fsync on a directory)
    // is logged, not fatal: the rename has happened, and failing here would stop the
    // steps after it (the `.next` file's removal) with the new file already in place.
    if let Err(e) = std::fs::File::open(dir).and_then(|d| d.sync_all()) {
        tracing::warn!(dir = %dir.display(), error = %e, "config rewrite: directory fsync failed; the rename may not survive a crash");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zab::wire::config::parse_quorum_config;

    fn qv() -> QuorumVerifier {
        parse_quorum_config(
            "server.1=127.0.0.1:2012:2013:participant;127.0.0.1:2011\n\
             server.2=127.0.0.1:2022:2023:participant;127.0.0.1:2021\n\
             server.10=127.0.0.1:2102:2103:observer;127.0.0.1:2101\n\
             version=100000004",
        )
        .unwrap()
    }

    #[test]
    fn dynamic_text_is_sorted_lines_with_or_without_version() {
        assert_eq!(
            dynamic_text(&qv(), false),
            // As Java's String order: "server.10=" before "server.1=" ('0' < '=').
            "server.10=127.0.0.1:2102:2103:observer;127.0.0.1:2101\n\
             server.1=127.0.0.1:2012:2013:participant;127.0.0.1:2011\n\
             server.2=127.0.0.1:2022:2023:participant;127.0.0.1:2021"
        );
        assert!(dynamic_text(&qv(), true).ends_with("\nversion=100000004"));
    }

    #[test]
    fn edit_static_drops_quorum_lines_and_points_at_the_dynamic_file() {
        let old = "# keel\ntickTime=500\nclientPort=2011\nserver.1=a:1:2\npeerType=observer\n\
                   dynamicConfigFile=/x/zoo.cfg.dynamic.0\ndataDir=/d\n";
        let new = edit_static(old, Path::new("/x/zoo.cfg.dynamic.100000004"), true);
        assert_eq!(
            new,
            "# keel\ntickTime=500\ndataDir=/d\ndynamicConfigFile=/x/zoo.cfg.dynamic.100000004\n"
        );
        let kept = edit_static(old, Path::new("/y"), false);
        assert!(kept.contains("clientPort=2011\n"), "{kept}");
    }

    #[test]
    fn edit_static_drops_continued_lines_whole() {
        let old = "tickTime=500\nserver.1=127.0.0.1:\\\n   2012:2013\nserver.2=a:1:2\n\
                   # a comment ending in \\\nserver.3=b:1:2\ndataDir=/very/\\\n  long/path\n\
                   dataLogDir=/l\\\\\n";
        let new = edit_static(old, Path::new("/d"), false);
        assert_eq!(
            new,
            "tickTime=500\n# a comment ending in \\\ndataDir=/very/\\\n  long/path\n\
             dataLogDir=/l\\\\\ndynamicConfigFile=/d\n"
        );
        // A file that ends inside a continued line: the pointer stays a line of its own.
        let cut = edit_static("dataDir=/d\\", Path::new("/e"), false);
        assert_eq!(cut, "dataDir=/d\\\n\ndynamicConfigFile=/e\n");
        let c = crate::config::Config::parse(&format!(
            "{}initLimit=5\nsyncLimit=2\nserver.1=127.0.0.1:2012:2013;2011\nserver.2=127.0.0.1:2022:2023;2021\n",
            edit_static(old, Path::new("/nonexistent"), false)
                .replace("dynamicConfigFile=/nonexistent\n", "")
        ));
        assert!(c.is_ok(), "{c:?}");
    }

    #[test]
    fn activation_writes_the_versioned_file_rewrites_zoo_cfg_and_removes_next() {
        let dir = std::env::temp_dir().join(format!("keel-dyn-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cfg = dir.join("zoo.cfg");
        std::fs::write(&cfg, "dataDir=/d\nserver.1=a:1:2\nserver.2=b:1:2\n").unwrap();
        write_next(&cfg, &qv()).unwrap();
        assert!(next_file(&cfg).exists());
        back_up_static(&cfg).unwrap();
        write_activated(&cfg, &qv(), 1, 0x1_0000_0004).unwrap();
        assert_eq!(
            std::fs::read_to_string(backup_file(&cfg)).unwrap(),
            "dataDir=/d\nserver.1=a:1:2\nserver.2=b:1:2\n"
        );
        let dynamic = versioned_file(&cfg, 0x1_0000_0004);
        assert!(dynamic.ends_with("zoo.cfg.dynamic.100000004"));
        assert_eq!(
            std::fs::read_to_string(&dynamic).unwrap(),
            dynamic_text(&qv(), false)
        );
        let text = std::fs::read_to_string(&cfg).unwrap();
        assert!(!text.contains("server."), "{text}");
        assert!(text.ends_with(&format!(
            "dynamicConfigFile={}\n",
            std::fs::canonicalize(&dynamic).unwrap().display()
        )));
        assert!(!next_file(&cfg).exists());
        // And zoo.cfg reads back on that config.
        let c = crate::config::Config::parse(&text);
        assert!(c.is_ok(), "{c:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

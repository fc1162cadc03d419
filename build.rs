//! Stamps the build date that `srvr`, `mntr`, `envi` and the AdminServer print in
//! ZooKeeper's full version (`<version>, built on <date>`, `Version.getFullVersion()`).
//!
//! The date is `SOURCE_DATE_EPOCH` when set (reproducible-builds.org's convention),
//! else the commit time of the checkout's HEAD, so two builds of one commit say the
//! same. Neither known (a source tree that is not a git checkout of its own; a tree
//! unpacked inside another repository does not take that one's date): the variable is
//! left unset and keel prints the Unix epoch. Emits `KEEL_BUILD_EPOCH_S`, seconds since
//! the Unix epoch.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    println!("cargo:rerun-if-changed=build.rs");
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(&dir)
            .args(args)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let own_checkout =
        git(&["rev-parse", "--show-toplevel"]).is_some_and(|top| same_dir(Path::new(&top), &dir));
    if own_checkout {
        // What moves when HEAD does: HEAD itself (a checkout), the branch it names and
        // packed-refs (a commit, a pull), the reflog, and a reftable repository's table
        // list. Only paths that exist are named: cargo reruns a script on every build
        // while a path it named is missing.
        let branch = git(&["symbolic-ref", "-q", "HEAD"]);
        let names = ["HEAD", "logs/HEAD", "packed-refs", "reftable/tables.list"];
        for name in names.iter().copied().chain(branch.as_deref()) {
            if let Some(path) = git(&["rev-parse", "--git-path", name]) {
                let path = dir.join(path);
                if path.exists() {
                    println!("cargo:rerun-if-changed={}", path.display());
                }
            }
        }
    }
    let text = std::env::var("SOURCE_DATE_EPOCH").ok().or_else(|| {
        own_checkout
            .then(|| git(&["log", "-1", "--format=%ct", "HEAD"]))
            .flatten()
    });
    match text.as_deref().map(|s| s.trim().parse::<i64>()) {
        Some(Ok(s)) => println!("cargo:rustc-env=KEEL_BUILD_EPOCH_S={s}"),
        Some(Err(e)) => println!(
            "cargo:warning=build date {text:?} is not seconds ({e}); keel will print 1970-01-01"
        ),
        None => {}
    }
}

/// Whether `a` and `b` name the same directory (symlinks resolved).
fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

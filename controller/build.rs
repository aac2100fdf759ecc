//! Build script: the commit `steward --version` prints, as the compile-time
//! variable `STEWARD_COMMIT`.
//!
//! `$STEWARD_COMMIT` when the build is given one (a build from a source
//! tarball, which has no `.git`), else `git rev-parse` of the checkout, else
//! `unknown`. Man pages and completions are not generated here: a build
//! script cannot use the clap definitions of the crate it builds, so the
//! built binary writes them (`steward man --out`, `steward completions`;
//! `controller/assets/build-deb` does both for the Debian package).

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=STEWARD_COMMIT");
    let given = std::env::var("STEWARD_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty());
    let commit = given
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=STEWARD_COMMIT={commit}");
}

fn manifest_dir() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
}

/// `git ARGS` in the crate's directory: its trimmed output, `None` when git
/// is missing, fails, or prints nothing.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(manifest_dir())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// The checkout's commit (12 hex digits), and a rerun of this script when it
/// moves: HEAD (a checkout), the branch HEAD names (a commit) and
/// packed-refs. `--git-path` finds each one in a worktree too.
fn git_commit() -> Option<String> {
    let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
    let mut watched = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    for name in watched {
        let Some(path) = git(&["rev-parse", "--git-path", &name]) else {
            continue;
        };
        let path = manifest_dir().join(Path::new(&path));
        // A path that does not exist would rerun this script on every build.
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    Some(commit)
}

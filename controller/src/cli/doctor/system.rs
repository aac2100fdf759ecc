//! Doctor's checks of the machine: this binary and the `steward` on PATH,
//! HOME_DIR, the kernel's sandbox support and (once the secrets work lands)
//! the keyring.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::{Check, Status};
use crate::cli::version;
use crate::runtime::process::resolve_command;
use crate::support::paths::Paths;

/// This binary and its version, and whether the `steward` agents start by
/// name (on PATH) is this one.
pub fn binary(paths: &Paths, search_path: &OsStr) -> Vec<Check> {
    let own = std::env::current_exe().ok();
    let own_text = own
        .as_deref()
        .map_or_else(|| "?".to_owned(), |p| p.display().to_string());
    let mut checks = vec![Check::new(
        "steward",
        own_text.clone(),
        Status::Ok,
        format!("version {}", version::short()),
    )];
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    let on_path = resolve_command("steward", &paths.workspace, search_path);
    checks.push(match (on_path, own) {
        (Ok(found), Some(own)) if same(&found, &own) => Check::new(
            "steward",
            "PATH",
            Status::Ok,
            format!("`steward` is {}", found.display()),
        ),
        (Ok(found), _) => Check::new(
            "steward",
            "PATH",
            Status::Warning,
            format!(
                "`steward` is {}, not this binary ({own_text}): agents start that one",
                found.display()
            ),
        )
        .fix("remove the other one, or put this one's directory first on PATH"),
        (Err(_), _) => Check::new(
            "steward",
            "PATH",
            Status::Warning,
            "`steward` is not on PATH: agents that run `steward mcp` cannot start it".into(),
        )
        .fix("install it: `cargo install --locked --path controller` (or the .deb), or register its absolute path with the agents"),
    });
    checks
}

/// HOME_DIR: where approvals, trust, the lock and the socket live. Absent
/// is fine when it can be created (the nearest existing directory above it
/// is writable).
pub fn home_dir(paths: &Paths) -> Check {
    let home = &paths.home_dir;
    let subject = home.display().to_string();
    if home.is_dir() {
        return match writable(home) {
            Ok(()) => Check::new("homeDir", subject, Status::Ok, "writable".into()),
            Err(e) => Check::new(
                "homeDir",
                subject,
                Status::Error,
                format!("not writable: {e} (approvals, the lock and the socket live there)"),
            )
            .fix("make it writable by you (`chown`/`chmod`), or point QWEN_HOME elsewhere"),
        };
    }
    if home.exists() {
        return Check::new("homeDir", subject, Status::Error, "not a directory".into())
            .fix("move the file away, or point QWEN_HOME elsewhere");
    }
    let ancestor = home.ancestors().skip(1).find(|p| p.is_dir());
    match ancestor.map(|a| (a, writable(a))) {
        Some((_, Ok(()))) => Check::new(
            "homeDir",
            subject,
            Status::Info,
            "absent; created when first needed".into(),
        ),
        Some((above, Err(e))) => Check::new(
            "homeDir",
            subject,
            Status::Error,
            format!("absent, and {} is not writable: {e}", above.display()),
        )
        .fix("create it (writable by you), or point QWEN_HOME elsewhere"),
        None => Check::new("homeDir", subject, Status::Error, "absent".into())
            .fix("create it, or point QWEN_HOME elsewhere"),
    }
}

/// Whether this user may create files in `dir` (`access(2)`, W_OK|X_OK):
/// asked of the kernel, so that doctor writes nothing to find out.
#[allow(unsafe_code)]
fn writable(dir: &Path) -> io::Result<()> {
    let path = CString::new(dir.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: `path` is a valid NUL-terminated string that outlives the call.
    let rc = unsafe { libc::access(path.as_ptr(), libc::W_OK | libc::X_OK) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

// ---------------------------------------------------------------------------
// EXTENSION POINT — sandbox support (the sandbox work, product.md §9).
// One function: the kernel's Landlock ABI. When server sandboxing lands, it
// may also say what a profile needs that this ABI lacks (and make that an
// error for a server whose profile requires it).
// ---------------------------------------------------------------------------

/// The kernel's Landlock support: its ABI version.
pub fn sandbox() -> Option<Check> {
    Some(match landlock_abi() {
        Ok(abi) => Check::new(
            "sandbox",
            "Landlock",
            Status::Ok,
            format!("the kernel supports Landlock ABI {abi}"),
        ),
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Check::new(
            "sandbox",
            "Landlock",
            Status::Info,
            "the kernel has Landlock, disabled at boot".into(),
        )
        .fix("to sandbox servers: add `landlock` to the kernel's `lsm=` boot parameter"),
        Err(e) => Check::new(
            "sandbox",
            "Landlock",
            Status::Info,
            format!("no Landlock support ({e})"),
        ),
    })
}

/// `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`: the
/// highest ABI version the running kernel supports.
#[allow(unsafe_code)]
fn landlock_abi() -> io::Result<i64> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with this flag the kernel reads no attribute (NULL, size 0)
    // and creates no file descriptor; it only returns the version.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

// ---------------------------------------------------------------------------
// EXTENSION POINT — the keyring (the secrets work, product.md §10).
// When secret references land, report here whether the configured backend
// (Secret Service on the session bus, or the file backend) is reachable and
// unlocked, as an error when a configured server references a secret.
// ---------------------------------------------------------------------------

/// The keyring's checks: none until the secrets work lands.
pub fn keyring() -> Option<Check> {
    None
}

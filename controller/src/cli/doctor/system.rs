//! Doctor's checks of the machine: this binary and the `steward` on PATH,
//! HOME_DIR, the kernel's sandbox support and where secrets are kept.

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

/// What the kernel offers the servers' sandboxes (`runtime::sandbox`): the
/// Landlock ABI and user namespaces, and so how fully a profile is enforced
/// here (`status.sandbox.enforcement`).
pub fn sandbox() -> Option<Check> {
    use crate::runtime::sandbox::kernel::{ABI_SCOPES, ABI_TCP, Support};
    let shim = std::env::current_exe().ok()?;
    let Support { abi, userns } = Support::detect(&shim);
    let check = |status, message: String| Check::new("sandbox", "Landlock", status, message);
    Some(if abi == 0 {
        check(
            Status::Warning,
            "the kernel has no Landlock (or it is disabled at boot): servers run unconfined (enforcement None)".into(),
        )
        .fix("to sandbox servers: a kernel with Landlock, `landlock` in the `lsm=` boot parameter")
    } else if abi < ABI_SCOPES || !userns {
        let mut lacks = Vec::new();
        if abi < ABI_TCP {
            lacks.push(format!("TCP port rules (ABI {ABI_TCP})"));
        }
        if abi < ABI_SCOPES {
            lacks.push(format!(
                "signal and abstract-socket scoping (ABI {ABI_SCOPES})"
            ));
        }
        if !userns {
            lacks.push("unprivileged user namespaces (git hooks, the session bus, other processes' environ)".to_owned());
        }
        check(
            Status::Info,
            format!(
                "Landlock ABI {abi}: servers are sandboxed Partially, without {}",
                lacks.join(", ")
            ),
        )
        .fix("set steward.sandbox.require to refuse to run a server that is not fully sandboxed")
    } else {
        check(
            Status::Ok,
            format!("Landlock ABI {abi} and user namespaces: servers are fully sandboxed"),
        )
    })
}

/// Where secrets are kept (`runtime::secrets`): the desktop keyring when a
/// Secret Service is on the session bus, else Steward's file store.
pub fn keyring(home_dir: &Path) -> Option<Check> {
    use crate::runtime::secrets::{self, BackendKind};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    let backend = rt.block_on(secrets::open(home_dir));
    let names = rt.block_on(backend.names());
    let (status, message) = match (backend.kind(), names) {
        (BackendKind::SecretService, Ok(n)) => (
            Status::Ok,
            format!(
                "the desktop keyring (Secret Service) holds {} Steward secret(s)",
                n.len()
            ),
        ),
        (BackendKind::File, Ok(n)) => (
            Status::Ok,
            format!(
                "no Secret Service on the session bus: {} holds {} secret(s)",
                secrets::file_store_path(home_dir).display(),
                n.len()
            ),
        ),
        (_, Err(e)) => (
            Status::Warning,
            format!("the secret store cannot be read: {e}"),
        ),
    };
    Some(Check::new("secrets", "keyring", status, message))
}

//! The open-file limit: the controller raises its own soft limit to the
//! hard one (every server costs it a few descriptors), and each server gets
//! the original limit back through the exec shim.

use std::io;

/// The env var through which the shim learns the open-file limit to give
/// the server (removed before the exec).
pub(super) const SHIM_FD_LIMIT_VAR: &str = "STEWARD_EXEC_NOFILE";

/// The soft open-file limit before [`raise_fd_limit`] raised it.
pub(super) static ORIGINAL_FD_LIMIT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

/// `(soft, hard)` `RLIMIT_NOFILE` of this process.
#[allow(unsafe_code)]
pub fn fd_limit() -> io::Result<(u64, u64)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the valid, exclusive `limit`.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((limit.rlim_cur, limit.rlim_max))
}

/// Sets the soft `RLIMIT_NOFILE` to `soft` (at most the hard limit).
#[allow(unsafe_code)]
pub(super) fn set_fd_limit_soft(soft: u64) -> io::Result<()> {
    let (_, hard) = fd_limit()?;
    let limit = libc::rlimit {
        rlim_cur: soft.min(hard),
        rlim_max: hard,
    };
    // SAFETY: setrlimit reads one valid rlimit; it changes only a limit of
    // the calling process.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Raises the soft open-file limit to the hard one: every server costs the
/// controller a few descriptors (its pipes), so the usual soft limit of 1024
/// caps a workspace at a few hundred servers for no reason. Children get
/// the original limit back (the exec shim restores it). Returns the limit
/// before and after.
pub fn raise_fd_limit() -> io::Result<(u64, u64)> {
    let (soft, hard) = fd_limit()?;
    let _ = ORIGINAL_FD_LIMIT.set(soft);
    if soft < hard {
        set_fd_limit_soft(hard)?;
    }
    Ok((soft, fd_limit()?.0))
}

/// Descriptors a spawn leaves free for the controller itself: its control
/// socket, status and gateway connections, watches and config reads must keep
/// working when servers have taken the rest (a server holds its pipes for as
/// long as it runs, so without a reserve the last start to succeed could shut
/// the user out of `steward status` until a server exits).
const RESERVE: u64 = 16;

/// Whether starting one more server would eat into [`RESERVE`]: the open
/// descriptors counted in `/proc/self/fd` against the soft limit (false
/// when either cannot be read: the spawn then finds out for itself).
pub(super) fn short_of_descriptors() -> bool {
    let Ok((soft, _)) = fd_limit() else {
        return false;
    };
    // A spawn opens its three pipes and a few transient ones (the sandbox
    // plan, the shim's pidfd).
    const PER_SPAWN: u64 = 8;
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else {
        return false;
    };
    fds.count() as u64 + PER_SPAWN + RESERVE > soft
}

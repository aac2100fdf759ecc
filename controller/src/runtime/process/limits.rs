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

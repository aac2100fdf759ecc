//! The exec shim: the `steward` executable started as
//! `[shim, "__steward-exec", <controller pid>, <program>, <args>...]`
//! enters the server's sandbox namespace (when its plan has one), arms the
//! parent-death signal, checks that the controller is still its parent,
//! restores the server's open-file limit, confines itself (Landlock,
//! seccomp: `runtime::sandbox::apply`) and execs the program in place.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;

use super::limits::{SHIM_FD_LIMIT_VAR, set_fd_limit_soft};
use crate::runtime::sandbox::{self, plan::Plan};

/// `argv[1]` that turns the `steward` executable into the exec shim (see
/// [`run_exec_shim_if_requested`]).
pub const EXEC_SHIM_ARG: &str = "__steward-exec";

/// Exit code of the shim when the program cannot be executed (as in sh).
const SHIM_CANNOT_EXECUTE: i32 = 127;

/// The exec shim's entry. When this process was started as
/// `[_, "__steward-exec", <controller pid>, <program>, <args>...]` (by a
/// [`Spawner`](super::Spawner)) it never returns: it sets `PR_SET_PDEATHSIG(SIGKILL)`, exits
/// 1 if the controller is no longer its parent (it died before the prctl, so
/// no signal will come), and execs `program` with `args` (argv\[0\] is the
/// program path), the inherited env and cwd. If the exec fails it prints
/// `cannot execute <program>: <reason>` on stderr and exits 127. Otherwise
/// it returns at once.
///
/// Call it first thing in `main`, before anything else runs: the shim should
/// cost no more than an exec, and should start no threads.
pub fn run_exec_shim_if_requested() {
    let mut args = std::env::args_os().skip(1);
    match args.next() {
        Some(a) if a == OsStr::new(EXEC_SHIM_ARG) => exec_shim(args),
        Some(a) if a == OsStr::new(sandbox::kernel::USERNS_PROBE_ARG) => {
            std::process::exit(if sandbox::apply::probe_userns() { 0 } else { 1 })
        }
        _ => {}
    }
}

/// The sandbox plan the spawner passed, if any (a plan that cannot be read
/// ends the shim: the server never runs less confined than planned).
fn sandbox_plan() -> Option<Plan> {
    let text = std::env::var_os(sandbox::PLAN_VAR)?;
    match serde_json::from_str(&text.to_string_lossy()) {
        Ok(plan) => Some(plan),
        Err(error) => {
            eprintln!("steward sandbox: cannot read the plan: {error}");
            std::process::exit(SHIM_SANDBOX_FAILED)
        }
    }
}

/// Exit code of the shim when the sandbox cannot be applied.
const SHIM_SANDBOX_FAILED: i32 = 126;

fn sandbox_step(step: Result<(), sandbox::apply::ApplyError>) {
    if let Err(error) = step {
        eprintln!("steward sandbox: cannot {error}");
        std::process::exit(SHIM_SANDBOX_FAILED)
    }
}

fn exec_shim(mut args: impl Iterator<Item = OsString>) -> ! {
    let parent = args
        .next()
        .and_then(|pid| pid.to_str()?.parse::<u32>().ok());
    let (Some(parent), Some(program)) = (parent, args.next()) else {
        eprintln!("usage: steward {EXEC_SHIM_ARG} <parent pid> <program> [<arg>...]");
        std::process::exit(SHIM_CANNOT_EXECUTE);
    };
    let plan = sandbox_plan();
    // First: a new user namespace clears the parent-death signal.
    if let Some(plan) = &plan {
        sandbox_step(sandbox::apply::enter_namespace(plan));
    }
    if let Err(error) = set_parent_death_signal() {
        eprintln!("cannot set the parent-death signal: {error}");
        std::process::exit(SHIM_CANNOT_EXECUTE);
    }
    // Checked after the prctl: if the controller dies later, the signal comes.
    if std::os::unix::process::parent_id() != parent {
        std::process::exit(1);
    }
    // The server gets the open-file limit the controller was started with
    // (programs using select() break above 1024), not the raised one.
    if let Some(soft) = std::env::var(SHIM_FD_LIMIT_VAR)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        let _ = set_fd_limit_soft(soft);
    }
    if let Some(plan) = &plan {
        sandbox_step(sandbox::apply::confine(plan));
    }
    // `exec` restores SIGPIPE (which the Rust runtime ignores) to its default;
    // the signal mask is the spawner thread's, as with a plain fork + exec.
    let error = std::process::Command::new(&program)
        .args(args)
        .env_remove(SHIM_FD_LIMIT_VAR)
        .env_remove(sandbox::PLAN_VAR)
        .exec();
    eprintln!("cannot execute {}: {error}", Path::new(&program).display());
    std::process::exit(SHIM_CANNOT_EXECUTE)
}

/// `PR_SET_PDEATHSIG(SIGKILL)` for the calling process. It survives `execve`
/// (of anything but a set-user-ID or file-capability binary).
#[allow(unsafe_code)]
fn set_parent_death_signal() -> io::Result<()> {
    // SAFETY: PR_SET_PDEATHSIG takes a signal number by value and changes
    // only an attribute of the calling process; no memory is passed.
    #[cfg(target_os = "linux")]
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::runtime::process::testing::sh;
    use crate::runtime::process::{SpawnError, Spawner};

    #[tokio::test]
    async fn a_missing_exec_shim_is_a_spawn_error() {
        let spawner = Spawner::with_exec_shim("/nonexistent-steward/shim").unwrap();
        assert_eq!(spawner.exec_shim(), Path::new("/nonexistent-steward/shim"));
        let error = spawner.spawn(&sh("true")).await.unwrap_err();
        assert!(
            matches!(&error, SpawnError::Io { error, .. } if error.kind() == io::ErrorKind::NotFound),
            "{error:?}"
        );
    }
}

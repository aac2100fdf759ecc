//! Child processes: spawn, observe, stop.
//!
//! This module owns every OS process Steward starts. A server runtime asks a
//! [`Spawner`] for a [`ManagedProcess`] built from a [`ProcessSpec`], hands its
//! stdin/stdout to the protocol client, and later calls
//! [`ManagedProcess::stop`] (after the protocol-level close). Nothing else in
//! the controller forks, signals or reaps.
//!
//! Invariants:
//!
//! - **Spawning costs the same however large the controller is.** A
//!   `pre_exec` closure makes std `fork()` the controller, which copies its
//!   page tables and leaves copy-on-write faults behind in the parent —
//!   milliseconds per spawn once the controller serves hundreds of servers.
//!   `posix_spawn` (a `CLONE_VM | CLONE_VFORK` clone that shares the memory
//!   until `execve`) costs nothing of the sort, but takes no closure. So a
//!   server is started through an *exec shim*: the Spawner posix_spawns the
//!   controller's own executable (`/proc/self/exe`) as
//!   `[shim, "__steward-exec", <controller pid>, <program>, <args>...]`, with
//!   the server's env, cwd, stdio pipes and new process group, and
//!   [`run_exec_shim_if_requested`] — the first thing `steward`'s `main`
//!   does — sets the parent-death signal and execs the program in place (same
//!   pid). There is no other spawn path.
//! - **No server outlives the controller.** Each child gets
//!   `PR_SET_PDEATHSIG(SIGKILL)` (set by the shim, kept across its exec of
//!   the program); if the controller died before that, the shim no longer has
//!   it as parent and exits 1 instead. The kernel sends the signal when the
//!   *thread* that created the child exits, not the process, so every spawn
//!   happens on one dedicated, long-lived spawner thread. A tokio worker
//!   could be used, but `spawn_blocking` threads retire after ~10 s idle and
//!   would take their servers with them. The spawner thread lives while any
//!   [`Spawner`] clone or [`ManagedProcess`] does, and it never panics out of
//!   its loop (a panic would kill every child it ever started).
//! - **One process group per server.** The child leads its own group
//!   (`pgid == pid`); signals go to the whole group, and a stop ends only when
//!   no live process is left in it.
//! - **Escapes are found, not leaked silently.** A grandchild that calls
//!   `setsid` leaves the group. Just before signalling, the stop snapshots the
//!   process tree under the leader (`/proc/<pid>/task/*/children`): after the
//!   leader dies its children are reparented and can no longer be found from
//!   it. Afterwards, a process still holding one of the child's stdio pipes is
//!   a leak too (cargo-nextest's "exited but pipes still open"); the stop
//!   finds it by pipe inode in `/proc/*/fd` and kills it.
//! - **Tokio reaps each leader; nothing else takes its status.** Orphans
//!   handed to `steward run` (a child subreaper) are reaped and, when their
//!   server stops, killed by [`crate::runtime::reaper`], which knows them by the mark
//!   every server's env carries. Zombies still count for `kill(-pgid, 0)`
//!   and some container inits reap late, so "group empty" means "no member
//!   that is not a zombie".
//! - **A remembered pid is checked before it is signalled**: its start time
//!   must still match, so a reused pid is never hit. The group id is not
//!   signalled again once the group was seen empty.
//!
//! Config env may not set [`ENV_DENYLIST`] keys (compared case-insensitively),
//! nor smuggle one in through a key holding `=` or NUL ([`sanitize_env`]);
//! a bare command name is resolved with the *controller's* `PATH`, never the
//! config's (see [`resolve_command`]). The shim gets the resolved absolute
//! path, so no `PATH` search happens after the spawn. A program that cannot be
//! executed after all (say, a script whose interpreter is missing) is not a
//! [`SpawnError`]: the shim exits 127 with `cannot execute <path>: <reason>`
//! on stderr, which the caller sees as an early exit and in the stderr tail.

mod env;
mod limits;
mod managed;
mod shim;
mod spawner;
mod stderr;
#[cfg(test)]
mod testing;
mod thread;

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;

pub use self::env::{ENV_DENYLIST, resolve_command, sanitize_env};
pub use self::limits::{fd_limit, raise_fd_limit};
pub use self::managed::{ManagedProcess, StopOutcome, StopReport};
pub use self::shim::{EXEC_SHIM_ARG, run_exec_shim_if_requested};
pub use self::spawner::{SPAWNED_PID, Spawner};
pub use self::stderr::{STDERR_TAIL_BYTES, STDERR_TAIL_LINES, StderrSink};
pub use crate::runtime::sandbox::SandboxRequest;

/// What to run. `env` comes from the config, already expanded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessSpec {
    /// Command: a bare name (looked up in the controller's `PATH`), or a path
    /// (a relative one is taken from `cwd`).
    pub program: String,
    /// Arguments after the program.
    pub args: Vec<String>,
    /// Overlaid on the controller's env, minus [`ENV_DENYLIST`].
    pub env: BTreeMap<String, String>,
    /// Working directory; the controller's when `None`.
    pub cwd: Option<PathBuf>,
    /// The permission profile it runs under (`None`: none at all, as `off`).
    pub sandbox: Option<SandboxRequest>,
}

/// A process could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// `program` is empty.
    #[error("spawn: the command is empty")]
    EmptyCommand,
    /// No executable file by that name.
    #[error("spawn {command}: command not found (searched {searched})")]
    CommandNotFound {
        /// The configured command.
        command: String,
        /// `PATH <value>` for a bare name, else the path looked at.
        searched: String,
    },
    /// Found, but it is a directory or lacks execute permission.
    #[error("spawn {command}: {} is not executable ({reason})", path.display())]
    NotExecutable {
        /// The configured command.
        command: String,
        /// The file found.
        path: PathBuf,
        /// Why it cannot be run.
        reason: String,
    },
    /// The working directory is missing or not a directory.
    #[error("spawn {command}: working directory {}: {reason}", cwd.display())]
    BadCwd {
        /// The configured command.
        command: String,
        /// The directory asked for.
        cwd: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The OS refused (pipes, spawning the exec shim).
    #[error("spawn {command}: {error}")]
    Io {
        /// The configured command.
        command: String,
        /// The OS error.
        error: io::Error,
    },
    /// The controller is out of file descriptors (EMFILE/ENFILE): every
    /// server holds a few, so the limit bounds how many can run.
    #[error(
        "spawn {command}: the controller has too many open files (limit {limit}); raise the limit (`ulimit -n`) or run fewer servers"
    )]
    OutOfDescriptors {
        /// The configured command.
        command: String,
        /// The soft `RLIMIT_NOFILE` at the time.
        limit: u64,
    },
    /// Its permission profile cannot be enforced (see the message).
    #[error("sandbox {command}: {reason}")]
    Sandbox {
        /// The configured command.
        command: String,
        /// What is missing, and what to do.
        reason: String,
    },
    /// The spawner thread is gone (it only stops when every handle is dropped).
    #[error("spawn {command}: the spawner thread has stopped")]
    SpawnerGone {
        /// The configured command.
        command: String,
    },
}

/// How a process ended: an exit code, or the signal that killed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitInfo {
    /// Exit code, when it exited by itself.
    pub code: Option<i32>,
    /// Signal number, when a signal killed it.
    pub signal: Option<i32>,
}

impl ExitInfo {
    /// The status could not be collected.
    pub const UNKNOWN: ExitInfo = ExitInfo {
        code: None,
        signal: None,
    };
}

impl From<ExitStatus> for ExitInfo {
    fn from(status: ExitStatus) -> Self {
        ExitInfo {
            code: status.code(),
            signal: status.signal(),
        }
    }
}

impl fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.code, self.signal) {
            (Some(code), _) => write!(f, "exited with code {code}"),
            (None, Some(signal)) => match signal_name(signal) {
                Some(name) => write!(f, "killed by signal {signal} ({name})"),
                None => write!(f, "killed by signal {signal}"),
            },
            (None, None) => f.write_str("exited with an unknown status"),
        }
    }
}

fn signal_name(signal: i32) -> Option<&'static str> {
    Some(match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => return None,
    })
}

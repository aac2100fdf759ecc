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

use std::collections::{BTreeMap, VecDeque};
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::fs;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::ThreadId;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::runtime::procfs::{
    ProcStat, descendants, group_is_empty, is_alive, pipe_has_writers, pipe_holders, pipe_inode,
    send_signal, signal_tracked,
};
use crate::runtime::reaper;
use crate::support::sync::lock;

/// Env keys a config may not set (compared case-insensitively): they inject
/// code into the server or redirect its libraries.
pub const ENV_DENYLIST: [&str; 6] = [
    "NODE_OPTIONS",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "DYLD_INSERT_LIBRARIES",
    "DYLD_LIBRARY_PATH",
];

/// `argv[1]` that turns the `steward` executable into the exec shim (see
/// [`run_exec_shim_if_requested`]).
pub const EXEC_SHIM_ARG: &str = "__steward-exec";

/// Exit code of the shim when the program cannot be executed (as in sh).
const SHIM_CANNOT_EXECUTE: i32 = 127;

/// Stderr lines kept per process.
pub const STDERR_TAIL_LINES: usize = 200;
/// Stderr bytes kept per process; a longer unterminated line is split.
pub const STDERR_TAIL_BYTES: usize = 64 * 1024;

/// Bound on each wait after SIGKILL (leader reaped, group empty, leaks gone).
const KILL_WAIT: Duration = Duration::from_secs(2);
/// How long the stdio pipes may stay open after the group is empty before the
/// holders are searched for (nextest's default leak timeout).
const PIPE_LEAK_TIMEOUT: Duration = Duration::from_millis(100);
/// Polling interval bounds while waiting for a condition with a deadline.
const POLL_MIN: Duration = Duration::from_millis(5);
const POLL_MAX: Duration = Duration::from_millis(100);

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

/// How the group leader came to exit during [`ManagedProcess::stop`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopOutcome {
    /// It had exited before the stop began.
    AlreadyExited,
    /// It exited within the grace period after SIGTERM.
    ExitedOnTerm,
    /// It was still running at the end of the grace period and got SIGKILL.
    Killed,
}

/// What [`ManagedProcess::stop`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopReport {
    /// How the leader ended.
    pub outcome: StopOutcome,
    /// The leader's exit; `None` if it was not reaped within the kill bound.
    pub exit: Option<ExitInfo>,
    /// Other group members outlived the leader and the grace period and got
    /// SIGKILL.
    pub stragglers_killed: bool,
    /// Descendants that had left the process group (`setsid`/`setpgid`);
    /// each got the same TERM → KILL treatment as the group.
    pub escaped: Vec<u32>,
    /// Processes outside the group still holding the child's stdio pipes
    /// after the group was empty; killed.
    pub leaked: Vec<u32>,
    /// At the end the group was empty, no escaped process was alive and the
    /// stdio pipes were closed. `false` is logged as an error.
    pub clean: bool,
    /// Time the stop took.
    pub elapsed: Duration,
}

/// Child env: config env without [`ENV_DENYLIST`] keys (any case), and
/// without entries that are not one `KEY=value` pair: an empty key, or a key
/// holding `=` or NUL (`"LD_PRELOAD=/x/evil.so:"` would reach the child as
/// `LD_PRELOAD=/x/evil.so:=<value>`, and a NUL cuts the key short), or a
/// value holding NUL. The denylist is checked on the key the child would
/// see, the part before any `=` or NUL. Returns the env to overlay and the
/// keys dropped, in config order, for the caller to report.
pub fn sanitize_env(
    config_env: &BTreeMap<String, String>,
) -> (BTreeMap<String, String>, Vec<String>) {
    let mut kept = BTreeMap::new();
    let mut dropped = Vec::new();
    for (key, value) in config_env {
        let real_key = key.split(['=', '\0']).next().unwrap_or_default();
        let malformed = real_key.is_empty() || real_key.len() != key.len() || value.contains('\0');
        if malformed
            || ENV_DENYLIST
                .iter()
                .any(|denied| real_key.eq_ignore_ascii_case(denied))
        {
            dropped.push(key.clone());
        } else {
            kept.insert(key.clone(), value.clone());
        }
    }
    (kept, dropped)
}

/// Absolute path of the file to execute. A bare name (no `/`) is looked up in
/// `search_path` — the controller's `PATH`, never the config's, so a config
/// cannot shadow a command by prepending its own directory. Empty and relative
/// `PATH` entries are skipped. A name with `/` is taken relative to `cwd`.
pub fn resolve_command(
    program: &str,
    cwd: &Path,
    search_path: &OsStr,
) -> Result<PathBuf, SpawnError> {
    if program.is_empty() {
        return Err(SpawnError::EmptyCommand);
    }
    let not_executable = |path: PathBuf, reason: String| SpawnError::NotExecutable {
        command: program.to_owned(),
        path,
        reason,
    };
    if program.contains('/') {
        // `components` drops interior `.` segments: `./x` reads as `<cwd>/x`.
        let path: PathBuf = cwd.join(program).components().collect();
        return match check_executable(&path) {
            Ok(()) => Ok(path),
            Err(None) => Err(SpawnError::CommandNotFound {
                command: program.to_owned(),
                searched: path.display().to_string(),
            }),
            Err(Some(reason)) => Err(not_executable(path, reason)),
        };
    }
    // Like execvp: a match that cannot be run is remembered, the search goes
    // on, and it is reported only when nothing better turns up.
    let mut first_unusable = None;
    for dir in std::env::split_paths(search_path) {
        if !dir.is_absolute() {
            continue;
        }
        let path = dir.join(program);
        match check_executable(&path) {
            Ok(()) => return Ok(path),
            Err(None) => {}
            Err(Some(reason)) => {
                first_unusable.get_or_insert((path, reason));
            }
        }
    }
    match first_unusable {
        Some((path, reason)) => Err(not_executable(path, reason)),
        None => Err(SpawnError::CommandNotFound {
            command: program.to_owned(),
            searched: format!("PATH {}", search_path.to_string_lossy()),
        }),
    }
}

/// `Err(None)`: nothing there; `Err(Some(reason))`: there but not runnable.
fn check_executable(path: &Path) -> Result<(), Option<String>> {
    match fs::metadata(path) {
        Err(error) if error.kind() == io::ErrorKind::NotFound => Err(None),
        Err(error) => Err(Some(error.to_string())),
        Ok(meta) if meta.is_dir() => Err(Some("it is a directory".to_owned())),
        Ok(meta) if meta.permissions().mode() & 0o111 == 0 => {
            Err(Some("no execute permission".to_owned()))
        }
        Ok(_) => Ok(()),
    }
}

tokio::task_local! {
    /// Set by a caller that wants the pid of the process a connect spawns
    /// as soon as it exists ([`Spawner::spawn`] sends it).
    pub static SPAWNED_PID: watch::Sender<Option<u32>>;
}

/// Receives the stderr of every process a [`Spawner`] starts, besides the
/// process's own tail ([`Spawner::with_stderr_sink`]); a per-server log
/// that outlives one process implements it.
pub trait StderrSink: Send + Sync {
    /// Process `pid` started: the lines that follow with this pid are its own.
    fn started(&self, pid: u32);
    /// One complete stderr line of process `pid`.
    fn line(&self, pid: u32, line: &str);
}

/// Starts processes from one dedicated thread (see the module docs for why).
/// Create one per controller and clone it; each [`ManagedProcess`] keeps the
/// thread alive while it lives.
#[derive(Clone)]
pub struct Spawner {
    inner: Arc<SpawnerInner>,
    sink: Option<Arc<dyn StderrSink>>,
}

impl fmt::Debug for Spawner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Spawner")
            .field("thread", &self.inner.thread)
            .field("exec_shim", &self.inner.exec_shim)
            .finish()
    }
}

struct SpawnerInner {
    requests: mpsc::Sender<SpawnRequest>,
    thread: ThreadId,
    exec_shim: PathBuf,
}

/// Spawns so far in this process: numbers each server's mark.
static SPAWNED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

struct SpawnRequest {
    command: Command,
    runtime: tokio::runtime::Handle,
    reply: oneshot::Sender<io::Result<(Child, ThreadId)>>,
}

impl Spawner {
    /// Starts the spawner thread (`steward-spawner`), with this process's own
    /// executable as the exec shim: right for the `steward` binaries, whose
    /// `main` is [`crate::cli::entry::main`]. (In this crate's unit tests, whose
    /// harness has no shim mode, it is the built `steward` binary instead.)
    pub fn new() -> io::Result<Self> {
        Self::with_exec_shim(default_exec_shim())
    }

    /// Starts the spawner thread with `exec_shim` as the shim: an executable
    /// whose `main` calls [`run_exec_shim_if_requested`] first.
    pub fn with_exec_shim(exec_shim: impl Into<PathBuf>) -> io::Result<Self> {
        let (requests, inbox) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("steward-spawner".to_owned())
            .spawn(move || spawner_loop(&inbox))?;
        Ok(Spawner {
            inner: Arc::new(SpawnerInner {
                requests,
                thread: thread.thread().id(),
                exec_shim: exec_shim.into(),
            }),
            sink: None,
        })
    }

    /// This spawner (same thread), also sending the stderr lines of every
    /// process it starts to `sink`.
    pub fn with_stderr_sink(&self, sink: Arc<dyn StderrSink>) -> Spawner {
        Spawner {
            inner: Arc::clone(&self.inner),
            sink: Some(sink),
        }
    }

    /// The executable every child starts as (see the module docs).
    pub fn exec_shim(&self) -> &Path {
        &self.inner.exec_shim
    }

    /// The thread every child is spawned from (its death SIGKILLs them all).
    pub fn thread_id(&self) -> ThreadId {
        self.inner.thread
    }

    /// Reaps the zombie children this process did not spawn (orphans handed
    /// to a subreaper); never one whose status tokio waits for. Call it on
    /// SIGCHLD. Returns their pids.
    pub fn reap_orphans(&self) -> Vec<i32> {
        reaper::reap_unowned()
    }

    /// Kills every orphan handed to this process and what it started, and
    /// reaps them (at shutdown, after every server was stopped). Returns
    /// the pids killed.
    pub async fn kill_orphans(&self) -> Vec<u32> {
        let orphans = reaper::orphans(None);
        if !orphans.is_empty() && !reaper::kill(&orphans).await {
            tracing::error!(orphans = ?orphans.iter().map(|p| p.pid).collect::<Vec<_>>(), "orphaned descendants survived SIGKILL");
        }
        orphans.iter().map(|p| p.pid as u32).collect()
    }

    /// Resolves, sanitizes and starts `spec`: own process group, parent-death
    /// signal, stdin/stdout piped for the caller, stderr kept in a bounded
    /// tail. Must be called within a tokio runtime, which then reaps the child.
    pub async fn spawn(&self, spec: &ProcessSpec) -> Result<ManagedProcess, SpawnError> {
        let command_name = spec.program.clone();
        let (env, dropped_env) = sanitize_env(&spec.env);
        if !dropped_env.is_empty() {
            tracing::warn!(command = %command_name, dropped = ?dropped_env, "ignored env keys a config may not set");
        }
        let cwd = match &spec.cwd {
            Some(cwd) => cwd.clone(),
            None => std::env::current_dir().map_err(|error| SpawnError::Io {
                command: command_name.clone(),
                error,
            })?,
        };
        match fs::metadata(&cwd) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(SpawnError::BadCwd {
                    command: command_name,
                    cwd,
                    reason: "not a directory".to_owned(),
                });
            }
            Err(error) => {
                return Err(SpawnError::BadCwd {
                    command: command_name,
                    cwd,
                    reason: error.to_string(),
                });
            }
        }
        let search_path = std::env::var_os("PATH").unwrap_or_default();
        let program = resolve_command(&spec.program, &cwd, &search_path)?;

        let serial = SPAWNED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mark = reaper::mark(serial);
        // No `pre_exec` and an absolute shim path: std uses posix_spawn (the
        // shim arms PDEATHSIG instead; see the module docs).
        let mut command = Command::new(&self.inner.exec_shim);
        command
            .arg(EXEC_SHIM_ARG)
            .arg(std::process::id().to_string())
            .arg(&program)
            .args(&spec.args)
            .envs(&env)
            // After the config's env: a config cannot forge or drop it.
            .env(reaper::SERVER_MARK_VAR, &mark)
            .envs(
                ORIGINAL_FD_LIMIT
                    .get()
                    .map(|soft| (SHIM_FD_LIMIT_VAR, soft.to_string())),
            )
            .current_dir(&cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);

        let (reply, replied) = oneshot::channel();
        let gone = || SpawnError::SpawnerGone {
            command: command_name.clone(),
        };
        self.inner
            .requests
            .send(SpawnRequest {
                command,
                runtime: tokio::runtime::Handle::current(),
                reply,
            })
            .map_err(|_| gone())?;
        let (mut child, spawned_on) =
            replied
                .await
                .map_err(|_| gone())?
                .map_err(|error| match error.raw_os_error() {
                    Some(libc::EMFILE | libc::ENFILE) => SpawnError::OutOfDescriptors {
                        command: command_name.clone(),
                        limit: fd_limit().map_or(0, |(soft, _)| soft),
                    },
                    _ => SpawnError::Io {
                        command: command_name.clone(),
                        error,
                    },
                })?;

        let (Some(pid), Some(stdin), Some(stdout), Some(stderr)) = (
            child.id(),
            child.stdin.take(),
            child.stdout.take(),
            child.stderr.take(),
        ) else {
            // Not reachable for a freshly spawned child with piped stdio.
            return Err(SpawnError::Io {
                command: command_name,
                error: io::Error::other("spawned child has no pid or stdio pipes"),
            });
        };
        let pid = pid as i32;
        let pipe_inodes = [stdin.as_fd(), stdout.as_fd(), stderr.as_fd()]
            .into_iter()
            .filter_map(pipe_inode)
            .collect();
        // A private read end of stdout, only polled for "no writers left": the
        // caller takes the stdout handle itself.
        let stdout_probe = stdout.as_fd().try_clone_to_owned().ok();

        let mut stderr_tail = StderrTail::new(STDERR_TAIL_LINES, STDERR_TAIL_BYTES);
        if let Some(sink) = &self.sink {
            sink.started(pid as u32);
            stderr_tail.sink = Some((Arc::clone(sink), pid as u32));
        }
        let tail = Arc::new(Mutex::new(stderr_tail));
        let (stderr_eof_tx, stderr_eof) = watch::channel(false);
        let stderr_task = tokio::spawn(read_stderr(stderr, Arc::clone(&tail), stderr_eof_tx));

        let (exit_tx, exit) = watch::channel(None);
        let waited_command = command_name.clone();
        tokio::spawn(async move {
            let waited = child.wait().await;
            // Reaped (or given up on): no longer ours to protect.
            reaper::disown(pid);
            let info = match waited {
                Ok(status) => ExitInfo::from(status),
                Err(error) => {
                    tracing::warn!(command = %waited_command, pid, %error, "could not collect the exit status");
                    ExitInfo::UNKNOWN
                }
            };
            tracing::debug!(command = %waited_command, pid, exit = %info, "process exited");
            exit_tx.send_replace(Some(info));
        });

        tracing::debug!(command = %command_name, program = %program.display(), pid, "process started");
        // Whoever runs this spawn inside `SPAWNED_PID.scope` learns the pid now,
        // before any handshake (status shows it while `Starting`).
        let _ = SPAWNED_PID.try_with(|spawned| spawned.send_replace(Some(pid as u32)));
        Ok(ManagedProcess {
            command: command_name,
            program,
            pid,
            spawned_on,
            dropped_env,
            stdin: Some(stdin),
            stdout: Some(stdout),
            exit,
            tail,
            stderr_eof,
            stderr_task,
            stdout_probe,
            pipe_inodes,
            group_gone: false,
            report: None,
            mark,
            _spawner: Arc::clone(&self.inner),
        })
    }
}

fn spawner_loop(inbox: &mpsc::Receiver<SpawnRequest>) {
    // Ends when every Spawner and ManagedProcess is gone.
    while let Ok(SpawnRequest {
        mut command,
        runtime,
        reply,
    }) = inbox.recv()
    {
        // The child's pipes and reaper register with the caller's runtime.
        let _runtime = runtime.enter();
        let spawned = {
            // Held until the pid is recorded: the orphan reaper, which holds
            // it too, never sees the new child as someone else's.
            let mut owned = reaper::owned();
            // A panic must not end this thread: PDEATHSIG would kill every child.
            let spawned = std::panic::catch_unwind(AssertUnwindSafe(|| command.spawn()))
                .unwrap_or_else(|_| Err(io::Error::other("process spawn panicked")));
            if let Some(pid) = spawned.as_ref().ok().and_then(Child::id) {
                owned.push(pid as i32);
            }
            spawned.map(|child| (child, std::thread::current().id()))
        };
        if let Err(Ok((child, _))) = reply.send(spawned) {
            // The caller gave up waiting: nobody owns this child, so end it
            // (tokio reaps it; should the orphan reaper get there first,
            // nobody waits for that status anyway).
            if let Some(pid) = child.id() {
                let _ = send_signal(-(pid as i32), libc::SIGKILL);
                reaper::disown(pid as i32);
            }
        }
    }
}

/// The shim a [`Spawner`] uses by default: this executable, whatever has
/// become of the file on disk since it started. The spawned child resolves
/// the link, and until its `execve` it shares the controller's memory map.
#[cfg(not(test))]
fn default_exec_shim() -> PathBuf {
    PathBuf::from("/proc/self/exe")
}

/// The shim a [`Spawner`] uses by default in unit tests: the libtest harness
/// has no shim mode (it would take `__steward-exec` for a test filter and run
/// nothing), so the built `steward` binary stands in for it.
#[cfg(test)]
fn default_exec_shim() -> PathBuf {
    crate::runtime::test_support::steward_exe()
}

/// The exec shim's entry. When this process was started as
/// `[_, "__steward-exec", <controller pid>, <program>, <args>...]` (by a
/// [`Spawner`]) it never returns: it sets `PR_SET_PDEATHSIG(SIGKILL)`, exits
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
    if args.next().as_deref() == Some(OsStr::new(EXEC_SHIM_ARG)) {
        exec_shim(args);
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
    // `exec` restores SIGPIPE (which the Rust runtime ignores) to its default;
    // the signal mask is the spawner thread's, as with a plain fork + exec.
    let error = std::process::Command::new(&program)
        .args(args)
        .env_remove(SHIM_FD_LIMIT_VAR)
        .exec();
    eprintln!("cannot execute {}: {error}", Path::new(&program).display());
    std::process::exit(SHIM_CANNOT_EXECUTE)
}

/// The env var through which the shim learns the open-file limit to give
/// the server (removed before the exec).
const SHIM_FD_LIMIT_VAR: &str = "STEWARD_EXEC_NOFILE";

/// The soft open-file limit before [`raise_fd_limit`] raised it.
static ORIGINAL_FD_LIMIT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

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
fn set_fd_limit_soft(soft: u64) -> io::Result<()> {
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

/// One child process (the leader of its own process group), owned by exactly
/// one server runtime. Dropping it SIGKILLs the group (and escaped descendants
/// still attached to the leader); [`stop`](Self::stop) is the orderly way.
pub struct ManagedProcess {
    command: String,
    program: PathBuf,
    pid: i32,
    spawned_on: ThreadId,
    dropped_env: Vec<String>,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    exit: watch::Receiver<Option<ExitInfo>>,
    tail: Arc<Mutex<StderrTail>>,
    stderr_eof: watch::Receiver<bool>,
    stderr_task: JoinHandle<()>,
    stdout_probe: Option<OwnedFd>,
    pipe_inodes: Vec<u64>,
    /// Seen empty: the group id may be reused from now on, never signal it.
    group_gone: bool,
    report: Option<StopReport>,
    /// This server's mark ([`reaper::SERVER_MARK_VAR`]), which its
    /// descendants inherit.
    mark: String,
    /// Keeps the thread that spawned this child (its PDEATHSIG parent) alive.
    _spawner: Arc<SpawnerInner>,
}

impl fmt::Debug for ManagedProcess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManagedProcess")
            .field("command", &self.command)
            .field("pid", &self.pid)
            .field("exit", &*self.exit.borrow())
            .finish_non_exhaustive()
    }
}

impl ManagedProcess {
    /// Process id of the leader.
    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// Process group id; equal to [`pid`](Self::pid).
    pub fn pgid(&self) -> u32 {
        self.pid as u32
    }

    /// The command as configured.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// The absolute path that was executed.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// Config env keys that were not passed on ([`ENV_DENYLIST`]).
    pub fn dropped_env(&self) -> &[String] {
        &self.dropped_env
    }

    /// The thread that spawned this child ([`Spawner::thread_id`]).
    pub fn spawned_on(&self) -> ThreadId {
        self.spawned_on
    }

    /// The child's stdin, for the protocol client (once).
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.stdin.take()
    }

    /// The child's stdout, for the protocol client (once). Until taken nobody
    /// reads it, and a chatty child blocks when the pipe is full.
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.stdout.take()
    }

    /// The last `n` stderr lines, oldest first (an unterminated last line
    /// included).
    pub fn stderr_tail(&self, n: usize) -> Vec<String> {
        lock(&self.tail).last(n)
    }

    /// The leader's exit, if it has exited (cheap, never blocks).
    pub fn try_status(&self) -> Option<ExitInfo> {
        *self.exit.borrow()
    }

    /// Waits for the leader to exit, for whatever reason (stop included).
    /// After an unexpected exit call [`stop`](Self::stop) anyway: it clears
    /// what the leader left behind in its group.
    pub async fn exited(&self) -> ExitInfo {
        let mut exit = self.exit.clone();
        match exit.wait_for(Option::is_some).await {
            Ok(info) => info.unwrap_or(ExitInfo::UNKNOWN),
            // The waiter task is gone: its runtime is shutting down.
            Err(_) => ExitInfo::UNKNOWN,
        }
    }

    /// The leader's exit as a watch channel (`None` while running), for
    /// `select!` loops.
    pub fn exit_watch(&self) -> watch::Receiver<Option<ExitInfo>> {
        self.exit.clone()
    }

    /// Stops the process and everything it started. The protocol-level close
    /// is the caller's, before this. SIGTERM to the group (and to escaped
    /// descendants) → up to `grace` for all of them to exit → SIGKILL to what
    /// is left → leader reaped and the group empty (bounded) → processes still
    /// holding the stdio pipes are killed. Idempotent: a second call returns
    /// the first report. Never panics on signal errors.
    pub async fn stop(&mut self, grace: Duration) -> StopReport {
        if let Some(report) = &self.report {
            return report.clone();
        }
        let started = Instant::now();
        let term_deadline = started + grace;
        let pgid = self.pid;

        let already = self.try_status();
        // Snapshot before signalling: once the leader dies its children are
        // reparented and cannot be found from it any more.
        let tracked = if already.is_none() {
            descendants(self.pid)
        } else {
            Vec::new()
        };
        let outside: Vec<&ProcStat> = tracked.iter().filter(|p| p.pgid != pgid).collect();
        let mut escaped: Vec<u32> = outside.iter().map(|p| p.pid as u32).collect();

        self.signal_group(libc::SIGTERM);
        for process in &outside {
            signal_tracked(process, libc::SIGTERM);
        }

        let (outcome, mut exit) = match already {
            Some(info) => (StopOutcome::AlreadyExited, Some(info)),
            None => match tokio::time::timeout_at(term_deadline, self.exited()).await {
                Ok(info) => (StopOutcome::ExitedOnTerm, Some(info)),
                Err(_) => (StopOutcome::Killed, None),
            },
        };

        // The rest of the group (and the escapees) got SIGTERM with the
        // leader: they share its grace period.
        let mut stragglers_killed = false;
        if outcome != StopOutcome::Killed {
            stragglers_killed = !self.wait_group_empty(term_deadline, false).await;
            poll_until(term_deadline, || outside.iter().all(|p| !is_alive(p))).await;
        }
        if outcome == StopOutcome::Killed || stragglers_killed {
            self.signal_group(libc::SIGKILL);
        }
        if exit.is_none() {
            exit = tokio::time::timeout(KILL_WAIT, self.exited()).await.ok();
        }
        // Re-sends SIGKILL while waiting: members may still be forking.
        let group_empty = self
            .wait_group_empty(Instant::now() + KILL_WAIT, true)
            .await;

        // A tracked descendant still alive now is outside the group, whether
        // it left before the snapshot or during the stop.
        for process in tracked.iter().filter(|p| is_alive(p)) {
            if !escaped.contains(&(process.pid as u32)) {
                escaped.push(process.pid as u32);
            }
            signal_tracked(process, libc::SIGKILL);
        }
        let mut escapees_gone = poll_until(Instant::now() + KILL_WAIT, || {
            tracked.iter().all(|p| !is_alive(p))
        })
        .await;
        // Descendants that escaped before the snapshot (or after the leader
        // died on its own) were handed to this process, a subreaper, when
        // their parents died: found by the server's mark.
        let orphans = reaper::orphans(Some(&self.mark));
        if !orphans.is_empty() {
            escapees_gone &= reaper::kill(&orphans).await;
            for orphan in &orphans {
                if !escaped.contains(&(orphan.pid as u32)) {
                    escaped.push(orphan.pid as u32);
                }
            }
        }
        if !escaped.is_empty() {
            tracing::warn!(command = %self.command, pid = self.pid, escaped = ?escaped, "descendants had left the process group (setsid/setpgid); terminated them with it");
        }

        let (leaked, pipes_closed) = self.kill_pipe_holders().await;
        if !leaked.is_empty() {
            tracing::warn!(command = %self.command, pid = self.pid, leaked = ?leaked, "processes outside the group kept the stdio pipes open; killed them");
        }

        let report = StopReport {
            outcome,
            exit,
            stragglers_killed,
            escaped,
            leaked,
            clean: group_empty && escapees_gone && pipes_closed,
            elapsed: started.elapsed(),
        };
        if report.clean {
            tracing::debug!(command = %self.command, pid = self.pid, report = ?report, "process stopped");
        } else {
            tracing::error!(command = %self.command, pid = self.pid, report = ?report, group_empty, escapees_gone, pipes_closed, "process stop left something behind");
        }
        self.report = Some(report.clone());
        report
    }

    /// `kill(-pgid, sig)` unless the group is known gone; ESRCH marks it gone.
    fn signal_group(&mut self, signal: i32) {
        if self.group_gone {
            return;
        }
        match send_signal(-self.pid, signal) {
            Ok(()) => {}
            Err(error) if error.raw_os_error() == Some(libc::ESRCH) => self.group_gone = true,
            Err(error) => {
                tracing::warn!(command = %self.command, pgid = self.pid, signal, %error, "could not signal the process group");
            }
        }
    }

    async fn wait_group_empty(&mut self, deadline: Instant, keep_killing: bool) -> bool {
        if self.group_gone {
            return true;
        }
        let pgid = self.pid;
        let empty = poll_until(deadline, || {
            let empty = group_is_empty(pgid);
            if !empty && keep_killing {
                let _ = send_signal(-pgid, libc::SIGKILL);
            }
            empty
        })
        .await;
        self.group_gone |= empty;
        empty
    }

    /// Stdout or stderr still has a writer (this process aside).
    fn pipes_open(&self) -> bool {
        !*self.stderr_eof.borrow()
            || self
                .stdout_probe
                .as_ref()
                .is_some_and(|fd| pipe_has_writers(fd.as_fd()))
    }

    /// With the group empty, anyone still writing to the child's pipes is a
    /// leaked descendant. Returns the pids killed and whether the pipes closed.
    async fn kill_pipe_holders(&mut self) -> (Vec<u32>, bool) {
        if poll_until(Instant::now() + PIPE_LEAK_TIMEOUT, || !self.pipes_open()).await {
            return (Vec::new(), true);
        }
        let mut leaked = Vec::new();
        for _ in 0..3 {
            let inodes = self.pipe_inodes.clone();
            let holders = tokio::task::spawn_blocking(move || pipe_holders(&inodes))
                .await
                .unwrap_or_default();
            if holders.is_empty() {
                break;
            }
            for holder in &holders {
                if signal_tracked(holder, libc::SIGKILL) && !leaked.contains(&(holder.pid as u32)) {
                    leaked.push(holder.pid as u32);
                }
            }
            if poll_until(Instant::now() + KILL_WAIT, || !self.pipes_open()).await {
                return (leaked, true);
            }
        }
        // No holder (left): the stderr reader may just be behind.
        let closed = poll_until(Instant::now() + KILL_WAIT, || !self.pipes_open()).await;
        (leaked, closed)
    }
}

impl Drop for ManagedProcess {
    fn drop(&mut self) {
        self.stderr_task.abort();
        if self.group_gone {
            return;
        }
        if self.report.is_none() && self.try_status().is_none() {
            for process in descendants(self.pid).iter().filter(|p| p.pgid != self.pid) {
                signal_tracked(process, libc::SIGKILL);
            }
        }
        // The waiter task reaps the leader.
        let _ = send_signal(-self.pid, libc::SIGKILL);
    }
}

async fn read_stderr(
    mut stderr: ChildStderr,
    tail: Arc<Mutex<StderrTail>>,
    eof: watch::Sender<bool>,
) {
    let mut buf = vec![0u8; 8 * 1024];
    loop {
        match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => lock(&tail).push(&buf[..n]),
        }
    }
    lock(&tail).finish();
    eof.send_replace(true);
}

/// The last lines of a stream, bounded by line count and bytes; each line
/// also goes to the spawner's sink, if any.
struct StderrTail {
    lines: VecDeque<String>,
    bytes: usize,
    partial: Vec<u8>,
    max_lines: usize,
    max_bytes: usize,
    sink: Option<(Arc<dyn StderrSink>, u32)>,
}

impl fmt::Debug for StderrTail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StderrTail")
            .field("lines", &self.lines.len())
            .field("bytes", &self.bytes)
            .finish_non_exhaustive()
    }
}

impl StderrTail {
    fn new(max_lines: usize, max_bytes: usize) -> Self {
        StderrTail {
            lines: VecDeque::new(),
            bytes: 0,
            partial: Vec::new(),
            max_lines: max_lines.max(1),
            max_bytes: max_bytes.max(1),
            sink: None,
        }
    }

    fn push(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let room = self.max_bytes - self.partial.len();
            let take = data.len().min(room);
            match data[..take].iter().position(|&b| b == b'\n') {
                Some(newline) => {
                    self.partial.extend_from_slice(&data[..newline]);
                    data = &data[newline + 1..];
                    self.end_line();
                }
                None => {
                    self.partial.extend_from_slice(&data[..take]);
                    data = &data[take..];
                    if self.partial.len() >= self.max_bytes {
                        self.end_line();
                    }
                }
            }
        }
    }

    /// End of stream: the unterminated last line becomes a line.
    fn finish(&mut self) {
        if !self.partial.is_empty() {
            self.end_line();
        }
    }

    fn end_line(&mut self) {
        let raw = std::mem::take(&mut self.partial);
        let mut line = String::from_utf8_lossy(&raw).into_owned();
        if line.ends_with('\r') {
            line.pop();
        }
        // Called under the tail's lock, so lines reach the sink in order.
        if let Some((sink, pid)) = &self.sink {
            sink.line(*pid, &line);
        }
        self.bytes += line.len();
        self.lines.push_back(line);
        while self.lines.len() > self.max_lines
            || (self.bytes > self.max_bytes && self.lines.len() > 1)
        {
            if let Some(old) = self.lines.pop_front() {
                self.bytes -= old.len();
            }
        }
    }

    fn last(&self, n: usize) -> Vec<String> {
        let partial =
            (!self.partial.is_empty()).then(|| String::from_utf8_lossy(&self.partial).into_owned());
        let from_lines = n.saturating_sub(usize::from(partial.is_some()));
        let skip = self.lines.len().saturating_sub(from_lines);
        self.lines
            .iter()
            .skip(skip)
            .cloned()
            .chain(partial)
            .collect()
    }
}

/// Waits until `done` holds or `deadline` passes (polling with backoff);
/// returns whether it held.
async fn poll_until(deadline: Instant, mut done: impl FnMut() -> bool) -> bool {
    let mut pause = POLL_MIN;
    loop {
        if done() {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        tokio::time::sleep(pause.min(deadline - now)).await;
        pause = (pause * 2).min(POLL_MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::procfs::read_stat;
    use tokio::io::{AsyncBufReadExt, BufReader};

    /// Deadline for conditions that should hold quickly (generous: the
    /// machine is shared and busy).
    const SOON: Duration = Duration::from_secs(10);

    fn sh(script: &str) -> ProcessSpec {
        ProcessSpec {
            program: "/bin/sh".to_owned(),
            args: vec!["-c".to_owned(), script.to_owned()],
            ..ProcessSpec::default()
        }
    }

    fn spawner() -> Spawner {
        Spawner::new().expect("start the spawner thread")
    }

    async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
        assert!(
            poll_until(Instant::now() + SOON, &mut condition).await,
            "timed out waiting until {what}"
        );
    }

    /// Kills remembered test processes that are still alive when the test
    /// ends, pass or fail.
    #[derive(Default)]
    struct Cleanup(Vec<ProcStat>);

    impl Cleanup {
        fn track(&mut self, pid: i32) -> ProcStat {
            let stat = read_stat(pid).unwrap_or_else(|| panic!("process {pid} is not running"));
            self.0.push(stat);
            stat
        }
    }

    impl Drop for Cleanup {
        fn drop(&mut self) {
            for process in &self.0 {
                signal_tracked(process, libc::SIGKILL);
            }
        }
    }

    fn lines_of(process: &mut ManagedProcess) -> tokio::io::Lines<BufReader<ChildStdout>> {
        BufReader::new(process.take_stdout().expect("stdout")).lines()
    }

    async fn next_line(lines: &mut tokio::io::Lines<BufReader<ChildStdout>>) -> String {
        tokio::time::timeout(SOON, lines.next_line())
            .await
            .expect("timed out reading a line")
            .expect("read stdout")
            .expect("stdout ended early")
    }

    async fn read_all(process: &mut ManagedProcess) -> String {
        let mut out = String::new();
        let mut stdout = process.take_stdout().expect("stdout");
        tokio::time::timeout(SOON, stdout.read_to_string(&mut out))
            .await
            .expect("timed out reading stdout")
            .expect("read stdout");
        out
    }

    fn comm(pid: i32) -> String {
        fs::read_to_string(format!("/proc/{pid}/comm"))
            .unwrap_or_default()
            .trim()
            .to_owned()
    }

    fn write_executable(path: &Path, mode: u32) {
        fs::write(path, "#!/bin/sh\nexit 0\n").expect("write file");
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).expect("chmod");
    }

    // ---- pure: env, command resolution, stat parsing, stderr tail ----

    #[test]
    fn sanitize_env_drops_keys_with_an_equals_sign_or_nul_and_values_with_nul() {
        let env = BTreeMap::from([
            ("LD_PRELOAD=/x/evil.so:".to_owned(), "x".to_owned()),
            ("ld_preload\0tail".to_owned(), "/x/evil.so".to_owned()),
            ("GOOD=x".to_owned(), "y".to_owned()),
            ("=".to_owned(), "x".to_owned()),
            (String::new(), "x".to_owned()),
            ("NUL_VALUE".to_owned(), "a\0b".to_owned()),
            ("OK".to_owned(), "a=b".to_owned()),
        ]);
        let (kept, dropped) = sanitize_env(&env);
        assert_eq!(kept, BTreeMap::from([("OK".to_owned(), "a=b".to_owned())]));
        assert_eq!(dropped.len(), 6, "{dropped:?}");
    }

    #[tokio::test]
    async fn an_env_key_with_an_equals_sign_never_reaches_the_child() {
        let spec = ProcessSpec {
            env: BTreeMap::from([
                (
                    "LD_PRELOAD=/nonexistent/evil.so:".to_owned(),
                    "x".to_owned(),
                ),
                ("STEWARD_GOOD".to_owned(), "1".to_owned()),
            ]),
            ..sh("env")
        };
        let mut process = spawner().spawn(&spec).await.unwrap();
        let out = read_all(&mut process).await;
        assert!(out.lines().any(|l| l == "STEWARD_GOOD=1"), "{out}");
        assert!(!out.contains("LD_PRELOAD"), "{out}");
        assert_eq!(process.dropped_env(), ["LD_PRELOAD=/nonexistent/evil.so:"]);
        process.stop(Duration::from_secs(1)).await;
    }

    #[test]
    fn sanitize_env_drops_denylisted_keys_in_any_case() {
        let env = BTreeMap::from([
            ("Ld_PreLoad".to_owned(), "/tmp/x.so".to_owned()),
            ("node_options".to_owned(), "--require x".to_owned()),
            ("LD_LIBRARY_PATH".to_owned(), "/x".to_owned()),
            ("ld_audit".to_owned(), "x".to_owned()),
            ("DYLD_INSERT_LIBRARIES".to_owned(), "x".to_owned()),
            ("dyld_library_path".to_owned(), "x".to_owned()),
            ("PATH".to_owned(), "/opt/bin".to_owned()),
            ("LD_PRELOADX".to_owned(), "kept".to_owned()),
            ("TOKEN".to_owned(), "t".to_owned()),
        ]);
        let (kept, dropped) = sanitize_env(&env);
        assert_eq!(
            dropped,
            [
                "DYLD_INSERT_LIBRARIES",
                "LD_LIBRARY_PATH",
                "Ld_PreLoad",
                "dyld_library_path",
                "ld_audit",
                "node_options"
            ]
        );
        assert_eq!(
            kept.keys().collect::<Vec<_>>(),
            ["LD_PRELOADX", "PATH", "TOKEN"]
        );
        assert_eq!(kept["PATH"], "/opt/bin");
    }

    #[test]
    fn resolve_bare_name_searches_only_the_given_path() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        fs::create_dir_all(&a).unwrap();
        fs::create_dir_all(&b).unwrap();
        write_executable(&a.join("tool"), 0o644); // not executable: skipped
        write_executable(&b.join("tool"), 0o755);
        let search =
            std::env::join_paths(["", "relative/dir", a.to_str().unwrap(), b.to_str().unwrap()])
                .unwrap();
        let found = resolve_command("tool", Path::new("/"), &search).unwrap();
        assert_eq!(found, b.join("tool"));

        let error = resolve_command("nope-steward", Path::new("/"), &search).unwrap_err();
        assert!(
            matches!(error, SpawnError::CommandNotFound { .. }),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(
            message.contains("nope-steward") && message.contains(b.to_str().unwrap()),
            "{message}"
        );
    }

    #[test]
    fn resolve_reports_not_executable_and_directories_distinctly() {
        let dir = tempfile::tempdir().unwrap();
        write_executable(&dir.path().join("plain"), 0o644);
        fs::create_dir(dir.path().join("adir")).unwrap();
        let search = dir.path().as_os_str();

        let error = resolve_command("plain", Path::new("/"), search).unwrap_err();
        assert!(
            matches!(&error, SpawnError::NotExecutable { reason, .. } if reason.contains("permission")),
            "{error:?}"
        );
        let error = resolve_command("adir", Path::new("/"), search).unwrap_err();
        assert!(
            matches!(&error, SpawnError::NotExecutable { reason, .. } if reason.contains("directory")),
            "{error:?}"
        );
        let error = resolve_command("./adir", dir.path(), OsStr::new("")).unwrap_err();
        assert!(
            matches!(error, SpawnError::NotExecutable { .. }),
            "{error:?}"
        );
        assert!(matches!(
            resolve_command("", dir.path(), search),
            Err(SpawnError::EmptyCommand)
        ));
    }

    #[test]
    fn resolve_path_with_slash_is_relative_to_cwd_and_ignores_path() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("bin")).unwrap();
        write_executable(&dir.path().join("bin/tool"), 0o755);
        let found = resolve_command("bin/tool", dir.path(), OsStr::new("/usr/bin")).unwrap();
        assert_eq!(found, dir.path().join("bin/tool"));
        let dotted = resolve_command("./bin/./tool", dir.path(), OsStr::new("")).unwrap();
        assert_eq!(dotted, dir.path().join("bin/tool"), "`.` segments dropped");
        assert_eq!(
            resolve_command("/bin/sh", dir.path(), OsStr::new("")).unwrap(),
            Path::new("/bin/sh")
        );
        let error = resolve_command("bin/missing", dir.path(), OsStr::new("/usr/bin")).unwrap_err();
        assert!(
            matches!(error, SpawnError::CommandNotFound { .. }),
            "{error:?}"
        );
        assert!(error.to_string().contains("bin/missing"), "{error}");
    }

    #[test]
    fn stderr_tail_keeps_the_last_lines_within_both_bounds() {
        let mut tail = StderrTail::new(3, 1000);
        tail.push(b"one\ntwo\r\nthr");
        assert_eq!(tail.last(10), ["one", "two", "thr"]);
        tail.push(b"ee\nfour\nfive\n");
        assert_eq!(tail.last(10), ["three", "four", "five"]);
        assert_eq!(tail.last(2), ["four", "five"]);
        assert!(tail.last(0).is_empty());

        let mut tail = StderrTail::new(1000, 100);
        for i in 0..50 {
            tail.push(format!("line {i:02} {}\n", "x".repeat(20)).as_bytes());
        }
        let lines = tail.last(usize::MAX);
        assert!(
            lines.iter().map(String::len).sum::<usize>() <= 100,
            "{lines:?}"
        );
        assert!(lines.last().unwrap().starts_with("line 49"), "{lines:?}");
        assert!(
            lines.windows(2).all(|w| w[0] < w[1]),
            "out of order: {lines:?}"
        );

        // A line with no newline is split at the byte cap: memory stays bounded.
        let mut tail = StderrTail::new(10, 8);
        tail.push(&[b'a'; 20]);
        tail.finish();
        assert_eq!(tail.last(10), ["aaaa"]);
        assert!(tail.partial.is_empty() && tail.bytes <= 8);
    }

    // ---- spawning ----

    #[tokio::test]
    async fn child_leads_its_own_process_group() {
        let mut process = spawner()
            .spawn(&sh("echo ready; exec sleep 1000"))
            .await
            .unwrap();
        let mut lines = lines_of(&mut process);
        assert_eq!(next_line(&mut lines).await, "ready");
        let stat = read_stat(process.pid() as i32).unwrap();
        assert_eq!(process.pgid(), process.pid());
        assert_eq!(stat.pgid as u32, process.pid());
        assert_eq!(stat.ppid as u32, std::process::id());
        assert_eq!(process.program(), Path::new("/bin/sh"));
        assert!(process.try_status().is_none());
        assert!(process.stop(Duration::from_secs(5)).await.clean);
    }

    #[tokio::test]
    async fn child_env_has_config_env_and_path_but_no_denylisted_keys() {
        let mut spec = ProcessSpec {
            program: "env".to_owned(), // bare: resolved with the controller's PATH
            ..ProcessSpec::default()
        };
        spec.env = BTreeMap::from([
            ("Ld_PreLoad".to_owned(), "/tmp/steward-evil.so".to_owned()),
            (
                "node_options".to_owned(),
                "--require=steward-evil".to_owned(),
            ),
            ("STEWARD_TEST_FOO".to_owned(), "bar baz".to_owned()),
            (
                "PATH".to_owned(),
                "/nonexistent-steward:/usr/bin:/bin".to_owned(),
            ),
        ]);
        let mut process = spawner().spawn(&spec).await.unwrap();
        assert_eq!(process.dropped_env(), ["Ld_PreLoad", "node_options"]);
        let out = read_all(&mut process).await;
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines.contains(&"STEWARD_TEST_FOO=bar baz"), "{out}");
        assert!(
            lines.contains(&"PATH=/nonexistent-steward:/usr/bin:/bin"),
            "{out}"
        );
        assert!(!out.contains("steward-evil"), "{out}");
        assert!(
            !lines
                .iter()
                .any(|l| l.starts_with("Ld_PreLoad=") || l.starts_with("node_options=")),
            "{out}"
        );
        assert_eq!(process.exited().await.code, Some(0));
        process.stop(Duration::from_secs(1)).await;
    }

    #[tokio::test]
    async fn config_path_is_not_used_to_resolve_the_command() {
        let dir = tempfile::tempdir().unwrap();
        write_executable(&dir.path().join("evil-steward-test"), 0o755);
        let spec = ProcessSpec {
            program: "evil-steward-test".to_owned(),
            env: BTreeMap::from([("PATH".to_owned(), dir.path().display().to_string())]),
            ..ProcessSpec::default()
        };
        let error = spawner().spawn(&spec).await.unwrap_err();
        assert!(
            matches!(error, SpawnError::CommandNotFound { .. }),
            "{error:?}"
        );
        assert!(error.to_string().contains("evil-steward-test"), "{error}");
    }

    #[tokio::test]
    async fn cwd_is_honoured_for_the_child_and_relative_commands() {
        let dir = tempfile::tempdir().unwrap();
        let spawner = spawner();
        let mut spec = sh("pwd -P");
        spec.cwd = Some(dir.path().to_owned());
        let mut process = spawner.spawn(&spec).await.unwrap();
        let out = read_all(&mut process).await;
        assert_eq!(Path::new(out.trim()), dir.path().canonicalize().unwrap());
        process.stop(Duration::from_secs(1)).await;

        // A symlink, not a freshly written script: exec'ing a file just
        // written races with forks in parallel tests (ETXTBSY).
        fs::create_dir(dir.path().join("bin")).unwrap();
        std::os::unix::fs::symlink("/bin/echo", dir.path().join("bin/tool")).unwrap();
        let spec = ProcessSpec {
            program: "bin/tool".to_owned(),
            args: vec!["tool ran".to_owned()],
            cwd: Some(dir.path().to_owned()),
            ..ProcessSpec::default()
        };
        let mut process = spawner.spawn(&spec).await.unwrap();
        assert_eq!(read_all(&mut process).await, "tool ran\n");
        process.stop(Duration::from_secs(1)).await;

        let mut spec = sh("true");
        spec.cwd = Some(dir.path().join("missing"));
        let error = spawner.spawn(&spec).await.unwrap_err();
        assert!(matches!(error, SpawnError::BadCwd { .. }), "{error:?}");
    }

    #[tokio::test]
    async fn stderr_tail_is_bounded_and_ordered() {
        let script = r#"i=0; while [ $i -lt 500 ]; do echo "line $i" >&2; i=$((i+1)); done; printf 'no newline' >&2"#;
        let mut process = spawner().spawn(&sh(script)).await.unwrap();
        assert_eq!(process.exited().await.code, Some(0));
        let mut eof = process.stderr_eof.clone();
        tokio::time::timeout(SOON, eof.wait_for(|&eof| eof))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            process.stderr_tail(3),
            ["line 498", "line 499", "no newline"]
        );
        let all = process.stderr_tail(usize::MAX);
        assert_eq!(all.len(), STDERR_TAIL_LINES);
        assert_eq!(all[0], "line 301");
        process.stop(Duration::from_secs(1)).await;
    }

    #[tokio::test]
    async fn unexpected_exit_is_observed_with_code_or_signal() {
        let spawner = spawner();
        let mut process = spawner.spawn(&sh("exit 3")).await.unwrap();
        let mut watch = process.exit_watch();
        let info = process.exited().await;
        assert_eq!(
            info,
            ExitInfo {
                code: Some(3),
                signal: None
            }
        );
        assert_eq!(process.try_status(), Some(info));
        assert_eq!(*watch.wait_for(Option::is_some).await.unwrap(), Some(info));
        assert_eq!(info.to_string(), "exited with code 3");
        let report = process.stop(Duration::from_secs(1)).await;
        assert_eq!(report.outcome, StopOutcome::AlreadyExited);
        assert_eq!(report.exit, Some(info));
        assert!(report.clean, "{report:?}");

        let mut process = spawner.spawn(&sh("kill -KILL $$")).await.unwrap();
        let info = process.exited().await;
        assert_eq!(
            info,
            ExitInfo {
                code: None,
                signal: Some(libc::SIGKILL)
            }
        );
        assert_eq!(info.to_string(), "killed by signal 9 (SIGKILL)");
        process.stop(Duration::from_secs(1)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_fork_happens_on_the_dedicated_spawner_thread() {
        // PDEATHSIG follows the forking *thread*. Waiting out the blocking
        // pool's 10 s idle timeout is too slow for a unit test, so check the
        // structure instead: every child, spawned from any task, was forked by
        // the one named spawner thread — never a runtime or blocking-pool
        // thread — and that thread is still serving after earlier spawns.
        let spawner = spawner();
        let mut first = spawner.spawn(&sh("exec sleep 1000")).await.unwrap();
        let other = spawner.clone();
        let mut second =
            tokio::spawn(async move { other.spawn(&sh("exec sleep 1000")).await.unwrap() })
                .await
                .unwrap();
        assert_eq!(first.spawned_on(), spawner.thread_id());
        assert_eq!(second.spawned_on(), spawner.thread_id());
        assert_ne!(spawner.thread_id(), std::thread::current().id());
        let on_blocking_pool = tokio::task::spawn_blocking(|| std::thread::current().id())
            .await
            .unwrap();
        assert_ne!(spawner.thread_id(), on_blocking_pool);
        first.stop(Duration::from_secs(5)).await;
        second.stop(Duration::from_secs(5)).await;
    }

    // ---- the exec shim ----

    /// Runs the shim directly (not through a Spawner), as a child of this
    /// test process.
    fn run_shim(args: &[&OsStr]) -> std::process::Output {
        std::process::Command::new(crate::runtime::test_support::steward_exe())
            .arg(EXEC_SHIM_ARG)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run the exec shim")
    }

    #[test]
    fn exec_shim_refuses_to_exec_when_the_given_pid_is_not_its_parent() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let touch = |parent: u32| {
            let parent = parent.to_string();
            let args = [parent.as_ref(), "/bin/sh".as_ref(), "-c".as_ref()];
            let script = [r#"touch "$1""#.as_ref(), "sh".as_ref(), marker.as_os_str()];
            run_shim(&[&args[..], &script[..]].concat())
        };

        // A live process, but not the shim's parent (this process is): as if
        // the controller had died between the spawn and the prctl.
        let output = touch(std::os::unix::process::parent_id());
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        assert!(
            output.stdout.is_empty() && output.stderr.is_empty(),
            "{output:?}"
        );
        assert!(!marker.exists(), "the program ran");

        let output = touch(std::process::id());
        assert!(output.status.success(), "{output:?}");
        assert!(marker.exists(), "the program did not run");
    }

    #[test]
    fn exec_shim_rejects_malformed_arguments() {
        for args in [&[][..], &["not-a-pid", "/bin/true"], &["1"]] {
            let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
            let output = run_shim(&args);
            assert_eq!(output.status.code(), Some(127), "{args:?}: {output:?}");
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(stderr.starts_with("usage: "), "{args:?}: {stderr}");
        }
    }

    #[tokio::test]
    async fn program_runs_in_place_of_the_shim_with_its_own_path_as_argv0() {
        let script = r#"printf '%s\n' "$0" "$$"; tr '\0' ' ' < /proc/$$/cmdline"#;
        let mut process = spawner().spawn(&sh(script)).await.unwrap();
        let out = read_all(&mut process).await;
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[..2], ["/bin/sh", &process.pid().to_string()], "{out}");
        assert_eq!(lines[2], format!("/bin/sh -c {script} "), "{out}");
        assert_eq!(process.exited().await.code, Some(0));
        process.stop(Duration::from_secs(1)).await;
    }

    #[tokio::test]
    async fn program_starts_with_sigpipe_neither_ignored_nor_blocked() {
        // The shim is a Rust program, whose runtime ignores SIGPIPE; an
        // ignored signal stays ignored across exec unless reset.
        // grep itself, not a shell: dash blocks signals while it forks.
        let spec = ProcessSpec {
            program: "grep".to_owned(),
            args: ["-E", "^Sig(Blk|Ign):", "/proc/self/status"]
                .map(str::to_owned)
                .into(),
            ..ProcessSpec::default()
        };
        let mut process = spawner().spawn(&spec).await.unwrap();
        let out = read_all(&mut process).await;
        let sigpipe = 1u64 << (libc::SIGPIPE - 1);
        for line in out.lines() {
            let (name, mask) = line.split_once(':').unwrap();
            let mask = u64::from_str_radix(mask.trim(), 16).unwrap();
            assert_eq!(mask & sigpipe, 0, "SIGPIPE in {name}: {out}");
        }
        assert_eq!(out.lines().count(), 2, "{out}");
        process.stop(Duration::from_secs(1)).await;
    }

    #[tokio::test]
    async fn program_that_cannot_be_executed_exits_127_with_the_reason_on_stderr() {
        // Passes resolve_command (a file with execute permission); execve
        // fails with ENOENT for the missing interpreter.
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("no-interpreter");
        fs::write(&script, "#!/nonexistent-steward/interpreter\n").unwrap();
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
        let spec = ProcessSpec {
            program: script.display().to_string(),
            ..ProcessSpec::default()
        };
        let mut process = spawner().spawn(&spec).await.expect("the shim starts");
        assert_eq!(
            process.exited().await,
            ExitInfo {
                code: Some(127),
                signal: None
            }
        );
        let mut eof = process.stderr_eof.clone();
        tokio::time::timeout(SOON, eof.wait_for(|&eof| eof))
            .await
            .unwrap()
            .unwrap();
        let tail = process.stderr_tail(10);
        // The reason is ENOENT, unless a child forked by a parallel test
        // still held the file open for writing (ETXTBSY): the same path.
        let prefix = format!("cannot execute {}: ", script.display());
        assert!(tail.len() == 1 && tail[0].starts_with(&prefix), "{tail:?}");
        assert!(process.stop(Duration::from_secs(1)).await.clean);
    }

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

    // ---- stopping ----

    #[tokio::test]
    async fn cooperative_child_exits_on_term() {
        let script = r#"trap 'exit 7' TERM; sleep 1000 & echo $!; wait"#;
        let mut process = spawner().spawn(&sh(script)).await.unwrap();
        let mut lines = lines_of(&mut process);
        let grandchild: i32 = next_line(&mut lines).await.parse().unwrap();
        // Between fork and exec the background child still runs the shell's
        // trap handler and would swallow the TERM (then it is a straggler).
        eventually("the grandchild runs sleep", || comm(grandchild) == "sleep").await;
        let report = process.stop(Duration::from_secs(10)).await;
        assert_eq!(report.outcome, StopOutcome::ExitedOnTerm, "{report:?}");
        assert_eq!(
            report.exit,
            Some(ExitInfo {
                code: Some(7),
                signal: None
            })
        );
        assert!(!report.stragglers_killed && report.clean, "{report:?}");
        assert!(report.elapsed < Duration::from_secs(5), "{report:?}");
        // Idempotent.
        assert_eq!(process.stop(Duration::from_secs(10)).await, report);
    }

    #[tokio::test]
    async fn child_ignoring_term_is_killed_after_grace() {
        let script = r#"trap '' TERM; echo ready; while :; do sleep 1; done"#;
        let mut cleanup = Cleanup::default();
        let mut process = spawner().spawn(&sh(script)).await.unwrap();
        let mut lines = lines_of(&mut process);
        assert_eq!(next_line(&mut lines).await, "ready");
        let leader = cleanup.track(process.pid() as i32);
        let grace = Duration::from_millis(300);
        let report = process.stop(grace).await;
        assert_eq!(report.outcome, StopOutcome::Killed, "{report:?}");
        assert_eq!(
            report.exit,
            Some(ExitInfo {
                code: None,
                signal: Some(libc::SIGKILL)
            })
        );
        assert!(report.clean, "{report:?}");
        assert!(report.elapsed >= grace, "{report:?}");
        assert!(!is_alive(&leader), "leader survived");
    }

    #[tokio::test]
    async fn grandchild_in_the_group_is_gone_after_stop() {
        let mut cleanup = Cleanup::default();
        let mut process = spawner()
            .spawn(&sh("sleep 1000 & echo $!; wait"))
            .await
            .unwrap();
        let mut lines = lines_of(&mut process);
        let pid: i32 = next_line(&mut lines).await.parse().unwrap();
        eventually("the grandchild runs sleep", || comm(pid) == "sleep").await;
        let grandchild = cleanup.track(pid);
        assert_eq!(grandchild.pgid as u32, process.pgid());
        let report = process.stop(Duration::from_secs(5)).await;
        assert_eq!(report.outcome, StopOutcome::ExitedOnTerm, "{report:?}");
        assert!(
            report.clean && report.escaped.is_empty() && report.leaked.is_empty(),
            "{report:?}"
        );
        assert!(
            !is_alive(&grandchild),
            "grandchild {} survived",
            grandchild.pid
        );
    }

    #[tokio::test]
    async fn grandchild_ignoring_term_is_killed_as_a_straggler() {
        let mut cleanup = Cleanup::default();
        let script = r#"(trap '' TERM; exec sleep 1000) & echo $!; wait"#;
        let mut process = spawner().spawn(&sh(script)).await.unwrap();
        let mut lines = lines_of(&mut process);
        let pid: i32 = next_line(&mut lines).await.parse().unwrap();
        // It ignores TERM once it has exec'd sleep (the trap came first).
        eventually("the grandchild runs sleep", || comm(pid) == "sleep").await;
        let grandchild = cleanup.track(pid);
        let report = process.stop(Duration::from_millis(300)).await;
        assert_eq!(report.outcome, StopOutcome::ExitedOnTerm, "{report:?}");
        assert_eq!(report.exit.and_then(|e| e.signal), Some(libc::SIGTERM));
        assert!(report.stragglers_killed && report.clean, "{report:?}");
        assert!(!is_alive(&grandchild));
    }

    /// Session id of a process (field 6 of /proc/<pid>/stat).
    fn session_of(pid: i32) -> Option<i32> {
        let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        text.rsplit_once(") ")?
            .1
            .split_whitespace()
            .nth(3)?
            .parse()
            .ok()
    }

    /// A shell prefix that runs the rest of the command line in a new session:
    /// util-linux `setsid`, else python3.
    fn setsid_prefix() -> &'static str {
        let path = std::env::var_os("PATH").unwrap_or_default();
        if resolve_command("setsid", Path::new("/"), &path).is_ok() {
            "setsid"
        } else {
            r#"python3 -c 'import os, sys; os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])'"#
        }
    }

    #[tokio::test]
    async fn grandchild_that_calls_setsid_is_detected_and_killed() {
        let mut cleanup = Cleanup::default();
        // stdio to /dev/null: found through the process tree, not the pipes.
        let script = format!(
            "{} sleep 1000 </dev/null >/dev/null 2>&1 & echo $!; wait",
            setsid_prefix()
        );
        let mut process = spawner().spawn(&sh(&script)).await.unwrap();
        let mut lines = lines_of(&mut process);
        let pid: i32 = next_line(&mut lines).await.parse().unwrap();
        eventually("the grandchild leads its own session", || {
            session_of(pid) == Some(pid)
        })
        .await;
        let escapee = cleanup.track(pid);
        assert_ne!(escapee.pgid as u32, process.pgid());
        let report = process.stop(Duration::from_secs(5)).await;
        assert_eq!(report.escaped, [pid as u32], "{report:?}");
        assert!(report.clean, "{report:?}");
        assert!(!is_alive(&escapee), "escaped grandchild {pid} survived");
    }

    #[tokio::test]
    async fn process_holding_the_pipes_after_the_leader_exits_is_a_leak() {
        let mut cleanup = Cleanup::default();
        // The leader exits at once; the escapee keeps stdout and stderr. The
        // tree snapshot cannot see it (no leader left): only the pipes can.
        let script = format!(
            r#"{} sh -c 'echo $$; exec sleep 1000' & exit 0"#,
            setsid_prefix()
        );
        let mut process = spawner().spawn(&sh(&script)).await.unwrap();
        let mut lines = lines_of(&mut process);
        let pid: i32 = next_line(&mut lines).await.parse().unwrap();
        assert_eq!(process.exited().await.code, Some(0));
        eventually("the leak runs sleep in its own session", || {
            comm(pid) == "sleep" && session_of(pid) == Some(pid)
        })
        .await;
        let leak = cleanup.track(pid);
        let report = process.stop(Duration::from_secs(1)).await;
        assert_eq!(report.outcome, StopOutcome::AlreadyExited, "{report:?}");
        assert_eq!(report.leaked, [pid as u32], "{report:?}");
        assert!(report.clean, "{report:?}");
        assert!(!is_alive(&leak), "leaked process {pid} survived");
        assert!(
            tokio::time::timeout(SOON, lines.next_line())
                .await
                .unwrap()
                .unwrap()
                .is_none()
        );
    }

    #[tokio::test]
    async fn dropping_the_process_kills_its_group() {
        let mut cleanup = Cleanup::default();
        let mut process = spawner()
            .spawn(&sh("sleep 1000 & echo $!; wait"))
            .await
            .unwrap();
        let mut lines = lines_of(&mut process);
        let grandchild = cleanup.track(next_line(&mut lines).await.parse().unwrap());
        let leader = cleanup.track(process.pid() as i32);
        drop(process);
        eventually("leader and grandchild are dead", || {
            !is_alive(&leader) && !is_alive(&grandchild)
        })
        .await;
    }

    // ---- parent death ----

    const PDEATHSIG_HELPER_ENV: &str = "STEWARD_TEST_PDEATHSIG_PIDFILE";

    /// Not a test on its own: when re-executed by
    /// `child_dies_when_the_controller_is_sigkilled` it plays the controller —
    /// spawns `sleep` through a Spawner, publishes its pid and waits to be
    /// SIGKILLed. Without the env var it returns at once.
    #[tokio::test]
    async fn pdeathsig_helper() {
        let Some(pidfile) = std::env::var_os(PDEATHSIG_HELPER_ENV).map(PathBuf::from) else {
            return;
        };
        let spawner = spawner();
        let process = spawner.spawn(&sh("exec sleep 1000")).await.unwrap();
        let partial = pidfile.with_extension("partial");
        fs::write(&partial, process.pid().to_string()).unwrap();
        fs::rename(&partial, &pidfile).unwrap();
        std::future::pending::<()>().await;
    }

    #[tokio::test]
    async fn child_dies_when_the_controller_is_sigkilled() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        // Built here if need be, not by the helper within its deadline.
        crate::runtime::test_support::steward_exe();
        let mut helper = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "runtime::process::tests::pdeathsig_helper",
                "--test-threads",
                "1",
            ])
            .env(PDEATHSIG_HELPER_ENV, &pidfile)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut cleanup = Cleanup::default();
        let read_pid = || fs::read_to_string(&pidfile).ok()?.parse::<i32>().ok();
        let deadline = Instant::now() + Duration::from_secs(60); // a cold test binary start
        assert!(
            poll_until(deadline, || read_pid().is_some()).await,
            "the helper never spawned its child"
        );
        let child = cleanup.track(read_pid().unwrap());
        assert_eq!(
            child.ppid as u32,
            helper.id().unwrap(),
            "the child must be the helper's"
        );

        helper.start_kill().unwrap(); // SIGKILL: no destructor runs in the helper
        helper.wait().await.unwrap();
        eventually("the orphaned child is killed by PDEATHSIG", || {
            !is_alive(&child)
        })
        .await;
    }
}

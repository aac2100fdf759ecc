//! A running child: [`ManagedProcess`] holds its pipes, its exit status and
//! its stderr tail, and stops it — SIGTERM to its process group and to the
//! descendants that left it, a grace period, SIGKILL, then the search for
//! processes still holding its stdio pipes — or kills it when dropped.

use std::fmt;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::stderr::{StderrSink, StderrTail, read_into_tail};
use super::thread::SpawnerThread;
use super::{ExitInfo, SpawnError};
use crate::runtime::procfs::{
    ProcStat, descendants, group_is_empty, is_alive, pipe_has_writers, pipe_holders, pipe_inode,
    send_signal, signal_tracked,
};
use crate::runtime::reaper;
use crate::runtime::sandbox::Sandboxed;
use crate::support::sync::lock;

/// Bound on each wait after SIGKILL (leader reaped, group empty, leaks gone).
const KILL_WAIT: Duration = Duration::from_secs(2);
/// How long the stdio pipes may stay open after the group is empty before the
/// holders are searched for (nextest's default leak timeout).
const PIPE_LEAK_TIMEOUT: Duration = Duration::from_millis(100);
/// Polling interval bounds while waiting for a condition with a deadline.
const POLL_MIN: Duration = Duration::from_millis(5);
const POLL_MAX: Duration = Duration::from_millis(100);

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
    _spawner: Arc<SpawnerThread>,
    /// Its sandbox: what it enforces, the egress proxy, the temp dir.
    sandboxed: Option<Sandboxed>,
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
    /// Its sandbox, when it runs in one: what is enforced, and the
    /// destinations its egress proxy refused so far.
    pub fn sandbox(&self) -> Option<&Sandboxed> {
        self.sandboxed.as_ref()
    }

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

    /// Config env keys that were not passed on ([`ENV_DENYLIST`](super::ENV_DENYLIST)).
    pub fn dropped_env(&self) -> &[String] {
        &self.dropped_env
    }

    /// The thread that spawned this child ([`Spawner::thread_id`](super::Spawner::thread_id)).
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

    /// Turns `true` once the stderr reader reached the end of the stream:
    /// from then on [`stderr_tail`](Self::stderr_tail) is complete.
    pub fn stderr_eof(&self) -> watch::Receiver<bool> {
        self.stderr_eof.clone()
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

/// A child fresh from the spawner thread, for [`ManagedProcess::adopt`].
pub(super) struct Spawned {
    /// The command as configured.
    pub(super) command: String,
    /// The absolute path that was executed.
    pub(super) program: PathBuf,
    pub(super) child: Child,
    /// The thread that forked it.
    pub(super) spawned_on: ThreadId,
    /// Config env keys that were not passed on.
    pub(super) dropped_env: Vec<String>,
    /// The server's mark ([`reaper::SERVER_MARK_VAR`]).
    pub(super) mark: String,
    /// Where its stderr lines go besides its own tail.
    pub(super) sink: Option<Arc<dyn StderrSink>>,
    /// Kept alive while the process lives (its PDEATHSIG parent).
    pub(super) spawner: Arc<SpawnerThread>,
    /// Its sandbox (proxy, temp dir), when it has one.
    pub(super) sandboxed: Option<Sandboxed>,
}

impl ManagedProcess {
    /// Takes charge of a freshly spawned child: its stdio pipes, a task
    /// reading its stderr into the tail, and a task waiting for its exit
    /// (tokio reaps it; the pid is then disowned).
    pub(super) fn adopt(spawned: Spawned) -> Result<ManagedProcess, SpawnError> {
        let Spawned {
            command: command_name,
            program,
            mut child,
            spawned_on,
            dropped_env,
            mark,
            sink,
            spawner,
            sandboxed,
        } = spawned;
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

        let stderr = read_into_tail(stderr, pid as u32, sink.as_ref());

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
        Ok(ManagedProcess {
            command: command_name,
            program,
            pid,
            spawned_on,
            dropped_env,
            stdin: Some(stdin),
            stdout: Some(stdout),
            exit,
            tail: stderr.tail,
            stderr_eof: stderr.eof,
            stderr_task: stderr.task,
            stdout_probe,
            pipe_inodes,
            group_gone: false,
            report: None,
            mark,
            _spawner: spawner,
            sandboxed,
        })
    }
}

/// Waits until `done` holds or `deadline` passes (polling with backoff);
/// returns whether it held.
pub(super) async fn poll_until(deadline: Instant, mut done: impl FnMut() -> bool) -> bool {
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

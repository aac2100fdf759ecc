//! [`Spawner`]: the one way the controller starts a process. It applies the
//! env and command policy, gives the child its own process group, its
//! server mark and the exec shim, has the spawner thread fork it, and hands
//! the child to a [`ManagedProcess`].

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::thread::ThreadId;

use tokio::process::Command;
use tokio::sync::watch;

use super::env::{resolve_command, sanitize_env};
use super::limits::{ORIGINAL_FD_LIMIT, SHIM_FD_LIMIT_VAR, fd_limit};
use super::managed::{ManagedProcess, Spawned};
use super::shim::EXEC_SHIM_ARG;
use super::stderr::StderrSink;
use super::thread::SpawnerThread;
use super::{ProcessSpec, SpawnError};
use crate::runtime::reaper;
use crate::runtime::sandbox::{self, SandboxContext, Support, proxy::DenialSink};

tokio::task_local! {
    /// Set by a caller that wants the pid of the process a connect spawns
    /// as soon as it exists ([`Spawner::spawn`] sends it).
    pub static SPAWNED_PID: watch::Sender<Option<u32>>;
}

/// Starts processes from one dedicated thread (see the module docs for why).
/// Create one per controller and clone it; each [`ManagedProcess`] keeps the
/// thread alive while it lives.
#[derive(Clone)]
pub struct Spawner {
    inner: Arc<SpawnerThread>,
    sink: Option<Arc<dyn StderrSink>>,
    /// Where servers are sandboxed (`None`: nothing is, whatever a spec
    /// asks: the runtime tests' spawners).
    sandbox: Option<Arc<SandboxContext>>,
    /// Where a sandboxed server's refused egress is reported.
    egress: Option<DenialSink>,
}

impl fmt::Debug for Spawner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Spawner")
            .field("thread", &self.inner.thread)
            .field("exec_shim", &self.inner.exec_shim)
            .finish()
    }
}

/// Spawns so far in this process: numbers each server's mark.
static SPAWNED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Spawner {
    /// Starts the spawner thread (`steward-spawner`), with this process's own
    /// executable as the exec shim: right for the `steward` binaries, whose
    /// `main` is [`crate::cli::main`]. (Not in this crate's unit tests,
    /// which spawn nothing: see `default_exec_shim`.)
    pub fn new() -> io::Result<Self> {
        Self::with_exec_shim(default_exec_shim())
    }

    /// Starts the spawner thread with `exec_shim` as the shim: an executable
    /// whose `main` calls
    /// [`run_exec_shim_if_requested`](super::run_exec_shim_if_requested) first.
    pub fn with_exec_shim(exec_shim: impl Into<PathBuf>) -> io::Result<Self> {
        Ok(Spawner {
            inner: Arc::new(SpawnerThread::start(exec_shim.into())?),
            sink: None,
            sandbox: None,
            egress: None,
        })
    }

    /// This spawner, sandboxing what it spawns as each spec's profile says
    /// (see [`crate::runtime::sandbox`]).
    pub fn with_sandbox(mut self, context: SandboxContext) -> Spawner {
        self.sandbox = Some(Arc::new(context));
        self
    }

    /// What the kernel offers this spawner's sandboxes (probed once).
    pub fn sandbox_support(&self) -> Option<Support> {
        self.sandbox.as_ref().map(|c| c.support)
    }

    /// This spawner (same thread), also reporting the destinations the
    /// egress proxies of the processes it starts refuse to `sink`.
    pub fn with_egress_sink(&self, sink: DenialSink) -> Spawner {
        Spawner {
            egress: Some(sink),
            ..self.clone()
        }
    }

    /// This spawner (same thread), also sending the stderr lines of every
    /// process it starts to `sink`.
    pub fn with_stderr_sink(&self, sink: Arc<dyn StderrSink>) -> Spawner {
        Spawner {
            sink: Some(sink),
            ..self.clone()
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
        let (mut env, dropped_env) = sanitize_env(&spec.env);
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
        // After the config's env (prepare sets the variables a config
        // cannot forge): TMPDIR, the proxy, the shim's plan.
        let sandboxed = match (&spec.sandbox, &self.sandbox) {
            (Some(request), Some(context)) => sandbox::prepare(
                context,
                request,
                sandbox::Spawn {
                    program: &program,
                    args: &spec.args,
                    cwd: &cwd,
                    serial,
                },
                &mut env,
                self.egress.clone(),
            )
            .await
            .map_err(|e| SpawnError::Sandbox {
                command: command_name.clone(),
                reason: e.to_string(),
            })?,
            _ => None,
        };
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

        let gone = || SpawnError::SpawnerGone {
            command: command_name.clone(),
        };
        let (child, spawned_on) = self
            .inner
            .spawn(command)
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
        let process = ManagedProcess::adopt(Spawned {
            command: command_name.clone(),
            program: program.clone(),
            child,
            spawned_on,
            dropped_env,
            mark,
            sink: self.sink.clone(),
            spawner: Arc::clone(&self.inner),
            sandboxed,
        })?;
        let pid = process.pid();
        tracing::debug!(command = %command_name, program = %program.display(), pid, "process started");
        // Whoever runs this spawn inside `SPAWNED_PID.scope` learns the pid now,
        // before any handshake (status shows it while `Starting`).
        let _ = SPAWNED_PID.try_with(|spawned| spawned.send_replace(Some(pid)));
        Ok(process)
    }
}

/// The shim a [`Spawner`] uses by default: this executable, whatever has
/// become of the file on disk since it started. The spawned child resolves
/// the link, and until its `execve` it shares the controller's memory map.
#[cfg(not(test))]
fn default_exec_shim() -> PathBuf {
    PathBuf::from("/proc/self/exe")
}

/// The shim a [`Spawner`] uses by default in unit tests: none. The libtest
/// harness has no shim mode (it would take `__steward-exec` for a test
/// filter), and the unit tests start no process: the tests that do are
/// integration tests, with the real `steward` as the shim. A spawn that
/// gets as far as the shim fails as with a missing one.
#[cfg(test)]
fn default_exec_shim() -> PathBuf {
    PathBuf::from("/nonexistent/steward-unit-tests-start-no-process")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::runtime::process::testing::{spawner, write_executable};

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
}

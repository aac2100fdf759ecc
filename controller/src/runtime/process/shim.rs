//! The exec shim: the `steward` executable started as
//! `[shim, "__steward-exec", <controller pid>, <program>, <args>...]` arms
//! the parent-death signal, checks that the controller is still its parent,
//! restores the server's open-file limit and execs the program in place.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;

use super::limits::{SHIM_FD_LIMIT_VAR, set_fd_limit_soft};

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
    use std::ffi::OsStr;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};
    use std::process::Stdio;
    use std::time::Duration;

    use tokio::process::Command;
    use tokio::time::Instant;

    use super::*;
    use crate::runtime::process::managed::poll_until;
    use crate::runtime::process::testing::{Cleanup, SOON, eventually, read_all, sh, spawner};
    use crate::runtime::process::{ExitInfo, ProcessSpec, SpawnError, Spawner};
    use crate::runtime::procfs::is_alive;

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
        let mut eof = process.stderr_eof();
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
                "runtime::process::shim::tests::pdeathsig_helper",
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

//! The process layer of the runtime against real children: the
//! [`Spawner`] (env and command policy, process groups, the spawner thread),
//! the exec shim (the real `steward` program), stopping a
//! [`ManagedProcess`] and everything it started, and its stderr tail.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use steward::runtime::process::{
    EXEC_SHIM_ARG, ExitInfo, ManagedProcess, ProcessSpec, STDERR_TAIL_LINES, SpawnError,
    StopOutcome, resolve_command,
};
use steward_tests::harness::{ProcStat, signal};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{ChildStdout, Command};
use tokio::time::Instant;

use crate::runtime_common::{SOON, STEWARD, eventually, spawner};

fn sh(script: &str) -> ProcessSpec {
    ProcessSpec {
        program: "/bin/sh".to_owned(),
        args: vec!["-c".to_owned(), script.to_owned()],
        ..ProcessSpec::default()
    }
}

/// Waits until `done` holds or `deadline` passes; returns whether it held.
async fn poll_until(deadline: Instant, mut done: impl FnMut() -> bool) -> bool {
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Kills remembered test processes that are still alive when the test
/// ends, pass or fail.
#[derive(Default)]
struct Cleanup(Vec<ProcStat>);

impl Cleanup {
    fn track(&mut self, pid: i32) -> ProcStat {
        let stat = ProcStat::read(pid).unwrap_or_else(|| panic!("process {pid} is not running"));
        self.0.push(stat);
        stat
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for process in self.0.iter().filter(|process| process.still_running()) {
            signal(process.pid, libc::SIGKILL);
            if process.pgid == process.pid {
                signal(-process.pid, libc::SIGKILL);
            }
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

// ---- spawning ----

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

#[tokio::test]
async fn child_leads_its_own_process_group() {
    let mut process = spawner()
        .spawn(&sh("echo ready; exec sleep 1000"))
        .await
        .unwrap();
    let mut lines = lines_of(&mut process);
    assert_eq!(next_line(&mut lines).await, "ready");
    let stat = ProcStat::read(process.pid() as i32).unwrap();
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
    std::process::Command::new(STEWARD)
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
    let mut helper = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "runtime_process::pdeathsig_helper",
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
        !child.still_running()
    })
    .await;
}

// ---- exits and stopping ----

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
    assert!(!leader.still_running(), "leader survived");
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
        !grandchild.still_running(),
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
    assert!(!grandchild.still_running());
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
    assert!(
        !escapee.still_running(),
        "escaped grandchild {pid} survived"
    );
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
    assert!(!leak.still_running(), "leaked process {pid} survived");
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
        !leader.still_running() && !grandchild.still_running()
    })
    .await;
}

// ---- the stderr tail ----

#[tokio::test]
async fn stderr_tail_is_bounded_and_ordered() {
    let script = r#"i=0; while [ $i -lt 500 ]; do echo "line $i" >&2; i=$((i+1)); done; printf 'no newline' >&2"#;
    let mut process = spawner().spawn(&sh(script)).await.unwrap();
    assert_eq!(process.exited().await.code, Some(0));
    let mut eof = process.stderr_eof();
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

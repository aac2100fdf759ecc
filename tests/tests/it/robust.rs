//! Envtest: dependable under faults — a lost or stalled log sink, changes
//! made while the controller starts, editor save styles, special files,
//! symlinked sources, escaped processes, the control socket's permissions
//! and input checks. Each test is named after what it guards; every wait is
//! a condition with a deadline.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use steward_schema::resource::SourceState;
use steward_tests::fake_mcp::{FakeMcpConfig, GrandchildMode, read_record};
use steward_tests::harness::{
    Controller, DEADLINE, Env, alive, fake_tools as tools, mcp_servers, pid_of, poll, ready,
    recorded_pids, signal, wait_until, write_atomic,
};

/// SIGTERM: exit 0 within the deadline, and no server it ran survives.
fn terminate_cleanly(env: &Env, c: &mut Controller) {
    let pids = recorded_pids(&env.records());
    assert!(signal(c.pid() as i32, libc::SIGTERM));
    let status = c.exit_status(DEADLINE);
    assert_eq!(status.code(), Some(0), "{status:?}");
    for pid in pids {
        assert!(!alive(pid), "server {pid} outlived the controller");
    }
}

// ---- logging ------------------------------------------------------------------

#[test]
fn a_closed_log_pipe_neither_freezes_the_controller_nor_deafens_it_to_signals() {
    let env = Env::new();
    let a = env.fake_mcp("a", tools(&["t"]));
    env.user_mcp_servers(&[("a", a.clone())]);
    // `steward run 2>&1 | head -2`.
    let mut c = env.start_logging_to(&[], Stdio::piped(), &[], env.root.path().join("no-log"));
    let mut lines = BufReader::new(c.take_stderr().unwrap()).lines();
    for _ in 0..2 {
        lines.next().expect("a log line").expect("read the log");
    }
    drop(lines);

    // Every later log line now fails with EPIPE.
    let b = env.fake_mcp("b", tools(&["t"]));
    env.user_mcp_servers(&[("a", a), ("b", b)]);
    c.wait_for("a and b Ready", |s| ready(s, "a") && ready(s, "b"));
    terminate_cleanly(&env, &mut c);
}

#[test]
fn a_stalled_log_reader_never_blocks_the_controller() {
    let env = Env::new();
    let servers: Vec<(String, serde_json::Value)> = (0..4)
        .map(|i| {
            (
                format!("s{i}"),
                env.fake_mcp(&format!("s{i}"), tools(&["t"])),
            )
        })
        .collect();
    let refs: Vec<(&str, serde_json::Value)> = servers
        .iter()
        .map(|(n, v)| (n.as_str(), v.clone()))
        .collect();
    env.user_mcp_servers(&refs);
    // A pager that stopped reading: the pipe fills up and stays full.
    let mut c = env.start_logging_to(
        &[],
        Stdio::piped(),
        &[("RUST_LOG", "trace")],
        env.root.path().join("no-log"),
    );
    let _stalled = c.take_stderr().unwrap();
    c.wait_for("all Ready", |s| (0..4).all(|i| ready(s, &format!("s{i}"))));
    // Far more than a pipe's 64 KiB of trace lines.
    for round in 0..10 {
        let edited: Vec<(&str, serde_json::Value)> = refs
            .iter()
            .map(|(n, v)| {
                let mut v = v.clone();
                v["env"]["ROUND"] = serde_json::json!(round.to_string());
                (*n, v)
            })
            .collect();
        let before: Vec<Option<u32>> = {
            let s = c.status();
            (0..4).map(|i| pid_of(&s, &format!("s{i}"))).collect()
        };
        env.user_mcp_servers(&edited);
        c.wait_for("every server restarted for the edit", |s| {
            (0..4).all(|i| {
                let name = format!("s{i}");
                ready(s, &name) && pid_of(s, &name) != before[i]
            })
        });
    }
    terminate_cleanly(&env, &mut c);
}

// ---- start-up and resync ---------------------------------------------------------

/// A controller whose stderr goes to a log file under the test's root.
fn spawn_logged(env: &Env, args: &[&str], vars: &[(&str, &str)]) -> Controller {
    let log = env
        .root
        .path()
        .join(format!("controller-{}.log", args.len()));
    let file = std::fs::File::create(&log).unwrap();
    env.spawn_controller(args, file.into(), vars, log)
}

#[test]
fn a_change_made_while_the_controller_reads_its_sources_is_applied() {
    let env = Env::new();
    let a = env.fake_mcp("a", tools(&["t"]));
    env.user_mcp_servers(&[("a", a.clone())]);
    let hold = env.root.path().join("hold");
    let mut c = spawn_logged(&env, &["--hold-after-read", hold.to_str().unwrap()], &[]);
    // The controller has read its sources and waits: edit one now.
    wait_until("the controller read its sources", || hold.exists());
    let b = env.fake_mcp("b", tools(&["t"]));
    env.user_mcp_servers(&[("a", a), ("b", b)]);
    std::fs::remove_file(&hold).unwrap();
    c.wait_ready();
    c.wait_for("a and b Ready", |s| ready(s, "a") && ready(s, "b"));
    terminate_cleanly(&env, &mut c);
}

#[test]
fn the_periodic_resync_applies_a_change_the_watcher_missed() {
    let env = Env::new();
    // Only the settings file's own directory is watched, not the one above.
    std::fs::create_dir_all(env.root.path().join("etc")).unwrap();
    let sys = env.root.path().join("sys");
    let settings = sys.join("x/settings.json");
    let a = env.fake_mcp("a", tools(&["t"]));
    let b = env.fake_mcp("b", tools(&["t"]));
    write_atomic(&settings, &mcp_servers(&[("a", a.clone())]));
    let settings_var = settings.to_str().unwrap().to_owned();
    let mut c = spawn_logged(
        &env,
        &["--resync-secs", "1"],
        &[("QWEN_CODE_SYSTEM_SETTINGS_PATH", &settings_var)],
    );
    c.wait_ready();
    c.wait_for("a Ready", |s| ready(s, "a"));
    // A rename above the watched directory goes unseen (watch.rs, Limits).
    std::fs::rename(&sys, env.root.path().join("sys.old")).unwrap();
    write_atomic(&settings, &mcp_servers(&[("a", a), ("b", b)]));
    c.wait_for("b Ready", |s| ready(s, "b"));
    assert!(
        c.log_text().contains("applied by the resync"),
        "{}",
        c.log_text()
    );
    terminate_cleanly(&env, &mut c);
}

// ---- editor save styles ------------------------------------------------------------

fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// The editor's own work between the steps of a save (long enough for the
/// events of the removal to be handled on their own).
fn editor_pause() {
    std::thread::sleep(Duration::from_millis(50));
}

/// Writes `content` to `path` in some editor's way.
type Save = fn(&Path, &str);

/// Saves that remove the file for a moment, as editors do them.
fn momentary_removal_saves() -> [(&'static str, Save); 3] {
    fn jetbrains_safe_write(path: &Path, content: &str) {
        let (tmp, old) = (beside(path, "___jb_tmp___"), beside(path, "___jb_old___"));
        std::fs::write(&tmp, content).unwrap();
        std::fs::rename(path, &old).unwrap();
        editor_pause();
        std::fs::rename(&tmp, path).unwrap();
        std::fs::remove_file(&old).unwrap();
    }
    fn emacs_backup_by_rename(path: &Path, content: &str) {
        std::fs::rename(path, beside(path, "~")).unwrap();
        editor_pause();
        std::fs::write(path, content).unwrap();
    }
    fn remove_then_write(path: &Path, content: &str) {
        std::fs::remove_file(path).unwrap();
        editor_pause();
        std::fs::write(path, content).unwrap();
    }
    [
        ("JetBrains safe-write", jetbrains_safe_write),
        ("Emacs backup-by-rename", emacs_backup_by_rename),
        ("rm + write", remove_then_write),
    ]
}

/// The `changed=` count of every "source changed" line logged for `path`.
fn applied_changes(c: &Controller, path: &Path) -> Vec<String> {
    let needle = format!("source changed source={} ", path.display());
    c.log_text()
        .lines()
        .filter(|l| l.contains(&needle))
        .filter_map(|l| l.rsplit_once("changed=").map(|(_, n)| n.trim().to_owned()))
        .collect()
}

fn starts(record: &Path) -> usize {
    read_record(record)
        .unwrap()
        .iter()
        .filter(|e| e.event == "start")
        .count()
}

#[test]
fn editor_saves_that_remove_the_file_for_a_moment_restart_nothing() {
    let env = Env::new();
    let settings = env.home.join("settings.json");
    let text = mcp_servers(&[("a", env.fake_mcp("a", tools(&["t"])))]);
    write_atomic(&settings, &text);
    let mut c = spawn_logged(&env, &["--debounce-ms", "100"], &[]);
    c.wait_ready();
    let pid = pid_of(&c.wait_for("a Ready", |s| ready(s, "a")), "a");
    for (style, save) in momentary_removal_saves() {
        let before = applied_changes(&c, &settings).len();
        save(&settings, &text);
        wait_until(&format!("{style}: the save is applied"), || {
            applied_changes(&c, &settings).len() > before
        });
        let applied = applied_changes(&c, &settings);
        assert!(
            applied[before..].iter().all(|n| n == "0"),
            "{style} changed servers: {applied:?}\n{}",
            c.log_text()
        );
        assert_eq!(pid_of(&c.status(), "a"), pid, "{style} restarted a");
    }
    assert_eq!(starts(&env.record("a")), 1);
    terminate_cleanly(&env, &mut c);
}

// ---- special and huge files ------------------------------------------------------

/// Run the steward CLI with `args`; fails the test if it does not exit
/// within the deadline (it is killed then).
fn steward_bounded(env: &Env, args: &[&str]) -> std::process::Output {
    steward_bounded_with(env, args, &[])
}

/// [`steward_bounded`] with `vars` added to the environment.
fn steward_bounded_with(env: &Env, args: &[&str], vars: &[(&str, &Path)]) -> std::process::Output {
    let mut child = env
        .command(args)
        .envs(vars.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let exited = poll(DEADLINE, Duration::from_millis(10), || {
        child.try_wait().unwrap().ok_or(())
    });
    if exited.is_err() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("steward {args:?} did not exit within {DEADLINE:?}");
    }
    child.wait_with_output().unwrap()
}

fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(made.success());
}

#[test]
fn a_config_replaced_by_a_fifo_blocks_neither_the_watcher_nor_the_cli() {
    let env = Env::new();
    let settings = env.home.join("settings.json");
    let a = env.fake_mcp("a", tools(&["t"]));
    write_atomic(&settings, &mcp_servers(&[("a", a)]));
    let mut c = env.start(&["--debounce-ms", "100"]);
    let pid = pid_of(&c.wait_for("a Ready", |s| ready(s, "a")), "a");

    std::fs::remove_file(&settings).unwrap();
    mkfifo(&settings);
    let s = c.wait_for("the settings reported Invalid", |s| {
        s.sources.iter().any(|src| {
            Path::new(&src.path) == settings
                && src.state == SourceState::Invalid
                && src.error.as_deref().is_some_and(|e| e.contains("FIFO"))
        })
    });
    // The previous content stays in force.
    assert_eq!(pid_of(&s, "a"), pid);

    // Every later edit is still seen.
    let b = env.fake_mcp("b", tools(&["t"]));
    write_atomic(
        &env.root.path().join("etc/settings.json"),
        &mcp_servers(&[("b", b)]),
    );
    c.wait_for("b Ready", |s| ready(s, "b"));

    let validate = steward_bounded(&env, &["validate"]);
    assert_eq!(validate.status.code(), Some(1), "{validate:?}");
    assert!(
        String::from_utf8_lossy(&validate.stdout).contains("a FIFO, not a regular file"),
        "{validate:?}"
    );
    let offline = steward_bounded(&env, &["status", "--offline"]);
    assert_eq!(offline.status.code(), Some(0), "{offline:?}");
    terminate_cleanly(&env, &mut c);
}

// ---- the control socket and the locks ------------------------------------------------

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn the_state_dir_socket_and_locks_are_private_even_under_umask_000() {
    let env = Env::new();
    let a = env.fake_mcp("a", tools(&["t"]));
    env.user_mcp_servers(&[("a", a)]);
    let log = env.root.path().join("controller.log");
    let child = std::process::Command::new("/bin/sh")
        .args(["-c", r#"umask 000; exec "$0" "$@""#])
        .arg(steward_tests::harness::bin("steward"))
        .arg("--workspace")
        .arg(&env.ws)
        .arg("run")
        .env_clear()
        .envs(env.steward_env())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut c = env.adopt(child, log);
    c.wait_ready();
    c.wait_for("a Ready", |s| ready(s, "a"));

    let paths = env.paths();
    let state = paths.state_dir();
    assert_eq!(mode(&state), 0o700);
    assert_eq!(mode(state.parent().unwrap()), 0o700);
    assert_eq!(mode(&paths.socket_path()), 0o600);
    assert_eq!(mode(&paths.lock_file()), 0o600);
    assert_eq!(mode(&paths.runtime_dir), 0o700);
    assert_eq!(mode(&paths.workspace_lock_file()), 0o600);

    // Another user cannot use the socket even if the directory is opened
    // up: the controller checks the peer's uid.
    if steward::support::paths::effective_uid() == 0 {
        for dir in [env.root.path(), &env.home, state.parent().unwrap(), &state] {
            std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
        }
        std::fs::set_permissions(
            paths.socket_path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o777),
        )
        .unwrap();
        let out = std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(steward_tests::harness::bin("steward"))
            .arg("--workspace")
            .arg(&env.ws)
            .args(["stop", "a"])
            .env_clear()
            .envs(env.steward_env())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("it serves only its own user (uid 0)"),
            "{out:?}"
        );
        assert!(ready(&c.status(), "a"), "another user stopped a");
        assert!(
            c.log_text()
                .contains("refused a connection from another user")
        );
    } else {
        eprintln!("not root: the peer uid check needs a second user and was not exercised");
    }
    terminate_cleanly(&env, &mut c);
}

#[test]
fn a_second_controller_for_the_workspace_is_refused_whatever_its_qwen_home() {
    let env = Env::new();
    let mut c = env.start(&[]);
    let other_home = env.root.path().join("other-home");
    std::fs::create_dir_all(&other_home).unwrap();
    let out = steward_bounded_with(&env, &["run"], &[("QWEN_HOME", &other_home)]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "another controller (pid {}) is already running",
            c.pid()
        )),
        "{stderr}"
    );
    terminate_cleanly(&env, &mut c);
}

/// CPU time (user + system) of `pid` so far, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
    // utime and stime: fields 14 and 15 of stat, 12 and 13 after the comm.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

#[test]
fn the_control_socket_does_not_spin_when_the_controller_is_out_of_descriptors() {
    let env = Env::new();
    let log = env.root.path().join("controller.log");
    // A hard limit the controller cannot raise.
    let child = std::process::Command::new("prlimit")
        .args(["--nofile=64:64", "--"])
        .arg(steward_tests::harness::bin("steward"))
        .arg("--workspace")
        .arg(&env.ws)
        .arg("run")
        .env_clear()
        .envs(env.steward_env())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut c = env.adopt(child, log);
    c.wait_ready();
    // Idle connections until accept fails with EMFILE (the rest queue up).
    let socket = env.paths().socket_path();
    let held: Vec<std::os::unix::net::UnixStream> = (0..80)
        .map(|_| std::os::unix::net::UnixStream::connect(&socket).unwrap())
        .collect();
    wait_until("the controller runs out of descriptors", || {
        open_fds(c.pid()) >= 64
    });
    let before = cpu_ticks(c.pid());
    std::thread::sleep(Duration::from_secs(1));
    let spent = cpu_ticks(c.pid()) - before;
    // Spinning on accept burns a whole core: 100 ticks a second.
    assert!(
        spent < 20,
        "{spent} ticks of CPU in 1 s while out of descriptors"
    );
    drop(held);
    c.wait_for("the controller answers again", |_| true);
    assert!(c.log_text().contains("accept failed"), "{}", c.log_text());
    terminate_cleanly(&env, &mut c);
}

// ---- input checks -----------------------------------------------------------------

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_workspace_that_is_not_a_directory_is_an_error_at_start() {
    let env = Env::new();
    let file = env.root.path().join("file");
    std::fs::write(&file, "").unwrap();
    for args in [&["run"][..], &["status", "--offline"]] {
        let mut full = vec!["--workspace", file.to_str().unwrap()];
        full.extend_from_slice(args);
        // The harness's own --workspace comes first; the later one wins.
        let out = steward_bounded(&env, &full);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        assert_eq!(
            stderr_of(&out),
            format!(
                "steward: failed to use the workspace {}: it is not a directory\n",
                file.display()
            ),
            "{args:?}"
        );
    }
}

#[test]
fn approve_of_an_unknown_name_is_a_usage_error_with_a_did_you_mean() {
    let env = Env::new();
    env.write(
        ".mcp.json",
        &mcp_servers(&[("time", serde_json::json!({"command": "x"}))]),
    );
    let out = steward_bounded(&env, &["approve", "tiem"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = stderr_of(&out);
    assert!(stderr.contains("did you mean \"time\"?"), "{stderr}");
    assert!(stderr.contains("Usage: steward approve"), "{stderr}");
    assert!(!env.home.join("mcpApprovals.json").exists());

    let out = steward_bounded(&env, &["approve"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr_of(&out).contains("or pass --all"), "{out:?}");
}

#[test]
fn stop_of_an_unknown_name_reads_after_failed_to() {
    let env = Env::new();
    env.user_mcp_servers(&[("a", env.fake_mcp("a", tools(&["t"])))]);
    let mut c = env.start(&[]);
    let out = steward_bounded(&env, &["stop", "nosuch"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(
        stderr_of(&out),
        format!(
            "steward: failed to stop nosuch: no server of that name is configured for {} (known: a)\n",
            env.ws.display()
        )
    );
    terminate_cleanly(&env, &mut c);
}

// ---- the open-file limit -----------------------------------------------------------

/// `steward run` under `prlimit --nofile=SOFT:HARD`.
fn start_with_fd_limit(env: &Env, limit: &str) -> Controller {
    let log = env.root.path().join("controller.log");
    let child = std::process::Command::new("prlimit")
        .arg(format!("--nofile={limit}"))
        .arg("--")
        .arg(steward_tests::harness::bin("steward"))
        .arg("--workspace")
        .arg(&env.ws)
        .args(["run", "--start-backoff-ms", "100"])
        .env_clear()
        .envs(env.steward_env())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut c = env.adopt(child, log);
    c.wait_ready();
    c
}

/// Soft and hard "Max open files" of `pid`.
fn nofile(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let mut fields = line["Max open files".len()..].split_whitespace();
    (
        fields.next().unwrap().to_owned(),
        fields.next().unwrap().to_owned(),
    )
}

fn many_servers(env: &Env, n: usize) -> Vec<String> {
    let names: Vec<String> = (0..n).map(|i| format!("s{i}")).collect();
    let entries: Vec<(&str, serde_json::Value)> = names
        .iter()
        .map(|n| (n.as_str(), env.fake_mcp(n, tools(&["t"]))))
        .collect();
    env.user_mcp_servers(&entries);
    names
}

#[test]
fn the_soft_fd_limit_is_raised_to_the_hard_one_and_servers_get_the_original() {
    let env = Env::new();
    let names = many_servers(&env, 24);
    let mut c = start_with_fd_limit(&env, "64:4096");
    let s = c.wait_for("every server Ready", |s| names.iter().all(|n| ready(s, n)));
    assert_eq!(nofile(c.pid()), ("4096".to_owned(), "4096".to_owned()));
    assert!(
        open_fds(c.pid()) > 64,
        "the test needs more than 64 descriptors"
    );
    let server = pid_of(&s, "s0").unwrap();
    assert_eq!(nofile(server), ("64".to_owned(), "4096".to_owned()));
    terminate_cleanly(&env, &mut c);
}

#[test]
fn running_out_of_descriptors_fails_with_a_clear_message() {
    let env = Env::new();
    let names = many_servers(&env, 24);
    let mut c = start_with_fd_limit(&env, "64:64");
    // Starts run in parallel: those that got descriptors come up, the rest
    // fail with the reason.
    c.wait_for(
        "some servers Ready, some failed for want of descriptors",
        |s| {
            names.iter().any(|n| ready(s, n))
                && names.iter().any(|n| {
                    steward_tests::harness::mcp(s, n).is_some_and(|m| {
                        m.status.message.as_deref().is_some_and(|msg| {
                            msg.contains("the controller has too many open files (limit 64)")
                        })
                    })
                })
        },
    );
    terminate_cleanly(&env, &mut c);
}

// ---- which file is which ---------------------------------------------------------------

#[test]
fn with_the_workspace_at_home_a_live_edit_of_the_user_settings_is_applied() {
    let mut env = Env::new();
    // HOME_DIR = WS/.qwen: WS/.qwen/settings.json is the user settings.
    env.home = env.ws.join(".qwen");
    std::fs::create_dir_all(&env.home).unwrap();
    let a = env.fake_mcp("a", tools(&["t"]));
    env.user_mcp_servers(&[("a", a.clone())]);
    let mut c = env.start(&[]);
    c.wait_for("a Ready", |s| ready(s, "a"));
    let b = env.fake_mcp("b", tools(&["t"]));
    env.user_mcp_servers(&[("a", a), ("b", b)]);
    c.wait_for("b Ready", |s| ready(s, "b"));
    terminate_cleanly(&env, &mut c);
}

#[test]
fn a_symlinked_settings_file_hot_reloads_when_its_target_is_edited_or_retargeted() {
    let env = Env::new();
    let dotfiles = env.root.path().join("dotfiles");
    let (one, two) = (dotfiles.join("one.json"), dotfiles.join("two.json"));
    let a = env.fake_mcp("a", tools(&["t"]));
    let b = env.fake_mcp("b", tools(&["t"]));
    let c_entry = env.fake_mcp("c", tools(&["t"]));
    write_atomic(&one, &mcp_servers(&[("a", a.clone())]));
    write_atomic(&two, &mcp_servers(&[("c", c_entry)]));
    let settings = env.home.join("settings.json");
    std::os::unix::fs::symlink(&one, &settings).unwrap();
    let mut c = env.start(&[]);
    c.wait_for("a Ready", |s| ready(s, "a"));

    // The dotfile repository's copy is edited (atomically, as editors do).
    write_atomic(&one, &mcp_servers(&[("a", a), ("b", b)]));
    c.wait_for("b Ready", |s| ready(s, "b"));

    // `ln -sfn two.json settings.json`.
    let tmp = env.home.join(".settings.json.new");
    std::os::unix::fs::symlink(&two, &tmp).unwrap();
    std::fs::rename(&tmp, &settings).unwrap();
    c.wait_for("only c runs", |s| {
        ready(s, "c") && steward_tests::harness::mcp(s, "a").is_none()
    });
    terminate_cleanly(&env, &mut c);
}

// ---- escaped processes ----------------------------------------------------------------

/// The pids of the grandchildren `name`'s servers recorded, by server pid.
fn grandchildren(env: &Env, name: &str) -> Vec<(u32, u32)> {
    read_record(&env.record(name))
        .unwrap_or_default()
        .iter()
        .filter(|e| e.event == "grandchild")
        .filter_map(|e| Some((e.pid, e.message.get("pid")?.as_u64()? as u32)))
        .collect()
}

fn daemon_server(env: &Env, name: &str, version: &str) -> serde_json::Value {
    let entry = env.fake_mcp(
        name,
        FakeMcpConfig {
            spawn_grandchild: Some(GrandchildMode::Daemon),
            ..tools(&["t"])
        },
    );
    steward_tests::harness::with_version(&entry, version)
}

#[test]
fn a_daemonized_grandchild_dies_with_its_server_on_edit_removal_and_shutdown() {
    let env = Env::new();
    env.user_mcp_servers(&[
        ("d", daemon_server(&env, "d", "1")),
        ("e", daemon_server(&env, "e", "1")),
    ]);
    let mut c = env.start(&[]);
    let daemon_of = |name: &str, server: u32| {
        wait_until(&format!("{name} spawned its daemon"), || {
            grandchildren(&env, name).iter().any(|(s, _)| *s == server)
        });
        grandchildren(&env, name)
            .into_iter()
            .find(|(s, _)| *s == server)
            .unwrap()
            .1
    };
    let s = c.wait_for("d and e Ready", |s| ready(s, "d") && ready(s, "e"));
    let (d1, e1) = (pid_of(&s, "d").unwrap(), pid_of(&s, "e").unwrap());
    let (d1_daemon, e_daemon) = (daemon_of("d", d1), daemon_of("e", e1));

    // An edit restarts d: its first daemon goes with it.
    env.user_mcp_servers(&[
        ("d", daemon_server(&env, "d", "2")),
        ("e", daemon_server(&env, "e", "1")),
    ]);
    let s = c.wait_for("d restarted", |s| {
        ready(s, "d") && pid_of(s, "d").is_some_and(|p| p != d1)
    });
    let d2_daemon = daemon_of("d", pid_of(&s, "d").unwrap());
    wait_until("the edited server's daemon is gone", || !alive(d1_daemon));
    assert!(
        alive(e_daemon),
        "the daemon of an untouched server was killed"
    );

    // Removal.
    env.user_mcp_servers(&[("e", daemon_server(&env, "e", "1"))]);
    c.wait_for("d removed", |s| {
        steward_tests::harness::mcp(s, "d").is_none()
    });
    wait_until("the removed server's daemon is gone", || !alive(d2_daemon));

    // Shutdown.
    terminate_cleanly(&env, &mut c);
    wait_until("the daemon is gone after shutdown", || !alive(e_daemon));
}

#[test]
fn what_a_sigkilled_controller_left_behind_is_cleaned_up_by_the_next_one() {
    let env = Env::new();
    let grouped = env.fake_mcp(
        "g",
        FakeMcpConfig {
            spawn_grandchild: Some(GrandchildMode::Group),
            ..tools(&["t"])
        },
    );
    env.user_mcp_servers(&[("g", grouped), ("d", daemon_server(&env, "d", "1"))]);
    let mut c = env.start(&[]);
    c.wait_for("g and d Ready", |s| ready(s, "g") && ready(s, "d"));
    wait_until("both grandchildren started", || {
        !grandchildren(&env, "g").is_empty() && !grandchildren(&env, "d").is_empty()
    });
    let left: Vec<u32> = ["g", "d"]
        .iter()
        .map(|n| grandchildren(&env, n)[0].1)
        .collect();
    let servers: Vec<u32> = ["g", "d"]
        .iter()
        .map(|n| grandchildren(&env, n)[0].0)
        .collect();

    c.kill();
    wait_until("the servers die with the controller", || {
        servers.iter().all(|p| !alive(*p))
    });
    // Nothing signals them: they are left behind.
    assert!(left.iter().all(|p| alive(*p)), "nothing was left behind");

    let mut next = env.start(&[]);
    wait_until("the next controller cleans up what was left", || {
        left.iter().all(|p| !alive(*p))
    });
    next.wait_for("g and d Ready again", |s| ready(s, "g") && ready(s, "d"));
    terminate_cleanly(&env, &mut next);
}

// ---- resource leaks ---------------------------------------------------------------------

/// Restart server `a` by an edit `rounds` times, each time waiting for the
/// new process to be Ready.
fn restart_by_edits(
    env: &Env,
    c: &Controller,
    entry: &serde_json::Value,
    rounds: std::ops::Range<usize>,
) {
    for round in rounds {
        let before = pid_of(&c.status(), "a");
        let edited = steward_tests::harness::with_version(entry, &round.to_string());
        env.user_mcp_servers(&[("a", edited)]);
        c.wait_for(&format!("restart {round}"), |s| {
            ready(s, "a") && pid_of(s, "a") != before
        });
    }
}

#[test]
fn descriptor_count_stays_flat_over_many_restarts() {
    // STEWARD_FD_RESTARTS=1000 for the long run; the suite runs 200.
    let rounds: usize = std::env::var("STEWARD_FD_RESTARTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let env = Env::new();
    let entry = env.fake_mcp("a", tools(&["t"]));
    env.user_mcp_servers(&[("a", entry.clone())]);
    let mut c = env.start(&["--debounce-ms", "20"]);
    c.wait_for("a Ready", |s| ready(s, "a"));
    // Warm up: lazily created runtime resources are there afterwards.
    restart_by_edits(&env, &c, &entry, 0..20);
    let baseline = open_fds(c.pid());
    let started = Instant::now();
    restart_by_edits(&env, &c, &entry, 20..20 + rounds);
    let after = open_fds(c.pid());
    eprintln!(
        "{rounds} restarts in {:?}: {baseline} descriptors before, {after} after",
        started.elapsed()
    );
    assert!(
        after <= baseline + 2,
        "descriptors grew from {baseline} to {after} over {rounds} restarts"
    );
    terminate_cleanly(&env, &mut c);
}

//! The envtest harness: a temporary HOME_DIR and workspace, the real
//! `steward` binary, and helpers that wait for status conditions with a
//! deadline (never fixed sleeps).
//!
//! Every process a test starts is cleaned up: the controller is stopped with
//! SIGTERM (then SIGKILL) when its [`Controller`] is dropped, and the harness
//! checks that no fake server recorded under the test's directory survives.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Display;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use steward::control::client;
use steward::support::paths::Paths;
use steward_schema::resource::{Item, Phase, WorkspaceStatus};

use crate::fake_mcp::{self, FakeMcpConfig};

/// Path of a binary of this crate: cargo builds them in `target/<profile>/`
/// before running the integration tests (which run from its `deps/`).
/// `steward` is the real program built as `steward-under-test`.
pub fn bin(name: &str) -> PathBuf {
    let name = if name == "steward" {
        "steward-under-test"
    } else {
        name
    };
    let exe = std::env::current_exe().expect("test executable path");
    // Integration tests run from target/<profile>/deps; binaries of this
    // crate (benchmarks) from target/<profile> itself.
    let mut dir = exe.parent().expect("executables live in a directory");
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir = dir.parent().expect("deps has a parent");
    }
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is not built (run through cargo test)",
        path.display()
    );
    path
}

/// "Now" for every [`Env::cli`] run, so that timestamps in snapshots are
/// stable.
pub const NOW: &str = "2025-06-01T12:00:00Z";

/// The sandbox every test runs steward in: one temporary directory holding
/// HOME_DIR (also `$HOME`), the workspace, the fake `/etc` files of the
/// system settings layers and the per-user runtime directory, so that the
/// machine's own files never leak in and nothing is written outside it.
///
/// Steward runs in it two ways: [`Env::command`] / [`Env::steward`] /
/// [`Env::start`] (the envtests: `--workspace WS`, our PATH, LANG and TMPDIR,
/// debug logs) and [`Env::cli`] / [`Env::run`] (the CLI tests: in the
/// workspace, with nothing but the sandbox's variables and the clock pinned
/// to [`NOW`]). Both see the same files and the same [`Env::set_var`]
/// additions.
pub struct Env {
    /// The temp root; its path is canonical.
    pub root: tempfile::TempDir,
    /// HOME_DIR (`$QWEN_HOME`), and `$HOME` too (canonical).
    pub home: PathBuf,
    /// The workspace (canonical).
    pub ws: PathBuf,
    /// `$QWEN_CODE_SYSTEM_DEFAULTS_PATH` (under `root/etc`, absent at first).
    pub system_defaults: PathBuf,
    /// `$QWEN_CODE_SYSTEM_SETTINGS_PATH` (under `root/etc`, absent at first).
    pub system_settings: PathBuf,
    /// Variables added by [`Env::set_var`].
    extra: std::sync::Mutex<BTreeMap<String, String>>,
}

impl Default for Env {
    fn default() -> Self {
        Self::new()
    }
}

impl Env {
    pub fn new() -> Self {
        // Created under the canonical temp dir, so that every path below is
        // canonical as steward prints it.
        let tmp = std::fs::canonicalize(std::env::temp_dir()).expect("canonical temp dir");
        let root = tempfile::Builder::new()
            .prefix("stw")
            .tempdir_in(tmp)
            .expect("temp dir");
        let home = root.path().join("home");
        let ws = root.path().join("ws");
        let etc = root.path().join("etc");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        let ws = std::fs::canonicalize(&ws).unwrap();
        let home = std::fs::canonicalize(&home).unwrap();
        Env {
            system_defaults: etc.join("system-defaults.json"),
            system_settings: etc.join("settings.json"),
            root,
            home,
            ws,
            extra: Default::default(),
        }
    }

    /// Adds `key=value` to the environment of every steward process started
    /// from now on (e.g. `SSL_CERT_FILE`).
    pub fn set_var(&self, key: &str, value: &str) {
        self.extra
            .lock()
            .unwrap()
            .insert(key.to_owned(), value.to_owned());
    }

    /// The variables that put a process in this sandbox: HOME_DIR, HOME,
    /// the system settings paths and the runtime directory (where the
    /// per-workspace lock goes).
    fn sandbox_vars(&self) -> BTreeMap<String, String> {
        let path = |p: &Path| p.to_string_lossy().into_owned();
        BTreeMap::from([
            ("QWEN_HOME".into(), path(&self.home)),
            ("HOME".into(), path(&self.home)),
            (
                "QWEN_CODE_SYSTEM_DEFAULTS_PATH".into(),
                path(&self.system_defaults),
            ),
            (
                "QWEN_CODE_SYSTEM_SETTINGS_PATH".into(),
                path(&self.system_settings),
            ),
            (
                "XDG_RUNTIME_DIR".into(),
                path(&self.root.path().join("run")),
            ),
        ])
    }

    /// The sandbox's variables and those of [`Env::set_var`], without
    /// RUST_LOG (for what should log at the product default).
    pub fn quiet_vars(&self) -> BTreeMap<String, String> {
        let mut vars = self.sandbox_vars();
        vars.extend(self.extra.lock().unwrap().clone());
        vars
    }

    /// The environment every steward process of an envtest gets beside
    /// PATH, LANG and TMPDIR: the sandbox, debug logs, [`Env::set_var`]'s.
    pub fn vars(&self) -> BTreeMap<String, String> {
        let mut vars = self.sandbox_vars();
        vars.insert("RUST_LOG".into(), "steward=debug,info".into());
        vars.extend(self.extra.lock().unwrap().clone());
        vars
    }

    /// [`base_env`] and then [`Env::vars`]: the whole environment of an
    /// envtest's steward process.
    pub fn steward_env(&self) -> Vec<(String, String)> {
        let mut vars = base_env();
        vars.extend(self.vars());
        vars
    }

    /// `steward --workspace WS <args>` with [`Env::steward_env`] only.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(bin("steward"));
        command
            .arg("--workspace")
            .arg(&self.ws)
            .args(args)
            .env_clear()
            .envs(self.steward_env());
        command
    }

    /// `steward <args>` for the CLI tests, reproducible whatever the machine:
    /// run in the workspace with the sandbox's variables, "now" pinned to
    /// [`NOW`], and [`Env::set_var`]'s (which may override it); no PATH, no
    /// RUST_LOG; stdin is null.
    pub fn cli(&self, args: &[&str]) -> Command {
        let mut command = Command::new(bin("steward"));
        command
            .args(args)
            .current_dir(&self.ws)
            .env_clear()
            .envs(self.sandbox_vars())
            .env("STEWARD_NOW", NOW)
            .envs(self.extra.lock().unwrap().clone())
            .stdin(Stdio::null());
        command
    }

    /// [`Env::cli`] run to completion.
    pub fn run(&self, args: &[&str]) -> Run {
        Run::from(self.cli(args).output().expect("run steward"))
    }

    /// [`Env::cli`] started without waiting (stdout and stderr piped).
    pub fn spawn(&self, args: &[&str]) -> Child {
        self.cli(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn steward")
    }

    /// `status --offline -o json <extra>` through [`Env::run`], parsed
    /// (panics on failure).
    pub fn status_json(&self, extra: &[&str]) -> Value {
        let mut args = vec!["status", "--offline", "-o", "json"];
        args.extend_from_slice(extra);
        let run = self.run(&args);
        assert_eq!(run.code, 0, "status failed: {}", run.stderr);
        serde_json::from_str(&run.stdout).expect("status -o json is JSON")
    }

    /// HOME_DIR's approvals file.
    pub fn approvals_path(&self) -> PathBuf {
        self.home.join("mcpApprovals.json")
    }

    pub fn paths(&self) -> Paths {
        let mut env = steward::support::paths::process_env();
        env.extend(self.vars());
        Paths::resolve(&self.ws, &env).expect("paths")
    }

    /// Write `content` to `rel` under the workspace (parents created), the
    /// way an editor that saves by rename does; returns the file's path.
    pub fn write(&self, rel: &str, content: &str) -> PathBuf {
        let path = self.ws.join(rel);
        write_atomic(&path, content);
        path
    }

    /// Write a file under HOME_DIR, as [`Env::write`] does.
    pub fn write_home(&self, rel: &str, content: &str) -> PathBuf {
        let path = self.home.join(rel);
        write_atomic(&path, content);
        path
    }

    /// A directory for fake-server record files: in the workspace, which
    /// the default sandbox (`standard`) lets a server write.
    pub fn records(&self) -> PathBuf {
        let dir = self.ws.join(".records");
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// The record file of fake server `name`.
    pub fn record(&self, name: &str) -> PathBuf {
        self.records().join(format!("{name}.jsonl"))
    }

    /// An `mcpServers` entry that runs the fake MCP server with `config`,
    /// recording to [`Env::record`]`(name)`.
    pub fn fake_mcp(&self, name: &str, mut config: FakeMcpConfig) -> Value {
        if config.name == FakeMcpConfig::default().name {
            config.name = name.to_owned();
        }
        if config.record.is_none() {
            config.record = Some(self.record(name));
        }
        json!({
            "command": bin("fake-mcp-server").to_string_lossy(),
            "env": { fake_mcp::CONFIG_ENV: config.to_json() },
        })
    }

    /// An `.lsp.json` entry that runs the fake language server with
    /// `config`, recording to [`Env::record`]`(name)`.
    pub fn fake_lsp(
        &self,
        name: &str,
        mut config: crate::fake_lsp::Config,
        exts: &[&str],
    ) -> Value {
        if config.name == crate::fake_lsp::Config::default().name {
            config.name = name.to_owned();
        }
        if config.record.is_none() {
            config.record = Some(self.record(name));
        }
        let map: serde_json::Map<String, Value> = exts
            .iter()
            .map(|e| ((*e).to_owned(), json!(name)))
            .collect();
        json!({
            "command": bin("fake-lsp-server").to_string_lossy(),
            "env": { crate::fake_lsp::CONFIG_ENV: config.to_json() },
            "extensionToLanguage": map,
        })
    }

    /// Run [`Env::command`] to completion.
    pub fn steward(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run steward")
    }

    /// Start `steward run` with `args`; returns once its socket answers.
    pub fn start(&self, args: &[&str]) -> Controller {
        let log = self.root.path().join(format!("controller-{}.log", nanos()));
        let log_file = std::fs::File::create(&log).unwrap();
        self.start_logging_to(args, log_file.into(), &[], log)
    }

    /// Start `steward run` with `args`, its stderr going to `stderr` and
    /// `vars` added to its environment; returns once its socket answers.
    /// `log` is what [`Controller::log_text`] reads (it need not exist).
    pub fn start_logging_to(
        &self,
        args: &[&str],
        stderr: Stdio,
        vars: &[(&str, &str)],
        log: PathBuf,
    ) -> Controller {
        let mut controller = self.spawn_controller(args, stderr, vars, log);
        controller.wait_ready();
        controller
    }

    /// [`Env::start_logging_to`] without waiting for the socket.
    pub fn spawn_controller(
        &self,
        args: &[&str],
        stderr: Stdio,
        vars: &[(&str, &str)],
        log: PathBuf,
    ) -> Controller {
        let mut run = vec![
            "run",
            "--crash-backoff-ms",
            "200",
            "--start-backoff-ms",
            "100",
        ];
        run.extend_from_slice(args);
        let child = self
            .command(&run)
            .envs(vars.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn steward run");
        self.adopt(child, log)
    }

    /// A `steward run` the test started itself (say, under a wrapper).
    pub fn adopt(&self, child: Child, log: PathBuf) -> Controller {
        Controller {
            child: Some(child),
            socket: self.paths().socket_path(),
            log,
        }
    }
}

/// PATH, LANG and TMPDIR from the test's environment.
pub fn base_env() -> Vec<(String, String)> {
    ["PATH", "LANG", "TMPDIR"]
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_owned(), v)))
        .collect()
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

/// Write by rename (temp file in the same directory, then rename over).
pub fn write_atomic(path: &Path, content: &str) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    let tmp = path.with_file_name(format!(
        ".{}.tmp{}",
        path.file_name().unwrap().to_string_lossy(),
        nanos()
    ));
    std::fs::write(&tmp, content).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A running `steward run`.
pub struct Controller {
    child: Option<Child>,
    socket: PathBuf,
    pub log: PathBuf,
}

/// The default deadline for a condition.
pub const DEADLINE: Duration = Duration::from_secs(20);

impl Controller {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or(0)
    }

    /// The controller's stderr, when it was started with a piped one.
    pub fn take_stderr(&mut self) -> Option<std::process::ChildStderr> {
        self.child.as_mut()?.stderr.take()
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// Wait until the control socket answers (deadline [`DEADLINE`]).
    pub fn wait_ready(&mut self) {
        let log = self.log.clone();
        eventually(
            "the controller to answer",
            DEADLINE,
            Duration::from_millis(20),
            || {
                if self.try_status().is_some() {
                    return Ok(());
                }
                if let Some(Ok(Some(code))) = self.child.as_mut().map(Child::try_wait) {
                    panic!("the controller exited with {code}\n{}", self.log_text());
                }
                Err(Seen {
                    status: None,
                    log: &log,
                })
            },
        );
    }

    /// The live status, if the controller answers.
    pub fn try_status(&self) -> Option<WorkspaceStatus> {
        let rt = Self::rt();
        rt.block_on(client::status(&self.socket, false, Duration::from_secs(5)))
            .ok()
    }

    pub fn status(&self) -> WorkspaceStatus {
        self.try_status()
            .unwrap_or_else(|| panic!("no status from the controller\n{}", self.log_text()))
    }

    /// Poll the status until `pred` holds (deadline [`DEADLINE`]).
    pub fn wait_for(&self, what: &str, pred: impl Fn(&WorkspaceStatus) -> bool) -> WorkspaceStatus {
        self.wait_for_within(what, DEADLINE, pred)
    }

    pub fn wait_for_within(
        &self,
        what: &str,
        deadline: Duration,
        pred: impl Fn(&WorkspaceStatus) -> bool,
    ) -> WorkspaceStatus {
        let last = RefCell::new(None);
        eventually(what, deadline, POLL, || match self.try_status() {
            Some(s) if pred(&s) => Ok(s),
            answer => {
                if answer.is_some() {
                    *last.borrow_mut() = answer;
                }
                Err(Seen {
                    status: Some(&last),
                    log: &self.log,
                })
            }
        })
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Wait until the controller exits by itself (deadline `within`; it is
    /// left a zombie for us) and collect its exit status.
    pub fn exit_status(&mut self, within: Duration) -> std::process::ExitStatus {
        let pid = self.pid();
        eventually(
            "the controller to exit",
            within,
            Duration::from_millis(10),
            || {
                if alive(pid) {
                    Err(Seen {
                        status: None,
                        log: &self.log,
                    })
                } else {
                    Ok(())
                }
            },
        );
        // Already exited: the SIGTERM of `terminate` hits a zombie, harmlessly.
        self.terminate().expect("exit status")
    }

    /// Send SIGTERM and wait for the exit status (bounded).
    pub fn terminate(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        signal(child.id() as i32, libc::SIGTERM);
        let exited = poll(DEADLINE, Duration::from_millis(10), || {
            match child.try_wait() {
                Ok(Some(status)) => Ok(status),
                _ => Err(()),
            }
        });
        exited.ok().or_else(|| {
            let _ = child.kill();
            child.wait().ok()
        })
    }

    /// SIGKILL the controller (no cleanup of its own).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// Send `sig` to `pid`.
#[allow(unsafe_code)]
pub fn signal(pid: i32, sig: i32) -> bool {
    // SAFETY: kill(2) with a pid we started; no memory is shared.
    unsafe { libc::kill(pid, sig) == 0 }
}

/// The fields of `/proc/<pid>/stat` the tests look at: the one `/proc`
/// reader of the tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: i32,
    pub state: char,
    pub ppid: i32,
    pub pgid: i32,
    pub session: i32,
    /// Start time in clock ticks since boot: with `pid`, the process identity.
    pub start: u64,
}

impl ProcStat {
    /// `/proc/<pid>/stat` now, if the process exists.
    pub fn read(pid: i32) -> Option<ProcStat> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // "pid (comm) state ppid pgrp session ..."; comm may hold spaces and ')'.
        let (_, rest) = text.rsplit_once(") ")?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        Some(ProcStat {
            pid,
            state: fields.first()?.chars().next()?,
            ppid: fields.get(1)?.parse().ok()?,
            pgid: fields.get(2)?.parse().ok()?,
            session: fields.get(3)?.parse().ok()?,
            start: fields.get(19)?.parse().ok()?,
        })
    }

    /// Neither a zombie nor dead.
    pub fn running(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }

    /// The process this stat was read from still runs (its pid not reused).
    pub fn still_running(&self) -> bool {
        ProcStat::read(self.pid).is_some_and(|now| now.start == self.start && now.running())
    }
}

/// Whether `pid` is alive (and not a zombie).
pub fn alive(pid: u32) -> bool {
    ProcStat::read(pid as i32).is_some_and(|stat| stat.running())
}

/// `root` and every live descendant of it, from /proc.
pub fn process_tree(root: u32) -> Vec<u32> {
    let mut parents = BTreeMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(stat) = ProcStat::read(pid as i32) {
            parents.insert(pid, stat.ppid as u32);
        }
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let p = tree[i];
        for (child, parent) in &parents {
            if *parent == p && !tree.contains(child) {
                tree.push(*child);
            }
        }
        i += 1;
    }
    tree
}

/// Wait until none of `pids` is alive (deadline [`DEADLINE`]).
pub fn wait_all_gone(what: &str, pids: &[u32]) {
    eventually(what, DEADLINE, Duration::from_millis(20), || {
        let left: Vec<u32> = pids.iter().copied().filter(|p| alive(*p)).collect();
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("still alive: {left:?}"))
        }
    });
}

/// How often a wait polls its condition, unless it says otherwise.
pub const POLL: Duration = Duration::from_millis(15);

/// Poll `probe` every `every` until it gives `Ok`, for at most `within` (the
/// last try is at the deadline); when time is up, the last try's `Err`.
///
/// Every wait of the tests is this loop (or [`eventually_async`]): a
/// condition with a deadline, never a fixed sleep. [`eventually`] fails the
/// test when time is up; `poll` is for a wait that then cleans up first.
pub fn poll<T, E>(
    within: Duration,
    every: Duration,
    mut probe: impl FnMut() -> Result<T, E>,
) -> Result<T, E> {
    let start = Instant::now();
    loop {
        let seen = match probe() {
            Ok(value) => return Ok(value),
            Err(seen) => seen,
        };
        let elapsed = start.elapsed();
        if elapsed >= within {
            return Err(seen);
        }
        std::thread::sleep(every.min(within - elapsed));
    }
}

/// [`poll`], then panics when time is up, saying what it waited for and
/// what the last try saw instead (its `Err`, when not empty).
pub fn eventually<T, E: Display>(
    what: &str,
    within: Duration,
    every: Duration,
    probe: impl FnMut() -> Result<T, E>,
) -> T {
    poll(within, every, probe).unwrap_or_else(|seen| timed_out(what, within, seen))
}

/// [`eventually`] for async code: `probe` is awaited and the pauses are
/// the runtime's.
pub async fn eventually_async<T, E: Display>(
    what: &str,
    within: Duration,
    every: Duration,
    mut probe: impl AsyncFnMut() -> Result<T, E>,
) -> T {
    let start = Instant::now();
    loop {
        let seen = match probe().await {
            Ok(value) => return value,
            Err(seen) => seen,
        };
        let elapsed = start.elapsed();
        if elapsed >= within {
            timed_out(what, within, seen);
        }
        tokio::time::sleep(every.min(within - elapsed)).await;
    }
}

fn timed_out(what: &str, within: Duration, seen: impl Display) -> ! {
    let seen = seen.to_string();
    if seen.is_empty() {
        panic!("timed out after {within:?} waiting for: {what}");
    }
    panic!("timed out after {within:?} waiting for: {what}\n{seen}");
}

/// Wait until `cond` holds ([`eventually`] with [`DEADLINE`] and [`POLL`]).
pub fn wait_until(what: &str, cond: impl Fn() -> bool) {
    eventually(
        what,
        DEADLINE,
        POLL,
        || if cond() { Ok(()) } else { Err("") },
    );
}

/// [`wait_until`] for async code.
pub async fn wait_until_async(what: &str, mut cond: impl AsyncFnMut() -> bool) {
    eventually_async(what, DEADLINE, POLL, async || {
        if cond().await { Ok(()) } else { Err("") }
    })
    .await;
}

/// What a controller wait saw last: its status (if it answered) and its
/// log, read only when the wait fails.
struct Seen<'a> {
    status: Option<&'a RefCell<Option<WorkspaceStatus>>>,
    log: &'a Path,
}

impl Display for Seen<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(status) = self.status.and_then(|s| s.borrow().clone()) {
            let status = serde_json::to_string_pretty(&status).unwrap_or_default();
            writeln!(f, "last status: {status}")?;
        }
        let log = std::fs::read_to_string(self.log).unwrap_or_default();
        write!(f, "controller log:\n{log}")
    }
}

/// Every pid that started recording into `dir` (fake servers and grandchildren).
pub fn recorded_pids(dir: &Path) -> Vec<u32> {
    let mut pids = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return pids;
    };
    for entry in entries.flatten() {
        if let Ok(events) = fake_mcp::read_record(&entry.path()) {
            for e in events {
                if e.event == "start" {
                    pids.push(e.pid);
                }
                if e.event == "grandchild"
                    && let Some(pid) = e.message.get("pid").and_then(Value::as_u64)
                {
                    pids.push(pid as u32);
                }
            }
        }
    }
    pids.sort();
    pids.dedup();
    pids
}

/// The item named `name` of kind McpServer.
pub fn mcp<'a>(
    status: &'a WorkspaceStatus,
    name: &str,
) -> Option<&'a steward_schema::resource::McpServer> {
    status.items.iter().find_map(|i| match i {
        Item::McpServer(s) if s.metadata.name == name => Some(s),
        _ => None,
    })
}

/// Whether MCP server `server` lists tool `tool` in `status`.
pub fn lists_tool(status: &WorkspaceStatus, server: &str, tool: &str) -> bool {
    mcp(status, server)
        .and_then(|m| m.status.tools.as_ref())
        .is_some_and(|tools| tools.iter().any(|t| t == tool))
}

/// The item named `name` of kind LspServer.
pub fn lsp<'a>(
    status: &'a WorkspaceStatus,
    name: &str,
) -> Option<&'a steward_schema::resource::LspServer> {
    status.items.iter().find_map(|i| match i {
        Item::LspServer(s) if s.metadata.name == name => Some(s),
        _ => None,
    })
}

/// The pid of LspServer `name`, if running.
pub fn lsp_pid(status: &WorkspaceStatus, name: &str) -> Option<u32> {
    lsp(status, name).and_then(|l| l.status.pid)
}

/// A `.lsp.json` document from (name, entry) pairs.
pub fn lsp_json(entries: &[(&str, Value)]) -> String {
    let map: serde_json::Map<String, Value> = entries
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    serde_json::to_string_pretty(&Value::Object(map)).unwrap()
}

impl Env {
    /// Run `steward lsp ARGS -o json` and parse the answer; panics with
    /// stderr on failure.
    pub fn lsp_cli(&self, args: &[&str]) -> Value {
        let mut full = vec!["lsp"];
        full.extend_from_slice(args);
        full.extend_from_slice(&["-o", "json"]);
        let out = self.steward(&full);
        assert!(
            out.status.success(),
            "steward {full:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

/// Whether LspServer `name` is Ready.
pub fn lsp_ready(status: &WorkspaceStatus, name: &str) -> bool {
    lsp(status, name).is_some_and(|s| s.status.phase == Phase::Ready)
}

/// Whether McpServer `name` is Ready.
pub fn ready(status: &WorkspaceStatus, name: &str) -> bool {
    mcp(status, name).is_some_and(|s| s.status.phase == Phase::Ready)
}

/// The pid of McpServer `name`, if running.
pub fn pid_of(status: &WorkspaceStatus, name: &str) -> Option<u32> {
    mcp(status, name).and_then(|s| s.status.pid)
}

/// A fake MCP server config offering `names` as tools.
pub fn fake_tools(names: &[&str]) -> FakeMcpConfig {
    FakeMcpConfig {
        tools: names.iter().map(|s| (*s).to_owned()).collect(),
        ..FakeMcpConfig::default()
    }
}

/// `entry` with a changed connection fingerprint (an extra env var).
pub fn with_version(entry: &Value, version: &str) -> Value {
    let mut e = entry.clone();
    e["env"]["VERSION"] = json!(version);
    e
}

impl Env {
    /// User settings (scope user: not gated) holding `servers`.
    pub fn user_mcp_servers(&self, servers: &[(&str, Value)]) {
        self.write_home("settings.json", &mcp_servers(servers));
    }
}

/// `{"mcpServers": {...}}` from (name, entry) pairs.
pub fn mcp_servers(entries: &[(&str, Value)]) -> String {
    let map: serde_json::Map<String, Value> = entries
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    serde_json::to_string_pretty(&json!({ "mcpServers": map })).unwrap()
}

/// The outcome of one [`Env::run`].
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(o: Output) -> Self {
        Run {
            code: o.status.code().expect("steward exited by a signal"),
            stdout: String::from_utf8(o.stdout).expect("stdout is UTF-8"),
            stderr: String::from_utf8(o.stderr).expect("stderr is UTF-8"),
        }
    }
}

/// A child process killed and reaped when dropped (a failing test leaves
/// nothing running).
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `command` run to completion with `input` on its stdin (stdout and
/// stderr captured).
pub fn run_with_input(mut command: Command, input: &[u8]) -> Run {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("a piped stdin")
        .write_all(input)
        .expect("write the input");
    Run::from(child.wait_with_output().expect("wait"))
}

/// `item.status.reason` (or `"-"` when admitted) of every item of a status
/// document, by `kind/name`.
pub fn reasons(status: &Value) -> Vec<(String, String)> {
    status["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|item| {
            (
                format!(
                    "{}/{}",
                    item["kind"].as_str().unwrap(),
                    item["metadata"]["name"].as_str().unwrap()
                ),
                item["status"]["reason"].as_str().unwrap_or("-").to_owned(),
            )
        })
        .collect()
}

/// The item `kind/name` of a status document.
pub fn item<'a>(status: &'a Value, kind: &str, name: &str) -> &'a Value {
    status["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["kind"] == kind && i["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind}/{name} in status"))
}

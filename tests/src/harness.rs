//! The envtest harness: a temporary HOME_DIR and workspace, the real
//! `steward` binary, and helpers that wait for status conditions with a
//! deadline (never fixed sleeps).
//!
//! Every process a test starts is cleaned up: the controller is stopped with
//! SIGTERM (then SIGKILL) when its [`Controller`] is dropped, and the harness
//! checks that no fake server recorded under the test's directory survives.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use steward::control::{self, Request};
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

/// A temporary HOME_DIR + workspace.
pub struct Env {
    pub root: tempfile::TempDir,
    pub home: PathBuf,
    pub ws: PathBuf,
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
        let root = tempfile::Builder::new()
            .prefix("stw")
            .tempdir()
            .expect("temp dir");
        let home = root.path().join("home");
        let ws = root.path().join("ws");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        let ws = std::fs::canonicalize(&ws).unwrap();
        let home = std::fs::canonicalize(&home).unwrap();
        Env {
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

    /// The environment every steward process of this test gets.
    pub fn vars(&self) -> BTreeMap<String, String> {
        let mut vars = BTreeMap::new();
        vars.insert("QWEN_HOME".into(), self.home.to_string_lossy().into_owned());
        vars.insert("HOME".into(), self.home.to_string_lossy().into_owned());
        let etc = self.root.path().join("etc");
        vars.insert(
            "QWEN_CODE_SYSTEM_DEFAULTS_PATH".into(),
            etc.join("system-defaults.json")
                .to_string_lossy()
                .into_owned(),
        );
        vars.insert(
            "QWEN_CODE_SYSTEM_SETTINGS_PATH".into(),
            etc.join("settings.json").to_string_lossy().into_owned(),
        );
        // The per-workspace lock goes to the user's runtime directory: keep
        // it inside the test's own directory.
        vars.insert(
            "XDG_RUNTIME_DIR".into(),
            self.root.path().join("run").to_string_lossy().into_owned(),
        );
        vars.insert("RUST_LOG".into(), "steward=debug,info".into());
        vars.extend(self.extra.lock().unwrap().clone());
        vars
    }

    pub fn paths(&self) -> Paths {
        let mut env = steward::support::paths::process_env();
        env.extend(self.vars());
        Paths::resolve(&self.ws, &env).expect("paths")
    }

    /// Write `content` to `rel` under the workspace (parents created), the
    /// way an editor that saves by rename does.
    pub fn write(&self, rel: &str, content: &str) {
        write_atomic(&self.ws.join(rel), content);
    }

    /// Write a file under HOME_DIR.
    pub fn write_home(&self, rel: &str, content: &str) {
        write_atomic(&self.home.join(rel), content);
    }

    /// A directory for fake-server record files.
    pub fn records(&self) -> PathBuf {
        let dir = self.root.path().join("records");
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

    /// Run the steward CLI with `args` in this environment.
    pub fn steward(&self, args: &[&str]) -> Output {
        Command::new(bin("steward"))
            .arg("--workspace")
            .arg(&self.ws)
            .args(args)
            .env_clear()
            .envs(base_env())
            .envs(self.vars())
            .output()
            .expect("run steward")
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
        let child = Command::new(bin("steward"))
            .arg("--workspace")
            .arg(&self.ws)
            .arg("run")
            .args(["--crash-backoff-ms", "200", "--start-backoff-ms", "100"])
            .args(args)
            .env_clear()
            .envs(base_env())
            .envs(self.vars())
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
        let start = Instant::now();
        while start.elapsed() < DEADLINE {
            if self.try_status().is_some() {
                return;
            }
            if let Some(Ok(Some(code))) = self.child.as_mut().map(Child::try_wait) {
                panic!("the controller exited with {code}\n{}", self.log_text());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "the controller did not answer within {DEADLINE:?}\n{}",
            self.log_text()
        );
    }

    /// The live status, if the controller answers.
    pub fn try_status(&self) -> Option<WorkspaceStatus> {
        let rt = Self::rt();
        let r = rt
            .block_on(control::request(
                &self.socket,
                &Request::Status,
                Duration::from_secs(5),
            ))
            .ok()?;
        r.status.map(|s| *s)
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
        let start = Instant::now();
        let mut last = None;
        while start.elapsed() < deadline {
            if let Some(s) = self.try_status() {
                if pred(&s) {
                    return s;
                }
                last = Some(s);
            }
            std::thread::sleep(Duration::from_millis(15));
        }
        panic!(
            "timed out after {deadline:?} waiting for: {what}\nlast status: {}\ncontroller log:\n{}",
            serde_json::to_string_pretty(&last).unwrap_or_default(),
            self.log_text()
        );
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Send SIGTERM and wait for the exit status (bounded).
    pub fn terminate(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        signal(child.id() as i32, libc::SIGTERM);
        let start = Instant::now();
        while start.elapsed() < DEADLINE {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        child.wait().ok()
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

/// Whether `pid` is alive (and not a zombie).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .unwrap_or("");
            state != "Z" && state != "X"
        }
        Err(_) => false,
    }
}

/// Wait until `cond` holds (deadline [`DEADLINE`]); panics with `what`.
pub fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while start.elapsed() < DEADLINE {
        if cond() {
            return;
        }
        std::thread::sleep(Duration::from_millis(15));
    }
    panic!("timed out after {DEADLINE:?} waiting for: {what}");
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

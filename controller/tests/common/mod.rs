//! Shared harness for the CLI integration tests: a temp directory holding
//! HOME_DIR, the user's HOME, fake `/etc` files and a workspace, and a way to
//! run the real `steward` binary inside it with a clean environment, so the
//! machine's own files and variables never leak in and nothing is written
//! outside the temp directory.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// "Now" for every run: timestamps in snapshots are stable.
pub const NOW: &str = "2025-06-01T12:00:00Z";

pub struct Sandbox {
    _dir: tempfile::TempDir,
    /// Canonical temp root.
    pub root: PathBuf,
    /// HOME_DIR (`$QWEN_HOME`).
    pub home: PathBuf,
    /// The workspace (canonical).
    pub ws: PathBuf,
    pub system_defaults: PathBuf,
    pub system_settings: PathBuf,
    /// Extra variables for the child (`KEY=value`).
    pub vars: Vec<(String, String)>,
}

impl Sandbox {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("create a temp dir");
        let root = std::fs::canonicalize(dir.path()).expect("canonicalize the temp dir");
        let home = root.join("qwen-home");
        let ws = root.join("ws");
        for d in [&home, &ws, &root.join("user"), &root.join("etc")] {
            std::fs::create_dir_all(d).expect("create sandbox dirs");
        }
        Sandbox {
            system_defaults: root.join("etc").join("system-defaults.json"),
            system_settings: root.join("etc").join("settings.json"),
            _dir: dir,
            root,
            home,
            ws,
            vars: Vec::new(),
        }
    }

    /// Write `text` to `rel` under the workspace (creating directories).
    pub fn ws_file(&self, rel: &str, text: &str) -> PathBuf {
        write(&self.ws.join(rel), text)
    }

    /// Write `text` to `rel` under HOME_DIR (creating directories).
    pub fn home_file(&self, rel: &str, text: &str) -> PathBuf {
        write(&self.home.join(rel), text)
    }

    pub fn approvals_path(&self) -> PathBuf {
        self.home.join("mcpApprovals.json")
    }

    /// The `steward` command, run in the workspace with a clean environment.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_steward"));
        cmd.args(args)
            .current_dir(&self.ws)
            .env_clear()
            .env("HOME", self.root.join("user"))
            .env("QWEN_HOME", &self.home)
            .env("QWEN_CODE_SYSTEM_DEFAULTS_PATH", &self.system_defaults)
            .env("QWEN_CODE_SYSTEM_SETTINGS_PATH", &self.system_settings)
            .env("STEWARD_NOW", NOW)
            .stdin(Stdio::null());
        for (k, v) in &self.vars {
            cmd.env(k, v);
        }
        cmd
    }

    /// Run `steward args…` to completion.
    pub fn run(&self, args: &[&str]) -> Run {
        Run::from(self.cmd(args).output().expect("run steward"))
    }

    /// Start `steward args…` without waiting (stdout/stderr captured).
    pub fn spawn(&self, args: &[&str]) -> Child {
        self.cmd(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn steward")
    }

    /// Replace temp paths with stable placeholders (for snapshots).
    pub fn redact(&self, text: &str) -> String {
        text.replace(self.ws.to_str().unwrap(), "[WS]")
            .replace(self.home.to_str().unwrap(), "[HOME]")
            .replace(self.root.to_str().unwrap(), "[TMP]")
    }

    /// insta settings that redact this sandbox's paths.
    pub fn insta_settings(&self) -> insta::Settings {
        let mut settings = insta::Settings::clone_current();
        settings.set_prepend_module_to_snapshot(false);
        for (path, label) in [
            (&self.ws, "[WS]"),
            (&self.home, "[HOME]"),
            (&self.root, "[TMP]"),
        ] {
            settings.add_filter(&regex_escape(path.to_str().unwrap()), label);
        }
        settings
    }

    /// `status --offline -o json` parsed (panics on failure).
    pub fn status_json(&self, extra: &[&str]) -> serde_json::Value {
        let mut args = vec!["status", "--offline", "-o", "json"];
        args.extend_from_slice(extra);
        let run = self.run(&args);
        assert_eq!(run.code, 0, "status failed: {}", run.stderr);
        serde_json::from_str(&run.stdout).expect("status -o json is JSON")
    }
}

pub fn write(path: &Path, text: &str) -> PathBuf {
    std::fs::create_dir_all(path.parent().unwrap()).expect("create parent dir");
    std::fs::write(path, text).expect("write fixture file");
    path.to_path_buf()
}

/// Escape regex metacharacters (insta filters are regexes).
pub fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The outcome of one run.
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

/// `item.status.reason` (or `"-"` when admitted) of every item, by `kind/name`.
pub fn reasons(status: &serde_json::Value) -> Vec<(String, String)> {
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
pub fn item<'a>(status: &'a serde_json::Value, kind: &str, name: &str) -> &'a serde_json::Value {
    status["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["kind"] == kind && i["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind}/{name} in status"))
}

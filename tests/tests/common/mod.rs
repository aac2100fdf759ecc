//! Helpers shared by `mcp_real_peers.rs` and `mcp_more.rs`: process trees
//! from /proc, the `steward` CLI as a long-running child (for `--watch`), and
//! where the real peer servers are installed.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use steward_tests::harness::{DEADLINE, Env, alive, bin};

/// The environment the harness gives every steward process (PATH, LANG,
/// TMPDIR from ours, then the test's HOME_DIR and system paths).
pub fn steward_env(env: &Env) -> Vec<(String, String)> {
    let mut vars: Vec<(String, String)> = ["PATH", "LANG", "TMPDIR"]
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_owned(), v)))
        .collect();
    vars.extend(env.vars());
    vars
}

/// `steward --workspace WS <args>` as a child with stdout piped (stderr to
/// `stderr_to`); its stdout lines arrive on [`CliChild::lines`].
pub struct CliChild {
    pub child: Child,
    pub lines: mpsc::Receiver<String>,
    pub stderr: PathBuf,
}

impl CliChild {
    pub fn spawn(env: &Env, args: &[&str]) -> CliChild {
        let stderr = env.root.path().join(format!(
            "cli-{}.stderr",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        let mut child = Command::new(bin("steward"))
            .arg("--workspace")
            .arg(&env.ws)
            .args(args)
            .env_clear()
            .envs(steward_env(env))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("spawn steward");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        CliChild {
            child,
            lines,
            stderr,
        }
    }

    /// The next stdout line (panics after [`DEADLINE`]).
    pub fn next_line(&self, what: &str) -> String {
        self.lines.recv_timeout(DEADLINE).unwrap_or_else(|e| {
            panic!(
                "no stdout line from steward ({e}) while waiting for {what}; stderr:\n{}",
                self.stderr_text()
            )
        })
    }

    /// Read lines until one satisfies `pred`; returns every line read, the
    /// matching one last.
    pub fn read_until(&self, what: &str, pred: impl Fn(&str) -> bool) -> Vec<String> {
        let start = Instant::now();
        let mut seen = Vec::new();
        loop {
            let left = DEADLINE.saturating_sub(start.elapsed());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let done = pred(&line);
                    seen.push(line);
                    if done {
                        return seen;
                    }
                }
                Err(e) => panic!(
                    "timed out ({e}) waiting for {what}; lines so far:\n{}\nstderr:\n{}",
                    seen.join("\n"),
                    self.stderr_text()
                ),
            }
        }
    }

    /// Every line already received, without waiting.
    pub fn drain(&self) -> Vec<String> {
        self.lines.try_iter().collect()
    }

    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for CliChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Parent pid of every live process, from /proc.
fn parents() -> BTreeMap<u32, u32> {
    let mut map = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return map;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: comm may contain spaces and parentheses.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let _state = fields.next();
        if let Some(ppid) = fields.next().and_then(|s| s.parse().ok()) {
            map.insert(pid, ppid);
        }
    }
    map
}

/// `root` and every live descendant of it.
pub fn process_tree(root: u32) -> Vec<u32> {
    let parents = parents();
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
    let start = Instant::now();
    while start.elapsed() < DEADLINE {
        if pids.iter().all(|p| !alive(*p)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<u32> = pids.iter().copied().filter(|p| alive(*p)).collect();
    panic!("timed out after {DEADLINE:?} waiting for: {what}; still alive: {left:?}");
}

/// Where `.ci/run` installs the real peers: `$STEWARD_PEERS_DIR`, else
/// `<repo>/.peers`.
pub fn peers_dir() -> PathBuf {
    match std::env::var_os("STEWARD_PEERS_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("tests/ has a parent")
            .join(".peers"),
    }
}

/// The installed peer executable at `rel` under [`peers_dir`]; fails the
/// test (never skips it) when it is missing.
pub fn peer(package: &str, rel: &str) -> PathBuf {
    let path = peers_dir().join(rel);
    assert!(
        path.is_file(),
        "real peer {package} is missing: {} does not exist (set STEWARD_PEERS_DIR or run .ci/run to install it)",
        path.display()
    );
    path
}

/// Wait until `text()` contains `needle` (deadline [`DEADLINE`]).
pub fn wait_until_text(what: &str, text: impl Fn() -> String, needle: &str) {
    let start = Instant::now();
    while start.elapsed() < DEADLINE {
        if text().contains(needle) {
            return;
        }
        std::thread::sleep(Duration::from_millis(15));
    }
    panic!(
        "timed out after {DEADLINE:?} waiting for: {what}; text:\n{}",
        text()
    );
}

//! Helpers the envtests share beyond the harness: the `steward` CLI as a
//! long-running child (for `--watch`), where the real peer servers are
//! installed and the lock that runs their heaviest tests one at a time, and
//! insta settings for the CLI snapshots.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError, mpsc};
use std::time::Instant;

use steward_tests::harness::{DEADLINE, Env, POLL, eventually};

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
        let mut child = env
            .command(args)
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
    eventually(what, DEADLINE, POLL, || {
        let text = text();
        if text.contains(needle) {
            Ok(())
        } else {
            Err(format!("text:\n{text}"))
        }
    });
}

/// One workspace of real language servers at a time (clangd, pyright and
/// the like start slowly on a small machine), across every test that
/// starts them.
pub fn one_at_a_time() -> MutexGuard<'static, ()> {
    static REAL_SERVERS: Mutex<()> = Mutex::new(());
    REAL_SERVERS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// insta settings that show this sandbox's paths as `[WS]`, `[HOME]` and
/// `[TMP]`, and name snapshots without the module path.
pub fn insta_settings(env: &Env) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    for (path, label) in [
        (env.ws.as_path(), "[WS]"),
        (env.home.as_path(), "[HOME]"),
        (env.root.path(), "[TMP]"),
    ] {
        settings.add_filter(&regex_escape(path.to_str().unwrap()), label);
    }
    settings
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

/// Call tool `name` through the controller's agent socket, as an agent
/// would; the result as JSON.
pub fn call_tool(env: &Env, name: &str) -> serde_json::Value {
    use rmcp::ServiceExt as _;
    use rmcp::model::CallToolRequestParams;
    crate::gateway::runtime().block_on(async {
        let stream = tokio::net::UnixStream::connect(env.paths().mcp_socket_path())
            .await
            .expect("connect to the agent socket");
        let client = ().serve(stream.into_split()).await.expect("initialize");
        let result = client
            .call_tool(CallToolRequestParams::new(name.to_owned()))
            .await
            .unwrap_or_else(|e| panic!("call {name}: {e}"));
        client.cancel().await.unwrap();
        serde_json::to_value(result).unwrap()
    })
}

/// Node 22 and the official MCP conformance suite's CLI, as `.ci/run`
/// installs them (`$STEWARD_NODE22`, `$STEWARD_CONFORMANCE`, else under
/// [`peers_dir`]); fails the test (never skips it) when either is missing.
pub fn conformance_suite() -> (PathBuf, PathBuf) {
    let from = |var: &str, rel: &str, package: &str| match std::env::var_os(var) {
        Some(path) if !path.is_empty() => {
            let path = PathBuf::from(path);
            assert!(
                path.is_file(),
                "real peer {package} is missing: ${var} names {}, which does not exist",
                path.display()
            );
            path
        }
        _ => peer(package, rel),
    };
    (
        from("STEWARD_NODE22", "node22/node_modules/.bin/node", "node@22"),
        from(
            "STEWARD_CONFORMANCE",
            "node22/node_modules/@modelcontextprotocol/conformance/dist/index.js",
            "@modelcontextprotocol/conformance",
        ),
    )
}

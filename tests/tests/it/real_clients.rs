//! The real MCP clients agents use, run against Steward's agent endpoint:
//! the PyPI `mcp` SDK (`ClientSession`, 2.x and 1.x, driven line by line
//! through `tests/clients/mcp_client.py`), the TypeScript SDK (`Client`,
//! through `tests/clients/ts_client.mjs`), the MCP Inspector CLI and Qwen
//! Code. All are installed at pinned versions by `.ci/run` under the peers
//! directory; a missing one fails the test (never skips it).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};
use steward_tests::harness::{Env, bin, eventually, poll};

use crate::common::peer;

/// Node and Python start slowly on a loaded 2-core machine.
pub const CLIENT_DEADLINE: Duration = Duration::from_secs(60);

/// The Python of the peers' venv, where `.ci/run` installs `mcp`.
pub fn python() -> PathBuf {
    peer("mcp (PyPI, in the peers venv)", "venv/bin/python")
}

/// The Python of the peers' second venv, where `.ci/run` installs the
/// PyPI `mcp` SDK's last 1.x release.
pub fn python1() -> PathBuf {
    peer(
        "mcp 1.x (PyPI, in the peers venv-mcp1)",
        "venv-mcp1/bin/python",
    )
}

/// A real SDK whose client [`PyClient`] drives: each takes the same driver
/// options (`--sampling`, `--elicitation`, `--name=NAME`, `--roots=URI,...`)
/// and the same line commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sdk {
    /// The PyPI `mcp` SDK 2.x (`tests/clients/mcp_client.py` in the venv).
    PyPi2,
    /// The PyPI `mcp` SDK 1.x (the same script in venv-mcp1).
    PyPi1,
    /// The TypeScript SDK (`tests/clients/ts_client.mjs`).
    TypeScript,
}

fn driver_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/mcp_client.py")
}

/// Node.js, from the test's PATH (the machine's, as npm installed the
/// peers with it).
fn node() -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("node"))
        .find(|path| path.is_file())
        .expect("node is on PATH (the peers are Node packages)")
}

fn ts_driver_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/ts_client.mjs")
}

/// The `server-everything` entry (stdio).
pub fn everything() -> Value {
    let bin = peer(
        "@modelcontextprotocol/server-everything",
        "node_modules/.bin/mcp-server-everything",
    );
    json!({"command": bin.to_string_lossy(), "args": ["stdio"]})
}

/// The command line that runs `steward mcp` for `env` (what an agent is
/// told to run).
pub fn steward_mcp_argv(env: &Env) -> Vec<String> {
    vec![
        bin("steward").to_string_lossy().into_owned(),
        "mcp".to_owned(),
        "--workspace".to_owned(),
        env.ws.to_string_lossy().into_owned(),
    ]
}

/// One PyPI-SDK client session, driven command by command.
pub struct PyClient {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    pub stderr: PathBuf,
}

impl PyClient {
    /// A session over stdio with the server `argv` (the client spawns it).
    pub fn stdio(env: &Env, argv: &[String]) -> PyClient {
        Self::stdio_with(env, &[], argv)
    }

    /// [`PyClient::stdio`] with driver options (`--sampling`, `--elicitation`).
    pub fn stdio_with(env: &Env, options: &[&str], argv: &[String]) -> PyClient {
        let mut args: Vec<String> = options.iter().map(|o| (*o).to_owned()).collect();
        args.push("stdio".to_owned());
        args.extend(argv.iter().cloned());
        Self::spawn(env, &args)
    }

    /// A session over streamable HTTP at `url`, sending `headers`
    /// (`Name: value`) with every request.
    pub fn http(env: &Env, url: &str, headers: &[&str]) -> PyClient {
        Self::http_with(env, &[], url, headers)
    }

    /// [`PyClient::http`] with driver options (`--sampling`, `--elicitation`).
    pub fn http_with(env: &Env, options: &[&str], url: &str, headers: &[&str]) -> PyClient {
        let mut args: Vec<String> = options.iter().map(|o| (*o).to_owned()).collect();
        args.extend(["http".to_owned(), url.to_owned()]);
        args.extend(headers.iter().map(|h| (*h).to_owned()));
        Self::spawn(env, &args)
    }

    /// A session of the TypeScript SDK's client (`tests/clients/ts_client.mjs`,
    /// the same line protocol: `list_tools`, `call_tool`, `session`) over
    /// stdio with the server `argv`.
    pub fn typescript(env: &Env, argv: &[String]) -> PyClient {
        // The SDK a pinned peer brings; a missing one fails here.
        peer(
            "@modelcontextprotocol/sdk",
            "node_modules/@modelcontextprotocol/sdk/package.json",
        );
        let mut command = Command::new(node());
        command.arg(ts_driver_script()).arg("stdio").args(argv);
        Self::spawn_command(env, command, "tsclient")
    }

    /// A session of `sdk`'s client with driver `options`, to `target`:
    /// `["stdio", COMMAND, ARG...]` (the client spawns it) or
    /// `["http", URL, "Name: value"...]`.
    pub fn of(sdk: Sdk, env: &Env, options: &[&str], target: &[String]) -> PyClient {
        let mut command = match sdk {
            Sdk::PyPi2 | Sdk::PyPi1 => {
                let python = if sdk == Sdk::PyPi1 {
                    python1()
                } else {
                    python()
                };
                let mut command = Command::new(python);
                command.arg("-B").arg(driver_script());
                command
            }
            Sdk::TypeScript => {
                peer(
                    "@modelcontextprotocol/sdk",
                    "node_modules/@modelcontextprotocol/sdk/package.json",
                );
                let mut command = Command::new(node());
                command.arg(ts_driver_script());
                command
            }
        };
        command.args(options).args(target);
        let name = match sdk {
            Sdk::PyPi2 => "pyclient",
            Sdk::PyPi1 => "pyclient1",
            Sdk::TypeScript => "tsclient",
        };
        Self::spawn_command(env, command, name)
    }

    fn spawn(env: &Env, args: &[String]) -> PyClient {
        let mut command = Command::new(python());
        // -B: never write bytecode next to the script (outside the temp dirs).
        command.arg("-B").arg(driver_script()).args(args);
        Self::spawn_command(env, command, "pyclient")
    }

    fn spawn_command(env: &Env, mut command: Command, name: &str) -> PyClient {
        let stderr = env.root.path().join(format!("{name}-{}.stderr", nanos()));
        let mut child = command
            .current_dir(&env.ws)
            .env_clear()
            .envs(env.steward_env())
            .env("STEWARD_PEERS_DIR", crate::common::peers_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn the {name} MCP client: {e}"));
        let stdin = child.stdin.take();
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
        let mut client = PyClient {
            child,
            stdin,
            lines,
            stderr,
        };
        let first = client.answer("initialize");
        assert_eq!(
            first,
            Ok(json!("initialized")),
            "stderr:\n{}",
            client.stderr_text()
        );
        client
    }

    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn answer(&mut self, what: &str) -> Result<Value, String> {
        let line = self
            .lines
            .recv_timeout(CLIENT_DEADLINE)
            .unwrap_or_else(|e| {
                panic!(
                    "the Python client did not answer {what} ({e}); stderr:\n{}",
                    self.stderr_text()
                )
            });
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not JSON from the Python client ({e}): {line}"));
        match (v.get("ok"), v.get("error")) {
            (Some(ok), _) => Ok(ok.clone()),
            (_, Some(Value::String(e))) => Err(e.clone()),
            _ => panic!("unexpected answer {line}"),
        }
    }

    /// Run one driver command; `Err` is the client's error text.
    pub fn try_run(&mut self, command: Value) -> Result<Value, String> {
        let stdin = self.stdin.as_mut().expect("session open");
        writeln!(stdin, "{command}").expect("write to the Python client");
        stdin.flush().unwrap();
        self.answer(&command.to_string())
    }

    /// Send one driver command without waiting for its answer (the driver
    /// runs one at a time: the next command is read once it is answered).
    pub fn send(&mut self, command: &Value) {
        let stdin = self.stdin.as_mut().expect("session open");
        writeln!(stdin, "{command}").expect("write to the client");
        stdin.flush().unwrap();
    }

    /// The answer to the command sent last with [`Self::send`].
    pub fn receive(&mut self, what: &str) -> Result<Value, String> {
        self.answer(what)
    }

    /// Run one driver command that must succeed.
    pub fn run(&mut self, command: Value) -> Value {
        let what = command.to_string();
        self.try_run(command).unwrap_or_else(|e| {
            panic!("{what} failed: {e}\nclient stderr:\n{}", self.stderr_text())
        })
    }

    /// Every item of a list (`list_tools`, `list_prompts`, …).
    pub fn list(&mut self, op: &str) -> Vec<Value> {
        let v = self.run(json!({"op": op}));
        v["items"].as_array().cloned().unwrap_or_default()
    }

    pub fn tool_names(&mut self) -> Vec<String> {
        self.list("list_tools")
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    }

    /// `tools/call`; the result and the progress notifications received.
    pub fn call(&mut self, name: &str, arguments: Value) -> (Value, Vec<Value>) {
        let v = self.run(
            json!({"op": "call_tool", "name": name, "arguments": arguments, "progress": true}),
        );
        (
            v["result"].clone(),
            v["progress"].as_array().cloned().unwrap_or_default(),
        )
    }

    /// Every notification method received so far.
    pub fn notifications(&mut self) -> Vec<String> {
        let v = self.run(json!({"op": "notifications"}));
        serde_json::from_value(v).unwrap()
    }

    /// Wait until `count` notifications `method` have arrived.
    pub fn wait_notification(&mut self, method: &str, count: usize) -> Vec<String> {
        let v = self.run(json!({
            "op": "wait_notification", "method": method, "count": count,
            "timeout": CLIENT_DEADLINE.as_secs(),
        }));
        serde_json::from_value(v).unwrap()
    }

    /// End the session the way an agent does (stdin closed: the SDK closes
    /// its transport, DELETE for HTTP) and wait for the client to exit;
    /// returns its stderr.
    pub fn close(mut self) -> String {
        drop(self.stdin.take());
        let stderr = &self.stderr;
        let status = eventually(
            "the Python client to exit after its stdin closed",
            CLIENT_DEADLINE,
            Duration::from_millis(20),
            || match self.child.try_wait() {
                Ok(Some(status)) => Ok(status),
                _ => Err(std::fs::read_to_string(stderr).unwrap_or_default()),
            },
        );
        assert!(
            status.success(),
            "the Python client exited with {status}:\n{}",
            self.stderr_text()
        );
        self.stderr_text()
    }
}

impl Drop for PyClient {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The PyPI SDK's high-level `Client` in its default mode (it adopts the
/// 2026-07-28 lifecycle when the server speaks it), through
/// `tests/clients/modern_client.py`: it lists, calls one tool, listens for
/// tool list changes and, at the first one, lists again and exits. Each
/// step is one JSON line.
pub struct ModernClient {
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: PathBuf,
}

impl ModernClient {
    /// Run it against `steward mcp` for `env`, calling `tool` with `arguments`.
    pub fn spawn(env: &Env, tool: &str, arguments: &Value) -> ModernClient {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/modern_client.py");
        let stderr = env.root.path().join(format!("modern-{}.stderr", nanos()));
        let mut child = Command::new(python())
            .arg("-B")
            .arg(script)
            .arg(tool)
            .arg(arguments.to_string())
            .args(steward_mcp_argv(env))
            .current_dir(&env.ws)
            .env_clear()
            .envs(env.steward_env())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        ModernClient {
            child,
            lines,
            stderr,
        }
    }

    /// Its next step's line, parsed.
    pub fn next(&self, what: &str) -> Value {
        let line = self
            .lines
            .recv_timeout(CLIENT_DEADLINE)
            .unwrap_or_else(|_| {
                panic!(
                    "no {what} from the client:\n{}",
                    std::fs::read_to_string(&self.stderr).unwrap_or_default()
                )
            });
        serde_json::from_str(&line).unwrap()
    }

    /// Wait for it to exit; whether it succeeded, and its stderr.
    pub fn finish(mut self) -> (bool, String) {
        let ok = poll(CLIENT_DEADLINE, Duration::from_millis(20), || {
            self.child.try_wait().ok().flatten().ok_or(())
        })
        .is_ok_and(|status| status.success());
        (
            ok,
            std::fs::read_to_string(&self.stderr).unwrap_or_default(),
        )
    }
}

impl Drop for ModernClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// Run `command` to its end, killing it after `limit`.
pub fn output_within(mut command: Command, limit: Duration) -> Output {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {command:?}: {e}"));
    let reader = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            buf
        })
    };
    let out = reader(Box::new(child.stdout.take().unwrap()));
    let err = reader(Box::new(child.stderr.take().unwrap()));
    let exited = poll(limit, Duration::from_millis(20), || {
        child.try_wait().unwrap().ok_or(())
    });
    let Ok(status) = exited else {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "{command:?} did not finish within {limit:?}; stderr:\n{}",
            String::from_utf8_lossy(&err.join().unwrap())
        );
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// `mcp-inspector-cli --cli TARGET... ARGS...` (its JSON answer). A stdio
/// target gets `env`'s variables through `-e`, as a user registering a
/// server with the Inspector would pass them.
pub fn inspector(env: &Env, target: &[String], args: &[&str]) -> Value {
    let cli = peer(
        "@modelcontextprotocol/inspector-cli",
        "node_modules/.bin/mcp-inspector-cli",
    );
    let mut command = Command::new(cli);
    command.arg("--cli");
    if !target[0].starts_with("http") {
        for (k, v) in env.vars() {
            command.arg("-e").arg(format!("{k}={v}"));
        }
    }
    command
        .args(target)
        .args(args)
        .current_dir(&env.ws)
        .env_clear()
        .envs(env.steward_env());
    let out = output_within(command, CLIENT_DEADLINE);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "inspector {args:?} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("inspector {args:?} printed no JSON ({e}):\n{stdout}"))
}

/// The text blocks of a tool result, joined.
pub fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// The agent endpoint's HTTP URL, from the controller's status.
pub fn http_url(status: &steward_schema::resource::WorkspaceStatus) -> String {
    status
        .controller
        .gateway
        .as_ref()
        .and_then(|g| g.listen.clone())
        .expect("the controller reports its HTTP address")
}

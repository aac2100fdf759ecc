//! The client under test of the MCP conformance suite's client scenarios
//! (`conformance client --command steward-conformance-client …`): Steward,
//! driven the way a user and an agent drive it.
//!
//! Given the scenario's server URL (the last argument), it writes a
//! workspace whose only server is that URL (user settings: no approval
//! needed), runs `steward run`, and then acts as a diligent user:
//! - while the server waits for a sign-in (`AuthRequired`), it runs
//!   `steward auth login NAME` with a `BROWSER` that follows the
//!   authorization URL's redirects (the suite's authorization server
//!   approves at once);
//! - once the server is Ready, an agent lists the tools through
//!   `steward mcp` and calls each one; a call answered with a tool error
//!   naming `steward auth login` (step-up) gets that command run, then the
//!   call again.
//!
//! It follows only what Steward says to do, and at most [`MAX_LOGINS`]
//! times: a loop would show in the scenario's own checks.
//!
//! `MCP_CONFORMANCE_CONTEXT` (pre-registration) gives the client id and
//! secret: the entry's `oauth.clientId`, and `oauth.clientSecret` as a
//! `${secret:…}` reference stored with `steward secret set`. Every scenario
//! sets `steward.oauth.clientMetadataUrl` to the suite's Client ID Metadata
//! Document URL (used only where the authorization server supports it).
//! `STEWARD_BIN` names the steward binary (default: `steward-under-test`
//! beside this one); `CONFORMANCE_CLIENT_LOG` a file for this run's story.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow, bail};
use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

/// The server's name in the workspace.
const NAME: &str = "conformance";
/// Sign-ins the "user" does at most.
const MAX_LOGINS: usize = 6;
/// The suite's Client ID Metadata Document.
const CIMD_URL: &str = "https://conformance-test.local/client-metadata.json";

struct Run {
    steward: PathBuf,
    root: PathBuf,
    home: PathBuf,
    ws: PathBuf,
    log: Option<PathBuf>,
    logins: usize,
}

impl Run {
    fn note(&self, line: &str) {
        eprintln!("conformance-client: {line}");
        if let Some(path) = &self.log
            && let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
        {
            let _ = writeln!(f, "{line}");
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.steward);
        command
            .arg("--workspace")
            .arg(&self.ws)
            .args(args)
            .env_clear()
            .envs(
                ["PATH", "LANG", "TMPDIR"]
                    .iter()
                    .filter_map(|k| std::env::var(k).ok().map(|v| (*k, v))),
            )
            .env("QWEN_HOME", &self.home)
            .env("HOME", &self.home)
            .env("XDG_RUNTIME_DIR", self.root.join("run"))
            .env("RUST_LOG", "steward=debug,info");
        command
    }

    /// `steward auth login NAME` with the scripted browser.
    fn login(&mut self) -> Result<bool> {
        if self.logins >= MAX_LOGINS {
            bail!("steward asked for more than {MAX_LOGINS} sign-ins");
        }
        self.logins += 1;
        let browser = std::env::current_exe()?
            .parent()
            .unwrap()
            .join("follow-redirects");
        let out = self
            .command(&["auth", "login", NAME, "--timeout", "30s"])
            .env("BROWSER", browser)
            .stdin(Stdio::null())
            .output()?;
        self.note(&format!(
            "login {} -> {}\n{}{}",
            self.logins,
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
        Ok(out.status.success())
    }

    /// The server's status (phase, reason, message).
    fn status(&self) -> Result<(String, Option<String>, String)> {
        let out = self.command(&["status", "-o", "json"]).output()?;
        let status: Value = serde_json::from_slice(&out.stdout)
            .with_context(|| String::from_utf8_lossy(&out.stderr).into_owned())?;
        let item = status["items"]
            .as_array()
            .and_then(|items| items.iter().find(|i| i["metadata"]["name"] == NAME))
            .ok_or_else(|| anyhow!("no item {NAME} in the status"))?;
        let s = &item["status"];
        Ok((
            s["phase"].as_str().unwrap_or_default().to_owned(),
            s["reason"].as_str().map(str::to_owned),
            s["message"].as_str().unwrap_or_default().to_owned(),
        ))
    }

    /// Waits for Ready, signing in whenever the server needs it.
    fn until_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut last = String::new();
        while Instant::now() < deadline {
            let (phase, reason, message) = self.status()?;
            let now = format!("{phase} {reason:?} {message}");
            if now != last {
                self.note(&format!("status: {now}"));
                last = now;
            }
            if phase == "Ready" {
                return Ok(());
            }
            if reason.as_deref() == Some("AuthRequired")
                && !message.contains("with `steward auth login")
            {
                bail!("steward stopped asking for a sign-in: {message}");
            }
            if reason.as_deref() == Some("AuthRequired")
                && message.contains("with `steward auth login")
            {
                if !self.login()? {
                    bail!("the sign-in failed");
                }
                // The controller was told: wait until it has acted (the
                // status is not the one that asked for this sign-in).
                let before = (phase, reason, message);
                let waiting = Instant::now() + Duration::from_secs(20);
                while Instant::now() < waiting && self.status()? == before {
                    std::thread::sleep(Duration::from_millis(50));
                }
                continue;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!("the server never became Ready: {last}")
    }
}

async fn agent(run: &mut Run) -> Result<()> {
    let mut cmd = tokio::process::Command::new(&run.steward);
    cmd.arg("--workspace").arg(&run.ws).arg("mcp").env_clear();
    for (k, v) in [
        ("QWEN_HOME", run.home.clone().into_os_string()),
        ("HOME", run.home.clone().into_os_string()),
        ("XDG_RUNTIME_DIR", run.root.join("run").into_os_string()),
    ] {
        cmd.env(k, v);
    }
    if let Ok(path) = std::env::var("PATH") {
        cmd.env("PATH", path);
    }
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::null())
        .spawn()
        .context("spawn steward mcp")?;
    let client = ClientConfig::default().serve(transport).await?;
    let tools = client.peer().list_all_tools().await?;
    run.note(&format!(
        "tools: {:?}",
        tools.iter().map(|t| t.name.to_string()).collect::<Vec<_>>()
    ));
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    if tools.is_empty() && scenario != "initialize" {
        bail!("steward lists no tool of the server");
    }
    for tool in &tools {
        let arguments = arguments_for(tool, &tools);
        let mut attempts = 0;
        loop {
            attempts += 1;
            let result = client
                .peer()
                .call_tool(
                    CallToolRequestParams::new(tool.name.to_string())
                        .with_arguments(arguments.clone()),
                )
                .await?;
            let text = serde_json::to_string(&result.content).unwrap_or_default();
            run.note(&format!(
                "call {} (attempt {attempts}): error={:?} {text}",
                tool.name, result.is_error
            ));
            if result.is_error != Some(true) {
                break;
            }
            if text.contains("with `steward auth login") && attempts <= MAX_LOGINS {
                if !run.login()? {
                    bail!("the sign-in failed");
                }
                continue;
            }
            bail!("the call of {} failed: {text}", tool.name);
        }
    }
    client.cancel().await?;
    Ok(())
}

/// Arguments an agent would pass to `tool`: the scenario's echo gets the
/// input schema of the tool it names, as Steward listed it; other tools a
/// sample value for each property their schema requires.
fn arguments_for(
    tool: &rmcp::model::Tool,
    tools: &[rmcp::model::Tool],
) -> serde_json::Map<String, Value> {
    let mut arguments = serde_json::Map::new();
    if tool.name.ends_with("json_schema_echo")
        && let Some(focal) = tools
            .iter()
            .find(|t| t.name.ends_with("json_schema_2020_12_tool"))
    {
        arguments.insert(
            "schema".to_owned(),
            Value::Object((*focal.input_schema).clone()),
        );
        return arguments;
    }
    let schema = &tool.input_schema;
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let properties = schema.get("properties").and_then(Value::as_object);
    for name in required {
        let kind = properties
            .and_then(|p| p.get(name))
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("string");
        let value = match kind {
            "number" | "integer" => json!(2),
            "boolean" => json!(true),
            "object" => json!({}),
            "array" => json!([]),
            _ => json!("test"),
        };
        arguments.insert(name.to_owned(), value);
    }
    arguments
}

/// SIGTERM, then SIGKILL after 10 s; reaped.
fn stop(child: &mut Child) {
    steward_tests::harness::signal(child.id() as i32, libc::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn write(path: &Path, value: &Value) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, serde_json::to_string_pretty(value)?)?;
    Ok(())
}

fn main() -> std::process::ExitCode {
    match run_scenario() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("conformance-client: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run_scenario() -> Result<()> {
    let url = std::env::args()
        .next_back()
        .filter(|u| u.starts_with("http"))
        .ok_or_else(|| anyhow!("usage: steward-conformance-client SERVER_URL"))?;
    let steward = match std::env::var_os("STEWARD_BIN") {
        Some(bin) => PathBuf::from(bin),
        None => std::env::current_exe()?
            .parent()
            .unwrap()
            .join("steward-under-test"),
    };
    let tmp = tempfile::Builder::new().prefix("stwconf").tempdir()?;
    let root = tmp.path().canonicalize()?;
    let (home, ws) = (root.join("home"), root.join("ws"));
    std::fs::create_dir_all(&ws)?;
    let mut run = Run {
        steward,
        root: root.clone(),
        home: home.clone(),
        ws,
        log: std::env::var_os("CONFORMANCE_CLIENT_LOG").map(PathBuf::from),
        logins: 0,
    };
    run.note(&format!(
        "scenario {} at {url}",
        std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default()
    ));
    let mut entry = json!({ "httpUrl": url });
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or(Value::Null);
    if let Some(id) = context["client_id"].as_str() {
        entry["oauth"] = json!({ "clientId": id });
        if let Some(secret) = context["client_secret"].as_str() {
            let mut set = run
                .command(&["secret", "set", "conformance-client-secret"])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .spawn()?;
            set.stdin.take().unwrap().write_all(secret.as_bytes())?;
            if !set.wait()?.success() {
                bail!("steward secret set failed");
            }
            entry["oauth"]["clientSecret"] = json!("${secret:conformance-client-secret}");
        }
    }
    write(
        &home.join("settings.json"),
        &json!({
            "mcpServers": { NAME: entry },
            "steward": { "oauth": { "clientMetadataUrl": CIMD_URL } },
        }),
    )?;
    let controller_log = std::fs::File::create(root.join("controller.log"))?;
    let mut controller = run
        .command(&["run", "--start-backoff-ms", "100"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(controller_log)
        .spawn()?;
    let outcome = (|| {
        // The socket answers once the controller runs.
        let deadline = Instant::now() + Duration::from_secs(20);
        while run.status().is_err() {
            if Instant::now() > deadline {
                bail!("steward run did not start");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        run.until_ready()?;
        tokio::runtime::Runtime::new()?.block_on(agent(&mut run))
    })();
    stop(&mut controller);
    if outcome.is_err()
        && let Ok(text) = std::fs::read_to_string(root.join("controller.log"))
    {
        run.note(&format!("controller log:\n{text}"));
    }
    outcome
}

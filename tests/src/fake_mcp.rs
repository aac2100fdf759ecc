//! Configuration and record format of the fake MCP server
//! (`src/bin/fake-mcp-server/`).
//!
//! A test builds a [`FakeMcpConfig`], hands it to the server as JSON in the
//! [`CONFIG_ENV`] environment variable (or as `--config <json>`), and reads
//! what the server saw and did from its record file with [`read_record`].
//!
//! ```ignore
//! let config = FakeMcpConfig {
//!     tools: vec!["t1".into(), "t2".into()],
//!     crash_after_listed_ms: Some(200),
//!     record: Some(dir.join("alpha.jsonl")),
//!     ..FakeMcpConfig::default()
//! };
//! command.env(CONFIG_ENV, config.to_json());
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Environment variable holding the server's [`FakeMcpConfig`] as JSON.
pub const CONFIG_ENV: &str = "FAKE_MCP_CONFIG";

/// Protocol versions the fake speaks, newest first. `initialize` echoes the
/// client's version when it is one of these, and answers with the first
/// (newest) otherwise.
pub const SUPPORTED_PROTOCOL_VERSIONS: &[&str] = &["2025-06-18", "2025-03-26", "2024-11-05"];

/// What the fake MCP server offers and which faults it injects.
///
/// Every key is optional (`{}` is a valid config); unknown keys are rejected
/// so that a typo in a test fails loudly instead of silently doing nothing.
/// Times are milliseconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct FakeMcpConfig {
    /// `serverInfo.name`; also names tools' descriptions.
    pub name: String,
    /// `serverInfo.version`.
    pub version: String,
    /// Tool names offered by `tools/list` and accepted by `tools/call`.
    pub tools: Vec<String>,
    /// Prompt names offered by `prompts/list` and accepted by `prompts/get`.
    pub prompts: Vec<String>,
    /// Items per `tools/list` / `prompts/list` page; `None` or 0: one page.
    pub page_size: Option<usize>,
    /// JSON-lines file to append a [`RecordEvent`] to for every event.
    pub record: Option<PathBuf>,
    /// Answer `initialize` only after this long.
    pub initialize_delay_ms: u64,
    /// Never answer `initialize` (other requests are still answered).
    pub hang_in_initialize: bool,
    /// Burn this much CPU time (busy loop, measured on the process's CPU
    /// clock) right after recording "start", before reading any message: the
    /// start-up work of a real server (an `npx` server loading its modules).
    pub start_cpu_ms: u64,
    /// Exit with [`Self::exit_code`] this long after the process started.
    pub crash_after_ms: Option<u64>,
    /// Exit with [`Self::exit_code`] this long after answering the first
    /// `tools/list`: a server that crashes once its client has it Ready,
    /// however long its start took on a loaded machine.
    pub crash_after_listed_ms: Option<u64>,
    /// Exit code used by [`Self::crash_after_ms`] and
    /// [`Self::crash_after_listed_ms`].
    pub exit_code: i32,
    /// Record SIGTERM but keep running (the supervisor has to SIGKILL).
    pub ignore_sigterm: bool,
    /// Spawn a long-lived `sleep` child at start.
    pub spawn_grandchild: Option<GrandchildMode>,
    /// Write a line that is not JSON to stdout (stdio mode only).
    pub garbage_on_stdout: Option<GarbageWhen>,
    /// This long after `notifications/initialized`, switch to the lists
    /// below and announce it with `notifications/*/list_changed`.
    pub list_changed_after_ms: Option<u64>,
    /// Tools offered after the change. When both this and
    /// [`Self::prompts_after_change`] are `None`, the tools notification is
    /// still sent (a change notification with nothing changed).
    pub tools_after_change: Option<Vec<String>>,
    /// Prompts offered after the change; `Some` also sends
    /// `notifications/prompts/list_changed`.
    pub prompts_after_change: Option<Vec<String>>,
    /// From this long after process start, answer nothing (ping included)
    /// and send nothing, but stay alive: a hung server.
    pub stop_answering_after_ms: Option<u64>,
    /// Lines written to stderr at start.
    pub stderr_lines: Vec<String>,
    /// Serve MCP over HTTP instead of stdio: streamable HTTP at `/mcp` and
    /// the legacy HTTP+SSE transport at `/sse` (messages posted to
    /// `/messages?sessionId=…`).
    pub http: Option<HttpConfig>,
    /// Answer `ping` with a JSON-RPC error (-32601), as servers without
    /// `ping` do.
    pub ping_error: bool,
    /// Answer `ping` only after this long (a busy single-threaded server).
    pub ping_delay_ms: u64,
    /// HTTP mode: listen on this port instead of any free one (a test that
    /// restarts a server on the same address).
    pub http_port: Option<u16>,
    /// HTTP mode: serve HTTPS with a certificate for `127.0.0.1` and
    /// `localhost` issued by a CA made up at start.
    pub tls: Option<TlsConfig>,
    /// HTTP mode: the MCP endpoints require `Authorization: Bearer <token>`
    /// with one of these tokens (or one the token endpoint issued) and answer
    /// 401 otherwise.
    pub bearer_tokens: Option<Vec<String>>,
    /// With `bearerTokens`: answer 401 without a `WWW-Authenticate` challenge.
    pub bearer_without_challenge: bool,
    /// HTTP mode: an OAuth token endpoint at `/token` (refresh grant only).
    pub token_endpoint: Option<TokenEndpoint>,
    /// A [`Definitions`] file read at start (absent: none): how tools and
    /// prompts are described. The configuration (and so the server's
    /// `configHash`) stays the same while a test rewrites the file between
    /// two runs of the server.
    pub definitions_file: Option<PathBuf>,
    /// `instructions` in the `initialize` answer.
    pub instructions: Option<String>,
    /// A storm of `notifications/tools/list_changed` (see [`ListChangedStorm`]).
    pub list_changed_storm: Option<ListChangedStorm>,
    /// A JSON object read at start (absent: nothing) whose keys replace
    /// those of this config: a test changes what the server does between
    /// two runs (its tools, an initialize delay) while its entry, and so its
    /// `configHash`, stays the same.
    pub overlay_file: Option<PathBuf>,
}

impl Default for FakeMcpConfig {
    fn default() -> Self {
        Self {
            name: "fake".into(),
            version: "0.1.0".into(),
            tools: vec!["echo".into()],
            prompts: Vec::new(),
            page_size: None,
            record: None,
            initialize_delay_ms: 0,
            hang_in_initialize: false,
            start_cpu_ms: 0,
            crash_after_ms: None,
            crash_after_listed_ms: None,
            exit_code: 1,
            ignore_sigterm: false,
            spawn_grandchild: None,
            garbage_on_stdout: None,
            list_changed_after_ms: None,
            tools_after_change: None,
            prompts_after_change: None,
            stop_answering_after_ms: None,
            stderr_lines: Vec::new(),
            http: None,
            ping_error: false,
            ping_delay_ms: 0,
            http_port: None,
            tls: None,
            bearer_tokens: None,
            bearer_without_challenge: false,
            token_endpoint: None,
            definitions_file: None,
            instructions: None,
            list_changed_storm: None,
            overlay_file: None,
        }
    }
}

impl FakeMcpConfig {
    /// The config as the JSON the server reads from [`CONFIG_ENV`].
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a FakeMcpConfig always serializes")
    }
}

/// The content of [`FakeMcpConfig::definitions_file`]: fields laid over the
/// default definition of a tool or prompt (`{"description": "…",
/// "inputSchema": {…}}`), by name. A name that `tools` / `prompts` lacks is
/// offered too.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Definitions {
    pub tools: std::collections::BTreeMap<String, serde_json::Map<String, Value>>,
    pub prompts: std::collections::BTreeMap<String, serde_json::Map<String, Value>>,
}

impl Definitions {
    /// Reads `path`; an absent file is no definitions.
    pub fn read(path: &Path) -> Result<Definitions, String> {
        match std::fs::read_to_string(path) {
            Ok(text) => serde_json::from_str(&text)
                .map_err(|e| format!("invalid definitions file {}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Definitions::default()),
            Err(e) => Err(format!("cannot read {}: {e}", path.display())),
        }
    }
}

/// `notifications/tools/list_changed` sent [`Self::per_second`] times a
/// second for [`Self::duration_ms`], beginning [`Self::after_ms`] after
/// `notifications/initialized`: a server that announces changes far faster
/// than anyone should re-list it. The list stays the same during the storm;
/// with [`Self::tools_at_end`] it then changes and one last notification
/// says so. Recorded as `storm` events: `{"phase": "begin"}`, then
/// `{"phase": "end", "sent": N}` once the last notification is sent (N
/// counts it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListChangedStorm {
    pub per_second: u64,
    pub duration_ms: u64,
    #[serde(default)]
    pub after_ms: u64,
    /// Tools offered once the storm is over.
    #[serde(default)]
    pub tools_at_end: Option<Vec<String>>,
}

/// How the grandchild relates to the server's process group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GrandchildMode {
    /// Stays in the server's process group: killing the group kills it.
    Group,
    /// Calls `setsid`: escapes the group (and session) of the server.
    Setsid,
    /// A daemon: calls `setsid` and holds none of the server's stdio (all of
    /// it on /dev/null), so neither the group nor the pipes lead to it.
    Daemon,
}

/// When the garbage line is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GarbageWhen {
    /// At start, before anything else is written to stdout.
    BeforeInitialize,
    /// Right after the `initialize` response.
    AfterInitialize,
}

/// Streamable-HTTP mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpConfig {
    /// Receives the listening port (decimal, no newline) once the server
    /// accepts connections; written atomically (temp file + rename).
    pub port_file: PathBuf,
}

/// HTTPS mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TlsConfig {
    /// Receives the made-up CA's certificate (PEM) before the port file is
    /// written: what a client's `SSL_CERT_FILE` should name.
    pub ca_file: PathBuf,
}

/// A fake OAuth authorization server's token endpoint (`POST /token`,
/// refreshing an access token as RFC 6749 describes): a refresh with the
/// right refresh token and client gets [`Self::access_token`]; anything
/// else gets 400 `invalid_grant`. Each request is recorded as a `token`
/// event whose message is the form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenEndpoint {
    pub client_id: String,
    /// Required when set.
    #[serde(default)]
    pub client_secret: Option<String>,
    /// The refresh token it accepts.
    pub refresh_token: String,
    /// The access token it issues (then accepted by the MCP endpoints).
    pub access_token: String,
    /// `expires_in` of the answer, seconds.
    #[serde(default)]
    pub expires_in: Option<u64>,
    /// A rotated refresh token to hand out with the access token.
    #[serde(default)]
    pub new_refresh_token: Option<String>,
}

/// One line of the record file.
///
/// `event` is one of `start` (message: `{name, mode, ppid}`), `recv` / `send`
/// (message: the JSON-RPC message, or a JSON string for a line that was not
/// JSON), `undelivered` (an HTTP notification sent while no SSE stream was
/// open; it is delivered when one opens), `auth` (HTTP mode with
/// `bearerTokens`: `{path, token, accepted}`, `token` null when none was
/// presented), `token` (the token endpoint's request form), `signal`
/// (message: `"SIGTERM"`),
/// `grandchild` (message: `{pid, mode}`), `storm` (see [`ListChangedStorm`])
/// and `exit` (message: `{code, reason}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordEvent {
    /// Milliseconds since the server process started.
    pub t: u64,
    /// Pid of the server process.
    pub pid: u32,
    pub event: String,
    pub message: Value,
}

impl RecordEvent {
    /// The JSON-RPC method of a `recv` / `send` message, if it has one.
    pub fn method(&self) -> Option<&str> {
        self.message.get("method").and_then(Value::as_str)
    }
}

/// Reads the record file written so far. A missing file is an empty record;
/// a last line still being written is skipped.
pub fn read_record(path: &Path) -> std::io::Result<Vec<RecordEvent>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err),
    };
    Ok(text
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect())
}

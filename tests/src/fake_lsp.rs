//! Configuration and record format of the fake LSP server
//! (`src/bin/fake-lsp-server/`), shared by the binary and the tests that
//! drive it.
//!
//! A test builds a [`Config`], hands it to the server through the
//! [`CONFIG_ENV`] environment variable (or `--config <json>`), and reads back
//! what the server saw from the JSON-lines record file with
//! [`read_records`]. Every key has a default, so `{}` is a valid config, and
//! unknown keys are rejected so a typo fails loudly instead of being ignored.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Environment variable the server reads its [`Config`] from (JSON).
pub const CONFIG_ENV: &str = "FAKE_LSP_CONFIG";

/// How the server talks to its client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// LSP over stdin/stdout.
    #[default]
    Stdio,
    /// Listen on `127.0.0.1:<port>`.
    Tcp,
    /// Listen on the unix socket at `socketPath`.
    Socket,
}

/// Shape of the ids the server puts on its own requests to the client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IdStyle {
    /// Numbers from 1.
    #[default]
    Number,
    /// Numbers from 0 (a client must not treat id 0 as "no id").
    Zero,
    /// Strings (`"fake-1"`, `"fake-2"`, ...).
    String,
}

/// Work-done progress the server reports after `initialized`, like a server
/// indexing its workspace: `window/workDoneProgress/create` (answer awaited),
/// then `$/progress` `begin` ("indexing", 0 %) and `report` (40 %, "4/10
/// files"). Until it ends, hover, definition, implementation, references,
/// document and workspace symbols and prepareCallHierarchy answer nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Indexing {
    /// No indexing progress.
    #[default]
    Off,
    /// `end` this long after `initialized` (`{"endsAfterMs": 3000}`).
    EndsAfterMs(u64),
    /// Never `end` (`"never"`).
    Never,
}

/// Behaviour of one fake LSP server process, chosen per test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct Config {
    /// Reported as `serverInfo.name`, in hovers and as the diagnostics source.
    pub name: String,
    /// JSON-lines file to append every event to (see [`Record`]).
    pub record: Option<PathBuf>,
    pub transport: Transport,
    /// TCP port to listen on; 0 lets the OS choose (see `port_file`).
    pub port: u16,
    /// File the listening TCP port is written to (atomically, digits only).
    pub port_file: Option<PathBuf>,
    /// Unix socket path to listen on (required for `Transport::Socket`).
    pub socket_path: Option<PathBuf>,
    /// Never answer `initialize`, and ignore every message after it.
    pub hang_in_initialize: bool,
    /// Wait this long before answering `initialize`.
    pub initialize_delay_ms: u64,
    /// Never answer `shutdown`, and ignore `exit`.
    pub ignore_shutdown: bool,
    /// Exit with `exit_code` this long after start.
    pub crash_after_ms: Option<u64>,
    /// Exit code used by `crash_after_ms`.
    pub exit_code: i32,
    /// Exit when stdin closes (stdio), as clangd and pyright do.
    pub exit_on_stdin_close: bool,
    /// Exit code when the client's stream closes without `exit` (stdin EOF,
    /// or a tcp/socket disconnect with `exit_on_disconnect`).
    pub exit_code_on_stdin_close: i32,
    /// After `initialized`, send the requests real servers send
    /// (`window/workDoneProgress/create`, `client/registerCapability`,
    /// `workspace/configuration`) and wait for each answer; also send
    /// `window/logMessage` before the `initialize` response, and
    /// `$/progress` / `window/logMessage` notifications.
    pub server_requests: bool,
    pub id_style: IdStyle,
    /// Ignore SIGTERM (recorded as a `signal` event), so the client must
    /// escalate to SIGKILL.
    pub ignore_sigterm: bool,
    /// Publish diagnostics this long after `didOpen`/`didChange`.
    pub diagnostics_delay_ms: u64,
    /// tcp/socket: exit when the client disconnects instead of accepting the
    /// next connection.
    pub exit_on_disconnect: bool,
    /// Environment variables to include (value or null) in the `start` event.
    pub record_env: Vec<String>,
    /// Also offer pull diagnostics (`diagnosticProvider`):
    /// `textDocument/diagnostic` and `workspace/diagnostic` answer with the
    /// diagnostics it would publish.
    pub pull_diagnostics: bool,
    /// Wait this long before answering `textDocument/hover` (the session
    /// handles nothing else meanwhile).
    pub hover_delay_ms: u64,
    /// Answer hover, definition, implementation, references, document
    /// symbols and prepareCallHierarchy with nothing until this long after
    /// the document's `didOpen`, like a server still analysing it.
    pub warmup_ms: u64,
    /// Report indexing progress after `initialized` (see [`Indexing`]).
    pub indexing: Indexing,
    /// After `initialized`, send `client/registerCapability` requests far
    /// faster than any real server does (see [`RegistrationStorm`]).
    pub registration_storm: Option<RegistrationStorm>,
}

/// A storm of `client/registerCapability` requests (ids `storm-N`), sent
/// without waiting for their answers, which are counted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegistrationStorm {
    pub per_second: u64,
    pub duration_ms: u64,
    /// It begins this long after `initialized`.
    pub after_ms: u64,
    /// Replaced (atomically) with `{"phase": "begin"}` when the storm
    /// begins and `{"phase": "end", "sent", "answered"}` once every request
    /// is answered (or 5 s after the last one was sent).
    pub report: PathBuf,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            name: "fake".to_owned(),
            record: None,
            transport: Transport::Stdio,
            port: 0,
            port_file: None,
            socket_path: None,
            hang_in_initialize: false,
            initialize_delay_ms: 0,
            ignore_shutdown: false,
            crash_after_ms: None,
            exit_code: 1,
            exit_on_stdin_close: true,
            exit_code_on_stdin_close: 1,
            server_requests: false,
            id_style: IdStyle::Number,
            ignore_sigterm: false,
            diagnostics_delay_ms: 0,
            exit_on_disconnect: false,
            record_env: Vec::new(),
            pull_diagnostics: false,
            hover_delay_ms: 0,
            warmup_ms: 0,
            indexing: Indexing::Off,
            registration_storm: None,
        }
    }
}

impl Config {
    /// The config as the JSON text the server accepts (for [`CONFIG_ENV`]).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("config serializes")
    }
}

/// Kind of a [`Record`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Event {
    /// First line of every process: `{name, args, cwd, config, env}`.
    Start,
    /// tcp/socket: `{transport, port}` or `{transport, path}`.
    Listening,
    /// tcp/socket: a client connected: `{connection}` (1-based).
    Connect,
    /// The client's stream closed (stdin EOF or disconnect): `{connection}`.
    Disconnect,
    /// A message read from the client, as parsed JSON (`{"raw": text}` if
    /// it was not JSON).
    Recv,
    /// A message written to the client.
    Send,
    /// A signal arrived: `{signal, ignored}`.
    Signal,
    /// Last line of a process that exits by itself: `{code, reason}` or
    /// `{signal, reason}`.
    Exit,
}

/// One line of the record file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Milliseconds since the Unix epoch (comparable across processes that
    /// share one record file).
    pub t: u64,
    pub pid: u32,
    pub event: Event,
    pub message: Value,
}

/// Every complete line of a record file; a missing file reads as empty and
/// a half-written last line is skipped, so tests can poll while the server
/// runs.
pub fn read_records(path: &Path) -> Vec<Record> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_object_is_the_default_config() {
        let config: Config = serde_json::from_str("{}").unwrap();
        assert_eq!(config, Config::default());
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let err = serde_json::from_str::<Config>(r#"{"hangInInitialise": true}"#).unwrap_err();
        assert!(err.to_string().contains("hangInInitialise"), "{err}");
    }

    #[test]
    fn json_round_trips_with_camel_case_keys() {
        let config = Config {
            transport: Transport::Tcp,
            id_style: IdStyle::Zero,
            crash_after_ms: Some(5),
            indexing: Indexing::EndsAfterMs(300),
            ..Config::default()
        };
        let json = config.to_json();
        assert!(json.contains(r#""transport":"tcp""#), "{json}");
        assert!(json.contains(r#""indexing":{"endsAfterMs":300}"#), "{json}");
        assert!(json.contains(r#""idStyle":"zero""#), "{json}");
        assert!(json.contains(r#""crashAfterMs":5"#), "{json}");
        assert_eq!(serde_json::from_str::<Config>(&json).unwrap(), config);
        let never: Config = serde_json::from_str(r#"{"indexing": "never"}"#).unwrap();
        assert_eq!(never.indexing, Indexing::Never);
    }
}

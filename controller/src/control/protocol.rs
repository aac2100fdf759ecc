//! The control socket's protocol: the requests, the answers, and their
//! wire form (one JSON object per line each way).

use serde::{Deserialize, Serialize};
use steward_schema::resource::{ReloadSummary, ResourceKind, WorkspaceStatus};

use crate::gateway::lsp::LspQuery;
use crate::observe::events::Event;
use crate::observe::logs::LogChunk;

/// A request to the controller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "request", rename_all = "camelCase")]
pub enum Request {
    /// The current `WorkspaceStatus`, specs without secrets
    /// ([`steward_schema::redact`]).
    Status,
    /// `WorkspaceStatus` now and after every change, until the client hangs
    /// up (specs without secrets).
    Watch,
    /// `Status` (or `Watch`, with `watch`) with the specs as the servers get
    /// them, secrets included (`--show-secrets`).
    StatusWithSecrets {
        #[serde(default)]
        watch: bool,
    },
    /// The event log, oldest first; with `watch`, then every new or updated
    /// event until the client hangs up (`steward events -w`).
    Events {
        #[serde(default)]
        watch: bool,
    },
    /// A server's stderr (`steward logs`).
    Logs(LogsQuery),
    /// Stop and start servers once, keeping them desired; answers when their
    /// reconciles have finished.
    Restart { names: Vec<String> },
    /// Re-read every source (extensions included); answers when the reload's
    /// reconciles have finished.
    Reload,
    /// Stop servers and keep them stopped (persisted) until started.
    Stop { names: Vec<String> },
    /// Undo `stop`.
    Start { names: Vec<String> },
    /// Use a language server (`steward lsp ...`).
    Lsp(LspQuery),
}

impl Request {
    /// Whether the answer is a stream of responses (served outside the
    /// controller's event loop) rather than one.
    pub fn is_stream(&self) -> bool {
        match self {
            Request::Watch => true,
            Request::StatusWithSecrets { watch } | Request::Events { watch } => *watch,
            Request::Logs(q) => q.follow,
            _ => false,
        }
    }
}

/// What `steward logs` asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogsQuery {
    pub name: String,
    /// Which kind, when an MCP and a language server share the name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ResourceKind>,
    /// The instance before the current one.
    #[serde(default)]
    pub previous: bool,
    /// Then every new line until the client hangs up.
    #[serde(default)]
    pub follow: bool,
    /// Only the last lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail: Option<usize>,
}

/// A response line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Box<WorkspaceStatus>>,
    /// The controller's answer to `status`: the document already
    /// serialized (kept until the next change), read back as `status`.
    #[serde(
        rename = "status",
        skip_deserializing,
        skip_serializing_if = "Option::is_none"
    )]
    pub status_json: Option<RawJson>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reload: Option<ReloadSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `steward lsp`: the server used and its answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    /// `steward events`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<Event>>,
    /// `steward logs`: lines of one process of the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logs: Option<LogChunk>,
}

/// JSON serialized ahead of time, written as is (compared by its text).
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct RawJson(pub Box<serde_json::value::RawValue>);

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

impl Response {
    pub fn ok() -> Self {
        Response {
            ok: true,
            error: None,
            status: None,
            status_json: None,
            reload: None,
            message: None,
            server: None,
            result: None,
            events: None,
            logs: None,
        }
    }

    pub fn error(message: impl Into<String>) -> Self {
        Response {
            ok: false,
            error: Some(message.into()),
            ..Response::ok()
        }
    }
}

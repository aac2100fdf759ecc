//! The control socket's protocol: the requests, the typed answers, and
//! their wire form (one JSON object per line each way). The wire form of an
//! answer is made and read here only ([`answer_line`], [`read_answer`]):
//!
//! - `{"ok":true,"status":{…}}`, `{"ok":true,"reload":{…}}`,
//!   `{"ok":true,"message":"…"}`, `{"ok":true,"server":"…","result":…}`,
//!   `{"ok":true,"events":[…]}`, `{"ok":true,"logs":{…}}`: a [`Reply`];
//! - `{"ok":false,"error":"…"}`: the controller could not (the error reads
//!   after "failed to").

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use steward_schema::resource::{ReloadSummary, ResourceKind, ToolRow, WorkspaceStatus};

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
    /// reconciles have finished. A Ready MCP server finishes its calls in
    /// flight first, unless `now`.
    Restart {
        names: Vec<String>,
        #[serde(default)]
        now: bool,
    },
    /// Re-read every source (extensions included); answers when the reload's
    /// reconciles have finished.
    Reload,
    /// Stop servers and keep them stopped (persisted) until started.
    Stop { names: Vec<String> },
    /// Undo `stop`.
    Start { names: Vec<String> },
    /// Accept the tool and prompt definitions servers offer now in place of
    /// the quarantined ones (`steward approve NAME --tools`); with `all`,
    /// those of every server that has quarantined ones.
    AcceptTools {
        names: Vec<String>,
        #[serde(default)]
        all: bool,
    },
    /// Use a language server (`steward lsp ...`).
    Lsp(LspQuery),
    /// Every tool of the workspace, where it stands and what its definition
    /// costs (`steward tools`).
    Tools,
    /// `steward secret set|rm`: these secrets changed; look them up again
    /// and restart exactly the servers whose values changed.
    SecretsChanged { names: Vec<String> },
    /// `steward secret move`: with the secret `name` stored, rewrite `field`
    /// of `server` in `file` to its reference (re-approving an approved
    /// entry) and apply both files at once, so the server runs on.
    SecretMove {
        file: std::path::PathBuf,
        server: String,
        field: String,
        name: String,
    },
    /// `steward auth login|logout`: the sign-in of `resource` as `account`
    /// changed; servers it serves that wait for one connect again at once
    /// (`signed_out`: those that run stop using it).
    AuthChanged {
        resource: String,
        #[serde(default)]
        account: String,
        #[serde(default)]
        signed_out: bool,
    },
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

/// What the controller answers to a request it could do (or sends as one
/// item of a stream).
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `status` (and each document of `status --watch`).
    Status(Box<WorkspaceStatus>),
    /// `status` as the controller keeps it: the document already
    /// serialized, written as is (read back as [`Reply::Status`]).
    StatusJson(RawJson),
    /// `reload`, `restart`: what their reconciles did.
    Reload(ReloadSummary),
    /// A sentence for the user: what `stop`/`start` changed, a `reload` with
    /// nothing to reconcile, a `logs` without lines (no process yet, a
    /// remote server), a followed server that left the configuration.
    Message(String),
    /// `lsp`: the server used and its answer.
    Lsp { server: String, result: Value },
    /// `events`: oldest first (every one kept, then the new ones of a watch).
    Events(Vec<Event>),
    /// `logs`: lines of one process of the server.
    Logs(LogChunk),
    /// `tools`: every tool, by server and name.
    Tools(Vec<ToolRow>),
}

impl Reply {
    /// What kind of reply this is (for an error about an unexpected one).
    pub fn kind(&self) -> &'static str {
        match self {
            Reply::Status(_) | Reply::StatusJson(_) => "a status",
            Reply::Reload(_) => "a reload summary",
            Reply::Message(_) => "a message",
            Reply::Lsp { .. } => "a language server's answer",
            Reply::Events(_) => "events",
            Reply::Logs(_) => "log lines",
            Reply::Tools(_) => "tools",
        }
    }
}

/// One answer: the reply, or why the controller could not (phrased to read
/// after "failed to").
pub type Answer = Result<Reply, String>;

/// JSON serialized ahead of time, written as is (compared by its text);
/// shared, not copied, by the answers that carry it.
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct RawJson(pub std::sync::Arc<RawValue>);

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

/// A request as its line on the socket (newline included).
pub fn request_line(request: &Request) -> serde_json::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(request)?;
    line.push(b'\n');
    Ok(line)
}

/// A status answer's line around its pre-serialized document, which is
/// written as is (no copy of a document of hundreds of servers): the
/// text before the document and the text after it.
pub fn status_line_parts() -> (&'static [u8], &'static [u8]) {
    (b"{\"ok\":true,\"status\":", b"}\n")
}

/// An answer as its line on the socket (newline included).
pub fn answer_line(answer: Answer) -> serde_json::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(&Wire::from(answer))?;
    line.push(b'\n');
    Ok(line)
}

/// An answer line read back.
pub fn read_answer(line: &str) -> serde_json::Result<Answer> {
    let wire: Wire = serde_json::from_str(line)?;
    wire.into_answer().map_err(serde::de::Error::custom)
}

/// The status document an answer line carries, as the controller wrote it
/// (not read into a [`WorkspaceStatus`]), or the controller's refusal.
pub fn read_status_text(line: &str) -> serde_json::Result<Result<&str, String>> {
    #[derive(Deserialize)]
    struct StatusWire<'a> {
        #[serde(default)]
        ok: bool,
        #[serde(default)]
        error: Option<String>,
        #[serde(borrow, default)]
        status: Option<&'a RawValue>,
    }
    let wire: StatusWire<'_> = serde_json::from_str(line)?;
    Ok(match (wire.ok, wire.status) {
        (true, Some(status)) => Ok(status.get()),
        (true, None) => Err("an answer without a status".to_owned()),
        (false, _) => Err(wire.error.unwrap_or_else(|| "unknown error".to_owned())),
    })
}

/// The wire shape of an answer: `ok`, and the one field of its kind.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire {
    ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<Box<WorkspaceStatus>>,
    /// [`Reply::StatusJson`], written as `status`.
    #[serde(
        rename = "status",
        skip_deserializing,
        skip_serializing_if = "Option::is_none"
    )]
    status_json: Option<RawJson>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reload: Option<ReloadSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    server: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    events: Option<Vec<Event>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    logs: Option<LogChunk>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<ToolRow>>,
}

impl From<Answer> for Wire {
    fn from(answer: Answer) -> Wire {
        let ok = Wire {
            ok: true,
            ..Wire::default()
        };
        match answer {
            Err(error) => Wire {
                error: Some(error),
                ..Wire::default()
            },
            Ok(Reply::Status(status)) => Wire {
                status: Some(status),
                ..ok
            },
            Ok(Reply::StatusJson(json)) => Wire {
                status_json: Some(json),
                ..ok
            },
            Ok(Reply::Reload(summary)) => Wire {
                reload: Some(summary),
                ..ok
            },
            Ok(Reply::Message(message)) => Wire {
                message: Some(message),
                ..ok
            },
            Ok(Reply::Lsp { server, result }) => Wire {
                server: Some(server),
                result: Some(result),
                ..ok
            },
            Ok(Reply::Events(events)) => Wire {
                events: Some(events),
                ..ok
            },
            Ok(Reply::Logs(chunk)) => Wire {
                logs: Some(chunk),
                ..ok
            },
            Ok(Reply::Tools(rows)) => Wire {
                tools: Some(rows),
                ..ok
            },
        }
    }
}

impl Wire {
    /// The answer this line carries, or why it carries none.
    fn into_answer(self) -> Result<Answer, String> {
        let Wire {
            ok,
            error,
            status,
            status_json: _,
            reload,
            message,
            server,
            result,
            events,
            logs,
            tools,
        } = self;
        if !ok {
            return Ok(Err(error.unwrap_or_else(|| "unknown error".to_owned())));
        }
        let mut replies = Vec::with_capacity(1);
        replies.extend(status.map(Reply::Status));
        replies.extend(reload.map(Reply::Reload));
        replies.extend(message.map(Reply::Message));
        // A `null` result reads back as no result.
        replies.extend(server.map(|server| Reply::Lsp {
            server,
            result: result.unwrap_or(Value::Null),
        }));
        replies.extend(events.map(Reply::Events));
        replies.extend(logs.map(Reply::Logs));
        replies.extend(tools.map(Reply::Tools));
        match <[Reply; 1]>::try_from(replies) {
            Ok([reply]) => Ok(Ok(reply)),
            Err(replies) if replies.is_empty() => Err("an answer without a reply".to_owned()),
            Err(replies) => Err(format!(
                "an answer with more than one reply ({})",
                replies
                    .iter()
                    .map(Reply::kind)
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status() -> WorkspaceStatus {
        WorkspaceStatus {
            api_version: "steward.dev/v1alpha1".to_owned(),
            kind: "WorkspaceStatus".to_owned(),
            workspace: "/w".to_owned(),
            controller: steward_schema::resource::ControllerStatus {
                running: true,
                pid: Some(7),
                trusted: true,
                lsp_enabled: true,
                started_at: None,
                last_reload: None,
                conditions: Vec::new(),
                gateway: None,
            },
            sources: Vec::new(),
            items: Vec::new(),
            removed: Vec::new(),
        }
    }

    fn line(answer: Answer) -> String {
        String::from_utf8(answer_line(answer).unwrap()).unwrap()
    }

    #[test]
    fn the_wire_form_is_ok_and_the_one_field_of_the_kind() {
        assert_eq!(
            line(Err("do it: no".to_owned())),
            "{\"ok\":false,\"error\":\"do it: no\"}\n"
        );
        assert_eq!(
            line(Ok(Reply::Message("stopped a".to_owned()))),
            "{\"ok\":true,\"message\":\"stopped a\"}\n"
        );
        assert_eq!(
            line(Ok(Reply::Lsp {
                server: "rust".to_owned(),
                result: Value::Null
            })),
            "{\"ok\":true,\"server\":\"rust\",\"result\":null}\n"
        );
        assert_eq!(
            line(Ok(Reply::Events(Vec::new()))),
            "{\"ok\":true,\"events\":[]}\n"
        );
        let doc = serde_json::to_string(&status()).unwrap();
        assert_eq!(
            line(Ok(Reply::Status(Box::new(status())))),
            format!("{{\"ok\":true,\"status\":{doc}}}\n")
        );
    }

    #[test]
    fn a_status_kept_serialized_is_written_as_is_and_reads_back_as_a_status() {
        let raw = RawValue::from_string(serde_json::to_string(&status()).unwrap()).unwrap();
        let text = line(Ok(Reply::StatusJson(RawJson(raw.clone().into()))));
        assert_eq!(text, format!("{{\"ok\":true,\"status\":{}}}\n", raw.get()));
        // The server writes it in parts around the shared document: the same.
        let (before, after) = status_line_parts();
        let parts = [before, raw.get().as_bytes(), after].concat();
        assert_eq!(String::from_utf8(parts).unwrap(), text);
        assert_eq!(
            read_answer(&text).unwrap(),
            Ok(Reply::Status(Box::new(status())))
        );
        // `status -o json` takes the document as written.
        assert_eq!(read_status_text(&text).unwrap(), Ok(raw.get()));
        assert_eq!(
            read_status_text(&line(Err("reach it: no".to_owned()))).unwrap(),
            Err("reach it: no".to_owned())
        );
        assert!(
            read_status_text(&line(Ok(Reply::Message("m".to_owned()))))
                .unwrap()
                .is_err()
        );
    }

    #[test]
    fn every_answer_reads_back_as_itself() {
        let chunk = LogChunk {
            pid: 3,
            started_at: "2025-01-01T00:00:00Z".to_owned(),
            lines: vec!["a".to_owned()],
            dropped: 1,
            last_seq: 4,
        };
        for answer in [
            Err("reach it: no".to_owned()),
            Ok(Reply::Status(Box::new(status()))),
            Ok(Reply::Reload(ReloadSummary::default())),
            Ok(Reply::Message("started a".to_owned())),
            Ok(Reply::Lsp {
                server: "rust".to_owned(),
                result: serde_json::json!({"contents": "x"}),
            }),
            // A `null` result is still a language server's answer.
            Ok(Reply::Lsp {
                server: "rust".to_owned(),
                result: Value::Null,
            }),
            Ok(Reply::Events(Vec::new())),
            Ok(Reply::Logs(chunk)),
        ] {
            let text = line(answer.clone());
            assert_eq!(read_answer(&text).unwrap(), answer, "{text}");
        }
    }

    #[test]
    fn an_answer_of_no_kind_or_of_two_is_not_read() {
        let e = read_answer("{\"ok\":true}").unwrap_err();
        assert_eq!(e.to_string(), "an answer without a reply");
        let e = read_answer("{\"ok\":true,\"message\":\"m\",\"events\":[]}").unwrap_err();
        assert_eq!(
            e.to_string(),
            "an answer with more than one reply (a message, events)"
        );
        assert_eq!(
            read_answer("{\"ok\":false}").unwrap(),
            Err("unknown error".to_owned())
        );
    }

    #[test]
    fn requests_are_tagged_lines() {
        assert_eq!(
            request_line(&Request::Status).unwrap(),
            b"{\"request\":\"status\"}\n"
        );
        assert_eq!(
            serde_json::from_str::<Request>("{\"request\":\"events\",\"watch\":true}").unwrap(),
            Request::Events { watch: true }
        );
    }
}

//! The control socket: a unix socket under HOME_DIR through which `steward
//! status|reload|stop|start|restart|lsp|events|logs|describe` talk to a
//! running controller. Protocol: one JSON request per line; one JSON
//! response per line (a stream of them for the requests that
//! [`Request::is_stream`]).

pub mod streams;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use steward_schema::resource::{ReloadSummary, ResourceKind, WorkspaceStatus};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};

use crate::gateway::lsp::LspQuery;
use crate::observe::events::Event;
use crate::observe::logs::LogChunk;
use crate::support::socket::peer_is_same_user;

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

/// A request that needs the controller's event loop, with where to answer.
#[derive(Debug)]
pub struct Incoming {
    pub request: Request,
    pub reply: oneshot::Sender<Response>,
}

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("reach the controller at {path}: {source}")]
    Connect {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("talk to the controller: {0}")]
    Io(#[from] std::io::Error),
    #[error("read the controller's answer: {0}")]
    Decode(#[from] serde_json::Error),
    #[error("the controller closed the connection without answering")]
    Closed,
}

/// How long a connection may take to send its request line.
const REQUEST_LINE_TIMEOUT: Duration = Duration::from_secs(30);

/// After a failed accept (EMFILE, ENFILE, ENOBUFS, ENOMEM...), wait this
/// long before accepting again instead of spinning: the pending connection
/// stays queued until then.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serve connections: every request goes to `to_loop` (the controller's
/// event loop answers), but a stream ([`Request::is_stream`]) is answered
/// by `watch_stream`.
pub async fn serve<W, Fut>(listener: UnixListener, to_loop: mpsc::Sender<Incoming>, watch_stream: W)
where
    W: Fn(Request, UnixStream) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let mut failing = false;
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                // Out of descriptors or memory: the connection stays queued
                // and `accept` would fail again at once. Said once per streak.
                if !std::mem::replace(&mut failing, true) {
                    tracing::warn!(%error, "control socket: accept failed; retrying every {ACCEPT_BACKOFF:?}");
                }
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        if std::mem::take(&mut failing) {
            tracing::info!("control socket: accepting connections again");
        }
        if !peer_is_same_user(&stream) {
            tracing::warn!(peer = ?stream.peer_cred().ok(), "control socket: refused a connection from another user");
            tokio::spawn(refuse(stream));
            continue;
        }
        let to_loop = to_loop.clone();
        let watch_stream = watch_stream.clone();
        tokio::spawn(async move {
            let (read, mut write) = stream.into_split();
            let mut lines = BufReader::new(read).lines();
            // A client that never says anything does not hold a descriptor
            // for ever.
            let Ok(Ok(Some(line))) =
                tokio::time::timeout(REQUEST_LINE_TIMEOUT, lines.next_line()).await
            else {
                return;
            };
            let response = match serde_json::from_str::<Request>(&line) {
                Ok(request) if request.is_stream() => {
                    let stream = match lines.into_inner().into_inner().reunite(write) {
                        Ok(s) => s,
                        Err(_) => return,
                    };
                    watch_stream(request, stream).await;
                    return;
                }
                Ok(request) => {
                    let (reply, answer) = oneshot::channel();
                    if to_loop.send(Incoming { request, reply }).await.is_err() {
                        Response::error("the controller is shutting down")
                    } else {
                        answer
                            .await
                            .unwrap_or_else(|_| Response::error("the controller is shutting down"))
                    }
                }
                Err(e) => Response::error(format!("parse the request: {e}")),
            };
            let _ = write_line(&mut write, &response).await;
        });
    }
}

/// Answer a peer of another user with an error (after its request line, so
/// that it reads the answer rather than a broken pipe), and hang up.
async fn refuse(stream: UnixStream) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let _ = tokio::time::timeout(Duration::from_secs(5), lines.next_line()).await;
    let uid = crate::support::paths::effective_uid();
    let refusal = Response::error(format!(
        "use the controller: it serves only its own user (uid {uid})"
    ));
    let _ = write_line(&mut write, &refusal).await;
}

/// Write one response line.
pub async fn write_line<W: AsyncWriteExt + Unpin>(
    w: &mut W,
    response: &Response,
) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(response).map_err(std::io::Error::other)?;
    line.push(b'\n');
    w.write_all(&line).await?;
    w.flush().await
}

/// Connect to the controller at `path`, if one is listening.
pub async fn connect(path: &Path) -> Result<UnixStream, ControlError> {
    UnixStream::connect(path)
        .await
        .map_err(|source| ControlError::Connect {
            path: path.to_path_buf(),
            source,
        })
}

/// Send `request` and read one response (bounded by `timeout`).
pub async fn request(
    path: &Path,
    request: &Request,
    timeout: Duration,
) -> Result<Response, ControlError> {
    let stream = connect(path).await?;
    let (read, mut write) = stream.into_split();
    let mut line = serde_json::to_vec(request)?;
    line.push(b'\n');
    write.write_all(&line).await?;
    let mut lines = BufReader::new(read).lines();
    let answer = tokio::time::timeout(timeout, lines.next_line())
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer in time"))??;
    match answer {
        Some(line) => Ok(serde_json::from_str(&line)?),
        None => Err(ControlError::Closed),
    }
}

/// Open a watch stream: yields each status document as it arrives.
pub async fn watch(
    path: &Path,
) -> Result<mpsc::Receiver<Result<Response, ControlError>>, ControlError> {
    stream(path, &Request::Watch).await
}

/// Send a streaming `request` ([`Request::is_stream`]): yields each
/// response as it arrives.
pub async fn stream(
    path: &Path,
    request: &Request,
) -> Result<mpsc::Receiver<Result<Response, ControlError>>, ControlError> {
    let stream = connect(path).await?;
    let (read, mut write) = stream.into_split();
    let mut line = serde_json::to_vec(request)?;
    line.push(b'\n');
    write.write_all(&line).await?;
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        let _keep_open = write;
        let mut lines = BufReader::new(read).lines();
        loop {
            let item = match lines.next_line().await {
                Ok(Some(line)) => serde_json::from_str(&line).map_err(ControlError::from),
                Ok(None) => Err(ControlError::Closed),
                Err(e) => Err(ControlError::Io(e)),
            };
            let end = item.is_err();
            if tx.send(item).await.is_err() || end {
                return;
            }
        }
    });
    Ok(rx)
}

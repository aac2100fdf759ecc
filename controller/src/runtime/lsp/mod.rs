//! LSP connections: one live session with one language server.
//!
//! This module owns the protocol side of a language server: it spawns the
//! server through the [`Spawner`] when the spec has a `command` (never a
//! process of its own making: we need our process groups and parent-death
//! signal), connects to it over stdio, TCP or a unix socket, runs the
//! `initialize` / `initialized` / `workspace/didChangeConfiguration`
//! handshake with async-lsp, answers the requests servers send to clients,
//! keeps the documents opened through Steward and the diagnostics the server
//! publishes, and closes it all again. It does not decide anything: the
//! controller gets [`LspEvent`]s and reconciles.
//!
//! Invariants:
//!
//! - **Nothing outlives a failed start.** Any error after the spawn or the
//!   connect closes the connection and stops the process (group reaped) before
//!   [`LspConnection::connect`] returns; the error carries the server's last
//!   stderr lines. `startupTimeout` bounds spawn + connect + `initialize`.
//! - **Only what Steward started is killed.** A tcp/socket server without a
//!   `command` is an external daemon: Steward opens and closes the connection
//!   (and ends its session with `shutdown`), but never sends it `exit` and
//!   never signals anything.
//! - **One session task per connection** drives async-lsp's main loop and
//!   notices the end of the process or the connection ([`LspEvent::Exited`],
//!   at most once). Events are armed only once `connect` succeeds (a failure
//!   while connecting is the error, not an event) and silenced first thing in
//!   [`LspConnection::stop`] and on drop.
//! - **Every wait is bounded.** async-lsp has no timeout layer: each request
//!   is wrapped in a timer that is dropped (cancelled) as soon as the answer
//!   arrives. An answer that comes after its timer fired is discarded by the
//!   main loop; it can neither panic nor leak past the connection.
//! - **Notifications never end the session.** async-lsp's default router ends
//!   the main loop on an unknown notification; ours accepts every one.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::future::Future;
use std::io;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_lsp::router::Router;
use async_lsp::{AnyNotification, AnyRequest, ErrorCode, MainLoop, ResponseError, ServerSocket};
use lsp_types::notification::{
    DidChangeConfiguration, DidChangeTextDocument, DidCloseTextDocument, DidOpenTextDocument, Exit,
    Initialized,
};
use lsp_types::{
    DidChangeConfigurationParams, DidChangeTextDocumentParams, DidCloseTextDocumentParams,
    DidOpenTextDocumentParams, InitializedParams, PublishDiagnosticsParams,
    TextDocumentContentChangeEvent, TextDocumentIdentifier, TextDocumentItem, Url,
    VersionedTextDocumentIdentifier,
};
use serde_json::{Value, json};
use steward_schema::formats::LspTransport;
use steward_schema::resource::{LspServerSpec, Reason};
use tokio::io::AsyncReadExt as _;
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::compat::{TokioAsyncReadCompatExt as _, TokioAsyncWriteCompatExt as _};
use tokio_util::sync::CancellationToken;

use crate::runtime::process::{ExitInfo, ManagedProcess, ProcessSpec, Spawner};
use crate::runtime::start::{
    EXIT_SETTLE, StartError, exit_of_failed_start, stop_failed_start, wait_exit,
};
use crate::support::sync::lock;

/// After `textDocument/didOpen`, how long [`LspConnection::sync_document`]
/// waits before returning, so the server has processed the document before it
/// is queried.
pub const OPEN_DELAY: Duration = Duration::from_millis(200);

/// First pause between connection attempts to a tcp/socket server Steward
/// started; it doubles up to [`CONNECT_RETRY_MAX`].
pub const CONNECT_RETRY_FIRST: Duration = Duration::from_millis(250);
/// Longest pause between connection attempts.
pub const CONNECT_RETRY_MAX: Duration = Duration::from_secs(1);

/// How long closing the connection (flushing the last message) may take.
const CLOSE_WAIT: Duration = Duration::from_secs(1);
/// Host of a tcp server whose `socket.host` is not set.
const DEFAULT_HOST: &str = "127.0.0.1";

/// A request or document message the connection could not get through.
/// Messages read after "failed to" and name the method:
/// `send textDocument/hover: no answer within 30s`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LspRequestError {
    /// The connection is closed (the server hung up or exited, or the
    /// connection was stopped): the next connection may serve it.
    #[error("send {method}: the connection is closed")]
    Closed { method: String },
    /// No answer within the request's timeout.
    #[error("send {method}: no answer within {}", humantime::format_duration(*timeout))]
    Timeout { method: String, timeout: Duration },
    /// The server answered with an error.
    #[error("send {method}: the server answered with an error: {error}")]
    Server {
        method: String,
        error: async_lsp::ResponseError,
    },
    /// Not sent: the lifecycle requests are the connection's own, and a
    /// request must encode as JSON-RPC.
    #[error("send {method}: {why}")]
    Refused { method: String, why: &'static str },
    /// The transport failed otherwise (an undecodable answer, an I/O error).
    #[error("send {method}: {why}")]
    Transport { method: String, why: String },
}

impl LspRequestError {
    /// The failure of the answer to `method`.
    fn of_answer(method: &str, error: async_lsp::Error) -> Self {
        let method = method.to_owned();
        match error {
            async_lsp::Error::ServiceStopped | async_lsp::Error::Eof => {
                LspRequestError::Closed { method }
            }
            async_lsp::Error::Response(error) => LspRequestError::Server { method, error },
            other => LspRequestError::Transport {
                method,
                why: other.to_string(),
            },
        }
    }

    /// `method` could not be sent: the connection is closed.
    fn closed(method: &str) -> Self {
        LspRequestError::Closed {
            method: method.to_owned(),
        }
    }
}

/// Something that happened to a connection after it was established.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LspEvent {
    /// The server is gone; the connection is dead (stop it to clean up). The
    /// text reads after "the server": `exited with code 1`, `killed by signal
    /// 9 (SIGKILL)`, `closed the connection`.
    Exited(String),
    /// The server published diagnostics for this document.
    DiagnosticsChanged(Url),
}

/// Receives a connection's [`LspEvent`]s, from its session task: keep it
/// quick (send to a channel), it runs on the protocol loop.
pub type LspEventHandler = Arc<dyn Fn(LspEvent) + Send + Sync>;

/// One established LSP session (and, when Steward started it, the process
/// behind it).
pub struct LspConnection {
    name: String,
    socket: ServerSocket,
    capabilities: Value,
    shutdown_timeout: Duration,
    shared: Arc<Shared>,
    /// Declared before `process`: the connection closes before the kill.
    tasks: Mutex<Tasks>,
    /// Taken by [`LspConnection::stop`], which may run while queries still
    /// hold the connection (they fail once it is closed).
    process: Mutex<Option<ManagedProcess>>,
    pid: Option<u32>,
}

impl fmt::Debug for LspConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LspConnection")
            .field("name", &self.name)
            .field("pid", &self.pid())
            .field("open_documents", &lock(&self.shared.store).docs.len())
            .finish_non_exhaustive()
    }
}

impl LspConnection {
    /// Spawns the server when `spec.command` is set (and then owns it),
    /// connects (stdio pipes; tcp `socket.host:port` or the unix
    /// `socket.path`, retried every 250 ms growing to 1 s while a server
    /// Steward started comes up), then `initialize` / `initialized` /
    /// `workspace/didChangeConfiguration`; all within `spec.startupTimeout`.
    ///
    /// `on_event` is only called for what happens after this returns `Ok` (on
    /// a multi-threaded runtime the first call may race with the caller
    /// receiving it: treat an event as "look at this server again").
    pub async fn connect(
        spawner: &Spawner,
        name: &str,
        spec: &LspServerSpec,
        on_event: LspEventHandler,
    ) -> Result<LspConnection, StartError> {
        let started = Instant::now();
        let result = open(spawner, name, spec, on_event).await;
        match &result {
            Ok(connection) => tracing::info!(
                server = %name,
                pid = connection.pid(),
                transport = ?spec.transport,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "language server connected"
            ),
            Err(error) => tracing::info!(
                server = %name,
                reason = %error.reason,
                error = %crate::runtime::first_line(&error.message),
                "language server failed to start"
            ),
        }
        result
    }

    /// The pid of the server Steward started (`None` for an external daemon).
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The `ServerCapabilities` from the `initialize` answer, as the server
    /// sent them (for `status.capabilities`).
    pub fn capabilities(&self) -> Value {
        self.capabilities.clone()
    }

    /// The last `n` stderr lines of the server Steward started, oldest first.
    pub fn stderr_tail(&self, n: usize) -> Vec<String> {
        lock(&self.process)
            .as_ref()
            .map(|process| process.stderr_tail(n))
            .unwrap_or_default()
    }

    /// Brings the server's copy of a document up to `text`: `didOpen` (then
    /// [`OPEN_DELAY`]) if it is not open yet; `didChange` with the full text
    /// and the next version if it is open with other text; nothing if the
    /// text is what was sent last. Returns the document's version. A new
    /// `language_id` reopens the document (it can only be set at open).
    pub async fn sync_document(
        &self,
        uri: Url,
        language_id: &str,
        text: String,
    ) -> Result<i32, LspRequestError> {
        let (version, opened) = self.send_document(uri, language_id, text)?;
        if opened {
            tokio::time::sleep(OPEN_DELAY).await;
        }
        Ok(version)
    }

    /// [`sync_document`](Self::sync_document) without the wait: returns the
    /// version and whether `didOpen` was sent, so a caller opening many
    /// documents (a replay after a restart) waits [`OPEN_DELAY`] once.
    pub fn send_document(
        &self,
        uri: Url,
        language_id: &str,
        text: String,
    ) -> Result<(i32, bool), LspRequestError> {
        {
            // Decided and sent under the lock, so versions go out in order.
            let mut store = lock(&self.shared.store);
            let seen = store.diagnostics.get(&uri).map_or(0, |p| p.count);
            let current = store.docs.get(&uri).map(|doc| {
                (
                    doc.language_id == language_id,
                    doc.text == text,
                    doc.version,
                )
            });
            let (version, opened) = match current {
                Some((true, true, version)) => return Ok((version, false)),
                Some((true, false, version)) => {
                    let version = version + 1;
                    let params = DidChangeTextDocumentParams {
                        text_document: VersionedTextDocumentIdentifier {
                            uri: uri.clone(),
                            version,
                        },
                        content_changes: vec![TextDocumentContentChangeEvent {
                            range: None,
                            range_length: None,
                            text: text.clone(),
                        }],
                    };
                    self.socket
                        .notify::<DidChangeTextDocument>(params)
                        .map_err(|_| LspRequestError::closed("textDocument/didChange"))?;
                    (version, false)
                }
                reopen_or_new => {
                    if reopen_or_new.is_some() {
                        store.docs.remove(&uri);
                        let params = DidCloseTextDocumentParams {
                            text_document: TextDocumentIdentifier { uri: uri.clone() },
                        };
                        self.socket
                            .notify::<DidCloseTextDocument>(params)
                            .map_err(|_| LspRequestError::closed("textDocument/didClose"))?;
                    }
                    let version = 1;
                    let params = DidOpenTextDocumentParams {
                        text_document: TextDocumentItem {
                            uri: uri.clone(),
                            language_id: language_id.to_owned(),
                            version,
                            text: text.clone(),
                        },
                    };
                    self.socket
                        .notify::<DidOpenTextDocument>(params)
                        .map_err(|_| LspRequestError::closed("textDocument/didOpen"))?;
                    (version, true)
                }
            };
            store.docs.insert(
                uri,
                Doc {
                    language_id: language_id.to_owned(),
                    text,
                    version,
                    seen_at_sync: seen,
                },
            );
            Ok((version, opened))
        }
    }

    /// The documents opened through this connection: `(uri, language id,
    /// text)`, for replay after a restart.
    pub fn open_documents(&self) -> Vec<(Url, String, String)> {
        lock(&self.shared.store)
            .docs
            .iter()
            .map(|(uri, doc)| (uri.clone(), doc.language_id.clone(), doc.text.clone()))
            .collect()
    }

    /// `didClose` for a document opened through this connection (nothing
    /// otherwise).
    pub async fn close_document(&self, uri: &Url) {
        let mut store = lock(&self.shared.store);
        if store.docs.remove(uri).is_some() {
            let params = DidCloseTextDocumentParams {
                text_document: TextDocumentIdentifier { uri: uri.clone() },
            };
            if self.socket.notify::<DidCloseTextDocument>(params).is_err() {
                tracing::debug!(server = %self.name, %uri, "didClose not sent: the connection is closed");
            }
        }
    }

    /// Sends a request (`textDocument/hover`, `textDocument/definition`,
    /// `textDocument/references`, `textDocument/documentSymbol`, or any other
    /// standard LSP request by its method) and returns the raw result,
    /// bounded by `timeout`. The lifecycle requests (`initialize`,
    /// `shutdown`) are the connection's own and are refused.
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, LspRequestError> {
        let refused = |why| LspRequestError::Refused {
            method: method.to_owned(),
            why,
        };
        if method == "initialize" || method == "shutdown" {
            return Err(refused("the connection handles the lifecycle itself"));
        }
        let Some(answer) = raw::request(&self.socket, method, params) else {
            return Err(refused("the request cannot be encoded"));
        };
        match tokio::time::timeout(timeout, answer).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(error)) => Err(LspRequestError::of_answer(method, error)),
            Err(_) => Err(LspRequestError::Timeout {
                method: method.to_owned(),
                timeout,
            }),
        }
    }

    /// The diagnostics the server last published for `uri`.
    pub fn diagnostics(&self, uri: &Url) -> Option<Vec<lsp_types::Diagnostic>> {
        lock(&self.shared.store)
            .diagnostics
            .get(uri)
            .map(|published| published.diagnostics.clone())
    }

    /// Waits up to `timeout` for the first diagnostics published for `uri`
    /// after its latest [`sync_document`](Self::sync_document) (for a
    /// document not opened through Steward: the latest ones, or the first to
    /// come). A publication that names an older version does not count.
    /// `None` when nothing fresh came in time.
    pub async fn wait_for_diagnostics(
        &self,
        uri: &Url,
        timeout: Duration,
    ) -> Option<Vec<lsp_types::Diagnostic>> {
        let deadline = Instant::now() + timeout;
        // Subscribed before the first look, so no publication is missed.
        let mut published = self.shared.published.subscribe();
        loop {
            {
                let store = lock(&self.shared.store);
                if let Some(latest) = store.diagnostics.get(uri) {
                    let fresh = match store.docs.get(uri) {
                        Some(doc) => {
                            latest.count > doc.seen_at_sync
                                && latest.version.is_none_or(|v| v >= doc.version)
                        }
                        None => true,
                    };
                    if fresh {
                        return Some(latest.diagnostics.clone());
                    }
                }
            }
            match tokio::time::timeout_at(deadline, published.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return None,
            }
        }
    }

    /// Ends the session: `shutdown`, then `exit` (only to a server Steward
    /// started), then the wait for that process to exit, all bounded by
    /// `spec.shutdownTimeout`; then closes the connection; then, for a
    /// server Steward started, SIGTERM → `grace` → SIGKILL of its process
    /// group (reaped). Emits no event. Safe on a connection that already
    /// died.
    ///
    /// Takes `&self`: a connection shared with queries in flight is stopped
    /// all the same (their requests fail), never left running beside its
    /// successor. A second call does nothing.
    pub async fn stop(&self, grace: Duration) {
        {
            let mut life = lock(&self.shared.life);
            if life.stopped {
                return;
            }
            life.stopped = true;
        }
        let process = lock(&self.process).take();
        let started = Instant::now();
        let deadline = started + self.shutdown_timeout;
        let connected = lock(&self.shared.life).closed.is_none()
            && process
                .as_ref()
                .is_none_or(|process| process.try_status().is_none());
        if connected {
            // The timer is dropped as soon as the answer arrives; a late
            // answer is discarded by the main loop.
            let shutdown = raw::request(&self.socket, "shutdown", Value::Null)
                .expect("shutdown is in the request table");
            match tokio::time::timeout_at(deadline, shutdown).await {
                Ok(Ok(_)) => tracing::debug!(server = %self.name, "language server shut down"),
                Ok(Err(error)) => {
                    tracing::debug!(server = %self.name, error = %describe(&error), "shutdown failed")
                }
                Err(_) => tracing::debug!(
                    server = %self.name,
                    timeout = %humantime::format_duration(self.shutdown_timeout),
                    "no answer to shutdown in time"
                ),
            }
            // `exit` ends the server's process: only for one Steward owns.
            if let Some(process) = &process
                && self.socket.notify::<Exit>(()).is_ok()
            {
                let exited = tokio::time::timeout_at(deadline, process.exited()).await;
                tracing::debug!(server = %self.name, exited = exited.is_ok(), "exit sent");
            }
        }
        // Closing: the main loop flushes what is queued and drops the streams.
        let _ = self.socket.emit(Stop);
        let session = {
            let mut tasks = lock(&self.tasks);
            tasks.close.cancel();
            tasks.session.take()
        };
        if let Some(mut session) = session
            && tokio::time::timeout(CLOSE_WAIT, &mut session)
                .await
                .is_err()
        {
            session.abort();
            let _ = session.await;
        }
        lock(&self.tasks).abort();
        if let Some(mut process) = process {
            let report = process.stop(grace).await;
            tracing::debug!(server = %self.name, outcome = ?report.outcome, clean = report.clean, "language server process stopped");
        }
        tracing::info!(server = %self.name, elapsed_ms = started.elapsed().as_millis() as u64, "language server stopped");
    }
}

impl Drop for LspConnection {
    fn drop(&mut self) {
        // Silence first; then `tasks` aborts the session (closing the
        // connection) and dropping `process` SIGKILLs its group.
        lock(&self.shared.life).stopped = true;
    }
}

// ---- state shared with the session task ----

struct Shared {
    name: String,
    on_event: LspEventHandler,
    life: Mutex<Life>,
    store: Mutex<Store>,
    /// Bumped on every publishDiagnostics; wakes `wait_for_diagnostics`.
    published: watch::Sender<u64>,
}

#[derive(Default)]
struct Life {
    /// `connect` succeeded: events may be emitted.
    armed: bool,
    /// `stop` or drop began: no more events.
    stopped: bool,
    /// How the connection ended, once it has (reads after "the server").
    closed: Option<String>,
}

#[derive(Default)]
struct Store {
    docs: BTreeMap<Url, Doc>,
    diagnostics: HashMap<Url, Published>,
}

struct Doc {
    language_id: String,
    text: String,
    version: i32,
    /// `Published::count` for this document when it was last synced.
    seen_at_sync: u64,
}

struct Published {
    diagnostics: Vec<lsp_types::Diagnostic>,
    version: Option<i32>,
    /// Publications received for this document so far.
    count: u64,
}

impl Shared {
    fn emit(&self, event: LspEvent) {
        let live = {
            let life = lock(&self.life);
            life.armed && !life.stopped
        };
        if live {
            tracing::debug!(server = %self.name, event = ?event, "lsp event");
            (self.on_event)(event);
        }
    }

    fn publish(&self, params: Value) {
        let params = match serde_json::from_value::<PublishDiagnosticsParams>(params) {
            Ok(params) => params,
            Err(error) => {
                tracing::debug!(server = %self.name, %error, "ignored malformed publishDiagnostics");
                return;
            }
        };
        {
            let mut store = lock(&self.store);
            let entry = store
                .diagnostics
                .entry(params.uri.clone())
                .or_insert(Published {
                    diagnostics: Vec::new(),
                    version: None,
                    count: 0,
                });
            entry.count += 1;
            entry.version = params.version;
            entry.diagnostics = params.diagnostics;
        }
        self.published.send_modify(|count| *count += 1);
        self.emit(LspEvent::DiagnosticsChanged(params.uri));
    }
}

/// The session task's handles; dropping them aborts the tasks (closing the
/// connection and the tcp/socket server's stdio pipes).
struct Tasks {
    session: Option<JoinHandle<()>>,
    pipes: Option<JoinHandle<()>>,
    /// Interrupts the session task's wait for an exit status.
    close: CancellationToken,
}

impl Tasks {
    fn abort(&mut self) {
        self.close.cancel();
        for task in [&self.session, &self.pipes].into_iter().flatten() {
            task.abort();
        }
    }
}

impl Drop for Tasks {
    fn drop(&mut self) {
        self.abort();
    }
}

// ---- connecting ----

/// Where the server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Endpoint {
    Stdio,
    Tcp { host: String, port: u16 },
    Unix(PathBuf),
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Stdio => f.write_str("stdio"),
            Endpoint::Tcp { host, port } => write!(f, "{host}:{port}"),
            Endpoint::Unix(path) => write!(f, "unix socket {}", path.display()),
        }
    }
}

impl Endpoint {
    fn of(spec: &LspServerSpec) -> Result<Endpoint, StartError> {
        let bad = |message: &str| StartError::new(Reason::StartFailed, message);
        match spec.transport {
            LspTransport::Stdio if spec.command.is_none() => Err(bad(
                "start the language server: the stdio transport needs a command",
            )),
            LspTransport::Stdio => Ok(Endpoint::Stdio),
            LspTransport::Tcp => {
                let socket = spec.socket.as_ref();
                let port = socket.and_then(|socket| socket.port).ok_or_else(|| {
                    bad("connect to the language server: the tcp transport needs socket.port")
                })?;
                let port = u16::try_from(port)
                    .ok()
                    .filter(|port| *port != 0)
                    .ok_or_else(|| {
                        StartError::new(
                            Reason::StartFailed,
                            format!("connect to the language server: port {port} is out of range"),
                        )
                    })?;
                let host = socket
                    .and_then(|socket| socket.host.clone())
                    .filter(|host| !host.is_empty())
                    .unwrap_or_else(|| DEFAULT_HOST.to_owned());
                Ok(Endpoint::Tcp { host, port })
            }
            LspTransport::Socket => {
                let path = spec
                    .socket
                    .as_ref()
                    .and_then(|socket| socket.path.as_deref())
                    .filter(|path| !path.is_empty())
                    .ok_or_else(|| {
                        bad("connect to the language server: the socket transport needs socket.path")
                    })?;
                // Normalized to absolute; a relative one is the workspace folder's.
                Ok(Endpoint::Unix(Path::new(&spec.workspace_folder).join(path)))
            }
        }
    }

    async fn connect(&self) -> io::Result<(Input, Output)> {
        match self {
            Endpoint::Stdio => Err(io::Error::other("stdio is not a network endpoint")),
            Endpoint::Tcp { host, port } => {
                let stream = tokio::net::TcpStream::connect((host.as_str(), *port)).await?;
                stream.set_nodelay(true)?;
                let (read, write) = stream.into_split();
                Ok((Box::new(read.compat()), Box::new(write.compat_write())))
            }
            Endpoint::Unix(path) => {
                let stream = tokio::net::UnixStream::connect(path).await?;
                let (read, write) = stream.into_split();
                Ok((Box::new(read.compat()), Box::new(write.compat_write())))
            }
        }
    }
}

type Input = Box<dyn futures::AsyncRead + Send + Unpin>;
type Output = Box<dyn futures::AsyncWrite + Send + Unpin>;

/// Why opening a session failed, before it is turned into a message.
enum Failure {
    /// The deadline passed during `phase`; `detail` says what was last seen.
    Timeout { phase: String, detail: String },
    /// An external server could not be reached.
    Connect(String),
    /// The process exited; the text says when ("during initialize").
    Exited(&'static str, ExitInfo),
    /// The connection ended; `when`, and how ("closed the connection").
    Closed(&'static str, String),
    /// The server answered `initialize` with an error.
    Protocol(String),
}

impl Failure {
    fn into_error(self, timeout: Duration, exited: Option<ExitInfo>) -> StartError {
        let within = humantime::format_duration(timeout);
        match self {
            Failure::Timeout { phase, detail } => StartError::new(
                Reason::StartupTimeout,
                format!("{phase} within {within}: {detail}"),
            ),
            Failure::Connect(message) => StartError::new(Reason::StartFailed, message),
            Failure::Exited(when, info) => StartError::new(
                Reason::StartFailed,
                format!("start the language server: the server {info} {when}"),
            ),
            Failure::Closed(when, how) => {
                let how = exited.map_or(how, |info| info.to_string());
                StartError::new(
                    Reason::StartFailed,
                    format!("start the language server: the server {how} {when}"),
                )
            }
            Failure::Protocol(message) => {
                let message = match exited {
                    Some(info) => {
                        format!("start the language server: the server {info} during initialize")
                    }
                    None => message,
                };
                StartError::new(Reason::StartFailed, message)
            }
        }
    }
}

/// What a successful handshake hands to the connection.
struct Opened {
    socket: ServerSocket,
    capabilities: Value,
    shared: Arc<Shared>,
    tasks: Tasks,
}

async fn open(
    spawner: &Spawner,
    name: &str,
    spec: &LspServerSpec,
    on_event: LspEventHandler,
) -> Result<LspConnection, StartError> {
    let timeout = Duration::from_millis(spec.startup_timeout);
    let deadline = Instant::now() + timeout;
    let endpoint = Endpoint::of(spec)?;
    let (initialize, folders) = initialize_params(spec)?;

    let mut process = match spec.command.as_deref() {
        Some(command) => {
            let process_spec = ProcessSpec {
                program: command.to_owned(),
                args: spec.args.clone(),
                env: spec.env.clone(),
                cwd: Some(PathBuf::from(&spec.workspace_folder)),
            };
            // Dropping a spawn that is still in flight is safe: the spawner
            // kills a child nobody waits for.
            let spawned = tokio::time::timeout_at(deadline, spawner.spawn(&process_spec))
                .await
                .map_err(|_| {
                    StartError::new(
                        Reason::StartupTimeout,
                        format!(
                            "start the language server within {}: the process did not start",
                            humantime::format_duration(timeout)
                        ),
                    )
                })?;
            let process = spawned?;
            tracing::debug!(server = %name, pid = process.pid(), "language server spawned");
            Some(process)
        }
        None => None,
    };

    let shared = Arc::new(Shared {
        name: name.to_owned(),
        on_event,
        life: Mutex::new(Life::default()),
        store: Mutex::new(Store::default()),
        published: watch::Sender::new(0),
    });
    let opened = handshake(HandshakeArgs {
        name,
        spec,
        endpoint: &endpoint,
        process: process.as_mut(),
        initialize,
        folders,
        deadline,
        shared,
    })
    .await;
    match opened {
        Ok(opened) => Ok(LspConnection {
            name: name.to_owned(),
            socket: opened.socket,
            capabilities: opened.capabilities,
            shutdown_timeout: Duration::from_millis(spec.shutdown_timeout),
            shared: opened.shared,
            tasks: Mutex::new(opened.tasks),
            pid: process.as_ref().map(ManagedProcess::pid),
            process: Mutex::new(process),
        }),
        Err(failure) => {
            // The session (if any) is already aborted: the connection is
            // closed. When it closed under the handshake, the exit status
            // gets a moment to arrive.
            let settle = matches!(failure, Failure::Closed(..) | Failure::Protocol(_));
            let (exited, tail) = match process {
                Some(mut process) => (
                    exit_of_failed_start(&process, settle).await,
                    stop_failed_start(&mut process).await,
                ),
                None => (None, Vec::new()),
            };
            Err(failure.into_error(timeout, exited).with_stderr_tail(tail))
        }
    }
}

struct HandshakeArgs<'a> {
    name: &'a str,
    spec: &'a LspServerSpec,
    endpoint: &'a Endpoint,
    process: Option<&'a mut ManagedProcess>,
    initialize: Value,
    folders: Value,
    deadline: Instant,
    shared: Arc<Shared>,
}

/// Connect, start the session task, `initialize`, `initialized`, settings.
/// On an error every task it started is aborted (the connection closed).
async fn handshake(args: HandshakeArgs<'_>) -> Result<Opened, Failure> {
    let HandshakeArgs {
        name,
        spec,
        endpoint,
        process,
        initialize,
        folders,
        deadline,
        shared,
    } = args;
    let mut exit = process.as_ref().map(|process| process.exit_watch());
    let mut tasks = Tasks {
        session: None,
        pipes: None,
        close: CancellationToken::new(),
    };
    let (input, output): (Input, Output) = match (endpoint, process) {
        (Endpoint::Stdio, Some(process)) => match (process.take_stdout(), process.take_stdin()) {
            (Some(stdout), Some(stdin)) => {
                (Box::new(stdout.compat()), Box::new(stdin.compat_write()))
            }
            _ => {
                return Err(Failure::Closed(
                    "before the session started",
                    "has no stdio pipes".to_owned(),
                ));
            }
        },
        // `Endpoint::of` requires a command for stdio; kept total anyway.
        (Endpoint::Stdio, None) => {
            return Err(Failure::Connect(
                "start the language server: the stdio transport needs a command".to_owned(),
            ));
        }
        (endpoint, Some(process)) => {
            tasks.pipes = Some(keep_pipes(
                name,
                process.take_stdin(),
                process.take_stdout(),
            ));
            connect_with_retry(endpoint, exit.as_mut(), deadline).await?
        }
        (endpoint, None) => match tokio::time::timeout_at(deadline, endpoint.connect()).await {
            Ok(Ok(io)) => io,
            Ok(Err(error)) => {
                return Err(Failure::Connect(format!("connect to {endpoint}: {error}")));
            }
            Err(_) => {
                return Err(Failure::Timeout {
                    phase: format!("connect to {endpoint}"),
                    detail: "no connection".to_owned(),
                });
            }
        },
    };

    let state = ClientState {
        shared: Arc::clone(&shared),
        settings: spec.settings.clone(),
        folders,
    };
    let (main_loop, socket) = MainLoop::new_client(|_| client_router(state));
    tasks.session = Some(tokio::spawn(run_session(
        main_loop.run_buffered(input, output),
        socket.clone(),
        exit.clone(),
        Arc::clone(&shared),
        tasks.close.clone(),
    )));

    let answer = raw::request(&socket, "initialize", initialize)
        .expect("initialize is in the request table");
    let result = tokio::select! {
        biased;
        result = answer => result,
        info = wait_exit(exit.as_mut()) => return Err(Failure::Exited("during initialize", info)),
        () = tokio::time::sleep_until(deadline) => {
            return Err(Failure::Timeout {
                phase: "complete the LSP handshake".to_owned(),
                detail: "no answer to initialize".to_owned(),
            });
        }
    };
    let result = match result {
        Ok(result) => result,
        Err(async_lsp::Error::ServiceStopped) => {
            let how = lock(&shared.life).closed.clone();
            return Err(Failure::Closed(
                "during initialize",
                how.unwrap_or_else(|| "closed the connection".to_owned()),
            ));
        }
        Err(error) => {
            return Err(Failure::Protocol(format!(
                "initialize: {}",
                describe(&error)
            )));
        }
    };
    let capabilities = match result.get("capabilities") {
        Some(capabilities @ Value::Object(_)) => capabilities.clone(),
        _ => {
            tracing::warn!(server = %name, "the initialize answer has no capabilities object");
            json!({})
        }
    };
    if let Some(info) = result.get("serverInfo") {
        tracing::debug!(server = %name, server_info = %info, "lsp handshake done");
    }
    let settings = DidChangeConfigurationParams {
        settings: spec.settings.clone().unwrap_or(Value::Null),
    };
    let sent = socket
        .notify::<Initialized>(InitializedParams {})
        .and_then(|()| socket.notify::<DidChangeConfiguration>(settings));
    // Armed under the same lock the session task records the end under:
    // either the end is seen here (the error) or the task emits it.
    let closed = {
        let mut life = lock(&shared.life);
        if life.closed.is_none() && sent.is_ok() {
            life.armed = true;
        }
        life.closed.clone()
    };
    if let Some(how) = closed {
        return Err(Failure::Closed("right after initialize", how));
    }
    if sent.is_err() {
        return Err(Failure::Closed(
            "right after initialize",
            "closed the connection".to_owned(),
        ));
    }
    Ok(Opened {
        socket,
        capabilities,
        shared,
        tasks,
    })
}

/// Connects to a server Steward started, retrying (250 ms growing to 1 s)
/// until the deadline while the process is alive.
async fn connect_with_retry(
    endpoint: &Endpoint,
    mut exit: Option<&mut watch::Receiver<Option<ExitInfo>>>,
    deadline: Instant,
) -> Result<(Input, Output), Failure> {
    const BEFORE: &str = "before it accepted a connection";
    let timed_out = |last: String| Failure::Timeout {
        phase: format!("connect to {endpoint}"),
        detail: last,
    };
    let mut pause = CONNECT_RETRY_FIRST;
    let mut last = "no connection".to_owned();
    loop {
        let attempt = tokio::select! {
            biased;
            info = wait_exit(exit.as_deref_mut()) => return Err(Failure::Exited(BEFORE, info)),
            attempt = endpoint.connect() => attempt,
            () = tokio::time::sleep_until(deadline) => return Err(timed_out(last)),
        };
        match attempt {
            Ok(io) => return Ok(io),
            Err(error) => {
                tracing::trace!(%endpoint, %error, "language server not accepting connections yet");
                last = error.to_string();
            }
        }
        let retry_at = (Instant::now() + pause).min(deadline);
        tokio::select! {
            biased;
            info = wait_exit(exit.as_deref_mut()) => return Err(Failure::Exited(BEFORE, info)),
            () = tokio::time::sleep_until(retry_at) => {}
        }
        if Instant::now() >= deadline {
            return Err(timed_out(last));
        }
        pause = (pause * 2).min(CONNECT_RETRY_MAX);
    }
}

/// For a tcp/socket server Steward started: drains its stdout (a full pipe
/// would block it) and holds its stdin open (some servers exit when it
/// closes) until aborted.
fn keep_pipes(
    name: &str,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
) -> JoinHandle<()> {
    let name = name.to_owned();
    tokio::spawn(async move {
        let _stdin = stdin;
        if let Some(mut stdout) = stdout {
            let mut buffer = vec![0; 8192];
            while let Ok(read @ 1..) = stdout.read(&mut buffer).await {
                tracing::trace!(server = %name, output = %String::from_utf8_lossy(&buffer[..read]), "language server stdout");
            }
        }
        std::future::pending::<()>().await;
    })
}

/// The `initialize` params and the workspace folder list (also the answer to
/// `workspace/workspaceFolders`).
fn initialize_params(spec: &LspServerSpec) -> Result<(Value, Value), StartError> {
    let folder = Path::new(&spec.workspace_folder);
    let folder_uri = Url::from_file_path(folder).map_err(|()| {
        StartError::new(
            Reason::StartFailed,
            format!(
                "start the language server: workspaceFolder {} is not an absolute path",
                spec.workspace_folder
            ),
        )
    })?;
    let root_uri = if spec.root_uri.is_empty() {
        folder_uri.clone()
    } else {
        Url::parse(&spec.root_uri).map_err(|error| {
            StartError::new(
                Reason::StartFailed,
                format!(
                    "start the language server: rootUri {} is not a URI: {error}",
                    spec.root_uri
                ),
            )
        })?
    };
    let root_path = root_uri
        .to_file_path()
        .unwrap_or_else(|()| folder.to_owned());
    let folder_name = folder.file_name().map_or_else(
        || spec.workspace_folder.clone(),
        |name| name.to_string_lossy().into_owned(),
    );
    let folders = json!([{ "uri": folder_uri, "name": folder_name }]);
    let mut params = json!({
        "processId": std::process::id(),
        "clientInfo": { "name": "steward", "version": env!("CARGO_PKG_VERSION") },
        "rootPath": root_path,
        "rootUri": root_uri,
        "capabilities": client_capabilities(),
        "trace": "off",
        "workspaceFolders": folders,
    });
    if let Some(options) = &spec.initialization_options {
        params["initializationOptions"] = options.clone();
    }
    Ok((params, folders))
}

/// What Steward supports as a client: what real servers check before they
/// offer hover, symbols, diagnostics, progress and pulled configuration.
fn client_capabilities() -> Value {
    json!({
        "workspace": {
            "configuration": true,
            "workspaceFolders": true,
            "didChangeConfiguration": { "dynamicRegistration": false },
        },
        "textDocument": {
            "synchronization": {
                "dynamicRegistration": false,
                "willSave": false,
                "willSaveWaitUntil": false,
                "didSave": true,
            },
            "hover": { "dynamicRegistration": false, "contentFormat": ["markdown", "plaintext"] },
            "definition": { "dynamicRegistration": false, "linkSupport": false },
            "references": { "dynamicRegistration": false },
            "documentSymbol": {
                "dynamicRegistration": false,
                "hierarchicalDocumentSymbolSupport": true,
                "symbolKind": { "valueSet": (1..=26).collect::<Vec<u32>>() },
            },
            "publishDiagnostics": {
                "relatedInformation": true,
                "versionSupport": true,
                "tagSupport": { "valueSet": [1, 2] },
            },
        },
        "window": { "workDoneProgress": true },
        "general": { "positionEncodings": ["utf-16"] },
    })
}

// ---- the session task ----

/// Drives the main loop until the connection or the process ends, records
/// how, and reports it (when armed and not stopped).
async fn run_session(
    main_loop: impl Future<Output = async_lsp::Result<()>>,
    socket: ServerSocket,
    mut exit: Option<watch::Receiver<Option<ExitInfo>>>,
    shared: Arc<Shared>,
    close: CancellationToken,
) {
    // async-lsp's loop panics once every socket is gone: keep one.
    let _socket = socket;
    let how = tokio::select! {
        ended = main_loop => {
            let how = match ended {
                Ok(()) => "closed the connection".to_owned(),
                Err(error) if closed_by_peer(&error) => "closed the connection".to_owned(),
                Err(error) => format!("broke the connection: {}", describe(&error)),
            };
            tracing::debug!(server = %shared.name, how = %how, "lsp main loop ended");
            lock(&shared.life).closed = Some(how.clone());
            match exit.as_mut() {
                Some(exit) => tokio::select! {
                    () = close.cancelled() => return,
                    info = tokio::time::timeout(EXIT_SETTLE, wait_exit(Some(exit))) => {
                        info.map_or(how, |info| info.to_string())
                    }
                },
                None => how,
            }
        }
        info = wait_exit(exit.as_mut()) => {
            let how = info.to_string();
            lock(&shared.life).closed = Some(how.clone());
            how
        }
    };
    shared.emit(LspEvent::Exited(how));
}

// ---- the client side of the protocol ----

/// Ends the main loop (after what is queued before it is written).
struct Stop;

struct ClientState {
    shared: Arc<Shared>,
    settings: Option<Value>,
    folders: Value,
}

impl ClientState {
    /// The answer to a request the server sends to the client.
    fn answer(&self, method: &str, params: &Value) -> Result<Value, ResponseError> {
        tracing::debug!(server = %self.shared.name, method, "language server request");
        match method {
            "workspace/configuration" => {
                let items = params["items"].as_array().map_or(&[][..], Vec::as_slice);
                Ok(Value::Array(
                    items
                        .iter()
                        .map(|item| {
                            configuration_section(self.settings.as_ref(), item["section"].as_str())
                        })
                        .collect(),
                ))
            }
            "workspace/workspaceFolders" => Ok(self.folders.clone()),
            "client/registerCapability"
            | "client/unregisterCapability"
            | "window/workDoneProgress/create"
            | "window/showMessageRequest" => Ok(Value::Null),
            _ => Err(ResponseError::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("method not found: {method}"),
            )),
        }
    }

    /// Every notification is accepted; none ends the session.
    fn notification(&self, notification: AnyNotification) {
        match notification.method.as_str() {
            "textDocument/publishDiagnostics" => self.shared.publish(notification.params),
            "window/logMessage" | "window/showMessage" => tracing::debug!(
                server = %self.shared.name,
                kind = %notification.method,
                level = %notification.params["type"],
                message = %notification.params["message"].as_str().unwrap_or_default(),
                "language server message"
            ),
            method => tracing::trace!(server = %self.shared.name, method, "lsp notification"),
        }
    }
}

fn client_router(state: ClientState) -> Router<ClientState> {
    let mut router = Router::new(state);
    router
        .unhandled_request(|state, request: AnyRequest| {
            std::future::ready(state.answer(&request.method, &request.params))
        })
        .unhandled_notification(|state, notification| {
            state.notification(notification);
            ControlFlow::Continue(())
        })
        .event(|_, Stop| ControlFlow::Break(Ok(())));
    router
}

/// `workspace/configuration` for one item: `section` as a dotted path into
/// the settings (`python.analysis` → `settings.python.analysis`), else as a
/// literal key (`{"python.analysis": …}`); no section → all the settings;
/// nothing there → null.
fn configuration_section(settings: Option<&Value>, section: Option<&str>) -> Value {
    let Some(settings) = settings else {
        return Value::Null;
    };
    let Some(section) = section.filter(|section| !section.is_empty()) else {
        return settings.clone();
    };
    section
        .split('.')
        .try_fold(settings, |value, key| value.get(key))
        .or_else(|| settings.get(section))
        .cloned()
        .unwrap_or(Value::Null)
}

/// Requests by method name. async-lsp sends only `Request` types, whose
/// method is a compile-time constant, so every method we can send is listed
/// here (the LSP 3.17 client→server requests), with raw JSON params and
/// results.
mod raw {
    use std::future::Future;
    use std::pin::Pin;

    use async_lsp::ServerSocket;
    use lsp_types::request::Request;
    use serde_json::Value;

    pub(super) type Answer = Pin<Box<dyn Future<Output = async_lsp::Result<Value>> + Send>>;

    fn send<R: Request<Params = Value, Result = Value>>(
        socket: &ServerSocket,
        params: Value,
    ) -> Answer {
        let socket = socket.clone();
        Box::pin(async move { socket.request::<R>(params).await })
    }

    /// Any other method (extensions such as clangd's), through async-lsp's
    /// `forward` Service impl; the main loop assigns the id.
    fn any(socket: &ServerSocket, method: &str, params: Value) -> Option<Answer> {
        let request: async_lsp::AnyRequest = serde_json::from_value(
            serde_json::json!({ "id": 0, "method": method, "params": params }),
        )
        .ok()?;
        let mut socket = socket.clone();
        Some(Box::pin(async move {
            tower_service::Service::call(&mut socket, request)
                .await
                .map_err(async_lsp::Error::from)
        }))
    }

    macro_rules! requests {
        ($($ty:ident => $method:literal,)*) => {
            $(
                pub(super) enum $ty {}
                impl Request for $ty {
                    type Params = Value;
                    type Result = Value;
                    const METHOD: &'static str = $method;
                }
            )*

            /// Sends `method` (`None`: not a method async-lsp can send).
            pub(super) fn request(socket: &ServerSocket, method: &str, params: Value) -> Option<Answer> {
                match method {
                    $($method => Some(send::<$ty>(socket, params)),)*
                    _ => any(socket, method, params),
                }
            }
        };
    }

    requests! {
        Initialize => "initialize",
        Shutdown => "shutdown",
        Hover => "textDocument/hover",
        Definition => "textDocument/definition",
        Declaration => "textDocument/declaration",
        TypeDefinition => "textDocument/typeDefinition",
        Implementation => "textDocument/implementation",
        References => "textDocument/references",
        DocumentSymbol => "textDocument/documentSymbol",
        DocumentHighlight => "textDocument/documentHighlight",
        Completion => "textDocument/completion",
        CompletionResolve => "completionItem/resolve",
        SignatureHelp => "textDocument/signatureHelp",
        CodeAction => "textDocument/codeAction",
        CodeActionResolve => "codeAction/resolve",
        CodeLens => "textDocument/codeLens",
        CodeLensResolve => "codeLens/resolve",
        DocumentLink => "textDocument/documentLink",
        DocumentLinkResolve => "documentLink/resolve",
        DocumentColor => "textDocument/documentColor",
        ColorPresentation => "textDocument/colorPresentation",
        Formatting => "textDocument/formatting",
        RangeFormatting => "textDocument/rangeFormatting",
        OnTypeFormatting => "textDocument/onTypeFormatting",
        Rename => "textDocument/rename",
        PrepareRename => "textDocument/prepareRename",
        FoldingRange => "textDocument/foldingRange",
        SelectionRange => "textDocument/selectionRange",
        LinkedEditingRange => "textDocument/linkedEditingRange",
        Moniker => "textDocument/moniker",
        SemanticTokensFull => "textDocument/semanticTokens/full",
        SemanticTokensFullDelta => "textDocument/semanticTokens/full/delta",
        SemanticTokensRange => "textDocument/semanticTokens/range",
        InlayHint => "textDocument/inlayHint",
        InlayHintResolve => "inlayHint/resolve",
        InlineValue => "textDocument/inlineValue",
        DocumentDiagnostic => "textDocument/diagnostic",
        WillSaveWaitUntil => "textDocument/willSaveWaitUntil",
        PrepareCallHierarchy => "textDocument/prepareCallHierarchy",
        IncomingCalls => "callHierarchy/incomingCalls",
        OutgoingCalls => "callHierarchy/outgoingCalls",
        PrepareTypeHierarchy => "textDocument/prepareTypeHierarchy",
        Supertypes => "typeHierarchy/supertypes",
        Subtypes => "typeHierarchy/subtypes",
        WorkspaceSymbol => "workspace/symbol",
        WorkspaceSymbolResolve => "workspaceSymbol/resolve",
        WorkspaceDiagnostic => "workspace/diagnostic",
        ExecuteCommand => "workspace/executeCommand",
        WillCreateFiles => "workspace/willCreateFiles",
        WillRenameFiles => "workspace/willRenameFiles",
        WillDeleteFiles => "workspace/willDeleteFiles",
    }
}

// ---- helpers ----

/// An async-lsp error as a phrase.
fn describe(error: &async_lsp::Error) -> String {
    match error {
        async_lsp::Error::ServiceStopped | async_lsp::Error::Eof => {
            "the connection is closed".to_owned()
        }
        async_lsp::Error::Response(response) => {
            format!("the server answered with an error: {response}")
        }
        other => other.to_string(),
    }
}

/// The peer went away: end of stream, or a write to a closed pipe/socket.
fn closed_by_peer(error: &async_lsp::Error) -> bool {
    match error {
        async_lsp::Error::Eof => true,
        async_lsp::Error::Io(error) => matches!(
            error.kind(),
            io::ErrorKind::BrokenPipe
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::UnexpectedEof
        ),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::{Value, json};
    use steward_schema::resource::{LspSocket, Scope};
    use tokio::sync::mpsc;
    use tokio::sync::mpsc::error::TryRecvError;

    use super::*;
    use crate::runtime::test_support::{SOON, alive, eventually, received, record, recorded_pid};

    /// The fake server binary (see `runtime::fake_bin`).
    fn fake_server() -> PathBuf {
        crate::runtime::test_support::fake_binary("fake-lsp-server")
    }

    fn fake_path() -> String {
        fake_server().display().to_string()
    }

    /// A workspace directory (canonical, so it compares with /proc paths).
    fn workspace() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().canonicalize().unwrap();
        (dir, path)
    }

    fn spec(workspace: &Path, transport: LspTransport) -> LspServerSpec {
        LspServerSpec {
            scope: Scope::Workspace,
            languages: vec!["rust".to_owned()],
            transport,
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            socket: None,
            initialization_options: None,
            settings: None,
            extension_to_language: BTreeMap::new(),
            workspace_folder: workspace.display().to_string(),
            root_uri: Url::from_file_path(workspace).unwrap().to_string(),
            startup_timeout: SOON.as_millis() as u64,
            shutdown_timeout: 5000,
            restart_on_crash: false,
            max_restarts: 3,
            trust_required: true,
            extension_name: None,
            config_hash: String::new(),
            as_written: Default::default(),
        }
    }

    fn fake_env(config: &Value) -> BTreeMap<String, String> {
        BTreeMap::from([("FAKE_LSP_CONFIG".to_owned(), config.to_string())])
    }

    /// A stdio spec running the fake with `config` (FAKE_LSP_CONFIG).
    fn fake(workspace: &Path, config: Value) -> LspServerSpec {
        LspServerSpec {
            command: Some(fake_path()),
            env: fake_env(&config),
            ..spec(workspace, LspTransport::Stdio)
        }
    }

    fn tcp_socket(port: u16) -> Option<LspSocket> {
        Some(LspSocket {
            host: Some("127.0.0.1".to_owned()),
            port: Some(u32::from(port)),
            path: None,
        })
    }

    fn events() -> (LspEventHandler, mpsc::UnboundedReceiver<LspEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Arc::new(move |event| {
                let _ = tx.send(event);
            }),
            rx,
        )
    }

    async fn next_event(rx: &mut mpsc::UnboundedReceiver<LspEvent>) -> LspEvent {
        tokio::time::timeout(SOON, rx.recv())
            .await
            .expect("no event within the deadline")
            .expect("the event channel closed")
    }

    /// Skips diagnostics events; returns the first other one.
    async fn next_exit(rx: &mut mpsc::UnboundedReceiver<LspEvent>) -> LspEvent {
        loop {
            match next_event(rx).await {
                LspEvent::DiagnosticsChanged(_) => {}
                event => return event,
            }
        }
    }

    fn no_more_events(rx: &mut mpsc::UnboundedReceiver<LspEvent>) {
        match rx.try_recv() {
            Err(TryRecvError::Empty | TryRecvError::Disconnected) => {}
            Ok(event) => panic!("unexpected event {event:?}"),
        }
    }

    async fn connect(
        spec: &LspServerSpec,
    ) -> (
        Result<LspConnection, StartError>,
        mpsc::UnboundedReceiver<LspEvent>,
    ) {
        let (on_event, rx) = events();
        let spawner = Spawner::new().unwrap();
        let result = LspConnection::connect(&spawner, "fake", spec, on_event).await;
        (result, rx)
    }

    fn events_named(path: &Path, name: &str) -> Vec<Value> {
        record(path)
            .into_iter()
            .filter(|event| event["event"] == name)
            .map(|event| event["message"].clone())
            .collect()
    }

    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    fn signal(pid: u32, signal: &str) {
        let status = std::process::Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    fn position(uri: &Url, line: u32, character: u32) -> Value {
        json!({ "textDocument": { "uri": uri }, "position": { "line": line, "character": character } })
    }

    #[test]
    fn connections_and_their_futures_can_move_between_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        fn assert_send<T: Send>(_: &T) {}
        assert_send_sync::<LspConnection>();
        let spawner = Spawner::new().unwrap();
        let spec = spec(Path::new("/"), LspTransport::Tcp);
        let (on_event, _rx) = events();
        let connect = LspConnection::connect(&spawner, "x", &spec, on_event);
        assert_send(&connect);
        fn uses(connection: LspConnection, uri: Url) {
            assert_send(&connection.sync_document(uri.clone(), "rust", String::new()));
            assert_send(&connection.close_document(&uri));
            assert_send(&connection.request("textDocument/hover", Value::Null, SOON));
            assert_send(&connection.wait_for_diagnostics(&uri, SOON));
            assert_send(&connection.stop(SOON));
        }
        let _ = uses;
    }

    #[test]
    fn configuration_sections_are_dotted_paths_into_the_settings() {
        let settings = json!({
            "python": { "analysis": { "typeCheckingMode": "basic" } },
            "flat.key": 1,
        });
        let section = |name| configuration_section(Some(&settings), name);
        assert_eq!(
            section(Some("python.analysis")),
            json!({ "typeCheckingMode": "basic" })
        );
        assert_eq!(section(Some("python.analysis.typeCheckingMode")), "basic");
        assert_eq!(section(None), settings, "no section: everything");
        assert_eq!(section(Some("")), settings);
        assert_eq!(section(Some("python.missing")), Value::Null);
        assert_eq!(section(Some("flat.key")), 1, "a literal dotted key");
        assert_eq!(configuration_section(None, Some("python")), Value::Null);
    }

    #[tokio::test]
    async fn stdio_connect_handshakes_and_stops_by_protocol() {
        let (_dir, ws) = workspace();
        let rec = ws.join("record.jsonl");
        let mut spec = fake(&ws, json!({ "record": rec }));
        spec.args = vec!["--stdio".to_owned()];
        spec.initialization_options = Some(json!({ "mode": "strict" }));
        spec.settings = Some(json!({ "fake": { "level": 3 } }));
        let (result, mut rx) = connect(&spec).await;
        let connection = result.unwrap();
        let pid = connection.pid().unwrap();
        assert_eq!(pid, recorded_pid(&rec));
        assert_eq!(
            std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap(),
            ws,
            "started in the workspace folder"
        );
        assert_eq!(events_named(&rec, "start")[0]["args"], json!(["--stdio"]));

        let capabilities = connection.capabilities();
        assert_eq!(capabilities["hoverProvider"], true);
        assert_eq!(capabilities["documentSymbolProvider"], true);
        assert_eq!(capabilities["textDocumentSync"]["change"], 1);

        eventually("the settings arrive", || {
            !received(&rec, "workspace/didChangeConfiguration").is_empty()
        })
        .await;
        let init = &received(&rec, "initialize")[0]["params"];
        assert_eq!(init["processId"], std::process::id());
        assert_eq!(init["rootUri"], spec.root_uri);
        assert_eq!(init["rootPath"], ws.display().to_string());
        assert_eq!(
            init["workspaceFolders"],
            json!([{
                "uri": Url::from_file_path(&ws).unwrap(),
                "name": ws.file_name().unwrap().to_str().unwrap(),
            }])
        );
        assert_eq!(init["initializationOptions"], json!({ "mode": "strict" }));
        let sent = &init["capabilities"];
        assert_eq!(sent["textDocument"]["synchronization"]["didSave"], true);
        assert_eq!(
            sent["textDocument"]["hover"]["contentFormat"][0],
            "markdown"
        );
        assert_eq!(
            sent["textDocument"]["definition"]["dynamicRegistration"],
            false
        );
        assert_eq!(
            sent["textDocument"]["references"]["dynamicRegistration"],
            false
        );
        assert_eq!(
            sent["textDocument"]["documentSymbol"]["hierarchicalDocumentSymbolSupport"],
            true
        );
        assert_eq!(
            sent["textDocument"]["publishDiagnostics"]["versionSupport"],
            true
        );
        assert_eq!(sent["workspace"]["configuration"], true);
        assert_eq!(sent["workspace"]["workspaceFolders"], true);
        assert_eq!(sent["window"]["workDoneProgress"], true);
        assert_eq!(sent["general"]["positionEncodings"], json!(["utf-16"]));
        // initialize → initialized → didChangeConfiguration, in that order.
        let methods: Vec<Value> = events_named(&rec, "recv")
            .into_iter()
            .map(|message| message["method"].clone())
            .collect();
        assert_eq!(
            methods,
            [
                "initialize",
                "initialized",
                "workspace/didChangeConfiguration"
            ]
        );
        assert_eq!(
            received(&rec, "workspace/didChangeConfiguration")[0]["params"],
            json!({ "settings": { "fake": { "level": 3 } } })
        );

        let started = Instant::now();
        connection.stop(SOON).await;
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        assert!(!alive(pid));
        assert_eq!(received(&rec, "shutdown").len(), 1);
        assert_eq!(received(&rec, "exit").len(), 1);
        // Ended by the protocol, not by a signal.
        assert_eq!(
            events_named(&rec, "exit"),
            [json!({ "code": 0, "reason": "exit notification" })]
        );
        assert!(events_named(&rec, "signal").is_empty());
        no_more_events(&mut rx);
    }

    #[tokio::test]
    async fn sync_document_opens_once_then_sends_full_changes() {
        let (_dir, ws) = workspace();
        let rec = ws.join("record.jsonl");
        let (result, _rx) = connect(&fake(&ws, json!({ "record": rec }))).await;
        let connection = result.unwrap();
        let uri = Url::from_file_path(ws.join("main.rs")).unwrap();
        let v1 = "fn main() {}\n";
        let v2 = "fn main() { run(); }\n";

        let started = Instant::now();
        let version = connection
            .sync_document(uri.clone(), "rust", v1.to_owned())
            .await
            .unwrap();
        assert_eq!(version, 1);
        assert!(started.elapsed() >= OPEN_DELAY, "the open delay is kept");
        eventually("didOpen arrives", || {
            received(&rec, "textDocument/didOpen").len() == 1
        })
        .await;
        assert_eq!(
            received(&rec, "textDocument/didOpen")[0]["params"]["textDocument"],
            json!({ "uri": uri, "languageId": "rust", "version": 1, "text": v1 })
        );

        // Same text: nothing to send.
        let version = connection
            .sync_document(uri.clone(), "rust", v1.to_owned())
            .await
            .unwrap();
        assert_eq!(version, 1);

        let version = connection
            .sync_document(uri.clone(), "rust", v2.to_owned())
            .await
            .unwrap();
        assert_eq!(version, 2);
        eventually("didChange arrives", || {
            received(&rec, "textDocument/didChange").len() == 1
        })
        .await;
        let change = &received(&rec, "textDocument/didChange")[0]["params"];
        assert_eq!(change["textDocument"], json!({ "uri": uri, "version": 2 }));
        assert_eq!(
            change["contentChanges"],
            json!([{ "text": v2 }]),
            "full sync"
        );
        assert_eq!(received(&rec, "textDocument/didOpen").len(), 1);
        assert_eq!(
            connection.open_documents(),
            [(uri.clone(), "rust".to_owned(), v2.to_owned())]
        );

        connection.close_document(&uri).await;
        assert!(connection.open_documents().is_empty());
        eventually("didClose arrives", || {
            received(&rec, "textDocument/didClose").len() == 1
        })
        .await;
        // Closing an unknown document sends nothing.
        connection.close_document(&uri).await;

        // Reopened: a fresh didOpen at version 1.
        let version = connection
            .sync_document(uri.clone(), "rust", v2.to_owned())
            .await
            .unwrap();
        assert_eq!(version, 1);
        eventually("the second didOpen arrives", || {
            received(&rec, "textDocument/didOpen").len() == 2
        })
        .await;
        assert_eq!(received(&rec, "textDocument/didClose").len(), 1);
        let methods: Vec<Value> = events_named(&rec, "recv")
            .into_iter()
            .map(|message| message["method"].clone())
            .filter(|method| {
                method
                    .as_str()
                    .is_some_and(|m| m.starts_with("textDocument/"))
            })
            .collect();
        assert_eq!(
            methods,
            [
                "textDocument/didOpen",
                "textDocument/didChange",
                "textDocument/didClose",
                "textDocument/didOpen"
            ]
        );
        connection.stop(SOON).await;
    }

    #[tokio::test]
    async fn requests_reach_the_server_and_errors_are_reported() {
        let (_dir, ws) = workspace();
        let (result, _rx) = connect(&fake(&ws, json!({}))).await;
        let connection = result.unwrap();
        let uri = Url::from_file_path(ws.join("lib.rs")).unwrap();
        let text = "fn main() {\n    let x = helper();\n    helper();\n}\nfn helper() {}\n";
        connection
            .sync_document(uri.clone(), "rust", text.to_owned())
            .await
            .unwrap();

        let hover = connection
            .request("textDocument/hover", position(&uri, 1, 14), SOON)
            .await
            .unwrap();
        assert_eq!(hover["contents"]["kind"], "markdown");
        let value = hover["contents"]["value"].as_str().unwrap();
        assert!(
            value.contains("word=helper") && value.contains(" v1 "),
            "{value}"
        );

        let definition = connection
            .request("textDocument/definition", position(&uri, 1, 14), SOON)
            .await
            .unwrap();
        assert_eq!(definition["uri"], uri.as_str());

        let mut references = position(&uri, 1, 14);
        references["context"] = json!({ "includeDeclaration": true });
        let references = connection
            .request("textDocument/references", references, SOON)
            .await
            .unwrap();
        let lines: Vec<u64> = references
            .as_array()
            .unwrap()
            .iter()
            .map(|location| location["range"]["start"]["line"].as_u64().unwrap())
            .collect();
        assert_eq!(lines, [1, 2, 4]);

        let symbols = connection
            .request(
                "textDocument/documentSymbol",
                json!({ "textDocument": { "uri": uri } }),
                SOON,
            )
            .await
            .unwrap();
        let names: Vec<&str> = symbols
            .as_array()
            .unwrap()
            .iter()
            .map(|symbol| symbol["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["main", "helper"]);

        let error = connection
            .request("textDocument/completion", position(&uri, 0, 0), SOON)
            .await
            .unwrap_err();
        assert!(matches!(error, LspRequestError::Server { .. }), "{error:?}");
        assert!(
            error.to_string().starts_with(
                "send textDocument/completion: the server answered with an error: method not found"
            ),
            "{error}"
        );
        // Extension methods go through async-lsp's `forward` socket Service.
        let state = connection
            .request("fake/state", Value::Null, SOON)
            .await
            .unwrap();
        assert_eq!(state["pid"], json!(connection.pid().unwrap()), "{state}");
        let error = connection
            .request("shutdown", Value::Null, SOON)
            .await
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "send shutdown: the connection handles the lifecycle itself"
        );
        connection.stop(SOON).await;
    }

    #[tokio::test]
    async fn a_request_is_bounded_and_its_late_answer_is_harmless() {
        let (_dir, ws) = workspace();
        let (result, mut rx) = connect(&fake(&ws, json!({}))).await;
        let connection = result.unwrap();
        let pid = connection.pid().unwrap();
        let uri = Url::from_file_path(ws.join("a.rs")).unwrap();
        connection
            .sync_document(uri.clone(), "rust", "fn a() {}\n".to_owned())
            .await
            .unwrap();
        signal(pid, "-STOP");
        let timeout = Duration::from_millis(300);
        let started = Instant::now();
        let error = connection
            .request("textDocument/hover", position(&uri, 0, 3), timeout)
            .await
            .unwrap_err();
        let elapsed = started.elapsed();
        signal(pid, "-CONT");
        assert!(
            matches!(error, LspRequestError::Timeout { .. }),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            "send textDocument/hover: no answer within 300ms"
        );
        assert!(
            elapsed >= timeout && elapsed < timeout + Duration::from_secs(2),
            "{elapsed:?}"
        );
        // The answer to the abandoned request arrives now and is dropped;
        // the connection goes on.
        let hover = connection
            .request("textDocument/hover", position(&uri, 0, 3), SOON)
            .await
            .unwrap();
        assert!(
            hover["contents"]["value"]
                .as_str()
                .unwrap()
                .contains("word=a")
        );
        connection.stop(SOON).await;
        assert!(!alive(pid));
        while let Ok(event) = rx.try_recv() {
            assert!(
                matches!(event, LspEvent::DiagnosticsChanged(_)),
                "{event:?}"
            );
        }
    }

    #[tokio::test]
    async fn diagnostics_are_kept_per_document_and_waited_for_after_a_sync() {
        let (_dir, ws) = workspace();
        let (result, mut rx) = connect(&fake(&ws, json!({ "diagnosticsDelayMs": 300 }))).await;
        let connection = result.unwrap();
        let uri = Url::from_file_path(ws.join("bad.rs")).unwrap();
        assert_eq!(connection.diagnostics(&uri), None);
        connection
            .sync_document(
                uri.clone(),
                "rust",
                "ok\nthis is an ERROR here\n".to_owned(),
            )
            .await
            .unwrap();
        let diagnostics = connection.wait_for_diagnostics(&uri, SOON).await.unwrap();
        assert_eq!(diagnostics.len(), 1);
        assert_eq!(diagnostics[0].range.start, lsp_types::Position::new(1, 11));
        assert_eq!(diagnostics[0].message, "fake error");
        assert_eq!(diagnostics[0].source.as_deref(), Some("fake"));
        assert_eq!(
            next_event(&mut rx).await,
            LspEvent::DiagnosticsChanged(uri.clone())
        );
        assert_eq!(connection.diagnostics(&uri).unwrap(), diagnostics);

        // After a change the old set is stale: the wait is for the new one
        // (published 300 ms later).
        connection
            .sync_document(uri.clone(), "rust", "all good\n".to_owned())
            .await
            .unwrap();
        assert_eq!(connection.diagnostics(&uri).unwrap().len(), 1, "not yet");
        let diagnostics = connection.wait_for_diagnostics(&uri, SOON).await.unwrap();
        assert!(diagnostics.is_empty(), "{diagnostics:?}");
        assert_eq!(
            next_event(&mut rx).await,
            LspEvent::DiagnosticsChanged(uri.clone())
        );

        // Nothing published for a document: the wait gives up at its bound.
        let other = Url::from_file_path(ws.join("other.rs")).unwrap();
        let started = Instant::now();
        assert_eq!(
            connection
                .wait_for_diagnostics(&other, Duration::from_millis(200))
                .await,
            None
        );
        assert!(started.elapsed() >= Duration::from_millis(200));
        connection.stop(SOON).await;
        no_more_events(&mut rx);
    }

    #[tokio::test]
    async fn server_requests_are_answered_whatever_the_id_style() {
        for style in ["number", "zero", "string"] {
            let (_dir, ws) = workspace();
            let rec = ws.join("record.jsonl");
            let mut spec = fake(
                &ws,
                json!({ "serverRequests": true, "idStyle": style, "record": rec }),
            );
            spec.settings = Some(json!({ "fake": { "level": 3 }, "other": true }));
            let (result, mut rx) = connect(&spec).await;
            let connection = result.unwrap();
            let sent_log = |text: &str| {
                events_named(&rec, "send").iter().position(|m| {
                    m["method"] == "window/logMessage" && m["params"]["message"] == text
                })
            };
            eventually("the fake got its answers", || {
                sent_log("fake: ready").is_some()
            })
            .await;
            // A log message came before the initialize answer, and did not
            // disturb the handshake.
            let sent = events_named(&rec, "send");
            let init_answer = sent
                .iter()
                .position(|m| {
                    m.get("result")
                        .is_some_and(|r| r.get("capabilities").is_some())
                })
                .unwrap();
            assert!(
                sent_log("fake: initializing").unwrap() < init_answer,
                "{style}"
            );

            let answers = [
                ("window/workDoneProgress/create", Value::Null),
                ("client/registerCapability", Value::Null),
                ("workspace/configuration", json!([{ "level": 3 }])),
            ];
            for (index, (method, expected)) in answers.into_iter().enumerate() {
                let id = sent
                    .iter()
                    .find(|m| m["method"] == method)
                    .map(|m| m["id"].clone())
                    .unwrap_or_else(|| panic!("{style}: the fake sent no {method}"));
                let expected_id = match style {
                    "zero" => json!(index),
                    "string" => json!(format!("fake-{}", index + 1)),
                    _ => json!(index + 1),
                };
                assert_eq!(id, expected_id, "{style} {method}");
                let answer = events_named(&rec, "recv")
                    .into_iter()
                    .find(|m| m.get("method").is_none() && m["id"] == id)
                    .unwrap_or_else(|| panic!("{style}: no answer to {method}"));
                assert_eq!(answer.get("error"), None, "{style} {method}: {answer}");
                assert_eq!(answer["result"], expected, "{style} {method}");
            }
            // Still serving.
            let uri = Url::from_file_path(ws.join("x.rs")).unwrap();
            let hover = connection
                .request("textDocument/hover", position(&uri, 0, 0), SOON)
                .await
                .unwrap();
            assert_eq!(hover, Value::Null, "{style}");
            connection.stop(SOON).await;
            no_more_events(&mut rx);
        }
    }

    #[tokio::test]
    async fn hang_in_initialize_times_out_and_leaves_no_process() {
        let (_dir, ws) = workspace();
        let rec = ws.join("record.jsonl");
        let mut spec = fake(&ws, json!({ "hangInInitialize": true, "record": rec }));
        spec.startup_timeout = 500;
        let started = Instant::now();
        let (result, _rx) = connect(&spec).await;
        let error = result.unwrap_err();
        assert_eq!(error.reason, Reason::StartupTimeout, "{error}");
        assert!(
            error
                .message
                .starts_with("complete the LSP handshake within 500ms: no answer to initialize"),
            "{error}"
        );
        assert!(
            error
                .to_string()
                .contains("\nfake-lsp-server fake: hanging in initialize"),
            "{error}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert!(
            !alive(recorded_pid(&rec)),
            "the server outlived its failed start"
        );
    }

    #[tokio::test]
    async fn crash_during_initialize_fails_with_the_exit_and_stderr() {
        let (_dir, ws) = workspace();
        let rec = ws.join("record.jsonl");
        let spec = fake(
            &ws,
            json!({ "initializeDelayMs": 10_000, "crashAfterMs": 100, "exitCode": 3, "record": rec }),
        );
        let (result, _rx) = connect(&spec).await;
        let error = result.unwrap_err();
        assert_eq!(error.reason, Reason::StartFailed, "{error}");
        assert!(
            error.message.starts_with(
                "start the language server: the server exited with code 3 during initialize"
            ),
            "{error}"
        );
        assert!(error.to_string().ends_with("exit 3 (crash)"), "{error}");
        assert!(!alive(recorded_pid(&rec)));
    }

    #[tokio::test]
    async fn stop_is_bounded_when_the_server_ignores_shutdown_and_sigterm() {
        let (_dir, ws) = workspace();
        let rec = ws.join("record.jsonl");
        let mut spec = fake(
            &ws,
            json!({
                "ignoreShutdown": true, "ignoreSigterm": true, "exitOnStdinClose": false,
                "record": rec,
            }),
        );
        spec.shutdown_timeout = 300;
        let (result, mut rx) = connect(&spec).await;
        let connection = result.unwrap();
        let pid = connection.pid().unwrap();
        let grace = Duration::from_millis(300);
        let started = Instant::now();
        connection.stop(grace).await;
        let elapsed = started.elapsed();
        let bound = Duration::from_millis(300) + grace;
        assert!(elapsed >= bound, "{elapsed:?}");
        assert!(elapsed < bound + Duration::from_secs(3), "{elapsed:?}");
        assert!(!alive(pid), "the server survived stop");
        assert_eq!(received(&rec, "shutdown").len(), 1);
        assert_eq!(
            events_named(&rec, "signal"),
            [json!({ "signal": "SIGTERM", "ignored": true })]
        );
        no_more_events(&mut rx);
    }

    #[tokio::test]
    async fn a_crash_after_ready_is_one_exited_event() {
        let (_dir, ws) = workspace();
        let spec = fake(&ws, json!({ "crashAfterMs": 1500, "exitCode": 7 }));
        let (result, mut rx) = connect(&spec).await;
        let connection = result.unwrap();
        let pid = connection.pid().unwrap();
        assert_eq!(
            next_exit(&mut rx).await,
            LspEvent::Exited("exited with code 7".to_owned())
        );
        assert!(!alive(pid));
        assert_eq!(
            connection.stderr_tail(1),
            ["fake-lsp-server fake: exit 7 (crash)"]
        );
        let uri = Url::from_file_path(ws.join("x.rs")).unwrap();
        let error = connection
            .sync_document(uri, "rust", String::new())
            .await
            .unwrap_err();
        assert!(matches!(error, LspRequestError::Closed { .. }), "{error:?}");
        assert_eq!(
            error.to_string(),
            "send textDocument/didOpen: the connection is closed"
        );
        let started = Instant::now();
        connection.stop(SOON).await;
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        no_more_events(&mut rx);
    }

    #[tokio::test]
    async fn dropping_a_connection_kills_its_server() {
        let (_dir, ws) = workspace();
        let (result, mut rx) = connect(&fake(&ws, json!({}))).await;
        let connection = result.unwrap();
        let pid = connection.pid().unwrap();
        drop(connection);
        eventually("the server is gone", || !alive(pid)).await;
        no_more_events(&mut rx);
    }

    #[tokio::test]
    async fn tcp_with_a_command_retries_until_the_server_listens() {
        let (_dir, ws) = workspace();
        let rec = ws.join("record.jsonl");
        let port = free_port();
        let config = json!({ "transport": "tcp", "port": port, "record": rec });
        let mut spec = spec(&ws, LspTransport::Tcp);
        // The server takes 400 ms to start listening.
        spec.command = Some("sh".to_owned());
        spec.args = vec![
            "-c".to_owned(),
            r#"sleep 0.4; exec "$0""#.to_owned(),
            fake_path(),
        ];
        spec.env = fake_env(&config);
        spec.socket = tcp_socket(port);
        let started = Instant::now();
        let (result, mut rx) = connect(&spec).await;
        let connection = result.unwrap();
        let elapsed = started.elapsed();
        assert!(elapsed >= Duration::from_millis(400), "{elapsed:?}");
        let pid = connection.pid().unwrap();
        assert_eq!(pid, recorded_pid(&rec), "sh execs the fake");
        assert_eq!(events_named(&rec, "connect").len(), 1);

        let uri = Url::from_file_path(ws.join("t.rs")).unwrap();
        connection
            .sync_document(uri.clone(), "rust", "fn t() {}\nERROR\n".to_owned())
            .await
            .unwrap();
        let diagnostics = connection.wait_for_diagnostics(&uri, SOON).await.unwrap();
        assert_eq!(diagnostics.len(), 1);

        connection.stop(SOON).await;
        assert!(!alive(pid), "an owned tcp server is stopped");
        assert_eq!(
            events_named(&rec, "exit"),
            [json!({ "code": 0, "reason": "exit notification" })]
        );
        assert_eq!(rx.try_recv(), Ok(LspEvent::DiagnosticsChanged(uri)));
        no_more_events(&mut rx);
    }

    #[tokio::test]
    async fn tcp_server_that_exits_before_listening_fails_at_once() {
        let (_dir, ws) = workspace();
        let mut spec = spec(&ws, LspTransport::Tcp);
        spec.command = Some("sh".to_owned());
        spec.args = vec!["-c".to_owned(), "echo cannot bind >&2; exit 3".to_owned()];
        spec.socket = tcp_socket(free_port());
        let started = Instant::now();
        let (result, _rx) = connect(&spec).await;
        let error = result.unwrap_err();
        assert_eq!(error.reason, Reason::StartFailed, "{error}");
        assert!(
            error.message.starts_with(
                "start the language server: the server exited with code 3 before it accepted a connection"
            ),
            "{error}"
        );
        assert!(error.to_string().ends_with("cannot bind"), "{error}");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn tcp_server_that_never_listens_times_out_and_is_stopped() {
        let (_dir, ws) = workspace();
        let pid_file = ws.join("pid");
        let port = free_port();
        let mut spec = spec(&ws, LspTransport::Tcp);
        spec.command = Some("sh".to_owned());
        spec.args = vec![
            "-c".to_owned(),
            r#"echo $$ > "$0"; exec sleep 30"#.to_owned(),
            pid_file.display().to_string(),
        ];
        spec.socket = tcp_socket(port);
        spec.startup_timeout = 700;
        let started = Instant::now();
        let (result, _rx) = connect(&spec).await;
        let error = result.unwrap_err();
        let elapsed = started.elapsed();
        assert_eq!(error.reason, Reason::StartupTimeout, "{error}");
        assert!(
            error
                .message
                .starts_with(&format!("connect to 127.0.0.1:{port} within 700ms: ")),
            "{error}"
        );
        assert!(error.message.contains("refused"), "{error}");
        assert!(elapsed >= Duration::from_millis(700), "{elapsed:?}");
        assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
        let pid: u32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(!alive(pid), "the server outlived its failed start");
    }

    #[tokio::test]
    async fn unix_socket_with_a_command() {
        let (_dir, ws) = workspace();
        let rec = ws.join("record.jsonl");
        let path = ws.join("fake.sock");
        let config = json!({ "transport": "socket", "socketPath": path, "record": rec });
        let mut spec = spec(&ws, LspTransport::Socket);
        spec.command = Some(fake_path());
        spec.env = fake_env(&config);
        spec.socket = Some(LspSocket {
            host: None,
            port: None,
            path: Some(path.display().to_string()),
        });
        let (result, mut rx) = connect(&spec).await;
        let connection = result.unwrap();
        let pid = connection.pid().unwrap();
        assert_eq!(connection.capabilities()["hoverProvider"], true);
        let uri = Url::from_file_path(ws.join("u.rs")).unwrap();
        connection
            .sync_document(uri.clone(), "rust", "fn u() {}\n".to_owned())
            .await
            .unwrap();
        let hover = connection
            .request("textDocument/hover", position(&uri, 0, 3), SOON)
            .await
            .unwrap();
        assert!(
            hover["contents"]["value"]
                .as_str()
                .unwrap()
                .contains("word=u")
        );
        connection.stop(SOON).await;
        assert!(!alive(pid));
        assert_eq!(
            events_named(&rec, "exit"),
            [json!({ "code": 0, "reason": "exit notification" })]
        );
        assert!(!path.exists(), "the fake removed its socket on exit");
        while let Ok(event) = rx.try_recv() {
            assert!(
                matches!(event, LspEvent::DiagnosticsChanged(_)),
                "{event:?}"
            );
        }
    }

    #[tokio::test]
    async fn an_external_daemon_is_only_connected_and_disconnected() {
        let (_dir, ws) = workspace();
        let rec = ws.join("record.jsonl");
        let port_file = ws.join("port");
        let config = json!({ "transport": "tcp", "portFile": port_file, "record": rec });
        let spawner = Spawner::new().unwrap();
        let mut daemon = spawner
            .spawn(&ProcessSpec {
                program: fake_path(),
                env: fake_env(&config),
                cwd: Some(ws.clone()),
                ..ProcessSpec::default()
            })
            .await
            .unwrap();
        eventually("the daemon listens", || port_file.exists()).await;
        let port: u16 = std::fs::read_to_string(&port_file)
            .unwrap()
            .parse()
            .unwrap();
        let mut spec = spec(&ws, LspTransport::Tcp);
        spec.socket = tcp_socket(port);

        let (result, mut rx) = connect(&spec).await;
        let connection = result.unwrap();
        assert_eq!(connection.pid(), None);
        assert!(connection.stderr_tail(5).is_empty());
        assert_eq!(connection.capabilities()["definitionProvider"], true);
        connection.stop(SOON).await;
        assert!(alive(daemon.pid()), "stop must not end an external daemon");
        eventually("the daemon sees the disconnect", || {
            events_named(&rec, "disconnect").len() == 1
        })
        .await;
        assert_eq!(
            received(&rec, "shutdown").len(),
            1,
            "the session is shut down"
        );
        assert!(
            received(&rec, "exit").is_empty(),
            "exit would end the daemon"
        );
        no_more_events(&mut rx);

        // The daemon takes the next session; its going away is reported.
        let (result, mut rx) = connect(&spec).await;
        let connection = result.unwrap();
        assert_eq!(events_named(&rec, "connect").len(), 2);
        daemon.stop(SOON).await;
        assert_eq!(
            next_event(&mut rx).await,
            LspEvent::Exited("closed the connection".to_owned())
        );
        let started = Instant::now();
        connection.stop(SOON).await;
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        no_more_events(&mut rx);
    }

    #[tokio::test]
    async fn an_external_daemon_that_is_not_listening_fails_without_retrying() {
        let (_dir, ws) = workspace();
        let port = free_port();
        let mut spec = spec(&ws, LspTransport::Tcp);
        spec.socket = tcp_socket(port);
        let started = Instant::now();
        let (result, _rx) = connect(&spec).await;
        let error = result.unwrap_err();
        assert_eq!(error.reason, Reason::StartFailed, "{error}");
        assert!(
            error
                .message
                .starts_with(&format!("connect to 127.0.0.1:{port}: ")),
            "{error}"
        );
        assert!(
            started.elapsed() < CONNECT_RETRY_FIRST,
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn spec_problems_fail_before_anything_starts() {
        let (_dir, ws) = workspace();
        let (result, _rx) = connect(&spec(&ws, LspTransport::Stdio)).await;
        assert_eq!(
            result.unwrap_err().message,
            "start the language server: the stdio transport needs a command"
        );
        let (result, _rx) = connect(&spec(&ws, LspTransport::Tcp)).await;
        assert_eq!(
            result.unwrap_err().message,
            "connect to the language server: the tcp transport needs socket.port"
        );
        let (result, _rx) = connect(&spec(&ws, LspTransport::Socket)).await;
        assert_eq!(
            result.unwrap_err().message,
            "connect to the language server: the socket transport needs socket.path"
        );
    }

    #[tokio::test]
    async fn missing_command_is_command_not_found() {
        let (_dir, ws) = workspace();
        let mut spec = spec(&ws, LspTransport::Stdio);
        spec.command = Some("steward-test-no-such-command".to_owned());
        let (result, _rx) = connect(&spec).await;
        let error = result.unwrap_err();
        assert_eq!(error.reason, Reason::CommandNotFound, "{error}");
        assert!(
            error.message.contains("steward-test-no-such-command"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn file_without_execute_permission_is_unsafe() {
        let (_dir, ws) = workspace();
        std::fs::write(ws.join("server"), "#!/bin/sh\n").unwrap();
        let mut spec = spec(&ws, LspTransport::Stdio);
        spec.command = Some("./server".to_owned());
        let (result, _rx) = connect(&spec).await;
        assert_eq!(result.unwrap_err().reason, Reason::UnsafeCommand);
    }

    /// Numbers, not a pass/fail test:
    /// `cargo test -p steward --lib lsp::tests::measure -- --ignored --nocapture`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "measurement"]
    async fn measure_connect_latency() {
        fn summary(mut samples: Vec<Duration>) -> String {
            samples.sort();
            format!(
                "p50 {:?} p95 {:?} max {:?}",
                samples[samples.len() / 2],
                samples[samples.len() * 95 / 100],
                samples[samples.len() - 1]
            )
        }
        let (_dir, ws) = workspace();
        let spawner = Spawner::new().unwrap();
        let measure = async |spec: &LspServerSpec| {
            let mut connects = Vec::new();
            let mut stops = Vec::new();
            for _ in 0..30 {
                let (on_event, _rx) = events();
                let started = Instant::now();
                let connection = LspConnection::connect(&spawner, "m", spec, on_event)
                    .await
                    .unwrap();
                connects.push(started.elapsed());
                let started = Instant::now();
                connection.stop(SOON).await;
                stops.push(started.elapsed());
            }
            (summary(connects), summary(stops))
        };
        let stdio = measure(&fake(&ws, json!({}))).await;
        println!("stdio (spawned): connect {}; stop {}", stdio.0, stdio.1);

        let port = free_port();
        let mut tcp = spec(&ws, LspTransport::Tcp);
        tcp.command = Some(fake_path());
        tcp.env = fake_env(&json!({ "transport": "tcp", "port": port }));
        tcp.socket = tcp_socket(port);
        let owned = measure(&tcp).await;
        println!("tcp (spawned): connect {}; stop {}", owned.0, owned.1);

        let port_file = ws.join("port");
        let mut daemon = spawner
            .spawn(&ProcessSpec {
                program: fake_path(),
                env: fake_env(&json!({ "transport": "tcp", "portFile": port_file })),
                cwd: Some(ws.clone()),
                ..ProcessSpec::default()
            })
            .await
            .unwrap();
        eventually("the daemon listens", || port_file.exists()).await;
        let port: u16 = std::fs::read_to_string(&port_file)
            .unwrap()
            .parse()
            .unwrap();
        let mut external = spec(&ws, LspTransport::Tcp);
        external.socket = tcp_socket(port);
        let external = measure(&external).await;
        println!(
            "tcp (external daemon): connect {}; stop {}",
            external.0, external.1
        );
        daemon.stop(SOON).await;
    }
}

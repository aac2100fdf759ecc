//! Fake LSP server for Steward's integration tests.
//!
//! Speaks raw LSP — JSON-RPC 2.0 framed by `Content-Length:` headers — over
//! stdio, TCP (`127.0.0.1:<port>`) or a unix socket, and behaves as the test
//! chose through a [`Config`] given as JSON in `$FAKE_LSP_CONFIG` or
//! `--config <json>` (the flag wins; other arguments are ignored, so it can be
//! started like a real server, e.g. with `--stdio`). It keeps open documents
//! in memory and answers `initialize`, `shutdown`, hover, definition,
//! implementation, references, document and workspace symbols, the call
//! hierarchy, code actions and the test hook `fake/state`, from a toy
//! language over its open documents: `fn <name>` / `def <name>` defines a
//! function whose body runs to the next definition, `impl <name>` implements
//! it, and any other occurrence of the name uses (calls) it. It publishes one
//! diagnostic per line containing `ERROR` (and serves the same ones on
//! `textDocument/diagnostic` / `workspace/diagnostic` with
//! `pullDiagnostics`), with a quick fix that replaces it; and it can hang, crash,
//! ignore `shutdown` or SIGTERM, and send the server→client requests real
//! servers send. Every message in and out, and every lifecycle event, is
//! appended to the record file (see [`fake_lsp::Record`]).
//!
//! Over tcp/socket it serves one connection at a time and accepts the next
//! one after a disconnect, like a daemon; each connection is a fresh LSP
//! session. The `exit` notification ends the process on every transport.

// The module also backs the test library, whose readers this binary does not
// use.
#[allow(dead_code)]
#[path = "../fake_lsp.rs"]
mod fake_lsp;

use std::collections::{BTreeMap, VecDeque};
use std::io::Write as _;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use fake_lsp::{CONFIG_ENV, Config, Event, IdStyle, Record, Transport};
use serde_json::{Map, Value, json};
use tokio::io::{
    AsyncBufReadExt as _, AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, BufReader,
};
use tokio::net::{TcpListener, UnixListener};
use tokio::signal::unix::{SignalKind, signal};
use tokio::task::JoinSet;

type BoxRead = Box<dyn AsyncRead + Unpin + Send>;
type BoxWrite = Box<dyn AsyncWrite + Unpin + Send>;

/// JSON-RPC / LSP error codes.
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_REQUEST: i64 = -32600;
const PARSE_ERROR: i64 = -32700;
const SERVER_NOT_INITIALIZED: i64 = -32002;

fn main() -> ExitCode {
    let (config, args) = match load_config() {
        Ok(loaded) => loaded,
        Err(err) => {
            eprintln!("fake-lsp-server: {err:#}");
            return ExitCode::from(2);
        }
    };
    if let Some(path) = &config.record {
        match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            Ok(file) => {
                let _ = RECORD.set(Mutex::new(file));
            }
            Err(err) => {
                eprintln!(
                    "fake-lsp-server: cannot open record file {}: {err}",
                    path.display()
                );
                return ExitCode::from(2);
            }
        }
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("build tokio runtime");
    let termination = runtime.block_on(run(&config, args));
    finish(&config, termination)
}

/// Reads the config from `--config <json>` / `--config=<json>`, else from
/// `$FAKE_LSP_CONFIG`, else uses the defaults. Returns it with the arguments.
fn load_config() -> anyhow::Result<(Config, Vec<String>)> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut from_flag = None;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == "--config" {
            from_flag = Some(rest.next().context("--config needs a JSON value")?.clone());
        } else if let Some(value) = arg.strip_prefix("--config=") {
            from_flag = Some(value.to_owned());
        }
    }
    let text = match from_flag {
        Some(text) => Some(text),
        None => std::env::var(CONFIG_ENV).ok(),
    };
    let config: Config = match text {
        Some(text) if !text.trim().is_empty() => {
            serde_json::from_str(&text).with_context(|| format!("invalid config {text}"))?
        }
        _ => Config::default(),
    };
    if config.transport == Transport::Socket && config.socket_path.is_none() {
        bail!("transport \"socket\" needs socketPath");
    }
    Ok((config, args))
}

static RECORD: OnceLock<Mutex<std::fs::File>> = OnceLock::new();

/// Appends one event to the record file, if there is one. Each line goes to
/// the kernel in one `write` on an `O_APPEND` file, so a reader never sees
/// lines of two processes interleaved.
fn record(event: Event, message: Value) {
    let Some(file) = RECORD.get() else { return };
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let entry = Record {
        t,
        pid: std::process::id(),
        event,
        message,
    };
    let mut line = serde_json::to_vec(&entry).expect("record serializes");
    line.push(b'\n');
    let mut file = file.lock().unwrap_or_else(PoisonError::into_inner);
    if let Err(err) = file.write_all(&line) {
        eprintln!("fake-lsp-server: cannot write record: {err}");
    }
}

/// How the process ends.
enum Termination {
    Code { code: i32, reason: String },
    Sigterm,
}

impl Termination {
    fn code(code: i32, reason: impl Into<String>) -> Self {
        Self::Code {
            code,
            reason: reason.into(),
        }
    }
}

fn finish(config: &Config, termination: Termination) -> ExitCode {
    if config.transport == Transport::Socket
        && let Some(path) = &config.socket_path
    {
        let _ = std::fs::remove_file(path);
    }
    match termination {
        Termination::Code { code, reason } => {
            record(Event::Exit, json!({ "code": code, "reason": reason }));
            eprintln!("fake-lsp-server {}: exit {code} ({reason})", config.name);
            // `ExitCode` only carries a u8; exit directly to keep any i32.
            std::process::exit(code)
        }
        Termination::Sigterm => {
            record(
                Event::Exit,
                json!({ "signal": "SIGTERM", "reason": "sigterm" }),
            );
            die_by_sigterm()
        }
    }
}

/// Terminates the process by SIGTERM, as a server without a handler would,
/// so the parent sees "killed by signal 15" rather than an exit code.
#[allow(unsafe_code)]
fn die_by_sigterm() -> ! {
    // SAFETY: `signal` and `raise` take plain integers and have no memory
    // preconditions; restoring the default disposition drops tokio's handler,
    // which this process no longer needs because it is about to die.
    unsafe {
        libc::signal(libc::SIGTERM, libc::SIG_DFL);
        libc::raise(libc::SIGTERM);
    }
    std::process::exit(128 + libc::SIGTERM)
}

async fn run(config: &Config, args: Vec<String>) -> Termination {
    let mut sigterm = match signal(SignalKind::terminate()) {
        Ok(sigterm) => sigterm,
        Err(err) => return Termination::code(2, format!("cannot handle SIGTERM: {err}")),
    };
    let env: Map<String, Value> = config
        .record_env
        .iter()
        .map(|name| {
            (
                name.clone(),
                std::env::var(name).map_or(Value::Null, Value::String),
            )
        })
        .collect();
    record(
        Event::Start,
        json!({
            "name": config.name,
            "args": args,
            "cwd": std::env::current_dir().ok(),
            "config": config,
            "env": env,
        }),
    );
    eprintln!(
        "fake-lsp-server {}: started (pid {}, {:?})",
        config.name,
        std::process::id(),
        config.transport
    );

    let config = Arc::new(config.clone());
    let crash = async {
        match config.crash_after_ms {
            Some(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
            None => std::future::pending().await,
        }
    };
    let serve = serve(config.clone());
    tokio::pin!(crash, serve);
    loop {
        tokio::select! {
            served = &mut serve => {
                return served.unwrap_or_else(|err| Termination::code(2, format!("{err:#}")));
            }
            () = &mut crash => {
                eprintln!("fake-lsp-server {}: crashing as configured", config.name);
                return Termination::code(config.exit_code, "crash");
            }
            _ = sigterm.recv() => {
                record(Event::Signal, json!({ "signal": "SIGTERM", "ignored": config.ignore_sigterm }));
                if !config.ignore_sigterm {
                    return Termination::Sigterm;
                }
                eprintln!("fake-lsp-server {}: ignoring SIGTERM", config.name);
            }
        }
    }
}

async fn serve(config: Arc<Config>) -> anyhow::Result<Termination> {
    let listener = match config.transport {
        Transport::Stdio => {
            let reader: BoxRead = Box::new(tokio::io::stdin());
            let writer = Writer::new(Box::new(tokio::io::stdout()));
            match Session::new(config.clone(), writer, 1).run(reader).await {
                SessionEnd::Terminate(termination) => return Ok(termination),
                SessionEnd::Closed => {
                    record(Event::Disconnect, json!({ "connection": 1 }));
                    if config.exit_on_stdin_close {
                        return Ok(Termination::code(
                            config.exit_code_on_stdin_close,
                            "stdin-closed",
                        ));
                    }
                    // Live on until a signal or `crashAfterMs` ends the process.
                    return std::future::pending().await;
                }
            }
        }
        Transport::Tcp => {
            let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, config.port))
                .await
                .with_context(|| format!("bind 127.0.0.1:{}", config.port))?;
            let port = listener.local_addr()?.port();
            if let Some(path) = &config.port_file {
                write_atomically(path, &port.to_string())?;
            }
            record(
                Event::Listening,
                json!({ "transport": "tcp", "port": port }),
            );
            Listener::Tcp(listener)
        }
        Transport::Socket => {
            let path = config
                .socket_path
                .as_deref()
                .context("socketPath missing")?;
            // A previous instance killed by SIGKILL leaves its socket file behind.
            match std::fs::remove_file(path) {
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                    return Err(err).with_context(|| format!("remove stale {}", path.display()));
                }
                _ => {}
            }
            let listener =
                UnixListener::bind(path).with_context(|| format!("bind {}", path.display()))?;
            record(
                Event::Listening,
                json!({ "transport": "socket", "path": path }),
            );
            Listener::Unix(listener)
        }
    };
    let mut connection = 0;
    loop {
        let (reader, writer) = listener.accept().await.context("accept")?;
        connection += 1;
        record(Event::Connect, json!({ "connection": connection }));
        match Session::new(config.clone(), Writer::new(writer), connection)
            .run(reader)
            .await
        {
            SessionEnd::Terminate(termination) => return Ok(termination),
            SessionEnd::Closed => {
                record(Event::Disconnect, json!({ "connection": connection }));
                if config.exit_on_disconnect {
                    return Ok(Termination::code(
                        config.exit_code_on_stdin_close,
                        "disconnected",
                    ));
                }
            }
        }
    }
}

/// Writes via a temporary file and a rename, so a polling reader never sees
/// a partial port number.
fn write_atomically(path: &Path, contents: &str) -> anyhow::Result<()> {
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    std::fs::write(&tmp, contents).with_context(|| format!("write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("rename to {}", path.display()))
}

enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

impl Listener {
    async fn accept(&self) -> std::io::Result<(BoxRead, BoxWrite)> {
        match self {
            Self::Tcp(listener) => {
                let (stream, _) = listener.accept().await?;
                let (reader, writer) = stream.into_split();
                Ok((Box::new(reader), Box::new(writer)))
            }
            Self::Unix(listener) => {
                let (stream, _) = listener.accept().await?;
                let (reader, writer) = stream.into_split();
                Ok((Box::new(reader), Box::new(writer)))
            }
        }
    }
}

/// The write half of a connection, shared with delayed-diagnostics tasks.
#[derive(Clone)]
struct Writer(Arc<tokio::sync::Mutex<BoxWrite>>);

impl Writer {
    fn new(inner: BoxWrite) -> Self {
        Self(Arc::new(tokio::sync::Mutex::new(inner)))
    }

    async fn send(&self, message: Value) -> std::io::Result<()> {
        let body = serde_json::to_vec(&message)?;
        let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        frame.extend_from_slice(&body);
        let mut inner = self.0.lock().await;
        inner.write_all(&frame).await?;
        inner.flush().await?;
        record(Event::Send, message);
        Ok(())
    }
}

enum Frame {
    Message(Value),
    /// A well-framed body that is not JSON.
    Garbage,
}

/// The read half of a connection: `Content-Length` framing.
struct FrameReader(BufReader<BoxRead>);

impl FrameReader {
    /// The next frame, or `None` at a clean end of stream.
    async fn next(&mut self) -> std::io::Result<Option<Frame>> {
        use std::io::{Error, ErrorKind};
        let mut content_length = None;
        let mut saw_header = false;
        loop {
            let mut line = String::new();
            if self.0.read_line(&mut line).await? == 0 {
                return if saw_header {
                    Err(Error::new(
                        ErrorKind::UnexpectedEof,
                        "stream closed inside a header",
                    ))
                } else {
                    Ok(None)
                };
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if saw_header {
                    break;
                }
                continue;
            }
            saw_header = true;
            let (name, value) = line.split_once(':').ok_or_else(|| {
                Error::new(ErrorKind::InvalidData, format!("bad header line {line:?}"))
            })?;
            if name.trim().eq_ignore_ascii_case("content-length") {
                let length = value.trim().parse::<usize>().map_err(|err| {
                    Error::new(ErrorKind::InvalidData, format!("bad Content-Length: {err}"))
                })?;
                content_length = Some(length);
            }
        }
        let length = content_length
            .ok_or_else(|| Error::new(ErrorKind::InvalidData, "no Content-Length header"))?;
        let mut body = vec![0; length];
        self.0.read_exact(&mut body).await?;
        match serde_json::from_slice::<Value>(&body) {
            Ok(message) => {
                record(Event::Recv, message.clone());
                Ok(Some(Frame::Message(message)))
            }
            Err(_) => {
                record(
                    Event::Recv,
                    json!({ "raw": String::from_utf8_lossy(&body) }),
                );
                Ok(Some(Frame::Garbage))
            }
        }
    }
}

enum SessionEnd {
    /// The client's stream closed (or broke) without `exit`.
    Closed,
    /// The session ends the process (the `exit` notification).
    Terminate(Termination),
}

struct Document {
    language_id: String,
    version: i64,
    text: String,
    opened: tokio::time::Instant,
}

/// One LSP session: from a connection's first byte to its close or `exit`.
struct Session {
    config: Arc<Config>,
    out: Writer,
    connection: u64,
    initialize_received: bool,
    /// `initialize` was answered: requests other than it are served.
    initialized: bool,
    shutdown: bool,
    /// `hangInInitialize` struck: every later message is dropped.
    hung: bool,
    docs: BTreeMap<String, Document>,
    settings: Value,
    initialization_options: Value,
    root_uri: Value,
    workspace_folders: Value,
    next_request_id: u64,
    /// The client's answers to our requests, by method.
    answers: Map<String, Value>,
    /// Messages that arrived while we waited for an answer, handled after it.
    deferred: VecDeque<Value>,
    /// Delayed diagnostics; dropping the session aborts them.
    tasks: JoinSet<()>,
}

impl Session {
    fn new(config: Arc<Config>, out: Writer, connection: u64) -> Self {
        let next_request_id = if config.id_style == IdStyle::Zero {
            0
        } else {
            1
        };
        Self {
            config,
            out,
            connection,
            initialize_received: false,
            initialized: false,
            shutdown: false,
            hung: false,
            docs: BTreeMap::new(),
            settings: Value::Null,
            initialization_options: Value::Null,
            root_uri: Value::Null,
            workspace_folders: Value::Null,
            next_request_id,
            answers: Map::new(),
            deferred: VecDeque::new(),
            tasks: JoinSet::new(),
        }
    }

    async fn run(mut self, reader: BoxRead) -> SessionEnd {
        let mut reader = FrameReader(BufReader::new(reader));
        loop {
            let message = match self.deferred.pop_front() {
                Some(message) => message,
                None => match reader.next().await {
                    Ok(Some(Frame::Message(message))) => message,
                    Ok(Some(Frame::Garbage)) => {
                        if self
                            .error(Value::Null, PARSE_ERROR, "parse error")
                            .await
                            .is_err()
                        {
                            return SessionEnd::Closed;
                        }
                        continue;
                    }
                    Ok(None) => return SessionEnd::Closed,
                    Err(err) => {
                        eprintln!("fake-lsp-server {}: read: {err}", self.config.name);
                        return SessionEnd::Closed;
                    }
                },
            };
            match self.handle(message, &mut reader).await {
                Ok(None) => {}
                Ok(Some(termination)) => return SessionEnd::Terminate(termination),
                Err(err) => {
                    eprintln!("fake-lsp-server {}: connection: {err}", self.config.name);
                    return SessionEnd::Closed;
                }
            }
        }
    }

    async fn handle(
        &mut self,
        message: Value,
        reader: &mut FrameReader,
    ) -> std::io::Result<Option<Termination>> {
        if self.hung {
            return Ok(None);
        }
        let method = message.get("method").and_then(Value::as_str);
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        match (method, message.get("id")) {
            (Some(method), Some(id)) => {
                let (method, id) = (method.to_owned(), id.clone());
                self.request(&method, id, params).await?;
                Ok(None)
            }
            (Some(method), None) => {
                let method = method.to_owned();
                self.notification(&method, params, reader).await
            }
            (None, Some(id)) => {
                eprintln!(
                    "fake-lsp-server {}: unexpected response id {id}",
                    self.config.name
                );
                Ok(None)
            }
            (None, None) => {
                self.error(
                    Value::Null,
                    INVALID_REQUEST,
                    "neither a request nor a notification",
                )
                .await?;
                Ok(None)
            }
        }
    }

    async fn request(&mut self, method: &str, id: Value, params: Value) -> std::io::Result<()> {
        match method {
            "fake/state" => return self.respond(id, self.state()).await,
            "initialize" => return self.initialize(id, params).await,
            _ if !self.initialized => {
                return self
                    .error(id, SERVER_NOT_INITIALIZED, "server not initialized")
                    .await;
            }
            _ if self.shutdown => {
                return self
                    .error(id, INVALID_REQUEST, "server is shutting down")
                    .await;
            }
            _ => {}
        }
        let warming = params["textDocument"]["uri"]
            .as_str()
            .and_then(|uri| self.docs.get(uri))
            .is_some_and(|d| d.opened.elapsed() < Duration::from_millis(self.config.warmup_ms));
        let result = match method {
            "textDocument/hover"
            | "textDocument/definition"
            | "textDocument/implementation"
            | "textDocument/references"
            | "textDocument/documentSymbol"
            | "textDocument/prepareCallHierarchy"
                if warming =>
            {
                Value::Null
            }
            "shutdown" => {
                if self.config.ignore_shutdown {
                    eprintln!("fake-lsp-server {}: ignoring shutdown", self.config.name);
                    return Ok(());
                }
                self.shutdown = true;
                Value::Null
            }
            "textDocument/hover" => {
                if self.config.hover_delay_ms > 0 {
                    tokio::time::sleep(Duration::from_millis(self.config.hover_delay_ms)).await;
                }
                self.hover(&params)
            }
            "textDocument/definition" => self.definition(&params),
            "textDocument/references" => self.references(&params),
            "textDocument/documentSymbol" => self.document_symbols(&params),
            "textDocument/implementation" => self.implementation(&params),
            "workspace/symbol" => self.workspace_symbols(&params),
            "textDocument/prepareCallHierarchy" => self.prepare_call_hierarchy(&params),
            "callHierarchy/incomingCalls" => self.incoming_calls(&params),
            "callHierarchy/outgoingCalls" => self.outgoing_calls(&params),
            "textDocument/codeAction" => self.code_actions(&params),
            "textDocument/diagnostic" if self.config.pull_diagnostics => {
                self.document_diagnostic(&params)
            }
            "workspace/diagnostic" if self.config.pull_diagnostics => self.workspace_diagnostic(),
            _ => {
                return self
                    .error(id, METHOD_NOT_FOUND, &format!("method not found: {method}"))
                    .await;
            }
        };
        self.respond(id, result).await
    }

    async fn initialize(&mut self, id: Value, params: Value) -> std::io::Result<()> {
        if self.initialize_received {
            return self
                .error(id, INVALID_REQUEST, "initialize was already received")
                .await;
        }
        self.initialize_received = true;
        self.initialization_options = params
            .get("initializationOptions")
            .cloned()
            .unwrap_or(Value::Null);
        self.root_uri = params.get("rootUri").cloned().unwrap_or(Value::Null);
        self.workspace_folders = params
            .get("workspaceFolders")
            .cloned()
            .unwrap_or(Value::Null);
        if self.config.hang_in_initialize {
            eprintln!(
                "fake-lsp-server {}: hanging in initialize",
                self.config.name
            );
            self.hung = true;
            return Ok(());
        }
        if self.config.server_requests {
            // Real servers log before they answer initialize.
            self.notify(
                "window/logMessage",
                json!({ "type": 3, "message": "fake: initializing" }),
            )
            .await?;
        }
        if self.config.initialize_delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(self.config.initialize_delay_ms)).await;
        }
        self.initialized = true;
        let mut result = json!({
            "capabilities": {
                "textDocumentSync": { "openClose": true, "change": 1 },
                "hoverProvider": true,
                "definitionProvider": true,
                "implementationProvider": true,
                "referencesProvider": true,
                "documentSymbolProvider": true,
                "workspaceSymbolProvider": true,
                "callHierarchyProvider": true,
                "codeActionProvider": { "codeActionKinds": ["quickfix", "refactor.rewrite"] },
            },
            "serverInfo": { "name": self.config.name, "version": env!("CARGO_PKG_VERSION") },
        });
        if self.config.pull_diagnostics {
            result["capabilities"]["diagnosticProvider"] =
                json!({ "interFileDependencies": false, "workspaceDiagnostics": true });
        }
        self.respond(id, result).await
    }

    async fn notification(
        &mut self,
        method: &str,
        params: Value,
        reader: &mut FrameReader,
    ) -> std::io::Result<Option<Termination>> {
        if method == "exit" {
            if self.config.ignore_shutdown {
                eprintln!("fake-lsp-server {}: ignoring exit", self.config.name);
                return Ok(None);
            }
            // The LSP rule: 0 after shutdown, 1 otherwise.
            let code = if self.shutdown { 0 } else { 1 };
            return Ok(Some(Termination::code(code, "exit notification")));
        }
        // Notifications before initialize is answered, or after shutdown, are dropped.
        if !self.initialized || self.shutdown {
            return Ok(None);
        }
        match method {
            "initialized" if self.config.server_requests => self.server_requests(reader).await?,
            "textDocument/didOpen" => {
                let doc = &params["textDocument"];
                let Some(uri) = doc["uri"].as_str() else {
                    return Ok(None);
                };
                let document = Document {
                    language_id: doc["languageId"].as_str().unwrap_or_default().to_owned(),
                    version: doc["version"].as_i64().unwrap_or_default(),
                    text: doc["text"].as_str().unwrap_or_default().to_owned(),
                    opened: tokio::time::Instant::now(),
                };
                self.docs.insert(uri.to_owned(), document);
                self.publish_diagnostics(uri).await?;
            }
            "textDocument/didChange" => {
                let Some(uri) = params["textDocument"]["uri"].as_str() else {
                    return Ok(None);
                };
                let Some(document) = self.docs.get_mut(uri) else {
                    eprintln!(
                        "fake-lsp-server {}: didChange for unopened {uri}",
                        self.config.name
                    );
                    return Ok(None);
                };
                document.version = params["textDocument"]["version"]
                    .as_i64()
                    .unwrap_or(document.version);
                for change in params["contentChanges"].as_array().into_iter().flatten() {
                    if change.get("range").is_some() {
                        // We advertise full sync; the record shows the offending message.
                        eprintln!("fake-lsp-server: ignoring an incremental change to {uri}");
                    } else if let Some(text) = change["text"].as_str() {
                        document.text = text.to_owned();
                    }
                }
                self.publish_diagnostics(uri).await?;
            }
            "textDocument/didClose" => {
                if let Some(uri) = params["textDocument"]["uri"].as_str() {
                    self.docs.remove(uri);
                }
            }
            "workspace/didChangeConfiguration" => {
                self.settings = params.get("settings").cloned().unwrap_or(Value::Null);
            }
            // Anything else (`$/cancelRequest`, `$/setTrace`, ...) is ignored.
            _ => {}
        }
        Ok(None)
    }

    /// The server→client traffic real servers start with after `initialized`.
    async fn server_requests(&mut self, reader: &mut FrameReader) -> std::io::Result<()> {
        let token = format!("fake-progress-{}", self.connection);
        self.ask(
            reader,
            "window/workDoneProgress/create",
            json!({ "token": token }),
        )
        .await?;
        self.notify(
            "$/progress",
            json!({ "token": token, "value": { "kind": "begin", "title": "fake indexing", "percentage": 0 } }),
        )
        .await?;
        let registration = json!({
            "registrations": [{
                "id": "fake-watched-files",
                "method": "workspace/didChangeWatchedFiles",
                "registerOptions": { "watchers": [{ "globPattern": "**/*" }] },
            }]
        });
        self.ask(reader, "client/registerCapability", registration)
            .await?;
        self.ask(
            reader,
            "workspace/configuration",
            json!({ "items": [{ "section": "fake" }] }),
        )
        .await?;
        self.notify(
            "$/progress",
            json!({ "token": token, "value": { "kind": "end", "message": "indexed" } }),
        )
        .await?;
        self.notify(
            "window/logMessage",
            json!({ "type": 3, "message": "fake: ready" }),
        )
        .await
    }

    /// Sends a request to the client and waits for its answer; whatever else
    /// arrives meanwhile is deferred until after it.
    async fn ask(
        &mut self,
        reader: &mut FrameReader,
        method: &str,
        params: Value,
    ) -> std::io::Result<()> {
        let id = match self.config.id_style {
            IdStyle::String => json!(format!("fake-{}", self.next_request_id)),
            IdStyle::Number | IdStyle::Zero => json!(self.next_request_id),
        };
        self.next_request_id += 1;
        self.out
            .send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
            .await?;
        loop {
            let message = match reader.next().await? {
                Some(Frame::Message(message)) => message,
                Some(Frame::Garbage) => {
                    self.error(Value::Null, PARSE_ERROR, "parse error").await?;
                    continue;
                }
                None => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        format!("stream closed while waiting for the answer to {method}"),
                    ));
                }
            };
            if message.get("method").is_none() && message.get("id") == Some(&id) {
                let answer = match message.get("error") {
                    Some(error) => json!({ "error": error }),
                    None => {
                        json!({ "result": message.get("result").cloned().unwrap_or(Value::Null) })
                    }
                };
                self.answers.insert(method.to_owned(), answer);
                return Ok(());
            }
            self.deferred.push_back(message);
        }
    }

    async fn respond(&self, id: Value, result: Value) -> std::io::Result<()> {
        self.out
            .send(json!({ "jsonrpc": "2.0", "id": id, "result": result }))
            .await
    }

    async fn error(&self, id: Value, code: i64, message: &str) -> std::io::Result<()> {
        self.out
            .send(json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } }))
            .await
    }

    async fn notify(&self, method: &str, params: Value) -> std::io::Result<()> {
        self.out
            .send(json!({ "jsonrpc": "2.0", "method": method, "params": params }))
            .await
    }

    /// One diagnostic per line containing `ERROR`, now or after
    /// `diagnosticsDelayMs` (computed from the text as it is now).
    async fn publish_diagnostics(&mut self, uri: &str) -> std::io::Result<()> {
        let Some(document) = self.docs.get(uri) else {
            return Ok(());
        };
        let diagnostics = self.diagnostics_of(document);
        let message = json!({
            "jsonrpc": "2.0",
            "method": "textDocument/publishDiagnostics",
            "params": { "uri": uri, "version": document.version, "diagnostics": diagnostics },
        });
        let delay = self.config.diagnostics_delay_ms;
        if delay == 0 {
            return self.out.send(message).await;
        }
        while self.tasks.try_join_next().is_some() {}
        let out = self.out.clone();
        self.tasks.spawn(async move {
            tokio::time::sleep(Duration::from_millis(delay)).await;
            let _ = out.send(message).await;
        });
        Ok(())
    }

    /// The open document and the position a `TextDocumentPositionParams` names.
    fn position<'a>(&'a self, params: &Value) -> Option<(&'a str, &'a Document, usize, usize)> {
        let uri = params["textDocument"]["uri"].as_str()?;
        let (uri, document) = self.docs.get_key_value(uri)?;
        let line = params["position"]["line"].as_u64().unwrap_or_default() as usize;
        let character = params["position"]["character"].as_u64().unwrap_or_default() as usize;
        Some((uri, document, line, character))
    }

    fn hover(&self, params: &Value) -> Value {
        let Some((uri, document, line, character)) = self.position(params) else {
            return Value::Null;
        };
        let word = lines(&document.text)
            .nth(line)
            .and_then(|text| word_at(text, character));
        let value = format!(
            "fake-hover {} {uri} {line}:{character} v{} word={}",
            self.config.name,
            document.version,
            word.as_ref().map_or("", |w| w.text.as_str()),
        );
        let mut hover = json!({ "contents": { "kind": "markdown", "value": value } });
        if let Some(word) = word {
            hover["range"] = range(line, word.start, line, word.end);
        }
        hover
    }

    /// The name of the function defined by `fn <name>` / `def <name>` in an
    /// open document, else the document's start.
    fn definition(&self, params: &Value) -> Value {
        let Some((uri, document, line, character)) = self.position(params) else {
            return Value::Null;
        };
        let word = lines(&document.text)
            .nth(line)
            .and_then(|text| word_at(text, character));
        match word.and_then(|w| self.function(&w.text)) {
            Some(function) => json!({ "uri": function.uri, "range": function.selection }),
            None => json!({ "uri": uri, "range": range(0, 0, 0, 0) }),
        }
    }

    /// Every `impl <name>` line of the open documents, for the name under
    /// the cursor.
    fn implementation(&self, params: &Value) -> Value {
        let Some((_, document, line, character)) = self.position(params) else {
            return Value::Null;
        };
        let Some(target) = lines(&document.text)
            .nth(line)
            .and_then(|text| word_at(text, character))
        else {
            return json!([]);
        };
        let mut found = Vec::new();
        for (uri, document) in &self.docs {
            for (number, text) in lines(&document.text).enumerate() {
                let all = words(text);
                for pair in all.windows(2) {
                    if pair[0].text == "impl" && pair[1].text == target.text {
                        found.push(json!({
                            "uri": uri,
                            "range": range(number, pair[1].start, number, pair[1].end),
                        }));
                    }
                }
            }
        }
        json!(found)
    }

    /// `SymbolInformation` for every function whose name contains the query
    /// (case-insensitive), across the open documents.
    fn workspace_symbols(&self, params: &Value) -> Value {
        let query = params["query"].as_str().unwrap_or_default().to_lowercase();
        let found: Vec<Value> = self
            .functions()
            .into_iter()
            .filter(|f| f.name.to_lowercase().contains(&query))
            .map(|f| {
                json!({
                    "name": f.name,
                    "kind": 12,
                    "location": { "uri": f.uri, "range": f.selection },
                    "containerName": "fake",
                })
            })
            .collect();
        json!(found)
    }

    fn prepare_call_hierarchy(&self, params: &Value) -> Value {
        let Some((_, document, line, character)) = self.position(params) else {
            return Value::Null;
        };
        let word = lines(&document.text)
            .nth(line)
            .and_then(|text| word_at(text, character));
        match word.and_then(|w| self.function(&w.text)) {
            Some(function) => json!([function.item()]),
            None => json!([]),
        }
    }

    /// Every function whose body uses the item's name.
    fn incoming_calls(&self, params: &Value) -> Value {
        let Some(target) = params["item"]["name"].as_str() else {
            return Value::Null;
        };
        let calls: Vec<Value> = self
            .functions()
            .into_iter()
            .filter_map(|caller| {
                let ranges = self.uses_in_body(&caller, target);
                (!ranges.is_empty()).then(|| json!({ "from": caller.item(), "fromRanges": ranges }))
            })
            .collect();
        json!(calls)
    }

    /// Every function the item's body uses.
    fn outgoing_calls(&self, params: &Value) -> Value {
        let Some(caller) = params["item"]["name"]
            .as_str()
            .and_then(|name| self.function(name))
        else {
            return Value::Null;
        };
        let calls: Vec<Value> = self
            .functions()
            .into_iter()
            .filter_map(|callee| {
                let ranges = self.uses_in_body(&caller, &callee.name);
                (!ranges.is_empty()).then(|| json!({ "to": callee.item(), "fromRanges": ranges }))
            })
            .collect();
        json!(calls)
    }

    /// A quick fix ("ERROR" → "OK") per diagnostic of the context, and a
    /// `refactor.rewrite` that upper-cases the range's first line; filtered
    /// by `context.only` (kind prefixes).
    fn code_actions(&self, params: &Value) -> Value {
        let Some(uri) = params["textDocument"]["uri"].as_str() else {
            return Value::Null;
        };
        let mut actions: Vec<Value> = params["context"]["diagnostics"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|diagnostic| {
                json!({
                    "title": "Replace ERROR with OK",
                    "kind": "quickfix",
                    "isPreferred": true,
                    "diagnostics": [diagnostic],
                    "edit": { "changes": { uri: [{ "range": diagnostic["range"], "newText": "OK" }] } },
                })
            })
            .collect();
        let start = params["range"]["start"]["line"].as_u64().unwrap_or(0);
        actions.push(json!({
            "title": "Shout this line",
            "kind": "refactor.rewrite",
            "command": { "title": "Shout", "command": "fake.shout", "arguments": [uri, start] },
        }));
        if let Some(only) = params["context"]["only"].as_array() {
            actions.retain(|action| {
                let kind = action["kind"].as_str().unwrap_or_default();
                only.iter()
                    .filter_map(Value::as_str)
                    .any(|prefix| kind == prefix || kind.starts_with(&format!("{prefix}.")))
            });
        }
        json!(actions)
    }

    fn document_diagnostic(&self, params: &Value) -> Value {
        let items = params["textDocument"]["uri"]
            .as_str()
            .and_then(|uri| self.docs.get(uri))
            .map(|document| self.diagnostics_of(document))
            .unwrap_or_default();
        json!({ "kind": "full", "items": items })
    }

    fn workspace_diagnostic(&self) -> Value {
        let items: Vec<Value> = self
            .docs
            .iter()
            .map(|(uri, document)| {
                json!({
                    "kind": "full",
                    "uri": uri,
                    "version": document.version,
                    "items": self.diagnostics_of(document),
                })
            })
            .collect();
        json!({ "items": items })
    }

    /// One error per line containing `ERROR`.
    fn diagnostics_of(&self, document: &Document) -> Vec<Value> {
        lines(&document.text)
            .enumerate()
            .filter_map(|(number, line)| {
                let start = utf16_len(&line[..line.find("ERROR")?]);
                Some(json!({
                    "range": range(number, start, number, start + 5),
                    "severity": 1,
                    "source": self.config.name,
                    "code": "E1",
                    "message": "fake error",
                }))
            })
            .collect()
    }

    /// Every function defined in the open documents, in document order.
    fn functions(&self) -> Vec<Function> {
        let mut found = Vec::new();
        for (uri, document) in &self.docs {
            let all: Vec<&str> = lines(&document.text).collect();
            let heads: Vec<(usize, Word)> = all
                .iter()
                .enumerate()
                .filter_map(|(number, text)| function_name(text).map(|name| (number, name)))
                .collect();
            for (index, (number, name)) in heads.iter().enumerate() {
                let end = heads.get(index + 1).map_or(all.len(), |(next, _)| *next);
                let last = end.saturating_sub(1).max(*number);
                found.push(Function {
                    uri: uri.clone(),
                    name: name.text.clone(),
                    line: *number,
                    end: end.max(number + 1),
                    range: range(*number, 0, last, utf16_len(all[last])),
                    selection: range(*number, name.start, *number, name.end),
                });
            }
        }
        found
    }

    fn function(&self, name: &str) -> Option<Function> {
        self.functions().into_iter().find(|f| f.name == name)
    }

    /// Where `function`'s body (the lines after its definition) uses `name`.
    fn uses_in_body(&self, function: &Function, name: &str) -> Vec<Value> {
        let Some(document) = self.docs.get(&function.uri) else {
            return Vec::new();
        };
        lines(&document.text)
            .enumerate()
            .take(function.end)
            .skip(function.line + 1)
            .flat_map(|(number, text)| {
                words(text)
                    .into_iter()
                    .filter(|w| w.text == name)
                    .map(move |w| range(number, w.start, number, w.end))
            })
            .collect()
    }

    fn references(&self, params: &Value) -> Value {
        let Some((uri, document, line, character)) = self.position(params) else {
            return Value::Null;
        };
        let Some(target) = lines(&document.text)
            .nth(line)
            .and_then(|text| word_at(text, character))
        else {
            return json!([]);
        };
        let locations: Vec<Value> = lines(&document.text)
            .enumerate()
            .flat_map(|(number, text)| {
                words(text)
                    .into_iter()
                    .filter(|word| word.text == target.text)
                    .map(move |word| json!({ "uri": uri, "range": range(number, word.start, number, word.end) }))
            })
            .collect();
        json!(locations)
    }

    fn document_symbols(&self, params: &Value) -> Value {
        let Some(document) = params["textDocument"]["uri"]
            .as_str()
            .and_then(|uri| self.docs.get(uri))
        else {
            return Value::Null;
        };
        let symbols: Vec<Value> = lines(&document.text)
            .enumerate()
            .filter_map(|(number, text)| {
                let name = function_name(text)?;
                Some(json!({
                    "name": name.text,
                    "kind": 12, // Function
                    "range": range(number, 0, number, utf16_len(text)),
                    "selectionRange": range(number, name.start, number, name.end),
                }))
            })
            .collect();
        json!(symbols)
    }

    fn state(&self) -> Value {
        let documents: Vec<Value> = self
            .docs
            .iter()
            .map(|(uri, doc)| {
                json!({ "uri": uri, "languageId": doc.language_id, "version": doc.version, "text": doc.text })
            })
            .collect();
        json!({
            "pid": std::process::id(),
            "name": self.config.name,
            "connection": self.connection,
            "openDocuments": self.docs.keys().collect::<Vec<_>>(),
            "documents": documents,
            "settings": self.settings,
            "initializationOptions": self.initialization_options,
            "rootUri": self.root_uri,
            "workspaceFolders": self.workspace_folders,
            "serverRequestAnswers": self.answers,
            "shutdown": self.shutdown,
        })
    }
}

/// A function of the toy language (see the module doc).
struct Function {
    uri: String,
    name: String,
    /// The definition's line, and the line after the body.
    line: usize,
    end: usize,
    range: Value,
    selection: Value,
}

impl Function {
    fn item(&self) -> Value {
        json!({
            "name": self.name,
            "kind": 12,
            "detail": "fake function",
            "uri": self.uri,
            "range": self.range,
            "selectionRange": self.selection,
            "data": { "fake": self.name },
        })
    }
}

/// An LSP range; positions are (line, UTF-16 offset).
fn range(start_line: usize, start: usize, end_line: usize, end: usize) -> Value {
    json!({
        "start": { "line": start_line, "character": start },
        "end": { "line": end_line, "character": end },
    })
}

fn lines(text: &str) -> impl Iterator<Item = &str> {
    text.split('\n')
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
}

fn utf16_len(text: &str) -> usize {
    text.encode_utf16().count()
}

/// A run of word characters in a line, with UTF-16 offsets as LSP counts them.
struct Word {
    text: String,
    start: usize,
    end: usize,
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn words(line: &str) -> Vec<Word> {
    let mut words = Vec::new();
    let mut current: Option<Word> = None;
    let mut offset = 0;
    for c in line.chars() {
        if is_word_char(c) {
            let word = current.get_or_insert_with(|| Word {
                text: String::new(),
                start: offset,
                end: offset,
            });
            word.text.push(c);
            word.end = offset + c.len_utf16();
        } else if let Some(word) = current.take() {
            words.push(word);
        }
        offset += c.len_utf16();
    }
    words.extend(current);
    words
}

/// The word under the cursor, or the one just before it (cursor at its end).
fn word_at(line: &str, character: usize) -> Option<Word> {
    let all = words(line);
    let index = all
        .iter()
        .position(|w| w.start <= character && character < w.end)
        .or_else(|| all.iter().position(|w| w.end == character))?;
    all.into_iter().nth(index)
}

/// The `<name>` of a line containing `fn <name>` or `def <name>`.
fn function_name(line: &str) -> Option<Word> {
    let all = words(line);
    let utf16: Vec<u16> = line.encode_utf16().collect();
    all.windows(2)
        .find(|pair| {
            let between = String::from_utf16_lossy(&utf16[pair[0].end..pair[1].start]);
            (pair[0].text == "fn" || pair[0].text == "def")
                && !between.is_empty()
                && between.chars().all(char::is_whitespace)
        })
        .map(|pair| Word {
            text: pair[1].text.clone(),
            start: pair[1].start,
            end: pair[1].end,
        })
}

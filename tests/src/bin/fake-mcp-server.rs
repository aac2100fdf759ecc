//! Fake MCP server for Steward's integration tests and benchmarks.
//!
//! MCP is implemented by hand (raw JSON-RPC 2.0) so that every fault is under
//! the test's control. Behaviour comes from a JSON [`FakeMcpConfig`] in the
//! `FAKE_MCP_CONFIG` environment variable or the `--config <json>` argument
//! (the argument wins). Two transports:
//!
//! - stdio (default): newline-delimited JSON on stdin/stdout; exits 0 when
//!   stdin closes.
//! - HTTP (`http` key): a hand-rolled HTTP/1.1 server on 127.0.0.1 (HTTPS
//!   with `tls`, under a CA it makes up), serving two transports at once:
//!   - streamable HTTP at `/mcp`: POST carries one JSON-RPC message and gets
//!     `application/json` back (202 for notifications); `initialize` issues
//!     an `Mcp-Session-Id` that later requests must carry; GET opens an SSE
//!     stream for server notifications; DELETE ends the session;
//!   - the legacy HTTP+SSE transport: `GET /sse` opens a session's event
//!     stream, whose first `endpoint` event names `/messages?sessionId=…`;
//!     messages POSTed there get 202 and their answers arrive on the stream.
//!
//!   With `bearerTokens` those endpoints want `Authorization: Bearer`; with
//!   `tokenEndpoint`, `POST /token` is a fake OAuth token endpoint.
//!
//! Every fault (hang, delay, crash, ignored SIGTERM, grandchild, garbage,
//! list change, going silent) is chosen by the config; see `fake_mcp.rs`.
//!
//! Methods: `initialize`, `ping`, `tools/list`, `prompts/list` (cursor
//! pagination), `tools/call` (echoes the arguments as text), `prompts/get`;
//! anything else is -32601. A `tools/call` also obeys a few arguments of its
//! own, so a test can shape one call: `sleepMs` (answer after this long),
//! `progress` (send that many `notifications/progress` for the request's
//! progress token, spread over `sleepMs`), `sample` (ask the client
//! `sampling/createMessage` with this text and answer with the reply's text
//! or error), `reportPid` (`structuredContent: {"pid": <pid>}`) and
//! `content` (answer with this content array verbatim, for pass-through
//! tests of every content type). Exit codes: 0 on stdin close or SIGTERM, the
//! configured code on `crashAfterMs`, 2 on a bad config.

use std::{
    collections::{HashMap, HashSet},
    io::Write as _,
    path::Path,
    process::Stdio,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader},
    net::TcpListener,
    sync::{broadcast, mpsc, oneshot},
};

// Shared with the test harness, which uses the builder/reader half.
#[allow(dead_code)]
#[path = "../fake_mcp.rs"]
mod fake_mcp;

use fake_mcp::{
    CONFIG_ENV, FakeMcpConfig, GarbageWhen, GrandchildMode, RecordEvent,
    SUPPORTED_PROTOCOL_VERSIONS, TlsConfig, TokenEndpoint,
};

const GARBAGE_LINE: &str = "fake-mcp-server: this line is not JSON-RPC";

fn main() {
    let start = Instant::now();
    let config = match load_config() {
        Ok(config) => config,
        Err(err) => {
            eprintln!("fake-mcp-server: {err}");
            std::process::exit(2);
        }
    };
    let recorder = match Recorder::open(config.record.as_deref(), start) {
        Ok(recorder) => recorder,
        Err(err) => {
            eprintln!("fake-mcp-server: cannot open record file: {err}");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(run(config, recorder));
}

/// `--config <json>` (or `--config=<json>`) wins over `FAKE_MCP_CONFIG`.
fn load_config() -> Result<FakeMcpConfig, String> {
    let mut args = std::env::args().skip(1);
    let mut json = None;
    while let Some(arg) = args.next() {
        if arg == "--config" {
            json = Some(args.next().ok_or("--config needs a JSON value")?);
        } else if let Some(value) = arg.strip_prefix("--config=") {
            json = Some(value.to_owned());
        } else {
            return Err(format!("unexpected argument {arg:?}"));
        }
    }
    let json = match json {
        Some(json) => json,
        None => std::env::var(CONFIG_ENV).unwrap_or_else(|_| "{}".into()),
    };
    serde_json::from_str(&json).map_err(|err| format!("invalid config: {err}"))
}

async fn run(config: FakeMcpConfig, recorder: Recorder) {
    // Install the handler before recording "start": a test that saw "start"
    // may send SIGTERM and expect it to be handled, not to kill us.
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    let (stdout_tx, stdout_rx) = mpsc::unbounded_channel();
    let server = Arc::new(Server {
        lists: Mutex::new((config.tools.clone(), config.prompts.clone())),
        out: if config.http.is_some() {
            Out::Http {
                stream: broadcast::channel(64).0,
                backlog: Mutex::new(Vec::new()),
            }
        } else {
            Out::Stdio(stdout_tx)
        },
        sessions: Mutex::new(HashSet::new()),
        next_session: AtomicU64::new(1),
        legacy: Mutex::new(HashMap::new()),
        accepted_tokens: config
            .bearer_tokens
            .as_ref()
            .map(|tokens| Mutex::new(tokens.iter().cloned().collect())),
        list_change_armed: AtomicBool::new(false),
        pending: Mutex::new(std::collections::HashMap::new()),
        next_request: AtomicU64::new(1),
        config,
        recorder,
    });
    let config = &server.config;

    server.record_now(
        "start",
        json!({
            "name": config.name,
            "mode": if config.http.is_some() { "http" } else { "stdio" },
            "ppid": std::os::unix::process::parent_id(),
        }),
    );
    if config.start_cpu_ms > 0 {
        burn_cpu(Duration::from_millis(config.start_cpu_ms));
    }
    let mut stderr = std::io::stderr().lock();
    for line in &config.stderr_lines {
        let _ = writeln!(stderr, "{line}");
    }
    drop(stderr);
    if let Some(mode) = config.spawn_grandchild {
        spawn_grandchild(&server, mode);
    }
    if config.garbage_on_stdout == Some(GarbageWhen::BeforeInitialize) && config.http.is_none() {
        server.send_raw(GARBAGE_LINE);
    }
    if let Some(ms) = config.crash_after_ms {
        let server = server.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until((server.recorder.start + Duration::from_millis(ms)).into())
                .await;
            server.exit(server.config.exit_code, "crashAfterMs");
        });
    }
    {
        let server = server.clone();
        tokio::spawn(async move {
            while sigterm.recv().await.is_some() {
                server.record_now("signal", json!("SIGTERM"));
                if !server.config.ignore_sigterm {
                    server.exit(0, "SIGTERM");
                }
            }
        });
    }

    match &config.http {
        Some(http) => {
            if let Err(err) = serve_http(server.clone(), &http.port_file).await {
                eprintln!("fake-mcp-server: http: {err}");
                server.exit(2, "http server failed");
            }
        }
        None => serve_stdio(server.clone(), stdout_rx).await,
    }
}

/// Busy-loop until this process has used `amount` of CPU time (so a busy
/// machine stretches the wall time, as it would a real server's start).
#[allow(unsafe_code)]
fn burn_cpu(amount: Duration) {
    let cpu = || {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec.
        unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    };
    let until = cpu() + amount;
    let mut x: u64 = 1;
    while cpu() < until {
        for _ in 0..1000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

fn spawn_grandchild(server: &Server, mode: GrandchildMode) {
    let mut command = std::process::Command::new("sleep");
    // stdout/stderr are inherited on purpose: a leaked grandchild keeps the
    // supervisor's pipes open, which is what leak detection looks for.
    command.arg("1000").stdin(Stdio::null());
    if mode == GrandchildMode::Daemon {
        command.stdout(Stdio::null()).stderr(Stdio::null());
    }
    if matches!(mode, GrandchildMode::Setsid | GrandchildMode::Daemon) {
        detach_into_new_session(&mut command);
    }
    match command.spawn() {
        Ok(child) => server.record_now("grandchild", json!({ "pid": child.id(), "mode": mode })),
        Err(err) => eprintln!("fake-mcp-server: cannot spawn grandchild: {err}"),
    }
}

#[allow(unsafe_code)]
fn detach_into_new_session(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: the closure runs between fork and exec and only calls setsid(2),
    // which is async-signal-safe and touches no memory of ours.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Appends [`RecordEvent`] lines; each line is one `write` on an O_APPEND
/// file, so readers never see two events interleaved.
struct Recorder {
    file: Option<Mutex<std::fs::File>>,
    start: Instant,
    pid: u32,
}

impl Recorder {
    fn open(path: Option<&Path>, start: Instant) -> std::io::Result<Self> {
        let file = match path {
            Some(path) => Some(Mutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)?,
            )),
            None => None,
        };
        Ok(Self {
            file,
            start,
            pid: std::process::id(),
        })
    }

    fn now(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    fn record(&self, t: u64, event: &str, message: Value) {
        let Some(file) = &self.file else { return };
        let event = RecordEvent {
            t,
            pid: self.pid,
            event: event.into(),
            message,
        };
        let mut line = serde_json::to_vec(&event).expect("record event serializes");
        line.push(b'\n');
        let _ = file.lock().expect("record lock").write_all(&line);
    }
}

enum Out {
    /// Lines for the stdout writer task.
    Stdio(mpsc::UnboundedSender<StdoutItem>),
    /// Notifications for the open SSE streams; kept in `backlog` while none
    /// is open, so a notification racing the client's GET is not lost.
    Http {
        stream: broadcast::Sender<Value>,
        backlog: Mutex<Vec<Value>>,
    },
}

enum StdoutItem {
    Line(String),
    Flush(oneshot::Sender<()>),
}

struct Server {
    config: FakeMcpConfig,
    recorder: Recorder,
    /// Current (tools, prompts).
    lists: Mutex<(Vec<String>, Vec<String>)>,
    out: Out,
    sessions: Mutex<HashSet<String>>,
    next_session: AtomicU64,
    /// Legacy SSE sessions: where a session's answers go.
    legacy: Mutex<HashMap<String, mpsc::UnboundedSender<Value>>>,
    /// With `bearerTokens`: the tokens the MCP endpoints accept.
    accepted_tokens: Option<Mutex<HashSet<String>>>,
    list_change_armed: AtomicBool,
    /// Requests we sent the client (`sampling/createMessage`), by id.
    pending: Mutex<std::collections::HashMap<String, oneshot::Sender<Value>>>,
    next_request: AtomicU64,
}

type RpcError = (i64, String);

impl Server {
    fn record_now(&self, event: &str, message: Value) {
        self.recorder.record(self.recorder.now(), event, message);
    }

    /// Whether the server has gone silent at time `t` (ms since start).
    fn silent_at(&self, t: u64) -> bool {
        self.config
            .stop_answering_after_ms
            .is_some_and(|ms| t >= ms)
    }

    fn exit(&self, code: i32, reason: &str) -> ! {
        self.record_now("exit", json!({ "code": code, "reason": reason }));
        std::process::exit(code)
    }

    /// Records and sends a message to the client: on stdout, or (HTTP) on the
    /// SSE streams. Responses over HTTP go in the POST reply instead.
    fn send(&self, message: Value) {
        match &self.out {
            Out::Stdio(tx) => {
                let line = message.to_string();
                self.record_now("send", message);
                let _ = tx.send(StdoutItem::Line(line));
            }
            Out::Http { stream, backlog } => {
                let mut backlog = backlog.lock().expect("backlog lock");
                if stream.receiver_count() == 0 {
                    self.record_now("undelivered", message.clone());
                    backlog.push(message);
                } else {
                    self.record_now("send", message.clone());
                    let _ = stream.send(message);
                }
            }
        }
    }

    fn send_raw(&self, line: &str) {
        if let Out::Stdio(tx) = &self.out {
            self.record_now("send", json!(line));
            let _ = tx.send(StdoutItem::Line(line.to_owned()));
        }
    }

    /// Handles one client message received at `t`. Returns the response for
    /// a request, `None` for anything else; never returns while the server is
    /// meant to stay silent.
    async fn handle(self: &Arc<Self>, message: &Value, t: u64) -> Option<Value> {
        if self.silent_at(t) {
            return std::future::pending().await;
        }
        let Some(object) = message.as_object() else {
            // Batches were dropped in 2025-06-18; a fake need not support them.
            return Some(error_response(
                Value::Null,
                -32600,
                "invalid request".into(),
            ));
        };
        // No method: a response to a request of ours.
        let Some(method) = object.get("method") else {
            let id = object.get("id").map(Value::to_string).unwrap_or_default();
            if let Some(waiter) = self.pending.lock().expect("pending lock").remove(&id) {
                let _ = waiter.send(message.clone());
            }
            return None;
        };
        let method = method.as_str().unwrap_or_default();
        let params = object.get("params").unwrap_or(&Value::Null);
        let Some(id) = object.get("id").cloned() else {
            self.on_notification(method);
            return None;
        };
        let result = self.on_request(method, params).await;
        if self.silent_at(self.recorder.now()) {
            return std::future::pending().await;
        }
        Some(match result {
            Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
            Err((code, text)) => error_response(id, code, text),
        })
    }

    fn on_notification(self: &Arc<Self>, method: &str) {
        if method != "notifications/initialized" {
            return;
        }
        let Some(ms) = self.config.list_changed_after_ms else {
            return;
        };
        if self.list_change_armed.swap(true, Ordering::SeqCst) {
            return;
        }
        let server = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            if server.silent_at(server.recorder.now()) {
                return;
            }
            let config = &server.config;
            {
                let mut lists = server.lists.lock().expect("lists lock");
                if let Some(tools) = &config.tools_after_change {
                    lists.0 = tools.clone();
                }
                if let Some(prompts) = &config.prompts_after_change {
                    lists.1 = prompts.clone();
                }
            }
            if config.tools_after_change.is_some() || config.prompts_after_change.is_none() {
                server.send(notification("notifications/tools/list_changed"));
            }
            if config.prompts_after_change.is_some() {
                server.send(notification("notifications/prompts/list_changed"));
            }
        });
    }

    async fn on_request(&self, method: &str, params: &Value) -> Result<Value, RpcError> {
        let config = &self.config;
        match method {
            "initialize" => {
                if config.hang_in_initialize {
                    std::future::pending::<()>().await;
                }
                if config.initialize_delay_ms > 0 {
                    tokio::time::sleep(Duration::from_millis(config.initialize_delay_ms)).await;
                }
                let requested = params.get("protocolVersion").and_then(Value::as_str);
                let version = requested
                    .filter(|v| SUPPORTED_PROTOCOL_VERSIONS.contains(v))
                    .unwrap_or(SUPPORTED_PROTOCOL_VERSIONS[0]);
                Ok(json!({
                    "protocolVersion": version,
                    "capabilities": {
                        "tools": { "listChanged": true },
                        "prompts": { "listChanged": true },
                    },
                    "serverInfo": { "name": config.name, "version": config.version },
                }))
            }
            "ping" => {
                if config.ping_delay_ms > 0 {
                    tokio::time::sleep(Duration::from_millis(config.ping_delay_ms)).await;
                }
                if config.ping_error {
                    return Err((-32601, "method not found: ping".into()));
                }
                Ok(json!({}))
            }
            "tools/list" => {
                let tools = self.lists.lock().expect("lists lock").0.clone();
                self.page(&tools, params, "tools", |name| {
                    json!({
                        "name": name,
                        "description": format!("{name} of fake server {}", config.name),
                        "inputSchema": { "type": "object" },
                    })
                })
            }
            "prompts/list" => {
                let prompts = self.lists.lock().expect("lists lock").1.clone();
                self.page(&prompts, params, "prompts", |name| {
                    json!({
                        "name": name,
                        "description": format!("{name} of fake server {}", config.name),
                    })
                })
            }
            "tools/call" => {
                let name = params
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if !self
                    .lists
                    .lock()
                    .expect("lists lock")
                    .0
                    .iter()
                    .any(|t| t == name)
                {
                    return Err((-32602, format!("unknown tool {name:?}")));
                }
                let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
                self.shaped_call(params, &arguments).await
            }
            "prompts/get" => {
                let name = params
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if !self
                    .lists
                    .lock()
                    .expect("lists lock")
                    .1
                    .iter()
                    .any(|p| p == name)
                {
                    return Err((-32602, format!("unknown prompt {name:?}")));
                }
                Ok(json!({
                    "description": format!("{name} of fake server {}", config.name),
                    "messages": [{
                        "role": "user",
                        "content": { "type": "text", "text": format!("prompt {name}") },
                    }],
                }))
            }
            _ => Err((-32601, format!("method not found: {method}"))),
        }
    }

    /// A `tools/call` answer, shaped by the call's own arguments (see the
    /// module doc).
    async fn shaped_call(&self, params: &Value, arguments: &Value) -> Result<Value, RpcError> {
        let sleep_ms = arguments
            .get("sleepMs")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let steps = arguments
            .get("progress")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let token = params.pointer("/_meta/progressToken").cloned();
        for step in 1..=steps {
            tokio::time::sleep(Duration::from_millis(sleep_ms / steps.max(1))).await;
            if let Some(token) = &token {
                self.send(json!({
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": { "progressToken": token, "progress": step, "total": steps },
                }));
            }
        }
        if steps == 0 && sleep_ms > 0 {
            tokio::time::sleep(Duration::from_millis(sleep_ms)).await;
        }
        let mut text = arguments.to_string();
        if let Some(question) = arguments.get("sample").and_then(Value::as_str) {
            let id = self.next_request.fetch_add(1, Ordering::SeqCst);
            let id = json!(format!("fake-{id}"));
            let (tx, rx) = oneshot::channel();
            self.pending
                .lock()
                .expect("pending lock")
                .insert(id.to_string(), tx);
            self.send(json!({
                "jsonrpc": "2.0",
                "id": id,
                "method": "sampling/createMessage",
                "params": {
                    "messages": [{ "role": "user", "content": { "type": "text", "text": question } }],
                    "maxTokens": 16,
                },
            }));
            let reply = rx.await.unwrap_or(Value::Null);
            text = match reply.get("result") {
                Some(result) => format!(
                    "sampled: {}",
                    result
                        .pointer("/content/text")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                ),
                None => format!(
                    "sampling failed: {}",
                    reply
                        .pointer("/error/message")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                ),
            };
        }
        let mut result = json!({
            "content": [{ "type": "text", "text": text }],
            "isError": false,
        });
        if let Some(content) = arguments.get("content") {
            result["content"] = content.clone();
        }
        if arguments.get("reportPid") == Some(&json!(true)) {
            result["structuredContent"] = json!({ "pid": std::process::id() });
        }
        Ok(result)
    }

    /// One page of `items`; the cursor is the decimal offset of the page.
    fn page(
        &self,
        items: &[String],
        params: &Value,
        key: &str,
        item: impl Fn(&str) -> Value,
    ) -> Result<Value, RpcError> {
        let offset = match params.get("cursor") {
            None | Some(Value::Null) => 0,
            Some(cursor) => cursor
                .as_str()
                .and_then(|c| c.parse::<usize>().ok())
                .filter(|&offset| offset <= items.len())
                .ok_or_else(|| (-32602, format!("invalid cursor {cursor}")))?,
        };
        let end = match self.config.page_size {
            Some(size) if size > 0 => (offset + size).min(items.len()),
            _ => items.len(),
        };
        let page: Vec<Value> = items[offset..end].iter().map(|name| item(name)).collect();
        let mut result = json!({ key: page });
        if end < items.len() {
            result["nextCursor"] = json!(end.to_string());
        }
        Ok(result)
    }
}

fn notification(method: &str) -> Value {
    json!({ "jsonrpc": "2.0", "method": method })
}

fn error_response(id: Value, code: i64, message: String) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

/// Parses one received line; a line that is not JSON is kept as a string.
fn parse_message(text: &str) -> Result<Value, Value> {
    serde_json::from_str(text).map_err(|_| json!(text))
}

async fn serve_stdio(server: Arc<Server>, mut rx: mpsc::UnboundedReceiver<StdoutItem>) {
    // Writing from one task keeps lines whole and the reader and timers free
    // to run while a slow client leaves the pipe full.
    tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(item) = rx.recv().await {
            match item {
                StdoutItem::Line(mut line) => {
                    line.push('\n');
                    if stdout.write_all(line.as_bytes()).await.is_err()
                        || stdout.flush().await.is_err()
                    {
                        return;
                    }
                }
                StdoutItem::Flush(done) => {
                    let _ = done.send(());
                }
            }
        }
    });

    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if line.trim().is_empty() {
            continue;
        }
        let t = server.recorder.now();
        let message = parse_message(&line);
        server
            .recorder
            .record(t, "recv", message.clone().unwrap_or_else(|raw| raw));
        // One task per message: tasks start in arrival order, so responses
        // keep that order unless a fault delays one of them.
        let server = server.clone();
        tokio::spawn(async move {
            let message = match message {
                Ok(message) => message,
                Err(_) if server.silent_at(t) => return,
                Err(_) => {
                    server.send(error_response(Value::Null, -32700, "parse error".into()));
                    return;
                }
            };
            let is_initialize = message.get("method") == Some(&json!("initialize"));
            if let Some(response) = server.handle(&message, t).await {
                server.send(response);
                if is_initialize
                    && server.config.garbage_on_stdout == Some(GarbageWhen::AfterInitialize)
                {
                    server.send_raw(GARBAGE_LINE);
                }
            }
        });
    }

    // stdin closed: let the writer drain what is queued, then exit.
    if let Out::Stdio(tx) = &server.out {
        let (done_tx, done_rx) = oneshot::channel();
        if tx.send(StdoutItem::Flush(done_tx)).is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(1), done_rx).await;
        }
    }
    server.exit(0, "stdin closed");
}

async fn serve_http(server: Arc<Server>, port_file: &Path) -> std::io::Result<()> {
    let listener = TcpListener::bind(("127.0.0.1", server.config.http_port.unwrap_or(0))).await?;
    let port = listener.local_addr()?.port();
    let tls = match &server.config.tls {
        Some(files) => Some(tls_acceptor(files)?),
        None => None,
    };
    // Rename is atomic: a reader sees either no file or the whole port.
    let tmp = port_file.with_extension("tmp");
    std::fs::write(&tmp, port.to_string())?;
    std::fs::rename(&tmp, port_file)?;
    loop {
        let (socket, _) = listener.accept().await?;
        let server = server.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let _ = match tls {
                Some(acceptor) => match acceptor.accept(socket).await {
                    Ok(stream) => serve_connection(server, stream).await,
                    Err(err) => {
                        server.record_now("tls-error", json!(err.to_string()));
                        Ok(())
                    }
                },
                None => serve_connection(server, socket).await,
            };
        });
    }
}

/// A made-up CA (written to `ca_file`) and a server certificate it issued.
fn tls_acceptor(tls: &TlsConfig) -> std::io::Result<tokio_rustls::TlsAcceptor> {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let fail = |error: rcgen::Error| std::io::Error::other(error.to_string());
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(fail)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "fake-mcp-server test CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().map_err(fail)?)
        .map_err(fail)?;
    let key = KeyPair::generate().map_err(fail)?;
    let cert = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .map_err(fail)?
        .signed_by(&key, &ca)
        .map_err(fail)?;
    let tmp = tls.ca_file.with_extension("tmp");
    std::fs::write(&tmp, ca.pem())?;
    std::fs::rename(&tmp, &tls.ca_file)?;
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(std::io::Error::other)?
    .with_no_client_auth()
    .with_single_cert(vec![cert.der().clone()], key)
    .map_err(std::io::Error::other)?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

struct HttpRequest {
    method: String,
    path: String,
    /// Lower-cased names.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl HttpRequest {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The path without its query.
    fn route(&self) -> &str {
        self.path.split('?').next().unwrap_or_default()
    }

    /// A query parameter (no percent-decoding: our ids need none).
    fn query(&self, key: &str) -> Option<&str> {
        let (_, query) = self.path.split_once('?')?;
        query
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }
}

struct HttpResponse {
    status: &'static str,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
}

impl HttpResponse {
    fn empty(status: &'static str) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    fn json(status: &'static str, body: &Value) -> Self {
        Self {
            status,
            headers: vec![("Content-Type", "application/json".into())],
            body: body.to_string().into_bytes(),
        }
    }
}

/// HTTP/1.1 with keep-alive; bodies must carry Content-Length (as reqwest's
/// JSON bodies do); a chunked request body closes the connection.
async fn serve_connection<S>(server: Arc<Server>, socket: S) -> std::io::Result<()>
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (reader, mut writer) = tokio::io::split(socket);
    let mut reader = BufReader::new(reader);
    loop {
        let Some(request) = read_request(&mut reader).await? else {
            return Ok(());
        };
        let route = request.route().to_owned();
        if route == "/token" {
            let response = match &server.config.token_endpoint {
                Some(endpoint) if request.method == "POST" => {
                    token_response(&server, endpoint, &request)
                }
                _ => HttpResponse::empty("404 Not Found"),
            };
            write_response(&mut writer, response).await?;
            continue;
        }
        if !matches!(route.as_str(), "/mcp" | "/sse" | "/messages") {
            write_response(&mut writer, HttpResponse::empty("404 Not Found")).await?;
            continue;
        }
        if let Err(response) = check_bearer(&server, &request) {
            write_response(&mut writer, response).await?;
            continue;
        }
        let response = match (route.as_str(), request.method.as_str()) {
            ("/mcp", "POST") => handle_post(&server, &request).await,
            ("/mcp", "GET") => match check_session(&server, request.header("mcp-session-id")) {
                Ok(()) => return serve_sse(&server, &mut writer).await,
                Err(response) => response,
            },
            ("/mcp", "DELETE") => match check_session(&server, request.header("mcp-session-id")) {
                Ok(()) => {
                    let id = request.header("mcp-session-id").unwrap_or_default();
                    server.sessions.lock().expect("sessions lock").remove(id);
                    HttpResponse::empty("200 OK")
                }
                Err(response) => response,
            },
            ("/sse", "GET") => return serve_legacy_sse(&server, &mut writer).await,
            ("/messages", "POST") => handle_legacy_post(&server, &request),
            _ => HttpResponse {
                headers: vec![("Allow", "GET, POST, DELETE".into())],
                ..HttpResponse::empty("405 Method Not Allowed")
            },
        };
        write_response(&mut writer, response).await?;
    }
}

async fn read_request<R>(reader: &mut BufReader<R>) -> std::io::Result<Option<HttpRequest>>
where
    R: AsyncRead + Unpin,
{
    let mut line = String::new();
    if reader.read_line(&mut line).await? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
        return Err(std::io::Error::other("bad request line"));
    };
    let (method, path) = (method.to_owned(), path.to_owned());
    let mut headers = Vec::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).await? == 0 {
            return Ok(None);
        }
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let mut request = HttpRequest {
        method,
        path,
        headers,
        body: Vec::new(),
    };
    if request.header("transfer-encoding").is_some() {
        return Err(std::io::Error::other(
            "chunked request bodies are not supported",
        ));
    }
    let length: usize = request
        .header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    request.body.resize(length, 0);
    reader.read_exact(&mut request.body).await?;
    Ok(Some(request))
}

async fn write_response(
    writer: &mut (impl AsyncWrite + Unpin),
    response: HttpResponse,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {}\r\nContent-Length: {}\r\n",
        response.status,
        response.body.len()
    );
    for (name, value) in &response.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    writer.write_all(head.as_bytes()).await?;
    writer.write_all(&response.body).await?;
    writer.flush().await
}

/// With `bearerTokens`: 401 unless the request carries an accepted token.
fn check_bearer(server: &Server, request: &HttpRequest) -> Result<(), HttpResponse> {
    let Some(accepted) = &server.accepted_tokens else {
        return Ok(());
    };
    let token = request
        .header("authorization")
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::to_owned);
    let ok = token
        .as_ref()
        .is_some_and(|token| accepted.lock().expect("tokens lock").contains(token));
    server.record_now(
        "auth",
        json!({ "path": request.route(), "token": token, "accepted": ok }),
    );
    if ok {
        Ok(())
    } else {
        let mut response = HttpResponse::empty("401 Unauthorized");
        if !server.config.bearer_without_challenge {
            response
                .headers
                .push(("WWW-Authenticate", "Bearer realm=\"fake\"".into()));
        }
        Err(response)
    }
}

/// `POST /token`: the refresh grant of [`TokenEndpoint`].
fn token_response(
    server: &Server,
    endpoint: &TokenEndpoint,
    request: &HttpRequest,
) -> HttpResponse {
    let form: serde_json::Map<String, Value> = String::from_utf8_lossy(&request.body)
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (percent_decode(k), json!(percent_decode(v))))
        .collect();
    server.record_now("token", Value::Object(form.clone()));
    let field = |key: &str| form.get(key).and_then(Value::as_str);
    let valid = field("grant_type") == Some("refresh_token")
        && field("refresh_token") == Some(endpoint.refresh_token.as_str())
        && field("client_id") == Some(endpoint.client_id.as_str())
        && endpoint
            .client_secret
            .as_deref()
            .is_none_or(|secret| field("client_secret") == Some(secret));
    if !valid {
        return HttpResponse::json(
            "400 Bad Request",
            &json!({ "error": "invalid_grant", "error_description": "unknown refresh token or client" }),
        );
    }
    if let Some(accepted) = &server.accepted_tokens {
        accepted
            .lock()
            .expect("tokens lock")
            .insert(endpoint.access_token.clone());
    }
    let mut answer = json!({ "access_token": endpoint.access_token, "token_type": "Bearer" });
    if let Some(seconds) = endpoint.expires_in {
        answer["expires_in"] = json!(seconds);
    }
    if let Some(rotated) = &endpoint.new_refresh_token {
        answer["refresh_token"] = json!(rotated);
    }
    HttpResponse::json("200 OK", &answer)
}

/// `application/x-www-form-urlencoded` decoding of one key or value.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|hex| u8::from_str_radix(hex, 16).ok()) {
                    Some(byte) => {
                        out.push(byte);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// 400 without a session id, 404 for an unknown one (the client then
/// re-initializes, as the spec says).
fn check_session(server: &Server, id: Option<&str>) -> Result<(), HttpResponse> {
    match id {
        None => Err(HttpResponse::empty("400 Bad Request")),
        Some(id) if server.sessions.lock().expect("sessions lock").contains(id) => Ok(()),
        Some(_) => Err(HttpResponse::empty("404 Not Found")),
    }
}

fn new_session_id(server: &Server) -> String {
    let id = format!(
        "fake-{}-{}",
        std::process::id(),
        server.next_session.fetch_add(1, Ordering::SeqCst)
    );
    server
        .sessions
        .lock()
        .expect("sessions lock")
        .insert(id.clone());
    id
}

async fn handle_post(server: &Arc<Server>, request: &HttpRequest) -> HttpResponse {
    let t = server.recorder.now();
    let text = String::from_utf8_lossy(&request.body);
    let message = match parse_message(&text) {
        Ok(message) => message,
        Err(raw) => {
            server.recorder.record(t, "recv", raw);
            let response = error_response(Value::Null, -32700, "parse error".into());
            return HttpResponse::json("400 Bad Request", &response);
        }
    };
    server.recorder.record(t, "recv", message.clone());
    let is_initialize = message.get("method") == Some(&json!("initialize"));
    if !is_initialize && let Err(response) = check_session(server, request.header("mcp-session-id"))
    {
        return response;
    }
    let Some(response) = server.handle(&message, t).await else {
        return HttpResponse::empty("202 Accepted");
    };
    server.record_now("send", response.clone());
    let mut reply = HttpResponse::json("200 OK", &response);
    if is_initialize {
        reply
            .headers
            .push(("Mcp-Session-Id", new_session_id(server)));
    }
    reply
}

/// `POST /messages?sessionId=…` (legacy SSE): 202 at once; the answer goes
/// out on the session's event stream.
fn handle_legacy_post(server: &Arc<Server>, request: &HttpRequest) -> HttpResponse {
    let id = request.query("sessionId").map(str::to_owned);
    let Some(stream) = id
        .as_deref()
        .and_then(|id| server.legacy.lock().expect("legacy lock").get(id).cloned())
    else {
        return HttpResponse::empty("404 Not Found");
    };
    let t = server.recorder.now();
    let text = String::from_utf8_lossy(&request.body);
    let message = match parse_message(&text) {
        Ok(message) => message,
        Err(raw) => {
            server.recorder.record(t, "recv", raw);
            return HttpResponse::empty("400 Bad Request");
        }
    };
    server.recorder.record(t, "recv", message.clone());
    let server = server.clone();
    tokio::spawn(async move {
        if let Some(response) = server.handle(&message, t).await {
            server.record_now("send", response.clone());
            let _ = stream.send(response);
        }
    });
    HttpResponse::empty("202 Accepted")
}

const SSE_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
    Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n";

/// Server-to-client stream: SSE events in a chunked response, open until the
/// client goes away.
async fn serve_sse(server: &Server, writer: &mut (impl AsyncWrite + Unpin)) -> std::io::Result<()> {
    let Out::Http { stream, backlog } = &server.out else {
        unreachable!("SSE is only served in HTTP mode");
    };
    // Subscribe and take the backlog under one lock so nothing falls between.
    let (mut rx, pending) = {
        let mut backlog = backlog.lock().expect("backlog lock");
        (stream.subscribe(), std::mem::take(&mut *backlog))
    };
    writer.write_all(SSE_HEAD).await?;
    writer.flush().await?;
    for message in pending {
        server.record_now("send", message.clone());
        write_sse_event(writer, "message", &message.to_string()).await?;
    }
    loop {
        match rx.recv().await {
            Ok(message) => write_sse_event(writer, "message", &message.to_string()).await?,
            Err(broadcast::error::RecvError::Lagged(_)) => continue,
            Err(broadcast::error::RecvError::Closed) => return Ok(()),
        }
    }
}

/// `GET /sse` (legacy SSE): the `endpoint` event, then this session's
/// answers and every notification, until the client goes away.
async fn serve_legacy_sse(
    server: &Server,
    writer: &mut (impl AsyncWrite + Unpin),
) -> std::io::Result<()> {
    let Out::Http { stream, .. } = &server.out else {
        unreachable!("SSE is only served in HTTP mode");
    };
    let id = new_session_id(server);
    let (tx, mut answers) = mpsc::unbounded_channel();
    server
        .legacy
        .lock()
        .expect("legacy lock")
        .insert(id.clone(), tx);
    let mut notifications = stream.subscribe();
    let result = async {
        writer.write_all(SSE_HEAD).await?;
        write_sse_event(writer, "endpoint", &format!("/messages?sessionId={id}")).await?;
        loop {
            let message = tokio::select! {
                Some(message) = answers.recv() => message,
                notification = notifications.recv() => match notification {
                    Ok(message) => message,
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return Ok(()),
                },
            };
            write_sse_event(writer, "message", &message.to_string()).await?;
        }
    }
    .await;
    server.legacy.lock().expect("legacy lock").remove(&id);
    server.sessions.lock().expect("sessions lock").remove(&id);
    result
}

async fn write_sse_event(
    writer: &mut (impl AsyncWrite + Unpin),
    event: &str,
    data: &str,
) -> std::io::Result<()> {
    let event = format!("event: {event}\ndata: {data}\n\n");
    let chunk = format!("{:x}\r\n{event}\r\n", event.len());
    writer.write_all(chunk.as_bytes()).await?;
    writer.flush().await
}

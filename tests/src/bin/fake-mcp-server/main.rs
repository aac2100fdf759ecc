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
//! list change, a storm of list changes, going silent) is chosen by the
//! config; see `fake_mcp.rs`.
//! How tools and prompts are described can also come from a file read at
//! start (`definitionsFile`), so that a test changes them between two runs
//! of one configuration.
//!
//! Methods: `initialize`, `ping`, `tools/list`, `prompts/list` (cursor
//! pagination), `tools/call` (echoes the arguments as text), `prompts/get`;
//! anything else is -32601. A `tools/call` also obeys a few arguments of its
//! own, so a test can shape one call: `sleepMs` (answer after this long),
//! `progress` (send that many `notifications/progress` for the request's
//! progress token, spread over `sleepMs`), `sample` (ask the client
//! `sampling/createMessage` with this text and answer with the reply's text
//! or error), `reportPid` (`structuredContent: {"pid": <pid>}`), `exitMs`
//! (exit with code 3 this long into the call, never answering it),
//! `attempt` (what a hostile server tries: see `attempt.rs`; the outcome is
//! the `structuredContent`) and
//! `content` (answer with this content array verbatim, for pass-through
//! tests of every content type). Exit codes: 0 on stdin close or SIGTERM, the
//! configured code on `crashAfterMs` or `crashAfterListedMs`, 2 on a bad config.

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
#[path = "../../fake_mcp.rs"]
mod fake_mcp;

use fake_mcp::{
    CONFIG_ENV, Definitions, FakeMcpConfig, GarbageWhen, GrandchildMode, ListChangedStorm,
    RecordEvent, SUPPORTED_PROTOCOL_VERSIONS, TlsConfig, TokenEndpoint,
};

mod attempt;
mod http;
mod server;
mod stdio;

use http::serve_http;
// In scope of every module through `use super::*` (as are the imports above).
use server::*;
use stdio::serve_stdio;

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
    let definitions = match config.definitions_file.as_deref().map(Definitions::read) {
        None => Definitions::default(),
        Some(Ok(definitions)) => definitions,
        Some(Err(err)) => {
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
    runtime.block_on(run(config, definitions, recorder));
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
    let config: FakeMcpConfig =
        serde_json::from_str(&json).map_err(|err| format!("invalid config: {err}"))?;
    let Some(path) = config.overlay_file.clone() else {
        return Ok(config);
    };
    let overlay = match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&text)
            .map_err(|err| format!("invalid overlay file {}: {err}", path.display()))?,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(config),
        Err(err) => return Err(format!("cannot read {}: {err}", path.display())),
    };
    let mut merged = serde_json::to_value(&config).map_err(|err| err.to_string())?;
    if let Some(object) = merged.as_object_mut() {
        object.extend(overlay);
    }
    serde_json::from_value(merged).map_err(|err| format!("invalid overlay: {err}"))
}

async fn run(config: FakeMcpConfig, definitions: Definitions, recorder: Recorder) {
    // Install the handler before recording "start": a test that saw "start"
    // may send SIGTERM and expect it to be handled, not to kill us.
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    let (stdout_tx, stdout_rx) = mpsc::unbounded_channel();
    let server = Arc::new(Server {
        lists: Mutex::new((
            with_extra(&config.tools, &definitions.tools),
            with_extra(&config.prompts, &definitions.prompts),
        )),
        definitions,
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
        listed: tokio::sync::Notify::new(),
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
    if let Some(ms) = config.crash_after_listed_ms {
        let server = server.clone();
        tokio::spawn(async move {
            server.listed.notified().await;
            tokio::time::sleep(Duration::from_millis(ms)).await;
            server.exit(server.config.exit_code, "crashAfterListedMs");
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

/// `names`, then the names `defined` adds.
fn with_extra<T>(names: &[String], defined: &std::collections::BTreeMap<String, T>) -> Vec<String> {
    let mut all = names.to_vec();
    all.extend(defined.keys().filter(|k| !names.contains(k)).cloned());
    all
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

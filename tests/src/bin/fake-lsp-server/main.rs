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
//! ignore `shutdown` or SIGTERM, send the server→client requests real
//! servers send, and report indexing progress (answering nothing until it
//! ends). Every message in and out, and every lifecycle event, is
//! appended to the record file (see [`fake_lsp::Record`]).
//!
//! Over tcp/socket it serves one connection at a time and accepts the next
//! one after a disconnect, like a daemon; each connection is a fresh LSP
//! session. The `exit` notification ends the process on every transport.

// The module also backs the test library, whose readers this binary does not
// use.
#[allow(dead_code)]
#[path = "../../fake_lsp.rs"]
mod fake_lsp;

use std::collections::{BTreeMap, VecDeque};
use std::io::Write as _;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use fake_lsp::{CONFIG_ENV, Config, Event, IdStyle, Indexing, Record, Transport};
use serde_json::{Map, Value, json};
use tokio::io::{
    AsyncBufReadExt as _, AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, BufReader,
};
use tokio::net::{TcpListener, UnixListener};
use tokio::signal::unix::{SignalKind, signal};
use tokio::task::JoinSet;

mod session;
mod toy;
mod transport;

// In scope of every module through `use super::*` (as are the imports above).
use session::*;
use transport::*;

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

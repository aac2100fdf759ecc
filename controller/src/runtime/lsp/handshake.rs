//! Opening a session with a language server: spawn it when the spec has a
//! `command`, connect (stdio, or tcp/unix socket retried while a server
//! Steward started comes up), start the session task, then `initialize` /
//! `initialized` / `workspace/didChangeConfiguration` — all within
//! `startupTimeout`. A failure closes the connection and stops the process
//! before it is returned, with the server's last stderr lines.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_lsp::{MainLoop, ServerSocket};
use lsp_types::notification::{DidChangeConfiguration, Initialized};
use lsp_types::{DidChangeConfigurationParams, InitializedParams, Url};
use serde_json::{Value, json};
use steward_schema::resource::{LspServerSpec, Reason};
use tokio::io::AsyncReadExt as _;
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::compat::{TokioAsyncReadCompatExt as _, TokioAsyncWriteCompatExt as _};
use tokio_util::sync::CancellationToken;

use super::client::{ClientState, client_router};
use super::documents::Store;
use super::endpoint::{Endpoint, Input, Output};
use super::errors::describe;
use super::progress::Unfinished;
use super::raw;
use super::session::{Life, Shared, Tasks, run_session};
use super::{CONNECT_RETRY_FIRST, CONNECT_RETRY_MAX, LspEventHandler};
use crate::runtime::process::{ExitInfo, ManagedProcess, ProcessSpec, SandboxRequest, Spawner};
use crate::runtime::start::{StartError, exit_of_failed_start, stop_failed_start, wait_exit};
use crate::support::sync::lock;

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

/// What a successful start hands to the connection.
pub(super) struct Opened {
    pub(super) socket: ServerSocket,
    pub(super) capabilities: Value,
    pub(super) shared: Arc<Shared>,
    pub(super) tasks: Tasks,
    /// The server Steward started, if it did.
    pub(super) process: Option<ManagedProcess>,
}

/// What a successful handshake hands to [`open`].
struct Handshaken {
    socket: ServerSocket,
    capabilities: Value,
    shared: Arc<Shared>,
    tasks: Tasks,
}

pub(super) async fn open(
    spawner: &Spawner,
    name: &str,
    spec: &LspServerSpec,
    on_event: LspEventHandler,
) -> Result<Opened, StartError> {
    let timeout = Duration::from_millis(spec.startup_timeout);
    let deadline = Instant::now() + timeout;
    let endpoint = Endpoint::of(spec)?;
    let (mut initialize, folders) = initialize_params(spec)?;

    let mut process = match spec.command.as_deref() {
        Some(command) => {
            let process_spec = ProcessSpec {
                program: command.to_owned(),
                args: spec.args.clone(),
                env: spec.env.clone(),
                cwd: Some(PathBuf::from(&spec.workspace_folder)),
                sandbox: Some(SandboxRequest::of(
                    &spec.resolved_sandbox,
                    crate::runtime::sandbox::home::lsp_owner(name),
                )?),
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
    // A sandboxed server cannot signal Steward (Landlock's signal scope):
    // checking `kill(processId, 0)` it would take Steward for dead and exit.
    // It gets no process to watch (LSP: `null`) and dies with Steward all
    // the same (the parent-death signal).
    if process
        .as_ref()
        .is_some_and(|p| p.sandbox().is_some_and(|s| s.confined()))
    {
        initialize["processId"] = Value::Null;
    }

    let shared = Arc::new(Shared {
        name: name.to_owned(),
        on_event,
        life: Mutex::new(Life::default()),
        store: Mutex::new(Store::default()),
        published: watch::Sender::new(0),
        progress: watch::Sender::new(Unfinished::default()),
    });
    let handshaken = handshake(HandshakeArgs {
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
    match handshaken {
        Ok(handshaken) => Ok(Opened {
            socket: handshaken.socket,
            capabilities: handshaken.capabilities,
            shared: handshaken.shared,
            tasks: handshaken.tasks,
            process,
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
async fn handshake(args: HandshakeArgs<'_>) -> Result<Handshaken, Failure> {
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
        main_loop.run_buffered(super::pace::Paced::new(input), output),
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
    Ok(Handshaken {
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

#[cfg(test)]
mod tests {
    use steward_schema::formats::LspTransport;

    use super::*;
    use crate::runtime::lsp::testing::*;

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
}

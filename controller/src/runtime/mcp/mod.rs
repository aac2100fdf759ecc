//! MCP connections: one live session with one MCP server.
//!
//! This module owns the protocol side of an MCP server: it spawns a stdio
//! server through the [`Spawner`] (never rmcp's own child-process transport:
//! we need our process groups and parent-death signal) or connects to a
//! remote endpoint (streamable HTTP or SSE, built by [`remote`]), runs the
//! `initialize` handshake with rmcp, lists tools and prompts (every page),
//! and then watches the session until it is stopped. It does not decide anything: the controller gets [`McpEvent`]s and
//! reconciles.
//!
//! Invariants:
//!
//! - **Nothing outlives a failed start.** Any error after the spawn closes the
//!   session and stops the process (group reaped) before [`McpConnection::connect`]
//!   returns; the error carries the server's last stderr lines.
//! - **One watcher task per connection** forwards list-change notifications,
//!   notices the process exiting or the session ending ([`McpEvent::Exited`])
//!   and checks liveness. It ends with the connection: [`McpConnection::stop`]
//!   joins it before touching the process, so no event is emitted during or
//!   after a stop, and dropping the connection aborts it.
//! - **Liveness costs nothing for a server that talks.** A server that sent
//!   anything within the ping interval, or has a forwarded call in flight, is
//!   not pinged; pings of all sessions share a budget per interval. Any
//!   answer is alive (an error answer too: some servers lack `ping`);
//!   [`McpEvent::Unresponsive`] only when a ping got no answer within twice
//!   the ping timeout *and* nothing else came from the server meanwhile.
//! - **The `initialize` lifecycle is pinned.** rmcp's default protocol version
//!   (2026-07-28) has no `initialize`; we offer the newest version that still
//!   has one (2025-11-25), and a server answers with a version it speaks
//!   (2024-11-05 … 2025-06-18 for our fake), which rmcp accepts.
//! - **Secrets stay out of our logs and messages**: env values and header
//!   values are never printed, and URLs (ours and those inside reqwest's
//!   errors) are shown without their query or user info.

// Sampling, roots and logging are deprecated by SEP-2577 (protocol 2026-07-28)
// but are part of the initialize-lifecycle versions we speak and relay.
#![allow(deprecated)]

pub mod relay;
pub mod remote;

use std::fmt;
use std::future::Future;
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::FutureExt as _;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ClientRequest, ClientResult, CreateMessageRequest,
    CreateMessageRequestParams, CreateMessageResult, ElicitRequest, ElicitRequestParams,
    ElicitResult, ErrorData, Implementation, ListRootsResult, LoggingMessageNotification,
    LoggingMessageNotificationParam, PingRequest, Prompt, ProtocolVersion, Resource,
    ResourceTemplate, ResourceUpdatedNotification, ResourceUpdatedNotificationParam, Root,
    ServerNotification, ServerPeerInfo, ServerRequest, Tool,
};
use rmcp::service::ClientInitializeError;
use rmcp::service::RequestContext;
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::IntoTransport;
use rmcp::{ClientCacheConfig, ClientHandler, Peer, RoleClient, ServiceExt as _};
use steward_schema::resource::{McpServerSpec, McpTransport, Reason};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use self::relay::RelayedProgress;
pub use self::relay::{Broadcast, CallError, Caller, McpHandle, Relay};
use crate::runtime::process::{ExitInfo, ManagedProcess, ProcessSpec, Spawner};
use crate::runtime::start::{
    EXIT_SETTLE, FAILED_START_GRACE, StartError, exit_of_failed_start, stop_failed_start, wait_exit,
};
use crate::support::sync::lock;
/// Bytes of a non-JSON stdout line kept for the error message.
const GARBAGE_SAMPLE_BYTES: usize = 200;
/// Non-JSON stdout lines logged at `warn` per connection; later ones at `debug`.
const GARBAGE_WARNINGS: u32 = 3;

/// How a session ended by itself. Displays as a phrase that reads after
/// "the server": `exited with code 3`, `closed the connection`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpExit {
    /// The stdio server process exited.
    Process(ExitInfo),
    /// The session closed while no exit status was seen: a remote server
    /// closed the connection, or a stdio server closed its stdout and kept
    /// running.
    Closed(String),
}

impl fmt::Display for McpExit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            McpExit::Process(info) => write!(f, "{info}"),
            McpExit::Closed(message) => f.write_str(message),
        }
    }
}

/// Something that happened to a connection after it was established.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpEvent {
    /// `notifications/tools/list_changed`: call [`McpConnection::refresh`].
    ToolsChanged,
    /// `notifications/prompts/list_changed`: call [`McpConnection::refresh`].
    PromptsChanged,
    /// The server is gone; the connection is dead (stop it to clean up).
    Exited(McpExit),
    /// `notifications/resources/list_changed`: call [`McpConnection::refresh`].
    ResourcesChanged,
    /// Two pings in a row timed out or failed; the message says how.
    Unresponsive(String),
}

/// Receives a connection's [`McpEvent`]s, from a background task.
pub type McpEventHandler = Arc<dyn Fn(McpEvent) + Send + Sync>;

/// Time bounds of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpTimeouts {
    /// Spawn to tools and prompts listed, stdio servers (also bounds
    /// [`McpConnection::refresh`]).
    pub stdio_handshake: Duration,
    /// Connect to tools and prompts listed, remote servers (also bounds
    /// [`McpConnection::refresh`]).
    pub remote_handshake: Duration,
    /// Time between the end of one ping and the next; zero disables pings.
    pub ping_interval: Duration,
    /// How long one ping may take.
    pub ping_timeout: Duration,
}

impl Default for McpTimeouts {
    fn default() -> Self {
        McpTimeouts {
            stdio_handshake: Duration::from_secs(30),
            remote_handshake: Duration::from_secs(5),
            ping_interval: Duration::from_secs(15),
            ping_timeout: Duration::from_secs(5),
        }
    }
}

/// `includeTools` / `excludeTools`: the tools to expose, in the server's order.
/// An absent include list allows every tool (`[]` allows none); exclude wins.
/// Entries are exact tool names.
pub fn filter_tools(
    tools: &[String],
    include: Option<&[String]>,
    exclude: Option<&[String]>,
) -> Vec<String> {
    tools
        .iter()
        .filter(|tool| include.is_none_or(|include| include.contains(tool)))
        .filter(|tool| !exclude.is_some_and(|exclude| exclude.contains(tool)))
        .cloned()
        .collect()
}

/// One established MCP session (and, for stdio, the process behind it).
pub struct McpConnection {
    name: String,
    peer: Peer<RoleClient>,
    relay: Arc<Relay>,
    capabilities: Capabilities,
    lists: Mutex<Arc<McpLists>>,
    /// Serializes refreshes so an older listing never overwrites a newer one.
    refresh_lock: tokio::sync::Mutex<()>,
    refresh_timeout: Duration,
    dig: Dig,
    process: Option<ManagedProcess>,
    watcher: Option<Watcher>,
    /// Set first thing in stop/drop: silences the handler and the watcher.
    stopped: Arc<AtomicBool>,
}

impl fmt::Debug for McpConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpConnection")
            .field("name", &self.name)
            .field("pid", &self.pid())
            .field("lists", &*lock(&self.lists))
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, Copy)]
struct Capabilities {
    tools: bool,
    prompts: bool,
    resources: bool,
}

/// What a server offers, every page, as the server describes it (unfiltered).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct McpLists {
    pub tools: Vec<Tool>,
    pub prompts: Vec<Prompt>,
    pub resources: Vec<Resource>,
    pub templates: Vec<ResourceTemplate>,
}

type Lists = McpLists;

struct Watcher {
    task: JoinHandle<()>,
    /// Asks the task to close the session by the given deadline and return.
    close: Option<oneshot::Sender<Instant>>,
}

impl McpConnection {
    /// Spawn (stdio) or connect (http), handshake, list tools and prompts,
    /// all within the transport's handshake timeout.
    ///
    /// `on_event` is called from a background task, only for what happens
    /// after the session is established: a list change announced while
    /// connecting is already in the returned lists, and an exit while
    /// connecting is the error. (On a multi-threaded runtime the first call
    /// may race with the caller receiving `Ok`: treat an event as "look at
    /// this server again".)
    pub async fn connect(
        spawner: &Spawner,
        name: &str,
        spec: &McpServerSpec,
        workspace: &Path,
        timeouts: McpTimeouts,
        on_event: McpEventHandler,
    ) -> Result<McpConnection, StartError> {
        let started = Instant::now();
        let relay = Relay::new(workspace);
        let result = match spec.transport {
            McpTransport::Stdio => {
                connect_stdio(spawner, name, spec, workspace, timeouts, relay).await
            }
            McpTransport::Http | McpTransport::Sse => {
                connect_http(name, spec, timeouts, relay).await
            }
        };
        match result {
            Ok(opened) => {
                let connection = McpConnection::assemble(name, opened, timeouts, on_event);
                let lists = lock(&connection.lists).clone();
                tracing::info!(
                    server = %name,
                    pid = connection.pid(),
                    tools = lists.tools.len(),
                    prompts = lists.prompts.len(),
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "mcp server connected"
                );
                Ok(connection)
            }
            Err(error) => {
                tracing::info!(server = %name, reason = %error.reason, error = %crate::runtime::first_line(&error.message), "mcp server failed to start");
                Err(error)
            }
        }
    }

    fn assemble(
        name: &str,
        opened: Opened,
        timeouts: McpTimeouts,
        on_event: McpEventHandler,
    ) -> McpConnection {
        let Opened {
            session,
            process,
            notices,
            stopped,
            refresh_timeout,
            dig,
            relay,
        } = opened;
        let Session {
            running,
            cancel,
            peer,
            capabilities,
            lists,
        } = session;
        let (close, close_rx) = oneshot::channel();
        let task = tokio::spawn(watch_session(WatchArgs {
            name: name.to_owned(),
            running,
            cancel,
            peer: peer.clone(),
            notices,
            exit: process.as_ref().map(ManagedProcess::exit_watch),
            on_event,
            stopped: Arc::clone(&stopped),
            timeouts,
            close: close_rx,
            dig,
            relay: relay.clone(),
        }));
        McpConnection {
            name: name.to_owned(),
            peer,
            relay,
            capabilities,
            lists: Mutex::new(Arc::new(lists)),
            refresh_lock: tokio::sync::Mutex::new(()),
            refresh_timeout,
            dig,
            process,
            watcher: Some(Watcher {
                task,
                close: Some(close),
            }),
            stopped,
        }
    }

    /// The stdio server's pid (`None` for a remote server).
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(ManagedProcess::pid)
    }

    /// Every tool name, as the server lists them (unfiltered).
    pub fn tools(&self) -> Vec<String> {
        lock(&self.lists)
            .tools
            .iter()
            .map(|t| t.name.to_string())
            .collect()
    }

    /// Every prompt name, as the server lists them.
    pub fn prompts(&self) -> Vec<String> {
        lock(&self.lists)
            .prompts
            .iter()
            .map(|p| p.name.clone())
            .collect()
    }

    /// Everything the server offers, as it describes it (unfiltered).
    pub fn lists(&self) -> Arc<McpLists> {
        lock(&self.lists).clone()
    }

    /// A handle to forward requests over this connection.
    pub fn handle(&self) -> McpHandle {
        McpHandle {
            peer: self.peer.clone(),
            relay: self.relay.clone(),
        }
    }

    /// Where notifications that belong to no forwarded request go (set once,
    /// right after connecting).
    pub fn set_broadcast(&self, broadcast: Broadcast) {
        self.relay.set_broadcast(broadcast);
    }

    /// Waits until no forwarded request is in flight, or `deadline`; true
    /// when drained.
    pub async fn drain(&self, deadline: Instant) -> bool {
        tokio::time::timeout_at(deadline, self.relay.drained())
            .await
            .is_ok()
    }

    /// Re-lists tools and prompts (after [`McpEvent::ToolsChanged`] or
    /// [`McpEvent::PromptsChanged`]), bounded by the handshake timeout. On an
    /// error the lists are unchanged.
    pub async fn refresh(&self) -> Result<(), String> {
        let _serial = self.refresh_lock.lock().await;
        let listed = tokio::time::timeout(
            self.refresh_timeout,
            list_all(&self.name, &self.peer, self.capabilities, self.dig),
        )
        .await;
        match listed {
            Ok(Ok(lists)) => {
                tracing::debug!(server = %self.name, tools = lists.tools.len(), prompts = lists.prompts.len(), "mcp lists refreshed");
                *lock(&self.lists) = Arc::new(lists);
                Ok(())
            }
            Ok(Err(ListError { phase, message })) => Err(format!("{phase}: {message}")),
            Err(_) => Err(format!(
                "refresh the lists: no answer within {}",
                humantime::format_duration(self.refresh_timeout)
            )),
        }
    }

    /// Closes the session (bounded by `close_timeout`; for stdio this closes
    /// the server's stdin and waits for it to exit), then stops the process:
    /// SIGTERM → `grace` → SIGKILL, group reaped. Emits no event.
    pub async fn stop(mut self, close_timeout: Duration, grace: Duration) {
        self.stopped.store(true, Ordering::SeqCst);
        let started = Instant::now();
        let deadline = started + close_timeout;
        if let Some(mut watcher) = self.watcher.take() {
            if let Some(close) = watcher.close.take() {
                let _ = close.send(deadline);
            }
            // The task bounds its own close by `deadline`; the margin covers
            // its last steps.
            let margin = Duration::from_millis(100);
            if tokio::time::timeout_at(deadline + margin, &mut watcher.task)
                .await
                .is_err()
            {
                watcher.task.abort();
                let _ = watcher.task.await;
            }
        }
        if let Some(mut process) = self.process.take() {
            let closed = tokio::time::timeout_at(deadline, process.exited())
                .await
                .is_ok();
            let report = process.stop(grace).await;
            tracing::debug!(server = %self.name, exited_on_close = closed, outcome = ?report.outcome, "mcp server process stopped");
        }
        tracing::info!(server = %self.name, elapsed_ms = started.elapsed().as_millis() as u64, "mcp server stopped");
    }

    /// The stdio server's last `n` stderr lines, oldest first.
    pub fn stderr_tail(&self, n: usize) -> Vec<String> {
        self.process
            .as_ref()
            .map(|process| process.stderr_tail(n))
            .unwrap_or_default()
    }
}

impl Drop for McpConnection {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::SeqCst);
        // Aborting drops the session (its drop guard cancels rmcp's loop);
        // dropping the process SIGKILLs its group.
        if let Some(watcher) = &self.watcher {
            watcher.task.abort();
        }
    }
}

// ---- connecting ----

/// What a successful connect hands to [`McpConnection::assemble`].
struct Opened {
    session: Session,
    process: Option<ManagedProcess>,
    notices: mpsc::UnboundedReceiver<McpEvent>,
    stopped: Arc<AtomicBool>,
    refresh_timeout: Duration,
    dig: Dig,
    relay: Arc<Relay>,
}

/// An initialized rmcp session with its first lists.
struct Session {
    running: RunningService<RoleClient, Client>,
    /// Ends the session (rmcp then closes the transport).
    cancel: CancellationToken,
    peer: Peer<RoleClient>,
    capabilities: Capabilities,
    lists: Lists,
}

/// Why opening a session failed, before it is turned into a message.
enum Failure {
    /// The deadline passed during `phase`.
    Timeout(&'static str),
    /// The server wrote this non-JSON line on stdout.
    Garbage(String),
    /// The process exited during `phase`.
    Exited(&'static str, ExitInfo),
    /// rmcp failed during `phase`.
    Protocol(&'static str, String),
}

/// Watches that interrupt a connect step: the first non-JSON stdout line and
/// the process exit (stdio only).
#[derive(Default)]
struct Guards {
    garbage: Option<watch::Receiver<Option<String>>>,
    exit: Option<watch::Receiver<Option<ExitInfo>>>,
}

enum Interrupt {
    Timeout,
    Garbage(String),
    Exited(ExitInfo),
}

impl Interrupt {
    fn during(self, phase: &'static str) -> Failure {
        match self {
            Interrupt::Timeout => Failure::Timeout(phase),
            Interrupt::Garbage(line) => Failure::Garbage(line),
            Interrupt::Exited(info) => Failure::Exited(phase, info),
        }
    }
}

/// Runs `step` until it finishes, the deadline passes, or a guard fires.
async fn guarded<F: Future>(
    step: F,
    deadline: Instant,
    guards: &mut Guards,
) -> Result<F::Output, Interrupt> {
    let garbage = async {
        // The watch guard is not `Send`: copy the line out before any await.
        let line = match guards.garbage.as_mut() {
            Some(rx) => rx
                .wait_for(Option::is_some)
                .await
                .ok()
                .map(|line| line.clone().unwrap_or_default()),
            None => None,
        };
        match line {
            Some(line) => line,
            None => std::future::pending().await,
        }
    };
    let exit = wait_exit(guards.exit.as_mut());
    tokio::select! {
        biased;
        output = step => Ok(output),
        line = garbage => Err(Interrupt::Garbage(line)),
        info = exit => Err(Interrupt::Exited(info)),
        () = tokio::time::sleep_until(deadline) => Err(Interrupt::Timeout),
    }
}

/// Handshake, then the first lists; list changes announced meanwhile are
/// listed again so the caller starts from the latest lists.
async fn open_session<T, E, A>(
    name: &str,
    client: Client,
    transport: T,
    deadline: Instant,
    guards: &mut Guards,
    notices: &mut mpsc::UnboundedReceiver<McpEvent>,
    dig: Dig,
) -> Result<Session, Failure>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let cancel = CancellationToken::new();
    let transport = RelayedProgress::new(transport.into_transport(), client.relay.clone());
    let serve = client.serve_with_ct(transport, cancel.clone());
    let running = match guarded(serve, deadline, guards).await {
        Ok(Ok(running)) => running,
        Ok(Err(error)) => return Err(Failure::Protocol("initialize", describe_init(&error, dig))),
        Err(interrupt) => return Err(interrupt.during("initialize")),
    };
    // From here a failure drops `running`, whose drop guard ends the session.
    let peer = running.peer().clone();
    // Lists must reflect the server now, not a cached page (servers may send
    // `ttlMs`).
    peer.set_response_cache_config(ClientCacheConfig::disabled())
        .await;
    let info = peer.peer_info();
    let capabilities = Capabilities {
        tools: info
            .as_ref()
            .is_none_or(|info| info.capabilities.tools.is_some()),
        prompts: info
            .as_ref()
            .is_some_and(|info| info.capabilities.prompts.is_some()),
        resources: info
            .as_ref()
            .is_some_and(|info| info.capabilities.resources.is_some()),
    };
    log_peer(name, info.as_deref());

    let mut lists = list_step(name, &peer, capabilities, deadline, guards, dig).await?;
    // Announced during the handshake or the listing: list once more. Later
    // announcements reach the watcher task.
    let mut changed = false;
    while let Ok(notice) = notices.try_recv() {
        changed |= matches!(
            notice,
            McpEvent::ToolsChanged | McpEvent::PromptsChanged | McpEvent::ResourcesChanged
        );
    }
    if changed {
        lists = list_step(name, &peer, capabilities, deadline, guards, dig).await?;
    }
    Ok(Session {
        running,
        cancel,
        peer,
        capabilities,
        lists,
    })
}

async fn list_step(
    name: &str,
    peer: &Peer<RoleClient>,
    capabilities: Capabilities,
    deadline: Instant,
    guards: &mut Guards,
    dig: Dig,
) -> Result<Lists, Failure> {
    match guarded(list_all(name, peer, capabilities, dig), deadline, guards).await {
        Ok(Ok(lists)) => Ok(lists),
        Ok(Err(ListError { phase, message })) => Err(Failure::Protocol(phase, message)),
        Err(interrupt) => Err(interrupt.during("tools/list")),
    }
}

fn log_peer(name: &str, info: Option<&ServerPeerInfo>) {
    match info {
        Some(info) => tracing::debug!(
            server = %name,
            protocol = %info.protocol_version,
            peer = info.server_info.as_ref().map(|i| format!("{} {}", i.name, i.version)),
            "mcp handshake done"
        ),
        None => tracing::debug!(server = %name, "mcp handshake done (no server info)"),
    }
}

struct ListError {
    phase: &'static str,
    message: String,
}

/// Tools, prompts, resources and resource templates, every page. A server
/// without a capability has none of its kind; a failing `prompts/list` or
/// `resources/*` means none of that kind, while a failing `tools/list` is an
/// error.
async fn list_all(
    name: &str,
    peer: &Peer<RoleClient>,
    capabilities: Capabilities,
    dig: Dig,
) -> Result<Lists, ListError> {
    let mut lists = Lists::default();
    if capabilities.tools {
        lists.tools = peer.list_all_tools().await.map_err(|error| ListError {
            phase: "tools/list",
            message: describe(&error, dig),
        })?;
    }
    let optional = |kind: &str, error: &rmcp::service::ServiceError| {
        tracing::debug!(server = %name, error = %describe(error, dig), "{kind} failed; treating as none");
    };
    if capabilities.prompts {
        match peer.list_all_prompts().await {
            Ok(prompts) => lists.prompts = prompts,
            Err(error) => optional("prompts/list", &error),
        }
    }
    if capabilities.resources {
        match peer.list_all_resources().await {
            Ok(resources) => lists.resources = resources,
            Err(error) => optional("resources/list", &error),
        }
        match peer.list_all_resource_templates().await {
            Ok(templates) => lists.templates = templates,
            Err(error) => optional("resources/templates/list", &error),
        }
    }
    Ok(lists)
}

/// The error of a failure; `exited` is how the process ended, if it did.
fn failure_message(failure: Failure, timeout: Duration, exited: Option<ExitInfo>) -> StartError {
    let (reason, message) = match failure {
        Failure::Timeout(phase) => (
            Reason::StartupTimeout,
            format!(
                "complete the MCP handshake within {}: no answer to {phase}",
                humantime::format_duration(timeout)
            ),
        ),
        Failure::Garbage(line) => (
            Reason::StartFailed,
            format!(
                "start the MCP session: the server wrote non-JSON-RPC output on stdout: {line:?}"
            ),
        ),
        Failure::Exited(phase, info) => (
            Reason::StartFailed,
            format!("start the MCP session: the server {info} during {phase}"),
        ),
        Failure::Protocol(phase, error) => match exited {
            Some(info) => (
                Reason::StartFailed,
                format!("start the MCP session: the server {info} during {phase}"),
            ),
            None => (Reason::StartFailed, format!("{phase}: {error}")),
        },
    };
    StartError::new(reason, message)
}

async fn connect_stdio(
    spawner: &Spawner,
    name: &str,
    spec: &McpServerSpec,
    workspace: &Path,
    timeouts: McpTimeouts,
    relay: Arc<Relay>,
) -> Result<Opened, StartError> {
    let program = spec.command.clone().unwrap_or_default();
    let cwd = match spec.cwd.as_deref() {
        Some(cwd) if !cwd.is_empty() => workspace.join(cwd),
        _ => workspace.to_owned(),
    };
    let process_spec = ProcessSpec {
        program,
        args: spec.args.clone().unwrap_or_default(),
        env: spec.env.clone().unwrap_or_default(),
        cwd: Some(cwd),
    };
    let deadline = Instant::now() + timeouts.stdio_handshake;
    let mut process = spawner.spawn(&process_spec).await?;
    tracing::debug!(server = %name, pid = process.pid(), "mcp server spawned");

    let (Some(stdin), Some(stdout)) = (process.take_stdin(), process.take_stdout()) else {
        process.stop(FAILED_START_GRACE).await;
        return Err(StartError::new(
            Reason::StartFailed,
            "start the MCP session: the process has no stdio pipes",
        ));
    };
    let (garbage_tx, garbage_rx) = watch::channel(None);
    let stdout = StdoutWatch::new(name, stdout, garbage_tx, relay.clone());
    let mut guards = Guards {
        garbage: Some(garbage_rx),
        exit: Some(process.exit_watch()),
    };
    let (client, mut notices, stopped) = Client::new(name, relay.clone());
    let opened = open_session(
        name,
        client,
        (stdout, stdin),
        deadline,
        &mut guards,
        &mut notices,
        dig_nothing,
    )
    .await;
    // A non-JSON line read before the last answer does not interrupt the
    // step that was already done: check once more.
    let garbage = guards.garbage.as_ref().and_then(|rx| rx.borrow().clone());
    let failure = match (opened, garbage) {
        (Ok(session), None) => {
            return Ok(Opened {
                session,
                process: Some(process),
                notices,
                stopped,
                refresh_timeout: timeouts.stdio_handshake,
                dig: dig_nothing,
                relay,
            });
        }
        // Dropping the session closes the server's stdin.
        (Ok(_session), Some(line)) => Failure::Garbage(line),
        (Err(failure), _) => failure,
    };
    stopped.store(true, Ordering::SeqCst);
    // Stdout closed under rmcp: the exit status gets a moment to arrive.
    let settle = matches!(failure, Failure::Protocol(..));
    let exited = exit_of_failed_start(&process, settle).await;
    let tail = stop_failed_start(&mut process).await;
    Err(failure_message(failure, timeouts.stdio_handshake, exited).with_stderr_tail(tail))
}

/// Connects to a remote server over streamable HTTP (`httpUrl`) or the
/// legacy SSE transport (`url`); the endpoint, TLS, OAuth and the watch for
/// a lost session are [`remote`]'s.
async fn connect_http(
    name: &str,
    spec: &McpServerSpec,
    timeouts: McpTimeouts,
    relay: Arc<Relay>,
) -> Result<Opened, StartError> {
    let shown = redact_url(remote::url_of(spec)?);
    let in_context = |error: StartError| StartError {
        message: format!("connect to {shown}: {}", redact_urls(&error.message)),
        ..error
    };
    let deadline = Instant::now() + timeouts.remote_handshake;
    let (client, mut notices, stopped) = Client::new(name, relay.clone());
    // A lost session is reported as the server's exit, through the channel
    // the watcher task forwards, so the controller reconnects at once.
    let exits = client.notices.clone();
    let watch = remote::SessionWatch::new(move |why| {
        let _ = exits.send(McpEvent::Exited(McpExit::Closed(redact_urls(&why))));
    });
    let opened =
        match remote::connect(name, spec, &watch, deadline, timeouts.remote_handshake).await {
            Ok(transport) => {
                let mut guards = Guards::default();
                open_session(
                    name,
                    client,
                    transport,
                    deadline,
                    &mut guards,
                    &mut notices,
                    remote::dig,
                )
                .await
                .map_err(|failure| {
                    watch.auth_required(name).unwrap_or_else(|| {
                        failure_message(failure, timeouts.remote_handshake, None)
                    })
                })
            }
            Err(error) => Err(error),
        };
    match opened {
        Ok(session) => {
            watch.arm();
            tracing::debug!(server = %name, url = %shown, "remote mcp session open");
            Ok(Opened {
                session,
                process: None,
                notices,
                stopped,
                refresh_timeout: timeouts.remote_handshake,
                dig: remote::dig,
                relay,
            })
        }
        Err(error) => {
            stopped.store(true, Ordering::SeqCst);
            Err(in_context(error))
        }
    }
}

/// `url` without user info, query or fragment (they may carry credentials).
fn redact_url(url: &str) -> String {
    let url = url.split(['?', '#']).next().unwrap_or_default();
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let host = authority
                .rsplit_once('@')
                .map_or(authority, |(_, host)| host);
            format!("{scheme}://{host}{path}")
        }
        None => url.to_owned(),
    }
}

// ---- the client handler ----

/// rmcp client handler: list-change notifications become [`McpEvent`]s on a
/// channel the watcher task (or, while connecting, `open_session`) drains;
/// what the server sends for a forwarded request goes through the [`Relay`].
struct Client {
    name: Arc<str>,
    notices: mpsc::UnboundedSender<McpEvent>,
    stopped: Arc<AtomicBool>,
    relay: Arc<Relay>,
}

impl Client {
    fn new(
        name: &str,
        relay: Arc<Relay>,
    ) -> (Client, mpsc::UnboundedReceiver<McpEvent>, Arc<AtomicBool>) {
        let (notices, rx) = mpsc::unbounded_channel();
        let stopped = Arc::new(AtomicBool::new(false));
        let client = Client {
            name: name.into(),
            notices,
            stopped: Arc::clone(&stopped),
            relay,
        };
        (client, rx, stopped)
    }

    /// A server request goes to the client whose call is in flight.
    async fn forward(&self, request: ServerRequest, what: &str) -> Result<ClientResult, ErrorData> {
        match self.relay.current_caller() {
            Some(caller) => caller.forward(request).await,
            None => Err(ErrorData::invalid_request(
                format!(
                    "{what} is only available while a client's call to this server is in flight"
                ),
                None,
            )),
        }
    }

    fn notify(&self, event: McpEvent) {
        self.relay.heard();
        if self.stopped.load(Ordering::SeqCst) {
            return;
        }
        tracing::debug!(server = %self.name, event = ?event, "mcp notification");
        let _ = self.notices.send(event);
    }
}

impl ClientHandler for Client {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.notify(McpEvent::ToolsChanged);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.notify(McpEvent::PromptsChanged);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.notify(McpEvent::ResourcesChanged);
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.relay
            .broadcast(ServerNotification::LoggingMessageNotification(
                LoggingMessageNotification::new(params),
            ));
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.relay
            .broadcast(ServerNotification::ResourceUpdatedNotification(
                ResourceUpdatedNotification::new(params),
            ));
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let root = self.relay.root();
        let uri = lsp_types::Url::from_directory_path(root)
            .map(String::from)
            .unwrap_or_else(|()| format!("file://{}", root.display()));
        let mut entry = Root::new(uri);
        entry.name = root.file_name().map(|n| n.to_string_lossy().into_owned());
        Ok(ListRootsResult::new(vec![entry]))
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
        match self.forward(request, "sampling").await? {
            ClientResult::CreateMessageResult(result) => Ok(*result),
            _ => Err(ErrorData::internal_error(
                "the client answered sampling/createMessage with another result",
                None,
            )),
        }
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
        match self.forward(request, "elicitation").await? {
            ClientResult::ElicitResult(result) => Ok(result),
            _ => Err(ErrorData::internal_error(
                "the client answered elicitation/create with another result",
                None,
            )),
        }
    }

    fn get_info(&self) -> ClientConfig {
        #[allow(deprecated)]
        let capabilities = ClientCapabilities::builder()
            .enable_roots()
            .enable_sampling()
            .enable_elicitation()
            .build();
        ClientConfig::new(
            capabilities,
            Implementation::new("steward", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

// ---- the watcher task ----

struct WatchArgs {
    name: String,
    running: RunningService<RoleClient, Client>,
    cancel: CancellationToken,
    peer: Peer<RoleClient>,
    notices: mpsc::UnboundedReceiver<McpEvent>,
    exit: Option<watch::Receiver<Option<ExitInfo>>>,
    on_event: McpEventHandler,
    stopped: Arc<AtomicBool>,
    timeouts: McpTimeouts,
    close: oneshot::Receiver<Instant>,
    dig: Dig,
    relay: Arc<Relay>,
}

type PingFuture = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// Forwards notifications, reports the end of the session, pings; on `close`
/// closes the session by the deadline it is given and returns silently.
async fn watch_session(args: WatchArgs) {
    let WatchArgs {
        name,
        running,
        cancel,
        peer,
        mut notices,
        mut exit,
        on_event,
        stopped,
        timeouts,
        mut close,
        dig,
        relay,
    } = args;
    let emit = |event: McpEvent| {
        if !stopped.load(Ordering::SeqCst) {
            tracing::debug!(server = %name, event = ?event, "mcp event");
            on_event(event);
        }
    };
    let session = running.waiting();
    tokio::pin!(session);
    let pinging = !timeouts.ping_interval.is_zero();
    let mut next_ping = next_ping_slot(Instant::now(), timeouts.ping_interval);
    // The ping in flight, and when it was sent.
    let mut ping: Option<(PingFuture, Instant)> = None;
    let mut unresponsive = false;
    let mut notices_open = true;
    // A remote session's loss comes as a notice; it is the end: nothing
    // after it (a ping failing on the dead session) is reported.
    let mut ended = false;

    loop {
        tokio::select! {
            biased;
            deadline = &mut close => {
                let deadline = deadline.unwrap_or_else(|_| Instant::now());
                cancel.cancel();
                if tokio::time::timeout_at(deadline, &mut session).await.is_err() {
                    tracing::debug!(server = %name, "mcp session did not close in time");
                }
                return;
            }
            notice = notices.recv(), if notices_open => match notice {
                Some(_) if ended => {}
                Some(event) => {
                    ended = matches!(event, McpEvent::Exited(_));
                    emit(event);
                }
                None => notices_open = false,
            },
            info = wait_exit(exit.as_mut()) => {
                emit(McpEvent::Exited(McpExit::Process(info)));
                return;
            }
            _ = &mut session => {
                if let Some(end) = session_ended(exit.as_mut(), &mut close).await
                    && !ended
                {
                    emit(McpEvent::Exited(end));
                }
                return;
            }
            () = tokio::time::sleep_until(next_ping), if pinging && !unresponsive && !ended && ping.is_none() => {
                let now = Instant::now();
                // A server that talked within the interval, or is busy with a
                // call, is alive: no ping (and no controller CPU) for it.
                let recently = now.checked_sub(timeouts.ping_interval).unwrap_or(now);
                if relay.in_flight() > 0 || relay.heard_since(recently) {
                    next_ping = next_ping_slot(now, timeouts.ping_interval);
                    continue;
                }
                // Only no answer at all counts: a slow answer, or an error
                // answer (a server without `ping`), is alive.
                let patience = timeouts.ping_timeout * 2;
                ping = Some((Box::pin(ping_once(peer.clone(), patience, dig)), now));
            }
            result = async { ping.as_mut().expect("guarded by is_some").0.as_mut().await }, if ping.is_some() => {
                let sent = ping.take().map(|(_, sent)| sent).unwrap_or_else(Instant::now);
                next_ping = next_ping_slot(Instant::now(), timeouts.ping_interval);
                let Err(message) = result else { continue };
                if ended {
                    continue;
                }
                if relay.heard_since(sent) {
                    tracing::debug!(server = %name, error = %message, "no answer to ping, but the server talked meanwhile");
                    continue;
                }
                // A ping fails when the session ends, too: report the end.
                if (&mut session).now_or_never().is_some() {
                    if let Some(end) = session_ended(exit.as_mut(), &mut close).await {
                        emit(McpEvent::Exited(end));
                    }
                    return;
                }
                if exit.as_ref().is_some_and(|rx| rx.borrow().is_some()) {
                    continue; // the exit branch reports it
                }
                unresponsive = true;
                emit(McpEvent::Unresponsive(format!(
                    "{message}, and nothing else from the server meanwhile"
                )));
            }
        }
    }
}

/// How the session ended; `None` when a close was asked for meanwhile.
async fn session_ended(
    exit: Option<&mut watch::Receiver<Option<ExitInfo>>>,
    close: &mut oneshot::Receiver<Instant>,
) -> Option<McpExit> {
    let Some(exit) = exit else {
        return Some(McpExit::Closed("closed the connection".to_owned()));
    };
    tokio::select! {
        biased;
        _ = close => None,
        info = tokio::time::timeout(EXIT_SETTLE, wait_exit(Some(exit))) => Some(match info {
            Ok(info) => McpExit::Process(info),
            Err(_) => McpExit::Closed("closed its stdout".to_owned()),
        }),
    }
}

/// Pings of every session share a budget: at most this many per interval.
pub const PING_BUDGET: u32 = 16;

/// The next ping time of a session: one interval from `now`, or later when
/// the budget of that interval is spent — pings of all sessions are spaced
/// at least `interval / PING_BUDGET` apart, so the cost of liveness checks
/// is flat in the number of servers (a server that talks needs none; one
/// that stays silent is checked less often when there are many).
fn next_ping_slot(now: Instant, interval: Duration) -> Instant {
    // Keyed by interval: sessions of one controller share one.
    static LAST: Mutex<Vec<(Duration, Instant)>> = Mutex::new(Vec::new());
    let spacing = interval / PING_BUDGET;
    let wanted = now + interval;
    let mut last = lock(&LAST);
    match last.iter_mut().find(|(i, _)| *i == interval) {
        Some((_, previous)) => {
            let slot = wanted.max(*previous + spacing);
            *previous = slot;
            slot
        }
        None => {
            last.push((interval, wanted));
            wanted
        }
    }
}

/// `Ok` for any answer, an error one included (a server without `ping`);
/// `Err` only when nothing came back within `timeout`.
async fn ping_once(peer: Peer<RoleClient>, timeout: Duration, dig: Dig) -> Result<(), String> {
    // The whole request is bounded here: rmcp's own request timeout also
    // sends a cancel notification, which can hang on a hung HTTP server.
    let request = peer.send_request(ClientRequest::PingRequest(PingRequest::default()));
    match tokio::time::timeout(timeout, request).await {
        Ok(Ok(_)) | Ok(Err(rmcp::service::ServiceError::McpError(_))) => Ok(()),
        Ok(Err(error)) => Err(format!("ping failed: {}", describe(&error, dig))),
        Err(_) => Err(format!(
            "no answer to ping within {}",
            humantime::format_duration(timeout)
        )),
    }
}

// ---- stdout watch ----

/// Passes the server's stdout through to rmcp and flags lines that are not
/// JSON (rmcp skips them silently). The first one is published on `garbage`
/// (while connecting it fails the start); later ones are only logged.
struct StdoutWatch<R> {
    inner: R,
    name: Arc<str>,
    line: LineState,
    /// The current non-JSON line, up to [`GARBAGE_SAMPLE_BYTES`].
    sample: Vec<u8>,
    garbage: watch::Sender<Option<String>>,
    /// Non-JSON lines seen so far (the first is still being published while
    /// it grows).
    seen: u32,
    /// Told whenever the server writes anything.
    relay: Arc<Relay>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LineState {
    /// Only whitespace (or a byte-order mark) so far.
    Start,
    /// Starts like JSON: rmcp's to judge.
    Json,
    /// Not JSON.
    Garbage,
}

impl<R> StdoutWatch<R> {
    fn new(
        name: &str,
        inner: R,
        garbage: watch::Sender<Option<String>>,
        relay: Arc<Relay>,
    ) -> Self {
        StdoutWatch {
            inner,
            name: name.into(),
            line: LineState::Start,
            sample: Vec::new(),
            garbage,
            seen: 0,
            relay,
        }
    }

    fn scan(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            match (self.line, byte) {
                (_, b'\n') => {
                    if self.line == LineState::Garbage {
                        self.end_garbage_line();
                    }
                    self.line = LineState::Start;
                }
                (LineState::Start, b' ' | b'\t' | b'\r' | 0xEF | 0xBB | 0xBF) => {}
                (LineState::Start, b'{' | b'[') => self.line = LineState::Json,
                (LineState::Start, _) => {
                    self.line = LineState::Garbage;
                    self.sample.clear();
                    self.sample.push(byte);
                }
                (LineState::Garbage, _) if self.sample.len() < GARBAGE_SAMPLE_BYTES => {
                    self.sample.push(byte);
                }
                _ => {}
            }
        }
        // An unterminated line counts as soon as it is seen: a server may
        // write it and then hang.
        if self.line == LineState::Garbage && self.seen == 0 {
            self.publish();
        }
    }

    fn publish(&self) {
        let text = String::from_utf8_lossy(&self.sample).trim_end().to_owned();
        self.garbage.send_if_modified(|current| {
            if current.as_deref() == Some(text.as_str()) {
                return false;
            }
            *current = Some(text);
            true
        });
    }

    fn end_garbage_line(&mut self) {
        if self.seen == 0 {
            self.publish();
        }
        self.seen = self.seen.saturating_add(1);
        let text = String::from_utf8_lossy(&self.sample);
        if self.seen <= GARBAGE_WARNINGS {
            tracing::warn!(server = %self.name, line = %text.trim_end(), "mcp server wrote a non-JSON line on stdout; ignored");
        } else {
            tracing::debug!(server = %self.name, line = %text.trim_end(), "mcp server wrote a non-JSON line on stdout; ignored");
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for StdoutWatch<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled
            && buf.filled().len() > before
        {
            this.relay.heard();
            this.scan(&buf.filled()[before..]);
        }
        polled
    }
}

// ---- helpers ----

/// Finds the cause an error hides from `source()` (rmcp's HTTP transport
/// wraps reqwest's error without exposing it: see `remote::dig`).
type Dig = for<'a> fn(&'a DynError) -> Option<&'a DynError>;
type DynError = dyn std::error::Error + 'static;

fn dig_nothing(_: &DynError) -> Option<&DynError> {
    None
}

/// An error and its causes, `: `-separated, without rmcp's transport type
/// names and with every URL shown as [`redact_url`] does (reqwest's messages
/// carry the full URL).
fn describe(error: &DynError, dig: Dig) -> String {
    let mut text = String::new();
    let mut node = Some(error);
    while let Some(current) = node {
        let part = strip_transport_names(&current.to_string());
        if !part.is_empty() && !text.contains(&part) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&part);
        }
        node = dig(current).or_else(|| current.source());
    }
    redact_urls(&text)
}

/// A handshake error; the transport variant keeps its cause out of `source()`.
fn describe_init(error: &ClientInitializeError, dig: Dig) -> String {
    match error {
        ClientInitializeError::TransportError { error, context } => {
            format!("{context}: {}", describe(error.error.as_ref(), dig))
        }
        other => describe(other, dig),
    }
}

/// Removes rmcp's `Transport [<type name>] error: ` prefixes.
fn strip_transport_names(text: &str) -> String {
    let mut text = text.to_owned();
    while let Some(start) = text.find("Transport [") {
        let Some(end) = text[start..].find("] error: ") else {
            break;
        };
        text.replace_range(start..start + end + "] error: ".len(), "");
    }
    text
}

/// Every `http://` / `https://` URL in `text` as [`redact_url`] shows it.
fn redact_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = ["http://", "https://"]
        .iter()
        .filter_map(|scheme| rest.find(scheme))
        .min()
    {
        out.push_str(&rest[..start]);
        let url = &rest[start..];
        let end = url
            .find(|c: char| c.is_whitespace() || matches!(c, ')' | ',' | '"' | '\'' | '>'))
            .unwrap_or(url.len());
        out.push_str(&redact_url(&url[..end]));
        rest = &url[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    use serde_json::{Value, json};
    use steward_schema::resource::Scope;
    use tokio::sync::mpsc::error::TryRecvError;

    use super::*;
    use crate::runtime::test_support::{SOON, alive, eventually, received, record, recorded_pid};

    /// The fake server binary (see `runtime::fake_bin`).
    fn fake_server() -> PathBuf {
        crate::runtime::test_support::fake_binary("fake-mcp-server")
    }

    fn spawner() -> Spawner {
        Spawner::new().unwrap()
    }

    #[test]
    fn pings_of_all_sessions_are_spread_within_a_budget() {
        let interval = Duration::from_secs(15);
        let now = Instant::now() + Duration::from_secs(3600);
        let slots: Vec<Instant> = (0..40).map(|_| next_ping_slot(now, interval)).collect();
        assert!(slots[0] >= now + interval);
        for pair in slots.windows(2) {
            assert!(
                pair[1] - pair[0] >= interval / PING_BUDGET,
                "spaced by the budget"
            );
        }
        // 40 sessions asking at once: the last waits 39 budget slots.
        assert!(slots[39] >= now + interval + (interval / PING_BUDGET) * 39);
    }

    fn spec(transport: McpTransport) -> McpServerSpec {
        McpServerSpec {
            transport,
            scope: Scope::User,
            command: None,
            args: None,
            env: None,
            cwd: None,
            url: None,
            http_url: None,
            headers: None,
            timeout: None,
            trust: None,
            include_tools: None,
            exclude_tools: None,
            description: None,
            disabled: None,
            oauth: None,
            qwen: Default::default(),
            extension_name: None,
            config_hash: String::new(),
            approval_hash: String::new(),
            as_written: Default::default(),
        }
    }

    /// A stdio spec running the fake with `config` (FAKE_MCP_CONFIG).
    fn fake(config: Value) -> McpServerSpec {
        McpServerSpec {
            command: Some(fake_server().display().to_string()),
            env: Some(BTreeMap::from([(
                "FAKE_MCP_CONFIG".to_owned(),
                config.to_string(),
            )])),
            ..spec(McpTransport::Stdio)
        }
    }

    fn timeouts() -> McpTimeouts {
        McpTimeouts {
            stdio_handshake: SOON,
            remote_handshake: SOON,
            ..McpTimeouts::default()
        }
    }

    fn events() -> (McpEventHandler, mpsc::UnboundedReceiver<McpEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Arc::new(move |event| {
                let _ = tx.send(event);
            }),
            rx,
        )
    }

    async fn next_event(rx: &mut mpsc::UnboundedReceiver<McpEvent>) -> McpEvent {
        tokio::time::timeout(SOON, rx.recv())
            .await
            .expect("no event within the deadline")
            .expect("the event channel closed")
    }

    fn no_more_events(rx: &mut mpsc::UnboundedReceiver<McpEvent>) {
        match rx.try_recv() {
            Err(TryRecvError::Empty | TryRecvError::Disconnected) => {}
            Ok(event) => panic!("unexpected event {event:?}"),
        }
    }

    async fn connect(
        spec: &McpServerSpec,
        workspace: &Path,
        timeouts: McpTimeouts,
    ) -> (
        Result<McpConnection, StartError>,
        mpsc::UnboundedReceiver<McpEvent>,
    ) {
        let (on_event, rx) = events();
        let result =
            McpConnection::connect(&spawner(), "fake", spec, workspace, timeouts, on_event).await;
        (result, rx)
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|item| (*item).to_owned()).collect()
    }

    #[test]
    fn connections_and_their_futures_can_move_between_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        fn assert_send<T: Send>(_: &T) {}
        assert_send_sync::<McpConnection>();
        let spawner = spawner();
        let spec = spec(McpTransport::Sse);
        let (on_event, _rx) = events();
        let connect =
            McpConnection::connect(&spawner, "x", &spec, Path::new("/"), timeouts(), on_event);
        assert_send(&connect);
        fn refresh_and_stop(connection: McpConnection) {
            assert_send(&connection.refresh());
            assert_send(&connection.stop(SOON, SOON));
        }
        let _ = refresh_and_stop;
    }

    #[test]
    fn filter_tools_include_then_exclude_by_exact_name() {
        let tools = strings(&["read", "write", "delete", "list"]);
        assert_eq!(filter_tools(&tools, None, None), tools);
        let include = strings(&["list", "read", "missing"]);
        assert_eq!(
            filter_tools(&tools, Some(&include), None),
            strings(&["read", "list"]),
            "server order is kept"
        );
        let exclude = strings(&["read", "delete"]);
        assert_eq!(
            filter_tools(&tools, None, Some(&exclude)),
            strings(&["write", "list"])
        );
        assert_eq!(
            filter_tools(&tools, Some(&include), Some(&exclude)),
            strings(&["list"]),
            "exclude wins"
        );
        assert!(
            filter_tools(&tools, Some(&[]), None).is_empty(),
            "[] allows none"
        );
        assert_eq!(filter_tools(&tools, None, Some(&[])), tools);
        assert!(filter_tools(&tools, Some(&strings(&["rea"])), None).is_empty());
    }

    #[test]
    fn urls_lose_credentials_and_queries_in_messages() {
        assert_eq!(
            redact_url("http://user:pw@host:8080/mcp?key=secret#x"),
            "http://host:8080/mcp"
        );
        assert_eq!(redact_url("http://host"), "http://host");
        assert_eq!(redact_url("not a url?x"), "not a url");
    }

    #[tokio::test]
    async fn stdio_connect_lists_every_page_of_tools_and_prompts() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let rec = dir.path().join("record.jsonl");
        let tools: Vec<String> = (1..=7).map(|i| format!("tool{i}")).collect();
        let mut spec = fake(json!({
            "tools": tools, "prompts": ["p1", "p2", "p3"], "pageSize": 2, "record": rec,
        }));
        spec.cwd = Some("sub".to_owned());
        let (result, mut rx) = connect(&spec, dir.path(), timeouts()).await;
        let connection = result.unwrap();
        assert_eq!(connection.tools(), tools);
        assert_eq!(connection.prompts(), strings(&["p1", "p2", "p3"]));
        let pid = connection.pid().unwrap();
        assert_eq!(pid, recorded_pid(&rec));
        assert_eq!(
            std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap(),
            dir.path().join("sub").canonicalize().unwrap(),
            "a relative cwd is taken from the workspace"
        );
        assert_eq!(received(&rec, "tools/list").len(), 4, "7 tools, 2 a page");
        assert_eq!(received(&rec, "prompts/list").len(), 2);
        // We offer the newest version that still has `initialize`; the fake
        // does not know it and answers with its own, which we accept.
        let initialize = received(&rec, "initialize");
        assert_eq!(initialize[0]["params"]["protocolVersion"], "2025-11-25");
        assert_eq!(received(&rec, "notifications/initialized").len(), 1);

        let started = Instant::now();
        connection
            .stop(Duration::from_secs(5), Duration::from_secs(5))
            .await;
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        assert!(!alive(pid));
        // Closed by the protocol (stdin), not by a signal.
        let exit = record(&rec)
            .into_iter()
            .find(|event| event["event"] == "exit")
            .expect("the fake recorded its exit");
        assert_eq!(exit["message"]["reason"], "stdin closed");
        assert!(record(&rec).iter().all(|event| event["event"] != "signal"));
        no_more_events(&mut rx);
    }

    #[tokio::test]
    async fn dropping_a_connection_kills_its_server() {
        let dir = tempfile::tempdir().unwrap();
        let (result, mut rx) = connect(&fake(json!({})), dir.path(), timeouts()).await;
        let connection = result.unwrap();
        let pid = connection.pid().unwrap();
        drop(connection);
        eventually("the server is gone", || !alive(pid)).await;
        no_more_events(&mut rx);
    }

    #[tokio::test]
    async fn missing_command_is_command_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = spec(McpTransport::Stdio);
        spec.command = Some("steward-test-no-such-command".to_owned());
        let (result, _rx) = connect(&spec, dir.path(), timeouts()).await;
        let error = result.unwrap_err();
        assert_eq!(error.reason, Reason::CommandNotFound, "{error}");
        assert!(
            error.message.contains("steward-test-no-such-command"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn file_without_execute_permission_is_unsafe() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("server"), "#!/bin/sh\n").unwrap();
        let mut spec = spec(McpTransport::Stdio);
        spec.command = Some("./server".to_owned());
        let (result, _rx) = connect(&spec, dir.path(), timeouts()).await;
        assert_eq!(result.unwrap_err().reason, Reason::UnsafeCommand);
    }

    #[tokio::test]
    async fn hang_in_initialize_times_out_and_leaves_no_process() {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("record.jsonl");
        let spec = fake(json!({
            "hangInInitialize": true, "record": rec, "stderrLines": ["waiting for godot"],
        }));
        let timeouts = McpTimeouts {
            stdio_handshake: Duration::from_millis(500),
            ..timeouts()
        };
        let started = Instant::now();
        let (result, _rx) = connect(&spec, dir.path(), timeouts).await;
        let error = result.unwrap_err();
        assert_eq!(error.reason, Reason::StartupTimeout, "{error}");
        assert!(
            error
                .message
                .starts_with("complete the MCP handshake within 500ms: no answer to initialize"),
            "{error}"
        );
        assert!(error.to_string().ends_with("waiting for godot"), "{error}");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(
            !alive(recorded_pid(&rec)),
            "the server outlived its failed start"
        );
    }

    #[tokio::test]
    async fn crash_during_initialize_fails_with_exit_and_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("record.jsonl");
        let spec = fake(json!({
            "initializeDelayMs": 10_000, "crashAfterMs": 100, "exitCode": 3, "record": rec,
            "stderrLines": ["starting", "fatal: no config"],
        }));
        let (result, _rx) = connect(&spec, dir.path(), timeouts()).await;
        let error = result.unwrap_err();
        assert_eq!(error.reason, Reason::StartFailed, "{error}");
        assert!(
            error.message.starts_with(
                "start the MCP session: the server exited with code 3 during initialize"
            ),
            "{error}"
        );
        assert!(
            error.to_string().ends_with("starting\nfatal: no config"),
            "{error}"
        );
        assert!(!alive(recorded_pid(&rec)));
    }

    #[tokio::test]
    async fn garbage_on_stdout_fails_the_start() {
        for when in ["before_initialize", "after_initialize"] {
            let dir = tempfile::tempdir().unwrap();
            let rec = dir.path().join("record.jsonl");
            let spec = fake(json!({ "garbageOnStdout": when, "record": rec }));
            let (result, _rx) = connect(&spec, dir.path(), timeouts()).await;
            let error = result.unwrap_err();
            assert_eq!(error.reason, Reason::StartFailed, "{when}: {error}");
            assert!(
                error.message.contains("non-JSON-RPC output on stdout")
                    && error.message.contains("this line is not JSON-RPC"),
                "{when}: {error}"
            );
            assert!(!alive(recorded_pid(&rec)), "{when}");
        }
    }

    #[tokio::test]
    async fn list_changed_notifications_become_events_and_refresh_relists() {
        let dir = tempfile::tempdir().unwrap();
        let spec = fake(json!({
            "tools": ["a", "b"], "prompts": ["p"], "pageSize": 1,
            "listChangedAfterMs": 300,
            "toolsAfterChange": ["b", "c", "d"], "promptsAfterChange": ["q"],
        }));
        let (result, mut rx) = connect(&spec, dir.path(), timeouts()).await;
        let connection = result.unwrap();
        assert_eq!(connection.tools(), strings(&["a", "b"]));
        let mut seen = vec![next_event(&mut rx).await, next_event(&mut rx).await];
        seen.sort_by_key(|event| format!("{event:?}"));
        assert_eq!(seen, [McpEvent::PromptsChanged, McpEvent::ToolsChanged]);
        connection.refresh().await.unwrap();
        assert_eq!(connection.tools(), strings(&["b", "c", "d"]));
        assert_eq!(connection.prompts(), strings(&["q"]));
        connection.stop(SOON, SOON).await;
        no_more_events(&mut rx);
    }

    #[tokio::test]
    async fn a_change_announced_while_connecting_is_not_lost() {
        let dir = tempfile::tempdir().unwrap();
        // The change lands during (or right after) the first listing.
        let spec = fake(json!({
            "tools": ["old"], "listChangedAfterMs": 0, "toolsAfterChange": ["new"],
        }));
        let (result, mut rx) = connect(&spec, dir.path(), timeouts()).await;
        let connection = result.unwrap();
        if connection.tools() != strings(&["new"]) {
            assert_eq!(next_event(&mut rx).await, McpEvent::ToolsChanged);
            connection.refresh().await.unwrap();
        }
        assert_eq!(connection.tools(), strings(&["new"]));
        connection.stop(SOON, SOON).await;
    }

    #[tokio::test]
    async fn crash_after_ready_is_an_exited_event() {
        let dir = tempfile::tempdir().unwrap();
        let spec = fake(json!({ "crashAfterMs": 1500, "exitCode": 7, "stderrLines": ["bye"] }));
        let (result, mut rx) = connect(&spec, dir.path(), timeouts()).await;
        let connection = result.unwrap();
        let pid = connection.pid().unwrap();
        assert_eq!(
            next_event(&mut rx).await,
            McpEvent::Exited(McpExit::Process(ExitInfo {
                code: Some(7),
                signal: None
            }))
        );
        assert!(!alive(pid));
        assert_eq!(connection.stderr_tail(5), ["bye"]);
        let exit = McpExit::Process(ExitInfo {
            code: Some(7),
            signal: None,
        });
        assert_eq!(exit.to_string(), "exited with code 7");
        connection.stop(SOON, SOON).await;
        no_more_events(&mut rx);
    }

    /// Pings received by the fake, as the times (ms since its start) they
    /// arrived.
    fn pings(rec: &Path) -> Vec<u64> {
        let text = std::fs::read_to_string(rec).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["event"] == "recv" && e["message"]["method"] == "ping")
            .filter_map(|e| e["t"].as_u64())
            .collect()
    }

    fn fast_pings() -> McpTimeouts {
        McpTimeouts {
            ping_interval: Duration::from_millis(100),
            ping_timeout: Duration::from_millis(200),
            ..timeouts()
        }
    }

    #[tokio::test]
    async fn a_ping_answered_with_an_error_is_alive() {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("record.jsonl");
        let spec = fake(json!({ "pingError": true, "record": rec }));
        let (result, mut rx) = connect(&spec, dir.path(), fast_pings()).await;
        let connection = result.unwrap();
        eventually("three pings answered with an error", || {
            pings(&rec).len() >= 3
        })
        .await;
        no_more_events(&mut rx);
        connection.stop(SOON, SOON).await;
    }

    #[tokio::test]
    async fn a_busy_server_that_answers_pings_slowly_is_alive() {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("record.jsonl");
        // Slower than the ping timeout (200 ms), but it answers.
        let spec = fake(json!({ "pingDelayMs": 300, "record": rec }));
        let (result, mut rx) = connect(&spec, dir.path(), fast_pings()).await;
        let connection = result.unwrap();
        eventually("three slow pings", || pings(&rec).len() >= 3).await;
        no_more_events(&mut rx);
        connection.stop(SOON, SOON).await;
    }

    struct NoCaller;

    impl Caller for NoCaller {
        fn progress(
            &self,
            _: rmcp::model::ProgressNotificationParam,
        ) -> futures::future::BoxFuture<'static, ()> {
            Box::pin(async {})
        }
        fn forward(
            &self,
            _: ServerRequest,
        ) -> futures::future::BoxFuture<'static, Result<ClientResult, ErrorData>> {
            Box::pin(async { Err(ErrorData::internal_error("no client", None)) })
        }
    }

    #[tokio::test]
    async fn a_server_with_a_call_in_flight_is_not_pinged() {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("record.jsonl");
        let spec = fake(json!({ "tools": ["work"], "record": rec }));
        let (result, mut rx) = connect(&spec, dir.path(), fast_pings()).await;
        let connection = result.unwrap();
        let params = rmcp::model::CallToolRequestParams::new("work")
            .with_arguments(json!({ "sleepMs": 1000 }).as_object().unwrap().clone());
        let answer = connection
            .handle()
            .call(
                ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params)),
                Arc::new(NoCaller),
                None,
                SOON,
                &CancellationToken::new(),
            )
            .await;
        assert!(answer.is_ok(), "{answer:?}");
        let text = std::fs::read_to_string(&rec).unwrap();
        let events: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let call_at = events
            .iter()
            .find(|e| e["event"] == "recv" && e["message"]["method"] == "tools/call")
            .and_then(|e| e["t"].as_u64())
            .unwrap();
        let during: Vec<u64> = pings(&rec)
            .into_iter()
            .filter(|t| *t > call_at + 150 && *t < call_at + 1000)
            .collect();
        assert!(during.is_empty(), "pinged during the call at {during:?}");
        no_more_events(&mut rx);
        connection.stop(SOON, SOON).await;
    }

    #[tokio::test]
    async fn a_server_that_stops_answering_is_unresponsive() {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("record.jsonl");
        let spec = fake(json!({ "stopAnsweringAfterMs": 1500, "record": rec }));
        let timeouts = McpTimeouts {
            ping_interval: Duration::from_millis(100),
            ping_timeout: Duration::from_millis(200),
            ..timeouts()
        };
        let (result, mut rx) = connect(&spec, dir.path(), timeouts).await;
        let connection = result.unwrap();
        let McpEvent::Unresponsive(message) = next_event(&mut rx).await else {
            panic!("expected Unresponsive");
        };
        assert_eq!(
            message,
            "no answer to ping within 400ms, and nothing else from the server meanwhile"
        );
        assert!(
            !received(&rec, "ping").is_empty(),
            "answered pings came first"
        );
        let pid = connection.pid().unwrap();
        assert!(alive(pid), "hung, not dead");
        connection.stop(SOON, SOON).await;
        assert!(!alive(pid));
        no_more_events(&mut rx);
    }

    #[tokio::test]
    async fn stop_kills_a_server_that_ignores_stdin_close_and_sigterm() {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("record.jsonl");
        let mut spec = fake(json!({ "ignoreSigterm": true, "record": rec }));
        // The fake exits when its stdin closes; the shell then becomes a
        // `sleep` that inherited an ignored SIGTERM.
        spec.command = Some("sh".to_owned());
        spec.args = Some(vec![
            "-c".to_owned(),
            r#"trap '' TERM; "$0"; exec sleep 1000"#.to_owned(),
            fake_server().display().to_string(),
        ]);
        let (result, mut rx) = connect(&spec, dir.path(), timeouts()).await;
        let connection = result.unwrap();
        let pid = connection.pid().unwrap();
        let (close, grace) = (Duration::from_millis(300), Duration::from_millis(300));
        let started = Instant::now();
        connection.stop(close, grace).await;
        let elapsed = started.elapsed();
        assert!(!alive(pid), "the server survived stop");
        assert!(elapsed >= close + grace, "{elapsed:?}");
        assert!(
            elapsed < close + grace + Duration::from_secs(3),
            "{elapsed:?}"
        );
        no_more_events(&mut rx);
    }

    /// Starts the fake in HTTP mode; returns the process and its endpoint.
    async fn http_fake(dir: &Path, mut config: Value) -> (ManagedProcess, String) {
        let port_file = dir.join("port");
        config["http"] = json!({ "portFile": port_file });
        let process = spawner()
            .spawn(&ProcessSpec {
                program: fake_server().display().to_string(),
                env: BTreeMap::from([("FAKE_MCP_CONFIG".to_owned(), config.to_string())]),
                cwd: Some(dir.to_owned()),
                ..ProcessSpec::default()
            })
            .await
            .unwrap();
        eventually("the fake listens", || port_file.exists()).await;
        let port = std::fs::read_to_string(&port_file).unwrap();
        (process, format!("http://127.0.0.1:{port}/mcp"))
    }

    fn http_spec(url: &str) -> McpServerSpec {
        McpServerSpec {
            http_url: Some(url.to_owned()),
            headers: Some(BTreeMap::from([
                (
                    "Authorization".to_owned(),
                    "Bearer not-a-real-token".to_owned(),
                ),
                ("X-Steward-Test".to_owned(), "1".to_owned()),
            ])),
            ..spec(McpTransport::Http)
        }
    }

    #[tokio::test]
    async fn http_connect_lists_pings_and_follows_list_changes() {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("record.jsonl");
        let (mut server, url) = http_fake(
            dir.path(),
            json!({
                "tools": ["t1", "t2", "t3"], "prompts": ["p1"], "pageSize": 2, "record": rec,
                "listChangedAfterMs": 300, "toolsAfterChange": ["t4"],
            }),
        )
        .await;
        let timeouts = McpTimeouts {
            ping_interval: Duration::from_millis(50),
            ..timeouts()
        };
        let (result, mut rx) = connect(&http_spec(&url), dir.path(), timeouts).await;
        let connection = result.unwrap();
        assert_eq!(connection.pid(), None);
        assert_eq!(connection.tools(), strings(&["t1", "t2", "t3"]));
        assert_eq!(connection.prompts(), strings(&["p1"]));
        // The notification comes over the SSE stream.
        assert_eq!(next_event(&mut rx).await, McpEvent::ToolsChanged);
        connection.refresh().await.unwrap();
        assert_eq!(connection.tools(), strings(&["t4"]));
        eventually("pings reach the server", || {
            received(&rec, "ping").len() >= 2
        })
        .await;
        connection.stop(SOON, SOON).await;
        no_more_events(&mut rx);
        server.stop(Duration::from_secs(5)).await;
    }

    #[tokio::test]
    async fn http_server_going_away_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let (mut server, url) = http_fake(dir.path(), json!({})).await;
        let timeouts = McpTimeouts {
            ping_interval: Duration::from_millis(50),
            ping_timeout: Duration::from_millis(500),
            ..timeouts()
        };
        let (result, mut rx) = connect(&http_spec(&url), dir.path(), timeouts).await;
        let connection = result.unwrap();
        server.stop(Duration::from_secs(5)).await;
        let event = next_event(&mut rx).await;
        assert!(
            matches!(
                event,
                McpEvent::Exited(McpExit::Closed(_)) | McpEvent::Unresponsive(_)
            ),
            "{event:?}"
        );
        // The end is reported once: pings failing on the dead session in
        // the next few intervals (an absence can only be watched for a
        // while) say nothing more.
        tokio::time::sleep(timeouts.ping_interval * 6).await;
        no_more_events(&mut rx);
        connection
            .stop(Duration::from_secs(1), Duration::from_secs(1))
            .await;
        no_more_events(&mut rx);
    }

    #[tokio::test]
    async fn http_connect_failures_are_start_failed() {
        let dir = tempfile::tempdir().unwrap();
        // A port nobody listens on.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}/mcp?token=secret");
        let (result, _rx) = connect(&http_spec(&url), dir.path(), timeouts()).await;
        let error = result.unwrap_err();
        assert_eq!(error.reason, Reason::StartFailed, "{error}");
        assert!(
            error
                .message
                .starts_with(&format!("connect to http://127.0.0.1:{port}/mcp: ")),
            "{error}"
        );
        assert!(!error.message.contains("secret"), "{error}");

        // https is supported: the failure is the connection's.
        let (result, _rx) = connect(
            &http_spec("https://127.0.0.1:1/mcp"),
            dir.path(),
            timeouts(),
        )
        .await;
        let error = result.unwrap_err();
        assert_eq!(error.reason, Reason::StartFailed);
        assert!(
            error
                .message
                .starts_with("connect to https://127.0.0.1:1/mcp: "),
            "{error}"
        );

        let mut spec = http_spec("http://127.0.0.1:1/mcp");
        spec.headers = Some(BTreeMap::from([(
            "Mcp-Session-Id".to_owned(),
            "x".to_owned(),
        )]));
        let (result, _rx) = connect(&spec, dir.path(), timeouts()).await;
        assert!(
            result
                .unwrap_err()
                .message
                .contains("header Mcp-Session-Id is set by the MCP transport")
        );
    }

    #[tokio::test]
    async fn http_handshake_is_bounded_by_the_remote_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let (mut server, url) = http_fake(dir.path(), json!({ "hangInInitialize": true })).await;
        let timeouts = McpTimeouts {
            remote_handshake: Duration::from_millis(300),
            ..timeouts()
        };
        let (result, _rx) = connect(&http_spec(&url), dir.path(), timeouts).await;
        let error = result.unwrap_err();
        assert_eq!(error.reason, Reason::StartupTimeout, "{error}");
        assert!(error.message.contains("within 300ms"), "{error}");
        server.stop(Duration::from_secs(5)).await;
    }

    /// Numbers, not a pass/fail test:
    /// `cargo test -p steward --lib mcp::tests::measure -- --ignored --nocapture`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "measurement"]
    async fn measure_connect_latency_and_memory() {
        fn rss_kib() -> u64 {
            std::fs::read_to_string("/proc/self/status")
                .unwrap()
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|value| value.trim().trim_end_matches(" kB").trim().parse().ok())
                .unwrap()
        }
        let dir = tempfile::tempdir().unwrap();
        let spawner = spawner();
        let spec = fake(json!({ "tools": ["a", "b", "c"], "prompts": ["p"] }));
        let mut latencies = Vec::new();
        for _ in 0..30 {
            let (on_event, _rx) = events();
            let started = Instant::now();
            let connection =
                McpConnection::connect(&spawner, "m", &spec, dir.path(), timeouts(), on_event)
                    .await
                    .unwrap();
            latencies.push(started.elapsed());
            connection.stop(SOON, SOON).await;
        }
        latencies.sort();
        let n = 50;
        let before = rss_kib();
        let mut connections = Vec::new();
        for i in 0..n {
            let (on_event, _rx) = events();
            connections.push(
                McpConnection::connect(
                    &spawner,
                    &format!("m{i}"),
                    &spec,
                    dir.path(),
                    timeouts(),
                    on_event,
                )
                .await
                .unwrap(),
            );
        }
        let after = rss_kib();
        let stop_started = Instant::now();
        futures::future::join_all(connections.into_iter().map(|c| c.stop(SOON, SOON))).await;
        let stop_all = stop_started.elapsed();

        let (mut server, url) = http_fake(dir.path(), json!({ "tools": ["a", "b", "c"] })).await;
        let mut http = Vec::new();
        for _ in 0..30 {
            let (on_event, _rx) = events();
            let started = Instant::now();
            let connection = McpConnection::connect(
                &spawner,
                "h",
                &http_spec(&url),
                dir.path(),
                timeouts(),
                on_event,
            )
            .await
            .unwrap();
            http.push(started.elapsed());
            connection.stop(SOON, SOON).await;
        }
        http.sort();
        server.stop(SOON).await;
        println!(
            "http connect p50 {:?} p95 {:?}",
            http[http.len() / 2],
            http[http.len() * 95 / 100]
        );
        println!(
            "connect p50 {:?} p95 {:?} max {:?}; rss +{} KiB for {n} connections ({} KiB each); stop all {n}: {:?}",
            latencies[latencies.len() / 2],
            latencies[latencies.len() * 95 / 100],
            latencies[latencies.len() - 1],
            after.saturating_sub(before),
            after.saturating_sub(before) / n,
            stop_all,
        );
    }
}

//! Opening a session: spawn a stdio server through the [`Spawner`] or reach
//! a remote one (built by [`remote`]), run the `initialize` handshake
//! ([`Upstream`]), and list what the server offers — all within the
//! handshake timeout, interrupted by the process exiting or a non-JSON line
//! on its stdout. A failure stops whatever was started and says why, with
//! the server's last stderr lines.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{ErrorCode, ProtocolVersion, ServerPeerInfo};
use rmcp::transport::IntoTransport;
use steward_schema::resource::{McpServerSpec, Reason};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::client::{Announced, Client};
use super::describe::{Dig, describe, dig_nothing, redact_url, redact_urls};
use super::lists::{Capabilities, ListError, Lists, list_all};
use super::relay::{Relay, RelayedProgress};
use super::remote;
use super::session::{Upstream, UpstreamError};
use super::stdio::StdioTransport;
use super::stdout::StdoutWatch;
use super::{McpExit, McpTimeouts};
use crate::observe::trace::TARGET;
use crate::runtime::process::{ExitInfo, ManagedProcess, ProcessSpec, SandboxRequest, Spawner};
use crate::runtime::start::{
    FAILED_START_GRACE, StartError, exit_of_failed_start, stop_failed_start, wait_exit,
};

/// What a successful connect hands to the connection.
pub(super) struct Opened {
    pub(super) session: Session,
    pub(super) process: Option<ManagedProcess>,
    /// A remote session's loss (none for a stdio server: its process's
    /// exit says it).
    pub(super) lost: Option<mpsc::UnboundedReceiver<McpExit>>,
    pub(super) announced: Arc<Announced>,
    pub(super) stopped: Arc<AtomicBool>,
    /// Bounds each re-list.
    pub(super) relist_timeout: Duration,
    pub(super) dig: Dig,
    pub(super) relay: Arc<Relay>,
}

/// An initialized session with its first lists.
pub(super) struct Session {
    /// The session's task; it ends with the session.
    pub(super) task: tokio::task::JoinHandle<()>,
    /// Ends the session (the task then closes the transport).
    pub(super) cancel: CancellationToken,
    pub(super) peer: Upstream,
    pub(super) capabilities: Capabilities,
    pub(super) lists: Lists,
}

/// How a session starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lifecycle {
    /// `initialize` (protocol versions through 2025-11-25).
    Initialize,
    /// `server/discover`, stateless (2026-07-28): for a server that turned
    /// `initialize` away as a modern-only server does.
    Discover,
}

/// Whether `error` answered an `initialize` the way a server that speaks
/// only the stateless protocol (2026-07-28) does: a missing version header,
/// a missing client capability, an unsupported version.
fn modern_only(error: &UpstreamError) -> bool {
    matches!(
        error,
        UpstreamError::Server(e) if [
            ErrorCode::HEADER_MISMATCH,
            ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
            ErrorCode::UNSUPPORTED_PROTOCOL_VERSION,
        ]
        .contains(&e.code)
    )
}

/// Why opening a session failed, before it is turned into a message.
enum Failure {
    /// The server turned `initialize` away as a modern-only one does.
    ModernOnly(String),
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
#[allow(clippy::too_many_arguments)] // each is one fact of the handshake
async fn open_session<T, E, A>(
    name: &str,
    client: Client,
    transport: T,
    lifecycle: Lifecycle,
    deadline: Instant,
    guards: &mut Guards,
    dig: Dig,
    probe: bool,
) -> Result<Session, Failure>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let cancel = CancellationToken::new();
    let client = Arc::new(client);
    let announced = client.announced.clone();
    let transport = RelayedProgress::new(transport.into_transport(), client.relay.clone());
    let (peer, task) = Upstream::start(transport, client, cancel.clone());
    // Until the session is handed over, a failure (or a drop) ends its task.
    let end = cancel.clone().drop_guard();
    let handshake = tracing::trace_span!(target: TARGET, "handshake");
    let (phase, started) = match lifecycle {
        Lifecycle::Initialize => (
            "initialize",
            guarded(
                peer.initialize(Client::info()).instrument(handshake),
                deadline,
                guards,
            )
            .await,
        ),
        Lifecycle::Discover => (
            "server/discover",
            guarded(
                peer.discover(Client::info(), ProtocolVersion::V_2026_07_28)
                    .instrument(handshake),
                deadline,
                guards,
            )
            .await,
        ),
    };
    let info = match started {
        Ok(Ok(info)) => info,
        Ok(Err(error)) if lifecycle == Lifecycle::Initialize && modern_only(&error) => {
            return Err(Failure::ModernOnly(describe(&error, dig)));
        }
        Ok(Err(error)) => return Err(Failure::Protocol(phase, describe(&error, dig))),
        Err(interrupt) => return Err(interrupt.during(phase)),
    };
    let capabilities = Capabilities {
        tools: info.capabilities.tools.is_some(),
        prompts: info.capabilities.prompts.is_some(),
        resources: info.capabilities.resources.is_some(),
    };
    log_peer(name, Some(&info));
    // (A stateless session's requests are all of 2026-07-28 already.)
    if probe && lifecycle == Lifecycle::Initialize {
        let discover = tracing::trace_span!(target: TARGET, "discover");
        let probing = peer.probe_per_request().instrument(discover);
        if let Ok(true) = guarded(probing, deadline, guards).await {
            tracing::debug!(server = %name, "the server serves requests of protocol 2026-07-28");
        }
    }

    let mut lists = list_step(name, &peer, capabilities, deadline, guards, dig).await?;
    // Announced during the handshake or the listing: list once more. Later
    // announcements reach the watcher task.
    if !announced.take().is_empty() {
        lists = list_step(name, &peer, capabilities, deadline, guards, dig).await?;
    }
    end.disarm();
    Ok(Session {
        task,
        cancel,
        peer,
        capabilities,
        lists,
    })
}

async fn list_step(
    name: &str,
    peer: &Upstream,
    capabilities: Capabilities,
    deadline: Instant,
    guards: &mut Guards,
    dig: Dig,
) -> Result<Lists, Failure> {
    let discovery = tracing::trace_span!(target: TARGET, "discovery");
    let list = list_all(name, peer, capabilities, dig).instrument(discovery);
    match guarded(list, deadline, guards).await {
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
        Failure::ModernOnly(error) => (Reason::StartFailed, format!("initialize: {error}")),
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

pub(super) async fn connect_stdio(
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
        sandbox: Some(SandboxRequest::of(
            &spec.resolved_sandbox,
            crate::runtime::sandbox::home::mcp_owner(name),
        )?),
    };
    let deadline = Instant::now() + timeouts.stdio_handshake;
    let mut process = spawner
        .spawn(&process_spec)
        .instrument(tracing::trace_span!(target: TARGET, "spawn"))
        .await?;
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
    let (client, stopped) = Client::new(name, relay.clone());
    let announced = client.announced.clone();
    let transport = StdioTransport::new(name, stdout, stdin, announced.clone());
    // A stdio server may serve requests of 2026-07-28 on its session: ask.
    let opened = open_session(
        name,
        client,
        transport,
        Lifecycle::Initialize,
        deadline,
        &mut guards,
        dig_nothing,
        true,
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
                lost: None,
                announced,
                stopped,
                relist_timeout: timeouts.stdio_handshake,
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
/// a lost session are [`remote`]'s. A server that turns `initialize` away
/// as a stateless-only (2026-07-28) server does is connected again with
/// `server/discover`.
pub(super) async fn connect_http(
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
    let mut lifecycle = Lifecycle::Initialize;
    loop {
        let (client, stopped) = Client::new(name, relay.clone());
        let announced = client.announced.clone();
        // A lost session is reported as the server's exit, through the
        // channel the watcher task forwards, so the controller reconnects
        // at once.
        let (exits, lost) = mpsc::unbounded_channel();
        let watch = remote::SessionWatch::new(move |why| {
            let _ = exits.send(McpExit::Closed(redact_urls(&why)));
        });
        let transport =
            match remote::connect(name, spec, &watch, deadline, timeouts.remote_handshake).await {
                Ok(transport) => transport,
                Err(error) => {
                    stopped.store(true, Ordering::SeqCst);
                    return Err(in_context(error));
                }
            };
        let mut guards = Guards::default();
        // A streamable-HTTP server may serve requests of 2026-07-28
        // (outside its session): ask.
        let probe = matches!(transport, remote::RemoteTransport::Streamable(_));
        let opened = open_session(
            name,
            client,
            transport,
            lifecycle,
            deadline,
            &mut guards,
            remote::dig,
            probe,
        )
        .await;
        match opened {
            Ok(session) => {
                watch.set_refused(session.peer.refused().clone());
                watch.arm();
                tracing::debug!(server = %name, url = %shown, ?lifecycle, "remote mcp session open");
                return Ok(Opened {
                    session,
                    process: None,
                    lost: Some(lost),
                    announced,
                    stopped,
                    relist_timeout: timeouts.remote_handshake,
                    dig: remote::dig,
                    relay,
                });
            }
            Err(Failure::ModernOnly(why)) if lifecycle == Lifecycle::Initialize => {
                stopped.store(true, Ordering::SeqCst);
                tracing::debug!(server = %name, %why, "initialize turned away: trying server/discover (2026-07-28)");
                lifecycle = Lifecycle::Discover;
            }
            Err(failure) => {
                stopped.store(true, Ordering::SeqCst);
                let error = watch
                    .auth_required(name)
                    .unwrap_or_else(|| failure_message(failure, timeouts.remote_handshake, None));
                return Err(in_context(error));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use steward_schema::resource::McpTransport;

    use super::*;
    use crate::runtime::mcp::testing::*;

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
}

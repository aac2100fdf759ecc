//! The commands that talk to a running controller through its control
//! socket: `status` (live, `--watch`), `reload`, `stop`, `start`,
//! `restart`, and `run` itself.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use steward_schema::resource::{Item, WorkspaceStatus};
use tokio_util::sync::CancellationToken;

use super::{CommandError, Io};
use crate::cli::args::{LogFormat, RunArgs};
use crate::cli::output::{self, Format, Table};
use crate::control::{self, Request, Response};
use crate::desired::offline::Inputs;
use crate::engine::backoff::{BackoffConfig, CrashLoopConfig};
use crate::engine::reconcile::ReconcileConfig;
use crate::engine::{self, GatewayOptions, RunOptions};
use crate::gateway::GatewayConfig;
use crate::gateway::handover;
use crate::runtime::mcp::McpTimeouts;
use crate::support::logging::{self, PanicFlag};
use crate::support::paths::Paths;

/// How long a one-shot request may wait for the controller (a reload waits
/// for its reconciles, which are bounded by the servers' own timeouts).
pub(super) const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// The runtime a one-shot command talks to the controller on.
pub(super) fn runtime() -> Result<tokio::runtime::Runtime, CommandError> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// The response, or the controller's error as a [`CommandError`].
pub(super) fn answer(response: Response) -> Result<Response, CommandError> {
    if response.ok {
        Ok(response)
    } else {
        Err(CommandError::Controller(
            response.error.unwrap_or_else(|| "unknown error".to_owned()),
        ))
    }
}

/// `steward status` without `--offline`.
#[allow(clippy::too_many_arguments)]
pub fn status(
    paths: &Paths,
    inputs: &Inputs,
    format: Format,
    watch: bool,
    show_secrets: bool,
    env: &BTreeMap<String, String>,
    now: SystemTime,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let rt = runtime()?;
    let socket = paths.socket_path();
    let offline = |io: &mut Io<'_>| offline(paths, inputs, format, show_secrets, env, now, io);
    if !watch {
        let request = if show_secrets {
            Request::StatusWithSecrets { watch: false }
        } else {
            Request::Status
        };
        return match rt.block_on(control::request(&socket, &request, REQUEST_TIMEOUT)) {
            Ok(response) => {
                let status = answer(response)?.status.ok_or_else(|| {
                    CommandError::Controller("the controller sent no status".to_owned())
                })?;
                print_status(&status, format, now, io)
            }
            Err(control::ControlError::Connect { .. }) => offline(io),
            Err(e) => Err(e.into()),
        };
    }
    let request = if show_secrets {
        Request::StatusWithSecrets { watch: true }
    } else {
        Request::Watch
    };
    let mut stream = match rt.block_on(control::stream(&socket, &request)) {
        Ok(s) => s,
        Err(control::ControlError::Connect { .. }) => {
            return offline(io);
        }
        Err(e) => return Err(e.into()),
    };
    let mut previous: Option<WorkspaceStatus> = None;
    let mut header_printed = false;
    let mut layout: Option<Table> = None;
    loop {
        let Some(item) = rt.block_on(stream.recv()) else {
            return Ok(ExitCode::SUCCESS);
        };
        let status = match item.map(answer) {
            Ok(Ok(r)) => match r.status {
                Some(s) => *s,
                None => continue,
            },
            Ok(Err(e)) => return Err(e),
            // The controller went away: the watch ends.
            Err(control::ControlError::Closed) => {
                writeln!(io.err, "the controller stopped")?;
                return Ok(ExitCode::SUCCESS);
            }
            Err(e) => return Err(e.into()),
        };
        let now = SystemTime::now();
        match format {
            Format::Json => {
                writeln!(
                    io.out,
                    "{}",
                    serde_json::to_string(&status).map_err(std::io::Error::other)?
                )?;
            }
            Format::Yaml => {
                write!(
                    io.out,
                    "---\n{}",
                    output::render(&status, Format::Yaml, now)?
                )?;
            }
            Format::Table | Format::Wide => {
                let wide = format == Format::Wide;
                // One layout for the whole watch: rows printed later line
                // up under the header printed first.
                let table = layout.get_or_insert_with(|| Table::for_watch(output::header(wide)));
                let rows = output::rows(&status, wide, now);
                table.fit(&rows);
                // The first document prints every row; later ones only the
                // rows whose item changed (kubectl get -w).
                let changed_rows: Vec<&Vec<String>> = status
                    .items
                    .iter()
                    .zip(&rows)
                    .filter(|(item, _)| previous.as_ref().is_none_or(|p| changed(p, item)))
                    .map(|(_, row)| row)
                    .collect();
                if previous.is_none() && status.items.is_empty() {
                    writeln!(io.err, "no servers are configured for {}", status.workspace)?;
                }
                // The header once, before the first row (which may come
                // later than the first document on an empty workspace).
                if !header_printed && !changed_rows.is_empty() {
                    write!(io.out, "{}", table.header_line())?;
                    header_printed = true;
                }
                for row in changed_rows {
                    write!(io.out, "{}", table.line(row))?;
                }
            }
        }
        io.out.flush()?;
        previous = Some(status);
    }
}

fn changed(prev: &WorkspaceStatus, item: &Item) -> bool {
    let strip = |i: &Item| {
        let mut s = i.status().clone();
        for c in &mut s.conditions {
            c.last_transition_time.clear();
        }
        (
            i.kind(),
            i.name().to_owned(),
            serde_json::to_string(&s).unwrap_or_default(),
        )
    };
    let now = strip(item);
    !prev.items.iter().any(|p| strip(p) == now)
}

fn offline(
    paths: &Paths,
    inputs: &Inputs,
    format: Format,
    show_secrets: bool,
    env: &BTreeMap<String, String>,
    now: SystemTime,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    writeln!(
        io.err,
        "no controller is running for {}; showing the offline view",
        paths.workspace.display()
    )?;
    let status = super::status::document(paths, inputs, show_secrets, env, now);
    print_status(&status, format, now, io)
}

/// Render a status document and its source warnings.
pub fn print_status(
    status: &WorkspaceStatus,
    format: Format,
    now: SystemTime,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let text = output::render(status, format, now)?;
    io.out.write_all(text.as_bytes())?;
    if format.is_table() {
        if status.items.is_empty() {
            writeln!(io.err, "no servers are configured for {}", status.workspace)?;
        }
        for warning in output::source_warnings(status) {
            writeln!(io.err, "{warning}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A failure to reach the controller, said as "none is running" when so.
pub(super) fn need_controller(paths: &Paths, e: control::ControlError) -> CommandError {
    match e {
        control::ControlError::Connect { .. } => CommandError::Controller(format!(
            "reach a controller: none is running for {} (start one with `steward run`)",
            paths.workspace.display()
        )),
        other => other.into(),
    }
}

/// `steward reload`.
pub fn reload(paths: &Paths, io: &mut Io<'_>) -> Result<ExitCode, CommandError> {
    let rt = runtime()?;
    let response = rt
        .block_on(control::request(
            &paths.socket_path(),
            &Request::Reload,
            REQUEST_TIMEOUT,
        ))
        .map_err(|e| need_controller(paths, e))?;
    let response = answer(response)?;
    match response.reload {
        Some(s) => {
            let list = |v: &[String]| {
                if v.is_empty() {
                    "-".to_owned()
                } else {
                    v.join(", ")
                }
            };
            writeln!(io.out, "added:     {}", list(&s.added))?;
            writeln!(io.out, "removed:   {}", list(&s.removed))?;
            writeln!(io.out, "restarted: {}", list(&s.restarted))?;
            writeln!(io.out, "failed:    {}", list(&s.failed))?;
            writeln!(io.out, "unchanged: {}", s.unchanged.len())?;
            for skip in &s.skipped {
                writeln!(io.out, "skipped:   {} ({})", skip.name, skip.reason)?;
            }
            Ok(if s.failed.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        None => {
            writeln!(
                io.out,
                "{}",
                response.message.unwrap_or_else(|| "reloaded".to_owned())
            )?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `steward stop` / `steward start`.
pub fn stop_start(
    paths: &Paths,
    names: &[String],
    stop: bool,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let rt = runtime()?;
    let request = if stop {
        Request::Stop {
            names: names.to_vec(),
        }
    } else {
        Request::Start {
            names: names.to_vec(),
        }
    };
    let response = rt
        .block_on(control::request(
            &paths.socket_path(),
            &request,
            REQUEST_TIMEOUT,
        ))
        .map_err(|e| need_controller(paths, e))?;
    let response = answer(response)?;
    if let Some(m) = response.message {
        writeln!(io.out, "{m}")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `steward restart`: restart each server once and say how it came back.
pub fn restart(paths: &Paths, names: &[String], io: &mut Io<'_>) -> Result<ExitCode, CommandError> {
    let rt = runtime()?;
    let socket = paths.socket_path();
    let ask = |request: &Request| {
        rt.block_on(control::request(&socket, request, REQUEST_TIMEOUT))
            .map_err(|e| need_controller(paths, e))
            .and_then(answer)
    };
    let pids = |status: Option<Box<WorkspaceStatus>>| -> BTreeMap<(String, String), Option<u32>> {
        status
            .map(|s| {
                s.items
                    .iter()
                    .map(|i| ((i.kind().to_string(), i.name().to_owned()), i.status().pid))
                    .collect()
            })
            .unwrap_or_default()
    };
    let before = pids(ask(&Request::Status)?.status);
    ask(&Request::Restart {
        names: names.to_vec(),
    })?;
    let after = ask(&Request::Status)?.status;
    let mut failed = false;
    for item in after.iter().flat_map(|s| s.items.iter()) {
        if !names.iter().any(|n| n == item.name()) {
            continue;
        }
        let key = (item.kind().to_string(), item.name().to_owned());
        let status = item.status();
        let was = before.get(&key).copied().flatten();
        let pid = |p: Option<u32>| p.map_or_else(|| "-".to_owned(), |p| p.to_string());
        match status.phase {
            steward_schema::resource::Phase::Ready => writeln!(
                io.out,
                "restarted {} {} (pid {} -> {})",
                item.kind(),
                item.name(),
                pid(was),
                pid(status.pid)
            )?,
            phase => {
                failed = true;
                let reason = status
                    .reason
                    .map_or_else(String::new, |r| format!(" ({r})"));
                let message = status
                    .message
                    .as_deref()
                    .and_then(|m| m.lines().next())
                    .map_or_else(String::new, |m| format!(": {m}"));
                writeln!(
                    io.err,
                    "restart {} {}: it is {phase:?}{reason}{message}",
                    item.kind(),
                    item.name()
                )?;
            }
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The controller options `steward run` and `steward mcp` take.
fn run_options(workspace: &std::path::Path, args: &RunArgs) -> RunOptions {
    let inputs = args.desired.inputs();
    let ms = Duration::from_millis;
    RunOptions {
        workspace: workspace.to_path_buf(),
        mcp_config: inputs.mcp_config,
        allowed_mcp: inputs.cli.allowed_mcp,
        allowed_lsp: inputs.cli.allowed_lsp,
        no_lsp: !inputs.cli.lsp_enabled,
        debounce: ms(args.debounce_ms),
        workers: args.workers.max(1),
        resync: Duration::from_secs(args.resync_secs.max(1)),
        reconcile: ReconcileConfig {
            mcp: McpTimeouts {
                ping_interval: ms(args.ping_interval_ms),
                ..McpTimeouts::default()
            },
            backoff: BackoffConfig {
                initial: ms(args.start_backoff_ms.max(1)),
                ..BackoffConfig::default()
            },
            crash: CrashLoopConfig {
                initial: ms(args.crash_backoff_ms.max(1)),
                ..CrashLoopConfig::default()
            },
            ..ReconcileConfig::default()
        },
        hold_after_read: args.hold_after_read.clone(),
        gateway: GatewayOptions {
            listen: args.mcp_listen.clone(),
            token_file: args.mcp_token_file.clone(),
            stdio: false,
            config: GatewayConfig {
                page_size: args.mcp_page_size.max(1),
                coalesce: ms(args.mcp_coalesce_ms),
                http_idle: ms(args.mcp_http_idle_ms.max(1)),
                ..GatewayConfig::default()
            },
        },
    }
}

/// SIGINT/SIGTERM cancel `shutdown`; a second signal exits at once.
fn handle_signals(shutdown: CancellationToken) {
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return;
        };
        tokio::select! { _ = int.recv() => {}, _ = term.recv() => {} }
        tracing::info!("signal received: stopping every server (a second signal exits at once)");
        shutdown.cancel();
        tokio::select! { _ = int.recv() => {}, _ = term.recv() => {} }
        tracing::warn!("second signal: exiting at once");
        logging::flush(Duration::from_millis(200));
        std::process::exit(130);
    });
}

/// Run `work` (which runs a controller until `shutdown`) on a multi-thread
/// runtime with signals handled and panics contained: a panic anywhere (a
/// worker, a reaper, the signal handler) must not leave the controller
/// half-alive, so it stops every server and the command fails.
fn with_controller_runtime<F, Fut>(work: F) -> Result<ExitCode, CommandError>
where
    F: FnOnce(CancellationToken) -> Fut,
    Fut: std::future::Future<Output = Result<ExitCode, CommandError>>,
{
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let shutdown = CancellationToken::new();
    let panicked = PanicFlag::default();
    {
        let (shutdown, panicked) = (shutdown.clone(), panicked.clone());
        logging::report_panics(move || {
            panicked.raise();
            shutdown.cancel();
        });
    }
    let result = rt.block_on(async {
        handle_signals(shutdown.clone());
        work(shutdown).await
    });
    drop(rt);
    logging::flush(Duration::from_secs(1));
    let code = result?;
    if panicked.raised() {
        return Err(CommandError::Controller(
            "run the controller: a thread panicked (see the log); every server was stopped"
                .to_owned(),
        ));
    }
    Ok(code)
}

/// `steward run`: until SIGINT/SIGTERM; a second signal exits at once.
pub fn run(workspace: &std::path::Path, args: RunArgs) -> Result<ExitCode, CommandError> {
    logging::install(args.log_format == LogFormat::Json);
    let opts = run_options(workspace, &args);
    with_controller_runtime(|shutdown| async move {
        engine::run(opts, shutdown).await?;
        Ok(ExitCode::SUCCESS)
    })
}

/// How long `steward mcp` tries to reach (or become) the controller.
const ATTACH_DEADLINE: Duration = Duration::from_secs(15);

/// `steward mcp`: bridge stdio to the workspace's controller, or become it.
pub fn mcp(workspace: &std::path::Path, args: RunArgs) -> Result<ExitCode, CommandError> {
    logging::install(args.log_format == LogFormat::Json);
    let env = crate::support::paths::process_env();
    let paths = super::resolve_paths(workspace, &env)?;
    let mut opts = run_options(workspace, &args);
    opts.gateway.stdio = true;
    with_controller_runtime(|shutdown| async move {
        let deadline = tokio::time::Instant::now() + ATTACH_DEADLINE;
        loop {
            if let Ok(stream) = tokio::net::UnixStream::connect(paths.mcp_socket_path()).await {
                tracing::info!(socket = %paths.mcp_socket_path().display(), "attached to the running controller");
                return bridge(stream).await;
            }
            match engine::run(opts.clone(), shutdown.clone()).await {
                Ok(()) => return Ok(ExitCode::SUCCESS),
                // Another controller holds the lock and is not serving yet:
                // attach once its socket is there.
                Err(engine::RunError::Lock(crate::support::lock::LockError::Held { .. }))
                    if tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
    })
}

/// The agent's stdin, read on the runtime when it is a pipe (Python's and
/// Rust's subprocesses) or a socket (Node's: libuv spawns with socket
/// pairs): `tokio::io::stdin` reads on a blocking-pool thread, one more
/// thread hand-off per message in each forwarded call.
fn agent_stdin() -> Box<dyn tokio::io::AsyncRead + Unpin + Send> {
    use std::os::fd::AsFd as _;
    std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .and_then(handover::reader)
        .unwrap_or_else(|| Box::new(tokio::io::stdin()))
}

/// The agent's stdout, written on the runtime when it is a pipe or a socket
/// (see [`agent_stdin`]).
fn agent_stdout() -> Box<dyn tokio::io::AsyncWrite + Unpin + Send> {
    use std::os::fd::AsFd as _;
    std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .and_then(handover::writer)
        .unwrap_or_else(|| Box::new(tokio::io::stdout()))
}

/// Hand the agent's stdin and stdout to the controller, when both are pipes
/// or sockets, and wait until it closes the connection (the session ended)
/// or the agent hangs up. `false`: not handed over, bridge the bytes.
async fn hand_over(stream: &tokio::net::UnixStream) -> bool {
    use std::os::fd::{AsFd as _, AsRawFd as _};
    let (stdin, stdout) = (std::io::stdin(), std::io::stdout());
    if !handover::is_pollable(stdin.as_fd()) || !handover::is_pollable(stdout.as_fd()) {
        return false;
    }
    let fds = [stdin.as_fd().as_raw_fd(), stdout.as_fd().as_raw_fd()];
    let sent = loop {
        if stream.writable().await.is_err() {
            break false;
        }
        match stream.try_io(tokio::io::Interest::WRITABLE, || {
            handover::send(stream.as_fd(), &fds)
        }) {
            Ok(()) => break true,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => {
                tracing::debug!(error = %e, "hand the agent's stdio over");
                break false;
            }
        }
    };
    if !sent {
        return false;
    }
    // The controller serves the agent now; this process only lives as long
    // as the session, as the agent expects of the server it started.
    let mut byte = [0u8; 1];
    loop {
        if stream.readable().await.is_err() {
            return true;
        }
        match stream.try_read(&mut byte) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            _ => return true,
        }
    }
}

/// Copy stdin to the controller's socket and its answers to stdout until
/// either side ends.
async fn bridge(stream: tokio::net::UnixStream) -> Result<ExitCode, CommandError> {
    if hand_over(&stream).await {
        return Ok(ExitCode::SUCCESS);
    }
    let (mut from_controller, mut to_controller) = stream.into_split();
    let upstream = async {
        let mut stdin = agent_stdin();
        let _ = tokio::io::copy(&mut stdin, &mut to_controller).await;
        // The agent hung up: let the controller see the end of the session.
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut to_controller).await;
    };
    let downstream = async {
        let mut stdout = agent_stdout();
        let copied = tokio::io::copy(&mut from_controller, &mut stdout).await;
        let _ = tokio::io::AsyncWriteExt::flush(&mut stdout).await;
        copied
    };
    tokio::pin!(upstream);
    tokio::select! {
        copied = downstream => {
            if copied.is_err() {
                return Err(CommandError::Controller("the controller closed the agent connection".to_owned()));
            }
            Ok(ExitCode::SUCCESS)
        }
        () = &mut upstream => Ok(ExitCode::SUCCESS),
    }
}

//! The commands that talk to a running controller through its control
//! socket: `status` (live, `--watch`), `reload`, `stop`, `start`, and `run`
//! itself.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use steward_schema::resource::{Item, WorkspaceStatus};
use tokio_util::sync::CancellationToken;

use super::{CommandError, Io};
use crate::backoff::{BackoffConfig, CrashLoopConfig};
use crate::cli::{LogFormat, RunArgs};
use crate::control::{self, Request, Response};
use crate::controller::{self, RunOptions};
use crate::logging::{self, PanicFlag};
use crate::offline::{Inputs, offline_status};
use crate::output::{self, Format};
use crate::paths::Paths;
use crate::reconcile::ReconcileConfig;
use crate::runtime::mcp::McpTimeouts;

/// How long a one-shot request may wait for the controller (a reload waits
/// for its reconciles, which are bounded by the servers' own timeouts).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

fn runtime() -> Result<tokio::runtime::Runtime, CommandError> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

fn answer(response: Response) -> Result<Response, CommandError> {
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
    env: &BTreeMap<String, String>,
    now: SystemTime,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let rt = runtime()?;
    let socket = paths.socket_path();
    if !watch {
        return match rt.block_on(control::request(&socket, &Request::Status, REQUEST_TIMEOUT)) {
            Ok(response) => {
                let status = answer(response)?.status.ok_or_else(|| {
                    CommandError::Controller("the controller sent no status".to_owned())
                })?;
                print_status(&status, format, now, io)
            }
            Err(control::ControlError::Connect { .. }) => {
                offline(paths, inputs, format, env, now, io)
            }
            Err(e) => Err(e.into()),
        };
    }
    let mut stream = match rt.block_on(control::watch(&socket)) {
        Ok(s) => s,
        Err(control::ControlError::Connect { .. }) => {
            return offline(paths, inputs, format, env, now, io);
        }
        Err(e) => return Err(e.into()),
    };
    let mut previous: Option<WorkspaceStatus> = None;
    let mut header_printed = false;
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
            Format::Table => {
                let table = output::render_table(&status, now);
                let mut lines = table.lines();
                // An empty document renders no header at all.
                let header = lines.next();
                let rows: Vec<&str> = lines.collect();
                // The first document prints every row; later ones only the
                // rows whose item changed (kubectl get -w).
                let changed_rows: Vec<&str> = status
                    .items
                    .iter()
                    .zip(&rows)
                    .filter(|(item, _)| previous.as_ref().is_none_or(|p| changed(p, item)))
                    .map(|(_, row)| *row)
                    .collect();
                if previous.is_none() && status.items.is_empty() {
                    writeln!(io.err, "no servers are configured for {}", status.workspace)?;
                }
                // The header once, before the first row (which may come
                // later than the first document on an empty workspace).
                if !header_printed
                    && !changed_rows.is_empty()
                    && let Some(header) = header
                {
                    writeln!(io.out, "{header}")?;
                    header_printed = true;
                }
                for row in changed_rows {
                    writeln!(io.out, "{row}")?;
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
    env: &BTreeMap<String, String>,
    now: SystemTime,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    writeln!(
        io.err,
        "no controller is running for {}; showing the offline view",
        paths.workspace.display()
    )?;
    let status = offline_status(paths, inputs, env, now);
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
    if format == Format::Table {
        if status.items.is_empty() {
            writeln!(io.err, "no servers are configured for {}", status.workspace)?;
        }
        for warning in output::source_warnings(status) {
            writeln!(io.err, "{warning}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn need_controller(paths: &Paths, e: control::ControlError) -> CommandError {
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

/// `steward run`: until SIGINT/SIGTERM; a second signal exits at once.
pub fn run(workspace: &std::path::Path, args: RunArgs) -> Result<ExitCode, CommandError> {
    logging::install(args.log_format == LogFormat::Json);
    let inputs = args.desired.inputs();
    let ms = Duration::from_millis;
    let opts = RunOptions {
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
        hold_after_read: args.hold_after_read,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let shutdown = CancellationToken::new();
    // A panic anywhere (a worker, a reaper, the signal handler) must not
    // leave the controller half-alive: stop every server and exit 1.
    let panicked = PanicFlag::default();
    {
        let (shutdown, panicked) = (shutdown.clone(), panicked.clone());
        logging::report_panics(move || {
            panicked.raise();
            shutdown.cancel();
        });
    }
    let result = rt.block_on(async {
        let signals = shutdown.clone();
        tokio::spawn(async move {
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut int), Ok(mut term)) = (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            ) else {
                return;
            };
            tokio::select! { _ = int.recv() => {}, _ = term.recv() => {} }
            tracing::info!(
                "signal received: stopping every server (a second signal exits at once)"
            );
            signals.cancel();
            tokio::select! { _ = int.recv() => {}, _ = term.recv() => {} }
            tracing::warn!("second signal: exiting at once");
            logging::flush(Duration::from_millis(200));
            std::process::exit(130);
        });
        controller::run(opts, shutdown).await
    });
    drop(rt);
    logging::flush(Duration::from_secs(1));
    result?;
    if panicked.raised() {
        return Err(CommandError::Controller(
            "run the controller: a thread panicked (see the log); every server was stopped"
                .to_owned(),
        ));
    }
    Ok(ExitCode::SUCCESS)
}

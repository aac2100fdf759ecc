//! `steward run`: the controller for one workspace, in the foreground,
//! until SIGINT/SIGTERM.

use std::process::ExitCode;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::CommandError;
use crate::cli::args::{LogFormat, PinTools, RunArgs, StartWhen};
use crate::engine::backoff::{BackoffConfig, CrashLoopConfig};
use crate::engine::reconcile::{ReconcileConfig, StartMode};
use crate::engine::{self, GatewayOptions, MetricsOptions, RunOptions};
use crate::gateway::GatewayConfig;
use crate::gateway::pins::PinMode;
use crate::observe::trace;
use crate::runtime::mcp::McpTimeouts;
use crate::support::logging::{self, PanicFlag};

/// The controller options `steward run` and `steward mcp` take.
pub(super) fn run_options(workspace: &std::path::Path, args: &RunArgs) -> RunOptions {
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
            start: match args.start {
                StartWhen::Eager => StartMode::Eager,
                StartWhen::Lazy => StartMode::Lazy,
            },
            idle_stop: args.idle_stop,
            auth_recheck: ms(args.auth_recheck_ms.max(1)),
            ..ReconcileConfig::default()
        },
        hold_after_read: args.hold_after_read.clone(),
        gateway: GatewayOptions {
            listen: args.mcp_listen.clone(),
            token_file: args.mcp_token_file.clone(),
            stdio: None,
            stdio_resume: None,
            config: GatewayConfig {
                page_size: args.mcp_page_size.max(1),
                coalesce: ms(args.mcp_coalesce_ms),
                http_idle: ms(args.mcp_http_idle_ms.max(1)),
                pin_tools: match args.pin_tools {
                    PinTools::All => PinMode::All,
                    PinTools::Gated => PinMode::Gated,
                    PinTools::Off => PinMode::Off,
                },
                // As Qwen Code reads it: a non-negative number of ms.
                tool_idle_env: std::env::var("QWEN_CODE_MCP_TOOL_IDLE_TIMEOUT_MS")
                    .ok()
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .map(|v| v as u64),
                ..GatewayConfig::default()
            },
        },
        metrics: MetricsOptions {
            listen: args.metrics_listen.clone(),
            token_file: args.metrics_token_file.clone(),
            tool_labels: args.metrics_tool_labels,
        },
    }
}

/// The log on stderr, and the trace export when the environment asks for
/// one (`OTEL_EXPORTER_OTLP_ENDPOINT`): before any runtime is built.
pub(super) fn install_logging(json: bool) {
    match trace::Exporter::from_env() {
        Ok(Some(exporter)) => {
            logging::install_with(json, Some(exporter.layer()));
            tracing::info!("exporting traces over OTLP/HTTP");
        }
        Ok(None) => logging::install(json),
        Err(error) => {
            logging::install(json);
            tracing::warn!(%error, "traces are not exported");
        }
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
pub(super) fn with_controller_runtime<F, Fut>(work: F) -> Result<ExitCode, CommandError>
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
    trace::shutdown();
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
    install_logging(args.log_format == LogFormat::Json);
    super::editor::refresh_if_installed(workspace);
    let opts = run_options(workspace, &args);
    with_controller_runtime(|shutdown| async move {
        run_after_a_stopping_one(opts, shutdown).await?;
        Ok(ExitCode::SUCCESS)
    })
}

/// How long `steward run` waits for a controller of the same workspace that
/// is stopping (its sessions handed back, then its servers stopped).
const STOPPING_PATIENCE: Duration = Duration::from_secs(60);

/// Run the controller; when the one before it is still stopping (`steward
/// run` restarted at once: SIGTERM, then a new run), wait for it to let go
/// of the workspace rather than fail. A running one is still refused.
async fn run_after_a_stopping_one(
    opts: RunOptions,
    shutdown: CancellationToken,
) -> Result<(), engine::RunError> {
    use crate::support::lock::LockError;
    let give_up = tokio::time::Instant::now() + STOPPING_PATIENCE;
    let mut said = false;
    loop {
        match engine::run(opts.clone(), shutdown.clone()).await {
            Err(engine::RunError::Lock(LockError::Held {
                pid,
                stopping: true,
                ..
            })) if tokio::time::Instant::now() < give_up && !shutdown.is_cancelled() => {
                if !std::mem::replace(&mut said, true) {
                    tracing::info!(
                        pid,
                        "the previous controller is stopping; waiting for it to exit"
                    );
                }
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                    _ = shutdown.cancelled() => return Ok(()),
                }
            }
            result => return result,
        }
    }
}

//! `steward mcp`: the agent's one endpoint on stdio. It hands the agent's
//! stdio to the workspace's running controller, or becomes the controller
//! when none runs.

use std::process::ExitCode;
use std::time::Duration;

use super::CommandError;
use super::run::{install_logging, run_options, with_controller_runtime};
use crate::cli::args::{LogFormat, McpArgs};
use crate::engine::{self};
use crate::gateway::handover;
use crate::gateway::profile::Profile;
/// How long `steward mcp` tries to reach (or become) the controller.
const ATTACH_DEADLINE: Duration = Duration::from_secs(15);

/// `steward mcp`: bridge stdio to the workspace's controller, or become it.
pub fn run(workspace: &std::path::Path, args: McpArgs) -> Result<ExitCode, CommandError> {
    install_logging(args.run.log_format == LogFormat::Json);
    let env = crate::support::paths::process_env();
    let paths = super::resolve_paths(workspace, &env)?;
    let profile = args.profile();
    let mut opts = run_options(workspace, &args.run);
    opts.gateway.stdio = Some(profile);
    with_controller_runtime(|shutdown| async move {
        let deadline = tokio::time::Instant::now() + ATTACH_DEADLINE;
        loop {
            if let Ok(stream) = tokio::net::UnixStream::connect(paths.mcp_socket_path()).await {
                tracing::info!(socket = %paths.mcp_socket_path().display(), "attached to the running controller");
                return bridge(stream, &profile).await;
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

/// Hand the agent's stdin and stdout to the controller with the client's
/// `profile`, when both are pipes or sockets, and wait until it closes the
/// connection (the session ended) or the agent hangs up. `false`: not
/// handed over, bridge the bytes.
async fn hand_over(stream: &tokio::net::UnixStream, profile: &Profile) -> bool {
    use std::os::fd::{AsFd as _, AsRawFd as _};
    let (stdin, stdout) = (std::io::stdin(), std::io::stdout());
    if !handover::is_pollable(stdin.as_fd()) || !handover::is_pollable(stdout.as_fd()) {
        return false;
    }
    let fds = [stdin.as_fd().as_raw_fd(), stdout.as_fd().as_raw_fd()];
    let payload = profile.encode();
    let sent = loop {
        if stream.writable().await.is_err() {
            break false;
        }
        match stream.try_io(tokio::io::Interest::WRITABLE, || {
            handover::send(stream.as_fd(), &fds, &payload)
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
/// either side ends (after a profile line, when the profile is not the
/// default one).
async fn bridge(
    stream: tokio::net::UnixStream,
    profile: &Profile,
) -> Result<ExitCode, CommandError> {
    if hand_over(&stream, profile).await {
        return Ok(ExitCode::SUCCESS);
    }
    let (mut from_controller, mut to_controller) = stream.into_split();
    let hello = profile.encode();
    if !hello.is_empty() {
        let mut line = vec![handover::HELLO];
        line.extend_from_slice(&hello);
        line.push(b'\n');
        tokio::io::AsyncWriteExt::write_all(&mut to_controller, &line)
            .await
            .map_err(|_| {
                CommandError::Controller("the controller closed the agent connection".to_owned())
            })?;
    }
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

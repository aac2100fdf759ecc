//! `steward mcp`: the agent's one endpoint on stdio. It hands the agent's
//! stdio to the workspace's running controller, or becomes the controller
//! when none runs. When the controller it handed the session to stops or
//! dies, it hands the session to the next one (or becomes it): the agent
//! never sees its connection close ([`crate::gateway::resume`]).

use std::process::ExitCode;
use std::time::Duration;

use super::CommandError;
use super::run::{install_logging, run_options, with_controller_runtime};
use crate::cli::args::{LogFormat, McpArgs};
use crate::engine::{self};
use crate::gateway::handover;
use crate::gateway::profile::Profile;
use crate::gateway::resume::{Attach, Back, Ledger, Resume, Served, frame, read_frame};
/// How long `steward mcp` tries to reach (or become) the controller.
const ATTACH_DEADLINE: Duration = Duration::from_secs(15);
/// How long, after its controller went away, `steward mcp` waits for the
/// next one (`steward run` restarted) before it becomes the controller.
const NEXT_CONTROLLER_GRACE: Duration = Duration::from_secs(3);
/// How long `steward mcp` waits for a stopping controller to exit.
const STOPPING_DEADLINE: Duration = Duration::from_secs(60);

/// `steward mcp`: bridge stdio to the workspace's controller, or become it.
pub fn run(workspace: &std::path::Path, args: McpArgs) -> Result<ExitCode, CommandError> {
    install_logging(args.run.log_format == LogFormat::Json);
    let env = crate::support::paths::process_env();
    let paths = super::resolve_paths(workspace, &env)?;
    let profile = args.profile();
    let mut opts = run_options(workspace, &args.run);
    opts.gateway.stdio = Some(profile.clone());
    with_controller_runtime(|shutdown| async move {
        let socket = paths.mcp_socket_path();
        let own_policy =
            args.run.start != crate::cli::args::StartWhen::Eager || args.run.idle_stop.is_some();
        // The session as the last controller left it, once one did.
        let mut resume: Option<Resume> = None;
        let mut moved = false;
        loop {
            if moved {
                wait_for_next(&socket, &paths.lock_file()).await;
            }
            let deadline = tokio::time::Instant::now() + ATTACH_DEADLINE;
            let stream = loop {
                if let Ok(stream) = tokio::net::UnixStream::connect(&socket).await {
                    tracing::info!(socket = %socket.display(), "attached to the running controller");
                    if own_policy {
                        tracing::warn!(
                            "--start and --idle-stop apply when steward mcp becomes the controller; the running controller keeps its own"
                        );
                    }
                    break stream;
                }
                let mut opts = opts.clone();
                opts.gateway.stdio_resume = resume.clone();
                match engine::run(opts, shutdown.clone()).await {
                    Ok(()) => return Ok(ExitCode::SUCCESS),
                    // Another controller holds the lock and is not serving
                    // yet: attach once its socket is there.
                    Err(engine::RunError::Lock(crate::support::lock::LockError::Held {
                        ..
                    })) if tokio::time::Instant::now() < deadline => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    Err(e) => return Err(e.into()),
                }
            };
            match hand_over(stream, &profile, resume.take()).await {
                Handed::Bridge(stream) => return bridge(stream, &profile).await,
                Handed::Ended => return Ok(ExitCode::SUCCESS),
                Handed::Moved(next) => {
                    resume = next.map(|r| *r);
                    moved = true;
                }
            }
        }
    })
}

/// After the controller went away: wait while it is still stopping (it
/// holds the lock until it exits), then for at most the grace time for the
/// next one (`steward run` restarted) to serve at `socket`.
async fn wait_for_next(socket: &std::path::Path, lock: &std::path::Path) {
    let give_up = tokio::time::Instant::now() + STOPPING_DEADLINE;
    let mut grace: Option<tokio::time::Instant> = None;
    while tokio::time::Instant::now() < give_up {
        // A controller serves there (not the file a killed one left).
        if tokio::net::UnixStream::connect(socket).await.is_ok() {
            return;
        }
        if crate::support::lock::holder_alive(lock) {
            grace = None;
        } else if *grace.get_or_insert_with(|| tokio::time::Instant::now() + NEXT_CONTROLLER_GRACE)
            <= tokio::time::Instant::now()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How a handover ended.
enum Handed {
    /// The agent's stdio cannot be handed over: bridge the bytes.
    Bridge(tokio::net::UnixStream),
    /// The session is over (the agent hung up).
    Ended,
    /// The controller went away with the session still on: resume it
    /// under the next one (as it left it; `None`: before it began).
    Moved(Option<Box<Resume>>),
}

/// Hand the agent's stdin and stdout to the controller with the client's
/// `profile` (and how to `resume` its session, when it moved), when both are
/// pipes or sockets, and follow the session's state until it ends or the
/// controller goes away.
async fn hand_over(
    stream: tokio::net::UnixStream,
    profile: &Profile,
    resume: Option<Resume>,
) -> Handed {
    use std::os::fd::{AsFd as _, AsRawFd as _};
    let (stdin, stdout) = (std::io::stdin(), std::io::stdout());
    if !handover::is_pollable(stdin.as_fd()) || !handover::is_pollable(stdout.as_fd()) {
        return Handed::Bridge(stream);
    }
    let fds = [stdin.as_fd().as_raw_fd(), stdout.as_fd().as_raw_fd()];
    let pending = resume
        .as_ref()
        .map(|r| r.pending.clone())
        .unwrap_or_default();
    let attach = Attach {
        profile: String::from_utf8(profile.encode()).unwrap_or_default(),
        resume: resume.clone(),
        pending: pending.len(),
    };
    let head = frame(&attach, &[]);
    if let Err(error) = handover::send(&stream, &fds, &head).await {
        tracing::debug!(%error, "hand the agent's stdio over");
        // That controller is going away: the next one gets the session.
        return Handed::Moved(resume.map(Box::new));
    }
    let (from_controller, mut to_controller) = stream.into_split();
    // Read with the descriptors that come along: the ledger.
    let mut from_controller = handover::FdReader::new(from_controller);
    if !pending.is_empty()
        && tokio::io::AsyncWriteExt::write_all(&mut to_controller, &pending)
            .await
            .is_err()
    {
        return Handed::Moved(resume.map(Box::new));
    }
    // The controller serves the agent now; this process lives as long as
    // the session, as the agent expects of the server it started.
    let mut last = resume.map(|r| Resume {
        pending: Vec::new(),
        ..r
    });
    // Where the controller keeps the requests it is serving.
    let mut ledger: Option<Ledger> = None;
    let mut buf = Vec::new();
    loop {
        let back = read_frame::<Back, _>(&mut from_controller, &mut buf, |b| match b {
            Back::Drained { pending } => *pending,
            _ => 0,
        })
        .await;
        if let Some(fd) = from_controller.take_fds().pop() {
            ledger = Some(Ledger::from_fd(fd));
        }
        match back {
            Ok(Some((
                Back::State {
                    initialize,
                    seen,
                    listens,
                },
                _,
            ))) => {
                let known = last.get_or_insert_with(Resume::default);
                if let Some(initialize) = initialize {
                    known.initialize = Some(*initialize);
                }
                known.seen = Some(seen);
                known.listens = listens;
            }
            Ok(Some((Back::Drained { .. }, pending))) => {
                tracing::info!("the controller is stopping; the session moves to the next one");
                let mut next = last.unwrap_or_default();
                next.pending = pending;
                return Handed::Moved(Some(Box::new(next)));
            }
            Ok(Some((Back::Ended, _))) => return Handed::Ended,
            Ok(None) | Err(_) => {
                if handover::hung_up(stdin.as_fd()) || handover::hung_up(stdout.as_fd()) {
                    return Handed::Ended;
                }
                let served = ledger.as_ref().map(Ledger::read).unwrap_or_default();
                tracing::warn!(
                    answered = served.inflight.len(),
                    "the controller went away without handing the session back (was it killed?): the requests it was serving are answered with an error; the session moves to the next one"
                );
                answer_killed(&served).await;
                return Handed::Moved(last.map(Box::new));
            }
        }
    }
}

/// Answer the agent's requests a killed controller was serving, so that
/// its client does not wait for them until it times out (after ending the
/// message it left half written, if any).
async fn answer_killed(served: &Served) {
    let answers = served.killed_answers();
    if answers.is_empty() {
        return;
    }
    let mut stdout = handover::stdout();
    let written = async {
        use tokio::io::AsyncWriteExt as _;
        stdout.write_all(&answers).await?;
        stdout.flush().await
    };
    if let Err(error) = written.await {
        tracing::debug!(%error, "answer the requests a killed controller was serving");
    }
}

/// Copy stdin to the controller's socket and its answers to stdout until
/// either side ends (after a profile line, when the profile is not the
/// default one).
async fn bridge(
    stream: tokio::net::UnixStream,
    profile: &Profile,
) -> Result<ExitCode, CommandError> {
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
        let mut stdin = handover::stdin();
        let _ = tokio::io::copy(&mut stdin, &mut to_controller).await;
        // The agent hung up: let the controller see the end of the session.
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut to_controller).await;
    };
    let downstream = async {
        let mut stdout = handover::stdout();
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

//! Starting a server, what MCP and LSP connections share: the error of a
//! failed start ([`StartError`], its stderr tail kept as a field), the
//! cleanup after one, and the wait for a process's exit status.
//!
//! - **Nothing outlives a failed start.** Any error after the spawn stops
//!   the process (group reaped, which drains its stderr) before the error is
//!   returned (`stop_failed_start`).
//! - **The stderr tail is data, not text.** A [`StartError`] carries the
//!   server's last stderr lines in [`StartError::stderr_tail`]; the one text
//!   that shows them after the message, `last stderr lines:` and a line each,
//!   is made by [`message_with_tail`] (the error's `Display` uses it, and so
//!   do the crash messages of the status).

use std::time::Duration;

use steward_schema::resource::Reason;
use tokio::sync::watch;

use crate::runtime::process::{ExitInfo, ManagedProcess, SpawnError};

/// Stderr lines a start failure keeps.
pub const STDERR_LINES_IN_MESSAGE: usize = 10;

/// SIGTERM grace when cleaning up after a failed start.
pub(crate) const FAILED_START_GRACE: Duration = Duration::from_secs(2);

/// After the connection (or stdout) ends, how long to wait for the exit
/// status, so the event or the error can say how the process ended rather
/// than that it was killed.
pub(crate) const EXIT_SETTLE: Duration = Duration::from_millis(500);

/// A server could not be started or connected. Displays as the message,
/// then the stderr tail (see [`message_with_tail`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", message_with_tail(&self.message, &self.stderr_tail))]
pub struct StartError {
    /// `CommandNotFound`, `UnsafeCommand`, `StartFailed`, `StartupTimeout` or
    /// `AuthRequired`.
    pub reason: Reason,
    /// What failed, lowercase, reading after "failed to"; one line, without
    /// the stderr tail.
    pub message: String,
    /// The server's last stderr lines (at most [`STDERR_LINES_IN_MESSAGE`]),
    /// oldest first; empty when there were none or no process.
    pub stderr_tail: Vec<String>,
}

impl StartError {
    /// A failure without a stderr tail (yet).
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        StartError {
            reason,
            message: message.into(),
            stderr_tail: Vec::new(),
        }
    }

    /// `StartFailed` with `message`.
    pub fn failed(message: impl Into<String>) -> Self {
        StartError::new(Reason::StartFailed, message)
    }

    /// This failure with the server's last stderr lines.
    pub fn with_stderr_tail(self, stderr_tail: Vec<String>) -> Self {
        StartError {
            stderr_tail,
            ..self
        }
    }
}

impl From<SpawnError> for StartError {
    fn from(error: SpawnError) -> Self {
        let reason = match &error {
            SpawnError::CommandNotFound { .. } => Reason::CommandNotFound,
            SpawnError::NotExecutable { .. } => Reason::UnsafeCommand,
            SpawnError::Sandbox { .. } => Reason::SandboxUnavailable,
            _ => Reason::StartFailed,
        };
        StartError::new(reason, error.to_string())
    }
}

/// `message`, then — when there is a tail — `last stderr lines:` and each
/// line on its own line: how a failure and the server's last words read in
/// a status message.
pub fn message_with_tail(message: &str, tail: &[String]) -> String {
    if tail.is_empty() {
        message.to_owned()
    } else {
        format!("{message}\nlast stderr lines:\n{}", tail.join("\n"))
    }
}

/// How the process of a failed start ended, for the message. When the
/// connection closed under the handshake (`settle`), the exit status is
/// given [`EXIT_SETTLE`] to arrive; otherwise it is what is known now.
pub(crate) async fn exit_of_failed_start(
    process: &ManagedProcess,
    settle: bool,
) -> Option<ExitInfo> {
    if settle {
        tokio::time::timeout(EXIT_SETTLE, process.exited())
            .await
            .ok()
    } else {
        process.try_status()
    }
}

/// Stops the process of a failed start ([`FAILED_START_GRACE`]; the group
/// is reaped and the stop waits for the pipes to close, which drains
/// stderr) and returns its last stderr lines.
pub(crate) async fn stop_failed_start(process: &mut ManagedProcess) -> Vec<String> {
    process.stop(FAILED_START_GRACE).await;
    process.stderr_tail(STDERR_LINES_IN_MESSAGE)
}

/// The exit status once there is one; pending forever without a process (or
/// when its reaper is gone, i.e. the runtime is shutting down).
pub(crate) async fn wait_exit(exit: Option<&mut watch::Receiver<Option<ExitInfo>>>) -> ExitInfo {
    let info = match exit {
        Some(rx) => rx.wait_for(Option::is_some).await.ok().map(|info| *info),
        None => None,
    };
    match info {
        Some(info) => info.unwrap_or(ExitInfo::UNKNOWN),
        None => std::future::pending().await,
    }
}

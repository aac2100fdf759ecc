//! How a one-shot command talks to the running controller: a small
//! runtime, a bounded wait, and a missing controller said as such.

use std::time::Duration;

use super::CommandError;
use crate::control::ControlError;
use crate::support::paths::Paths;

/// How long a one-shot request may wait for the controller (a reload waits
/// for its reconciles, which are bounded by the servers' own timeouts).
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// The runtime a one-shot command talks to the controller on.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, CommandError> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// A failure to reach the controller, said as "none is running" when so.
pub(crate) fn need_controller(paths: &Paths, e: ControlError) -> CommandError {
    match e {
        ControlError::Connect { .. } => CommandError::Controller(format!(
            "reach a controller: none is running for {} (start one with `steward run`)",
            paths.workspace.display()
        )),
        other => other.into(),
    }
}

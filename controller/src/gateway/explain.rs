//! Why a server cannot serve a call, and what to do about it: advice text
//! built from a server's status alone (pure; the session and the `lsp` tool
//! both answer with it).

use steward_schema::resource::{Phase, Reason, ServerStatus};

/// The last non-blank stderr line of a failure.
fn last_stderr_line(tail: &[String]) -> Option<&str> {
    tail.iter()
        .rev()
        .map(String::as_str)
        .find(|l| !l.trim().is_empty())
}

pub fn explain_blocked(server: &str, reason: Reason, message: &str) -> String {
    let first = message.lines().next().unwrap_or_default();
    match reason {
        Reason::PendingApproval => format!(
            "server \"{server}\" is pending approval: it comes from a file of this workspace and has not been approved for its current configuration. Run `steward approve {server}`, then call again"
        ),
        Reason::Rejected => format!(
            "server \"{server}\" was rejected for this workspace: edit its entry to be asked again, or run `steward approve {server}`"
        ),
        Reason::NotAllowed => format!("server \"{server}\" is not allowed: {first}"),
        Reason::Excluded => format!("server \"{server}\" is excluded: {first}"),
        Reason::UntrustedWorkspace => format!(
            "server \"{server}\" does not run because the workspace is not trusted: {first}"
        ),
        Reason::Disabled => {
            format!("server \"{server}\" is disabled (\"disabled\": true in its entry)")
        }
        Reason::StoppedByUser => format!(
            "server \"{server}\" was stopped by the user: run `steward start {server}` to start it again"
        ),
        Reason::SelfReference => format!(
            "server \"{server}\" runs `steward mcp` itself, so Steward never starts it: this endpoint already offers every server of the workspace"
        ),
        other => format!("server \"{server}\" is blocked ({other}): {first}"),
    }
}

/// Why a server that is not live cannot serve a call, and what to do.
pub fn explain(server: &str, status: &ServerStatus) -> String {
    let message = status.message.as_deref().unwrap_or_default();
    let Some(reason) = status.reason else {
        return format!("server \"{server}\" is {:?}", status.phase);
    };
    if status.phase == Phase::Blocked {
        return explain_blocked(server, reason, message);
    }
    let first = message.lines().next().unwrap_or_default();
    let mut text = match reason {
        Reason::CrashLoopBackOff | Reason::Crashed => {
            format!("server \"{server}\" is in a crash loop: {first}")
        }
        _ => format!("server \"{server}\" failed to start ({reason}): {first}"),
    };
    if let Some(at) = &status.next_retry_at {
        text.push_str(&format!("; next retry at {at}"));
    }
    if let Some(line) = last_stderr_line(&status.stderr_tail) {
        text.push_str(&format!("; last stderr line: {line}"));
    }
    text.push_str(&format!(
        ". See `steward describe {server}`; saving its configuration file retries at once"
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_stderr_line_is_the_tails_last_non_blank_line() {
        let tail = [
            "first".to_owned(),
            "boom: no token".to_owned(),
            " ".to_owned(),
        ];
        assert_eq!(last_stderr_line(&tail), Some("boom: no token"));
        assert_eq!(last_stderr_line(&[]), None);
    }

    #[test]
    fn a_crash_loop_names_the_next_retry_and_the_last_stderr_line() {
        let mut status = ServerStatus::new(
            Phase::Failed,
            Some(Reason::CrashLoopBackOff),
            Some("the server exited with code 1; restarting in 20s\nlast stderr lines:\nfatal: bad key".into()),
        );
        status.stderr_tail = vec!["fatal: bad key".into()];
        status.next_retry_at = Some("2026-12-03T10:00:00Z".into());
        let text = explain("db", &status);
        assert!(text.contains("crash loop"), "{text}");
        assert!(
            text.contains("next retry at 2026-12-03T10:00:00Z"),
            "{text}"
        );
        assert!(text.contains("last stderr line: fatal: bad key"), "{text}");
    }

    #[test]
    fn pending_approval_names_the_approve_command() {
        let text = explain_blocked("github", Reason::PendingApproval, "pending");
        assert!(text.contains("`steward approve github`"), "{text}");
    }
}

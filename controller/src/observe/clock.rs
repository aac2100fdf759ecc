//! The one clock of the read model: every status, event and log timestamp
//! is RFC 3339 at seconds precision, UTC. `STEWARD_NOW` pins "now" (tests and
//! reproducible output); it is read once per process.

use std::sync::OnceLock;
use std::time::SystemTime;

/// The variable that pins "now".
pub const NOW_VAR: &str = "STEWARD_NOW";

/// RFC 3339 (seconds precision, UTC): the format of every status timestamp.
pub fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// Now, as RFC 3339: `STEWARD_NOW` verbatim when set, else the system clock.
/// The wall-clock time of the monotonic instant `at` (past or future).
pub fn wall(at: tokio::time::Instant) -> SystemTime {
    let now = tokio::time::Instant::now();
    let sys = SystemTime::now();
    if at >= now {
        sys + (at - now)
    } else {
        sys - (now - at)
    }
}

pub fn now_rfc3339() -> String {
    match pinned() {
        Some(now) => now.to_owned(),
        None => rfc3339(SystemTime::now()),
    }
}

/// `STEWARD_NOW` as this process started with it (empty means unset).
fn pinned() -> Option<&'static str> {
    static PINNED: OnceLock<Option<String>> = OnceLock::new();
    PINNED
        .get_or_init(|| std::env::var(NOW_VAR).ok().filter(|v| !v.is_empty()))
        .as_deref()
}

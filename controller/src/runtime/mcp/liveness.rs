//! Liveness of a session: when to ping (never a server that talked within
//! the interval or has a call in flight; pings of all sessions share a
//! budget per interval) and what counts as an answer (any, an error answer
//! too; only silence within the timeout is a failure).

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Duration;

use super::session::{Upstream, UpstreamError};
use rmcp::model::{ClientRequest, PingRequest};
use tokio::time::Instant;

use super::describe::{Dig, describe};
use crate::support::sync::lock;

pub(super) type PingFuture = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// Pings of every session share a budget: at most this many per interval.
pub const PING_BUDGET: u32 = 16;

/// The next ping time of a session: one interval from `now`, or later when
/// the budget of that interval is spent — pings of all sessions are spaced
/// at least `interval / PING_BUDGET` apart, so the cost of liveness checks
/// is flat in the number of servers (a server that talks needs none; one
/// that stays silent is checked less often when there are many).
pub(super) fn next_ping_slot(now: Instant, interval: Duration) -> Instant {
    // Keyed by interval: sessions of one controller share one.
    static LAST: Mutex<Vec<(Duration, Instant)>> = Mutex::new(Vec::new());
    let spacing = interval / PING_BUDGET;
    let wanted = now + interval;
    let mut last = lock(&LAST);
    match last.iter_mut().find(|(i, _)| *i == interval) {
        Some((_, previous)) => {
            let slot = wanted.max(*previous + spacing);
            *previous = slot;
            slot
        }
        None => {
            last.push((interval, wanted));
            wanted
        }
    }
}

/// `Ok` for any answer, an error one included (a server without `ping`);
/// `Err` only when nothing came back within `timeout`.
pub(super) async fn ping_once(peer: Upstream, timeout: Duration, dig: Dig) -> Result<(), String> {
    let request = peer.request(ClientRequest::PingRequest(PingRequest::default()));
    match tokio::time::timeout(timeout, request).await {
        Ok(Ok(_)) | Ok(Err(UpstreamError::Server(_))) => Ok(()),
        Ok(Err(error)) => Err(format!("ping failed: {}", describe(&error, dig))),
        Err(_) => Err(format!(
            "no answer to ping within {}",
            humantime::format_duration(timeout)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pings_of_all_sessions_are_spread_within_a_budget() {
        let interval = Duration::from_secs(15);
        let now = Instant::now() + Duration::from_secs(3600);
        let slots: Vec<Instant> = (0..40).map(|_| next_ping_slot(now, interval)).collect();
        assert!(slots[0] >= now + interval);
        for pair in slots.windows(2) {
            assert!(
                pair[1] - pair[0] >= interval / PING_BUDGET,
                "spaced by the budget"
            );
        }
        // 40 sessions asking at once: the last waits 39 budget slots.
        assert!(slots[39] >= now + interval + (interval / PING_BUDGET) * 39);
    }
}

//! Liveness of a session: when to ping (never a server that talked within
//! the interval or has a call in flight; pings of all sessions share a
//! budget per interval) and what counts as an answer (any, an error answer
//! too; only silence within the timeout is a failure).

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Duration;

use rmcp::model::{ClientRequest, PingRequest};
use rmcp::{Peer, RoleClient};
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
pub(super) async fn ping_once(
    peer: Peer<RoleClient>,
    timeout: Duration,
    dig: Dig,
) -> Result<(), String> {
    // The whole request is bounded here: rmcp's own request timeout also
    // sends a cancel notification, which can hang on a hung HTTP server.
    let request = peer.send_request(ClientRequest::PingRequest(PingRequest::default()));
    match tokio::time::timeout(timeout, request).await {
        Ok(Ok(_)) | Ok(Err(rmcp::service::ServiceError::McpError(_))) => Ok(()),
        Ok(Err(error)) => Err(format!("ping failed: {}", describe(&error, dig))),
        Err(_) => Err(format!(
            "no answer to ping within {}",
            humantime::format_duration(timeout)
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use rmcp::model::{ClientResult, ErrorData, ServerRequest};
    use serde_json::{Value, json};
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::runtime::mcp::testing::*;
    use crate::runtime::mcp::{Caller, McpEvent, McpTimeouts};
    use crate::runtime::test_support::{SOON, alive, eventually, received};

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

    /// Pings received by the fake, as the times (ms since its start) they
    /// arrived.
    fn pings(rec: &Path) -> Vec<u64> {
        let text = std::fs::read_to_string(rec).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["event"] == "recv" && e["message"]["method"] == "ping")
            .filter_map(|e| e["t"].as_u64())
            .collect()
    }

    fn fast_pings() -> McpTimeouts {
        McpTimeouts {
            ping_interval: Duration::from_millis(100),
            ping_timeout: Duration::from_millis(200),
            ..timeouts()
        }
    }

    #[tokio::test]
    async fn a_ping_answered_with_an_error_is_alive() {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("record.jsonl");
        let spec = fake(json!({ "pingError": true, "record": rec }));
        let (result, mut rx) = connect(&spec, dir.path(), fast_pings()).await;
        let connection = result.unwrap();
        eventually("three pings answered with an error", || {
            pings(&rec).len() >= 3
        })
        .await;
        no_more_events(&mut rx);
        connection.stop(SOON, SOON).await;
    }

    #[tokio::test]
    async fn a_busy_server_that_answers_pings_slowly_is_alive() {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("record.jsonl");
        // Slower than the ping timeout (200 ms), but it answers.
        let spec = fake(json!({ "pingDelayMs": 300, "record": rec }));
        let (result, mut rx) = connect(&spec, dir.path(), fast_pings()).await;
        let connection = result.unwrap();
        eventually("three slow pings", || pings(&rec).len() >= 3).await;
        no_more_events(&mut rx);
        connection.stop(SOON, SOON).await;
    }

    struct NoCaller;

    impl Caller for NoCaller {
        fn progress(
            &self,
            _: rmcp::model::ProgressNotificationParam,
        ) -> futures::future::BoxFuture<'static, ()> {
            Box::pin(async {})
        }
        fn forward(
            &self,
            _: ServerRequest,
        ) -> futures::future::BoxFuture<'static, Result<ClientResult, ErrorData>> {
            Box::pin(async { Err(ErrorData::internal_error("no client", None)) })
        }
    }

    #[tokio::test]
    async fn a_server_with_a_call_in_flight_is_not_pinged() {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("record.jsonl");
        let spec = fake(json!({ "tools": ["work"], "record": rec }));
        let (result, mut rx) = connect(&spec, dir.path(), fast_pings()).await;
        let connection = result.unwrap();
        let params = rmcp::model::CallToolRequestParams::new("work")
            .with_arguments(json!({ "sleepMs": 1000 }).as_object().unwrap().clone());
        let answer = connection
            .handle()
            .call(
                ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params)),
                Arc::new(NoCaller),
                None,
                SOON,
                &CancellationToken::new(),
            )
            .await;
        assert!(answer.is_ok(), "{answer:?}");
        let text = std::fs::read_to_string(&rec).unwrap();
        let events: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let call_at = events
            .iter()
            .find(|e| e["event"] == "recv" && e["message"]["method"] == "tools/call")
            .and_then(|e| e["t"].as_u64())
            .unwrap();
        let during: Vec<u64> = pings(&rec)
            .into_iter()
            .filter(|t| *t > call_at + 150 && *t < call_at + 1000)
            .collect();
        assert!(during.is_empty(), "pinged during the call at {during:?}");
        no_more_events(&mut rx);
        connection.stop(SOON, SOON).await;
    }

    #[tokio::test]
    async fn a_server_that_stops_answering_is_unresponsive() {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("record.jsonl");
        let spec = fake(json!({ "stopAnsweringAfterMs": 1500, "record": rec }));
        let timeouts = McpTimeouts {
            ping_interval: Duration::from_millis(100),
            ping_timeout: Duration::from_millis(200),
            ..timeouts()
        };
        let (result, mut rx) = connect(&spec, dir.path(), timeouts).await;
        let connection = result.unwrap();
        let McpEvent::Unresponsive(message) = next_event(&mut rx).await else {
            panic!("expected Unresponsive");
        };
        assert_eq!(
            message,
            "no answer to ping within 400ms, and nothing else from the server meanwhile"
        );
        assert!(
            !received(&rec, "ping").is_empty(),
            "answered pings came first"
        );
        let pid = connection.pid().unwrap();
        assert!(alive(pid), "hung, not dead");
        connection.stop(SOON, SOON).await;
        assert!(!alive(pid));
        no_more_events(&mut rx);
    }
}

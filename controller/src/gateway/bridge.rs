//! Requests of 2026-07-28 agents to servers of the initialize lifecycle.
//!
//! A 2026-07-28 agent cannot be asked anything while its request is in
//! flight (no server-to-client requests: SEP-2322). When the server behind
//! such a request elicits, samples or asks for roots, the bridge parks the
//! server's request and answers the agent's request with an
//! `input_required` result carrying it (under a key of Steward's, with a
//! `requestState` that names the parked call). The agent retries with
//! `inputResponses`: the answers go to the server, whose call goes on (it
//! is never sent twice), and the retry is answered with what comes next —
//! the call's result, or the server's next request. A retry that leaves
//! out a key is asked again for it; an answer of the wrong shape, or a
//! `requestState` that names no parked call (unknown, tampered, expired,
//! another request's), is refused with `-32602`. Each answer names the
//! call with a new `requestState`. A server request the agent did not
//! declare it can answer fails the agent's request with `-32021` (the
//! server's call is cancelled). A call parked longer than [`PARK_LIMIT`]
//! without a retry is cancelled.
//!
//! Servers that serve 2026-07-28 themselves never ask: they answer
//! `input_required` on their own, which goes to the agent as it is (see
//! [`super::call::native`]).

// Sampling and roots are deprecated by SEP-2577 but part of the versions
// whose servers the bridge serves.
#![allow(deprecated)]

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    ClientResult, CreateMessageResult, ElicitResult, ErrorCode, ErrorData, InputRequest,
    InputRequests, InputRequiredResult, InputResponses, ListRootsResult, ServerRequest,
    ServerResult,
};
use sha2::{Digest as _, Sha256};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::support::sync::lock;

/// How long a parked call waits for its agent's retry.
pub const PARK_LIMIT: Duration = Duration::from_secs(600);

/// A server's request for a 2026-07-28 agent, and where its answer goes.
pub struct Ask {
    pub request: ServerRequest,
    pub answer: oneshot::Sender<Result<ClientResult, ErrorData>>,
    /// What the agent did not declare that the request needs (in words,
    /// and as `requiredCapabilities`): its request fails with `-32021`.
    pub missing: Option<(String, serde_json::Value)>,
}

/// Where the asks of one bridged call go.
pub type Asks = mpsc::UnboundedSender<Ask>;

/// What comes of a bridged request.
enum Event {
    Ask(Ask),
    Done(Result<ServerResult, ErrorData>),
}

/// One call parked between an agent's request and its retry.
struct Parked {
    /// What the retry must ask for again (`tools/call NAME`).
    what: String,
    events: mpsc::UnboundedReceiver<Event>,
    /// The server's requests not answered yet, by key.
    pending: BTreeMap<String, Ask>,
    /// Ends the call (the bridge gave up on it, or its agent cancelled).
    cancel: CancellationToken,
    /// How many times it was parked: a watch for the retry of an earlier
    /// parking gives up on nothing.
    parkings: u64,
}

/// The parked calls of the endpoint (see the module doc).
pub struct Bridge {
    parked: Mutex<HashMap<String, Parked>>,
    next: AtomicU64,
    secret: String,
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bridge")
            .field("parked", &lock(&self.parked).len())
            .finish_non_exhaustive()
    }
}

impl Default for Bridge {
    fn default() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        Bridge {
            parked: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            secret: format!("{}-{nanos}", std::process::id()),
        }
    }
}

fn refused(message: impl Into<String>) -> ErrorData {
    ErrorData::new(ErrorCode::INVALID_PARAMS, message.into(), None)
}

impl Bridge {
    /// A `requestState` naming parked call `n`: unguessable, so that no
    /// agent resumes another's.
    fn token(&self, n: u64) -> String {
        let digest = Sha256::digest(format!("{}\0{n}", self.secret).as_bytes());
        let tag: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        format!("steward-{n}-{tag}")
    }

    /// Whether `state` names a parked call (a retry the bridge answers).
    pub fn owns(&self, state: &str) -> bool {
        lock(&self.parked).contains_key(state)
    }

    /// Run `work` (a request `what`, e.g. `tools/call NAME`, of a
    /// 2026-07-28 agent), which asks through the [`Asks`] it is given and
    /// ends with `cancel`: its result, or `input_required` with its first
    /// request.
    pub async fn start<F, Fut>(
        self: &Arc<Self>,
        what: String,
        client: &CancellationToken,
        work: F,
    ) -> Result<ServerResult, ErrorData>
    where
        F: FnOnce(Asks, CancellationToken) -> Fut,
        Fut: Future<Output = Result<ServerResult, ErrorData>> + Send + 'static,
    {
        let (events_tx, events) = mpsc::unbounded_channel();
        let (asks_tx, mut asks) = mpsc::unbounded_channel::<Ask>();
        let cancel = CancellationToken::new();
        let running = work(asks_tx, cancel.clone());
        let done = events_tx.clone();
        tokio::spawn(async move {
            let _ = done.send(Event::Done(running.await));
        });
        tokio::spawn(async move {
            while let Some(ask) = asks.recv().await {
                if events_tx.send(Event::Ask(ask)).is_err() {
                    return;
                }
            }
        });
        let parked = Parked {
            what,
            events,
            pending: BTreeMap::new(),
            cancel,
            parkings: 0,
        };
        self.next_step(parked, client).await
    }

    /// A retry of the parked call `state` with `responses` (for request
    /// `what`, cancelled with `client`): its answers go to the server, and
    /// the retry gets what comes next.
    pub async fn resume(
        self: &Arc<Self>,
        state: &str,
        what: &str,
        responses: Option<&InputResponses>,
        client: &CancellationToken,
    ) -> Result<ServerResult, ErrorData> {
        let mut parked = {
            let mut all = lock(&self.parked);
            match all.get(state) {
                Some(parked) if parked.what == what => {}
                Some(_) => {
                    return Err(refused(
                        "requestState names another request: retry the request that was answered input_required",
                    ));
                }
                None => {
                    return Err(refused(
                        "requestState names no request waiting for input (unknown, already answered, or expired)",
                    ));
                }
            }
            all.remove(state).expect("present")
        };
        let empty = InputResponses::new();
        let responses = responses.unwrap_or(&empty);
        // Every answer is checked before any goes to the server.
        let mut answers = Vec::new();
        let mut wrong = None;
        for (key, ask) in &parked.pending {
            if let Some(value) = responses.get(key) {
                match answer_of(&ask.request, value) {
                    Ok(answer) => answers.push((key.clone(), answer)),
                    Err(why) => {
                        wrong = Some(format!("inputResponses[{key:?}]: {why}"));
                        break;
                    }
                }
            }
        }
        if let Some(why) = wrong {
            lock(&self.parked).insert(state.to_owned(), parked);
            return Err(refused(why));
        }
        for (key, answer) in answers {
            if let Some(ask) = parked.pending.remove(&key) {
                let _ = ask.answer.send(Ok(answer));
            }
        }
        self.next_step(parked, client).await
    }

    /// Wait for what comes of `parked` next: its result (done), or a
    /// server request (parked again, under a new `requestState`).
    async fn next_step(
        self: &Arc<Self>,
        mut parked: Parked,
        client: &CancellationToken,
    ) -> Result<ServerResult, ErrorData> {
        if parked.pending.is_empty() {
            let event = tokio::select! {
                event = parked.events.recv() => event,
                () = client.cancelled() => {
                    // The agent cancelled while the call ran: so does it.
                    parked.cancel.cancel();
                    return Err(ErrorData::internal_error("the request was cancelled", None));
                }
            };
            match event {
                Some(event) => {
                    if let Some(done) = self.take(&mut parked, event) {
                        return done;
                    }
                }
                None => {
                    return Err(ErrorData::internal_error(
                        "the call ended without an answer",
                        None,
                    ));
                }
            }
        }
        // What else the server asked meanwhile goes in the same answer.
        while let Ok(event) = parked.events.try_recv() {
            if let Some(done) = self.take(&mut parked, event) {
                return done;
            }
        }
        let mut requests = InputRequests::new();
        for (key, ask) in &parked.pending {
            requests.insert(key.clone(), input_request(&ask.request)?);
        }
        // A new state with every answer (the last one is spent).
        let state = self.token(self.next.fetch_add(1, Ordering::Relaxed));
        let cancel = parked.cancel.clone();
        parked.parkings += 1;
        let parking = parked.parkings;
        lock(&self.parked).insert(state.clone(), parked);
        // Given up on when no retry comes.
        let bridge = Arc::downgrade(self);
        let watched = state.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = tokio::time::sleep(PARK_LIMIT) => {}
                () = cancel.cancelled() => return,
            }
            let Some(bridge) = bridge.upgrade() else {
                return;
            };
            let expired = {
                let mut all = lock(&bridge.parked);
                match all.get(&watched) {
                    Some(parked) if parked.parkings == parking => all.remove(&watched),
                    _ => None,
                }
            };
            if let Some(parked) = expired {
                tracing::info!(what = %parked.what, "a request waiting for its agent's input was not retried in time; cancelled");
                parked.cancel.cancel();
            }
        });
        Ok(ServerResult::InputRequiredResult(InputRequiredResult::new(
            Some(requests),
            Some(state),
        )))
    }

    /// Take `event` of `parked`: a server request joins the pending ones;
    /// the call's end, or a request its agent cannot answer (the call is
    /// cancelled), is what the agent gets (`Some`).
    fn take(&self, parked: &mut Parked, event: Event) -> Option<Result<ServerResult, ErrorData>> {
        match event {
            Event::Done(result) => Some(result),
            Event::Ask(Ask {
                missing: Some(missing),
                ..
            }) => {
                parked.cancel.cancel();
                Some(Err(missing_capability(missing)))
            }
            Event::Ask(ask) => {
                let key = self.key(&ask.request);
                parked.pending.insert(key, ask);
                None
            }
        }
    }

    /// A key for `request`, unique in the endpoint.
    fn key(&self, request: &ServerRequest) -> String {
        let kind = match request {
            ServerRequest::ElicitRequest(_) => "elicitation",
            ServerRequest::CreateMessageRequest(_) => "sampling",
            ServerRequest::ListRootsRequest(_) => "roots",
            _ => "request",
        };
        format!("{kind}-{}", self.next.fetch_add(1, Ordering::Relaxed))
    }
}

/// The protocol's error for a request that needs what its agent did not
/// declare.
fn missing_capability((what, required): (String, serde_json::Value)) -> ErrorData {
    ErrorData::new(
        ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
        format!("the server asked for {what}, which this request did not declare"),
        Some(serde_json::json!({"requiredCapabilities": required})),
    )
}

/// `request` as an entry of `inputRequests`.
fn input_request(request: &ServerRequest) -> Result<InputRequest, ErrorData> {
    let value = serde_json::to_value(request).map_err(|e| {
        ErrorData::internal_error(format!("pass the server's request on: {e}"), None)
    })?;
    serde_json::from_value(value)
        .map_err(|e| ErrorData::internal_error(format!("pass the server's request on: {e}"), None))
}

/// The agent's answer `value` to `request`, checked.
fn answer_of(request: &ServerRequest, value: &serde_json::Value) -> Result<ClientResult, String> {
    let parsed = match request {
        ServerRequest::ElicitRequest(_) => {
            serde_json::from_value::<ElicitResult>(value.clone()).map(ClientResult::ElicitResult)
        }
        ServerRequest::CreateMessageRequest(_) => {
            serde_json::from_value::<CreateMessageResult>(value.clone())
                .map(|r| ClientResult::CreateMessageResult(Box::new(r)))
        }
        ServerRequest::ListRootsRequest(_) => {
            serde_json::from_value::<ListRootsResult>(value.clone())
                .map(ClientResult::ListRootsResult)
        }
        _ => return Err("the request it answers cannot be answered here".to_owned()),
    };
    parsed.map_err(|e| format!("not an answer to the request: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{CallToolResult, ContentBlock, ElicitRequest, ElicitRequestParams};

    fn elicit() -> ServerRequest {
        let params: ElicitRequestParams = serde_json::from_value(serde_json::json!({
            "message": "name?",
            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}
        }))
        .unwrap();
        ServerRequest::ElicitRequest(ElicitRequest::new(params))
    }

    /// Work that asks once and answers with what it was told.
    async fn asking(asks: Asks, _: CancellationToken) -> Result<ServerResult, ErrorData> {
        let (answer, answered) = oneshot::channel();
        asks.send(Ask {
            request: elicit(),
            answer,
            missing: None,
        })
        .unwrap();
        let told = answered.await.unwrap()?;
        let text = serde_json::to_string(&told).unwrap();
        Ok(ServerResult::CallToolResult(CallToolResult::success(vec![
            ContentBlock::text(text),
        ])))
    }

    fn input(result: ServerResult) -> InputRequiredResult {
        match result {
            ServerResult::InputRequiredResult(r) => r,
            other => panic!("not input_required: {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_parked_call_resumes_with_the_answers_once_and_refuses_the_rest() {
        let bridge = Arc::new(Bridge::default());
        let client = CancellationToken::new();
        let first = input(
            bridge
                .start("tools/call t".into(), &client, asking)
                .await
                .unwrap(),
        );
        let state = first.request_state.clone().unwrap();
        let key = first.input_requests.unwrap().into_keys().next().unwrap();
        assert!(key.starts_with("elicitation-"), "{key}");
        assert!(bridge.owns(&state));
        // Another request, a tampered state: refused, still parked.
        let other = bridge
            .resume(&state, "tools/call u", None, &client)
            .await
            .unwrap_err();
        assert_eq!(other.code, ErrorCode::INVALID_PARAMS);
        let tampered = bridge
            .resume(&format!("{state}x"), "tools/call t", None, &client)
            .await
            .unwrap_err();
        assert_eq!(tampered.code, ErrorCode::INVALID_PARAMS);
        // A retry without the answer is asked again, under a new state.
        let again = input(
            bridge
                .resume(&state, "tools/call t", None, &client)
                .await
                .unwrap(),
        );
        assert!(!bridge.owns(&state), "each state is used once");
        let state = again.request_state.unwrap();
        // A malformed answer is refused; the call stays parked.
        let wrong = InputResponses::from([(key.clone(), serde_json::json!(12345))]);
        let error = bridge
            .resume(&state, "tools/call t", Some(&wrong), &client)
            .await
            .unwrap_err();
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
        let answer = InputResponses::from([(
            key,
            serde_json::json!({"action": "accept", "content": {"name": "Ada"}}),
        )]);
        let done = bridge
            .resume(&state, "tools/call t", Some(&answer), &client)
            .await
            .unwrap();
        assert!(serde_json::to_string(&done).unwrap().contains("Ada"));
        assert!(!bridge.owns(&state), "answered once");
    }
}

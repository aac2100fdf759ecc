//! The relay of one MCP connection: requests forwarded *to* the server on
//! someone's behalf, and the routes back for what the server sends while
//! they are in flight.
//!
//! A caller (the agent endpoint, for one client request) forwards a request
//! with [`McpHandle::call`]. While it is in flight the relay knows it:
//! - the server's `notifications/progress` for that request go to that
//!   caller ([`Caller::progress`]), matched by the progress token rmcp put on
//!   the outgoing request, in order and all of them before the answer.
//!   rmcp would handle each notification in a task of its own (so they could
//!   pass one another, and the answer could overtake the last ones):
//!   [`RelayedProgress`] takes them off the transport as they are read and
//!   relays them one after the other, and a call returns its answer once
//!   every one read before it was relayed;
//! - the server's own requests (`sampling/createMessage`,
//!   `elicitation/create`) go to the caller whose call is in flight, newest
//!   first ([`Caller::forward`]);
//! - the count of calls in flight lets a restart wait for them to finish
//!   before the old process stops ([`Relay::close_when_drained`]), and the
//!   relay then refuses new calls ([`CallError::NotSent`]): a call either
//!   reaches this process and ends here, or never reaches it and may go to
//!   the next one — never both (a call is never sent twice).
//!
//! Notifications that belong to no call (logging, resource updates) go to
//! the connection's [`Broadcast`] hook. `roots/list` is answered by the
//! connection itself (the workspace root).

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::RoleClient;
use rmcp::model::{
    ClientRequest, ClientResult, ErrorData, JsonRpcMessage, ProgressNotificationParam,
    ProgressToken, ServerNotification, ServerRequest, ServerResult,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::{Notify, mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::session::{Upstream, UpstreamError};

/// The one on whose behalf a request is in flight (one client request).
pub trait Caller: Send + Sync {
    /// A progress notification of the forwarded request (token already the
    /// caller's own). Awaited in order, so progress stays ordered.
    fn progress(&self, params: ProgressNotificationParam) -> BoxFuture<'static, ()>;
    /// A request the server sent while the call is in flight; answered by the
    /// caller's client, or an error saying why it cannot be.
    fn forward(
        &self,
        request: ServerRequest,
    ) -> BoxFuture<'static, Result<ClientResult, ErrorData>>;
}

/// Where notifications that belong to no call go.
pub type Broadcast = Arc<dyn Fn(ServerNotification) + Send + Sync>;

/// Why a forwarded request has no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    #[error("no answer within {}", humantime::format_duration(*.0))]
    Timeout(Duration),
    /// Neither an answer nor progress for this long (the idle timeout).
    #[error("no answer and no progress for {}", humantime::format_duration(*.0))]
    Idle(Duration),
    #[error("the request was cancelled")]
    Cancelled,
    /// The session ended after the request was sent and before the answer
    /// came: the server may have acted on it, so it is never sent again.
    #[error("the server closed the connection before answering")]
    Closed,
    /// The request never reached the server (its connection was closing or
    /// closed before it was sent): it may go to the server's next
    /// connection.
    #[error("the connection closed before the request was sent")]
    NotSent,
    /// The server answered with a JSON-RPC error.
    #[error("{}", .0.message)]
    Server(ErrorData),
    /// The server refused the request's credentials (it never ran it).
    #[error("{0}")]
    SignIn(crate::runtime::mcp::remote::SignInNeed),
    #[error("{0}")]
    Other(String),
}

/// How long an answer waits for the progress notifications read before it
/// to be relayed (they are already read: this only bounds a stuck caller).
const PROGRESS_GRACE: Duration = Duration::from_secs(2);

struct InFlight {
    /// The token rmcp put on the request (set once it is sent).
    progress: Option<ProgressToken>,
    /// The caller's own progress token (none: it asked for no progress).
    caller_token: Option<ProgressToken>,
    caller: Arc<dyn Caller>,
    /// Progress notifications read from the transport for this request,
    /// and those handled (relayed, or dropped when no progress was asked).
    progress_read: u64,
    progress_handled: u64,
    /// When the last progress notification for it was read (ms since
    /// [`clock_base`]; the start of the call before any).
    last_progress: u64,
}

/// The calls in flight, and whether new ones are refused.
#[derive(Default)]
struct Calls {
    in_flight: HashMap<u64, InFlight>,
    /// Set once the connection is closing: no call begins any more.
    closed: bool,
}

/// Routes of one connection (see the module doc).
pub struct Relay {
    calls: Mutex<Calls>,
    next: AtomicU64,
    in_flight: watch::Sender<usize>,
    broadcast: OnceLock<Broadcast>,
    /// Woken each time a progress notification was handled.
    progress_handled: Notify,
    /// The root answered to `roots/list`.
    root: PathBuf,
    /// When the server last sent anything (ms since [`clock_base`]): a
    /// server that talks needs no ping.
    last_heard: std::sync::atomic::AtomicU64,
    /// When a forwarded call last began or ended (ms since [`clock_base`];
    /// the relay's creation before any): `--idle-stop` reads it.
    last_call: std::sync::atomic::AtomicU64,
}

/// The base of the relay's millisecond clock.
fn clock_base() -> tokio::time::Instant {
    static BASE: OnceLock<tokio::time::Instant> = OnceLock::new();
    *BASE.get_or_init(tokio::time::Instant::now)
}

fn millis(at: tokio::time::Instant) -> u64 {
    at.saturating_duration_since(clock_base()).as_millis() as u64
}

impl fmt::Debug for Relay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Relay")
            .field("in_flight", &*self.in_flight.borrow())
            .finish_non_exhaustive()
    }
}

impl Relay {
    pub fn new(root: &Path) -> Arc<Relay> {
        Arc::new(Relay {
            calls: Mutex::new(Calls::default()),
            next: AtomicU64::new(1),
            in_flight: watch::Sender::new(0),
            broadcast: OnceLock::new(),
            progress_handled: Notify::new(),
            root: root.to_owned(),
            last_heard: std::sync::atomic::AtomicU64::new(millis(tokio::time::Instant::now())),
            last_call: std::sync::atomic::AtomicU64::new(millis(tokio::time::Instant::now())),
        })
    }

    /// The server sent something (bytes on stdout, an answer, a notification).
    pub fn heard(&self) {
        self.last_heard
            .fetch_max(millis(tokio::time::Instant::now()), Ordering::Relaxed);
    }

    /// Whether the server sent anything at or after `at`.
    pub fn heard_since(&self, at: tokio::time::Instant) -> bool {
        self.last_heard.load(Ordering::Relaxed) >= millis(at)
    }

    /// Where notifications that belong to no call go (the first set wins).
    pub fn set_broadcast(&self, broadcast: Broadcast) {
        let _ = self.broadcast.set(broadcast);
    }

    /// The workspace root, answered to the server's `roots/list`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The calls in flight, locked.
    fn calls(&self) -> std::sync::MutexGuard<'_, Calls> {
        crate::support::sync::lock(&self.calls)
    }

    /// Requests in flight now.
    pub fn in_flight(&self) -> usize {
        *self.in_flight.borrow()
    }

    /// When a forwarded call last began or ended (the connection's start
    /// before any): with [`Self::in_flight`], whether the server is idle.
    pub fn last_call(&self) -> tokio::time::Instant {
        clock_base() + Duration::from_millis(self.last_call.load(Ordering::Relaxed))
    }

    fn used(&self) {
        self.last_call
            .fetch_max(millis(tokio::time::Instant::now()), Ordering::Relaxed);
    }

    /// Refuses every call from now on ([`CallError::NotSent`]); the calls
    /// in flight go on until the connection closes under them.
    pub fn close(&self) {
        self.calls().closed = true;
    }

    /// Resolves once no request is in flight, refusing every call from
    /// then on: a graceful stop, after which nothing was sent that is not
    /// answered.
    pub async fn close_when_drained(&self) {
        let mut rx = self.in_flight.subscribe();
        loop {
            let _ = rx.wait_for(|n| *n == 0).await;
            let mut calls = self.calls();
            // A call may have begun between the count and the lock.
            if calls.in_flight.is_empty() {
                calls.closed = true;
                return;
            }
        }
    }

    /// Route a progress notification to the caller of its request.
    pub async fn progress(&self, mut params: ProgressNotificationParam) {
        let route = self
            .calls()
            .in_flight
            .values()
            .find(|c| c.progress.as_ref() == Some(&params.progress_token))
            .map(|c| (c.caller_token.clone(), c.caller.clone()));
        let Some((caller_token, caller)) = route else {
            return;
        };
        let token = params.progress_token.clone();
        if let Some(caller_token) = caller_token {
            params.progress_token = caller_token;
            caller.progress(params).await;
        }
        if let Some(call) = self
            .calls()
            .in_flight
            .values_mut()
            .find(|c| c.progress.as_ref() == Some(&token))
        {
            call.progress_handled += 1;
        }
        self.progress_handled.notify_waiters();
    }

    /// A progress notification was read from the transport (in order, before
    /// any answer read after it).
    fn progress_read(&self, token: &ProgressToken) {
        if let Some(call) = self
            .calls()
            .in_flight
            .values_mut()
            .find(|c| c.progress.as_ref() == Some(token))
        {
            call.progress_read += 1;
            call.last_progress = millis(tokio::time::Instant::now());
        }
    }

    /// When call `id` last showed a sign of life (progress, or its start).
    fn last_progress(&self, id: u64) -> Option<tokio::time::Instant> {
        self.calls()
            .in_flight
            .get(&id)
            .map(|c| clock_base() + Duration::from_millis(c.last_progress))
    }

    /// Wait (bounded) until every progress notification read for call `id`
    /// was handled.
    async fn progress_relayed(&self, id: u64) {
        let deadline = tokio::time::Instant::now() + PROGRESS_GRACE;
        loop {
            let handled = self.progress_handled.notified();
            if self
                .calls()
                .in_flight
                .get(&id)
                .is_none_or(|c| c.progress_handled >= c.progress_read)
            {
                return;
            }
            if tokio::time::timeout_at(deadline, handled).await.is_err() {
                tracing::debug!(
                    call = id,
                    "progress notifications still unrelayed at the answer"
                );
                return;
            }
        }
    }

    /// The caller a server request goes to: the newest call in flight.
    pub fn current_caller(&self) -> Option<Arc<dyn Caller>> {
        self.calls()
            .in_flight
            .iter()
            .max_by_key(|(id, _)| **id)
            .map(|(_, c)| c.caller.clone())
    }

    /// A notification that belongs to no call.
    pub fn broadcast(&self, notification: ServerNotification) {
        if let Some(b) = self.broadcast.get() {
            b(notification);
        }
    }

    /// The call's id, or `None` when the relay is closed.
    fn begin(&self, call: InFlight) -> Option<u64> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let n = {
            let mut calls = self.calls();
            if calls.closed {
                return None;
            }
            calls.in_flight.insert(id, call);
            calls.in_flight.len()
        };
        self.used();
        self.in_flight.send_replace(n);
        Some(id)
    }

    fn sent(&self, id: u64, progress: ProgressToken) {
        if let Some(call) = self.calls().in_flight.get_mut(&id) {
            call.progress = Some(progress);
        }
    }

    fn end(&self, id: u64) {
        let n = {
            let mut calls = self.calls();
            calls.in_flight.remove(&id);
            calls.in_flight.len()
        };
        self.used();
        self.in_flight.send_replace(n);
    }
}

/// A cloneable handle to forward requests over one live connection.
#[derive(Clone)]
pub struct McpHandle {
    pub(crate) peer: Upstream,
    pub(crate) relay: Arc<Relay>,
}

impl fmt::Debug for McpHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpHandle")
            .field("relay", &self.relay)
            .finish_non_exhaustive()
    }
}

impl McpHandle {
    pub fn relay(&self) -> &Arc<Relay> {
        &self.relay
    }

    /// The `instructions` the server gave in its `initialize` answer.
    pub fn instructions(&self) -> Option<String> {
        self.peer
            .peer_info()
            .and_then(|info| info.instructions.clone())
            .filter(|text| !text.trim().is_empty())
    }

    /// Forward `request` and wait for the answer, bounded by `timeout` and,
    /// when given, by `idle` without an answer or a progress notification;
    /// `cancel` sends `notifications/cancelled` upstream and returns at once.
    /// `caller_token` is the progress token the caller asked for (progress
    /// is relayed only then).
    pub async fn call(
        &self,
        request: ClientRequest,
        caller: Arc<dyn Caller>,
        caller_token: Option<ProgressToken>,
        timeout: Duration,
        idle: Option<Duration>,
        cancel: &CancellationToken,
    ) -> Result<ServerResult, CallError> {
        let started = tokio::time::Instant::now();
        // Known before the request leaves: a server may ask its sampling
        // question before this task runs again after the send.
        let id = self
            .relay
            .begin(InFlight {
                progress: None,
                caller_token,
                caller,
                progress_read: 0,
                progress_handled: 0,
                last_progress: millis(started),
            })
            .ok_or(CallError::NotSent)?;
        let _end = EndGuard {
            relay: &self.relay,
            id,
        };
        let handle = self.peer.send(request).map_err(upstream_error)?;
        self.relay.sent(id, handle.progress_token.clone());
        let peer = self.peer.clone();
        let request_id = handle.id.clone();
        let cancel_upstream = |reason: &str| {
            let notification = rmcp::model::CancelledNotification::new(
                rmcp::model::CancelledNotificationParam::new(
                    Some(request_id.clone()),
                    Some(reason.to_owned()),
                ),
            );
            // Queued: a hung server never holds the caller.
            let _ = peer.notify(rmcp::model::ClientNotification::CancelledNotification(
                notification,
            ));
        };
        let deadline = started + timeout;
        // The idle timer is re-armed from the last progress each time it
        // fires; it never outlives the whole deadline.
        let idle_at = |from: tokio::time::Instant| match idle {
            Some(idle) => (from + idle).min(deadline),
            None => deadline,
        };
        let mut wake = idle_at(started);
        let mut rx = handle.rx;
        loop {
            tokio::select! {
                answer = &mut rx => return match answer {
                    Ok(Ok(result)) => {
                        self.relay.heard();
                        self.relay.progress_relayed(id).await;
                        Ok(result)
                    }
                    Ok(Err(e)) => Err(upstream_error(e)),
                    // Closed because the server refused it (and so the
                    // session): it did not run.
                    Err(_) if self.peer.refused().holds(&request_id) => Err(CallError::SignIn(
                        crate::runtime::mcp::remote::SignInNeed::SignIn,
                    )),
                    Err(_) => Err(CallError::Closed),
                },
                () = tokio::time::sleep_until(wake) => {
                    let now = tokio::time::Instant::now();
                    if now >= deadline {
                        cancel_upstream("timed out");
                        return Err(CallError::Timeout(timeout));
                    }
                    let next = idle_at(self.relay.last_progress(id).unwrap_or(started));
                    if next > now {
                        wake = next;
                        continue;
                    }
                    cancel_upstream("no answer and no progress within the idle timeout");
                    return Err(CallError::Idle(idle.unwrap_or(timeout)));
                }
                () = cancel.cancelled() => {
                    cancel_upstream("cancelled by the client");
                    return Err(CallError::Cancelled);
                }
            }
        }
    }
}

/// A server transport whose progress notifications the [`Relay`] relays
/// itself, in the order they are read (see the module doc); rmcp never sees
/// them.
pub struct RelayedProgress<T> {
    inner: T,
    relay: Arc<Relay>,
    /// The relaying task's queue, from the first progress notification on.
    relayed: Option<mpsc::UnboundedSender<ProgressNotificationParam>>,
}

impl<T> RelayedProgress<T> {
    pub fn new(inner: T, relay: Arc<Relay>) -> Self {
        RelayedProgress {
            inner,
            relay,
            relayed: None,
        }
    }

    /// Queues `params` for the task that relays progress in order, which
    /// the first progress notification starts (a server that sends none
    /// costs no task); it ends with the transport.
    fn relay_progress(&mut self, params: ProgressNotificationParam) {
        let relay = &self.relay;
        let relayed = self.relayed.get_or_insert_with(|| {
            let (relayed, mut queue) = mpsc::unbounded_channel();
            let relay = relay.clone();
            tokio::spawn(async move {
                while let Some(params) = queue.recv().await {
                    relay.progress(params).await;
                }
            });
            relayed
        });
        let _ = relayed.send(params);
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for RelayedProgress<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let message = self.inner.receive().await;
            if message.is_some() {
                self.relay.heard();
            }
            if let Some(JsonRpcMessage::Notification(n)) = &message
                && let ServerNotification::ProgressNotification(p) = &n.notification
            {
                self.relay.progress_read(&p.params.progress_token);
                let params = p.params.clone();
                self.relay_progress(params);
                continue;
            }
            return message;
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

struct EndGuard<'a> {
    relay: &'a Relay,
    id: u64,
}

impl Drop for EndGuard<'_> {
    fn drop(&mut self) {
        self.relay.end(self.id);
    }
}

fn upstream_error(error: UpstreamError) -> CallError {
    match error {
        UpstreamError::Server(e) => CallError::Server(e),
        UpstreamError::Closed => CallError::Closed,
        UpstreamError::NotSent => CallError::NotSent,
        UpstreamError::Send { error, .. }
            if let Some(need) = crate::runtime::mcp::remote::sign_in_need(&*error) =>
        {
            CallError::SignIn(need)
        }
        other => CallError::Other(other.to_string()),
    }
}

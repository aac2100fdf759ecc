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
//!   `elicitation/create`, `roots/list`) and its log lines go to the caller
//!   whose call caused them ([`Relay::route`]): over HTTP, the call on whose
//!   response stream they came (the transport tags them); where the wire
//!   cannot say (stdio, or an HTTP server's standalone stream), the call of
//!   the one agent that has calls in flight. Calls of several agents in
//!   flight would make that a guess, so once a server has sent such a
//!   request untagged, calls of different agents to it are serialized (an
//!   agent's own calls still run side by side), and one that arrives while
//!   several agents' calls are in flight waits until only one agent's are
//!   ([`Relay::unambiguous`]);
//! - the count of calls in flight lets a restart wait for them to finish
//!   before the old process stops ([`Relay::close_when_drained`]), and the
//!   relay then refuses new calls ([`CallError::NotSent`]): a call either
//!   reaches this process and ends here, or never reaches it and may go to
//!   the next one — never both (a call is never sent twice).
//!
//! Notifications that belong to no call (log lines outside any call,
//! resource updates) go to the connection's [`Broadcast`] hook. A
//! `roots/list` outside any call, or from a call whose agent has no roots,
//! is answered by the connection itself (the workspace root).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::RoleClient;
use rmcp::model::{
    ClientNotification, ClientRequest, ClientResult, ErrorData, JsonRpcMessage,
    ProgressNotificationParam, ProgressToken, RequestId, ServerNotification, ServerRequest,
    ServerResult, TaskStatusNotification,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::{Notify, mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::session::{Upstream, UpstreamError};

/// The one on whose behalf a request is in flight (one client request).
pub trait Caller: Send + Sync {
    /// The agent (client session) whose request it is; `None` for Steward's
    /// own requests, which no server request is ever routed to.
    fn agent(&self) -> Option<u64> {
        None
    }
    /// The agent a task the server makes for this call belongs to: one
    /// with a session; `None` when no session can hold it (a request of
    /// 2026-07-28 stands alone), and then anyone who knows the id may use it.
    fn task_holder(&self) -> Option<u64> {
        None
    }
    /// A progress notification of the forwarded request (token already the
    /// caller's own). Awaited in order, so progress stays ordered.
    fn progress(&self, params: ProgressNotificationParam) -> BoxFuture<'static, ()>;
    /// A request the server sent for this call; answered by the caller's
    /// client, or an error saying why it cannot be. `cancel` fires when the
    /// server cancels its request.
    fn forward(
        &self,
        request: ServerRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<ClientResult, ErrorData>>;
    /// A notification the server sent for this call (a log line, the
    /// completion of an elicitation it asked); awaited in order.
    fn notify(&self, notification: ServerNotification) -> BoxFuture<'static, ()> {
        let _ = notification;
        Box::pin(async {})
    }
    /// The status of a task the server made for one of the caller's calls
    /// (`server`'s own task id); awaited in order.
    fn task_status(
        &self,
        server: &str,
        notification: TaskStatusNotification,
    ) -> BoxFuture<'static, ()> {
        let _ = (server, notification);
        Box::pin(async {})
    }
    /// The status of a task of 2025-11-25 (`notifications/tasks/status`)
    /// the server made for one of the caller's calls; awaited in order.
    fn legacy_task_status(
        &self,
        server: &str,
        notification: rmcp::model::CustomNotification,
    ) -> BoxFuture<'static, ()> {
        let _ = (server, notification);
        Box::pin(async {})
    }
    /// Whether the caller's client answers `roots/list` itself (else the
    /// connection answers with the workspace root).
    fn answers_roots(&self) -> bool {
        false
    }
}

/// Where something the server sent for a call goes (see the module doc).
#[derive(Clone)]
pub enum Route {
    /// The call it belongs to.
    Call(Arc<dyn Caller>),
    /// No agent's call is in flight (or the call it names has ended).
    Outside,
    /// Calls of several agents are in flight and the wire does not say
    /// which one it belongs to.
    Ambiguous,
}

/// Where notifications that belong to no call go, with the name of the
/// server that sent them.
pub type Broadcast = Arc<dyn Fn(&str, ServerNotification) + Send + Sync>;

/// A connection's [`Broadcast`], its server named.
pub type Broadcaster = Arc<dyn Fn(ServerNotification) + Send + Sync>;

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
    /// Refused (HTTP 401) while the token could not be refreshed for now
    /// (the authorization server unreachable, a 5xx): not run; no sign-in
    /// needed, the connection is tried again.
    #[error("the access token expired and could not be refreshed for now: {0}")]
    Unrefreshed(String),
    #[error("{0}")]
    Other(String),
}

/// How long an answer waits for the progress notifications read before it
/// to be relayed (they are already read: this only bounds a stuck caller).
const PROGRESS_GRACE: Duration = Duration::from_secs(2);

struct InFlight {
    /// The request's id on the connection (set once it is sent).
    upstream: Option<RequestId>,
    /// The agent it is for (`None`: Steward's own request).
    agent: Option<u64>,
    /// The token rmcp put on the request (set once it is sent).
    progress: Option<ProgressToken>,
    /// The caller's own progress token (none: it asked for no progress).
    caller_token: Option<ProgressToken>,
    caller: Arc<dyn Caller>,
    /// Progress notifications and notices (log lines) read from the
    /// transport for this request, and those handled (relayed, or dropped
    /// when no progress was asked).
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

impl Calls {
    /// The agents with a call in flight.
    fn agents(&self) -> BTreeSet<u64> {
        self.in_flight.values().filter_map(|c| c.agent).collect()
    }
}

/// Why a call cannot begin now.
enum Refused {
    /// The connection is closing.
    Closed,
    /// Calls of another agent are in flight on a connection whose server
    /// requests cannot be told apart (see the module doc).
    Busy,
}

/// URL-mode elicitations whose completion may still come, by id (the
/// oldest forgotten past this many).
const ELICITATIONS_KEPT: usize = 256;
/// Tasks whose status may still be told, by id (the oldest forgotten past
/// this many).
const TASKS_KEPT: usize = 1024;

/// The callers something the server names by an id of its own goes to
/// later (an elicitation's completion, a task's status), the oldest
/// forgotten past `limit`.
struct Owners {
    limit: usize,
    kept: Mutex<VecDeque<(String, Arc<dyn Caller>)>>,
}

impl Owners {
    fn new(limit: usize) -> Owners {
        Owners {
            limit,
            kept: Mutex::new(VecDeque::new()),
        }
    }

    fn keep(&self, id: String, caller: Arc<dyn Caller>) {
        let mut kept = crate::support::sync::lock(&self.kept);
        kept.retain(|(known, _)| *known != id);
        if kept.len() >= self.limit {
            kept.pop_front();
        }
        kept.push_back((id, caller));
    }

    /// The caller of `id`; `forget`: the last time it is asked for.
    fn get(&self, id: &str, forget: bool) -> Option<Arc<dyn Caller>> {
        let mut kept = crate::support::sync::lock(&self.kept);
        let at = kept.iter().position(|(known, _)| known == id)?;
        if forget {
            kept.remove(at).map(|(_, caller)| caller)
        } else {
            Some(kept[at].1.clone())
        }
    }
}

/// Routes of one connection (see the module doc).
pub struct Relay {
    calls: Mutex<Calls>,
    next: AtomicU64,
    in_flight: watch::Sender<usize>,
    broadcast: OnceLock<Broadcaster>,
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
    /// The server sent a request whose call the wire did not name: calls
    /// of different agents are serialized from now on.
    serialized: std::sync::atomic::AtomicBool,
    /// URL-mode elicitations forwarded, by elicitation id, with the caller
    /// their completion goes to.
    elicitations: Owners,
    /// Tasks the server made for a call (SEP-2663), by the server's task
    /// id, with the caller their status goes to.
    tasks: Owners,
    /// The queue of the task that delivers, in order, what goes to a
    /// caller outside its calls (started by the first).
    deliveries: OnceLock<mpsc::UnboundedSender<BoxFuture<'static, ()>>>,
    /// The queue of the task that delivers notices to their calls in order
    /// (started by the first).
    notices: OnceLock<mpsc::UnboundedSender<Notice>>,
    /// Itself, for the task that delivers notices.
    me: std::sync::Weak<Relay>,
}

/// A notification on its way to the call it belongs to.
struct Notice {
    call: u64,
    caller: Arc<dyn Caller>,
    notification: ServerNotification,
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
        Arc::new_cyclic(|me| Relay {
            calls: Mutex::new(Calls::default()),
            next: AtomicU64::new(1),
            in_flight: watch::Sender::new(0),
            broadcast: OnceLock::new(),
            progress_handled: Notify::new(),
            root: root.to_owned(),
            last_heard: std::sync::atomic::AtomicU64::new(millis(tokio::time::Instant::now())),
            last_call: std::sync::atomic::AtomicU64::new(millis(tokio::time::Instant::now())),
            serialized: std::sync::atomic::AtomicBool::new(false),
            elicitations: Owners::new(ELICITATIONS_KEPT),
            tasks: Owners::new(TASKS_KEPT),
            deliveries: OnceLock::new(),
            notices: OnceLock::new(),
            me: me.clone(),
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
    pub fn set_broadcast(&self, broadcast: Broadcaster) {
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

    /// Where something the server sent goes: the call `tag` names (the
    /// request whose HTTP response stream it came on), else the newest call
    /// of the one agent with calls in flight (see the module doc).
    pub fn route(&self, tag: Option<&RequestId>) -> Route {
        self.route_call(tag)
            .map_or(Route::Outside, |(_, caller)| caller)
    }

    fn route_call(&self, tag: Option<&RequestId>) -> Option<(u64, Route)> {
        let calls = self.calls();
        if let Some(tag) = tag {
            return calls
                .in_flight
                .iter()
                .find(|(_, c)| c.agent.is_some() && c.upstream.as_ref() == Some(tag))
                .map(|(id, c)| (*id, Route::Call(c.caller.clone())));
        }
        let agents = calls.agents();
        match agents.len() {
            0 => None,
            1 => calls
                .in_flight
                .iter()
                .filter(|(_, c)| c.agent.is_some())
                .max_by_key(|(id, _)| **id)
                .map(|(id, c)| (*id, Route::Call(c.caller.clone()))),
            _ => Some((0, Route::Ambiguous)),
        }
    }

    /// The server sent a request whose call the wire did not name: from now
    /// on calls of different agents to it do not overlap.
    pub fn serialize_agents(&self) {
        if !self.serialized.swap(true, Ordering::SeqCst) {
            tracing::info!(
                "the server asks its clients for input and its connection cannot say for which call: calls of different agents to it are serialized from now on"
            );
        }
    }

    /// Whether calls of different agents are serialized.
    pub fn serialized(&self) -> bool {
        self.serialized.load(Ordering::SeqCst)
    }

    /// [`Self::route`] of an untagged request, waiting (until `deadline`)
    /// while it is ambiguous: the calls of all agents but one end (calls of
    /// different agents no longer begin side by side, see
    /// [`Self::serialize_agents`]).
    pub async fn unambiguous(&self, deadline: tokio::time::Instant) -> Route {
        let mut changes = self.in_flight.subscribe();
        loop {
            changes.borrow_and_update();
            let route = self.route(None);
            if !matches!(route, Route::Ambiguous) {
                return route;
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return route,
            }
        }
    }

    /// The URL-mode elicitation `id` was forwarded to `caller`: its
    /// completion goes there.
    pub fn expect_completion(&self, id: String, caller: Arc<dyn Caller>) {
        self.elicitations.keep(id, caller);
    }

    /// The caller the completion of elicitation `id` goes to (once).
    pub fn completion(&self, id: &str) -> Option<Arc<dyn Caller>> {
        self.elicitations.get(id, true)
    }

    /// The caller whose call task `id` answered: its status goes there,
    /// and it holds the task (kept after the task ends, while its result
    /// may still be asked for; the oldest forgotten past [`TASKS_KEPT`]).
    pub fn task_owner(&self, id: &str) -> Option<Arc<dyn Caller>> {
        self.tasks.get(id, false)
    }

    /// Run `work` (what goes to a caller outside its calls) after what was
    /// delivered before it.
    pub fn deliver(&self, work: BoxFuture<'static, ()>) {
        let queue = self.deliveries.get_or_init(|| {
            let (queue, mut works) = mpsc::unbounded_channel::<BoxFuture<'static, ()>>();
            tokio::spawn(async move {
                while let Some(work) = works.recv().await {
                    work.await;
                }
            });
            queue
        });
        let _ = queue.send(work);
    }

    /// A notification for the call `tag` names (or, untagged, the call of
    /// the one agent with calls in flight): delivered to it in order, and
    /// before its answer; `false` when it belongs to no call.
    pub fn notice(&self, tag: Option<&RequestId>, notification: ServerNotification) -> bool {
        let Some((call, Route::Call(caller))) = self.route_call(tag) else {
            return false;
        };
        if let Some(c) = self.calls().in_flight.get_mut(&call) {
            c.progress_read += 1;
        }
        let queue = self.notices.get_or_init(|| {
            let (queue, mut notices) = mpsc::unbounded_channel::<Notice>();
            let relay = self.me.clone();
            tokio::spawn(async move {
                while let Some(notice) = notices.recv().await {
                    notice.caller.notify(notice.notification).await;
                    let Some(relay) = relay.upgrade() else { return };
                    relay.notice_handled(notice.call);
                }
            });
            queue
        });
        let _ = queue.send(Notice {
            call,
            caller,
            notification,
        });
        true
    }

    fn notice_handled(&self, call: u64) {
        if let Some(c) = self.calls().in_flight.get_mut(&call) {
            c.progress_handled += 1;
        }
        self.progress_handled.notify_waiters();
    }

    /// A notification that belongs to no call.
    pub fn broadcast(&self, notification: ServerNotification) {
        if let Some(b) = self.broadcast.get() {
            b(notification);
        }
    }

    /// The call's id; refused when the relay is closed, or (calls being
    /// serialized) while another agent's calls are in flight.
    /// `call` is taken when it begins.
    fn begin(&self, call: &mut Option<InFlight>) -> Result<u64, Refused> {
        let n = {
            let mut calls = self.calls();
            if calls.closed {
                return Err(Refused::Closed);
            }
            let agent = call.as_ref().and_then(|c| c.agent);
            if let Some(agent) = agent
                && self.serialized()
                && calls.agents().iter().any(|other| *other != agent)
            {
                return Err(Refused::Busy);
            }
            let Some(call) = call.take() else {
                return Err(Refused::Closed);
            };
            let id = self.next.fetch_add(1, Ordering::Relaxed);
            calls.in_flight.insert(id, call);
            (id, calls.in_flight.len())
        };
        self.used();
        self.in_flight.send_replace(n.1);
        Ok(n.0)
    }

    fn sent(&self, id: u64, upstream: RequestId, progress: ProgressToken) {
        if let Some(call) = self.calls().in_flight.get_mut(&id) {
            call.upstream = Some(upstream);
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

    /// Send a notification to the server (queued: a hung server never
    /// holds the sender).
    pub fn notify(&self, notification: ClientNotification) -> Result<(), CallError> {
        self.peer.notify(notification).map_err(upstream_error)
    }

    /// Whether the server serves requests of protocol 2026-07-28 on this
    /// connection (its `server/discover` says so: a stdio server on its
    /// session, a streamable-HTTP one outside it).
    pub fn per_request(&self) -> bool {
        self.peer.per_request()
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
        let deadline = started + timeout;
        // The task the server may make for the call reports to the caller.
        let keeper = caller.clone();
        // Known before the request leaves: a server may ask its sampling
        // question before this task runs again after the send.
        let mut call = Some(InFlight {
            upstream: None,
            agent: caller.agent(),
            progress: None,
            caller_token,
            caller,
            progress_read: 0,
            progress_handled: 0,
            last_progress: millis(started),
        });
        let mut changes = self.relay.in_flight.subscribe();
        let id = loop {
            changes.borrow_and_update();
            match self.relay.begin(&mut call) {
                Ok(id) => break id,
                Err(Refused::Closed) => return Err(CallError::NotSent),
                Err(Refused::Busy) => {}
            }
            // Another agent's calls are in flight on a server whose
            // requests cannot be told apart: this one waits its turn.
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return Err(CallError::NotSent) },
                () = tokio::time::sleep_until(deadline) => return Err(CallError::Timeout(timeout)),
                () = cancel.cancelled() => return Err(CallError::Cancelled),
            }
        };
        let _end = EndGuard {
            relay: &self.relay,
            id,
        };
        let handle = self.peer.send(request).map_err(upstream_error)?;
        self.relay
            .sent(id, handle.id.clone(), handle.progress_token.clone());
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
                        if let Some(task) = made_task(&result) {
                            self.relay.tasks.keep(task, keeper);
                        }
                        Ok(result)
                    }
                    // Refused while the token could not be refreshed for
                    // now: said so, whichever way the refusal came back.
                    Ok(Err(e)) => match self.peer.refused().why(&request_id) {
                        Some(Some(why)) => Err(CallError::Unrefreshed(why)),
                        _ => Err(upstream_error(e)),
                    },
                    // Closed because the server refused it (and so the
                    // session): it did not run. A sign-in helps, unless
                    // the token only could not be refreshed for now.
                    Err(_) => match self.peer.refused().why(&request_id) {
                        Some(None) => Err(CallError::SignIn(
                            crate::runtime::mcp::remote::SignInNeed::SignIn,
                        )),
                        Some(Some(why)) => Err(CallError::Unrefreshed(why)),
                        None => Err(CallError::Closed),
                    },
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

/// The id of the task a call's answer made: a task handle of 2026-07-28,
/// or the `{task}` of 2025-11-25 (which rmcp does not type).
fn made_task(result: &ServerResult) -> Option<String> {
    match result {
        ServerResult::CreateTaskResult(made) => Some(made.task.task_id.clone()),
        ServerResult::CustomResult(rmcp::model::CustomResult(raw)) => raw
            .pointer("/task/taskId")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned),
        _ => None,
    }
}

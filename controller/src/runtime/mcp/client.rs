//! The client of a session: what the server sends that is not an answer —
//! list changes, log messages, resource updates, and requests
//! (`roots/list`, sampling, elicitation) — goes to the watcher task or, for
//! a forwarded call, through the [`Relay`] to the client whose call caused
//! it ([`Relay::route`]). List changes are marked on the session's
//! [`Announced`] (a stdio server's before rmcp sees them, by its
//! transport). The server's cancellation of its own request reaches the
//! client it was forwarded to; the completion of a URL-mode elicitation
//! reaches the client that was asked.
//!
//! Steward tells the server it can do all that any agent can (elicitation
//! in form and URL mode, sampling with tools and context, roots that
//! change): each request goes to the one agent whose call caused it, which
//! answers it only if it declared what it needs (else the protocol's
//! error; roots it does not have are the workspace's).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ClientResult, ElicitRequestParams, ErrorData,
    GetExtensions as _, Implementation, ListRootsResult, ProtocolVersion, RequestId, Root,
    ServerNotification, ServerRequest,
};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::relay::{Relay, Route};
use super::relist::{Kinds, ListKind};
use super::session::Handler;
use crate::support::sync::lock;

/// How long a server request that arrived while calls of several agents
/// were in flight waits for all but one agent's calls to end.
const AMBIGUOUS_WAIT: Duration = Duration::from_secs(30);

/// The `_meta` key an HTTP transport puts on what the server sent on the
/// response stream of one of our requests: that request's id. Taken off
/// before anything goes on.
pub const CALL_TAG: &str = "dev.steward/call";

/// The kinds of list a server announced as changed that the watcher task
/// (or, while connecting, `open_session`) has not taken yet. Marking wakes
/// the watcher only when nothing was marked: a burst while the watcher
/// holds off (a re-list in flight or the window of [`Relist`]) costs an
/// atomic `or` per notification and no wake-up.
///
/// [`Relist`]: super::relist::Relist
#[derive(Debug, Default)]
pub(super) struct Announced {
    kinds: AtomicU8,
    wake: Notify,
}

impl Announced {
    /// The server announced that its `kind` list changed. `false` when
    /// announcements were already waiting (a burst: the watcher holds off).
    pub(super) fn add(&self, kind: ListKind) -> bool {
        let first = self.kinds.fetch_or(kind.bit(), Ordering::AcqRel) == 0;
        if first {
            self.wake.notify_one();
        }
        first
    }

    /// The kinds marked since the last take.
    pub(super) fn take(&self) -> Kinds {
        Kinds::from_bits(self.kinds.swap(0, Ordering::AcqRel))
    }

    /// Returns once something was marked since the last take (or a wake
    /// left over from a take that found it: then [`Announced::take`] may
    /// be empty).
    pub(super) async fn marked(&self) {
        self.wake.notified().await;
    }
}

/// The session's client: list-change notifications are marked on the
/// [`Announced`] the watcher task (or, while connecting, `open_session`)
/// takes; what the server sends for a forwarded request goes through the
/// [`Relay`].
pub(super) struct Client {
    name: Arc<str>,
    pub(super) announced: Arc<Announced>,
    stopped: Arc<AtomicBool>,
    pub(super) relay: Arc<Relay>,
    /// The server's requests being answered by a client, by id: cancelled
    /// when the server cancels them.
    asked: Mutex<HashMap<RequestId, CancellationToken>>,
}

/// The call id an HTTP transport tagged `extensions`' `_meta` with (taken
/// off).
fn take_tag(extensions: &mut rmcp::model::Extensions) -> Option<RequestId> {
    let from_request = extensions
        .get_mut::<rmcp::model::RequestMetaObject>()
        .and_then(|meta| meta.0.0.remove(CALL_TAG));
    let tag = from_request.or_else(|| {
        extensions
            .get_mut::<rmcp::model::NotificationMetaObject>()
            .and_then(|meta| meta.0.0.remove(CALL_TAG))
    })?;
    serde_json::from_value(tag).ok()
}

impl Client {
    pub(super) fn new(name: &str, relay: Arc<Relay>) -> (Client, Arc<AtomicBool>) {
        let stopped = Arc::new(AtomicBool::new(false));
        let client = Client {
            name: name.into(),
            announced: Arc::default(),
            stopped: Arc::clone(&stopped),
            relay,
            asked: Mutex::new(HashMap::new()),
        };
        (client, stopped)
    }

    /// A server request goes to the client whose call caused it (see
    /// [`Relay::route`]); roots, outside any call or for an agent without
    /// roots, are the workspace's.
    async fn forward(
        &self,
        id: RequestId,
        tag: Option<RequestId>,
        request: ServerRequest,
    ) -> Result<ClientResult, ErrorData> {
        let roots = matches!(request, ServerRequest::ListRootsRequest(_));
        let route = match self.relay.route(tag.as_ref()) {
            Route::Ambiguous => {
                // Not a guess: wait until one agent's calls are left.
                self.relay.serialize_agents();
                self.relay
                    .unambiguous(tokio::time::Instant::now() + AMBIGUOUS_WAIT)
                    .await
            }
            route => {
                if tag.is_none() && matches!(route, Route::Call(_)) {
                    self.relay.serialize_agents();
                }
                route
            }
        };
        let what = match &request {
            ServerRequest::CreateMessageRequest(_) => "sampling",
            ServerRequest::ElicitRequest(_) => "elicitation",
            _ => "roots",
        };
        let caller = match route {
            Route::Call(caller) if roots && !caller.answers_roots() => {
                return Ok(ClientResult::ListRootsResult(self.list_roots()));
            }
            Route::Call(caller) => caller,
            Route::Outside if roots => return Ok(ClientResult::ListRootsResult(self.list_roots())),
            Route::Outside => {
                return Err(ErrorData::invalid_request(
                    format!(
                        "{what} is only available while a client's call to this server is in flight"
                    ),
                    None,
                ));
            }
            Route::Ambiguous => {
                return Err(ErrorData::invalid_request(
                    format!(
                        "Steward cannot tell which agent's call this {what} request belongs to: calls of several agents were in flight on this server; their calls are serialized from now on, ask again"
                    ),
                    None,
                ));
            }
        };
        if let ServerRequest::ElicitRequest(r) = &request
            && let ElicitRequestParams::UrlElicitationParams { elicitation_id, .. } = &r.params
            && !elicitation_id.is_empty()
        {
            self.relay
                .expect_completion(elicitation_id.clone(), caller.clone());
        }
        let cancel = CancellationToken::new();
        lock(&self.asked).insert(id.clone(), cancel.clone());
        let answer = caller.forward(request, cancel).await;
        lock(&self.asked).remove(&id);
        answer
    }

    fn changed(&self, kind: ListKind) {
        self.relay.heard();
        if self.stopped.load(Ordering::SeqCst) {
            return;
        }
        tracing::trace!(server = %self.name, kind = ?kind, "mcp list_changed");
        self.announced.add(kind);
    }
}

impl Client {
    /// A notification of the server (progress is the transport's, see
    /// [`RelayedProgress`](super::relay::RelayedProgress)).
    fn notification(&self, mut notification: ServerNotification) {
        let tag = take_tag(notification.extensions_mut());
        match notification {
            ServerNotification::ToolListChangedNotification(_) => self.changed(ListKind::Tools),
            ServerNotification::PromptListChangedNotification(_) => {
                self.changed(ListKind::Prompts);
            }
            ServerNotification::ResourceListChangedNotification(_) => {
                self.changed(ListKind::Resources);
            }
            // A log line of a call goes to its agent; others to every
            // agent whose level admits it.
            log @ ServerNotification::LoggingMessageNotification(_) => {
                self.relay.heard();
                if !self.relay.notice(tag.as_ref(), log.clone()) {
                    self.relay.broadcast(log);
                }
            }
            updated @ ServerNotification::ResourceUpdatedNotification(_) => {
                self.relay.broadcast(updated);
            }
            // The server cancels a request of its own: so does the client
            // it was forwarded to.
            ServerNotification::CancelledNotification(n) => {
                if let Some(id) = &n.params.request_id
                    && let Some(cancel) = lock(&self.asked).remove(id)
                {
                    cancel.cancel();
                }
            }
            ServerNotification::CustomNotification(n)
                if n.method == "notifications/elicitation/complete" =>
            {
                match string_param(&n, "elicitationId").and_then(|id| self.relay.completion(id)) {
                    Some(caller) => {
                        let complete = ServerNotification::CustomNotification(n);
                        self.relay
                            .deliver(Box::pin(async move { caller.notify(complete).await }));
                    }
                    None => {
                        tracing::debug!(server = %self.name, "an elicitation completed that no agent was asked")
                    }
                }
            }
            // A task's status goes to the agent whose call made the task
            // (one of 2025-11-25 too).
            ServerNotification::CustomNotification(n)
                if n.method == "notifications/tasks/status" =>
            {
                match string_param(&n, "taskId").and_then(|id| self.relay.task_owner(id)) {
                    Some(caller) => {
                        let server = self.name.to_string();
                        self.relay.deliver(Box::pin(async move {
                            caller.legacy_task_status(&server, n).await
                        }));
                    }
                    None => {
                        tracing::debug!(server = %self.name, "the status of a task no agent's call made")
                    }
                }
            }
            // A task's status goes to the agent whose call made the task.
            ServerNotification::TaskStatusNotification(n) => {
                let id = &n.params.task.task.task_id;
                match self.relay.task_owner(id) {
                    Some(caller) => {
                        let server = self.name.to_string();
                        self.relay.deliver(Box::pin(async move {
                            caller.task_status(&server, n).await
                        }));
                    }
                    None => {
                        tracing::debug!(server = %self.name, task = %id, "the status of a task no agent's call made")
                    }
                }
            }
            other => {
                tracing::trace!(server = %self.name, notification = ?other, "mcp notification")
            }
        }
    }

    /// The answer to request `id` of the server.
    async fn answer_request(
        &self,
        id: RequestId,
        mut request: ServerRequest,
    ) -> Result<ClientResult, ErrorData> {
        let tag = take_tag(request.extensions_mut());
        match request {
            ServerRequest::PingRequest(_) => Ok(ClientResult::empty(())),
            request @ (ServerRequest::ListRootsRequest(_)
            | ServerRequest::CreateMessageRequest(_)
            | ServerRequest::ElicitRequest(_)) => self.forward(id, tag, request).await,
            ServerRequest::CustomRequest(r) => Err(ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                format!("method not found: {}", r.method),
                None,
            )),
            _ => Err(ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                "method not found",
                None,
            )),
        }
    }

    fn list_roots(&self) -> ListRootsResult {
        let root = self.relay.root();
        let uri = lsp_types::Url::from_directory_path(root)
            .map(String::from)
            .unwrap_or_else(|()| format!("file://{}", root.display()));
        let mut entry = Root::new(uri);
        entry.name = root.file_name().map(|n| n.to_string_lossy().into_owned());
        ListRootsResult::new(vec![entry])
    }

    /// What the session's `initialize` says of Steward: what some agent
    /// may answer (see the module doc).
    pub(super) fn info() -> ClientConfig {
        ClientConfig::new(
            session_capabilities().clone(),
            Implementation::new("steward", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

/// What Steward declares for a session with a server: what some agent may
/// answer (see the module doc). A request that needs more (an agent's tasks
/// extension) says so in its own `_meta`.
pub fn session_capabilities() -> &'static ClientCapabilities {
    // Read on every forwarded request (`gateway::agent::told`): parsed once.
    static DECLARED: std::sync::OnceLock<ClientCapabilities> = std::sync::OnceLock::new();
    DECLARED.get_or_init(|| {
        serde_json::from_value(serde_json::json!({
            "roots": {"listChanged": true},
            "sampling": {"tools": {}, "context": {}},
            "elicitation": {"form": {}, "url": {}},
        }))
        .expect("the client capabilities parse")
    })
}

impl Handler for Client {
    fn notified(&self, notification: ServerNotification) {
        self.notification(notification);
    }

    fn answer(
        self: Arc<Self>,
        id: RequestId,
        request: ServerRequest,
    ) -> BoxFuture<'static, Result<ClientResult, ErrorData>> {
        Box::pin(async move { self.answer_request(id, request).await })
    }
}

/// The string parameter `key` of a notification rmcp does not type.
fn string_param<'a>(
    notification: &'a rmcp::model::CustomNotification,
    key: &str,
) -> Option<&'a str> {
    notification.params.as_ref()?.get(key)?.as_str()
}

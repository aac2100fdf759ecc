//! The agent's side of a forwarded request: who the agent is (one client
//! session: its log level), and the [`AgentCaller`] through which the
//! server's progress, requests and log lines of that request reach it.
//!
//! What the agent may be asked is what it declared — per request on
//! 2026-07-28, for its session before: URL-mode elicitation, sampling with
//! tools or context, roots. A request it cannot answer gets the protocol's
//! error, never another agent; roots it has not are the workspace's (the
//! connection answers). An agent's log level is its own: a server's log
//! line of its call reaches it when its level admits the line (on
//! 2026-07-28, only when the request asked for a level).

// Logging, sampling and roots are deprecated by SEP-2577 but part of the
// initialize-lifecycle versions this endpoint speaks.
#![allow(deprecated)]

use std::sync::Mutex;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use rmcp::model::{
    ClientCapabilities, ClientResult, CreateMessageRequestParams, ElicitRequestParams, ErrorCode,
    ErrorData, GetExtensions as _, LoggingLevel, ProgressNotificationParam, ProtocolVersion,
    RequestId, RequestMetaObject, ServerNotification, ServerRequest, TASKS_EXTENSION_ID,
    TaskStatusNotification,
};
use rmcp::service::PeerRequestOptions;
use rmcp::{Peer, RoleServer};
use tokio_util::sync::CancellationToken;

use crate::runtime::mcp::{Caller, session_capabilities};
use crate::support::sync::lock;

/// One agent (a client session of the endpoint).
#[derive(Debug)]
pub struct Agent {
    pub id: u64,
    /// What it asked with `logging/setLevel` (none: every line).
    level: Mutex<Option<LoggingLevel>>,
}

impl Agent {
    pub fn new(id: u64) -> Agent {
        Agent {
            id,
            level: Mutex::new(None),
        }
    }

    pub fn level(&self) -> Option<LoggingLevel> {
        *lock(&self.level)
    }

    pub fn set_level(&self, level: LoggingLevel) {
        *lock(&self.level) = Some(level);
    }
}

/// How severe a level is (debug lowest).
pub fn severity(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// Whether a line at `line` reaches a client that asked for `asked`.
pub fn admits(asked: Option<LoggingLevel>, line: LoggingLevel) -> bool {
    asked.is_none_or(|asked| severity(line) >= severity(asked))
}

/// Whether `meta` is the `_meta` of a request of protocol 2026-07-28 or
/// later (each such request says who sent it and what it can do).
pub fn modern(meta: &RequestMetaObject) -> bool {
    meta.protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// What a server is told, per request on its one session (SEP-2575
/// `_meta` capabilities), that the agent of the request can answer: the
/// sampling, elicitation and tasks that agent declared — nothing another
/// agent declared — and roots always (Steward answers for an agent that
/// declared none with the workspace).
pub fn told(declared: &ClientCapabilities) -> ClientCapabilities {
    let mut told = ClientCapabilities::default();
    told.roots.clone_from(&session_capabilities().roots);
    told.sampling.clone_from(&declared.sampling);
    told.elicitation.clone_from(&declared.elicitation);
    if declared.supports_tasks() {
        told.extensions = Some(
            [(TASKS_EXTENSION_ID.to_owned(), Default::default())]
                .into_iter()
                .collect(),
        );
    }
    told
}

/// The agent of one forwarded request, for the relay.
pub struct AgentCaller {
    pub agent: std::sync::Arc<Agent>,
    pub peer: Peer<RoleServer>,
    /// What it declared (this request's, on 2026-07-28).
    pub capabilities: ClientCapabilities,
    /// A request of 2026-07-28: the log level it asked for (none: no log
    /// lines); `None` for a request of a session.
    pub per_request: Option<Option<LoggingLevel>>,
    /// A request of 2026-07-28 through the bridge: where the server's
    /// requests go ([`super::bridge`]).
    pub asks: Option<super::bridge::Asks>,
    /// The agent's request: over streamable HTTP, the server's requests go
    /// out on its response stream (SEP-2260), not on the standalone one.
    pub originating: RequestId,
}

impl AgentCaller {
    /// The caller of request `originating` of `agent` with `meta`, over
    /// `peer`.
    pub fn new(
        agent: std::sync::Arc<Agent>,
        peer: Peer<RoleServer>,
        meta: &RequestMetaObject,
        asks: Option<super::bridge::Asks>,
        originating: RequestId,
    ) -> AgentCaller {
        let (capabilities, per_request) = if modern(meta) {
            (
                meta.client_capabilities().unwrap_or_default(),
                Some(meta.log_level()),
            )
        } else {
            let declared = peer.peer_info().map(|info| info.capabilities.clone());
            (declared.unwrap_or_default(), None)
        };
        AgentCaller {
            agent,
            peer,
            capabilities,
            per_request,
            asks,
            originating,
        }
    }

    fn admits(&self, line: LoggingLevel) -> bool {
        match self.per_request {
            Some(None) => false,
            Some(Some(level)) => admits(Some(level), line),
            None => admits(self.agent.level(), line),
        }
    }
}

/// What the agent did not declare that it needs to answer `request`, if
/// anything: in words, and as the `requiredCapabilities` of the protocol's
/// error (`-32021`, a `ClientCapabilities` object).
pub fn undeclared(
    capabilities: &ClientCapabilities,
    request: &ServerRequest,
) -> Option<(String, serde_json::Value)> {
    use serde_json::json;
    match request {
        ServerRequest::ElicitRequest(r) => {
            let Some(elicitation) = &capabilities.elicitation else {
                return Some(("elicitation".to_owned(), json!({"elicitation": {}})));
            };
            let url = matches!(r.params, ElicitRequestParams::UrlElicitationParams { .. });
            // `elicitation: {}` is form mode alone.
            (url && elicitation.url.is_none()).then(|| {
                (
                    "URL-mode elicitation".to_owned(),
                    json!({"elicitation": {"url": {}}}),
                )
            })
        }
        ServerRequest::CreateMessageRequest(r) => {
            let Some(sampling) = &capabilities.sampling else {
                return Some(("sampling".to_owned(), json!({"sampling": {}})));
            };
            sampling_needs(&r.params)
                .into_iter()
                .find(|need| match *need {
                    "tools" => sampling.tools.is_none(),
                    _ => sampling.context.is_none(),
                })
                .map(|need| {
                    (
                        format!("sampling with {need}"),
                        json!({"sampling": {need: {}}}),
                    )
                })
        }
        ServerRequest::ListRootsRequest(_) => capabilities
            .roots
            .is_none()
            .then(|| ("roots".to_owned(), json!({"roots": {}}))),
        _ => None,
    }
}

/// What a sampling request needs beyond plain sampling.
fn sampling_needs(params: &CreateMessageRequestParams) -> Vec<&'static str> {
    let value = serde_json::to_value(params).unwrap_or_default();
    let mut needs = Vec::new();
    if value
        .get("tools")
        .and_then(|t| t.as_array())
        .is_some_and(|t| !t.is_empty())
    {
        needs.push("tools");
    }
    if value
        .get("includeContext")
        .and_then(|c| c.as_str())
        .is_some_and(|c| c != "none")
    {
        needs.push("context");
    }
    needs
}

impl Caller for AgentCaller {
    fn agent(&self) -> Option<u64> {
        Some(self.agent.id)
    }

    fn task_holder(&self) -> Option<u64> {
        self.per_request.is_none().then_some(self.agent.id)
    }

    fn answers_roots(&self) -> bool {
        self.capabilities.roots.is_some() && (self.per_request.is_none() || self.asks.is_some())
    }

    fn progress(&self, params: ProgressNotificationParam) -> BoxFuture<'static, ()> {
        let peer = self.peer.clone();
        async move {
            let _ = peer.notify_progress(params).await;
        }
        .boxed()
    }

    fn forward(
        &self,
        request: ServerRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<ClientResult, ErrorData>> {
        let peer = self.peer.clone();
        let originating = self.originating.clone();
        let missing = undeclared(&self.capabilities, &request);
        let modern = self.per_request.is_some();
        let asks = self.asks.clone();
        async move {
            if let Some((what, required)) = missing {
                let refused = ErrorData::new(
                    ErrorCode::METHOD_NOT_FOUND,
                    format!(
                        "the agent whose call this request belongs to did not declare {what}, so the server's request cannot be answered"
                    ),
                    None,
                );
                // A 2026-07-28 agent's request fails as the protocol says
                // (-32021); the server hears that its request was refused.
                if let Some(asks) = asks.filter(|_| modern) {
                    let (answer, _) = tokio::sync::oneshot::channel();
                    let _ = asks.send(super::bridge::Ask {
                        request,
                        answer,
                        missing: Some((what, required)),
                    });
                }
                return Err(refused);
            }
            if modern {
                // Its answer comes with the agent's retry (the bridge).
                let Some(asks) = asks else {
                    return Err(ErrorData::invalid_request(
                        "the agent speaks protocol 2026-07-28, which cannot be asked anything during a request of this kind",
                        None,
                    ));
                };
                let (answer, answered) = tokio::sync::oneshot::channel();
                if asks
                    .send(super::bridge::Ask {
                        request,
                        answer,
                        missing: None,
                    })
                    .is_err()
                {
                    return Err(ErrorData::internal_error("the agent's request ended", None));
                }
                return tokio::select! {
                    answer = answered => answer.unwrap_or_else(|_| {
                        Err(ErrorData::internal_error("the agent's request ended before it answered", None))
                    }),
                    () = cancel.cancelled() => {
                        Err(ErrorData::internal_error("the server cancelled its request", None))
                    }
                };
            }
            let mut request = request;
            request
                .extensions_mut()
                .insert(rmcp::service::OriginatingRequestId(originating));
            let handle = peer
                .send_cancellable_request(request, PeerRequestOptions::no_options())
                .await
                .map_err(agent_error)?;
            tokio::select! {
                answer = handle.rx => match answer {
                    Ok(answer) => answer.map_err(agent_error),
                    Err(_) => Err(ErrorData::internal_error("the agent went away before it answered", None)),
                },
                () = cancel.cancelled() => {
                    let cancelled = rmcp::model::CancelledNotificationParam::new(
                        Some(handle.id.clone()),
                        Some("the server cancelled its request".to_owned()),
                    );
                    let _ = peer.notify_cancelled(cancelled).await;
                    Err(ErrorData::internal_error("the server cancelled its request", None))
                }
            }
        }
        .boxed()
    }

    fn notify(&self, notification: ServerNotification) -> BoxFuture<'static, ()> {
        if let ServerNotification::LoggingMessageNotification(line) = &notification
            && !self.admits(line.params.level)
        {
            return async {}.boxed();
        }
        let peer = self.peer.clone();
        async move {
            let _ = peer.send_notification(notification).await;
        }
        .boxed()
    }

    fn task_status(
        &self,
        server: &str,
        mut notification: TaskStatusNotification,
    ) -> BoxFuture<'static, ()> {
        // A 2026-07-28 agent has no session to hear it on: it polls.
        if self.per_request.is_some() {
            return async {}.boxed();
        }
        let task = &mut notification.params.task.task;
        task.task_id = super::task_handles::exposed_id(server, &task.task_id);
        self.notify(ServerNotification::TaskStatusNotification(notification))
    }

    fn legacy_task_status(
        &self,
        server: &str,
        mut notification: rmcp::model::CustomNotification,
    ) -> BoxFuture<'static, ()> {
        if let Some(id) = notification
            .params
            .as_mut()
            .and_then(|p| p.get_mut("taskId"))
            && let Some(own) = id.as_str()
        {
            *id = super::task_handles::exposed_id(server, own).into();
        }
        self.notify(ServerNotification::CustomNotification(notification))
    }
}

fn agent_error(error: rmcp::service::ServiceError) -> ErrorData {
    match error {
        rmcp::service::ServiceError::McpError(e) => e,
        other => ErrorData::internal_error(format!("the agent did not answer: {other}"), None),
    }
}

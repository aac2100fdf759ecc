//! The call path of one `tools/call`: a direct call, `call_tool` (search)
//! and each inner call of a `run_code` program (code mode) all go through
//! [`Gateway::forward_tool`] — resolve the exposed name (waiting while its
//! server starts or restarts), count it (`status.calls`, metrics with how it
//! came), trace it, forward it over the server's relay, and turn what went
//! wrong into the tool error or protocol error the client gets. A call that
//! never reached a closing connection goes to the next one once; one that
//! did is never sent twice.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities,
    ClientRequest, CompleteResult, ContentBlock, ErrorCode, ErrorData, GetPromptResult,
    ReadResourceResult, RequestId, RequestMetaObject, ResultType, ServerResult, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::Gateway;
use super::agent::{Agent, AgentCaller};
use super::profile::Naming;
use super::registry::Upstream;
use super::route::{Kind, Refusal};
use crate::observe::metrics::{CallResult, ToolCall, Via};
use crate::observe::trace;
use crate::runtime::mcp::CallError;

/// Whose request a forwarded one is: the agent and client it came from (the
/// server's own requests — sampling, elicitation, roots — go to it), its
/// cancellation, its `_meta` (passed on, but for what Steward owns), and
/// how it came.
#[derive(Clone)]
pub struct Origin {
    pub agent: Arc<Agent>,
    pub peer: Peer<RoleServer>,
    pub ct: CancellationToken,
    pub meta: RequestMetaObject,
    pub id: RequestId,
    pub via: Via,
    /// The span an inner call of code mode is a child of (the `run_code`
    /// call's); a client's own call continues the client's trace instead.
    pub parent: Option<tracing::Span>,
    /// A request of 2026-07-28 through the bridge: where the server's
    /// requests go ([`super::bridge`]).
    pub asks: Option<super::bridge::Asks>,
    /// What the agent declared for this request (for its session, or in
    /// the request's `_meta`): what the server is told it can answer
    /// ([`upstream_meta`]), task handles included ([`super::tasks`]).
    pub capabilities: ClientCapabilities,
}

impl Origin {
    /// A request of `agent`'s.
    pub fn of(context: &RequestContext<RoleServer>, via: Via, agent: &Arc<Agent>) -> Origin {
        Origin {
            agent: agent.clone(),
            peer: context.peer.clone(),
            ct: context.ct.clone(),
            meta: context.meta.clone(),
            id: context.id.clone(),
            via,
            parent: None,
            asks: None,
            capabilities: context.client_capabilities().unwrap_or_default(),
        }
    }
}

/// Checks a call's arguments against the tool's definition as the live
/// connection offers it, just before it is sent (code mode): `Err` says what
/// is wrong, and the call is not sent.
pub type Precheck<'a> = &'a (dyn Fn(&Tool) -> Result<(), String> + Send + Sync);

/// Why a call got no answer from its tool.
#[derive(Debug)]
pub enum CallFailure {
    /// A protocol error for the client (unknown tool, the server's own error).
    Error(ErrorData),
    /// The precheck refused the arguments; nothing was sent.
    Invalid(String),
}

pub fn tool_error(text: String) -> CallToolResponse {
    CallToolResponse::Complete(CallToolResult::error(vec![ContentBlock::text(text)]))
}

/// The keys of a client's request `_meta` that Steward owns, not passed
/// on: the progress token (the forwarded request has its own, mapped back)
/// and, unless the request goes on as one of 2026-07-28 (`native`), what
/// describes the client's own hop (its protocol version, identity,
/// capabilities and log level). Trace context is merged by
/// [`trace::pass_on`].
fn owned(key: &str, native: bool) -> bool {
    key == "progressToken" || (!native && key.starts_with("io.modelcontextprotocol/"))
}

/// The `_meta` a forwarded request carries for `client`'s: every key but
/// those Steward owns.
pub fn passed_meta(client: &RequestMetaObject, native: bool) -> Option<RequestMetaObject> {
    let mut meta = client.clone();
    meta.0.0.retain(|key, _| !owned(key, native));
    (!meta.0.0.is_empty()).then_some(meta)
}

/// The `_meta` of a request of `origin`'s that goes on to a server,
/// `native`ly or on the server's session: the client's (but for what
/// Steward owns) and, on the session, what the agent of this request can
/// answer ([`super::agent::told`]: the session's `initialize` said what
/// any agent may).
pub fn upstream_meta(origin: &Origin, native: bool) -> Option<RequestMetaObject> {
    let mut meta = passed_meta(&origin.meta, native);
    if !native {
        meta.get_or_insert_with(RequestMetaObject::default)
            .set_client_capabilities(super::agent::told(&origin.capabilities));
    }
    meta
}

/// Whether the agent of `origin` can be asked to sign the user in (open a
/// page): it declared URL-mode elicitation, and the request is not one of
/// 2026-07-28, which takes no server request (its bridge asks for input
/// instead, which a sign-in does not fit).
fn can_ask(origin: &Origin) -> bool {
    origin.asks.is_none() && super::sign_in::opens_pages(&origin.peer)
}

/// The refusal of a retry whose `requestState` names nothing waiting.
pub fn stale_state() -> ErrorData {
    ErrorData::invalid_params(
        "requestState names no request waiting for input (unknown, tampered, already answered, or expired)",
        None,
    )
}

/// Whether a request of `client`'s goes to `up` as what it is, a request of
/// 2026-07-28 (the server serves those on its session): its answer may then
/// be `input_required`, which goes back to the client as it is.
pub fn native(client: &RequestMetaObject, up: &Upstream) -> bool {
    super::agent::modern(client) && up.handle.per_request()
}

/// A `tools/call` answer that is not a `CallToolResult` variant (a server
/// answering `{}`), read as one.
pub fn as_call_tool_result(result: ServerResult) -> Option<CallToolResponse> {
    match result {
        ServerResult::CallToolResult(r) => Some(CallToolResponse::Complete(complete(r))),
        ServerResult::CreateTaskResult(t) => Some(CallToolResponse::Task(t)),
        ServerResult::InputRequiredResult(r) => Some(CallToolResponse::InputRequired(r)),
        other => serde_json::to_value(&other)
            .ok()
            .and_then(|v| serde_json::from_value::<CallToolResult>(v).ok())
            .map(|r| CallToolResponse::Complete(complete(r))),
    }
}

/// A final result as a 2026-07-28 client needs it: an upstream server of an
/// older version sends no `resultType`, which that version requires (rmcp
/// leaves it out again for clients of older versions).
pub trait Final {
    fn result_type(&mut self) -> &mut Option<ResultType>;
}

macro_rules! final_result {
    ($($t:ty),*) => {$(
        impl Final for $t {
            fn result_type(&mut self) -> &mut Option<ResultType> {
                &mut self.result_type
            }
        }
    )*};
}

final_result!(
    CallToolResult,
    GetPromptResult,
    ReadResourceResult,
    CompleteResult
);

pub fn complete<T: Final>(mut result: T) -> T {
    result.result_type().get_or_insert(ResultType::COMPLETE);
    result
}

impl Gateway {
    /// Forward a call of `exposed` to its server, counted and timed
    /// ([`ToolCall`]).
    pub async fn forward_tool(
        &self,
        exposed: &str,
        params: CallToolRequestParams,
        naming: Naming<'_>,
        origin: &Origin,
    ) -> Result<CallToolResponse, ErrorData> {
        self.forward_checked(exposed, params, naming, origin, None)
            .await
            .map_err(|failure| match failure {
                CallFailure::Error(e) => e,
                // No precheck, no refusal.
                CallFailure::Invalid(why) => ErrorData::invalid_params(why, None),
            })
    }

    /// How long a call may go without an answer or progress
    /// (`mcp.toolIdleTimeoutMs`).
    pub fn tool_idle(&self) -> Option<std::time::Duration> {
        self.store
            .snapshot()
            .desired
            .policy
            .tool_idle_timeout(self.config.tool_idle_env)
    }

    /// [`Self::forward_tool`], with the arguments checked by `precheck`
    /// against the definition of the tool it resolves to.
    pub async fn forward_checked(
        &self,
        exposed: &str,
        params: CallToolRequestParams,
        naming: Naming<'_>,
        origin: &Origin,
        precheck: Option<Precheck<'_>>,
    ) -> Result<CallToolResponse, CallFailure> {
        let span = match &origin.parent {
            Some(parent) => trace::inner_call_span(parent, &origin.id),
            None => {
                let span = trace::tool_call_span(&origin.id);
                trace::continue_from(&span, Some(&origin.meta));
                span
            }
        };
        let mut call = ToolCall::begin(origin.via);
        let answer = self
            .forward_tool_as(exposed, params, naming, origin, precheck, &mut call)
            .instrument(span.clone())
            .await;
        trace::tool_call_ended(&span, &call);
        answer
    }

    async fn forward_tool_as(
        &self,
        exposed: &str,
        mut params: CallToolRequestParams,
        naming: Naming<'_>,
        origin: &Origin,
        precheck: Option<Precheck<'_>>,
        call: &mut ToolCall,
    ) -> Result<CallToolResponse, CallFailure> {
        let gateway = self;
        let caller_token = origin.meta.get_progress_token();
        let mut retried = false;
        // One call counted once, even when it is retried on a new connection.
        let mut counted = None;
        // Signed in through the agent for this call; waits for the server
        // to take the sign-in.
        let mut signed_in = false;
        let mut waits = 0;
        loop {
            let (up, original) = match gateway.resolve(Kind::Tool, exposed, naming).await {
                Ok(found) => found,
                Err(Refusal::Unavailable { server, mut why }) => {
                    if gateway.waits_for_sign_in(&server) && waits < 2 && can_ask(origin) {
                        waits += 1;
                        let signing = if signed_in {
                            Ok(())
                        } else {
                            gateway
                                .sign_in_through_agent(&server, &origin.peer, &origin.ct)
                                .await
                        };
                        match signing {
                            Ok(()) => {
                                signed_in = true;
                                gateway.wait_past_sign_in(&server).await;
                                continue;
                            }
                            Err(e) => why = format!("{why} (signing in through the agent: {e})"),
                        }
                    }
                    // Counted as a failed call of that server.
                    drop(gateway.registry.counters(&server).begin());
                    let tool = match naming {
                        Naming::Own(_) => exposed,
                        Naming::Prefixed(_) => exposed
                            .strip_prefix(&format!("{server}__"))
                            .unwrap_or(exposed),
                    };
                    call.to(&server, tool);
                    call.ended(CallResult::Unavailable);
                    return Ok(tool_error(why));
                }
                Err(Refusal::Unknown(why)) => {
                    return Err(CallFailure::Error(ErrorData::invalid_params(why, None)));
                }
            };
            // A `requestState` Steward did not give (its bridge answered
            // those) is the server's own only if it serves 2026-07-28.
            if params.request_state.is_some() && !native(&origin.meta, &up) {
                return Err(CallFailure::Error(stale_state()));
            }
            if let Some(check) = precheck
                && let Some(tool) = up.catalog.tools.iter().find(|t| t.name == original)
            {
                // Not counted: the call is the program's mistake, never sent.
                check(tool).map_err(CallFailure::Invalid)?;
            }
            call.to(&up.server, &original);
            let guard = counted
                .take()
                .unwrap_or_else(|| gateway.registry.counters(&up.server).begin());
            params.name = original.into();
            // The client's `_meta` goes on; the call's trace context (or,
            // not traced, its client's) with it.
            params.meta = upstream_meta(origin, native(&origin.meta, &up));
            trace::pass_on(&tracing::Span::current(), &origin.meta, &mut params.meta);
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
            let idle = gateway.tool_idle();
            let answer = forward(&up, request, origin, caller_token.clone(), idle).await;
            let server = &up.server;
            call.ended(match &answer {
                Err(CallError::Cancelled) => CallResult::Cancelled,
                Err(CallError::Closed | CallError::NotSent) => CallResult::Unavailable,
                Err(CallError::Timeout(_) | CallError::Idle(_)) => CallResult::Timeout,
                Err(_) => CallResult::Error,
                Ok(_) => CallResult::Ok,
            });
            // A task of 2025-11-25, which rmcp does not type.
            if let Ok(result) = &answer
                && let Some(made) = super::task_handles::created(server, result)
            {
                guard.succeeded();
                return Ok(made);
            }
            return match answer {
                Ok(result) => match as_call_tool_result(result) {
                    Some(mut response) => {
                        if let CallToolResponse::Task(handle) = response {
                            response = CallToolResponse::Task(super::task_handles::exposed(
                                server, handle,
                            ));
                        }
                        if let CallToolResponse::Complete(r) = &response {
                            gateway.remember_links(server, r);
                        }
                        if matches!(&response, CallToolResponse::Complete(r) if r.is_error == Some(true))
                        {
                            call.ended(CallResult::ToolError);
                        } else {
                            guard.succeeded();
                        }
                        Ok(response)
                    }
                    None => {
                        call.ended(CallResult::Error);
                        Err(CallFailure::Error(unexpected(server, "tools/call")))
                    }
                },
                Err(CallError::Server(error)) => Err(CallFailure::Error(error)),
                Err(CallError::Cancelled) => Err(CallFailure::Error(ErrorData::new(
                    ErrorCode::INTERNAL_ERROR,
                    "the request was cancelled",
                    None,
                ))),
                // Never reached the server: it may go to the next connection.
                Err(CallError::NotSent) => {
                    if !retried && gateway.worth_another_try(&up) {
                        retried = true;
                        counted = Some(guard);
                        continue;
                    }
                    Ok(tool_error(format!(
                        "server \"{server}\" closed the connection before the call was sent (it exited or was stopped); see `steward describe {server}`"
                    )))
                }
                // Sent: the server may have acted on it, so it is never
                // sent again (a call never runs twice).
                Err(CallError::Closed) => Ok(tool_error(format!(
                    "server \"{server}\" stopped while serving this call (it exited, crashed or was stopped); \
                     the tool may or may not have run: check before calling it again. See `steward describe {server}`"
                ))),
                Err(CallError::Timeout(t)) => Ok(tool_error(format!(
                    "server \"{server}\" did not answer within {} (the entry's \"timeout\")",
                    humantime::format_duration(t)
                ))),
                Err(CallError::Idle(t)) => Ok(tool_error(format!(
                    "server \"{server}\" sent neither an answer nor progress for {} (mcp.toolIdleTimeoutMs); the call was cancelled",
                    humantime::format_duration(t)
                ))),
                Err(CallError::Other(e)) => Ok(tool_error(format!(
                    "forward the call to server \"{server}\": {e}"
                ))),
                // Refused before it ran, while the token could not be
                // refreshed for now: no sign-in; the connection is tried
                // again.
                Err(CallError::Unrefreshed(why)) => Ok(tool_error(format!(
                    "server \"{server}\" did not run this call: its access token expired and could not be refreshed for now ({why}); Steward tries again — call again later, see `steward describe {server}`"
                ))),
                // Refused before it ran: the user signs in — through the
                // agent when it can open a page, and the call goes on —
                // else with the command, then calls again.
                Err(CallError::SignIn(need)) => {
                    let needed = super::sign_in::needed(server, &need);
                    if signed_in || !can_ask(origin) {
                        return Ok(tool_error(needed));
                    }
                    match gateway
                        .sign_in_through_agent(server, &origin.peer, &origin.ct)
                        .await
                    {
                        Ok(()) => {
                            signed_in = true;
                            counted = Some(guard);
                            continue;
                        }
                        Err(e) => Ok(tool_error(format!(
                            "{needed} (signing in through the agent: {e})"
                        ))),
                    }
                }
            };
        }
    }
}

/// Forward `request` to `up` for the client of `origin`: the server's
/// progress (when `progress`, the client's token, asks for it) and its own
/// requests go to that client, and the client's cancellation ends the call.
pub async fn forward(
    up: &Upstream,
    mut request: ClientRequest,
    origin: &Origin,
    progress: Option<rmcp::model::ProgressToken>,
    idle: Option<std::time::Duration>,
) -> Result<ServerResult, CallError> {
    hoist_meta(&mut request);
    let request = super::task_handles::to_upstream(request);
    let caller = Arc::new(AgentCaller::new(
        origin.agent.clone(),
        origin.peer.clone(),
        &origin.meta,
        origin.asks.clone(),
        origin.id.clone(),
    ));
    up.handle
        .call(request, caller, progress, up.timeout, idle, &origin.ct)
        .await
}

/// Move a request's `_meta` from its params to the request itself, where
/// the transports read it (the protocol version of a request of
/// 2026-07-28 decides how it is sent); on the wire it is the same.
fn hoist_meta(request: &mut ClientRequest) {
    use rmcp::model::GetMeta as _;
    let taken = match request {
        ClientRequest::CallToolRequest(r) => r.params.meta.take(),
        ClientRequest::GetPromptRequest(r) => r.params.meta.take(),
        ClientRequest::ReadResourceRequest(r) => r.params.meta.take(),
        ClientRequest::CompleteRequest(r) => r.params.meta.take(),
        ClientRequest::GetTaskRequest(r) => r.params.meta.take(),
        ClientRequest::UpdateTaskRequest(r) => r.params.meta.take(),
        ClientRequest::CancelTaskRequest(r) => r.params.meta.take(),
        _ => None,
    };
    if let Some(meta) = taken {
        request.get_meta_mut().extend(meta);
    }
}

/// The error for an answer of the wrong kind.
pub fn unexpected(server: &str, method: &str) -> ErrorData {
    ErrorData::internal_error(
        format!("server \"{server}\" answered {method} with something else"),
        None,
    )
}

pub fn call_error(server: &str, error: CallError) -> ErrorData {
    match error {
        CallError::Server(e) => e,
        other => ErrorData::internal_error(format!("server \"{server}\": {other}"), None),
    }
}

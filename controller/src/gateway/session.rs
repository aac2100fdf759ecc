//! One client's MCP session with the agent endpoint.
//!
//! Lists come from the registry's union (paginated; during the cold start
//! they wait for it, see [`Gateway::cold_start`]); calls are routed by
//! exposed name (tools, prompts) or URI (resources) to the live connection
//! of their server and forwarded through its relay, so progress,
//! cancellation and the server's own requests (sampling, elicitation) reach
//! the right client. A call to a server that is starting or restarting
//! waits for it; a call to a server that cannot run returns a tool error
//! that says why and what to do.

// Logging is deprecated by SEP-2577 (protocol 2026-07-28) but part of the
// initialize-lifecycle versions this endpoint speaks.
#![allow(deprecated)]

use std::sync::{Arc, Mutex};

use futures::FutureExt as _;
use futures::future::BoxFuture;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult, ClientRequest,
    ClientResult, CompleteRequest, CompleteRequestParams, CompleteResult, ContentBlock, ErrorCode,
    ErrorData, GetPromptRequest, GetPromptRequestParams, GetPromptResponse, Implementation,
    InitializeRequestParams, InitializeResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ProtocolVersion, ReadResourceRequest, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Reference, ResourceContents, ServerCapabilities, ServerConfig,
    ServerRequest, ServerResult, SetLevelRequest, SetLevelRequestParams,
};
use rmcp::model::{GetPromptResult, ResultType, SubscriptionFilter};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{Peer, RoleServer, ServerHandler};
use steward_schema::resource::{Phase, ResourceKind};
use tokio::time::Instant;
use tracing::Instrument as _;

use super::explain::{explain, explain_blocked};
use super::pins::Definition;
use super::profile::Profile;
use super::registry::{Union, Upstream};
use super::{Gateway, Ticket, finder, instructions, lsp_tool, names, view};
use crate::desired::snapshot::Key;
use crate::observe::metrics::{CallResult, ToolCall};
use crate::observe::trace;
use crate::runtime::mcp::{CallError, Caller};
use crate::support::sync::lock;

/// One client (see the module doc).
#[derive(Debug)]
pub struct Session {
    gateway: Arc<Gateway>,
    ticket: Ticket,
    /// What the client asked to see; an HTTP client's comes with its
    /// `initialize` request.
    profile: Mutex<Profile>,
}

impl Session {
    pub fn new(gateway: &Arc<Gateway>, transport: &'static str, profile: Profile) -> Session {
        Session::reporting(gateway, transport, profile, None)
    }

    /// A session whose state also goes to `handback` (for the `steward mcp`
    /// that handed it over, see [`super::resume`]).
    pub fn reporting(
        gateway: &Arc<Gateway>,
        transport: &'static str,
        profile: Profile,
        handback: Option<super::resume::HandbackTx>,
    ) -> Session {
        Session {
            gateway: gateway.clone(),
            ticket: gateway.attach(transport, profile, handback),
            profile: Mutex::new(profile),
        }
    }

    /// The session goes on from another controller (see
    /// [`super::Ticket::resume`]).
    pub fn resumed(&self, peer: Option<Peer<RoleServer>>, seen: Option<[u64; 3]>) {
        self.ticket.resume(peer, seen);
    }

    fn profile(&self) -> Profile {
        *lock(&self.profile)
    }

    /// The union as this client's names have it (never with a cached
    /// catalog that may not be listed any more).
    fn union(&self) -> Arc<Union> {
        self.gateway.prune_cached();
        self.gateway.registry.union_for(self.profile().max_name_len)
    }
}

/// Why a name leads nowhere.
enum Refusal {
    /// Its server cannot serve it now: a tool error with this text.
    Unavailable { server: String, why: String },
    /// Nobody has it: a protocol error with this text.
    Unknown(String),
}

/// What a server's status says about calling it.
enum Availability {
    Wait,
    Down(String),
}

/// The kinds of routed names.
#[derive(Clone, Copy)]
enum Kind {
    Tool,
    Prompt,
}

impl Kind {
    fn noun(self) -> &'static str {
        match self {
            Kind::Tool => "tool",
            Kind::Prompt => "prompt",
        }
    }
}

impl Gateway {
    /// Why `server` is not live, or that it is worth waiting for.
    fn availability(&self, server: &str) -> Availability {
        let key = Key::mcp(server);
        let snap = self.store.snapshot();
        if !snap.contains(&key) {
            return Availability::Down(format!(
                "server \"{server}\" was removed from the configuration; its tools are gone"
            ));
        }
        match self.status.get(&key) {
            None => match snap.blocked(&key) {
                Some(b) => Availability::Down(explain_blocked(server, b.reason, &b.message)),
                None => Availability::Wait,
            },
            Some(s) => match s.phase {
                Phase::Pending | Phase::Starting | Phase::Stopping | Phase::Ready | Phase::Idle => {
                    Availability::Wait
                }
                Phase::Failed | Phase::Blocked => Availability::Down(explain(server, &s)),
            },
        }
    }

    /// Whether a request that `up` closed under goes to its server's next
    /// connection: a restart or an idle stop swapped the connection (the
    /// request raced the drain) and the server is still worth waiting for.
    /// Asked once per request.
    fn worth_another_try(&self, up: &Upstream) -> bool {
        let swapped = self
            .registry
            .live(&up.server)
            .is_none_or(|now| !Arc::ptr_eq(now.handle.relay(), up.handle.relay()));
        swapped && matches!(self.availability(&up.server), Availability::Wait)
    }

    /// The server an unlisted exposed name points at, by its `server__`
    /// prefix (configured or removed servers only), and the rest of it.
    fn by_prefix(&self, exposed: &str, max_name_len: usize) -> Option<(String, String)> {
        let snap = self.store.snapshot();
        let removed = self.status.removed_names(ResourceKind::McpServer);
        snap.desired
            .mcp
            .keys()
            .chain(removed.iter())
            .filter_map(|server| {
                let prefix = names::assign([(server.as_str(), "")], max_name_len).remove(0);
                exposed
                    .strip_prefix(&prefix)
                    .map(|rest| (prefix.len(), server.clone(), rest.to_owned()))
            })
            .max_by_key(|(len, _, _)| *len)
            .map(|(_, server, rest)| (server, rest))
    }

    /// The live upstream and original name behind `exposed` (a name of
    /// at most `max_name_len` characters), waiting (up to the start wait)
    /// while its server starts or restarts.
    async fn resolve(
        &self,
        kind: Kind,
        exposed: &str,
        max_name_len: usize,
    ) -> Result<(Arc<Upstream>, String), Refusal> {
        let deadline = Instant::now() + self.config.start_wait;
        let mut changes = self.registry.subscribe();
        let mut demanded = false;
        loop {
            changes.borrow_and_update();
            let union = self.registry.union_for(max_name_len);
            let listed = match kind {
                Kind::Tool => union.tool(exposed),
                Kind::Prompt => union.prompt(exposed),
            }
            .map(|r| (r.server.clone(), r.original.clone()));
            let Some((server, original)) = listed
                .clone()
                .or_else(|| self.by_prefix(exposed, max_name_len))
            else {
                let known: Vec<&str> = match kind {
                    Kind::Tool => union.tool_names().collect(),
                    Kind::Prompt => union.prompts.iter().map(|p| p.name.as_str()).collect(),
                };
                return Err(Refusal::Unknown(unknown(kind, exposed, &known)));
            };
            if let Some(up) = self.registry.live(&server) {
                let offered = match kind {
                    Kind::Tool => up.catalog.tools.iter().any(|t| t.name == original),
                    Kind::Prompt => up.catalog.prompts.iter().any(|p| p.name == original),
                };
                if offered {
                    return Ok((up, original));
                }
                let pinned = match kind {
                    Kind::Tool => Definition::Tool,
                    Kind::Prompt => Definition::Prompt,
                };
                if listed.is_none()
                    && let Some(why) = self.pins.refusal(pinned, &server, exposed, max_name_len)
                {
                    return Err(Refusal::Unavailable { server, why });
                }
                if listed.is_none() {
                    let known: Vec<&str> = match kind {
                        Kind::Tool => union.tool_names().collect(),
                        Kind::Prompt => union.prompts.iter().map(|p| p.name.as_str()).collect(),
                    };
                    return Err(Refusal::Unknown(unknown(kind, exposed, &known)));
                }
                // Listed but not offered by the live connection: the union is
                // being rebuilt; look again.
            } else if let Availability::Down(why) = self.availability(&server) {
                return Err(Refusal::Unavailable { server, why });
            } else if !std::mem::replace(&mut demanded, true) {
                // An idle server starts for it; one starting goes on.
                self.demand(&server);
            }
            let waited = tokio::time::timeout_at(deadline, changes.changed()).await;
            let why = match waited {
                Ok(Ok(())) => continue,
                Ok(Err(_)) => "the controller is shutting down".to_owned(),
                Err(_) => format!(
                    "server \"{server}\" did not become ready within {}; see `steward describe {server}`",
                    humantime::format_duration(self.config.start_wait)
                ),
            };
            return Err(Refusal::Unavailable { server, why });
        }
    }

    /// The live upstream that owns `uri` (a listed resource, or one that fits
    /// a listed template), waiting (up to the start wait) while its server
    /// starts or restarts, as a call does.
    async fn resource_upstream(&self, uri: &str) -> Result<Arc<Upstream>, ErrorData> {
        let deadline = Instant::now() + self.config.start_wait;
        let mut changes = self.registry.subscribe();
        let mut demanded = false;
        loop {
            changes.borrow_and_update();
            let union = self.registry.union();
            let server = union.resource_owner(uri).ok_or_else(|| {
                ErrorData::resource_not_found(
                    format!("no server of this workspace lists the resource {uri}"),
                    None,
                )
            })?;
            if let Some(up) = self.registry.live(server) {
                return Ok(up);
            }
            if let Availability::Down(why) = self.availability(server) {
                return Err(ErrorData::resource_not_found(why, None));
            }
            if !std::mem::replace(&mut demanded, true) {
                self.demand(server);
            }
            let why = match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => continue,
                Ok(Err(_)) => "the controller is shutting down".to_owned(),
                Err(_) => format!(
                    "server \"{server}\" did not become ready within {}; see `steward describe {server}`",
                    humantime::format_duration(self.config.start_wait)
                ),
            };
            return Err(ErrorData::resource_not_found(why, None));
        }
    }
}

/// "unknown tool" with the closest names.
/// The MCP protocol versions the agent endpoint speaks (`steward --version`
/// prints them): every version up to 2026-07-28, whose clients skip
/// `initialize` (each request says who they are) and hear of list changes
/// on a `subscriptions/listen` request instead of on the session.
pub fn protocol_versions() -> &'static [ProtocolVersion] {
    ProtocolVersion::known_up_to(&ProtocolVersion::LATEST)
}

fn unknown(kind: Kind, exposed: &str, known: &[&str]) -> String {
    let close = names::close_names(exposed, known.iter().copied(), 5);
    let noun = kind.noun();
    if close.is_empty() {
        format!("unknown {noun} \"{exposed}\": no server of this workspace offers it")
    } else {
        format!(
            "unknown {noun} \"{exposed}\": no server of this workspace offers it (did you mean: {})",
            close.join(", ")
        )
    }
}

fn tool_error(text: String) -> CallToolResponse {
    CallToolResponse::Complete(CallToolResult::error(vec![ContentBlock::text(text)]))
}

/// One page of `items` from `cursor` (a decimal offset).
fn page<T: Clone>(
    items: &[T],
    request: Option<&PaginatedRequestParams>,
    size: usize,
) -> Result<(Vec<T>, Option<String>), ErrorData> {
    let start = match request.and_then(|r| r.cursor.as_deref()) {
        None => 0,
        Some(cursor) => cursor
            .parse::<usize>()
            .ok()
            .filter(|n| *n <= items.len())
            .ok_or_else(|| ErrorData::invalid_params(format!("invalid cursor {cursor:?}"), None))?,
    };
    let end = (start + size.max(1)).min(items.len());
    let next = (end < items.len()).then(|| end.to_string());
    Ok((items[start..end].to_vec(), next))
}

/// The client of one forwarded request, for the relay.
struct ClientCaller {
    peer: Peer<RoleServer>,
}

impl Caller for ClientCaller {
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
    ) -> BoxFuture<'static, Result<ClientResult, ErrorData>> {
        let peer = self.peer.clone();
        async move {
            let capabilities = peer.peer_info().map(|info| info.capabilities.clone());
            let (declared, what) = match &request {
                ServerRequest::CreateMessageRequest(_) => (
                    capabilities.as_ref().is_some_and(|c| c.sampling.is_some()),
                    "sampling",
                ),
                ServerRequest::ElicitRequest(_) => (
                    capabilities.as_ref().is_some_and(|c| c.elicitation.is_some()),
                    "elicitation",
                ),
                ServerRequest::ListRootsRequest(_) => (
                    capabilities.as_ref().is_some_and(|c| c.roots.is_some()),
                    "roots",
                ),
                _ => (true, "this request"),
            };
            if !declared {
                return Err(ErrorData::new(
                    ErrorCode::METHOD_NOT_FOUND,
                    format!(
                        "the agent connected to Steward did not declare the {what} capability, so the server's {what} request cannot be answered"
                    ),
                    None,
                ));
            }
            peer.send_request(request).await.map_err(|e| match e {
                rmcp::service::ServiceError::McpError(e) => e,
                other => ErrorData::internal_error(format!("the agent did not answer: {other}"), None),
            })
        }
        .boxed()
    }
}

/// A `tools/call` answer that is not a `CallToolResult` variant (a server
/// answering `{}`), read as one.
fn as_call_tool_result(result: ServerResult) -> Option<CallToolResponse> {
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
trait Final {
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

fn complete<T: Final>(mut result: T) -> T {
    result.result_type().get_or_insert(ResultType::COMPLETE);
    result
}

impl Session {
    /// Forward a call of `exposed` to its server, counted and timed
    /// ([`ToolCall`]).
    async fn forward_tool(
        &self,
        exposed: &str,
        params: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let span = trace::tool_call_span(&context.id);
        trace::continue_from(&span, Some(&context.meta));
        let mut call = ToolCall::begin();
        let answer = self
            .forward_tool_as(exposed, params, context, &mut call)
            .instrument(span.clone())
            .await;
        trace::tool_call_ended(&span, &call);
        answer
    }

    async fn forward_tool_as(
        &self,
        exposed: &str,
        mut params: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        call: &mut ToolCall,
    ) -> Result<CallToolResponse, ErrorData> {
        let gateway = &self.gateway;
        let caller_token = context.meta.get_progress_token();
        let mut retried = false;
        // One call counted once, even when it is retried on a new connection.
        let mut counted = None;
        loop {
            let max_name_len = self.profile().max_name_len;
            let (up, original) = match gateway.resolve(Kind::Tool, exposed, max_name_len).await {
                Ok(found) => found,
                Err(Refusal::Unavailable { server, why }) => {
                    // Counted as a failed call of that server.
                    drop(gateway.registry.counters(&server).begin());
                    let tool = exposed
                        .strip_prefix(&format!("{server}__"))
                        .unwrap_or(exposed);
                    call.to(&server, tool);
                    call.ended(CallResult::Unavailable);
                    return Ok(tool_error(why));
                }
                Err(Refusal::Unknown(why)) => return Err(ErrorData::invalid_params(why, None)),
            };
            call.to(&up.server, &original);
            let guard = counted
                .take()
                .unwrap_or_else(|| gateway.registry.counters(&up.server).begin());
            params.name = original.into();
            // The call's trace context (or, not traced, its client's) goes on.
            trace::pass_on(&tracing::Span::current(), &context.meta, &mut params.meta);
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
            let idle = gateway
                .store
                .snapshot()
                .desired
                .policy
                .tool_idle_timeout(gateway.config.tool_idle_env);
            let answer = forward(&up, request, context, caller_token.clone(), idle).await;
            let server = &up.server;
            call.ended(match &answer {
                Err(CallError::Cancelled) => CallResult::Cancelled,
                Err(CallError::Closed | CallError::NotSent) => CallResult::Unavailable,
                Err(CallError::Timeout(_) | CallError::Idle(_)) => CallResult::Timeout,
                Err(_) => CallResult::Error,
                Ok(_) => CallResult::Ok,
            });
            return match answer {
                Ok(result) => match as_call_tool_result(result) {
                    Some(response) => {
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
                        Err(unexpected(server, "tools/call"))
                    }
                },
                Err(CallError::Server(error)) => Err(error),
                Err(CallError::Cancelled) => Err(ErrorData::new(
                    ErrorCode::INTERNAL_ERROR,
                    "the request was cancelled",
                    None,
                )),
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
            };
        }
    }
}

/// Steward's own paragraph of the `initialize` instructions.
const OWN_INSTRUCTIONS: &str = "Steward offers the tools, prompts and resources of every MCP server \
     of this workspace that is ready, named server__tool, and code intelligence as the lsp tool. \
     The list follows the configuration files live (list_changed). With --expose search, \
     search_tools finds a tool by describing the task and call_tool calls it. What each server \
     tells its clients follows.";

impl Session {
    /// Call the tool listed (or found) as `exposed`: `lsp` or a server's.
    async fn call_named(
        &self,
        exposed: &str,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if exposed == lsp_tool::NAME {
            let result = lsp_tool::call(&self.gateway, request.arguments.unwrap_or_default()).await;
            return Ok(CallToolResponse::Complete(result));
        }
        self.forward_tool(exposed, request, context).await
    }
}

impl ServerHandler for Session {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_completions()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("steward", env!("CARGO_PKG_VERSION")))
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
            .with_instructions(instructions::combine(
                OWN_INSTRUCTIONS,
                &self.union().instructions,
                instructions::BUDGET,
            ))
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(protocol_versions())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // The three list changes; resources/updated of upstream servers is
        // not relayed (nor is resources/subscribe on older versions).
        let _ = requested;
        Some(
            SubscriptionFilter::builder()
                .tools_list_changed()
                .prompts_list_changed()
                .resources_list_changed()
                .build(),
        )
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let id = context.sink().id().clone();
        self.ticket.listen(context.sink().clone());
        context.cancelled().await;
        self.ticket.unlisten(&id);
        Ok(())
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        // An HTTP client's view comes in the endpoint's query string (the
        // transport refused a malformed one before it got here).
        if let Some(parts) = context.extensions.get::<http::request::Parts>() {
            let profile = Profile::from_query(parts.uri.query())
                .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
            *lock(&self.profile) = profile;
            self.ticket.set_profile(profile);
        }
        if context
            .extensions
            .get::<rmcp::transport::streamable_http_server::session::SessionRestoreMarker>()
            .is_some()
        {
            tracing::info!("an HTTP session resumed from the last controller");
        }
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.ticket.set_peer(context.peer);
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.gateway.cold_start().await;
        let tools = view::tools(&self.union(), &self.profile());
        let (tools, next) = page(&tools, request.as_ref(), self.gateway.config.page_size)?;
        let mut result = ListToolsResult::with_all_items(tools);
        result.next_cursor = next;
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let exposed = request.name.to_string();
        match exposed.as_str() {
            finder::SEARCH => {
                self.gateway.cold_start().await;
                let result = finder::search(&self.union(), request.arguments);
                Ok(CallToolResponse::Complete(result))
            }
            finder::CALL => match finder::call_args(request.arguments.clone()) {
                Ok(call) => {
                    let mut request = request;
                    request.name = call.name.clone().into();
                    request.arguments = call.arguments;
                    self.call_named(&call.name, request, &context).await
                }
                Err(refused) => Ok(CallToolResponse::Complete(refused)),
            },
            _ => self.call_named(&exposed, request, &context).await,
        }
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        self.gateway.cold_start().await;
        let union = self.union();
        let (prompts, next) = page(
            &union.prompts,
            request.as_ref(),
            self.gateway.config.page_size,
        )?;
        let mut result = ListPromptsResult::with_all_items(prompts);
        result.next_cursor = next;
        Ok(result)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let max_name_len = self.profile().max_name_len;
        let (up, answer) = forward_once_more(&self.gateway, &context, || async {
            let (up, original) = self
                .gateway
                .resolve(Kind::Prompt, &request.name, max_name_len)
                .await
                .map_err(
                    |(Refusal::Unavailable { why, .. } | Refusal::Unknown(why))| {
                        ErrorData::invalid_params(why, None)
                    },
                )?;
            let mut upstream = request.clone();
            upstream.name = original;
            Ok((
                up,
                ClientRequest::GetPromptRequest(GetPromptRequest::new(upstream)),
            ))
        })
        .await?;
        match answer {
            Ok(ServerResult::GetPromptResult(r)) => Ok(GetPromptResponse::Complete(complete(r))),
            Ok(ServerResult::InputRequiredResult(r)) => Ok(GetPromptResponse::InputRequired(r)),
            Ok(_) => Err(unexpected(&up.server, "prompts/get")),
            Err(e) => Err(call_error(&up.server, e)),
        }
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.gateway.cold_start().await;
        let union = self.union();
        let (resources, next) = page(
            &union.resources,
            request.as_ref(),
            self.gateway.config.page_size,
        )?;
        let mut result = ListResourcesResult::with_all_items(resources);
        result.next_cursor = next;
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.gateway.cold_start().await;
        let union = self.union();
        let (templates, next) = page(
            &union.templates,
            request.as_ref(),
            self.gateway.config.page_size,
        )?;
        let mut result = ListResourceTemplatesResult::with_all_items(templates);
        result.next_cursor = next;
        Ok(result)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if let Some(server) = instructions::server_of(&request.uri) {
            let union = self.union();
            let Some((_, text)) = union.instructions.iter().find(|(s, _)| s == server) else {
                return Err(ErrorData::resource_not_found(
                    format!("server \"{server}\" is not Ready or gave no instructions"),
                    None,
                ));
            };
            return Ok(ReadResourceResponse::Complete(ReadResourceResult::new(
                vec![ResourceContents::text(text.clone(), request.uri.clone())],
            )));
        }
        let (up, answer) = forward_once_more(&self.gateway, &context, || async {
            let up = self.gateway.resource_upstream(&request.uri).await?;
            let upstream =
                ClientRequest::ReadResourceRequest(ReadResourceRequest::new(request.clone()));
            Ok((up, upstream))
        })
        .await?;
        match answer {
            Ok(ServerResult::ReadResourceResult(r)) => {
                Ok(ReadResourceResponse::Complete(complete(r)))
            }
            Ok(ServerResult::InputRequiredResult(r)) => Ok(ReadResourceResponse::InputRequired(r)),
            Ok(_) => Err(unexpected(&up.server, "resources/read")),
            Err(e) => Err(call_error(&up.server, e)),
        }
    }

    async fn complete(
        &self,
        mut request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let union = self.union();
        let server = match &mut request.r#ref {
            Reference::Prompt(p) => match union.prompt(&p.name) {
                Some(route) => {
                    p.name = route.original.clone();
                    Some(route.server.clone())
                }
                None => None,
            },
            Reference::Resource(r) => union.template_owner(&r.uri).map(str::to_owned),
            _ => None,
        };
        let Some(up) = server.and_then(|s| self.gateway.registry.live(&s)) else {
            return Ok(CompleteResult::default());
        };
        let request = ClientRequest::CompleteRequest(CompleteRequest::new(request));
        match forward(&up, request, &context, None, None).await {
            Ok(ServerResult::CompleteResult(r)) => Ok(complete(r)),
            Ok(_) => Ok(CompleteResult::default()),
            Err(e) => Err(call_error(&up.server, e)),
        }
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        for up in self.gateway.registry.all_live() {
            let caller = Arc::new(ClientCaller {
                peer: context.peer.clone(),
            });
            let request = ClientRequest::SetLevelRequest(SetLevelRequest::new(request.clone()));
            let handle = up.handle.clone();
            let ct = context.ct.clone();
            // Servers without logging answer with an error: ignored.
            tokio::spawn(async move {
                let _ = handle
                    .call(
                        request,
                        caller,
                        None,
                        std::time::Duration::from_secs(10),
                        None,
                        &ct,
                    )
                    .await;
            });
        }
        Ok(())
    }
}

/// Forward `request` to `up` for the client of `context`: the server's
/// progress and its own requests go to that client, and the client's
/// cancellation ends the call.
async fn forward(
    up: &Upstream,
    request: ClientRequest,
    context: &RequestContext<RoleServer>,
    progress: Option<rmcp::model::ProgressToken>,
    idle: Option<std::time::Duration>,
) -> Result<ServerResult, CallError> {
    let caller = Arc::new(ClientCaller {
        peer: context.peer.clone(),
    });
    up.handle
        .call(request, caller, progress, up.timeout, idle, &context.ct)
        .await
}

/// Forward the request `resolve` makes (with the connection of its server);
/// when that connection closed under it in a restart or an idle stop,
/// resolve and forward it once more ([`Gateway::worth_another_try`]): only
/// for reads (`prompts/get`, `resources/read`), which may run twice.
async fn forward_once_more<F, Fut>(
    gateway: &Gateway,
    context: &RequestContext<RoleServer>,
    mut resolve: F,
) -> Result<(Arc<Upstream>, Result<ServerResult, CallError>), ErrorData>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(Arc<Upstream>, ClientRequest), ErrorData>>,
{
    let progress = context.meta.get_progress_token();
    let mut retried = false;
    loop {
        let (up, request) = resolve().await?;
        match forward(&up, request, context, progress.clone(), None).await {
            Err(CallError::Closed | CallError::NotSent)
                if !retried && gateway.worth_another_try(&up) =>
            {
                retried = true
            }
            answer => return Ok((up, answer)),
        }
    }
}

/// The error for an answer of the wrong kind.
fn unexpected(server: &str, method: &str) -> ErrorData {
    ErrorData::internal_error(
        format!("server \"{server}\" answered {method} with something else"),
        None,
    )
}

fn call_error(server: &str, error: CallError) -> ErrorData {
    match error {
        CallError::Server(e) => e,
        other => ErrorData::internal_error(format!("server \"{server}\": {other}"), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_decimal_cursors() {
        let items: Vec<u32> = (0..5).collect();
        let (first, next) = page(&items, None, 2).unwrap();
        assert_eq!(first, [0, 1]);
        assert_eq!(next.as_deref(), Some("2"));
        let request = PaginatedRequestParams::default().with_cursor(next);
        let (second, next) = page(&items, Some(&request), 2).unwrap();
        assert_eq!(second, [2, 3]);
        let request = PaginatedRequestParams::default().with_cursor(next);
        let (third, next) = page(&items, Some(&request), 2).unwrap();
        assert_eq!(third, [4]);
        assert_eq!(next, None);
        let bad = PaginatedRequestParams::default().with_cursor(Some("x".into()));
        assert!(page(&items, Some(&bad), 2).is_err());
    }
}

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

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientRequest, CompleteRequest,
    CompleteRequestParams, CompleteResult, CustomRequest, CustomResult, ErrorCode, ErrorData,
    GetPromptRequestParams, GetPromptResponse, GetTaskParams, GetTaskResult, Implementation,
    InitializeRequestParams, InitializeResult, InputResponses, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    Reference, ResourceContents, ServerCapabilities, ServerConfig, ServerResult,
    SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
    UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{Peer, RoleServer, ServerHandler};

use super::agent::{self, Agent};
use super::call::{
    Origin, as_call_tool_result, call_error, complete, forward, native, unexpected, upstream_meta,
};
use super::profile::Profile;
use super::registry::Union;
use super::subscriptions::{self, Holder};
use super::tasks::{self, TaskRequest};
use super::{
    Gateway, Ticket, agent_wire, code, finder, instructions, legacy_tasks, lsp_tool, view,
};
use crate::observe::metrics::Via;
use crate::runtime::mcp::wire;
use crate::support::sync::lock;

/// One client (see the module doc).
#[derive(Debug)]
pub struct Session {
    gateway: Arc<Gateway>,
    ticket: Ticket,
    /// Who this client is to the servers' requests and log lines.
    agent: Arc<Agent>,
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
        let ticket = gateway.attach(transport, profile.clone(), handback);
        Session {
            gateway: gateway.clone(),
            agent: ticket.agent(),
            ticket,
            profile: Mutex::new(profile),
        }
    }

    /// The session goes on from another controller (see
    /// [`super::Ticket::resume`]).
    pub fn resumed(&self, peer: Option<Peer<RoleServer>>, seen: Option<[u64; 3]>) {
        self.ticket.resume(peer, seen);
    }

    fn profile(&self) -> Profile {
        lock(&self.profile).clone()
    }

    /// The server of a one-server view.
    fn one(&self) -> Option<Arc<str>> {
        lock(&self.profile).server.clone()
    }

    /// An HTTP client's view comes in the endpoint's query string (the
    /// transport refused a malformed one before it got here), with every
    /// request: a client of 2026-07-28 has no `initialize`, and its
    /// requests no session.
    fn adopt(&self, extensions: &rmcp::model::Extensions) -> Result<(), ErrorData> {
        let Some(parts) = extensions.get::<http::request::Parts>() else {
            return Ok(());
        };
        let profile = Profile::from_request(parts.uri.path(), parts.uri.query())
            .unwrap_or_else(|| Ok(Profile::default()))
            .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        let mut current = lock(&self.profile);
        if *current != profile {
            *current = profile.clone();
            drop(current);
            self.ticket.set_profile(profile);
        }
        Ok(())
    }

    /// The client's view (see [`Self::adopt`]); in a one-server view of a
    /// name that cannot be served (unknown, not admitted), the error every
    /// request gets: why, and what to do.
    fn admitted(&self, extensions: &rmcp::model::Extensions) -> Result<(), ErrorData> {
        self.adopt(extensions)?;
        match self.one() {
            Some(server) => match self.gateway.view_refusal(&server) {
                Some(why) => Err(ErrorData::invalid_request(why, None)),
                None => Ok(()),
            },
            None => Ok(()),
        }
    }

    /// What this client lists, as its names have it (never with a cached
    /// catalog that may not be listed any more): the union, or its one
    /// server's catalog.
    fn union(&self) -> Arc<Union> {
        self.gateway.prune_cached();
        self.gateway.union_named(self.profile().naming())
    }
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

/// Steward's own paragraph of the `initialize` instructions.
const OWN_INSTRUCTIONS: &str = "Steward offers the tools, prompts and resources of every MCP server \
     of this workspace that is ready, named server__tool, and code intelligence as the lsp tool. \
     The list follows the configuration files live (list_changed). With --expose search, \
     search_tools finds a tool by describing the task and call_tool calls it. With --expose code, \
     run_code runs a JavaScript program that calls the tools (their types: describe_tools), so \
     that their intermediate results stay out of the context. What each server tells its \
     clients follows.";

impl Session {
    /// Call the tool listed (or found) as `exposed`: `lsp` or a server's.
    async fn call_named(
        &self,
        exposed: &str,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        via: Via,
    ) -> Result<CallToolResponse, ErrorData> {
        let profile = self.profile();
        if profile.server.is_none() && exposed == lsp_tool::NAME {
            let result = lsp_tool::call(&self.gateway, request.arguments.unwrap_or_default()).await;
            return Ok(CallToolResponse::Complete(result));
        }
        if !agent::modern(&context.meta) {
            let origin = Origin::of(context, via, &self.agent);
            return self
                .gateway
                .forward_tool(exposed, request, profile.naming(), &origin)
                .await;
        }
        let what = format!("tools/call {exposed}");
        let (state, responses) = (
            request.request_state.clone(),
            request.input_responses.clone(),
        );
        let (gateway, exposed) = (self.gateway.clone(), exposed.to_owned());
        let answer = self
            .bridged_as(
                context,
                via,
                what,
                state,
                responses,
                move |origin| async move {
                    gateway
                        .forward_tool(&exposed, request, profile.naming(), &origin)
                        .await
                        .map(ServerResult::from)
                },
            )
            .await?;
        as_call_tool_result(answer).ok_or_else(|| unexpected("the server", "tools/call"))
    }

    /// A task method, to the server the task id names.
    async fn task(
        &self,
        request: TaskRequest,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        self.admitted(&context.extensions)?;
        let origin = Origin::of(context, Via::Direct, &self.agent);
        self.gateway
            .task_request(request, self.profile().naming(), &origin)
            .await
    }

    /// Run `work` for `context`'s request `what`: for a 2026-07-28 agent
    /// through the bridge (a retry that names a call it parked resumes
    /// that call), else as it is.
    async fn bridged<F, Fut>(
        &self,
        context: &RequestContext<RoleServer>,
        what: String,
        state: Option<String>,
        responses: Option<InputResponses>,
        work: F,
    ) -> Result<ServerResult, ErrorData>
    where
        F: FnOnce(Origin) -> Fut + Send + 'static,
        Fut: Future<Output = Result<ServerResult, ErrorData>> + Send + 'static,
    {
        if !agent::modern(&context.meta) {
            return work(Origin::of(context, Via::Direct, &self.agent)).await;
        }
        self.bridged_as(context, Via::Direct, what, state, responses, work)
            .await
    }

    async fn bridged_as<F, Fut>(
        &self,
        context: &RequestContext<RoleServer>,
        via: Via,
        what: String,
        state: Option<String>,
        responses: Option<InputResponses>,
        work: F,
    ) -> Result<ServerResult, ErrorData>
    where
        F: FnOnce(Origin) -> Fut + Send + 'static,
        Fut: Future<Output = Result<ServerResult, ErrorData>> + Send + 'static,
    {
        let bridge = &self.gateway.bridge;
        if let Some(state) = state.filter(|s| bridge.owns(s)) {
            return bridge
                .resume(&state, &what, responses.as_ref(), &context.ct)
                .await;
        }
        let origin = Origin::of(context, via, &self.agent);
        bridge
            .start(what, &context.ct, move |asks, cancel| {
                let mut origin = origin;
                origin.asks = Some(asks);
                origin.ct = cancel;
                work(origin)
            })
            .await
    }
}

impl ServerHandler for Session {
    fn get_info(&self) -> ServerConfig {
        if let Some(server) = self.one() {
            // What the server itself says of itself.
            let info = self.gateway.view_info(&server);
            let mut config = ServerConfig::new(info.capabilities)
                .with_server_info(info.server_info)
                .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE);
            config.instructions = info.instructions;
            return config;
        }
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_completions()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_resources_subscribe()
            .enable_tools()
            .enable_tool_list_changed()
            // Task handles of servers that give them pass through.
            .enable_tasks()
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

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        // What the HTTP transport checks a call's Mcp-Param headers against.
        view::tools(&self.union(), &self.profile())
            .into_iter()
            .find(|tool| tool.name == name)
    }

    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::DiscoverResult, ErrorData> {
        self.admitted(&context.extensions)?;
        Ok(rmcp::model::DiscoverResult::from_server_info(
            protocol_versions().to_vec(),
            self.get_info(),
        ))
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // The three list changes, and the resources asked for (each
        // subscribed to at its server while the listen lasts).
        let mut accepted = SubscriptionFilter::builder()
            .tools_list_changed()
            .prompts_list_changed()
            .resources_list_changed()
            .build();
        accepted
            .resource_subscriptions
            .clone_from(&requested.resource_subscriptions);
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        self.admitted(&context.request_context().extensions)?;
        let id = context.sink().id().clone();
        self.ticket.listen(context.sink().clone());
        let holder = Holder::Listen(self.agent.id, subscriptions::listen_id(&id));
        let naming = self.profile();
        for uri in context.accepted().resource_subscriptions.iter().flatten() {
            let subscribed = match self.gateway.resource_upstream(uri, naming.naming()).await {
                Ok(up) => self.gateway.subscribe(&up, uri, holder.clone()).await,
                Err(e) => Err(e),
            };
            if let Err(error) = subscribed {
                tracing::debug!(%uri, error = %error.message, "a listen's resource subscription");
            }
        }
        context.cancelled().await;
        self.gateway.unsubscribe(None, None, &holder);
        self.ticket.unlisten(&id);
        Ok(())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.admitted(&context.extensions)?;
        let up = self
            .gateway
            .resource_upstream(&request.uri, self.profile().naming())
            .await?;
        let holder = Holder::Session(self.agent.id);
        self.gateway.subscribe(&up, &request.uri, holder).await
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.admitted(&context.extensions)?;
        let holder = Holder::Session(self.agent.id);
        self.gateway.unsubscribe(None, Some(&request.uri), &holder);
        Ok(())
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        self.admitted(&context.extensions)?;
        if let Some(server) = self.one() {
            // Its answer says what the server says of itself: wait (as a
            // call would) until there is a live connection that said it.
            self.gateway.wait_live(&server).await;
        }
        if context
            .extensions
            .get::<rmcp::transport::streamable_http_server::session::SessionRestoreMarker>()
            .is_some()
        {
            tracing::info!("an HTTP session resumed from the last controller");
        }
        context.peer.set_peer_info(request.clone());
        let mut result = self.negotiate_initialize(&request)?;
        // An agent of 2025-11-25 hears of the experimental tasks, which
        // pass through (a one-server view says what its server says).
        if self.one().is_none() && result.protocol_version == ProtocolVersion::V_2025_11_25 {
            result
                .capabilities
                .experimental
                .get_or_insert_default()
                .insert(wire::TASKS.to_owned(), legacy_tasks::capability());
        }
        Ok(result)
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        // The experimental tasks are 2025-11-25's: a request of 2026-07-28
        // (which removed `tasks/result` and `tasks/list`) knows no such
        // methods, and neither does a session of it.
        let legacy = !agent::modern(&context.meta)
            && context
                .peer
                .peer_info()
                .is_none_or(|info| agent_wire::legacy(info.protocol_version.as_str()));
        if !legacy || !legacy_tasks::METHODS.contains(&request.method.as_str()) {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                request.method,
                None,
            ));
        }
        self.admitted(&context.extensions)?;
        let origin = Origin::of(&context, Via::Direct, &self.agent);
        self.gateway
            .legacy_task_request(
                &request.method,
                request.params,
                self.profile().naming(),
                &origin,
            )
            .await
            .map(CustomResult)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.ticket.set_peer(context.peer);
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.admitted(&context.extensions)?;
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
        self.admitted(&context.extensions)?;
        if self.one().is_some() {
            // Every name is the server's own.
            return self
                .call_named(&exposed, request, &context, Via::Direct)
                .await;
        }
        match exposed.as_str() {
            finder::SEARCH => {
                self.gateway.cold_start().await;
                let result = finder::search(&self.union(), request.arguments);
                Ok(CallToolResponse::Complete(result))
            }
            code::DESCRIBE => {
                self.gateway.cold_start().await;
                let result = code::describe(&self.union(), request.arguments);
                Ok(CallToolResponse::Complete(result))
            }
            code::RUN => {
                self.gateway.cold_start().await;
                let max_name_len = self.profile().max_name_len;
                let result = code::run(
                    &self.gateway,
                    max_name_len,
                    request.arguments,
                    &context,
                    &self.agent,
                )
                .await;
                Ok(CallToolResponse::Complete(result))
            }
            finder::CALL => match finder::call_args(request.arguments.clone()) {
                Ok(call) => {
                    let mut request = request;
                    request.name = call.name.clone().into();
                    request.arguments = call.arguments;
                    self.call_named(&call.name, request, &context, Via::Search)
                        .await
                }
                Err(refused) => Ok(CallToolResponse::Complete(refused)),
            },
            _ => {
                self.call_named(&exposed, request, &context, Via::Direct)
                    .await
            }
        }
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        self.admitted(&context.extensions)?;
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
        self.admitted(&context.extensions)?;
        let what = format!("prompts/get {}", request.name);
        let (state, responses) = (
            request.request_state.clone(),
            request.input_responses.clone(),
        );
        let (gateway, profile) = (self.gateway.clone(), self.profile());
        let answer = self
            .bridged(&context, what, state, responses, move |origin| {
                gateway.get_prompt(request, profile, origin)
            })
            .await?;
        match answer {
            ServerResult::InputRequiredResult(r) => Ok(GetPromptResponse::InputRequired(r)),
            ServerResult::GetPromptResult(r) => Ok(GetPromptResponse::Complete(complete(r))),
            _ => Err(unexpected("the server", "prompts/get")),
        }
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.admitted(&context.extensions)?;
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
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.admitted(&context.extensions)?;
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
        self.admitted(&context.extensions)?;
        let profile = self.profile();
        if let Some(server) =
            instructions::server_of(&request.uri).filter(|_| profile.server.is_none())
        {
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
        let what = format!("resources/read {}", request.uri);
        let (state, responses) = (
            request.request_state.clone(),
            request.input_responses.clone(),
        );
        let gateway = self.gateway.clone();
        let answer = self
            .bridged(&context, what, state, responses, move |origin| {
                gateway.read_resource(request, profile, origin)
            })
            .await?;
        match answer {
            ServerResult::InputRequiredResult(r) => Ok(ReadResourceResponse::InputRequired(r)),
            ServerResult::ReadResourceResult(r) => Ok(ReadResourceResponse::Complete(complete(r))),
            _ => Err(unexpected("the server", "resources/read")),
        }
    }

    async fn complete(
        &self,
        mut request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        self.admitted(&context.extensions)?;
        let union = self.union();
        let server = match &mut request.r#ref {
            // Every reference of a one-server view is its server's.
            _ if self.one().is_some() => self.one().map(|s| s.to_string()),
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
        let origin = Origin::of(&context, Via::Direct, &self.agent);
        request.meta = upstream_meta(&origin, native(&context.meta, &up));
        let request = ClientRequest::CompleteRequest(CompleteRequest::new(request));
        match forward(&up, request, &origin, None, None).await {
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
        self.admitted(&context.extensions)?;
        // This agent's level; the servers hear the most verbose one asked.
        self.agent.set_level(request.level);
        self.gateway.relevel(None);
        Ok(())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        tasks::got(self.task(TaskRequest::Get(request), &context).await?)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.task(TaskRequest::Update(request), &context)
            .await
            .map(drop)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.task(TaskRequest::Cancel(request), &context)
            .await
            .map(drop)
    }

    async fn on_roots_list_changed(&self, _context: NotificationContext<RoleServer>) {
        // The agent's roots changed: the servers it sees may ask again.
        let one = self.one();
        for up in self.gateway.registry.all_live() {
            if one.as_deref().is_some_and(|s| s != up.server) {
                continue;
            }
            let changed = rmcp::model::ClientNotification::RootsListChangedNotification(
                rmcp::model::RootsListChangedNotification::default(),
            );
            let _ = up.handle.notify(changed);
        }
    }
}

/// The MCP protocol versions the agent endpoint speaks (`steward --version`
/// prints them): every version up to 2026-07-28, whose clients skip
/// `initialize` (each request says who they are) and hear of list changes
/// on a `subscriptions/listen` request instead of on the session.
pub fn protocol_versions() -> &'static [ProtocolVersion] {
    ProtocolVersion::known_up_to(&ProtocolVersion::LATEST)
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

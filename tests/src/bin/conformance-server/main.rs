//! A conformance test server of our own: it implements the tools, prompts
//! and resources that the official MCP conformance suite's server
//! scenarios call (`@modelcontextprotocol/conformance`, whose reference
//! server lives only in its repository; this one is written from the
//! scenarios' requirements), on rmcp's server. The integration tests run
//! the suite against it directly, then through Steward's one-server view,
//! and compare.
//!
//!     conformance-server                  MCP over stdin/stdout
//!     conformance-server --http PORT_FILE streamable HTTP at
//!                                         http://127.0.0.1:PORT/mcp (the
//!                                         port is written to PORT_FILE)
//!
//! It speaks every protocol version up to 2026-07-28. What it needs from
//! the client (elicitation, sampling, roots) it asks as the client's
//! version wants: a request of its own on an initialized session, an
//! `input_required` result (SEP-2322) to a request of 2026-07-28.

// Logging, sampling and roots are deprecated by SEP-2577 but part of the
// versions this server speaks.
#![allow(deprecated)]

mod asks;
mod catalog;
mod tasks;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
    CompleteRequestParams, CompleteResult, CompletionInfo, ContentBlock, ErrorCode, ErrorData,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, GetTaskParams, GetTaskResult,
    Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams,
    ProgressNotificationParam, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    Reference, ResourceContents, ResourceUpdatedNotificationParam, ServerCapabilities,
    ServerConfig, SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter,
    UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext, SubscriptionSink};
use rmcp::{Peer, RoleServer, ServerHandler};
use serde_json::{Value, json};

use asks::{Ask, Asked};

/// What every session of this process shares: the lists that the trigger
/// tools change, and who hears of changes.
#[derive(Default)]
struct Shared {
    extra_tool: AtomicBool,
    extra_prompt: AtomicBool,
    /// Sessions of the initialize lifecycle.
    peers: Mutex<Vec<Peer<RoleServer>>>,
    /// Open `subscriptions/listen` requests (2026-07-28).
    sinks: Mutex<Vec<SubscriptionSink>>,
    /// `(session, uri, peer)` of each legacy resource subscription.
    subscribed: Mutex<Vec<(u64, String, Peer<RoleServer>)>>,
    /// How many times test://watched-resource changed.
    watched: AtomicU64,
    next_session: AtomicU64,
    /// The tasks extension's tasks (SEP-2663).
    tasks: Arc<tasks::Tasks>,
}

/// One session (a handler per session over HTTP; one over stdio).
struct Conformance {
    shared: Arc<Shared>,
    id: u64,
    /// `logging/setLevel` of this session.
    level: Mutex<Option<LoggingLevel>>,
    /// The secret that signs request states.
    secret: Arc<str>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn text(text: impl Into<String>) -> ContentBlock {
    ContentBlock::text(text.into())
}

fn content(value: Value) -> Vec<ContentBlock> {
    serde_json::from_value(value).expect("content blocks")
}

/// A call's string argument `name` ("" when absent).
fn string_arg(request: &CallToolRequestParams, name: &str) -> String {
    request
        .arguments
        .as_ref()
        .and_then(|args| args.get(name))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn severity(level: LoggingLevel) -> u8 {
    level as u8
}

impl Conformance {
    fn new(shared: Arc<Shared>, secret: Arc<str>) -> Conformance {
        let id = shared.next_session.fetch_add(1, Ordering::Relaxed);
        Conformance {
            shared,
            id,
            level: Mutex::new(None),
            secret,
        }
    }

    /// Log `message` at info, if the client asked for that level: on
    /// 2026-07-28 per request (`_meta` logLevel; none, no log), before it
    /// with `logging/setLevel` (none: everything).
    async fn log(&self, context: &RequestContext<RoleServer>, message: &str) {
        let threshold = if asks::modern(context) {
            match context.meta.log_level() {
                Some(level) => level,
                None => return,
            }
        } else {
            lock(&self.level).unwrap_or(LoggingLevel::Debug)
        };
        if severity(LoggingLevel::Info) < severity(threshold) {
            return;
        }
        let params = LoggingMessageNotificationParam::new(LoggingLevel::Info, json!(message))
            .with_logger("conformance-server");
        let _ = context.peer.notify_logging_message(params).await;
    }

    async fn sleep_ms(ms: u64) {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }

    /// Tell every session and every listen that a list changed.
    async fn list_changed(&self, tools: bool) {
        let peers = lock(&self.shared.peers).clone();
        for peer in peers {
            let _ = if tools {
                peer.notify_tool_list_changed().await
            } else {
                peer.notify_prompt_list_changed().await
            };
        }
        let sinks = lock(&self.shared.sinks).clone();
        for sink in sinks {
            let _ = if tools {
                sink.notify_tool_list_changed().await
            } else {
                sink.notify_prompt_list_changed().await
            };
        }
    }

    async fn call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(answer) = self.shared.tasks.call(&request, &context).await {
            return answer;
        }
        let done = |blocks: Vec<ContentBlock>| {
            Ok(CallToolResponse::Complete(CallToolResult::success(blocks)))
        };
        let args = request.arguments.clone().unwrap_or_default();
        let arg = |name: &str| string_arg(&request, name);
        match request.name.as_ref() {
            "test_simple_text" => done(vec![text("This is a simple text response for testing.")]),
            "test_image_content" => done(vec![ContentBlock::image(catalog::PNG, "image/png")]),
            "test_audio_content" => done(content(json!([
                {"type": "audio", "data": catalog::WAV, "mimeType": "audio/wav"}
            ]))),
            "test_embedded_resource" => done(content(json!([{"type": "resource", "resource": {
                "uri": "test://embedded-resource", "mimeType": "text/plain",
                "text": "This is an embedded resource content."
            }}]))),
            "test_multiple_content_types" => done(content(json!([
                {"type": "text", "text": "Multiple content types test:"},
                {"type": "image", "data": catalog::PNG, "mimeType": "image/png"},
                {"type": "resource", "resource": {
                    "uri": "test://mixed-content-resource", "mimeType": "application/json",
                    "text": "{\"test\":\"data\",\"value\":123}"
                }}
            ]))),
            "test_tool_with_logging" | "test_logging_tool" => {
                self.log(&context, "Tool execution started").await;
                Self::sleep_ms(50).await;
                self.log(&context, "Tool processing data").await;
                Self::sleep_ms(50).await;
                self.log(&context, "Tool execution completed").await;
                done(vec![text("Logging tool completed")])
            }
            "test_tool_with_progress" => {
                let token = context.meta.get_progress_token();
                for (i, progress) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                    if i > 0 {
                        Self::sleep_ms(50).await;
                    }
                    if let Some(token) = &token {
                        let params = ProgressNotificationParam::new(token.clone(), progress)
                            .with_total(100.0);
                        let _ = context.peer.notify_progress(params).await;
                    }
                }
                done(vec![text("Progress tool completed")])
            }
            "test_error_handling" => Ok(CallToolResponse::Complete(CallToolResult::error(vec![
                text("This tool intentionally returns an error for testing"),
            ]))),
            "test_trigger_tool_change" => {
                let was = self.shared.extra_tool.fetch_xor(true, Ordering::SeqCst);
                self.list_changed(true).await;
                done(vec![text(format!(
                    "test_added_tool {}",
                    if was { "removed" } else { "added" }
                ))])
            }
            "test_trigger_prompt_change" => {
                let was = self.shared.extra_prompt.fetch_xor(true, Ordering::SeqCst);
                self.list_changed(false).await;
                done(vec![text(format!(
                    "test_added_prompt {}",
                    if was { "removed" } else { "added" }
                ))])
            }
            "test_update_watched" => {
                let n = self.shared.watched.fetch_add(1, Ordering::SeqCst) + 1;
                let uri = "test://watched-resource";
                let peers: Vec<Peer<RoleServer>> = lock(&self.shared.subscribed)
                    .iter()
                    .filter(|(_, u, _)| u == uri)
                    .map(|(_, _, p)| p.clone())
                    .collect();
                let told = peers.len();
                for peer in peers {
                    let _ = peer
                        .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                        .await;
                }
                let sinks = lock(&self.shared.sinks).clone();
                for sink in sinks {
                    let _ = sink.notify_resource_updated(uri).await;
                }
                done(vec![text(format!(
                    "version {n}; {told} legacy subscriber(s) told"
                ))])
            }
            "test_echo_meta" => {
                let meta = serde_json::to_value(&context.meta).unwrap_or(Value::Null);
                let mut result = CallToolResult::success(vec![text(meta.to_string())]);
                result.structured_content = Some(json!({"meta": meta}));
                Ok(CallToolResponse::Complete(result))
            }
            "test_sleep" => {
                let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(0);
                let bytes = args.get("bytes").and_then(Value::as_u64).unwrap_or(2) as usize;
                if ms > 0 {
                    Self::sleep_ms(ms).await;
                }
                done(vec![text("x".repeat(bytes))])
            }
            "greet" => done(vec![text(format!("Hello, {}!", arg("name")))]),
            "test_custom_headers" => done(vec![text(format!("region: {}", arg("region")))]),
            "test_resource_link" => done(content(json!([{
                "type": "resource_link", "uri": "test://linked/1", "name": "linked",
                "mimeType": "text/plain", "description": "A resource this server does not list"
            }]))),
            "json_schema_2020_12_tool" => done(vec![text(format!(
                "received: {}",
                Value::Object(args.clone())
            ))]),
            "test_missing_capability" => {
                let declared = asks::capabilities(&context).is_some_and(|c| c.sampling.is_some());
                if !declared {
                    return Err(ErrorData::new(
                        ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
                        "test_missing_capability needs the client's sampling capability",
                        Some(json!({"requiredCapabilities": {"sampling": {}}})),
                    ));
                }
                self.asking(
                    &request,
                    &context,
                    Ask::sampling("capability", "Say hello", 20),
                )
                .await
            }
            name => self.asking_tool(name, &arg, &request, &context).await,
        }
    }

    /// The tools that need the client's input.
    async fn asking_tool(
        &self,
        name: &str,
        arg: &(dyn Fn(&str) -> String + Sync),
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let ask = match name {
            "test_sampling" => Ask::sampling("sampling", &arg("prompt"), 100),
            "test_elicitation" => Ask::elicit_user(&arg("message")),
            "test_elicitation_sep1034_defaults" => Ask::elicit_defaults(),
            "test_elicitation_sep1330_enums" => Ask::elicit_enums(),
            "test_streaming_elicitation" => Ask::elicit_name("stream_name", "What is your name?"),
            "test_input_required_result_elicitation" => {
                Ask::elicit_name("user_name", "What is your name?")
            }
            "test_input_required_result_sampling" => {
                Ask::sampling("capital_question", "What is the capital of France?", 100)
            }
            "test_input_required_result_list_roots" => Ask::roots("client_roots"),
            "test_input_required_result_request_state"
            | "test_input_required_result_tampered_state" => Ask::confirm("confirm").stateful(),
            "test_input_required_result_multiple_inputs" => Ask::multiple().stateful(),
            "test_input_required_result_multi_round" => Ask::multi_round(),
            "test_input_required_result_capabilities" => Ask::capabilities_probe(),
            _ => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool {name:?}"),
                    Some(json!({"name": name})),
                ));
            }
        };
        self.asking(request, context, ask).await
    }

    /// Ask (after `delayMs`, when the call gives one), then answer with
    /// what the client said.
    async fn asking(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        ask: Ask,
    ) -> Result<CallToolResponse, ErrorData> {
        let delay = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("delayMs"))
            .and_then(Value::as_u64);
        if let Some(ms) = delay {
            Self::sleep_ms(ms).await;
        }
        let asked = ask
            .run(
                context,
                request.input_responses.as_ref(),
                request.request_state.as_deref(),
                &self.secret,
            )
            .await?;
        match asked {
            Asked::Input(more) => Ok(CallToolResponse::InputRequired(more)),
            Asked::Answered(summary) => {
                Ok(CallToolResponse::Complete(CallToolResult::success(vec![
                    text(summary),
                ])))
            }
        }
    }
}

impl ServerHandler for Conformance {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_completions()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_tasks()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(
                "steward-conformance-server",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "The tools, prompts and resources of the MCP conformance suite's server scenarios.",
            )
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let id = context.sink().id().clone();
        lock(&self.shared.sinks).push(context.sink().clone());
        context.cancelled().await;
        lock(&self.shared.sinks).retain(|s| s.id() != &id);
        Ok(())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        lock(&self.shared.peers).push(context.peer);
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        let extra = self.shared.extra_tool.load(Ordering::SeqCst);
        catalog::tools(extra).into_iter().find(|t| t.name == name)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let extra = self.shared.extra_tool.load(Ordering::SeqCst);
        Ok(ListToolsResult::with_all_items(catalog::tools(extra)))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.call(request, context).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.shared.tasks.get(request)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.shared.tasks.update(request)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.shared.tasks.cancel(request)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let extra = self.shared.extra_prompt.load(Ordering::SeqCst);
        Ok(ListPromptsResult::with_all_items(catalog::prompts(extra)))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let args = request.arguments.clone().unwrap_or_default();
        let arg = |name: &str| {
            args.get(name)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let messages = match request.name.as_str() {
            "test_simple_prompt" | "test_added_prompt" => json!([
                {"role": "user", "content": {"type": "text", "text": "This is a simple prompt for testing."}}
            ]),
            "test_prompt_with_arguments" => json!([{"role": "user", "content": {"type": "text",
                "text": format!("Prompt with arguments: arg1='{}', arg2='{}'", arg("arg1"), arg("arg2"))}}]),
            "test_prompt_with_embedded_resource" => json!([
                {"role": "user", "content": {"type": "resource", "resource": {
                    "uri": arg("resourceUri"), "mimeType": "text/plain",
                    "text": "Embedded resource content for testing."}}},
                {"role": "user", "content": {"type": "text", "text": "Please process the embedded resource above."}}
            ]),
            "test_prompt_with_image" => json!([
                {"role": "user", "content": {"type": "image", "data": catalog::PNG, "mimeType": "image/png"}},
                {"role": "user", "content": {"type": "text", "text": "Please analyze the image above."}}
            ]),
            "test_input_required_result_prompt" => {
                let ask = Ask::elicit_context("user_context");
                let asked = ask
                    .run(
                        &context,
                        request.input_responses.as_ref(),
                        request.request_state.as_deref(),
                        &self.secret,
                    )
                    .await?;
                match asked {
                    Asked::Input(more) => return Ok(GetPromptResponse::InputRequired(more)),
                    Asked::Answered(summary) => json!([{"role": "user", "content": {"type": "text",
                        "text": format!("Use this context: {summary}")}}]),
                }
            }
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown prompt {other:?}"),
                    Some(json!({"name": other})),
                ));
            }
        };
        // rmcp leaves resultType out again for clients before 2026-07-28.
        let result: GetPromptResult =
            serde_json::from_value(json!({"messages": messages, "resultType": "complete"}))
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(GetPromptResponse::Complete(result))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(catalog::resources()))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(
            catalog::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri.as_str();
        let contents = match uri {
            "test://static-text" => vec![
                ResourceContents::text("This is the content of the static text resource.", uri)
                    .with_mime_type("text/plain"),
            ],
            "test://static-binary" => vec![ResourceContents::blob(catalog::PNG, uri).with_mime_type("image/png")],
            "test://linked/1" => vec![
                ResourceContents::text("A linked resource.", uri).with_mime_type("text/plain"),
            ],
            "test://watched-resource" => vec![
                ResourceContents::text(
                    format!("version {}", self.shared.watched.load(Ordering::SeqCst)),
                    uri,
                )
                .with_mime_type("text/plain"),
            ],
            _ => match uri
                .strip_prefix("test://template/")
                .and_then(|rest| rest.strip_suffix("/data"))
                .filter(|id| !id.is_empty() && !id.contains('/'))
            {
                Some(id) => vec![
                    ResourceContents::text(
                        json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")})
                            .to_string(),
                        uri,
                    )
                    .with_mime_type("application/json"),
                ],
                None => {
                    return Err(ErrorData::resource_not_found(
                        "Resource not found",
                        Some(json!({"uri": uri})),
                    ));
                }
            },
        };
        Ok(ReadResourceResponse::Complete(ReadResourceResult::new(
            contents,
        )))
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let mut subscribed = lock(&self.shared.subscribed);
        if !subscribed
            .iter()
            .any(|(s, u, _)| *s == self.id && *u == request.uri)
        {
            subscribed.push((self.id, request.uri, context.peer));
        }
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        lock(&self.shared.subscribed).retain(|(s, u, _)| !(*s == self.id && *u == request.uri));
        Ok(())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let values = match &request.r#ref {
            Reference::Prompt(_) => {
                catalog::complete(&request.argument.name, &request.argument.value)
            }
            _ => Vec::new(),
        };
        let total = values.len() as u32;
        let info = CompletionInfo::with_pagination(values, Some(total), false)
            .map_err(|e| ErrorData::internal_error(e, None))?;
        Ok(CompleteResult::new(info))
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        *lock(&self.level) = Some(request.level);
        Ok(())
    }
}

impl Drop for Conformance {
    fn drop(&mut self) {
        lock(&self.shared.subscribed).retain(|(s, _, _)| *s != self.id);
    }
}

fn secret() -> Arc<str> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{}-{nanos}", std::process::id()).into()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let shared = Arc::new(Shared::default());
    let secret = secret();
    let result = runtime.block_on(async move {
        match args.as_slice() {
            [] => stdio(shared, secret).await,
            [flag, port_file] if flag == "--http" => http(shared, secret, port_file.into()).await,
            _ => Err("usage: conformance-server [--http PORT_FILE]".into()),
        }
    });
    if let Err(error) = result {
        eprintln!("conformance-server: {error}");
        std::process::exit(2);
    }
}

type Error = Box<dyn std::error::Error + Send + Sync>;

async fn stdio(shared: Arc<Shared>, secret: Arc<str>) -> Result<(), Error> {
    let server = rmcp::serve_server(
        Conformance::new(shared, secret),
        (tokio::io::stdin(), tokio::io::stdout()),
    )
    .await?;
    server.waiting().await?;
    Ok(())
}

async fn http(
    shared: Arc<Shared>,
    secret: Arc<str>,
    port_file: std::path::PathBuf,
) -> Result<(), Error> {
    use http_body_util::BodyExt as _;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let tmp = port_file.with_extension("tmp");
    std::fs::write(&tmp, port.to_string())?;
    std::fs::rename(&tmp, &port_file)?;
    let config = StreamableHttpServerConfig::default().with_allowed_hosts([
        "localhost",
        "127.0.0.1",
        "::1",
        "[::1]",
    ]);
    let service = StreamableHttpService::new(
        move || Ok(Conformance::new(shared.clone(), secret.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    loop {
        let (stream, _) = listener.accept().await?;
        let service = service.clone();
        tokio::spawn(async move {
            let handler =
                hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
                    let service = service.clone();
                    async move {
                        let response = service.handle(request).await;
                        Ok::<_, std::convert::Infallible>(response.map(|b| b.boxed()))
                    }
                });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), handler)
                .await;
        });
    }
}

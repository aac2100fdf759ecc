//! The server proper, whatever the transport: the state of a session and
//! the answer to every JSON-RPC message, faults included.

use super::*;

pub enum Out {
    /// Lines for the stdout writer task.
    Stdio(mpsc::UnboundedSender<StdoutItem>),
    /// Notifications for the open SSE streams; kept in `backlog` while none
    /// is open, so a notification racing the client's GET is not lost.
    Http {
        stream: broadcast::Sender<Value>,
        backlog: Mutex<Vec<Value>>,
    },
}

pub enum StdoutItem {
    Line(String),
    Flush(oneshot::Sender<()>),
}

pub struct Server {
    pub config: FakeMcpConfig,
    pub recorder: Recorder,
    /// Current (tools, prompts).
    pub lists: Mutex<(Vec<String>, Vec<String>)>,
    /// Laid over the default definitions (`definitionsFile`).
    pub definitions: Definitions,
    pub out: Out,
    pub sessions: Mutex<HashSet<String>>,
    pub next_session: AtomicU64,
    /// Legacy SSE sessions: where a session's answers go.
    pub legacy: Mutex<HashMap<String, mpsc::UnboundedSender<Value>>>,
    /// With `bearerTokens`: the tokens the MCP endpoints accept.
    pub accepted_tokens: Option<Mutex<HashSet<String>>>,
    pub list_change_armed: AtomicBool,
    /// Told when a `tools/list` is answered (`crashAfterListedMs`).
    pub listed: tokio::sync::Notify,
    /// Requests we sent the client (`sampling/createMessage`), by id.
    pub pending: Mutex<std::collections::HashMap<String, oneshot::Sender<Value>>>,
    pub next_request: AtomicU64,
}

pub type RpcError = (i64, String);

impl Server {
    pub fn record_now(&self, event: &str, message: Value) {
        self.recorder.record(self.recorder.now(), event, message);
    }

    /// Whether the server has gone silent at time `t` (ms since start).
    pub fn silent_at(&self, t: u64) -> bool {
        self.config
            .stop_answering_after_ms
            .is_some_and(|ms| t >= ms)
    }

    pub fn exit(&self, code: i32, reason: &str) -> ! {
        self.record_now("exit", json!({ "code": code, "reason": reason }));
        std::process::exit(code)
    }

    /// Records and sends a message to the client: on stdout, or (HTTP) on the
    /// SSE streams. Responses over HTTP go in the POST reply instead.
    pub fn send(&self, message: Value) {
        match &self.out {
            Out::Stdio(tx) => {
                let line = message.to_string();
                self.record_now("send", message);
                let _ = tx.send(StdoutItem::Line(line));
            }
            Out::Http { stream, backlog } => {
                let mut backlog = backlog.lock().expect("backlog lock");
                if stream.receiver_count() == 0 {
                    self.record_now("undelivered", message.clone());
                    backlog.push(message);
                } else {
                    self.record_now("send", message.clone());
                    let _ = stream.send(message);
                }
            }
        }
    }

    pub fn send_raw(&self, line: &str) {
        if let Out::Stdio(tx) = &self.out {
            self.record_now("send", json!(line));
            let _ = tx.send(StdoutItem::Line(line.to_owned()));
        }
    }

    /// Handles one client message received at `t`. Returns the response for
    /// a request, `None` for anything else; never returns while the server is
    /// meant to stay silent.
    pub async fn handle(self: &Arc<Self>, message: &Value, t: u64) -> Option<Value> {
        if self.silent_at(t) {
            return std::future::pending().await;
        }
        let Some(object) = message.as_object() else {
            // Batches were dropped in 2025-06-18; a fake need not support them.
            return Some(error_response(
                Value::Null,
                -32600,
                "invalid request".into(),
            ));
        };
        // No method: a response to a request of ours.
        let Some(method) = object.get("method") else {
            let id = object.get("id").map(Value::to_string).unwrap_or_default();
            if let Some(waiter) = self.pending.lock().expect("pending lock").remove(&id) {
                let _ = waiter.send(message.clone());
            }
            return None;
        };
        let method = method.as_str().unwrap_or_default();
        let params = object.get("params").unwrap_or(&Value::Null);
        let Some(id) = object.get("id").cloned() else {
            self.on_notification(method);
            return None;
        };
        let result = self.on_request(method, params).await;
        if self.silent_at(self.recorder.now()) {
            return std::future::pending().await;
        }
        Some(match result {
            Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
            Err((code, text)) => error_response(id, code, text),
        })
    }

    pub fn on_notification(self: &Arc<Self>, method: &str) {
        if method != "notifications/initialized" {
            return;
        }
        if self.list_change_armed.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Some(ms) = self.config.list_changed_after_ms {
            let server = self.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                server.change_lists();
            });
        }
        if let Some(storm) = self.config.list_changed_storm.clone() {
            tokio::spawn(self.clone().storm(storm));
        }
    }

    /// `listChangedAfterMs`: switch to the lists after the change and say so.
    fn change_lists(&self) {
        if self.silent_at(self.recorder.now()) {
            return;
        }
        let config = &self.config;
        {
            let mut lists = self.lists.lock().expect("lists lock");
            if let Some(tools) = &config.tools_after_change {
                lists.0 = tools.clone();
            }
            if let Some(prompts) = &config.prompts_after_change {
                lists.1 = prompts.clone();
            }
        }
        if config.tools_after_change.is_some() || config.prompts_after_change.is_none() {
            self.send(notification("notifications/tools/list_changed"));
        }
        if config.prompts_after_change.is_some() {
            self.send(notification("notifications/prompts/list_changed"));
        }
    }

    /// `listChangedStorm`: `perSecond` notifications a second for
    /// `durationMs`, then the list at the end and its notification.
    async fn storm(self: Arc<Self>, storm: ListChangedStorm) {
        tokio::time::sleep(Duration::from_millis(storm.after_ms)).await;
        self.record_now("storm", json!({ "phase": "begin" }));
        let begin = tokio::time::Instant::now();
        let duration = Duration::from_millis(storm.duration_ms);
        let mut tick = tokio::time::interval(Duration::from_millis(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut sent: u64 = 0;
        loop {
            tick.tick().await;
            if self.silent_at(self.recorder.now()) {
                return;
            }
            let elapsed = begin.elapsed().min(duration);
            // Everything due by now: a coarse or late timer keeps the rate.
            let due = (elapsed.as_micros() * u128::from(storm.per_second) / 1_000_000) as u64;
            while sent < due {
                self.send(notification("notifications/tools/list_changed"));
                sent += 1;
            }
            if elapsed >= duration {
                break;
            }
        }
        if let Some(tools) = storm.tools_at_end {
            self.lists.lock().expect("lists lock").0 = tools;
            self.send(notification("notifications/tools/list_changed"));
            sent += 1;
        }
        self.record_now("storm", json!({ "phase": "end", "sent": sent }));
    }

    pub async fn on_request(&self, method: &str, params: &Value) -> Result<Value, RpcError> {
        let config = &self.config;
        match method {
            "initialize" => {
                if config.hang_in_initialize {
                    std::future::pending::<()>().await;
                }
                if config.initialize_delay_ms > 0 {
                    tokio::time::sleep(Duration::from_millis(config.initialize_delay_ms)).await;
                }
                let requested = params.get("protocolVersion").and_then(Value::as_str);
                let version = requested
                    .filter(|v| SUPPORTED_PROTOCOL_VERSIONS.contains(v))
                    .unwrap_or(SUPPORTED_PROTOCOL_VERSIONS[0]);
                let mut answer = json!({
                    "protocolVersion": version,
                    "capabilities": {
                        "tools": { "listChanged": true },
                        "prompts": { "listChanged": true },
                    },
                    "serverInfo": { "name": config.name, "version": config.version },
                });
                if let Some(instructions) = &config.instructions {
                    answer["instructions"] = json!(instructions);
                }
                Ok(answer)
            }
            "ping" => {
                if config.ping_delay_ms > 0 {
                    tokio::time::sleep(Duration::from_millis(config.ping_delay_ms)).await;
                }
                if config.ping_error {
                    return Err((-32601, "method not found: ping".into()));
                }
                Ok(json!({}))
            }
            "tools/list" => {
                self.listed.notify_one();
                let tools = self.lists.lock().expect("lists lock").0.clone();
                self.page(&tools, params, "tools", |name| {
                    let default = json!({
                        "name": name,
                        "description": format!("{name} of fake server {}", config.name),
                        "inputSchema": { "type": "object" },
                    });
                    overlay(default, self.definitions.tools.get(name))
                })
            }
            "prompts/list" => {
                let prompts = self.lists.lock().expect("lists lock").1.clone();
                self.page(&prompts, params, "prompts", |name| {
                    let default = json!({
                        "name": name,
                        "description": format!("{name} of fake server {}", config.name),
                    });
                    overlay(default, self.definitions.prompts.get(name))
                })
            }
            "tools/call" => {
                let name = params
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if !self
                    .lists
                    .lock()
                    .expect("lists lock")
                    .0
                    .iter()
                    .any(|t| t == name)
                {
                    return Err((-32602, format!("unknown tool {name:?}")));
                }
                let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
                self.shaped_call(params, &arguments).await
            }
            "prompts/get" => {
                let name = params
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if !self
                    .lists
                    .lock()
                    .expect("lists lock")
                    .1
                    .iter()
                    .any(|p| p == name)
                {
                    return Err((-32602, format!("unknown prompt {name:?}")));
                }
                Ok(json!({
                    "description": format!("{name} of fake server {}", config.name),
                    "messages": [{
                        "role": "user",
                        "content": { "type": "text", "text": format!("prompt {name}") },
                    }],
                }))
            }
            _ => Err((-32601, format!("method not found: {method}"))),
        }
    }

    /// A `tools/call` answer, shaped by the call's own arguments (see the
    /// module doc).
    pub async fn shaped_call(&self, params: &Value, arguments: &Value) -> Result<Value, RpcError> {
        let sleep_ms = arguments
            .get("sleepMs")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let steps = arguments
            .get("progress")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let token = params.pointer("/_meta/progressToken").cloned();
        for step in 1..=steps {
            tokio::time::sleep(Duration::from_millis(sleep_ms / steps.max(1))).await;
            if let Some(token) = &token {
                self.send(json!({
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": { "progressToken": token, "progress": step, "total": steps },
                }));
            }
        }
        if let Some(ms) = arguments.get("exitMs").and_then(Value::as_u64) {
            // A crash in the middle of this call: it is never answered.
            tokio::time::sleep(Duration::from_millis(ms)).await;
            self.exit(3, "exitMs in a tools/call");
        }
        if steps == 0 && sleep_ms > 0 {
            tokio::time::sleep(Duration::from_millis(sleep_ms)).await;
        }
        let mut text = arguments.to_string();
        if let Some(question) = arguments.get("sample").and_then(Value::as_str) {
            let id = self.next_request.fetch_add(1, Ordering::SeqCst);
            let id = json!(format!("fake-{id}"));
            let (tx, rx) = oneshot::channel();
            self.pending
                .lock()
                .expect("pending lock")
                .insert(id.to_string(), tx);
            self.send(json!({
                "jsonrpc": "2.0",
                "id": id,
                "method": "sampling/createMessage",
                "params": {
                    "messages": [{ "role": "user", "content": { "type": "text", "text": question } }],
                    "maxTokens": 16,
                },
            }));
            let reply = rx.await.unwrap_or(Value::Null);
            text = match reply.get("result") {
                Some(result) => format!(
                    "sampled: {}",
                    result
                        .pointer("/content/text")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                ),
                None => format!(
                    "sampling failed: {}",
                    reply
                        .pointer("/error/message")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                ),
            };
        }
        let mut result = json!({
            "content": [{ "type": "text", "text": text }],
            "isError": false,
        });
        if let Some(content) = arguments.get("content") {
            result["content"] = content.clone();
        }
        if let Some(attempt) = arguments.get("attempt") {
            result["structuredContent"] = super::attempt::run(attempt);
        }
        if arguments.get("reportPid") == Some(&json!(true)) {
            result["structuredContent"] = json!({ "pid": std::process::id() });
        }
        Ok(result)
    }

    /// One page of `items`; the cursor is the decimal offset of the page.
    pub fn page(
        &self,
        items: &[String],
        params: &Value,
        key: &str,
        item: impl Fn(&str) -> Value,
    ) -> Result<Value, RpcError> {
        let offset = match params.get("cursor") {
            None | Some(Value::Null) => 0,
            Some(cursor) => cursor
                .as_str()
                .and_then(|c| c.parse::<usize>().ok())
                .filter(|&offset| offset <= items.len())
                .ok_or_else(|| (-32602, format!("invalid cursor {cursor}")))?,
        };
        let end = match self.config.page_size {
            Some(size) if size > 0 => (offset + size).min(items.len()),
            _ => items.len(),
        };
        let page: Vec<Value> = items[offset..end].iter().map(|name| item(name)).collect();
        let mut result = json!({ key: page });
        if end < items.len() {
            result["nextCursor"] = json!(end.to_string());
        }
        Ok(result)
    }
}

/// `default` with the fields of `fields` laid over it.
fn overlay(mut default: Value, fields: Option<&serde_json::Map<String, Value>>) -> Value {
    if let (Value::Object(map), Some(fields)) = (&mut default, fields) {
        map.extend(fields.clone());
    }
    default
}

pub fn notification(method: &str) -> Value {
    json!({ "jsonrpc": "2.0", "method": method })
}

pub fn error_response(id: Value, code: i64, message: String) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

/// Parses one received line; a line that is not JSON is kept as a string.
pub fn parse_message(text: &str) -> Result<Value, Value> {
    serde_json::from_str(text).map_err(|_| json!(text))
}

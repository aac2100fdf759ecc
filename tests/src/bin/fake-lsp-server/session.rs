//! One LSP session: its lifecycle (`initialize` to `exit`), the open
//! documents, the requests and notifications it dispatches, and the
//! server→client requests and diagnostics it sends.

use super::*;

pub enum SessionEnd {
    /// The client's stream closed (or broke) without `exit`.
    Closed,
    /// The session ends the process (the `exit` notification).
    Terminate(Termination),
}

pub struct Document {
    pub language_id: String,
    pub version: i64,
    pub text: String,
    pub opened: tokio::time::Instant,
}

/// One LSP session: from a connection's first byte to its close or `exit`.
pub struct Session {
    pub config: Arc<Config>,
    pub out: Writer,
    pub connection: u64,
    pub initialize_received: bool,
    /// `initialize` was answered: requests other than it are served.
    pub initialized: bool,
    pub shutdown: bool,
    /// `hangInInitialize` struck: every later message is dropped.
    pub hung: bool,
    pub docs: BTreeMap<String, Document>,
    pub settings: Value,
    pub initialization_options: Value,
    pub root_uri: Value,
    pub workspace_folders: Value,
    pub next_request_id: u64,
    /// The client's answers to our requests, by method.
    pub answers: Map<String, Value>,
    /// Messages that arrived while we waited for an answer, handled after it.
    pub deferred: VecDeque<Value>,
    /// Delayed diagnostics and the end of indexing; dropping the session
    /// aborts them.
    pub tasks: JoinSet<()>,
    /// Until when the `indexing` progress is unfinished (`None`: not begun,
    /// or not configured; far in the future: never ends).
    pub indexing_until: Option<tokio::time::Instant>,
    /// Answers received to the registration storm's requests.
    pub storm_answered: Arc<std::sync::atomic::AtomicU64>,
}

impl Session {
    pub fn new(config: Arc<Config>, out: Writer, connection: u64) -> Self {
        let next_request_id = if config.id_style == IdStyle::Zero {
            0
        } else {
            1
        };
        Self {
            config,
            out,
            connection,
            initialize_received: false,
            initialized: false,
            shutdown: false,
            hung: false,
            docs: BTreeMap::new(),
            settings: Value::Null,
            initialization_options: Value::Null,
            root_uri: Value::Null,
            workspace_folders: Value::Null,
            next_request_id,
            answers: Map::new(),
            deferred: VecDeque::new(),
            tasks: JoinSet::new(),
            indexing_until: None,
            storm_answered: Arc::default(),
        }
    }

    pub async fn run(mut self, reader: BoxRead) -> SessionEnd {
        let mut reader = FrameReader(BufReader::new(reader));
        loop {
            let message = match self.deferred.pop_front() {
                Some(message) => message,
                None => match reader.next().await {
                    Ok(Some(Frame::Message(message))) => message,
                    Ok(Some(Frame::Garbage)) => {
                        if self
                            .error(Value::Null, PARSE_ERROR, "parse error")
                            .await
                            .is_err()
                        {
                            return SessionEnd::Closed;
                        }
                        continue;
                    }
                    Ok(None) => return SessionEnd::Closed,
                    Err(err) => {
                        eprintln!("fake-lsp-server {}: read: {err}", self.config.name);
                        return SessionEnd::Closed;
                    }
                },
            };
            match self.handle(message, &mut reader).await {
                Ok(None) => {}
                Ok(Some(termination)) => return SessionEnd::Terminate(termination),
                Err(err) => {
                    eprintln!("fake-lsp-server {}: connection: {err}", self.config.name);
                    return SessionEnd::Closed;
                }
            }
        }
    }

    pub async fn handle(
        &mut self,
        message: Value,
        reader: &mut FrameReader,
    ) -> std::io::Result<Option<Termination>> {
        if self.hung {
            return Ok(None);
        }
        let method = message.get("method").and_then(Value::as_str);
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        match (method, message.get("id")) {
            (Some(method), Some(id)) => {
                let (method, id) = (method.to_owned(), id.clone());
                self.request(&method, id, params).await?;
                Ok(None)
            }
            (Some(method), None) => {
                let method = method.to_owned();
                self.notification(&method, params, reader).await
            }
            (None, Some(id)) if id.as_str().is_some_and(|id| id.starts_with("storm-")) => {
                self.storm_answered
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(None)
            }
            (None, Some(id)) => {
                eprintln!(
                    "fake-lsp-server {}: unexpected response id {id}",
                    self.config.name
                );
                Ok(None)
            }
            (None, None) => {
                self.error(
                    Value::Null,
                    INVALID_REQUEST,
                    "neither a request nor a notification",
                )
                .await?;
                Ok(None)
            }
        }
    }

    pub async fn request(&mut self, method: &str, id: Value, params: Value) -> std::io::Result<()> {
        match method {
            "fake/state" => return self.respond(id, self.state()).await,
            "initialize" => return self.initialize(id, params).await,
            _ if !self.initialized => {
                return self
                    .error(id, SERVER_NOT_INITIALIZED, "server not initialized")
                    .await;
            }
            _ if self.shutdown => {
                return self
                    .error(id, INVALID_REQUEST, "server is shutting down")
                    .await;
            }
            _ => {}
        }
        let warming = params["textDocument"]["uri"]
            .as_str()
            .and_then(|uri| self.docs.get(uri))
            .is_some_and(|d| d.opened.elapsed() < Duration::from_millis(self.config.warmup_ms));
        let indexing = self
            .indexing_until
            .is_some_and(|until| tokio::time::Instant::now() < until);
        let result = match method {
            "textDocument/hover"
            | "textDocument/definition"
            | "textDocument/implementation"
            | "textDocument/references"
            | "textDocument/documentSymbol"
            | "textDocument/prepareCallHierarchy"
                if warming || indexing =>
            {
                Value::Null
            }
            "workspace/symbol" if indexing => json!([]),
            "shutdown" => {
                if self.config.ignore_shutdown {
                    eprintln!("fake-lsp-server {}: ignoring shutdown", self.config.name);
                    return Ok(());
                }
                self.shutdown = true;
                Value::Null
            }
            "textDocument/hover" => {
                if self.config.hover_delay_ms > 0 {
                    tokio::time::sleep(Duration::from_millis(self.config.hover_delay_ms)).await;
                }
                self.hover(&params)
            }
            "textDocument/definition" => self.definition(&params),
            "textDocument/references" => self.references(&params),
            "textDocument/documentSymbol" => self.document_symbols(&params),
            "textDocument/implementation" => self.implementation(&params),
            "workspace/symbol" => self.workspace_symbols(&params),
            "textDocument/prepareCallHierarchy" => self.prepare_call_hierarchy(&params),
            "callHierarchy/incomingCalls" => self.incoming_calls(&params),
            "callHierarchy/outgoingCalls" => self.outgoing_calls(&params),
            "textDocument/codeAction" => self.code_actions(&params),
            "textDocument/diagnostic" if self.config.pull_diagnostics => {
                self.document_diagnostic(&params)
            }
            "workspace/diagnostic" if self.config.pull_diagnostics => self.workspace_diagnostic(),
            _ => {
                return self
                    .error(id, METHOD_NOT_FOUND, &format!("method not found: {method}"))
                    .await;
            }
        };
        self.respond(id, result).await
    }

    pub async fn initialize(&mut self, id: Value, params: Value) -> std::io::Result<()> {
        if self.initialize_received {
            return self
                .error(id, INVALID_REQUEST, "initialize was already received")
                .await;
        }
        self.initialize_received = true;
        self.initialization_options = params
            .get("initializationOptions")
            .cloned()
            .unwrap_or(Value::Null);
        self.root_uri = params.get("rootUri").cloned().unwrap_or(Value::Null);
        self.workspace_folders = params
            .get("workspaceFolders")
            .cloned()
            .unwrap_or(Value::Null);
        if self.config.hang_in_initialize {
            eprintln!(
                "fake-lsp-server {}: hanging in initialize",
                self.config.name
            );
            self.hung = true;
            return Ok(());
        }
        if self.config.server_requests {
            // Real servers log before they answer initialize.
            self.notify(
                "window/logMessage",
                json!({ "type": 3, "message": "fake: initializing" }),
            )
            .await?;
        }
        if self.config.initialize_delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(self.config.initialize_delay_ms)).await;
        }
        self.initialized = true;
        let mut result = json!({
            "capabilities": {
                "textDocumentSync": { "openClose": true, "change": 1 },
                "hoverProvider": true,
                "definitionProvider": true,
                "implementationProvider": true,
                "referencesProvider": true,
                "documentSymbolProvider": true,
                "workspaceSymbolProvider": true,
                "callHierarchyProvider": true,
                "codeActionProvider": { "codeActionKinds": ["quickfix", "refactor.rewrite"] },
            },
            "serverInfo": { "name": self.config.name, "version": env!("CARGO_PKG_VERSION") },
        });
        if self.config.pull_diagnostics {
            result["capabilities"]["diagnosticProvider"] =
                json!({ "interFileDependencies": false, "workspaceDiagnostics": true });
        }
        self.respond(id, result).await
    }

    pub async fn notification(
        &mut self,
        method: &str,
        params: Value,
        reader: &mut FrameReader,
    ) -> std::io::Result<Option<Termination>> {
        if method == "exit" {
            if self.config.ignore_shutdown {
                eprintln!("fake-lsp-server {}: ignoring exit", self.config.name);
                return Ok(None);
            }
            // The LSP rule: 0 after shutdown, 1 otherwise.
            let code = if self.shutdown { 0 } else { 1 };
            return Ok(Some(Termination::code(code, "exit notification")));
        }
        // Notifications before initialize is answered, or after shutdown, are dropped.
        if !self.initialized || self.shutdown {
            return Ok(None);
        }
        match method {
            "initialized" => {
                if self.config.server_requests {
                    self.server_requests(reader).await?;
                }
                self.begin_indexing(reader).await?;
                self.begin_registration_storm();
            }
            "textDocument/didOpen" => {
                let doc = &params["textDocument"];
                let Some(uri) = doc["uri"].as_str() else {
                    return Ok(None);
                };
                let document = Document {
                    language_id: doc["languageId"].as_str().unwrap_or_default().to_owned(),
                    version: doc["version"].as_i64().unwrap_or_default(),
                    text: doc["text"].as_str().unwrap_or_default().to_owned(),
                    opened: tokio::time::Instant::now(),
                };
                self.docs.insert(uri.to_owned(), document);
                self.publish_diagnostics(uri).await?;
            }
            "textDocument/didChange" => {
                let Some(uri) = params["textDocument"]["uri"].as_str() else {
                    return Ok(None);
                };
                let Some(document) = self.docs.get_mut(uri) else {
                    eprintln!(
                        "fake-lsp-server {}: didChange for unopened {uri}",
                        self.config.name
                    );
                    return Ok(None);
                };
                document.version = params["textDocument"]["version"]
                    .as_i64()
                    .unwrap_or(document.version);
                for change in params["contentChanges"].as_array().into_iter().flatten() {
                    if change.get("range").is_some() {
                        // We advertise full sync; the record shows the offending message.
                        eprintln!("fake-lsp-server: ignoring an incremental change to {uri}");
                    } else if let Some(text) = change["text"].as_str() {
                        document.text = text.to_owned();
                    }
                }
                self.publish_diagnostics(uri).await?;
            }
            "textDocument/didClose" => {
                if let Some(uri) = params["textDocument"]["uri"].as_str() {
                    self.docs.remove(uri);
                }
            }
            "workspace/didChangeConfiguration" => {
                self.settings = params.get("settings").cloned().unwrap_or(Value::Null);
            }
            // Anything else (`$/cancelRequest`, `$/setTrace`, ...) is ignored.
            _ => {}
        }
        Ok(None)
    }

    /// The server→client traffic real servers start with after `initialized`.
    pub async fn server_requests(&mut self, reader: &mut FrameReader) -> std::io::Result<()> {
        let token = format!("fake-progress-{}", self.connection);
        self.ask(
            reader,
            "window/workDoneProgress/create",
            json!({ "token": token }),
        )
        .await?;
        self.notify(
            "$/progress",
            json!({ "token": token, "value": { "kind": "begin", "title": "fake indexing", "percentage": 0 } }),
        )
        .await?;
        let registration = json!({
            "registrations": [{
                "id": "fake-watched-files",
                "method": "workspace/didChangeWatchedFiles",
                "registerOptions": { "watchers": [{ "globPattern": "**/*" }] },
            }]
        });
        self.ask(reader, "client/registerCapability", registration)
            .await?;
        self.ask(
            reader,
            "workspace/configuration",
            json!({ "items": [{ "section": "fake" }] }),
        )
        .await?;
        self.notify(
            "$/progress",
            json!({ "token": token, "value": { "kind": "end", "message": "indexed" } }),
        )
        .await?;
        self.notify(
            "window/logMessage",
            json!({ "type": 3, "message": "fake: ready" }),
        )
        .await
    }

    /// The `indexing` progress: created, begun, reported at 40 %, and ended
    /// after `endsAfterMs` (by a task, so requests are served meanwhile) or
    /// never.
    pub async fn begin_indexing(&mut self, reader: &mut FrameReader) -> std::io::Result<()> {
        let ends_after = match self.config.indexing {
            Indexing::Off => return Ok(()),
            Indexing::EndsAfterMs(ms) => Duration::from_millis(ms),
            Indexing::Never => Duration::from_secs(365 * 24 * 3600),
        };
        let until = tokio::time::Instant::now() + ends_after;
        self.indexing_until = Some(until);
        let token = format!("fake-indexing-{}", self.connection);
        self.ask(
            reader,
            "window/workDoneProgress/create",
            json!({ "token": token }),
        )
        .await?;
        self.notify(
            "$/progress",
            json!({ "token": token, "value": { "kind": "begin", "title": "indexing", "percentage": 0 } }),
        )
        .await?;
        self.notify(
            "$/progress",
            json!({ "token": token, "value": { "kind": "report", "message": "4/10 files", "percentage": 40 } }),
        )
        .await?;
        if self.config.indexing == Indexing::Never {
            return Ok(());
        }
        let out = self.out.clone();
        let end = json!({
            "jsonrpc": "2.0",
            "method": "$/progress",
            "params": { "token": token, "value": { "kind": "end", "message": "indexed" } },
        });
        self.tasks.spawn(async move {
            tokio::time::sleep_until(until).await;
            let _ = out.send(end).await;
        });
        Ok(())
    }

    /// The registration storm, by a task (see [`fake_lsp::RegistrationStorm`]).
    pub fn begin_registration_storm(&mut self) {
        use std::sync::atomic::Ordering;
        let Some(storm) = self.config.registration_storm.clone() else {
            return;
        };
        let (out, answered) = (self.out.clone(), self.storm_answered.clone());
        let report = move |body: Value| {
            let tmp = storm.report.with_extension("tmp");
            let _ = std::fs::write(&tmp, body.to_string());
            let _ = std::fs::rename(&tmp, &storm.report);
        };
        self.tasks.spawn(async move {
            tokio::time::sleep(Duration::from_millis(storm.after_ms)).await;
            report(json!({ "phase": "begin" }));
            let mut tick = tokio::time::interval(Duration::from_secs_f64(
                1.0 / storm.per_second.max(1) as f64,
            ));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let end = tokio::time::Instant::now() + Duration::from_millis(storm.duration_ms);
            let mut sent = 0u64;
            while tokio::time::Instant::now() < end {
                tick.tick().await;
                let id = format!("storm-{sent}");
                let request = json!({
                    "jsonrpc": "2.0", "id": id, "method": "client/registerCapability",
                    "params": { "registrations": [{
                        "id": id, "method": "workspace/didChangeWatchedFiles",
                        "registerOptions": { "watchers": [{ "globPattern": "**/*.rs" }] },
                    }] },
                });
                if out.send(request).await.is_err() {
                    break;
                }
                sent += 1;
            }
            let give_up = tokio::time::Instant::now() + Duration::from_secs(5);
            while answered.load(Ordering::Relaxed) < sent && tokio::time::Instant::now() < give_up {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            report(json!({
                "phase": "end", "sent": sent, "answered": answered.load(Ordering::Relaxed),
            }));
        });
    }

    /// Sends a request to the client and waits for its answer; whatever else
    /// arrives meanwhile is deferred until after it.
    pub async fn ask(
        &mut self,
        reader: &mut FrameReader,
        method: &str,
        params: Value,
    ) -> std::io::Result<()> {
        let id = match self.config.id_style {
            IdStyle::String => json!(format!("fake-{}", self.next_request_id)),
            IdStyle::Number | IdStyle::Zero => json!(self.next_request_id),
        };
        self.next_request_id += 1;
        self.out
            .send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
            .await?;
        loop {
            let message = match reader.next().await? {
                Some(Frame::Message(message)) => message,
                Some(Frame::Garbage) => {
                    self.error(Value::Null, PARSE_ERROR, "parse error").await?;
                    continue;
                }
                None => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        format!("stream closed while waiting for the answer to {method}"),
                    ));
                }
            };
            if message.get("method").is_none() && message.get("id") == Some(&id) {
                let answer = match message.get("error") {
                    Some(error) => json!({ "error": error }),
                    None => {
                        json!({ "result": message.get("result").cloned().unwrap_or(Value::Null) })
                    }
                };
                self.answers.insert(method.to_owned(), answer);
                return Ok(());
            }
            self.deferred.push_back(message);
        }
    }

    pub async fn respond(&self, id: Value, result: Value) -> std::io::Result<()> {
        self.out
            .send(json!({ "jsonrpc": "2.0", "id": id, "result": result }))
            .await
    }

    pub async fn error(&self, id: Value, code: i64, message: &str) -> std::io::Result<()> {
        self.out
            .send(json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } }))
            .await
    }

    pub async fn notify(&self, method: &str, params: Value) -> std::io::Result<()> {
        self.out
            .send(json!({ "jsonrpc": "2.0", "method": method, "params": params }))
            .await
    }

    /// One diagnostic per line containing `ERROR`, now or after
    /// `diagnosticsDelayMs` (computed from the text as it is now).
    pub async fn publish_diagnostics(&mut self, uri: &str) -> std::io::Result<()> {
        let Some(document) = self.docs.get(uri) else {
            return Ok(());
        };
        let diagnostics = self.diagnostics_of(document);
        let message = json!({
            "jsonrpc": "2.0",
            "method": "textDocument/publishDiagnostics",
            "params": { "uri": uri, "version": document.version, "diagnostics": diagnostics },
        });
        let delay = self.config.diagnostics_delay_ms;
        if delay == 0 {
            return self.out.send(message).await;
        }
        while self.tasks.try_join_next().is_some() {}
        let out = self.out.clone();
        self.tasks.spawn(async move {
            tokio::time::sleep(Duration::from_millis(delay)).await;
            let _ = out.send(message).await;
        });
        Ok(())
    }
}

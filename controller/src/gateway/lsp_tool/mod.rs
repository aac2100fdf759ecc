//! The `lsp` tool: code intelligence from the workspace's language servers,
//! with Qwen Code's `lsp` tool interface, so an agent prompt
//! written for Qwen Code works unchanged.
//!
//! This module owns the translation between that interface and LSP: the
//! arguments (1-based `line` / `character` in characters; `filePath`
//! absolute, workspace-relative or a `file://` URI, refused outside the
//! workspace after `..` and symlinks are resolved), the requests, and the
//! answers — readable text (each location as `path:line:col` relative to the
//! workspace, then the trimmed source line) and the same data as
//! `structuredContent` (1-based positions, workspace-relative paths, the
//! server's name). Server choice, the wait for a (re)starting server and
//! document tracking (opened documents are replayed after a restart) are
//! [`LspService`](crate::gateway::lsp::LspService)'s, shared with `steward
//! lsp`.
//!
//! A call hierarchy item round-trips through the agent: `prepareCallHierarchy`
//! returns items in this tool's coordinates with the `serverName` that made
//! them and a `documentRevision` (a digest of the item and its file's text);
//! `incomingCalls` / `outgoingCalls` take one back, send it to that server
//! (unless `serverName` says otherwise) and refuse it when its file changed
//! since, as Qwen Code does.
//!
//! - `coordinates`: LSP URIs and positions ↔ this tool's paths, 1-based
//!   columns and source lines.
//! - `shapes`: the shapes LSP answers come in, read into plain data.
//! - `text`: the readable text of the answers.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use lsp_types::Url;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde::Deserialize;
use serde_json::{Value, json};

use super::Gateway;
use super::explain::{explain, explain_blocked};
use crate::desired::snapshot::Snapshot;
use crate::gateway::lsp::{
    DIAGNOSTICS_WAIT, LspError, REQUEST_TIMEOUT, Route, Synced, read, to_lsp_position,
};
use crate::runtime::lsp::LspConnection;

mod coordinates;
mod shapes;
mod text;

use coordinates::Lines;
use shapes::{
    SEVERITIES, Symbol, as_list, flatten_symbols, hover_text, is_empty, locations_of, overlaps,
    workspace_symbol,
};
use text::{
    action_lines, diagnostic_line, item_line, json_lines, place_line, plural, shown_of,
    symbol_line, tally,
};

/// The tool's name.
pub const NAME: &str = "lsp";

/// The operations, as Qwen Code names them.
pub const OPERATIONS: [&str; 12] = [
    "goToDefinition",
    "findReferences",
    "hover",
    "documentSymbol",
    "workspaceSymbol",
    "goToImplementation",
    "prepareCallHierarchy",
    "incomingCalls",
    "outgoingCalls",
    "diagnostics",
    "workspaceDiagnostics",
    "codeActions",
];

/// How long `diagnostics` waits for a document's first publication (a
/// server analyses a new file slowly; later ones take [`DIAGNOSTICS_WAIT`]).
const FIRST_DIAGNOSTICS_WAIT: Duration = Duration::from_secs(15);
/// After a `workspaceSymbol` had to open a file first, how long before it
/// asks once more when the first answer was empty (the server was indexing).
const WARMUP_RETRY: Duration = Duration::from_millis(1500);
/// When a document was only just opened and the answer is empty, how long
/// before asking once more (Qwen Code's document retry delay).
const RETRY_AFTER_OPEN: Duration = Duration::from_secs(2);
/// How deep `workspaceSymbol` looks for a file to open first.
const WARMUP_DEPTH: usize = 5;
/// Directories never searched for that file.
const SKIPPED_DIRS: [&str; 5] = ["node_modules", "dist", "build", "target", "out"];
/// Call sites shown per call hierarchy entry in the text.
const CALL_SITES_SHOWN: usize = 3;

/// The tool definition: Qwen Code's input schema (same property names and
/// types), our own descriptions.
pub fn tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "operation": {"type": "string", "enum": OPERATIONS, "description": "What to ask the language server."},
            "filePath": {"type": "string", "description": "The file: absolute, relative to the workspace root, or a file:// URI. It must be inside the workspace."},
            "line": {"type": "number", "description": "Line of the position, counting from 1."},
            "character": {"type": "number", "description": "Column of the position in characters, counting from 1 (default 1)."},
            "endLine": {"type": "number", "description": "codeActions: last line of the range, counting from 1 (default: line)."},
            "endCharacter": {"type": "number", "description": "codeActions: column after the range, counting from 1 (default: character)."},
            "includeDeclaration": {"type": "boolean", "description": "findReferences: also list the declaration (default false)."},
            "query": {"type": "string", "description": "workspaceSymbol: the name, or part of it, to look for."},
            "callHierarchyItem": {"$ref": "#/definitions/LspCallHierarchyItem", "description": "incomingCalls / outgoingCalls: an item exactly as prepareCallHierarchy (or a previous call) returned it."},
            "serverName": {"type": "string", "description": "The language server to ask (default: chosen by the file's extension; for workspaceSymbol and workspaceDiagnostics, every ready server)."},
            "limit": {"type": "integer", "minimum": 1, "description": "At most this many results."},
            "diagnostics": {"type": "array", "items": {"$ref": "#/definitions/LspDiagnostic"}, "description": "codeActions: the diagnostics to fix, as the diagnostics operation returned them (default: those the server reported in the range)."},
            "codeActionKinds": {"type": "array", "items": {"type": "string"}, "description": "codeActions: only actions of these kinds (quickfix, refactor, source, ...)."}
        },
        "required": ["operation"],
        "definitions": {
            "LspPosition": {"type": "object", "properties": {"line": {"type": "number"}, "character": {"type": "number"}}, "required": ["line", "character"]},
            "LspRange": {"type": "object", "properties": {"start": {"$ref": "#/definitions/LspPosition"}, "end": {"$ref": "#/definitions/LspPosition"}}, "required": ["start", "end"]},
            "LspCallHierarchyItem": {"type": "object", "properties": {
                "name": {"type": "string"}, "kind": {"type": "string"}, "rawKind": {"type": "number"},
                "documentRevision": {"type": "string", "description": "Pass back unchanged. When the file changed since, call prepareCallHierarchy again."},
                "detail": {"type": "string"}, "uri": {"type": "string"},
                "range": {"$ref": "#/definitions/LspRange"}, "selectionRange": {"$ref": "#/definitions/LspRange"},
                "data": {}, "serverName": {"type": "string"}
            }, "required": ["name", "uri", "range", "selectionRange"]},
            "LspDiagnostic": {"type": "object", "properties": {
                "range": {"$ref": "#/definitions/LspRange"},
                "severity": {"type": "string", "enum": SEVERITIES},
                "code": {"type": ["string", "number"]}, "source": {"type": "string"},
                "message": {"type": "string"}, "serverName": {"type": "string"}
            }, "required": ["range", "message"]}
        }
    });
    let Value::Object(schema) = schema else {
        unreachable!("a JSON object literal")
    };
    Tool::new(
        NAME,
        "Code intelligence from the workspace's language servers; prefer it to text search \
         for questions about code. Positions are 1-based (line, character). \
         goToDefinition, goToImplementation, findReferences, hover and prepareCallHierarchy \
         take filePath + line (+ character); documentSymbol and diagnostics take filePath; \
         workspaceSymbol takes query; incomingCalls / outgoingCalls take a callHierarchyItem \
         from prepareCallHierarchy; workspaceDiagnostics takes nothing; codeActions take \
         filePath + line (+ character, endLine, endCharacter) and optionally diagnostics and \
         codeActionKinds. Locations come back as path:line:col with the source line.",
        Arc::new(schema),
    )
    // It reads; code actions are listed, never applied.
    .annotate(
        ToolAnnotations::with_title("Code intelligence (LSP)")
            .read_only(true)
            .open_world(false),
    )
}

/// The tool's arguments (Qwen Code's names).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Args {
    operation: String,
    file_path: Option<String>,
    line: Option<f64>,
    character: Option<f64>,
    end_line: Option<f64>,
    end_character: Option<f64>,
    include_declaration: Option<bool>,
    query: Option<String>,
    call_hierarchy_item: Option<Value>,
    server_name: Option<String>,
    limit: Option<f64>,
    diagnostics: Option<Vec<Value>>,
    code_action_kinds: Option<Vec<String>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Definition,
    References,
    Hover,
    DocumentSymbol,
    WorkspaceSymbol,
    Implementation,
    PrepareCallHierarchy,
    IncomingCalls,
    OutgoingCalls,
    Diagnostics,
    WorkspaceDiagnostics,
    CodeActions,
}

impl Op {
    fn parse(name: &str) -> Option<Op> {
        Some(match name {
            "goToDefinition" => Op::Definition,
            "findReferences" => Op::References,
            "hover" => Op::Hover,
            "documentSymbol" => Op::DocumentSymbol,
            "workspaceSymbol" => Op::WorkspaceSymbol,
            "goToImplementation" => Op::Implementation,
            "prepareCallHierarchy" => Op::PrepareCallHierarchy,
            "incomingCalls" => Op::IncomingCalls,
            "outgoingCalls" => Op::OutgoingCalls,
            "diagnostics" => Op::Diagnostics,
            "workspaceDiagnostics" => Op::WorkspaceDiagnostics,
            "codeActions" => Op::CodeActions,
            _ => return None,
        })
    }

    /// Qwen Code's default result limits.
    fn default_limit(self) -> usize {
        match self {
            Op::References | Op::DocumentSymbol | Op::WorkspaceDiagnostics => 50,
            _ => 20,
        }
    }
}

/// A tool error: the text says what went wrong and what to do.
#[derive(Debug)]
struct Refused(String);

impl From<LspError> for Refused {
    fn from(error: LspError) -> Self {
        Refused(match error {
            LspError::Unavailable { name, status } => {
                format!("language {}", explain(&name, &status))
            }
            LspError::Blocked {
                name,
                reason,
                message,
            } => format!("language {}", explain_blocked(&name, reason, &message)),
            LspError::NotReadyInTime { name, waited } => format!(
                "language server \"{name}\" did not become ready within {}; see `steward describe {name}`",
                humantime::format_duration(waited)
            ),
            other => format!("failed to {other}"),
        })
    }
}

/// A successful answer: the text and the same data as JSON.
struct Answer {
    text: String,
    data: Value,
}

/// Run one `lsp` tool call.
pub async fn call(gateway: &Arc<Gateway>, arguments: JsonObject) -> CallToolResult {
    let outcome = match parse(arguments) {
        Ok((op, args)) => {
            let call = Call {
                gateway,
                snap: gateway.store.snapshot(),
                workspace: gateway.workspace(),
            };
            call.run(op, &args).await.map(|answer| (op, answer))
        }
        Err(refused) => Err(refused),
    };
    match outcome {
        Ok((op, answer)) => {
            let mut data = answer.data;
            if let Value::Object(map) = &mut data {
                map.insert("operation".to_owned(), json!(OPERATIONS[op as usize]));
            }
            let mut result = CallToolResult::success(vec![ContentBlock::text(answer.text)]);
            result.structured_content = Some(data);
            result
        }
        Err(Refused(text)) => CallToolResult::error(vec![ContentBlock::text(text)]),
    }
}

/// The arguments, checked the way Qwen Code checks them.
fn parse(arguments: JsonObject) -> Result<(Op, Args), Refused> {
    let mut args: Args = serde_json::from_value(Value::Object(arguments))
        .map_err(|e| Refused(format!("invalid arguments for the lsp tool: {e}")))?;
    let op = Op::parse(&args.operation).ok_or_else(|| {
        Refused(format!(
            "unknown operation {:?}; use one of {}",
            args.operation,
            OPERATIONS.join(", ")
        ))
    })?;
    let name = OPERATIONS[op as usize];
    if let Some(path) = &args.file_path {
        let path = unescape_shell(path.trim());
        args.file_path = (!path.is_empty()).then_some(path);
    }
    let needs_file = matches!(
        op,
        Op::Definition
            | Op::References
            | Op::Hover
            | Op::Implementation
            | Op::PrepareCallHierarchy
            | Op::DocumentSymbol
            | Op::Diagnostics
            | Op::CodeActions
    );
    let needs_line = needs_file && !matches!(op, Op::DocumentSymbol | Op::Diagnostics);
    if needs_file && args.file_path.is_none() {
        return Err(Refused(format!("{name} needs filePath")));
    }
    if needs_line && args.line.is_none() {
        return Err(Refused(format!(
            "{name} needs line (1-based; character defaults to 1)"
        )));
    }
    if op == Op::WorkspaceSymbol && args.query.as_deref().is_none_or(|q| q.trim().is_empty()) {
        return Err(Refused(format!("{name} needs a query")));
    }
    if matches!(op, Op::IncomingCalls | Op::OutgoingCalls) && args.call_hierarchy_item.is_none() {
        return Err(Refused(format!(
            "{name} needs a callHierarchyItem: call prepareCallHierarchy at the function first"
        )));
    }
    for (key, value) in [
        ("line", args.line),
        ("character", args.character),
        ("endLine", args.end_line),
        ("endCharacter", args.end_character),
        ("limit", args.limit),
    ] {
        if value.is_some_and(|v| v.is_nan() || v < 1.0) {
            return Err(Refused(format!(
                "{key} must be 1 or more (positions are 1-based)"
            )));
        }
    }
    Ok((op, args))
}

/// `\ `, `\(`... as a shell would have them (Qwen Code accepts shell-escaped paths).
fn unescape_shell(path: &str) -> String {
    const SPECIAL: &str = " \t()[]{};|*?$`'\"#&<>!~,";
    let mut out = String::with_capacity(path.len());
    let mut chars = path.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\'
            && let Some(next) = chars.peek().copied()
            && SPECIAL.contains(next)
        {
            out.push(next);
            chars.next();
        } else {
            out.push(c);
        }
    }
    out
}

/// 1-based position argument (fractions dropped, as Qwen Code does).
fn whole(value: Option<f64>) -> Option<u32> {
    value.map(|v| v.floor().clamp(1.0, f64::from(u32::MAX)) as u32)
}

/// One call's context.
struct Call<'a> {
    gateway: &'a Arc<Gateway>,
    snap: Arc<Snapshot>,
    workspace: PathBuf,
}

/// A file argument, checked and read.
struct Document {
    path: PathBuf,
    text: String,
}

impl Call<'_> {
    async fn run(&self, op: Op, args: &Args) -> Result<Answer, Refused> {
        let limit = args
            .limit
            .map_or(op.default_limit(), |l| l.floor() as usize)
            .max(1);
        match op {
            Op::Definition | Op::Implementation | Op::References => {
                self.locations(op, args, limit).await
            }
            Op::Hover => self.hover(args).await,
            Op::DocumentSymbol => self.document_symbols(args, limit).await,
            Op::WorkspaceSymbol => self.workspace_symbols(args, limit).await,
            Op::PrepareCallHierarchy => self.prepare_call_hierarchy(args, limit).await,
            Op::IncomingCalls | Op::OutgoingCalls => self.calls(op, args, limit).await,
            Op::Diagnostics => self.diagnostics(args).await,
            Op::WorkspaceDiagnostics => self.workspace_diagnostics(args, limit).await,
            Op::CodeActions => self.code_actions(args, limit).await,
        }
    }

    // ---- paths ----

    /// `filePath` as a checked absolute path inside the workspace, with its text.
    fn document(&self, file: &str) -> Result<Document, Refused> {
        let path = self.resolve(file)?;
        let text = read(&path).map_err(|e| match e {
            LspError::Read { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                Refused(format!(
                    "{file} does not exist (filePath is absolute or relative to the workspace root {})",
                    self.workspace.display()
                ))
            }
            other => Refused::from(other),
        })?;
        Ok(Document { path, text })
    }

    /// An absolute path, a workspace-relative path or a `file://` URI →
    /// the absolute path, refused when it leaves the workspace (lexically,
    /// or through a symlink).
    fn resolve(&self, file: &str) -> Result<PathBuf, Refused> {
        let given = if file.starts_with("file:") {
            Url::parse(file)
                .ok()
                .and_then(|u| u.to_file_path().ok())
                .ok_or_else(|| Refused(format!("{file} is not a usable file URI")))?
        } else if file.contains("://") {
            return Err(Refused(format!(
                "{file} is not a file of the workspace: the lsp tool reads files only"
            )));
        } else {
            PathBuf::from(file)
        };
        let lexical = steward_schema::load::normalize_lexically(&self.workspace.join(given));
        let outside = || {
            Refused(format!(
                "{file} is outside the workspace {}: the lsp tool only reads files inside it",
                self.workspace.display()
            ))
        };
        if !lexical.starts_with(&self.workspace) {
            return Err(outside());
        }
        match std::fs::canonicalize(&lexical) {
            Ok(real) if real.starts_with(&self.workspace) => Ok(real),
            Ok(real) => Err(Refused(format!(
                "{file} is outside the workspace {}: it resolves to {} (a symlink); the lsp tool only reads files inside it",
                self.workspace.display(),
                real.display()
            ))),
            // Missing: said by the read, with the path as given.
            Err(_) => Ok(lexical),
        }
    }

    /// A path for people: relative to the workspace when inside it.
    fn shown(&self, path: &Path) -> String {
        match path.strip_prefix(&self.workspace) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => path.display().to_string(),
        }
    }

    // ---- servers ----

    fn route(&self, named: Option<&str>, file: Option<&Path>) -> Result<Route, Refused> {
        self.gateway
            .lsp
            .route(&self.snap, named, file)
            .map_err(|e| match e {
                LspError::NoServerFor { file, ext } => Refused(format!(
                    "no language server of this workspace handles \"{ext}\" files like {}: map the extension in extensionToLanguage of .lsp.json, or name a server with serverName",
                    self.shown(&file)
                )),
                other => other.into(),
            })
    }

    /// Run `use_it` on `server`'s connection, waiting for it and retrying
    /// across a restart (see `LspService::with_connection`).
    async fn on<T, F, Fut>(&self, server: &str, use_it: F) -> Result<T, Refused>
    where
        F: Fn(Arc<LspConnection>) -> Fut,
        Fut: Future<Output = Result<T, LspError>>,
    {
        Ok(self
            .gateway
            .lsp
            .with_connection(&self.snap, &self.gateway.status, server, use_it)
            .await?)
    }

    /// Open (or refresh) `doc` on the connection, tracked for replay.
    async fn open(
        &self,
        route: &Route,
        conn: &LspConnection,
        doc: &Document,
    ) -> Result<Synced, LspError> {
        self.gateway
            .lsp
            .open(
                &route.server,
                conn,
                &doc.path,
                &route.language,
                doc.text.clone(),
            )
            .await
    }

    /// Open `doc` on `route`'s server and send `method` with `params(uri)`.
    /// When the document was only just opened and the answer is empty, ask
    /// once more after [`RETRY_AFTER_OPEN`] (the server may still be
    /// analysing it), as Qwen Code does.
    async fn ask(
        &self,
        route: &Route,
        doc: &Document,
        method: &str,
        params: &(dyn Fn(&Url) -> Value + Sync),
    ) -> Result<(Value, Url), Refused> {
        self.on(&route.server, |conn| async move {
            let synced = self.open(route, &conn, doc).await?;
            let params = params(&synced.uri);
            let mut answer = request(&conn, method, params.clone()).await?;
            if synced.fresh && is_empty(&answer) {
                tokio::time::sleep(RETRY_AFTER_OPEN).await;
                answer = request(&conn, method, params).await?;
            }
            Ok((answer, synced.uri))
        })
        .await
    }

    /// The 0-based LSP position of the `line` / `character` arguments.
    fn position(
        &self,
        doc: &Document,
        line: Option<f64>,
        character: Option<f64>,
    ) -> Result<Value, Refused> {
        let line = whole(line).unwrap_or(1);
        let character = whole(character).unwrap_or(1);
        let (line, character) =
            to_lsp_position(&doc.path, &doc.text, line, character).map_err(|e| match e {
                LspError::NoSuchLine { line, lines, .. } => Refused(format!(
                    "{} has {lines} lines; line {line} is past its end",
                    self.shown(&doc.path)
                )),
                other => Refused::from(other),
            })?;
        Ok(json!({ "line": line, "character": character }))
    }

    /// `filePath:line:col [server]`, for headings.
    fn at(&self, doc: &Document, args: &Args, server: &str) -> String {
        format!(
            "{}:{}:{} [{server}]",
            self.shown(&doc.path),
            whole(args.line).unwrap_or(1),
            whole(args.character).unwrap_or(1)
        )
    }

    // ---- operations ----

    async fn locations(&self, op: Op, args: &Args, limit: usize) -> Result<Answer, Refused> {
        let doc = self.document(args.file_path.as_deref().unwrap_or_default())?;
        let route = self.route(args.server_name.as_deref(), Some(&doc.path))?;
        let position = self.position(&doc, args.line, args.character)?;
        let (method, what) = match op {
            Op::Definition => ("textDocument/definition", "definition"),
            Op::Implementation => ("textDocument/implementation", "implementation"),
            _ => ("textDocument/references", "reference"),
        };
        let include_declaration = args.include_declaration.unwrap_or(false);
        let (raw, _) = self
            .ask(&route, &doc, method, &|uri| {
                let mut params = json!({ "textDocument": { "uri": uri }, "position": position });
                if op == Op::References {
                    params["context"] = json!({ "includeDeclaration": include_declaration });
                }
                params
            })
            .await?;
        let found = locations_of(&raw);
        let mut lines = Lines::default();
        let places: Vec<Value> = found
            .iter()
            .take(limit)
            .map(|(uri, range)| self.place(&mut lines, uri, range))
            .collect();
        let at = self.at(&doc, args, &route.server);
        let text = if places.is_empty() {
            format!("No {what} found at {at}.")
        } else {
            let mut text = format!(
                "{} at {at}{}:",
                plural(found.len(), what),
                shown_of(places.len(), found.len())
            );
            for place in &places {
                text.push('\n');
                text.push_str(&place_line(place));
            }
            text
        };
        Ok(Answer {
            text,
            data: json!({ "server": route.server, "total": found.len(), "locations": places }),
        })
    }

    async fn hover(&self, args: &Args) -> Result<Answer, Refused> {
        let doc = self.document(args.file_path.as_deref().unwrap_or_default())?;
        let route = self.route(args.server_name.as_deref(), Some(&doc.path))?;
        let position = self.position(&doc, args.line, args.character)?;
        let (raw, uri) = self
            .ask(
                &route,
                &doc,
                "textDocument/hover",
                &|uri| json!({ "textDocument": { "uri": uri }, "position": position }),
            )
            .await?;
        let contents = hover_text(&raw["contents"]);
        let at = self.at(&doc, args, &route.server);
        let range = raw
            .get("range")
            .filter(|r| r.is_object())
            .map(|r| self.place(&mut Lines::default(), uri.as_str(), r));
        let text = if contents.trim().is_empty() {
            format!("No hover information at {at}.")
        } else {
            format!("Hover at {at}:\n{}", contents.trim())
        };
        Ok(Answer {
            text,
            data: json!({ "server": route.server, "contents": contents.trim(), "range": range }),
        })
    }

    async fn document_symbols(&self, args: &Args, limit: usize) -> Result<Answer, Refused> {
        let doc = self.document(args.file_path.as_deref().unwrap_or_default())?;
        let route = self.route(args.server_name.as_deref(), Some(&doc.path))?;
        let (raw, uri) = self
            .ask(
                &route,
                &doc,
                "textDocument/documentSymbol",
                &|uri| json!({ "textDocument": { "uri": uri } }),
            )
            .await?;
        let mut flat = Vec::new();
        flatten_symbols(
            &route.server,
            raw.as_array().map_or(&[][..], Vec::as_slice),
            uri.as_str(),
            None,
            0,
            &mut flat,
        );
        let mut lines = Lines::default();
        let symbols: Vec<Value> = flat
            .iter()
            .take(limit)
            .map(|s| self.symbol(&mut lines, s))
            .collect();
        let file = self.shown(&doc.path);
        let text = if symbols.is_empty() {
            format!("No symbols in {file} [{}].", route.server)
        } else {
            let mut text = format!(
                "{} in {file} [{}]{}:",
                plural(flat.len(), "symbol"),
                route.server,
                shown_of(symbols.len(), flat.len())
            );
            for (symbol, s) in symbols.iter().zip(&flat) {
                text.push('\n');
                text.push_str(&"  ".repeat(s.depth));
                text.push_str(&symbol_line(symbol));
            }
            text
        };
        Ok(Answer {
            text,
            data: json!({ "server": route.server, "total": flat.len(), "symbols": symbols }),
        })
    }

    /// The servers a workspace-wide operation asks: the named one, else
    /// every Ready one.
    fn servers(&self, named: Option<&str>) -> Result<Vec<String>, Refused> {
        if let Some(name) = named {
            return Ok(vec![self.route(Some(name), None)?.server]);
        }
        let ready: Vec<String> = self
            .gateway
            .lsp
            .ready()
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        if ready.is_empty() {
            return Err(Refused(
                "no language server of this workspace is ready; see `steward status`".to_owned(),
            ));
        }
        Ok(ready)
    }

    async fn workspace_symbols(&self, args: &Args, limit: usize) -> Result<Answer, Refused> {
        let query = args.query.clone().unwrap_or_default();
        let mut found: Vec<Symbol> = Vec::new();
        let mut failures = Vec::new();
        for server in self.servers(args.server_name.as_deref())? {
            let query = &query;
            let asked = self
                .on(&server, |conn| {
                    let server = server.clone();
                    async move {
                        let warmed = self.warm_up(&server, &conn).await;
                        let params = json!({ "query": query });
                        let mut raw = request(&conn, "workspace/symbol", params.clone()).await?;
                        if warmed && raw.as_array().is_none_or(Vec::is_empty) {
                            tokio::time::sleep(WARMUP_RETRY).await;
                            raw = request(&conn, "workspace/symbol", params).await?;
                        }
                        Ok(raw)
                    }
                })
                .await;
            match asked {
                Ok(raw) => {
                    for item in raw.as_array().into_iter().flatten() {
                        if let Some(symbol) = workspace_symbol(item, &server) {
                            found.push(symbol);
                        }
                    }
                }
                Err(Refused(why)) => failures.push(why),
            }
            if found.len() >= limit {
                break;
            }
        }
        if found.is_empty() && !failures.is_empty() {
            return Err(Refused(failures.join("; ")));
        }
        let mut lines = Lines::default();
        let symbols: Vec<Value> = found
            .iter()
            .take(limit)
            .map(|s| self.symbol(&mut lines, s))
            .collect();
        let mut text = if symbols.is_empty() {
            format!("No symbols match \"{query}\".")
        } else {
            let mut text = format!(
                "{} matching \"{query}\"{}:",
                plural(found.len(), "symbol"),
                shown_of(symbols.len(), found.len())
            );
            for symbol in &symbols {
                text.push('\n');
                text.push_str(&symbol_line(symbol));
                text.push_str(&format!(
                    " [{}]",
                    symbol["server"].as_str().unwrap_or_default()
                ));
            }
            text
        };
        for why in &failures {
            text.push_str(&format!("\n(skipped: {why})"));
        }
        // As Qwen Code does: the references of the best match.
        let mut references = Value::Null;
        if let Some(top) = found.first()
            && let Ok(path) = Url::parse(&top.uri).map(|u| u.to_file_path())
            && let Ok(path) = path
            && let Ok(doc) = self.document(&path.to_string_lossy())
            && let Ok(route) = self.route(Some(&top.server), Some(&doc.path))
        {
            let refs_limit = limit.clamp(5, 20);
            let start = &top.range["start"];
            let raw = self
                .ask(&route, &doc, "textDocument/references", &|uri| {
                    json!({ "textDocument": { "uri": uri }, "position": start,
                            "context": { "includeDeclaration": false } })
                })
                .await;
            if let Ok((raw, _)) = raw {
                let refs = locations_of(&raw);
                let places: Vec<Value> = refs
                    .iter()
                    .take(refs_limit)
                    .map(|(uri, range)| self.place(&mut lines, uri, range))
                    .collect();
                if !places.is_empty() {
                    text.push_str(&format!(
                        "\n{} of {}{}:",
                        plural(refs.len(), "reference"),
                        top.name,
                        shown_of(places.len(), refs.len())
                    ));
                    for place in &places {
                        text.push('\n');
                        text.push_str(&place_line(place));
                    }
                }
                references =
                    json!({ "symbol": top.name, "total": refs.len(), "locations": places });
            }
        }
        Ok(Answer {
            text,
            data: json!({ "query": query, "total": found.len(), "symbols": symbols, "topReferences": references }),
        })
    }

    /// Before `workspace/symbol` on a server that has no document open
    /// through Steward: open one file of the workspace it handles, so it
    /// loads the project. Returns whether it opened one.
    async fn warm_up(&self, server: &str, conn: &LspConnection) -> bool {
        if !self.gateway.lsp.tracked(server).is_empty() {
            return false;
        }
        let Some(spec) = self.snap.desired.lsp.get(server).map(|d| &d.spec) else {
            return false;
        };
        let mut extensions: Vec<String> = spec.extension_to_language.keys().cloned().collect();
        if extensions.is_empty() {
            extensions = spec
                .languages
                .iter()
                .flat_map(|l| usual_extensions(l))
                .map(|e| format!(".{e}"))
                .collect();
        }
        let Some(path) = find_file(&self.workspace, &extensions, WARMUP_DEPTH) else {
            return false;
        };
        let Ok(route) = self.route(Some(server), Some(&path)) else {
            return false;
        };
        let Ok(text) = read(&path) else {
            return false;
        };
        let doc = Document { path, text };
        match self.open(&route, conn, &doc).await {
            Ok(_) => true,
            Err(e) => {
                tracing::debug!(server, %e, "could not open a file before workspace/symbol");
                false
            }
        }
    }

    async fn prepare_call_hierarchy(&self, args: &Args, limit: usize) -> Result<Answer, Refused> {
        let doc = self.document(args.file_path.as_deref().unwrap_or_default())?;
        let route = self.route(args.server_name.as_deref(), Some(&doc.path))?;
        let position = self.position(&doc, args.line, args.character)?;
        let (raw, _) = self
            .ask(
                &route,
                &doc,
                "textDocument/prepareCallHierarchy",
                &|uri| json!({ "textDocument": { "uri": uri }, "position": position }),
            )
            .await?;
        let all: Vec<&Value> = as_list(&raw);
        let mut lines = Lines::default();
        let items: Vec<Value> = all
            .iter()
            .take(limit)
            .filter_map(|item| self.item_out(&mut lines, item, &route.server))
            .collect();
        let at = self.at(&doc, args, &route.server);
        let text = if items.is_empty() {
            format!("No call hierarchy item at {at}.")
        } else {
            let mut text = format!("{} at {at}:", plural(all.len(), "call hierarchy item"));
            for item in &items {
                text.push('\n');
                text.push_str(&item_line(item));
            }
            text.push_str(
                "\nPass one of these items, unchanged, as callHierarchyItem to incomingCalls or outgoingCalls:\n",
            );
            text.push_str(&json_lines(items.iter()));
            text
        };
        Ok(Answer {
            text,
            data: json!({ "server": route.server, "items": items }),
        })
    }

    async fn calls(&self, op: Op, args: &Args, limit: usize) -> Result<Answer, Refused> {
        let given = match args.call_hierarchy_item.clone().unwrap_or_default() {
            // Some agents send the object as a JSON string.
            Value::String(s) => serde_json::from_str(&s).map_err(|e| {
                Refused(format!(
                    "callHierarchyItem is not a call hierarchy item: {e}"
                ))
            })?,
            other => other,
        };
        let server = args
            .server_name
            .clone()
            .or_else(|| given["serverName"].as_str().map(str::to_owned))
            .ok_or_else(|| {
                Refused(
                    "callHierarchyItem has no serverName: pass an item from prepareCallHierarchy, or name the server"
                        .to_owned(),
                )
            })?;
        let uri = given["uri"]
            .as_str()
            .ok_or_else(|| Refused("callHierarchyItem has no uri".to_owned()))?;
        let doc = self.document(uri)?;
        let route = self.route(Some(&server), Some(&doc.path))?;
        let item = self.item_in(&given, &doc, &server)?;
        let (method, key, noun) = match op {
            Op::IncomingCalls => ("callHierarchy/incomingCalls", "from", "caller"),
            _ => ("callHierarchy/outgoingCalls", "to", "callee"),
        };
        let (route_ref, doc_ref, item_ref) = (&route, &doc, &item);
        let raw = self
            .on(&route.server, |conn| async move {
                self.open(route_ref, &conn, doc_ref).await?;
                request(&conn, method, json!({ "item": item_ref })).await
            })
            .await?;
        let all = as_list(&raw);
        let mut lines = Lines::default();
        let mut calls = Vec::new();
        let mut text_lines = Vec::new();
        for call in all.iter().take(limit) {
            let Some(other) = self.item_out(&mut lines, &call[key], &route.server) else {
                continue;
            };
            // Call sites are in the caller: the other item's file for
            // incoming calls, this item's for outgoing ones.
            let sites_uri = match op {
                Op::IncomingCalls => call[key]["uri"].as_str().unwrap_or_default().to_owned(),
                _ => item["uri"].as_str().unwrap_or_default().to_owned(),
            };
            let sites: Vec<Value> = call["fromRanges"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| self.place(&mut lines, &sites_uri, r))
                .collect();
            let mut line = item_line(&other);
            for site in sites.iter().take(CALL_SITES_SHOWN) {
                line.push_str("\n    called at ");
                line.push_str(&place_line(site));
            }
            if sites.len() > CALL_SITES_SHOWN {
                line.push_str(&format!(
                    "\n    and {} more",
                    sites.len() - CALL_SITES_SHOWN
                ));
            }
            text_lines.push(line);
            calls.push(json!({ key: other, "fromRanges": sites }));
        }
        let target = format!(
            "{} ({}:{}:{})",
            given["name"].as_str().unwrap_or("?"),
            self.shown(&doc.path),
            whole(given["selectionRange"]["start"]["line"].as_f64()).unwrap_or(1),
            whole(given["selectionRange"]["start"]["character"].as_f64()).unwrap_or(1)
        );
        let text = if calls.is_empty() {
            format!("No {noun}s of {target} [{}].", route.server)
        } else {
            let heading = match op {
                Op::IncomingCalls => format!("{} of {target}", plural(all.len(), "caller")),
                _ => format!("{} called by {target}", plural(all.len(), "function")),
            };
            let items: Vec<&Value> = calls.iter().map(|c| &c[key]).collect();
            format!(
                "{heading} [{}]{}:\n{}\nTheir items, for further incomingCalls / outgoingCalls:\n{}",
                route.server,
                shown_of(calls.len(), all.len()),
                text_lines.join("\n"),
                json_lines(items.iter().copied())
            )
        };
        Ok(Answer {
            text,
            data: json!({ "server": route.server, "total": all.len(), "calls": calls }),
        })
    }

    async fn diagnostics(&self, args: &Args) -> Result<Answer, Refused> {
        let doc = self.document(args.file_path.as_deref().unwrap_or_default())?;
        let route = self.route(args.server_name.as_deref(), Some(&doc.path))?;
        let (route_ref, doc_ref) = (&route, &doc);
        let (diagnostics, uri) = self
            .on(&route.server, |conn| async move {
                let uri = self.open(route_ref, &conn, doc_ref).await?.uri;
                Ok((document_diagnostics(&conn, &uri).await?, uri))
            })
            .await?;
        let file = self.shown(&doc.path);
        let mut lines = Lines::default();
        let Some(diagnostics) = diagnostics else {
            return Ok(Answer {
                text: format!(
                    "{} has not reported diagnostics for {file} yet (it may still be analysing it); call again shortly.",
                    route.server
                ),
                data: json!({ "server": route.server, "path": file, "diagnostics": Value::Null }),
            });
        };
        let shown: Vec<Value> = diagnostics
            .iter()
            .map(|d| self.diagnostic(&mut lines, uri.as_str(), d, &route.server))
            .collect();
        let text = if shown.is_empty() {
            format!("No diagnostics for {file} [{}].", route.server)
        } else {
            let mut text = format!("{} in {file} [{}]:", tally(&shown), route.server);
            for d in &shown {
                text.push('\n');
                text.push_str(&diagnostic_line(d));
            }
            text
        };
        Ok(Answer {
            text,
            data: json!({ "server": route.server, "path": file, "diagnostics": shown }),
        })
    }

    async fn workspace_diagnostics(&self, args: &Args, limit: usize) -> Result<Answer, Refused> {
        let mut files: Vec<Value> = Vec::new();
        let mut failures = Vec::new();
        let mut lines = Lines::default();
        let mut total_files = 0;
        for server in self.servers(args.server_name.as_deref())? {
            let server_ref = &server;
            let found = self
                .on(&server, |conn| async move {
                    self.collect_workspace_diagnostics(server_ref, &conn).await
                })
                .await;
            match found {
                Ok(found) => {
                    for (uri, diagnostics) in found {
                        if diagnostics.is_empty() {
                            continue;
                        }
                        total_files += 1;
                        if files.len() >= limit {
                            continue;
                        }
                        let shown: Vec<Value> = diagnostics
                            .iter()
                            .map(|d| self.diagnostic(&mut lines, &uri, d, &server))
                            .collect();
                        files.push(json!({
                            "path": self.uri_shown(&uri),
                            "server": server,
                            "diagnostics": shown,
                        }));
                    }
                }
                Err(Refused(why)) => failures.push(why),
            }
        }
        if files.is_empty() && !failures.is_empty() {
            return Err(Refused(failures.join("; ")));
        }
        let all: Vec<Value> = files
            .iter()
            .flat_map(|f| f["diagnostics"].as_array().cloned().unwrap_or_default())
            .collect();
        let mut text = if files.is_empty() {
            "No diagnostics in the documents the language servers know.".to_owned()
        } else {
            let mut text = format!(
                "{} in {}{}:",
                tally(&all),
                plural(total_files, "file"),
                shown_of(files.len(), total_files)
            );
            for file in &files {
                text.push_str(&format!(
                    "\n{} [{}]:",
                    file["path"].as_str().unwrap_or_default(),
                    file["server"].as_str().unwrap_or_default()
                ));
                for d in file["diagnostics"].as_array().into_iter().flatten() {
                    text.push('\n');
                    text.push_str(&diagnostic_line(d));
                }
            }
            text
        };
        for why in &failures {
            text.push_str(&format!("\n(skipped: {why})"));
        }
        Ok(Answer {
            text,
            data: json!({ "totalFiles": total_files, "files": files }),
        })
    }

    /// Every document `server` knows through Steward, refreshed from disk,
    /// with its diagnostics (pulled when the server offers workspace
    /// diagnostics, else what it published).
    async fn collect_workspace_diagnostics(
        &self,
        server: &str,
        conn: &LspConnection,
    ) -> Result<Vec<(String, Vec<Value>)>, LspError> {
        let tracked = self.gateway.lsp.tracked(server);
        let mut synced = Vec::new();
        for (uri, language) in tracked {
            let Ok(path) = uri.to_file_path() else {
                continue;
            };
            let Ok(text) = read(&path) else {
                continue;
            };
            self.gateway
                .lsp
                .open(server, conn, &path, &language, text)
                .await?;
            synced.push(uri);
        }
        let pull = conn.capabilities()["diagnosticProvider"]["workspaceDiagnostics"] == json!(true);
        if pull {
            let raw = request(
                conn,
                "workspace/diagnostic",
                json!({ "previousResultIds": [] }),
            )
            .await?;
            return Ok(raw["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|report| {
                    let uri = report["uri"].as_str()?.to_owned();
                    let items = report["items"].as_array()?.clone();
                    let inside = Url::parse(&uri)
                        .ok()
                        .and_then(|u| u.to_file_path().ok())
                        .is_some_and(|p| p.starts_with(&self.workspace));
                    inside.then_some((uri, items))
                })
                .collect());
        }
        let waits = synced.iter().map(|uri| async move {
            let fresh = conn.wait_for_diagnostics(uri, DIAGNOSTICS_WAIT).await;
            let diagnostics = fresh.or_else(|| conn.diagnostics(uri)).unwrap_or_default();
            (
                uri.to_string(),
                diagnostics
                    .iter()
                    .filter_map(|d| serde_json::to_value(d).ok())
                    .collect::<Vec<Value>>(),
            )
        });
        Ok(futures::future::join_all(waits).await)
    }

    async fn code_actions(&self, args: &Args, limit: usize) -> Result<Answer, Refused> {
        let doc = self.document(args.file_path.as_deref().unwrap_or_default())?;
        let route = self.route(args.server_name.as_deref(), Some(&doc.path))?;
        let start = self.position(&doc, args.line, args.character)?;
        let end = self.position(
            &doc,
            args.end_line.or(args.line),
            args.end_character.or(args.character),
        )?;
        let range = json!({ "start": start, "end": end });
        let given = args.diagnostics.clone();
        let only = args.code_action_kinds.clone();
        let (route_ref, doc_ref, range_ref, given_ref, only_ref) =
            (&route, &doc, &range, &given, &only);
        let raw = self
            .on(&route.server, |conn| async move {
                let uri = self.open(route_ref, &conn, doc_ref).await?.uri;
                let known: Vec<Value> = conn
                    .diagnostics(&uri)
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|d| serde_json::to_value(d).ok())
                    .collect();
                let diagnostics = match given_ref {
                    Some(given) => given
                        .iter()
                        .map(|d| self.diagnostic_in(doc_ref, d, &known))
                        .collect(),
                    None => known
                        .into_iter()
                        .filter(|d| overlaps(&d["range"], range_ref))
                        .collect::<Vec<_>>(),
                };
                let mut context = json!({ "diagnostics": diagnostics, "triggerKind": 1 });
                if let Some(only) = only_ref {
                    context["only"] = json!(only);
                }
                request(
                    &conn,
                    "textDocument/codeAction",
                    json!({ "textDocument": { "uri": uri }, "range": range_ref, "context": context }),
                )
                .await
            })
            .await?;
        let all = as_list(&raw);
        let mut lines = Lines::default();
        let actions: Vec<Value> = all
            .iter()
            .take(limit)
            .map(|a| self.action(&mut lines, a))
            .collect();
        let at = format!(
            "{}:{}:{}-{}:{} [{}]",
            self.shown(&doc.path),
            whole(args.line).unwrap_or(1),
            whole(args.character).unwrap_or(1),
            whole(args.end_line.or(args.line)).unwrap_or(1),
            whole(args.end_character.or(args.character)).unwrap_or(1),
            route.server
        );
        let text = if actions.is_empty() {
            format!("No code actions at {at}.")
        } else {
            let mut text = format!(
                "{} at {at}{}:",
                plural(all.len(), "code action"),
                shown_of(actions.len(), all.len())
            );
            for (n, action) in actions.iter().enumerate() {
                text.push_str(&format!("\n{}. {}", n + 1, action_lines(action)));
            }
            text.push_str("\nSteward does not apply them: make the edits yourself.");
            text
        };
        Ok(Answer {
            text,
            data: json!({ "server": route.server, "total": all.len(), "actions": actions }),
        })
    }
}

/// Send one request, bounded.
async fn request(conn: &LspConnection, method: &str, params: Value) -> Result<Value, LspError> {
    conn.request(method, params, REQUEST_TIMEOUT)
        .await
        .map_err(LspError::Protocol)
}

/// A document's diagnostics: pulled when the server offers it, else the
/// ones it publishes after this sync (`None`: nothing came in time).
async fn document_diagnostics(
    conn: &LspConnection,
    uri: &Url,
) -> Result<Option<Vec<Value>>, LspError> {
    if !conn.capabilities()["diagnosticProvider"].is_null() {
        let raw = request(
            conn,
            "textDocument/diagnostic",
            json!({ "textDocument": { "uri": uri } }),
        )
        .await?;
        return Ok(Some(raw["items"].as_array().cloned().unwrap_or_default()));
    }
    let wait = if conn.diagnostics(uri).is_some() {
        DIAGNOSTICS_WAIT
    } else {
        FIRST_DIAGNOSTICS_WAIT
    };
    let published = conn
        .wait_for_diagnostics(uri, wait)
        .await
        .or_else(|| conn.diagnostics(uri));
    Ok(published.map(|list| {
        list.iter()
            .filter_map(|d| serde_json::to_value(d).ok())
            .collect()
    }))
}
/// Usual file extensions of a language id (for finding a file to open).
fn usual_extensions(language: &str) -> Vec<&'static str> {
    match language {
        "c" => vec!["c", "h"],
        "cpp" => vec!["cpp", "cc", "cxx", "hpp", "h"],
        "python" => vec!["py"],
        "typescript" => vec!["ts", "tsx"],
        "typescriptreact" => vec!["tsx"],
        "javascript" => vec!["js", "jsx", "mjs"],
        "javascriptreact" => vec!["jsx"],
        "shellscript" => vec!["sh", "bash"],
        "rust" => vec!["rs"],
        "go" => vec!["go"],
        "java" => vec!["java"],
        _ => Vec::new(),
    }
}

/// The first file (sorted, breadth-first, at most `depth` levels, hidden and
/// build directories skipped) whose extension is one of `extensions`.
fn find_file(root: &Path, extensions: &[String], depth: usize) -> Option<PathBuf> {
    let mut level = vec![root.to_owned()];
    for _ in 0..depth {
        let mut next = Vec::new();
        for dir in level {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut entries: Vec<_> = entries.flatten().collect();
            entries.sort_by_key(std::fs::DirEntry::file_name);
            for entry in entries {
                let name = entry.file_name().to_string_lossy().into_owned();
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if kind.is_dir() {
                    if !name.starts_with('.') && !SKIPPED_DIRS.contains(&name.as_str()) {
                        next.push(entry.path());
                    }
                } else if kind.is_file()
                    && let Some((_, ext)) = name.rsplit_once('.')
                    && extensions.contains(&format!(".{}", ext.to_lowercase()))
                {
                    return Some(entry.path());
                }
            }
        }
        level = next;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(value: Value) -> JsonObject {
        let Value::Object(map) = value else {
            panic!("an object")
        };
        map
    }

    #[test]
    fn the_input_schema_has_qwen_codes_property_names() {
        let tool = tool();
        let properties = tool.input_schema["properties"].as_object().unwrap();
        let names: Vec<&str> = properties.keys().map(String::as_str).collect();
        let mut expected = vec![
            "operation",
            "filePath",
            "line",
            "character",
            "endLine",
            "endCharacter",
            "includeDeclaration",
            "query",
            "callHierarchyItem",
            "serverName",
            "limit",
            "diagnostics",
            "codeActionKinds",
        ];
        expected.sort_unstable();
        let mut names = names;
        names.sort_unstable();
        assert_eq!(names, expected);
        assert_eq!(properties["limit"]["type"], "integer");
        let annotations = tool.annotations.as_ref().unwrap();
        assert_eq!(annotations.read_only_hint, Some(true));
        assert_eq!(properties["line"]["type"], "number");
        // The definitions, without descriptions, are Qwen Code's.
        let mut definitions =
            Value::Object(tool.input_schema.as_ref().clone())["definitions"].clone();
        strip_descriptions(&mut definitions);
        assert_eq!(
            definitions,
            json!({
                "LspPosition": {"type": "object", "properties": {"line": {"type": "number"}, "character": {"type": "number"}}, "required": ["line", "character"]},
                "LspRange": {"type": "object", "properties": {"start": {"$ref": "#/definitions/LspPosition"}, "end": {"$ref": "#/definitions/LspPosition"}}, "required": ["start", "end"]},
                "LspCallHierarchyItem": {"type": "object", "properties": {
                    "name": {"type": "string"}, "kind": {"type": "string"}, "rawKind": {"type": "number"},
                    "documentRevision": {"type": "string"}, "detail": {"type": "string"}, "uri": {"type": "string"},
                    "range": {"$ref": "#/definitions/LspRange"}, "selectionRange": {"$ref": "#/definitions/LspRange"},
                    "data": {}, "serverName": {"type": "string"}
                }, "required": ["name", "uri", "range", "selectionRange"]},
                "LspDiagnostic": {"type": "object", "properties": {
                    "range": {"$ref": "#/definitions/LspRange"},
                    "severity": {"type": "string", "enum": ["error", "warning", "information", "hint"]},
                    "code": {"type": ["string", "number"]}, "source": {"type": "string"},
                    "message": {"type": "string"}, "serverName": {"type": "string"}
                }, "required": ["range", "message"]}
            })
        );
    }

    fn strip_descriptions(value: &mut Value) {
        match value {
            Value::Object(map) => {
                map.remove("description");
                map.values_mut().for_each(strip_descriptions);
            }
            Value::Array(items) => items.iter_mut().for_each(strip_descriptions),
            _ => {}
        }
    }

    #[test]
    fn operations_parse_to_their_index() {
        for (i, name) in OPERATIONS.iter().enumerate() {
            assert_eq!(Op::parse(name).map(|op| op as usize), Some(i), "{name}");
        }
    }

    #[test]
    fn arguments_are_checked_per_operation() {
        let refused = |value: Value| parse(args(value)).unwrap_err().0;
        assert!(refused(json!({"operation": "hover"})).contains("needs filePath"));
        assert!(refused(json!({"operation": "hover", "filePath": "a.py"})).contains("needs line"));
        assert!(refused(json!({"operation": "workspaceSymbol", "query": " "})).contains("query"));
        assert!(refused(json!({"operation": "incomingCalls"})).contains("prepareCallHierarchy"));
        assert!(
            refused(json!({"operation": "hover", "filePath": "a", "line": 0}))
                .contains("line must be 1 or more")
        );
        assert!(refused(json!({"operation": "rename"})).contains("unknown operation"));
        assert!(refused(json!({"operation": "hover", "line": "x"})).contains("invalid arguments"));
        let (op, parsed) = parse(args(
            json!({"operation": "documentSymbol", "filePath": " my\\ file.py "}),
        ))
        .unwrap();
        assert_eq!(op, Op::DocumentSymbol);
        assert_eq!(parsed.file_path.as_deref(), Some("my file.py"));
        assert!(parse(args(json!({"operation": "workspaceDiagnostics"}))).is_ok());
    }

    #[test]
    fn the_first_matching_file_is_found_breadth_first_skipping_build_dirs() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("node_modules/x")).unwrap();
        std::fs::write(dir.path().join("node_modules/x/a.py"), "").unwrap();
        std::fs::create_dir_all(dir.path().join("src/deep")).unwrap();
        std::fs::write(dir.path().join("src/deep/b.py"), "").unwrap();
        std::fs::write(dir.path().join("src/c.PY"), "").unwrap();
        let found = find_file(dir.path(), &[".py".to_owned()], 5).unwrap();
        assert_eq!(found, dir.path().join("src/c.PY"));
        assert_eq!(find_file(dir.path(), &[".py".to_owned()], 1), None);
    }
}

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
//! lsp`, and so is the wait for a server that is still indexing: a call
//! then waits for it (bounded by its `startupTimeout`) or says `still
//! indexing (NAME: 40 %)` instead of answering with an empty result.
//!
//! A call hierarchy item round-trips through the agent: `prepareCallHierarchy`
//! returns items in this tool's coordinates with the `serverName` that made
//! them and a `documentRevision` (a digest of the item and its file's text);
//! `incomingCalls` / `outgoingCalls` take one back, send it to that server
//! (unless `serverName` says otherwise) and refuse it when its file changed
//! since, as Qwen Code does.
//!
//! Here are the tool's definition (name, input schema) and the dispatch of
//! a call to its operation; the rest is in the child modules:
//!
//! - `args`: the arguments, checked the way Qwen Code checks them.
//! - `paths`: `filePath` → a file inside the workspace; paths as shown.
//! - `servers`: the server to ask, its connection, the opened document,
//!   bounded requests.
//! - `locations`, `symbols`, `call_hierarchy`, `diagnostics`: the
//!   operations, by group.
//! - `coordinates`: LSP URIs and positions ↔ this tool's paths, 1-based
//!   columns and source lines.
//! - `shapes`: the shapes LSP answers come in, read into plain data.
//! - `text`: the readable text of the answers.

use std::path::PathBuf;
use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use super::Gateway;
use super::explain::{explain, explain_blocked};
use crate::desired::snapshot::Snapshot;
use crate::gateway::lsp::{LspError, still_indexing};

mod args;
mod call_hierarchy;
mod coordinates;
mod diagnostics;
mod locations;
mod paths;
mod servers;
mod shapes;
mod symbols;
mod text;

use args::{Args, OPERATIONS, Op, parse};
use shapes::SEVERITIES;

/// The tool's name.
pub const NAME: &str = "lsp";

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
            // Said first and as is: the agent reads "still indexing", not
            // a failure of its question.
            LspError::StillIndexing {
                name,
                progress,
                waited,
            } => format!(
                "{}: it did not finish within {}, and an answer now could be empty or incomplete; call again shortly",
                still_indexing(&name, &progress),
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

/// One call's context.
struct Call<'a> {
    gateway: &'a Arc<Gateway>,
    snap: Arc<Snapshot>,
    workspace: PathBuf,
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
}

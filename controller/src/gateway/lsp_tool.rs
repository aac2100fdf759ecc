//! The `lsp` tool: code intelligence from the workspace's language servers,
//! with Qwen Code's `lsp` tool interface (product.md §6), so an agent prompt
//! written for Qwen Code works unchanged.
//!
//! Positions are 1-based (`line`, `character`); `filePath` is absolute or
//! relative to the workspace and must stay inside it. The server is chosen
//! by the file's extension (`extensionToLanguage`) or `serverName`; the
//! document is opened and tracked as `steward lsp` does, so it is replayed
//! after a restart.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool};
use serde_json::{Value, json};

use super::Gateway;
use crate::control::{LspOp, LspQuery};

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

/// The tool definition.
pub fn tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "operation": {"type": "string", "enum": OPERATIONS, "description": "What to ask the language server."},
            "filePath": {"type": "string", "description": "The file, absolute or relative to the workspace root."},
            "line": {"type": "number", "description": "Line of the position, counting from 1."},
            "character": {"type": "number", "description": "Column of the position, counting from 1."},
            "endLine": {"type": "number", "description": "Last line of a range (codeActions), counting from 1."},
            "endCharacter": {"type": "number", "description": "Last column of a range (codeActions), counting from 1."},
            "includeDeclaration": {"type": "boolean", "description": "findReferences: also list the declaration."},
            "query": {"type": "string", "description": "workspaceSymbol: the symbol to look for."},
            "callHierarchyItem": {"$ref": "#/definitions/LspCallHierarchyItem", "description": "incomingCalls / outgoingCalls: an item from prepareCallHierarchy."},
            "serverName": {"type": "string", "description": "The language server to ask (default: chosen by the file's extension)."},
            "limit": {"type": "integer", "minimum": 1, "description": "At most this many results."},
            "diagnostics": {"type": "array", "items": {"$ref": "#/definitions/LspDiagnostic"}, "description": "codeActions: the diagnostics to fix."},
            "codeActionKinds": {"type": "array", "items": {"type": "string"}, "description": "codeActions: only these kinds (quickfix, refactor, ...)."}
        },
        "required": ["operation"],
        "definitions": {
            "LspPosition": {"type": "object", "properties": {"line": {"type": "number"}, "character": {"type": "number"}}, "required": ["line", "character"]},
            "LspRange": {"type": "object", "properties": {"start": {"$ref": "#/definitions/LspPosition"}, "end": {"$ref": "#/definitions/LspPosition"}}, "required": ["start", "end"]},
            "LspCallHierarchyItem": {"type": "object", "properties": {
                "name": {"type": "string"}, "kind": {"type": "string"}, "rawKind": {"type": "number"},
                "detail": {"type": "string"}, "uri": {"type": "string"},
                "range": {"$ref": "#/definitions/LspRange"}, "selectionRange": {"$ref": "#/definitions/LspRange"},
                "data": {}, "serverName": {"type": "string"}
            }, "required": ["name", "uri", "range", "selectionRange"]},
            "LspDiagnostic": {"type": "object", "properties": {
                "range": {"$ref": "#/definitions/LspRange"},
                "severity": {"type": "string", "enum": ["error", "warning", "information", "hint"]},
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
        "Code intelligence from the workspace's language servers: go to definition or \
         implementation, find references, hover, document and workspace symbols, call \
         hierarchy, diagnostics and code actions. Positions are 1-based (line, character); \
         filePath is absolute or relative to the workspace.",
        Arc::new(schema),
    )
}

fn text_result(text: String, structured: Value, error: bool) -> CallToolResult {
    let mut result = if error {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    };
    if !structured.is_null() {
        result.structured_content = Some(structured);
    }
    result
}

/// Run one `lsp` tool call.
pub async fn call(gateway: &Arc<Gateway>, arguments: JsonObject) -> CallToolResult {
    let operation = arguments
        .get("operation")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let op = match operation.as_str() {
        "goToDefinition" => LspOp::Definition,
        "findReferences" => LspOp::References,
        "hover" => LspOp::Hover,
        "documentSymbol" => LspOp::Symbols,
        "diagnostics" => LspOp::Diagnostics,
        other if OPERATIONS.contains(&other) => {
            return text_result(
                format!("LSP {other} is not available through Steward yet"),
                Value::Null,
                true,
            );
        }
        other => {
            return text_result(
                format!(
                    "unknown operation {other:?}; expected one of {}",
                    OPERATIONS.join(", ")
                ),
                Value::Null,
                true,
            );
        }
    };
    let workspace = gateway.workspace();
    let Some(file) = arguments.get("filePath").and_then(Value::as_str) else {
        return text_result(
            format!("filePath is required for {operation}"),
            Value::Null,
            true,
        );
    };
    let path = workspace.join(file);
    let path = steward_schema::load::normalize_lexically(&path);
    if !path.starts_with(&workspace) {
        return text_result(
            format!("{file} is outside the workspace {}", workspace.display()),
            Value::Null,
            true,
        );
    }
    let as_u32 = |key: &str| {
        arguments
            .get(key)
            .and_then(Value::as_f64)
            .map(|v| v.max(1.0) as u32)
    };
    let query = LspQuery {
        op,
        file: Some(path),
        line: as_u32("line"),
        column: as_u32("character").or(Some(1)),
        server: arguments
            .get("serverName")
            .and_then(Value::as_str)
            .map(str::to_owned),
        method: None,
        params: None,
    };
    let snap = gateway.store.snapshot();
    match gateway.lsp.query(&snap, &gateway.status, query).await {
        Ok((server, result)) => text_result(
            format!(
                "{operation} ({server}):\n{}",
                serde_json::to_string_pretty(&result).unwrap_or_default()
            ),
            json!({"server": server, "result": result}),
            false,
        ),
        Err(e) => text_result(format!("LSP {operation} failed: {e}"), Value::Null, true),
    }
}

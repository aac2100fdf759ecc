//! The `lsp` tool's arguments: Qwen Code's names for the operations and
//! the arguments, and the checks Qwen Code makes before anything is asked
//! (what each operation needs, 1-based positions and limits, shell-escaped
//! paths).

use rmcp::model::JsonObject;
use serde::Deserialize;
use serde_json::Value;

use super::Refused;

/// The operations, as Qwen Code names them.
pub(super) const OPERATIONS: [&str; 12] = [
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

/// The tool's arguments (Qwen Code's names).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Args {
    operation: String,
    pub(super) file_path: Option<String>,
    pub(super) line: Option<f64>,
    pub(super) character: Option<f64>,
    pub(super) end_line: Option<f64>,
    pub(super) end_character: Option<f64>,
    pub(super) include_declaration: Option<bool>,
    pub(super) query: Option<String>,
    pub(super) call_hierarchy_item: Option<Value>,
    pub(super) server_name: Option<String>,
    pub(super) limit: Option<f64>,
    pub(super) diagnostics: Option<Vec<Value>>,
    pub(super) code_action_kinds: Option<Vec<String>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
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
    pub(super) fn default_limit(self) -> usize {
        match self {
            Op::References | Op::DocumentSymbol | Op::WorkspaceDiagnostics => 50,
            _ => 20,
        }
    }
}

/// The arguments, checked the way Qwen Code checks them.
pub(super) fn parse(arguments: JsonObject) -> Result<(Op, Args), Refused> {
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
pub(super) fn whole(value: Option<f64>) -> Option<u32> {
    value.map(|v| v.floor().clamp(1.0, f64::from(u32::MAX)) as u32)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn args(value: Value) -> JsonObject {
        let Value::Object(map) = value else {
            panic!("an object")
        };
        map
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
}

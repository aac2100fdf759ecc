//! Tool search for agents: `search_tools` and `call_tool`.
//!
//! With `--expose search` a client lists only these two (and `lsp`): the
//! catalog stays out of its context until it asks. `search_tools` ranks
//! every listed tool of the union ([`super::search`], the index is built
//! once per union) and returns the best ones whole — name, server,
//! description, input schema — so the agent can call one in its next turn;
//! `call_tool` forwards to it exactly as a direct call would (the session
//! does that part). Because the union is live, a client that never re-lists
//! still finds and calls a tool added after it connected.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde::Deserialize;
use serde_json::{Value, json};

use super::registry::Union;

/// The search tool's name.
pub const SEARCH: &str = "search_tools";
/// The call tool's name.
pub const CALL: &str = "call_tool";
/// Tools a search returns unless it asks for another number.
const DEFAULT_LIMIT: usize = 5;
/// The most a search returns.
const MAX_LIMIT: usize = 50;

/// A tool schema from a `json!` object literal.
pub fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => unreachable!("a schema literal is an object"),
    }
}

/// The two tools' definitions.
pub fn tools() -> [Tool; 2] {
    let search = Tool::new(
        SEARCH,
        "Find the tools of this workspace's MCP servers that fit a task. Describe the task in \
         plain words; the best matches come back whole (name, server, description, input \
         schema). Call one with call_tool, giving its name and arguments. The catalog is live: \
         search again after the configuration changed.",
        schema(json!({
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "What the tool should do, in plain words (e.g. \"current time in Tokyo\")."
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_LIMIT,
                    "description": format!("How many tools to return (default {DEFAULT_LIMIT}).")
                },
                "server": {
                    "type": "string",
                    "description": "Only tools of this MCP server."
                }
            },
            "required": ["query"]
        })),
    )
    .annotate(
        ToolAnnotations::new()
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(false),
    );
    let call = Tool::new(
        CALL,
        "Call a tool that search_tools found, by its name (server__tool), with its arguments as \
         its input schema describes them. The answer is the tool's own.",
        schema(json!({
            "type": "object",
            "properties": {
                "name": {
                    "type": "string",
                    "description": "The tool's name as search_tools returned it."
                },
                "arguments": {
                    "type": "object",
                    "description": "The tool's arguments."
                }
            },
            "required": ["name"]
        })),
    );
    [search, call]
}

/// `search_tools`' arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    query: String,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    server: Option<String>,
}

/// `call_tool`'s arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallArgs {
    pub name: String,
    #[serde(default)]
    pub arguments: Option<JsonObject>,
}

fn error(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// `call_tool`'s arguments, or the tool error that says what is wrong.
pub fn call_args(arguments: Option<JsonObject>) -> Result<CallArgs, CallToolResult> {
    let value = Value::Object(arguments.unwrap_or_default());
    let args: CallArgs = serde_json::from_value(value).map_err(|e| {
        error(format!(
            "call_tool needs {{\"name\": \"server__tool\", \"arguments\": {{...}}}}: {e}"
        ))
    })?;
    if args.name == SEARCH || args.name == CALL {
        return Err(error(format!(
            "call_tool calls the tools search_tools finds; call {} directly",
            args.name
        )));
    }
    Ok(args)
}

/// Answer `search_tools` over `union`.
pub fn search(union: &Union, arguments: Option<JsonObject>) -> CallToolResult {
    let value = Value::Object(arguments.unwrap_or_default());
    let args: SearchArgs = match serde_json::from_value(value) {
        Ok(args) => args,
        Err(e) => {
            return error(format!(
                "search_tools needs {{\"query\": \"...\", \"limit\"?: n, \"server\"?: \"name\"}}: {e}"
            ));
        }
    };
    if args.query.trim().is_empty() {
        return error(
            "search_tools needs a query: say in plain words what the tool should do".into(),
        );
    }
    let servers = union.servers();
    if let Some(server) = &args.server
        && !servers.iter().any(|s| s == server)
    {
        return error(format!(
            "no Ready server \"{server}\" has tools; the servers with tools are: {}",
            list_or_none(&servers)
        ));
    }
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let index = union.index();
    if index.is_empty() {
        return error(
            "no MCP server of this workspace is Ready with tools now; see `steward status`".into(),
        );
    }
    let hits = index.search(&args.query, limit, args.server.as_deref());
    let found: Vec<Value> = hits
        .iter()
        .filter_map(|hit| {
            // Built from `union.tools` in order: the same position.
            let name = index.exposed(hit.index)?;
            union.tools.get(hit.index).filter(|t| t.name == name)
        })
        .map(|tool| {
            let server = union.tool(&tool.name).map(|r| r.server.as_str());
            let mut entry = json!({
                "name": tool.name,
                "server": server,
                "description": tool.description.as_deref().unwrap_or_default(),
                "inputSchema": tool.input_schema,
            });
            if let Some(annotations) = &tool.annotations {
                entry["annotations"] = json!(annotations);
            }
            entry
        })
        .collect();
    if found.is_empty() {
        return CallToolResult::success(vec![ContentBlock::text(format!(
            "no tool matches \"{}\"; {} tools are available from: {}. Try other words.",
            args.query,
            index.len(),
            list_or_none(&servers)
        ))]);
    }
    let body = json!({ "tools": found });
    CallToolResult::success(vec![ContentBlock::text(body.to_string())])
}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

//! Code mode (`--expose code`): the agent writes one short program that
//! calls many tools, so the intermediate results stay out of its context.
//!
//! Two tools: `describe_tools` gives TypeScript declarations of tools
//! ([`declare`]) and `run_code` runs an async JavaScript program on an
//! embedded engine ([`engine`], one bounded QuickJS runtime per run on a
//! thread of its own). Inside the program every tool of the live union is
//! `tools.SERVER.TOOL(args)`; each call is a client of the same call path as
//! a direct call ([`host`] → [`super::Gateway::forward_checked`]), its
//! arguments checked against the tool's `inputSchema` before it is sent,
//! and what it answers is unwrapped from the MCP envelope ([`unwrap`]).
//! The answer is `{result, logs, calls, error?}` within 16 KiB ([`output`]).

pub mod declare;
pub mod engine;
pub mod host;
pub mod output;
pub mod unwrap;

use std::hash::{Hash as _, Hasher as _};
use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{
    CallToolResult, ContentBlock, JsonObject, RequestMetaObject, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tracing::Instrument as _;

use super::Gateway;
use super::call::Origin;
use super::finder::schema;
use super::registry::Union;
use crate::observe::metrics::Via;
use crate::observe::trace;
use engine::{Failure, Limits};
use host::{RunHost, listed_or_none};

/// The declarations tool's name.
pub const DESCRIBE: &str = "describe_tools";
/// The program tool's name.
pub const RUN: &str = "run_code";

/// A run's time unless it asks for another.
pub const DEFAULT_TIME: Duration = Duration::from_secs(30);
/// The most time a run may ask for.
pub const MAX_TIME: Duration = Duration::from_secs(300);
/// The limits of every run but its time.
pub const LIMITS: Limits = Limits {
    time: DEFAULT_TIME,
    memory: 64 << 20,
    stack: 1 << 20,
    calls: 100,
    parallel: 8,
};
/// The bytes of result and logs an answer carries.
pub const OUTPUT_BUDGET: usize = 16 << 10;
/// Programs running at once in one controller (more wait for a turn):
/// bounds the memory all runs may take together.
const RUNS_AT_ONCE: usize = 8;
static RUNS: Semaphore = Semaphore::const_new(RUNS_AT_ONCE);

/// Tools `describe_tools` declares for a query unless it asks for more.
const DEFAULT_MATCHES: usize = 5;
const MAX_MATCHES: usize = 50;

/// The two tools' definitions; `run_code`'s names the servers of `union`.
pub fn tools(union: &Union) -> [Tool; 2] {
    let describe = Tool::new(
        DESCRIBE,
        "TypeScript declarations of this workspace's MCP tools, for run_code programs: each \
         tool's arguments and result types with their descriptions. Give names (server__tool), \
         a server, or a query (the best matches); with none, lists every server's tools.",
        schema(json!({
            "type": "object",
            "properties": {
                "names": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Tools by name (server__tool)."
                },
                "server": {"type": "string", "description": "Every tool of this MCP server."},
                "query": {
                    "type": "string",
                    "description": "What the tools should do, in plain words: the best matches."
                },
                "limit": {
                    "type": "integer", "minimum": 1, "maximum": MAX_MATCHES,
                    "description": format!("How many matches of a query (default {DEFAULT_MATCHES}).")
                }
            }
        })),
    )
    .annotate(
        ToolAnnotations::new()
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(false),
    );
    let servers = union.servers();
    let run = Tool::new(
        RUN,
        format!(
            "Run a JavaScript program (async, ES2023, not TypeScript; `return` gives the result) that calls this \
             workspace's MCP tools, so that their intermediate results stay out of your context. \
             In it: `await tools.SERVER.TOOL(args)` (names that are not identifiers as \
             `tools.SERVER[\"get-sum\"]`), `await callTool(\"server__tool\", args)`, \
             `await searchTools(\"what it should do\", limit?)`, `console.log(...)` (returned as \
             logs) and `await sleep(ms)`; nothing else (no fetch, files, require or timers). Results \
             come unwrapped: structured content as is, JSON text parsed, other text as a string. A \
             tool error throws a ToolError (.tool, .server); arguments that do not fit the tool's \
             input schema throw a TypeError before the call is sent. Get the types first with \
             describe_tools. Limits per run: {}s (timeoutMs up to {}), {} MiB, {} tool calls ({} at \
             once), {} KiB of result and logs. Answers {{result, logs, calls, error?}}. Servers: {}.",
            DEFAULT_TIME.as_secs(),
            MAX_TIME.as_millis(),
            LIMITS.memory >> 20,
            LIMITS.calls,
            LIMITS.parallel,
            OUTPUT_BUDGET >> 10,
            listed_or_none(&servers),
        ),
        schema(json!({
            "type": "object",
            "properties": {
                "code": {
                    "type": "string",
                    "description": "The body of an async function: use await, and return the result."
                },
                "timeoutMs": {
                    "type": "integer", "minimum": 1, "maximum": MAX_TIME.as_millis(),
                    "description": format!("Wall time of the run (default {}).", DEFAULT_TIME.as_millis())
                }
            },
            "required": ["code"]
        })),
    )
    .with_raw_output_schema(schema(json!({
        "type": "object",
        "properties": {
            "result": {"description": "What the program returned (null: nothing)."},
            "logs": {"type": "array", "items": {"type": "string"}},
            "calls": {"type": "integer", "description": "Tool calls the program made."},
            "error": {"type": "string", "description": "Why the program did not finish."},
            "truncated": {"type": "string", "description": "What was cut to fit the answer."}
        },
        "required": ["result", "logs", "calls"]
    })))
    .annotate(ToolAnnotations::new().read_only(false).open_world(true));
    [describe, run]
}

/// Change detection of the code tools' definitions (and `lsp`): the servers
/// `run_code`'s description names.
pub fn fingerprint(union: &Union) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    union.lsp.hash(&mut hasher);
    union.servers().hash(&mut hasher);
    hasher.finish()
}

fn error(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// `describe_tools`' arguments.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DescribeArgs {
    #[serde(default)]
    names: Option<Vec<String>>,
    #[serde(default)]
    server: Option<String>,
    #[serde(default)]
    query: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
}

/// Answer `describe_tools` over `union`.
pub fn describe(union: &Union, arguments: Option<JsonObject>) -> CallToolResult {
    let args: DescribeArgs = match serde_json::from_value(Value::Object(
        arguments.unwrap_or_default(),
    )) {
        Ok(args) => args,
        Err(e) => {
            return error(format!(
                "describe_tools takes {{\"names\"?: [\"server__tool\"], \"server\"?: \"name\", \"query\"?: \"...\", \"limit\"?: n}}: {e}"
            ));
        }
    };
    let routes: Vec<_> = union.tool_routes().collect();
    let servers = union.servers();
    let mut chosen: Vec<usize> = Vec::new();
    let mut missing = Vec::new();
    if let Some(server) = &args.server {
        if !servers.contains(server) {
            return error(format!(
                "no Ready server \"{server}\" has tools; the servers with tools are: {}",
                listed_or_none(&servers)
            ));
        }
        chosen.extend((0..routes.len()).filter(|&i| &routes[i].1.server == server));
    }
    for name in args.names.iter().flatten() {
        let found = routes
            .iter()
            .position(|(tool, _)| tool.name == name.as_str())
            .or_else(|| {
                // A tool's own name, when one server alone has it.
                let mut own = (0..routes.len()).filter(|&i| routes[i].1.original == *name);
                own.next().filter(|_| own.next().is_none())
            });
        match found {
            Some(i) => chosen.push(i),
            None => missing.push(name.clone()),
        }
    }
    if let Some(query) = args.query.as_deref().filter(|q| !q.trim().is_empty()) {
        let limit = args.limit.unwrap_or(DEFAULT_MATCHES).clamp(1, MAX_MATCHES);
        let index = union.index();
        for hit in index.search(query, limit, args.server.as_deref()) {
            if let Some(name) = index.exposed(hit.index)
                && let Some(i) = routes.iter().position(|(t, _)| t.name == name)
            {
                chosen.push(i);
            }
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    chosen.retain(|i| seen.insert(*i));
    if chosen.is_empty() && missing.is_empty() {
        return CallToolResult::success(vec![ContentBlock::text(overview(union, &args))]);
    }
    let decls: Vec<declare::ToolDecl<'_>> = chosen
        .iter()
        .map(|&i| {
            let (tool, route) = routes[i];
            declare::ToolDecl {
                server: &route.server,
                tool: &route.original,
                exposed: &tool.name,
                description: tool.description.as_deref(),
                input: &tool.input_schema,
                output: tool.output_schema.as_deref(),
            }
        })
        .collect();
    let mut text = if decls.is_empty() {
        String::new()
    } else {
        declare::declare(&decls)
    };
    if !missing.is_empty() {
        let known: Vec<&str> = routes.iter().map(|(t, _)| t.name.as_ref()).collect();
        for name in missing {
            let close = super::names::close_names(&name, known.iter().copied(), 3);
            text.push_str(&format!("// no tool \"{name}\""));
            if !close.is_empty() {
                text.push_str(&format!(" (did you mean: {})", close.join(", ")));
            }
            text.push('\n');
        }
    }
    CallToolResult::success(vec![ContentBlock::text(text)])
}

/// What `describe_tools` answers when asked for nothing in particular (or
/// a query that matched nothing): every server and its tools' names.
fn overview(union: &Union, args: &DescribeArgs) -> String {
    let mut by_server: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for (_, route) in union.tool_routes() {
        by_server
            .entry(route.server.as_str())
            .or_default()
            .push(route.original.as_str());
    }
    let mut text = String::new();
    if let Some(query) = &args.query {
        text.push_str(&format!("// no tool matches \"{query}\"\n"));
    }
    if by_server.is_empty() {
        text.push_str(
            "// no MCP server of this workspace is Ready with tools now; see `steward status`\n",
        );
        return text;
    }
    text.push_str(
        "// Every server's tools: describe_tools {\"server\": ...} or {\"names\": [...]} gives their types.\n",
    );
    for (server, tools) in by_server {
        text.push_str(&format!("// {server}: {}\n", tools.join(", ")));
    }
    text
}

/// `run_code`'s arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RunArgs {
    code: String,
    #[serde(default)]
    timeout_ms: Option<u64>,
}

/// Answer `run_code` for the client of `context`, its tools named as a
/// client with `max_name_len` names them.
pub async fn run(
    gateway: &Arc<Gateway>,
    max_name_len: usize,
    arguments: Option<JsonObject>,
    context: &RequestContext<RoleServer>,
    agent: &Arc<crate::gateway::agent::Agent>,
) -> CallToolResult {
    let args: RunArgs = match serde_json::from_value(Value::Object(arguments.unwrap_or_default())) {
        Ok(args) => args,
        Err(e) => {
            return error(format!(
                "run_code takes {{\"code\": \"...JavaScript...\", \"timeoutMs\"?: n}}: {e}"
            ));
        }
    };
    let time = args
        .timeout_ms
        .map_or(DEFAULT_TIME, Duration::from_millis)
        .clamp(Duration::from_millis(1), MAX_TIME);
    let limits = Limits { time, ..LIMITS };
    let span = trace::run_code_span(&context.id);
    trace::continue_from(&span, Some(&context.meta));
    // Ends with the run: inner calls still in flight then are cancelled.
    let run_ct = context.ct.child_token();
    let origin = Origin {
        agent: agent.clone(),
        peer: context.peer.clone(),
        ct: run_ct.clone(),
        // No progress token: the servers' progress is not relayed (it still
        // keeps an inner call from the idle timeout).
        meta: RequestMetaObject::default(),
        id: context.id.clone(),
        via: Via::Code,
        parent: Some(span.clone()),
        asks: None,
        capabilities: super::task_handles::without_tasks(
            context.client_capabilities().unwrap_or_default(),
        ),
    };
    let host = Arc::new(RunHost::new(gateway.clone(), max_name_len, origin));
    let began = std::time::Instant::now();
    let turn = tokio::select! {
        turn = RUNS.acquire() => turn.ok(),
        () = context.ct.cancelled() => None,
        () = tokio::time::sleep(time) => None,
    };
    let code = unfenced(&args.code).to_owned();
    let typescript = looks_like_typescript(&code);
    let mut outcome = match turn {
        Some(_turn) => {
            engine::run(code, limits, host, &context.ct)
                .instrument(span.clone())
                .await
        }
        None if context.ct.is_cancelled() => engine::Outcome {
            error: Some(Failure::Cancelled),
            ..Default::default()
        },
        None => engine::Outcome {
            error: Some(Failure::Engine(format!(
                "{RUNS_AT_ONCE} programs were running for the whole {} of this run; try again",
                humantime::format_duration(time)
            ))),
            ..Default::default()
        },
    };
    run_ct.cancel();
    if let Some(Failure::Thrown(error)) = &mut outcome.error
        && error.starts_with("SyntaxError")
        && typescript
    {
        error.push_str("\n(run_code runs JavaScript: leave out TypeScript's type annotations)");
    }
    trace::run_code_ended(
        &span,
        u64::from(outcome.calls),
        outcome.error.as_ref().map(Failure::kind),
    );
    tracing::debug!(
        calls = outcome.calls,
        ms = began.elapsed().as_millis() as u64,
        start_us = outcome.start.as_micros() as u64,
        error = outcome.error.as_ref().map(Failure::kind),
        "run_code"
    );
    let answer = output::report(&outcome, OUTPUT_BUDGET);
    let mut result = CallToolResult::success(vec![ContentBlock::text(answer.to_string())]);
    result.structured_content = Some(answer);
    result.is_error = Some(outcome.error.is_some());
    result
}

/// The program inside a Markdown code fence (```js ... ```), which agents
/// sometimes send; any other text as it is.
fn unfenced(code: &str) -> &str {
    let trimmed = code.trim();
    let Some(rest) = trimmed.strip_prefix("```") else {
        return code;
    };
    let Some(body) = rest.strip_suffix("```") else {
        return code;
    };
    // The fence's first line names the language.
    body.split_once('\n').map_or(body, |(_, body)| body)
}

/// Whether a program that did not compile looks like TypeScript (the
/// declarations `describe_tools` gives invite it).
fn looks_like_typescript(code: &str) -> bool {
    [
        ": string",
        ": number",
        ": boolean",
        ": any",
        ": unknown",
        ": Promise<",
        "interface ",
        " as const",
        "): ",
        "<T>",
    ]
    .iter()
    .any(|marker| code.contains(marker))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fenced_program_is_unfenced_and_typescript_is_recognized() {
        assert_eq!(unfenced("```js\nreturn 1;\n```"), "return 1;\n");
        assert_eq!(unfenced("  ```\nreturn 1;```  "), "return 1;");
        assert_eq!(unfenced("return `a`;"), "return `a`;");
        assert!(looks_like_typescript("const x: number = 1;"));
        assert!(!looks_like_typescript("const x = {a: 1};"));
    }
}

//! Scenario `code` of `steward-bench`: code mode (`--expose code`).
//!
//! One controller with two fakes whose tools have realistic definitions
//! (`list_issues`, `get_issue`, `echo`) and payloads (an issue summary is
//! about 450 bytes of JSON, an issue in full about 2.5 KB). rmcp clients
//! run `steward mcp` the way an agent does, one `--expose direct`, one
//! `--expose code`:
//! - the task "the five most discussed open critical issues, in detail":
//!   list 200 issues from `s000`, filter, fetch 5 from `s001`, aggregate.
//!   Direct: the agent makes each call and reads each answer; code mode:
//!   `describe_tools` for the two tools, then one `run_code`. The bytes
//!   through the agent's context are the JSON of every call's parameters
//!   and result as the client receives them; the listings (`tools/list`)
//!   are reported beside them;
//! - an inner call's latency (`performance.now()` around each call inside
//!   the program) against a direct call's through `steward mcp`, p50;
//! - engine start: a `run_code` of `return 1` against a `describe_tools` of
//!   one tool (the same hops, no engine), p50;
//! - `describe_tools` bytes per tool, beside the tools' JSON definitions.

use rmcp::model::{CallToolRequestParams, CallToolResult};

use super::gateway::{Client, lat_json, quiet, stdio_client_with};
use super::*;

/// The program an agent writes for the task.
const TASK: &str = r#"const issues = await tools.s000.list_issues({issues: 200});
const critical = issues
  .filter((i) => i.state === "open" && i.labels.includes("priority/critical"))
  .sort((a, b) => b.comments - a.comments)
  .slice(0, 5);
const details = await Promise.all(critical.map((i) => tools.s001.get_issue({issue: i.id})));
return details.map((d) => ({id: d.id, title: d.title, assignee: d.assignee,
  minutes: d.timeSpentMinutes, comments: d.comments.length}));"#;

/// The tools' definitions (as a tracker's MCP server describes them).
fn definitions() -> Value {
    json!({"tools": {
        "list_issues": {
            "description": "List the issues of the tracker, newest first, with their title, state, labels, author, assignee and an excerpt.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "issues": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "How many issues to list."},
                    "state": {"type": "string", "enum": ["open", "closed", "all"], "description": "Only issues in this state (default all)."},
                    "labels": {"type": "array", "items": {"type": "string"}, "description": "Only issues with every one of these labels."}
                },
                "required": ["issues"]
            }
        },
        "get_issue": {
            "description": "One issue in full: its body, comments and time spent.",
            "inputSchema": {
                "type": "object",
                "properties": {"issue": {"type": "integer", "description": "The issue's id."}},
                "required": ["issue"]
            }
        },
        "echo": {
            "description": "Echo the arguments back.",
            "inputSchema": {"type": "object", "properties": {"x": {"type": "number"}}}
        }
    }})
}

/// A call and the bytes it put through the agent's context (parameters
/// and result, as JSON).
async fn call(client: &Client, name: &str, arguments: Value) -> Result<(CallToolResult, usize)> {
    let Value::Object(arguments) = arguments else {
        bail!("arguments are an object")
    };
    let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
    let sent = serde_json::to_string(&params)?.len();
    let result = client.peer().call_tool(params).await?;
    let received = serde_json::to_string(&result)?.len();
    Ok((result, sent + received))
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The task done the direct way: the ids it found and the bytes.
async fn task_direct(client: &Client) -> Result<(Vec<u64>, usize, usize)> {
    let (listed, mut bytes) = call(client, "s000__list_issues", json!({"issues": 200})).await?;
    let issues: Vec<Value> = serde_json::from_str(&text(&listed))?;
    // What the agent does in its head, having read all 200.
    let mut critical: Vec<&Value> = issues
        .iter()
        .filter(|i| {
            i["state"] == "open"
                && i["labels"]
                    .as_array()
                    .is_some_and(|l| l.contains(&json!("priority/critical")))
        })
        .collect();
    critical.sort_by_key(|i| std::cmp::Reverse(i["comments"].as_u64().unwrap_or(0)));
    let mut ids = Vec::new();
    for issue in critical.iter().take(5) {
        let id = issue["id"].as_u64().unwrap_or(0);
        let (_, b) = call(client, "s001__get_issue", json!({"issue": id})).await?;
        bytes += b;
        ids.push(id);
    }
    let calls = 1 + ids.len();
    Ok((ids, bytes, calls))
}

/// The task in code mode: the ids the program returned and the bytes.
async fn task_code(client: &Client) -> Result<(Vec<u64>, usize, usize, Value)> {
    let (_, described) = call(
        client,
        "describe_tools",
        json!({"names": ["s000__list_issues", "s001__get_issue"]}),
    )
    .await?;
    let (result, ran) = call(client, "run_code", json!({"code": TASK})).await?;
    let answer = result.structured_content.clone().unwrap_or_default();
    if result.is_error == Some(true) {
        bail!("the task's program failed: {answer}");
    }
    let ids = answer["result"]
        .as_array()
        .map(|a| a.iter().filter_map(|d| d["id"].as_u64()).collect())
        .unwrap_or_default();
    Ok((ids, described + ran, 2, answer))
}

/// `run_code`'s structured answer to `code`.
async fn run(client: &Client, code: &str) -> Result<Value> {
    let (result, _) = call(client, "run_code", json!({"code": code})).await?;
    let answer = result.structured_content.clone().unwrap_or_default();
    if result.is_error == Some(true) {
        bail!("run_code failed: {answer}");
    }
    Ok(answer)
}

/// `n` sequential inner calls of `s000__echo`, each timed inside the
/// program; the durations in ms.
async fn inner_latencies(client: &Client, n: usize) -> Result<Vec<f64>> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        // At most 100 calls per run.
        let k = (n - out.len()).min(100);
        let code = format!(
            "const t = [];\n\
             for (let i = 0; i < {k}; i++) {{\n\
               const a = performance.now();\n\
               await tools.s000.echo({{x: i}});\n\
               t.push(Math.round((performance.now() - a) * 1000) / 1000);\n\
             }}\n\
             return t;"
        );
        let answer = run(client, &code).await?;
        let times = answer["result"]
            .as_array()
            .ok_or_else(|| anyhow!("no timings: {answer}"))?;
        out.extend(times.iter().filter_map(Value::as_f64));
    }
    Ok(out)
}

/// `n` timed calls of `name` with `arguments` (after `warm` untimed).
async fn timed(
    client: &Client,
    name: &str,
    arguments: Value,
    warm: usize,
    n: usize,
) -> Result<Vec<f64>> {
    let mut out = Vec::with_capacity(n);
    for i in 0..warm + n {
        let t = Instant::now();
        let (result, _) = call(client, name, arguments.clone()).await?;
        if result.is_error == Some(true) {
            bail!("{name} answered an error: {}", text(&result));
        }
        if i >= warm {
            out.push(ms(t.elapsed()));
        }
    }
    Ok(out)
}

pub(super) fn code(ctx: &Ctx) -> Result<(Value, serde_json::Map<String, Value>)> {
    let quick = ctx.opts.quick;
    let (warm, calls, runs) = if quick {
        (20, 200, 30)
    } else {
        (100, 2000, 300)
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let defs = tempfile::tempdir()?;
    let defs_file = defs.path().join("definitions.json");
    std::fs::write(&defs_file, definitions().to_string())?;
    let base = FakeMcpConfig {
        tools: vec!["list_issues".into(), "get_issue".into(), "echo".into()],
        definitions_file: Some(defs_file),
        ..FakeMcpConfig::default()
    };
    let r = start_steward_with(ctx, 2, true, &base, &[])?;
    let env = &r.sb.env;
    let mut out = serde_json::Map::new();
    let mut targets = serde_json::Map::new();
    rt.block_on(async {
        let direct = stdio_client_with(ctx, env, quiet(), &["--expose", "direct"]).await?;
        let code = stdio_client_with(ctx, env, quiet(), &["--expose", "code"]).await?;
        let listed_direct = serde_json::to_string(&direct.peer().list_all_tools().await?)?.len();
        let listed_code = serde_json::to_string(&code.peer().list_all_tools().await?)?.len();

        progress("code: the multi-step task, direct vs run_code");
        let (ids_direct, bytes_direct, calls_direct) = task_direct(&direct).await?;
        let (ids_code, bytes_code, calls_code, answer) = task_code(&code).await?;
        if ids_direct != ids_code || ids_code.len() != 5 {
            bail!("the two ways found different issues: {ids_direct:?} vs {ids_code:?}");
        }
        let ratio = bytes_direct as f64 / bytes_code as f64;
        out.insert(
            "task".into(),
            json!({
                "what": "list 200 issues (s000), keep the open critical ones, the 5 most discussed in full (s001), aggregate",
                "sameAnswer": true,
                "direct": {"bytes": bytes_direct, "toolCalls": calls_direct,
                           "agentTurnsAtLeast": 2, "listedToolsBytes": listed_direct},
                "code": {"bytes": bytes_code, "toolCalls": calls_code, "innerCalls": answer["calls"],
                         "agentTurnsAtLeast": 1, "listedToolsBytes": listed_code},
                "bytesRatio": r1(ratio),
            }),
        );
        targets.insert(
            "codeModeContextBytesRatio".into(),
            target(json!(r1(ratio)), ">= 10", Some(ratio >= 10.0)),
        );

        progress(format!("code: {calls} inner calls vs {calls} direct calls"));
        let direct_lat = timed(&direct, "s000__echo", json!({"x": 1}), warm, calls).await?;
        let inner_lat = inner_latencies(&code, calls).await?;
        let overhead = summarize(&inner_lat).p50 - summarize(&direct_lat).p50;
        out.insert(
            "innerCall".into(),
            json!({
                "directThroughStewardMcp": lat_json(&direct_lat),
                "innerFromRunCode": lat_json(&inner_lat),
                "overheadP50Ms": r3(overhead),
            }),
        );
        targets.insert(
            "codeModeInnerCallOverheadP50Ms".into(),
            target(json!(r3(overhead)), "<= 0.5", Some(overhead <= 0.5)),
        );

        progress(format!("code: engine start, {runs} runs"));
        let empty = timed(&code, "run_code", json!({"code": "return 1;"}), warm.min(20), runs).await?;
        let describe_one = timed(
            &code,
            "describe_tools",
            json!({"names": ["s000__echo"]}),
            warm.min(20),
            runs,
        )
        .await?;
        let start = summarize(&empty).p50 - summarize(&describe_one).p50;
        out.insert(
            "engineStart".into(),
            json!({
                "runCodeReturn1": lat_json(&empty),
                "describeToolsOfOneTool": lat_json(&describe_one),
                "startP50Ms": r3(start),
            }),
        );
        targets.insert(
            "codeModeEngineStartP50Ms".into(),
            target(json!(r3(start)), "<= 2", Some(start <= 2.0)),
        );

        let (declared, _) = call(&code, "describe_tools", json!({"server": "s000"})).await?;
        let declared = text(&declared).len();
        let definitions: usize = direct
            .peer()
            .list_all_tools()
            .await?
            .iter()
            .filter(|t| t.name.starts_with("s000__"))
            .map(|t| serde_json::to_string(t).map(|s| s.len()).unwrap_or(0))
            .sum();
        out.insert(
            "describeTools".into(),
            json!({
                "tools": 3,
                "bytesPerTool": declared / 3,
                "jsonDefinitionBytesPerTool": definitions / 3,
            }),
        );
        direct.cancel().await?;
        code.cancel().await?;
        Ok::<_, anyhow::Error>(())
    })?;
    out.insert("teardown".into(), r.finish());
    Ok((Value::Object(out), targets))
}

//! Envtest: code mode (`steward mcp --expose direct,code`). Programs an
//! agent would write run through `run_code` from the real clients agents
//! use (the PyPI `mcp` SDK, the TypeScript SDK) against the real
//! `server-everything` and `mcp-server-time`, and against the fake server
//! for what only it can show (what reached the server, restarts, faults).
//! `describe_tools`' declarations compile with the pinned `tsc`. Every wait
//! is a condition with a deadline.

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use steward_tests::fake_mcp::{Definitions, FakeMcpConfig, read_record};
use steward_tests::harness::{
    Controller, Env, fake_tools as tools, pid_of, ready, wait_until, with_version,
};

use crate::common;
use crate::metrics::{http_get, metrics_addr};
use crate::real_clients::{
    CLIENT_DEADLINE, PyClient, everything, http_url, output_within, steward_mcp_argv, text_of,
};

/// `steward mcp --expose direct,code`, as an agent registers it.
fn code_argv(env: &Env) -> Vec<String> {
    let mut argv = steward_mcp_argv(env);
    argv.extend(["--expose".to_owned(), "direct,code".to_owned()]);
    argv
}

/// A controller with one fake server `name` offering `offered`, Ready.
fn one_fake(name: &str, offered: &[&str]) -> (Env, Controller) {
    let env = Env::new();
    env.user_mcp_servers(&[(name, env.fake_mcp(name, tools(offered)))]);
    let c = env.start(&[]);
    c.wait_for(&format!("{name} Ready"), |s| ready(s, name));
    (env, c)
}

/// `run_code`'s answer (its `structuredContent`) and whether it is an error.
fn run_code(client: &mut PyClient, code: &str) -> (Value, bool) {
    run_code_with(client, json!({"code": code}))
}

fn run_code_with(client: &mut PyClient, arguments: Value) -> (Value, bool) {
    let (result, _) = client.call("run_code", arguments);
    let answer = result["structuredContent"].clone();
    assert!(answer.is_object(), "no structured answer: {result}");
    // The text is the same answer, for clients that read only text.
    let text: Value = serde_json::from_str(&text_of(&result)).expect("the text is JSON");
    assert_eq!(text, answer);
    (answer, result["isError"] == json!(true))
}

fn describe(client: &mut PyClient, arguments: Value) -> String {
    let (result, _) = client.call("describe_tools", arguments);
    assert_ne!(result["isError"], json!(true), "{result}");
    text_of(&result)
}

fn time_server() -> Value {
    let time = common::peer("mcp-server-time", "venv/bin/mcp-server-time");
    json!({"command": time.to_string_lossy()})
}

/// What an agent writes for "the time in Tokyo and a sum, in one go".
const AGGREGATE: &str = r#"
const echoed = await tools.everything.echo({message: "hello from code"});
const sum = await tools.everything["get-sum"]({a: 19, b: 23});
const tokyo = await tools.time.get_current_time({timezone: "Asia/Tokyo"});
const converted = await callTool("time__convert_time",
  {source_timezone: "Europe/Paris", time: "12:00", target_timezone: "Asia/Tokyo"});
const found = await searchTools("current time in a timezone", 1);
console.log("tokyo is", tokyo.timezone);
return {echoed, sum, zone: tokyo.timezone, target: converted.target.timezone,
        found: found[0].name, servers: Object.keys(tools)};
"#;

fn check_aggregate(answer: &Value) {
    let result = &answer["result"];
    assert_eq!(result["echoed"], "Echo: hello from code", "{answer}");
    assert!(
        result["sum"].as_str().unwrap_or_default().contains("42"),
        "{answer}"
    );
    assert_eq!(
        result["zone"], "Asia/Tokyo",
        "structured content as is: {answer}"
    );
    assert_eq!(result["target"], "Asia/Tokyo", "{answer}");
    assert_eq!(result["found"], "time__get_current_time", "{answer}");
    assert_eq!(result["servers"], json!(["everything", "time"]), "{answer}");
    assert_eq!(answer["logs"], json!(["tokyo is Asia/Tokyo"]));
    assert_eq!(answer["calls"], 4);
    assert!(answer.get("error").is_none(), "{answer}");
}

#[test]
fn the_pypi_client_runs_a_program_over_everything_and_time_counted_as_code_calls() {
    let env = Env::new();
    env.user_mcp_servers(&[("everything", everything()), ("time", time_server())]);
    let c = env.start(&["--metrics-listen", "127.0.0.1:0"]);
    c.wait_for_within("everything and time Ready", CLIENT_DEADLINE, |s| {
        ready(s, "everything") && ready(s, "time")
    });
    let mut client = PyClient::stdio(&env, &code_argv(&env));
    let names = client.tool_names();
    for wanted in [
        "describe_tools",
        "run_code",
        "everything__echo",
        "time__get_current_time",
    ] {
        assert!(
            names.iter().any(|n| n == wanted),
            "{wanted} listed: {names:?}"
        );
    }
    let listed = client.list("list_tools");
    let run = listed.iter().find(|t| t["name"] == "run_code").unwrap();
    let description = run["description"].as_str().unwrap();
    assert!(
        description.contains("Servers: everything, time."),
        "{description}"
    );
    assert!(
        description.len() < 2048,
        "small: {} bytes",
        description.len()
    );

    let (answer, failed) = run_code(&mut client, AGGREGATE);
    assert!(!failed, "{answer}");
    check_aggregate(&answer);

    // Counted as calls of their servers, via code.
    let addr = metrics_addr(&|| c.log_text());
    let (_, _, body) = http_get(&addr, "/metrics", &[]);
    for series in [
        r#"steward_tool_calls_total{server="everything",via="code",result="ok"} 2"#,
        r#"steward_tool_calls_total{server="time",via="code",result="ok"} 2"#,
    ] {
        assert!(body.contains(series), "{series} in\n{body}");
    }
    let s = c.status();
    let calls = steward_tests::harness::mcp(&s, "everything")
        .and_then(|m| m.status.calls)
        .expect("status.calls");
    assert_eq!((calls.total, calls.failed), (2, 0));
    client.close();
}

#[test]
fn the_typescript_client_runs_the_program_and_describe_tools_compiles_with_tsc() {
    let env = Env::new();
    env.user_mcp_servers(&[("everything", everything()), ("time", time_server())]);
    let c = env.start(&[]);
    c.wait_for_within("everything and time Ready", CLIENT_DEADLINE, |s| {
        ready(s, "everything") && ready(s, "time")
    });
    // The TypeScript SDK checks structuredContent against run_code's outputSchema.
    let mut client = PyClient::typescript(&env, &code_argv(&env));
    let (answer, failed) = run_code(&mut client, AGGREGATE);
    assert!(!failed, "{answer}");
    check_aggregate(&answer);

    let declarations = describe(&mut client, json!({"server": "everything"}));
    let everything_tools = client
        .tool_names()
        .into_iter()
        .filter(|n| n.starts_with("everything__"))
        .count();
    assert!(
        everything_tools >= 10,
        "server-everything's tools: {everything_tools}"
    );
    assert_eq!(
        declarations.matches("(args: ").count() + declarations.matches("(args?: ").count(),
        everything_tools,
        "one method per tool:\n{declarations}"
    );
    assert!(
        declarations.contains("interface EverythingGetSumArgs"),
        "{declarations}"
    );
    let time = describe(&mut client, json!({"names": ["time__get_current_time"]}));
    assert!(
        time.contains("interface TimeGetCurrentTimeResult"),
        "output schema typed:\n{time}"
    );

    // Both files together, and a program typed against them, compile.
    let dir = env.root.path().join("tsc");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("everything.d.ts"), &declarations).unwrap();
    std::fs::write(dir.join("time.d.ts"), &time).unwrap();
    std::fs::write(
        dir.join("program.ts"),
        "async function main() {\n\
         const sum = await tools.everything[\"get-sum\"]({a: 1, b: 2});\n\
         const now = await tools.time.get_current_time({timezone: \"Asia/Tokyo\"});\n\
         const zone: string = now.timezone;\n\
         return [sum, zone];\n\
         }\nexport {};\n",
    )
    .unwrap();
    let tsc = common::peer("typescript", "node_modules/.bin/tsc");
    let mut command = Command::new(tsc);
    command.current_dir(&dir).args([
        "--noEmit",
        "--strict",
        "--target",
        "es2022",
        "--lib",
        "es2022",
        "everything.d.ts",
        "time.d.ts",
        "program.ts",
    ]);
    let out = output_within(command, CLIENT_DEADLINE);
    assert!(
        out.status.success(),
        "tsc:\n{}{}\n{declarations}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // A program that passes the wrong type does not compile.
    std::fs::write(
        dir.join("program.ts"),
        "tools.everything[\"get-sum\"]({a: \"1\", b: 2});\nexport {};\n",
    )
    .unwrap();
    let mut command = Command::new(common::peer("typescript", "node_modules/.bin/tsc"));
    command
        .current_dir(&dir)
        .args(["--noEmit", "--strict", "everything.d.ts", "program.ts"]);
    let out = output_within(command, CLIENT_DEADLINE);
    assert!(!out.status.success(), "a string for a number is refused");
    client.close();
}

#[test]
fn an_http_client_asks_for_code_mode_in_the_query_string() {
    let env = Env::new();
    env.user_mcp_servers(&[("alpha", env.fake_mcp("alpha", tools(&["t1"])))]);
    let c = env.start(&["--mcp-listen", "127.0.0.1:0"]);
    let s = c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    let mut client = PyClient::http(&env, &format!("{}?expose=code", http_url(&s)), &[]);
    let mut names = client.tool_names();
    names.sort();
    assert_eq!(names, ["describe_tools", "run_code"]);
    let (answer, failed) = run_code(&mut client, "return await tools.alpha.t1({via: 'http'});");
    assert!(!failed, "{answer}");
    assert_eq!(answer["result"], json!({"via": "http"}));
    let sessions = c.status().controller.gateway.unwrap().sessions;
    assert_eq!(sessions[0].expose, "code", "{sessions:?}");
    client.close();
}

/// A fake server whose tools have these input schemas.
fn typed_fake(env: &Env, name: &str, schemas: Value) -> Value {
    let path = env.root.path().join(format!("{name}-definitions.json"));
    let mut definitions = Definitions::default();
    for (tool, schema) in schemas.as_object().unwrap() {
        let mut fields = serde_json::Map::new();
        fields.insert("inputSchema".into(), schema.clone());
        definitions.tools.insert(tool.clone(), fields);
    }
    std::fs::write(&path, serde_json::to_string(&definitions).unwrap()).unwrap();
    let names: Vec<&str> = schemas
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    env.fake_mcp(
        name,
        FakeMcpConfig {
            definitions_file: Some(path),
            ..tools(&names)
        },
    )
}

/// The `tools/call`s `name`'s fake received, their arguments.
fn calls_received(env: &Env, name: &str) -> Vec<Value> {
    read_record(&env.record(name))
        .unwrap_or_default()
        .iter()
        .filter(|e| e.event == "recv" && e.method() == Some("tools/call"))
        .filter_map(|e| e.message.pointer("/params/arguments").cloned())
        .collect()
}

#[test]
fn tool_errors_and_invalid_arguments_throw_and_invalid_calls_are_never_sent() {
    let env = Env::new();
    let alpha = typed_fake(
        &env,
        "alpha",
        json!({
            "count": {
                "type": "object",
                "properties": {"n": {"type": "integer"}, "label": {"type": "string"}},
                "required": ["n"]
            },
            "fail": {"type": "object"}
        }),
    );
    env.user_mcp_servers(&[("alpha", alpha)]);
    let c = env.start(&[]);
    c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    let mut client = PyClient::stdio(&env, &code_argv(&env));
    let (answer, failed) = run_code(
        &mut client,
        r#"
        const caught = {};
        try { await tools.alpha.fail({isError: true, why: "disk full"}); }
        catch (e) { caught.tool = {name: e.name, isToolError: e instanceof ToolError,
                                   tool: e.tool, server: e.server, message: e.message}; }
        try { await tools.alpha.count({n: "3", label: 7}); }
        catch (e) { caught.invalid = {name: e.name, message: e.message}; }
        const fine = await tools.alpha.count({n: 3});
        return {caught, fine};
        "#,
    );
    assert!(!failed, "{answer}");
    let caught = &answer["result"]["caught"];
    assert_eq!(caught["tool"]["name"], "ToolError", "{answer}");
    assert_eq!(caught["tool"]["isToolError"], true);
    assert_eq!(caught["tool"]["tool"], "fail");
    assert_eq!(caught["tool"]["server"], "alpha");
    assert!(
        caught["tool"]["message"]
            .as_str()
            .unwrap()
            .contains("disk full"),
        "{answer}"
    );
    assert_eq!(caught["invalid"]["name"], "TypeError", "{answer}");
    let message = caught["invalid"]["message"].as_str().unwrap();
    for part in [
        "tools.alpha.count",
        "/n",
        "/label",
        "not sent",
        "Expected {label?: string; n: number}",
    ] {
        assert!(message.contains(part), "{part} in {message}");
    }
    assert_eq!(answer["result"]["fine"], json!({"n": 3}));
    // The invalid call never reached the server; the others did.
    let received = calls_received(&env, "alpha");
    assert_eq!(received.len(), 2, "{received:?}");
    assert!(received.iter().all(|a| a["n"] != "3"), "{received:?}");

    // Uncaught, a tool error ends the run as an error with the program's line.
    let (answer, failed) = run_code(
        &mut client,
        "const x = 1;\nawait tools.alpha.fail({isError: true});",
    );
    assert!(failed, "{answer}");
    let error = answer["error"].as_str().unwrap();
    assert!(error.starts_with("ToolError: "), "{error}");
    assert!(error.contains("program.js:2"), "{error}");
    client.close();
}

#[test]
fn promise_all_runs_eight_calls_at_once_and_no_more() {
    let (env, _c) = one_fake("slow", &["work"]);
    let mut client = PyClient::stdio(&env, &code_argv(&env));
    let (answer, failed) = run_code(
        &mut client,
        r#"
        const timed = async (n) => {
          const t = Date.now();
          await Promise.all(Array.from({length: n}, (_, i) => tools.slow.work({i, sleepMs: 400})));
          return Date.now() - t;
        };
        return {eight: await timed(8), sixteen: await timed(16)};
        "#,
    );
    assert!(!failed, "{answer}");
    let eight = answer["result"]["eight"].as_u64().unwrap();
    let sixteen = answer["result"]["sixteen"].as_u64().unwrap();
    // Eight at once: one 400 ms wave (not eight); sixteen: two waves.
    assert!(eight < 1600, "8 calls of 400 ms at once took {eight} ms");
    assert!(sixteen >= 800, "16 calls, 8 at a time, took {sixteen} ms");
    assert_eq!(answer["calls"], 24);
    assert_eq!(calls_received(&env, "slow").len(), 24);
    client.close();
}

#[test]
fn a_server_added_mid_session_is_reachable_and_a_quarantined_tool_is_absent() {
    let env = Env::new();
    let alpha = env.fake_mcp(
        "alpha",
        FakeMcpConfig {
            list_changed_after_ms: Some(300),
            tools_after_change: Some(vec!["old".into(), "new1".into()]),
            ..tools(&["old"])
        },
    );
    env.user_mcp_servers(&[("alpha", alpha.clone())]);
    let c = env.start(&[]);
    c.wait_for("new1 quarantined", |s| {
        steward_tests::harness::mcp(s, "alpha")
            .is_some_and(|m| m.status.tools_quarantined.iter().any(|q| q.name == "new1"))
    });
    let mut client = PyClient::stdio(&env, &code_argv(&env));
    let (answer, _) = run_code(
        &mut client,
        r#"
        let refused;
        try { await tools.alpha.new1({}); } catch (e) { refused = e.message; }
        return {servers: Object.keys(tools), alpha: Object.keys(tools.alpha),
                has: "new1" in tools.alpha, found: (await searchTools("new1", 5)).map((t) => t.name),
                refused};
        "#,
    );
    let result = &answer["result"];
    assert_eq!(result["servers"], json!(["alpha"]), "{answer}");
    assert_eq!(result["alpha"], json!(["old"]), "{answer}");
    assert_eq!(result["has"], false);
    assert!(
        !result["found"]
            .as_array()
            .unwrap()
            .contains(&json!("alpha__new1"))
    );
    let refused = result["refused"].as_str().unwrap();
    assert!(
        refused.contains("steward approve alpha --tools"),
        "{refused}"
    );
    let described = describe(&mut client, json!({"names": ["alpha__new1"]}));
    assert!(
        described.contains("// no tool \"alpha__new1\""),
        "{described}"
    );
    assert!(
        !calls_received(&env, "alpha").iter().any(|_| true),
        "nothing was sent"
    );

    // A server added after the client connected: reachable, no re-list.
    env.user_mcp_servers(&[
        ("alpha", alpha),
        ("beta", env.fake_mcp("beta", tools(&["b1"]))),
    ]);
    c.wait_for("beta Ready", |s| ready(s, "beta"));
    let (answer, failed) = run_code(
        &mut client,
        "return {servers: Object.keys(tools), b1: await tools.beta.b1({x: 1})};",
    );
    assert!(!failed, "{answer}");
    assert_eq!(answer["result"]["servers"], json!(["alpha", "beta"]));
    assert_eq!(answer["result"]["b1"], json!({"x": 1}));
    client.close();
}

#[test]
fn a_program_waits_for_a_server_that_restarts_under_it() {
    let env = Env::new();
    let alpha = env.fake_mcp("alpha", tools(&["t1"]));
    env.user_mcp_servers(&[("alpha", alpha.clone())]);
    let c = env.start(&[]);
    let s = c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    let first = pid_of(&s, "alpha").unwrap();
    let mut client = PyClient::stdio(&env, &code_argv(&env));
    // Calls until it has seen two processes.
    let program = r#"
        const pids = [];
        for (let i = 0; i < 400; i++) {
          const {pid} = await tools.alpha.t1({reportPid: true});
          if (!pids.includes(pid)) pids.push(pid);
          if (pids.length === 2) break;
          await sleep(25);
        }
        return pids;
    "#;
    let running = thread::spawn(move || {
        let answer = run_code_with(&mut client, json!({"code": program, "timeoutMs": 60000}));
        (answer, client)
    });
    wait_until("the program's first call", || {
        !calls_received(&env, "alpha").is_empty()
    });
    env.user_mcp_servers(&[("alpha", with_version(&alpha, "2"))]);
    let ((answer, failed), client) = running.join().unwrap();
    assert!(!failed, "{answer}");
    let pids = answer["result"].as_array().unwrap();
    assert_eq!(pids.len(), 2, "{answer}");
    assert_eq!(pids[0], json!(first));
    let s = c.status();
    assert_eq!(pids[1], json!(pid_of(&s, "alpha").unwrap()));
    assert_eq!(
        steward_tests::harness::mcp(&s, "alpha")
            .unwrap()
            .status
            .calls
            .unwrap()
            .failed,
        0,
        "no call failed across the restart"
    );
    client.close();
}

/// p50 and max of `n` direct calls of `alpha__t1` by `client`.
fn direct_latencies(client: &mut PyClient, n: usize) -> (Duration, Duration) {
    let mut took: Vec<Duration> = (0..n)
        .map(|i| {
            let t = Instant::now();
            let (result, _) = client.call("alpha__t1", json!({"i": i}));
            assert_eq!(result["isError"], json!(false), "{result}");
            t.elapsed()
        })
        .collect();
    took.sort();
    (took[n / 2], took[n - 1])
}

#[test]
fn a_busy_loop_and_a_memory_bomb_end_with_errors_while_another_client_is_served() {
    let (env, c) = one_fake("alpha", &["t1"]);
    let mut direct = PyClient::stdio(&env, &steward_mcp_argv(&env));
    let (usual, _) = direct_latencies(&mut direct, 20);
    let mut coder = PyClient::stdio(&env, &code_argv(&env));
    for (program, timeout, error) in [
        (
            "while (true) {}",
            4000,
            "ran out of time: it was stopped after 4s",
        ),
        (
            "const all = []; for (;;) all.push({n: all.length, s: 'x' + all.length});",
            30000,
            "ran out of memory: its limit is 64 MiB",
        ),
        (
            "const f = (n) => f(n + 1) + 1; return f(0);",
            30000,
            "ran out of stack",
        ),
    ] {
        let began = Instant::now();
        let running = thread::spawn(move || {
            let answer = run_code_with(&mut coder, json!({"code": program, "timeoutMs": timeout}));
            (answer, coder)
        });
        // Meanwhile the other client's direct calls are answered as usual.
        let mut during = Vec::new();
        while !running.is_finished() {
            let (p50, max) = direct_latencies(&mut direct, 5);
            during.push((p50, max));
        }
        let ((answer, failed), back) = running.join().unwrap();
        coder = back;
        assert!(failed, "{answer}");
        let message = answer["error"].as_str().unwrap();
        assert!(message.contains(error), "{program}: {message}");
        assert!(
            began.elapsed() < Duration::from_millis(timeout + 5000),
            "{program} ended in {:?}",
            began.elapsed()
        );
        // Were the engine on a thread that serves calls, they would wait for
        // the whole run (4 s and more); a loaded CI machine gets some slack.
        for (p50, max) in during {
            assert!(
                p50 < usual + Duration::from_millis(200) && max < Duration::from_secs(2),
                "{program}: direct calls took p50 {p50:?} (usually {usual:?}), max {max:?}"
            );
        }
    }
    // The controller is fine and so is code mode.
    let (answer, failed) = run_code(&mut coder, "return (await tools.alpha.t1({ok: 1})).ok;");
    assert!(!failed, "{answer}");
    assert_eq!(answer["result"], 1);
    assert!(c.try_status().is_some(), "the controller still answers");
    coder.close();
    direct.close();
}

#[test]
fn the_answer_is_capped_saying_what_was_cut() {
    let (env, _c) = one_fake("alpha", &["t1"]);
    let mut client = PyClient::stdio(&env, &code_argv(&env));
    let (answer, failed) = run_code(
        &mut client,
        r#"
        const issues = await tools.alpha.t1({issues: 200});
        for (const issue of issues) console.log(issue.title);
        return issues;
        "#,
    );
    assert!(!failed, "{answer}");
    let result = answer["result"].as_str().expect("cut to a string");
    assert!(result.starts_with("[{\"assignee\""), "{result:.80}");
    let logs = answer["logs"].as_array().unwrap();
    let size = result.len() + logs.iter().map(|l| l.to_string().len() + 1).sum::<usize>();
    assert!(size <= 16 << 10, "{size} bytes");
    assert!(!logs.is_empty() && logs.len() < 200, "{}", logs.len());
    let truncated = answer["truncated"].as_str().unwrap();
    assert!(truncated.contains("the result was"), "{truncated}");
    assert!(truncated.contains("of 200 log lines"), "{truncated}");
    client.close();
}

#[test]
fn cancelling_run_code_cancels_its_slow_inner_call() {
    use rmcp::ServiceExt as _;
    use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};

    let (env, _c) = one_fake("slow", &["work"]);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let command = tokio::process::Command::from(env.command(&["mcp", "--expose", "code"]));
            let (transport, _) = rmcp::transport::TokioChildProcess::builder(command)
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let client = ().serve(transport).await.expect("initialize");
            let Value::Object(arguments) =
                json!({"code": "return await tools.slow.work({sleepMs: 60000});"})
            else {
                unreachable!()
            };
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(
                CallToolRequestParams::new("run_code").with_arguments(arguments),
            ));
            let handle = client
                .peer()
                .send_cancellable_request(request, rmcp::service::PeerRequestOptions::no_options())
                .await
                .unwrap();
            steward_tests::harness::wait_until_async(
                "the inner call reached the server",
                async || !calls_received(&env, "slow").is_empty(),
            )
            .await;
            handle
                .cancel(Some("the user gave up".into()))
                .await
                .unwrap();
            steward_tests::harness::wait_until_async(
                "the server got notifications/cancelled",
                async || {
                    read_record(&env.record("slow"))
                        .unwrap()
                        .iter()
                        .any(|e| e.event == "recv" && e.method() == Some("notifications/cancelled"))
                },
            )
            .await;
            client.cancel().await.unwrap();
        });
}

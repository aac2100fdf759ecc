//! Envtest: what each agent client is shown — `--expose direct|search`
//! (tool search: `search_tools` / `call_tool`) and `--max-name-len` — over
//! every way a client reaches the endpoint: `steward mcp` handing its stdio
//! to a running controller, a raw socket client announcing its view, and
//! `steward mcp` as the controller itself. rmcp clients play the agent;
//! waits are conditions with deadlines.

use std::process::Stdio;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt as _};
use serde_json::{Value, json};
use steward_tests::fake_mcp::FakeMcpConfig;
use steward_tests::harness::{Env, fake_tools as tools, ready, wait_until_async};

type Client = RunningService<RoleClient, ()>;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// `steward mcp ARGS` as a child process, the way an agent runs it.
async fn spawn_mcp(env: &Env, args: &[&str]) -> Client {
    let mut all = vec!["mcp"];
    all.extend_from_slice(args);
    let command = tokio::process::Command::from(env.command(&all));
    let stderr = env
        .root
        .path()
        .join(format!("mcp-{}.stderr", args.join("_")));
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(Stdio::from(std::fs::File::create(stderr).unwrap()))
        .spawn()
        .expect("spawn steward mcp");
    ().serve(transport).await.expect("initialize")
}

async fn tool_names(client: &Client) -> Vec<String> {
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.into_owned())
        .collect();
    names.sort();
    names
}

async fn call(client: &Client, name: &str, arguments: Value) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object")
    };
    client
        .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(arguments))
        .await
        .unwrap_or_else(|e| panic!("call {name}: {e}"))
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The names `search_tools` returned for `query`.
async fn search(client: &Client, query: &str) -> Vec<String> {
    let result = call(client, "search_tools", json!({ "query": query })).await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let body: Value = serde_json::from_str(&text(&result)).unwrap_or(json!({"tools": []}));
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            assert!(
                t["inputSchema"].is_object(),
                "a hit carries its schema: {t}"
            );
            t["name"].as_str().unwrap().to_owned()
        })
        .collect()
}

#[test]
fn search_mode_lists_two_tools_finds_tools_by_plain_words_and_reaches_a_server_added_later() {
    let env = Env::new();
    let weather = env.fake_mcp("weather", tools(&["get_forecast", "list_alerts"]));
    let mail = env.fake_mcp("mail", tools(&["send_email", "read_inbox"]));
    env.user_mcp_servers(&[("weather", weather.clone()), ("mail", mail.clone())]);
    let c = env.start(&[]);
    c.wait_for("both Ready", |s| ready(s, "weather") && ready(s, "mail"));
    runtime().block_on(async {
        let agent = spawn_mcp(&env, &["--expose", "search"]).await;
        assert_eq!(tool_names(&agent).await, ["call_tool", "search_tools"]);
        let found = search(&agent, "forecast for tomorrow").await;
        assert_eq!(
            found.first().map(String::as_str),
            Some("weather__get_forecast")
        );
        let found = search(&agent, "send an email").await;
        assert_eq!(found.first().map(String::as_str), Some("mail__send_email"));
        // Only one server's tools when asked.
        let result = call(
            &agent,
            "search_tools",
            json!({"query": "email inbox alerts forecast", "server": "mail", "limit": 10}),
        )
        .await;
        assert!(!text(&result).contains("weather__"), "{}", text(&result));
        let result = call(
            &agent,
            "call_tool",
            json!({"name": "mail__send_email", "arguments": {"to": "ana"}}),
        )
        .await;
        assert_eq!(result.is_error, Some(false));
        assert_eq!(text(&result), r#"{"to":"ana"}"#);

        // A server added after the agent connected: found and called with
        // no re-list.
        let calendar = env.fake_mcp("calendar", tools(&["create_event"]));
        env.user_mcp_servers(&[("weather", weather), ("mail", mail), ("calendar", calendar)]);
        wait_until_async("the new server is found", async || {
            search(&agent, "create a calendar event")
                .await
                .first()
                .map(String::as_str)
                == Some("calendar__create_event")
        })
        .await;
        let result = call(
            &agent,
            "call_tool",
            json!({"name": "calendar__create_event", "arguments": {"at": "9:00"}}),
        )
        .await;
        assert_eq!(text(&result), r#"{"at":"9:00"}"#);
        // The list it saw is still the two tools.
        assert_eq!(tool_names(&agent).await, ["call_tool", "search_tools"]);

        // Mistakes say what to do.
        let result = call(&agent, "call_tool", json!({"arguments": {}})).await;
        assert_eq!(result.is_error, Some(true));
        assert!(
            text(&result).contains("call_tool needs"),
            "{}",
            text(&result)
        );
        let result = call(
            &agent,
            "search_tools",
            json!({"query": "x", "server": "nope"}),
        )
        .await;
        assert!(
            text(&result).contains("calendar, mail, weather"),
            "{}",
            text(&result)
        );

        let s = tokio::task::block_in_place(|| c.status());
        let sessions = s.controller.gateway.unwrap().sessions;
        assert_eq!(sessions.len(), 1, "{sessions:?}");
        assert_eq!(
            (sessions[0].transport.as_str(), sessions[0].expose.as_str()),
            ("unix", "search")
        );
        agent.cancel().await.unwrap();
    });
}

#[test]
fn direct_and_search_lists_everything_plus_the_search_tools() {
    let env = Env::new();
    env.user_mcp_servers(&[("alpha", env.fake_mcp("alpha", tools(&["echo"])))]);
    // `steward mcp` as the controller itself serves its own stdio with the view.
    runtime().block_on(async {
        let agent = spawn_mcp(&env, &["--expose", "direct,search"]).await;
        wait_until_async("alpha listed", async || {
            tool_names(&agent).await == ["alpha__echo", "call_tool", "search_tools"]
        })
        .await;
        let found = search(&agent, "echo").await;
        assert_eq!(found, ["alpha__echo"]);
        agent.cancel().await.unwrap();
    });
}

#[test]
fn a_name_limit_shortens_names_with_stable_suffixes_and_calls_still_reach_them() {
    let env = Env::new();
    let long_a = "summarize_the_repository_history_a";
    let long_b = "summarize_the_repository_history_b";
    env.user_mcp_servers(&[(
        "git-helper",
        env.fake_mcp("git-helper", tools(&[long_a, long_b, "log"])),
    )]);
    let c = env.start(&[]);
    c.wait_for("Ready", |s| ready(s, "git-helper"));
    runtime().block_on(async {
        let short = spawn_mcp(&env, &["--max-name-len", "30"]).await;
        let full = spawn_mcp(&env, &[]).await;
        let names = tool_names(&short).await;
        assert_eq!(names.len(), 3, "{names:?}");
        assert!(names.iter().all(|n| n.len() <= 30), "{names:?}");
        assert!(names.contains(&"git-helper__log".to_owned()), "{names:?}");
        let suffixed: Vec<&String> = names.iter().filter(|n| n.len() == 30).collect();
        assert_eq!(
            suffixed.len(),
            2,
            "the two that collide get suffixes: {names:?}"
        );
        assert_ne!(suffixed[0], suffixed[1]);
        for name in suffixed {
            let result = call(&short, name, json!({"n": name})).await;
            assert_eq!(result.is_error, Some(false), "{}", text(&result));
        }
        // Another client at the same time keeps the full names.
        let names = tool_names(&full).await;
        assert!(
            names.contains(&format!("git-helper__{long_a}")),
            "{names:?}"
        );
        let s = tokio::task::block_in_place(|| c.status());
        let mut lens: Vec<u64> = s
            .controller
            .gateway
            .unwrap()
            .sessions
            .iter()
            .map(|s| s.max_name_len)
            .collect();
        lens.sort();
        assert_eq!(lens, [30, 64]);
        short.cancel().await.unwrap();
        full.cancel().await.unwrap();
    });
}

#[test]
fn a_socket_client_announces_its_view_in_a_hello_line() {
    let env = Env::new();
    env.user_mcp_servers(&[("alpha", env.fake_mcp("alpha", tools(&["echo"])))]);
    let c = env.start(&[]);
    c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    runtime().block_on(async {
        let mut stream = tokio::net::UnixStream::connect(env.paths().mcp_socket_path())
            .await
            .unwrap();
        // What `steward mcp` sends before bridging bytes it cannot hand over.
        let mut hello = vec![0xF1];
        hello.extend_from_slice(br#"{"expose":"search"}"#);
        hello.push(b'\n');
        tokio::io::AsyncWriteExt::write_all(&mut stream, &hello)
            .await
            .unwrap();
        let (read, write) = stream.into_split();
        let agent = ().serve((read, write)).await.expect("initialize");
        assert_eq!(tool_names(&agent).await, ["call_tool", "search_tools"]);
        assert_eq!(search(&agent, "echo").await, ["alpha__echo"]);
        agent.cancel().await.unwrap();
    });
}

#[test]
fn steward_mcp_refuses_an_unknown_view_with_what_to_use() {
    let env = Env::new();
    let out = env
        .command(&["mcp", "--expose", "everything"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("use direct, search, code"), "{err}");
    let out = env
        .command(&["mcp", "--max-name-len", "8"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("from 16 to 128"), "{err}");
}

#[test]
fn the_servers_instructions_are_combined_within_two_kilobytes_and_readable_whole() {
    let env = Env::new();
    let short = FakeMcpConfig {
        instructions: Some("Use alpha for echoes.".into()),
        ..tools(&["echo"])
    };
    let long_text = "Always ask before deleting anything. ".repeat(200);
    let long = FakeMcpConfig {
        instructions: Some(long_text.clone()),
        ..tools(&["delete"])
    };
    env.user_mcp_servers(&[
        ("alpha", env.fake_mcp("alpha", short)),
        ("beta", env.fake_mcp("beta", long)),
        ("gamma", env.fake_mcp("gamma", tools(&["quiet"]))),
    ]);
    let c = env.start(&[]);
    c.wait_for("all Ready", |s| {
        ready(s, "alpha") && ready(s, "beta") && ready(s, "gamma")
    });
    runtime().block_on(async {
        let agent = spawn_mcp(&env, &[]).await;
        let info = agent.peer_info().expect("initialized");
        let text = info.instructions.clone().unwrap_or_default();
        assert!(text.len() <= 2048, "{} bytes", text.len());
        assert!(text.starts_with("Steward offers"), "{text}");
        assert!(text.contains("\n\nalpha: Use alpha for echoes."), "{text}");
        assert!(
            text.contains("trimmed; whole text: steward://instructions/beta"),
            "{text}"
        );
        assert!(!text.contains("gamma:"), "gamma gave none: {text}");
        let read = agent
            .read_resource(rmcp::model::ReadResourceRequestParams::new(
                "steward://instructions/beta",
            ))
            .await
            .unwrap();
        let body = serde_json::to_value(&read.contents[0]).unwrap();
        assert_eq!(body["text"], json!(long_text));
        agent.cancel().await.unwrap();
    });
}

#[test]
fn the_idle_timeout_cancels_a_silent_call_but_not_one_that_sends_progress() {
    let env = Env::new();
    // As Qwen Code reads it: the environment, when no settings layer sets it.
    env.set_var("QWEN_CODE_MCP_TOOL_IDLE_TIMEOUT_MS", "1500");
    env.user_mcp_servers(&[("slow", env.fake_mcp("slow", tools(&["work"])))]);
    let c = env.start(&[]);
    c.wait_for("Ready", |s| ready(s, "slow"));
    runtime().block_on(async {
        let agent = spawn_mcp(&env, &[]).await;
        let silent = call(&agent, "slow__work", json!({"sleepMs": 4000})).await;
        assert_eq!(silent.is_error, Some(true));
        assert!(
            text(&silent).contains(
                "sent neither an answer nor progress for 1s 500ms (mcp.toolIdleTimeoutMs)"
            ),
            "{}",
            text(&silent)
        );
        // rmcp's client asks for progress on every request.
        let busy = call(
            &agent,
            "slow__work",
            json!({"sleepMs": 4000, "progress": 8}),
        )
        .await;
        assert_eq!(busy.is_error, Some(false), "{}", text(&busy));
        agent.cancel().await.unwrap();
    });

    // A settings value wins over the environment; one below the floor is
    // raised to it, with a warning on the source.
    env.write_home(
        "settings.json",
        &json!({
            "mcp": {"toolIdleTimeoutMs": 5},
            "mcpServers": {"slow": env.fake_mcp("slow", tools(&["work"]))},
        })
        .to_string(),
    );
    let s = c.wait_for("the warning", |s| {
        s.sources.iter().any(|src| {
            src.warnings
                .iter()
                .any(|w| w.message.contains("10000 is used"))
        })
    });
    assert!(ready(&s, "slow"));
    runtime().block_on(async {
        let agent = spawn_mcp(&env, &[]).await;
        let silent = call(&agent, "slow__work", json!({"sleepMs": 3000})).await;
        assert_eq!(silent.is_error, Some(false), "{}", text(&silent));
        agent.cancel().await.unwrap();
    });
}

#[test]
fn steward_tools_shows_every_tool_where_it_stands_and_what_it_costs() {
    let env = Env::new();
    let mut alpha = env.fake_mcp("alpha", tools(&["echo", "add", "secret"]));
    alpha["excludeTools"] = json!(["secret"]);
    env.user_mcp_servers(&[
        ("alpha", alpha),
        ("broken", json!({"command": "/nonexistent/server"})),
    ]);
    let c = env.start(&[]);
    let s = c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    let out = env.command(&["tools", "-o", "json"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows: Vec<(String, String, String)> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["server"].as_str().unwrap().to_owned(),
                r["tool"].as_str().unwrap_or("-").to_owned(),
                r["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected = [
        ("alpha", "add", "listed"),
        ("alpha", "echo", "listed"),
        ("alpha", "secret", "filtered"),
        ("broken", "-", "serverNotReady"),
    ];
    assert_eq!(
        rows,
        expected.map(|(a, b, c)| (a.to_owned(), b.to_owned(), c.to_owned()))
    );
    let bytes: u64 = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["state"] == "listed")
        .map(|r| {
            assert_eq!(
                r["estimatedTokens"].as_u64().unwrap(),
                r["bytes"].as_u64().unwrap().div_ceil(4)
            );
            r["bytes"].as_u64().unwrap()
        })
        .sum();
    assert!(bytes > 100, "{list}");
    assert_eq!(list["listed"]["bytes"].as_u64(), Some(bytes));
    // The same total is the server's status.
    let catalog = steward_tests::harness::mcp(&s, "alpha")
        .unwrap()
        .status
        .catalog
        .unwrap();
    assert_eq!(catalog.bytes, bytes);
    let table = env.command(&["tools"]).output().unwrap();
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.contains("alpha__echo"), "{table}");
    assert!(table.contains("2 tools listed"), "{table}");
}

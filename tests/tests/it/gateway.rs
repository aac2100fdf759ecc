//! Envtest: the agent endpoint (`steward mcp`) with an rmcp client as the
//! agent, against fake MCP servers. Every wait is a condition with a
//! deadline.

#![allow(deprecated)] // sampling is deprecated by SEP-2577 but part of the versions we relay

use std::collections::BTreeSet;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig,
    CreateMessageRequestParams, CreateMessageResult, ErrorData, Implementation,
    ProgressNotificationParam, SamplingMessage,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt as _};
use serde_json::{Value, json};
use steward_schema::resource::{Phase, Reason};
use steward_tests::fake_mcp::{FakeMcpConfig, read_record};
use steward_tests::harness::{
    Env, alive, bin, fake_tools as tools, mcp, mcp_servers, pid_of, ready, recorded_pids,
    wait_until, wait_until_async, with_version as edited,
};
use tokio::sync::Notify;

/// The agent: counts list changes, keeps progress, answers sampling.
#[derive(Clone, Default)]
pub(crate) struct Agent {
    tool_changes: Arc<AtomicUsize>,
    changed: Arc<Notify>,
    progress: Arc<Mutex<Vec<f64>>>,
    sampling: bool,
}

#[allow(deprecated)]
impl ClientHandler for Agent {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tool_changes.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_waiters();
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params.progress);
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let asked = params
            .messages
            .first()
            .and_then(|m| serde_json::to_value(&m.content).ok())
            .and_then(|c| c.get("text").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_default();
        Ok(CreateMessageResult::new(
            SamplingMessage::assistant_text(format!("answer to {asked}")),
            "test-model".into(),
        ))
    }

    fn get_info(&self) -> ClientConfig {
        let capabilities = if self.sampling {
            ClientCapabilities::builder().enable_sampling().build()
        } else {
            ClientCapabilities::default()
        };
        ClientConfig::new(capabilities, Implementation::new("envtest-agent", "1.0"))
    }
}

pub(crate) type Client = RunningService<RoleClient, Agent>;

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Connect to the running controller's agent socket.
pub(crate) async fn attach(env: &Env, agent: Agent) -> Client {
    let stream = tokio::net::UnixStream::connect(env.paths().mcp_socket_path())
        .await
        .expect("connect to the agent socket");
    let (read, write) = stream.into_split();
    agent.serve((read, write)).await.expect("initialize")
}

/// `steward mcp` as a child process, the way an agent runs it.
async fn spawn_mcp(env: &Env, agent: Agent, stderr: &std::path::Path) -> Client {
    let command = tokio::process::Command::from(env.command(&["mcp"]));
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(Stdio::from(std::fs::File::create(stderr).unwrap()))
        .spawn()
        .expect("spawn steward mcp");
    agent.serve(transport).await.expect("initialize")
}

async fn tool_names(client: &Client) -> Vec<String> {
    client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.into_owned())
        .collect()
}

pub(crate) async fn call(client: &Client, name: &str, arguments: Value) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object")
    };
    client
        .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(arguments))
        .await
        .unwrap_or_else(|e| panic!("call {name}: {e}"))
}

pub(crate) fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_tools_of_ready_servers_are_listed_with_their_server_prefix_and_calls_reach_them() {
    let env = Env::new();
    let a = env.fake_mcp("alpha", tools(&["echo", "add"]));
    let b = env.fake_mcp("my.beta", tools(&["echo"]));
    env.user_mcp_servers(&[("alpha", a), ("my.beta", b)]);
    let c = env.start(&[]);
    c.wait_for("both Ready", |s| ready(s, "alpha") && ready(s, "my.beta"));
    runtime().block_on(async {
        let client = attach(&env, Agent::default()).await;
        let names: BTreeSet<String> = tool_names(&client).await.into_iter().collect();
        let expected: BTreeSet<String> = ["alpha__echo", "alpha__add", "my_beta__echo"]
            .into_iter()
            .map(str::to_owned)
            .collect();
        assert_eq!(names, expected);
        let result = call(&client, "my_beta__echo", json!({"x": 1})).await;
        assert_eq!(result.is_error, Some(false));
        assert_eq!(text(&result), r#"{"x":1}"#);
        let record = read_record(&env.record("my.beta")).unwrap();
        assert!(
            record.iter().any(|e| e.event == "recv"
                && e.method() == Some("tools/call")
                && e.message.pointer("/params/name") == Some(&json!("echo"))),
            "the server got its own tool name"
        );
        // An unknown name is a protocol error with close names.
        let error = client
            .call_tool(CallToolRequestParams::new("alpha__ech"))
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains("alpha__echo"), "{error}");
        client.cancel().await.unwrap();
    });
    let s = c.status();
    let calls = mcp(&s, "my.beta").unwrap().status.calls.unwrap();
    assert_eq!((calls.total, calls.failed, calls.in_flight), (1, 0, 0));
}

#[test]
fn steward_mcp_becomes_the_controller_and_stops_every_server_when_the_agent_leaves() {
    let env = Env::new();
    env.user_mcp_servers(&[("alpha", env.fake_mcp("alpha", tools(&["t1"])))]);
    let stderr = env.root.path().join("mcp.stderr");
    runtime().block_on(async {
        let client = spawn_mcp(&env, Agent::default(), &stderr).await;
        wait_until_async("alpha__t1 listed", async || {
            tool_names(&client).await == ["alpha__t1"]
        })
        .await;
        let result = call(&client, "alpha__t1", json!({"k": "v"})).await;
        assert_eq!(text(&result), r#"{"k":"v"}"#);
        client.cancel().await.unwrap();
    });
    let pids = recorded_pids(&env.records());
    assert_eq!(pids.len(), 1, "one server process");
    wait_until("the server process is reaped", || !alive(pids[0]));
    let log = std::fs::read_to_string(&stderr).unwrap();
    assert!(log.contains("controller stopped"), "{log}");
}

#[test]
fn agents_attached_to_one_controller_share_its_server_processes() {
    let env = Env::new();
    env.user_mcp_servers(&[("alpha", env.fake_mcp("alpha", tools(&["t1"])))]);
    let c = env.start(&[]);
    c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    runtime().block_on(async {
        let one = spawn_mcp(&env, Agent::default(), &env.root.path().join("one.stderr")).await;
        let two = spawn_mcp(&env, Agent::default(), &env.root.path().join("two.stderr")).await;
        let three = attach(&env, Agent::default()).await;
        for client in [&one, &two, &three] {
            let result = call(client, "alpha__t1", json!({"reportPid": true})).await;
            assert_eq!(result.is_error, Some(false));
        }
        let s = tokio::task::block_in_place(|| c.status());
        let gateway = s.controller.gateway.clone().unwrap();
        assert_eq!(gateway.clients.get("unix"), Some(&3), "{gateway:?}");
        for client in [one, two, three] {
            client.cancel().await.unwrap();
        }
    });
    assert_eq!(
        recorded_pids(&env.records()).len(),
        1,
        "one process for three agents"
    );
    assert!(
        c.status().controller.running,
        "a `steward run` controller stays up"
    );
}

/// How many `notifications/roots/list_changed` fake server `name` heard.
fn roots_changes(env: &Env, name: &str) -> usize {
    read_record(&env.record(name))
        .unwrap()
        .iter()
        .filter(|e| e.event == "recv" && e.method() == Some("notifications/roots/list_changed"))
        .count()
}

#[test]
fn an_agents_roots_change_reaches_the_servers_it_sees() {
    let env = Env::new();
    env.user_mcp_servers(&[
        ("alpha", env.fake_mcp("alpha", tools(&["t1"]))),
        ("beta", env.fake_mcp("beta", tools(&["t1"]))),
    ]);
    let c = env.start(&[]);
    c.wait_for("alpha and beta Ready", |s| {
        ready(s, "alpha") && ready(s, "beta")
    });
    runtime().block_on(async {
        // The union: every server hears it.
        let all = attach(&env, Agent::default()).await;
        all.notify_roots_list_changed().await.unwrap();
        wait_until_async("alpha and beta heard the roots change", async || {
            roots_changes(&env, "alpha") == 1 && roots_changes(&env, "beta") == 1
        })
        .await;
        // The one-server view of alpha: alpha only.
        let command = tokio::process::Command::from(env.command(&["mcp", "--server", "alpha"]));
        let (transport, _) = TokioChildProcess::builder(command)
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn steward mcp --server alpha");
        let one = Agent::default().serve(transport).await.expect("initialize");
        one.notify_roots_list_changed().await.unwrap();
        wait_until_async("alpha heard the second change", async || {
            roots_changes(&env, "alpha") == 2
        })
        .await;
        // A request after the notification, on the same path: when it is
        // answered, the notification was long handled.
        call(&all, "beta__t1", json!({})).await;
        assert_eq!(
            roots_changes(&env, "beta"),
            1,
            "beta is not in alpha's view"
        );
        for client in [all, one] {
            client.cancel().await.unwrap();
        }
    });
}

#[test]
fn an_edit_sends_list_changed_and_a_formatting_edit_sends_nothing() {
    let env = Env::new();
    let a = env.fake_mcp("alpha", tools(&["t1"]));
    env.user_mcp_servers(&[("alpha", a.clone())]);
    let c = env.start(&[]);
    c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    runtime().block_on(async {
        let agent = Agent::default();
        let client = attach(&env, agent.clone()).await;
        assert_eq!(tool_names(&client).await, ["alpha__t1"]);

        // Formatting only: the same servers, written differently.
        let reformatted = serde_json::to_string(&json!({"mcpServers": {"alpha": a}})).unwrap();
        env.write_home("settings.json", &reformatted);
        // Then a real edit (another tool set) of the same file.
        let mut changed = a.clone();
        let mut config: FakeMcpConfig =
            serde_json::from_str(changed["env"]["FAKE_MCP_CONFIG"].as_str().unwrap()).unwrap();
        config.tools = vec!["t1".into(), "t2".into()];
        changed["env"]["FAKE_MCP_CONFIG"] = json!(config.to_json());
        env.user_mcp_servers(&[("alpha", changed)]);
        wait_until_async("alpha__t2 listed", async || {
            tool_names(&client).await.contains(&"alpha__t2".to_owned())
        })
        .await;
        wait_until_async("one list_changed", async || {
            agent.tool_changes.load(Ordering::SeqCst) >= 1
        })
        .await;
        assert_eq!(
            agent.tool_changes.load(Ordering::SeqCst),
            1,
            "exactly one list_changed: the formatting edit sent none"
        );
        client.cancel().await.unwrap();
    });
    let s = c.status();
    assert!(s.controller.gateway.unwrap().last_list_changed.is_some());
}

#[test]
fn a_restart_with_the_same_tools_sends_no_list_changed() {
    let env = Env::new();
    let a = env.fake_mcp("alpha", tools(&["t1"]));
    env.user_mcp_servers(&[("alpha", a.clone())]);
    let c = env.start(&[]);
    let s = c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    let first = pid_of(&s, "alpha").unwrap();
    runtime().block_on(async {
        let agent = Agent::default();
        let client = attach(&env, agent.clone()).await;
        env.user_mcp_servers(&[("alpha", edited(&a, "2"))]);
        tokio::task::block_in_place(|| {
            c.wait_for("alpha restarted", |s| {
                ready(s, "alpha") && pid_of(s, "alpha") != Some(first)
            })
        });
        // A later, tool-changing edit proves notifications flow meanwhile.
        let mut config = tools(&["t1", "t9"]);
        config.record = Some(env.record("alpha"));
        config.name = "alpha".into();
        let next = json!({
            "command": bin("fake-mcp-server").to_string_lossy(),
            "env": {"FAKE_MCP_CONFIG": config.to_json()},
        });
        env.user_mcp_servers(&[("alpha", next)]);
        wait_until_async("alpha__t9 listed", async || {
            tool_names(&client).await.contains(&"alpha__t9".to_owned())
        })
        .await;
        wait_until_async("a list_changed", async || {
            agent.tool_changes.load(Ordering::SeqCst) >= 1
        })
        .await;
        assert_eq!(
            agent.tool_changes.load(Ordering::SeqCst),
            1,
            "only the edit that changed the tools was announced\n{}",
            c.log_text()
        );
        client.cancel().await.unwrap();
    });
}

#[test]
fn calls_across_ten_restarts_of_their_server_never_fail_and_one_process_runs() {
    let env = Env::new();
    let a = env.fake_mcp(
        "alpha",
        FakeMcpConfig {
            prompts: vec!["p1".into()],
            ..tools(&["t1"])
        },
    );
    let b = env.fake_mcp("beta", tools(&["b1"]));
    env.user_mcp_servers(&[("alpha", a.clone()), ("beta", b.clone())]);
    let c = env.start(&["--debounce-ms", "50"]);
    c.wait_for("both Ready", |s| ready(s, "alpha") && ready(s, "beta"));
    let failures = runtime().block_on(async {
        let one = Arc::new(attach(&env, Agent::default()).await);
        let two = Arc::new(attach(&env, Agent::default()).await);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut callers = Vec::new();
        let mut counts = Vec::new();
        // Prompt gets race the restarts as tool calls do.
        for (client, tool) in [
            (one.clone(), "alpha__t1"),
            (two.clone(), "alpha__t1"),
            (one.clone(), "beta__b1"),
            (two.clone(), "prompt alpha__p1"),
        ] {
            let stop = stop.clone();
            let done = Arc::new(AtomicUsize::new(0));
            counts.push(done.clone());
            callers.push(tokio::spawn(async move {
                let mut failed = Vec::new();
                while !stop.load(Ordering::SeqCst) {
                    let n = done.load(Ordering::SeqCst);
                    if let Some(prompt) = tool.strip_prefix("prompt ") {
                        let got = client
                            .get_prompt(rmcp::model::GetPromptRequestParams::new(prompt))
                            .await;
                        match got {
                            Ok(r) if !r.messages.is_empty() => {}
                            Ok(r) => failed.push(format!("{prompt}: no messages: {r:?}")),
                            Err(e) => failed.push(format!("{prompt}: {e}")),
                        }
                    } else {
                        let result = client
                            .call_tool(
                                CallToolRequestParams::new(tool)
                                    .with_arguments(json!({"n": n}).as_object().unwrap().clone()),
                            )
                            .await;
                        match result {
                            Ok(r) if r.is_error != Some(true) => {}
                            Ok(r) => failed.push(text(&r)),
                            Err(e) => failed.push(e.to_string()),
                        }
                    }
                    done.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                failed
            }));
        }
        let mut last_pid = tokio::task::block_in_place(|| pid_of(&c.status(), "alpha").unwrap());
        for round in 0..10 {
            let before: Vec<usize> = counts.iter().map(|n| n.load(Ordering::SeqCst)).collect();
            env.user_mcp_servers(&[
                ("alpha", edited(&a, &round.to_string())),
                ("beta", b.clone()),
            ]);
            let s = tokio::task::block_in_place(|| {
                c.wait_for("alpha restarted", |s| {
                    ready(s, "alpha") && pid_of(s, "alpha").is_some_and(|p| p != last_pid)
                })
            });
            last_pid = pid_of(&s, "alpha").unwrap();
            let live: Vec<u32> = recorded_pids(&env.records())
                .into_iter()
                .filter(|p| alive(*p))
                .collect();
            assert!(live.len() <= 2, "one process per server: {live:?}");
            // Every caller made calls across this restart.
            wait_until_async("calls across the restart", async || {
                counts
                    .iter()
                    .zip(&before)
                    .all(|(n, before)| n.load(Ordering::SeqCst) >= before + 3)
            })
            .await;
        }
        stop.store(true, Ordering::SeqCst);
        let mut failures = Vec::new();
        for caller in callers {
            failures.extend(caller.await.unwrap());
        }
        failures
    });
    assert!(
        failures.is_empty(),
        "failed calls: {failures:?}\n{}",
        c.log_text()
    );
    let s = c.status();
    assert_eq!(mcp(&s, "alpha").unwrap().status.calls.unwrap().failed, 0);
    assert_eq!(mcp(&s, "beta").unwrap().status.restarts, 0);
}

#[test]
fn a_call_in_flight_when_an_edit_restarts_its_server_finishes_before_the_old_process_stops() {
    let env = Env::new();
    let a = env.fake_mcp("alpha", tools(&["t1"]));
    env.user_mcp_servers(&[("alpha", a.clone())]);
    let c = env.start(&[]);
    let s = c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    let old = pid_of(&s, "alpha").unwrap();
    runtime().block_on(async {
        let client = Arc::new(attach(&env, Agent::default()).await);
        let slow = {
            let client = client.clone();
            tokio::spawn(async move {
                call(
                    &client,
                    "alpha__t1",
                    json!({"sleepMs": 1500, "reportPid": true}),
                )
                .await
            })
        };
        wait_until_async("the slow call reached the server", async || {
            read_record(&env.record("alpha")).unwrap().iter().any(|e| {
                e.method() == Some("tools/call")
                    && e.message.pointer("/params/arguments/sleepMs").is_some()
            })
        })
        .await;
        env.user_mcp_servers(&[("alpha", edited(&a, "2"))]);
        let result = slow.await.unwrap();
        assert_eq!(result.is_error, Some(false), "{}", text(&result));
        assert_eq!(
            result.structured_content,
            Some(json!({"pid": old})),
            "served by the old process"
        );
        let s = tokio::task::block_in_place(|| {
            c.wait_for("alpha restarted", |s| {
                ready(s, "alpha") && pid_of(s, "alpha").is_some_and(|p| p != old)
            })
        });
        assert!(!alive(old), "the old process stopped after its call");
        let after = call(&client, "alpha__t1", json!({"reportPid": true})).await;
        assert_eq!(
            after.structured_content,
            Some(json!({"pid": pid_of(&s, "alpha").unwrap()}))
        );
    });
}

#[test]
fn a_call_to_a_server_pending_approval_says_how_to_approve_and_works_after_it() {
    let env = Env::new();
    env.write(
        ".mcp.json",
        &mcp_servers(&[("gated", env.fake_mcp("gated", tools(&["g1"])))]),
    );
    let c = env.start(&[]);
    c.wait_for("gated pending", |s| {
        mcp(s, "gated").is_some_and(|m| m.status.reason == Some(Reason::PendingApproval))
    });
    runtime().block_on(async {
        let client = attach(&env, Agent::default()).await;
        let refused = call(&client, "gated__g1", json!({})).await;
        assert_eq!(refused.is_error, Some(true));
        assert!(
            text(&refused).contains("`steward approve gated`"),
            "{}",
            text(&refused)
        );
        let out = env.steward(&["approve", "gated"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Once the controller has seen the decision (the approvals file is
        // watched), the same client, no reconnect: the call waits for the start.
        tokio::task::block_in_place(|| {
            c.wait_for("gated admitted", |s| {
                mcp(s, "gated").is_some_and(|m| m.status.phase != Phase::Blocked)
            })
        });
        let result = call(&client, "gated__g1", json!({"after": "approve"})).await;
        assert_eq!(result.is_error, Some(false), "{}", text(&result));
        client.cancel().await.unwrap();
    });
}

#[test]
fn calls_to_excluded_crash_looping_and_removed_servers_say_why() {
    let env = Env::new();
    let mut crashing = tools(&["c1"]);
    crashing.crash_after_listed_ms = Some(300);
    crashing.stderr_lines = vec!["fatal: the database is locked".into()];
    env.user_mcp_servers(&[
        ("ok", env.fake_mcp("ok", tools(&["o1"]))),
        ("crashy", env.fake_mcp("crashy", crashing)),
    ]);
    // System settings: a layer of its own, so editing it retries nothing else.
    let system = env.root.path().join("etc/settings.json");
    steward_tests::harness::write_atomic(
        &system,
        &mcp_servers(&[("gone", env.fake_mcp("gone", tools(&["x1"])))]),
    );
    let c = env.start(&["--crash-backoff-ms", "60000"]);
    // The first crash restarts at once; the second waits a minute.
    c.wait_for("crashy in a crash loop, ok and gone Ready", |s| {
        ready(s, "ok")
            && ready(s, "gone")
            && mcp(s, "crashy").is_some_and(|m| {
                m.status.phase == Phase::Failed && m.status.reason == Some(Reason::CrashLoopBackOff)
            })
    });
    steward_tests::harness::write_atomic(
        &system,
        &serde_json::to_string(&json!({"mcp": {"excluded": ["ok"]}})).unwrap(),
    );
    c.wait_for("ok excluded, gone removed", |s| {
        mcp(s, "ok").is_some_and(|m| m.status.reason == Some(Reason::Excluded))
            && mcp(s, "gone").is_none()
    });
    runtime().block_on(async {
        let client = attach(&env, Agent::default()).await;
        let excluded = text(&call(&client, "ok__o1", json!({})).await);
        assert!(excluded.contains("excluded"), "{excluded}");
        let crashy = text(&call(&client, "crashy__c1", json!({})).await);
        assert!(crashy.contains("next retry at"), "{crashy}");
        assert!(crashy.contains("fatal: the database is locked"), "{crashy}");
        let removed = text(&call(&client, "gone__x1", json!({})).await);
        assert!(removed.contains("removed"), "{removed}");
        client.cancel().await.unwrap();
    });
}

#[test]
fn progress_reaches_the_caller_and_cancellation_reaches_the_server() {
    let env = Env::new();
    env.user_mcp_servers(&[("slow", env.fake_mcp("slow", tools(&["work"])))]);
    let c = env.start(&[]);
    c.wait_for("slow Ready", |s| ready(s, "slow"));
    runtime().block_on(async {
        let agent = Agent::default();
        let client = attach(&env, agent.clone()).await;
        let peer = client.peer().clone();
        // Progress: three notifications before the answer.
        let handle = peer
            .send_cancellable_request(
                rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
                    CallToolRequestParams::new("slow__work").with_arguments(
                        json!({"sleepMs": 300, "progress": 3})
                            .as_object()
                            .unwrap()
                            .clone(),
                    ),
                )),
                rmcp::service::PeerRequestOptions::no_options(),
            )
            .await
            .unwrap();
        handle.await_response().await.unwrap();
        // This rmcp client handles each notification in a task of its own,
        // so it may see them after the answer and in any order; that Steward
        // relays them in order and before the answer is checked with the
        // PyPI client (gateway_real_clients.rs).
        wait_until_async("three progress notifications", async || {
            agent.progress.lock().unwrap().len() == 3
        })
        .await;
        let mut seen = agent.progress.lock().unwrap().clone();
        seen.sort_by(f64::total_cmp);
        assert_eq!(seen, [1.0, 2.0, 3.0]);

        // Cancellation: a long call, cancelled by the agent.
        let handle = peer
            .send_cancellable_request(
                rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
                    CallToolRequestParams::new("slow__work")
                        .with_arguments(json!({"sleepMs": 60000}).as_object().unwrap().clone()),
                )),
                rmcp::service::PeerRequestOptions::no_options(),
            )
            .await
            .unwrap();
        wait_until_async("the long call reached the server", async || {
            read_record(&env.record("slow")).unwrap().iter().any(|e| {
                e.method() == Some("tools/call")
                    && e.message.pointer("/params/arguments/sleepMs") == Some(&json!(60000))
            })
        })
        .await;
        handle
            .cancel(Some("the user gave up".into()))
            .await
            .unwrap();
        wait_until_async("the server got notifications/cancelled", async || {
            read_record(&env.record("slow"))
                .unwrap()
                .iter()
                .any(|e| e.event == "recv" && e.method() == Some("notifications/cancelled"))
        })
        .await;
        client.cancel().await.unwrap();
    });
}

#[test]
fn a_server_sampling_request_goes_to_the_calling_agent() {
    let env = Env::new();
    env.user_mcp_servers(&[("asker", env.fake_mcp("asker", tools(&["ask"])))]);
    let c = env.start(&[]);
    c.wait_for("asker Ready", |s| ready(s, "asker"));
    runtime().block_on(async {
        let with = attach(
            &env,
            Agent {
                sampling: true,
                ..Agent::default()
            },
        )
        .await;
        let answered = call(&with, "asker__ask", json!({"sample": "what time is it"})).await;
        assert_eq!(text(&answered), "sampled: answer to what time is it");
        let without = attach(&env, Agent::default()).await;
        let refused = call(&without, "asker__ask", json!({"sample": "hello"})).await;
        assert!(
            text(&refused).contains("did not declare sampling"),
            "{}",
            text(&refused)
        );
        with.cancel().await.unwrap();
        without.cancel().await.unwrap();
    });
}

#[test]
fn an_entry_that_runs_steward_mcp_is_blocked_as_a_self_reference_and_never_spawned() {
    let env = Env::new();
    let steward = bin("steward");
    env.user_mcp_servers(&[
        (
            "steward",
            json!({"command": steward.to_string_lossy(), "args": ["mcp"]}),
        ),
        ("alpha", env.fake_mcp("alpha", tools(&["t1"]))),
    ]);
    let c = env.start(&[]);
    let s = c.wait_for("alpha Ready and steward blocked", |s| {
        ready(s, "alpha")
            && mcp(s, "steward").is_some_and(|m| m.status.reason == Some(Reason::SelfReference))
    });
    assert_eq!(mcp(&s, "steward").unwrap().status.pid, None);
    runtime().block_on(async {
        let client = attach(&env, Agent::default()).await;
        assert_eq!(tool_names(&client).await, ["alpha__t1"]);
        client.cancel().await.unwrap();
    });
    let offline = env.steward(&["status", "--offline", "-o", "json"]);
    let doc: Value = serde_json::from_slice(&offline.stdout).unwrap();
    assert!(
        doc.to_string().contains("SelfReference"),
        "offline status agrees"
    );
}

#[test]
fn lists_are_paginated() {
    let env = Env::new();
    env.user_mcp_servers(&[(
        "alpha",
        env.fake_mcp("alpha", tools(&["a", "b", "c", "d", "e"])),
    )]);
    let c = env.start(&["--mcp-page-size", "2"]);
    c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    runtime().block_on(async {
        let client = attach(&env, Agent::default()).await;
        let first = client.list_tools(None).await.unwrap();
        assert_eq!(first.tools.len(), 2);
        assert!(first.next_cursor.is_some());
        assert_eq!(tool_names(&client).await.len(), 5, "every page, followed");
        client.cancel().await.unwrap();
    });
}

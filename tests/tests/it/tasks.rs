//! Tasks through the union (SEP-2663, product.md §15): a server's task
//! handle reaches the agent under an id namespaced by its server, `tasks/*`
//! go to the server the id names (not to another server that has a task
//! of the same id), the task outlives the reload of an unrelated server,
//! and a server hears that an agent takes tasks only when that agent said
//! so. The agent here is a 2026-07-28 client over HTTP, each request its
//! own (stateless), so that its capabilities are per request; the suite's
//! `tasks-*` scenarios run through the one-server view in conformance.rs.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use steward_tests::harness::{Env, fake_tools, lists_tool, mcp, poll, ready};

use crate::faithful::conformance_stdio;
use crate::one_server::post_with;
use crate::real_clients::http_url;

/// A request of 2026-07-28 to `url`, on its own: the protocol's headers,
/// `_meta` saying who asks and what it takes (`tasks`: the extension).
fn modern(url: &str, method: &str, name: Option<&str>, mut params: Value, tasks: bool) -> Value {
    let mut capabilities = json!({});
    if tasks {
        capabilities = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    }
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "tasks-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut headers = vec![
        "MCP-Protocol-Version: 2026-07-28".to_owned(),
        format!("Mcp-Method: {method}"),
    ];
    headers.extend(name.map(|n| format!("Mcp-Name: {n}")));
    let (_, body) = post_with(url, &headers, &body);
    // JSON, or one SSE event (possibly chunked): the line that is the answer.
    body.lines()
        .map(|line| line.strip_prefix("data:").unwrap_or(line).trim())
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|v| v.get("jsonrpc").is_some())
        .unwrap_or_else(|| panic!("no JSON-RPC answer to {method}: {body}"))
}

fn call(url: &str, tool: &str, arguments: Value, tasks: bool) -> Value {
    modern(
        url,
        "tools/call",
        Some(tool),
        json!({"name": tool, "arguments": arguments}),
        tasks,
    )
}

fn get(url: &str, id: &str) -> Value {
    modern(url, "tasks/get", Some(id), json!({"taskId": id}), true)
}

/// Poll `tasks/get` of `id` until it ends (a minute at most).
fn ended(url: &str, id: &str) -> Value {
    poll(Duration::from_secs(60), Duration::from_millis(200), || {
        let answer = get(url, id);
        assert!(answer.get("error").is_none(), "{answer}");
        let status = answer["result"]["status"].as_str().unwrap_or_default();
        if ["completed", "failed", "cancelled"].contains(&status) {
            Ok(answer["result"].clone())
        } else {
            Err(answer)
        }
    })
    .unwrap_or_else(|answer| panic!("task {id} did not end: {answer}"))
}

#[test]
fn a_task_is_routed_by_its_server_and_outlives_an_unrelated_reload() {
    let env = Env::new();
    let remote = crate::faithful::HttpConformance::start(&env, "ch");
    let other = |tools: &[&str]| env.fake_mcp("other", fake_tools(tools));
    env.user_mcp_servers(&[
        ("cs", conformance_stdio()),
        ("ch", json!({"httpUrl": remote.url})),
        ("other", other(&["o1"])),
    ]);
    let c = env.start(&["--mcp-listen", "127.0.0.1:0", "--pin-tools", "gated"]);
    let s = c.wait_for("cs, ch and other Ready", |s| {
        ready(s, "cs") && ready(s, "ch") && ready(s, "other")
    });
    let url = http_url(&s);

    // An agent that takes tasks gets a handle, its id namespaced by server.
    let created = call(
        &url,
        "cs__slow_compute",
        json!({"seconds": 3, "label": "long"}),
        true,
    );
    let handle = &created["result"];
    assert_eq!(handle["resultType"], "task", "{created}");
    let id = handle["taskId"].as_str().expect("a task id").to_owned();
    assert!(id.starts_with("cs/"), "namespaced by its server: {id}");
    let own = id.trim_start_matches("cs/");

    // The same server-side id at another server is that server's, not cs's.
    let elsewhere = get(&url, &format!("ch/{own}"));
    assert_eq!(elsewhere["error"]["code"], -32602, "{elsewhere}");
    let nowhere = get(&url, own);
    assert_eq!(nowhere["error"]["code"], -32602, "{nowhere}");

    // An unrelated server reloads while the task runs.
    env.user_mcp_servers(&[
        ("cs", conformance_stdio()),
        ("ch", json!({"httpUrl": remote.url})),
        ("other", other(&["o1", "o2"])),
    ]);
    c.wait_for("other reloaded with o2", |s| lists_tool(s, "other", "o2"));
    let working = get(&url, &id);
    assert_eq!(working["result"]["taskId"], id, "{working}");
    let done = ended(&url, &id);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"], "computed long in 3s",
        "{done}"
    );
    let s = c.status();
    assert_eq!(
        mcp(&s, "cs").map(|o| o.status.restarts),
        Some(0),
        "cs ran on"
    );

    // Cancelled through Steward: the server's task ends cancelled.
    let long = call(&url, "cs__slow_compute", json!({"seconds": 60}), true);
    let long_id = long["result"]["taskId"].as_str().expect("a task id");
    let ack = modern(
        &url,
        "tasks/cancel",
        Some(long_id),
        json!({"taskId": long_id}),
        true,
    );
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    assert_eq!(ended(&url, long_id)["status"], "cancelled");

    // An agent that does not take tasks: the server is not told it does.
    let plain = call(&url, "cs__slow_compute", json!({"seconds": 0}), false);
    assert_eq!(
        plain["result"]["content"][0]["text"], "computed  in 0s",
        "{plain}"
    );
    assert!(plain["result"].get("taskId").is_none(), "{plain}");
    let required = call(&url, "cs__failing_job", json!({}), false);
    assert_eq!(required["error"]["code"], -32021, "{required}");
    // Nor may it poll.
    let refused = modern(&url, "tasks/get", Some(&id), json!({"taskId": id}), false);
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
}

/// An agent of the initialize lifecycle speaking JSON-RPC itself over
/// `steward mcp` (stdio): what it writes, and every message it reads.
struct RawAgent {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    read: std::sync::mpsc::Receiver<Value>,
}

impl RawAgent {
    /// Started and initialized, declaring `capabilities`.
    fn start(env: &Env, capabilities: Value) -> RawAgent {
        use std::io::BufRead as _;
        let argv = crate::real_clients::steward_mcp_argv(env);
        let mut child = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .current_dir(&env.ws)
            .env_clear()
            .envs(env.steward_env())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start steward mcp");
        let stdout = child.stdout.take().unwrap();
        let (tx, read) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if let Ok(message) = serde_json::from_str(&line)
                    && tx.send(message).is_err()
                {
                    return;
                }
            }
        });
        let stdin = child.stdin.take().unwrap();
        let mut agent = RawAgent { child, stdin, read };
        agent.send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": capabilities,
            "clientInfo": {"name": "raw", "version": "1"}}}),
        );
        agent.until("the initialize answer", |m| m["id"] == 0);
        agent.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        agent
    }

    fn send(&mut self, message: Value) {
        use std::io::Write as _;
        writeln!(self.stdin, "{message}").expect("write to steward mcp");
    }

    /// The first message read that `wanted` holds for (a minute at most);
    /// the others are skipped.
    fn until(&mut self, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.read.recv_timeout(left) {
                Ok(message) if wanted(&message) => return message,
                Ok(_) => {}
                Err(_) => panic!("no {what} within a minute"),
            }
        }
    }

    /// Every message read until now.
    fn drained(&mut self) -> Vec<Value> {
        self.read.try_iter().collect()
    }
}

impl Drop for RawAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A task's status told on the server's session reaches the agent whose
/// call made the task, under the id that agent knows, and no other agent;
/// the task is that agent's alone.
#[test]
fn a_tasks_status_reaches_the_agent_whose_call_made_it() {
    let env = Env::new();
    env.user_mcp_servers(&[("cs", conformance_stdio())]);
    let c = env.start(&[]);
    c.wait_for("cs Ready", |s| ready(s, "cs"));
    let takes_tasks = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    let mut maker = RawAgent::start(&env, takes_tasks.clone());
    let mut other = RawAgent::start(&env, takes_tasks);
    maker.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "cs__slow_compute", "arguments": {"seconds": 1, "label": "told"}}}),
    );
    let made = maker.until("the task handle", |m| m["id"] == 1);
    let id = made["result"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();
    assert!(id.starts_with("cs/"), "{made}");
    let done = maker.until("the completed status", |m| {
        m["method"] == "notifications/tasks" && m["params"]["status"] == "completed"
    });
    assert_eq!(
        done["params"]["taskId"], id,
        "the id the agent knows: {done}"
    );
    assert_eq!(
        done["params"]["result"]["content"][0]["text"], "computed told in 1s",
        "{done}"
    );
    // The other agent, whose calls made no task, heard nothing of it (a
    // request of its own, answered, shows its reader caught up), and may
    // not use it: for it there is no such task.
    let get = |n: u64| json!({"jsonrpc": "2.0", "id": n, "method": "tasks/get", "params": {"taskId": id}});
    other.send(get(2));
    let refused = other.until("its tasks/get", |m| m["id"] == 2);
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let heard: Vec<Value> = other
        .drained()
        .into_iter()
        .filter(|m| m["method"] == "notifications/tasks")
        .collect();
    assert!(heard.is_empty(), "{heard:?}");
    maker.send(get(3));
    let own = maker.until("its tasks/get", |m| m["id"] == 3);
    assert_eq!(own["result"]["status"], "completed", "{own}");
}

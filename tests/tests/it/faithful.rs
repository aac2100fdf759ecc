//! A faithful path (product.md §15): what a server asks reaches the agent
//! whose call caused it and no other — on a stdio server and on an HTTP
//! one, in both call orders, with three agents —; a client's `_meta`
//! reaches the server; log lines and resource subscriptions are per agent;
//! a resource link is readable; a 2026-07-28 client (the PyPI SDK's)
//! answers a legacy server's elicitation through `input_required`. The
//! server behind is the conformance test server of the tests crate, over
//! stdio and over HTTP, and `server-everything` (a real third-party server).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use steward_tests::harness::{Controller, Env, bin, mcp, poll, ready, wait_until};

use crate::real_clients::{
    CLIENT_DEADLINE, PyClient, everything, http_url, steward_mcp_argv, text_of,
};

/// `command` (quiet) started, and the port it writes to `port_file` once
/// it listens.
pub(crate) fn listening(mut command: Command, port_file: &Path, what: &str) -> (Child, String) {
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("start {what}: {e}"));
    wait_until(&format!("{what} listens"), || port_file.exists());
    let port = std::fs::read_to_string(port_file).unwrap();
    (child, port.trim().to_owned())
}

/// The conformance test server over HTTP (its own process, ended with
/// the test).
pub struct HttpConformance {
    child: Child,
    pub url: String,
}

impl HttpConformance {
    pub fn start(env: &Env, name: &str) -> HttpConformance {
        let port_file = env.root.path().join(format!("{name}.port"));
        let mut command = Command::new(bin("conformance-server"));
        command.arg("--http").arg(&port_file);
        let (child, port) = listening(command, &port_file, "the conformance server");
        HttpConformance {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for HttpConformance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The conformance server's entry over stdio.
pub fn conformance_stdio() -> Value {
    json!({"command": bin("conformance-server").to_string_lossy()})
}

/// A workspace with the conformance server over stdio (`cs`) and over HTTP
/// (`ch`), served over HTTP too: the controller, the endpoint's URL.
pub(crate) fn conformance_workspace(env: &Env) -> (Controller, String, HttpConformance) {
    let remote = HttpConformance::start(env, "ch");
    env.user_mcp_servers(&[
        ("cs", conformance_stdio()),
        ("ch", json!({"httpUrl": remote.url})),
    ]);
    let c = env.start(&["--mcp-listen", "127.0.0.1:0"]);
    let s = c.wait_for("cs and ch Ready", |s| ready(s, "cs") && ready(s, "ch"));
    (c, http_url(&s), remote)
}

/// An agent of the one-server view of `server` that answers as `name`.
fn agent(env: &Env, url: &str, server: &str, name: &str) -> PyClient {
    let options = [
        "--sampling".to_owned(),
        "--elicitation".to_owned(),
        format!("--name={name}"),
        format!("--roots=file:///{name}"),
    ];
    let options: Vec<&str> = options.iter().map(String::as_str).collect();
    PyClient::http_with(env, &options, &format!("{url}/{server}"), &[])
}

pub(crate) fn call(tool: &str, arguments: Value) -> Value {
    json!({"op": "call_tool", "name": tool, "arguments": arguments})
}

/// The text of the answer to a `call_tool` sent with [`PyClient::send`].
pub(crate) fn answered(client: &mut PyClient, what: &str) -> String {
    let answer = client
        .receive(what)
        .unwrap_or_else(|e| panic!("{what}: {e}\n{}", client.stderr_text()));
    text_of(&answer["result"])
}

/// Wait (at most a client's deadline: the messages of a loaded machine
/// may be slow) until `cond` holds, asking it again and again.
fn until(what: &str, mut cond: impl FnMut() -> bool) {
    poll(CLIENT_DEADLINE, Duration::from_millis(50), || {
        cond().then_some(()).ok_or(())
    })
    .unwrap_or_else(|()| panic!("timed out waiting for {what}"));
}

/// Calls in flight to `server` now.
pub(crate) fn in_flight(c: &Controller, server: &str) -> u64 {
    mcp(&c.status(), server)
        .and_then(|s| s.status.calls)
        .map_or(0, |calls| calls.in_flight)
}

/// What each of two agents' calls to `server` asks reaches that agent, in
/// both orders: `first` calls, asking only after a while; `second` calls
/// and asks at once while the first call is in flight.
fn both_orders(c: &Controller, server: &str, a: &mut PyClient, b: &mut PyClient) {
    for flip in [false, true] {
        let (first, second, first_name, second_name) = if flip {
            (&mut *b, &mut *a, "B", "A")
        } else {
            (&mut *a, &mut *b, "A", "B")
        };
        let asks = call(
            "test_input_required_result_elicitation",
            json!({"delayMs": 1500}),
        );
        first.send(&asks);
        wait_until("the first call reached the server", || {
            in_flight(c, server) >= 1
        });
        let (second_answer, _) = second.call("test_input_required_result_elicitation", json!({}));
        assert_eq!(
            text_of(&second_answer),
            format!("Hello, {second_name}!"),
            "{server}: the second call's elicitation went to its own agent"
        );
        assert_eq!(
            answered(first, "the first call"),
            format!("Hello, {first_name}!"),
            "{server}: the first call's elicitation went to its own agent"
        );
    }
}

#[test]
fn server_requests_reach_the_agent_whose_call_asked_on_stdio_and_http_servers() {
    let env = Env::new();
    let (c, url, _remote) = conformance_workspace(&env);
    for server in ["ch", "cs"] {
        let mut a = agent(&env, &url, server, "A");
        let mut b = agent(&env, &url, server, "B");
        let mut third = agent(&env, &url, server, "C");
        // A's call asks while B's, which began later... or earlier, is in
        // flight: the question is A's. Over HTTP the stream it comes on
        // says so; on stdio the first such request waits until B's call is
        // done (never a guess), and from then on the calls of different
        // agents to that server are serialized, so each request has one
        // agent to go to.
        b.send(&call("test_sleep", json!({"ms": 1500})));
        wait_until("B's call reached the server", || in_flight(&c, server) >= 1);
        let (first, _) = a.call("test_input_required_result_elicitation", json!({}));
        assert_eq!(text_of(&first), "Hello, A!", "{server}");
        assert_eq!(answered(&mut b, "B's call"), "xx");
        a.send(&call(
            "test_input_required_result_elicitation",
            json!({"delayMs": 1000}),
        ));
        wait_until("A's call reached the server", || in_flight(&c, server) >= 1);
        let (slept, _) = b.call("test_sleep", json!({"ms": 1500}));
        assert_eq!(text_of(&slept), "xx");
        assert_eq!(answered(&mut a, "A's call"), "Hello, A!", "{server}");
        both_orders(&c, server, &mut a, &mut b);
        // Three agents, each asked something else: sampling, roots,
        // elicitation.
        a.send(&call(
            "test_sampling",
            json!({"prompt": "for A", "delayMs": 1000}),
        ));
        wait_until("A's call reached the server", || in_flight(&c, server) >= 1);
        b.send(&call(
            "test_input_required_result_list_roots",
            json!({"delayMs": 300}),
        ));
        let (third_answer, _) = third.call("test_input_required_result_elicitation", json!({}));
        assert_eq!(text_of(&third_answer), "Hello, C!");
        assert_eq!(
            answered(&mut a, "A's sampling"),
            "LLM response: sampled by A: for A"
        );
        assert_eq!(answered(&mut b, "B's roots"), "Roots: file:///B");
    }
    // An agent that declared nothing: the server hears so for its call
    // (and refuses it as it would directly), and nobody else is asked.
    let mut plain = PyClient::http(&env, &format!("{url}/ch"), &[]);
    let refused = plain.try_run(call("test_sampling", json!({"prompt": "x"})));
    assert!(
        matches!(&refused, Err(e) if e.contains("did not declare the capability sampling")),
        "{refused:?}"
    );
}

#[test]
fn a_clients_meta_reaches_the_server_but_for_what_steward_owns() {
    let env = Env::new();
    let (_c, url, _remote) = conformance_workspace(&env);
    let traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    for server in ["cs", "ch"] {
        let mut client = PyClient::http(&env, &format!("{url}/{server}"), &[]);
        let meta = json!({
            "claudecode/toolUseId": "toolu_01",
            "qwen-code/invocation": {"id": 7},
            "threadId": "t-1",
            "traceparent": traceparent,
        });
        let answer = client.run(json!({
            "op": "call_tool", "name": "test_echo_meta", "arguments": {}, "meta": meta, "progress": true,
        }));
        let seen = &answer["result"]["structuredContent"]["meta"];
        for key in ["claudecode/toolUseId", "qwen-code/invocation", "threadId"] {
            assert_eq!(seen[key], meta[key], "{server}: {key} arrived: {seen}");
        }
        assert_eq!(seen["traceparent"], json!(traceparent), "{seen}");
        // The progress token is Steward's own (mapped back to the client's).
        assert!(seen["progressToken"].is_number(), "{seen}");
        // Of the protocol's own keys, the server hears only what Steward
        // says of this agent on the server's session: that it declared
        // nothing (roots are Steward's to answer for it).
        let protocol: Vec<&String> = seen
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| k.starts_with("io.modelcontextprotocol/"))
            .collect();
        assert_eq!(
            protocol,
            ["io.modelcontextprotocol/clientCapabilities"],
            "{seen}"
        );
        assert_eq!(
            seen["io.modelcontextprotocol/clientCapabilities"],
            json!({"roots": {"listChanged": true}}),
            "{seen}"
        );
    }
}

/// The log lines `client` received.
fn log_lines(client: &mut PyClient) -> Vec<Value> {
    let messages = client.run(json!({"op": "messages"}));
    messages
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .map(|m| m["params"]["data"].clone())
        .collect()
}

#[test]
fn log_lines_go_to_the_agent_of_the_call_at_its_level() {
    let env = Env::new();
    let (_c, url, _remote) = conformance_workspace(&env);
    for server in ["cs", "ch"] {
        let mut quiet = agent(&env, &url, server, "Q");
        let mut chatty = agent(&env, &url, server, "L");
        quiet.run(json!({"op": "set_level", "level": "error"}));
        // The chatty agent never set a level: its call's lines reach it.
        chatty.call("test_tool_with_logging", json!({}));
        until("the chatty agent has the three lines of its call", || {
            log_lines(&mut chatty).len() == 3
        });
        // The quiet agent's call logs at info: below its level, so nothing.
        quiet.call("test_tool_with_logging", json!({}));
        let (mut q, l) = (log_lines(&mut quiet), log_lines(&mut chatty));
        assert!(q.is_empty(), "{server}: {q:?}");
        assert_eq!(
            l.len(),
            3,
            "{server}: the quiet call's lines went to its agent only: {l:?}"
        );
        assert_eq!(l[0], json!("Tool execution started"));
        q.clear();
    }
}

/// How many `notifications/resources/updated` of `uri` `client` received.
fn updates(client: &mut PyClient, uri: &str) -> usize {
    let messages = client.run(json!({"op": "messages"}));
    messages
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["method"] == "notifications/resources/updated" && m["params"]["uri"] == uri)
        .count()
}

#[test]
fn resource_subscriptions_are_per_agent_and_held_once_at_the_server() {
    let env = Env::new();
    let (_c, url, _remote) = conformance_workspace(&env);
    let watched = "test://watched-resource";
    for server in ["cs", "ch"] {
        let view = format!("{url}/{server}");
        let mut one = PyClient::http(&env, &view, &[]);
        let mut two = PyClient::http(&env, &view, &[]);
        let mut other = PyClient::http(&env, &view, &[]);
        one.run(json!({"op": "subscribe", "uri": watched}));
        two.run(json!({"op": "subscribe", "uri": watched}));
        // The server holds one subscription for both.
        let (told, _) = other.call("test_update_watched", json!({}));
        assert!(
            text_of(&told).ends_with("1 legacy subscriber(s) told"),
            "{server}: {told}"
        );
        until("both subscribers heard of the update", || {
            updates(&mut one, watched) == 1 && updates(&mut two, watched) == 1
        });
        assert_eq!(updates(&mut other, watched), 0, "{server}: not subscribed");
        one.run(json!({"op": "unsubscribe", "uri": watched}));
        other.call("test_update_watched", json!({}));
        until("the remaining subscriber heard of it", || {
            updates(&mut two, watched) == 2
        });
        assert_eq!(updates(&mut one, watched), 1, "{server}: unsubscribed");
        // The last holder leaves: the server lets go.
        drop(two.close());
        until("the server let the subscription go", || {
            let (told, _) = other.call("test_update_watched", json!({}));
            text_of(&told).ends_with("0 legacy subscriber(s) told")
        });
    }
}

#[test]
fn a_resource_link_is_readable_through_the_union_though_no_server_lists_it() {
    let env = Env::new();
    let (_c, url, _remote) = conformance_workspace(&env);
    let mut client = PyClient::http(&env, &url, &[]);
    let unread = client.try_run(json!({"op": "read_resource", "uri": "test://linked/1"}));
    assert!(unread.is_err(), "{unread:?}");
    let (linked, _) = client.call("cs__test_resource_link", json!({}));
    assert_eq!(linked["content"][0]["type"], "resource_link", "{linked}");
    let read = client.run(json!({"op": "read_resource", "uri": "test://linked/1"}));
    assert_eq!(read["contents"][0]["text"], "A linked resource.", "{read}");
}

/// The PyPI SDK's 2026-07-28 client (`tests/clients/input_client.py`):
/// calls `tool` through `steward mcp` for `env`, answering what it is asked
/// as "Modern"; its last stdout line.
fn modern_call(env: &Env, tool: &str, arguments: &Value) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("clients/input_client.py");
    let mut command = Command::new(crate::real_clients::python());
    command
        .arg("-B")
        .arg(script)
        .arg(tool)
        .arg(arguments.to_string())
        .args(steward_mcp_argv(env))
        .current_dir(&env.ws)
        .env_clear()
        .envs(env.steward_env());
    let output = crate::real_clients::output_within(command, Duration::from_secs(90));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&output.stderr)))
}

#[test]
fn a_2026_client_answers_a_legacy_servers_elicitation_through_input_required() {
    let env = Env::new();
    env.user_mcp_servers(&[("everything", everything())]);
    let c = env.start(&[]);
    c.wait_for_within("everything Ready", Duration::from_secs(60), |s| {
        ready(s, "everything")
    });
    let answer = modern_call(&env, "everything__trigger-elicitation-request", &json!({}));
    assert_eq!(answer["version"], "2026-07-28", "{answer}");
    let text = answer["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("Modern"),
        "the agent's answer reached the server: {answer}"
    );
    assert!(answer["rounds"].as_u64() >= Some(1), "{answer}");
}

/// The JSON-RPC messages of the complete `data:` lines of an SSE body read
/// so far (or of a plain JSON body).
fn messages(body: &str) -> Vec<Value> {
    let complete = &body[..body.rfind('\n').map_or(0, |end| end + 1)];
    complete
        .lines()
        .chain(std::iter::once(body).filter(|b| b.trim_start().starts_with('{')))
        .filter_map(|line| {
            serde_json::from_str(line.strip_prefix("data:").unwrap_or(line).trim()).ok()
        })
        .collect()
}

/// A raw streamable-HTTP agent that never opens the standalone GET stream:
/// what the server asks during its call must come on the call's own
/// response stream (SEP-2260), or nowhere it listens.
#[test]
fn a_servers_request_comes_on_the_response_stream_of_the_call_that_caused_it() {
    use futures::StreamExt as _;

    let env = Env::new();
    let (_c, url, _remote) = conformance_workspace(&env);
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let _ = rustls::crypto::ring::default_provider().install_default();
    for server in ["cs", "ch"] {
        let view = format!("{url}/{server}");
        runtime.block_on(async {
            let http = reqwest::Client::new();
            let post = |body: Value, session: Option<&str>| {
                let mut request = http
                    .post(&view)
                    .header("Accept", "application/json, text/event-stream")
                    .header("Content-Type", "application/json")
                    .body(body.to_string());
                if let Some(session) = session {
                    request = request
                        .header("Mcp-Session-Id", session)
                        .header("MCP-Protocol-Version", "2025-11-25");
                }
                request.send()
            };
            let init = post(
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"elicitation": {"form": {}}},
                    "clientInfo": {"name": "raw-stream", "version": "1"}}}),
                None,
            )
            .await
            .expect("initialize");
            let session = init.headers()["mcp-session-id"]
                .to_str()
                .unwrap()
                .to_owned();
            let _ = init.text().await;
            post(
                json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                Some(&session),
            )
            .await
            .expect("initialized");
            let call = post(
                json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                    "name": "test_elicitation", "arguments": {"message": "Who streams?"}}}),
                Some(&session),
            )
            .await
            .expect("the call");
            let mut stream = call.bytes_stream();
            let mut body = String::new();
            let mut answered = false;
            let deadline = tokio::time::Instant::now() + CLIENT_DEADLINE;
            let result = loop {
                let chunk = tokio::time::timeout_at(deadline, stream.next())
                    .await
                    .unwrap_or_else(|_| {
                        panic!("{server}: nothing more came on the call's stream: {body}")
                    })
                    .unwrap_or_else(|| panic!("{server}: the call's stream ended: {body}"))
                    .expect("a chunk");
                body.push_str(&String::from_utf8_lossy(&chunk));
                let seen = messages(&body);
                if let Some(done) = seen.iter().find(|m| m["id"] == 2) {
                    break done.clone();
                }
                let Some(asked) = seen.iter().find(|m| m["method"] == "elicitation/create") else {
                    continue;
                };
                if !std::mem::replace(&mut answered, true) {
                    let answer = json!({"jsonrpc": "2.0", "id": asked["id"], "result": {
                        "action": "accept",
                        "content": {"username": "streamer", "email": "s@example.com"}}});
                    let sent = post(answer, Some(&session)).await.expect("the answer");
                    assert!(sent.status().is_success(), "{server}: {}", sent.status());
                }
            };
            assert!(
                answered,
                "{server}: the elicitation came on the call's stream"
            );
            let text = text_of(&result["result"]);
            assert!(text.contains("streamer"), "{server}: {result}");
        });
    }
}

/// A server that reads the capabilities of each request (SEP-2575) hears,
/// on its one session, exactly what the asking agent declared — not all
/// that Steward could relay: the conformance server refuses
/// `test_missing_capability` itself to an agent without sampling, as it
/// would directly, and asks one with sampling.
#[test]
fn a_server_is_told_per_request_what_the_asking_agent_declared() {
    let env = Env::new();
    let (_c, url, remote) = conformance_workspace(&env);
    let refusal = "test_missing_capability needs the client's sampling capability";
    let mut direct = PyClient::http_with(&env, &["--name=plain"], &remote.url, &[]);
    let refused = direct.try_run(call("test_missing_capability", json!({})));
    assert!(
        matches!(&refused, Err(e) if e.contains(refusal)),
        "directly: {refused:?}"
    );
    for server in ["cs", "ch"] {
        let view = format!("{url}/{server}");
        let mut plain = PyClient::http_with(&env, &["--name=plain"], &view, &[]);
        let refused = plain.try_run(call("test_missing_capability", json!({})));
        assert!(
            matches!(&refused, Err(e) if e.contains(refusal)),
            "{server}: the server itself refused, as directly: {refused:?}"
        );
        let mut sampler = agent(&env, &url, server, "S");
        let (answer, _) = sampler.call("test_missing_capability", json!({}));
        assert!(
            text_of(&answer).contains("sampled by S"),
            "{server}: an agent with sampling is asked: {answer}"
        );
    }
}

/// A stdio server that asked an agent something in an earlier run of the
/// controller serializes the calls of different agents from the start of
/// the next: two agents whose calls both ask at once are each asked their
/// own. (Untold, both calls would be in flight when the server asks, the
/// requests could not be told apart, and they would be refused after
/// waiting for calls that cannot end.)
#[test]
fn a_server_that_asked_in_an_earlier_run_is_serialized_from_the_start() {
    let env = Env::new();
    env.user_mcp_servers(&[("cs", conformance_stdio())]);
    let start = || {
        let c = env.start(&["--mcp-listen", "127.0.0.1:0"]);
        let s = c.wait_for("cs Ready", |s| ready(s, "cs"));
        let url = http_url(&s);
        (c, url)
    };
    {
        // The first run learns it: A's call asks while B's is in flight.
        let (c, url) = start();
        let mut a = agent(&env, &url, "cs", "A");
        let mut b = agent(&env, &url, "cs", "B");
        b.send(&call("test_sleep", json!({"ms": 1500})));
        wait_until("B's call reached the server", || in_flight(&c, "cs") >= 1);
        let (first, _) = a.call("test_input_required_result_elicitation", json!({}));
        assert_eq!(text_of(&first), "Hello, A!");
        assert_eq!(answered(&mut b, "B's call"), "xx");
    }
    let cache = std::fs::read_to_string(walk(env.root.path()).expect("a catalog cache"))
        .unwrap_or_default();
    assert!(cache.contains("\"asks\":true"), "{cache}");
    let (c, url) = start();
    let mut a = agent(&env, &url, "cs", "A");
    let mut b = agent(&env, &url, "cs", "B");
    for client in [&mut a, &mut b] {
        client.send(&call(
            "test_input_required_result_elicitation",
            json!({"delayMs": 500}),
        ));
    }
    assert_eq!(answered(&mut a, "A's call"), "Hello, A!");
    assert_eq!(answered(&mut b, "B's call"), "Hello, B!");
    drop(c);
}

/// The first `catalogCache.json` under `dir`.
fn walk(dir: &std::path::Path) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.map_while(Result::ok) {
        let path = entry.path();
        if path.file_name().is_some_and(|n| n == "catalogCache.json") {
            return Some(path);
        }
        if path.is_dir()
            && let Some(found) = walk(&path)
        {
            return Some(found);
        }
    }
    None
}

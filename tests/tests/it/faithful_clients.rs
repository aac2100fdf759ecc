//! The faithful path (product.md §15) with agents of different real SDKs
//! on one server: the TypeScript SDK beside the PyPI SDK's 2.x and 1.x.
//! What a server asks during a call (elicitation, sampling, roots) reaches
//! the agent whose call caused it, whichever SDK that agent is and in both
//! call orders, on the conformance test server over stdio (`cs`) and over
//! HTTP (`ch`); the `_meta` each SDK sends on a call reaches the server.
//! The agents come over Steward's HTTP endpoint and, for the TypeScript
//! SDK, over `steward mcp --server` too (stdio). And Qwen Code, a real
//! agent driven headless by a scripted model, calls through Steward with
//! its roots and its `_meta`. A missing peer fails the test.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use serde_json::{Value, json};
use steward_tests::harness::{Controller, Env, mcp, ready, wait_until};

use crate::faithful::{answered, call, conformance_workspace, in_flight, listening};
use crate::real_clients::{PyClient, Sdk, output_within, python, steward_mcp_argv, text_of};

/// The protocol's own keys (`io.modelcontextprotocol/…`) of a `_meta`.
fn protocol_keys(meta: &Value) -> Vec<&String> {
    meta.as_object()
        .map(|m| {
            m.keys()
                .filter(|k| k.starts_with("io.modelcontextprotocol/"))
                .collect()
        })
        .unwrap_or_default()
}

/// How an agent reaches Steward's one-server view of a server.
#[derive(Debug, Clone, Copy)]
enum Via {
    /// `http://…/mcp/SERVER`.
    Http,
    /// `steward mcp --workspace WS --server SERVER`, spawned by the client.
    Stdio,
}

/// An agent of `sdk` on the one-server view of `server`, declaring
/// elicitation, sampling and roots, answering each as `name` (roots:
/// `file:///NAME`).
fn agent(env: &Env, url: &str, sdk: Sdk, via: Via, server: &str, name: &str) -> PyClient {
    let options = [
        "--sampling".to_owned(),
        "--elicitation".to_owned(),
        format!("--name={name}"),
        format!("--roots=file:///{name}"),
    ];
    let options: Vec<&str> = options.iter().map(String::as_str).collect();
    PyClient::of(sdk, env, &options, &target(env, url, via, server))
}

/// The driver's target for the one-server view of `server`.
fn target(env: &Env, url: &str, via: Via, server: &str) -> Vec<String> {
    match via {
        Via::Http => vec!["http".to_owned(), format!("{url}/{server}")],
        Via::Stdio => {
            let mut argv = vec!["stdio".to_owned()];
            argv.extend(steward_mcp_argv(env));
            argv.extend(["--server".to_owned(), server.to_owned()]);
            argv
        }
    }
}

/// One kind of server request: the tool that makes it, its arguments for
/// the caller `name`, and the answer that says `name`'s agent answered.
struct Ask {
    what: &'static str,
    tool: &'static str,
    arguments: fn(&str) -> Value,
    answer: fn(&str) -> String,
}

const ASKS: [Ask; 3] = [
    Ask {
        what: "elicitation",
        tool: "test_input_required_result_elicitation",
        arguments: |_| json!({}),
        answer: |name| format!("Hello, {name}!"),
    },
    Ask {
        what: "sampling",
        tool: "test_sampling",
        arguments: |name| json!({"prompt": format!("for {name}")}),
        answer: |name| format!("LLM response: sampled by {name}: for {name}"),
    },
    Ask {
        what: "roots",
        tool: "test_input_required_result_list_roots",
        arguments: |_| json!({}),
        answer: |name| format!("Roots: file:///{name}"),
    },
];

/// `ask`'s arguments for `name`'s call, asking after `delay_ms`.
fn arguments(ask: &Ask, name: &str, delay_ms: u64) -> Value {
    let mut arguments = (ask.arguments)(name);
    if delay_ms > 0 {
        arguments["delayMs"] = json!(delay_ms);
    }
    arguments
}

/// What each of two agents' calls to `server` asks (elicitation, sampling,
/// roots) reaches that agent, in both orders: the first calls, asking only
/// after a while; the second calls and asks at once while the first call
/// is in flight. `a` answers as "A", `b` as "B" (as `faithful::both_orders`
/// does with agents of one SDK).
fn each_answers_its_own(c: &Controller, server: &str, a: &mut PyClient, b: &mut PyClient) {
    for ask in &ASKS {
        for flip in [false, true] {
            let (first, second, first_name, second_name) = if flip {
                (&mut *b, &mut *a, "B", "A")
            } else {
                (&mut *a, &mut *b, "A", "B")
            };
            first.send(&call(ask.tool, arguments(ask, first_name, 1500)));
            wait_until("the first call reached the server", || {
                in_flight(c, server) >= 1
            });
            let (second_answer, _) = second.call(ask.tool, arguments(ask, second_name, 0));
            assert_eq!(
                text_of(&second_answer),
                (ask.answer)(second_name),
                "{server}, {}: the second call's request went to its own agent ({second_name})",
                ask.what
            );
            assert_eq!(
                answered(first, "the first call"),
                (ask.answer)(first_name),
                "{server}, {}: the first call's request went to its own agent ({first_name})",
                ask.what
            );
        }
    }
}

/// A's call (`a`, answering as `name`) asks while B's, which asks nothing,
/// is in flight: the request is A's. Over HTTP the stream it comes on says so; on stdio, where the
/// wire does not, it waits until B's call is done (never a guess), and from
/// then on calls of different agents to that server are serialized, so each
/// later request has one agent to go to. (Had B's call asked too, neither
/// call could end while its request waited: after its wait Steward refuses
/// the request that came first, saying it cannot tell whose it is.)
fn the_first_request_waits_for_one_agents_calls(
    c: &Controller,
    server: &str,
    (a, name): (&mut PyClient, &str),
    b: &mut PyClient,
) {
    b.send(&call("test_sleep", json!({"ms": 1500})));
    wait_until("B's call reached the server", || in_flight(c, server) >= 1);
    let (asked, _) = a.call("test_input_required_result_elicitation", json!({}));
    assert_eq!(text_of(&asked), format!("Hello, {name}!"), "{server}");
    assert_eq!(answered(b, "B's call"), "xx", "{server}");
}

/// Agents `a` (as "A") and `b` (as "B") of two SDKs on each of `ch` and
/// `cs`: each gets what its own calls ask; both then leave cleanly.
fn two_sdks_on_one_server(a: (Sdk, Via), b: (Sdk, Via)) {
    let env = Env::new();
    let (c, url, _remote) = conformance_workspace(&env);
    for server in ["ch", "cs"] {
        let mut first = agent(&env, &url, a.0, a.1, server, "A");
        let mut second = agent(&env, &url, b.0, b.1, server, "B");
        the_first_request_waits_for_one_agents_calls(&c, server, (&mut first, "A"), &mut second);
        each_answers_its_own(&c, server, &mut first, &mut second);
        first.close();
        second.close();
    }
}

#[test]
fn a_typescript_and_a_pypi_2x_agent_on_one_server_each_answer_what_their_own_calls_ask() {
    two_sdks_on_one_server((Sdk::TypeScript, Via::Http), (Sdk::PyPi2, Via::Http));
}

#[test]
fn a_typescript_agent_over_stdio_and_a_pypi_1x_agent_each_answer_what_their_own_calls_ask() {
    two_sdks_on_one_server((Sdk::TypeScript, Via::Stdio), (Sdk::PyPi1, Via::Http));
}

#[test]
fn the_meta_each_sdk_sends_on_a_call_reaches_the_server_but_for_what_steward_owns() {
    let env = Env::new();
    let (_c, url, _remote) = conformance_workspace(&env);
    let traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let agents = [
        (Sdk::TypeScript, Via::Http),
        (Sdk::TypeScript, Via::Stdio),
        (Sdk::PyPi1, Via::Http),
        (Sdk::PyPi2, Via::Http),
    ];
    for server in ["cs", "ch"] {
        for (sdk, via) in agents {
            let mut client = PyClient::of(sdk, &env, &[], &target(&env, &url, via, server));
            let meta = json!({
                "claudecode/toolUseId": "toolu_01",
                "qwen-code/invocation": {"version": 1, "sessionId": "s-1", "promptId": "p-1"},
                "threadId": "t-1",
                "example.com/sdk": format!("{sdk:?}"),
                "traceparent": traceparent,
            });
            let answer = client.run(json!({
                "op": "call_tool", "name": "test_echo_meta", "arguments": {},
                "meta": meta, "progress": true,
            }));
            let seen = &answer["result"]["structuredContent"]["meta"];
            let who = format!("{server}, {sdk:?} over {via:?}");
            for key in [
                "claudecode/toolUseId",
                "qwen-code/invocation",
                "threadId",
                "example.com/sdk",
            ] {
                assert_eq!(seen[key], meta[key], "{who}: {key} arrived: {seen}");
            }
            assert_eq!(seen["traceparent"], json!(traceparent), "{who}: {seen}");
            // The progress token is Steward's own (mapped back to the client's).
            assert!(seen["progressToken"].is_number(), "{who}: {seen}");
            // Of the protocol's keys, only what Steward says of this agent
            // on the server's session: it declared nothing to answer.
            assert_eq!(
                protocol_keys(seen),
                ["io.modelcontextprotocol/clientCapabilities"],
                "{who}: {seen}"
            );
            assert_eq!(
                seen["io.modelcontextprotocol/clientCapabilities"],
                json!({"roots": {"listChanged": true}}),
                "{who}: {seen}"
            );
            client.close();
        }
    }
}

/// `tests/clients/fake_model.py`: an OpenAI-compatible endpoint that asks
/// for `tools` one after the other (its own process, ended with the test).
struct FakeModel {
    child: Child,
    url: String,
    log: PathBuf,
}

impl FakeModel {
    fn start(env: &Env, tools: &[&str]) -> FakeModel {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/fake_model.py");
        let port_file = env.root.path().join("model.port");
        let log = env.root.path().join("model.jsonl");
        let mut command = Command::new(python());
        command
            .arg("-B")
            .arg(script)
            .arg(&port_file)
            .arg(&log)
            .arg(tools.join(","));
        let (child, port) = listening(command, &port_file, "the fake model");
        FakeModel {
            child,
            url: format!("http://127.0.0.1:{port}/v1"),
            log,
        }
    }

    /// The texts of the tool results the agent sent back, in order (from
    /// its request that carried the most of them).
    fn tool_results(&self) -> Vec<String> {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let results = |request: &Value| -> Vec<String> {
            let messages = request["body"]["messages"].as_array().cloned();
            messages
                .unwrap_or_default()
                .iter()
                .filter(|m| m["role"] == "tool")
                .map(|m| match &m["content"] {
                    Value::String(text) => text.clone(),
                    parts => text_of(&json!({ "content": parts })),
                })
                .collect()
        };
        log.lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .map(|request| results(&request))
            .max_by_key(Vec::len)
            .unwrap_or_default()
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Qwen Code 0.24 (the real agent, headless: `qwen -p`, its model the fake
/// one) registered with `steward mcp --server cs` as the README says: the
/// tools its model calls reach the server through Steward; the server's
/// `roots/list` is answered by Qwen Code (it declares roots, never
/// elicitation nor sampling) with every directory of its workspace — the
/// one `--include-directories` adds too, which Steward alone would not
/// know —; its model's elicitation-asking call fails with the protocol's
/// error, as Qwen Code declared no elicitation; and the `_meta` it sends on
/// a call reaches the server: headless, that is the progress token only
/// (Steward's own there). Qwen Code sends
/// `qwen-code/invocation` only inside an ACP session of a trusted parent
/// process, and only to stdio servers; Steward passes that key through
/// (the SDK tests above).
#[test]
fn qwen_code_calls_through_steward_and_the_server_gets_qwens_roots_and_meta() {
    let qwen = crate::common::peer("@qwen-code/qwen-code", "node_modules/.bin/qwen");
    let env = Env::new();
    let extra = env.root.path().join("extra");
    let tmp = env.root.path().join("tmp");
    std::fs::create_dir_all(&extra).unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    let mut steward = steward_mcp_argv(&env);
    steward.extend(["--server".to_owned(), "cs".to_owned()]);
    // One settings file for both, as a Qwen Code user has it: Steward's
    // servers, and Steward registered with Qwen Code (Steward blocks that
    // entry of its own; Qwen Code connects to it alone). Qwen Code defers
    // MCP tools behind its tool search unless `alwaysLoadTools`.
    env.write_home(
        "settings.json",
        &serde_json::to_string_pretty(&json!({
            "mcpServers": {
                "cs": crate::faithful::conformance_stdio(),
                "steward": {"command": steward[0], "args": steward[1..], "alwaysLoadTools": true},
            },
            "security": {"auth": {"selectedType": "openai"}},
            "model": {"name": "fake"},
        }))
        .unwrap(),
    );
    let c = env.start(&[]);
    c.wait_for("cs Ready", |s| ready(s, "cs"));
    let model = FakeModel::start(
        &env,
        &[
            "test_input_required_result_list_roots",
            "test_echo_meta",
            "test_input_required_result_elicitation",
        ],
    );
    let mut command = Command::new(qwen);
    command
        .args(["-p", "Call the tools of the steward server."])
        .args(["--allowed-mcp-server-names", "steward"])
        .arg("--include-directories")
        .arg(&extra)
        .args(["--approval-mode", "yolo"])
        .current_dir(&env.ws)
        .env_clear()
        .envs(env.steward_env())
        .env("TMPDIR", &tmp)
        .env("NO_COLOR", "1")
        .env("QWEN_CODE_SUPPRESS_YOLO_WARNING", "1")
        .env("OPENAI_API_KEY", "fake")
        .env("OPENAI_BASE_URL", &model.url)
        .env("OPENAI_MODEL", "fake");
    let out = output_within(command, Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.trim() == "done",
        "qwen -p: {}\n{stdout}\n{stderr}",
        out.status
    );
    let results = model.tool_results();
    assert_eq!(results.len(), 3, "{results:?}\n{stderr}");
    let url = |dir: &Path| format!("file://{}", dir.display());
    assert_eq!(
        results[0],
        format!("Roots: {}, {}", url(&env.ws), url(&extra)),
        "the server got Qwen Code's roots"
    );
    let meta: Value = results[1]
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find_map(|v| v.get("meta").cloned())
        .unwrap_or_else(|| panic!("no meta in {:?}", results[1]));
    assert!(meta["progressToken"].is_number(), "{meta}");
    // What headless Qwen Code sends is the progress token alone; the
    // protocol's key is Steward's, saying what Qwen Code declared: roots
    // (its own), no sampling, no elicitation.
    let keys: Vec<&String> = meta.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "io.modelcontextprotocol/clientCapabilities",
            "progressToken"
        ],
        "{meta}"
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientCapabilities"],
        json!({"roots": {"listChanged": true}}),
        "{meta}"
    );
    // Qwen Code declares no elicitation, and the server hears so for its
    // call: the server refuses it as it would directly (nothing is sent to
    // another agent), and the call fails with that.
    assert!(
        results[2].contains("did not declare the capability elicitation"),
        "{:?}",
        results[2]
    );
    // Every call was Qwen Code's, through Steward, and each ran once.
    let calls = mcp(&c.status(), "cs").and_then(|s| s.status.calls).unwrap();
    assert_eq!(calls.total, 3, "{calls:?}");
}

/// Three agents, one of each SDK, each asked something else during its
/// call — the TypeScript agent sampling, the PyPI 1.x one roots, the PyPI
/// 2.x one elicitation —, their calls overlapping: each answers its own.
#[test]
fn three_agents_of_three_sdks_on_one_server_each_answer_what_their_own_calls_ask() {
    let env = Env::new();
    let (c, url, _remote) = conformance_workspace(&env);
    for server in ["ch", "cs"] {
        let mut ts = agent(&env, &url, Sdk::TypeScript, Via::Http, server, "T");
        let mut one = agent(&env, &url, Sdk::PyPi1, Via::Http, server, "O");
        let mut two = agent(&env, &url, Sdk::PyPi2, Via::Http, server, "W");
        the_first_request_waits_for_one_agents_calls(&c, server, (&mut two, "W"), &mut one);
        let [elicitation, sampling, roots] = &ASKS;
        ts.send(&call(sampling.tool, arguments(sampling, "T", 1000)));
        wait_until("T's call reached the server", || in_flight(&c, server) >= 1);
        one.send(&call(roots.tool, arguments(roots, "O", 300)));
        let (answer, _) = two.call(elicitation.tool, arguments(elicitation, "W", 0));
        assert_eq!(text_of(&answer), (elicitation.answer)("W"), "{server}");
        assert_eq!(
            answered(&mut ts, "T's sampling"),
            (sampling.answer)("T"),
            "{server}"
        );
        assert_eq!(
            answered(&mut one, "O's roots"),
            (roots.answer)("O"),
            "{server}"
        );
        for agent in [ts, one, two] {
            agent.close();
        }
    }
}

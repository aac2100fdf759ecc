//! Envtest: the agent endpoint's `lsp` tool (Qwen Code's `lsp` tool
//! interface), driven through the controller's agent socket by
//! an rmcp client, against the fake language server and against the real
//! clangd and pyright. Every wait is a condition with a deadline.
//!
//! The fake server's toy language (see `src/bin/fake-lsp-server/main.rs`):
//! `fn <name>` defines a function whose body runs to the next definition,
//! `impl <name>` implements it, any other occurrence calls it, and `ERROR`
//! is an error.

use std::time::{Duration, Instant};

use crate::common::{one_at_a_time, peer};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt as _};
use serde_json::{Value, json};
use steward_schema::resource::{Phase, Reason};
use steward_tests::fake_lsp::{Config, Event, Indexing, read_records};
use steward_tests::harness::{
    Env, eventually_async, lsp, lsp_json, lsp_pid, lsp_ready, wait_until_async,
};

type Client = RunningService<RoleClient, ()>;

/// The toy workspace: `helper` is defined on a.aa:3:4, called from `main`
/// (a.aa:2:5) and `other` (b.aa:3:5), implemented on b.aa:1:6, and calls
/// `leaf`.
const A: &str = "fn main\n    helper ERROR\nfn helper\n    leaf\nfn leaf\n";
const B: &str = "impl helper\nfn other\n    helper\n";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Connect to the running controller's agent socket.
async fn attach(env: &Env) -> Client {
    let stream = tokio::net::UnixStream::connect(env.paths().mcp_socket_path())
        .await
        .expect("connect to the agent socket");
    let (read, write) = stream.into_split();
    ().serve((read, write)).await.expect("initialize")
}

async fn lsp_call(client: &Client, arguments: Value) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object")
    };
    client
        .call_tool(CallToolRequestParams::new("lsp").with_arguments(arguments))
        .await
        .unwrap_or_else(|e| panic!("call lsp: {e}"))
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A successful call: its text and structured content.
async fn ok(client: &Client, arguments: Value) -> (String, Value) {
    let result = lsp_call(client, arguments.clone()).await;
    let body = text(&result);
    assert_eq!(
        result.is_error,
        Some(false),
        "lsp {arguments} failed: {body}"
    );
    let data = result
        .structured_content
        .clone()
        .expect("structuredContent");
    (body, data)
}

/// A refused call: its text.
async fn refused(client: &Client, arguments: Value) -> String {
    let result = lsp_call(client, arguments.clone()).await;
    let body = text(&result);
    assert_eq!(
        result.is_error,
        Some(true),
        "lsp {arguments} should fail: {body}"
    );
    body
}

/// The text lines of a result, for exact matches.
fn lines(body: &str) -> Vec<&str> {
    body.lines().collect()
}

fn recv_methods(env: &Env, name: &str, method: &str) -> Vec<(u32, Value)> {
    read_records(&env.record(name))
        .into_iter()
        .filter(|r| r.event == Event::Recv && r.message["method"] == json!(method))
        .map(|r| (r.pid, r.message["params"].clone()))
        .collect()
}

/// The toy workspace with the fake server `alpha` for `.aa` and the
/// controller running, `alpha` Ready.
fn toy(env: &Env, config: Config) -> steward_tests::harness::Controller {
    env.write("a.aa", A);
    env.write("b.aa", B);
    env.write(
        ".lsp.json",
        &lsp_json(&[("alpha", env.fake_lsp("alpha", config, &[".aa"]))]),
    );
    let c = env.start(&[]);
    c.wait_for("alpha Ready", |s| lsp_ready(s, "alpha"));
    c
}

#[test]
fn the_lsp_tool_answers_every_operation_with_workspace_paths_and_source_lines() {
    let env = Env::new();
    let _c = toy(&env, Config::default());
    runtime().block_on(async {
        let client = attach(&env).await;
        let tools: Vec<String> = client
            .list_all_tools()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name.into_owned())
            .collect();
        assert_eq!(tools, ["lsp"], "listed while alpha is Ready");

        // goToDefinition: 1-based in, 1-based out, the source line after.
        let (body, data) = ok(
            &client,
            json!({"operation": "goToDefinition", "filePath": "a.aa", "line": 2, "character": 5}),
        )
        .await;
        assert_eq!(
            lines(&body),
            ["1 definition at a.aa:2:5 [alpha]:", "a.aa:3:4: fn helper"]
        );
        assert_eq!(
            data["locations"][0],
            json!({"path": "a.aa", "line": 3, "character": 4, "endLine": 3, "endCharacter": 10, "text": "fn helper"})
        );
        assert_eq!(data["server"], "alpha");
        assert_eq!(data["operation"], "goToDefinition");
        let sent = recv_methods(&env, "alpha", "textDocument/definition");
        assert_eq!(
            sent[0].1["position"],
            json!({"line": 1, "character": 4}),
            "0-based on the wire"
        );

        // hover: the server's markdown as text. An absolute path works too.
        let a = env.ws.join("a.aa");
        let (body, data) = ok(
            &client,
            json!({"operation": "hover", "filePath": a, "line": 2, "character": 7}),
        )
        .await;
        let uri = format!("file://{}", a.display());
        assert_eq!(
            body,
            format!("Hover at a.aa:2:7 [alpha]:\nfake-hover alpha {uri} 1:6 v1 word=helper")
        );
        assert_eq!(data["range"]["line"], 2);
        assert_eq!(data["range"]["character"], 5);

        // findReferences (includeDeclaration defaults to false, as in Qwen Code).
        let (body, _) = ok(
            &client,
            json!({"operation": "findReferences", "filePath": "a.aa", "line": 3, "character": 4}),
        )
        .await;
        assert_eq!(
            lines(&body),
            [
                "2 references at a.aa:3:4 [alpha]:",
                "a.aa:2:5: helper ERROR",
                "a.aa:3:4: fn helper"
            ]
        );
        let sent = recv_methods(&env, "alpha", "textDocument/references");
        assert_eq!(sent[0].1["context"], json!({"includeDeclaration": false}));
        let (_, data) = ok(
            &client,
            json!({"operation": "findReferences", "filePath": "a.aa", "line": 3, "character": 4,
                   "includeDeclaration": true, "limit": 1}),
        )
        .await;
        assert_eq!(data["total"], 2);
        assert_eq!(data["locations"].as_array().map(Vec::len), Some(1), "limit");
        let sent = recv_methods(&env, "alpha", "textDocument/references");
        assert_eq!(sent[1].1["context"], json!({"includeDeclaration": true}));

        // documentSymbol: kind names, not numbers. Opens b.aa for what follows.
        let (body, data) =
            ok(&client, json!({"operation": "documentSymbol", "filePath": "b.aa"})).await;
        assert_eq!(
            lines(&body),
            ["1 symbol in b.aa [alpha]:", "other (Function) — b.aa:2:4: fn other"]
        );
        assert_eq!(data["symbols"][0]["kind"], "Function");
        assert_eq!(data["symbols"][0]["server"], "alpha");

        // goToImplementation.
        let (body, _) = ok(
            &client,
            json!({"operation": "goToImplementation", "filePath": "a.aa", "line": 3, "character": 6}),
        )
        .await;
        assert_eq!(
            lines(&body),
            ["1 implementation at a.aa:3:6 [alpha]:", "b.aa:1:6: impl helper"]
        );

        // workspaceSymbol, with the references of the best match.
        let (body, data) = ok(&client, json!({"operation": "workspaceSymbol", "query": "help"})).await;
        assert_eq!(
            lines(&body),
            [
                "1 symbol matching \"help\":",
                "helper (Function) in fake — a.aa:3:4: fn helper [alpha]",
                "2 references of helper:",
                "a.aa:2:5: helper ERROR",
                "a.aa:3:4: fn helper"
            ]
        );
        assert_eq!(data["symbols"][0]["server"], "alpha");

        // diagnostics: severity names, the source line under each.
        let (body, data) = ok(&client, json!({"operation": "diagnostics", "filePath": "a.aa"})).await;
        assert_eq!(
            lines(&body),
            [
                "1 error in a.aa [alpha]:",
                "a.aa:2:12: error: fake error [alpha E1]",
                "    helper ERROR"
            ]
        );
        assert_eq!(data["diagnostics"][0]["severity"], "error");

        // workspaceDiagnostics: every document the server knows.
        let (body, data) = ok(&client, json!({"operation": "workspaceDiagnostics"})).await;
        assert_eq!(
            lines(&body),
            [
                "1 error in 1 file:",
                "a.aa [alpha]:",
                "a.aa:2:12: error: fake error [alpha E1]",
                "    helper ERROR"
            ]
        );
        assert_eq!(data["files"][0]["path"], "a.aa");

        // codeActions: the reported diagnostic in the range goes along.
        let (body, data) = ok(
            &client,
            json!({"operation": "codeActions", "filePath": "a.aa", "line": 2, "character": 12,
                   "endLine": 2, "endCharacter": 17}),
        )
        .await;
        assert!(
            body.starts_with("2 code actions at a.aa:2:12-2:17 [alpha]:\n1. Replace ERROR with OK [quickfix, preferred]\n   replace a.aa:2:12-2:17 with \"OK\"\n2. Shout this line [refactor.rewrite]"),
            "{body}"
        );
        assert_eq!(data["actions"][0]["edits"][0]["newText"], "OK");
        let sent = recv_methods(&env, "alpha", "textDocument/codeAction");
        assert_eq!(
            sent[0].1["range"],
            json!({"start": {"line": 1, "character": 11}, "end": {"line": 1, "character": 16}})
        );
        assert_eq!(sent[0].1["context"]["diagnostics"][0]["message"], "fake error");
        // Given diagnostics (as the diagnostics operation returned them) and kinds.
        let given = json!({"range": {"start": {"line": 2, "character": 12}, "end": {"line": 2, "character": 17}},
                           "message": "fake error", "severity": "error"});
        let (_, data) = ok(
            &client,
            json!({"operation": "codeActions", "filePath": "a.aa", "line": 1,
                   "diagnostics": [given], "codeActionKinds": ["quickfix"]}),
        )
        .await;
        assert_eq!(data["actions"].as_array().map(Vec::len), Some(1), "{data}");
        let sent = recv_methods(&env, "alpha", "textDocument/codeAction");
        assert_eq!(
            sent[1].1["context"]["diagnostics"][0]["range"]["start"],
            json!({"line": 1, "character": 11}),
            "the server's own diagnostic went back"
        );
        assert_eq!(sent[1].1["context"]["only"], json!(["quickfix"]));

        client.cancel().await.unwrap();
    });
}

#[test]
fn a_call_hierarchy_item_round_trips_with_its_server_name_and_goes_stale_with_its_file() {
    let env = Env::new();
    let _c = toy(&env, Config::default());
    runtime().block_on(async {
        let client = attach(&env).await;
        // b.aa open too, so `other` is known.
        ok(&client, json!({"operation": "documentSymbol", "filePath": "b.aa"})).await;
        let (body, data) = ok(
            &client,
            json!({"operation": "prepareCallHierarchy", "filePath": "a.aa", "line": 3, "character": 5}),
        )
        .await;
        assert!(
            body.starts_with(
                "1 call hierarchy item at a.aa:3:5 [alpha]:\nhelper (Function) fake function — a.aa:3:4: fn helper"
            ),
            "{body}"
        );
        let item = data["items"][0].clone();
        assert_eq!(item["serverName"], "alpha");
        assert_eq!(item["selectionRange"]["start"], json!({"line": 3, "character": 4}));
        assert!(item["documentRevision"].is_string(), "{item}");
        // The text carries the item too (one JSON line), for agents that read only text.
        let from_text: Value = serde_json::from_str(body.lines().last().unwrap()).unwrap();
        assert_eq!(from_text, item);

        let (body, data) = ok(&client, json!({"operation": "incomingCalls", "callHierarchyItem": item})).await;
        assert!(
            body.starts_with(
                "2 callers of helper (a.aa:3:4) [alpha]:\n\
                 main (Function) fake function — a.aa:1:4: fn main\n    called at a.aa:2:5: helper ERROR\n\
                 other (Function) fake function — b.aa:2:4: fn other\n    called at b.aa:3:5: helper"
            ),
            "{body}"
        );
        let sent = recv_methods(&env, "alpha", "callHierarchy/incomingCalls");
        assert_eq!(
            sent[0].1["item"]["selectionRange"],
            json!({"start": {"line": 2, "character": 3}, "end": {"line": 2, "character": 9}}),
            "the item went back in LSP coordinates"
        );
        assert_eq!(sent[0].1["item"]["data"], json!({"fake": "helper"}));
        // A caller item can be walked further.
        let main = data["calls"][0]["from"].clone();
        let (body, _) = ok(&client, json!({"operation": "outgoingCalls", "callHierarchyItem": main})).await;
        assert!(
            body.starts_with("1 function called by main (a.aa:1:4) [alpha]:\nhelper (Function)"),
            "{body}"
        );
        let (body, _) = ok(&client, json!({"operation": "outgoingCalls", "callHierarchyItem": item})).await;
        assert!(
            body.starts_with(
                "1 function called by helper (a.aa:3:4) [alpha]:\nleaf (Function) fake function — a.aa:5:4: fn leaf\n    called at a.aa:4:5: leaf"
            ),
            "{body}"
        );
        // Some agents send the item as a JSON string.
        ok(
            &client,
            json!({"operation": "outgoingCalls", "callHierarchyItem": item.to_string()}),
        )
        .await;

        // An edited item, or one whose file changed since, is refused.
        let mut moved = item.clone();
        moved["selectionRange"]["start"]["line"] = json!(1);
        let body = refused(&client, json!({"operation": "incomingCalls", "callHierarchyItem": moved})).await;
        assert!(body.contains("call prepareCallHierarchy again"), "{body}");
        env.write("a.aa", &format!("{A}fn more\n"));
        let body = refused(&client, json!({"operation": "incomingCalls", "callHierarchyItem": item})).await;
        assert!(body.contains("is stale"), "{body}");
        client.cancel().await.unwrap();
    });
}

#[test]
fn paths_outside_the_workspace_missing_files_and_unhandled_types_are_refused_with_what_to_do() {
    let env = Env::new();
    let _c = toy(&env, Config::default());
    let outside = env.root.path().join("outside.aa");
    std::fs::write(&outside, A).unwrap();
    std::os::unix::fs::symlink(&outside, env.ws.join("link.aa")).unwrap();
    env.write("notes.zz", "nothing\n");
    runtime().block_on(async {
        let client = attach(&env).await;
        let at = |file: &str| json!({"operation": "hover", "filePath": file, "line": 1});
        let body = refused(&client, at("../outside.aa")).await;
        assert!(body.contains("is outside the workspace"), "{body}");
        let body = refused(&client, at(&outside.to_string_lossy())).await;
        assert!(body.contains("is outside the workspace"), "{body}");
        let body = refused(&client, at(&format!("file://{}", outside.display()))).await;
        assert!(body.contains("is outside the workspace"), "{body}");
        let body = refused(&client, at("link.aa")).await;
        assert!(
            body.contains("is outside the workspace") && body.contains("symlink"),
            "{body}"
        );
        let body = refused(&client, at("sub/../../outside.aa")).await;
        assert!(body.contains("is outside the workspace"), "{body}");
        let body = refused(&client, at("missing.aa")).await;
        assert!(body.contains("missing.aa does not exist"), "{body}");
        let body = refused(&client, at("notes.zz")).await;
        assert!(
            body.contains("handles \".zz\" files like notes.zz")
                && body.contains("extensionToLanguage"),
            "{body}"
        );
        let body = refused(
            &client,
            json!({"operation": "hover", "filePath": "a.aa", "line": 99}),
        )
        .await;
        assert!(
            body.contains("a.aa has 6 lines; line 99 is past its end"),
            "{body}"
        );
        let body = refused(
            &client,
            json!({"operation": "hover", "filePath": "a.aa", "line": 1, "serverName": "nope"}),
        )
        .await;
        assert!(
            body.contains("no such server (configured: alpha)"),
            "{body}"
        );
        client.cancel().await.unwrap();
    });
    // Nothing outside the workspace reached the server.
    let opened = recv_methods(&env, "alpha", "textDocument/didOpen");
    assert!(
        opened.iter().all(|(_, p)| !p["textDocument"]["uri"]
            .as_str()
            .unwrap()
            .contains("outside")),
        "{opened:?}"
    );
}

#[test]
fn a_server_that_cannot_run_is_named_with_its_reason() {
    let env = Env::new();
    env.write("a.aa", A);
    env.write("c.cc", "int x;\n");
    env.write("g.gg", "fn g\n");
    let broken =
        json!({"command": "/nonexistent/steward-test-lsp", "extensionToLanguage": {".cc": "cpp"}});
    env.write(
        ".lsp.json",
        &lsp_json(&[
            ("alpha", env.fake_lsp("alpha", Config::default(), &[".aa"])),
            ("broken", broken),
            ("gated", env.fake_lsp("gated", Config::default(), &[".gg"])),
        ]),
    );
    let c = env.start(&["--allowed-lsp-server-names", "alpha,broken"]);
    c.wait_for("alpha Ready, broken Failed, gated NotAllowed", |s| {
        lsp_ready(s, "alpha")
            && lsp(s, "broken").is_some_and(|l| l.status.phase == Phase::Failed)
            && lsp(s, "gated").is_some_and(|l| l.status.reason == Some(Reason::NotAllowed))
    });
    let reason = lsp(&c.status(), "broken").unwrap().status.reason;
    assert_eq!(reason, Some(Reason::CommandNotFound));
    runtime().block_on(async {
        let client = attach(&env).await;
        let started = Instant::now();
        let body = refused(
            &client,
            json!({"operation": "hover", "filePath": "c.cc", "line": 1}),
        )
        .await;
        assert!(
            body.contains("language server \"broken\" failed to start (CommandNotFound)")
                && body.contains("steward describe broken"),
            "{body}"
        );
        let body = refused(
            &client,
            json!({"operation": "documentSymbol", "filePath": "g.gg"}),
        )
        .await;
        assert!(
            body.contains("language server \"gated\" is not allowed"),
            "{body}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "a server that cannot run is reported at once"
        );
        client.cancel().await.unwrap();
    });
}

#[test]
fn a_call_while_its_server_restarts_waits_and_is_served_by_the_new_process() {
    let env = Env::new();
    let c = toy(&env, Config::default());
    let old = lsp_pid(&c.status(), "alpha").unwrap();
    runtime().block_on(async {
        let client = attach(&env).await;
        ok(
            &client,
            json!({"operation": "diagnostics", "filePath": "a.aa"}),
        )
        .await;
        // A config edit restarts alpha; the new process answers initialize slowly.
        let slow = Config {
            initialize_delay_ms: 1500,
            ..Config::default()
        };
        env.write(
            ".lsp.json",
            &lsp_json(&[("alpha", env.fake_lsp("alpha", slow, &[".aa"]))]),
        );
        tokio::task::block_in_place(|| {
            c.wait_for("alpha restarting", |s| {
                lsp(s, "alpha").is_some_and(|l| l.status.phase != Phase::Ready)
            })
        });
        let (body, _) = ok(
            &client,
            json!({"operation": "goToDefinition", "filePath": "a.aa", "line": 2, "character": 5}),
        )
        .await;
        assert!(body.ends_with("a.aa:3:4: fn helper"), "{body}");
        client.cancel().await.unwrap();
    });
    let new = lsp_pid(&c.status(), "alpha").unwrap();
    assert_ne!(new, old);
    let definitions = recv_methods(&env, "alpha", "textDocument/definition");
    assert_eq!(
        definitions.iter().map(|(pid, _)| *pid).collect::<Vec<_>>(),
        [new],
        "served by the new process, once"
    );
    // The document the old process had was replayed to the new one, once.
    let opens: Vec<u32> = recv_methods(&env, "alpha", "textDocument/didOpen")
        .into_iter()
        .filter(|(_, p)| {
            p["textDocument"]["uri"]
                .as_str()
                .unwrap()
                .ends_with("/a.aa")
        })
        .map(|(pid, _)| pid)
        .collect();
    assert_eq!(opens, [old, new], "{opens:?}");
}

#[test]
fn a_call_in_flight_when_its_server_dies_is_answered_by_the_restarted_server() {
    let env = Env::new();
    env.write("a.aa", A);
    let slow = Config {
        hover_delay_ms: 1500,
        ..Config::default()
    };
    let mut alpha = env.fake_lsp("alpha", slow, &[".aa"]);
    alpha["restartOnCrash"] = json!(true);
    env.write(".lsp.json", &lsp_json(&[("alpha", alpha)]));
    let c = env.start(&[]);
    let s = c.wait_for("alpha Ready", |s| lsp_ready(s, "alpha"));
    let old = lsp_pid(&s, "alpha").unwrap();
    runtime().block_on(async {
        let client = std::sync::Arc::new(attach(&env).await);
        let call = {
            let client = client.clone();
            tokio::spawn(async move {
                ok(
                    &client,
                    json!({"operation": "hover", "filePath": "a.aa", "line": 2, "character": 5}),
                )
                .await
            })
        };
        wait_until_async("the hover to reach alpha", async || {
            !recv_methods(&env, "alpha", "textDocument/hover").is_empty()
        })
        .await;
        assert!(steward_tests::harness::signal(old as i32, libc::SIGKILL));
        let (body, _) = call.await.unwrap();
        assert!(body.contains("word=helper"), "{body}");
    });
    let new = lsp_pid(&c.status(), "alpha").unwrap();
    assert_ne!(new, old);
    let hovers: Vec<u32> = recv_methods(&env, "alpha", "textDocument/hover")
        .into_iter()
        .map(|(pid, _)| pid)
        .collect();
    assert_eq!(hovers, [old, new], "asked again on the restarted server");
}

#[test]
fn an_empty_answer_on_a_document_just_opened_is_asked_again_once() {
    let env = Env::new();
    let warming = Config {
        warmup_ms: 1000,
        ..Config::default()
    };
    let _c = toy(&env, warming);
    runtime().block_on(async {
        let client = attach(&env).await;
        let (body, _) = ok(
            &client,
            json!({"operation": "goToDefinition", "filePath": "a.aa", "line": 2, "character": 5}),
        )
        .await;
        assert!(body.ends_with("a.aa:3:4: fn helper"), "{body}");
        // Once the document is open, an empty answer stands.
        let (body, _) = ok(
            &client,
            json!({"operation": "findReferences", "filePath": "a.aa", "line": 6}),
        )
        .await;
        assert_eq!(body, "No reference found at a.aa:6:1 [alpha].");
        client.cancel().await.unwrap();
    });
    assert_eq!(
        recv_methods(&env, "alpha", "textDocument/definition").len(),
        2
    );
    assert_eq!(
        recv_methods(&env, "alpha", "textDocument/references").len(),
        1
    );
}

/// A server reporting indexing progress answers nothing until it ends (the
/// fake's `indexing`): the call waits for the end and returns the real
/// answer, not "No definition found". The end comes later than the one
/// retry of a just-opened document would ask again, so only the wait gets
/// the answer.
#[test]
fn a_call_waits_for_the_servers_indexing_to_end() {
    let env = Env::new();
    let indexing = Config {
        indexing: Indexing::EndsAfterMs(4000),
        ..Config::default()
    };
    let _c = toy(&env, indexing);
    runtime().block_on(async {
        let client = attach(&env).await;
        let (body, _) = ok(
            &client,
            json!({"operation": "goToDefinition", "filePath": "a.aa", "line": 2, "character": 5}),
        )
        .await;
        assert_eq!(
            lines(&body),
            ["1 definition at a.aa:2:5 [alpha]:", "a.aa:3:4: fn helper"]
        );
        client.cancel().await.unwrap();
    });
    let records = read_records(&env.record("alpha"));
    let ended = records
        .iter()
        .find(|r| r.event == Event::Send && r.message["params"]["value"]["kind"] == "end")
        .expect("the fake ended its indexing")
        .t;
    let asked = records
        .iter()
        .rfind(|r| {
            r.event == Event::Recv && r.message["method"] == json!("textDocument/definition")
        })
        .expect("the definition was asked")
        .t;
    assert!(asked >= ended, "the answer was asked for after the end");
}

/// Indexing that never ends: after the server's startupTimeout the call
/// says the server is still indexing, with its percentage, instead of an
/// empty result; so does `steward lsp`.
#[test]
fn a_call_to_a_server_still_indexing_after_its_startup_timeout_says_so() {
    let env = Env::new();
    env.write("a.aa", A);
    env.write("b.aa", B);
    let never = Config {
        indexing: Indexing::Never,
        ..Config::default()
    };
    let mut alpha = env.fake_lsp("alpha", never, &[".aa"]);
    alpha["startupTimeout"] = json!(1000);
    env.write(".lsp.json", &lsp_json(&[("alpha", alpha)]));
    let c = env.start(&[]);
    c.wait_for("alpha Ready", |s| lsp_ready(s, "alpha"));
    runtime().block_on(async {
        let client = attach(&env).await;
        let body = refused(
            &client,
            json!({"operation": "findReferences", "filePath": "a.aa", "line": 3, "character": 4}),
        )
        .await;
        assert_eq!(
            body,
            "still indexing (alpha: 40 %): it did not finish within 1s, and an answer now \
             could be empty or incomplete; call again shortly"
        );
        // A workspace-wide operation says it for the server it skipped.
        let body = refused(
            &client,
            json!({"operation": "workspaceSymbol", "query": "helper"}),
        )
        .await;
        assert!(body.starts_with("still indexing (alpha: 40 %): "), "{body}");
        client.cancel().await.unwrap();
    });
    let at = format!("{}:3:4", env.ws.join("a.aa").display());
    let out = env.steward(&["lsp", "references", &at]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "use language server \"alpha\": still indexing (alpha: 40 %); it did not finish within 1s"
        ),
        "{stderr}"
    );
}

#[test]
fn the_tool_is_listed_only_while_a_language_server_is_ready() {
    let env = Env::new();
    let c = toy(&env, Config::default());
    runtime().block_on(async {
        let client = attach(&env).await;
        let listed = async || -> Vec<String> {
            client
                .list_all_tools()
                .await
                .unwrap()
                .into_iter()
                .map(|t| t.name.into_owned())
                .collect()
        };
        assert_eq!(listed().await, ["lsp"]);
        env.write(".lsp.json", "{}");
        tokio::task::block_in_place(|| c.wait_for("alpha removed", |s| lsp(s, "alpha").is_none()));
        wait_until_async("lsp no longer listed without a server", async || {
            listed().await.is_empty()
        })
        .await;
        let body = refused(
            &client,
            json!({"operation": "hover", "filePath": "a.aa", "line": 1}),
        )
        .await;
        assert!(
            body.contains("no language server of this workspace handles \".aa\" files"),
            "{body}"
        );
        client.cancel().await.unwrap();
    });
}

#[test]
fn a_server_with_pull_diagnostics_is_asked_for_them() {
    let env = Env::new();
    let pull = Config {
        pull_diagnostics: true,
        ..Config::default()
    };
    let _c = toy(&env, pull);
    runtime().block_on(async {
        let client = attach(&env).await;
        let (body, _) = ok(
            &client,
            json!({"operation": "diagnostics", "filePath": "a.aa"}),
        )
        .await;
        assert!(
            body.ends_with("a.aa:2:12: error: fake error [alpha E1]\n    helper ERROR"),
            "{body}"
        );
        ok(
            &client,
            json!({"operation": "documentSymbol", "filePath": "b.aa"}),
        )
        .await;
        let (_, data) = ok(&client, json!({"operation": "workspaceDiagnostics"})).await;
        assert_eq!(data["totalFiles"], 1, "{data}");
        client.cancel().await.unwrap();
    });
    assert_eq!(
        recv_methods(&env, "alpha", "textDocument/diagnostic").len(),
        1
    );
    let workspace = recv_methods(&env, "alpha", "workspace/diagnostic");
    assert_eq!(workspace.len(), 1);
    assert_eq!(workspace[0].1, json!({"previousResultIds": []}));
}

// ---- real peers ----

/// Node and Python servers start slowly on a loaded 2-core machine.
const PEER_DEADLINE: Duration = Duration::from_secs(60);

const MAIN_C: &str = "#include <stdio.h>

static int add_numbers(int left, int right) {
    return left + right;
}

int main(void) {
    int total = add_numbers(2, 3);
    printf(\"%d\\n\", total);
    return 0;
}
";

const BAD_C: &str = "int broken(void) {\n    return undefined_var;\n}\n";

/// clangd offers two fixes for the assignment in the condition.
const FIX_C: &str = "int f(int x) {\n    if (x = 2) return 1;\n    return 0;\n}\n";

const APP_PY: &str = "def greet(name: str) -> str:
    return \"hello \" + name


print(greet(\"world\"))
print(undefined_thing)
";

/// `clangd` from PATH (apt installs it there).
fn clangd() -> std::path::PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("clangd"))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| {
            panic!(
                "real peer clangd (apt package clangd) is missing: it is not on PATH; run .ci/run to install it"
            )
        })
}

/// Call until `accept` takes the answer (a real server may still be
/// indexing), within [`PEER_DEADLINE`].
async fn ok_eventually(
    client: &Client,
    arguments: Value,
    accept: impl Fn(&str, &Value) -> bool,
) -> (String, Value) {
    eventually_async(
        &format!("an acceptable answer to {arguments}"),
        PEER_DEADLINE,
        Duration::from_millis(200),
        async || {
            let (body, data) = ok(client, arguments.clone()).await;
            if accept(&body, &data) {
                Ok((body, data))
            } else {
                Err(format!("last:\n{body}"))
            }
        },
    )
    .await
}

#[test]
fn the_lsp_tool_against_clangd_and_pyright_gives_exact_locations() {
    let _one = one_at_a_time();
    let env = Env::new();
    env.write("main.c", MAIN_C);
    env.write("bad.c", BAD_C);
    env.write("fix.c", FIX_C);
    env.write("app.py", APP_PY);
    let pyright = peer("pyright", "node_modules/.bin/pyright-langserver");
    env.write(
        ".lsp.json",
        &lsp_json(&[
            (
                "clangd",
                json!({"command": clangd().to_string_lossy(), "extensionToLanguage": {".c": "c"},
                       "startupTimeout": 60_000}),
            ),
            (
                "pyright",
                json!({"command": pyright.to_string_lossy(), "args": ["--stdio"],
                       "extensionToLanguage": {".py": "python"}, "startupTimeout": 60_000}),
            ),
        ]),
    );
    let c = env.start(&[]);
    c.wait_for_within("clangd and pyright Ready", PEER_DEADLINE, |s| {
        lsp_ready(s, "clangd") && lsp_ready(s, "pyright")
    });
    runtime().block_on(async {
        let client = attach(&env).await;

        // clangd.
        let at_call = json!({"filePath": "main.c", "line": 8, "character": 17});
        let with = |op: &str, extra: Value| {
            let mut args = at_call.clone();
            args["operation"] = json!(op);
            for (k, v) in extra.as_object().unwrap() {
                args[k] = v.clone();
            }
            args
        };
        let (body, _) = ok(&client, with("goToDefinition", json!({}))).await;
        assert_eq!(
            lines(&body),
            [
                "1 definition at main.c:8:17 [clangd]:",
                "main.c:3:12: static int add_numbers(int left, int right) {"
            ]
        );
        let (body, _) = ok(&client, with("hover", json!({}))).await;
        assert!(
            body.starts_with("Hover at main.c:8:17 [clangd]:\n")
                && body.contains("add_numbers(int left, int right)"),
            "{body}"
        );
        let (body, _) = ok(&client, with("findReferences", json!({"includeDeclaration": true}))).await;
        assert_eq!(
            lines(&body),
            [
                "2 references at main.c:8:17 [clangd]:",
                "main.c:3:12: static int add_numbers(int left, int right) {",
                "main.c:8:17: int total = add_numbers(2, 3);"
            ]
        );
        let (body, _) = ok(&client, json!({"operation": "documentSymbol", "filePath": "main.c"})).await;
        assert_eq!(
            lines(&body),
            [
                "2 symbols in main.c [clangd]:",
                "add_numbers (Function) — main.c:3:12: static int add_numbers(int left, int right) {",
                "main (Function) — main.c:7:5: int main(void) {"
            ]
        );
        let (body, _) = ok(&client, json!({"operation": "diagnostics", "filePath": "bad.c"})).await;
        assert_eq!(
            lines(&body),
            [
                "1 error in bad.c [clangd]:",
                "bad.c:2:12: error: Use of undeclared identifier 'undefined_var' [clang undeclared_var_use]",
                "    return undefined_var;"
            ]
        );

        // pyright: it analyses a new file slowly, so ask until it has.
        let (body, _) = ok_eventually(
            &client,
            json!({"operation": "goToDefinition", "filePath": "app.py", "line": 5, "character": 7}),
            |body, _| !body.starts_with("No "),
        )
        .await;
        assert_eq!(
            lines(&body),
            [
                "1 definition at app.py:5:7 [pyright]:",
                "app.py:1:5: def greet(name: str) -> str:"
            ]
        );
        let (body, _) = ok(
            &client,
            json!({"operation": "hover", "filePath": "app.py", "line": 5, "character": 7}),
        )
        .await;
        assert!(
            body.starts_with("Hover at app.py:5:7 [pyright]:\n")
                && body.contains("def greet(name: str) -> str"),
            "{body}"
        );
        let (body, _) = ok(
            &client,
            json!({"operation": "findReferences", "filePath": "app.py", "line": 1, "character": 5,
                   "includeDeclaration": true}),
        )
        .await;
        assert_eq!(
            lines(&body),
            [
                "2 references at app.py:1:5 [pyright]:",
                "app.py:1:5: def greet(name: str) -> str:",
                "app.py:5:7: print(greet(\"world\"))"
            ]
        );
        let (body, _) = ok(&client, json!({"operation": "documentSymbol", "filePath": "app.py"})).await;
        assert!(
            body.contains("greet (Function) — app.py:1:5: def greet(name: str) -> str:"),
            "{body}"
        );
        let (body, _) = ok_eventually(
            &client,
            json!({"operation": "diagnostics", "filePath": "app.py"}),
            |body, _| body.contains("undefined_thing"),
        )
        .await;
        let undefined: Vec<&str> = body
            .lines()
            .skip_while(|l| !l.contains("undefined_thing"))
            .take(2)
            .collect();
        assert_eq!(
            undefined,
            [
                "app.py:6:7: error: \"undefined_thing\" is not defined [Pyright reportUndefinedVariable]",
                "    print(undefined_thing)"
            ],
            "{body}"
        );

        // Beyond the five: clangd's fixes (commands carrying their edit)
        // show what they change, a clangd call hierarchy item round-trips,
        // and pyright finds a workspace symbol.
        let (body, _) = ok(
            &client,
            json!({"operation": "codeActions", "filePath": "fix.c", "line": 2, "character": 11,
                   "endCharacter": 12}),
        )
        .await;
        assert!(
            body.contains("replace fix.c:2:11-2:12 with \"==\""),
            "{body}"
        );
        let (_, data) = ok(
            &client,
            json!({"operation": "prepareCallHierarchy", "filePath": "main.c", "line": 3, "character": 12}),
        )
        .await;
        let item = data["items"][0].clone();
        assert_eq!(item["serverName"], "clangd", "{data}");
        let (body, _) = ok(
            &client,
            json!({"operation": "incomingCalls", "callHierarchyItem": item}),
        )
        .await;
        assert!(
            body.starts_with(
                "1 caller of add_numbers (main.c:3:12) [clangd]:\nmain (Function)"
            ) && body.contains("    called at main.c:8:17: int total = add_numbers(2, 3);"),
            "{body}"
        );
        let (body, _) = ok(
            &client,
            json!({"operation": "workspaceSymbol", "query": "greet", "serverName": "pyright"}),
        )
        .await;
        assert!(
            body.contains("greet (Function) — app.py:1:5: def greet(name: str) -> str: [pyright]"),
            "{body}"
        );
        client.cancel().await.unwrap();
    });
    assert_eq!(
        lsp(&c.status(), "clangd").unwrap().status.restarts,
        0,
        "nobody restarted"
    );
}

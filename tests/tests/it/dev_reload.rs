//! Envtests of `dev` (issue 28): a change to a server's own source runs its
//! build, then replaces it as a configuration edit does, while the agent's
//! session goes on; a failing build keeps the running server; a burst of
//! saves is one rebuild; files outside the globs or under `node_modules`
//! change nothing; a dev server's new definitions are pinned afresh while a
//! plain server's are still quarantined; no build outlives the controller.
//!
//! The servers are a real Python server on the PyPI `mcp` SDK and the fake
//! MCP server reading its tools from an overlay file (the "code" a build
//! produces); the clients are the real PyPI and TypeScript SDK clients.

use std::path::Path;
use std::thread;

use serde_json::{Value, json};
use steward_schema::resource::{BuildResult, ConditionStatus, DevStatus, Phase, WorkspaceStatus};
use steward_tests::fake_mcp::{FakeMcpConfig, read_record};
use steward_tests::harness::{
    Env, alive, fake_tools, lsp_json, lsp_pid, lsp_ready, mcp, pid_of, ready, signal,
    wait_all_gone, wait_until,
};

use crate::real_clients::{PyClient, python, steward_mcp_argv};

fn dev_of(s: &WorkspaceStatus, name: &str) -> DevStatus {
    mcp(s, name)
        .and_then(|m| m.status.dev.clone())
        .unwrap_or_default()
}

fn condition(s: &WorkspaceStatus, name: &str, type_: &str) -> Option<(ConditionStatus, String)> {
    mcp(s, name)?
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status, c.message.clone().unwrap_or_default()))
}

fn tools_of(s: &WorkspaceStatus, name: &str) -> Vec<String> {
    mcp(s, name)
        .and_then(|m| m.status.tools.clone())
        .unwrap_or_default()
}

/// How many processes of fake server `name` started.
fn starts(env: &Env, name: &str) -> usize {
    read_record(&env.record(name))
        .unwrap()
        .iter()
        .filter(|e| e.event == "start")
        .count()
}

/// Events of `name` with `reason`, as (type, message).
fn events_of(env: &Env, name: &str, reason: &str) -> Vec<(String, String)> {
    let out = env.steward(&["events", "-o", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["involvedObject"]["name"] == name && e["reason"] == reason)
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_owned(),
                e["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The fake MCP server whose tools are read at start from `overlay` (what
/// a build produces, or the watched file itself), with `dev`.
fn fake_dev(env: &Env, name: &str, overlay: &Path, dev: Value) -> Value {
    let mut entry = env.fake_mcp(
        name,
        FakeMcpConfig {
            overlay_file: Some(overlay.to_path_buf()),
            ..fake_tools(&["placeholder"])
        },
    );
    entry["dev"] = dev;
    entry
}

fn overlay(tools: &[&str]) -> String {
    json!({ "tools": tools }).to_string()
}

/// A Python MCP server on the PyPI SDK: `hello`, a `slow` tool that
/// reports the pid that ran it, and `extra` tools.
fn python_server(extra: &[&str]) -> String {
    let mut text = String::from(
        r#"import os
import anyio
from mcp.server import MCPServer

app = MCPServer("devpy")


@app.tool()
def hello(name: str) -> str:
    """Say hello."""
    return f"hello {name}"


@app.tool()
async def slow(seconds: float) -> str:
    """Take a while, then say which process ran it."""
    await anyio.sleep(seconds)
    return f"slow done by {os.getpid()}"
"#,
    );
    for tool in extra {
        text.push_str(&format!(
            "\n\n@app.tool()\ndef {tool}() -> str:\n    \"\"\"{tool}.\"\"\"\n    return \"{tool}\"\n"
        ));
    }
    text.push_str("\n\nif __name__ == \"__main__\":\n    app.run()\n");
    text
}

#[test]
fn an_edited_python_server_is_replaced_under_a_connected_client_and_calls_in_flight_finish() {
    let env = Env::new();
    env.write("src/server.py", &python_server(&[]));
    let entry = json!({
        "command": python().to_string_lossy(),
        "args": ["-B", "src/server.py"],
        "dev": {"watch": "src/**/*.py"},
    });
    env.user_mcp_servers(&[("devpy", entry)]);
    let c = env.start(&[]);
    let s = c.wait_for("devpy Ready and watching", |s| {
        ready(s, "devpy") && dev_of(s, "devpy").watching
    });
    let old = pid_of(&s, "devpy").unwrap();
    assert_eq!(dev_of(&s, "devpy").files, 1);

    let argv = steward_mcp_argv(&env);
    let mut watcher = PyClient::stdio(&env, &argv);
    assert_eq!(watcher.tool_names(), ["devpy__hello", "devpy__slow"]);
    // A second session has a slow call in flight across the reload.
    let mut caller = PyClient::stdio(&env, &argv);
    let in_flight = thread::spawn(move || {
        let (result, _) = caller.call("devpy__slow", json!({"seconds": 3}));
        (result, caller)
    });
    c.wait_for("the slow call in flight", |s| {
        mcp(s, "devpy")
            .and_then(|m| m.status.calls)
            .is_some_and(|calls| calls.in_flight == 1)
    });

    env.write("src/server.py", &python_server(&["goodbye"]));
    watcher.wait_notification("notifications/tools/list_changed", 1);
    assert_eq!(
        watcher.tool_names(),
        ["devpy__hello", "devpy__slow", "devpy__goodbye"]
    );
    let (result, caller) = in_flight.join().unwrap();
    assert_eq!(result["isError"], json!(false), "{result}");
    assert_eq!(
        result["content"][0]["text"],
        json!(format!("slow done by {old}")),
        "the call in flight finished on the old process"
    );
    let s = c.wait_for("the new process Ready", |s| {
        ready(s, "devpy") && pid_of(s, "devpy").is_some_and(|p| p != old)
    });
    assert!(!alive(old));
    assert_eq!(dev_of(&s, "devpy").reloads, 1);
    // The same sessions go on: the new tool answers them.
    let (result, _) = watcher.call("devpy__goodbye", json!({}));
    assert_eq!(result["content"][0]["text"], json!("goodbye"));
    drop(caller);
    watcher.close();
    let changed = events_of(&env, "devpy", "SourceChanged");
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert!(
        changed[0]
            .1
            .starts_with(&format!("src/server.py changed: replacing pid {old}")),
        "{changed:?}"
    );
}

/// A fake server whose tools a build copies from `src/tools.json` to
/// `out/overlay.json` (`out` is never watched), appending a line to
/// `out/builds.log` each time; `build.sh` is what the entry runs.
fn built_fake(env: &Env, name: &str) -> Value {
    env.write("src/tools.json", &overlay(&["one"]));
    env.write(
        "build.sh",
        "echo x >> out/builds.log\necho \"copying $(cat src/tools.json)\"\ncp src/tools.json out/overlay.json\n",
    );
    std::fs::create_dir_all(env.ws.join("out")).unwrap();
    std::fs::copy(
        env.ws.join("src/tools.json"),
        env.ws.join("out/overlay.json"),
    )
    .unwrap();
    fake_dev(
        env,
        name,
        &env.ws.join("out/overlay.json"),
        json!({"watch": ["src/*.json"], "build": "sh build.sh"}),
    )
}

fn builds(env: &Env) -> usize {
    std::fs::read_to_string(env.ws.join("out/builds.log"))
        .unwrap_or_default()
        .lines()
        .count()
}

#[test]
fn the_build_runs_before_the_restart_and_its_output_is_in_the_servers_log() {
    let env = Env::new();
    env.user_mcp_servers(&[("built", built_fake(&env, "built"))]);
    let c = env.start(&[]);
    let s = c.wait_for("built Ready", |s| {
        ready(s, "built") && dev_of(s, "built").watching
    });
    let old = pid_of(&s, "built").unwrap();
    assert_eq!(tools_of(&s, "built"), ["one"]);

    env.write("src/tools.json", &overlay(&["one", "two"]));
    // Only the build writes out/overlay.json: the new process offering
    // `two` started after it.
    let s = c.wait_for("rebuilt and replaced", |s| {
        ready(s, "built") && tools_of(s, "built") == ["one", "two"]
    });
    assert_ne!(pid_of(&s, "built"), Some(old));
    let dev = dev_of(&s, "built");
    let last = dev.last_build.expect("a build ran");
    assert_eq!(last.result, BuildResult::Succeeded);
    assert_eq!(last.tail, [r#"copying {"tools":["one","two"]}"#]);
    assert_eq!((dev.reloads, builds(&env)), (1, 1));
    let log = env.steward(&["logs", "built", "--previous"]);
    let log = String::from_utf8_lossy(&log.stdout);
    assert!(log.contains("--- build (pid"), "{log}");
    assert!(
        log.contains(r#"[build] copying {"tools":["one","two"]}"#),
        "{log}"
    );
    assert!(log.contains("--- build succeeded in"), "{log}");
    let describe = env.steward(&["describe", "built"]);
    let describe = String::from_utf8_lossy(&describe.stdout);
    assert!(
        describe.contains("Watch:                src/*.json"),
        "{describe}"
    );
    assert!(
        describe.contains("Last Build:           Succeeded"),
        "{describe}"
    );
}

#[test]
fn a_failing_build_keeps_the_old_process_and_a_fixed_one_replaces_it() {
    let env = Env::new();
    env.user_mcp_servers(&[("built", built_fake(&env, "built"))]);
    let c = env.start(&["--metrics-listen", "127.0.0.1:0"]);
    let s = c.wait_for("built Ready", |s| {
        ready(s, "built") && dev_of(s, "built").watching
    });
    let old = pid_of(&s, "built").unwrap();

    env.write(
        "build.sh",
        "echo compiling\necho 'src/tools.json:1: no good' >&2\nexit 3\n",
    );
    env.write("src/tools.json", &overlay(&["one", "broken"]));
    let s = c.wait_for("BuildFailed", |s| {
        condition(s, "built", "BuildFailed").is_some_and(|(st, _)| st == ConditionStatus::True)
    });
    let server = mcp(&s, "built").unwrap();
    assert_eq!(server.status.phase, Phase::Ready);
    assert_eq!(server.status.pid, Some(old), "the running server is kept");
    assert_eq!(tools_of(&s, "built"), ["one"]);
    let (_, message) = condition(&s, "built", "BuildFailed").unwrap();
    assert!(message.contains("exited with code 3"), "{message}");
    assert!(message.contains("the running server is kept"), "{message}");
    // The build's last lines (stdout and stderr, as they came).
    let lines: Vec<&str> = message.lines().skip(1).collect();
    assert!(lines.contains(&"compiling"), "{message}");
    assert!(lines.contains(&"src/tools.json:1: no good"), "{message}");
    let last = dev_of(&s, "built").last_build.unwrap();
    assert_eq!(last.result, BuildResult::Failed);
    let warned = events_of(&env, "built", "BuildFailed");
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert_eq!(warned[0].0, "Warning");
    assert!(warned[0].1.contains("exited with code 3"), "{warned:?}");
    assert!(alive(old));

    // Fixed: the next change builds again and replaces the server.
    env.write(
        "build.sh",
        "echo x >> out/builds.log\ncp src/tools.json out/overlay.json\n",
    );
    env.write("src/tools.json", &overlay(&["one", "fixed"]));
    let s = c.wait_for("replaced after a good build", |s| {
        ready(s, "built") && tools_of(s, "built") == ["one", "fixed"]
    });
    assert_ne!(pid_of(&s, "built"), Some(old));
    assert_eq!(
        condition(&s, "built", "BuildFailed").map(|(st, _)| st),
        Some(ConditionStatus::False)
    );
    assert_eq!(dev_of(&s, "built").reloads, 1);
    let addr = crate::metrics::metrics_addr(&|| c.log_text());
    let (_, _, metrics) = crate::metrics::http_get(&addr, "/metrics", &[]);
    for (result, n) in [("reloaded", 1), ("build_failed", 1)] {
        let line = format!("steward_dev_reloads_total{{server=\"built\",result=\"{result}\"}} {n}");
        assert!(metrics.contains(&line), "no {line} in:\n{metrics}");
    }
}

#[test]
fn a_burst_of_saves_is_one_rebuild() {
    let env = Env::new();
    env.user_mcp_servers(&[("built", built_fake(&env, "built"))]);
    let c = env.start(&[]);
    c.wait_for("built Ready", |s| {
        ready(s, "built") && dev_of(s, "built").watching
    });

    for n in 0..6 {
        env.write("src/tools.json", &overlay(&["one", &format!("burst{n}")]));
    }
    c.wait_for("the burst applied", |s| {
        ready(s, "built") && tools_of(s, "built") == ["one", "burst5"]
    });
    // A positive control after it: had the burst made more than one
    // rebuild, the control's would be the third.
    env.write("src/tools.json", &overlay(&["control"]));
    let s = c.wait_for("the control applied", |s| {
        ready(s, "built") && tools_of(s, "built") == ["control"]
    });
    assert_eq!(dev_of(&s, "built").reloads, 2);
    assert_eq!(builds(&env), 2, "one build per settled change");
    assert_eq!(
        starts(&env, "built"),
        3,
        "the first process and two reloads"
    );
}

#[test]
fn files_outside_the_globs_and_under_node_modules_change_nothing() {
    let env = Env::new();
    env.write("src/tools.json", &overlay(&["one"]));
    env.write("node_modules/pkg/tools.json", "{}");
    let entry = fake_dev(
        &env,
        "watched",
        &env.ws.join("src/tools.json"),
        json!({"watch": "**/*.json"}),
    );
    env.user_mcp_servers(&[("watched", entry)]);
    let c = env.start(&[]);
    let s = c.wait_for("watched Ready", |s| {
        ready(s, "watched") && dev_of(s, "watched").watching
    });
    let old = pid_of(&s, "watched").unwrap();
    assert_eq!(
        dev_of(&s, "watched").files,
        1,
        "node_modules is not watched"
    );

    env.write("node_modules/pkg/tools.json", r#"{"changed": true}"#);
    env.write("node_modules/new/package.json", "{}");
    env.write("README.md", "# notes");
    env.write("src/notes.txt", "not json");
    // Same bytes again: no change either.
    env.write("src/tools.json", &overlay(&["one"]));
    // The positive control.
    env.write("src/control.json", "{}");
    let s = c.wait_for("the control's reload", |s| {
        ready(s, "watched") && pid_of(s, "watched").is_some_and(|p| p != old)
    });
    assert_eq!(dev_of(&s, "watched").reloads, 1);
    assert_eq!(starts(&env, "watched"), 2);
    let changed = events_of(&env, "watched", "SourceChanged");
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert!(
        changed[0].1.starts_with("src/control.json changed"),
        "{changed:?}"
    );
}

#[test]
fn pins_accept_a_dev_servers_new_definitions_and_still_quarantine_a_plain_servers() {
    let env = Env::new();
    env.write("dev-tools.json", &overlay(&["one"]));
    env.write("plain-tools.json", &overlay(&["one"]));
    let dev = fake_dev(
        &env,
        "devsrv",
        &env.ws.join("dev-tools.json"),
        json!({"watch": "dev-tools.json"}),
    );
    let mut plain = fake_dev(&env, "plain", &env.ws.join("plain-tools.json"), Value::Null);
    plain.as_object_mut().unwrap().remove("dev");
    env.user_mcp_servers(&[("devsrv", dev), ("plain", plain)]);
    let c = env.start(&[]);
    let s = c.wait_for("both Ready", |s| ready(s, "devsrv") && ready(s, "plain"));
    let plain_pid = pid_of(&s, "plain").unwrap();

    env.write("dev-tools.json", &overlay(&["one", "added"]));
    env.write("plain-tools.json", &overlay(&["one", "added"]));
    let s = c.wait_for("devsrv lists its new tool", |s| {
        ready(s, "devsrv") && tools_of(s, "devsrv") == ["one", "added"]
    });
    assert!(
        mcp(&s, "devsrv")
            .unwrap()
            .status
            .tools_quarantined
            .is_empty()
    );
    let told = events_of(&env, "devsrv", "ToolDefinitionChanged");
    assert_eq!(
        told,
        [(
            "Normal".to_owned(),
            "tool added (new tool added without a configuration change) pinned afresh (the server has `dev`)".to_owned()
        )]
    );

    // The plain server offers the same change after a restart: held back.
    let out = env.steward(&["restart", "plain"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = c.wait_for("plain restarted", |s| {
        ready(s, "plain")
            && pid_of(s, "plain").is_some_and(|p| p != plain_pid)
            && !mcp(s, "plain").unwrap().status.tools_quarantined.is_empty()
    });
    let held = &mcp(&s, "plain").unwrap().status.tools_quarantined;
    assert_eq!(held[0].name, "added");
    assert_eq!(tools_of(&s, "plain"), ["one"]);
    let warned = events_of(&env, "plain", "ToolDefinitionChanged");
    assert_eq!(warned.len(), 1);
    assert_eq!(warned[0].0, "Warning");
}

#[test]
fn the_typescript_sdk_client_sees_list_changed_after_a_reload() {
    let env = Env::new();
    env.write("src/tools.json", &overlay(&["one"]));
    let entry = fake_dev(
        &env,
        "ts",
        &env.ws.join("src/tools.json"),
        json!({"watch": ["src/*.json"]}),
    );
    env.user_mcp_servers(&[("ts", entry)]);
    let c = env.start(&[]);
    c.wait_for("ts Ready", |s| ready(s, "ts") && dev_of(s, "ts").watching);
    let mut client = PyClient::typescript(&env, &steward_mcp_argv(&env));
    assert_eq!(client.tool_names(), ["ts__one"]);
    env.write("src/tools.json", &overlay(&["one", "two"]));
    let seen = client.wait_notification("notifications/tools/list_changed", 1);
    assert!(seen.contains(&"notifications/tools/list_changed".to_owned()));
    assert_eq!(client.tool_names(), ["ts__one", "ts__two"]);
    client.close();
}

#[test]
fn a_language_server_under_development_is_restarted_when_its_source_changes() {
    let env = Env::new();
    env.write("ls/main.rs", "fn main() {}");
    let mut entry = env.fake_lsp("toy", Default::default(), &[".toy"]);
    entry["dev"] = json!({"watch": "ls/**/*.rs"});
    env.write(".lsp.json", &lsp_json(&[("toy", entry)]));
    // `.lsp.json` is the workspace's: trusted by default, not gated.
    let c = env.start(&[]);
    let s = c.wait_for("toy Ready", lsp_ready_watching);
    let old = lsp_pid(&s, "toy").unwrap();
    env.write("ls/main.rs", "fn main() { println!(); }");
    c.wait_for("toy restarted", |s| {
        lsp_ready(s, "toy") && lsp_pid(s, "toy").is_some_and(|p| p != old)
    });
}

fn lsp_ready_watching(s: &WorkspaceStatus) -> bool {
    lsp_ready(s, "toy")
        && steward_tests::harness::lsp(s, "toy")
            .and_then(|l| l.status.dev.as_ref())
            .is_some_and(|d| d.watching)
}

/// Pids recorded by the build in `out/` (the shell and its child).
fn build_pids(env: &Env) -> Option<Vec<u32>> {
    let read = |name: &str| -> Option<u32> {
        std::fs::read_to_string(env.ws.join("out").join(name))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    Some(vec![read("build.pid")?, read("child.pid")?])
}

#[test]
fn no_build_process_outlives_the_controller_stopped_mid_build() {
    let env = Env::new();
    env.write("src/tools.json", &overlay(&["one"]));
    std::fs::create_dir_all(env.ws.join("out")).unwrap();
    let entry = fake_dev(
        &env,
        "slowbuild",
        &env.ws.join("src/tools.json"),
        json!({
            "watch": "src/*.json",
            "build": "echo $$ > out/build.pid; sleep 300 & echo $! > out/child.pid; wait",
        }),
    );
    env.user_mcp_servers(&[("slowbuild", entry)]);
    let mut c = env.start(&[]);
    let s = c.wait_for("Ready", |s| {
        ready(s, "slowbuild") && dev_of(s, "slowbuild").watching
    });
    let server = pid_of(&s, "slowbuild").unwrap();
    env.write("src/tools.json", &overlay(&["one", "two"]));
    c.wait_for("building", |s| dev_of(s, "slowbuild").building);
    wait_until("the build recorded its pids", || build_pids(&env).is_some());
    let pids = build_pids(&env).unwrap();
    assert!(pids.iter().all(|p| alive(*p)), "{pids:?}");

    let status = c.terminate().expect("the controller exits");
    assert!(status.success(), "{status:?}\n{}", c.log_text());
    wait_all_gone("the build and its child", &pids);
    wait_all_gone("the server", &[server]);
    // Nothing was left to a later reaper: gone when the controller was.
    assert!(!pids.iter().any(|p| signal(*p as i32, 0)));
}

//! Envtest: the catalog cache. A controller stores what each MCP server
//! offered (per `configHash`); the next one — here `steward mcp` becoming
//! the controller, as an agent launches it — lists those catalogs at once
//! while the servers start, and a call waits for its server. The fakes read
//! an overlay file at start (an initialize delay, other tools), so a test
//! changes how a server behaves between two runs while its entry, and so
//! its `configHash`, stays the same.

use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use steward::control::client;
use steward_schema::resource::{CatalogSource, Phase, WorkspaceStatus};
use steward_tests::fake_mcp::{FakeMcpConfig, read_record};
use steward_tests::harness::{Env, fake_tools, mcp, ready, wait_until, with_version, write_atomic};

use crate::real_clients::{CLIENT_DEADLINE, PyClient, steward_mcp_argv, text_of};

/// The fake `name` offering `tools`, reading its overlay file at start.
pub fn fake(env: &Env, name: &str, tools: &[&str]) -> Value {
    env.fake_mcp(
        name,
        FakeMcpConfig {
            overlay_file: Some(overlay_path(env, name)),
            ..fake_tools(tools)
        },
    )
}

fn overlay_path(env: &Env, name: &str) -> PathBuf {
    env.root.path().join(format!("{name}.overlay.json"))
}

/// From the next start of `name` on, these config keys replace its own.
pub fn overlay(env: &Env, name: &str, keys: Value) {
    write_atomic(&overlay_path(env, name), &keys.to_string());
}

/// User settings (not gated) with `servers` and, when given, `mcp.excluded`.
pub fn settings(env: &Env, servers: &[(&str, Value)], excluded: &[&str]) {
    let servers: serde_json::Map<String, Value> = servers
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    let mut doc = json!({ "mcpServers": servers });
    if !excluded.is_empty() {
        doc["mcp"] = json!({ "excluded": excluded });
    }
    env.write_home(
        "settings.json",
        &serde_json::to_string_pretty(&doc).unwrap(),
    );
}

fn cache_file(env: &Env) -> PathBuf {
    env.paths().catalog_cache_file()
}

/// The cache file's entry of `server`, if any.
fn cached(env: &Env, server: &str) -> Option<Value> {
    let text = std::fs::read_to_string(cache_file(env)).ok()?;
    let doc: Value = serde_json::from_str(&text).ok()?;
    doc["servers"].get(server).cloned()
}

fn cached_tools(entry: &Value) -> Vec<String> {
    entry["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

/// Run `steward run` until `servers` are Ready and cached under their
/// current `configHash`, then stop it.
pub fn fill_cache(env: &Env, servers: &[&str]) {
    let mut c = env.start(&[]);
    let s = c.wait_for("every server Ready", |s| {
        servers.iter().all(|name| ready(s, name))
    });
    for name in servers {
        let hash = mcp(&s, name).unwrap().spec.config_hash.clone();
        wait_until(&format!("the catalog of {name} is cached"), || {
            cached(env, name).is_some_and(|e| e["configHash"] == hash.as_str())
        });
    }
    c.terminate();
}

/// The live status of whichever controller serves the workspace.
pub fn status_now(env: &Env) -> WorkspaceStatus {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(client::status(
        &env.paths().socket_path(),
        false,
        Duration::from_secs(5),
    ))
    .expect("the controller answers status")
}

/// `(phase, catalog source)` of `server`.
fn state(s: &WorkspaceStatus, server: &str) -> (Phase, Option<CatalogSource>) {
    let m = mcp(s, server).unwrap_or_else(|| panic!("no McpServer {server}"));
    (m.status.phase, m.status.catalog.map(|c| c.source))
}

/// Whether the fake `name` has answered an `initialize` request.
fn initialize_answered(env: &Env, name: &str) -> bool {
    let events = read_record(&env.record(name)).unwrap_or_default();
    let ids: Vec<&Value> = events
        .iter()
        .filter(|e| e.event == "recv" && e.method() == Some("initialize"))
        .filter_map(|e| e.message.get("id"))
        .collect();
    events.iter().any(|e| {
        e.event == "send"
            && e.message.get("result").is_some()
            && e.message.get("id").is_some_and(|id| ids.contains(&id))
    })
}

pub fn sorted(mut names: Vec<String>) -> Vec<String> {
    names.sort();
    names
}

/// The agent has left: wait for the `steward mcp` controller to be gone,
/// so the next one starts afresh.
pub fn wait_gone(env: &Env) {
    let socket = env.paths().socket_path();
    wait_until("the controller to stop", || !socket.exists());
}

#[test]
fn a_warm_cache_lists_a_server_whose_initialize_takes_2_s_at_once_and_a_call_waits_for_it() {
    let env = Env::new();
    settings(&env, &[("slow", fake(&env, "slow", &["echo", "add"]))], &[]);
    fill_cache(&env, &["slow"]);
    let path = cache_file(&env);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", path.display());
    overlay(&env, "slow", json!({"initializeDelayMs": 2000}));

    // The PyPI SDK, then the TypeScript SDK, each launching `steward mcp`
    // (which becomes the controller) as an agent does.
    for sdk in ["python", "typescript"] {
        let _ = std::fs::remove_file(env.record("slow"));
        let argv = steward_mcp_argv(&env);
        let mut client = match sdk {
            "python" => PyClient::stdio(&env, &argv),
            _ => PyClient::typescript(&env, &argv),
        };
        let listed = Instant::now();
        let names = sorted(client.tool_names());
        assert_eq!(names, ["slow__add", "slow__echo"], "{sdk}");
        // Listed before the server answered `initialize`: from the cache,
        // as the status says.
        assert!(
            !initialize_answered(&env, "slow"),
            "{sdk}: the first list came after the server's initialize"
        );
        let s = status_now(&env);
        assert_eq!(
            state(&s, "slow"),
            (Phase::Starting, Some(CatalogSource::Cached)),
            "{sdk}"
        );
        // The call waits for the server, then runs.
        let (result, _) = client.call("slow__echo", json!({"x": 1}));
        assert_ne!(result["isError"], json!(true), "{sdk}: {result}");
        assert!(text_of(&result).contains("\"x\":1"), "{sdk}: {result}");
        assert!(
            listed.elapsed() < CLIENT_DEADLINE,
            "{sdk}: the call waited too long"
        );
        assert!(initialize_answered(&env, "slow"), "{sdk}");
        let s = status_now(&env);
        assert_eq!(
            state(&s, "slow"),
            (Phase::Ready, Some(CatalogSource::Live)),
            "{sdk}"
        );
        drop(client);
        wait_gone(&env);
    }
}

#[test]
fn live_tools_that_differ_from_the_cache_replace_it_and_send_list_changed() {
    let env = Env::new();
    settings(&env, &[("s", fake(&env, "s", &["echo", "add"]))], &[]);
    fill_cache(&env, &["s"]);
    // Same entry, same configHash; the server no longer offers `add` (a
    // removal passes the pins), and starts slowly so the agent lists first.
    overlay(
        &env,
        "s",
        json!({"tools": ["echo"], "initializeDelayMs": 1500}),
    );
    let mut client = PyClient::stdio(&env, &steward_mcp_argv(&env));
    assert_eq!(sorted(client.tool_names()), ["s__add", "s__echo"]);
    client.wait_notification("notifications/tools/list_changed", 1);
    assert_eq!(client.tool_names(), ["s__echo"]);
    wait_until("the cache holds the live tools", || {
        cached(&env, "s").is_some_and(|e| cached_tools(&e) == ["echo"])
    });
    assert_eq!(
        state(&status_now(&env), "s"),
        (Phase::Ready, Some(CatalogSource::Live))
    );
    drop(client);
    wait_gone(&env);

    // The same catalog again: listed from the cache, and no list_changed
    // when the server is Ready.
    let mut client = PyClient::stdio(&env, &steward_mcp_argv(&env));
    assert_eq!(client.tool_names(), ["s__echo"]);
    let (result, _) = client.call("s__echo", json!({}));
    assert_ne!(result["isError"], json!(true), "{result}");
    let notified: Vec<String> = client
        .notifications()
        .into_iter()
        .filter(|n| n.ends_with("list_changed"))
        .collect();
    assert!(notified.is_empty(), "{notified:?}");
}

#[test]
fn a_cached_tool_of_a_server_that_became_excluded_is_never_listed() {
    let env = Env::new();
    let servers = [
        ("a", fake(&env, "a", &["ta"])),
        ("b", fake(&env, "b", &["tb"])),
        ("c", fake(&env, "c", &["tc"])),
    ];
    settings(&env, &servers, &[]);
    fill_cache(&env, &["a", "b", "c"]);
    // Excluded between the runs: b. Excluded while it starts: c.
    settings(&env, &servers, &["b"]);
    for name in ["a", "b", "c"] {
        overlay(&env, name, json!({"initializeDelayMs": 2500}));
    }
    let mut client = PyClient::stdio(&env, &steward_mcp_argv(&env));
    assert_eq!(sorted(client.tool_names()), ["a__ta", "c__tc"]);
    let s = status_now(&env);
    assert_eq!(state(&s, "a").1, Some(CatalogSource::Cached));
    assert_eq!(state(&s, "b"), (Phase::Blocked, None));

    settings(&env, &servers, &["b", "c"]);
    client.wait_notification("notifications/tools/list_changed", 1);
    assert_eq!(client.tool_names(), ["a__ta"]);
    let s = status_now(&env);
    assert_eq!(state(&s, "c"), (Phase::Blocked, None));
    // Once a is live, still only a.
    let (result, _) = client.call("a__ta", json!({}));
    assert_ne!(result["isError"], json!(true), "{result}");
    assert_eq!(client.tool_names(), ["a__ta"]);
    // A call to the excluded server's tool says why.
    let (result, _) = client.call("b__tb", json!({}));
    assert_eq!(result["isError"], json!(true), "{result}");
    assert!(text_of(&result).contains("excluded"), "{result}");
    let notified = client.notifications();
    assert_eq!(
        notified
            .iter()
            .filter(|n| n.ends_with("tools/list_changed"))
            .count(),
        1,
        "{notified:?}"
    );
}

#[test]
fn a_config_edit_between_runs_is_a_new_config_hash_whose_first_list_waits_as_without_a_cache() {
    let env = Env::new();
    let entry = fake(&env, "s", &["echo"]);
    settings(&env, &[("s", entry.clone())], &[]);
    fill_cache(&env, &["s"]);
    let old = cached(&env, "s").unwrap()["configHash"].clone();
    settings(&env, &[("s", with_version(&entry, "2"))], &[]);
    overlay(
        &env,
        "s",
        json!({"tools": ["echo", "new"], "initializeDelayMs": 1000}),
    );
    let mut client = PyClient::stdio(&env, &steward_mcp_argv(&env));
    // Nothing cached for the new configuration: the list waited for the
    // server, which then offered its new tools.
    assert_eq!(sorted(client.tool_names()), ["s__echo", "s__new"]);
    assert!(initialize_answered(&env, "s"));
    let s = status_now(&env);
    assert_eq!(state(&s, "s"), (Phase::Ready, Some(CatalogSource::Live)));
    let hash = mcp(&s, "s").unwrap().spec.config_hash.clone();
    assert_ne!(json!(hash), old);
    wait_until("the new configuration is cached", || {
        cached(&env, "s").is_some_and(|e| e["configHash"] == hash.as_str())
    });
}

/// The file is never read as anything but a cache: a corrupted one is no
/// cache, and the first list waits for the servers.
#[test]
fn a_corrupted_cache_file_is_no_cache() {
    let env = Env::new();
    settings(&env, &[("s", fake(&env, "s", &["echo"]))], &[]);
    fill_cache(&env, &["s"]);
    std::fs::write(cache_file(&env), "{\"version\": 1, \"servers\": {").unwrap();
    overlay(&env, "s", json!({"initializeDelayMs": 800}));
    let mut client = PyClient::stdio(&env, &steward_mcp_argv(&env));
    assert_eq!(client.tool_names(), ["s__echo"]);
    assert!(initialize_answered(&env, "s"));
    let stderr = client.close();
    assert!(
        stderr.contains("the catalog cache cannot be read"),
        "{stderr}"
    );
    assert!(cached(&env, "s").is_some(), "rewritten");
}

#[test]
fn with_every_mcp_server_cached_the_lsp_tool_is_listed_at_once_and_its_call_waits_for_the_language_server()
 {
    let env = Env::new();
    settings(&env, &[("s", fake(&env, "s", &["echo"]))], &[]);
    fill_cache(&env, &["s"]);
    overlay(&env, "s", json!({"initializeDelayMs": 2000}));
    env.write("a.aa", "fn helper\n");
    let slow = steward_tests::fake_lsp::Config {
        initialize_delay_ms: 2000,
        ..steward_tests::fake_lsp::Config::default()
    };
    env.write(
        ".lsp.json",
        &steward_tests::harness::lsp_json(&[("alpha", env.fake_lsp("alpha", slow, &[".aa"]))]),
    );
    let mut client = PyClient::stdio(&env, &steward_mcp_argv(&env));
    assert_eq!(sorted(client.tool_names()), ["lsp", "s__echo"]);
    let s = status_now(&env);
    let alpha = steward_tests::harness::lsp(&s, "alpha").unwrap();
    assert_ne!(alpha.status.phase, Phase::Ready);
    let (result, _) = client.call(
        "lsp",
        json!({"operation": "documentSymbol", "filePath": "a.aa"}),
    );
    assert_ne!(result["isError"], json!(true), "{result}");
    assert!(text_of(&result).contains("helper"), "{result}");
    // Nothing changed for the agent once both are Ready.
    assert_eq!(sorted(client.tool_names()), ["lsp", "s__echo"]);
}

//! MCP connections against the fake MCP server, over stdio and streamable
//! HTTP: the handshake and the first lists, failed starts that leave no
//! process behind, stopping, list changes, exits and liveness pings.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::ClientRequest;
use serde_json::{Value, json};
use steward::runtime::StartError;
use steward::runtime::mcp::{McpConnection, McpEvent, McpEventHandler, McpExit, McpTimeouts};
use steward::runtime::process::{ExitInfo, ManagedProcess, ProcessSpec};
use steward_schema::resource::{McpServerSpec, McpTransport, Reason};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TryRecvError;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::runtime_common::{
    FAKE_MCP_SERVER, NoCaller, SOON, alive, eventually, received, record, recorded_pid, spawner,
};

fn fake_server() -> PathBuf {
    PathBuf::from(FAKE_MCP_SERVER)
}

fn spec(transport: McpTransport) -> McpServerSpec {
    McpServerSpec {
        transport,
        ..Default::default()
    }
}

/// A stdio spec running the fake with `config` (FAKE_MCP_CONFIG).
fn fake(config: Value) -> McpServerSpec {
    McpServerSpec {
        command: Some(fake_server().display().to_string()),
        env: Some(BTreeMap::from([(
            "FAKE_MCP_CONFIG".to_owned(),
            config.to_string(),
        )])),
        ..spec(McpTransport::Stdio)
    }
}

fn timeouts() -> McpTimeouts {
    McpTimeouts {
        stdio_handshake: SOON,
        remote_handshake: SOON,
        ..McpTimeouts::default()
    }
}

fn events() -> (McpEventHandler, mpsc::UnboundedReceiver<McpEvent>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (
        Arc::new(move |event| {
            let _ = tx.send(event);
        }),
        rx,
    )
}

async fn next_event(rx: &mut mpsc::UnboundedReceiver<McpEvent>) -> McpEvent {
    tokio::time::timeout(SOON, rx.recv())
        .await
        .expect("no event within the deadline")
        .expect("the event channel closed")
}

fn no_more_events(rx: &mut mpsc::UnboundedReceiver<McpEvent>) {
    match rx.try_recv() {
        Err(TryRecvError::Empty | TryRecvError::Disconnected) => {}
        Ok(event) => panic!("unexpected event {event:?}"),
    }
}

async fn connect(
    spec: &McpServerSpec,
    workspace: &Path,
    timeouts: McpTimeouts,
) -> (
    Result<McpConnection, StartError>,
    mpsc::UnboundedReceiver<McpEvent>,
) {
    let (on_event, rx) = events();
    let result =
        McpConnection::connect(&spawner(), "fake", spec, workspace, timeouts, on_event).await;
    (result, rx)
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| (*item).to_owned()).collect()
}

/// Starts the fake in HTTP mode; returns the process and its endpoint.
async fn http_fake(dir: &Path, mut config: Value) -> (ManagedProcess, String) {
    let port_file = dir.join("port");
    config["http"] = json!({ "portFile": port_file });
    let process = spawner()
        .spawn(&ProcessSpec {
            program: fake_server().display().to_string(),
            env: BTreeMap::from([("FAKE_MCP_CONFIG".to_owned(), config.to_string())]),
            cwd: Some(dir.to_owned()),
            ..ProcessSpec::default()
        })
        .await
        .unwrap();
    eventually("the fake listens", || port_file.exists()).await;
    let port = std::fs::read_to_string(&port_file).unwrap();
    (process, format!("http://127.0.0.1:{port}/mcp"))
}

fn http_spec(url: &str) -> McpServerSpec {
    McpServerSpec {
        http_url: Some(url.to_owned()),
        headers: Some(BTreeMap::from([
            (
                "Authorization".to_owned(),
                "Bearer not-a-real-token".to_owned(),
            ),
            ("X-Steward-Test".to_owned(), "1".to_owned()),
        ])),
        ..spec(McpTransport::Http)
    }
}

// ---- connecting ----

#[tokio::test]
async fn stdio_connect_lists_every_page_of_tools_and_prompts() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let rec = dir.path().join("record.jsonl");
    let tools: Vec<String> = (1..=7).map(|i| format!("tool{i}")).collect();
    let mut spec = fake(json!({
        "tools": tools, "prompts": ["p1", "p2", "p3"], "pageSize": 2, "record": rec,
    }));
    spec.cwd = Some("sub".to_owned());
    let (result, mut rx) = connect(&spec, dir.path(), timeouts()).await;
    let connection = result.unwrap();
    assert_eq!(connection.tools(), tools);
    assert_eq!(connection.prompts(), strings(&["p1", "p2", "p3"]));
    let pid = connection.pid().unwrap();
    assert_eq!(pid, recorded_pid(&rec));
    assert_eq!(
        std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap(),
        dir.path().join("sub").canonicalize().unwrap(),
        "a relative cwd is taken from the workspace"
    );
    assert_eq!(received(&rec, "tools/list").len(), 4, "7 tools, 2 a page");
    assert_eq!(received(&rec, "prompts/list").len(), 2);
    // We offer the newest version that still has `initialize`; the fake
    // does not know it and answers with its own, which we accept.
    let initialize = received(&rec, "initialize");
    assert_eq!(initialize[0]["params"]["protocolVersion"], "2025-11-25");
    assert_eq!(received(&rec, "notifications/initialized").len(), 1);

    let started = Instant::now();
    connection
        .stop(Duration::from_secs(5), Duration::from_secs(5))
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(!alive(pid));
    // Closed by the protocol (stdin), not by a signal.
    let exit = record(&rec)
        .into_iter()
        .find(|event| event["event"] == "exit")
        .expect("the fake recorded its exit");
    assert_eq!(exit["message"]["reason"], "stdin closed");
    assert!(record(&rec).iter().all(|event| event["event"] != "signal"));
    no_more_events(&mut rx);
}

#[tokio::test]
async fn hang_in_initialize_times_out_and_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("record.jsonl");
    let spec = fake(json!({
        "hangInInitialize": true, "record": rec, "stderrLines": ["waiting for godot"],
    }));
    let timeouts = McpTimeouts {
        stdio_handshake: Duration::from_millis(500),
        ..timeouts()
    };
    let started = Instant::now();
    let (result, _rx) = connect(&spec, dir.path(), timeouts).await;
    let error = result.unwrap_err();
    assert_eq!(error.reason, Reason::StartupTimeout, "{error}");
    assert!(
        error
            .message
            .starts_with("complete the MCP handshake within 500ms: no answer to initialize"),
        "{error}"
    );
    assert!(error.to_string().ends_with("waiting for godot"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        !alive(recorded_pid(&rec)),
        "the server outlived its failed start"
    );
}

#[tokio::test]
async fn crash_during_initialize_fails_with_exit_and_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("record.jsonl");
    let spec = fake(json!({
        "initializeDelayMs": 10_000, "crashAfterMs": 100, "exitCode": 3, "record": rec,
        "stderrLines": ["starting", "fatal: no config"],
    }));
    let (result, _rx) = connect(&spec, dir.path(), timeouts()).await;
    let error = result.unwrap_err();
    assert_eq!(error.reason, Reason::StartFailed, "{error}");
    assert!(
        error
            .message
            .starts_with("start the MCP session: the server exited with code 3 during initialize"),
        "{error}"
    );
    assert!(
        error.to_string().ends_with("starting\nfatal: no config"),
        "{error}"
    );
    assert!(!alive(recorded_pid(&rec)));
}

#[tokio::test]
async fn garbage_on_stdout_fails_the_start() {
    for when in ["before_initialize", "after_initialize"] {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("record.jsonl");
        let spec = fake(json!({ "garbageOnStdout": when, "record": rec }));
        let (result, _rx) = connect(&spec, dir.path(), timeouts()).await;
        let error = result.unwrap_err();
        assert_eq!(error.reason, Reason::StartFailed, "{when}: {error}");
        assert!(
            error.message.contains("non-JSON-RPC output on stdout")
                && error.message.contains("this line is not JSON-RPC"),
            "{when}: {error}"
        );
        assert!(!alive(recorded_pid(&rec)), "{when}");
    }
}

#[tokio::test]
async fn a_change_announced_while_connecting_is_not_lost() {
    let dir = tempfile::tempdir().unwrap();
    // The change lands during (or right after) the first listing.
    let spec = fake(json!({
        "tools": ["old"], "listChangedAfterMs": 0, "toolsAfterChange": ["new"],
    }));
    let (result, mut rx) = connect(&spec, dir.path(), timeouts()).await;
    let connection = result.unwrap();
    if connection.tools() != strings(&["new"]) {
        // Announced after the first listing: the watcher re-lists.
        assert_eq!(next_event(&mut rx).await, McpEvent::ListsChanged);
    }
    assert_eq!(connection.tools(), strings(&["new"]));
    connection.stop(SOON, SOON).await;
}

#[tokio::test]
async fn http_handshake_is_bounded_by_the_remote_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, url) = http_fake(dir.path(), json!({ "hangInInitialize": true })).await;
    let timeouts = McpTimeouts {
        remote_handshake: Duration::from_millis(300),
        ..timeouts()
    };
    let (result, _rx) = connect(&http_spec(&url), dir.path(), timeouts).await;
    let error = result.unwrap_err();
    assert_eq!(error.reason, Reason::StartupTimeout, "{error}");
    assert!(error.message.contains("within 300ms"), "{error}");
    server.stop(Duration::from_secs(5)).await;
}

// ---- the connection ----

#[tokio::test]
async fn dropping_a_connection_kills_its_server() {
    let dir = tempfile::tempdir().unwrap();
    let (result, mut rx) = connect(&fake(json!({})), dir.path(), timeouts()).await;
    let connection = result.unwrap();
    let pid = connection.pid().unwrap();
    drop(connection);
    eventually("the server is gone", || !alive(pid)).await;
    no_more_events(&mut rx);
}

#[tokio::test]
async fn stop_kills_a_server_that_ignores_stdin_close_and_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("record.jsonl");
    let mut spec = fake(json!({ "ignoreSigterm": true, "record": rec }));
    // The fake exits when its stdin closes; the shell then becomes a
    // `sleep` that inherited an ignored SIGTERM.
    spec.command = Some("sh".to_owned());
    spec.args = Some(vec![
        "-c".to_owned(),
        r#"trap '' TERM; "$0"; exec sleep 1000"#.to_owned(),
        fake_server().display().to_string(),
    ]);
    let (result, mut rx) = connect(&spec, dir.path(), timeouts()).await;
    let connection = result.unwrap();
    let pid = connection.pid().unwrap();
    let (close, grace) = (Duration::from_millis(300), Duration::from_millis(300));
    let started = Instant::now();
    connection.stop(close, grace).await;
    let elapsed = started.elapsed();
    assert!(!alive(pid), "the server survived stop");
    assert!(elapsed >= close + grace, "{elapsed:?}");
    assert!(
        elapsed < close + grace + Duration::from_secs(3),
        "{elapsed:?}"
    );
    no_more_events(&mut rx);
}

/// Numbers, not a pass/fail test:
/// `cargo test -p steward-tests --test it runtime_mcp::measure -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement"]
async fn measure_connect_latency_and_memory() {
    fn rss_kib() -> u64 {
        std::fs::read_to_string("/proc/self/status")
            .unwrap()
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|value| value.trim().trim_end_matches(" kB").trim().parse().ok())
            .unwrap()
    }
    let dir = tempfile::tempdir().unwrap();
    let spawner = spawner();
    let spec = fake(json!({ "tools": ["a", "b", "c"], "prompts": ["p"] }));
    let mut latencies = Vec::new();
    for _ in 0..30 {
        let (on_event, _rx) = events();
        let started = Instant::now();
        let connection =
            McpConnection::connect(&spawner, "m", &spec, dir.path(), timeouts(), on_event)
                .await
                .unwrap();
        latencies.push(started.elapsed());
        connection.stop(SOON, SOON).await;
    }
    latencies.sort();
    let n = 50;
    let before = rss_kib();
    let mut connections = Vec::new();
    for i in 0..n {
        let (on_event, _rx) = events();
        connections.push(
            McpConnection::connect(
                &spawner,
                &format!("m{i}"),
                &spec,
                dir.path(),
                timeouts(),
                on_event,
            )
            .await
            .unwrap(),
        );
    }
    let after = rss_kib();
    let stop_started = Instant::now();
    futures::future::join_all(connections.into_iter().map(|c| c.stop(SOON, SOON))).await;
    let stop_all = stop_started.elapsed();

    let (mut server, url) = http_fake(dir.path(), json!({ "tools": ["a", "b", "c"] })).await;
    let mut http = Vec::new();
    for _ in 0..30 {
        let (on_event, _rx) = events();
        let started = Instant::now();
        let connection = McpConnection::connect(
            &spawner,
            "h",
            &http_spec(&url),
            dir.path(),
            timeouts(),
            on_event,
        )
        .await
        .unwrap();
        http.push(started.elapsed());
        connection.stop(SOON, SOON).await;
    }
    http.sort();
    server.stop(SOON).await;
    println!(
        "http connect p50 {:?} p95 {:?}",
        http[http.len() / 2],
        http[http.len() * 95 / 100]
    );
    println!(
        "connect p50 {:?} p95 {:?} max {:?}; rss +{} KiB for {n} connections ({} KiB each); stop all {n}: {:?}",
        latencies[latencies.len() / 2],
        latencies[latencies.len() * 95 / 100],
        latencies[latencies.len() - 1],
        after.saturating_sub(before),
        after.saturating_sub(before) / n,
        stop_all,
    );
}

// ---- liveness ----

/// Pings received by the fake, as the times (ms since its start) they
/// arrived.
fn pings(rec: &Path) -> Vec<u64> {
    let text = std::fs::read_to_string(rec).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "recv" && e["message"]["method"] == "ping")
        .filter_map(|e| e["t"].as_u64())
        .collect()
}

fn fast_pings() -> McpTimeouts {
    McpTimeouts {
        ping_interval: Duration::from_millis(100),
        ping_timeout: Duration::from_millis(200),
        ..timeouts()
    }
}

#[tokio::test]
async fn a_ping_answered_with_an_error_is_alive() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("record.jsonl");
    let spec = fake(json!({ "pingError": true, "record": rec }));
    let (result, mut rx) = connect(&spec, dir.path(), fast_pings()).await;
    let connection = result.unwrap();
    eventually("three pings answered with an error", || {
        pings(&rec).len() >= 3
    })
    .await;
    no_more_events(&mut rx);
    connection.stop(SOON, SOON).await;
}

#[tokio::test]
async fn a_busy_server_that_answers_pings_slowly_is_alive() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("record.jsonl");
    // Slower than the ping timeout (200 ms), but it answers.
    let spec = fake(json!({ "pingDelayMs": 300, "record": rec }));
    let (result, mut rx) = connect(&spec, dir.path(), fast_pings()).await;
    let connection = result.unwrap();
    eventually("three slow pings", || pings(&rec).len() >= 3).await;
    no_more_events(&mut rx);
    connection.stop(SOON, SOON).await;
}

#[tokio::test]
async fn a_server_with_a_call_in_flight_is_not_pinged() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("record.jsonl");
    let spec = fake(json!({ "tools": ["work"], "record": rec }));
    let (result, mut rx) = connect(&spec, dir.path(), fast_pings()).await;
    let connection = result.unwrap();
    let params = rmcp::model::CallToolRequestParams::new("work")
        .with_arguments(json!({ "sleepMs": 1000 }).as_object().unwrap().clone());
    let answer = connection
        .handle()
        .call(
            ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params)),
            Arc::new(NoCaller),
            None,
            SOON,
            None,
            &CancellationToken::new(),
        )
        .await;
    assert!(answer.is_ok(), "{answer:?}");
    let text = std::fs::read_to_string(&rec).unwrap();
    let events: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let call_at = events
        .iter()
        .find(|e| e["event"] == "recv" && e["message"]["method"] == "tools/call")
        .and_then(|e| e["t"].as_u64())
        .unwrap();
    let during: Vec<u64> = pings(&rec)
        .into_iter()
        .filter(|t| *t > call_at + 150 && *t < call_at + 1000)
        .collect();
    assert!(during.is_empty(), "pinged during the call at {during:?}");
    no_more_events(&mut rx);
    connection.stop(SOON, SOON).await;
}

#[tokio::test]
async fn a_server_that_stops_answering_is_unresponsive() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("record.jsonl");
    let spec = fake(json!({ "stopAnsweringAfterMs": 1500, "record": rec }));
    let timeouts = McpTimeouts {
        ping_interval: Duration::from_millis(100),
        ping_timeout: Duration::from_millis(200),
        ..timeouts()
    };
    let (result, mut rx) = connect(&spec, dir.path(), timeouts).await;
    let connection = result.unwrap();
    let McpEvent::Unresponsive(message) = next_event(&mut rx).await else {
        panic!("expected Unresponsive");
    };
    assert_eq!(
        message,
        "no answer to ping within 400ms, and nothing else from the server meanwhile"
    );
    assert!(
        !received(&rec, "ping").is_empty(),
        "answered pings came first"
    );
    let pid = connection.pid().unwrap();
    assert!(alive(pid), "hung, not dead");
    connection.stop(SOON, SOON).await;
    assert!(!alive(pid));
    no_more_events(&mut rx);
}

// ---- the watcher ----

#[tokio::test]
async fn list_changed_notifications_are_relisted_and_a_change_is_an_event() {
    let dir = tempfile::tempdir().unwrap();
    let spec = fake(json!({
        "tools": ["a", "b"], "prompts": ["p"], "pageSize": 1,
        "listChangedAfterMs": 300,
        "toolsAfterChange": ["b", "c", "d"], "promptsAfterChange": ["q"],
    }));
    let (result, mut rx) = connect(&spec, dir.path(), timeouts()).await;
    let connection = result.unwrap();
    assert_eq!(connection.tools(), strings(&["a", "b"]));
    // The tools notification is re-listed at once; the prompts one, right
    // behind it, by the trailing re-list: one event each (or one for both,
    // when they land in one re-list).
    assert_eq!(next_event(&mut rx).await, McpEvent::ListsChanged);
    if connection.prompts() != strings(&["q"]) {
        assert_eq!(next_event(&mut rx).await, McpEvent::ListsChanged);
    }
    assert_eq!(connection.tools(), strings(&["b", "c", "d"]));
    assert_eq!(connection.prompts(), strings(&["q"]));
    connection.stop(SOON, SOON).await;
    no_more_events(&mut rx);
}

#[tokio::test]
async fn only_the_kind_announced_is_listed_again() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("record.jsonl");
    let spec = fake(json!({
        "tools": ["a"], "prompts": ["p"], "record": rec,
        "listChangedAfterMs": 500, "toolsAfterChange": ["b"],
    }));
    let (result, mut rx) = connect(&spec, dir.path(), timeouts()).await;
    let connection = result.unwrap();
    if connection.tools() == strings(&["b"]) {
        // The change landed while connecting, which lists everything again.
        connection.stop(SOON, SOON).await;
        return;
    }
    assert_eq!(next_event(&mut rx).await, McpEvent::ListsChanged);
    assert_eq!(connection.tools(), strings(&["b"]));
    assert_eq!(connection.prompts(), strings(&["p"]));
    assert_eq!(received(&rec, "tools/list").len(), 2);
    assert_eq!(
        received(&rec, "prompts/list").len(),
        1,
        "prompts were not announced"
    );
    connection.stop(SOON, SOON).await;
    no_more_events(&mut rx);
}

#[tokio::test]
async fn a_storm_of_list_changed_is_relisted_a_few_times_and_only_a_change_is_an_event() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("record.jsonl");
    // 1000 notifications a second for 600 ms with the same list, then a change.
    let spec = fake(json!({
        "tools": ["a"], "record": rec,
        "listChangedStorm": {
            "perSecond": 1000, "durationMs": 600, "afterMs": 100, "toolsAtEnd": ["a", "z"],
        },
    }));
    let (result, mut rx) = connect(&spec, dir.path(), timeouts()).await;
    let connection = result.unwrap();
    // Re-lists that found the same list said nothing: the first event is
    // the change at the end (a wrong one would come 250 ms into the storm,
    // long before it).
    assert_eq!(next_event(&mut rx).await, McpEvent::ListsChanged);
    assert_eq!(connection.tools(), strings(&["a", "z"]));
    let storm_end = || {
        record(&rec)
            .into_iter()
            .find(|e| e["event"] == "storm" && e["message"]["phase"] == "end")
    };
    eventually("the storm's end recorded", || storm_end().is_some()).await;
    assert_eq!(storm_end().unwrap()["message"]["sent"], 601);
    // The handshake's listing, then at most one every 250 ms and the
    // trailing one: 0, 250, 500 and after the end.
    let relists = received(&rec, "tools/list").len() - 1;
    assert!((1..=4).contains(&relists), "{relists} re-lists");
    connection.stop(SOON, SOON).await;
    no_more_events(&mut rx);
}

#[tokio::test]
async fn crash_after_ready_is_an_exited_event() {
    let dir = tempfile::tempdir().unwrap();
    let spec = fake(json!({ "crashAfterMs": 1500, "exitCode": 7, "stderrLines": ["bye"] }));
    let (result, mut rx) = connect(&spec, dir.path(), timeouts()).await;
    let connection = result.unwrap();
    let pid = connection.pid().unwrap();
    assert_eq!(
        next_event(&mut rx).await,
        McpEvent::Exited(McpExit::Process(ExitInfo {
            code: Some(7),
            signal: None
        }))
    );
    assert!(!alive(pid));
    assert_eq!(connection.stderr_tail(5), ["bye"]);
    let exit = McpExit::Process(ExitInfo {
        code: Some(7),
        signal: None,
    });
    assert_eq!(exit.to_string(), "exited with code 7");
    connection.stop(SOON, SOON).await;
    no_more_events(&mut rx);
}

#[tokio::test]
async fn http_connect_lists_pings_and_follows_list_changes() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("record.jsonl");
    let (mut server, url) = http_fake(
        dir.path(),
        json!({
            "tools": ["t1", "t2", "t3"], "prompts": ["p1"], "pageSize": 2, "record": rec,
            "listChangedAfterMs": 300, "toolsAfterChange": ["t4"],
        }),
    )
    .await;
    let timeouts = McpTimeouts {
        ping_interval: Duration::from_millis(50),
        ..timeouts()
    };
    let (result, mut rx) = connect(&http_spec(&url), dir.path(), timeouts).await;
    let connection = result.unwrap();
    assert_eq!(connection.pid(), None);
    assert_eq!(connection.tools(), strings(&["t1", "t2", "t3"]));
    assert_eq!(connection.prompts(), strings(&["p1"]));
    // The notification comes over the SSE stream.
    assert_eq!(next_event(&mut rx).await, McpEvent::ListsChanged);
    assert_eq!(connection.tools(), strings(&["t4"]));
    eventually("pings reach the server", || {
        received(&rec, "ping").len() >= 2
    })
    .await;
    connection.stop(SOON, SOON).await;
    no_more_events(&mut rx);
    server.stop(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn http_server_going_away_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, url) = http_fake(dir.path(), json!({})).await;
    let timeouts = McpTimeouts {
        ping_interval: Duration::from_millis(50),
        ping_timeout: Duration::from_millis(500),
        ..timeouts()
    };
    let (result, mut rx) = connect(&http_spec(&url), dir.path(), timeouts).await;
    let connection = result.unwrap();
    server.stop(Duration::from_secs(5)).await;
    let event = next_event(&mut rx).await;
    assert!(
        matches!(
            event,
            McpEvent::Exited(McpExit::Closed(_)) | McpEvent::Unresponsive(_)
        ),
        "{event:?}"
    );
    // The end is reported once: pings failing on the dead session in
    // the next few intervals (an absence can only be watched for a
    // while) say nothing more.
    tokio::time::sleep(timeouts.ping_interval * 6).await;
    no_more_events(&mut rx);
    connection
        .stop(Duration::from_secs(1), Duration::from_secs(1))
        .await;
    no_more_events(&mut rx);
}

//! LSP connections against the fake language server, over stdio, tcp and
//! a unix socket: the handshake, failed starts that leave no process
//! behind, requests, documents and diagnostics, the requests a server sends
//! its client, external daemons, crashes and stopping.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use lsp_types::Url;
use serde_json::{Value, json};
use steward::runtime::StartError;
use steward::runtime::lsp::{
    LspConnection, LspEvent, LspEventHandler, LspRequestError, OPEN_DELAY,
};
use steward::runtime::process::ProcessSpec;
use steward_schema::formats::LspTransport;
use steward_schema::resource::{LspServerSpec, LspSocket, Reason, Scope};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TryRecvError;
use tokio::time::Instant;

use crate::runtime_common::{
    FAKE_LSP_SERVER, SOON, alive, eventually, received, record, recorded_pid, spawner,
};

fn fake_server() -> PathBuf {
    PathBuf::from(FAKE_LSP_SERVER)
}

fn fake_path() -> String {
    fake_server().display().to_string()
}

/// A workspace directory (canonical, so it compares with /proc paths).
fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().canonicalize().unwrap();
    (dir, path)
}

fn spec(workspace: &Path, transport: LspTransport) -> LspServerSpec {
    LspServerSpec {
        scope: Scope::Workspace,
        languages: vec!["rust".to_owned()],
        transport,
        command: None,
        args: Vec::new(),
        env: BTreeMap::new(),
        socket: None,
        initialization_options: None,
        settings: None,
        extension_to_language: BTreeMap::new(),
        workspace_folder: workspace.display().to_string(),
        root_uri: Url::from_file_path(workspace).unwrap().to_string(),
        startup_timeout: SOON.as_millis() as u64,
        shutdown_timeout: 5000,
        restart_on_crash: false,
        max_restarts: 3,
        trust_required: true,
        extension_name: None,
        dev: None,
        sandbox: None,
        resolved_sandbox: None,
        config_hash: String::new(),
        as_written: Default::default(),
    }
}

fn fake_env(config: &Value) -> BTreeMap<String, String> {
    BTreeMap::from([("FAKE_LSP_CONFIG".to_owned(), config.to_string())])
}

/// A stdio spec running the fake with `config` (FAKE_LSP_CONFIG).
fn fake(workspace: &Path, config: Value) -> LspServerSpec {
    LspServerSpec {
        command: Some(fake_path()),
        env: fake_env(&config),
        ..spec(workspace, LspTransport::Stdio)
    }
}

fn tcp_socket(port: u16) -> Option<LspSocket> {
    Some(LspSocket {
        host: Some("127.0.0.1".to_owned()),
        port: Some(u32::from(port)),
        path: None,
    })
}

fn events() -> (LspEventHandler, mpsc::UnboundedReceiver<LspEvent>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (
        Arc::new(move |event| {
            let _ = tx.send(event);
        }),
        rx,
    )
}

async fn next_event(rx: &mut mpsc::UnboundedReceiver<LspEvent>) -> LspEvent {
    tokio::time::timeout(SOON, rx.recv())
        .await
        .expect("no event within the deadline")
        .expect("the event channel closed")
}

/// Skips diagnostics events; returns the first other one.
async fn next_exit(rx: &mut mpsc::UnboundedReceiver<LspEvent>) -> LspEvent {
    loop {
        match next_event(rx).await {
            LspEvent::DiagnosticsChanged(_) => {}
            event => return event,
        }
    }
}

fn no_more_events(rx: &mut mpsc::UnboundedReceiver<LspEvent>) {
    match rx.try_recv() {
        Err(TryRecvError::Empty | TryRecvError::Disconnected) => {}
        Ok(event) => panic!("unexpected event {event:?}"),
    }
}

async fn connect(
    spec: &LspServerSpec,
) -> (
    Result<LspConnection, StartError>,
    mpsc::UnboundedReceiver<LspEvent>,
) {
    let (on_event, rx) = events();
    let spawner = spawner();
    let result = LspConnection::connect(&spawner, "fake", spec, on_event).await;
    (result, rx)
}

fn events_named(path: &Path, name: &str) -> Vec<Value> {
    record(path)
        .into_iter()
        .filter(|event| event["event"] == name)
        .map(|event| event["message"].clone())
        .collect()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

fn position(uri: &Url, line: u32, character: u32) -> Value {
    json!({ "textDocument": { "uri": uri }, "position": { "line": line, "character": character } })
}

// ---- the handshake ----

#[tokio::test]
async fn stdio_connect_handshakes_and_stops_by_protocol() {
    let (_dir, ws) = workspace();
    let rec = ws.join("record.jsonl");
    let mut spec = fake(&ws, json!({ "record": rec }));
    spec.args = vec!["--stdio".to_owned()];
    spec.initialization_options = Some(json!({ "mode": "strict" }));
    spec.settings = Some(json!({ "fake": { "level": 3 } }));
    let (result, mut rx) = connect(&spec).await;
    let connection = result.unwrap();
    let pid = connection.pid().unwrap();
    assert_eq!(pid, recorded_pid(&rec));
    assert_eq!(
        std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap(),
        ws,
        "started in the workspace folder"
    );
    assert_eq!(events_named(&rec, "start")[0]["args"], json!(["--stdio"]));

    let capabilities = connection.capabilities();
    assert_eq!(capabilities["hoverProvider"], true);
    assert_eq!(capabilities["documentSymbolProvider"], true);
    assert_eq!(capabilities["textDocumentSync"]["change"], 1);

    eventually("the settings arrive", || {
        !received(&rec, "workspace/didChangeConfiguration").is_empty()
    })
    .await;
    let init = &received(&rec, "initialize")[0]["params"];
    assert_eq!(init["processId"], std::process::id());
    assert_eq!(init["rootUri"], spec.root_uri);
    assert_eq!(init["rootPath"], ws.display().to_string());
    assert_eq!(
        init["workspaceFolders"],
        json!([{
            "uri": Url::from_file_path(&ws).unwrap(),
            "name": ws.file_name().unwrap().to_str().unwrap(),
        }])
    );
    assert_eq!(init["initializationOptions"], json!({ "mode": "strict" }));
    let sent = &init["capabilities"];
    assert_eq!(sent["textDocument"]["synchronization"]["didSave"], true);
    assert_eq!(
        sent["textDocument"]["hover"]["contentFormat"][0],
        "markdown"
    );
    assert_eq!(
        sent["textDocument"]["definition"]["dynamicRegistration"],
        false
    );
    assert_eq!(
        sent["textDocument"]["references"]["dynamicRegistration"],
        false
    );
    assert_eq!(
        sent["textDocument"]["documentSymbol"]["hierarchicalDocumentSymbolSupport"],
        true
    );
    assert_eq!(
        sent["textDocument"]["publishDiagnostics"]["versionSupport"],
        true
    );
    assert_eq!(sent["workspace"]["configuration"], true);
    assert_eq!(sent["workspace"]["workspaceFolders"], true);
    assert_eq!(sent["window"]["workDoneProgress"], true);
    assert_eq!(sent["general"]["positionEncodings"], json!(["utf-16"]));
    // initialize → initialized → didChangeConfiguration, in that order.
    let methods: Vec<Value> = events_named(&rec, "recv")
        .into_iter()
        .map(|message| message["method"].clone())
        .collect();
    assert_eq!(
        methods,
        [
            "initialize",
            "initialized",
            "workspace/didChangeConfiguration"
        ]
    );
    assert_eq!(
        received(&rec, "workspace/didChangeConfiguration")[0]["params"],
        json!({ "settings": { "fake": { "level": 3 } } })
    );

    let started = Instant::now();
    connection.stop(SOON).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(!alive(pid));
    assert_eq!(received(&rec, "shutdown").len(), 1);
    assert_eq!(received(&rec, "exit").len(), 1);
    // Ended by the protocol, not by a signal.
    assert_eq!(
        events_named(&rec, "exit"),
        [json!({ "code": 0, "reason": "exit notification" })]
    );
    assert!(events_named(&rec, "signal").is_empty());
    no_more_events(&mut rx);
}

#[tokio::test]
async fn hang_in_initialize_times_out_and_leaves_no_process() {
    let (_dir, ws) = workspace();
    let rec = ws.join("record.jsonl");
    let mut spec = fake(&ws, json!({ "hangInInitialize": true, "record": rec }));
    spec.startup_timeout = 500;
    let started = Instant::now();
    let (result, _rx) = connect(&spec).await;
    let error = result.unwrap_err();
    assert_eq!(error.reason, Reason::StartupTimeout, "{error}");
    assert!(
        error
            .message
            .starts_with("complete the LSP handshake within 500ms: no answer to initialize"),
        "{error}"
    );
    assert!(
        error
            .to_string()
            .contains("\nfake-lsp-server fake: hanging in initialize"),
        "{error}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(
        !alive(recorded_pid(&rec)),
        "the server outlived its failed start"
    );
}

#[tokio::test]
async fn crash_during_initialize_fails_with_the_exit_and_stderr() {
    let (_dir, ws) = workspace();
    let rec = ws.join("record.jsonl");
    let spec = fake(
        &ws,
        json!({ "initializeDelayMs": 10_000, "crashAfterMs": 100, "exitCode": 3, "record": rec }),
    );
    let (result, _rx) = connect(&spec).await;
    let error = result.unwrap_err();
    assert_eq!(error.reason, Reason::StartFailed, "{error}");
    assert!(
        error.message.starts_with(
            "start the language server: the server exited with code 3 during initialize"
        ),
        "{error}"
    );
    assert!(error.to_string().ends_with("exit 3 (crash)"), "{error}");
    assert!(!alive(recorded_pid(&rec)));
}

#[tokio::test]
async fn tcp_with_a_command_retries_until_the_server_listens() {
    let (_dir, ws) = workspace();
    let rec = ws.join("record.jsonl");
    let port = free_port();
    let config = json!({ "transport": "tcp", "port": port, "record": rec });
    let mut spec = spec(&ws, LspTransport::Tcp);
    // The server takes 400 ms to start listening.
    spec.command = Some("sh".to_owned());
    spec.args = vec![
        "-c".to_owned(),
        r#"sleep 0.4; exec "$0""#.to_owned(),
        fake_path(),
    ];
    spec.env = fake_env(&config);
    spec.socket = tcp_socket(port);
    let started = Instant::now();
    let (result, mut rx) = connect(&spec).await;
    let connection = result.unwrap();
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(400), "{elapsed:?}");
    let pid = connection.pid().unwrap();
    assert_eq!(pid, recorded_pid(&rec), "sh execs the fake");
    assert_eq!(events_named(&rec, "connect").len(), 1);

    let uri = Url::from_file_path(ws.join("t.rs")).unwrap();
    connection
        .sync_document(uri.clone(), "rust", "fn t() {}\nERROR\n".to_owned())
        .await
        .unwrap();
    let diagnostics = connection.wait_for_diagnostics(&uri, SOON).await.unwrap();
    assert_eq!(diagnostics.len(), 1);

    connection.stop(SOON).await;
    assert!(!alive(pid), "an owned tcp server is stopped");
    assert_eq!(
        events_named(&rec, "exit"),
        [json!({ "code": 0, "reason": "exit notification" })]
    );
    assert_eq!(rx.try_recv(), Ok(LspEvent::DiagnosticsChanged(uri)));
    no_more_events(&mut rx);
}

#[tokio::test]
async fn tcp_server_that_exits_before_listening_fails_at_once() {
    let (_dir, ws) = workspace();
    let mut spec = spec(&ws, LspTransport::Tcp);
    spec.command = Some("sh".to_owned());
    spec.args = vec!["-c".to_owned(), "echo cannot bind >&2; exit 3".to_owned()];
    spec.socket = tcp_socket(free_port());
    let started = Instant::now();
    let (result, _rx) = connect(&spec).await;
    let error = result.unwrap_err();
    assert_eq!(error.reason, Reason::StartFailed, "{error}");
    assert!(
        error.message.starts_with(
            "start the language server: the server exited with code 3 before it accepted a connection"
        ),
        "{error}"
    );
    assert!(error.to_string().ends_with("cannot bind"), "{error}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn tcp_server_that_never_listens_times_out_and_is_stopped() {
    let (_dir, ws) = workspace();
    let pid_file = ws.join("pid");
    let port = free_port();
    let mut spec = spec(&ws, LspTransport::Tcp);
    spec.command = Some("sh".to_owned());
    spec.args = vec![
        "-c".to_owned(),
        r#"echo $$ > "$0"; exec sleep 30"#.to_owned(),
        pid_file.display().to_string(),
    ];
    spec.socket = tcp_socket(port);
    spec.startup_timeout = 700;
    let started = Instant::now();
    let (result, _rx) = connect(&spec).await;
    let error = result.unwrap_err();
    let elapsed = started.elapsed();
    assert_eq!(error.reason, Reason::StartupTimeout, "{error}");
    assert!(
        error
            .message
            .starts_with(&format!("connect to 127.0.0.1:{port} within 700ms: ")),
        "{error}"
    );
    assert!(error.message.contains("refused"), "{error}");
    assert!(elapsed >= Duration::from_millis(700), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!alive(pid), "the server outlived its failed start");
}

#[tokio::test]
async fn unix_socket_with_a_command() {
    let (_dir, ws) = workspace();
    let rec = ws.join("record.jsonl");
    let path = ws.join("fake.sock");
    let config = json!({ "transport": "socket", "socketPath": path, "record": rec });
    let mut spec = spec(&ws, LspTransport::Socket);
    spec.command = Some(fake_path());
    spec.env = fake_env(&config);
    spec.socket = Some(LspSocket {
        host: None,
        port: None,
        path: Some(path.display().to_string()),
    });
    let (result, mut rx) = connect(&spec).await;
    let connection = result.unwrap();
    let pid = connection.pid().unwrap();
    assert_eq!(connection.capabilities()["hoverProvider"], true);
    let uri = Url::from_file_path(ws.join("u.rs")).unwrap();
    connection
        .sync_document(uri.clone(), "rust", "fn u() {}\n".to_owned())
        .await
        .unwrap();
    let hover = connection
        .request("textDocument/hover", position(&uri, 0, 3), SOON)
        .await
        .unwrap();
    assert!(
        hover["contents"]["value"]
            .as_str()
            .unwrap()
            .contains("word=u")
    );
    connection.stop(SOON).await;
    assert!(!alive(pid));
    assert_eq!(
        events_named(&rec, "exit"),
        [json!({ "code": 0, "reason": "exit notification" })]
    );
    assert!(!path.exists(), "the fake removed its socket on exit");
    while let Ok(event) = rx.try_recv() {
        assert!(
            matches!(event, LspEvent::DiagnosticsChanged(_)),
            "{event:?}"
        );
    }
}

// ---- documents and diagnostics ----

#[tokio::test]
async fn sync_document_opens_once_then_sends_full_changes() {
    let (_dir, ws) = workspace();
    let rec = ws.join("record.jsonl");
    let (result, _rx) = connect(&fake(&ws, json!({ "record": rec }))).await;
    let connection = result.unwrap();
    let uri = Url::from_file_path(ws.join("main.rs")).unwrap();
    let v1 = "fn main() {}\n";
    let v2 = "fn main() { run(); }\n";

    let started = Instant::now();
    let version = connection
        .sync_document(uri.clone(), "rust", v1.to_owned())
        .await
        .unwrap();
    assert_eq!(version, 1);
    assert!(started.elapsed() >= OPEN_DELAY, "the open delay is kept");
    eventually("didOpen arrives", || {
        received(&rec, "textDocument/didOpen").len() == 1
    })
    .await;
    assert_eq!(
        received(&rec, "textDocument/didOpen")[0]["params"]["textDocument"],
        json!({ "uri": uri, "languageId": "rust", "version": 1, "text": v1 })
    );

    // Same text: nothing to send.
    let version = connection
        .sync_document(uri.clone(), "rust", v1.to_owned())
        .await
        .unwrap();
    assert_eq!(version, 1);

    let version = connection
        .sync_document(uri.clone(), "rust", v2.to_owned())
        .await
        .unwrap();
    assert_eq!(version, 2);
    eventually("didChange arrives", || {
        received(&rec, "textDocument/didChange").len() == 1
    })
    .await;
    let change = &received(&rec, "textDocument/didChange")[0]["params"];
    assert_eq!(change["textDocument"], json!({ "uri": uri, "version": 2 }));
    assert_eq!(
        change["contentChanges"],
        json!([{ "text": v2 }]),
        "full sync"
    );
    assert_eq!(received(&rec, "textDocument/didOpen").len(), 1);
    assert_eq!(
        connection.open_documents(),
        [(uri.clone(), "rust".to_owned(), v2.to_owned())]
    );

    connection.close_document(&uri).await;
    assert!(connection.open_documents().is_empty());
    eventually("didClose arrives", || {
        received(&rec, "textDocument/didClose").len() == 1
    })
    .await;
    // Closing an unknown document sends nothing.
    connection.close_document(&uri).await;

    // Reopened: a fresh didOpen at version 1.
    let version = connection
        .sync_document(uri.clone(), "rust", v2.to_owned())
        .await
        .unwrap();
    assert_eq!(version, 1);
    eventually("the second didOpen arrives", || {
        received(&rec, "textDocument/didOpen").len() == 2
    })
    .await;
    assert_eq!(received(&rec, "textDocument/didClose").len(), 1);
    let methods: Vec<Value> = events_named(&rec, "recv")
        .into_iter()
        .map(|message| message["method"].clone())
        .filter(|method| {
            method
                .as_str()
                .is_some_and(|m| m.starts_with("textDocument/"))
        })
        .collect();
    assert_eq!(
        methods,
        [
            "textDocument/didOpen",
            "textDocument/didChange",
            "textDocument/didClose",
            "textDocument/didOpen"
        ]
    );
    connection.stop(SOON).await;
}

#[tokio::test]
async fn diagnostics_are_kept_per_document_and_waited_for_after_a_sync() {
    let (_dir, ws) = workspace();
    let (result, mut rx) = connect(&fake(&ws, json!({ "diagnosticsDelayMs": 300 }))).await;
    let connection = result.unwrap();
    let uri = Url::from_file_path(ws.join("bad.rs")).unwrap();
    assert_eq!(connection.diagnostics(&uri), None);
    connection
        .sync_document(
            uri.clone(),
            "rust",
            "ok\nthis is an ERROR here\n".to_owned(),
        )
        .await
        .unwrap();
    let diagnostics = connection.wait_for_diagnostics(&uri, SOON).await.unwrap();
    assert_eq!(diagnostics.len(), 1);
    assert_eq!(diagnostics[0].range.start, lsp_types::Position::new(1, 11));
    assert_eq!(diagnostics[0].message, "fake error");
    assert_eq!(diagnostics[0].source.as_deref(), Some("fake"));
    assert_eq!(
        next_event(&mut rx).await,
        LspEvent::DiagnosticsChanged(uri.clone())
    );
    assert_eq!(connection.diagnostics(&uri).unwrap(), diagnostics);

    // After a change the old set is stale: the wait is for the new one
    // (published 300 ms later).
    connection
        .sync_document(uri.clone(), "rust", "all good\n".to_owned())
        .await
        .unwrap();
    assert_eq!(connection.diagnostics(&uri).unwrap().len(), 1, "not yet");
    let diagnostics = connection.wait_for_diagnostics(&uri, SOON).await.unwrap();
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    assert_eq!(
        next_event(&mut rx).await,
        LspEvent::DiagnosticsChanged(uri.clone())
    );

    // Nothing published for a document: the wait gives up at its bound.
    let other = Url::from_file_path(ws.join("other.rs")).unwrap();
    let started = Instant::now();
    assert_eq!(
        connection
            .wait_for_diagnostics(&other, Duration::from_millis(200))
            .await,
        None
    );
    assert!(started.elapsed() >= Duration::from_millis(200));
    connection.stop(SOON).await;
    no_more_events(&mut rx);
}

// ---- requests and the connection ----

#[tokio::test]
async fn requests_reach_the_server_and_errors_are_reported() {
    let (_dir, ws) = workspace();
    let (result, _rx) = connect(&fake(&ws, json!({}))).await;
    let connection = result.unwrap();
    let uri = Url::from_file_path(ws.join("lib.rs")).unwrap();
    let text = "fn main() {\n    let x = helper();\n    helper();\n}\nfn helper() {}\n";
    connection
        .sync_document(uri.clone(), "rust", text.to_owned())
        .await
        .unwrap();

    let hover = connection
        .request("textDocument/hover", position(&uri, 1, 14), SOON)
        .await
        .unwrap();
    assert_eq!(hover["contents"]["kind"], "markdown");
    let value = hover["contents"]["value"].as_str().unwrap();
    assert!(
        value.contains("word=helper") && value.contains(" v1 "),
        "{value}"
    );

    let definition = connection
        .request("textDocument/definition", position(&uri, 1, 14), SOON)
        .await
        .unwrap();
    assert_eq!(definition["uri"], uri.as_str());

    let mut references = position(&uri, 1, 14);
    references["context"] = json!({ "includeDeclaration": true });
    let references = connection
        .request("textDocument/references", references, SOON)
        .await
        .unwrap();
    let lines: Vec<u64> = references
        .as_array()
        .unwrap()
        .iter()
        .map(|location| location["range"]["start"]["line"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, [1, 2, 4]);

    let symbols = connection
        .request(
            "textDocument/documentSymbol",
            json!({ "textDocument": { "uri": uri } }),
            SOON,
        )
        .await
        .unwrap();
    let names: Vec<&str> = symbols
        .as_array()
        .unwrap()
        .iter()
        .map(|symbol| symbol["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["main", "helper"]);

    let error = connection
        .request("textDocument/completion", position(&uri, 0, 0), SOON)
        .await
        .unwrap_err();
    assert!(matches!(error, LspRequestError::Server { .. }), "{error:?}");
    assert!(
        error.to_string().starts_with(
            "send textDocument/completion: the server answered with an error: method not found"
        ),
        "{error}"
    );
    // Extension methods go through async-lsp's `forward` socket Service.
    let state = connection
        .request("fake/state", Value::Null, SOON)
        .await
        .unwrap();
    assert_eq!(state["pid"], json!(connection.pid().unwrap()), "{state}");
    let error = connection
        .request("shutdown", Value::Null, SOON)
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "send shutdown: the connection handles the lifecycle itself"
    );
    connection.stop(SOON).await;
}

#[tokio::test]
async fn a_request_is_bounded_and_its_late_answer_is_harmless() {
    let (_dir, ws) = workspace();
    let (result, mut rx) = connect(&fake(&ws, json!({}))).await;
    let connection = result.unwrap();
    let pid = connection.pid().unwrap();
    let uri = Url::from_file_path(ws.join("a.rs")).unwrap();
    connection
        .sync_document(uri.clone(), "rust", "fn a() {}\n".to_owned())
        .await
        .unwrap();
    signal(pid, "-STOP");
    let timeout = Duration::from_millis(300);
    let started = Instant::now();
    let error = connection
        .request("textDocument/hover", position(&uri, 0, 3), timeout)
        .await
        .unwrap_err();
    let elapsed = started.elapsed();
    signal(pid, "-CONT");
    assert!(
        matches!(error, LspRequestError::Timeout { .. }),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "send textDocument/hover: no answer within 300ms"
    );
    assert!(
        elapsed >= timeout && elapsed < timeout + Duration::from_secs(2),
        "{elapsed:?}"
    );
    // The answer to the abandoned request arrives now and is dropped;
    // the connection goes on.
    let hover = connection
        .request("textDocument/hover", position(&uri, 0, 3), SOON)
        .await
        .unwrap();
    assert!(
        hover["contents"]["value"]
            .as_str()
            .unwrap()
            .contains("word=a")
    );
    connection.stop(SOON).await;
    assert!(!alive(pid));
    while let Ok(event) = rx.try_recv() {
        assert!(
            matches!(event, LspEvent::DiagnosticsChanged(_)),
            "{event:?}"
        );
    }
}

#[tokio::test]
async fn stop_is_bounded_when_the_server_ignores_shutdown_and_sigterm() {
    let (_dir, ws) = workspace();
    let rec = ws.join("record.jsonl");
    let mut spec = fake(
        &ws,
        json!({
            "ignoreShutdown": true, "ignoreSigterm": true, "exitOnStdinClose": false,
            "record": rec,
        }),
    );
    spec.shutdown_timeout = 300;
    let (result, mut rx) = connect(&spec).await;
    let connection = result.unwrap();
    let pid = connection.pid().unwrap();
    let grace = Duration::from_millis(300);
    let started = Instant::now();
    connection.stop(grace).await;
    let elapsed = started.elapsed();
    let bound = Duration::from_millis(300) + grace;
    assert!(elapsed >= bound, "{elapsed:?}");
    assert!(elapsed < bound + Duration::from_secs(3), "{elapsed:?}");
    assert!(!alive(pid), "the server survived stop");
    assert_eq!(received(&rec, "shutdown").len(), 1);
    assert_eq!(
        events_named(&rec, "signal"),
        [json!({ "signal": "SIGTERM", "ignored": true })]
    );
    no_more_events(&mut rx);
}

#[tokio::test]
async fn dropping_a_connection_kills_its_server() {
    let (_dir, ws) = workspace();
    let (result, mut rx) = connect(&fake(&ws, json!({}))).await;
    let connection = result.unwrap();
    let pid = connection.pid().unwrap();
    drop(connection);
    eventually("the server is gone", || !alive(pid)).await;
    no_more_events(&mut rx);
}

#[tokio::test]
async fn an_external_daemon_is_only_connected_and_disconnected() {
    let (_dir, ws) = workspace();
    let rec = ws.join("record.jsonl");
    let port_file = ws.join("port");
    let config = json!({ "transport": "tcp", "portFile": port_file, "record": rec });
    let spawner = spawner();
    let mut daemon = spawner
        .spawn(&ProcessSpec {
            program: fake_path(),
            env: fake_env(&config),
            cwd: Some(ws.clone()),
            ..ProcessSpec::default()
        })
        .await
        .unwrap();
    eventually("the daemon listens", || port_file.exists()).await;
    let port: u16 = std::fs::read_to_string(&port_file)
        .unwrap()
        .parse()
        .unwrap();
    let mut spec = spec(&ws, LspTransport::Tcp);
    spec.socket = tcp_socket(port);

    let (result, mut rx) = connect(&spec).await;
    let connection = result.unwrap();
    assert_eq!(connection.pid(), None);
    assert!(connection.stderr_tail(5).is_empty());
    assert_eq!(connection.capabilities()["definitionProvider"], true);
    connection.stop(SOON).await;
    assert!(alive(daemon.pid()), "stop must not end an external daemon");
    eventually("the daemon sees the disconnect", || {
        events_named(&rec, "disconnect").len() == 1
    })
    .await;
    assert_eq!(
        received(&rec, "shutdown").len(),
        1,
        "the session is shut down"
    );
    assert!(
        received(&rec, "exit").is_empty(),
        "exit would end the daemon"
    );
    no_more_events(&mut rx);

    // The daemon takes the next session; its going away is reported.
    let (result, mut rx) = connect(&spec).await;
    let connection = result.unwrap();
    assert_eq!(events_named(&rec, "connect").len(), 2);
    daemon.stop(SOON).await;
    assert_eq!(
        next_event(&mut rx).await,
        LspEvent::Exited("closed the connection".to_owned())
    );
    let started = Instant::now();
    connection.stop(SOON).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    no_more_events(&mut rx);
}

/// Numbers, not a pass/fail test:
/// `cargo test -p steward-tests --test it runtime_lsp::measure -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement"]
async fn measure_connect_latency() {
    fn summary(mut samples: Vec<Duration>) -> String {
        samples.sort();
        format!(
            "p50 {:?} p95 {:?} max {:?}",
            samples[samples.len() / 2],
            samples[samples.len() * 95 / 100],
            samples[samples.len() - 1]
        )
    }
    let (_dir, ws) = workspace();
    let spawner = spawner();
    let measure = async |spec: &LspServerSpec| {
        let mut connects = Vec::new();
        let mut stops = Vec::new();
        for _ in 0..30 {
            let (on_event, _rx) = events();
            let started = Instant::now();
            let connection = LspConnection::connect(&spawner, "m", spec, on_event)
                .await
                .unwrap();
            connects.push(started.elapsed());
            let started = Instant::now();
            connection.stop(SOON).await;
            stops.push(started.elapsed());
        }
        (summary(connects), summary(stops))
    };
    let stdio = measure(&fake(&ws, json!({}))).await;
    println!("stdio (spawned): connect {}; stop {}", stdio.0, stdio.1);

    let port = free_port();
    let mut tcp = spec(&ws, LspTransport::Tcp);
    tcp.command = Some(fake_path());
    tcp.env = fake_env(&json!({ "transport": "tcp", "port": port }));
    tcp.socket = tcp_socket(port);
    let owned = measure(&tcp).await;
    println!("tcp (spawned): connect {}; stop {}", owned.0, owned.1);

    let port_file = ws.join("port");
    let mut daemon = spawner
        .spawn(&ProcessSpec {
            program: fake_path(),
            env: fake_env(&json!({ "transport": "tcp", "portFile": port_file })),
            cwd: Some(ws.clone()),
            ..ProcessSpec::default()
        })
        .await
        .unwrap();
    eventually("the daemon listens", || port_file.exists()).await;
    let port: u16 = std::fs::read_to_string(&port_file)
        .unwrap()
        .parse()
        .unwrap();
    let mut external = spec(&ws, LspTransport::Tcp);
    external.socket = tcp_socket(port);
    let external = measure(&external).await;
    println!(
        "tcp (external daemon): connect {}; stop {}",
        external.0, external.1
    );
    daemon.stop(SOON).await;
}

// ---- the server's requests ----

#[tokio::test]
async fn server_requests_are_answered_whatever_the_id_style() {
    for style in ["number", "zero", "string"] {
        let (_dir, ws) = workspace();
        let rec = ws.join("record.jsonl");
        let mut spec = fake(
            &ws,
            json!({ "serverRequests": true, "idStyle": style, "record": rec }),
        );
        spec.settings = Some(json!({ "fake": { "level": 3 }, "other": true }));
        let (result, mut rx) = connect(&spec).await;
        let connection = result.unwrap();
        let sent_log = |text: &str| {
            events_named(&rec, "send")
                .iter()
                .position(|m| m["method"] == "window/logMessage" && m["params"]["message"] == text)
        };
        eventually("the fake got its answers", || {
            sent_log("fake: ready").is_some()
        })
        .await;
        // A log message came before the initialize answer, and did not
        // disturb the handshake.
        let sent = events_named(&rec, "send");
        let init_answer = sent
            .iter()
            .position(|m| {
                m.get("result")
                    .is_some_and(|r| r.get("capabilities").is_some())
            })
            .unwrap();
        assert!(
            sent_log("fake: initializing").unwrap() < init_answer,
            "{style}"
        );

        let answers = [
            ("window/workDoneProgress/create", Value::Null),
            ("client/registerCapability", Value::Null),
            ("workspace/configuration", json!([{ "level": 3 }])),
        ];
        for (index, (method, expected)) in answers.into_iter().enumerate() {
            let id = sent
                .iter()
                .find(|m| m["method"] == method)
                .map(|m| m["id"].clone())
                .unwrap_or_else(|| panic!("{style}: the fake sent no {method}"));
            let expected_id = match style {
                "zero" => json!(index),
                "string" => json!(format!("fake-{}", index + 1)),
                _ => json!(index + 1),
            };
            assert_eq!(id, expected_id, "{style} {method}");
            let answer = events_named(&rec, "recv")
                .into_iter()
                .find(|m| m.get("method").is_none() && m["id"] == id)
                .unwrap_or_else(|| panic!("{style}: no answer to {method}"));
            assert_eq!(answer.get("error"), None, "{style} {method}: {answer}");
            assert_eq!(answer["result"], expected, "{style} {method}");
        }
        // Still serving.
        let uri = Url::from_file_path(ws.join("x.rs")).unwrap();
        let hover = connection
            .request("textDocument/hover", position(&uri, 0, 0), SOON)
            .await
            .unwrap();
        assert_eq!(hover, Value::Null, "{style}");
        connection.stop(SOON).await;
        no_more_events(&mut rx);
    }
}

// ---- the session ----

#[tokio::test]
async fn a_crash_after_ready_is_one_exited_event() {
    let (_dir, ws) = workspace();
    let spec = fake(&ws, json!({ "crashAfterMs": 1500, "exitCode": 7 }));
    let (result, mut rx) = connect(&spec).await;
    let connection = result.unwrap();
    let pid = connection.pid().unwrap();
    assert_eq!(
        next_exit(&mut rx).await,
        LspEvent::Exited("exited with code 7".to_owned())
    );
    assert!(!alive(pid));
    assert_eq!(
        connection.stderr_tail(1),
        ["fake-lsp-server fake: exit 7 (crash)"]
    );
    let uri = Url::from_file_path(ws.join("x.rs")).unwrap();
    let error = connection
        .sync_document(uri, "rust", String::new())
        .await
        .unwrap_err();
    assert!(matches!(error, LspRequestError::Closed { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        "send textDocument/didOpen: the connection is closed"
    );
    let started = Instant::now();
    connection.stop(SOON).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    no_more_events(&mut rx);
}

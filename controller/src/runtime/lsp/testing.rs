//! What the LSP connection tests share: specs running the fake language
//! server (stdio, tcp or unix socket), connecting, watching the events, and
//! reading what the fake recorded.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lsp_types::Url;
use serde_json::{Value, json};
use steward_schema::formats::LspTransport;
use steward_schema::resource::{LspServerSpec, LspSocket, Scope};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TryRecvError;

use super::{LspConnection, LspEvent, LspEventHandler};
use crate::runtime::process::Spawner;
use crate::runtime::start::StartError;
use crate::runtime::test_support::{SOON, record};

/// The fake server binary (see `runtime::test_support::fake_binary`).
pub(super) fn fake_server() -> PathBuf {
    crate::runtime::test_support::fake_binary("fake-lsp-server")
}

pub(super) fn fake_path() -> String {
    fake_server().display().to_string()
}

/// A workspace directory (canonical, so it compares with /proc paths).
pub(super) fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().canonicalize().unwrap();
    (dir, path)
}

pub(super) fn spec(workspace: &Path, transport: LspTransport) -> LspServerSpec {
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
        config_hash: String::new(),
        as_written: Default::default(),
    }
}

pub(super) fn fake_env(config: &Value) -> BTreeMap<String, String> {
    BTreeMap::from([("FAKE_LSP_CONFIG".to_owned(), config.to_string())])
}

/// A stdio spec running the fake with `config` (FAKE_LSP_CONFIG).
pub(super) fn fake(workspace: &Path, config: Value) -> LspServerSpec {
    LspServerSpec {
        command: Some(fake_path()),
        env: fake_env(&config),
        ..spec(workspace, LspTransport::Stdio)
    }
}

pub(super) fn tcp_socket(port: u16) -> Option<LspSocket> {
    Some(LspSocket {
        host: Some("127.0.0.1".to_owned()),
        port: Some(u32::from(port)),
        path: None,
    })
}

pub(super) fn events() -> (LspEventHandler, mpsc::UnboundedReceiver<LspEvent>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (
        Arc::new(move |event| {
            let _ = tx.send(event);
        }),
        rx,
    )
}

pub(super) async fn next_event(rx: &mut mpsc::UnboundedReceiver<LspEvent>) -> LspEvent {
    tokio::time::timeout(SOON, rx.recv())
        .await
        .expect("no event within the deadline")
        .expect("the event channel closed")
}

/// Skips diagnostics events; returns the first other one.
pub(super) async fn next_exit(rx: &mut mpsc::UnboundedReceiver<LspEvent>) -> LspEvent {
    loop {
        match next_event(rx).await {
            LspEvent::DiagnosticsChanged(_) => {}
            event => return event,
        }
    }
}

pub(super) fn no_more_events(rx: &mut mpsc::UnboundedReceiver<LspEvent>) {
    match rx.try_recv() {
        Err(TryRecvError::Empty | TryRecvError::Disconnected) => {}
        Ok(event) => panic!("unexpected event {event:?}"),
    }
}

pub(super) async fn connect(
    spec: &LspServerSpec,
) -> (
    Result<LspConnection, StartError>,
    mpsc::UnboundedReceiver<LspEvent>,
) {
    let (on_event, rx) = events();
    let spawner = Spawner::new().unwrap();
    let result = LspConnection::connect(&spawner, "fake", spec, on_event).await;
    (result, rx)
}

pub(super) fn events_named(path: &Path, name: &str) -> Vec<Value> {
    record(path)
        .into_iter()
        .filter(|event| event["event"] == name)
        .map(|event| event["message"].clone())
        .collect()
}

pub(super) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub(super) fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

pub(super) fn position(uri: &Url, line: u32, character: u32) -> Value {
    json!({ "textDocument": { "uri": uri }, "position": { "line": line, "character": character } })
}

//! What the MCP connection tests share: specs running the fake server
//! (stdio or HTTP), connecting, and watching the events.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use steward_schema::resource::{McpServerSpec, McpTransport, Scope};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TryRecvError;

use super::{McpConnection, McpEvent, McpEventHandler, McpTimeouts};
use crate::runtime::process::{ManagedProcess, ProcessSpec, Spawner};
use crate::runtime::start::StartError;
use crate::runtime::test_support::{SOON, eventually};

/// The fake server binary (see `runtime::test_support::fake_binary`).
pub(super) fn fake_server() -> PathBuf {
    crate::runtime::test_support::fake_binary("fake-mcp-server")
}

pub(super) fn spawner() -> Spawner {
    Spawner::new().unwrap()
}

pub(super) fn spec(transport: McpTransport) -> McpServerSpec {
    McpServerSpec {
        transport,
        scope: Scope::User,
        command: None,
        args: None,
        env: None,
        cwd: None,
        url: None,
        http_url: None,
        headers: None,
        timeout: None,
        trust: None,
        include_tools: None,
        exclude_tools: None,
        description: None,
        disabled: None,
        oauth: None,
        qwen: Default::default(),
        extension_name: None,
        config_hash: String::new(),
        approval_hash: String::new(),
        as_written: Default::default(),
    }
}

/// A stdio spec running the fake with `config` (FAKE_MCP_CONFIG).
pub(super) fn fake(config: Value) -> McpServerSpec {
    McpServerSpec {
        command: Some(fake_server().display().to_string()),
        env: Some(BTreeMap::from([(
            "FAKE_MCP_CONFIG".to_owned(),
            config.to_string(),
        )])),
        ..spec(McpTransport::Stdio)
    }
}

pub(super) fn timeouts() -> McpTimeouts {
    McpTimeouts {
        stdio_handshake: SOON,
        remote_handshake: SOON,
        ..McpTimeouts::default()
    }
}

pub(super) fn events() -> (McpEventHandler, mpsc::UnboundedReceiver<McpEvent>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (
        Arc::new(move |event| {
            let _ = tx.send(event);
        }),
        rx,
    )
}

pub(super) async fn next_event(rx: &mut mpsc::UnboundedReceiver<McpEvent>) -> McpEvent {
    tokio::time::timeout(SOON, rx.recv())
        .await
        .expect("no event within the deadline")
        .expect("the event channel closed")
}

pub(super) fn no_more_events(rx: &mut mpsc::UnboundedReceiver<McpEvent>) {
    match rx.try_recv() {
        Err(TryRecvError::Empty | TryRecvError::Disconnected) => {}
        Ok(event) => panic!("unexpected event {event:?}"),
    }
}

pub(super) async fn connect(
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

pub(super) fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| (*item).to_owned()).collect()
}

/// Starts the fake in HTTP mode; returns the process and its endpoint.
pub(super) async fn http_fake(dir: &Path, mut config: Value) -> (ManagedProcess, String) {
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

pub(super) fn http_spec(url: &str) -> McpServerSpec {
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

//! What the LSP unit tests share: specs, connecting (to nothing that runs:
//! the tests against the fake language server are integration tests), and
//! events.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use lsp_types::Url;
use steward_schema::formats::LspTransport;
use steward_schema::resource::{LspServerSpec, LspSocket, Scope};
use tokio::sync::mpsc;

use super::{LspConnection, LspEvent, LspEventHandler};
use crate::runtime::process::Spawner;
use crate::runtime::start::StartError;

/// Bound on every wait for something that should happen.
pub(super) const SOON: Duration = Duration::from_secs(10);

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
        dev: None,
        sandbox: None,
        resolved_sandbox: None,
        config_hash: String::new(),
        as_written: Default::default(),
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

pub(super) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

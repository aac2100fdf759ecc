//! What the MCP unit tests share: specs, connecting (to nothing that runs:
//! the tests against the fake server are integration tests), and events.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use steward_schema::resource::{McpServerSpec, McpTransport};
use tokio::sync::mpsc;

use super::{McpConnection, McpEvent, McpEventHandler, McpTimeouts};
use crate::runtime::process::Spawner;
use crate::runtime::start::StartError;

/// Bound on every wait for something that should happen.
pub(super) const SOON: Duration = Duration::from_secs(10);

pub(super) fn spawner() -> Spawner {
    Spawner::new().unwrap()
}

pub(super) fn spec(transport: McpTransport) -> McpServerSpec {
    McpServerSpec {
        transport,
        ..Default::default()
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

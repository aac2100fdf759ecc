//! What the runtime tests share: a [`Spawner`] whose exec shim is the real
//! `steward` program, the fake servers' paths, a bound on every wait, and
//! reading what a fake recorded.
//!
//! The runtime tests drive the controller's runtime (processes, MCP and LSP
//! connections) directly through its public API, without a controller.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ClientRequest, ClientResult, ErrorData, ServerRequest};
use serde_json::Value;
use steward::runtime::mcp::{CallError, Caller, McpConnection};
use steward::runtime::process::Spawner;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use steward_tests::harness::alive;

/// Bound on every wait for something that should happen (generous: the
/// machine is shared and busy).
pub const SOON: Duration = Duration::from_secs(10);

/// The exec shim of the runtime tests' spawners: the real `steward` program
/// (this test binary has no shim mode).
pub const STEWARD: &str = env!("CARGO_BIN_EXE_steward-under-test");
/// The fake MCP server.
pub const FAKE_MCP_SERVER: &str = env!("CARGO_BIN_EXE_fake-mcp-server");
/// The fake language server.
pub const FAKE_LSP_SERVER: &str = env!("CARGO_BIN_EXE_fake-lsp-server");

/// A spawner with [`STEWARD`] as its exec shim.
pub fn spawner() -> Spawner {
    Spawner::with_exec_shim(STEWARD).expect("start the spawner thread")
}

/// Poll `condition` until it holds; fail after [`SOON`].
pub async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + SOON;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A fake's record file: one JSON object per line.
pub fn record(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// The pid the fake recorded at its start.
pub fn recorded_pid(path: &Path) -> u32 {
    record(path)
        .iter()
        .find(|event| event["event"] == "start")
        .and_then(|event| event["pid"].as_u64())
        .expect("the fake recorded its start") as u32
}

/// Messages with `method` the fake received, in order.
pub fn received(path: &Path, method: &str) -> Vec<Value> {
    record(path)
        .into_iter()
        .filter(|event| event["event"] == "recv" && event["message"]["method"] == method)
        .map(|event| event["message"].clone())
        .collect()
}

/// A caller with no client behind it: progress goes nowhere and server
/// requests are refused.
pub struct NoCaller;

impl Caller for NoCaller {
    fn progress(
        &self,
        _: rmcp::model::ProgressNotificationParam,
    ) -> futures::future::BoxFuture<'static, ()> {
        Box::pin(async {})
    }
    fn forward(
        &self,
        _: ServerRequest,
        _: CancellationToken,
    ) -> futures::future::BoxFuture<'static, Result<ClientResult, ErrorData>> {
        Box::pin(async { Err(ErrorData::internal_error("no client", None)) })
    }
}

/// A `tools/list` through the connection's handle, as a client's would go.
pub async fn list_tools_through(
    connection: &McpConnection,
) -> Result<rmcp::model::ServerResult, CallError> {
    connection
        .handle()
        .call(
            ClientRequest::ListToolsRequest(rmcp::model::ListToolsRequest::default()),
            Arc::new(NoCaller),
            None,
            SOON,
            None,
            &CancellationToken::new(),
        )
        .await
}

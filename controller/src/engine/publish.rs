//! What the engine tells the readers at the end of the flow (the agent
//! endpoint) about live connections: which servers can take calls and
//! queries now, which are restarting or going away. The engine owns this
//! interface and the gateway implements it, so nothing the engine decides
//! depends on a reader, and a reader never decides.

use std::sync::Arc;

use futures::future::BoxFuture;
use steward_schema::resource::McpServerSpec;

use crate::runtime::lsp::LspConnection;
use crate::runtime::mcp::{McpHandle, McpLists};

/// Where live connections are published.
pub trait Publish: Send + Sync {
    /// MCP server `name` is Ready under `spec`, offering `lists`.
    fn mcp_ready(&self, name: &str, handle: &McpHandle, lists: &McpLists, spec: &McpServerSpec);
    /// It restarts for a new configuration: calls wait for it.
    fn mcp_restarting(&self, name: &str);
    /// It is being stopped: no new calls (nothing when it was not live).
    fn mcp_stopping(&self, name: &str);
    /// It is no longer live (a failed start, a crash).
    fn mcp_withdrawn(&self, name: &str);
    /// It left the configuration: forget everything about it.
    fn mcp_removed(&self, name: &str);
    /// It is to be idle under `spec` (not running, `--start lazy` or
    /// `--idle-stop`): list its cached catalog in place of any live one,
    /// calls waiting for it (and demanding its start). The catalog is the
    /// one of the configuration it last ran, the current one or, after an
    /// edit, the one before (a call starts it under `spec`, and clients hear
    /// `list_changed` if it then offers something else). None when nothing
    /// is cached for it: it must run to be known (a stale cached listing is
    /// withdrawn).
    fn mcp_idle(&self, name: &str, spec: &McpServerSpec) -> Option<IdleCatalog>;

    /// Language server `name`'s connection is ready: bring it up to date
    /// (replay the documents tracked for it), then route queries to it.
    fn lsp_ready<'a>(&'a self, name: &'a str, conn: Arc<LspConnection>) -> BoxFuture<'a, ()>;
    /// `conn` is going away: stop routing to it, unless another connection
    /// of the server was published since.
    fn lsp_gone(&self, name: &str, conn: &Arc<LspConnection>);
    /// The server is being stopped, or exited: stop routing to it.
    fn lsp_withdrawn(&self, name: &str);
    /// It left the configuration: forget its documents.
    fn lsp_removed(&self, name: &str);
}

/// What an idle server's cached catalog offers (for its status).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdleCatalog {
    /// The tools, by the server's names, before `includeTools` /
    /// `excludeTools`.
    pub tools: Vec<String>,
    pub prompts: Vec<String>,
    /// Offered under the configuration before an edit, not the current one.
    pub earlier: bool,
}

/// Publishes nowhere: for tests of the engine alone.
#[cfg(test)]
pub(crate) struct Nowhere;

#[cfg(test)]
impl Publish for Nowhere {
    fn mcp_ready(&self, _: &str, _: &McpHandle, _: &McpLists, _: &McpServerSpec) {}
    fn mcp_restarting(&self, _: &str) {}
    fn mcp_stopping(&self, _: &str) {}
    fn mcp_withdrawn(&self, _: &str) {}
    fn mcp_removed(&self, _: &str) {}
    fn mcp_idle(&self, _: &str, _: &McpServerSpec) -> Option<IdleCatalog> {
        None
    }
    fn lsp_ready<'a>(&'a self, _: &'a str, _: Arc<LspConnection>) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
    fn lsp_gone(&self, _: &str, _: &Arc<LspConnection>) {}
    fn lsp_withdrawn(&self, _: &str) {}
    fn lsp_removed(&self, _: &str) {}
}

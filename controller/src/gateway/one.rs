//! The one-server view (`steward mcp --server NAME`, `/mcp?server=NAME`):
//! one MCP server under its own names — tools, prompts, resources,
//! templates, completion — with every rule of the union (admission, pins,
//! the wait while it (re)starts, idle start, counters, traces, never twice).
//!
//! What it answers for itself: whether the name may be served at all (an
//! unknown or not admitted name is refused: HTTP 404 with the reason, the
//! first request's error on stdio), and what the session says of the
//! server — its capabilities, implementation and instructions, as the live
//! connection got them (before it is live, what its catalog shows).

use rmcp::model::{
    Implementation, PromptsCapability, ResourcesCapability, ServerCapabilities, ToolsCapability,
};
use steward_schema::resource::{Phase, ResourceKind};

use super::Gateway;
use super::explain::{explain, explain_blocked};
use crate::desired::snapshot::Key;

/// What the one-server view of a server says of it in `initialize` (and
/// `server/discover`).
#[derive(Debug, Clone)]
pub struct ViewInfo {
    pub capabilities: ServerCapabilities,
    pub server_info: Implementation,
    pub instructions: Option<String>,
}

impl Gateway {
    /// Why the one-server view of `server` cannot be served — no MCP server
    /// of that name, or one that is not admitted (or stopped by the user) —
    /// with what to do; `None` when it can (even while it starts, fails or
    /// is idle: its calls then wait or say why, as in the union).
    pub fn view_refusal(&self, server: &str) -> Option<String> {
        let key = Key::mcp(server);
        let snap = self.store.snapshot();
        if !snap.contains(&key) {
            let mut known: Vec<&str> = snap.desired.mcp.keys().map(String::as_str).collect();
            known.sort_unstable();
            let listed = if known.is_empty() {
                "this workspace has none".to_owned()
            } else {
                format!("its MCP servers are {}", known.join(", "))
            };
            let removed = self
                .status
                .removed_names(ResourceKind::McpServer, &snap)
                .contains(server);
            let what = if removed {
                "was removed from the configuration"
            } else {
                "is not configured in this workspace"
            };
            return Some(format!(
                "MCP server \"{server}\" {what} ({listed}; `steward status` lists them)"
            ));
        }
        if let Some(blocked) = snap.blocked(&key) {
            return Some(explain_blocked(server, blocked.reason, &blocked.message));
        }
        match self.status.get(&key) {
            Some(status) if status.phase == Phase::Blocked => Some(explain(server, &status)),
            _ => None,
        }
    }

    /// Wait (at most the start wait) for `server` to be live, starting it
    /// if it is idle; whether it is.
    pub async fn wait_live(&self, server: &str) -> bool {
        let deadline = tokio::time::Instant::now() + self.config.start_wait;
        let mut changes = self.registry.subscribe();
        let mut demanded = false;
        loop {
            changes.borrow_and_update();
            if self.registry.live(server).is_some() {
                return true;
            }
            if let super::route::Availability::Down(_) = self.availability(server) {
                return false;
            }
            if !std::mem::replace(&mut demanded, true) {
                self.demand(server);
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return false,
            }
        }
    }

    /// What the one-server view of `server` says of it: the live
    /// connection's capabilities, implementation and instructions; before
    /// it is live, what its listed (or cached) catalog shows. Lists are
    /// said to change (Steward tells of every change it sees), logging
    /// and completion only when the server has them.
    pub fn view_info(&self, server: &str) -> ViewInfo {
        let union = self.registry.union_of(server);
        let live = self.registry.live(server);
        let peer = live.as_ref().and_then(|up| up.handle.peer.peer_info());
        let mut capabilities = match &peer {
            Some(info) => info.capabilities.clone(),
            None => {
                let mut capabilities = ServerCapabilities::default();
                if !union.tools.is_empty() {
                    capabilities.tools = Some(ToolsCapability::default());
                }
                if !union.prompts.is_empty() {
                    capabilities.prompts = Some(PromptsCapability::default());
                }
                if !union.resources.is_empty() || !union.templates.is_empty() {
                    capabilities.resources = Some(ResourcesCapability::default());
                }
                capabilities
            }
        };
        // Steward itself lists tools (an empty list, while the server is
        // not live) and tells of changes of every list.
        capabilities
            .tools
            .get_or_insert_with(Default::default)
            .list_changed = Some(true);
        if let Some(prompts) = &mut capabilities.prompts {
            prompts.list_changed = Some(true);
        }
        if let Some(resources) = &mut capabilities.resources {
            resources.list_changed = Some(true);
        }
        let cached = || self.cache.last(server).and_then(|entry| entry.server_info);
        let server_info = peer
            .as_ref()
            .and_then(|info| info.server_info.clone())
            .or_else(cached)
            .unwrap_or_else(|| Implementation::new(server, env!("CARGO_PKG_VERSION")));
        let instructions = match &peer {
            Some(info) => info.instructions.clone(),
            None => self.cache.last(server).and_then(|entry| entry.instructions),
        };
        ViewInfo {
            capabilities,
            server_info,
            instructions,
        }
    }
}

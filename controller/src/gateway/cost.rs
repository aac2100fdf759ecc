//! What the catalog costs: every tool of the workspace, where it stands
//! (listed, filtered, quarantined, its server not Ready) and the size of
//! its definition in bytes and estimated tokens (bytes / 4), for
//! `steward tools` and the per-server totals in status.

use std::collections::BTreeMap;

use rmcp::model::Tool;
use steward_schema::resource::{CatalogStatus, ToolRow, ToolState, estimated_tokens};

use super::Gateway;
use super::pins::Definition;

/// Bytes of `tool`'s definition as JSON.
pub fn definition_bytes(tool: &Tool) -> u64 {
    serde_json::to_vec(tool).map_or(0, |v| v.len() as u64)
}

fn row(server: &str, tool: &Tool, exposed: Option<&str>, state: ToolState) -> ToolRow {
    let bytes = match exposed {
        // As listed: under its exposed name.
        Some(name) => {
            let mut listed = tool.clone();
            listed.name = name.to_owned().into();
            definition_bytes(&listed)
        }
        None => definition_bytes(tool),
    };
    ToolRow {
        server: server.to_owned(),
        tool: Some(tool.name.to_string()),
        exposed: exposed.map(str::to_owned),
        state,
        bytes,
        estimated_tokens: estimated_tokens(bytes),
    }
}

impl Gateway {
    /// Every tool of every configured MCP server, by server and tool name.
    pub fn tool_rows(&self) -> Vec<ToolRow> {
        let snap = self.store.snapshot();
        let union = self.registry.union();
        let exposed: BTreeMap<(&str, &str), &str> = union
            .tools
            .iter()
            .filter_map(|t| {
                let route = union.tool(&t.name)?;
                Some((
                    (route.server.as_str(), route.original.as_str()),
                    t.name.as_ref(),
                ))
            })
            .collect();
        let offered = self.offered();
        let mut rows = Vec::new();
        for (server, desired) in &snap.desired.mcp {
            let Some(tools) = offered.get(server).filter(|_| self.registry.listed(server)) else {
                rows.push(ToolRow {
                    server: server.clone(),
                    tool: None,
                    exposed: None,
                    state: ToolState::ServerNotReady,
                    bytes: 0,
                    estimated_tokens: 0,
                });
                continue;
            };
            let quarantined = self.pins.quarantined(server);
            let mut tools: Vec<&Tool> = tools.iter().collect();
            tools.sort_by(|a, b| a.name.cmp(&b.name));
            for tool in tools {
                let name = tool.name.as_ref();
                let row = if !desired.spec.exposes_tool(name) {
                    row(server, tool, None, ToolState::Filtered)
                } else if quarantined
                    .iter()
                    .any(|q| q.kind == Definition::Tool && q.name == name)
                {
                    row(server, tool, None, ToolState::Quarantined)
                } else if let Some(exposed) = exposed.get(&(server.as_str(), name)) {
                    row(server, tool, Some(exposed), ToolState::Listed)
                } else {
                    continue; // a duplicate the server listed twice
                };
                rows.push(row);
            }
        }
        rows
    }

    /// Each listed server's catalog: live or cached, and what its listed
    /// tools cost, by server.
    pub fn catalogs(&self) -> BTreeMap<String, CatalogStatus> {
        let union = self.registry.union();
        let mut bytes: BTreeMap<String, u64> = BTreeMap::new();
        for tool in &union.tools {
            if let Some(route) = union.tool(&tool.name) {
                *bytes.entry(route.server.clone()).or_default() += definition_bytes(tool);
            }
        }
        self.registry
            .sources()
            .into_iter()
            .map(|(server, source)| {
                let b = bytes.get(&server).copied().unwrap_or_default();
                (server, CatalogStatus::new(source, b))
            })
            .collect()
    }
}

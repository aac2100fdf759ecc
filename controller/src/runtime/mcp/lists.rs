//! What a server offers: its tools, prompts, resources and resource
//! templates, every page ([`list_all`]), as it describes them
//! ([`McpLists`]), and the configured filter of the tools exposed
//! ([`filter_tools`]).

use rmcp::model::{Prompt, Resource, ResourceTemplate, Tool};
use rmcp::{Peer, RoleClient};

use super::describe::{Dig, describe};

/// `includeTools` / `excludeTools`: the tools to expose, in the server's order.
/// An absent include list allows every tool (`[]` allows none); exclude wins.
/// Entries are exact tool names.
pub fn filter_tools(
    tools: &[String],
    include: Option<&[String]>,
    exclude: Option<&[String]>,
) -> Vec<String> {
    tools
        .iter()
        .filter(|tool| include.is_none_or(|include| include.contains(tool)))
        .filter(|tool| !exclude.is_some_and(|exclude| exclude.contains(tool)))
        .cloned()
        .collect()
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Capabilities {
    pub(super) tools: bool,
    pub(super) prompts: bool,
    pub(super) resources: bool,
}

/// What a server offers, every page, as the server describes it (unfiltered).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct McpLists {
    pub tools: Vec<Tool>,
    pub prompts: Vec<Prompt>,
    pub resources: Vec<Resource>,
    pub templates: Vec<ResourceTemplate>,
}

pub(super) type Lists = McpLists;

pub(super) struct ListError {
    pub(super) phase: &'static str,
    pub(super) message: String,
}

/// Tools, prompts, resources and resource templates, every page. A server
/// without a capability has none of its kind; a failing `prompts/list` or
/// `resources/*` means none of that kind, while a failing `tools/list` is an
/// error.
pub(super) async fn list_all(
    name: &str,
    peer: &Peer<RoleClient>,
    capabilities: Capabilities,
    dig: Dig,
) -> Result<Lists, ListError> {
    let mut lists = Lists::default();
    if capabilities.tools {
        lists.tools = peer.list_all_tools().await.map_err(|error| ListError {
            phase: "tools/list",
            message: describe(&error, dig),
        })?;
    }
    let optional = |kind: &str, error: &rmcp::service::ServiceError| {
        tracing::debug!(server = %name, error = %describe(error, dig), "{kind} failed; treating as none");
    };
    if capabilities.prompts {
        match peer.list_all_prompts().await {
            Ok(prompts) => lists.prompts = prompts,
            Err(error) => optional("prompts/list", &error),
        }
    }
    if capabilities.resources {
        match peer.list_all_resources().await {
            Ok(resources) => lists.resources = resources,
            Err(error) => optional("resources/list", &error),
        }
        match peer.list_all_resource_templates().await {
            Ok(templates) => lists.templates = templates,
            Err(error) => optional("resources/templates/list", &error),
        }
    }
    Ok(lists)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::mcp::testing::*;

    #[test]
    fn filter_tools_include_then_exclude_by_exact_name() {
        let tools = strings(&["read", "write", "delete", "list"]);
        assert_eq!(filter_tools(&tools, None, None), tools);
        let include = strings(&["list", "read", "missing"]);
        assert_eq!(
            filter_tools(&tools, Some(&include), None),
            strings(&["read", "list"]),
            "server order is kept"
        );
        let exclude = strings(&["read", "delete"]);
        assert_eq!(
            filter_tools(&tools, None, Some(&exclude)),
            strings(&["write", "list"])
        );
        assert_eq!(
            filter_tools(&tools, Some(&include), Some(&exclude)),
            strings(&["list"]),
            "exclude wins"
        );
        assert!(
            filter_tools(&tools, Some(&[]), None).is_empty(),
            "[] allows none"
        );
        assert_eq!(filter_tools(&tools, None, Some(&[])), tools);
        assert!(filter_tools(&tools, Some(&strings(&["rea"])), None).is_empty());
    }
}

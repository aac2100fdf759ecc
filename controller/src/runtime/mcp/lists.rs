//! What a server offers: its tools, prompts, resources and resource
//! templates, every page ([`list_all`]), as it describes them
//! ([`McpLists`]). Which of its tools an agent is offered is the spec's
//! to say (`McpServerSpec::exposed_tools`).

use rmcp::model::{Prompt, Resource, ResourceTemplate, Tool};
use rmcp::{Peer, RoleClient};

use super::describe::{Dig, describe};

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

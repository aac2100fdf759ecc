//! What a server offers: its tools, prompts, resources and resource
//! templates, every page ([`list_all`]), as it describes them
//! ([`McpLists`]); a re-list lists some kinds again and keeps the others
//! ([`McpLists::updated`]). Which of its tools an agent is offered is the
//! spec's to say (`McpServerSpec::exposed_tools`).

use super::session::{Upstream, UpstreamError};
use rmcp::model::{Prompt, Resource, ResourceTemplate, Tool};

use super::describe::{Dig, describe};
use super::relist::Kinds;

/// The kinds of list a server offers.
#[derive(Debug, Clone, Copy)]
pub(super) struct Capabilities {
    pub(super) tools: bool,
    pub(super) prompts: bool,
    pub(super) resources: bool,
}

impl Capabilities {
    /// Those of `kinds` the server offers.
    pub(super) fn only(self, kinds: Kinds) -> Capabilities {
        Capabilities {
            tools: self.tools && kinds.tools,
            prompts: self.prompts && kinds.prompts,
            resources: self.resources && kinds.resources,
        }
    }
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

impl McpLists {
    /// These lists with the kinds of `kinds` as `listed` has them.
    pub(super) fn updated(&self, kinds: Kinds, listed: McpLists) -> McpLists {
        let McpLists {
            tools,
            prompts,
            resources,
            templates,
        } = listed;
        McpLists {
            tools: if kinds.tools {
                tools
            } else {
                self.tools.clone()
            },
            prompts: if kinds.prompts {
                prompts
            } else {
                self.prompts.clone()
            },
            resources: if kinds.resources {
                resources
            } else {
                self.resources.clone()
            },
            templates: if kinds.resources {
                templates
            } else {
                self.templates.clone()
            },
        }
    }
}

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
    peer: &Upstream,
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
    let optional = |kind: &str, error: &UpstreamError| {
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
    use std::sync::Arc;

    use super::*;

    fn lists(tool: &str, prompt: &str) -> McpLists {
        McpLists {
            tools: vec![Tool::new(tool.to_owned(), "", Arc::default())],
            prompts: vec![Prompt::new(prompt, None::<String>, None)],
            ..McpLists::default()
        }
    }

    #[test]
    fn a_relist_replaces_the_kinds_it_listed_and_keeps_the_others() {
        let before = lists("t1", "p1");
        let tools_only = Kinds {
            tools: true,
            ..Kinds::default()
        };
        let after = before.updated(tools_only, lists("t2", "p2"));
        assert_eq!(after.tools[0].name, "t2");
        assert_eq!(after.prompts[0].name, "p1", "prompts were not listed");
        // A kind listed again may come back empty.
        let prompts_only = Kinds {
            prompts: true,
            ..Kinds::default()
        };
        let after = after.updated(prompts_only, McpLists::default());
        assert_eq!(after.tools[0].name, "t2");
        assert!(after.prompts.is_empty());
    }
}

//! What one client lists: the union seen through its [`Profile`].
//!
//! `direct` lists every tool of the union; `search` lists the finder's
//! `search_tools` and `call_tool` ([`super::finder`]); `code` lists
//! `describe_tools` and `run_code` ([`super::code`]); the modes combine.
//! The `lsp` tool is listed in every mode while a language server is Ready.
//! The fingerprints say when that list changed for this client, so a
//! `search`-only client is not told about tools it does not list (a `code`
//! client is told when the servers named in `run_code`'s description change).

use rmcp::model::Tool;

use super::profile::Profile;
use super::registry::Union;
use super::{code, finder, lsp_tool};

/// The tools `profile` lists from `union`, in order.
pub fn tools(union: &Union, profile: &Profile) -> Vec<Tool> {
    let mut tools = Vec::new();
    if profile.expose.direct {
        tools.extend(union.tools.iter().cloned());
    }
    if profile.expose.search {
        tools.extend(finder::tools());
    }
    if profile.expose.code {
        tools.extend(code::tools(union));
    }
    if union.lsp {
        tools.push(lsp_tool::tool());
    }
    tools
}

/// Change detection of what `profile` lists: tools, prompts, resources.
pub fn fingerprints(union: &Union, profile: &Profile) -> [u64; 3] {
    let [tools, prompts, resources] = union.fingerprints;
    let tools = if profile.expose.direct {
        tools
    } else if profile.expose.code {
        // `run_code`'s description names the servers with tools.
        code::fingerprint(union)
    } else {
        // Only the finder's tools (fixed) and `lsp` are listed.
        u64::from(union.lsp)
    };
    [tools, prompts, resources]
}

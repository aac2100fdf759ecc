//! Code mode (`--expose code`): placeholder while the engine is built.

pub mod engine;

use rmcp::model::Tool;

use super::registry::Union;

pub fn tools(_union: &Union) -> Vec<Tool> {
    Vec::new()
}

pub fn fingerprint(union: &Union) -> u64 {
    u64::from(union.lsp)
}

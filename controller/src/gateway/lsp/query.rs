//! What `steward lsp` asks of a language server: the query
//! [`super::LspService::query`] answers. The command line builds it and the
//! control socket carries it to the controller as is.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// One `steward lsp` query.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LspQuery {
    pub op: LspOp,
    /// Absolute path of the document (all ops but `request`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
    /// 1-based line and column (character) of the position ops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
    /// Which server (default: chosen by the file's extension / language).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// `request`: the method and its params.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<serde_json::Value>,
}

/// The `steward lsp` operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum LspOp {
    Open,
    Hover,
    Definition,
    References,
    Symbols,
    Diagnostics,
    Request,
}

//! Diagnostics: one problem in one source file, located as precisely as the
//! parser knows (`line:column`, JSON pointer) and phrased as what was expected.

use std::fmt;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A 1-based position in a source text (`column` counts characters, not bytes).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub struct Pos {
    pub line: u32,
    pub column: u32,
}

/// One problem found in a source.
///
/// Rendered like compiler output: `path:line:col: message (at /json/pointer)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Diagnostic {
    /// The file the problem is in (or a pseudo path such as `<--mcp-config>`).
    pub file: PathBuf,
    /// Where the offending value starts, when the parser knows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
    /// JSON pointer of the offending value; empty for the whole document.
    pub pointer: String,
    /// Lowercase fragment saying what is wrong and what was expected.
    pub message: String,
}

impl Diagnostic {
    pub fn new(
        file: impl Into<PathBuf>,
        pos: Option<Pos>,
        pointer: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Diagnostic {
            file: file.into(),
            line: pos.map(|p| p.line),
            column: pos.map(|p| p.column),
            pointer: pointer.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        write!(f, ": {}", self.message)?;
        if !self.pointer.is_empty() {
            write!(f, " (at {})", self.pointer)?;
        }
        Ok(())
    }
}

/// Escape one reference token for a JSON pointer (RFC 6901).
pub fn escape_pointer_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// `base` + `/token`, escaping the token.
pub fn pointer_join(base: &str, token: &str) -> String {
    format!("{base}/{}", escape_pointer_token(token))
}

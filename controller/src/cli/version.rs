//! What `steward --version` says — the version, the commit the binary was
//! built from (`STEWARD_COMMIT`, set by `controller/build.rs`) and the MCP
//! protocol versions the agent endpoint speaks — and the one clap command
//! that carries it, shared by the parser, the completions and the man pages.

use std::sync::OnceLock;

use clap::CommandFactory;

use crate::cli::args::Cli;
use crate::gateway::session::protocol_versions;

/// The package version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The commit this binary was built from (12 hex digits), or `unknown`.
pub const COMMIT: &str = env!("STEWARD_COMMIT");

/// `0.1.0 (0123456789ab)`: `steward -V` and the man pages' footer.
pub fn short() -> &'static str {
    static SHORT: OnceLock<String> = OnceLock::new();
    SHORT.get_or_init(|| format!("{VERSION} ({COMMIT})"))
}

/// The MCP protocol versions `steward mcp` speaks, oldest first.
pub fn mcp_protocol_versions() -> Vec<&'static str> {
    protocol_versions().iter().map(|v| v.as_str()).collect()
}

/// `steward --version`: the version, then `commit …` and the protocol
/// versions of `steward mcp`, one per line.
pub fn long() -> &'static str {
    static LONG: OnceLock<String> = OnceLock::new();
    LONG.get_or_init(|| {
        format!(
            "{VERSION}\ncommit {COMMIT}\nMCP protocol versions (steward mcp): {}",
            mcp_protocol_versions().join(", ")
        )
    })
}

/// What identifies this build: files generated from it (the editor schemas)
/// are written again when it changes.
pub fn build_id() -> String {
    format!("steward {VERSION} {COMMIT}")
}

/// The whole command line, with [`short`] and [`long`] as its versions.
pub fn command() -> clap::Command {
    Cli::command().version(short()).long_version(long())
}

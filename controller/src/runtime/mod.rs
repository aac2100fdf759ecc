//! Runtime: the processes and protocol connections Steward owns, and the
//! builds of servers under development ([`build`]).
pub mod build;
pub mod lsp;
pub mod mcp;
pub mod process;
pub(crate) mod procfs;
pub mod reaper;
pub mod sandbox;
pub mod secrets;
pub(crate) mod sock_diag;
pub mod start;

pub use self::start::StartError;

/// The first line of a (possibly multi-line) error message, for one-line logs.
pub(crate) fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

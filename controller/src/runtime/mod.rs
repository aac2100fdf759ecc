//! Runtime: the processes and protocol connections Steward owns.
#[cfg(test)]
mod fake_bin;
pub mod lsp;
pub mod mcp;
pub mod process;

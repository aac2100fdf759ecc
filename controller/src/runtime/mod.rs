//! Runtime: the processes and protocol connections Steward owns.
pub mod lsp;
pub mod mcp;
pub mod process;
#[cfg(test)]
mod test_support;

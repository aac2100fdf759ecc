//! Envtest harness and fake servers for Steward's integration tests.
pub mod fake_lsp;
pub mod fake_mcp;
pub mod harness;
pub mod package_fixtures;
pub mod registry_fixture;

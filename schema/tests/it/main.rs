//! The integration tests of the pure core, one test binary: each module was
//! a test file of its own, and `common` holds the helpers they share.

mod common;
mod dev;
mod hash_props;
mod loaders;
mod memo;
mod precedence;
mod seed_lsp;
mod seed_mcp;

//! Adding servers from an MCP Registry, the pure part (product.md §16):
//! what a registry serves ([`server`]), the values an entry asks for and how
//! each is answered ([`inputs`]), the `mcpServers` entry built from a chosen
//! package or remote ([`entry`]) with the publisher's permission profile as
//! its sandbox ([`permissions`]), the lock file that records the resolution
//! ([`lock`]), and what an update would change ([`compare`]).
//!
//! Fetching (the registry, the package registries, bundles), asking the
//! user and writing files are the controller's (`steward::registry`,
//! `cli/add.rs`); everything here is a function of its inputs.

pub mod compare;
pub mod entry;
pub mod inputs;
pub mod lock;
pub mod permissions;
pub mod server;

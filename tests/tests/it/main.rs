//! The integration tests of Steward, one binary (one link instead of one per
//! file): the CLI tests (a sandboxed `steward` run to completion, snapshots
//! of its output), the envtests (the real controller against the fake MCP
//! and LSP servers, and against real peers), the runtime tests (its
//! processes and connections, driven through its API against real children
//! and the fakes), and the fakes' self-tests.
//!
//! Every test runs in its own sandbox ([`steward_tests::harness::Env`]) and
//! passes what it needs to the processes it starts: none changes the
//! environment, the current directory or any other state of this process,
//! which all the tests share.

mod common;
mod real_clients;

// The CLI tests.
mod approve;
mod cli;
mod crds;
mod editor_schemas;
mod export;
mod install;
mod registry;
mod secrets;
mod status;
mod validate;

// The envtests.
mod async_start;
mod calls_once;
mod catalog_cache;
mod code_mode;
mod conformance;
mod demo_walkthrough;
mod dev_reload;
mod faithful;
mod faithful_clients;
mod gateway;
mod gateway_http;
mod gateway_real_clients;
mod gateway_views;
mod honest_status;
mod kubectl;
mod lazy_start;
mod legacy_tasks;
mod lsp_controller;
mod lsp_faults;
mod lsp_more;
mod lsp_real_peers;
mod lsp_tool;
mod mcp_controller;
mod mcp_more;
mod mcp_real_peers;
mod mcp_remote;
mod metrics;
mod oauth_conformance;
mod oauth_oidc;
mod one_server;
mod pins;
mod qwen_parity;
mod registry_peers;
mod robust;
mod sandbox;
mod sandbox_home;
mod sandbox_persist;
mod secret_refs;
mod sessions_survive;
mod tasks;
mod traces;

// The runtime tests.
mod runtime_common;
mod runtime_lsp;
mod runtime_mcp;
mod runtime_process;
mod runtime_remote;

// The fakes' self-tests.
mod fake_lsp_server;
mod fake_mcp_server;

//! # steward — the controller
//!
//! Theory of operation (kept true as the code moves):
//! watch → desired state → queue → reconcile → runtime → status.
pub mod backoff;
pub mod paths;
pub mod queue;
pub mod runtime;
pub mod sources;
pub mod approvals;
pub mod cli;
pub mod commands;
pub mod offline;
pub mod output;

//! The read model: what the controller observed — the status store, the
//! events, the servers' logs and the `WorkspaceStatus` view over them — and
//! its exposition to monitoring: Prometheus metrics, OpenTelemetry traces.
pub(crate) mod clock;
pub mod events;
pub mod logs;
pub mod metrics;
pub mod status;
pub mod trace;
pub(crate) mod view;

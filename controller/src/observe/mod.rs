//! The read model: what the controller observed — the status store, the
//! events, the servers' logs and the `WorkspaceStatus` view over them.
pub(crate) mod clock;
pub mod events;
pub mod logs;
pub mod status;
pub(crate) mod view;

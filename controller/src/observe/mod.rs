//! The read model: what the controller observed — the status store, the
//! events and the servers' logs.
pub mod events;
pub mod logs;
pub mod status;

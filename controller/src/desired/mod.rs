//! The desired state: configuration sources read from disk, parsed into
//! per-source snapshots (the last valid one kept), merged into desired
//! resources with their admission; and the writes `steward secret move`
//! makes to a source (a value turned into a `${secret:NAME}` reference).
pub(crate) mod approvals;
pub(crate) mod offline;
pub(crate) mod secret_move;
pub mod snapshot;
pub(crate) mod sources;

//! The desired state: configuration sources read from disk, parsed into
//! per-source snapshots (the last valid one kept), merged into desired
//! resources with their admission.
pub(crate) mod approvals;
pub(crate) mod offline;
pub mod snapshot;
pub(crate) mod sources;

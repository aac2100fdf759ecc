//! Plumbing every step uses: paths under HOME_DIR, the workspace lock,
//! logging, atomic writes, JSON indented without parsing it, JSONC edits that keep the rest of a file, poison-ignoring locks, private unix sockets,
//! token-guarded TCP listeners, freed memory given back, secret values
//! scrubbed from what leaves.
pub(crate) mod fs;
pub(crate) mod json_pretty;
pub(crate) mod jsonc_edit;
pub(crate) mod listen;
pub(crate) mod lock;
pub(crate) mod logging;
pub(crate) mod memory;
pub mod paths;
pub(crate) mod scrub;
pub(crate) mod socket;
pub(crate) mod sync;

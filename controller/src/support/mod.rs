//! Plumbing every step uses: paths under HOME_DIR, the workspace lock,
//! logging, atomic writes, poison-ignoring locks, private unix sockets,
//! token-guarded TCP listeners.
pub(crate) mod fs;
pub(crate) mod listen;
pub(crate) mod lock;
pub(crate) mod logging;
pub mod paths;
pub(crate) mod socket;
pub(crate) mod sync;

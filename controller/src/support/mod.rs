//! Plumbing every step uses: paths under HOME_DIR, the workspace lock,
//! logging, atomic writes, poison-ignoring locks, private unix sockets.
pub mod fs;
pub mod lock;
pub mod logging;
pub mod paths;
pub mod socket;
pub mod sync;

//! Plumbing every step uses: paths under HOME_DIR, the workspace lock,
//! logging.
pub mod lock;
pub mod logging;
pub mod paths;

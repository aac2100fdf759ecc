//! The unix sockets Steward serves (the control socket and the agent
//! endpoint's socket): binding one private to this user, and checking that
//! a peer is this user.

use std::path::Path;

use tokio::net::{UnixListener, UnixStream};

use crate::support::paths::effective_uid;

/// Bind the socket at `path` (a stale socket from a dead controller is
/// replaced; the caller holds the controller lock, so it cannot be live).
/// The socket is 0600 whatever the umask; its directory should be private
/// too ([`crate::support::paths::create_private_dir`]), and whoever serves
/// it also checks each peer ([`peer_is_same_user`]).
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt as _;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Whether the peer of `stream` runs as this process's user (`SO_PEERCRED`):
/// every unix socket Steward serves checks it.
pub fn peer_is_same_user(stream: &UnixStream) -> bool {
    stream
        .peer_cred()
        .is_ok_and(|cred| cred.uid() == effective_uid())
}

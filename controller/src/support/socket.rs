//! The unix sockets Steward serves (the control socket and the agent
//! endpoint's socket): binding one private to this user, and checking that
//! a peer is this user and none of the servers Steward runs.

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

/// Why a peer is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// It runs as another user.
    OtherUser,
    /// It is a process this controller started (a server, or anything a
    /// server started): a server must never steer Steward — approve its own
    /// tool changes, or call another server's tools outside its sandbox.
    OwnServer,
}

/// Whether the TCP client at `peer`, connected to Steward's `local` address
/// (the agent endpoint over HTTP), is a process this controller started. A
/// loopback client is looked up by its socket in the processes Steward
/// started (a server under `standard` may reach loopback ports); any other
/// address is not one of them.
pub fn tcp_peer_is_own_server(local: std::net::SocketAddr, peer: std::net::SocketAddr) -> bool {
    use crate::runtime::procfs;
    if !peer.ip().is_loopback() {
        return false;
    }
    // The kernel's exact lookup; `/proc/net/tcp` where netlink is refused.
    let found = crate::runtime::sock_diag::tcp_socket_inode(peer, local)
        .unwrap_or_else(|_| procfs::tcp_socket_inode(peer, local));
    let Some(inode) = found else {
        return false;
    };
    procfs::holds_socket(&procfs::descendants(std::process::id() as i32), inode)
}

/// Whether the peer of `stream` may talk to Steward (`SO_PEERCRED`): every
/// unix socket Steward serves checks it. A descendant of this process is
/// refused (servers are; orphans of theirs come back to this process, a
/// subreaper, so they stay descendants).
pub fn admit_peer(stream: &UnixStream) -> Result<(), Refused> {
    let cred = stream.peer_cred().map_err(|_| Refused::OtherUser)?;
    if cred.uid() != effective_uid() {
        return Err(Refused::OtherUser);
    }
    match cred.pid() {
        Some(pid) if crate::runtime::procfs::descends_from(pid, std::process::id() as i32) => {
            Err(Refused::OwnServer)
        }
        _ => Ok(()),
    }
}

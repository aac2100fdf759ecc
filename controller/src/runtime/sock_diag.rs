//! One TCP socket looked up by its addresses through the kernel's
//! `sock_diag` netlink interface (`NETLINK_SOCK_DIAG`, an exact
//! `inet_diag` lookup): what [`super::procfs::tcp_socket_inode`] finds in
//! `/proc/net/tcp`, without generating that table — whose cost grows with
//! every socket of the machine (about 10 ms with 2 300 sockets, paid by
//! every new HTTP connection an agent opens to Steward).
//!
//! libc has no `inet_diag` types; the kernel's (`linux/inet_diag.h`) are
//! written out here.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};

const NETLINK_SOCK_DIAG: libc::c_int = 4;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_ERROR: u16 = 2;
/// `INET_DIAG_NOCOOKIE`: look the socket up by its addresses alone.
const NO_COOKIE: u32 = !0;

#[repr(C)]
#[derive(Clone, Copy)]
struct NlMsgHdr {
    len: u32,
    kind: u16,
    flags: u16,
    seq: u32,
    pid: u32,
}

/// `struct inet_diag_sockid`: ports and addresses in network order.
#[repr(C)]
#[derive(Clone, Copy)]
struct SockId {
    sport: u16,
    dport: u16,
    src: [u32; 4],
    dst: [u32; 4],
    interface: u32,
    cookie: [u32; 2],
}

/// `struct inet_diag_req_v2`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Request {
    header: NlMsgHdr,
    family: u8,
    protocol: u8,
    ext: u8,
    pad: u8,
    states: u32,
    id: SockId,
}

/// Where `idiag_inode` is in an answer: after the netlink header (16
/// bytes), `struct inet_diag_msg`'s four bytes, its `SockId` (48) and four
/// `u32`s (expires, rqueue, wqueue, uid).
const INODE_AT: usize = 16 + 4 + 48 + 16;

fn words(ip: IpAddr) -> [u32; 4] {
    let mut out = [0u32; 4];
    match ip {
        IpAddr::V4(v4) => out[0] = u32::from_ne_bytes(v4.octets()),
        IpAddr::V6(v6) => {
            for (word, chunk) in out.iter_mut().zip(v6.octets().chunks(4)) {
                *word = u32::from_ne_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
            }
        }
    }
    out
}

/// An address as the socket's own family has it (an IPv4 client of a
/// dual-stack listener is seen as `::ffff:a.b.c.d`).
fn canonical(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(addr.ip().to_canonical(), addr.port())
}

/// The inode of the TCP socket whose local address is `local` and remote
/// address `remote`: `Ok(None)` when there is none.
#[allow(unsafe_code)]
pub(crate) fn tcp_socket_inode(local: SocketAddr, remote: SocketAddr) -> io::Result<Option<u64>> {
    let (local, remote) = (canonical(local), canonical(remote));
    let family = match (local.ip(), remote.ip()) {
        (IpAddr::V4(_), IpAddr::V4(_)) => libc::AF_INET,
        (IpAddr::V6(_), IpAddr::V6(_)) => libc::AF_INET6,
        _ => return Ok(None),
    };
    // SAFETY: plain socket(2); the descriptor is owned right away.
    let raw = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            NETLINK_SOCK_DIAG,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a descriptor this function just opened.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let request = Request {
        header: NlMsgHdr {
            len: std::mem::size_of::<Request>() as u32,
            kind: SOCK_DIAG_BY_FAMILY,
            flags: libc::NLM_F_REQUEST as u16,
            seq: 1,
            pid: 0,
        },
        family: family as u8,
        protocol: libc::IPPROTO_TCP as u8,
        ext: 0,
        pad: 0,
        states: !0,
        id: SockId {
            sport: local.port().to_be(),
            dport: remote.port().to_be(),
            src: words(local.ip()),
            dst: words(remote.ip()),
            interface: 0,
            cookie: [NO_COOKIE, NO_COOKIE],
        },
    };
    // SAFETY: the kernel reads `size_of::<Request>()` bytes of a plain
    // `repr(C)` value (sent to the kernel: destination address zero).
    let sent = unsafe {
        libc::send(
            fd.as_raw_fd(),
            (&raw const request).cast(),
            std::mem::size_of::<Request>(),
            0,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut answer = [0u8; 1024];
    // SAFETY: the kernel writes at most `answer.len()` bytes into it.
    let got = unsafe { libc::recv(fd.as_raw_fd(), answer.as_mut_ptr().cast(), answer.len(), 0) };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    let answer = &answer[..got as usize];
    let kind = answer
        .get(4..6)
        .map(|b| u16::from_ne_bytes([b[0], b[1]]))
        .ok_or_else(|| io::Error::other("short sock_diag answer"))?;
    if kind == NLMSG_ERROR {
        let code = answer
            .get(16..20)
            .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            .unwrap_or(0);
        return match -code {
            libc::ENOENT => Ok(None),
            errno => Err(io::Error::from_raw_os_error(errno)),
        };
    }
    if kind != SOCK_DIAG_BY_FAMILY {
        return Err(io::Error::other(format!("sock_diag answered type {kind}")));
    }
    let inode = answer
        .get(INODE_AT..INODE_AT + 4)
        .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or_else(|| io::Error::other("short sock_diag answer"))?;
    Ok(Some(u64::from(inode)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};
    use std::os::unix::fs::MetadataExt as _;

    /// The inode of a socket of this process, from its descriptor.
    fn inode_of(stream: &TcpStream) -> u64 {
        std::fs::metadata(format!("/proc/self/fd/{}", stream.as_raw_fd()))
            .unwrap()
            .ino()
    }

    #[test]
    fn a_connection_is_found_by_its_addresses_as_in_proc_net_tcp() {
        for any in ["127.0.0.1:0", "[::1]:0"] {
            let listener = TcpListener::bind(any).unwrap();
            let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (accepted, _) = listener.accept().unwrap();
            let (near, far) = (client.local_addr().unwrap(), client.peer_addr().unwrap());
            let found = tcp_socket_inode(near, far).unwrap();
            assert_eq!(found, Some(inode_of(&client)), "{any}");
            assert_eq!(found, crate::runtime::procfs::tcp_socket_inode(near, far));
            // The other end is another socket.
            let other = tcp_socket_inode(far, near).unwrap();
            assert_eq!(other, Some(inode_of(&accepted)), "{any}");
            drop(client);
        }
        // No such connection.
        let nobody: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let port: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert_eq!(tcp_socket_inode(nobody, port).unwrap(), None);
    }
}

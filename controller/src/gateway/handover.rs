//! Handing an agent's stdio to the controller.
//!
//! `steward mcp`, attached to a running controller, would otherwise copy
//! every message between the agent's pipes and the controller's socket: one
//! more process to wake per message each way. Instead it passes its stdin
//! and stdout over the socket (`SCM_RIGHTS`, behind one [`MARK`] byte) and
//! only waits; the controller reads and writes the agent's pipes (or socket
//! pairs, as Node's libuv spawns servers with) itself. A client that sends
//! MCP straight away (a test, a terminal) is served as a byte stream.
//!
//! The client's [`Profile`](super::profile::Profile) rides along: after the
//! [`MARK`] in the same message, or, when the bytes are bridged, as one
//! [`HELLO`] line before them. A default profile sends neither, so an older
//! controller still serves a client that asked for nothing special.

use std::io;
use std::os::fd::{AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::fs::FileTypeExt as _;

use tokio::io::{AsyncRead, AsyncWrite};

/// The first byte of a handover: never the first byte of a JSON-RPC stream.
pub const MARK: u8 = 0xF0;
/// The first byte of a profile line (`HELLO`, JSON, `\n`) before a bridged
/// byte stream.
pub const HELLO: u8 = 0xF1;

/// Send [`MARK`] and `payload` over `stream`, `fds` with them.
pub async fn send(
    stream: &tokio::net::UnixStream,
    fds: &[RawFd],
    payload: &[u8],
) -> io::Result<()> {
    let mut bytes = Vec::with_capacity(1 + payload.len());
    bytes.push(MARK);
    bytes.extend_from_slice(payload);
    send_all(stream, fds, &bytes).await
}

/// Send `bytes` whole over `stream`, `fds` with the first of them (the
/// reader's first `recvmsg` gets them; the rest may come in later reads).
pub async fn send_all(
    stream: &tokio::net::UnixStream,
    fds: &[RawFd],
    bytes: &[u8],
) -> io::Result<()> {
    use std::os::fd::AsFd as _;
    let mut sent = 0;
    while sent < bytes.len() {
        stream.writable().await?;
        let result = if sent == 0 {
            stream.try_io(tokio::io::Interest::WRITABLE, || {
                send_with(stream.as_fd(), fds, bytes)
            })
        } else {
            stream.try_write(&bytes[sent..])
        };
        match result {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => sent += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One `sendmsg` of `bytes` with `fds` on the connected Unix socket
/// `socket`: how many bytes went (the descriptors go with the first).
#[allow(unsafe_code)]
fn send_with(socket: BorrowedFd<'_>, fds: &[RawFd], bytes: &[u8]) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr().cast_mut().cast(),
        iov_len: bytes.len(),
    };
    let data_len = std::mem::size_of_val(fds) as u32;
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(data_len) } as usize;
    // u64s: the control buffer must be aligned for a cmsghdr.
    let mut control = vec![0u64; space.div_ceil(8)];
    // SAFETY: a zeroed msghdr is valid; the pointers set below outlive the
    // sendmsg call, and the cmsghdr written fits in `control` (CMSG_SPACE).
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(data_len) as _;
        std::ptr::copy_nonoverlapping(
            fds.as_ptr().cast::<u8>(),
            libc::CMSG_DATA(cmsg),
            data_len as usize,
        );
        // `sendmsg` only reads the iovec's bytes.
        let sent = libc::sendmsg(socket.as_raw_fd(), &msg, libc::MSG_NOSIGNAL);
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(sent as usize)
    }
}

/// One `recvmsg` on `socket`: the bytes read and the descriptors that came
/// with them (close-on-exec). `WouldBlock` when nothing is there yet.
pub fn recv(socket: BorrowedFd<'_>) -> io::Result<(Vec<u8>, Vec<OwnedFd>)> {
    let mut buf = vec![0u8; 8192];
    let (n, fds) = recv_into(socket, &mut buf)?;
    buf.truncate(n);
    Ok((buf, fds))
}

/// [`recv`] into `buf`: how many bytes, and the descriptors.
#[allow(unsafe_code)]
pub fn recv_into(socket: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // Room for a few descriptors; more than expected are closed.
    let data_len = (4 * std::mem::size_of::<RawFd>()) as u32;
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(data_len) } as usize;
    let mut control = vec![0u64; space.div_ceil(8)];
    let mut fds = Vec::new();
    // SAFETY: as in `send`; the kernel writes at most `msg_controllen`
    // bytes of control data, walked with the CMSG_* macros.
    let n = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let n = libc::recvmsg(socket.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let bytes = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let data = libc::CMSG_DATA(cmsg);
                for i in 0..bytes / std::mem::size_of::<RawFd>() {
                    let fd = std::ptr::read_unaligned(data.cast::<RawFd>().add(i));
                    fds.push(OwnedFd::from_raw_fd(fd));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
        n as usize
    };
    Ok((n, fds))
}

/// The read half of a Unix socket read with `recvmsg`, keeping the
/// descriptors that come with the bytes (a plain read drops them).
pub struct FdReader {
    half: tokio::net::unix::OwnedReadHalf,
    fds: Vec<OwnedFd>,
}

impl FdReader {
    pub fn new(half: tokio::net::unix::OwnedReadHalf) -> FdReader {
        FdReader {
            half,
            fds: Vec::new(),
        }
    }

    /// The descriptors received so far, oldest first.
    pub fn take_fds(&mut self) -> Vec<OwnedFd> {
        std::mem::take(&mut self.fds)
    }
}

impl AsyncRead for FdReader {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        out: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        use std::os::fd::AsFd as _;
        let this = self.get_mut();
        if out.remaining() == 0 {
            return std::task::Poll::Ready(Ok(()));
        }
        loop {
            let stream: &tokio::net::UnixStream = this.half.as_ref();
            std::task::ready!(stream.poll_read_ready(cx))?;
            let got = stream.try_io(tokio::io::Interest::READABLE, || {
                recv_into(stream.as_fd(), out.initialize_unfilled())
            });
            match got {
                Ok((n, fds)) => {
                    out.advance(n);
                    this.fds.extend(fds);
                    return std::task::Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return std::task::Poll::Ready(Err(e)),
            }
        }
    }
}

/// A stdio descriptor the runtime can poll.
pub enum Polled {
    Pipe(OwnedFd),
    Socket(tokio::net::UnixStream),
}

/// `fd` made pollable by the runtime when it is a pipe or a Unix socket;
/// `None` for anything else (a terminal, a file). Sets it non-blocking.
pub fn pollable(fd: OwnedFd) -> Option<Polled> {
    let file = std::fs::File::from(fd);
    let kind = file.metadata().ok()?.file_type();
    let fd = OwnedFd::from(file);
    if kind.is_fifo() {
        return Some(Polled::Pipe(fd));
    }
    if kind.is_socket() {
        let socket = std::os::unix::net::UnixStream::from(fd);
        socket.set_nonblocking(true).ok()?;
        return tokio::net::UnixStream::from_std(socket)
            .ok()
            .map(Polled::Socket);
    }
    None
}

/// Whether a duplicate of `fd` would be [`pollable`].
pub fn is_pollable(fd: BorrowedFd<'_>) -> bool {
    fd.try_clone_to_owned()
        .ok()
        .and_then(|owned| std::fs::File::from(owned).metadata().ok())
        .is_some_and(|m| m.file_type().is_fifo() || m.file_type().is_socket())
}

/// Whether the other end of the pipe or socket `fd` is gone (the agent
/// closed its side or exited), without reading from it.
#[allow(unsafe_code)]
pub fn hung_up(fd: BorrowedFd<'_>) -> bool {
    let mut poll = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one valid pollfd, a zero timeout.
    let n = unsafe { libc::poll(&mut poll, 1, 0) };
    n > 0 && poll.revents & (libc::POLLHUP | libc::POLLRDHUP | libc::POLLERR) != 0
}

/// An agent's input, read on the runtime.
pub fn reader(fd: OwnedFd) -> Option<Box<dyn AsyncRead + Send + Unpin>> {
    match pollable(fd)? {
        Polled::Pipe(fd) => tokio::net::unix::pipe::Receiver::from_owned_fd(fd)
            .ok()
            .map(|p| Box::new(p) as Box<dyn AsyncRead + Send + Unpin>),
        Polled::Socket(s) => Some(Box::new(s)),
    }
}

/// An agent's output, written on the runtime.
pub fn writer(fd: OwnedFd) -> Option<Box<dyn AsyncWrite + Send + Unpin>> {
    match pollable(fd)? {
        Polled::Pipe(fd) => tokio::net::unix::pipe::Sender::from_owned_fd(fd)
            .ok()
            .map(|p| Box::new(p) as Box<dyn AsyncWrite + Send + Unpin>),
        Polled::Socket(s) => Some(Box::new(s)),
    }
}

/// This process's stdin, read on the runtime when it is a pipe (Python's
/// and Rust's subprocesses) or a socket (Node's: libuv spawns with socket
/// pairs): `tokio::io::stdin` reads on a blocking-pool thread, one more
/// thread hand-off per message in each forwarded call, and fails on a pipe
/// a controller it was handed to made non-blocking.
pub fn stdin() -> Box<dyn AsyncRead + Unpin + Send> {
    use std::os::fd::AsFd as _;
    std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .and_then(reader)
        .unwrap_or_else(|| Box::new(tokio::io::stdin()))
}

/// This process's stdout, written on the runtime when it is a pipe or a
/// socket (see [`stdin`]).
pub fn stdout() -> Box<dyn AsyncWrite + Unpin + Send> {
    use std::os::fd::AsFd as _;
    std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .and_then(writer)
        .unwrap_or_else(|| Box::new(tokio::io::stdout()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read as _, Write as _};
    use std::os::fd::AsFd as _;

    #[tokio::test]
    async fn descriptors_pass_with_the_mark() {
        let (a, b) = tokio::net::UnixStream::pair().unwrap();
        let (mut pipe_r, mut pipe_w) = std::io::pipe().unwrap();
        send(&a, &[pipe_w.as_fd().as_raw_fd()], b"{}")
            .await
            .unwrap();
        let (bytes, mut fds) = recv(b.as_fd()).unwrap();
        assert_eq!(bytes, [MARK, b'{', b'}']);
        assert_eq!(fds.len(), 1);
        // The received descriptor is the same pipe.
        let mut passed = std::fs::File::from(fds.remove(0));
        passed.write_all(b"hi").unwrap();
        drop(passed);
        pipe_w.flush().unwrap();
        drop(pipe_w);
        let mut got = String::new();
        pipe_r.read_to_string(&mut got).unwrap();
        assert_eq!(got, "hi");
    }

    /// A frame sent with a descriptor: `FdReader` keeps it; a plain read
    /// (a `steward mcp` of an earlier version) gets the same bytes and no
    /// descriptor.
    #[tokio::test]
    async fn a_descriptor_sent_with_bytes_is_kept_by_fd_reader_and_dropped_by_a_plain_read() {
        use tokio::io::AsyncReadExt as _;
        let line = b"{\"type\":\"state\"}\n";
        let (pipe_r, _pipe_w) = std::io::pipe().unwrap();
        let fds = [pipe_r.as_fd().as_raw_fd()];

        let (a, b) = tokio::net::UnixStream::pair().unwrap();
        send_all(&a, &fds, line).await.unwrap();
        let (read, _write) = b.into_split();
        let mut reader = FdReader::new(read);
        let mut got = vec![0u8; 64];
        let n = reader.read(&mut got).await.unwrap();
        assert_eq!(&got[..n], line);
        assert_eq!(reader.take_fds().len(), 1);
        assert!(reader.take_fds().is_empty());

        let (a, mut b) = tokio::net::UnixStream::pair().unwrap();
        send_all(&a, &fds, line).await.unwrap();
        let n = b.read(&mut got).await.unwrap();
        assert_eq!(&got[..n], line);
    }

    #[test]
    fn plain_bytes_come_without_descriptors() {
        let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        a.write_all(b"{\"jsonrpc\"").unwrap();
        let (bytes, fds) = recv(b.as_fd()).unwrap();
        assert_eq!(bytes, b"{\"jsonrpc\"");
        assert!(fds.is_empty());
    }
}

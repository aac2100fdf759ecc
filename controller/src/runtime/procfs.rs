//! `/proc` and signals: reading a process's identity and state, walking
//! the process tree, finding who holds a pipe, and `kill(2)` with the
//! guards every caller needs.
//!
//! A process is remembered as a [`ProcStat`]: its pid *and* its start time,
//! so a pid reused by another process is never mistaken for it (see
//! [`is_alive`] and [`signal_tracked`]). Zombies are not alive.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;

/// `kill(2)` for one pid (`target > 0`) or a group (`target < 0`). Refuses
/// targets that mean "every process", init, or this process and its group.
#[allow(unsafe_code)]
pub(crate) fn send_signal(target: i32, signal: i32) -> io::Result<()> {
    // SAFETY: getpgrp cannot fail and has no preconditions.
    let own_group = unsafe { libc::getpgrp() };
    if target.unsigned_abs() <= 1 || target == std::process::id() as i32 || target == -own_group {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to signal {target}"),
        ));
    }
    // SAFETY: kill(2) has no memory-safety preconditions; the target was
    // checked above not to be 0, -1, init or this process/group.
    if unsafe { libc::kill(target, signal) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether a pipe (read end) still has a writer: poll reports POLLHUP only
/// when every write end is closed. Does not consume data.
#[allow(unsafe_code)]
pub(crate) fn pipe_has_writers(fd: BorrowedFd<'_>) -> bool {
    let mut entry = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: 0,
        revents: 0,
    };
    // SAFETY: `entry` is a valid pollfd for the whole call and nfds is 1; the
    // borrow keeps the fd open; a zero timeout never blocks.
    let ready = unsafe { libc::poll(&mut entry, 1, 0) };
    !(ready > 0 && entry.revents & (libc::POLLHUP | libc::POLLERR) != 0)
}

pub(crate) fn pipe_inode(fd: BorrowedFd<'_>) -> Option<u64> {
    let file = fs::File::from(fd.try_clone_to_owned().ok()?);
    file.metadata().ok().map(|meta| meta.ino())
}

/// The fields of `/proc/<pid>/stat` the runtime needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcStat {
    pub(crate) pid: i32,
    state: char,
    pub(crate) ppid: i32,
    pub(crate) pgid: i32,
    /// Start time in clock ticks since boot: with `pid`, the process identity.
    pub(crate) start: u64,
}

impl ProcStat {
    pub(crate) fn is_live(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }
}

pub(crate) fn parse_stat(text: &str) -> Option<ProcStat> {
    // "pid (comm) state ppid pgrp session ..."; comm may hold spaces and ')'.
    let (pid, rest) = text.split_once(" (")?;
    let (_, rest) = rest.rsplit_once(") ")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(ProcStat {
        pid: pid.trim().parse().ok()?,
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgid: fields.get(2)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

pub(crate) fn read_stat(pid: i32) -> Option<ProcStat> {
    parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Whether `pid` is `ancestor` or one of its descendants (by the parent
/// links in `/proc`; a process gone meanwhile is not).
pub(crate) fn descends_from(pid: i32, ancestor: i32) -> bool {
    let mut at = pid;
    for _ in 0..4096 {
        if at == ancestor {
            return true;
        }
        match read_stat(at) {
            Some(stat) if stat.ppid > 0 => at = stat.ppid,
            _ => return false,
        }
    }
    false
}

/// The process remembered in `process` is still running (not a zombie, pid
/// not reused).
pub(crate) fn is_alive(process: &ProcStat) -> bool {
    read_stat(process.pid).is_some_and(|now| now.start == process.start && now.is_live())
}

/// Signals a remembered process unless its pid now belongs to another one; if
/// it leads its own group (after `setsid`), the group too. Returns whether it
/// was still there.
pub(crate) fn signal_tracked(process: &ProcStat, signal: i32) -> bool {
    let Some(now) = read_stat(process.pid) else {
        return false;
    };
    if now.start != process.start || !now.is_live() {
        return false;
    }
    let _ = send_signal(now.pid, signal);
    if now.pgid == now.pid {
        let _ = send_signal(-now.pid, signal);
    }
    true
}

pub(crate) fn proc_pids() -> impl Iterator<Item = i32> {
    fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
}

/// No live (non-zombie) process is left in the group.
pub(crate) fn group_is_empty(pgid: i32) -> bool {
    match send_signal(-pgid, 0) {
        Err(error) if error.raw_os_error() == Some(libc::ESRCH) => true,
        // kill() also reaches zombies, which wait for init to reap them.
        _ => !proc_pids()
            .filter_map(read_stat)
            .any(|p| p.pgid == pgid && p.is_live()),
    }
}

/// Children of `pid` per `/proc/<pid>/task/*/children`; `None` if the kernel
/// has no such file (or the process is gone).
pub(crate) fn children_of(pid: i32) -> Option<Vec<i32>> {
    let mut found = false;
    let mut children = Vec::new();
    for task in fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
        if let Ok(text) = fs::read_to_string(task.path().join("children")) {
            found = true;
            children.extend(
                text.split_whitespace()
                    .filter_map(|c| c.parse::<i32>().ok()),
            );
        }
    }
    found.then_some(children)
}

/// Every live descendant of `root` (not `root` itself).
pub(crate) fn descendants(root: i32) -> Vec<ProcStat> {
    let mut found = Vec::new();
    let mut seen = HashSet::from([root]);
    let mut queue = vec![root];
    if children_of(root).is_some() {
        while let Some(pid) = queue.pop() {
            for child in children_of(pid).unwrap_or_default() {
                if seen.insert(child) {
                    found.extend(read_stat(child).filter(ProcStat::is_live));
                    queue.push(child);
                }
            }
        }
    } else {
        // No children files (CONFIG_PROC_CHILDREN off): walk all of /proc.
        let all: Vec<ProcStat> = proc_pids()
            .filter_map(read_stat)
            .filter(ProcStat::is_live)
            .collect();
        while let Some(pid) = queue.pop() {
            for process in all.iter().filter(|p| p.ppid == pid) {
                if seen.insert(process.pid) {
                    found.push(*process);
                    queue.push(process.pid);
                }
            }
        }
    }
    found
}

/// The inode of the TCP socket whose local address is `local` and remote
/// address `remote` (from `/proc/net/tcp` and `tcp6`), if any.
pub(crate) fn tcp_socket_inode(
    local: std::net::SocketAddr,
    remote: std::net::SocketAddr,
) -> Option<u64> {
    let hex = |addr: std::net::SocketAddr| -> String {
        // The kernel prints each 32-bit word of the address in host order.
        let ip = match addr.ip() {
            std::net::IpAddr::V4(v4) => {
                format!("{:08X}", u32::from_ne_bytes(v4.octets()))
            }
            std::net::IpAddr::V6(v6) => v6
                .octets()
                .chunks(4)
                .map(|w| format!("{:08X}", u32::from_ne_bytes([w[0], w[1], w[2], w[3]])))
                .collect(),
        };
        format!("{ip}:{:04X}", addr.port())
    };
    let (want_local, want_remote) = (hex(local), hex(remote));
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .find_map(|table| {
            fs::read_to_string(table)
                .ok()?
                .lines()
                .skip(1)
                .find_map(|line| {
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    (fields.get(1) == Some(&want_local.as_str())
                        && fields.get(2) == Some(&want_remote.as_str()))
                    .then(|| fields.get(9)?.parse().ok())
                    .flatten()
                })
        })
}

/// Whether one of `processes` holds the socket `inode` open.
pub(crate) fn holds_socket(processes: &[ProcStat], inode: u64) -> bool {
    let target = format!("socket:[{inode}]");
    processes.iter().any(|p| {
        fs::read_dir(format!("/proc/{}/fd", p.pid))
            .into_iter()
            .flatten()
            .flatten()
            .any(|fd| fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == target.as_str()))
    })
}

/// Live processes other than this one with an fd on one of the pipes.
pub(crate) fn pipe_holders(inodes: &[u64]) -> Vec<ProcStat> {
    let me = std::process::id() as i32;
    let wanted: Vec<String> = inodes
        .iter()
        .map(|inode| format!("pipe:[{inode}]"))
        .collect();
    let mut holders = Vec::new();
    for pid in proc_pids().filter(|&pid| pid != me) {
        let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            fs::read_link(fd.path())
                .is_ok_and(|link| wanted.iter().any(|w| link.as_os_str() == w.as_str()))
        });
        if holds {
            holders.extend(read_stat(pid).filter(ProcStat::is_live));
        }
    }
    holders
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_stat_handles_odd_command_names() {
        let text = "4242 (a) (b c) S 1 4242 4240 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654 0 0";
        let stat = parse_stat(text).unwrap();
        assert_eq!(
            stat,
            ProcStat {
                pid: 4242,
                state: 'S',
                ppid: 1,
                pgid: 4242,
                start: 987_654
            }
        );
        assert!(parse_stat("garbage").is_none());
        let me = read_stat(std::process::id() as i32).unwrap();
        assert!(me.is_live() && me.start > 0);
    }
}

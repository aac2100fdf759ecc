//! Applying a [`Plan`] in the exec shim, the server's own process, just
//! before it execs the server: a fresh single-threaded process, so that a
//! user namespace can be made and allocation is fine (nothing here runs
//! between fork and exec of the multi-threaded controller: the controller
//! posix_spawns the shim, see `runtime::process`).
//!
//! Order matters and is fixed:
//! 1. [`enter_namespace`]: a user and mount namespace (uid and gid mapped
//!    to themselves), the read-only and hidden mounts, then every
//!    capability dropped — a credential change clears the parent-death
//!    signal, so the shim arms that signal only after this step;
//! 2. [`confine`]: every capability dropped (a server started by root
//!    keeps root's files, not root's powers), `RLIMIT_CORE` 0, the Landlock
//!    ruleset (which also sets `no_new_privs`), then the seccomp filter.
//!
//! Every step the plan asks for is required: a failure ends the shim with a
//! message (the start fails and says why) instead of running the server
//! less confined than its status says.

use std::ffi::CString;
use std::io;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
};

use super::kernel::{ABI_SCOPES, ABI_TCP};
use super::pins::Pin;
use super::plan::{Namespace, Plan};

/// Why the shim could not confine the server.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("make the server's user namespace: {0}")]
    Namespace(String),
    #[error("apply the Landlock ruleset: {0}")]
    Landlock(String),
    #[error("apply the seccomp filter: {0}")]
    Seccomp(String),
}

/// Step 1: the namespace, when the plan has one.
pub fn enter_namespace(plan: &Plan) -> Result<(), ApplyError> {
    match &plan.namespace {
        Some(ns) => namespace(ns).map_err(|e| ApplyError::Namespace(e.to_string())),
        None => Ok(()),
    }
}

/// Step 2: no capability, the core limit, Landlock, seccomp.
pub fn confine(plan: &Plan) -> Result<(), ApplyError> {
    // A server started by root keeps root's files, never root's powers
    // (loading modules, mounting, reconfiguring the network...).
    drop_capabilities().map_err(|e| ApplyError::Landlock(format!("drop capabilities: {e}")))?;
    no_core_dumps();
    if plan.abi > 0 {
        landlock(plan).map_err(ApplyError::Landlock)?;
    } else {
        set_no_new_privs().map_err(|e| ApplyError::Seccomp(e.to_string()))?;
    }
    seccomp(plan).map_err(ApplyError::Seccomp)
}

/// The user-namespace probe ([`super::kernel::USERNS_PROBE_ARG`]): make
/// one with a private mount, as a server's shim would.
pub fn probe_userns() -> bool {
    let ns = Namespace {
        read_only: vec![PathBuf::from("/")],
        ..Namespace::default()
    };
    namespace(&ns).is_ok()
}

// ---------------------------------------------------------------- namespace

#[allow(unsafe_code)]
fn namespace(ns: &Namespace) -> io::Result<()> {
    // SAFETY: plain syscalls on this process; the shim is single-threaded
    // (unshare(CLONE_NEWUSER) requires it).
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    check(unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) })?;
    std::fs::write("/proc/self/setgroups", "deny")?;
    std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    // Mounts made outside still reach the server; its own stay its own.
    mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_SLAVE,
        None,
    )?;
    for p in &ns.read_only {
        // A pin that does not exist (yet) has nothing to hold: Landlock
        // keeps an absent directory from being made.
        if p.symlink_metadata().is_err() {
            continue;
        }
        let flags = locked_flags(p)?;
        mount(Some(p), p, None, libc::MS_BIND | libc::MS_REC, None)?;
        mount(
            None,
            p,
            None,
            libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | flags,
            None,
        )?;
    }
    // What stays the server's own under a hidden directory (its private
    // home), held open before the directory is covered, bound back after.
    let kept: Vec<(std::fs::File, &PathBuf)> = ns
        .keep
        .iter()
        .map(|k| open_path(k).map(|f| (f, k)))
        .collect::<io::Result<_>>()?;
    for p in &ns.hidden {
        let meta = std::fs::metadata(p)?;
        if meta.is_dir() {
            let inside: Vec<&(std::fs::File, &PathBuf)> =
                kept.iter().filter(|(_, k)| k.starts_with(p)).collect();
            let tmpfs_flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
            mount(
                Some(Path::new("tmpfs")),
                p,
                Some("tmpfs"),
                tmpfs_flags
                    | if inside.is_empty() {
                        libc::MS_RDONLY
                    } else {
                        0
                    },
                Some("size=4k,mode=0500"),
            )?;
            if inside.is_empty() {
                continue;
            }
            for (fd, k) in inside {
                use std::os::fd::AsRawFd;
                std::fs::create_dir_all(k)?;
                let source = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
                mount(Some(&source), k, None, libc::MS_BIND | libc::MS_REC, None)?;
            }
            mount(
                None,
                p,
                None,
                libc::MS_REMOUNT | libc::MS_RDONLY | tmpfs_flags,
                Some("size=4k,mode=0500"),
            )?;
        } else {
            // A socket file: /dev/null over it (connect() then fails).
            mount(Some(Path::new("/dev/null")), p, None, libc::MS_BIND, None)?;
        }
    }
    drop_capabilities()
}

/// An `O_PATH` descriptor of `p` (a bind mount's source once `p` is
/// covered).
fn open_path(p: &Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(p)
}

/// The flags of the mount `p` is on that a remount in a user namespace
/// must keep (the kernel locks them).
#[allow(unsafe_code)]
fn locked_flags(p: &Path) -> io::Result<libc::c_ulong> {
    let path = cstring(p)?;
    // SAFETY: `st` is a valid out-parameter; `path` is NUL-terminated.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    check(unsafe { libc::statvfs(path.as_ptr(), &mut st) })?;
    let mut flags = 0;
    for (st_flag, ms_flag) in [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if st.f_flag & st_flag != 0 {
            flags |= ms_flag;
        }
    }
    Ok(flags)
}

#[allow(unsafe_code)]
fn mount(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    let source = source.map(cstring).transpose()?;
    let target_c = cstring(target)?;
    let fstype = fstype.map(CString::new).transpose()?;
    let data = data.map(CString::new).transpose()?;
    let ptr = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is null or a NUL-terminated string that lives
    // across the call.
    let rc = unsafe {
        libc::mount(
            ptr(&source),
            target_c.as_ptr(),
            ptr(&fstype),
            flags,
            ptr(&data).cast(),
        )
    };
    check(rc).map_err(|e| io::Error::new(e.kind(), format!("mount {}: {e}", target.display())))
}

/// Every capability gone (effective, permitted, inheritable, ambient and
/// the bounding set): root in the namespace cannot undo its mounts, and an
/// exec gains none back.
#[allow(unsafe_code)]
fn drop_capabilities() -> io::Result<()> {
    let last: u32 = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40);
    for cap in 0..=last {
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
    }
    // SAFETY: as above.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset reads a header and two data structs of the v3 layout.
    check(unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) as i32 })
}

// ---------------------------------------------------------------- confine

#[allow(unsafe_code)]
fn no_core_dumps() {
    let zero = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: setrlimit reads one rlimit struct.
    unsafe { libc::setrlimit(libc::RLIMIT_CORE, &zero) };
}

#[allow(unsafe_code)]
fn set_no_new_privs() -> io::Result<()> {
    // SAFETY: prctl with integer arguments only.
    check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })
}

fn landlock(plan: &Plan) -> Result<(), String> {
    let abi = ABI::from(i32::from(plan.abi));
    let all = AccessFs::from_all(abi);
    let read = AccessFs::from_read(abi);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(all)
        .map_err(|e| e.to_string())?;
    let limits_tcp = plan.abi >= ABI_TCP;
    if limits_tcp && plan.connect.is_some() {
        ruleset = ruleset
            .handle_access(AccessNet::ConnectTcp)
            .map_err(|e| e.to_string())?;
    }
    if limits_tcp && !plan.bind {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp)
            .map_err(|e| e.to_string())?;
    }
    if plan.scopes && plan.abi >= ABI_SCOPES {
        ruleset = ruleset
            .scope(Scope::AbstractUnixSocket | Scope::Signal)
            .map_err(|e| e.to_string())?;
    }
    let mut created = ruleset.create().map_err(|e| e.to_string())?;
    let mut rules: Vec<(PathBuf, BitFlags<AccessFs>)> = Vec::new();
    for root in &plan.read {
        grant(root, &plan.except, read, &mut rules);
    }
    let guard = WriteGuard {
        except: &plan.except,
        protect: &plan.protect,
        pins: &plan.pins,
        all,
        read,
    };
    for root in &plan.write {
        guard.split(root, &mut rules, 0);
    }
    for own in &plan.own {
        rules.push((own.clone(), all));
    }
    // `standard` lists every directory (names, not contents).
    if plan.read.iter().any(|r| r == Path::new("/")) {
        rules.push((PathBuf::from("/"), AccessFs::ReadDir.into()));
    }
    for (path, access) in rules {
        let fd = match PathFd::new(&path) {
            Ok(fd) => fd,
            // Gone since (or never there): nothing to grant.
            Err(_) => continue,
        };
        let access = if path.is_dir() {
            access
        } else {
            access & AccessFs::from_file(abi)
        };
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if limits_tcp && let Some(ports) = &plan.connect {
        for port in ports {
            created = created
                .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
                .map_err(|e| e.to_string())?;
        }
    }
    created.restrict_self().map_err(|e| e.to_string())?;
    Ok(())
}

/// The rules that grant `access` on `root` except `except`: `root` itself,
/// or — when it holds an excepted path — each of its entries, recursively,
/// minus the excepted ones. A root inside an excepted path was asked for on
/// purpose and is granted as it is. A symbolic link is followed only when
/// its target lies outside every excepted path.
fn grant(
    root: &Path,
    except: &[PathBuf],
    access: BitFlags<AccessFs>,
    out: &mut Vec<(PathBuf, BitFlags<AccessFs>)>,
) {
    if except.iter().any(|e| root.starts_with(e)) {
        out.push((root.to_path_buf(), access));
        return;
    }
    split(root, except, access, out, 0);
}

fn split(
    dir: &Path,
    except: &[PathBuf],
    access: BitFlags<AccessFs>,
    out: &mut Vec<(PathBuf, BitFlags<AccessFs>)>,
    depth: usize,
) {
    if except.iter().any(|e| dir.starts_with(e)) {
        return;
    }
    if !except.iter().any(|e| e.starts_with(dir)) || depth > 32 {
        out.push((dir.to_path_buf(), access));
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_symlink()) {
            if link_leads_clear(&path, except.iter().map(PathBuf::as_path)) {
                out.push((path, access));
            }
            continue;
        }
        split(&path, except, access, out, depth + 1);
    }
}

/// Whether the symbolic link `path` may be followed by a rule: its target
/// resolves and lies neither in nor above any of `guarded`.
fn link_leads_clear<'a>(path: &Path, mut guarded: impl Iterator<Item = &'a Path>) -> bool {
    let Ok(target) = std::fs::canonicalize(path) else {
        return false;
    };
    !guarded.any(|g| target.starts_with(g) || g.starts_with(&target))
}

/// How a write grant is bounded (product.md §9, "Nothing planted for
/// later"): a directory that holds an excepted or protected path keeps only
/// its listing (nothing can be created, removed or written in it; each
/// entry gets its own rule), a protected path itself is only read; a
/// directory that holds a pin keeps everything but making directories and
/// symbolic links (an absent pinned directory cannot appear; the pins that
/// exist are read-only mounts), its entries but the pins their own rules.
struct WriteGuard<'a> {
    except: &'a [PathBuf],
    protect: &'a [PathBuf],
    pins: &'a [Pin],
    all: BitFlags<AccessFs>,
    read: BitFlags<AccessFs>,
}

impl WriteGuard<'_> {
    fn split(&self, dir: &Path, out: &mut Vec<(PathBuf, BitFlags<AccessFs>)>, depth: usize) {
        if self.except.iter().any(|e| dir.starts_with(e)) {
            return;
        }
        if self.protect.iter().any(|p| dir.starts_with(p)) {
            out.push((dir.to_path_buf(), self.read));
            return;
        }
        if self.pins.iter().any(|p| dir.starts_with(&p.path)) {
            return;
        }
        let below = |p: &Path| p.starts_with(dir) && p != dir;
        let guarded = self.except.iter().chain(self.protect).any(|p| below(p));
        let pinned = self.pins.iter().any(|p| below(&p.path));
        if (!guarded && !pinned) || depth > 32 {
            out.push((dir.to_path_buf(), self.all));
            return;
        }
        let own = if guarded {
            AccessFs::ReadDir.into()
        } else {
            self.all & !(AccessFs::MakeDir | AccessFs::MakeSym)
        };
        out.push((dir.to_path_buf(), own));
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_symlink()) {
                let guarded = self.except.iter().chain(self.protect).map(PathBuf::as_path);
                let pins = self.pins.iter().map(|p| p.path.as_path());
                if link_leads_clear(&path, guarded.chain(pins)) {
                    out.push((path, self.all));
                }
                continue;
            }
            self.split(&path, out, depth + 1);
        }
    }
}

fn seccomp(plan: &Plan) -> Result<(), String> {
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };
    if !plan.no_inet && !plan.no_datagrams {
        return Ok(());
    }
    let arg = |index: u8, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(index, SeccompCmpArgLen::Dword, op, value).map_err(|e| e.to_string())
    };
    let mut socket = vec![
        SeccompRule::new(vec![arg(0, SeccompCmpOp::Eq, libc::AF_PACKET as u64)?])
            .map_err(|e| e.to_string())?,
    ];
    for family in [libc::AF_INET, libc::AF_INET6] {
        if plan.no_inet {
            socket.push(
                SeccompRule::new(vec![arg(0, SeccompCmpOp::Eq, family as u64)?])
                    .map_err(|e| e.to_string())?,
            );
            continue;
        }
        // Only TCP streams: no UDP, raw or SCTP-like sockets.
        for kind in [libc::SOCK_DGRAM, libc::SOCK_RAW, libc::SOCK_SEQPACKET] {
            socket.push(
                SeccompRule::new(vec![
                    arg(0, SeccompCmpOp::Eq, family as u64)?,
                    arg(1, SeccompCmpOp::MaskedEq(0xf), kind as u64)?,
                ])
                .map_err(|e| e.to_string())?,
            );
        }
    }
    let rules = [
        (libc::SYS_socket, socket),
        // io_uring opens sockets without the socket syscall.
        (libc::SYS_io_uring_setup, vec![]),
    ]
    .into_iter()
    .collect();
    let arch: TargetArch = std::env::consts::ARCH
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    let program: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    seccompiler::apply_filter(&program).map_err(|e| e.to_string())
}

fn cstring(p: &Path) -> io::Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))
}

fn check(rc: i32) -> io::Result<()> {
    if rc == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

//! What the kernel lets an unprivileged process do to confine itself: the
//! Landlock ABI, and whether it may make a user namespace with its own
//! mounts. Probed once per controller.

use std::sync::OnceLock;

/// The Landlock ABI versions whose features the sandbox uses.
pub const ABI_TCP: u8 = 4;
pub const ABI_SCOPES: u8 = 6;
/// The newest ABI the sandbox knows what to do with.
pub const ABI_KNOWN: u8 = 7;

/// Caps the ABI the sandbox targets (tests use it to see how an older
/// kernel is reported: `Partial`, and what is missing).
pub const MAX_ABI_VAR: &str = "STEWARD_SANDBOX_MAX_ABI";

/// Set to `1` to behave as on a kernel without user namespaces.
pub const NO_USERNS_VAR: &str = "STEWARD_SANDBOX_NO_USERNS";

/// `argv[1]` that makes the `steward` executable probe user namespaces and
/// exit (0 when it could make one and mount in it).
pub const USERNS_PROBE_ARG: &str = "__steward-userns-probe";

/// What the kernel offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Support {
    /// The Landlock ABI to target (0: no Landlock).
    pub abi: u8,
    /// Whether a server can get a user namespace with private mounts.
    pub userns: bool,
}

impl Support {
    /// The kernel's support, probed once (the user-namespace probe runs
    /// `shim` once: a fresh single-threaded process, as the shim is).
    pub fn detect(shim: &std::path::Path) -> Support {
        static DETECTED: OnceLock<Support> = OnceLock::new();
        *DETECTED.get_or_init(|| {
            let cap = std::env::var(MAX_ABI_VAR)
                .ok()
                .and_then(|v| v.parse::<u8>().ok())
                .unwrap_or(ABI_KNOWN);
            let abi = landlock_abi().min(cap).min(ABI_KNOWN);
            let userns = std::env::var(NO_USERNS_VAR).as_deref() != Ok("1")
                && std::process::Command::new(shim)
                    .arg(USERNS_PROBE_ARG)
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success());
            tracing::info!(
                landlock_abi = abi,
                user_namespaces = userns,
                "sandbox support"
            );
            Support { abi, userns }
        })
    }
}

/// The Landlock ABI of the running kernel (0 when it has none or it is
/// disabled).
#[allow(unsafe_code)]
pub fn landlock_abi() -> u8 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag the
    // call only returns the ABI version; no memory is read or written.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u8::try_from(v).unwrap_or(0)
}

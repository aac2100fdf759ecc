//! Least privilege, enforced: every local server Steward spawns runs under
//! its permission profile (product.md §9), applied by the kernel in the
//! server's own process before it execs the server.
//!
//! Which profile a server gets is decided upstream, purely
//! (`steward_schema::sandbox`); this module only enforces it:
//! - [`plan`]: in the controller, before the spawn, the profile becomes a
//!   [`plan::Plan`] (absolute paths, the server's runtime, the network
//!   mode) and a [`plan::Report`] of what this kernel enforces of it
//!   ([`kernel::Support`]: the Landlock ABI, user namespaces);
//! - [`apply`]: in the exec shim — the `steward` executable the spawner
//!   posix_spawns, which then execs the server in place — the plan is
//!   applied: a user and mount namespace (git's hooks and config read-only;
//!   the session bus, Docker's socket and Steward's own sockets hidden),
//!   then Landlock (files; TCP ports from ABI 4; signal and abstract-socket
//!   scopes from ABI 6, which also keep it from ptrace and `/proc/PID` of
//!   processes outside its tree), `no_new_privs`, seccomp (UDP, raw and
//!   packet sockets, io_uring) and `RLIMIT_CORE` 0. Re-executing a helper
//!   rather than running code between fork and exec is what keeps the
//!   multi-threaded controller safe: the shim is a fresh single-threaded
//!   process, where making a namespace and allocating are fine;
//! - [`proxy`]: for a profile limited to hosts, a loopback HTTP proxy of the
//!   server's own, its only TCP destination;
//! - [`home`]: the server's private home (caches, data, state), so that it
//!   writes nothing another server or the user runs later; [`pins`]: the
//!   workspace's code-running files it must not write.
//!
//! The plan travels to the shim in [`PLAN_VAR`], which the shim removes
//! before the exec. A process group, the parent-death signal and reaping
//! are unchanged by any of this (`runtime::process`).

pub mod apply;
pub mod home;
pub mod kernel;
pub mod needs;
pub mod pins;
pub mod plan;
pub mod proxy;

use std::path::PathBuf;

use steward_schema::resource::Reason;
use steward_schema::sandbox::{Resolved, Sandbox};

use crate::runtime::StartError;

pub use kernel::Support;
pub use plan::Report;
pub use steward_schema::resource::{Enforcement, SandboxNetwork, SandboxStatus};

/// The variable that carries a server's [`plan::Plan`] (JSON) to its shim.
pub const PLAN_VAR: &str = "STEWARD_SANDBOX_PLAN";

/// The profile a process is spawned under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxRequest {
    pub profile: Sandbox,
    /// Fail the start rather than run it less than fully enforced.
    pub require: bool,
    /// Why the profile is not the one the entry asks for.
    pub note: Option<String>,
    /// Whose process it is (`mcp-NAME`, `lsp-NAME`): names its private
    /// home, stable across restarts.
    pub owner: String,
}

impl SandboxRequest {
    /// The request of a spec's profile in force for the server `owner`
    /// (`off` included: status says it runs unconfined); a profile that
    /// does not exist cannot start.
    pub fn of(resolved: &Option<Resolved>, owner: String) -> Result<SandboxRequest, StartError> {
        match steward_schema::resource::sandbox_in_force(resolved) {
            Resolved::Profile {
                sandbox,
                require,
                note,
            } => Ok(SandboxRequest {
                profile: sandbox,
                require,
                note,
                owner,
            }),
            Resolved::Unknown(why) => Err(StartError::new(Reason::InvalidSpec, why)),
        }
    }
}

/// What every spawn of one controller shares: the user's directories, what
/// to hide, what the kernel offers.
#[derive(Debug, Clone)]
pub struct SandboxContext {
    /// `$HOME`.
    pub home: Option<PathBuf>,
    /// HOME_DIR.
    pub home_dir: PathBuf,
    /// The workspace root.
    pub workspace: PathBuf,
    /// Steward's own directories a server never reaches (control and MCP
    /// sockets, locks).
    pub hidden: Vec<PathBuf>,
    /// Where each server's private temp dir is made.
    pub tmp_root: PathBuf,
    /// Where this workspace's servers' private homes are (see [`home`]).
    pub homes: PathBuf,
    pub support: Support,
}

/// What a sandboxed process holds while it lives: what its sandbox
/// enforces, its egress proxy, its private temp dir (removed when the
/// process is dropped). A process under `off` holds only the report that
/// says so.
#[derive(Debug)]
pub struct Sandboxed {
    pub report: Report,
    proxy: Option<proxy::Proxy>,
    tmpdir: Option<PathBuf>,
    /// Said of it since it started (a code-running file it may have
    /// created: `ProtectedFileCreated`).
    later: std::sync::Mutex<Vec<String>>,
}

impl Sandboxed {
    fn unconfined() -> Sandboxed {
        Sandboxed {
            report: Report::unconfined(),
            proxy: None,
            tmpdir: None,
            later: Default::default(),
        }
    }

    /// Whether the kernel confines it at all (not `off`).
    pub fn confined(&self) -> bool {
        self.tmpdir.is_some()
    }

    /// Adds a note to what status says of it (once).
    pub fn note(&self, note: String) {
        let mut later = self.later.lock().unwrap_or_else(|e| e.into_inner());
        if !later.contains(&note) {
            later.push(note);
        }
    }

    /// Requests its egress proxy refused so far.
    pub fn egress_denied(&self) -> u64 {
        self.proxy.as_ref().map_or(0, proxy::Proxy::denied)
    }

    /// As `status.sandbox` shows it now.
    pub fn status(&self) -> SandboxStatus {
        let mut status = self.report.status(self.egress_denied());
        let later = self.later.lock().unwrap_or_else(|e| e.into_inner());
        status.notes.extend(later.iter().cloned());
        status
    }
}

impl Drop for Sandboxed {
    fn drop(&mut self) {
        if let Some(tmpdir) = &self.tmpdir {
            let _ = std::fs::remove_dir_all(tmpdir);
        }
    }
}

/// Why a sandbox could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// `steward.sandbox.require` and something is not enforced.
    #[error(
        "steward.sandbox.require is set and profile \"{profile}\" cannot be fully enforced here: {missing}"
    )]
    Required { profile: String, missing: String },
    #[error("make the private temp dir {}: {error}", path.display())]
    TempDir {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("make the private home {}: {error}", path.display())]
    Home {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("start the egress proxy: {0}")]
    Proxy(std::io::Error),
}

/// The process a sandbox is prepared for.
#[derive(Debug, Clone, Copy)]
pub struct Spawn<'a> {
    /// The resolved program.
    pub program: &'a std::path::Path,
    pub args: &'a [String],
    pub cwd: &'a std::path::Path,
    /// The spawner's serial number of this spawn.
    pub serial: u64,
}

/// Prepare the sandbox of one spawn: its plan, temp dir, private home and
/// proxy, and the variables the server gets (`env`, the entry's, is changed
/// in place: `TMPDIR`, the private home's variables but those the entry
/// sets, the proxy variables, and [`PLAN_VAR`] for the shim). For `off`,
/// only the report that says the server runs unconfined.
pub async fn prepare(
    context: &SandboxContext,
    request: &SandboxRequest,
    spawn: Spawn<'_>,
    env: &mut std::collections::BTreeMap<String, String>,
    sink: Option<proxy::DenialSink>,
) -> Result<Option<Sandboxed>, PrepareError> {
    let Spawn {
        program,
        args,
        cwd,
        serial,
    } = spawn;
    use std::os::unix::fs::DirBuilderExt;
    if request.profile.is_off() {
        return Ok(Some(Sandboxed::unconfined()));
    }
    let name = program
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmpdir = context
        .tmp_root
        .join(format!("{name}-{}-{serial}", std::process::id()));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&tmpdir)
        .map_err(|error| PrepareError::TempDir {
            path: tmpdir.clone(),
            error,
        })?;
    let private_home = home::dir_of(&context.homes, &request.owner, &request.profile);
    let cargo = program.file_name().is_some_and(|n| n == "cargo");
    home::create(&context.homes, &private_home, &context.workspace, cargo).map_err(|error| {
        let _ = std::fs::remove_dir(&tmpdir);
        PrepareError::Home {
            path: private_home.clone(),
            error,
        }
    })?;
    let entry = env.clone();
    home::set_variables(&private_home, cargo, &entry, env);
    let built = {
        let lookup = |k: &str| env.get(k).cloned().or_else(|| std::env::var(k).ok());
        let facts = plan::Facts {
            home: context.home.as_deref(),
            home_dir: &context.home_dir,
            workspace: &context.workspace,
            hidden: &context.hidden,
            program,
            args,
            cwd,
            tmpdir: &tmpdir,
            private_home: Some(&private_home),
            env: &lookup,
        };
        plan::build(&request.profile, context.support, &facts)
    };
    let Some(built) = built else {
        let _ = std::fs::remove_dir(&tmpdir);
        return Ok(None);
    };
    let mut report = built.report;
    report.notes.splice(0..0, request.note.clone());
    let mut guard = Sandboxed {
        report,
        proxy: None,
        tmpdir: Some(tmpdir),
        later: Default::default(),
    };
    if request.require && guard.report.enforcement != Enforcement::Full {
        return Err(PrepareError::Required {
            profile: guard.report.profile.clone(),
            missing: guard.report.missing.join("; "),
        });
    }
    let mut plan = built.plan;
    if let Some(egress) = built.egress {
        let proxy = proxy::Proxy::start(egress, sink)
            .await
            .map_err(PrepareError::Proxy)?;
        if let Some(ports) = &mut plan.connect {
            ports.push(proxy.port());
        }
        let url = format!("http://127.0.0.1:{}", proxy.port());
        for key in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
            env.insert(key.to_owned(), url.clone());
        }
        for key in ["NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"] {
            env.insert(key.to_owned(), String::new());
        }
        // Node before 24 ignores the variables without it.
        env.insert("NODE_USE_ENV_PROXY".to_owned(), "1".to_owned());
        guard.proxy = Some(proxy);
    }
    let tmp = tmpdir_of(&guard);
    for key in ["TMPDIR", "TMP", "TEMP"] {
        env.insert(key.to_owned(), tmp.clone());
    }
    // The session bus is hidden (or, without namespaces, still there but
    // not advertised).
    env.insert(
        "DBUS_SESSION_BUS_ADDRESS".to_owned(),
        "disabled:".to_owned(),
    );
    let plan = serde_json::to_string(&plan).unwrap_or_default();
    tracing::debug!(program = %program.display(), %plan, "sandbox plan");
    env.insert(PLAN_VAR.to_owned(), plan);
    Ok(Some(guard))
}

fn tmpdir_of(guard: &Sandboxed) -> String {
    guard
        .tmpdir
        .as_ref()
        .map(|t| t.to_string_lossy().into_owned())
        .unwrap_or_default()
}

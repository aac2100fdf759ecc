//! From a profile to a [`Plan`]: the concrete rules one server's shim
//! applies (paths made absolute, its runtime found, the network mode
//! chosen), and the [`Report`] of what they enforce on this kernel — made
//! in the controller before the spawn, so that status says what runs.
//!
//! The plan is declarative where the filesystem is large: `standard` reads
//! `/` *except* the credential stores and the agents' state, which the shim
//! expands (a granted directory that holds an excluded path is replaced by
//! its entries, recursively, minus the excluded one), so the controller does
//! no directory walk per spawn. The exceptions bound every rule — a runtime
//! found under the home directory does not hand over `~/.ssh` — but a path
//! granted on purpose inside one (HOME_DIR's `extensions/`, a path a custom
//! profile lists) is granted as it is.
//!
//! Writes are bounded twice more (product.md §9, "Nothing planted for
//! later"): what runs later outside any sandbox is never writable
//! ([`Plan::protect`]: shell start-up files, autostart, git's and the
//! agents' configuration, the package runners' shared caches...), and the
//! workspace's code-running files are pinned ([`Plan::pins`]). What a
//! server writes for itself goes to its own temp dir and private home
//! ([`Plan::own`], see `home`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use steward_schema::resource::{Enforcement, SandboxNetwork, SandboxStatus};
use steward_schema::sandbox::{
    self, Base, CREDENTIAL_STORES, NEVER_WRITABLE, Network, PinKind, Sandbox,
};

use super::kernel::{ABI_SCOPES, ABI_TCP, Support};
use super::needs::{named_files, package_runner, runtime_of};
use super::pins::{self, Pin};

/// What the shim applies before it execs the server (serialized into its
/// environment; see `apply`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Plan {
    /// The Landlock ABI to target (0: none).
    pub abi: u8,
    /// Read (and execute) these.
    #[serde(default)]
    pub read: Vec<PathBuf>,
    /// Read and write these, but [`Plan::protect`] and [`Plan::pins`].
    #[serde(default)]
    pub write: Vec<PathBuf>,
    /// Read and write these as they are: the server's own temp dir and
    /// private home, and the devices.
    #[serde(default)]
    pub own: Vec<PathBuf>,
    /// Never granted through a rule on a directory that holds them.
    #[serde(default)]
    pub except: Vec<PathBuf>,
    /// Never writable through a rule on a directory that holds them (and
    /// nothing can be created in such a directory): what runs later,
    /// outside any sandbox.
    #[serde(default)]
    pub protect: Vec<PathBuf>,
    /// The workspace's code-running paths under a write grant: pinned
    /// read-only when they exist; an absent directory among them cannot be
    /// created (nor a symbolic link in its place).
    #[serde(default)]
    pub pins: Vec<Pin>,
    /// TCP ports it may connect to (`None`: any; empty: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect: Option<Vec<u16>>,
    /// Whether it may bind TCP ports.
    pub bind: bool,
    /// No IPv4/IPv6 socket at all (seccomp).
    pub no_inet: bool,
    /// No UDP, raw or packet socket, and no io_uring (seccomp).
    pub no_datagrams: bool,
    /// Signals and abstract Unix sockets only within its own domain.
    pub scopes: bool,
    /// A user and mount namespace where these are read-only / hidden.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Namespace>,
}

/// The private mounts of a server's namespace.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Namespace {
    /// Bind-mounted read-only over themselves, those that exist when the
    /// shim runs (the pins: code the user's tools run).
    pub read_only: Vec<PathBuf>,
    /// Covered by an empty read-only mount (sockets that would let it out:
    /// the session bus, Steward's own sockets).
    pub hidden: Vec<PathBuf>,
    /// Under a hidden directory, yet the server's own (its private home):
    /// bound back in at the same path.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keep: Vec<PathBuf>,
}

/// What a plan enforces here, for status and `describe`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub profile: String,
    pub enforcement: Enforcement,
    pub abi: u8,
    pub network: SandboxNetwork,
    /// What the kernel cannot enforce (empty when `Full`).
    pub missing: Vec<String>,
    /// Why the profile is not the one asked for, or what was added (a
    /// package runner's registry), or what stays read-only of what it lists.
    pub notes: Vec<String>,
    /// Effective extra reads and writes (absolute), and hosts.
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    pub hosts: Vec<String>,
    /// The server's private home.
    pub home: Option<PathBuf>,
    /// The workspace's code-running paths pinned read-only at the spawn.
    pub pinned: Vec<PathBuf>,
    /// Code-running files absent at the spawn, which it could create:
    /// watched (`ProtectedFileCreated`).
    pub unpinned: Vec<PathBuf>,
}

impl Report {
    /// The report of a server that runs with no sandbox at all (`off`):
    /// status must make an unconfined server the easiest thing to spot.
    pub fn unconfined() -> Report {
        Report {
            profile: "off".to_owned(),
            enforcement: Enforcement::None,
            abi: 0,
            network: SandboxNetwork::Unrestricted,
            missing: vec![
                "profile off: no sandbox, the server runs with all your privileges".to_owned(),
            ],
            notes: vec![],
            read: vec![PathBuf::from("everything")],
            write: vec![PathBuf::from("everything")],
            hosts: vec![],
            home: None,
            pinned: vec![],
            unpinned: vec![],
        }
    }

    /// As `status.sandbox` shows it, with the egress refused so far.
    pub fn status(&self, egress_denied: u64) -> SandboxStatus {
        SandboxStatus {
            profile: self.profile.clone(),
            enforcement: self.enforcement,
            abi: self.abi,
            network: self.network,
            egress_denied,
            missing: self.missing.clone(),
            notes: self.notes.clone(),
            hosts: self.hosts.clone(),
            read: shown(&self.read),
            write: shown(&self.write),
            home: self.home.as_ref().map(|h| h.display().to_string()),
            pinned: self
                .pinned
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
        }
    }
}

/// Paths as status shows them (`/` says what it leaves out).
fn shown(paths: &[PathBuf]) -> Vec<String> {
    paths
        .iter()
        .map(|p| match p.to_str() {
            Some("/") => "/ (but the credential stores, HOME_DIR and Steward's state)".to_owned(),
            _ => p.display().to_string(),
        })
        .collect()
}

/// The egress a server gets through Steward's proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Egress {
    pub hosts: Vec<String>,
    /// Empty: any port.
    pub ports: Vec<u16>,
}

/// Everything a spawn needs besides the profile.
#[derive(Clone)]
pub struct Facts<'a> {
    /// `$HOME` (`~` of profiles; where the credential stores are).
    pub home: Option<&'a Path>,
    /// HOME_DIR: all of it but `extensions/` is the agents' state.
    pub home_dir: &'a Path,
    pub workspace: &'a Path,
    /// Paths to hide in the namespace (Steward's socket and lock
    /// directories; the session's runtime directory is added here).
    pub hidden: &'a [PathBuf],
    /// The resolved program and its arguments, and the working directory.
    pub program: &'a Path,
    pub args: &'a [String],
    pub cwd: &'a Path,
    /// The server's private temp dir.
    pub tmpdir: &'a Path,
    /// The server's private home (see `home`).
    pub private_home: Option<&'a Path>,
    /// The variables the server gets (`XDG_RUNTIME_DIR`, registries).
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

/// A plan, its report, and the egress to proxy (when the network is
/// limited to hosts).
#[derive(Debug, Clone)]
pub struct Built {
    pub plan: Plan,
    pub report: Report,
    pub egress: Option<Egress>,
}

/// The system directories every confined profile reads.
const SYSTEM_READ: [&str; 12] = [
    "/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/opt", "/proc",
    "/sys", "/run",
];

/// Devices every profile may write.
const DEVICES: [&str; 8] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/pts",
    "/dev/shm",
];

/// Build the plan of `sandbox` for one spawn. `off` is no plan at all.
pub fn build(sandbox: &Sandbox, support: Support, facts: &Facts<'_>) -> Option<Built> {
    if sandbox.is_off() {
        return None;
    }
    let home = facts.home.map(Path::to_path_buf);
    let abs = |p: &String| {
        sandbox::absolute(
            p,
            home.as_deref().unwrap_or(Path::new("/nonexistent-home")),
            facts.workspace,
        )
    };
    let mut plan = Plan {
        abi: support.abi,
        scopes: true,
        ..Plan::default()
    };
    let mut notes = Vec::new();
    let mut read: BTreeSet<PathBuf> = BTreeSet::new();
    let mut write: BTreeSet<PathBuf> = BTreeSet::new();
    let mut own: Vec<PathBuf> = vec![facts.tmpdir.to_path_buf()];
    own.extend(facts.private_home.map(Path::to_path_buf));
    own.extend(DEVICES.iter().map(PathBuf::from));

    // What `standard` never lets a server read: the credential stores and
    // the agents' state (HOME_DIR but its extensions). What no profile
    // lets it write: those too, and what runs later outside any sandbox.
    let mut denied: Vec<PathBuf> = Vec::new();
    let mut protect: Vec<PathBuf> = Vec::new();
    if let Some(home) = &home {
        denied.extend(CREDENTIAL_STORES.iter().map(|c| home.join(c)));
        protect.extend(NEVER_WRITABLE.iter().map(|c| home.join(c)));
    }
    denied.push(facts.home_dir.to_path_buf());
    protect.extend(denied.iter().cloned());
    denied.extend(facts.hidden.iter().cloned());
    plan.except = denied;
    match sandbox.base {
        Base::Standard => {
            read.insert(PathBuf::from("/"));
            read.insert(facts.home_dir.join("extensions"));
            write.insert(facts.workspace.to_path_buf());
        }
        Base::Confined => {
            read.extend(SYSTEM_READ.iter().map(PathBuf::from));
            read.insert(PathBuf::from("/dev"));
            read.extend(runtime_of(facts.program, facts.env));
            read.extend(named_files(facts.args, facts.cwd));
            read.extend(sandbox.read.iter().map(abs));
            write.extend(sandbox.write.iter().map(abs));
        }
        Base::Off => return None,
    }
    // Writes: what runs later stays read-only, whatever the profile lists.
    let covers_workspace =
        |w: &Path| facts.workspace.starts_with(w) || w.starts_with(facts.workspace);
    let candidates = if write.iter().any(|w| covers_workspace(w)) {
        pins::of_workspace(facts.workspace, sandbox.writes_git)
    } else {
        vec![]
    };
    let listed: Vec<(String, PathBuf)> =
        sandbox.write.iter().map(|w| (w.clone(), abs(w))).collect();
    for (written, w) in &listed {
        let inside = protect.iter().any(|p| w.starts_with(p))
            || candidates.iter().any(|p| w.starts_with(&p.path));
        let holds = protect.iter().any(|p| p.starts_with(w) && p != w)
            || candidates
                .iter()
                .any(|p| p.path.starts_with(w) && p.path != *w);
        if inside {
            write.remove(w);
            read.insert(w.clone());
            notes.push(format!(
                "write \"{written}\" stays read-only: code run later outside the sandbox lives there"
            ));
        } else if holds {
            notes.push(format!(
                "write \"{written}\": what runs later from it (start-up files, autostart, hooks, editors' and agents' configuration, shared package caches) stays read-only"
            ));
        }
    }
    plan.pins = candidates
        .into_iter()
        .filter(|p| write.iter().any(|w| p.path.starts_with(w)))
        .collect();
    protect.retain(|p| write.iter().any(|w| p.starts_with(w) || w.starts_with(p)));
    plan.protect = protect;

    // Network.
    let mut network = sandbox.network.clone();
    if let Some((runner, hosts)) = package_runner(facts.program, facts.args, facts.env) {
        match &mut network {
            Network::Unrestricted { .. } => {}
            Network::None => {
                notes.push(format!(
                    "{runner} may reach its registry ({}) through the egress proxy",
                    hosts.join(", ")
                ));
                network = Network::Proxy {
                    hosts,
                    ports: vec![],
                };
            }
            Network::Proxy { hosts: listed, .. } => {
                notes.push(format!(
                    "{runner} may also reach its registry ({})",
                    hosts.join(", ")
                ));
                listed.extend(hosts);
            }
        }
    }
    let mut missing = Vec::new();
    let (mode, egress) = match &network {
        Network::Unrestricted { ports } if ports.is_empty() => {
            plan.bind = true;
            (SandboxNetwork::Unrestricted, None)
        }
        Network::Unrestricted { ports } => {
            plan.connect = Some(ports.clone());
            plan.bind = true;
            if support.abi < ABI_TCP {
                missing.push(format!(
                    "TCP port rules need Landlock ABI {ABI_TCP} (this kernel has {})",
                    support.abi
                ));
            }
            (SandboxNetwork::Unrestricted, None)
        }
        Network::Proxy { hosts, ports } => {
            // The proxy's port is added at spawn, once it listens.
            plan.connect = Some(vec![]);
            plan.no_datagrams = true;
            if support.abi < ABI_TCP {
                missing.push(format!(
                    "limiting TCP to the egress proxy needs Landlock ABI {ABI_TCP} (this kernel has {})",
                    support.abi
                ));
            }
            (
                SandboxNetwork::Proxy,
                Some(Egress {
                    hosts: hosts.clone(),
                    ports: ports.clone(),
                }),
            )
        }
        Network::None => {
            plan.connect = Some(vec![]);
            plan.no_inet = true;
            plan.no_datagrams = true;
            (SandboxNetwork::None, None)
        }
    };

    // The namespace: the pins read-only, the ways out hidden.
    if support.userns {
        let mut hidden: Vec<PathBuf> = facts.hidden.to_vec();
        if let Some(run) = (facts.env)("XDG_RUNTIME_DIR").filter(|r| !r.is_empty()) {
            hidden.push(PathBuf::from(run));
        }
        hidden.extend(["/run/docker.sock", "/var/run/docker.sock"].map(PathBuf::from));
        // Never what the server itself needs.
        let needed = [facts.workspace, facts.tmpdir, facts.program, facts.cwd];
        hidden.retain(|h| h.exists() && !needed.iter().any(|n| n.starts_with(h)));
        let keep = facts
            .private_home
            .filter(|h| hidden.iter().any(|d| h.starts_with(d)))
            .map(Path::to_path_buf);
        plan.namespace = Some(Namespace {
            read_only: plan.pins.iter().map(|p| p.path.clone()).collect(),
            hidden,
            keep: keep.into_iter().collect(),
        });
    } else {
        missing.push(
            "without user namespaces the workspace's code-running files (.git, .vscode, .envrc...) stay writable, the session bus stays reachable and /proc/PID/environ of the user's other processes stays readable"
                .to_owned(),
        );
    }
    if support.abi == 0 {
        missing.insert(
            0,
            "the kernel has no Landlock: files are not confined".to_owned(),
        );
    } else if support.abi < ABI_SCOPES {
        missing.push(format!(
            "signal and abstract-socket scoping need Landlock ABI {ABI_SCOPES} (this kernel has {})",
            support.abi
        ));
    }
    let enforcement = if support.abi == 0 {
        Enforcement::None
    } else if missing.is_empty() {
        Enforcement::Full
    } else {
        Enforcement::Partial
    };
    plan.read = read.iter().cloned().collect();
    plan.write = write.iter().cloned().collect();
    plan.own = own;
    let hosts = egress.as_ref().map(|e| e.hosts.clone()).unwrap_or_default();
    let exists = |p: &Pin| p.path.symlink_metadata().is_ok();
    let mut shown_write = plan.write.clone();
    shown_write.extend(plan.own.iter().take(1).cloned());
    Some(Built {
        report: Report {
            profile: sandbox.profile.clone(),
            enforcement,
            abi: support.abi,
            network: mode,
            missing,
            notes,
            read: plan.read.clone(),
            write: shown_write,
            hosts,
            home: facts.private_home.map(Path::to_path_buf),
            pinned: plan
                .pins
                .iter()
                .filter(|p| exists(p))
                .map(|p| p.path.clone())
                .collect(),
            unpinned: plan
                .pins
                .iter()
                .filter(|p| p.kind == PinKind::File && !exists(p))
                .map(|p| p.path.clone())
                .collect(),
        },
        plan,
        egress,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts<'a>(dir: &'a Path, program: &'a Path, args: &'a [String]) -> Facts<'a> {
        Facts {
            home: Some(dir),
            home_dir: Path::new("/h/.qwen"),
            workspace: Path::new("/w"),
            hidden: &[],
            program,
            args,
            cwd: dir,
            tmpdir: Path::new("/tmp/stw-x"),
            private_home: Some(Path::new("/h/.qwen/steward/sandbox/w/mcp-x")),
            env: &|_| None,
        }
    }

    const FULL: Support = Support {
        abi: 7,
        userns: false,
    };

    #[test]
    fn off_has_no_plan_and_standard_reads_all_but_the_credentials() {
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("srv");
        let f = facts(dir.path(), &program, &[]);
        assert!(build(&Sandbox::builtin("off").unwrap(), FULL, &f).is_none());
        let b = build(&Sandbox::standard(), FULL, &f).unwrap();
        let denied = b.plan.except;
        assert!(b.plan.read.contains(&PathBuf::from("/")));
        assert!(denied.contains(&dir.path().join(".ssh")));
        assert!(denied.contains(&PathBuf::from("/h/.qwen")));
        assert!(b.plan.read.contains(&PathBuf::from("/h/.qwen/extensions")));
        assert!(b.plan.write.contains(&PathBuf::from("/w")));
        assert!(b.plan.own.contains(&PathBuf::from("/tmp/stw-x")));
        assert!(
            b.plan
                .own
                .contains(&PathBuf::from("/h/.qwen/steward/sandbox/w/mcp-x"))
        );
        // Nothing of the home is writable but through the private one; git
        // and the editors' configuration in the workspace are pinned.
        assert!(!b.plan.write.iter().any(|w| w.starts_with(dir.path())));
        assert!(b.plan.pins.iter().any(|p| p.path == Path::new("/w/.git")));
        assert!(
            b.plan
                .pins
                .iter()
                .any(|p| p.path == Path::new("/w/.vscode"))
        );
        // An absent code-running file is watched for.
        assert!(b.report.unpinned.contains(&PathBuf::from("/w/.envrc")));
        assert_eq!((b.plan.connect, b.plan.no_inet), (None, false));
        assert_eq!(b.report.network, SandboxNetwork::Unrestricted);
        // No user namespaces here: said, and Partial.
        assert_eq!(b.report.enforcement, Enforcement::Partial);
    }

    #[test]
    fn none_reads_its_runtime_and_named_script_and_has_no_network() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("venv/bin");
        std::fs::create_dir_all(&bin).unwrap();
        let program = bin.join("srv");
        std::fs::write(&program, "#!/usr/bin/env python3\n").unwrap();
        std::fs::write(dir.path().join("server.py"), "").unwrap();
        let args = vec!["server.py".to_owned(), "--port=8".to_owned()];
        let f = facts(dir.path(), &program, &args);
        let b = build(
            &Sandbox::builtin("none").unwrap(),
            Support {
                abi: 7,
                userns: true,
            },
            &f,
        )
        .unwrap();
        assert!(!b.plan.read.contains(&PathBuf::from("/")));
        assert!(
            b.plan.read.contains(&dir.path().join("venv")),
            "{:?}",
            b.plan.read
        );
        assert!(b.plan.read.contains(&dir.path().join("server.py")));
        assert!(b.plan.read.contains(&PathBuf::from("/usr")));
        assert!(!b.plan.write.contains(&PathBuf::from("/w")));
        assert_eq!(b.plan.connect, Some(vec![]));
        assert!(b.plan.no_inet && b.plan.no_datagrams);
        assert_eq!(b.report.enforcement, Enforcement::Full);
    }

    #[test]
    fn a_package_runner_without_network_reaches_its_registry_through_the_proxy() {
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("npx");
        let f = facts(dir.path(), &program, &[]);
        let b = build(&Sandbox::builtin("none").unwrap(), FULL, &f).unwrap();
        assert_eq!(b.report.network, SandboxNetwork::Proxy);
        assert_eq!(b.egress.unwrap().hosts, ["registry.npmjs.org"]);
        assert!(b.report.notes[0].contains("npx may reach its registry"));
        assert!(!b.plan.no_inet && b.plan.no_datagrams);
    }

    #[test]
    fn an_older_kernel_is_partial_and_says_what_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("srv");
        let f = facts(dir.path(), &program, &[]);
        let gh = Sandbox::custom(
            "gh",
            &serde_json::from_value(
                serde_json::json!({"network": {"outbound": {"allow_host": ["api.github.com"]}}}),
            )
            .unwrap(),
        );
        let b = build(
            &gh,
            Support {
                abi: 3,
                userns: true,
            },
            &f,
        )
        .unwrap();
        assert_eq!(b.report.enforcement, Enforcement::Partial);
        assert!(
            b.report.missing.iter().any(|m| m.contains("ABI 4")),
            "{:?}",
            b.report.missing
        );
        assert!(b.report.missing.iter().any(|m| m.contains("ABI 6")));
        let b = build(
            &gh,
            Support {
                abi: 0,
                userns: true,
            },
            &f,
        )
        .unwrap();
        assert_eq!(b.report.enforcement, Enforcement::None);
    }
}

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

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use steward_schema::resource::{Enforcement, SandboxNetwork, SandboxStatus};
use steward_schema::sandbox::{
    self, Base, CREDENTIAL_STORES, GIT_PROTECTED, Network, STANDARD_CACHES, Sandbox,
};

use super::kernel::{ABI_SCOPES, ABI_TCP, Support};

/// What the shim applies before it execs the server (serialized into its
/// environment; see `apply`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Plan {
    /// The Landlock ABI to target (0: none).
    pub abi: u8,
    /// Read (and execute) these.
    #[serde(default)]
    pub read: Vec<PathBuf>,
    /// Read and write these.
    #[serde(default)]
    pub write: Vec<PathBuf>,
    /// Never granted through a rule on a directory that holds them.
    #[serde(default)]
    pub except: Vec<PathBuf>,
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
    /// Bind-mounted read-only over themselves (code the user's git runs).
    pub read_only: Vec<PathBuf>,
    /// Covered by an empty read-only mount (sockets that would let it out:
    /// the session bus, Steward's own sockets).
    pub hidden: Vec<PathBuf>,
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
    /// package runner's registry).
    pub notes: Vec<String>,
    /// Effective extra reads and writes (absolute), and hosts.
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    pub hosts: Vec<String>,
}

impl Report {
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

/// The package caches a confined server may write (package runners fetch
/// into them), relative to the home directory.
const PACKAGE_CACHES: [&str; 3] = [".npm", ".cache", ".bun/install/cache"];

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
    write.insert(facts.tmpdir.to_path_buf());
    write.extend(DEVICES.iter().map(PathBuf::from));

    // What `standard` never lets a server read: the credential stores and
    // the agents' state (HOME_DIR but its extensions).
    let mut denied: Vec<PathBuf> = Vec::new();
    if let Some(home) = &home {
        denied.extend(CREDENTIAL_STORES.iter().map(|c| home.join(c)));
    }
    denied.push(facts.home_dir.to_path_buf());
    denied.extend(facts.hidden.iter().cloned());
    plan.except = denied;
    match sandbox.base {
        Base::Standard => {
            read.insert(PathBuf::from("/"));
            read.insert(facts.home_dir.join("extensions"));
            write.insert(facts.workspace.to_path_buf());
            if let Some(home) = &home {
                write.extend(STANDARD_CACHES.iter().map(|c| home.join(c)));
            }
        }
        Base::Confined => {
            read.extend(SYSTEM_READ.iter().map(PathBuf::from));
            read.insert(PathBuf::from("/dev"));
            read.extend(runtime_of(facts.program, facts.env));
            read.extend(named_files(facts.args, facts.cwd));
            if let Some(home) = &home {
                write.extend(PACKAGE_CACHES.iter().map(|c| home.join(c)));
            }
            read.extend(sandbox.read.iter().map(abs));
            write.extend(sandbox.write.iter().map(abs));
        }
        Base::Off => return None,
    }
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

    // The namespace: git's own code read-only, the ways out hidden.
    if support.userns {
        let mut ns = Namespace::default();
        for g in GIT_PROTECTED {
            let p = facts.workspace.join(g);
            let git = facts.workspace.join(".git");
            let covered = write
                .iter()
                .any(|w| p.starts_with(w) && !w.starts_with(&git));
            if covered && p.exists() {
                ns.read_only.push(p);
            }
        }
        let mut hidden: Vec<PathBuf> = facts.hidden.to_vec();
        if let Some(run) = (facts.env)("XDG_RUNTIME_DIR").filter(|r| !r.is_empty()) {
            hidden.push(PathBuf::from(run));
        }
        hidden.extend(["/run/docker.sock", "/var/run/docker.sock"].map(PathBuf::from));
        // Never what the server itself needs.
        let needed = [facts.workspace, facts.tmpdir, facts.program, facts.cwd];
        hidden.retain(|h| h.exists() && !needed.iter().any(|n| n.starts_with(h)));
        ns.hidden = hidden;
        plan.namespace = Some(ns);
    } else {
        missing.push(
            "without user namespaces .git/hooks and .git/config stay writable, the session bus stays reachable and /proc/PID/environ of the user's other processes stays readable"
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
    let hosts = egress.as_ref().map(|e| e.hosts.clone()).unwrap_or_default();
    Some(Built {
        report: Report {
            profile: sandbox.profile.clone(),
            enforcement,
            abi: support.abi,
            network: mode,
            missing,
            notes,
            read: plan.read.clone(),
            write: plan.write.clone(),
            hosts,
        },
        plan,
        egress,
    })
}

/// Where a program's runtime lives: its own file and package, and its
/// interpreter's (from the `#!` line), resolved through symlinks.
fn runtime_of(program: &Path, env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut add = |p: &Path| {
        out.push(p.to_path_buf());
        out.extend(prefix_of(p));
        if let Ok(real) = std::fs::canonicalize(p) {
            out.extend(prefix_of(&real));
            out.push(real);
        }
    };
    add(program);
    if let Some(interpreter) = shebang(program) {
        let mut words = interpreter.split_whitespace();
        let first = words.next().unwrap_or_default();
        let interpreter = if Path::new(first).file_name().is_some_and(|n| n == "env") {
            words
                .find(|w| !w.starts_with('-'))
                .and_then(|name| on_path(name, env))
        } else {
            Some(PathBuf::from(first))
        };
        if let Some(i) = interpreter {
            add(&i);
        }
    }
    out
}

/// The directory a program's package lives in: `X` for `X/bin/prog`, the
/// outermost `node_modules` for a Node package, else its directory.
fn prefix_of(p: &Path) -> Option<PathBuf> {
    if let Some(modules) = p
        .ancestors()
        .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
        .last()
    {
        return Some(modules.to_path_buf());
    }
    let dir = p.parent()?;
    if dir.file_name().is_some_and(|n| n == "bin") {
        dir.parent().map(Path::to_path_buf)
    } else {
        Some(dir.to_path_buf())
    }
}

/// The `#!` line of a script (without `#!`), if it is one.
fn shebang(program: &Path) -> Option<String> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(program).ok()?.read(&mut head).ok()?;
    let head = head.get(..n)?.strip_prefix(b"#!")?;
    let line = head.split(|b| *b == b'\n').next()?;
    Some(String::from_utf8_lossy(line).trim().to_owned())
}

/// `name` looked up in the controller's `PATH` (as the spawn resolves
/// commands).
fn on_path(name: &str, env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let path = env("PATH").or_else(|| std::env::var("PATH").ok())?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The files a command line names (a script, a config file), and a
/// script's directory (its sibling modules).
fn named_files(args: &[String], cwd: &Path) -> Vec<PathBuf> {
    const SCRIPTS: [&str; 6] = ["py", "js", "mjs", "cjs", "ts", "rb"];
    let mut out = Vec::new();
    for arg in args {
        let value = arg.split_once('=').map_or(arg.as_str(), |(_, v)| v);
        if value.is_empty() || value.starts_with('-') {
            continue;
        }
        let p = cwd.join(value);
        if !p.exists() {
            continue;
        }
        let script = p
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| SCRIPTS.contains(&e));
        if script && let Some(dir) = p.parent() {
            out.push(dir.to_path_buf());
        }
        out.push(p);
    }
    out
}

/// A package runner (`npx`, `bunx`, `uvx`, `pipx run`) and its registry's
/// hosts, when `program` is one.
fn package_runner(
    program: &Path,
    args: &[String],
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<(String, Vec<String>)> {
    let name = program.file_name()?.to_str()?;
    let host_of = |url: String| {
        url::Url::parse(&url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
    };
    let npm = || {
        vec![
            env("npm_config_registry")
                .or_else(|| env("NPM_CONFIG_REGISTRY"))
                .and_then(host_of)
                .unwrap_or_else(|| "registry.npmjs.org".to_owned()),
        ]
    };
    let pypi = || match ["UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"]
        .iter()
        .find_map(|v| env(v).and_then(host_of))
    {
        Some(host) => vec![host],
        None => vec!["pypi.org".to_owned(), "files.pythonhosted.org".to_owned()],
    };
    let hosts = match name {
        "npx" | "bunx" => npm(),
        "uvx" => pypi(),
        "pipx" if args.first().is_some_and(|a| a == "run") => pypi(),
        _ => return None,
    };
    Some((name.to_owned(), hosts))
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
        assert!(b.plan.write.contains(&PathBuf::from("/tmp/stw-x")));
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

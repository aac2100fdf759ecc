//! Least privilege, the pure part: the permission profiles a server runs
//! under (product.md §9) — as users write them, which one a server gets, and
//! whether one profile is wider than another.
//!
//! - **As written.** An entry's `sandbox` key ([`SandboxField`]) names a
//!   profile (a built-in or one of `steward.sandbox.profiles`) or is an inline
//!   [`PermissionProfile`] in ToolHive's shape (`read`, `write`,
//!   `network.outbound.{insecure_allow_all, allow_host, allow_port}`), so a
//!   ToolHive profile file works unchanged. [`check_field`] says what is wrong
//!   with one (a field pointer and a message), so an invalid profile is an
//!   invalid source with file:line:col.
//! - **Effective.** [`resolve`] turns the key, where it was written and the
//!   settings' `steward.sandbox` (read only from layers the workspace does
//!   not control) into the [`Sandbox`] the server runs under. A file the
//!   workspace controls may only narrow the default: a wider request from a
//!   file nobody approves (`.lsp.json`) runs under the default instead, with
//!   a note; a wider request from an approval-gated file keeps its profile,
//!   and admission holds it until approved (`crate::admission`).
//! - **Order.** [`Sandbox::within`] is the partial order "grants nothing the
//!   other does not", and says what widened when it is not.
//!
//! Enforcement (Landlock, seccomp, the egress proxy) is the runtime's; this
//! module only decides.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::load::paths::normalize_lexically;

/// `sandbox` in an entry, or `steward.sandbox.default`: a profile name or an
/// inline profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum SandboxField {
    /// A built-in profile (`standard`, `none`, `network`, `off`) or one of
    /// `steward.sandbox.profiles`.
    Name(String),
    /// An inline permission profile (ToolHive's shape): `none` plus what it
    /// lists.
    Profile(PermissionProfile),
}

/// A permission profile in ToolHive's shape: what a server may read and
/// write besides the system and its own runtime, and where it may connect.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct PermissionProfile {
    /// Paths the server may read (absolute, `~/…`, or relative to the
    /// workspace: `.` is the workspace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<Vec<String>>,
    /// Paths the server may write (and read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<Vec<String>>,
    /// Network permissions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkPermissions>,
    /// ToolHive's privileged containers: never granted (accepted as `false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub privileged: Option<bool>,
}

/// `network` of a permission profile.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct NetworkPermissions {
    /// Outbound connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outbound: Option<OutboundNetwork>,
    /// ToolHive's inbound rules: a server started by Steward listens only
    /// where its configuration says; accepted and not used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inbound: Option<Value>,
}

/// `network.outbound` of a permission profile.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct OutboundNetwork {
    /// Any host, any port (`allow_port`, when given, still bounds the ports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure_allow_all: Option<bool>,
    /// Hosts reachable through Steward's egress proxy: `api.github.com`, or
    /// `*.example.com` for any subdomain of `example.com`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_host: Option<Vec<String>>,
    /// Ports those hosts may be reached on (empty or absent: any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_port: Option<Vec<u16>>,
}

/// `steward.sandbox` in settings (user and system layers only).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxSettings {
    /// The profile of a server whose entry has no `sandbox` key (default
    /// `standard`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "standard"))]
    pub default: Option<SandboxField>,
    /// Named profiles, usable as `"sandbox": "NAME"` in any entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profiles: Option<BTreeMap<String, PermissionProfile>>,
    /// When true, a server whose profile the kernel cannot enforce fully
    /// fails to start (`SandboxUnavailable`) instead of running `Partial`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub require: Option<bool>,
}

/// The built-in profile names.
pub const BUILTINS: [&str; 5] = ["standard", "none", "network", "git-write", "off"];

/// What a profile starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Base {
    /// Reads everything but the credential stores and Steward's state;
    /// writes the workspace but its code-running files ([`PINNED`]), a
    /// private temp dir and a private home.
    Standard,
    /// Reads the system, its own runtime and what the profile lists; writes
    /// a private temp dir, a private home and what the profile lists.
    Confined,
    /// No sandbox.
    Off,
}

/// Where a sandboxed server may connect.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Network {
    /// Any host; `ports`, when not empty, bounds the TCP ports.
    Unrestricted {
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        ports: Vec<u16>,
    },
    /// Only these hosts (and ports, when not empty), through the egress proxy.
    Proxy {
        hosts: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        ports: Vec<u16>,
    },
    /// No network at all.
    None,
}

/// The profile a server runs under, as resolved from its entry and the
/// settings. Paths are as written (`~`, workspace-relative); the runtime
/// makes them absolute.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sandbox {
    /// `standard`, `none`, `network`, `off`, a custom profile's name, or
    /// `inline`.
    pub profile: String,
    pub base: Base,
    /// Reads beyond the base (custom profiles).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<String>,
    /// Writes beyond the base (custom profiles).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<String>,
    pub network: Network,
    /// `git-write`: the workspace's `.git` directories (hooks and config
    /// included) are writable — a server under it can plant hooks. Absent
    /// from every other profile's serialized form, so their fingerprints
    /// stay as they were.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub writes_git: bool,
}

impl Sandbox {
    /// The built-in `standard` profile (what a server gets by default).
    pub fn standard() -> Sandbox {
        Sandbox::builtin("standard").expect("a built-in")
    }

    /// A built-in profile by name.
    pub fn builtin(name: &str) -> Option<Sandbox> {
        let (base, network) = match name {
            "standard" | "git-write" => (Base::Standard, Network::Unrestricted { ports: vec![] }),
            "none" => (Base::Confined, Network::None),
            "network" => (Base::Confined, Network::Unrestricted { ports: vec![] }),
            "off" => (Base::Off, Network::Unrestricted { ports: vec![] }),
            _ => return None,
        };
        Some(Sandbox {
            profile: name.to_owned(),
            base,
            read: vec![],
            write: vec![],
            network,
            writes_git: name == "git-write",
        })
    }

    /// A custom profile (`none` plus what `p` lists), named `name`.
    pub fn custom(name: &str, p: &PermissionProfile) -> Sandbox {
        let outbound = p.network.as_ref().and_then(|n| n.outbound.as_ref());
        let ports: Vec<u16> = sorted(outbound.and_then(|o| o.allow_port.clone()));
        let hosts: Vec<String> = sorted(outbound.and_then(|o| o.allow_host.clone()))
            .into_iter()
            .map(|h| h.to_ascii_lowercase())
            .collect();
        let network = if outbound.and_then(|o| o.insecure_allow_all) == Some(true) {
            Network::Unrestricted { ports }
        } else if !hosts.is_empty() {
            Network::Proxy { hosts, ports }
        } else {
            Network::None
        };
        Sandbox {
            profile: name.to_owned(),
            base: Base::Confined,
            read: sorted(p.read.clone()),
            write: sorted(p.write.clone()),
            network,
            writes_git: false,
        }
    }

    /// Whether this is the built-in `standard` (the default; its absence
    /// from a fingerprint keeps fingerprints of before profiles existed).
    pub fn is_standard(&self) -> bool {
        *self == Sandbox::standard()
    }

    /// Whether it is `off`.
    pub fn is_off(&self) -> bool {
        self.base == Base::Off
    }

    /// `None` when this profile grants nothing `other` does not; else what
    /// it grants beyond (one phrase). `home` and `workspace` make `~` and
    /// relative paths comparable.
    pub fn widens(&self, other: &Sandbox, home: &Path, workspace: &Path) -> Option<String> {
        let mut beyond = Vec::new();
        if other.base == Base::Off {
            return None;
        }
        if self.base == Base::Off {
            return Some("no sandbox at all (off)".to_owned());
        }
        let abs = |p: &String| absolute(p, home, workspace);
        if self.writes_git && !other.writes_git {
            beyond.push("writes the workspace's .git, hooks included (git-write)".to_owned());
        }
        match (self.base, other.base) {
            (Base::Standard, Base::Confined) => beyond.push(
                "reads everything but the credential stores and writes the workspace (standard)"
                    .to_owned(),
            ),
            (Base::Confined, Base::Standard) => {
                for p in &self.read {
                    if credential_store(&abs(p), home) {
                        beyond.push(format!("reads {p}"));
                    }
                }
                for p in &self.write {
                    if !standard_writes(&abs(p), home, workspace) {
                        beyond.push(format!("writes {p}"));
                    }
                }
            }
            (Base::Confined, Base::Confined) => {
                let theirs_read: Vec<PathBuf> =
                    other.read.iter().chain(&other.write).map(abs).collect();
                let theirs_write: Vec<PathBuf> = other.write.iter().map(abs).collect();
                for p in &self.read {
                    if !theirs_read.iter().any(|t| abs(p).starts_with(t)) {
                        beyond.push(format!("reads {p}"));
                    }
                }
                for p in &self.write {
                    if !theirs_write.iter().any(|t| abs(p).starts_with(t)) {
                        beyond.push(format!("writes {p}"));
                    }
                }
            }
            _ => {}
        }
        if let Some(more) = network_beyond(&self.network, &other.network) {
            beyond.push(more);
        }
        (!beyond.is_empty()).then(|| beyond.join(", "))
    }
}

fn sorted<T: Ord>(list: Option<Vec<T>>) -> Vec<T> {
    let mut list = list.unwrap_or_default();
    list.sort();
    list.dedup();
    list
}

/// What `mine` reaches that `theirs` does not.
fn network_beyond(mine: &Network, theirs: &Network) -> Option<String> {
    let ports_within = |mine: &[u16], theirs: &[u16]| {
        theirs.is_empty() || (!mine.is_empty() && mine.iter().all(|p| theirs.contains(p)))
    };
    let show_ports = |ports: &[u16]| {
        if ports.is_empty() {
            "any port".to_owned()
        } else {
            format!(
                "port {}",
                ports
                    .iter()
                    .map(u16::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    };
    match (mine, theirs) {
        (Network::None, _) => None,
        (Network::Unrestricted { ports: m }, Network::Unrestricted { ports: t }) => {
            (!ports_within(m, t)).then(|| format!("connects to any host on {}", show_ports(m)))
        }
        (Network::Unrestricted { ports }, _) => {
            Some(format!("connects to any host on {}", show_ports(ports)))
        }
        (Network::Proxy { hosts, ports }, Network::Unrestricted { ports: t }) => {
            (!ports_within(ports, t))
                .then(|| format!("connects to {} on {}", hosts.join(", "), show_ports(ports)))
        }
        (
            Network::Proxy { hosts, ports },
            Network::Proxy {
                hosts: th,
                ports: tp,
            },
        ) => {
            let extra: Vec<&String> = hosts
                .iter()
                .filter(|h| !th.iter().any(|t| host_matches(t, h)))
                .collect();
            if !extra.is_empty() {
                Some(format!(
                    "connects to {}",
                    extra
                        .iter()
                        .map(|h| h.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            } else if !ports_within(ports, tp) {
                Some(format!("connects on {}", show_ports(ports)))
            } else {
                None
            }
        }
        (Network::Proxy { hosts, .. }, Network::None) => {
            Some(format!("connects to {}", hosts.join(", ")))
        }
    }
}

/// Whether the allow-list entry `pattern` (`host` or `*.domain`) covers
/// `host` (itself a host or a `*.` pattern). Case-insensitive.
pub fn host_matches(pattern: &str, host: &str) -> bool {
    let (pattern, host) = (pattern.to_ascii_lowercase(), host.to_ascii_lowercase());
    match pattern.strip_prefix("*.") {
        Some(domain) => {
            let bare = host.strip_prefix("*.").unwrap_or(&host);
            bare.len() > domain.len()
                && bare.ends_with(domain)
                && bare.as_bytes()[bare.len() - domain.len() - 1] == b'.'
                || host == pattern
        }
        None => pattern == host,
    }
}

/// `p` (as written in a profile) as an absolute path: `~` is `home`,
/// relative paths are in `workspace`.
pub fn absolute(p: &str, home: &Path, workspace: &Path) -> PathBuf {
    let joined = if p == "~" {
        home.to_path_buf()
    } else if let Some(rest) = p.strip_prefix("~/") {
        home.join(rest)
    } else {
        workspace.join(p)
    };
    normalize_lexically(&joined)
}

/// The credential stores `standard` never lets a server read, relative to
/// the home directory (product.md §9). The agents' own state (HOME_DIR but
/// its `extensions/`) is added by the runtime, which knows HOME_DIR.
pub const CREDENTIAL_STORES: [&str; 23] = [
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".config/gh",
    ".npmrc",
    ".pypirc",
    ".local/share/keyrings",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".claude.json",
    ".claude",
    ".gemini",
    ".codex",
    ".config/github-copilot",
    ".qwen",
    ".password-store",
];

/// Whether `p` is (in) one of the [`CREDENTIAL_STORES`] of `home`.
pub fn credential_store(p: &Path, home: &Path) -> bool {
    CREDENTIAL_STORES
        .iter()
        .any(|c| p.starts_with(home.join(c)) || home.join(c).starts_with(p))
}

/// What a server may never write, whatever its profile lists (product.md
/// §9, "Nothing planted for later"), relative to the home directory: what
/// the user's shell, login session, desktop, editors, git, package runners
/// and agents run or load later, outside any sandbox. The agents' own
/// state (HOME_DIR) is added by the runtime, which knows HOME_DIR. A
/// profile that lists one of them is valid; the path stays read-only.
pub const NEVER_WRITABLE: [&str; 56] = [
    // Shell start-up files.
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".bash_aliases",
    ".profile",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".zlogin",
    ".config/fish",
    ".inputrc",
    ".pam_environment",
    ".config/environment.d",
    // Login sessions, the desktop, autostart and services.
    ".xprofile",
    ".xinitrc",
    ".xsession",
    ".xsessionrc",
    ".config/autostart",
    ".config/systemd",
    ".local/share/systemd",
    ".local/share/applications",
    ".local/share/gnome-shell",
    ".local/share/dbus-1",
    // Completions, editors' plugins and configuration.
    ".local/share/bash-completion",
    ".local/share/fish",
    ".local/share/nvim",
    ".config/nvim",
    ".vimrc",
    ".vim",
    ".emacs",
    ".emacs.d",
    ".config/Code",
    ".vscode",
    ".config/Cursor",
    ".cursor",
    ".config/zed",
    // Git and SSH.
    ".gitconfig",
    ".config/git",
    ".ssh",
    // Programs on PATH, language runtimes' start-up hooks and the package
    // runners' shared caches (what `npx -y`, `uvx`, `pipx run` execute).
    ".local/bin",
    ".local/lib",
    ".cargo",
    ".npm/_npx",
    ".cache/uv",
    ".local/share/uv",
    ".local/pipx",
    ".cache/pre-commit",
    ".config/pip",
    ".config/direnv",
    // The agents' own directories.
    ".claude",
    ".claude.json",
    ".gemini",
    ".codex",
    ".qwen",
    ".config/github-copilot",
];

/// Whether a [`PINNED`] path is a directory (an absent one cannot be
/// created either) or a file (an absent one can be: its creation is
/// reported).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PinKind {
    Dir,
    File,
}

/// The workspace's code-running files, relative to the workspace: what
/// git, hook managers, editors, agents and environment managers run or
/// load from a checkout. Pinned read-only under every profile that writes
/// the workspace but `off` (and `git-write` for `.git`).
pub const PINNED: [(&str, PinKind); 25] = [
    (".git", PinKind::Dir),
    (".husky", PinKind::Dir),
    (".githooks", PinKind::Dir),
    (".pre-commit-config.yaml", PinKind::File),
    ("lefthook.yml", PinKind::File),
    ("lefthook.yaml", PinKind::File),
    (".lefthook.yml", PinKind::File),
    (".gitmodules", PinKind::File),
    (".vscode", PinKind::Dir),
    (".idea", PinKind::Dir),
    (".devcontainer", PinKind::Dir),
    (".claude", PinKind::Dir),
    (".gemini", PinKind::Dir),
    (".qwen", PinKind::Dir),
    (".codex", PinKind::Dir),
    (".cursor", PinKind::Dir),
    (".zed", PinKind::Dir),
    (".github/workflows", PinKind::Dir),
    (".mcp.json", PinKind::File),
    (".lsp.json", PinKind::File),
    (".envrc", PinKind::File),
    (".tool-versions", PinKind::File),
    ("mise.toml", PinKind::File),
    (".mise.toml", PinKind::File),
    (".config/mise", PinKind::Dir),
];

/// Whether `p` is (in) one of the [`NEVER_WRITABLE`] paths of `home`.
pub fn never_writable(p: &Path, home: &Path) -> bool {
    NEVER_WRITABLE.iter().any(|c| p.starts_with(home.join(c)))
}

/// Whether `p` is (in) one of the workspace's [`PINNED`] paths.
pub fn pinned(p: &Path, workspace: &Path) -> bool {
    PINNED
        .iter()
        .any(|(rel, _)| p.starts_with(workspace.join(rel)))
}

/// Whether `standard` lets a server write `p`: the workspace but its
/// code-running files (its private home and temp dir are Steward's own).
fn standard_writes(p: &Path, home: &Path, workspace: &Path) -> bool {
    p.starts_with(workspace) && !pinned(p, workspace) && !credential_store(p, home)
}

/// What was wrong with a `sandbox` value: (pointer below it, message).
pub type FieldProblem = (String, String);

/// The problems of a `sandbox` value as written (empty when valid).
pub fn check_field(field: &SandboxField) -> Vec<FieldProblem> {
    match field {
        SandboxField::Name(name) if name.trim().is_empty() => vec![(
            String::new(),
            format!(
                "expected a profile name ({}, or one of steward.sandbox.profiles) or a profile object",
                BUILTINS.join(", ")
            ),
        )],
        SandboxField::Name(_) => vec![],
        SandboxField::Profile(p) => check_profile(p),
    }
}

/// The problems of a profile object (empty when valid).
pub fn check_profile(p: &PermissionProfile) -> Vec<FieldProblem> {
    let mut problems = Vec::new();
    for (key, list) in [("read", &p.read), ("write", &p.write)] {
        for (i, path) in list.iter().flatten().enumerate() {
            if let Some(why) = bad_path(path) {
                problems.push((format!("/{key}/{i}"), why));
            }
        }
    }
    if p.privileged == Some(true) {
        problems.push((
            "/privileged".to_owned(),
            "a server never runs privileged under Steward; remove \"privileged\" or set it to false"
                .to_owned(),
        ));
    }
    let outbound = p.network.as_ref().and_then(|n| n.outbound.as_ref());
    for (i, host) in outbound
        .and_then(|o| o.allow_host.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        if let Some(why) = bad_host(host) {
            problems.push((format!("/network/outbound/allow_host/{i}"), why));
        }
    }
    for (i, port) in outbound
        .and_then(|o| o.allow_port.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        if *port == 0 {
            problems.push((
                format!("/network/outbound/allow_port/{i}"),
                "expected a port from 1 to 65535".to_owned(),
            ));
        }
    }
    problems
}

fn bad_path(path: &str) -> Option<String> {
    if path.is_empty() {
        return Some("expected a path (absolute, ~/…, or relative to the workspace)".to_owned());
    }
    if path.contains('\0') {
        return Some("a path cannot hold a NUL character".to_owned());
    }
    if path.starts_with('~') && path != "~" && !path.starts_with("~/") {
        return Some(format!(
            "\"{path}\": only your own home (~ or ~/…) is understood; write the absolute path"
        ));
    }
    None
}

fn bad_host(host: &str) -> Option<String> {
    if let Some((_, rest)) = host.split_once("://") {
        let bare = rest.split(['/', ':']).next().unwrap_or(rest);
        return Some(format!(
            "\"{host}\" is a URL; write the host only (\"{bare}\"), and ports in allow_port"
        ));
    }
    if host == "*" {
        return Some(
            "\"*\" allows every host; write \"insecure_allow_all\": true if that is meant"
                .to_owned(),
        );
    }
    let bare = host.strip_prefix("*.").unwrap_or(host);
    let valid = !bare.is_empty()
        && bare.len() <= 253
        && bare.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
        || bare.parse::<std::net::IpAddr>().is_ok();
    (!valid).then(|| {
        format!("\"{host}\" is not a host name: expected a name like api.github.com, *.example.com, or an IP address")
    })
}

/// `steward.sandbox` as merged from the layers the workspace does not
/// control (later layer wins per key; profiles by name).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SandboxPolicy {
    pub default: Option<SandboxField>,
    pub profiles: BTreeMap<String, PermissionProfile>,
    pub require: bool,
}

/// A server's sandbox, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Resolved {
    /// Runs under this profile; `note` says why it is not the one asked
    /// for, when it is not; `require`: fail rather than run it `Partial`.
    Profile {
        sandbox: Sandbox,
        note: Option<String>,
        require: bool,
    },
    /// Names a profile that does not exist: it cannot run.
    Unknown(String),
}

impl SandboxPolicy {
    /// The profile `field` names or holds.
    fn profile_of(&self, field: &SandboxField) -> Result<Sandbox, String> {
        match field {
            SandboxField::Profile(p) => Ok(Sandbox::custom("inline", p)),
            SandboxField::Name(name) => {
                if let Some(b) = Sandbox::builtin(name) {
                    return Ok(b);
                }
                if let Some(p) = self.profiles.get(name) {
                    return Ok(Sandbox::custom(name, p));
                }
                let mut known: Vec<&str> = BUILTINS.to_vec();
                known.extend(self.profiles.keys().map(String::as_str));
                let hint = crate::validate::did_you_mean(name, &known)
                    .map(|s| format!(" (did you mean \"{s}\"?)"))
                    .unwrap_or_default();
                Err(format!(
                    "no sandbox profile \"{name}\"{hint}: use one of {}, or define it under steward.sandbox.profiles in your user settings",
                    known.join(", ")
                ))
            }
        }
    }

    /// The default profile (`steward.sandbox.default`, else `standard`). A
    /// default that names no profile is an error, never a silent `standard`.
    pub fn default_profile(&self) -> Result<Sandbox, String> {
        match &self.default {
            None => Ok(Sandbox::standard()),
            Some(field) => self
                .profile_of(field)
                .map_err(|e| format!("steward.sandbox.default: {e}")),
        }
    }

    /// The profile a server with `field` runs under. One written in a file
    /// the workspace controls (`workspace_file`) that nobody approves
    /// (`gated` false) may only narrow the default.
    pub fn resolve(
        &self,
        field: Option<&SandboxField>,
        workspace_file: bool,
        gated: bool,
        home: &Path,
        workspace: &Path,
    ) -> Resolved {
        let default = match self.default_profile() {
            Ok(d) => d,
            Err(e) => return Resolved::Unknown(e),
        };
        let Some(field) = field else {
            return Resolved::Profile {
                sandbox: default,
                note: None,
                require: self.require,
            };
        };
        let asked = match self.profile_of(field) {
            Ok(p) => p,
            Err(e) => return Resolved::Unknown(e),
        };
        if workspace_file
            && !gated
            && let Some(wider) = asked.widens(&default, home, workspace)
        {
            return Resolved::Profile {
                note: Some(format!(
                    "sandbox \"{}\" is wider than the default \"{}\" ({wider}); a file the workspace controls may only narrow it, so \"{}\" is used",
                    asked.profile, default.profile, default.profile
                )),
                sandbox: default,
                require: self.require,
            };
        }
        Resolved::Profile {
            sandbox: asked,
            note: None,
            require: self.require,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home() -> &'static Path {
        Path::new("/home/u")
    }
    fn ws() -> &'static Path {
        Path::new("/home/u/src/app")
    }
    fn profile(json: Value) -> Sandbox {
        Sandbox::custom("p", &serde_json::from_value(json).unwrap())
    }

    #[test]
    fn built_ins_are_ordered_none_network_standard_off() {
        let [s, n, net, git, off] = BUILTINS.map(|b| Sandbox::builtin(b).unwrap());
        let widens = |a: &Sandbox, b: &Sandbox| a.widens(b, home(), ws());
        assert_eq!(widens(&n, &net), None);
        assert_eq!(widens(&net, &s), None);
        assert_eq!(widens(&s, &off), None);
        assert_eq!(widens(&n, &s), None);
        assert!(widens(&net, &n).unwrap().contains("any host"));
        assert!(widens(&s, &net).unwrap().contains("standard"));
        assert!(widens(&off, &s).unwrap().contains("off"));
        assert!(widens(&git, &s).unwrap().contains("git-write"));
        assert_eq!(widens(&s, &git), None);
        assert_eq!(widens(&git, &off), None);
        assert!(widens(&off, &git).unwrap().contains("off"));
    }

    #[test]
    fn a_custom_profile_within_standard_reads_no_credentials_and_writes_the_workspace() {
        let s = Sandbox::standard();
        let ok = profile(
            serde_json::json!({"read": ["~/data", "/etc/x"], "write": ["./out", "./.git/../src"]}),
        );
        assert_eq!(ok.widens(&s, home(), ws()), None);
        let keys = profile(serde_json::json!({"read": ["~/.ssh/id_ed25519"]}));
        assert_eq!(
            keys.widens(&s, home(), ws()).unwrap(),
            "reads ~/.ssh/id_ed25519"
        );
        let abs_keys = profile(serde_json::json!({"read": ["/home/u/.aws"]}));
        assert!(abs_keys.widens(&s, home(), ws()).is_some());
        let hooks = profile(serde_json::json!({"write": [".git/hooks"]}));
        assert_eq!(hooks.widens(&s, home(), ws()).unwrap(), "writes .git/hooks");
        let tasks = profile(serde_json::json!({"write": [".vscode"]}));
        assert!(tasks.widens(&s, home(), ws()).is_some());
        let caches = profile(serde_json::json!({"write": ["~/.cache/x"]}));
        assert!(
            caches.widens(&s, home(), ws()).is_some(),
            "standard writes no shared cache"
        );
        let outside = profile(serde_json::json!({"write": ["/tmp/x"]}));
        assert!(outside.widens(&s, home(), ws()).is_some());
        let home_itself = profile(serde_json::json!({"read": ["~"]}));
        assert!(
            home_itself.widens(&s, home(), ws()).is_some(),
            "~ holds ~/.ssh"
        );
    }

    #[test]
    fn hosts_and_ports_narrow_and_widen() {
        let gh = profile(
            serde_json::json!({"network": {"outbound": {"allow_host": ["api.github.com"], "allow_port": [443]}}}),
        );
        let any_gh =
            profile(serde_json::json!({"network": {"outbound": {"allow_host": ["*.github.com"]}}}));
        let n = Sandbox::builtin("none").unwrap();
        assert_eq!(gh.widens(&any_gh, home(), ws()), None);
        assert_eq!(
            any_gh.widens(&gh, home(), ws()).unwrap(),
            "connects to *.github.com"
        );
        assert!(
            gh.widens(&n, home(), ws())
                .unwrap()
                .contains("api.github.com")
        );
        let all =
            profile(serde_json::json!({"network": {"outbound": {"insecure_allow_all": true}}}));
        assert_eq!(all.network, Network::Unrestricted { ports: vec![] });
        assert_eq!(gh.widens(&all, home(), ws()), None);
        let gh_any_port = profile(
            serde_json::json!({"network": {"outbound": {"allow_host": ["api.github.com"]}}}),
        );
        assert_eq!(
            gh_any_port.widens(&gh, home(), ws()).unwrap(),
            "connects on any port"
        );
    }

    #[test]
    fn host_patterns_match_subdomains_only() {
        assert!(host_matches("*.example.com", "api.example.com"));
        assert!(host_matches("*.example.com", "a.b.example.com"));
        assert!(!host_matches("*.example.com", "example.com"));
        assert!(!host_matches("*.example.com", "evilexample.com"));
        assert!(host_matches("API.github.com", "api.GITHUB.com"));
        assert!(!host_matches("api.github.com", "api.github.com.evil"));
    }

    #[test]
    fn invalid_profiles_say_what_to_write() {
        let p: PermissionProfile = serde_json::from_value(serde_json::json!({
            "read": ["", "~bob/x"], "privileged": true,
            "network": {"outbound": {"allow_host": ["https://api.github.com/x", "*", "bad host"], "allow_port": [0]}}
        }))
        .unwrap();
        let problems = check_profile(&p);
        let at: Vec<&str> = problems.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            at,
            [
                "/read/0",
                "/read/1",
                "/privileged",
                "/network/outbound/allow_host/0",
                "/network/outbound/allow_host/1",
                "/network/outbound/allow_host/2",
                "/network/outbound/allow_port/0"
            ]
        );
        assert!(
            problems[3]
                .1
                .contains("write the host only (\"api.github.com\")")
        );
    }

    #[test]
    fn the_workspace_cannot_widen_its_own_sandbox_unless_approval_gated() {
        let policy = SandboxPolicy::default();
        let off = SandboxField::Name("off".into());
        let r = policy.resolve(Some(&off), true, false, home(), ws());
        let Resolved::Profile { sandbox, note, .. } = r else {
            panic!()
        };
        assert_eq!(sandbox, Sandbox::standard());
        assert!(note.unwrap().contains("may only narrow"));
        // From the user's own settings, or a gated file, it is what was asked.
        for (workspace_file, gated) in [(false, false), (true, true)] {
            let Resolved::Profile { sandbox, note, .. } =
                policy.resolve(Some(&off), workspace_file, gated, home(), ws())
            else {
                panic!()
            };
            assert!(sandbox.is_off() && note.is_none());
        }
        // Narrowing from the workspace is fine.
        let none = SandboxField::Name("none".into());
        let Resolved::Profile { sandbox, note, .. } =
            policy.resolve(Some(&none), true, false, home(), ws())
        else {
            panic!()
        };
        assert_eq!((sandbox.profile.as_str(), note), ("none", None));
    }

    #[test]
    fn unknown_names_suggest_the_nearest() {
        let policy = SandboxPolicy::default();
        let r = policy.resolve(
            Some(&SandboxField::Name("nnoe".into())),
            false,
            false,
            home(),
            ws(),
        );
        let Resolved::Unknown(message) = r else {
            panic!()
        };
        assert!(message.contains("did you mean \"none\""), "{message}");
    }
}

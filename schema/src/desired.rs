//! Desired state: every loaded source merged into one view — which servers
//! exist, with which spec, from which source, under which policy.
//!
//! Precedence (later wins, by server name, whole entries):
//! MCP: extensions < system defaults < user settings < `.mcp.json` <
//! workspace settings < system settings < `--mcp-config`.
//! LSP: extensions < workspace `.lsp.json`.
//! Policy keys merge as Qwen Code merges them, in settings-layer order
//! (system defaults < user < workspace < system): `mcp.allowed`,
//! `mcp.excluded` (and their `lsp.*` pair) are the union of every layer's
//! list; other keys, later wins. The trust-deciding keys
//! (`security.folderTrust.enabled`, `lsp.requireTrustedWorkspace`) are read
//! only from layers the workspace does not control — an untrusted workspace
//! must not be able to trust itself — and an untrusted workspace's settings
//! layer is dropped whole (its servers too), as in Qwen Code.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::formats::{ApprovalRecord, SandboxApproval, TrustedFoldersFile};
use crate::glob;
use crate::load::{Content, DroppedSpec, ExtensionContent, ParsedSource, SettingsContent};
use crate::resource::{LspServerSpec, McpServerSpec, SourceKind};
use crate::sandbox::{Resolved, SandboxPolicy};
use crate::secrets;
use crate::trust;

/// Every source of one workspace, as last loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceSet {
    pub system_defaults: ParsedSource,
    pub user_settings: ParsedSource,
    pub workspace_settings: ParsedSource,
    pub system_settings: ParsedSource,
    pub mcp_json: ParsedSource,
    pub lsp_json: ParsedSource,
    /// Sorted by extension directory.
    pub extensions: Vec<ParsedSource>,
    /// In command-line order.
    pub cli_mcp: Vec<ParsedSource>,
    pub trusted_folders: ParsedSource,
    pub approvals: ParsedSource,
    pub sandbox_approvals: ParsedSource,
}

impl SourceSet {
    /// Every source: the settings layers (system defaults, user, workspace,
    /// system), `.mcp.json`, `.lsp.json`, the extensions, the `--mcp-config`
    /// values, then the trusted-folders and approvals files. This order is
    /// for listing; precedence is in the module docs.
    pub fn iter(&self) -> impl Iterator<Item = &ParsedSource> {
        [
            &self.system_defaults,
            &self.user_settings,
            &self.workspace_settings,
            &self.system_settings,
            &self.mcp_json,
            &self.lsp_json,
        ]
        .into_iter()
        .chain(self.extensions.iter())
        .chain(self.cli_mcp.iter())
        .chain([
            &self.trusted_folders,
            &self.approvals,
            &self.sandbox_approvals,
        ])
    }
}

/// Command-line inputs that bound admission for the controller's lifetime,
/// and the one fact of its environment the sandbox compares paths with.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CliOptions {
    /// The user's home directory (`~` in sandbox profiles); `None` in pure
    /// tests, where `~` paths compare as written.
    pub home: Option<PathBuf>,
    /// `--allowed-mcp-server-names`: an immutable upper bound.
    pub allowed_mcp: Option<Vec<String>>,
    /// `--allowed-lsp-server-names`: an immutable upper bound.
    pub allowed_lsp: Option<Vec<String>>,
    /// False with `--no-lsp`.
    pub lsp_enabled: bool,
}

/// An allow-list: the settings list bounded by the command-line list.
/// Absent = allow all; `[]` = deny all; both present = intersection.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AllowList {
    pub settings: Option<Vec<String>>,
    pub cli: Option<Vec<String>>,
}

impl AllowList {
    pub fn allows(&self, name: &str) -> bool {
        self.settings
            .as_deref()
            .is_none_or(|l| glob::matches_any(l, name))
            && self
                .cli
                .as_deref()
                .is_none_or(|l| glob::matches_any(l, name))
    }
}

/// The bounds of `mcp.toolIdleTimeoutMs`.
pub const TOOL_IDLE_TIMEOUT_MS: std::ops::RangeInclusive<u64> = 10_000..=3_600_000;
/// `mcp.toolIdleTimeoutMs` when neither settings nor the environment set it.
pub const DEFAULT_TOOL_IDLE_TIMEOUT_MS: u64 = 300_000;

/// `ms` taken into [`TOOL_IDLE_TIMEOUT_MS`].
pub fn clamp_tool_idle_timeout_ms(ms: u64) -> u64 {
    ms.clamp(*TOOL_IDLE_TIMEOUT_MS.start(), *TOOL_IDLE_TIMEOUT_MS.end())
}

/// The policy in force (merged settings keys plus trust).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Policy {
    pub folder_trust_enabled: bool,
    pub trusted: bool,
    pub mcp_allowed: AllowList,
    pub mcp_excluded: Vec<String>,
    /// Restart-only; compared by the controller, never applied live.
    pub mcp_server_command: Option<String>,
    /// `mcp.toolIdleTimeoutMs` of the last layer that sets it (clamped).
    pub mcp_tool_idle_timeout_ms: Option<u64>,
    pub lsp_require_trusted_workspace: bool,
    pub lsp_allowed: AllowList,
    pub lsp_excluded: Vec<String>,
    /// `steward.sandbox`, from the layers the workspace does not control.
    pub sandbox: SandboxPolicy,
    /// `steward.secrets.requireReferences` of any layer: literal credentials
    /// in the workspace's files make their entries invalid.
    pub secrets_require_references: bool,
}

impl Policy {
    /// The idle timeout of a forwarded tool call, as Qwen Code picks it:
    /// the settings' value (within [`TOOL_IDLE_TIMEOUT_MS`]), else `env`
    /// (`QWEN_CODE_MCP_TOOL_IDLE_TIMEOUT_MS`, read by the caller, taken as
    /// is; 0 turns it off: `None`), else the default.
    pub fn tool_idle_timeout(&self, env: Option<u64>) -> Option<std::time::Duration> {
        let ms = match (self.mcp_tool_idle_timeout_ms, env) {
            (Some(ms), _) => clamp_tool_idle_timeout_ms(ms),
            (None, Some(ms)) => ms,
            (None, None) => DEFAULT_TOOL_IDLE_TIMEOUT_MS,
        };
        (ms > 0).then(|| std::time::Duration::from_millis(ms))
    }
}

/// A desired MCP server and the source whose definition won.
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredMcp {
    pub source: SourceKind,
    /// Shared with the source it came from (a snapshot copies pointers).
    pub spec: Arc<McpServerSpec>,
}

/// A desired language server and the source whose definition won.
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredLsp {
    pub source: SourceKind,
    pub spec: Arc<LspServerSpec>,
}

/// A server entry that produced no spec (and that no other source defines):
/// it has a row in status, `Failed` with reason `InvalidSpec`.
#[derive(Debug, Clone, PartialEq)]
pub struct InvalidEntry {
    pub source: SourceKind,
    /// A best-effort spec (what could be read of the entry).
    pub spec: DroppedSpec,
    /// Why, one `path:line:col: message` per line.
    pub message: String,
}

/// The merged desired state of one workspace.
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredState {
    pub workspace: PathBuf,
    pub policy: Policy,
    pub lsp_enabled: bool,
    /// Every configured MCP server, admitted or not (the merged map).
    pub mcp: BTreeMap<String, DesiredMcp>,
    /// Every configured language server, admitted or not.
    pub lsp: BTreeMap<String, DesiredLsp>,
    /// This workspace's approval records, by server name.
    pub approvals: BTreeMap<String, ApprovalRecord>,
    /// The profile each approval of this workspace was given for.
    pub sandbox_approvals: BTreeMap<String, SandboxApproval>,
    /// The user's home directory (`~` of sandbox profiles).
    pub home: Option<PathBuf>,
    /// Entries of the sources in force that produced no spec, by name (MCP
    /// and LSP apart), unless a valid definition of the name exists.
    pub invalid_mcp: BTreeMap<String, InvalidEntry>,
    pub invalid_lsp: BTreeMap<String, InvalidEntry>,
}

/// The extensions active in this workspace, in directory order.
fn active_extensions(sources: &SourceSet) -> impl Iterator<Item = &ExtensionContent> {
    sources.extensions.iter().filter_map(|e| match &e.content {
        Content::Extension(c) if !c.inactive => Some(c),
        _ => None,
    })
}

fn settings_of(source: &ParsedSource) -> Option<&SettingsContent> {
    match &source.content {
        Content::Settings(s) => Some(s),
        _ => None,
    }
}

/// An allow-list merged as Qwen Code merges `mcp.allowed`: absent until a
/// layer has one, then every layer's names (empty names dropped).
fn concat(into: &mut Option<Vec<String>>, more: &Option<Vec<String>>) {
    if let Some(more) = more {
        let list = into.get_or_insert_with(Vec::new);
        for item in more {
            if !item.is_empty() && !list.contains(item) {
                list.push(item.clone());
            }
        }
    }
}

fn union(into: &mut Vec<String>, more: &Option<Vec<String>>) {
    for item in more.iter().flatten() {
        if !into.contains(item) {
            into.push(item.clone());
        }
    }
}

/// Whether a file of `kind` is under the workspace's control (anything that
/// can write the workspace can write it).
pub fn workspace_controlled(kind: SourceKind) -> bool {
    matches!(
        kind,
        SourceKind::ProjectMcpJson | SourceKind::WorkspaceSettings | SourceKind::LspJson
    )
}

/// `standard` with nothing to say: what a spec holds when it holds nothing
/// (its fingerprint stays what it was before profiles existed).
fn is_plain_standard(resolved: &Resolved) -> bool {
    matches!(resolved, Resolved::Profile { sandbox, note: None, require: false } if sandbox.is_standard())
}

/// `config_hash` (of an entry's fields) as it also covers the profile in
/// force, `resolved`: a server whose profile changes (its entry, a named
/// profile, the default) restarts. Unchanged for plain `standard`. The
/// desired state's `configHash` is this, and so is the fingerprint the
/// runtime takes of a spec with its secrets resolved.
pub fn hash_in_force(config_hash: &str, resolved: Option<&Resolved>) -> String {
    match resolved {
        Some(r) if !is_plain_standard(r) => with_sandbox(config_hash, r),
        _ => config_hash.to_owned(),
    }
}

fn with_sandbox(config_hash: &str, resolved: &Resolved) -> String {
    let sandbox = match resolved {
        Resolved::Profile {
            sandbox, require, ..
        } => serde_json::json!({"profile": sandbox, "require": require}),
        Resolved::Unknown(why) => serde_json::Value::String(why.clone()),
    };
    crate::canonical::hash_value(
        &serde_json::json!({"configHash": config_hash, "sandbox": sandbox}),
    )
}

/// Merge `sources` into the desired state of `workspace` (canonical).
/// `resolve` canonicalizes trust-rule paths (identity in pure tests).
pub fn desired_state(
    sources: &SourceSet,
    workspace: &Path,
    cli: &CliOptions,
    resolve: &dyn Fn(&Path) -> PathBuf,
) -> DesiredState {
    // Settings layers in precedence order. When the workspace settings file
    // is the user settings file (workspace = home), it is not a second layer.
    let same_file = sources.workspace_settings.path == sources.user_settings.path;
    let layers: Vec<&ParsedSource> = [
        &sources.system_defaults,
        &sources.user_settings,
        &sources.workspace_settings,
        &sources.system_settings,
    ]
    .into_iter()
    .filter(|s| !(same_file && s.kind == SourceKind::WorkspaceSettings))
    .collect();

    let mut policy = Policy {
        lsp_require_trusted_workspace: true,
        ..Policy::default()
    };
    // Trust is decided by the layers the workspace does not control.
    for layer in &layers {
        let Some(s) = settings_of(layer) else {
            continue;
        };
        // Only stricter: any layer may turn it on, none off.
        policy.secrets_require_references |= s.secrets_require_references == Some(true);
        if layer.kind != SourceKind::WorkspaceSettings {
            if let Some(v) = s.folder_trust_enabled {
                policy.folder_trust_enabled = v;
            }
            if let Some(v) = s.lsp_require_trusted_workspace {
                policy.lsp_require_trusted_workspace = v;
            }
            // Nor can it widen its own sandbox.
            if let Some(sandbox) = &s.sandbox {
                if sandbox.default.is_some() {
                    policy.sandbox.default = sandbox.default.clone();
                }
                if let Some(v) = sandbox.require {
                    policy.sandbox.require = v;
                }
                for (name, profile) in sandbox.profiles.iter().flatten() {
                    policy
                        .sandbox
                        .profiles
                        .insert(name.clone(), profile.clone());
                }
            }
        }
    }
    let empty_rules = TrustedFoldersFile::new();
    let rules = match &sources.trusted_folders.content {
        Content::TrustedFolders(r) => r,
        _ => &empty_rules,
    };
    policy.trusted = trust::is_trusted(workspace, policy.folder_trust_enabled, rules, resolve);
    // An untrusted workspace's settings layer is dropped whole, as in Qwen Code.
    let layers: Vec<&ParsedSource> = layers
        .into_iter()
        .filter(|l| policy.trusted || l.kind != SourceKind::WorkspaceSettings)
        .collect();
    for layer in &layers {
        let Some(s) = settings_of(layer) else {
            continue;
        };
        // Qwen Code concatenates the lists of every layer (both of them).
        concat(&mut policy.mcp_allowed.settings, &s.mcp_allowed);
        union(&mut policy.mcp_excluded, &s.mcp_excluded);
        if s.mcp_server_command.is_some() {
            policy.mcp_server_command = s.mcp_server_command.clone();
        }
        if s.mcp_tool_idle_timeout_ms.is_some() {
            policy.mcp_tool_idle_timeout_ms = s.mcp_tool_idle_timeout_ms;
        }
        concat(&mut policy.lsp_allowed.settings, &s.lsp_allowed);
        union(&mut policy.lsp_excluded, &s.lsp_excluded);
    }
    policy.mcp_allowed.cli = cli.allowed_mcp.clone();
    policy.lsp_allowed.cli = cli.allowed_lsp.clone();

    // MCP servers, lowest precedence first; later inserts replace whole entries.
    let mut mcp: BTreeMap<String, DesiredMcp> = BTreeMap::new();
    // Among active extensions the first (by directory order) keeps a name;
    // a server the user disabled for its extension is `disabled`.
    for e in active_extensions(sources) {
        for (name, spec) in e.mcp_servers.iter() {
            mcp.entry(name.clone()).or_insert_with(|| DesiredMcp {
                source: SourceKind::Extension,
                spec: if e.disabled_mcp_servers.contains(name) {
                    Arc::new(McpServerSpec {
                        disabled: Some(true),
                        ..McpServerSpec::clone(spec)
                    })
                } else {
                    spec.clone()
                },
            });
        }
    }
    let put = |mcp: &mut BTreeMap<String, DesiredMcp>,
               source: SourceKind,
               servers: &BTreeMap<String, Arc<McpServerSpec>>| {
        for (name, spec) in servers {
            mcp.insert(
                name.clone(),
                DesiredMcp {
                    source,
                    spec: spec.clone(),
                },
            );
        }
    };
    let settings_servers = |kind: SourceKind| {
        layers
            .iter()
            .filter(|l| l.kind == kind)
            .filter_map(|l| settings_of(l))
            .map(|s| &s.mcp_servers)
            .next()
    };
    for kind in [SourceKind::SystemDefaults, SourceKind::UserSettings] {
        if let Some(servers) = settings_servers(kind) {
            put(&mut mcp, kind, servers);
        }
    }
    if let Content::McpServers(servers) = &sources.mcp_json.content {
        put(&mut mcp, SourceKind::ProjectMcpJson, servers);
    }
    for kind in [SourceKind::WorkspaceSettings, SourceKind::SystemSettings] {
        if let Some(servers) = settings_servers(kind) {
            put(&mut mcp, kind, servers);
        }
    }
    for cli_source in &sources.cli_mcp {
        if let Content::McpServers(servers) = &cli_source.content {
            put(&mut mcp, SourceKind::CliMcpConfig, servers);
        }
    }

    // LSP servers: extensions (first keeps a name), then the workspace file.
    let mut lsp: BTreeMap<String, DesiredLsp> = BTreeMap::new();
    for e in active_extensions(sources) {
        for (name, spec) in e.lsp_servers.iter() {
            lsp.entry(name.clone()).or_insert_with(|| DesiredLsp {
                source: SourceKind::Extension,
                spec: spec.clone(),
            });
        }
    }
    if let Content::LspServers(servers) = &sources.lsp_json.content {
        for (name, spec) in servers.iter() {
            lsp.insert(
                name.clone(),
                DesiredLsp {
                    source: SourceKind::LspJson,
                    spec: spec.clone(),
                },
            );
        }
    }

    let sandbox_approvals = match &sources.sandbox_approvals.content {
        Content::SandboxApprovals(file) => file
            .get(workspace.to_string_lossy().as_ref())
            .cloned()
            .unwrap_or_default(),
        _ => BTreeMap::new(),
    };
    let approvals = match &sources.approvals.content {
        Content::Approvals(file) => file
            .get(workspace.to_string_lossy().as_ref())
            .cloned()
            .unwrap_or_default(),
        _ => BTreeMap::new(),
    };

    // Entries without a spec, in precedence order (a later source's wins),
    // when no source defines the name validly.
    let mut invalid_mcp = BTreeMap::new();
    let mut invalid_lsp = BTreeMap::new();
    let in_force = sources
        .extensions
        .iter()
        .filter(|e| matches!(&e.content, Content::Extension(c) if !c.inactive))
        .chain(layers.iter().copied().filter(|l| {
            matches!(
                l.kind,
                SourceKind::SystemDefaults | SourceKind::UserSettings
            )
        }))
        .chain([&sources.mcp_json, &sources.lsp_json])
        .chain(layers.iter().copied().filter(|l| {
            matches!(
                l.kind,
                SourceKind::WorkspaceSettings | SourceKind::SystemSettings
            )
        }))
        .chain(sources.cli_mcp.iter());
    for source in in_force {
        for dropped in &source.dropped {
            let entry = InvalidEntry {
                source: source.kind,
                spec: dropped.spec.clone(),
                message: dropped.message.clone(),
            };
            match &dropped.spec {
                DroppedSpec::Mcp(_) if !mcp.contains_key(&dropped.name) => {
                    invalid_mcp.insert(dropped.name.clone(), entry);
                }
                DroppedSpec::Lsp(_) if !lsp.contains_key(&dropped.name) => {
                    invalid_lsp.insert(dropped.name.clone(), entry);
                }
                _ => {}
            }
        }
    }

    if policy.secrets_require_references {
        require_references(
            sources,
            &mut mcp,
            &mut lsp,
            &mut invalid_mcp,
            &mut invalid_lsp,
        );
    }

    let home = cli.home.as_deref().unwrap_or(Path::new("~"));
    for (name, d) in mcp.iter_mut() {
        let resolved = policy.sandbox.resolve(
            d.spec.sandbox.as_ref(),
            workspace_controlled(d.source),
            d.spec.scope.is_gated(),
            home,
            workspace,
        );
        if let Resolved::Unknown(why) = &resolved {
            let message = unknown_profile(sources, d.source, name, why);
            invalid_mcp.insert(
                name.clone(),
                InvalidEntry {
                    source: d.source,
                    spec: DroppedSpec::Mcp(d.spec.clone()),
                    message,
                },
            );
        } else if !is_plain_standard(&resolved) {
            let mut spec = McpServerSpec::clone(&d.spec);
            spec.config_hash = with_sandbox(&spec.config_hash, &resolved);
            spec.resolved_sandbox = Some(resolved);
            d.spec = Arc::new(spec);
        }
    }
    for (name, d) in lsp.iter_mut() {
        let resolved = policy.sandbox.resolve(
            d.spec.sandbox.as_ref(),
            workspace_controlled(d.source),
            false,
            home,
            workspace,
        );
        if let Resolved::Unknown(why) = &resolved {
            let message = unknown_profile(sources, d.source, name, why);
            invalid_lsp.insert(
                name.clone(),
                InvalidEntry {
                    source: d.source,
                    spec: DroppedSpec::Lsp(d.spec.clone()),
                    message,
                },
            );
        } else if !is_plain_standard(&resolved) {
            let mut spec = LspServerSpec::clone(&d.spec);
            spec.config_hash = with_sandbox(&spec.config_hash, &resolved);
            spec.resolved_sandbox = Some(resolved);
            d.spec = Arc::new(spec);
        }
    }

    // A profile that does not exist is an invalid entry (never spawned,
    // never retried), not a start that fails.
    mcp.retain(|name, _| !invalid_mcp.contains_key(name));
    lsp.retain(|name, _| !invalid_lsp.contains_key(name));

    DesiredState {
        workspace: workspace.to_path_buf(),
        policy,
        lsp_enabled: cli.lsp_enabled,
        mcp,
        lsp,
        approvals,
        sandbox_approvals,
        home: cli.home.clone(),
        invalid_mcp,
        invalid_lsp,
    }
}

/// `steward.secrets.requireReferences`: an entry of a workspace file
/// holding a literal credential is invalid (its row says what to move).
/// The message of an entry whose profile does not exist, at the place of
/// its `sandbox` key (or of `steward.sandbox.default`).
fn unknown_profile(sources: &SourceSet, kind: SourceKind, name: &str, why: &str) -> String {
    let own = sources
        .iter()
        .filter(|s| s.kind == kind)
        .find_map(|s| s.sandbox_keys.get(name));
    let default = || {
        sources
            .iter()
            .filter(|s| {
                matches!(
                    s.kind,
                    SourceKind::UserSettings
                        | SourceKind::SystemSettings
                        | SourceKind::SystemDefaults
                )
            })
            .filter_map(|s| s.sandbox_keys.get(""))
            .last()
    };
    match own.or_else(default) {
        Some(at) => crate::diagnostic::Diagnostic {
            message: why.to_owned(),
            ..at.clone()
        }
        .to_string(),
        None => why.to_owned(),
    }
}

fn require_references(
    sources: &SourceSet,
    mcp: &mut BTreeMap<String, DesiredMcp>,
    lsp: &mut BTreeMap<String, DesiredLsp>,
    invalid_mcp: &mut BTreeMap<String, InvalidEntry>,
    invalid_lsp: &mut BTreeMap<String, InvalidEntry>,
) {
    let message = |path: &Path, name: &str, written: &crate::resource::AsWritten| {
        let found = secrets::literal_credentials_written(written);
        (!found.is_empty()).then(|| {
            found
                .iter()
                .map(|f| {
                    format!(
                        "{}: steward.secrets.requireReferences is on and {}",
                        path.display(),
                        secrets::literal_credential_message(path, name, f)
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
    };
    let path_of = |kind: SourceKind| match kind {
        SourceKind::ProjectMcpJson => Some(&sources.mcp_json.path),
        SourceKind::WorkspaceSettings => Some(&sources.workspace_settings.path),
        SourceKind::LspJson => Some(&sources.lsp_json.path),
        _ => None,
    };
    mcp.retain(|name, d| {
        let Some(text) = path_of(d.source).and_then(|p| message(p, name, &d.spec.as_written))
        else {
            return true;
        };
        invalid_mcp.insert(
            name.clone(),
            InvalidEntry {
                source: d.source,
                spec: DroppedSpec::Mcp(d.spec.clone()),
                message: text,
            },
        );
        false
    });
    lsp.retain(|name, d| {
        let Some(text) = path_of(d.source).and_then(|p| message(p, name, &d.spec.as_written))
        else {
            return true;
        };
        invalid_lsp.insert(
            name.clone(),
            InvalidEntry {
                source: d.source,
                spec: DroppedSpec::Lsp(d.spec.clone()),
                message: text,
            },
        );
        false
    });
}

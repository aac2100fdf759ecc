//! The normalized resources (`McpServer`, `LspServer`), their status
//! subresource and the `WorkspaceStatus` document — the public contract of
//! `steward status`. Field names here are the contract.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Diagnostic;
use crate::formats::LspTransport;
use crate::sandbox::{Resolved, Sandbox, SandboxField};

mod dev;

pub use dev::{BuildResult, DevSpec, DevStatus, LastBuild};

/// API group and version of every resource.
pub const API_VERSION: &str = "steward.dev/v1alpha1";

/// Which source a resource or file comes from.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum SourceKind {
    /// `$QWEN_CODE_SYSTEM_DEFAULTS_PATH` or `/etc/qwen-code/system-defaults.json`.
    SystemDefaults,
    /// `HOME_DIR/settings.json`.
    UserSettings,
    /// `WS/.qwen/settings.json`.
    WorkspaceSettings,
    /// `$QWEN_CODE_SYSTEM_SETTINGS_PATH` or `/etc/qwen-code/settings.json`.
    SystemSettings,
    /// `WS/.mcp.json`.
    ProjectMcpJson,
    /// `WS/.lsp.json`.
    LspJson,
    /// `HOME_DIR/extensions/*/qwen-extension.json` (and files it references).
    Extension,
    /// `--mcp-config`.
    CliMcpConfig,
    /// `trustedFolders.json`.
    TrustedFolders,
    /// `mcpApprovals.json`.
    Approvals,
    /// `HOME_DIR/steward/sandbox-approvals.json`: the permission profile
    /// each approval was given for.
    SandboxApprovals,
}

impl SourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::SystemDefaults => "SystemDefaults",
            SourceKind::UserSettings => "UserSettings",
            SourceKind::WorkspaceSettings => "WorkspaceSettings",
            SourceKind::SystemSettings => "SystemSettings",
            SourceKind::ProjectMcpJson => "ProjectMcpJson",
            SourceKind::LspJson => "LspJson",
            SourceKind::Extension => "Extension",
            SourceKind::CliMcpConfig => "CliMcpConfig",
            SourceKind::TrustedFolders => "TrustedFolders",
            SourceKind::Approvals => "Approvals",
            SourceKind::SandboxApprovals => "SandboxApprovals",
        }
    }

    /// Whether this source is a settings.json layer.
    pub fn is_settings(self) -> bool {
        matches!(
            self,
            SourceKind::SystemDefaults
                | SourceKind::UserSettings
                | SourceKind::WorkspaceSettings
                | SourceKind::SystemSettings
        )
    }
}

impl fmt::Display for SourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a server's winning definition came from: the source layer whose entry won the merge.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    #[default]
    User,
    Project,
    Workspace,
    System,
    Extension,
    Cli,
}

impl Scope {
    /// Scopes whose servers need an approval record before they run.
    pub fn is_gated(self) -> bool {
        matches!(self, Scope::Project | Scope::Workspace)
    }
}

/// How Steward reaches an MCP server.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum McpTransport {
    #[default]
    Stdio,
    Http,
    Sse,
}

/// `metadata` of a resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    /// The server's name (its key in the source).
    pub name: String,
    /// The source whose definition won the merge.
    pub source: SourceKind,
    /// Increases each time the spec's `configHash` changes (starts at 1).
    pub generation: u64,
}

/// Desired state of an MCP server (normalized; strings already expanded).
// `Default` is an empty stdio entry of the user's scope: a base for specs
// built field by field (tests, fixtures); not part of the JSON Schema.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerSpec {
    /// `stdio`, `http` (streamable HTTP) or `sse`.
    pub transport: McpTransport,
    /// Which layer defined it: `user`, `project`, `workspace`, `system`, `extension`, `cli`.
    pub scope: Scope,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// SSE endpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Streamable HTTP endpoint (Claude's `type: "http"` + `url` lands here).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// Request timeout in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trust: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub include_tools: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exclude_tools: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oauth: Option<serde_json::Map<String, Value>>,
    /// The permission profile as written (`status.sandbox` shows the one in
    /// force).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxField>,
    /// The profile in force, resolved with the settings by the desired
    /// state (part of `configHash` unless it is `standard`); `None` outside
    /// a desired state: `standard`.
    #[serde(skip)]
    #[schemars(skip)]
    pub resolved_sandbox: Option<Resolved>,
    /// The fields of Qwen Code's entry format beyond the ones above.
    #[serde(flatten)]
    pub qwen: QwenMcpFields,
    /// The extension that provides it (scope `extension`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extension_name: Option<String>,
    /// Developing the server: reloaded when its source changes. Not part of
    /// the connection fingerprint (editing it re-arms the watch, restarts
    /// nothing); part of the approval, as any field of the entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dev: Option<DevSpec>,
    /// Connection fingerprint: a change restarts the connection.
    pub config_hash: String,
    /// What an approval binds to: Qwen Code's hash of the entry as Qwen Code
    /// holds it (see `steward_schema::qwen`), so decisions are shared.
    pub approval_hash: String,
    /// The expanded fields as written in the source, for display without
    /// secrets ([`crate::redact`]). Not hashed, never serialized.
    #[serde(skip)]
    #[schemars(skip)]
    pub as_written: AsWritten,
}

/// Qwen Code's default MCP request `timeout`, in milliseconds.
pub const DEFAULT_MCP_TIMEOUT_MS: u64 = 600_000;

/// The profile in force of a spec whose [`McpServerSpec::resolved_sandbox`]
/// is `resolved`.
pub fn sandbox_in_force(resolved: &Option<Resolved>) -> Resolved {
    resolved.clone().unwrap_or(Resolved::Profile {
        sandbox: Sandbox::standard(),
        note: None,
        require: false,
    })
}

impl McpServerSpec {
    /// A tool call's timeout when the entry sets none (or 0 or less): ten
    /// minutes, as in Qwen Code.
    pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_millis(DEFAULT_MCP_TIMEOUT_MS);

    /// How long one forwarded call may take, and how long a restart for a
    /// new configuration waits for the calls in flight.
    pub fn call_timeout(&self) -> Duration {
        self.timeout
            .filter(|ms| *ms > 0)
            .map_or(Self::DEFAULT_CALL_TIMEOUT, Duration::from_millis)
    }

    /// `includeTools` / `excludeTools`: the tools of `tools` an agent is
    /// offered, in the server's order. No include list allows every tool
    /// (`[]` allows none); exclude wins; entries are exact tool names.
    pub fn exposed_tools<'a>(&self, tools: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        tools
            .into_iter()
            .filter(|tool| self.exposes_tool(tool))
            .map(str::to_owned)
            .collect()
    }

    /// Whether the tool named `tool` is offered (see [`Self::exposed_tools`]).
    pub fn exposes_tool(&self, tool: &str) -> bool {
        let listed =
            |list: &Option<Vec<String>>| list.as_ref().map(|l| l.iter().any(|t| t == tool));
        listed(&self.include_tools).unwrap_or(true) && !listed(&self.exclude_tools).unwrap_or(false)
    }
}

/// The fields of a spec that expand `$VAR`, as written in the source (the
/// spec holds them expanded). `status` shows these instead of the expanded
/// values, which may hold secrets ([`crate::redact`]); `None` where the
/// source did not set the field (or the spec was not built from a source).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AsWritten {
    pub args: Option<Vec<String>>,
    pub env: Option<BTreeMap<String, String>>,
    /// The `url` of an SSE server.
    pub url: Option<String>,
    /// The URL a streamable HTTP server was given (`httpUrl`, or `url` with `type: "http"`).
    pub http_url: Option<String>,
    pub headers: Option<BTreeMap<String, String>>,
    /// `http_url` was written as `url` (with `type: "http"`), not `httpUrl`.
    pub http_url_from_url: bool,
}

/// Fields of Qwen Code's MCP entry format that Steward accepts and passes
/// on (flattened into [`McpServerSpec`]).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QwenMcpFields {
    /// `dynamic_discovery`, `google_credentials` or `service_account_impersonation`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_provider_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_audience: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_service_account: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub always_load_tools: Option<bool>,
    /// `auto`: probe the 2026-07-28 protocol first (stdio servers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_negotiation: Option<String>,
    /// Bound on connecting and listing tools, in milliseconds (absent: 30000
    /// for stdio, 5000 for remote servers; Qwen Code's defaults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovery_timeout_ms: Option<u64>,
}

/// Where a tcp/socket language server listens (normalized).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LspSocket {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
    /// Absolute unix socket path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// Desired state of a language server (normalized, defaults applied).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LspServerSpec {
    /// `workspace` (`.lsp.json`) or `extension`.
    pub scope: Scope,
    /// Language ids it handles.
    pub languages: Vec<String>,
    pub transport: LspTransport,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub socket: Option<LspSocket>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initialization_options: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings: Option<Value>,
    /// Lowercase extension with its dot → language id.
    pub extension_to_language: BTreeMap<String, String>,
    /// Absolute path, inside the workspace.
    pub workspace_folder: String,
    pub root_uri: String,
    /// Milliseconds.
    pub startup_timeout: u64,
    /// Milliseconds.
    pub shutdown_timeout: u64,
    pub restart_on_crash: bool,
    pub max_restarts: u32,
    pub trust_required: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extension_name: Option<String>,
    /// Developing the server: restarted when its source changes (not part
    /// of `configHash`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dev: Option<DevSpec>,
    /// The permission profile as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxField>,
    /// The profile in force (see [`McpServerSpec::resolved_sandbox`]).
    #[serde(skip)]
    #[schemars(skip)]
    pub resolved_sandbox: Option<Resolved>,
    /// Hash of every field above except scope/extensionName/dev (and the
    /// name), and of the profile in force unless it is `standard`.
    pub config_hash: String,
    /// `args` and `env` as written in the source, for display without
    /// secrets ([`crate::redact`]). Not hashed, never serialized.
    #[serde(skip)]
    #[schemars(skip)]
    pub as_written: AsWritten,
}

/// Lifecycle phase.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum Phase {
    /// Admitted, waiting for a worker.
    Pending,
    Starting,
    Ready,
    Failed,
    /// Not admitted; `reason` says which gate.
    Blocked,
    Stopping,
    /// Admitted and not running, its catalog listed from the cache; the
    /// next call that needs it starts it (`--start lazy`, `--idle-stop`).
    /// `reason` says which: `NotStarted` or `IdleStopped`.
    Idle,
}

/// Why a server is not `Ready` (CamelCase; null when Ready).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Reason {
    // Blocked
    UntrustedWorkspace,
    Disabled,
    NotAllowed,
    Excluded,
    PendingApproval,
    Rejected,
    TrustRequired,
    StoppedByUser,
    /// An `mcpServers` entry that runs `steward mcp` itself: Steward never starts it.
    SelfReference,
    /// A `${secret:NAME}` it uses is not set (`steward secret set NAME`).
    SecretMissing,
    /// The Secret Service holding its secrets is locked or failing.
    SecretUnavailable,
    // Failed
    CommandNotFound,
    UnsafeCommand,
    StartFailed,
    StartupTimeout,
    Crashed,
    CrashLoopBackOff,
    MaxRestartsExceeded,
    /// An entry that could not be built (never silently dropped).
    InvalidSpec,
    /// An OAuth server without a usable stored token.
    AuthRequired,
    /// Its permission profile cannot be enforced: it names no profile, or
    /// `steward.sandbox.require` is set and the kernel lacks a feature.
    SandboxUnavailable,
    // Idle
    /// `--start lazy`: not started yet; the first call starts it.
    NotStarted,
    /// `--idle-stop`: stopped after no call used it for that long; the next
    /// call starts it again.
    IdleStopped,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::UntrustedWorkspace => "UntrustedWorkspace",
            Reason::Disabled => "Disabled",
            Reason::NotAllowed => "NotAllowed",
            Reason::Excluded => "Excluded",
            Reason::PendingApproval => "PendingApproval",
            Reason::Rejected => "Rejected",
            Reason::TrustRequired => "TrustRequired",
            Reason::StoppedByUser => "StoppedByUser",
            Reason::SelfReference => "SelfReference",
            Reason::SecretMissing => "SecretMissing",
            Reason::SecretUnavailable => "SecretUnavailable",
            Reason::CommandNotFound => "CommandNotFound",
            Reason::UnsafeCommand => "UnsafeCommand",
            Reason::StartFailed => "StartFailed",
            Reason::StartupTimeout => "StartupTimeout",
            Reason::Crashed => "Crashed",
            Reason::CrashLoopBackOff => "CrashLoopBackOff",
            Reason::MaxRestartsExceeded => "MaxRestartsExceeded",
            Reason::InvalidSpec => "InvalidSpec",
            Reason::AuthRequired => "AuthRequired",
            Reason::SandboxUnavailable => "SandboxUnavailable",
            Reason::NotStarted => "NotStarted",
            Reason::IdleStopped => "IdleStopped",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `True`, `False` or `Unknown` (Kubernetes convention).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

/// A Kubernetes-style condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// `Admitted`, `Ready`, `RestartRequired`, `ReloadFailed`…
    #[serde(rename = "type")]
    pub type_: String,
    pub status: ConditionStatus,
    pub reason: Option<String>,
    pub message: Option<String>,
    /// RFC 3339; changes only when `status` changes.
    pub last_transition_time: String,
}

/// Observed state of a server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerStatus {
    pub phase: Phase,
    pub reason: Option<Reason>,
    /// Human text; on a failure, ends with the server's last stderr lines.
    pub message: Option<String>,
    pub pid: Option<u32>,
    pub restarts: u32,
    pub observed_generation: Option<u64>,
    pub observed_hash: Option<String>,
    /// MCP: tool names after include/exclude filtering (the agent endpoint
    /// leaves out the quarantined ones, see `toolsQuarantined`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// MCP: prompt names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<Vec<String>>,
    /// MCP: the catalog the agent endpoint lists for it — from the live
    /// connection, or from the catalog cache while the server starts — and
    /// what its listed tools' definitions cost an agent's context
    /// (`steward tools` has them one by one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog: Option<CatalogStatus>,
    /// LSP: the server's capabilities from `initialize`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Value>,
    /// RFC 3339 time of the next retry while backing off.
    pub next_retry_at: Option<String>,
    /// RFC 3339 time the current process/connection became ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    pub conditions: Vec<Condition>,
    /// MCP: calls forwarded by the agent endpoint (`steward mcp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<CallCounts>,
    /// MCP: tools the agent endpoint does not list because their definition
    /// differs from the one pinned for this configuration, or that the
    /// server added without a configuration change (accept them with
    /// `steward approve NAME --tools`). `tools` leaves them out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools_quarantined: Vec<Quarantined>,
    /// MCP: prompts held back for the same reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prompts_quarantined: Vec<Quarantined>,
    /// A server with `dev`: its source watch, last build and reloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dev: Option<DevStatus>,
    /// The permission profile the process runs under and what this kernel
    /// enforces of it (a local server that runs; see product.md §9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxStatus>,
    /// On a failure, the server's last stderr lines, which `message` ends
    /// with: kept apart so that nothing reads them back out of the text.
    /// Not part of the document.
    #[serde(skip)]
    #[schemars(skip)]
    pub stderr_tail: Vec<String>,
}

/// How fully a server's permission profile is enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Enforcement {
    /// Everything the profile says.
    Full,
    /// Some of it: `missing` says what the kernel lacks.
    Partial,
    /// Nothing (no Landlock; or the profile is `off`).
    None,
}

/// Where a sandboxed server may connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum SandboxNetwork {
    Unrestricted,
    /// Only the profile's hosts, through Steward's egress proxy.
    Proxy,
    None,
}

/// `status.sandbox`: the profile a process runs under, as enforced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxStatus {
    /// `standard`, `none`, `network`, `off`, a custom profile's name, or
    /// `inline`.
    pub profile: String,
    pub enforcement: Enforcement,
    /// The Landlock ABI used (0: none).
    pub abi: u8,
    pub network: SandboxNetwork,
    /// Requests the egress proxy refused.
    #[serde(default)]
    pub egress_denied: u64,
    /// What the kernel cannot enforce of the profile.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// Why the profile is not the one the entry asks for, or what was added
    /// (a package runner's registry).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The hosts the egress proxy lets through (network `Proxy`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// What it may read (absolute paths; `/` for `standard`, whose
    /// credential stores and agents' state are never readable).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<String>,
    /// What it may write.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<String>,
    /// Its private home: where its caches, data and state go (`XDG_*_HOME`
    /// and the package runners' cache variables point there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home: Option<String>,
    /// The workspace's code-running paths pinned read-only for it (`.git`,
    /// `.vscode`, `.envrc`...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pinned: Vec<String>,
}

/// A tool or prompt held back because its definition changed since it was
/// pinned (trust on first use), and what changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Quarantined {
    /// The name the server gives it.
    pub name: String,
    /// What differs from the pinned definition, one change each
    /// (`description changed: +412 characters`, `input schema: new property
    /// `url``), or that it is new.
    pub changes: Vec<String>,
}

/// Calls the agent endpoint forwarded to one server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallCounts {
    pub total: u64,
    /// Calls that returned an error (a tool error or a protocol error).
    pub failed: u64,
    pub in_flight: u64,
}

/// Where a tool of the workspace stands with the agent endpoint
/// (`steward tools`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ToolState {
    /// Offered to agents.
    Listed,
    /// Hidden by the entry's `includeTools` / `excludeTools`.
    Filtered,
    /// Its definition changed since it was pinned (`steward approve NAME --tools`).
    Quarantined,
    /// Its server is not Ready: its tools are not known now.
    ServerNotReady,
}

/// One tool of the workspace and what its definition costs an agent's
/// context (`steward tools`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolRow {
    pub server: String,
    /// The name the server gives it (none for a server that is not Ready).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The name agents call it by (listed tools only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exposed: Option<String>,
    pub state: ToolState,
    /// Bytes of its definition as JSON (as listed to agents).
    pub bytes: u64,
    /// Estimated tokens: bytes / 4, rounded up.
    pub estimated_tokens: u64,
}

/// Where the catalog an MCP server is listed with comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum CatalogSource {
    /// Its live connection (or, while it restarts for a new configuration,
    /// the last one).
    #[default]
    Live,
    /// The catalog cache: what it offered the last time it ran this
    /// configuration. Listed while it starts; calls wait until it is Ready.
    Cached,
}

/// The catalog the agent endpoint lists for an MCP server: where it comes
/// from, and what its listed tools cost an agent's context.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CatalogStatus {
    /// `live` or `cached`.
    pub source: CatalogSource,
    /// Bytes of the listed tools' definitions as JSON.
    pub bytes: u64,
    /// Estimated tokens: bytes / 4, rounded up.
    pub estimated_tokens: u64,
}

impl CatalogStatus {
    pub fn new(source: CatalogSource, bytes: u64) -> CatalogStatus {
        CatalogStatus {
            source,
            bytes,
            estimated_tokens: estimated_tokens(bytes),
        }
    }
}

/// What `bytes` of definitions cost an agent's context, estimated: bytes / 4,
/// rounded up.
pub fn estimated_tokens(bytes: u64) -> u64 {
    bytes.div_ceil(4)
}

/// One client connected to the agent endpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GatewaySession {
    /// `stdio`, `unix` or `http`.
    pub transport: String,
    /// `direct` (every tool listed), `search` (`search_tools` and
    /// `call_tool`), `code` (`describe_tools` and `run_code`), or several
    /// joined by commas (`direct,search`, `direct,code`).
    pub expose: String,
    /// The longest tool or prompt name this client is given.
    pub max_name_len: u64,
    /// The one MCP server this client sees under its own names (`steward
    /// mcp --server NAME`, `/mcp?server=NAME`); absent: every server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
}

/// The agent endpoint (`steward mcp`, `--mcp-listen`) of a controller.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GatewayStatus {
    /// Connected clients, by transport (`stdio`, `unix`, `http`).
    pub clients: BTreeMap<String, u64>,
    /// Each connected client's view: transport, how tools are listed
    /// (`expose`) and the longest name it is given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sessions: Vec<GatewaySession>,
    /// The streamable-HTTP address (`--mcp-listen`), if any.
    pub listen: Option<String>,
    /// Tools offered to clients now (the `lsp` tool included).
    pub tools: u64,
    /// RFC 3339 time `notifications/tools/list_changed` (or the prompts or
    /// resources one) was last sent.
    pub last_list_changed: Option<String>,
    /// Resources or templates hidden because two servers list the same URI
    /// (the server first by name wins).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<String>,
}

impl ServerStatus {
    /// A status with only phase and reason set.
    pub fn new(phase: Phase, reason: Option<Reason>, message: Option<String>) -> Self {
        ServerStatus {
            phase,
            reason,
            message,
            pid: None,
            restarts: 0,
            observed_generation: None,
            observed_hash: None,
            tools: None,
            prompts: None,
            catalog: None,
            capabilities: None,
            next_retry_at: None,
            started_at: None,
            conditions: Vec::new(),
            calls: None,
            tools_quarantined: Vec::new(),
            prompts_quarantined: Vec::new(),
            dev: None,
            sandbox: None,
            stderr_tail: Vec::new(),
        }
    }
}

/// An `McpServer` resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(title = "McpServer")]
pub struct McpServer {
    pub api_version: String,
    pub metadata: Metadata,
    pub spec: Arc<McpServerSpec>,
    pub status: ServerStatus,
}

/// An `LspServer` resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(title = "LspServer")]
pub struct LspServer {
    pub api_version: String,
    pub metadata: Metadata,
    pub spec: Arc<LspServerSpec>,
    pub status: ServerStatus,
}

/// One entry of `WorkspaceStatus.items`, tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind")]
#[allow(clippy::large_enum_variant)]
pub enum Item {
    McpServer(McpServer),
    LspServer(LspServer),
}

impl Item {
    pub fn name(&self) -> &str {
        match self {
            Item::McpServer(s) => &s.metadata.name,
            Item::LspServer(s) => &s.metadata.name,
        }
    }

    pub fn kind(&self) -> ResourceKind {
        match self {
            Item::McpServer(_) => ResourceKind::McpServer,
            Item::LspServer(_) => ResourceKind::LspServer,
        }
    }

    pub fn metadata(&self) -> &Metadata {
        match self {
            Item::McpServer(s) => &s.metadata,
            Item::LspServer(s) => &s.metadata,
        }
    }

    pub fn status(&self) -> &ServerStatus {
        match self {
            Item::McpServer(s) => &s.status,
            Item::LspServer(s) => &s.status,
        }
    }
}

/// Resource kinds.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum ResourceKind {
    McpServer,
    LspServer,
}

impl fmt::Display for ResourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ResourceKind::McpServer => "McpServer",
            ResourceKind::LspServer => "LspServer",
        })
    }
}

/// The validity of a source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum SourceState {
    /// Parsed and valid.
    Valid,
    /// Unreadable, unparsable or invalid; `error` says why. After a hot
    /// reload the previous valid content stays in force.
    Invalid,
    /// The file does not exist (an empty, valid source).
    Absent,
}

/// One source file in `WorkspaceStatus.sources`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceStatus {
    pub kind: SourceKind,
    pub path: String,
    pub state: SourceState,
    /// Every problem, one per line, as `path:line:col: message`.
    pub error: Option<String>,
    /// The same problems, structured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diagnostics: Vec<Diagnostic>,
    /// What Qwen Code tolerates and Steward reports: coerced or ignored
    /// values, unset variables, skipped entries, dropped `env` keys. Never
    /// a reason to reject the source.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Diagnostic>,
}

/// A server admission skipped or a reconcile outcome, by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Skipped {
    pub kind: ResourceKind,
    pub name: String,
    pub reason: Reason,
}

/// What one reload did: the servers it added, removed, restarted, left unchanged, failed or skipped.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReloadSummary {
    /// RFC 3339.
    pub at: String,
    /// What caused it: a file path, `steward reload`, `start`.
    pub trigger: String,
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub restarted: Vec<String>,
    pub unchanged: Vec<String>,
    pub failed: Vec<String>,
    pub skipped: Vec<Skipped>,
}

/// `controller` part of `WorkspaceStatus`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControllerStatus {
    /// Whether a `steward run` controller is serving this workspace.
    pub running: bool,
    pub pid: Option<u32>,
    /// Whether the workspace is trusted (folder trust).
    pub trusted: bool,
    pub lsp_enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reload: Option<ReloadSummary>,
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// The agent endpoint, when this controller serves one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<GatewayStatus>,
}

/// A server removed from the configuration during this controller's life.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
pub struct RemovedRef {
    pub kind: ResourceKind,
    pub name: String,
    /// `Stopping` while its process is still being stopped (with its pid);
    /// absent once nothing of it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
}

/// The whole observable state of one workspace: `steward status -o json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(title = "WorkspaceStatus")]
pub struct WorkspaceStatus {
    pub api_version: String,
    /// Always `WorkspaceStatus`.
    pub kind: String,
    /// Canonical workspace root.
    pub workspace: String,
    pub controller: ControllerStatus,
    pub sources: Vec<SourceStatus>,
    pub items: Vec<Item>,
    pub removed: Vec<RemovedRef>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_call_timeout_is_the_entrys_or_ten_minutes() {
        let timeout = |timeout| McpServerSpec {
            timeout,
            ..Default::default()
        };
        let default = Duration::from_millis(600_000);
        assert_eq!(timeout(None).call_timeout(), default);
        assert_eq!(timeout(Some(0)).call_timeout(), default);
        assert_eq!(
            timeout(Some(1500)).call_timeout(),
            Duration::from_millis(1500)
        );
    }

    #[test]
    fn tools_are_included_then_excluded_by_exact_name_in_the_servers_order() {
        let tools = ["read", "write", "delete", "list"];
        let list = |names: &[&str]| Some(names.iter().map(|n| (*n).to_owned()).collect());
        let exposed = |include_tools, exclude_tools| {
            McpServerSpec {
                include_tools,
                exclude_tools,
                ..Default::default()
            }
            .exposed_tools(tools)
        };
        assert_eq!(exposed(None, None), tools);
        let include = list(&["list", "read", "missing"]);
        assert_eq!(
            exposed(include.clone(), None),
            ["read", "list"],
            "server order is kept"
        );
        let exclude = list(&["read", "delete"]);
        assert_eq!(exposed(None, exclude.clone()), ["write", "list"]);
        assert_eq!(exposed(include, exclude), ["list"], "exclude wins");
        assert!(exposed(list(&[]), None).is_empty(), "[] allows none");
        assert_eq!(exposed(None, list(&[])), tools);
        assert!(exposed(list(&["rea"]), None).is_empty());
    }
}

//! The source formats as users write them (serde + schemars).
//!
//! These types are the single definition of each file format: the JSON
//! Schema that `steward schema` prints and that validation checks against is
//! generated from them. Unknown keys are accepted (the files are shared with
//! Qwen Code and Claude Code, which know more keys than Steward); keys that
//! Steward reads are typed strictly.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::sandbox::{
    NetworkPermissions, OutboundNetwork, PermissionProfile, SandboxField, SandboxSettings,
};

/// `type` of a Claude Code style `.mcp.json` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum McpEntryType {
    /// A local process speaking MCP over stdin/stdout (`command`).
    Stdio,
    /// Streamable HTTP at `url` (normalized to `httpUrl`).
    Http,
    /// Server-sent events at `url`.
    Sse,
    /// Qwen Code: a server hosted in-process by an SDK application. Steward
    /// cannot reach one: the entry is skipped, with a warning.
    Sdk,
}

/// `dev.watch`: one glob or a list of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum DevWatch {
    /// One glob.
    One(String),
    /// Several globs.
    Many(Vec<String>),
}

impl DevWatch {
    /// The globs, in order.
    pub fn globs(&self) -> Vec<String> {
        match self {
            DevWatch::One(glob) => vec![glob.clone()],
            DevWatch::Many(globs) => globs.clone(),
        }
    }
}

/// `dev`: developing the server itself (VS Code's and mcp-hub's key). A
/// change to a watched file runs `build` (if any), then replaces the server
/// as a configuration edit does; a failing build keeps the running server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevEntry {
    /// Files whose change reloads the server: globs relative to `dev.cwd`
    /// (`*`, `?`, `[a-z]`, `**` for any number of directories, `{a,b}`). A
    /// glob naming a directory watches everything under it.
    /// `node_modules`, `.git`, `target`, `dist`, `build`, `out` and the
    /// Python caches are never watched unless a glob names them.
    pub watch: DevWatch,
    /// Shell command run (with `sh -c`, in `dev.cwd`, with the server's
    /// environment, bounded by the entry's `timeout`) after a change and
    /// before the server is replaced; a failure keeps the running server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    /// Directory the globs are relative to and the build runs in (default:
    /// the entry's `cwd`, else the workspace). Expands `$VAR`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// mcp-hub's switch: `false` turns `dev` off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub enabled: Option<bool>,
}

/// One MCP server, as written in `mcpServers` (settings.json, `.mcp.json`,
/// an extension manifest or `--mcp-config`). Exactly one of `command`, `url`
/// or `httpUrl` says how to reach it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerEntry {
    /// Claude Code's transport selector: `stdio` (with `command`), `http`
    /// (with `url`, same as `httpUrl`) or `sse` (with `url`). Optional: the
    /// transport is inferred from which of `command`/`url`/`httpUrl` is set.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<McpEntryType>,
    /// Executable to spawn for a stdio server. A bare name is looked up in the
    /// controller's PATH (never the `env.PATH` of this entry). Expands `$VAR`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Arguments for `command`, in order. Expands `$VAR`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = []))]
    pub args: Option<Vec<String>>,
    /// Extra environment for the process (NODE_OPTIONS, LD_PRELOAD,
    /// LD_LIBRARY_PATH, LD_AUDIT, DYLD_* are refused). Values expand `$VAR`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {}))]
    pub env: Option<BTreeMap<String, String>>,
    /// Working directory of the process (default: the workspace root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// URL of an SSE server (or of a streamable HTTP server with `type: "http"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// URL of a streamable HTTP server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_url: Option<String>,
    /// HTTP headers sent to `url`/`httpUrl`. Values expand `$VAR`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {}))]
    pub headers: Option<BTreeMap<String, String>>,
    /// Request timeout in milliseconds (default: 600000 for tool calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    /// Trust the server's tools (skip per-call confirmation in the agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub trust: Option<bool>,
    /// Only these tools are exposed (names). Changing it re-filters, no restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_tools: Option<Vec<String>>,
    /// These tools are hidden (wins over `includeTools`). Re-filters, no restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude_tools: Option<Vec<String>>,
    /// Human description shown in status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// When true the server is configured but never started (`Disabled`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub disabled: Option<bool>,
    /// The permission profile the server runs under: `standard` (default),
    /// `none`, `network`, `off`, a profile of `steward.sandbox.profiles`, or
    /// an inline profile (ToolHive's shape). From a file the workspace
    /// controls it may only narrow the default, unless approved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxField>,
    /// OAuth configuration for remote servers (passed through; part of the
    /// connection fingerprint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<serde_json::Map<String, Value>>,
    /// Qwen Code's authentication provider for remote servers
    /// (`dynamic_discovery`, `google_credentials`,
    /// `service_account_impersonation`). Part of the connection fingerprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_provider_type: Option<String>,
    /// Audience of the Google ID token (`service_account_impersonation`).
    /// Part of the connection fingerprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_audience: Option<String>,
    /// Service account to impersonate (`service_account_impersonation`).
    /// Part of the connection fingerprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_service_account: Option<String>,
    /// Qwen Code: load this server's tools eagerly instead of through tool
    /// search. Accepted; it changes nothing in Steward.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub always_load_tools: Option<bool>,
    /// `auto` probes the 2026-07-28 protocol before falling back to the
    /// legacy handshake (stdio servers); anything else is the legacy one.
    /// Part of the connection fingerprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_negotiation: Option<String>,
    /// Milliseconds allowed for connecting and listing tools (100..=300000;
    /// default 30000 for stdio, 5000 for remote servers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 100, max = 300000))]
    pub discovery_timeout_ms: Option<u64>,
    /// Qwen Code: a WebSocket server address. Steward cannot reach one: an
    /// entry with only `tcp` is skipped, with a warning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<String>,
    /// Developing this server: reload it when its source changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dev: Option<DevEntry>,
}

/// `mcp` settings.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpSettings {
    /// Allow-list of MCP server names (`*`/`?` globs). Absent: every server is
    /// allowed; `[]`: none is. Intersected with `--allowed-mcp-server-names`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed: Option<Vec<String>>,
    /// Server names never started (`*`/`?` globs). The union of every
    /// settings layer: no layer can lift another's exclusion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = []))]
    pub excluded: Option<Vec<String>>,
    /// Command used to launch a shared MCP server. Restart-only: an edit is
    /// reported as `RestartRequired`, never applied live.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_command: Option<String>,
    /// Idle timeout of a tool call, in milliseconds: a call whose server
    /// sends neither an answer nor progress for this long is aborted (as
    /// Qwen Code does), besides the entry's `timeout`. From 10000 to
    /// 3600000 (a value outside is taken to the nearest bound, with a
    /// warning); default 300000, or `QWEN_CODE_MCP_TOOL_IDLE_TIMEOUT_MS`
    /// when no settings layer sets it. Applied live.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 300000))]
    pub tool_idle_timeout_ms: Option<u64>,
}

/// `security.folderTrust` settings.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FolderTrustSettings {
    /// When true, workspaces must be trusted (trustedFolders.json) before
    /// their servers run. When not true, every folder is trusted. Read only
    /// from layers the workspace does not control.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub enabled: Option<bool>,
}

/// `security` settings.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecuritySettings {
    /// Folder trust.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder_trust: Option<FolderTrustSettings>,
}

/// `lsp` settings.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LspSettings {
    /// When true (default), an untrusted workspace runs no LSP server at all;
    /// when false, only servers with `trustRequired: true` are held back.
    /// Read only from layers the workspace does not control.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub require_trusted_workspace: Option<bool>,
    /// Allow-list of LSP server names (globs); absent = all, `[]` = none.
    /// Intersected with `--allowed-lsp-server-names`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed: Option<Vec<String>>,
    /// LSP server names never started (globs); union of every layer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = []))]
    pub excluded: Option<Vec<String>>,
}

/// A settings.json layer (system defaults, user, workspace, system). Only
/// the keys below matter to Steward; every other key is accepted and ignored.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(title = "Qwen Code settings.json (the keys Steward reads)")]
pub struct SettingsFile {
    /// JSON Schema reference for editors.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// MCP servers by name. Layers merge by name; a later layer replaces a
    /// whole entry, never single fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {}))]
    pub mcp_servers: Option<BTreeMap<String, McpServerEntry>>,
    /// MCP admission settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<McpSettings>,
    /// Security settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security: Option<SecuritySettings>,
    /// LSP admission settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lsp: Option<LspSettings>,
    /// Steward's own settings (Qwen Code ignores them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steward: Option<StewardSettings>,
}

/// `steward` settings: keys only Steward reads (Qwen Code ignores them).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StewardSettings {
    /// The servers' permission profiles. Read only from the user and system
    /// layers: a workspace cannot widen its own sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxSettings>,
    /// `${secret:NAME}` references.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets: Option<SecretsSettings>,
    /// The MCP registries `steward search`, `add`, `outdated` and `update`
    /// ask, in order (base URLs serving the `/v0.1` API). Read only from
    /// the user and system layers; `--registry URL` replaces the list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = ["https://registry.modelcontextprotocol.io"]))]
    pub registries: Option<Vec<String>>,
    /// Signing in to remote servers. Read only from the user and system
    /// layers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<OAuthSettings>,
}

/// `steward.oauth` settings.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OAuthSettings {
    /// The https URL of a Client ID Metadata Document describing Steward as
    /// an OAuth client (its `client_id` is this URL; `redirect_uris` must
    /// list the loopback redirect). Used with authorization servers that
    /// advertise `client_id_metadata_document_supported`, when the entry
    /// names no `oauth.clientId`; otherwise Steward registers itself
    /// (Dynamic Client Registration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<String>,
}

/// `steward.secrets` settings.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretsSettings {
    /// When true in any layer, an entry of a workspace file (`.mcp.json`,
    /// `.qwen/settings.json`, `.lsp.json`) holding a literal credential is
    /// invalid (`InvalidSpec`) instead of a warning: move it with `steward
    /// secret move`. No layer can turn off another layer's `true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub require_references: Option<bool>,
}

/// The project MCP file, `WS/.mcp.json` (Qwen Code and Claude Code forms).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(title = "Project MCP servers (.mcp.json)")]
pub struct McpJsonFile {
    /// JSON Schema reference for editors.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// MCP servers by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {}))]
    pub mcp_servers: Option<BTreeMap<String, McpServerEntry>>,
}

/// How Steward talks to a language server.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum LspTransport {
    /// The server's stdin/stdout (requires `command`).
    Stdio,
    /// A TCP connection to `socket.host`:`socket.port`.
    Tcp,
    /// A unix socket at `socket.path`.
    Socket,
}

/// Where a tcp/socket language server listens.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SocketObject {
    /// Host for `tcp` (default `127.0.0.1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Port for `tcp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<u32>,
    /// Unix socket path for `socket` (relative to the workspace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Same as `path` (Qwen Code's name for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_path: Option<String>,
}

/// `socket`: an object, or a string that is a unix socket path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum SocketField {
    /// A unix socket path.
    Path(String),
    /// `{host, port}` or `{path}`.
    Object(SocketObject),
}

/// One language server in `.lsp.json` (or an extension's `lspServers`). The
/// key it is written under is its name and its default language.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LspServerEntry {
    /// Language ids this server handles (default: `[<key>]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub languages: Option<Vec<String>>,
    /// Executable to spawn (required for `stdio`; for `tcp`/`socket` Steward
    /// spawns and owns it if given, else connects to an external daemon).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Arguments for `command`, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = []))]
    pub args: Option<Vec<String>>,
    /// `stdio`, `tcp` or `socket`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "stdio"))]
    pub transport: Option<LspTransport>,
    /// Where a tcp/socket server listens: `{host, port}`, `{path}` or a path string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<SocketField>,
    /// Same as `socket.host` (accepted at the top level).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Same as `socket.port` (accepted at the top level).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<u32>,
    /// Same as `socket.path` (accepted at the top level).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Same as `path` (Qwen Code's name for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_path: Option<String>,
    /// Extra environment for the process (code-injection variables refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {}))]
    pub env: Option<BTreeMap<String, String>>,
    /// Sent as `initializationOptions` in `initialize`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization_options: Option<Value>,
    /// Sent with `workspace/didChangeConfiguration` and used to answer
    /// `workspace/configuration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<Value>,
    /// File extension → language id, e.g. `{".ts": "typescript"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {}))]
    pub extension_to_language: Option<BTreeMap<String, String>>,
    /// Workspace folder sent to the server (must be inside the workspace;
    /// default: the workspace root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_folder: Option<String>,
    /// `rootUri` sent to the server (default: the `workspaceFolder` as a file URI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_uri: Option<String>,
    /// Milliseconds allowed for spawn + initialize.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 10000), range(min = 1))]
    pub startup_timeout: Option<u64>,
    /// Milliseconds allowed for `shutdown` + `exit` before the process is killed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 5000), range(min = 1))]
    pub shutdown_timeout: Option<u64>,
    /// Restart the server when it exits unexpectedly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub restart_on_crash: Option<bool>,
    /// How many crash restarts before `MaxRestartsExceeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 3))]
    pub max_restarts: Option<u32>,
    /// Whether the server may only run in a trusted workspace. Always true for
    /// the workspace's own `.lsp.json`; extensions may set false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub trust_required: Option<bool>,
    /// Developing this language server: restart it when its source changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dev: Option<DevEntry>,
    /// The permission profile the server runs under (see the MCP entry's
    /// `sandbox`). In `.lsp.json` it may only narrow the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxField>,
}

/// `mcpServers`/`lspServers` in an extension manifest: inline, or a path
/// (relative to the extension directory) to a JSON file holding them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum InlineOrPath<T> {
    /// Path of a JSON file, relative to the extension directory.
    Path(String),
    /// The servers, inline.
    Inline(T),
}

/// An extension manifest, `HOME_DIR/extensions/<dir>/qwen-extension.json`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(title = "Qwen Code extension manifest (qwen-extension.json)")]
pub struct ExtensionManifest {
    /// JSON Schema reference for editors.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// The extension's name (default: its directory name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The extension's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// MCP servers the extension provides (lowest precedence).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_servers: Option<InlineOrPath<BTreeMap<String, McpServerEntry>>>,
    /// Language servers the extension provides, `.lsp.json` shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lsp_servers: Option<InlineOrPath<BTreeMap<String, LspServerEntry>>>,
}

/// An approval decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalStatus {
    Approved,
    Rejected,
}

/// A decision bound to the `approvalHash` it was made for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRecord {
    /// The server's `approvalHash` when the decision was made.
    pub hash: String,
    /// `approved` or `rejected`.
    pub status: ApprovalStatus,
}

/// `mcpApprovals.json`: canonical project root → server name → decision.
pub type ApprovalsFile = BTreeMap<String, BTreeMap<String, ApprovalRecord>>;

/// What Steward binds an approval to besides the entry: the permission
/// profile in force when it was given (a wider one asks again).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxApproval {
    /// The `approvalHash` the approval was given for.
    pub approval_hash: String,
    /// The profile in force then.
    pub sandbox: crate::sandbox::Sandbox,
}

/// `HOME_DIR/steward/sandbox-approvals.json`: canonical project root →
/// server name → [`SandboxApproval`].
pub type SandboxApprovalsFile = BTreeMap<String, BTreeMap<String, SandboxApproval>>;

/// A trust rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TrustLevel {
    /// The folder and everything inside it is trusted.
    TrustFolder,
    /// The folder's parent and everything inside it is trusted.
    TrustParent,
    /// The folder itself is not trusted.
    DoNotTrust,
}

/// `trustedFolders.json`: absolute path → trust rule.
pub type TrustedFoldersFile = BTreeMap<String, TrustLevel>;

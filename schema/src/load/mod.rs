//! Loading one source: bytes → JSON-with-comments document → schema check →
//! typed content with every server entry built (expanded, normalized, hashed).
//!
//! Problems come in two kinds. A *warning* is something Qwen Code tolerates
//! (it coerces, ignores or skips it — see [`crate::lenient`]): the source
//! loads the same way in every mode, and the warning is reported. An
//! *error* is content that cannot be built at all (broken JSON, a wrong type
//! Qwen Code cannot use either); strict and lenient loading differ only in
//! what happens to one:
//! - **strict** (hot reload, `steward validate`): an error rejects the
//!   whole source; the caller keeps the previous content in force;
//! - **lenient** (cold start): an entry with an error is dropped, valid
//!   entries load. An error outside any entry (say `mcp.allowed` is not a
//!   list) still rejects the whole source, because dropping a gating key
//!   would widen admission.
//!
//! An entry that is dropped — skipped as Qwen Code skips it, or invalid at
//! a cold start — is never silent: it is listed in
//! [`ParsedSource::dropped`] with a best-effort spec, so that it keeps a row
//! in status (`Failed`, `InvalidSpec`).
//!
//! A file that does not exist is a valid, empty source (`Absent`).
//!
//! The loaders, by what they own:
//! - this module: the types every loader shares — the file as read
//!   ([`FileText`]), the context ([`LoadContext`]), and the result
//!   ([`ParsedSource`], [`Content`], [`DroppedEntry`]);
//! - `settings`, `files`, `extension`, `agent_plugin`: one loader per
//!   source format;
//! - `document`: what every loader runs a file through (parse, schema
//!   check outside the entries, typed content, the source's state);
//! - `mcp`, `lsp`: building one server entry into a spec; `entries`: what
//!   both builds share (variable expansion, entries that produce no spec);
//!   `dev`: the `dev` block both kinds of entry may carry;
//! - `reload`: reloading an edit confined to one entry without a full load;
//! - `paths`: path and `file://` URI helpers.

mod agent_plugin;
mod dev;
mod document;
mod entries;
mod extension;
mod files;
mod lsp;
mod mcp;
pub mod paths;
mod reload;
mod settings;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::diagnostic::{Diagnostic, Pos};
use crate::formats::{ApprovalsFile, TrustedFoldersFile};
use crate::memo::EntryMemo;
use crate::resource::{LspServerSpec, McpServerSpec, SourceKind, SourceState};

pub use agent_plugin::{
    AGENT_PLUGIN_MCP_SCHEMA, AGENT_PLUGIN_SCHEMA, AGENT_PLUGIN_SCHEMA_PREFIX, load_agent_plugin,
};
pub use extension::load_extension;
pub use files::{
    load_approvals, load_cli_mcp_config, load_lsp_json, load_mcp_json, load_sandbox_approvals,
    load_trusted_folders,
};
pub use lsp::lsp_config_hash;
pub use mcp::{build_mcp, mcp_config_hash, mcp_outcome};
pub use paths::{absolute_in, file_uri, file_uri_path, normalize_lexically};
pub use reload::{EntrySpans, entry_spans, reload_edited_entry};
pub use settings::load_settings;

/// Default `startupTimeout` of a language server, in milliseconds.
pub const DEFAULT_STARTUP_TIMEOUT_MS: u64 = 10_000;
/// Default `shutdownTimeout` of a language server, in milliseconds.
pub const DEFAULT_SHUTDOWN_TIMEOUT_MS: u64 = 5_000;
pub use crate::resource::DEFAULT_MCP_TIMEOUT_MS;
/// Default `maxRestarts` of a language server.
pub const DEFAULT_MAX_RESTARTS: u32 = 3;

/// How problems are handled (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadMode {
    Strict,
    Lenient,
}

/// The result of reading a file, as the caller saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileText {
    /// The file does not exist.
    Absent,
    /// The file's content.
    Text(String),
    /// The file exists but could not be read (message from the OS).
    Unreadable(String),
    /// The file is not UTF-8 text; the first offending byte is at this
    /// position (of the valid text before it).
    NotUtf8(Pos),
}

impl FileText {
    /// A file's bytes as the loaders take them.
    pub fn from_bytes(bytes: Vec<u8>) -> FileText {
        match String::from_utf8(bytes) {
            Ok(text) => FileText::Text(text),
            Err(e) => {
                let at = e.utf8_error().valid_up_to();
                let before = String::from_utf8_lossy(&e.as_bytes()[..at]);
                let line = before.matches('\n').count() + 1;
                let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
                FileText::NotUtf8(Pos {
                    line: u32::try_from(line).unwrap_or(u32::MAX),
                    column: u32::try_from(column).unwrap_or(u32::MAX),
                })
            }
        }
    }
}

/// The problem with a file that has no text to parse, if it has none.
fn unreadable(path: &Path, text: &FileText) -> Option<Diagnostic> {
    match text {
        FileText::Unreadable(err) => Some(Diagnostic::new(
            path,
            None,
            "",
            format!("cannot read the file: {err}"),
        )),
        FileText::NotUtf8(pos) => Some(Diagnostic::new(
            path,
            Some(*pos),
            "",
            "cannot read the file: it is not UTF-8 text (the bytes here are not a UTF-8 character)",
        )),
        FileText::Absent | FileText::Text(_) => None,
    }
}

/// Reads the files a source refers to (an extension's `mcpServers: "file"`).
pub trait FileReader {
    fn read(&self, path: &Path) -> FileText;
}

impl<F: Fn(&Path) -> FileText> FileReader for F {
    fn read(&self, path: &Path) -> FileText {
        self(path)
    }
}

/// What every loader needs besides the file: the canonical workspace root,
/// the environment for `$VAR` expansion, and the mode; optionally a memo of
/// earlier builds, so a reload rebuilds only the entries that changed.
#[derive(Debug, Clone, Copy)]
pub struct LoadContext<'a> {
    pub workspace: &'a Path,
    pub env: &'a BTreeMap<String, String>,
    pub mode: LoadMode,
    pub memo: Option<&'a EntryMemo>,
    /// A path with its symlinks resolved when it exists ([`as_written`] in
    /// pure uses): a `workspaceFolder` must stay inside the workspace through
    /// its symlinks too.
    pub realpath: fn(&Path) -> PathBuf,
}

/// A path as written: the `realpath` of a context that reads no file system.
pub fn as_written(path: &Path) -> PathBuf {
    path.to_path_buf()
}

/// A source's MCP servers by name, shared: copying a loaded source (the
/// controller keeps the last load of each file and the sources in force)
/// copies a pointer.
pub type McpServers = Arc<BTreeMap<String, Arc<McpServerSpec>>>;
/// A source's language servers by name, shared like [`McpServers`].
pub type LspServers = Arc<BTreeMap<String, Arc<LspServerSpec>>>;

/// Gating and policy keys of one settings layer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SettingsContent {
    pub mcp_servers: McpServers,
    pub mcp_allowed: Option<Vec<String>>,
    pub mcp_excluded: Option<Vec<String>>,
    pub mcp_server_command: Option<String>,
    pub mcp_tool_idle_timeout_ms: Option<u64>,
    pub folder_trust_enabled: Option<bool>,
    pub lsp_require_trusted_workspace: Option<bool>,
    pub lsp_allowed: Option<Vec<String>>,
    pub lsp_excluded: Option<Vec<String>>,
    /// `steward.sandbox` (used only from layers the workspace does not
    /// control).
    pub sandbox: Option<Box<crate::formats::SandboxSettings>>,
    /// `steward.secrets.requireReferences`.
    pub secrets_require_references: Option<bool>,
}

/// What an extension contributes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ExtensionContent {
    pub name: String,
    pub dir: PathBuf,
    pub mcp_servers: McpServers,
    pub lsp_servers: LspServers,
    /// Files the manifest refers to (watched by the controller).
    pub referenced_files: Vec<PathBuf>,
    /// Disabled for this workspace in Qwen Code's extension store or
    /// `extension-enablement.json` (see [`crate::enablement`]): it
    /// contributes no server.
    pub inactive: bool,
    /// Its MCP servers the user disabled (`extension-preferences.json`).
    pub disabled_mcp_servers: Vec<String>,
}

/// The typed content of a source — what it contributes to the desired state.
/// Two contents compare equal exactly when they would produce the same
/// desired state, so `==` is the semantic diff.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Content {
    /// Nothing (absent, or rejected as a whole).
    #[default]
    Empty,
    Settings(SettingsContent),
    McpServers(McpServers),
    LspServers(LspServers),
    Extension(ExtensionContent),
    Approvals(ApprovalsFile),
    SandboxApprovals(crate::formats::SandboxApprovalsFile),
    TrustedFolders(TrustedFoldersFile),
}

/// One loaded source.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedSource {
    pub kind: SourceKind,
    pub path: PathBuf,
    pub state: SourceState,
    /// Errors: content that cannot be built (a strict load is rejected).
    pub diagnostics: Vec<Diagnostic>,
    /// What Qwen Code tolerates and Steward reports (never rejects a load).
    pub warnings: Vec<Diagnostic>,
    /// Entries of the source that produced no spec.
    pub dropped: Vec<DroppedEntry>,
    /// Where each entry that names a profile other than a built-in writes
    /// its `sandbox` key (by entry name; `""`: `steward.sandbox.default`),
    /// so that a name no settings define is reported at its place.
    pub sandbox_keys: BTreeMap<String, Diagnostic>,
    pub content: Content,
}

/// A server entry that produced no spec: skipped as Qwen Code skips it, or
/// invalid (at a cold start). It keeps a row in status.
#[derive(Debug, Clone, PartialEq)]
pub struct DroppedEntry {
    pub name: String,
    /// A best-effort spec built from what could be read.
    pub spec: DroppedSpec,
    /// Why, one `path:line:col: message` per line.
    pub message: String,
}

/// The best-effort spec of a dropped entry.
#[derive(Debug, Clone, PartialEq)]
pub enum DroppedSpec {
    Mcp(Arc<McpServerSpec>),
    Lsp(Arc<LspServerSpec>),
}

/// Problems found while loading one source.
#[derive(Debug, Default)]
struct Problems {
    errors: Vec<Diagnostic>,
    warnings: Vec<Diagnostic>,
    dropped: Vec<DroppedEntry>,
    sandbox_keys: BTreeMap<String, Diagnostic>,
}

impl ParsedSource {
    /// An absent source.
    pub fn absent(kind: SourceKind, path: impl Into<PathBuf>) -> Self {
        ParsedSource {
            kind,
            path: path.into(),
            state: SourceState::Absent,
            diagnostics: Vec::new(),
            warnings: Vec::new(),
            dropped: Vec::new(),
            sandbox_keys: BTreeMap::new(),
            content: Content::Empty,
        }
    }

    /// Whether a hot reload may apply this source (strict: no problem at all).
    pub fn is_valid(&self) -> bool {
        self.state != SourceState::Invalid
    }

    /// Every problem, one per line (`path:line:col: message`).
    pub fn error_text(&self) -> Option<String> {
        if self.diagnostics.is_empty() {
            None
        } else {
            Some(
                self.diagnostics
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("\n"),
            )
        }
    }

    /// A source rejected whole, with its errors.
    pub fn invalid(kind: SourceKind, path: &Path, diagnostics: Vec<Diagnostic>) -> Self {
        ParsedSource {
            kind,
            path: path.to_path_buf(),
            state: SourceState::Invalid,
            diagnostics,
            warnings: Vec::new(),
            dropped: Vec::new(),
            sandbox_keys: BTreeMap::new(),
            content: Content::Empty,
        }
    }

    /// Whether the load reported anything (errors, warnings, dropped
    /// entries), or noted where a custom profile is named (positions a
    /// partial reload could not keep).
    pub fn has_findings(&self) -> bool {
        !self.diagnostics.is_empty()
            || !self.warnings.is_empty()
            || !self.dropped.is_empty()
            || !self.sandbox_keys.is_empty()
    }
}

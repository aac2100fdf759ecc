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

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, LazyLock};

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::canonical::hash_value;
use crate::diagnostic::{Diagnostic, Pos, pointer_join};
use crate::expand::{self, Vars};
use crate::formats::{
    ApprovalsFile, ExtensionManifest, InlineOrPath, LspServerEntry, LspTransport, McpJsonFile,
    McpServerEntry, SettingsFile, SocketField, TrustedFoldersFile,
};
use crate::jsonc::{self, Document};
use crate::lenient;
use crate::memo::{self, Coverage, EntryMemo, Failed, FieldErrors, Outcome, Place};
use crate::qwen;
use crate::redact;
use crate::resource::{
    LspServerSpec, LspSocket, McpServerSpec, McpTransport, QwenMcpFields, Scope, SourceKind,
    SourceState,
};
use crate::schemas;
use crate::validate::SchemaValidator;

/// Default `startupTimeout` of a language server, in milliseconds.
pub const DEFAULT_STARTUP_TIMEOUT_MS: u64 = 10_000;
/// Default `shutdownTimeout` of a language server, in milliseconds.
pub const DEFAULT_SHUTDOWN_TIMEOUT_MS: u64 = 5_000;
/// Qwen Code's default MCP request `timeout`, in milliseconds.
pub const DEFAULT_MCP_TIMEOUT_MS: u64 = 600_000;
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
    pub folder_trust_enabled: Option<bool>,
    pub lsp_require_trusted_workspace: Option<bool>,
    pub lsp_allowed: Option<Vec<String>>,
    pub lsp_excluded: Option<Vec<String>>,
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
            content: Content::Empty,
        }
    }

    /// Whether the load reported anything (errors, warnings, dropped entries).
    pub fn has_findings(&self) -> bool {
        !self.diagnostics.is_empty() || !self.warnings.is_empty() || !self.dropped.is_empty()
    }
}

/// Load a settings.json layer.
pub fn load_settings(
    kind: SourceKind,
    path: &Path,
    text: &FileText,
    cx: &LoadContext<'_>,
) -> ParsedSource {
    let scope = settings_scope(kind);
    load_document(kind, path, text, cx, |doc, diags| {
        for (pointer, message) in migrate_legacy_settings(&mut doc.value) {
            let pos = doc.key_position(&pointer);
            diags
                .warnings
                .push(Diagnostic::new(path, pos, pointer, message));
        }
        let mut value = checked_value(doc, &SETTINGS, path, &["/mcpServers"], diags)?;
        // Entries are built one by one (most of them from the memo).
        let servers = take_object(&mut value, "mcpServers");
        let file: SettingsFile = typed(&value, path, diags)?;
        let mcp_servers = build_mcp_map(servers, "/mcpServers", doc, path, scope, None, cx, diags);
        let mcp = file.mcp.unwrap_or_default();
        let lsp = file.lsp.unwrap_or_default();
        Some(Content::Settings(SettingsContent {
            mcp_servers,
            mcp_allowed: mcp.allowed,
            mcp_excluded: mcp.excluded,
            mcp_server_command: mcp.server_command,
            folder_trust_enabled: file
                .security
                .and_then(|s| s.folder_trust)
                .and_then(|f| f.enabled),
            lsp_require_trusted_workspace: lsp.require_trusted_workspace,
            lsp_allowed: lsp.allowed,
            lsp_excluded: lsp.excluded,
        }))
    })
}

/// Version-1 settings keys Steward reads, and where Qwen Code moves them.
const LEGACY_SETTINGS: [(&str, &[&str]); 4] = [
    ("allowMCPServers", &["mcp", "allowed"]),
    ("excludeMCPServers", &["mcp", "excluded"]),
    ("mcpServerCommand", &["mcp", "serverCommand"]),
    ("folderTrust", &["security", "folderTrust", "enabled"]),
];

/// Qwen Code's in-memory migration of version-1 settings keys (it also
/// rewrites the file; Steward never writes it): in a file without a
/// `$version` of 2 or more, a legacy key moves to its place (and wins over
/// a value already there); in a newer file it is ignored. Returns a warning
/// per legacy key, at the key.
fn migrate_legacy_settings(value: &mut Value) -> Vec<(String, String)> {
    let Value::Object(root) = value else {
        return Vec::new();
    };
    let version = root.get("$version").and_then(Value::as_f64);
    let mut warnings = Vec::new();
    for (key, path) in LEGACY_SETTINGS {
        let Some(old) = root.get(key) else {
            continue;
        };
        let target = path.join(".");
        if version.is_some_and(|v| v >= 2.0) || old.is_object() {
            warnings.push((
                pointer_join("", key),
                format!("legacy setting \"{key}\" is ignored in a version-2 settings file, as Qwen Code ignores it; use \"{target}\""),
            ));
            continue;
        }
        let Some(old) = root.remove(key) else {
            continue;
        };
        let mut at = &mut *root;
        for step in &path[..path.len() - 1] {
            let slot = at
                .entry((*step).to_owned())
                .or_insert_with(|| Value::Object(Map::new()));
            if !slot.is_object() {
                *slot = Value::Object(Map::new());
            }
            let Value::Object(next) = slot else {
                unreachable!("made an object above")
            };
            at = next;
        }
        at.insert(path[path.len() - 1].to_owned(), old);
        warnings.push((
            pointer_join("", key),
            format!("legacy setting \"{key}\" is read as \"{target}\", as Qwen Code migrates it"),
        ));
    }
    warnings
}

fn settings_scope(kind: SourceKind) -> Scope {
    match kind {
        SourceKind::UserSettings => Scope::User,
        SourceKind::WorkspaceSettings => Scope::Workspace,
        _ => Scope::System,
    }
}

/// Load the project `.mcp.json`.
pub fn load_mcp_json(path: &Path, text: &FileText, cx: &LoadContext<'_>) -> ParsedSource {
    load_mcp_servers_file(SourceKind::ProjectMcpJson, Scope::Project, path, text, cx)
}

/// Load one `--mcp-config` value: a file path, or inline JSON (starts with `{`).
pub fn load_cli_mcp_config(arg: &str, read: &dyn FileReader, cx: &LoadContext<'_>) -> ParsedSource {
    if arg.trim_start().starts_with('{') {
        let path = PathBuf::from("<--mcp-config>");
        load_mcp_servers_file(
            SourceKind::CliMcpConfig,
            Scope::Cli,
            &path,
            &FileText::Text(arg.to_owned()),
            cx,
        )
    } else {
        let path = absolute_in(cx.workspace, arg);
        let text = match read.read(&path) {
            // An explicitly named file that is missing is an error, not an empty source.
            FileText::Absent => FileText::Unreadable("no such file".to_owned()),
            other => other,
        };
        load_mcp_servers_file(SourceKind::CliMcpConfig, Scope::Cli, &path, &text, cx)
    }
}

fn load_mcp_servers_file(
    kind: SourceKind,
    scope: Scope,
    path: &Path,
    text: &FileText,
    cx: &LoadContext<'_>,
) -> ParsedSource {
    load_document(kind, path, text, cx, |doc, diags| {
        // Qwen Code reads a `--mcp-config` without `mcpServers` as the map.
        let bare = kind == SourceKind::CliMcpConfig
            && doc
                .value
                .as_object()
                .is_some_and(|o| !o.contains_key("mcpServers"));
        if bare {
            let mut value = checked_value(doc, &MCP_SERVERS_MAP, path, &[""], diags)?;
            let mut servers = take_all(&mut value);
            servers.retain(|k, _| !k.starts_with('$'));
            return Some(Content::McpServers(build_mcp_map(
                servers, "", doc, path, scope, None, cx, diags,
            )));
        }
        // `{"mcpServer": …}` is no server at all: say so (Qwen Code warns
        // that the file has no "mcpServers" object).
        if let Value::Object(root) = &doc.value {
            for key in root
                .keys()
                .filter(|k| *k != "mcpServers" && !k.starts_with('$'))
            {
                let pointer = pointer_join("", key);
                let hint = match crate::validate::did_you_mean(key, &["mcpServers"]) {
                    Some(_) => " (did you mean \"mcpServers\"?)",
                    None => "",
                };
                diags.warnings.push(Diagnostic::new(
                    path,
                    doc.key_position(&pointer),
                    pointer,
                    format!("unknown key \"{key}\"{hint} is ignored"),
                ));
            }
        }
        let mut value = checked_value(doc, &MCP_JSON, path, &["/mcpServers"], diags)?;
        let servers = take_object(&mut value, "mcpServers");
        let _: McpJsonFile = typed(&value, path, diags)?;
        Some(Content::McpServers(build_mcp_map(
            servers,
            "/mcpServers",
            doc,
            path,
            scope,
            None,
            cx,
            diags,
        )))
    })
}

/// Load the workspace `.lsp.json`.
pub fn load_lsp_json(path: &Path, text: &FileText, cx: &LoadContext<'_>) -> ParsedSource {
    load_document(SourceKind::LspJson, path, text, cx, |doc, diags| {
        let value = checked_value(doc, &LSP_JSON, path, &[""], diags)?;
        let entries = lsp_entries(value, "", path, diags)?;
        Some(Content::LspServers(build_lsp_map(
            entries,
            "",
            doc,
            path,
            &LspOrigin::Workspace,
            cx,
            diags,
        )))
    })
}

/// Load the trusted-folders file.
pub fn load_trusted_folders(path: &Path, text: &FileText, cx: &LoadContext<'_>) -> ParsedSource {
    load_document(SourceKind::TrustedFolders, path, text, cx, |doc, diags| {
        // Qwen Code skips a rule whose level it does not know.
        if let Value::Object(rules) = &mut doc.value {
            let known = ["TRUST_FOLDER", "TRUST_PARENT", "DO_NOT_TRUST"];
            let unknown: Vec<String> = rules
                .iter()
                .filter(|(k, v)| {
                    !k.starts_with('$') && !v.as_str().is_some_and(|l| known.contains(&l))
                })
                .map(|(k, _)| k.clone())
                .collect();
            let removed: Vec<(String, Value)> = unknown
                .into_iter()
                .map(|key| {
                    let level = rules.remove(&key).unwrap_or_default();
                    (key, level)
                })
                .collect();
            for (key, level) in removed {
                let pointer = pointer_join("", &key);
                diags.warnings.push(Diagnostic::new(
                    path,
                    doc.position(&pointer),
                    pointer,
                    format!("trust level {level} is not TRUST_FOLDER, TRUST_PARENT or DO_NOT_TRUST; the rule is ignored, as Qwen Code ignores it"),
                ));
            }
        }
        let mut value = checked_value(doc, &TRUSTED_FOLDERS, path, &[], diags)?;
        let mut map = take_all(&mut value);
        map.remove("$schema");
        let file: TrustedFoldersFile = typed(&Value::Object(map), path, diags)?;
        Some(Content::TrustedFolders(file))
    })
}

/// Load the approvals file.
pub fn load_approvals(path: &Path, text: &FileText, cx: &LoadContext<'_>) -> ParsedSource {
    load_document(SourceKind::Approvals, path, text, cx, |doc, diags| {
        let mut value = checked_value(doc, &APPROVALS, path, &[], diags)?;
        let mut map = take_all(&mut value);
        map.remove("$schema");
        let file: ApprovalsFile = typed(&Value::Object(map), path, diags)?;
        Some(Content::Approvals(file))
    })
}

/// Load an extension from its manifest at `dir/qwen-extension.json`;
/// referenced files are read through `read`.
pub fn load_extension(
    dir: &Path,
    text: &FileText,
    read: &dyn FileReader,
    cx: &LoadContext<'_>,
) -> ParsedSource {
    let path = dir.join("qwen-extension.json");
    load_document(SourceKind::Extension, &path, text, cx, |doc, diags| {
        let dir_str = dir.to_string_lossy().into_owned();
        let ws_str = cx.workspace.to_string_lossy().into_owned();
        let ext_vars = expand::extension_vars(&dir_str, &ws_str);
        // As Qwen Code does: `${name}` of the extension variables replaced in
        // every string of the manifest, other names left as written.
        hydrate_strings(&mut doc.value, &ext_vars);
        let value = checked_value(
            doc,
            &EXTENSION,
            &path,
            &["/mcpServers", "/lspServers"],
            diags,
        )?;
        let manifest: ExtensionManifest = typed(&value, &path, diags)?;
        // Qwen Code refuses (skips) an extension without a valid name.
        let name = match manifest.name.clone() {
            None => {
                diags.errors.push(Diagnostic::new(
                    &path,
                    None,
                    "",
                    "missing required property name (Qwen Code skips an extension without one)",
                ));
                return None;
            }
            Some(n)
                if n.is_empty()
                    || !n
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) =>
            {
                diags.errors.push(Diagnostic::new(
                    &path,
                    doc.position("/name"),
                    "/name",
                    format!("expected a name of letters, digits, '_', '.' and '-', found \"{n}\""),
                ));
                return None;
            }
            Some(n) => n,
        };
        let mut content = ExtensionContent {
            name: name.clone(),
            dir: dir.to_path_buf(),
            ..ExtensionContent::default()
        };
        let ext_cx = ExtCx {
            name: &name,
            vars: &ext_vars,
        };

        match &manifest.mcp_servers {
            None => {}
            Some(InlineOrPath::Inline(_)) => {
                let servers = value
                    .get("mcpServers")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                content.mcp_servers = build_mcp_map(
                    servers,
                    "/mcpServers",
                    doc,
                    &path,
                    Scope::Extension,
                    Some(&ext_cx),
                    cx,
                    diags,
                );
            }
            Some(InlineOrPath::Path(rel)) => {
                let file = absolute_in(dir, rel);
                content.referenced_files.push(file.clone());
                if let Some(mut sub_doc) =
                    read_referenced(&file, read, diags, "/mcpServers", doc, &path)
                {
                    // The referenced file may be `{"mcpServers": {...}}` or the map itself.
                    let (validator, pointer): (&SchemaValidator, &str) =
                        if sub_doc.value.get("mcpServers").is_some() {
                            (&MCP_JSON, "/mcpServers")
                        } else {
                            (&MCP_SERVERS_MAP, "")
                        };
                    if let Some(mut checked) =
                        checked_value(&mut sub_doc, validator, &file, &[pointer], diags)
                    {
                        let mut servers = if pointer.is_empty() {
                            take_all(&mut checked)
                        } else {
                            take_object(&mut checked, "mcpServers")
                        };
                        servers.retain(|k, _| !k.starts_with('$'));
                        content.mcp_servers = build_mcp_map(
                            servers,
                            pointer,
                            &sub_doc,
                            &file,
                            Scope::Extension,
                            Some(&ext_cx),
                            cx,
                            diags,
                        );
                    }
                }
            }
        }

        let origin = LspOrigin::Extension {
            name: &name,
            dir,
            vars: &ext_vars,
        };
        match value.get("lspServers") {
            None | Some(Value::Null) => {}
            Some(Value::String(rel)) => {
                let file = absolute_in(dir, rel);
                content.referenced_files.push(file.clone());
                if let Some(mut sub_doc) =
                    read_referenced(&file, read, diags, "/lspServers", doc, &path)
                {
                    let checked = checked_value(&mut sub_doc, &LSP_JSON, &file, &[""], diags);
                    if let Some(v) = checked
                        && let Some(entries) = lsp_entries(v, "", &file, diags)
                    {
                        content.lsp_servers =
                            build_lsp_map(entries, "", &sub_doc, &file, &origin, cx, diags);
                    }
                }
            }
            Some(inline) => {
                if let Some(entries) = lsp_entries(inline.clone(), "/lspServers", &path, diags) {
                    content.lsp_servers =
                        build_lsp_map(entries, "/lspServers", doc, &path, &origin, cx, diags);
                }
            }
        }
        Some(Content::Extension(content))
    })
}

/// `$schema` of an Agent Plugins v1 `plugin.json` (the one Qwen Code loads).
pub const AGENT_PLUGIN_SCHEMA: &str = "https://agent-plugins.org/schemas/1.0.0/plugin.schema.json";
/// Any Agent Plugins schema: a `plugin.json` with one is an agent plugin.
pub const AGENT_PLUGIN_SCHEMA_PREFIX: &str = "https://agent-plugins.org/schemas/";
/// `$schema` of an agent plugin's `mcp.json`.
pub const AGENT_PLUGIN_MCP_SCHEMA: &str = "https://agent-plugins.org/schemas/1.0.0/mcp.schema.json";

/// Load an Agent Plugins v1 extension, as Qwen Code does: its name from
/// `dir/plugin.json`, its MCP servers from `dir/mcp.json` (`stdio` with
/// `${PLUGIN_ROOT}`/`${PLUGIN_DATA}` and both in the environment, or
/// `streamable-http`); `data_dir` is the plugin's data directory. A server
/// Qwen Code skips is skipped with a warning; an `mcp.json` it refuses
/// disables the plugin's MCP servers, with a warning.
pub fn load_agent_plugin(
    dir: &Path,
    text: &FileText,
    read: &dyn FileReader,
    data_dir: &Path,
    cx: &LoadContext<'_>,
) -> ParsedSource {
    let path = dir.join("plugin.json");
    load_document(SourceKind::Extension, &path, text, cx, |doc, diags| {
        let fail = |diags: &mut Problems, pointer: &str, message: String| {
            diags.errors.push(Diagnostic::new(
                &path,
                doc.position(pointer),
                pointer,
                message,
            ));
        };
        let schema = doc.value.get("$schema").and_then(Value::as_str);
        if schema != Some(AGENT_PLUGIN_SCHEMA) {
            fail(
                diags,
                "/$schema",
                format!("unsupported Agent Plugins schema; expected \"{AGENT_PLUGIN_SCHEMA}\""),
            );
            return None;
        }
        let name = doc.value.get("name").and_then(Value::as_str).unwrap_or("");
        let valid = name.len() <= 64
            && !name.contains("--")
            && !name.contains("..")
            && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && name.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-');
        if !valid {
            fail(diags, "/name", "expected a name of 1-64 lowercase letters, digits, '.' or '-' (no leading, trailing or doubled separator)".to_owned());
            return None;
        }
        let name = name.to_owned();
        let mut content = ExtensionContent {
            name: name.clone(),
            dir: dir.to_path_buf(),
            ..ExtensionContent::default()
        };
        let mcp_file = dir.join("mcp.json");
        content.referenced_files.push(mcp_file.clone());
        let mcp_text = read.read(&mcp_file);
        let FileText::Text(mcp_text) = mcp_text else {
            if let Some(d) = unreadable(&mcp_file, &mcp_text) {
                diags.warnings.push(d);
            }
            return Some(Content::Extension(content));
        };
        let mcp_doc = match jsonc::parse(&mcp_text) {
            Ok(d) => d,
            Err(err) => {
                diags.warnings.push(Diagnostic::new(
                    &mcp_file,
                    Some(err.pos),
                    "",
                    format!(
                        "invalid JSON: {}; the plugin's MCP servers are disabled",
                        err.message
                    ),
                ));
                return Some(Content::Extension(content));
            }
        };
        let well_formed = mcp_doc.value.as_object().is_some_and(|o| {
            o.keys().all(|k| k == "$schema" || k == "mcpServers")
                && o.get("$schema").and_then(Value::as_str) == Some(AGENT_PLUGIN_MCP_SCHEMA)
                && o.get("mcpServers").is_some_and(Value::is_object)
        });
        if !well_formed {
            diags.warnings.push(Diagnostic::new(&mcp_file, None, "", format!("expected {{\"$schema\": \"{AGENT_PLUGIN_MCP_SCHEMA}\", \"mcpServers\": {{…}}}}; the plugin's MCP servers are disabled, as Qwen Code disables them")));
            return Some(Content::Extension(content));
        }
        let root = dir.to_string_lossy().into_owned();
        let data = data_dir.to_string_lossy().into_owned();
        let plugin_vars = |s: &str| {
            s.replace("${PLUGIN_ROOT}", &root)
                .replace("${PLUGIN_DATA}", &data)
        };
        let mut entries = Map::new();
        for (server, entry) in mcp_doc.value["mcpServers"]
            .as_object()
            .into_iter()
            .flatten()
        {
            match agent_plugin_entry(entry, dir, &plugin_vars, &root, &data) {
                Ok(e) => {
                    entries.insert(server.clone(), e);
                }
                Err(why) => {
                    let pointer = pointer_join("/mcpServers", server);
                    let d = Diagnostic::new(
                        &mcp_file,
                        mcp_doc.position(&pointer),
                        pointer,
                        format!("{why}; the server is skipped, as Qwen Code skips it"),
                    );
                    diags.dropped.push(DroppedEntry {
                        name: server.clone(),
                        spec: DroppedSpec::Mcp(Arc::new(placeholder_mcp(
                            &Map::new(),
                            Scope::Extension,
                            Some(&name),
                            "",
                        ))),
                        message: d.to_string(),
                    });
                    diags.warnings.push(d);
                }
            }
        }
        let ext_cx = ExtCx {
            name: &name,
            vars: &BTreeMap::new(),
        };
        content.mcp_servers = build_mcp_map(
            entries,
            "/mcpServers",
            &mcp_doc,
            &mcp_file,
            Scope::Extension,
            Some(&ext_cx),
            cx,
            diags,
        );
        Some(Content::Extension(content))
    })
}

/// One agent-plugin MCP server as the Qwen Code entry it becomes.
fn agent_plugin_entry(
    entry: &Value,
    dir: &Path,
    vars: &dyn Fn(&str) -> String,
    root: &str,
    data: &str,
) -> Result<Value, String> {
    let obj = entry
        .as_object()
        .ok_or("expected an object with a string \"type\"")?;
    let only = |fields: &[&str]| match obj.keys().find(|k| !fields.contains(&k.as_str())) {
        Some(k) => Err(format!("unknown field \"{k}\"")),
        None => Ok(()),
    };
    match obj.get("type").and_then(Value::as_str) {
        Some("stdio") => {
            only(&["type", "command", "args", "env", "cwd"])?;
            let command = obj
                .get("command")
                .and_then(Value::as_str)
                .filter(|c| !c.is_empty())
                .ok_or("a stdio command must be a non-empty string")?;
            let command = if !command.contains('/') {
                command.to_owned()
            } else if let Some(rel) = command.strip_prefix("./") {
                dir.join(rel).to_string_lossy().into_owned()
            } else {
                return Err(
                    "a stdio command must be a bare name or a ./ path inside the plugin".to_owned(),
                );
            };
            let args: Vec<Value> = match obj.get("args") {
                None => Vec::new(),
                Some(Value::Array(a)) if a.iter().all(Value::is_string) => a
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|s| Value::String(vars(s)))
                    .collect(),
                Some(_) => return Err("args must be an array of strings".to_owned()),
            };
            let mut env = Map::new();
            match obj.get("env") {
                None => {}
                Some(Value::Object(e)) if e.values().all(Value::is_string) => {
                    for (k, v) in e {
                        if k == "PLUGIN_ROOT" || k == "PLUGIN_DATA" {
                            return Err(format!(
                                "env cannot override the reserved variable \"{k}\""
                            ));
                        }
                        env.insert(
                            k.clone(),
                            Value::String(vars(v.as_str().unwrap_or_default())),
                        );
                    }
                }
                Some(_) => return Err("env values must be strings".to_owned()),
            }
            env.insert("PLUGIN_ROOT".into(), Value::String(root.to_owned()));
            env.insert("PLUGIN_DATA".into(), Value::String(data.to_owned()));
            let cwd = obj
                .get("cwd")
                .map_or(Some("${PLUGIN_ROOT}"), Value::as_str)
                .ok_or("cwd must be a string")?;
            let cwd = if let Some(rel) = cwd.strip_prefix("./") {
                dir.join(rel).to_string_lossy().into_owned()
            } else if cwd == "./"
                || cwd.starts_with("${PLUGIN_ROOT}")
                || cwd.starts_with("${PLUGIN_DATA}")
            {
                vars(cwd)
            } else {
                return Err("cwd must be a ./, ${PLUGIN_ROOT} or ${PLUGIN_DATA} path".to_owned());
            };
            Ok(serde_json::json!({"command": command, "args": args, "env": env, "cwd": cwd}))
        }
        Some("streamable-http") => {
            only(&["type", "url", "headers"])?;
            let url = obj
                .get("url")
                .and_then(Value::as_str)
                .filter(|u| !u.is_empty())
                .ok_or("a streamable-http url must be a non-empty string")?;
            let mut e = serde_json::json!({"httpUrl": url});
            match obj.get("headers") {
                None => {}
                Some(h @ Value::Object(m)) if m.values().all(Value::is_string) => {
                    e["headers"] = h.clone();
                }
                Some(_) => return Err("headers must be an object of strings".to_owned()),
            }
            Ok(e)
        }
        Some("sse") => Err("the legacy SSE transport is not supported by Agent Plugins".to_owned()),
        Some(other) => Err(format!("unsupported MCP transport \"{other}\"")),
        None => Err("expected an object with a string \"type\"".to_owned()),
    }
}

// ---------------------------------------------------------------------------
// Reloading an edit confined to one entry
//
// A hot reload of a large file usually changes one server. If the bytes that
// differ from the previous text all lie inside one entry's value, and the new
// bytes there are exactly one JSON value, the new text is the previous
// document with that value replaced: the text around it is the same, and a
// complete value in the place of a value leaves the parse of the rest as it
// was. So that entry alone is parsed, schema-checked and built, and every
// other entry is kept as loaded. Anything else — an edit outside the
// entries, across two of them, a comment inside the edited part, an entry
// with a problem — falls back to the full load, which also reports problems
// with their positions.

/// Where each entry of a source's server map is in the text it was loaded
/// from (byte ranges of the entry values).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntrySpans {
    /// `(start, end, name)` sorted by `start`: entry `name` is `text[start..end]`.
    spans: Vec<(usize, usize, Arc<str>)>,
}

#[derive(Deserialize)]
struct McpServersRaw<'a> {
    #[serde(rename = "mcpServers", borrow, default)]
    servers: Option<BTreeMap<String, &'a serde_json::value::RawValue>>,
}

/// The entry spans of `text` for a source of `kind` whose entries can be
/// reloaded one by one (settings layers, `.mcp.json`, `.lsp.json`); `None`
/// for other sources and for text serde_json does not read.
pub fn entry_spans(kind: SourceKind, text: &FileText) -> Option<EntrySpans> {
    let FileText::Text(text) = text else {
        return None;
    };
    let bom = if text.starts_with('\u{FEFF}') { 3 } else { 0 };
    let body = jsonc::blank_comments(&text[bom..])?;
    let raw: BTreeMap<String, &serde_json::value::RawValue> = match kind {
        SourceKind::LspJson => serde_json::from_str(&body).ok()?,
        SourceKind::ProjectMcpJson
        | SourceKind::SystemDefaults
        | SourceKind::UserSettings
        | SourceKind::WorkspaceSettings
        | SourceKind::SystemSettings => {
            serde_json::from_str::<McpServersRaw<'_>>(&body)
                .ok()?
                .servers?
        }
        _ => return None,
    };
    let base = body.as_ptr() as usize;
    let mut spans: Vec<(usize, usize, Arc<str>)> = raw
        .into_iter()
        // `$schema`-like keys are not servers in every map: never reloaded alone.
        .filter(|(name, _)| !name.starts_with('$'))
        .map(|(name, value)| {
            let start = value.get().as_ptr() as usize - base + bom;
            (start, start + value.get().len(), Arc::from(name))
        })
        .collect();
    spans.sort();
    Some(EntrySpans { spans })
}

/// `previous` (loaded strictly from `old_text`, valid) after the edit that
/// turned `old_text` into `new_text`, when that edit is confined to one
/// entry which is valid on its own — with the spans of `new_text`. `None`:
/// load `new_text` in full.
pub fn reload_edited_entry(
    previous: &ParsedSource,
    spans: &EntrySpans,
    old_text: &str,
    new_text: &str,
    cx: &LoadContext<'_>,
) -> Option<(ParsedSource, EntrySpans)> {
    if cx.mode != LoadMode::Strict
        || previous.state != SourceState::Valid
        || previous.has_findings()
    {
        return None;
    }
    let (old, new) = (old_text.as_bytes(), new_text.as_bytes());
    let prefix = common_prefix(old, new);
    let suffix = common_suffix(&old[prefix..], &new[prefix..]);
    let (old_end, new_end) = (old.len() - suffix, new.len() - suffix);
    let at = spans
        .spans
        .partition_point(|(start, _, _)| *start <= prefix);
    let (start, end, name) = spans.spans.get(at.checked_sub(1)?)?;
    if old_end > *end {
        return None;
    }
    // The entry's new value: what replaced old_text[start..end].
    let entry_end = end - old_end + new_end;
    let entry_text = new_text.get(*start..entry_end)?;
    let mut value: Value = serde_json::from_str(entry_text).ok()?;
    // The value itself, without the whitespace serde_json allowed around it.
    let value_start = start + (entry_text.len() - entry_text.trim_start().len());
    let value_end = entry_end - (entry_text.len() - entry_text.trim_end().len());
    integral_numbers_as_integers(&mut value);
    let one = Map::from_iter([(name.to_string(), value)]);

    let content = match &previous.content {
        Content::Settings(settings) => Content::Settings(SettingsContent {
            mcp_servers: rebuild_mcp_entry(
                &settings.mcp_servers,
                one,
                &previous.path,
                settings_scope(previous.kind),
                cx,
            )?,
            mcp_allowed: settings.mcp_allowed.clone(),
            mcp_excluded: settings.mcp_excluded.clone(),
            mcp_server_command: settings.mcp_server_command.clone(),
            folder_trust_enabled: settings.folder_trust_enabled,
            lsp_require_trusted_workspace: settings.lsp_require_trusted_workspace,
            lsp_allowed: settings.lsp_allowed.clone(),
            lsp_excluded: settings.lsp_excluded.clone(),
        }),
        Content::McpServers(servers) => Content::McpServers(rebuild_mcp_entry(
            servers,
            one,
            &previous.path,
            Scope::Project,
            cx,
        )?),
        Content::LspServers(servers) => {
            let origin = LspOrigin::Workspace;
            let built = build_lsp_entries(&previous.path, "", &origin, cx, (one, Coverage::Some));
            Content::LspServers(replace_entries(servers, built)?)
        }
        _ => return None,
    };
    let delta = new_end as isize - old_end as isize;
    let shifted = spans
        .spans
        .iter()
        .map(|(s, e, n)| {
            if s == start {
                return Some((value_start, value_end, n.clone()));
            }
            let shift = |x: usize| {
                if x >= *end {
                    x.checked_add_signed(delta)
                } else {
                    Some(x)
                }
            };
            Some((shift(*s)?, shift(*e)?, n.clone()))
        })
        .collect::<Option<Vec<_>>>()?;
    let parsed = ParsedSource {
        kind: previous.kind,
        path: previous.path.clone(),
        state: SourceState::Valid,
        diagnostics: Vec::new(),
        warnings: Vec::new(),
        dropped: Vec::new(),
        content,
    };
    Some((parsed, EntrySpans { spans: shifted }))
}

/// Length of the longest common prefix (compared a block at a time).
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 128;
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + BLOCK <= n && a[i..i + BLOCK] == b[i..i + BLOCK] {
        i += BLOCK;
    }
    i + a[i..n]
        .iter()
        .zip(&b[i..n])
        .take_while(|(x, y)| x == y)
        .count()
}

/// Length of the longest common suffix (compared a block at a time).
fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 128;
    let n = a.len().min(b.len());
    let (a, b) = (&a[a.len() - n..], &b[b.len() - n..]);
    let mut k = 0;
    while k + BLOCK <= n && a[n - k - BLOCK..n - k] == b[n - k - BLOCK..n - k] {
        k += BLOCK;
    }
    k + a[..n - k]
        .iter()
        .rev()
        .zip(b[..n - k].iter().rev())
        .take_while(|(x, y)| x == y)
        .count()
}

/// `servers` with the one MCP entry in `one` checked and built again;
/// `None` when it has anything to report.
fn rebuild_mcp_entry(
    servers: &McpServers,
    one: Map<String, Value>,
    path: &Path,
    scope: Scope,
    cx: &LoadContext<'_>,
) -> Option<McpServers> {
    let place = Place {
        path,
        pointer: "/mcpServers",
        scope,
    };
    replace_entries(
        servers,
        build_mcp_entries(place, None, cx, (one, Coverage::Some)),
    )
}

/// `servers` with the built entries replacing theirs; `None` if one has
/// anything to report (the full load reports it with positions).
fn replace_entries<T>(
    servers: &Arc<BTreeMap<String, Arc<T>>>,
    built: Vec<(String, memo::Built<T>)>,
) -> Option<Arc<BTreeMap<String, Arc<T>>>> {
    let mut out = BTreeMap::clone(servers);
    for (name, outcome) in built {
        if !outcome.is_clean() {
            return None;
        }
        match &outcome.result {
            Ok(spec) => out.insert(name, spec.clone()),
            Err(_) => return None,
        };
    }
    Some(Arc::new(out))
}

// ---------------------------------------------------------------------------
// Shared machinery

macro_rules! validator {
    ($name:ident, $schema:expr) => {
        static $name: LazyLock<SchemaValidator> = LazyLock::new(|| {
            SchemaValidator::new(&$schema).expect("generated schemas are valid JSON Schema")
        });
    };
}

validator!(SETTINGS, schemas::settings());
validator!(MCP_JSON, schemas::mcp_json());
validator!(LSP_JSON, schemas::lsp_json());
validator!(EXTENSION, schemas::extension());
validator!(APPROVALS, schemas::approvals());
validator!(TRUSTED_FOLDERS, schemas::trusted_folders());
validator!(MCP_SERVERS_MAP, schemas::mcp_servers_map());
validator!(MCP_ENTRY, schemas::mcp_server_entry());
validator!(LSP_ENTRY, schemas::lsp_server_entry());

/// Read → parse → `build`, turning the outcome into a `ParsedSource`.
fn load_document(
    kind: SourceKind,
    path: &Path,
    text: &FileText,
    cx: &LoadContext<'_>,
    build: impl FnOnce(&mut Document, &mut Problems) -> Option<Content>,
) -> ParsedSource {
    let text = match text {
        FileText::Absent => return ParsedSource::absent(kind, path),
        FileText::Text(text) => text,
        other => {
            return ParsedSource::invalid(
                kind,
                path,
                unreadable(path, other).into_iter().collect(),
            );
        }
    };
    let mut doc = match jsonc::parse(text) {
        Ok(doc) => doc,
        Err(err) => {
            return ParsedSource::invalid(
                kind,
                path,
                vec![Diagnostic::new(
                    path,
                    Some(err.pos),
                    "",
                    format!("invalid JSON: {}", err.message),
                )],
            );
        }
    };
    let mut problems = Problems::default();
    duplicate_key_warnings(&doc, path, &mut problems);
    let content = build(&mut doc, &mut problems);
    let Problems {
        errors: mut diags,
        mut warnings,
        dropped,
    } = problems;
    for list in [&mut diags, &mut warnings] {
        list.sort_by(|a, b| {
            (a.file.clone(), a.line, a.column, a.pointer.clone()).cmp(&(
                b.file.clone(),
                b.line,
                b.column,
                b.pointer.clone(),
            ))
        });
        list.dedup();
    }
    let loaded = |state, content| ParsedSource {
        kind,
        path: path.to_path_buf(),
        state,
        diagnostics: diags.clone(),
        warnings: warnings.clone(),
        dropped: dropped.clone(),
        content,
    };
    match content {
        Some(content) if diags.is_empty() => loaded(SourceState::Valid, content),
        Some(content) if cx.mode == LoadMode::Lenient => loaded(SourceState::Invalid, content),
        _ => ParsedSource {
            warnings,
            ..ParsedSource::invalid(kind, path, diags)
        },
    }
}

/// A warning for every key written twice in one object of `doc`.
fn duplicate_key_warnings(doc: &Document, path: &Path, diags: &mut Problems) {
    for (pos, key) in doc.duplicate_keys() {
        diags.warnings.push(Diagnostic::new(
            path,
            Some(*pos),
            "",
            format!("duplicate key \"{key}\": the last one is used, as in Qwen Code"),
        ));
    }
}

/// Schema-check the document outside its server entries (the children of
/// `entry_maps`); returns the value to build from, taken out of `doc` (which
/// keeps its positions). Entries are checked one by one when they are built,
/// after the coercions Qwen Code applies ([`crate::lenient`]), so an entry's
/// problem never rejects the rest. `None` when the source must be rejected
/// whole (a problem outside every entry).
fn checked_value(
    doc: &mut Document,
    validator: &SchemaValidator,
    path: &Path,
    entry_maps: &[&str],
    diags: &mut Problems,
) -> Option<Value> {
    let mut held: Vec<(&str, Map<String, Value>)> = Vec::new();
    for map in entry_maps {
        if let Some(Value::Object(obj)) = doc.value.pointer_mut(map) {
            let entries = std::mem::take(obj);
            for (name, entry) in &entries {
                // `$schema` and the like are document keys, not servers.
                let stand_in = if map.is_empty() && name.starts_with('$') {
                    entry.clone()
                } else {
                    Value::Object(Map::new())
                };
                obj.insert(name.clone(), stand_in);
            }
            held.push((map, entries));
        }
    }
    let violations = validator.check(doc);
    for (map, entries) in held {
        if let Some(Value::Object(obj)) = doc.value.pointer_mut(map) {
            *obj = entries;
        }
    }
    let mut value = std::mem::take(&mut doc.value);
    integral_numbers_as_integers(&mut value);
    if violations.is_empty() {
        Some(value)
    } else {
        diags
            .errors
            .extend(violations.into_iter().map(|v| v.into_diagnostic(path)));
        None
    }
}

/// Numbers written with a zero fraction (`1.0`, `5e3`) become integers, as
/// JSON Schema (which already accepted them as integers) and JavaScript
/// (whose `JSON.parse` cannot tell `1.0` from `1`) see them; otherwise the
/// typed fields (`timeout`, ports, counts) would reject what validation let
/// through — and reject the whole source, without a position.
fn integral_numbers_as_integers(value: &mut Value) {
    match value {
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            if f.fract() == 0.0 {
                if (0.0..u64::MAX as f64).contains(&f) {
                    *value = Value::from(f as u64);
                } else if (i64::MIN as f64..0.0).contains(&f) {
                    *value = Value::from(f as i64);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_numbers_as_integers),
        Value::Object(map) => map.values_mut().for_each(integral_numbers_as_integers),
        _ => {}
    }
}

fn typed<T: DeserializeOwned>(value: &Value, path: &Path, diags: &mut Problems) -> Option<T> {
    match T::deserialize(value) {
        Ok(v) => Some(v),
        Err(err) => {
            diags
                .errors
                .push(Diagnostic::new(path, None, "", err.to_string()));
            None
        }
    }
}

fn read_referenced(
    file: &Path,
    read: &dyn FileReader,
    diags: &mut Problems,
    key_pointer: &str,
    manifest_doc: &Document,
    manifest_path: &Path,
) -> Option<Document> {
    let text = match read.read(file) {
        FileText::Text(t) => t,
        FileText::Absent => {
            diags.errors.push(Diagnostic::new(
                manifest_path,
                manifest_doc.position(key_pointer),
                key_pointer,
                format!("the referenced file {} does not exist", file.display()),
            ));
            return None;
        }
        other => {
            diags.errors.extend(unreadable(file, &other));
            return None;
        }
    };
    match jsonc::parse(&text) {
        Ok(doc) => {
            duplicate_key_warnings(&doc, file, diags);
            Some(doc)
        }
        Err(err) => {
            diags.errors.push(Diagnostic::new(
                file,
                Some(err.pos),
                "",
                format!("invalid JSON: {}", err.message),
            ));
            None
        }
    }
}

/// The raw `name → entry` map of an LSP servers object, skipping `$schema`-like keys.
fn lsp_entries(
    value: Value,
    pointer: &str,
    path: &Path,
    diags: &mut Problems,
) -> Option<Map<String, Value>> {
    let Value::Object(mut obj) = value else {
        diags.errors.push(Diagnostic::new(
            path,
            None,
            pointer,
            "expected an object mapping server names to language servers",
        ));
        return None;
    };
    obj.retain(|k, _| !k.starts_with('$'));
    Some(obj)
}

/// The object at `value[key]`, taken out of `value` (absent or not an
/// object: empty — the schema check already reported a wrong type).
fn take_object(value: &mut Value, key: &str) -> Map<String, Value> {
    match value.as_object_mut().and_then(|o| o.remove(key)) {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// Every member of the object `value`, taken out of it.
fn take_all(value: &mut Value) -> Map<String, Value> {
    match std::mem::take(value) {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// Qwen Code's `recursivelyHydrateStrings`: `${name}` replaced by `vars`'s
/// value in every string (not keys), the shortest `${…}` first; an unknown
/// name stays as written.
fn hydrate_strings(value: &mut Value, vars: &BTreeMap<String, String>) {
    match value {
        Value::String(s) if s.contains("${") => {
            let mut out = String::with_capacity(s.len());
            let mut rest = s.as_str();
            while let Some(at) = rest.find("${") {
                out.push_str(&rest[..at]);
                let after = &rest[at + 2..];
                match after.find('}') {
                    Some(end) => {
                        match vars.get(&after[..end]) {
                            Some(v) => out.push_str(v),
                            None => out.push_str(&rest[at..at + 3 + end]),
                        }
                        rest = &after[end + 1..];
                    }
                    None => {
                        out.push_str(&rest[at..]);
                        rest = "";
                    }
                }
            }
            out.push_str(rest);
            *s = out;
        }
        Value::Array(items) => items.iter_mut().for_each(|v| hydrate_strings(v, vars)),
        Value::Object(map) => map.values_mut().for_each(|v| hydrate_strings(v, vars)),
        _ => {}
    }
}

/// Extension context for expansion and provenance.
struct ExtCx<'a> {
    name: &'a str,
    vars: &'a BTreeMap<String, String>,
}

/// Who controls the file an entry of `scope` comes from.
fn origin_of(scope: Scope) -> lenient::Origin {
    if scope.is_gated() || scope == Scope::Workspace {
        lenient::Origin::Workspace
    } else {
        lenient::Origin::Trusted
    }
}

/// Build every MCP entry of a map (through the memo, if any); problems
/// become diagnostics (see [`collect_built`]).
#[allow(clippy::too_many_arguments)]
fn build_mcp_map(
    entries: Map<String, Value>,
    map_pointer: &str,
    doc: &Document,
    path: &Path,
    scope: Scope,
    ext: Option<&ExtCx<'_>>,
    cx: &LoadContext<'_>,
    diags: &mut Problems,
) -> McpServers {
    let place = Place {
        path,
        pointer: map_pointer,
        scope,
    };
    let built = build_mcp_entries(place, ext, cx, (entries, Coverage::WholeMap));
    Arc::new(collect_built(built, map_pointer, doc, path, diags))
}

/// Build MCP entries of the map at `place` through the memo (extension
/// entries afresh: their variables are not part of its context).
fn build_mcp_entries(
    place: Place<'_>,
    ext: Option<&ExtCx<'_>>,
    cx: &LoadContext<'_>,
    entries: (Map<String, Value>, Coverage),
) -> Vec<(String, memo::Built<McpServerSpec>)> {
    let vars = Vars {
        env: cx.env,
        extension: ext.map(|e| e.vars),
    };
    let scope = place.scope;
    let memo = if ext.is_none() { cx.memo } else { None };
    memo::build_entries(memo, place, cx.workspace, cx.env, entries, |_, literal| {
        mcp_outcome(literal, &vars, scope, ext.map(|e| e.name), cx.workspace)
    })
}

/// A spec type whose entries can be dropped with a row in status.
trait Droppable: Sized {
    fn dropped(spec: Arc<Self>) -> DroppedSpec;
}

impl Droppable for McpServerSpec {
    fn dropped(spec: Arc<Self>) -> DroppedSpec {
        DroppedSpec::Mcp(spec)
    }
}

impl Droppable for LspServerSpec {
    fn dropped(spec: Arc<Self>) -> DroppedSpec {
        DroppedSpec::Lsp(spec)
    }
}

/// The built specs by name. Warnings become warnings; an entry without a
/// spec is dropped (with a row in status), its problems becoming warnings
/// (skipped) or errors (invalid: a strict load rejects the source).
fn collect_built<T: Droppable>(
    built: Vec<(String, memo::Built<T>)>,
    map_pointer: &str,
    doc: &Document,
    path: &Path,
    diags: &mut Problems,
) -> BTreeMap<String, Arc<T>> {
    let mut out = BTreeMap::new();
    for (name, outcome) in built {
        let pointer = pointer_join(map_pointer, &name);
        let place = |list: &FieldErrors| -> Vec<Diagnostic> {
            list.iter()
                .map(|(field, message)| {
                    let p = format!("{pointer}{field}");
                    Diagnostic::new(path, doc.position(&p), p, message.clone())
                })
                .collect()
        };
        diags.warnings.extend(place(&outcome.warnings));
        match &outcome.result {
            Ok(spec) => {
                out.insert(name, spec.clone());
            }
            Err(failed) => {
                let found = place(&failed.problems);
                diags.dropped.push(DroppedEntry {
                    name: name.clone(),
                    spec: T::dropped(failed.placeholder.clone()),
                    message: found
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("\n"),
                });
                if failed.skipped {
                    diags.warnings.extend(found);
                } else {
                    diags.errors.extend(found);
                }
            }
        }
    }
    out
}

/// `value` expanded; references that stay literal become warnings at `field`.
fn expand_field(
    value: &Option<String>,
    field: &str,
    vars: &Vars<'_>,
    warnings: &mut FieldErrors,
) -> Option<String> {
    let v = value.as_ref()?;
    Some(expand_one(v, field, vars, warnings))
}

fn expand_one(v: &str, field: &str, vars: &Vars<'_>, warnings: &mut FieldErrors) -> String {
    let (out, problems) = expand::expand(v, vars);
    warnings.extend(problems.iter().map(|p| (field.to_owned(), p.to_string())));
    out
}

fn expand_list(
    list: &Option<Vec<String>>,
    field: &str,
    vars: &Vars<'_>,
    warnings: &mut FieldErrors,
) -> Option<Vec<String>> {
    let list = list.as_ref()?;
    Some(
        list.iter()
            .enumerate()
            .map(|(i, item)| expand_one(item, &format!("{field}/{i}"), vars, warnings))
            .collect(),
    )
}

fn expand_map(
    map: &Option<BTreeMap<String, String>>,
    field: &str,
    vars: &Vars<'_>,
    warnings: &mut FieldErrors,
) -> Option<BTreeMap<String, String>> {
    let map = map.as_ref()?;
    Some(
        map.iter()
            .map(|(k, v)| {
                let at = pointer_join(field, k);
                (k.clone(), expand_one(v, &at, vars, warnings))
            })
            .collect(),
    )
}

fn is_http_url(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    (lower.starts_with("http://") || lower.starts_with("https://")) && s.len() > "http://".len()
}

/// Build one MCP entry as written: Qwen Code's approval hash of it, the
/// coercions Qwen Code applies ([`crate::lenient`]), validation of what
/// remains, then the spec.
pub fn mcp_outcome(
    literal: &Value,
    vars: &Vars<'_>,
    scope: Scope,
    extension_name: Option<&str>,
    workspace: &Path,
) -> Outcome<McpServerSpec> {
    let env = |name: &str| vars.env.get(name).cloned();
    let approval_hash = qwen::approval_hash(literal, scope, &env);
    let empty = Map::new();
    let raw = literal.as_object().unwrap_or(&empty);
    let failed = |skipped, problems, warnings| Outcome {
        result: Err(Failed {
            skipped,
            problems,
            placeholder: Arc::new(placeholder_mcp(raw, scope, extension_name, &approval_hash)),
        }),
        warnings,
    };
    if !literal.is_object() {
        let message = format!(
            "expected an object describing the server, found {}; the entry is skipped",
            crate::validate::describe(literal)
        );
        return failed(true, vec![(String::new(), message)], Vec::new());
    }
    let coerced = lenient::mcp_entry(raw, origin_of(scope));
    let place = |list: FieldErrors| -> FieldErrors {
        list.into_iter()
            .map(|(p, m)| (coerced.written_pointer(&p), m))
            .collect()
    };
    let mut warnings = coerced.warnings.clone();
    if let Some(skip) = coerced.skip.clone() {
        return failed(true, vec![skip], warnings);
    }
    let value = Value::Object(coerced.value.clone());
    // `is_valid` is cheap; the explanation is only needed for a problem.
    let violations = if MCP_ENTRY.is_valid(&value) {
        Vec::new()
    } else {
        MCP_ENTRY.violations(&value)
    };
    if !violations.is_empty() {
        return failed(false, place(violations), warnings);
    }
    let entry = match McpServerEntry::deserialize(&value) {
        Ok(entry) => entry,
        Err(e) => return failed(false, vec![(String::new(), e.to_string())], warnings),
    };
    let mut build_warnings = FieldErrors::new();
    let built = build_mcp(&entry, vars, workspace, &mut build_warnings);
    warnings.extend(place(build_warnings));
    let built = built.map_err(place);
    match built {
        Ok(spec) => Outcome {
            result: Ok(Arc::new(McpServerSpec {
                scope,
                extension_name: extension_name.map(str::to_owned),
                approval_hash: approval_hash.clone(),
                ..spec
            })),
            warnings,
        },
        Err(errors) => failed(false, errors, warnings),
    }
}

/// The spec of an MCP entry that could not be built: what can be read of it.
fn placeholder_mcp(
    raw: &Map<String, Value>,
    scope: Scope,
    extension_name: Option<&str>,
    approval_hash: &str,
) -> McpServerSpec {
    let text = |k: &str| raw.get(k).and_then(Value::as_str).map(str::to_owned);
    let http = raw.get("type").and_then(Value::as_str) == Some("http");
    let (transport, url, http_url) = match (text("httpUrl"), text("url")) {
        (Some(h), _) => (McpTransport::Http, None, Some(h)),
        (None, Some(u)) if http => (McpTransport::Http, None, Some(u)),
        (None, Some(u)) => (McpTransport::Sse, Some(u), None),
        (None, None) => (McpTransport::Stdio, None, None),
    };
    McpServerSpec {
        transport,
        scope,
        command: text("command"),
        args: None,
        env: None,
        cwd: None,
        url,
        http_url,
        headers: None,
        timeout: None,
        trust: None,
        include_tools: None,
        exclude_tools: None,
        description: text("description"),
        disabled: raw.get("disabled").and_then(Value::as_bool),
        oauth: None,
        qwen: QwenMcpFields::default(),
        extension_name: extension_name.map(str::to_owned),
        as_written: Default::default(),
        config_hash: hash_value(&Value::Object(raw.clone())),
        approval_hash: approval_hash.to_owned(),
    }
}

/// Build one MCP server spec from its typed entry (coerced and validated);
/// `scope`, `extensionName` and `approvalHash` are the caller's to set.
/// Errors are (field pointer relative to the entry, message).
pub fn build_mcp(
    entry: &McpServerEntry,
    vars: &Vars<'_>,
    workspace: &Path,
    warnings: &mut FieldErrors,
) -> Result<McpServerSpec, FieldErrors> {
    let mut errors = FieldErrors::new();
    let command = expand_field(&entry.command, "/command", vars, warnings);
    let args = expand_list(&entry.args, "/args", vars, warnings);
    let env = expand_map(&entry.env, "/env", vars, warnings);
    let cwd = expand_field(&entry.cwd, "/cwd", vars, warnings);
    let url = expand_field(&entry.url, "/url", vars, warnings);
    let http_url = expand_field(&entry.http_url, "/httpUrl", vars, warnings);
    let headers = expand_map(&entry.headers, "/headers", vars, warnings);

    // The transport, in Qwen Code's order: httpUrl, then url (SSE), then
    // command — the first one written non-empty (`type` was folded in by
    // the coercions).
    let written = |v: &Option<String>| v.as_deref().is_some_and(|s| !s.is_empty());
    let (transport, url, http_url) = if written(&entry.http_url) {
        (McpTransport::Http, None, http_url)
    } else if written(&entry.url) {
        (McpTransport::Sse, url, None)
    } else {
        (McpTransport::Stdio, None, None)
    };
    if transport == McpTransport::Stdio
        && let Some(c) = &command
        && c.trim().is_empty()
    {
        errors.push((
            "/command".to_owned(),
            "expected a non-empty command".to_owned(),
        ));
    }
    for (field, value) in [("/url", &url), ("/httpUrl", &http_url)] {
        if let Some(u) = value
            && !is_http_url(u)
        {
            // As written, never the expanded value (it may hold a secret).
            let written = if field == "/url" {
                &entry.url
            } else {
                &entry.http_url
            };
            let shown = redact::redact_url(written.as_deref().unwrap_or(u));
            errors.push((
                field.to_owned(),
                format!("expected an http:// or https:// URL, found \"{shown}\""),
            ));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }

    // Only the fields of the chosen transport take part in the connection.
    let (command, args, env, cwd) = if transport == McpTransport::Stdio {
        (command, args, env, cwd)
    } else {
        (None, None, None, None)
    };
    let headers = if transport == McpTransport::Stdio {
        None
    } else {
        headers
    };

    // Explicit defaults fingerprint like absent fields: writing `"args": []`
    // or the default timeout restarts nothing.
    let ws = workspace.to_string_lossy();
    let default_cwd = |c: &String| c.is_empty() || c == "." || c == "./" || *c == ws;
    let mut fingerprint = serde_json::json!({
        "transport": transport,
        "command": command,
        "args": args.as_ref().filter(|a| !a.is_empty()),
        "cwd": cwd.as_ref().filter(|c| !default_cwd(c)),
        "env": env.as_ref().filter(|e| !e.is_empty()),
        "url": url,
        "httpUrl": http_url,
        "headers": headers.as_ref().filter(|h| !h.is_empty()),
        "timeout": entry.timeout.filter(|t| *t != DEFAULT_MCP_TIMEOUT_MS),
        "oauth": entry.oauth,
    });
    // Qwen Code's fields that change the connection, only when written (so
    // that every other fingerprint stays what it was).
    let qwen = QwenMcpFields {
        auth_provider_type: entry.auth_provider_type.clone(),
        target_audience: entry.target_audience.clone(),
        target_service_account: entry.target_service_account.clone(),
        always_load_tools: entry.always_load_tools,
        version_negotiation: entry.version_negotiation.clone(),
        discovery_timeout_ms: entry.discovery_timeout_ms,
    };
    for (key, value) in [
        ("authProviderType", &qwen.auth_provider_type),
        ("targetAudience", &qwen.target_audience),
        ("targetServiceAccount", &qwen.target_service_account),
        ("versionNegotiation", &qwen.version_negotiation),
    ] {
        if let (Some(v), Value::Object(map)) = (value, &mut fingerprint) {
            map.insert(key.to_owned(), Value::String(v.clone()));
        }
    }
    let config_hash = hash_value(&fingerprint);
    Ok(McpServerSpec {
        transport,
        scope: Scope::User,
        command,
        args,
        env,
        cwd,
        url,
        http_url,
        headers,
        timeout: entry.timeout,
        trust: entry.trust,
        include_tools: entry.include_tools.clone(),
        exclude_tools: entry.exclude_tools.clone(),
        description: entry.description.clone(),
        disabled: entry.disabled,
        oauth: entry.oauth.clone(),
        qwen,
        extension_name: None,
        config_hash,
        approval_hash: String::new(),
        as_written: redact::mcp_as_written(entry, transport),
    })
}

/// Where an LSP entry comes from (decides trust and path resolution).
enum LspOrigin<'a> {
    Workspace,
    Extension {
        name: &'a str,
        dir: &'a Path,
        vars: &'a BTreeMap<String, String>,
    },
}

fn build_lsp_map(
    entries: Map<String, Value>,
    map_pointer: &str,
    doc: &Document,
    path: &Path,
    origin: &LspOrigin<'_>,
    cx: &LoadContext<'_>,
    diags: &mut Problems,
) -> LspServers {
    let built = build_lsp_entries(path, map_pointer, origin, cx, (entries, Coverage::WholeMap));
    Arc::new(collect_built(built, map_pointer, doc, path, diags))
}

/// Build LSP entries of the map at `path`/`pointer` through the memo
/// (extension entries afresh: their variables are not part of its context).
fn build_lsp_entries(
    path: &Path,
    pointer: &str,
    origin: &LspOrigin<'_>,
    cx: &LoadContext<'_>,
    entries: (Map<String, Value>, Coverage),
) -> Vec<(String, memo::Built<LspServerSpec>)> {
    let (scope, memo) = match origin {
        LspOrigin::Workspace => (Scope::Workspace, cx.memo),
        LspOrigin::Extension { .. } => (Scope::Extension, None),
    };
    let place = Place {
        path,
        pointer,
        scope,
    };
    memo::build_entries(memo, place, cx.workspace, cx.env, entries, |name, raw| {
        lsp_outcome(name, raw, origin, cx)
    })
}

/// Build one LSP entry as written: the coercions Qwen Code's `.lsp.json`
/// loader applies, validation of what remains, then the spec. An entry that
/// cannot be started (not an object, no command, no socket) is an error, as
/// in Qwen Code's strict reload of `.lsp.json` (its cold start skips it: a
/// lenient load drops it, with a row).
fn lsp_outcome(
    name: &str,
    literal: &Value,
    origin: &LspOrigin<'_>,
    cx: &LoadContext<'_>,
) -> Outcome<LspServerSpec> {
    let failed = |skipped, problems, warnings| Outcome {
        result: Err(Failed {
            skipped,
            problems,
            placeholder: Arc::new(placeholder_lsp(name, literal, origin, cx)),
        }),
        warnings,
    };
    let Value::Object(raw) = literal else {
        let message = format!(
            "expected an object describing the language server, found {}",
            crate::validate::describe(literal)
        );
        return failed(false, vec![(String::new(), message)], Vec::new());
    };
    let lenient_origin = match origin {
        LspOrigin::Workspace => lenient::Origin::Workspace,
        LspOrigin::Extension { .. } => lenient::Origin::Trusted,
    };
    let coerced = lenient::lsp_entry(raw, lenient_origin);
    let place = |list: FieldErrors| -> FieldErrors {
        list.into_iter()
            .map(|(p, m)| (coerced.written_pointer(&p), m))
            .collect()
    };
    let mut warnings = coerced.warnings.clone();
    let value = Value::Object(coerced.value.clone());
    // `is_valid` is cheap; the explanation is only needed for a problem.
    let violations = if LSP_ENTRY.is_valid(&value) {
        Vec::new()
    } else {
        LSP_ENTRY.violations(&value)
    };
    if !violations.is_empty() {
        return failed(false, place(violations), warnings);
    }
    let entry = match LspServerEntry::deserialize(&value) {
        Ok(entry) => entry,
        Err(e) => return failed(false, vec![(String::new(), e.to_string())], warnings),
    };
    let mut build_warnings = FieldErrors::new();
    let built = build_lsp(name, &entry, origin, cx, &mut build_warnings);
    warnings.extend(place(build_warnings));
    match built {
        Ok(spec) => Outcome {
            result: Ok(Arc::new(spec)),
            warnings,
        },
        Err(mut skip) => {
            if name == "mcpServers" {
                skip = vec![(
                    String::new(),
                    "\"mcpServers\" belongs in .mcp.json (.lsp.json maps a language to a language server)".to_owned(),
                )];
            }
            failed(false, skip, warnings)
        }
    }
}

/// The spec of an LSP entry that could not be built: defaults, and the command.
fn placeholder_lsp(
    name: &str,
    literal: &Value,
    origin: &LspOrigin<'_>,
    cx: &LoadContext<'_>,
) -> LspServerSpec {
    let (scope, extension_name) = match origin {
        LspOrigin::Workspace => (Scope::Workspace, None),
        LspOrigin::Extension { name, .. } => (Scope::Extension, Some((*name).to_owned())),
    };
    let workspace_folder = cx.workspace.to_string_lossy().into_owned();
    let transport = match literal
        .get("transport")
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("tcp") => LspTransport::Tcp,
        Some("socket") => LspTransport::Socket,
        _ => LspTransport::Stdio,
    };
    LspServerSpec {
        scope,
        languages: vec![name.to_owned()],
        transport,
        command: literal
            .get("command")
            .and_then(Value::as_str)
            .map(str::to_owned),
        args: Vec::new(),
        env: BTreeMap::new(),
        socket: None,
        initialization_options: None,
        settings: None,
        extension_to_language: BTreeMap::new(),
        root_uri: file_uri(&workspace_folder),
        workspace_folder,
        startup_timeout: DEFAULT_STARTUP_TIMEOUT_MS,
        shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT_MS,
        restart_on_crash: false,
        max_restarts: DEFAULT_MAX_RESTARTS,
        trust_required: true,
        extension_name,
        as_written: Default::default(),
        config_hash: hash_value(literal),
    }
}

/// Build one language server spec from its typed entry (coerced and
/// validated). `Err`: why it cannot be started.
fn build_lsp(
    name: &str,
    entry: &LspServerEntry,
    origin: &LspOrigin<'_>,
    cx: &LoadContext<'_>,
    warnings: &mut FieldErrors,
) -> Result<LspServerSpec, FieldErrors> {
    let mut errors = FieldErrors::new();
    let (vars, scope, extension_name, base_dir) = match origin {
        LspOrigin::Workspace => (Vars::env(cx.env), Scope::Workspace, None, cx.workspace),
        LspOrigin::Extension { name, dir, vars } => (
            Vars {
                env: cx.env,
                extension: Some(vars),
            },
            Scope::Extension,
            Some((*name).to_owned()),
            *dir,
        ),
    };
    let command = expand_field(&entry.command, "/command", &vars, warnings);
    let args = expand_list(&entry.args, "/args", &vars, warnings).unwrap_or_default();
    let env = expand_map(&entry.env, "/env", &vars, warnings).unwrap_or_default();
    let command = command.filter(|c| !c.trim().is_empty());

    // Socket: `socket` string/object, else top-level host/port/path.
    let (host, port, sock_path) = match &entry.socket {
        Some(SocketField::Path(p)) => (None, None, Some(p.clone())),
        Some(SocketField::Object(o)) => (o.host.clone(), o.port, o.path.clone()),
        None => (entry.host.clone(), entry.port, entry.path.clone()),
    };
    let transport = entry.transport.unwrap_or(if command.is_some() {
        LspTransport::Stdio
    } else if port.is_some() {
        LspTransport::Tcp
    } else if sock_path.is_some() {
        LspTransport::Socket
    } else {
        LspTransport::Stdio
    });
    let socket = match transport {
        LspTransport::Stdio => {
            if command.is_none() {
                errors.push((
                    String::new(),
                    "a stdio language server needs \"command\"".to_owned(),
                ));
            }
            None
        }
        LspTransport::Tcp => match port {
            Some(port) => Some(LspSocket {
                host: Some(host.unwrap_or_else(|| "127.0.0.1".to_owned())),
                port: Some(port),
                path: None,
            }),
            None => {
                errors.push((
                    String::new(),
                    "transport \"tcp\" needs \"socket\": {\"host\": ..., \"port\": ...}".to_owned(),
                ));
                None
            }
        },
        LspTransport::Socket => match sock_path {
            Some(p) => {
                let p = expand_one(&p, "/socket", &vars, warnings);
                Some(LspSocket {
                    host: None,
                    port: None,
                    path: Some(absolute_in(base_dir, &p).to_string_lossy().into_owned()),
                })
            }
            None => {
                errors.push((
                    String::new(),
                    "transport \"socket\" needs \"socket\": {\"path\": ...} or a path string"
                        .to_owned(),
                ));
                None
            }
        },
    };

    // workspaceFolder must stay inside the workspace; outside, the
    // workspace root is used (as Qwen Code does), with a warning.
    let workspace_folder = match &entry.workspace_folder {
        None => cx.workspace.to_path_buf(),
        Some(s) if s.trim().is_empty() => cx.workspace.to_path_buf(),
        Some(s) => {
            let expanded = expand_one(s, "/workspaceFolder", &vars, warnings);
            let resolved = normalize_lexically(&absolute_in(cx.workspace, &expanded));
            let real = (cx.realpath)(&resolved);
            if resolved.starts_with(cx.workspace) && real.starts_with((cx.realpath)(cx.workspace)) {
                resolved
            } else {
                warnings.push((
                    "/workspaceFolder".to_owned(),
                    format!(
                        "workspaceFolder \"{s}\" resolves to {}, outside the workspace {}; the workspace root is used",
                        if resolved.starts_with(cx.workspace) { real.display() } else { resolved.display() },
                        cx.workspace.display()
                    ),
                ));
                cx.workspace.to_path_buf()
            }
        }
    };
    let workspace_folder = workspace_folder.to_string_lossy().into_owned();
    let default_root_uri = file_uri(&workspace_folder);
    let root_uri = match &entry.root_uri {
        None => default_root_uri,
        Some(uri) => match file_uri_path(uri) {
            Some(p) if normalize_lexically(&p).starts_with(cx.workspace) => uri.clone(),
            _ => {
                warnings.push((
                    "/rootUri".to_owned(),
                    format!(
                        "rootUri \"{uri}\" is not a file:// URI inside the workspace {}; {default_root_uri} is used",
                        cx.workspace.display()
                    ),
                ));
                default_root_uri
            }
        },
    };

    let extension_to_language: BTreeMap<String, String> = entry
        .extension_to_language
        .iter()
        .flatten()
        .filter_map(|(ext, lang)| {
            let bare = ext.trim_start_matches('.').to_lowercase();
            (!bare.is_empty()).then(|| (format!(".{bare}"), lang.clone()))
        })
        .collect();

    let trust_required = match origin {
        // The workspace cannot lower its own trust bar.
        LspOrigin::Workspace => true,
        LspOrigin::Extension { .. } => entry.trust_required.unwrap_or(true),
    };
    if !errors.is_empty() {
        return Err(errors);
    }

    let mut spec = LspServerSpec {
        scope,
        languages: entry
            .languages
            .clone()
            .unwrap_or_else(|| vec![name.to_owned()]),
        transport,
        command,
        args,
        env,
        socket,
        initialization_options: entry.initialization_options.clone(),
        settings: entry.settings.clone(),
        extension_to_language,
        workspace_folder,
        root_uri,
        startup_timeout: entry.startup_timeout.unwrap_or(DEFAULT_STARTUP_TIMEOUT_MS),
        shutdown_timeout: entry
            .shutdown_timeout
            .unwrap_or(DEFAULT_SHUTDOWN_TIMEOUT_MS),
        restart_on_crash: entry.restart_on_crash.unwrap_or(false),
        max_restarts: entry.max_restarts.unwrap_or(DEFAULT_MAX_RESTARTS),
        trust_required,
        extension_name,
        config_hash: String::new(),
        as_written: redact::lsp_as_written(entry),
    };
    spec.config_hash = lsp_config_hash(name, &spec);
    Ok(spec)
}

/// The LSP `configHash`: every normalized field (and the name), keys sorted,
/// array order kept; runtime fields and provenance excluded.
pub fn lsp_config_hash(name: &str, spec: &LspServerSpec) -> String {
    hash_value(&serde_json::json!({
        "name": name,
        "languages": spec.languages,
        "transport": spec.transport,
        "command": spec.command,
        "args": spec.args,
        "env": spec.env,
        "initializationOptions": spec.initialization_options,
        "settings": spec.settings,
        "extensionToLanguage": spec.extension_to_language,
        "workspaceFolder": spec.workspace_folder,
        "rootUri": spec.root_uri,
        "startupTimeout": spec.startup_timeout,
        "shutdownTimeout": spec.shutdown_timeout,
        "restartOnCrash": spec.restart_on_crash,
        "maxRestarts": spec.max_restarts,
        "trustRequired": spec.trust_required,
        "socket": spec.socket,
    }))
}

/// `rel` resolved against `base` (absolute paths stay as they are).
pub fn absolute_in(base: &Path, rel: &str) -> PathBuf {
    let p = Path::new(rel);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// Resolve `.` and `..` without touching the file system.
pub fn normalize_lexically(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for comp in path.components() {
        match comp {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The path of a `file://` URI (percent-decoded), if it is one.
pub fn file_uri_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    if !rest.starts_with('/') {
        return None;
    }
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    Some(PathBuf::from(String::from_utf8(out).ok()?))
}

/// `file://` URI of an absolute path (percent-encoding what URIs reserve).
pub fn file_uri(path: &str) -> String {
    let mut out = String::from("file://");
    for b in path.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn common_prefix_and_suffix_match_a_plain_scan(
            a in prop::collection::vec(0u8..3, 0..600),
            b in prop::collection::vec(0u8..3, 0..600),
            shared in prop::collection::vec(0u8..3, 0..400),
        ) {
            let (x, y) = ([&shared[..], &a, &shared].concat(), [&shared[..], &b, &shared].concat());
            let plain_prefix = x.iter().zip(&y).take_while(|(p, q)| p == q).count();
            let plain_suffix = x.iter().rev().zip(y.iter().rev()).take_while(|(p, q)| p == q).count();
            prop_assert_eq!(common_prefix(&x, &y), plain_prefix);
            prop_assert_eq!(common_suffix(&x, &y), plain_suffix);
        }
    }
}

//! Loading a settings layer (`settings.json` of the system defaults, the
//! user, the workspace or the system): its MCP servers and the gating and
//! policy keys Steward reads, after Qwen Code's migration of version-1 keys.

use std::path::Path;

use serde_json::{Map, Value};

use super::document::{SETTINGS, checked_value, load_document, take_object, typed};
use super::mcp::build_mcp_map;
use super::{Content, FileText, LoadContext, ParsedSource, SettingsContent};
use crate::desired::{TOOL_IDLE_TIMEOUT_MS, clamp_tool_idle_timeout_ms};
use crate::diagnostic::{Diagnostic, pointer_join};
use crate::formats::{SandboxSettings, SettingsFile};
use crate::resource::{Scope, SourceKind};
use crate::sandbox;

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
        if let Some(ms) = mcp.tool_idle_timeout_ms
            && !TOOL_IDLE_TIMEOUT_MS.contains(&ms)
        {
            let pointer = "/mcp/toolIdleTimeoutMs";
            diags.warnings.push(Diagnostic::new(
                path,
                doc.key_position(pointer),
                pointer.to_owned(),
                format!(
                    "{ms} is outside {}..={}: {} is used",
                    TOOL_IDLE_TIMEOUT_MS.start(),
                    TOOL_IDLE_TIMEOUT_MS.end(),
                    clamp_tool_idle_timeout_ms(ms)
                ),
            ));
        }
        let steward = file.steward.unwrap_or_default();
        let sandbox = steward.sandbox.map(Box::new);
        if let Some(settings) = &sandbox {
            if super::entries::names_custom_profile(settings.default.as_ref()) {
                let p = "/steward/sandbox/default";
                let at = Diagnostic::new(path, doc.key_position(p), p, "");
                diags.sandbox_keys.insert(String::new(), at);
            }
            let problems = sandbox_problems(settings);
            let ignored = kind == SourceKind::WorkspaceSettings;
            for (pointer, message) in problems {
                let d = Diagnostic::new(path, doc.key_position(&pointer), pointer, message);
                if ignored {
                    diags.warnings.push(d)
                } else {
                    diags.errors.push(d)
                }
            }
            if ignored {
                let pointer = "/steward/sandbox";
                diags.warnings.push(Diagnostic::new(
                    path,
                    doc.key_position(pointer),
                    pointer.to_owned(),
                    "steward.sandbox is read only from your user and system settings (a workspace cannot widen its own sandbox); ignored here".to_owned(),
                ));
            }
        }
        Some(Content::Settings(SettingsContent {
            mcp_servers,
            mcp_allowed: mcp.allowed,
            mcp_excluded: mcp.excluded,
            mcp_server_command: mcp.server_command,
            mcp_tool_idle_timeout_ms: mcp.tool_idle_timeout_ms.map(clamp_tool_idle_timeout_ms),
            folder_trust_enabled: file
                .security
                .and_then(|s| s.folder_trust)
                .and_then(|f| f.enabled),
            lsp_require_trusted_workspace: lsp.require_trusted_workspace,
            lsp_allowed: lsp.allowed,
            lsp_excluded: lsp.excluded,
            sandbox,
            secrets_require_references: steward.secrets.and_then(|s| s.require_references),
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

/// The problems of `steward.sandbox` (pointers from the file's root).
fn sandbox_problems(settings: &SandboxSettings) -> Vec<(String, String)> {
    let mut problems = Vec::new();
    if let Some(default) = &settings.default {
        for (pointer, message) in sandbox::check_field(default) {
            problems.push((format!("/steward/sandbox/default{pointer}"), message));
        }
    }
    for (name, profile) in settings.profiles.iter().flatten() {
        let at = pointer_join("/steward/sandbox/profiles", name);
        if sandbox::BUILTINS.contains(&name.as_str()) {
            problems.push((
                at.clone(),
                format!("\"{name}\" is a built-in profile; give yours another name"),
            ));
        }
        for (pointer, message) in sandbox::check_profile(profile) {
            problems.push((format!("{at}{pointer}"), message));
        }
    }
    problems
}

pub(super) fn settings_scope(kind: SourceKind) -> Scope {
    match kind {
        SourceKind::UserSettings => Scope::User,
        SourceKind::WorkspaceSettings => Scope::Workspace,
        _ => Scope::System,
    }
}

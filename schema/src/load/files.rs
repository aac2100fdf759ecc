//! Loading the single-purpose source files: the project `.mcp.json`, a
//! `--mcp-config` value (file or inline JSON), the workspace `.lsp.json`,
//! the trusted-folders file and the approvals file.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::document::{
    APPROVALS, LSP_JSON, MCP_JSON, MCP_SERVERS_MAP, TRUSTED_FOLDERS, checked_value, load_document,
    take_all, take_object, typed,
};
use super::lsp::{LspOrigin, build_lsp_map, lsp_entries};
use super::mcp::build_mcp_map;
use super::paths::absolute_in;
use super::{Content, FileReader, FileText, LoadContext, ParsedSource};
use crate::diagnostic::{Diagnostic, pointer_join};
use crate::formats::{ApprovalsFile, McpJsonFile, TrustedFoldersFile};
use crate::resource::{Scope, SourceKind};

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

/// Load Steward's sandbox approvals (written by `steward approve` only).
pub fn load_sandbox_approvals(path: &Path, text: &FileText, cx: &LoadContext<'_>) -> ParsedSource {
    load_document(
        SourceKind::SandboxApprovals,
        path,
        text,
        cx,
        |doc, diags| {
            let mut map = take_all(&mut doc.value.clone());
            map.remove("$schema");
            let file: crate::formats::SandboxApprovalsFile =
                typed(&Value::Object(map), path, diags)?;
            Some(Content::SandboxApprovals(file))
        },
    )
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

//! Loading a Qwen Code extension from its `qwen-extension.json` manifest:
//! the extension variables hydrated into its strings, its name checked,
//! and its MCP and language servers read inline or from the files the
//! manifest refers to.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::document::{
    EXTENSION, LSP_JSON, MCP_JSON, MCP_SERVERS_MAP, checked_value, duplicate_key_warnings,
    load_document, take_all, take_object, typed,
};
use super::lsp::{LspOrigin, build_lsp_map, lsp_entries};
use super::mcp::{ExtCx, build_mcp_map};
use super::paths::absolute_in;
use super::{
    Content, ExtensionContent, FileReader, FileText, LoadContext, ParsedSource, Problems,
    unreadable,
};
use crate::diagnostic::Diagnostic;
use crate::expand;
use crate::formats::{ExtensionManifest, InlineOrPath};
use crate::jsonc::{self, Document};
use crate::resource::{Scope, SourceKind};
use crate::validate::SchemaValidator;

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

//! The JSON Schemas (Draft 2020-12) of every source format and resource kind,
//! generated from the types in [`crate::formats`] and [`crate::resource`].
//!
//! Two audiences, two strictness levels. The loaders validate against the
//! generated schemas as they are, after the coercions Qwen Code applies
//! ([`crate::lenient`]): a `null` field is an absent one. `steward schema`
//! (and `crds-like-specs/`) prints them for editors, made strict so that a
//! typo shows while typing ([`by_name`]): a server entry lists every field
//! Qwen Code and Claude Code know and no other, needs one of `command`,
//! `url`, `httpUrl`, and has no `null` where the format has none.

use std::collections::BTreeMap;

use schemars::{JsonSchema, schema_for};
use serde_json::{Map, Value, json};

use crate::formats::{
    ApprovalsFile, ExtensionManifest, LspServerEntry, McpJsonFile, McpServerEntry, SettingsFile,
    TrustedFoldersFile,
};
use crate::resource::{LspServer, McpServer, WorkspaceStatus};

const DRAFT: &str = "https://json-schema.org/draft/2020-12/schema";

/// Every schema name `steward schema` knows, with the file name it writes.
pub const NAMES: &[(&str, &str)] = &[
    ("settings", "settings.schema.json"),
    ("mcp-json", "mcp-json.schema.json"),
    ("lsp-json", "lsp-json.schema.json"),
    ("extension", "extension.schema.json"),
    ("approvals", "approvals.schema.json"),
    ("trusted-folders", "trusted-folders.schema.json"),
    ("mcp-server", "mcp-server.schema.json"),
    ("lsp-server", "lsp-server.schema.json"),
    ("workspace-status", "workspace-status.schema.json"),
];

/// The schema called `name`, if there is one: for the source formats, the
/// strict form meant for editors (see the module docs), which also tells
/// VS Code's JSON language service the syntax the loaders accept.
pub fn by_name(name: &str) -> Option<Value> {
    let mut schema = by_name_inner(name)?;
    if is_source_format(name) {
        accept_loader_syntax(&mut schema);
    }
    Some(schema)
}

/// The schemas of files Steward reads (as opposed to resources it prints).
fn is_source_format(name: &str) -> bool {
    matches!(
        name,
        "settings" | "mcp-json" | "lsp-json" | "extension" | "approvals" | "trusted-folders"
    )
}

/// Every source is JSON with `//` and `/* */` comments and without
/// trailing commas ([`crate::jsonc`]). VS Code's JSON language service
/// reads that from the root schema (`allowComments`, `allowTrailingCommas`,
/// keywords of its own that validators ignore); without them it marks every
/// comment of a `.json` file an error.
fn accept_loader_syntax(schema: &mut Value) {
    if let Value::Object(obj) = schema {
        obj.insert("allowComments".into(), json!(true));
        obj.insert("allowTrailingCommas".into(), json!(false));
    }
}

fn by_name_inner(name: &str) -> Option<Value> {
    Some(match name {
        "settings" => for_editors(settings()),
        "mcp-json" => for_editors(mcp_json()),
        "lsp-json" => {
            let mut v = for_editors(lsp_json());
            if let Some(Value::Object(props)) = v.get_mut("properties") {
                props.insert(
                    "mcpServers".into(),
                    json!({"not": {}, "description": "MCP servers belong in .mcp.json: .lsp.json maps a language to a language server."}),
                );
            }
            v
        }
        "extension" => for_editors(extension()),
        "approvals" => approvals(),
        "trusted-folders" => trusted_folders(),
        "mcp-server" => generated::<McpServer>("mcp-server", "An McpServer resource"),
        "lsp-server" => generated::<LspServer>("lsp-server", "An LspServer resource"),
        "workspace-status" => generated::<WorkspaceStatus>(
            "workspace-status",
            "The output of `steward status -o json`",
        ),
        _ => return None,
    })
}

pub fn settings() -> Value {
    generated::<SettingsFile>(
        "settings",
        "A settings.json layer. Only mcpServers, mcp.*, security.folderTrust.enabled and lsp.* matter to Steward; other keys are accepted and ignored.",
    )
}

pub fn mcp_json() -> Value {
    generated::<McpJsonFile>("mcp-json", "The project's .mcp.json")
}

pub fn extension() -> Value {
    generated::<ExtensionManifest>("extension", "An extension's qwen-extension.json")
}

pub fn lsp_json() -> Value {
    map_of::<LspServerEntry>(
        "lsp-json",
        "Language servers (.lsp.json)",
        "The workspace's .lsp.json: each key is a server's name and its default language.",
    )
}

/// One MCP server entry (the typed form, after the coercions of
/// [`crate::lenient`]).
pub fn mcp_server_entry() -> Value {
    generated::<McpServerEntry>("mcp-server-entry", "One MCP server entry.")
}

/// One language server entry (the typed form).
pub fn lsp_server_entry() -> Value {
    generated::<LspServerEntry>("lsp-server-entry", "One language server entry.")
}

/// A bare `name → MCP server` map (an extension's referenced mcpServers file).
pub fn mcp_servers_map() -> Value {
    map_of::<McpServerEntry>("mcp-servers", "MCP servers", "MCP servers by name.")
}

pub fn approvals() -> Value {
    let mut v = generated::<ApprovalsFile>(
        "approvals",
        "mcpApprovals.json: canonical project root → server name → {hash, status}. Written by `steward approve` / `steward reject`.",
    );
    allow_schema_key(&mut v);
    v
}

pub fn trusted_folders() -> Value {
    let mut v = generated::<TrustedFoldersFile>(
        "trusted-folders",
        "trustedFolders.json: absolute folder path → TRUST_FOLDER | TRUST_PARENT | DO_NOT_TRUST.",
    );
    allow_schema_key(&mut v);
    v
}

/// The strict form of a source format's schema: server entries (and the
/// objects inside them) accept only the fields they list, an MCP entry
/// needs a way to reach its server, and `null` is not a value.
fn for_editors(mut schema: Value) -> Value {
    fn no_null(v: &mut Value) {
        match v {
            Value::Object(map) => {
                if let Some(Value::Array(types)) = map.get_mut("type") {
                    types.retain(|t| t != "null");
                    if types.len() == 1 {
                        let only = types.remove(0);
                        map.insert("type".into(), only);
                    }
                }
                if let Some(Value::Array(branches)) = map.get_mut("anyOf") {
                    branches.retain(|b| b.get("type") != Some(&json!("null")));
                    if branches.len() == 1 {
                        let only = branches.remove(0);
                        map.remove("anyOf");
                        if let Value::Object(only) = only {
                            for (k, v) in only {
                                map.entry(k).or_insert(v);
                            }
                        }
                    }
                }
                map.values_mut().for_each(no_null);
            }
            Value::Array(items) => items.iter_mut().for_each(no_null),
            _ => {}
        }
    }
    no_null(&mut schema);
    if let Some(Value::Object(defs)) = schema.get_mut("$defs") {
        for (name, def) in defs.iter_mut() {
            let Value::Object(def) = def else { continue };
            if matches!(
                name.as_str(),
                "McpServerEntry" | "LspServerEntry" | "SocketObject"
            ) {
                def.insert("unevaluatedProperties".into(), json!(false));
            }
            if name == "McpServerEntry" {
                def.insert(
                    "anyOf".into(),
                    json!([
                        {"required": ["command"]},
                        {"required": ["url"]},
                        {"required": ["httpUrl"]}
                    ]),
                );
            }
        }
    }
    schema
}

fn id(name: &str) -> String {
    format!("https://steward.dev/schemas/v1alpha1/{name}.schema.json")
}

fn generated<T: JsonSchema>(name: &str, description: &str) -> Value {
    let mut v = schema_for!(T).to_value();
    if let Value::Object(obj) = &mut v {
        obj.insert("$schema".into(), json!(DRAFT));
        obj.insert("$id".into(), json!(id(name)));
        obj.entry("description").or_insert(json!(description));
    }
    v
}

/// A schema for `{ "$schema"?: string, <name>: T, ... }`.
fn map_of<T: JsonSchema>(name: &str, title: &str, description: &str) -> Value {
    let entry = schema_for!(T).to_value();
    let entry_name = T::schema_name().into_owned();
    let mut entry_obj = entry.as_object().cloned().unwrap_or_default();
    let mut defs: Map<String, Value> = match entry_obj.remove("$defs") {
        Some(Value::Object(d)) => d,
        _ => Map::new(),
    };
    entry_obj.remove("$schema");
    defs.insert(entry_name.clone(), Value::Object(entry_obj));
    let props: BTreeMap<&str, Value> = [(
        "$schema",
        json!({"type": "string", "description": "JSON Schema reference for editors."}),
    )]
    .into_iter()
    .collect();
    json!({
        "$schema": DRAFT,
        "$id": id(name),
        "title": title,
        "description": description,
        "type": "object",
        "properties": props,
        "additionalProperties": {"$ref": format!("#/$defs/{entry_name}")},
        "default": {},
        "$defs": defs,
    })
}

fn allow_schema_key(v: &mut Value) {
    if let Value::Object(obj) = v {
        let props = obj
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(props) = props {
            props.insert(
                "$schema".into(),
                json!({"type": "string", "description": "JSON Schema reference for editors."}),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_has_a_draft_2020_12_schema() {
        for (name, _) in NAMES {
            let s = by_name(name).unwrap();
            assert_eq!(s["$schema"], DRAFT, "{name}");
            assert!(s.get("$id").is_some(), "{name}");
        }
        assert!(by_name("nope").is_none());
    }

    /// The editor schemas of the sources say the loaders' syntax (comments,
    /// no trailing commas); resource schemas say nothing of it.
    #[test]
    fn source_schemas_accept_comments_as_the_loaders_do() {
        for (name, _) in NAMES {
            let s = by_name(name).unwrap();
            if is_source_format(name) {
                assert_eq!(s["allowComments"], json!(true), "{name}");
                assert_eq!(s["allowTrailingCommas"], json!(false), "{name}");
            } else {
                assert!(s.get("allowComments").is_none(), "{name}");
            }
        }
    }

    /// Every property of every source format carries a description.
    #[test]
    fn every_source_field_is_described() {
        fn walk(v: &Value, at: &str, missing: &mut Vec<String>) {
            if let Some(props) = v.get("properties").and_then(Value::as_object) {
                for (k, p) in props {
                    if p.get("description").is_none() {
                        missing.push(format!("{at}/{k}"));
                    }
                }
            }
            if let Some(defs) = v.get("$defs").and_then(Value::as_object) {
                for (k, d) in defs {
                    walk(d, &format!("{at}/$defs/{k}"), missing);
                }
            }
        }
        for name in [
            "settings",
            "mcp-json",
            "lsp-json",
            "extension",
            "approvals",
            "trusted-folders",
        ] {
            let mut missing = Vec::new();
            walk(&by_name(name).unwrap(), name, &mut missing);
            assert!(missing.is_empty(), "undescribed fields: {missing:?}");
        }
    }
}

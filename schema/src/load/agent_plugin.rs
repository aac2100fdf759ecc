//! Loading an Agent Plugins v1 extension (`plugin.json` and its
//! `mcp.json`) as Qwen Code loads it: each MCP server of the plugin
//! becomes the Qwen Code entry it stands for, then is built like any other.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::document::load_document;
use super::mcp::{ExtCx, build_mcp_map, placeholder_mcp};
use super::{
    Content, DroppedEntry, DroppedSpec, ExtensionContent, FileReader, FileText, LoadContext,
    ParsedSource, Problems, unreadable,
};
use crate::diagnostic::{Diagnostic, pointer_join};
use crate::jsonc;
use crate::resource::{Scope, SourceKind};

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

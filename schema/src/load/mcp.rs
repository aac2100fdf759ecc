//! Building MCP server entries: each entry as written is hashed as Qwen
//! Code hashes it for approval, coerced as Qwen Code reads it, validated,
//! expanded and normalized into an [`McpServerSpec`] with its `configHash`;
//! an entry that cannot be built gets a best-effort placeholder spec.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::dev::build_dev;
use super::document::MCP_ENTRY;
use super::entries::{collect_built, credential_warnings, expand_field, expand_list, expand_map};
use super::paths::{absolute_in, normalize_lexically};
use super::{DEFAULT_MCP_TIMEOUT_MS, LoadContext, McpServers, Problems};
use crate::canonical::hash_value;
use crate::expand::Vars;
use crate::formats::McpServerEntry;
use crate::jsonc::Document;
use crate::lenient;
use crate::memo::{self, Coverage, Failed, FieldErrors, Outcome, Place};
use crate::qwen;
use crate::redact;
use crate::resource::{McpServerSpec, McpTransport, QwenMcpFields, Scope};
use crate::sandbox;

/// Extension context for expansion and provenance.
pub(super) struct ExtCx<'a> {
    pub(super) name: &'a str,
    pub(super) vars: &'a BTreeMap<String, String>,
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
pub(super) fn build_mcp_map(
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
pub(super) fn build_mcp_entries(
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
    let path = place.path;
    let memo = if ext.is_none() { cx.memo } else { None };
    memo::build_entries(
        memo,
        place,
        cx.workspace,
        cx.env,
        entries,
        |name, literal| {
            let mut outcome = mcp_outcome(literal, &vars, scope, ext.map(|e| e.name), cx.workspace);
            // Files of the workspace (often committed) should hold references.
            if scope.is_gated() {
                credential_warnings(path, name, literal, &mut outcome.warnings);
            }
            outcome
        },
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
pub(super) fn placeholder_mcp(
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
        sandbox: None,
        resolved_sandbox: None,
        qwen: QwenMcpFields::default(),
        extension_name: extension_name.map(str::to_owned),
        dev: None,
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
        // A URL that is a secret reference is checked once resolved.
        if let Some(u) = value
            && !is_http_url(u)
            && crate::secrets::names_in(u).is_empty()
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
    let dev_default = match cwd.as_deref() {
        Some(c) if transport == McpTransport::Stdio && !c.is_empty() => {
            normalize_lexically(&absolute_in(workspace, c))
        }
        _ => workspace.to_path_buf(),
    };
    let dev = build_dev(
        entry.dev.as_ref(),
        &dev_default,
        workspace,
        vars,
        warnings,
        &mut errors,
    );
    for (pointer, message) in entry.sandbox.iter().flat_map(sandbox::check_field) {
        errors.push((format!("/sandbox{pointer}"), message));
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

    let qwen = QwenMcpFields {
        auth_provider_type: entry.auth_provider_type.clone(),
        target_audience: entry.target_audience.clone(),
        target_service_account: entry.target_service_account.clone(),
        always_load_tools: entry.always_load_tools,
        version_negotiation: entry.version_negotiation.clone(),
        discovery_timeout_ms: entry.discovery_timeout_ms,
    };
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
        sandbox: entry.sandbox.clone(),
        resolved_sandbox: None,
        qwen,
        extension_name: None,
        dev,
        config_hash: String::new(),
        approval_hash: String::new(),
        as_written: redact::mcp_as_written(entry, transport),
    })
    .map(|mut spec| {
        spec.config_hash = mcp_config_hash(&spec, workspace);
        spec
    })
}

/// The MCP `configHash` of a spec: its connection fields (those of its
/// transport), explicit defaults counted as absent. Also what the runtime
/// compares a running server against once its secrets are resolved.
pub fn mcp_config_hash(spec: &McpServerSpec, workspace: &Path) -> String {
    // Explicit defaults fingerprint like absent fields: writing `"args": []`
    // or the default timeout restarts nothing.
    let ws = workspace.to_string_lossy();
    let default_cwd = |c: &String| c.is_empty() || c == "." || c == "./" || *c == ws;
    let mut fingerprint = serde_json::json!({
        "transport": spec.transport,
        "command": spec.command,
        "args": spec.args.as_ref().filter(|a| !a.is_empty()),
        "cwd": spec.cwd.as_ref().filter(|c| !default_cwd(c)),
        "env": spec.env.as_ref().filter(|e| !e.is_empty()),
        "url": spec.url,
        "httpUrl": spec.http_url,
        "headers": spec.headers.as_ref().filter(|h| !h.is_empty()),
        "timeout": spec.timeout.filter(|t| *t != DEFAULT_MCP_TIMEOUT_MS),
        "oauth": spec.oauth,
    });
    // Qwen Code's fields that change the connection, only when written (so
    // that every other fingerprint stays what it was).
    let qwen = &spec.qwen;
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
    hash_value(&fingerprint)
}

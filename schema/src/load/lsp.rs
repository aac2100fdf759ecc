//! Building language server entries (`.lsp.json` and extensions): each
//! entry coerced as Qwen Code reads it, validated, expanded and normalized
//! into an [`LspServerSpec`] (transport, socket, workspace folder and root
//! URI kept inside the workspace, defaults filled in) with its
//! `configHash`; an entry that cannot be started gets a placeholder spec.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::dev::build_dev;
use super::document::LSP_ENTRY;
use super::entries::{
    collect_built, credential_warnings, expand_field, expand_list, expand_map, expand_one,
};
use super::paths::{absolute_in, file_uri, file_uri_path, normalize_lexically};
use super::{
    DEFAULT_MAX_RESTARTS, DEFAULT_SHUTDOWN_TIMEOUT_MS, DEFAULT_STARTUP_TIMEOUT_MS, LoadContext,
    LspServers, Problems,
};
use crate::canonical::hash_value;
use crate::diagnostic::Diagnostic;
use crate::expand::Vars;
use crate::formats::{LspServerEntry, LspTransport, SocketField};
use crate::jsonc::Document;
use crate::lenient;
use crate::memo::{self, Coverage, Failed, FieldErrors, Outcome, Place};
use crate::redact;
use crate::resource::{LspServerSpec, LspSocket, Scope};
use crate::sandbox;

/// Where an LSP entry comes from (decides trust and path resolution).
pub(super) enum LspOrigin<'a> {
    Workspace,
    Extension {
        name: &'a str,
        dir: &'a Path,
        vars: &'a BTreeMap<String, String>,
    },
}

pub(super) fn build_lsp_map(
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
pub(super) fn build_lsp_entries(
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
        let mut outcome = lsp_outcome(name, raw, origin, cx);
        // `.lsp.json` is a file of the workspace: it should hold references.
        if matches!(origin, LspOrigin::Workspace) {
            credential_warnings(path, name, raw, &mut outcome.warnings);
        }
        outcome
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
        dev: None,
        sandbox: None,
        resolved_sandbox: None,
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
    let dev = build_dev(
        entry.dev.as_ref(),
        Path::new(&workspace_folder),
        cx.workspace,
        &vars,
        warnings,
        &mut errors,
    );
    for (pointer, message) in entry.sandbox.iter().flat_map(sandbox::check_field) {
        errors.push((format!("/sandbox{pointer}"), message));
    }
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
        dev,
        sandbox: entry.sandbox.clone(),
        resolved_sandbox: None,
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

/// The raw `name → entry` map of an LSP servers object, skipping `$schema`-like keys.
pub(super) fn lsp_entries(
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

//! Leniency parity with Qwen Code: a server entry as written is turned into
//! the typed form Steward validates, the way Qwen Code 0.24 reads it —
//! coercing what it coerces, ignoring what it ignores, skipping the entries
//! it skips — and every such step is reported as a warning: a file loads as
//! it loads in Qwen Code, and nothing it changes goes unsaid. What remains
//! wrong after this step (a wrong type Qwen Code cannot use either) is an
//! error, found by schema validation.
//!
//! Also here, because it is decided on the entry as written: which `env`
//! keys may reach a server process (a key with `=` or NUL is not a variable
//! name; the code-injection variables never; the interpreter start-up hooks
//! not from a file the workspace controls).

use serde_json::{Map, Value};

use crate::memo::FieldErrors;
use crate::qwen::{js_number, truthy};
use crate::validate::did_you_mean;

/// An entry in typed form, what was done to get it, and whether it is skipped.
#[derive(Debug, Clone, PartialEq)]
pub struct Coerced {
    pub value: Map<String, Value>,
    pub warnings: FieldErrors,
    /// `(pointer, message)`: the entry is skipped (no spec), for this reason.
    pub skip: Option<(String, String)>,
    /// `(typed pointer, written pointer)` of fields read under another name
    /// (`type: "http"` + `url` is `httpUrl`), to place later problems.
    pub moved: Vec<(String, String)>,
}

impl Coerced {
    /// `pointer` (below the entry, in typed form) as the user wrote it.
    pub fn written_pointer(&self, pointer: &str) -> String {
        for (typed, written) in &self.moved {
            if let Some(rest) = pointer.strip_prefix(typed.as_str())
                && (rest.is_empty() || rest.starts_with('/'))
            {
                return format!("{written}{rest}");
            }
        }
        pointer.to_owned()
    }
}

/// Who controls the file an entry comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// `.mcp.json`, workspace settings, `.lsp.json`: whoever can write the
    /// workspace (a cloned repository) wrote it.
    Workspace,
    /// The user's, the system's or an extension's files, or the command line.
    Trusted,
}

/// Variables that load code into any process (the runtime refuses them too).
pub const ENV_DENYLIST: [&str; 6] = [
    "NODE_OPTIONS",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "DYLD_INSERT_LIBRARIES",
    "DYLD_LIBRARY_PATH",
];

/// Interpreter start-up hooks: run code in the server's interpreter before
/// it starts. Not taken from files the workspace controls (plus `LD_*`,
/// `DYLD_*`).
pub const STARTUP_HOOKS: [&str; 7] = [
    "BASH_ENV",
    "ENV",
    "PERL5OPT",
    "PYTHONSTARTUP",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "GCONV_PATH",
];

/// MCP entry keys Steward reads (the typed form).
pub const MCP_KEYS: [&str; 23] = [
    "type",
    "sandbox",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "httpUrl",
    "headers",
    "timeout",
    "trust",
    "includeTools",
    "excludeTools",
    "description",
    "disabled",
    "oauth",
    "authProviderType",
    "targetAudience",
    "targetServiceAccount",
    "alwaysLoadTools",
    "versionNegotiation",
    "discoveryTimeoutMs",
    "dev",
];

/// MCP entry keys Qwen Code knows that mean nothing to Steward (no warning).
const MCP_IGNORED_KEYS: [&str; 4] = ["tcp", "scope", "extensionName", "agentPluginV1"];

/// LSP entry keys Steward reads (`socketPath` is read as `path`).
pub const LSP_KEYS: [&str; 22] = [
    "languages",
    "sandbox",
    "command",
    "args",
    "transport",
    "socket",
    "host",
    "port",
    "path",
    "socketPath",
    "env",
    "initializationOptions",
    "settings",
    "extensionToLanguage",
    "workspaceFolder",
    "rootUri",
    "startupTimeout",
    "shutdownTimeout",
    "restartOnCrash",
    "maxRestarts",
    "trustRequired",
    "dev",
];

/// Keys of `dev` Steward reads (VS Code's `watch`, mcp-hub's `enabled` and
/// `cwd`, and `build`).
pub const DEV_KEYS: [&str; 4] = ["watch", "build", "cwd", "enabled"];

/// Qwen Code's bounds on `discoveryTimeoutMs`.
pub const DISCOVERY_TIMEOUT_RANGE: (u64, u64) = (100, 300_000);

fn field(key: &str) -> String {
    crate::diagnostic::pointer_join("", key)
}

fn unknown_key_warning(key: &str, known: &[&str]) -> String {
    match did_you_mean(key, known) {
        Some(guess) => {
            format!("unknown key \"{key}\" (did you mean \"{guess}\"?) is ignored")
        }
        None => format!("unknown key \"{key}\" is ignored"),
    }
}

/// A JSON scalar as JavaScript's `String(v)` writes it.
fn js_string_of(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(js_number(n)),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Coerce an MCP entry (an object) the way Qwen Code reads it.
pub fn mcp_entry(raw: &Map<String, Value>, origin: Origin) -> Coerced {
    let mut value = Map::new();
    let mut warnings = FieldErrors::new();
    for (key, v) in raw {
        if MCP_KEYS.contains(&key.as_str()) {
            value.insert(key.clone(), v.clone());
        } else if !MCP_IGNORED_KEYS.contains(&key.as_str()) {
            warnings.push((field(key), unknown_key_warning(key, &MCP_KEYS)));
        }
    }

    // Claude Code's `type`, folded in as Qwen Code folds it: the transport
    // is then chosen by httpUrl, url, command, in that order.
    let kind = raw.get("type").and_then(Value::as_str).map(str::to_owned);
    if kind.as_deref() == Some("sdk") {
        let skip = (
            "/type".to_owned(),
            "type \"sdk\" is a server hosted in-process by a Qwen Code SDK application, which Steward cannot reach; the entry is skipped".to_owned(),
        );
        return Coerced {
            value,
            warnings,
            skip: Some(skip),
            moved: Vec::new(),
        };
    }
    let mut moved = Vec::new();
    if raw.contains_key("type") {
        value.remove("type");
        let has = |k: &str| raw.get(k).is_some_and(truthy);
        if kind.as_deref() == Some("http")
            && !has("command")
            && !has("httpUrl")
            && let Some(url @ Value::String(_)) = value.remove("url")
        {
            value.insert("httpUrl".to_owned(), url);
            moved.push(("/httpUrl".to_owned(), "/url".to_owned()));
        }
        // What Qwen Code connects with: the first of httpUrl, url, command.
        let effective = ["httpUrl", "url", "command"]
            .into_iter()
            .find(|k| value.get(*k).is_some_and(truthy));
        let named = match effective {
            Some("httpUrl") => "http",
            Some("url") => "sse",
            _ => "stdio",
        };
        match kind.as_deref() {
            Some(t @ ("stdio" | "http" | "sse")) if effective.is_some() && t != named => {
                let by = match named {
                    "http" => "\"httpUrl\" (streamable HTTP)",
                    "sse" => "\"url\" (SSE)",
                    _ => "\"command\" (stdio)",
                };
                warnings.push((
                    "/type".to_owned(),
                    format!(
                        "type \"{t}\" does not match the entry, which is reached by {by} as Qwen Code does"
                    ),
                ));
            }
            Some("stdio" | "http" | "sse") => {}
            _ => {
                let shown = raw.get("type").map(Value::to_string).unwrap_or_default();
                warnings.push((
                    "/type".to_owned(),
                    format!(
                        "unknown type {shown} is ignored (expected \"stdio\", \"http\" or \"sse\"); the transport follows httpUrl, url, command"
                    ),
                ));
            }
        }
    }
    let reachable = ["httpUrl", "url", "command"]
        .iter()
        .any(|k| value.get(*k).is_some_and(truthy));
    if !reachable {
        let message = if raw.get("tcp").is_some_and(truthy) {
            "\"tcp\" (WebSocket) servers are not supported; the entry is skipped"
        } else {
            "an MCP server needs \"command\" (stdio), \"httpUrl\" (streamable HTTP) or \"url\" (SSE); the entry is skipped"
        };
        return Coerced {
            value,
            warnings,
            skip: Some((String::new(), message.to_owned())),
            moved,
        };
    }

    // Several ways to reach the server: Qwen Code takes the first of
    // httpUrl, url, command and ignores the others.
    let written: Vec<&str> = ["httpUrl", "url", "command"]
        .into_iter()
        .filter(|k| value.get(*k).is_some_and(truthy))
        .collect();
    if written.len() > 1 && !warnings.iter().any(|(p, _)| p == "/type") {
        let ignored = written[1..]
            .iter()
            .map(|k| format!("\"{k}\""))
            .collect::<Vec<_>>()
            .join(" and ");
        warnings.push((
            field(written[1]),
            format!(
                "both \"{}\" and {ignored} are set: \"{}\" is used, as Qwen Code does, and {ignored} ignored",
                written[0], written[0]
            ),
        ));
    }
    if let Some(env) = value.get("env").cloned() {
        match coerce_env(&env, origin, &mut warnings) {
            Some(env) => {
                value.insert("env".to_owned(), env);
            }
            // A null `env` is no `env`; another non-object stays for validation.
            None => {
                value.remove("env");
            }
        }
    }
    if let Some(t) = value.get("timeout").and_then(Value::as_f64) {
        if t <= 0.0 {
            warnings.push((
                "/timeout".to_owned(),
                format!("timeout {t} is not positive; the default (600000 ms) is used"),
            ));
            value.remove("timeout");
        } else if t.fract() != 0.0 {
            warnings.push((
                "/timeout".to_owned(),
                format!(
                    "timeout {t} is not a whole number of milliseconds; {} is used",
                    t.ceil()
                ),
            ));
            value.insert("timeout".to_owned(), Value::from(t.ceil() as u64));
        }
    }
    if let Some(t) = value.get("discoveryTimeoutMs").and_then(Value::as_f64) {
        let (lo, hi) = DISCOVERY_TIMEOUT_RANGE;
        let clamped = t.clamp(lo as f64, hi as f64).ceil() as u64;
        if t < lo as f64 || t > hi as f64 {
            warnings.push((
                "/discoveryTimeoutMs".to_owned(),
                format!("discoveryTimeoutMs {t} is outside {lo}..{hi}; {clamped} is used, as Qwen Code does"),
            ));
        }
        value.insert("discoveryTimeoutMs".to_owned(), Value::from(clamped));
    }
    coerce_dev(&mut value, &mut warnings);
    // Qwen Code's `includeTools` also matches a tool named before a `(`.
    if let Some(Value::Array(items)) = value.get_mut("includeTools") {
        for item in items.iter_mut() {
            if let Value::String(s) = item
                && let Some(at) = s.find('(')
            {
                s.truncate(at);
            }
        }
    }
    Coerced {
        value,
        warnings,
        skip: None,
        moved,
    }
}

/// `dev` as Steward reads it: `null` or `enabled: false` is no `dev`; the
/// keys other tools give it (VS Code's `debug`, anything else) are dropped
/// with a warning; what remains is left to validation (a `dev` that is not
/// an object, a missing `watch`).
fn coerce_dev(value: &mut Map<String, Value>, warnings: &mut FieldErrors) {
    let Some(dev) = value.get_mut("dev") else {
        return;
    };
    let off = match dev {
        Value::Null => true,
        Value::Object(map) => {
            map.retain(|key, _| {
                let at = crate::diagnostic::pointer_join("/dev", key);
                if key == "debug" {
                    warnings.push((
                        at,
                        "dev.debug (VS Code's debugger settings) is ignored: Steward attaches no debugger".to_owned(),
                    ));
                    false
                } else if DEV_KEYS.contains(&key.as_str()) {
                    true
                } else {
                    warnings.push((at, unknown_key_warning(key, &DEV_KEYS)));
                    false
                }
            });
            map.get("enabled") == Some(&Value::Bool(false))
        }
        _ => false,
    };
    if off {
        value.remove("dev");
    }
}

/// `env` with what may not reach a process dropped and scalars as strings;
/// `None` when `env` is `null`. A value that is not an object is returned
/// as it is, for validation to report.
fn coerce_env(env: &Value, origin: Origin, warnings: &mut FieldErrors) -> Option<Value> {
    let map = match env {
        Value::Null => return None,
        Value::Object(map) => map,
        other => return Some(other.clone()),
    };
    let mut out = Map::new();
    for (key, v) in map {
        let at = crate::diagnostic::pointer_join("/env", key);
        if let Some(problem) = env_key_problem(key, origin) {
            warnings.push((at, format!("env key \"{key}\" {problem}; it is dropped")));
            continue;
        }
        match v {
            Value::String(_) => {
                out.insert(key.clone(), v.clone());
            }
            Value::Number(_) | Value::Bool(_) => {
                let s = js_string_of(v).unwrap_or_default();
                warnings.push((
                    at,
                    format!("env value {v} is not a string; \"{s}\" is used"),
                ));
                out.insert(key.clone(), Value::String(s));
            }
            _ => {
                warnings.push((
                    at,
                    format!("env value {v} is not a string; the key is dropped"),
                ));
            }
        }
    }
    Some(Value::Object(out))
}

/// Why `key` may not be set in a server's environment, if it may not.
pub fn env_key_problem(key: &str, origin: Origin) -> Option<&'static str> {
    let upper = key.to_ascii_uppercase();
    if key.contains('=') || key.contains('\0') {
        Some("contains '=' or NUL, which no variable name can")
    } else if key.is_empty() {
        Some("is empty")
    } else if ENV_DENYLIST.contains(&upper.as_str()) {
        Some("loads code into the server and may not be set from configuration")
    } else if origin == Origin::Workspace
        && (STARTUP_HOOKS.contains(&upper.as_str())
            || upper.starts_with("LD_")
            || upper.starts_with("DYLD_"))
    {
        Some(
            "runs code when the server's interpreter starts and may not be set from a file the workspace controls",
        )
    } else {
        None
    }
}

/// Coerce an LSP entry (an object) the way Qwen Code's `.lsp.json` loader
/// reads it.
pub fn lsp_entry(raw: &Map<String, Value>, origin: Origin) -> Coerced {
    let mut value = Map::new();
    let mut warnings = FieldErrors::new();
    let mut env_warnings = FieldErrors::new();
    // `key` is a member of the entry, or a pointer below it (`/socket/port`).
    let mut warn = |key: &str, message: String| {
        let at = if key.starts_with('/') {
            key.to_owned()
        } else {
            field(key)
        };
        warnings.push((at, message));
    };
    for (key, v) in raw {
        let k = key.as_str();
        if !LSP_KEYS.contains(&k) {
            warn(k, unknown_key_warning(k, &LSP_KEYS));
            continue;
        }
        let ignored = |what: &str| format!("{k} {v} is not {what}; it is ignored");
        match k {
            "command" | "host" | "path" | "workspaceFolder" | "rootUri" => match v {
                Value::String(_) => {
                    value.insert(key.clone(), v.clone());
                }
                Value::Null => {}
                _ => warn(k, ignored("a string")),
            },
            "socketPath" => match v {
                Value::String(_) if !raw.contains_key("path") => {
                    value.insert("path".to_owned(), v.clone());
                }
                Value::String(_) => {}
                _ => warn(k, ignored("a string")),
            },
            "transport" => match v.as_str().map(str::to_ascii_lowercase) {
                Some(t) if ["stdio", "tcp", "socket"].contains(&t.as_str()) => {
                    if v.as_str() != Some(t.as_str()) {
                        warn(k, format!("transport {v} is read as \"{t}\""));
                    }
                    value.insert(key.clone(), Value::String(t));
                }
                _ if v.is_null() => {}
                _ => warn(
                    k,
                    format!(
                        "transport {v} is not \"stdio\", \"tcp\" or \"socket\"; \"stdio\" is used, as Qwen Code does"
                    ),
                ),
            },
            "args" | "languages" => match v {
                Value::Array(items) => {
                    let strings: Vec<Value> =
                        items.iter().filter(|i| i.is_string()).cloned().collect();
                    if strings.len() != items.len() {
                        warn(k, format!("{k}: items that are not strings are ignored"));
                    }
                    value.insert(key.clone(), Value::Array(strings));
                }
                Value::Null => {}
                _ => warn(k, ignored("a list")),
            },
            "env" => match v {
                Value::Object(_) => {
                    if let Some(env) = coerce_env(v, origin, &mut env_warnings) {
                        value.insert(key.clone(), env);
                    }
                }
                Value::Null => {}
                _ => warn(k, ignored("an object")),
            },
            "initializationOptions" | "settings" => match v {
                Value::Object(_) => {
                    value.insert(key.clone(), v.clone());
                }
                Value::Null => {}
                _ => warn(k, ignored("an object")),
            },
            "extensionToLanguage" => match v {
                Value::Object(map) => {
                    let strings: Map<String, Value> = map
                        .iter()
                        .filter(|(_, l)| l.is_string())
                        .map(|(e, l)| (e.clone(), l.clone()))
                        .collect();
                    if strings.len() != map.len() {
                        warn(
                            k,
                            format!("{k}: languages that are not strings are ignored"),
                        );
                    }
                    value.insert(key.clone(), Value::Object(strings));
                }
                Value::Null => {}
                _ => warn(k, ignored("an object")),
            },
            "startupTimeout" | "shutdownTimeout" => match v.as_f64() {
                Some(t) if t > 0.0 && t.is_finite() => {
                    value.insert(key.clone(), Value::from(t.ceil() as u64));
                }
                _ if v.is_null() => {}
                _ => warn(
                    k,
                    format!(
                        "{k} {v} is not a positive number of milliseconds; the default is used"
                    ),
                ),
            },
            "maxRestarts" => match v.as_f64() {
                Some(n) if n >= 0.0 && n.is_finite() => {
                    value.insert(key.clone(), Value::from(n.ceil() as u64));
                }
                _ if v.is_null() => {}
                _ => warn(
                    k,
                    format!("maxRestarts {v} is not a count; the default (3) is used"),
                ),
            },
            "restartOnCrash" | "trustRequired" => match v {
                Value::Bool(_) => {
                    value.insert(key.clone(), v.clone());
                }
                Value::Null => {}
                _ => warn(
                    k,
                    format!("{k} {v} is not true or false; the default is used"),
                ),
            },
            "port" => {
                if let Some(port) = lsp_port(v, k, &mut warn) {
                    value.insert(key.clone(), port);
                }
            }
            "socket" => match v {
                Value::String(_) => {
                    value.insert(key.clone(), v.clone());
                }
                Value::Object(sock) => {
                    let mut out = Map::new();
                    for (sk, sv) in sock {
                        let at = format!("/socket/{}", crate::diagnostic::escape_pointer_token(sk));
                        match (sk.as_str(), sv) {
                            ("host" | "path", Value::String(_)) => {
                                out.insert(sk.clone(), sv.clone());
                            }
                            ("socketPath", Value::String(_)) if !sock.contains_key("path") => {
                                out.insert("path".to_owned(), sv.clone());
                            }
                            ("socketPath", Value::String(_)) => {}
                            ("port", _) => {
                                if let Some(port) = lsp_port(sv, &at, &mut warn) {
                                    out.insert(sk.clone(), port);
                                }
                            }
                            (_, Value::Null) => {}
                            ("host" | "path" | "socketPath", _) => {
                                warn(&at, format!("{sk} {sv} is not a string; it is ignored"))
                            }
                            _ => warn(&at, unknown_key_warning(sk, &["host", "port", "path"])),
                        }
                    }
                    value.insert(key.clone(), Value::Object(out));
                }
                Value::Null => {}
                _ => warn(k, ignored("a path or an object")),
            },
            _ => {
                value.insert(key.clone(), v.clone());
            }
        }
    }
    let mut dev_warnings = FieldErrors::new();
    coerce_dev(&mut value, &mut dev_warnings);
    warnings.extend(dev_warnings);
    warnings.extend(env_warnings);
    let moved = if raw.get("socketPath").is_some_and(Value::is_string) && !raw.contains_key("path")
    {
        vec![("/path".to_owned(), "/socketPath".to_owned())]
    } else {
        Vec::new()
    };
    Coerced {
        value,
        warnings,
        skip: None,
        moved,
    }
}

/// A port as Qwen Code reads it: a number, or a string of digits, 1..=65535.
fn lsp_port(v: &Value, at: &str, warn: &mut impl FnMut(&str, String)) -> Option<Value> {
    let port = match v {
        Value::Null => return None,
        Value::Number(n) => n.as_f64(),
        Value::String(s)
            if !s.trim().is_empty() && s.trim().chars().all(|c| c.is_ascii_digit()) =>
        {
            let port = s.trim().parse::<f64>().ok();
            if let Some(p) = port {
                warn(at, format!("port \"{s}\" is a string; {p} is used"));
            }
            port
        }
        _ => None,
    };
    match port {
        Some(p) if p.fract() == 0.0 && (1.0..=65535.0).contains(&p) => Some(Value::from(p as u64)),
        _ => {
            warn(
                at,
                format!("port {v} is not a TCP port (1-65535); it is ignored"),
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    fn warned(c: &Coerced, fragment: &str) -> bool {
        c.warnings.iter().any(|(_, m)| m.contains(fragment))
    }

    #[test]
    fn claude_types_fold_into_qwen_fields() {
        let c = mcp_entry(
            &obj(json!({"type": "http", "url": "http://h/mcp"})),
            Origin::Trusted,
        );
        assert_eq!(Value::Object(c.value), json!({"httpUrl": "http://h/mcp"}));
        assert!(c.warnings.is_empty());
        let c = mcp_entry(
            &obj(json!({"type": "stdio", "command": "x"})),
            Origin::Trusted,
        );
        assert_eq!(Value::Object(c.value), json!({"command": "x"}));
        // A mismatching type is ignored, with a warning, as Qwen Code ignores it.
        let c = mcp_entry(
            &obj(json!({"type": "sse", "command": "x"})),
            Origin::Trusted,
        );
        assert_eq!(Value::Object(c.value.clone()), json!({"command": "x"}));
        assert!(warned(&c, "reached by \"command\""), "{:?}", c.warnings);
    }

    #[test]
    fn unknown_transports_are_skipped_with_a_reason() {
        for entry in [
            json!({"type": "sdk", "command": "x"}),
            json!({"tcp": "ws://h"}),
            json!({"comand": "x"}),
            json!({"command": ""}),
        ] {
            let c = mcp_entry(&obj(entry.clone()), Origin::Trusted);
            assert!(c.skip.is_some(), "{entry}");
        }
        let c = mcp_entry(&obj(json!({"comand": "x"})), Origin::Trusted);
        assert!(warned(&c, "did you mean \"command\""), "{:?}", c.warnings);
    }

    #[test]
    fn several_transports_warn_and_the_first_of_qwen_codes_order_wins() {
        let c = mcp_entry(
            &obj(json!({"command": "x", "url": "http://h/sse"})),
            Origin::Trusted,
        );
        assert!(c.skip.is_none());
        assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
        assert!(
            c.warnings[0].1.contains("\"url\" is used"),
            "{:?}",
            c.warnings
        );
    }

    #[test]
    fn env_values_are_coerced_and_unsafe_keys_dropped() {
        let c = mcp_entry(
            &obj(json!({"command": "x", "env": {
                "N": 5, "B": true, "NUL": null, "OK": "v",
                "LD_PRELOAD=/x/evil.so:": "x", "node_options": "--require x",
                "BASH_ENV": "/x", "LD_BIND_NOW": "1"
            }})),
            Origin::Workspace,
        );
        assert_eq!(c.value["env"], json!({"N": "5", "B": "true", "OK": "v"}));
        assert_eq!(c.warnings.len(), 7, "{:?}", c.warnings);
        // Start-up hooks are kept from files the workspace does not control.
        let c = mcp_entry(
            &obj(json!({"command": "x", "env": {"BASH_ENV": "/x", "LD_PRELOAD": "y"}})),
            Origin::Trusted,
        );
        assert_eq!(c.value["env"], json!({"BASH_ENV": "/x"}));
    }

    #[test]
    fn timeouts_and_include_tools_read_as_qwen_code_reads_them() {
        let c = mcp_entry(
            &obj(
                json!({"command": "x", "timeout": 0, "discoveryTimeoutMs": 5,
                        "includeTools": ["a(x)", "b"]}),
            ),
            Origin::Trusted,
        );
        assert_eq!(
            Value::Object(c.value.clone()),
            json!({"command": "x", "discoveryTimeoutMs": 100, "includeTools": ["a", "b"]})
        );
        assert_eq!(c.warnings.len(), 2, "{:?}", c.warnings);
    }

    #[test]
    fn lsp_coercions() {
        let c = lsp_entry(
            &obj(json!({
                "command": "srv", "transport": "TCP", "port": "7777",
                "env": {"N": 1}, "startupTimeout": -1, "shutdownTimeout": 0,
                "args": ["a", 1], "restartOnCrash": "yes", "maxRestarts": -2,
                "initializationOptions": "x", "extensionToLanguage": {".ts": "typescript", ".x": 1}
            })),
            Origin::Workspace,
        );
        assert_eq!(
            Value::Object(c.value.clone()),
            json!({"command": "srv", "transport": "tcp", "port": 7777, "env": {"N": "1"},
                   "args": ["a"], "extensionToLanguage": {".ts": "typescript"}})
        );
        assert!(c.warnings.len() >= 9, "{:?}", c.warnings);
        let c = lsp_entry(
            &obj(json!({"socket": {"socketPath": "/s"}})),
            Origin::Workspace,
        );
        assert_eq!(c.value["socket"], json!({"path": "/s"}));
        let c = lsp_entry(
            &obj(json!({"socketPath": "/s", "comand": "x"})),
            Origin::Workspace,
        );
        assert_eq!(Value::Object(c.value.clone()), json!({"path": "/s"}));
        assert!(warned(&c, "did you mean \"command\""));
    }
}

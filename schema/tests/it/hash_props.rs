//! Property tests of `configHash` and `approvalHash`: generated MCP and LSP
//! entries are rendered as JSON text with random key order, whitespace and
//! comments and loaded through the real loaders.
//! - formatting and key order never change a hash;
//! - changing any hashed field (or swapping two distinct args) always does;
//! - the MCP fields that only re-filter (`includeTools`, `excludeTools`,
//!   `trust`, `description`, and `disabled`) never change `configHash`, and
//!   `description` never changes `approvalHash`.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::*;
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Map, Value, json};
use steward_schema::canonical::{hash_value, sha256_hex};
use steward_schema::load::{
    self, Content, DEFAULT_MAX_RESTARTS, DEFAULT_SHUTDOWN_TIMEOUT_MS, DEFAULT_STARTUP_TIMEOUT_MS,
    LoadMode,
};
use steward_schema::qwen;
use steward_schema::resource::{LspServerSpec, McpServerSpec};

// ---------------------------------------------------------------------------
// Rendering with random layout

/// Layout decisions drawn from a byte string (so proptest can shrink them).
struct Noise<'a> {
    bytes: &'a [u8],
    i: usize,
}

impl Noise<'_> {
    fn next(&mut self) -> u8 {
        if self.bytes.is_empty() {
            return 0;
        }
        let b = self.bytes[self.i % self.bytes.len()];
        self.i += 1;
        b
    }

    fn ws(&mut self) -> &'static str {
        match self.next() % 10 {
            0 | 1 => "",
            2 => " ",
            3 => "\n  ",
            4 => "\t",
            5 => " /* block */ ",
            6 => " // line comment\n",
            7 => "\r\n",
            8 => "/**/",
            _ => "\n// a // nested /* comment\n",
        }
    }
}

fn render(v: &Value, noise: &mut Noise<'_>, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            // Fisher–Yates driven by the noise.
            for i in (1..keys.len()).rev() {
                let j = usize::from(noise.next()) % (i + 1);
                keys.swap(i, j);
            }
            out.push('{');
            for (n, k) in keys.into_iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                out.push_str(noise.ws());
                out.push_str(&Value::String(k.clone()).to_string());
                out.push_str(noise.ws());
                out.push(':');
                out.push_str(noise.ws());
                render(&map[k], noise, out);
                out.push_str(noise.ws());
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                out.push_str(noise.ws());
                render(item, noise, out);
                out.push_str(noise.ws());
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

fn noisy(doc: &Value, bytes: &[u8]) -> String {
    let mut noise = Noise { bytes, i: 0 };
    let mut out = String::from(noise.ws());
    render(doc, &mut noise, &mut out);
    out.push_str(noise.ws());
    out
}

fn canonical(doc: &Value) -> String {
    serde_json::to_string(doc).expect("serializable")
}

#[test]
fn noisy_rendering_reorders_and_comments_yet_parses_the_same() {
    let doc = json!({"mcpServers": {"s": {"command": "x", "args": ["//", "/*"], "env": {"A": "1", "B": "2"}}}});
    let bytes: Vec<u8> = (0u8..40).collect();
    let t = noisy(&doc, &bytes);
    assert!(
        t.contains("/* block */") && t.contains("// line comment"),
        "{t}"
    );
    assert_ne!(t, canonical(&doc));
    let reparsed = steward_schema::jsonc::parse(&t).expect("valid JSONC").value;
    assert_eq!(reparsed, doc);
}

// ---------------------------------------------------------------------------
// Loading

fn mcp_from_text(t: &str) -> McpServerSpec {
    let p = load_mcp(t);
    assert!(p.diagnostics.is_empty(), "{t}\n{:?}", p.diagnostics);
    McpServerSpec::clone(&mcp_servers(&p)["s"])
}

fn mcp_doc(entry: &Value) -> Value {
    json!({"mcpServers": {"s": entry}})
}

fn mcp_load(entry: &Value) -> McpServerSpec {
    mcp_from_text(&canonical(&mcp_doc(entry)))
}

fn lsp_ext_from_text(name: &str, t: &str) -> LspServerSpec {
    let env = env();
    let files: Vec<(String, String)> = Vec::new();
    let read = reader(&files);
    let p = load::load_extension(&ext_dir("e"), &text(t), &read, &ctx(&env, LoadMode::Strict));
    assert!(p.diagnostics.is_empty(), "{t}\n{:?}", p.diagnostics);
    match p.content {
        Content::Extension(e) => LspServerSpec::clone(&e.lsp_servers[name]),
        other => panic!("{other:?}"),
    }
}

fn lsp_ext_doc(name: &str, entry: &Value) -> Value {
    let mut servers = Map::new();
    servers.insert(name.to_owned(), entry.clone());
    json!({"name": "e", "lspServers": servers})
}

fn lsp_ext_load(name: &str, entry: &Value) -> LspServerSpec {
    lsp_ext_from_text(name, &canonical(&lsp_ext_doc(name, entry)))
}

fn lsp_ws_from_text(name: &str, t: &str) -> LspServerSpec {
    let p = load_lsp(t);
    assert!(p.diagnostics.is_empty(), "{t}\n{:?}", p.diagnostics);
    LspServerSpec::clone(&lsp_servers(&p)[name])
}

// ---------------------------------------------------------------------------
// Value editing helpers

fn obj(v: &mut Value) -> &mut Map<String, Value> {
    v.as_object_mut().expect("an entry is an object")
}

fn with(entry: &Value, key: &str, value: Value) -> Value {
    let mut e = entry.clone();
    obj(&mut e).insert(key.to_owned(), value);
    e
}

fn without(entry: &Value, keys: &[&str]) -> Value {
    let mut e = entry.clone();
    for k in keys {
        obj(&mut e).remove(*k);
    }
    e
}

fn str_of(entry: &Value, key: &str) -> Option<String> {
    entry.get(key).and_then(Value::as_str).map(str::to_owned)
}

fn push_to(entry: &Value, key: &str, item: &str) -> Value {
    let mut list = entry
        .get(key)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    list.push(json!(item));
    with(entry, key, Value::Array(list))
}

fn insert_into(entry: &Value, key: &str, k: &str, v: Value) -> Value {
    let mut map = entry
        .get(key)
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    map.insert(k.to_owned(), v);
    with(entry, key, Value::Object(map))
}

fn append_str(entry: &Value, key: &str, suffix: &str, absent: &str) -> Value {
    let new = match str_of(entry, key) {
        Some(s) => format!("{s}{suffix}"),
        None => absent.to_owned(),
    };
    with(entry, key, json!(new))
}

fn toggle(entry: &Value, key: &str, default: bool) -> Value {
    let cur = entry.get(key).and_then(Value::as_bool).unwrap_or(default);
    with(entry, key, json!(!cur))
}

fn bump(entry: &Value, key: &str, default: u64) -> Value {
    let cur = entry.get(key).and_then(Value::as_u64).unwrap_or(default);
    with(entry, key, json!(cur + 1))
}

fn wrap(entry: &Value, key: &str) -> Value {
    let new = match entry.get(key) {
        Some(v) => json!({"wrapped": v}),
        None => json!({"a": 1}),
    };
    with(entry, key, new)
}

// ---------------------------------------------------------------------------
// Strategies

/// Strings without `$` (no expansion), with characters JSON must escape and
/// comment-like sequences that must stay inside strings.
fn word() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 _./*:\\\\\"é-]{0,8}"
}

fn command() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_./-]{0,8}"
}

fn url() -> impl Strategy<Value = String> {
    (
        prop_oneof![Just("http"), Just("https")],
        "[a-z]{1,8}",
        "[a-z0-9/._-]{0,10}",
    )
        .prop_map(|(scheme, host, path)| format!("{scheme}://{host}/{path}"))
}

fn small_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        word().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            btree_map("[a-zA-Z]{1,5}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn oauth() -> impl Strategy<Value = Value> {
    (
        option::of(word()),
        option::of(vec(word(), 0..3)),
        option::of(any::<bool>()),
    )
        .prop_map(|(client, scopes, enabled)| {
            let mut m = Map::new();
            if let Some(c) = client {
                m.insert("clientId".into(), json!(c));
            }
            if let Some(s) = scopes {
                m.insert("scopes".into(), json!(s));
            }
            if let Some(e) = enabled {
                m.insert("enabled".into(), json!(e));
            }
            Value::Object(m)
        })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mt {
    Stdio,
    Http,
    Sse,
}

/// An MCP entry (Qwen or Claude form) and its transport.
fn mcp_entry() -> impl Strategy<Value = (Mt, Value)> {
    let conn = (
        prop_oneof![Just(Mt::Stdio), Just(Mt::Http), Just(Mt::Sse)],
        any::<bool>(),
        command(),
        option::of(vec(word(), 0..4)),
        option::of(word()),
        option::of(btree_map("[A-Z][A-Z0-9_]{0,6}", word(), 0..3)),
        url(),
        option::of(btree_map("[A-Z][a-zA-Z-]{0,8}", word(), 0..3)),
        option::of(0u64..1_000_000),
        option::of(oauth()),
    );
    let extra = (
        option::of(any::<bool>()),
        option::of(vec(word(), 0..3)),
        option::of(vec(word(), 0..3)),
        option::of(word()),
        option::of(any::<bool>()),
    );
    (conn, extra).prop_map(
        |(
            (t, claude, command, args, cwd, env, url, headers, timeout, oauth),
            (trust, include, exclude, description, disabled),
        )| {
            let mut e = Map::new();
            match t {
                Mt::Stdio => {
                    if claude {
                        e.insert("type".into(), json!("stdio"));
                    }
                    e.insert("command".into(), json!(command));
                    if let Some(a) = args {
                        e.insert("args".into(), json!(a));
                    }
                    if let Some(c) = cwd {
                        e.insert("cwd".into(), json!(c));
                    }
                    if let Some(v) = env {
                        e.insert("env".into(), json!(v));
                    }
                }
                Mt::Http | Mt::Sse => {
                    if claude {
                        let ty = if t == Mt::Http { "http" } else { "sse" };
                        e.insert("type".into(), json!(ty));
                        e.insert("url".into(), json!(url));
                    } else if t == Mt::Http {
                        e.insert("httpUrl".into(), json!(url));
                    } else {
                        e.insert("url".into(), json!(url));
                    }
                    if let Some(h) = headers {
                        e.insert("headers".into(), json!(h));
                    }
                }
            }
            if let Some(v) = timeout {
                e.insert("timeout".into(), json!(v));
            }
            if let Some(v) = oauth {
                e.insert("oauth".into(), v);
            }
            if let Some(v) = trust {
                e.insert("trust".into(), json!(v));
            }
            if let Some(v) = include {
                e.insert("includeTools".into(), json!(v));
            }
            if let Some(v) = exclude {
                e.insert("excludeTools".into(), json!(v));
            }
            if let Some(v) = description {
                e.insert("description".into(), json!(v));
            }
            if let Some(v) = disabled {
                e.insert("disabled".into(), json!(v));
            }
            (t, Value::Object(e))
        },
    )
}

/// The key holding the URL of an http/sse entry.
fn url_key(entry: &Value) -> &'static str {
    if entry.get("httpUrl").is_some() {
        "httpUrl"
    } else {
        "url"
    }
}

/// Every single-field change of a hashed MCP field, labelled.
fn mcp_connection_changes(t: Mt, e: &Value) -> Vec<(&'static str, Value)> {
    let mut out = vec![
        ("timeout", bump(e, "timeout", 0)),
        ("oauth", insert_into(e, "oauth", "zzExtra", json!(true))),
    ];
    match t {
        Mt::Stdio => {
            out.push(("command", append_str(e, "command", "x", "unused")));
            out.push(("args", push_to(e, "args", "zz")));
            out.push(("cwd", append_str(e, "cwd", "x", "/zz")));
            out.push(("env", insert_into(e, "env", "zz_new", json!("1"))));
            out.push((
                "transport",
                with(
                    &without(e, &["type", "command", "args", "cwd", "env"]),
                    "httpUrl",
                    json!("http://zz/mcp"),
                ),
            ));
            if let Some(Value::Object(env)) = e.get("env")
                && let Some((k, v)) = env.iter().next()
            {
                let changed = format!("{}x", v.as_str().unwrap_or_default());
                out.push(("env value", insert_into(e, "env", k, json!(changed))));
            }
        }
        Mt::Http | Mt::Sse => {
            let key = url_key(e);
            out.push(("url/httpUrl", append_str(e, key, "x", "unused")));
            out.push(("headers", insert_into(e, "headers", "zz-new", json!("1"))));
            let other = if t == Mt::Http { "sse" } else { "http" };
            let switched = if e.get("type").is_some() {
                with(e, "type", json!(other))
            } else {
                let u = e[key].clone();
                let to = if key == "httpUrl" { "url" } else { "httpUrl" };
                with(&without(e, &[key]), to, u)
            };
            out.push(("transport", switched));
        }
    }
    out
}

/// Changes of fields that only re-filter (never restart).
fn mcp_filter_changes(e: &Value) -> Vec<(&'static str, Value)> {
    vec![
        ("includeTools", push_to(e, "includeTools", "zz")),
        ("excludeTools", push_to(e, "excludeTools", "zz")),
        ("trust", toggle(e, "trust", false)),
        ("disabled", toggle(e, "disabled", false)),
        (
            "description",
            append_str(e, "description", "x", "a description"),
        ),
    ]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lt {
    Stdio,
    Tcp,
    Socket,
}

impl Lt {
    fn as_str(self) -> &'static str {
        match self {
            Lt::Stdio => "stdio",
            Lt::Tcp => "tcp",
            Lt::Socket => "socket",
        }
    }
}

/// A language server entry: (name, transport, entry).
fn lsp_entry() -> impl Strategy<Value = (String, Lt, Value)> {
    let conn = (
        "[a-z]{1,6}",
        prop_oneof![Just(Lt::Stdio), Just(Lt::Tcp), Just(Lt::Socket)],
        any::<bool>(),
        option::of(command()),
        option::of(vec(word(), 0..4)),
        option::of(btree_map("[A-Z][A-Z0-9_]{0,6}", word(), 0..3)),
        0u8..3,
        option::of("[a-z]{1,6}"),
        1u32..=65535,
        "[a-z]{1,6}\\.sock",
    );
    let extra = (
        option::of(vec("[a-z]{1,5}", 1..3)),
        // Qwen Code reads only objects here (anything else is ignored).
        option::of(small_json().prop_map(|v| json!({ "k": v }))),
        option::of(small_json().prop_map(|v| json!({ "k": v }))),
        option::of(btree_map("\\.[a-y]{1,4}", "[a-z]{1,6}", 0..3)),
        option::of(prop_oneof![
            Just("sub"),
            Just("a/b"),
            Just("."),
            Just("x/../y")
        ]),
        option::of("file:///ws/[a-z]{1,6}"),
        option::of(1u64..100_000),
        option::of(1u64..100_000),
        option::of(any::<bool>()),
        option::of(0u32..100),
        option::of(any::<bool>()),
    );
    (conn, extra).prop_map(
        |(
            (name, t, explicit, command, args, env, form, host, port, path),
            (languages, init, settings, e2l, folder, root, startup, shutdown, restart, max, trust),
        )| {
            let mut e = Map::new();
            let command = match t {
                Lt::Stdio => Some(command.unwrap_or_else(|| "srv".to_owned())),
                _ => command,
            };
            if explicit || (t != Lt::Stdio && command.is_some()) {
                e.insert("transport".into(), json!(t.as_str()));
            }
            if let Some(c) = command {
                e.insert("command".into(), json!(c));
            }
            match t {
                Lt::Stdio => {}
                Lt::Tcp => {
                    if form == 0 {
                        let mut s = Map::new();
                        if let Some(h) = host {
                            s.insert("host".into(), json!(h));
                        }
                        s.insert("port".into(), json!(port));
                        e.insert("socket".into(), Value::Object(s));
                    } else {
                        if let Some(h) = host {
                            e.insert("host".into(), json!(h));
                        }
                        e.insert("port".into(), json!(port));
                    }
                }
                Lt::Socket => match form {
                    0 => {
                        e.insert("socket".into(), json!(path));
                    }
                    1 => {
                        e.insert("socket".into(), json!({"path": path}));
                    }
                    _ => {
                        e.insert("path".into(), json!(path));
                    }
                },
            }
            let opts: [(&str, Option<Value>); 13] = [
                ("args", args.map(|v| json!(v))),
                ("env", env.map(|v| json!(v))),
                ("languages", languages.map(|v| json!(v))),
                ("initializationOptions", init),
                ("settings", settings),
                ("extensionToLanguage", e2l.map(|v| json!(v))),
                ("workspaceFolder", folder.map(|v| json!(v))),
                ("rootUri", root.map(|v| json!(v))),
                ("startupTimeout", startup.map(|v| json!(v))),
                ("shutdownTimeout", shutdown.map(|v| json!(v))),
                ("restartOnCrash", restart.map(|v| json!(v))),
                ("maxRestarts", max.map(|v| json!(v))),
                ("trustRequired", trust.map(|v| json!(v))),
            ];
            for (k, v) in opts {
                if let Some(v) = v {
                    e.insert(k.into(), v);
                }
            }
            (name, t, Value::Object(e))
        },
    )
}

/// Every single-field change of a field the LSP `configHash` covers, labelled.
fn lsp_changes(name: &str, t: Lt, e: &Value) -> Vec<(&'static str, Value)> {
    let langs: Vec<Value> = e
        .get("languages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_else(|| vec![json!(name)]);
    let mut more_langs = langs.clone();
    more_langs.push(json!("zz"));
    let with_command = |entry: &Value| {
        if entry.get("command").is_some() {
            append_str(entry, "command", "x", "unused")
        } else {
            with(
                &with(entry, "command", json!("cmd")),
                "transport",
                json!(t.as_str()),
            )
        }
    };
    let mut out = vec![
        ("languages", with(e, "languages", Value::Array(more_langs))),
        ("command", with_command(e)),
        ("args", push_to(e, "args", "zz")),
        ("env", insert_into(e, "env", "zz_new", json!("1"))),
        ("initializationOptions", wrap(e, "initializationOptions")),
        ("settings", wrap(e, "settings")),
        (
            "extensionToLanguage",
            insert_into(e, "extensionToLanguage", ".zzz", json!("zz")),
        ),
        (
            "workspaceFolder",
            match str_of(e, "workspaceFolder") {
                Some(w) => with(e, "workspaceFolder", json!(format!("{w}/deeper"))),
                None => with(e, "workspaceFolder", json!("deeper")),
            },
        ),
        (
            "rootUri",
            append_str(e, "rootUri", "x", "file:///ws/zz-other"),
        ),
        (
            "startupTimeout",
            bump(e, "startupTimeout", DEFAULT_STARTUP_TIMEOUT_MS),
        ),
        (
            "shutdownTimeout",
            bump(e, "shutdownTimeout", DEFAULT_SHUTDOWN_TIMEOUT_MS),
        ),
        ("restartOnCrash", toggle(e, "restartOnCrash", false)),
        (
            "maxRestarts",
            bump(e, "maxRestarts", u64::from(DEFAULT_MAX_RESTARTS)),
        ),
        ("trustRequired", toggle(e, "trustRequired", true)),
    ];
    let no_endpoint = without(e, &["socket", "host", "port", "path"]);
    match t {
        Lt::Stdio => {
            out.push((
                "transport",
                with(
                    &with(&no_endpoint, "transport", json!("tcp")),
                    "socket",
                    json!({"port": 5555}),
                ),
            ));
        }
        Lt::Tcp => {
            out.push((
                "transport",
                with(
                    &with(&no_endpoint, "transport", json!("socket")),
                    "socket",
                    json!("m.sock"),
                ),
            ));
            let new_port = |p: u64| if p >= 65535 { 1 } else { p + 1 };
            let changed = if let Some(Value::Object(s)) = e.get("socket") {
                let mut s = s.clone();
                let p = s["port"].as_u64().unwrap_or(1);
                s.insert("port".into(), json!(new_port(p)));
                with(e, "socket", Value::Object(s))
            } else {
                let p = e["port"].as_u64().unwrap_or(1);
                with(e, "port", json!(new_port(p)))
            };
            out.push(("socket", changed));
        }
        Lt::Socket => {
            let mut stdio = with(&no_endpoint, "transport", json!("stdio"));
            if stdio.get("command").is_none() {
                stdio = with(&stdio, "command", json!("cmd"));
            }
            out.push(("transport", stdio));
            let changed = match e.get("socket") {
                Some(Value::String(p)) => with(e, "socket", json!(format!("z{p}"))),
                Some(Value::Object(s)) => {
                    let p = s["path"].as_str().unwrap_or_default();
                    with(e, "socket", json!({"path": format!("z{p}")}))
                }
                _ => append_str(e, "path", "x", "unused"),
            };
            out.push(("socket", changed));
        }
    }
    out
}

fn swap_args(entry: &Value, i: Index, j: Index) -> Option<Value> {
    let args = entry.get("args")?.as_array()?;
    if args.len() < 2 {
        return None;
    }
    let (i, j) = (i.index(args.len()), j.index(args.len()));
    if args[i] == args[j] {
        return None;
    }
    let mut swapped = args.clone();
    swapped.swap(i, j);
    Some(with(entry, "args", Value::Array(swapped)))
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 128,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------
// MCP properties

proptest! {
    #![proptest_config(config())]

    #[test]
    fn mcp_hashes_ignore_key_order_whitespace_and_comments(
        (_t, entry) in mcp_entry(),
        layout in vec(any::<u8>(), 0..64),
    ) {
        let doc = mcp_doc(&entry);
        let plain = mcp_from_text(&canonical(&doc));
        let shuffled = mcp_from_text(&noisy(&doc, &layout));
        prop_assert_eq!(&plain.config_hash, &shuffled.config_hash);
        prop_assert_eq!(&plain.approval_hash, &shuffled.approval_hash);
        prop_assert_eq!(&plain, &shuffled);
    }

    #[test]
    fn mcp_approval_hash_is_qwen_codes_hash_of_the_normalized_literal(
        (_t, entry) in mcp_entry(),
    ) {
        // `.mcp.json`: the Claude `type` folded in, no expansion, provenance
        // left out, JSON.stringify with sorted keys.
        let spec = mcp_load(&entry);
        let held = qwen::normalize_claude_entry(&entry);
        let literal = without(&held, &["description", "scope", "extensionName"]);
        let mut text = String::new();
        qwen::js_stringify_sorted(&literal, &mut text);
        prop_assert_eq!(&spec.approval_hash, &sha256_hex(text.as_bytes()));
        prop_assert_eq!(spec.approval_hash, qwen::hash_mcp_server_config(&held));
    }

    #[test]
    fn mcp_config_hash_is_the_connection_fingerprint_of_the_spec(
        (_t, entry) in mcp_entry(),
    ) {
        let s = mcp_load(&entry);
        // Explicit defaults fingerprint as absent fields.
        let fingerprint = json!({
            "transport": s.transport, "command": s.command,
            "args": s.args.filter(|a| !a.is_empty()),
            "cwd": s.cwd.filter(|c| !["", ".", "./", "/ws"].contains(&c.as_str())),
            "env": s.env.filter(|e| !e.is_empty()), "url": s.url, "httpUrl": s.http_url,
            "headers": s.headers.filter(|h| !h.is_empty()),
            "timeout": s.timeout.filter(|t| *t != 600_000), "oauth": s.oauth,
        });
        prop_assert_eq!(s.config_hash, hash_value(&fingerprint));
    }

    #[test]
    fn mcp_qwen_and_claude_forms_share_config_hash((t, entry) in mcp_entry()) {
        let other = match (t, entry.get("type").is_some()) {
            (Mt::Stdio, true) => without(&entry, &["type"]),
            (Mt::Stdio, false) => with(&entry, "type", json!("stdio")),
            (Mt::Http, true) => {
                let u = entry["url"].clone();
                with(&without(&entry, &["type", "url"]), "httpUrl", u)
            }
            (Mt::Http, false) => {
                let u = entry["httpUrl"].clone();
                with(&with(&without(&entry, &["httpUrl"]), "url", u), "type", json!("http"))
            }
            (Mt::Sse, true) => without(&entry, &["type"]),
            (Mt::Sse, false) => with(&entry, "type", json!("sse")),
        };
        let (a, b) = (mcp_load(&entry), mcp_load(&other));
        prop_assert_eq!(a.transport, b.transport);
        prop_assert_eq!(a.config_hash, b.config_hash);
    }

    #[test]
    fn mcp_changing_any_hashed_field_changes_both_hashes((t, entry) in mcp_entry()) {
        let base = mcp_load(&entry);
        for (field, changed) in mcp_connection_changes(t, &entry) {
            let spec = mcp_load(&changed);
            prop_assert_ne!(&base.config_hash, &spec.config_hash, "{} unchanged: {}", field, changed);
            prop_assert_ne!(&base.approval_hash, &spec.approval_hash, "{} unchanged: {}", field, changed);
        }
    }

    #[test]
    fn mcp_swapping_two_distinct_args_changes_the_hash(
        (_t, entry) in mcp_entry(),
        extra in vec(word(), 2..5),
        i in any::<Index>(),
        j in any::<Index>(),
    ) {
        let entry = with(
            &without(&entry, &["type", "url", "httpUrl", "headers"]),
            "args",
            json!(extra),
        );
        let entry = if entry.get("command").is_none() { with(&entry, "command", json!("srv")) } else { entry };
        if let Some(swapped) = swap_args(&entry, i, j) {
            let (a, b) = (mcp_load(&entry), mcp_load(&swapped));
            prop_assert_ne!(&a.config_hash, &b.config_hash);
            prop_assert_ne!(a.approval_hash, b.approval_hash);
        }
    }

    #[test]
    fn mcp_filter_fields_never_change_config_hash((_t, entry) in mcp_entry()) {
        let base = mcp_load(&entry);
        for (field, changed) in mcp_filter_changes(&entry) {
            let spec = mcp_load(&changed);
            prop_assert_eq!(&base.config_hash, &spec.config_hash, "{} changed it: {}", field, changed);
            if field == "description" {
                prop_assert_eq!(&base.approval_hash, &spec.approval_hash);
            }
        }
        let stripped = mcp_load(&without(&entry, &["description"]));
        prop_assert_eq!(&base.approval_hash, &stripped.approval_hash);
    }

    #[test]
    fn mcp_rotating_an_expanded_secret_keeps_approval_hash(
        (_t, entry) in mcp_entry(),
        old in "[a-z0-9]{1,12}",
        new in "[a-z0-9]{1,12}",
    ) {
        prop_assume!(old != new);
        let entry = with(
            &without(&entry, &["type", "url", "httpUrl", "headers"]),
            "command",
            json!("srv"),
        );
        let entry = insert_into(&entry, "env", "SECRET_TOKEN", json!("${SECRET}"));
        let text = canonical(&mcp_doc(&entry));
        let load_with = |secret: &str| {
            let env = env_with(&[("SECRET", secret)]);
            let p = load::load_mcp_json(Path::new("/ws/.mcp.json"), &text_of(&text), &ctx(&env, LoadMode::Strict));
            McpServerSpec::clone(&mcp_servers(&p)["s"])
        };
        let (a, b) = (load_with(&old), load_with(&new));
        prop_assert_eq!(&a.approval_hash, &b.approval_hash);
        prop_assert_ne!(&a.config_hash, &b.config_hash);
    }
}

fn text_of(s: &str) -> load::FileText {
    load::FileText::Text(s.to_owned())
}

// ---------------------------------------------------------------------------
// LSP properties

proptest! {
    #![proptest_config(config())]

    #[test]
    fn lsp_config_hash_ignores_key_order_whitespace_and_comments(
        (name, _t, entry) in lsp_entry(),
        layout in vec(any::<u8>(), 0..64),
    ) {
        let doc = lsp_ext_doc(&name, &entry);
        let plain = lsp_ext_from_text(&name, &canonical(&doc));
        let shuffled = lsp_ext_from_text(&name, &noisy(&doc, &layout));
        prop_assert_eq!(&plain.config_hash, &shuffled.config_hash);
        prop_assert_eq!(&plain, &shuffled);
        // The same in the workspace .lsp.json.
        let mut ws_doc = Map::new();
        ws_doc.insert(name.clone(), entry.clone());
        let ws_doc = Value::Object(ws_doc);
        let a = lsp_ws_from_text(&name, &canonical(&ws_doc));
        let b = lsp_ws_from_text(&name, &noisy(&ws_doc, &layout));
        prop_assert_eq!(a.config_hash, b.config_hash);
    }

    #[test]
    fn lsp_changing_any_field_changes_config_hash((name, t, entry) in lsp_entry()) {
        let base = lsp_ext_load(&name, &entry);
        prop_assert_eq!(&base.config_hash, &load::lsp_config_hash(&name, &base));
        for (field, changed) in lsp_changes(&name, t, &entry) {
            let spec = lsp_ext_load(&name, &changed);
            prop_assert_ne!(&base.config_hash, &spec.config_hash, "{} unchanged: {}", field, changed);
        }
    }

    #[test]
    fn lsp_swapping_two_distinct_args_changes_config_hash(
        (name, _t, entry) in lsp_entry(),
        args in vec(word(), 2..5),
        i in any::<Index>(),
        j in any::<Index>(),
    ) {
        let entry = with(&entry, "args", json!(args));
        if let Some(swapped) = swap_args(&entry, i, j) {
            prop_assert_ne!(
                lsp_ext_load(&name, &entry).config_hash,
                lsp_ext_load(&name, &swapped).config_hash
            );
        }
    }

    #[test]
    fn lsp_explicit_defaults_keep_config_hash((name, _t, entry) in lsp_entry()) {
        let base = lsp_ext_load(&name, &entry);
        let mut explicit = entry.clone();
        let defaults: BTreeMap<&str, Value> = [
            ("startupTimeout", json!(DEFAULT_STARTUP_TIMEOUT_MS)),
            ("shutdownTimeout", json!(DEFAULT_SHUTDOWN_TIMEOUT_MS)),
            ("restartOnCrash", json!(false)),
            ("maxRestarts", json!(DEFAULT_MAX_RESTARTS)),
            ("languages", json!([name])),
            ("trustRequired", json!(true)),
            ("args", json!([])),
            ("env", json!({})),
            ("extensionToLanguage", json!({})),
        ]
        .into_iter()
        .collect();
        for (k, v) in defaults {
            obj(&mut explicit).entry(k.to_owned()).or_insert(v);
        }
        prop_assert_eq!(base.config_hash, lsp_ext_load(&name, &explicit).config_hash);
    }
}

//! The loaders: source formats, transport inference, variable expansion,
//! extensions, `--mcp-config`, `.lsp.json` normalization and defaults, and
//! what strict and lenient loading do with a problem (strict rejects the
//! whole source; lenient drops the entry with the problem and loads the
//! rest).

use std::path::{Path, PathBuf};

use crate::common::*;
use steward_schema::Diagnostic;
use steward_schema::formats::{ApprovalStatus, LspTransport, TrustLevel};
use steward_schema::load::{
    self, Content, DEFAULT_MAX_RESTARTS, DEFAULT_SHUTDOWN_TIMEOUT_MS, DEFAULT_STARTUP_TIMEOUT_MS,
    FileText, LoadMode, ParsedSource,
};
use steward_schema::resource::{
    LspSocket, McpServerSpec, McpTransport, Scope, SourceKind, SourceState,
};

/// 1-based (line, column in characters) of the first occurrence of `needle`.
fn pos_of(text: &str, needle: &str) -> (u32, u32) {
    let at = text
        .find(needle)
        .unwrap_or_else(|| panic!("{needle} not in text"));
    let before = &text[..at];
    let line = before.matches('\n').count() as u32 + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = text[line_start..at].chars().count() as u32 + 1;
    (line, column)
}

fn diag_at<'a>(p: &'a ParsedSource, pointer: &str) -> &'a Diagnostic {
    p.diagnostics
        .iter()
        .find(|d| d.pointer == pointer)
        .unwrap_or_else(|| panic!("no diagnostic at {pointer}: {:#?}", p.diagnostics))
}

fn warn_at<'a>(p: &'a ParsedSource, pointer: &str) -> &'a Diagnostic {
    p.warnings
        .iter()
        .find(|d| d.pointer == pointer)
        .unwrap_or_else(|| panic!("no warning at {pointer}: {:#?}", p.warnings))
}

fn dropped_names(p: &ParsedSource) -> Vec<&str> {
    p.dropped.iter().map(|d| d.name.as_str()).collect()
}

fn assert_located(d: &Diagnostic, text: &str, needle: &str) {
    let (line, column) = pos_of(text, needle);
    assert_eq!(
        (d.line, d.column),
        (Some(line), Some(column)),
        "{d} should point at {needle}"
    );
}

fn extension_content(p: &ParsedSource) -> &load::ExtensionContent {
    match &p.content {
        Content::Extension(e) => e,
        other => panic!(
            "expected an extension, found {other:?} ({:?})",
            p.diagnostics
        ),
    }
}

fn load_ext(dir: &str, manifest: &str, files: &[(&str, &str)], mode: LoadMode) -> ParsedSource {
    let env = env();
    let files: Vec<(String, String)> = files
        .iter()
        .map(|(p, t)| {
            (
                ext_dir(dir).join(p).to_string_lossy().into_owned(),
                (*t).to_owned(),
            )
        })
        .collect();
    let read = reader(&files);
    let manifest = named_manifest(dir, manifest);
    load::load_extension(&ext_dir(dir), &text(&manifest), &read, &ctx(&env, mode))
}

/// Load a manifest exactly as written (no name added).
fn load_ext_as_written(dir: &str, manifest: &str) -> ParsedSource {
    let env = env();
    let files: Vec<(String, String)> = Vec::new();
    let read = reader(&files);
    load::load_extension(
        &ext_dir(dir),
        &text(manifest),
        &read,
        &ctx(&env, LoadMode::Lenient),
    )
}

// ---------------------------------------------------------------------------
// MCP entry forms and transport inference

#[test]
fn qwen_command_form_is_stdio() {
    let s = one_mcp(r#"{"command": "srv", "args": ["-v"], "env": {"A": "1"}, "cwd": "/tmp"}"#);
    assert_eq!(s.transport, McpTransport::Stdio);
    assert_eq!(s.command.as_deref(), Some("srv"));
    assert_eq!(s.args, Some(vec!["-v".to_owned()]));
    assert_eq!(s.cwd.as_deref(), Some("/tmp"));
    assert_eq!(s.scope, Scope::Project);
}

#[test]
fn qwen_url_form_is_sse() {
    let s = one_mcp(r#"{"url": "http://h/sse", "headers": {"A": "1"}}"#);
    assert_eq!(s.transport, McpTransport::Sse);
    assert_eq!(s.url.as_deref(), Some("http://h/sse"));
    assert_eq!(s.http_url, None);
    assert_eq!(s.headers.as_ref().unwrap()["A"], "1");
}

#[test]
fn qwen_http_url_form_is_streamable_http() {
    let s = one_mcp(r#"{"httpUrl": "https://h/mcp"}"#);
    assert_eq!(s.transport, McpTransport::Http);
    assert_eq!(s.http_url.as_deref(), Some("https://h/mcp"));
    assert_eq!(s.url, None);
}

#[test]
fn claude_type_stdio_form() {
    let s = one_mcp(r#"{"type": "stdio", "command": "srv", "args": ["a"]}"#);
    assert_eq!(s.transport, McpTransport::Stdio);
    assert_eq!(s.command.as_deref(), Some("srv"));
    assert_eq!(
        s.config_hash,
        one_mcp(r#"{"command": "srv", "args": ["a"]}"#).config_hash
    );
}

#[test]
fn claude_type_http_url_normalizes_to_http_url() {
    let claude = one_mcp(r#"{"type": "http", "url": "https://h/mcp"}"#);
    assert_eq!(claude.transport, McpTransport::Http);
    assert_eq!(claude.http_url.as_deref(), Some("https://h/mcp"));
    assert_eq!(claude.url, None);
    let qwen = one_mcp(r#"{"httpUrl": "https://h/mcp"}"#);
    assert_eq!(claude.config_hash, qwen.config_hash, "same connection");
    // Qwen Code hashes a `.mcp.json` entry after folding `type` in.
    assert_eq!(claude.approval_hash, qwen.approval_hash);
}

#[test]
fn claude_type_sse_form() {
    let s = one_mcp(r#"{"type": "sse", "url": "http://h/sse"}"#);
    assert_eq!(s.transport, McpTransport::Sse);
    assert_eq!(s.url.as_deref(), Some("http://h/sse"));
    assert_eq!(
        s.config_hash,
        one_mcp(r#"{"url": "http://h/sse"}"#).config_hash
    );
}

#[test]
fn transport_inference_prefers_http_url_then_url_then_command() {
    let s = one_mcp(r#"{"command": "srv", "url": "http://h/sse", "httpUrl": "http://h/mcp"}"#);
    assert_eq!(s.transport, McpTransport::Http);
    assert_eq!(
        s.command, None,
        "fields of other transports are not part of the spec"
    );
    let s = one_mcp(r#"{"command": "srv", "url": "http://h/sse"}"#);
    assert_eq!(s.transport, McpTransport::Sse);
    // As in Qwen Code, `type` does not override the order (a warning says so).
    let t = mcp_json_one(
        "s",
        r#"{"type": "stdio", "command": "srv", "url": "http://h/sse"}"#,
    );
    let p = load_mcp(&t);
    assert_eq!(mcp_servers(&p)["s"].transport, McpTransport::Sse);
    assert!(
        warn_at(&p, "/mcpServers/s/type")
            .message
            .contains("\"url\" (SSE)")
    );
    // An empty field is not written: the next one decides.
    let s = one_mcp(r#"{"httpUrl": "", "command": "srv"}"#);
    assert_eq!(s.transport, McpTransport::Stdio);
}

/// `.mcp.json` keys other than `mcpServers` are ignored with a warning; a
/// `--mcp-config` without `mcpServers` is the map itself, as in Qwen Code.
#[test]
fn mcp_json_top_level_typos_warn_and_a_bare_cli_map_is_read() {
    let t = r#"{"mcpServer": {"s": {"command": "x"}}}"#;
    let p = load_mcp(t);
    assert_eq!(p.state, SourceState::Valid);
    assert!(mcp_servers(&p).is_empty());
    let d = warn_at(&p, "/mcpServer");
    assert!(d.message.contains("did you mean \"mcpServers\""), "{d}");
    assert_located(d, t, "\"mcpServer\"");
    let env = env();
    let files: Vec<(String, String)> = Vec::new();
    let read = reader(&files);
    let p = load::load_cli_mcp_config(
        r#"{"s": {"command": "x"}, "$schema": "x"}"#,
        &read,
        &ctx(&env, LoadMode::Strict),
    );
    assert!(!p.has_findings(), "{:?}", p.warnings);
    assert_eq!(mcp_servers(&p).keys().collect::<Vec<_>>(), ["s"]);
}

/// Qwen Code loads such an entry and fails to connect it; Steward skips it
/// with a warning and keeps a row for it, and the rest of the file applies.
#[test]
fn entry_without_command_url_or_http_url_is_skipped_with_a_warning() {
    let t = r#"{"mcpServers": {"s": {"args": ["x"]}, "ok": {"command": "x"}}}"#;
    let p = load_mcp(t);
    assert_eq!(p.state, SourceState::Valid);
    assert_eq!(mcp_servers(&p).keys().collect::<Vec<_>>(), ["ok"]);
    assert_eq!(dropped_names(&p), ["s"]);
    let d = warn_at(&p, "/mcpServers/s");
    assert!(
        d.message.contains("command") && d.message.contains("httpUrl"),
        "{d}"
    );
    assert_eq!(d.file, PathBuf::from("/ws/.mcp.json"));
    assert!(d.line.is_some() && d.column.is_some(), "{d}");
    assert!(
        p.dropped[0].message.contains(&d.to_string()),
        "{:?}",
        p.dropped
    );
}

#[test]
fn claude_type_without_its_field_is_skipped() {
    for entry in [
        r#"{"type": "stdio"}"#,
        r#"{"type": "http"}"#,
        r#"{"type": "sse"}"#,
        r#"{"type": "sdk", "command": "x"}"#,
        r#"{"tcp": "ws://h:1"}"#,
    ] {
        let p = load_mcp(&mcp_json_one("s", entry));
        assert_eq!(p.state, SourceState::Valid, "{entry}");
        assert_eq!(dropped_names(&p), ["s"], "{entry}");
        assert!(mcp_servers(&p).is_empty(), "{entry}");
    }
    // A command makes it a stdio server whatever `type` says (a warning).
    let p = load_mcp(&mcp_json_one("s", r#"{"type": "sse", "command": "x"}"#));
    assert_eq!(mcp_servers(&p)["s"].transport, McpTransport::Stdio);
    warn_at(&p, "/mcpServers/s/type");
}

#[test]
fn unknown_type_is_a_warning_and_the_transport_follows_the_fields() {
    let t = r#"{"mcpServers": {"s": {"type": "websocket", "url": "http://h"}}}"#;
    let p = load_mcp(t);
    assert_eq!(p.state, SourceState::Valid);
    assert_eq!(mcp_servers(&p)["s"].transport, McpTransport::Sse);
    let d = warn_at(&p, "/mcpServers/s/type");
    assert!(
        d.message.contains("\"http\"") && d.message.contains("\"sse\""),
        "{d}"
    );
    assert_located(d, t, "\"websocket\"");
}

#[test]
fn url_must_be_http_or_https() {
    for entry in [
        r#"{"url": "ftp://h/sse"}"#,
        r#"{"httpUrl": "h/mcp"}"#,
        r#"{"type": "http", "url": "file:///x"}"#,
    ] {
        let p = load_mcp(&mcp_json_one("s", entry));
        assert_eq!(p.state, SourceState::Invalid, "{entry}");
        assert!(
            p.diagnostics
                .iter()
                .any(|d| d.message.contains("expected an http:// or https:// URL")),
            "{entry}: {:?}",
            p.diagnostics
        );
    }
    let p = load_mcp(&mcp_json_one(
        "s",
        r#"{"type": "http", "url": "file:///x"}"#,
    ));
    diag_at(&p, "/mcpServers/s/url");
}

#[test]
fn empty_command_is_an_error() {
    let p = load_mcp(&mcp_json_one("s", r#"{"command": "  "}"#));
    assert_eq!(p.state, SourceState::Invalid);
    let d = diag_at(&p, "/mcpServers/s/command");
    assert!(d.message.contains("expected a non-empty command"), "{d}");
}

#[test]
fn schema_type_errors_say_what_was_expected_with_position_and_pointer() {
    let t = "{\n  \"mcpServers\": {\n    \"s\": {\"command\": \"x\", \"args\": \"oops\", \"timeout\": \"5\"}\n  }\n}";
    let p = load_mcp(t);
    assert_eq!(p.state, SourceState::Invalid);
    let args = diag_at(&p, "/mcpServers/s/args");
    assert!(args.message.starts_with("expected an array"), "{args}");
    assert!(args.message.contains("\"oops\""), "{args}");
    assert_located(args, t, "\"oops\"");
    let timeout = diag_at(&p, "/mcpServers/s/timeout");
    assert!(timeout.message.starts_with("expected"), "{timeout}");
    assert_located(timeout, t, "\"5\"");
    for d in &p.diagnostics {
        assert_eq!(d.file, PathBuf::from("/ws/.mcp.json"));
        assert!(d.line.is_some() && d.column.is_some(), "{d}");
        assert!(d.pointer.starts_with("/mcpServers/s"), "{d}");
    }
    // Rendered like compiler output.
    let text = p.error_text().unwrap();
    let (line, col) = pos_of(t, "\"oops\"");
    assert!(
        text.contains(&format!("/ws/.mcp.json:{line}:{col}: expected an array")),
        "{text}"
    );
    assert!(text.contains("(at /mcpServers/s/args)"), "{text}");
}

#[test]
fn schema_keys_are_not_servers() {
    let p = load_lsp(r#"{"$schema": "https://x/lsp.json", "py": {"command": "pylsp"}}"#);
    assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
    assert_eq!(lsp_servers(&p).keys().collect::<Vec<_>>(), ["py"]);
    let p = load_mcp(r#"{"$schema": "https://x/mcp.json", "mcpServers": {"s": {"command": "x"}}}"#);
    assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
    assert_eq!(mcp_servers(&p).len(), 1);
    let p = load_settings_text(
        SourceKind::UserSettings,
        r#"{"$schema": "https://x/settings.json", "mcpServers": {}}"#,
        LoadMode::Strict,
    );
    assert_eq!(p.state, SourceState::Valid);
    let env = env();
    let cx = ctx(&env, LoadMode::Strict);
    let a = load::load_approvals(
        Path::new("/a.json"),
        &text(r#"{"$schema": "x", "/ws": {"p": {"hash": "h", "status": "approved"}}}"#),
        &cx,
    );
    assert_eq!(a.state, SourceState::Valid, "{:?}", a.diagnostics);
    match &a.content {
        Content::Approvals(f) => {
            assert_eq!(f.keys().collect::<Vec<_>>(), ["/ws"]);
            assert_eq!(f["/ws"]["p"].status, ApprovalStatus::Approved);
        }
        other => panic!("{other:?}"),
    }
    let t = load::load_trusted_folders(
        Path::new("/t.json"),
        &text(r#"{"$schema": "x", "/ws": "TRUST_FOLDER"}"#),
        &cx,
    );
    assert_eq!(t.state, SourceState::Valid, "{:?}", t.diagnostics);
    match &t.content {
        Content::TrustedFolders(f) => {
            assert_eq!(f.len(), 1);
            assert_eq!(f["/ws"], TrustLevel::TrustFolder);
        }
        other => panic!("{other:?}"),
    }
    // The extension-referenced bare map skips `$schema` too.
    let p = load_ext(
        "e",
        r#"{"mcpServers": "servers.json"}"#,
        &[("servers.json", r#"{"$schema": "x", "s": {"command": "x"}}"#)],
        LoadMode::Strict,
    );
    assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
    assert_eq!(
        extension_content(&p).mcp_servers.keys().collect::<Vec<_>>(),
        ["s"]
    );
}

#[test]
fn bad_approval_status_is_invalid_and_an_unknown_trust_level_is_skipped() {
    let env = env();
    let cx = ctx(&env, LoadMode::Lenient);
    let a = load::load_approvals(
        Path::new("/a.json"),
        &text(r#"{"/ws": {"p": {"hash": "h", "status": "maybe"}}}"#),
        &cx,
    );
    assert_eq!(a.state, SourceState::Invalid);
    assert_eq!(a.content, Content::Empty);
    // Qwen Code skips a rule whose level it does not know: a warning here.
    let t = load::load_trusted_folders(
        Path::new("/t.json"),
        &text(r#"{"/ws": "YES", "/x": "DO_NOT_TRUST"}"#),
        &cx,
    );
    assert_eq!(t.state, SourceState::Valid);
    assert!(
        warn_at(&t, "/~1ws").message.contains("TRUST_FOLDER"),
        "{:?}",
        t.warnings
    );
    match &t.content {
        Content::TrustedFolders(f) => assert_eq!(f.keys().collect::<Vec<_>>(), ["/x"]),
        other => panic!("{other:?}"),
    }
}

// ---------------------------------------------------------------------------
// Comments

#[test]
fn comments_are_accepted_in_every_source() {
    let c = |body: &str| format!("// leading\n/* block */ {body} // trailing\n");
    let s = srcs()
        .user(&c(r#"{ /* a */ "mcpServers": { // b
                 "u": {"command": "x" /* c */} }, "mcp": {"excluded": [/* none */]} }"#))
        .mcp_json(&c(
            r#"{"mcpServers": {"p": {"url": "http://h//x" /* url has // inside */}}}"#,
        ))
        .lsp_json(&c(r#"{"py": {"command": "pylsp", // x
                         "args": ["/* not a comment */"]}}"#))
        .extension(
            "e1",
            &c(r#"{"name": "e1", "mcpServers": {/* x */"e": {"command": "x"}}}"#),
        )
        .trusted(&c(r#"{"/ws": /* x */ "TRUST_FOLDER"}"#))
        .approvals(&c(r#"{/* none */}"#))
        // Inline --mcp-config is recognized by its leading `{`; comments inside it are fine.
        .cli_mcp(r#"{"mcpServers": {/* x */ "c": {"command": "x"}}} // trailing"#)
        .desired();
    assert_eq!(mcp_spec(&s, "p").url.as_deref(), Some("http://h//x"));
    assert_eq!(lsp_spec(&s, "py").args, ["/* not a comment */"]);
    assert_eq!(s.mcp.len(), 4);
}

// ---------------------------------------------------------------------------
// Variable expansion

#[test]
fn env_expansion_in_stdio_fields() {
    let s = one_mcp(
        r#"{"command": "$HOME/bin/srv", "args": ["--port=${PORT}", "${NOPE:-dflt}", "${EMPTY:-e}"],
            "env": {"T": "Bearer $TOKEN", "D": "${MISSING:-${HOME}}"}, "cwd": "${HOME}/w"}"#,
    );
    assert_eq!(s.command.as_deref(), Some("/home/u/bin/srv"));
    assert_eq!(s.args.as_deref().unwrap(), ["--port=8080", "dflt", "e"]);
    let env = s.env.unwrap();
    assert_eq!(env["T"], "Bearer s3cr3t");
    assert_eq!(env["D"], "/home/u");
    assert_eq!(s.cwd.as_deref(), Some("/home/u/w"));
}

#[test]
fn env_expansion_in_url_http_url_and_headers() {
    let s = one_mcp(
        r#"{"url": "http://h:$PORT/sse", "headers": {"Authorization": "Bearer ${TOKEN}"}}"#,
    );
    assert_eq!(s.url.as_deref(), Some("http://h:8080/sse"));
    assert_eq!(s.headers.unwrap()["Authorization"], "Bearer s3cr3t");
    let s = one_mcp(r#"{"httpUrl": "${BASE:-http://localhost}:${PORT}/mcp"}"#);
    assert_eq!(s.http_url.as_deref(), Some("http://localhost:8080/mcp"));
    let s = one_mcp(r#"{"type": "http", "url": "http://h/$TOKEN"}"#);
    assert_eq!(s.http_url.as_deref(), Some("http://h/s3cr3t"));
}

#[test]
fn fields_that_do_not_expand_are_kept_literally() {
    let s =
        one_mcp(r#"{"command": "x", "description": "costs $TOKEN", "includeTools": ["$HOME"]}"#);
    assert_eq!(s.description.as_deref(), Some("costs $TOKEN"));
    assert_eq!(s.include_tools.as_deref().unwrap(), ["$HOME"]);
}

#[test]
fn unset_variable_without_default_names_it_with_file_and_pointer() {
    for (entry, pointer, needle) in [
        (
            r#"{"command": "x", "env": {"KEY": "${API_KEY}"}}"#,
            "/mcpServers/s/env/KEY",
            "\"${API_KEY}\"",
        ),
        (
            r#"{"command": "x", "args": ["a", "$API_KEY"]}"#,
            "/mcpServers/s/args/1",
            "\"$API_KEY\"",
        ),
        (
            r#"{"command": "$API_KEY/x"}"#,
            "/mcpServers/s/command",
            "\"$API_KEY/x\"",
        ),
        (
            r#"{"command": "x", "cwd": "${API_KEY}"}"#,
            "/mcpServers/s/cwd",
            "\"${API_KEY}\"",
        ),
        (
            r#"{"url": "http://h/${API_KEY}"}"#,
            "/mcpServers/s/url",
            "\"http://h/${API_KEY}\"",
        ),
        (
            r#"{"httpUrl": "http://h/${API_KEY}"}"#,
            "/mcpServers/s/httpUrl",
            "\"http://h/${API_KEY}\"",
        ),
        (
            r#"{"httpUrl": "http://h", "headers": {"X-K": "${API_KEY}"}}"#,
            "/mcpServers/s/headers/X-K",
            "\"${API_KEY}\"",
        ),
    ] {
        // Qwen Code leaves it literal: so does Steward, with a warning.
        let t = mcp_json_one("s", entry);
        let p = load_mcp(&t);
        assert_eq!(p.state, SourceState::Valid, "{entry}");
        assert_eq!(mcp_servers(&p).len(), 1, "{entry}");
        let d = warn_at(&p, pointer);
        assert!(d.message.contains("API_KEY"), "{entry}: {d}");
        assert_eq!(d.file, PathBuf::from("/ws/.mcp.json"));
        assert_located(d, &t, needle);
    }
}

#[test]
fn unset_variable_in_settings_names_the_settings_file() {
    let t = r#"{"mcpServers": {"s": {"command": "x", "env": {"K": "$NOT_SET"}}}}"#;
    let p = load_settings_text(SourceKind::WorkspaceSettings, t, LoadMode::Strict);
    assert_eq!(p.state, SourceState::Valid);
    let d = warn_at(&p, "/mcpServers/s/env/K");
    assert_eq!(d.file, PathBuf::from("/ws/.qwen/settings.json"));
    assert!(d.message.contains("NOT_SET"), "{d}");
}

#[test]
fn extension_variables_expand_only_in_extensions() {
    let entry = r#"{"command": "${extensionPath}${/}bin${/}srv",
                    "args": ["${CLAUDE_PLUGIN_ROOT}/a", "${workspacePath}"]}"#;
    let p = load_ext(
        "tools",
        &format!(r#"{{"name": "tools", "mcpServers": {{"s": {entry}}}}}"#),
        &[],
        LoadMode::Strict,
    );
    assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
    let e = extension_content(&p);
    let s = &e.mcp_servers["s"];
    let dir = ext_dir("tools").to_string_lossy().into_owned();
    assert_eq!(s.command.as_deref(), Some(&*format!("{dir}/bin/srv")));
    assert_eq!(
        s.args.as_deref().unwrap(),
        [format!("{dir}/a"), "/ws".to_owned()]
    );
    assert_eq!(s.scope, Scope::Extension);
    assert_eq!(s.extension_name.as_deref(), Some("tools"));
    // The same entry in settings or .mcp.json: unset variables, literal.
    let p = load_mcp(&mcp_json_one("s", entry));
    assert_eq!(p.state, SourceState::Valid);
    assert!(
        warn_at(&p, "/mcpServers/s/command")
            .message
            .contains("extensionPath")
    );
    assert_eq!(
        mcp_servers(&p)["s"].command.as_deref(),
        Some("${extensionPath}${/}bin${/}srv")
    );
    let p = load_settings_text(
        SourceKind::UserSettings,
        &settings_one("s", entry),
        LoadMode::Strict,
    );
    assert_eq!(p.state, SourceState::Valid);
    assert_eq!(p.warnings.len(), 4, "{:?}", p.warnings);
}

#[test]
fn extension_variables_expand_in_extension_lsp_servers() {
    let p = load_ext(
        "langs",
        r#"{"lspServers": {"py": {"command": "${extensionPath}/pylsp", "args": ["${workspacePath}"]}}}"#,
        &[],
        LoadMode::Strict,
    );
    assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
    let py = &extension_content(&p).lsp_servers["py"];
    let dir = ext_dir("langs").to_string_lossy().into_owned();
    assert_eq!(py.command.as_deref(), Some(&*format!("{dir}/pylsp")));
    assert_eq!(py.args, ["/ws"]);
    let p = load_lsp(r#"{"py": {"command": "${extensionPath}/pylsp"}}"#);
    assert_eq!(p.state, SourceState::Valid);
    warn_at(&p, "/py/command");
}

// ---------------------------------------------------------------------------
// Extensions

#[test]
fn extension_inline_servers() {
    let p = load_ext(
        "my-ext",
        r#"{"version": "1.0", "mcpServers": {"s": {"command": "x"}}, "lspServers": {"py": {"command": "pylsp"}}}"#,
        &[],
        LoadMode::Strict,
    );
    assert_eq!(p.state, SourceState::Valid);
    assert_eq!(p.kind, SourceKind::Extension);
    assert_eq!(p.path, ext_dir("my-ext").join("qwen-extension.json"));
    let e = extension_content(&p);
    assert_eq!(e.name, "my-ext");
    assert_eq!(e.mcp_servers["s"].extension_name.as_deref(), Some("my-ext"));
    assert_eq!(e.lsp_servers["py"].scope, Scope::Extension);
    assert!(e.referenced_files.is_empty());
}

/// Qwen Code skips an extension without a name, or with a name outside
/// `[A-Za-z0-9_.-]`: it contributes nothing, and says why.
#[test]
fn extension_without_a_valid_name_is_invalid() {
    for manifest in [
        r#"{"mcpServers": {"s": {"command": "x"}}}"#,
        r#"{"name": "bad name", "mcpServers": {"s": {"command": "x"}}}"#,
        r#"{"name": "", "mcpServers": {"s": {"command": "x"}}}"#,
    ] {
        let p = load_ext_as_written("e", manifest);
        assert_eq!(p.state, SourceState::Invalid, "{manifest}");
        assert_eq!(p.content, Content::Empty, "{manifest}");
        assert!(
            p.diagnostics[0].message.contains("name"),
            "{:?}",
            p.diagnostics
        );
    }
}

/// `${…}` over the whole manifest, as Qwen Code hydrates it: the extension
/// variables anywhere (a referenced file's path too); other names literal.
#[test]
fn extension_variables_expand_over_the_whole_manifest() {
    let p = load_ext(
        "e",
        r#"{"name": "e", "lspServers": "${extensionPath}${/}lsp.json",
            "mcpServers": {"s": {"command": "x", "description": "${extensionPath} ${unknown}"}}}"#,
        &[("lsp.json", r#"{"py": {"command": "pylsp"}}"#)],
        LoadMode::Strict,
    );
    assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
    let e = extension_content(&p);
    assert_eq!(e.referenced_files, [ext_dir("e").join("lsp.json")]);
    assert_eq!(e.lsp_servers.keys().collect::<Vec<_>>(), ["py"]);
    let dir = ext_dir("e").to_string_lossy().into_owned();
    assert_eq!(
        e.mcp_servers["s"].description.as_deref(),
        Some(&*format!("{dir} ${{unknown}}"))
    );
}

#[test]
fn extension_servers_as_relative_paths_are_read_through_the_reader() {
    let p = load_ext(
        "e",
        r#"{"name": "ee", "mcpServers": "mcp/servers.json", "lspServers": "lsp.json"}"#,
        &[
            (
                "mcp/servers.json",
                r#"{"mcpServers": {"s": {"command": "x"}}}"#,
            ),
            ("lsp.json", r#"{"py": {"command": "pylsp"}}"#),
        ],
        LoadMode::Strict,
    );
    assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
    let e = extension_content(&p);
    assert_eq!(e.mcp_servers.keys().collect::<Vec<_>>(), ["s"]);
    assert_eq!(e.mcp_servers["s"].extension_name.as_deref(), Some("ee"));
    assert_eq!(e.lsp_servers.keys().collect::<Vec<_>>(), ["py"]);
    assert_eq!(
        e.referenced_files,
        [
            ext_dir("e").join("mcp/servers.json"),
            ext_dir("e").join("lsp.json")
        ]
    );
    // A bare map works too.
    let p = load_ext(
        "e",
        r#"{"mcpServers": "servers.json"}"#,
        &[("servers.json", r#"{"s": {"httpUrl": "http://h/mcp"}}"#)],
        LoadMode::Strict,
    );
    assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
    assert_eq!(
        extension_content(&p).mcp_servers["s"].transport,
        McpTransport::Http
    );
}

#[test]
fn extension_missing_referenced_file_is_a_diagnostic() {
    let manifest = r#"{"name": "e", "mcpServers": "nope.json", "lspServers": "gone.json"}"#;
    let strict = load_ext("e", manifest, &[], LoadMode::Strict);
    assert_eq!(strict.state, SourceState::Invalid);
    assert_eq!(strict.content, Content::Empty);
    let d = diag_at(&strict, "/mcpServers");
    assert!(d.message.contains("nope.json"), "{d}");
    assert_eq!(d.file, ext_dir("e").join("qwen-extension.json"));
    assert_located(d, manifest, "\"nope.json\"");
    assert!(
        diag_at(&strict, "/lspServers")
            .message
            .contains("gone.json")
    );
    let lenient = load_ext("e", manifest, &[], LoadMode::Lenient);
    assert_eq!(lenient.state, SourceState::Invalid);
    let e = extension_content(&lenient);
    assert!(e.mcp_servers.is_empty() && e.lsp_servers.is_empty());
    assert_eq!(
        e.referenced_files.len(),
        2,
        "still watched, to notice it appear"
    );
}

#[test]
fn extension_referenced_file_problems_name_that_file() {
    let p = load_ext(
        "e",
        r#"{"mcpServers": "servers.json"}"#,
        &[(
            "servers.json",
            r#"{"mcpServers": {"s": {"command": "x", "args": 5}, "ok": {"command": "y"}}}"#,
        )],
        LoadMode::Lenient,
    );
    assert_eq!(p.state, SourceState::Invalid);
    let d = diag_at(&p, "/mcpServers/s/args");
    assert_eq!(d.file, ext_dir("e").join("servers.json"));
    assert_eq!(
        extension_content(&p).mcp_servers.keys().collect::<Vec<_>>(),
        ["ok"]
    );
    let p = load_ext(
        "e",
        r#"{"mcpServers": "servers.json"}"#,
        &[("servers.json", "{ not json")],
        LoadMode::Lenient,
    );
    assert_eq!(p.state, SourceState::Invalid);
    assert_eq!(p.diagnostics[0].file, ext_dir("e").join("servers.json"));
    assert!(
        p.diagnostics[0].message.contains("invalid JSON"),
        "{:?}",
        p.diagnostics
    );
}

// ---------------------------------------------------------------------------
// --mcp-config

#[test]
fn cli_mcp_config_inline_json() {
    let env = env();
    let files: Vec<(String, String)> = Vec::new();
    let read = reader(&files);
    let p = load::load_cli_mcp_config(
        r#" {"mcpServers": {"c": {"command": "x"}}}"#,
        &read,
        &ctx(&env, LoadMode::Strict),
    );
    assert_eq!(p.state, SourceState::Valid, "{:?}", p.diagnostics);
    assert_eq!(p.kind, SourceKind::CliMcpConfig);
    assert_eq!(mcp_servers(&p)["c"].scope, Scope::Cli);
}

#[test]
fn cli_mcp_config_file_is_read_relative_to_the_workspace() {
    let env = env();
    let files = vec![(
        "/ws/cfg/mcp.json".to_owned(),
        r#"{"mcpServers": {"c": {"httpUrl": "http://h/mcp"}}}"#.to_owned(),
    )];
    let read = reader(&files);
    let p = load::load_cli_mcp_config("cfg/mcp.json", &read, &ctx(&env, LoadMode::Strict));
    assert_eq!(p.state, SourceState::Valid, "{:?}", p.diagnostics);
    assert_eq!(p.path, PathBuf::from("/ws/cfg/mcp.json"));
    assert_eq!(mcp_servers(&p)["c"].transport, McpTransport::Http);
    let p = load::load_cli_mcp_config("/ws/cfg/mcp.json", &read, &ctx(&env, LoadMode::Strict));
    assert_eq!(p.state, SourceState::Valid);
    // A named file that does not exist is an error, not an empty source.
    let p = load::load_cli_mcp_config("missing.json", &read, &ctx(&env, LoadMode::Lenient));
    assert_eq!(p.state, SourceState::Invalid);
    assert!(
        p.diagnostics[0].message.contains("cannot read"),
        "{:?}",
        p.diagnostics
    );
}

#[test]
fn cli_mcp_config_file_through_the_source_set() {
    let mut s = srcs().cli_mcp("servers.json");
    s.cli_files = vec![(
        "/ws/servers.json".to_owned(),
        r#"{"mcpServers": {"c": {"command": "x"}}}"#.to_owned(),
    )];
    let state = s.desired();
    assert_eq!(state.mcp["c"].source, SourceKind::CliMcpConfig);
}

// ---------------------------------------------------------------------------
// .lsp.json

#[test]
fn lsp_defaults() {
    let s = one_lsp(
        "typescript",
        r#"{"command": "typescript-language-server", "args": ["--stdio"]}"#,
    );
    assert_eq!(s.languages, ["typescript"]);
    assert_eq!(s.transport, LspTransport::Stdio);
    assert_eq!(s.startup_timeout, 10_000);
    assert_eq!(s.shutdown_timeout, 5_000);
    assert_eq!(DEFAULT_STARTUP_TIMEOUT_MS, 10_000);
    assert_eq!(DEFAULT_SHUTDOWN_TIMEOUT_MS, 5_000);
    assert!(!s.restart_on_crash);
    assert_eq!(s.max_restarts, 3);
    assert_eq!(DEFAULT_MAX_RESTARTS, 3);
    assert!(s.trust_required);
    assert_eq!(s.scope, Scope::Workspace);
    assert_eq!(s.workspace_folder, "/ws");
    assert_eq!(s.root_uri, "file:///ws");
    assert_eq!(s.socket, None);
    assert!(s.env.is_empty());
    assert!(s.extension_to_language.is_empty());
    assert_eq!(s.initialization_options, None);
    assert_eq!(s.settings, None);
}

#[test]
fn lsp_explicit_fields_are_kept() {
    let s = one_lsp(
        "ts",
        r#"{"command": "tsls", "languages": ["typescript", "javascript"], "env": {"A": "$HOME"},
            "initializationOptions": {"x": 1}, "settings": {"y": [1, 2]},
            "extensionToLanguage": {".ts": "typescript", "JS": "javascript", ".TSX": "typescriptreact"},
            "startupTimeout": 1, "shutdownTimeout": 2, "restartOnCrash": true, "maxRestarts": 7}"#,
    );
    assert_eq!(s.languages, ["typescript", "javascript"]);
    assert_eq!(s.env["A"], "/home/u");
    assert_eq!(s.initialization_options, Some(serde_json::json!({"x": 1})));
    assert_eq!(s.settings, Some(serde_json::json!({"y": [1, 2]})));
    let e2l: Vec<(&str, &str)> = s
        .extension_to_language
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        e2l,
        [
            (".js", "javascript"),
            (".ts", "typescript"),
            (".tsx", "typescriptreact")
        ]
    );
    assert_eq!((s.startup_timeout, s.shutdown_timeout), (1, 2));
    assert!(s.restart_on_crash);
    assert_eq!(s.max_restarts, 7);
}

#[test]
fn lsp_socket_object_host_port_is_tcp() {
    let s = one_lsp("py", r#"{"socket": {"host": "localhost", "port": 2087}}"#);
    assert_eq!(s.transport, LspTransport::Tcp);
    assert_eq!(
        s.socket,
        Some(LspSocket {
            host: Some("localhost".into()),
            port: Some(2087),
            path: None
        })
    );
    let s = one_lsp("py", r#"{"transport": "tcp", "socket": {"port": 2087}}"#);
    assert_eq!(s.socket.unwrap().host.as_deref(), Some("127.0.0.1"));
}

#[test]
fn lsp_socket_top_level_host_and_port_is_tcp() {
    let s = one_lsp("py", r#"{"host": "10.0.0.1", "port": 9000}"#);
    assert_eq!(s.transport, LspTransport::Tcp);
    assert_eq!(
        s.socket,
        Some(LspSocket {
            host: Some("10.0.0.1".into()),
            port: Some(9000),
            path: None
        })
    );
}

#[test]
fn lsp_socket_string_is_a_unix_socket_path_in_the_workspace() {
    let s = one_lsp("py", r#"{"socket": "run/py.sock"}"#);
    assert_eq!(s.transport, LspTransport::Socket);
    assert_eq!(
        s.socket,
        Some(LspSocket {
            host: None,
            port: None,
            path: Some("/ws/run/py.sock".into())
        })
    );
    let s = one_lsp("py", r#"{"socket": {"path": "/tmp/py.sock"}}"#);
    assert_eq!(s.transport, LspTransport::Socket);
    assert_eq!(s.socket.unwrap().path.as_deref(), Some("/tmp/py.sock"));
    let s = one_lsp("py", r#"{"path": "py.sock"}"#);
    assert_eq!(s.transport, LspTransport::Socket);
    assert_eq!(s.socket.unwrap().path.as_deref(), Some("/ws/py.sock"));
}

/// A language server that cannot be started is an error (Qwen Code's strict
/// `.lsp.json` reload refuses it too); a cold start drops it with a row.
#[test]
fn lsp_transport_without_its_endpoint_is_an_error() {
    for entry in [
        r#"{"transport": "tcp"}"#,
        r#"{"transport": "tcp", "command": "x"}"#,
        r#"{"transport": "socket", "command": "x"}"#,
        r#"{"args": ["--stdio"]}"#,
        r#"{"transport": "stdio", "socket": "x.sock"}"#,
    ] {
        let t = format!(r#"{{"py": {entry}, "ok": {{"command": "x"}}}}"#);
        let p = load_lsp(&t);
        assert_eq!(p.state, SourceState::Invalid, "{entry}");
        assert_eq!(p.content, Content::Empty, "{entry}");
        assert!(
            p.diagnostics[0].pointer.starts_with("/py"),
            "{entry}: {:?}",
            p.diagnostics
        );
        let p = load_lsp_mode(&t, LoadMode::Lenient);
        assert_eq!(
            lsp_servers(&p).keys().collect::<Vec<_>>(),
            ["ok"],
            "{entry}"
        );
        assert_eq!(dropped_names(&p), ["py"], "{entry}");
    }
}

#[test]
fn lsp_workspace_folder_outside_the_workspace_is_the_root_with_a_warning() {
    for folder in ["..", "../other", "/etc", "/ws2", "sub/../../x"] {
        let t = format!(r#"{{"py": {{"command": "pylsp", "workspaceFolder": "{folder}"}}}}"#);
        let p = load_lsp(&t);
        assert_eq!(p.state, SourceState::Valid, "{folder}");
        assert_eq!(lsp_servers(&p)["py"].workspace_folder, "/ws");
        let d = warn_at(&p, "/py/workspaceFolder");
        assert!(d.message.contains("outside the workspace"), "{d}");
        assert_located(d, &t, &format!("\"{folder}\""));
    }
}

#[test]
fn lsp_workspace_folder_inside_is_accepted_and_root_uri_derived() {
    let s = one_lsp(
        "py",
        r#"{"command": "pylsp", "workspaceFolder": "packages/api"}"#,
    );
    assert_eq!(s.workspace_folder, "/ws/packages/api");
    assert_eq!(s.root_uri, "file:///ws/packages/api");
    let s = one_lsp(
        "py",
        r#"{"command": "pylsp", "workspaceFolder": "/ws/a b/./c"}"#,
    );
    assert_eq!(s.workspace_folder, "/ws/a b/c");
    assert_eq!(s.root_uri, "file:///ws/a%20b/c");
    let s = one_lsp("py", r#"{"command": "pylsp", "workspaceFolder": "."}"#);
    assert_eq!(s.workspace_folder, "/ws");
    // An explicit rootUri inside the workspace is kept; outside, the
    // workspace folder's is used, with a warning.
    let s = one_lsp(
        "py",
        r#"{"command": "pylsp", "rootUri": "file:///ws/a%20b"}"#,
    );
    assert_eq!(s.root_uri, "file:///ws/a%20b");
    let p = load_lsp(r#"{"py": {"command": "pylsp", "rootUri": "file:///elsewhere"}}"#);
    assert_eq!(lsp_servers(&p)["py"].root_uri, "file:///ws");
    warn_at(&p, "/py/rootUri");
}

#[test]
fn lsp_json_trust_required_false_is_ignored_but_extension_keeps_it() {
    assert!(one_lsp("py", r#"{"command": "pylsp", "trustRequired": false}"#).trust_required);
    assert!(!ext_lsp("py", r#"{"command": "pylsp", "trustRequired": false}"#).trust_required);
    assert!(ext_lsp("py", r#"{"command": "pylsp"}"#).trust_required);
}

#[test]
fn lsp_json_top_level_must_be_an_object_of_objects() {
    for (t, mode) in [
        ("[]", LoadMode::Lenient),
        ("[]", LoadMode::Strict),
        ("\"py\"", LoadMode::Lenient),
    ] {
        let p = load_lsp_mode(t, mode);
        assert_eq!(p.state, SourceState::Invalid, "{t}");
        assert_eq!(p.content, Content::Empty, "{t} {mode:?}");
        assert!(
            p.diagnostics[0].message.contains("expected an object"),
            "{:?}",
            p.diagnostics
        );
    }
}

// ---------------------------------------------------------------------------
// Strict vs lenient

const MIXED_MCP: &str = r#"{"mcpServers": {
    "good": {"command": "x"},
    "no-transport": {"args": ["a"]},
    "bad-type": {"command": "x", "args": "a"},
    "unset": {"command": "x", "env": {"K": "$NOT_SET"}}
}}"#;

const MIXED_LSP: &str = r#"{
    "good": {"command": "pylsp"},
    "no-command": {"args": ["--stdio"]},
    "bad-type": {"command": "x", "maxRestarts": "three"},
    "outside": {"command": "x", "workspaceFolder": "/etc"}
}"#;

#[test]
fn lenient_keeps_valid_entries_and_reports_invalid_ones_mcp() {
    let p = load_mcp_mode(MIXED_MCP, LoadMode::Lenient);
    assert_eq!(p.state, SourceState::Invalid);
    assert!(!p.is_valid());
    // An unset variable stays literal (a warning), as in Qwen Code.
    assert_eq!(
        mcp_servers(&p).keys().collect::<Vec<_>>(),
        ["good", "unset"]
    );
    assert_eq!(
        mcp_servers(&p)["unset"].env.as_ref().unwrap()["K"],
        "$NOT_SET"
    );
    diag_at(&p, "/mcpServers/bad-type/args");
    warn_at(&p, "/mcpServers/no-transport");
    warn_at(&p, "/mcpServers/unset/env/K");
    // Both entries without a spec keep a row.
    assert_eq!(dropped_names(&p), ["bad-type", "no-transport"]);
}

#[test]
fn strict_rejects_the_whole_source_mcp() {
    let p = load_mcp_mode(MIXED_MCP, LoadMode::Strict);
    assert_eq!(p.state, SourceState::Invalid);
    assert_eq!(p.content, Content::Empty);
    assert!(!p.diagnostics.is_empty());
}

#[test]
fn lenient_keeps_valid_entries_and_reports_invalid_ones_lsp() {
    let p = load_lsp_mode(MIXED_LSP, LoadMode::Lenient);
    assert_eq!(p.state, SourceState::Invalid);
    // What Qwen Code coerces loads, with warnings.
    assert_eq!(
        lsp_servers(&p).keys().collect::<Vec<_>>(),
        ["bad-type", "good", "outside"]
    );
    assert_eq!(
        lsp_servers(&p)["bad-type"].max_restarts,
        DEFAULT_MAX_RESTARTS
    );
    diag_at(&p, "/no-command");
    warn_at(&p, "/bad-type/maxRestarts");
    warn_at(&p, "/outside/workspaceFolder");
    assert_eq!(dropped_names(&p), ["no-command"]);
}

#[test]
fn strict_rejects_the_whole_source_lsp() {
    let p = load_lsp_mode(MIXED_LSP, LoadMode::Strict);
    assert_eq!(p.state, SourceState::Invalid);
    assert_eq!(p.content, Content::Empty);
}

#[test]
fn strict_and_lenient_apply_the_same_rules() {
    for t in [MIXED_MCP, r#"{"mcpServers": {"s": {"command": "x"}}}"#] {
        let s = load_mcp_mode(t, LoadMode::Strict);
        let l = load_mcp_mode(t, LoadMode::Lenient);
        assert_eq!(s.diagnostics, l.diagnostics, "{t}");
        assert_eq!(s.state, l.state, "{t}");
    }
    for t in [MIXED_LSP, r#"{"py": {"command": "x"}}"#] {
        let s = load_lsp_mode(t, LoadMode::Strict);
        let l = load_lsp_mode(t, LoadMode::Lenient);
        assert_eq!(s.diagnostics, l.diagnostics, "{t}");
        assert_eq!(s.warnings, l.warnings, "{t}");
    }
    // A valid source loads identically in both modes.
    let t = r#"{"mcpServers": {"s": {"command": "x"}}}"#;
    assert_eq!(
        load_mcp_mode(t, LoadMode::Strict).content,
        load_mcp_mode(t, LoadMode::Lenient).content
    );
}

#[test]
fn top_level_shape_error_rejects_in_both_modes() {
    for t in [r#"{"mcpServers": []}"#, r#"{"mcpServers": "x"}"#, "[]", "3"] {
        for mode in [LoadMode::Strict, LoadMode::Lenient] {
            let p = load_mcp_mode(t, mode);
            assert_eq!(p.state, SourceState::Invalid, "{t} {mode:?}");
            assert_eq!(p.content, Content::Empty, "{t} {mode:?}");
            assert!(
                p.diagnostics
                    .iter()
                    .any(|d| d.message.starts_with("expected")),
                "{t}: {:?}",
                p.diagnostics
            );
        }
    }
}

#[test]
fn problem_outside_entries_rejects_the_whole_source_even_lenient() {
    for t in [
        r#"{"mcp": {"allowed": "a"}, "mcpServers": {"s": {"command": "x"}}}"#,
        r#"{"mcp": {"excluded": [1]}, "mcpServers": {"s": {"command": "x"}}}"#,
        r#"{"lsp": {"allowed": {}}, "mcpServers": {"s": {"command": "x"}}}"#,
        r#"{"security": {"folderTrust": {"enabled": "yes"}}, "mcpServers": {"s": {"command": "x"}}}"#,
        r#"{"lsp": {"requireTrustedWorkspace": 0}}"#,
    ] {
        let p = load_settings_text(SourceKind::UserSettings, t, LoadMode::Lenient);
        assert_eq!(p.state, SourceState::Invalid, "{t}");
        assert_eq!(
            p.content,
            Content::Empty,
            "{t}: dropping a gating key would widen admission"
        );
        assert!(
            p.diagnostics
                .iter()
                .all(|d| d.message.starts_with("expected")),
            "{:?}",
            p.diagnostics
        );
    }
    let t = r#"{"mcp": {"allowed": "a"}}"#;
    let p = load_settings_text(SourceKind::UserSettings, t, LoadMode::Lenient);
    let d = diag_at(&p, "/mcp/allowed");
    assert_located(d, t, "\"a\"");
}

#[test]
fn lenient_settings_keep_policy_and_valid_servers() {
    let t = r#"{"mcp": {"allowed": ["good"]}, "mcpServers": {"good": {"command": "x"}, "bad": {"command": 5}}}"#;
    let p = load_settings_text(SourceKind::UserSettings, t, LoadMode::Lenient);
    assert_eq!(p.state, SourceState::Invalid);
    match &p.content {
        Content::Settings(s) => {
            assert_eq!(s.mcp_servers.keys().collect::<Vec<_>>(), ["good"]);
            assert_eq!(s.mcp_allowed, Some(vec!["good".to_owned()]));
        }
        other => panic!("{other:?}"),
    }
    let p = load_settings_text(SourceKind::UserSettings, t, LoadMode::Strict);
    assert_eq!(p.content, Content::Empty);
}

#[test]
fn absent_file_is_an_empty_valid_source() {
    let env = env();
    for mode in [LoadMode::Strict, LoadMode::Lenient] {
        let cx = ctx(&env, mode);
        let files: Vec<(String, String)> = Vec::new();
        let read = reader(&files);
        let all = [
            load::load_mcp_json(Path::new("/ws/.mcp.json"), &FileText::Absent, &cx),
            load::load_lsp_json(Path::new("/ws/.lsp.json"), &FileText::Absent, &cx),
            load::load_settings(
                SourceKind::UserSettings,
                Path::new("/s.json"),
                &FileText::Absent,
                &cx,
            ),
            load::load_approvals(Path::new("/a.json"), &FileText::Absent, &cx),
            load::load_trusted_folders(Path::new("/t.json"), &FileText::Absent, &cx),
            load::load_extension(Path::new("/e"), &FileText::Absent, &read, &cx),
        ];
        for p in all {
            assert_eq!(p.state, SourceState::Absent, "{:?}", p.kind);
            assert!(p.is_valid());
            assert!(p.diagnostics.is_empty());
            assert_eq!(p.error_text(), None);
            assert_eq!(p.content, Content::Empty);
        }
    }
    // An absent .mcp.json contributes nothing to the desired state.
    let s = srcs()
        .user(&settings_one("u", r#"{"command": "x"}"#))
        .desired();
    assert_eq!(s.mcp.keys().collect::<Vec<_>>(), ["u"]);
}

#[test]
fn empty_object_is_a_valid_source_with_no_servers() {
    let p = load_mcp("{}");
    assert_eq!(p.state, SourceState::Valid);
    assert!(mcp_servers(&p).is_empty());
    let p = load_lsp("{}");
    assert_eq!(p.state, SourceState::Valid);
    assert!(lsp_servers(&p).is_empty());
}

#[test]
fn unreadable_and_invalid_json_give_different_messages() {
    let env = env();
    let cx = ctx(&env, LoadMode::Lenient);
    let unreadable = load::load_lsp_json(
        Path::new("/ws/.lsp.json"),
        &FileText::Unreadable("permission denied".into()),
        &cx,
    );
    let t = "{\n  \"py\": {\"command\": \"x\",}\n}";
    let invalid = load::load_lsp_json(Path::new("/ws/.lsp.json"), &text(t), &cx);
    for p in [&unreadable, &invalid] {
        assert_eq!(p.state, SourceState::Invalid);
        assert_eq!(p.content, Content::Empty);
        assert_eq!(p.diagnostics.len(), 1);
        assert_eq!(p.diagnostics[0].file, PathBuf::from("/ws/.lsp.json"));
    }
    let u = &unreadable.diagnostics[0];
    let i = &invalid.diagnostics[0];
    assert!(
        u.message.contains("cannot read") && u.message.contains("permission denied"),
        "{u}"
    );
    assert!(i.message.contains("invalid JSON"), "{i}");
    assert_ne!(u.message, i.message);
    assert_eq!(
        u.line, None,
        "no position for a file that could not be read"
    );
    assert_eq!(i.line, Some(2), "{i}");
    assert!(i.column.is_some(), "{i}");
}

#[test]
fn unknown_keys_are_accepted_and_ignored() {
    let p = load_settings_text(
        SourceKind::UserSettings,
        r#"{"theme": "dark", "ui": {"x": 1}, "mcp": {"other": true}, "mcpServers": {"s": {"command": "x", "futureKey": 1}}}"#,
        LoadMode::Strict,
    );
    assert_eq!(p.state, SourceState::Valid, "{:?}", p.diagnostics);
    let p = load_lsp(r#"{"py": {"command": "pylsp", "futureKey": {"a": 1}}}"#);
    assert_eq!(p.state, SourceState::Valid, "{:?}", p.diagnostics);
}

#[test]
fn settings_scope_follows_the_layer() {
    let env = env();
    let cx = ctx(&env, LoadMode::Strict);
    for (kind, scope) in [
        (SourceKind::SystemDefaults, Scope::System),
        (SourceKind::UserSettings, Scope::User),
        (SourceKind::WorkspaceSettings, Scope::Workspace),
        (SourceKind::SystemSettings, Scope::System),
    ] {
        let p = load::load_settings(
            kind,
            Path::new("/s.json"),
            &text(&settings_one("s", r#"{"command": "x"}"#)),
            &cx,
        );
        match &p.content {
            Content::Settings(s) => assert_eq!(s.mcp_servers["s"].scope, scope, "{kind:?}"),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn every_entry_diagnostic_is_located() {
    // file, line:column and pointer on every diagnostic of a broken file.
    let p = load_mcp_mode(MIXED_MCP, LoadMode::Lenient);
    let q = load_lsp_mode(MIXED_LSP, LoadMode::Lenient);
    for d in p.diagnostics.iter().chain(&q.diagnostics) {
        assert!(d.file.is_absolute(), "{d}");
        assert!(d.line.is_some() && d.column.is_some(), "{d}");
        assert!(!d.pointer.is_empty(), "{d}");
        assert!(!d.message.is_empty(), "{d}");
    }
}

#[test]
fn integral_float_numbers_are_integers() {
    // JSON Schema and JavaScript read `1.0` as the integer 1; so do we.
    let a = one_mcp(r#"{"command": "x", "timeout": 1.0}"#);
    let b = one_mcp(r#"{"command": "x", "timeout": 1}"#);
    assert_eq!(a.timeout, Some(1));
    assert_eq!(a.config_hash, b.config_hash);
    assert_eq!(a.approval_hash, b.approval_hash);
    let s = one_lsp(
        "py",
        r#"{"command": "x", "maxRestarts": 2.0, "startupTimeout": 1e4}"#,
    );
    assert_eq!(s.max_restarts, 2);
    assert_eq!(s.startup_timeout, 10_000);
    // A real fraction is rounded up to whole milliseconds, with a warning.
    let t = r#"{"mcpServers": {"s": {"command": "x", "timeout": 1.5}, "ok": {"command": "y"}}}"#;
    let p = load_mcp_mode(t, LoadMode::Strict);
    assert_eq!(p.state, SourceState::Valid);
    assert_eq!(mcp_servers(&p)["s"].timeout, Some(2));
    assert_located(warn_at(&p, "/mcpServers/s/timeout"), t, "1.5");
}

#[test]
fn explicit_null_field_is_absent_for_the_config_hash() {
    // Canonical JSON: absent ≡ null. Qwen Code's approval hash keeps a null.
    let a = one_mcp(r#"{"command": "x", "cwd": null, "env": null, "timeout": null}"#);
    let b = one_mcp(r#"{"command": "x"}"#);
    assert_eq!(a.config_hash, b.config_hash);
    assert_ne!(a.approval_hash, b.approval_hash);
    assert_eq!(
        McpServerSpec {
            approval_hash: String::new(),
            ..a
        },
        McpServerSpec {
            approval_hash: String::new(),
            ..b
        }
    );
    let a = one_lsp(
        "py",
        r#"{"command": "x", "settings": null, "rootUri": null}"#,
    );
    let b = one_lsp("py", r#"{"command": "x"}"#);
    assert_eq!(a, b);
}

/// A file that is not UTF-8 is unreadable, with the position of the first
/// offending byte (it used to have none).
#[test]
fn non_utf8_files_are_reported_at_the_offending_byte() {
    let text = load::FileText::from_bytes(b"{\n  \"mcpServers\": \"\xff\"}".to_vec());
    let env = env();
    let p = load::load_mcp_json(
        Path::new("/ws/.mcp.json"),
        &text,
        &ctx(&env, LoadMode::Strict),
    );
    assert_eq!(p.state, SourceState::Invalid);
    let d = &p.diagnostics[0];
    assert_eq!((d.line, d.column), (Some(2), Some(18)), "{d}");
    assert!(d.message.contains("not UTF-8"), "{d}");
}

/// A key written twice: the last one wins (JSON.parse), with a warning at
/// the repetition.
#[test]
fn duplicate_keys_warn_at_the_repetition() {
    let t = "{\"mcpServers\": {\"s\": {\"command\": \"a\", \"command\": \"b\"}}}";
    let p = load_mcp(t);
    assert_eq!(p.state, SourceState::Valid);
    assert_eq!(mcp_servers(&p)["s"].command.as_deref(), Some("b"));
    let d = p
        .warnings
        .iter()
        .find(|w| w.message.contains("duplicate key \"command\""))
        .unwrap_or_else(|| panic!("{:?}", p.warnings));
    assert_eq!((d.line, d.column), (Some(1), Some(39)), "{d}");
    // Nothing to say about a file without repetitions.
    assert!(
        load_mcp(r#"{"mcpServers": {"s": {"command": "a"}, "t": {"command": "a"}}}"#)
            .warnings
            .is_empty()
    );
}

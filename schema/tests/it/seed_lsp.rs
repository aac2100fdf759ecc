//! The pure cases of LSP hot reload: `configHash` (configHash.test),
//! strict hot-reload vs lenient cold-start loading of `.lsp.json`
//! (NativeLspService.test), deletion as an empty valid config, and the
//! workspace's inability to lower `trustRequired`.

use crate::common::*;
use steward_schema::load::{Content, FileText, LoadMode, lsp_config_hash};
use steward_schema::resource::{LspServerSpec, Reason, Scope, SourceKind, SourceState};

fn hash(name: &str, entry: &str) -> String {
    one_lsp(name, entry).config_hash
}

fn ext_hash(name: &str, entry: &str) -> String {
    ext_lsp(name, entry).config_hash
}

// ---------------------------------------------------------------------------
// configHash

#[test]
fn config_hash_ignores_object_key_order() {
    let a = r#"{"command": "tsls", "args": ["--stdio"], "env": {"A": "1", "B": "2"},
               "settings": {"x": {"p": 1, "q": [1, {"r": 2, "s": 3}]}, "y": true},
               "initializationOptions": {"m": 1, "n": 2},
               "extensionToLanguage": {".ts": "typescript", ".js": "javascript"}}"#;
    let b = r#"{
        // same content, every object reordered
        "extensionToLanguage": {".js": "javascript", ".ts": "typescript"},
        "initializationOptions": {"n": 2, "m": 1},
        "settings": {"y": true, "x": {"q": [1, {"s": 3, "r": 2}], "p": 1}},
        "env": {"B": "2", "A": "1"}, "args": ["--stdio"], "command": "tsls"
    }"#;
    assert_eq!(hash("ts", a), hash("ts", b));
}

#[test]
fn config_hash_changes_with_command_args_order_env_settings_folder_socket() {
    let base = hash("ts", r#"{"command": "tsls", "args": ["--stdio", "--log"]}"#);
    for changed in [
        r#"{"command": "tsls2", "args": ["--stdio", "--log"]}"#,
        r#"{"command": "tsls", "args": ["--log", "--stdio"]}"#,
        r#"{"command": "tsls", "args": ["--stdio", "--log"], "env": {"A": "1"}}"#,
        r#"{"command": "tsls", "args": ["--stdio", "--log"], "settings": {"a": 1}}"#,
        r#"{"command": "tsls", "args": ["--stdio", "--log"], "workspaceFolder": "sub"}"#,
        r#"{"command": "tsls", "args": ["--stdio", "--log"], "transport": "tcp", "socket": {"port": 1}}"#,
    ] {
        assert_ne!(base, hash("ts", changed), "{changed}");
    }
    // socket endpoints themselves
    let tcp = hash("ts", r#"{"socket": {"host": "127.0.0.1", "port": 2087}}"#);
    assert_ne!(
        tcp,
        hash("ts", r#"{"socket": {"host": "127.0.0.1", "port": 2088}}"#)
    );
    assert_ne!(
        tcp,
        hash("ts", r#"{"socket": {"host": "localhost", "port": 2087}}"#)
    );
    assert_ne!(
        hash("ts", r#"{"socket": "a.sock"}"#),
        hash("ts", r#"{"socket": "b.sock"}"#)
    );
    // env values, settings values
    assert_ne!(
        hash("ts", r#"{"command": "x", "env": {"A": "1"}}"#),
        hash("ts", r#"{"command": "x", "env": {"A": "2"}}"#)
    );
    assert_ne!(
        hash("ts", r#"{"command": "x", "settings": {"a": [1, 2]}}"#),
        hash("ts", r#"{"command": "x", "settings": {"a": [2, 1]}}"#)
    );
}

#[test]
fn config_hash_changes_with_trust_required() {
    assert_ne!(
        ext_hash("py", r#"{"command": "pylsp", "trustRequired": false}"#),
        ext_hash("py", r#"{"command": "pylsp", "trustRequired": true}"#)
    );
}

#[test]
fn config_hash_changes_with_every_lsp_field() {
    let base = r#""command": "srv", "transport": "tcp", "socket": {"port": 4000}"#;
    let h0 = ext_hash("x", &format!("{{{base}}}"));
    for extra in [
        r#""languages": ["x", "y"]"#,
        r#""args": ["a"]"#,
        r#""env": {"E": "1"}"#,
        r#""initializationOptions": {"o": 1}"#,
        r#""settings": {"s": 1}"#,
        r#""extensionToLanguage": {".x": "x"}"#,
        r#""workspaceFolder": "pkg""#,
        r#""rootUri": "file:///ws/other""#,
        r#""startupTimeout": 10001"#,
        r#""shutdownTimeout": 5001"#,
        r#""restartOnCrash": true"#,
        r#""maxRestarts": 4"#,
        r#""trustRequired": false"#,
    ] {
        let h = ext_hash("x", &format!("{{{base}, {extra}}}"));
        assert_ne!(h0, h, "{extra}");
    }
    for (other, why) in [
        (
            r#"{"command": "srv2", "transport": "tcp", "socket": {"port": 4000}}"#,
            "command",
        ),
        (
            r#"{"command": "srv", "transport": "tcp", "socket": {"port": 4001}}"#,
            "socket",
        ),
        (r#"{"command": "srv", "transport": "stdio"}"#, "transport"),
    ] {
        assert_ne!(h0, ext_hash("x", other), "{why}");
    }
    assert_ne!(
        h0,
        ext_hash("y", &format!("{{{base}}}")),
        "the name is part of it"
    );
}

#[test]
fn writing_a_default_explicitly_keeps_the_hash() {
    let bare = hash("typescript", r#"{"command": "tsls"}"#);
    for explicit in [
        r#"{"command": "tsls", "startupTimeout": 10000}"#,
        r#"{"command": "tsls", "shutdownTimeout": 5000}"#,
        r#"{"command": "tsls", "restartOnCrash": false}"#,
        r#"{"command": "tsls", "maxRestarts": 3}"#,
        r#"{"command": "tsls", "languages": ["typescript"]}"#,
        r#"{"command": "tsls", "transport": "stdio"}"#,
        r#"{"command": "tsls", "args": []}"#,
        r#"{"command": "tsls", "env": {}}"#,
        r#"{"command": "tsls", "extensionToLanguage": {}}"#,
        r#"{"command": "tsls", "workspaceFolder": "."}"#,
        r#"{"command": "tsls", "workspaceFolder": "/ws"}"#,
        r#"{"command": "tsls", "rootUri": "file:///ws"}"#,
        r#"{"command": "tsls", "trustRequired": true}"#,
        r#"{"command": "tsls", "trustRequired": false}"#,
        r#"{"command": "tsls", "startupTimeout": 10000, "shutdownTimeout": 5000,
            "restartOnCrash": false, "maxRestarts": 3, "transport": "stdio"}"#,
    ] {
        assert_eq!(bare, hash("typescript", explicit), "{explicit}");
    }
    // Equivalent spellings of extensionToLanguage normalize the same way.
    assert_eq!(
        hash(
            "ts",
            r#"{"command": "x", "extensionToLanguage": {".ts": "typescript"}}"#
        ),
        hash(
            "ts",
            r#"{"command": "x", "extensionToLanguage": {"TS": "typescript"}}"#
        )
    );
    // The default tcp host.
    assert_eq!(
        hash("ts", r#"{"socket": {"port": 7}}"#),
        hash("ts", r#"{"socket": {"host": "127.0.0.1", "port": 7}}"#)
    );
    assert_eq!(
        ext_hash("py", r#"{"command": "pylsp"}"#),
        ext_hash("py", r#"{"command": "pylsp", "trustRequired": true}"#)
    );
}

#[test]
fn config_hash_is_a_pure_function_of_the_normalized_spec() {
    let entry =
        r#"{"command": "srv", "args": ["a"], "settings": {"k": 1}, "workspaceFolder": "w"}"#;
    let spec = one_lsp("py", entry);
    assert_eq!(spec.config_hash, lsp_config_hash("py", &spec));
    assert_eq!(spec.config_hash.len(), 64);
    assert!(
        spec.config_hash
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    // Loading again gives the same hash (no time, pid or counter inside).
    assert_eq!(spec.config_hash, one_lsp("py", entry).config_hash);
    // Provenance and the stored hash itself are not inputs.
    let mut other: LspServerSpec = spec.clone();
    other.scope = Scope::Extension;
    other.extension_name = Some("e".into());
    other.config_hash = "runtime-garbage".into();
    assert_eq!(lsp_config_hash("py", &other), spec.config_hash);
    // Every normalized field is.
    let mut changed = spec.clone();
    changed.max_restarts += 1;
    assert_ne!(lsp_config_hash("py", &changed), spec.config_hash);
}

#[test]
fn config_hash_excludes_provenance() {
    // The same server from an extension (trustRequired true) and from the
    // workspace file: same runtime configuration, same hash.
    let entry = r#"{"command": "pylsp", "args": ["-v"]}"#;
    let ws_spec = one_lsp("py", entry);
    let ext_spec = ext_lsp("py", entry);
    assert_ne!(ws_spec.scope, ext_spec.scope);
    assert_eq!(ws_spec.config_hash, ext_spec.config_hash);
}

#[test]
fn formatting_only_edit_of_lsp_json_is_semantically_equal() {
    let a = load_lsp(r#"{"py": {"command": "pylsp", "args": ["-v"]}, "go": {"command": "gopls"}}"#);
    let b = load_lsp(
        "{\n  // reformatted\n  \"go\": { \"command\": \"gopls\" },\n  \"py\": {\n    \"args\": [ \"-v\" ],\n    \"command\": \"pylsp\"\n  }\n}\n",
    );
    assert_eq!(a.content, b.content);
    let c = load_lsp(
        r#"{"py": {"command": "pylsp", "args": ["-v", "-v"]}, "go": {"command": "gopls"}}"#,
    );
    assert_ne!(a.content, c.content);
    // Only the changed server's hash moves.
    let (la, lc) = (lsp_servers(&a), lsp_servers(&c));
    assert_eq!(la["go"].config_hash, lc["go"].config_hash);
    assert_ne!(la["py"].config_hash, lc["py"].config_hash);
}

// ---------------------------------------------------------------------------
// Strict hot reload vs lenient cold start

const HALF_BROKEN: &str = r#"{
    "py": {"command": "pylsp"},
    "ts": {"languages": "typescript", "command": "tsls"},
    "go": {"transport": "tcp"}
}"#;

#[test]
fn cold_start_loads_valid_entries_from_a_half_broken_file() {
    let p = load_lsp_mode(HALF_BROKEN, LoadMode::Lenient);
    assert_eq!(
        p.state,
        SourceState::Invalid,
        "invalid entries are reported"
    );
    // A `languages` that is not a list is ignored (with a warning), as
    // Qwen Code ignores it.
    assert_eq!(lsp_servers(&p).keys().collect::<Vec<_>>(), ["py", "ts"]);
    assert!(
        p.warnings.iter().any(|d| d.pointer == "/ts/languages"),
        "{:?}",
        p.warnings
    );
    assert!(
        p.diagnostics.iter().any(|d| d.pointer == "/go"),
        "{:?}",
        p.diagnostics
    );
}

#[test]
fn hot_reload_rejects_unbuildable_entries_whole() {
    let p = load_lsp_mode(HALF_BROKEN, LoadMode::Strict);
    assert_eq!(p.state, SourceState::Invalid);
    assert!(!p.is_valid());
    assert_eq!(
        p.content,
        Content::Empty,
        "the previous snapshot stays in force"
    );
    let text = p.error_text().unwrap();
    assert!(text.contains("/ws/.lsp.json:"), "{text}");
}

#[test]
fn hot_reload_rejects_invalid_top_level_shape() {
    for t in [
        "[]",
        "null",
        "\"x\"",
        r#"{"py": "pylsp"}"#,
        r#"{"py": ["pylsp"]}"#,
    ] {
        let strict = load_lsp_mode(t, LoadMode::Strict);
        assert_eq!(strict.state, SourceState::Invalid, "{t}");
        assert_eq!(strict.content, Content::Empty, "{t}");
    }
    // The top-level shape is rejected at cold start too.
    for t in ["[]", "null", "\"x\""] {
        let lenient = load_lsp_mode(t, LoadMode::Lenient);
        assert_eq!(lenient.content, Content::Empty, "{t}");
    }
}

#[test]
fn strict_does_not_add_field_rules_cold_start_lacks() {
    // A file valid at cold start is valid on the next save.
    for t in [
        r#"{"py": {"command": "pylsp", "unknownFutureField": 1}}"#,
        r#"{"py": {"command": "pylsp", "extensionToLanguage": {"py": "python"}}}"#,
        r#"{"$schema": "x", "py": {"command": "pylsp"}}"#,
    ] {
        let l = load_lsp_mode(t, LoadMode::Lenient);
        let s = load_lsp_mode(t, LoadMode::Strict);
        assert_eq!(l.state, SourceState::Valid, "{t}: {:?}", l.diagnostics);
        assert_eq!(s.state, SourceState::Valid, "{t}: {:?}", s.diagnostics);
        assert_eq!(l.content, s.content);
    }
}

#[test]
fn deleted_lsp_json_is_an_empty_valid_config() {
    for mode in [LoadMode::Strict, LoadMode::Lenient] {
        let env = env();
        let p = steward_schema::load::load_lsp_json(
            std::path::Path::new("/ws/.lsp.json"),
            &FileText::Absent,
            &ctx(&env, mode),
        );
        assert_eq!(p.state, SourceState::Absent);
        assert!(p.is_valid(), "a deletion is applied, not rejected");
        assert_eq!(p.kind, SourceKind::LspJson);
    }
    // Only extension servers remain in the desired state.
    let s = srcs()
        .extension("e1", r#"{"lspServers": {"go": {"command": "gopls"}}}"#)
        .desired();
    assert_eq!(s.lsp.keys().collect::<Vec<_>>(), ["go"]);
}

#[test]
fn parse_failure_and_read_failure_are_distinguished() {
    let env = env();
    let cx = ctx(&env, LoadMode::Strict);
    let path = std::path::Path::new("/ws/.lsp.json");
    let parse = steward_schema::load::load_lsp_json(path, &text("{\"py\": {"), &cx);
    let read =
        steward_schema::load::load_lsp_json(path, &FileText::Unreadable("EACCES".into()), &cx);
    assert!(
        parse.diagnostics[0].message.starts_with("invalid JSON"),
        "{:?}",
        parse.diagnostics
    );
    assert!(
        read.diagnostics[0].message.starts_with("cannot read"),
        "{:?}",
        read.diagnostics
    );
    assert!(parse.diagnostics[0].line.is_some());
    assert_eq!(parse.content, Content::Empty);
    assert_eq!(read.content, Content::Empty);
}

// ---------------------------------------------------------------------------
// Admission of language servers: trust (which the workspace's `.lsp.json`
// cannot lower), then the allow-list bounded by the command line

#[test]
fn workspace_lsp_json_cannot_disable_trust_required() {
    let s = srcs()
        .user(r#"{"security": {"folderTrust": {"enabled": true}}, "lsp": {"requireTrustedWorkspace": false}}"#)
        .lsp_json(r#"{"py": {"command": "pylsp", "trustRequired": false}}"#)
        .extension("e1", r#"{"lspServers": {"go": {"command": "gopls", "trustRequired": false}}}"#)
        .desired();
    assert_eq!(lsp_reason(&s, "py"), Some(Reason::TrustRequired));
    assert_eq!(
        lsp_reason(&s, "go"),
        None,
        "extensions keep their declared value"
    );
}

#[test]
fn untrusted_workspace_with_require_trusted_blocks_every_language_server() {
    let s = srcs()
        .user(r#"{"security": {"folderTrust": {"enabled": true}}}"#)
        .lsp_json(r#"{"py": {"command": "pylsp"}}"#)
        .extension(
            "e1",
            r#"{"lspServers": {"go": {"command": "gopls", "trustRequired": false}}}"#,
        )
        .desired();
    for n in ["py", "go"] {
        assert_eq!(lsp_reason(&s, n), Some(Reason::UntrustedWorkspace), "{n}");
    }
}

#[test]
fn cli_allow_list_bounds_admitted_language_servers() {
    let s = srcs()
        .lsp_json(r#"{"py": {"command": "pylsp"}, "go": {"command": "gopls"}}"#)
        .allowed_lsp_flag(&["py"])
        .user(r#"{"lsp": {"allowed": ["py", "go"]}}"#)
        .desired();
    assert_eq!(lsp_reason(&s, "py"), None);
    assert_eq!(lsp_reason(&s, "go"), Some(Reason::NotAllowed));
}

//! `dev` in an entry (issue 28): read from `.mcp.json`, settings and
//! `.lsp.json` as VS Code and mcp-hub write it, its globs checked (an
//! invalid one makes the source invalid with file:line:col), its directory
//! resolved; part of the approval, never of the connection fingerprint.

use steward_schema::load::LoadMode;
use steward_schema::resource::{DevSpec, SourceKind, SourceState};

use crate::common::*;

fn dev(spec: &Option<DevSpec>) -> &DevSpec {
    spec.as_ref().expect("the entry has dev")
}

#[test]
fn dev_is_read_from_mcp_entries_in_vs_codes_and_mcp_hubs_forms() {
    let one =
        one_mcp(r#"{"command": "python", "args": ["server.py"], "dev": {"watch": "src/**/*.py"}}"#);
    assert_eq!(
        dev(&one.dev),
        &DevSpec {
            watch: vec!["src/**/*.py".to_owned()],
            build: None,
            cwd: "/ws".to_owned(),
        }
    );
    let hub = one_mcp(
        r#"{"command": "node", "args": ["dist/index.js"], "cwd": "srv",
            "dev": {"enabled": true, "watch": ["src/**/*.ts", "package.json"], "build": "npm run build"}}"#,
    );
    let d = dev(&hub.dev);
    assert_eq!(d.watch, ["src/**/*.ts", "package.json"]);
    assert_eq!(d.build.as_deref(), Some("npm run build"));
    assert_eq!(d.cwd, "/ws/srv", "dev.cwd defaults to the entry's cwd");
    let own =
        one_mcp(r#"{"command": "x", "cwd": "a", "dev": {"watch": "*.py", "cwd": "$HOME/b/../c"}}"#);
    assert_eq!(
        dev(&own.dev).cwd,
        "/home/u/c",
        "dev.cwd expands and resolves"
    );
    let off = one_mcp(r#"{"command": "x", "dev": {"enabled": false, "watch": "*.py"}}"#);
    assert_eq!(off.dev, None, "mcp-hub's enabled: false turns it off");
}

#[test]
fn dev_is_part_of_the_approval_and_not_of_the_connection() {
    let plain = one_mcp(r#"{"command": "python", "args": ["s.py"]}"#);
    let with_dev = one_mcp(r#"{"command": "python", "args": ["s.py"], "dev": {"watch": "*.py"}}"#);
    let other_globs =
        one_mcp(r#"{"command": "python", "args": ["s.py"], "dev": {"watch": "src/*.py"}}"#);
    assert_eq!(plain.config_hash, with_dev.config_hash);
    assert_eq!(with_dev.config_hash, other_globs.config_hash);
    assert_ne!(plain.approval_hash, with_dev.approval_hash);
    assert_ne!(with_dev.approval_hash, other_globs.approval_hash);
    // An entry without dev keeps the hashes it always had.
    assert_eq!(plain.dev, None);
}

#[test]
fn an_invalid_glob_makes_the_source_invalid_at_its_place() {
    let text = "{\"mcpServers\": {\"s\": {\"command\": \"x\",\n  \"dev\": {\"watch\": [\"src/**/*.py\", \"src/[ab.py\"]}}}}";
    let p = load_mcp(text);
    assert_eq!(p.state, SourceState::Invalid);
    let d = p
        .diagnostics
        .iter()
        .find(|d| d.pointer == "/mcpServers/s/dev/watch/1")
        .unwrap_or_else(|| panic!("{:#?}", p.diagnostics));
    let (line, column) = (2, 36);
    assert_eq!((d.line, d.column), (Some(line), Some(column)), "{d}");
    let shown = d.to_string();
    assert!(shown.starts_with("/ws/.mcp.json:2:36:"), "{shown}");
    assert!(
        shown.contains("invalid glob") && shown.contains("unclosed `[`"),
        "{shown}"
    );

    // One glob written as a string is placed at dev.watch itself.
    let p = load_mcp(r#"{"mcpServers": {"s": {"command": "x", "dev": {"watch": "/abs/*.py"}}}}"#);
    assert!(
        p.diagnostics
            .iter()
            .any(|d| d.pointer == "/mcpServers/s/dev/watch" && d.message.contains("absolute")),
        "{:#?}",
        p.diagnostics
    );
    // No watch at all, or an empty list.
    for entry in [
        r#"{"command": "x", "dev": {}}"#,
        r#"{"command": "x", "dev": {"watch": []}}"#,
    ] {
        let p = load_mcp(&mcp_json_one("s", entry));
        assert_eq!(p.state, SourceState::Invalid, "{entry}");
    }
    // A cold start drops only that entry.
    let p = load_mcp_mode(
        r#"{"mcpServers": {"bad": {"command": "x", "dev": {"watch": "{a"}}, "good": {"command": "y"}}}"#,
        LoadMode::Lenient,
    );
    assert!(mcp_servers(&p).contains_key("good"));
    assert!(p.dropped.iter().any(|d| d.name == "bad"));
}

#[test]
fn other_tools_keys_of_dev_are_ignored_with_a_warning() {
    let p = load_mcp(&mcp_json_one(
        "s",
        r#"{"command": "x", "dev": {"watch": "*.ts", "debug": {"type": "node"}, "wach": 1}}"#,
    ));
    assert_eq!(p.state, SourceState::Valid, "{:#?}", p.diagnostics);
    let warned = |pointer: &str, fragment: &str| {
        p.warnings
            .iter()
            .any(|w| w.pointer == pointer && w.message.contains(fragment))
    };
    assert!(
        warned("/mcpServers/s/dev/debug", "no debugger"),
        "{:#?}",
        p.warnings
    );
    assert!(
        warned("/mcpServers/s/dev/wach", "did you mean \"watch\""),
        "{:#?}",
        p.warnings
    );
    assert!(mcp_servers(&p)["s"].dev.is_some());
}

#[test]
fn dev_in_settings_and_lsp_json() {
    let p = load_settings_text(
        SourceKind::UserSettings,
        &settings_one(
            "s",
            r#"{"command": "x", "dev": {"watch": ["lib/**"], "build": "make"}}"#,
        ),
        LoadMode::Strict,
    );
    assert_eq!(p.state, SourceState::Valid, "{:#?}", p.diagnostics);
    let lsp = one_lsp(
        "toy",
        r#"{"command": "toy-ls", "workspaceFolder": "pkg", "dev": {"watch": "src/**/*.rs", "build": "cargo build"}}"#,
    );
    let plain = one_lsp("toy", r#"{"command": "toy-ls", "workspaceFolder": "pkg"}"#);
    let d = dev(&lsp.dev);
    assert_eq!(
        d.cwd, "/ws/pkg",
        "a language server's dev.cwd defaults to its folder"
    );
    assert_eq!(d.build.as_deref(), Some("cargo build"));
    assert_eq!(lsp.config_hash, plain.config_hash);
    let p = load_lsp(r#"{"toy": {"command": "toy-ls", "dev": {"watch": "a/**b"}}}"#);
    assert_eq!(p.state, SourceState::Invalid);
    assert!(
        p.diagnostics.iter().any(|d| d.pointer == "/toy/dev/watch"),
        "{:#?}",
        p.diagnostics
    );
}

//! `crds-like-specs/`: the committed schemas must be what `steward schema
//! all --out` generates, and every example resource must validate against
//! its schema (and read back as the Rust type).

use std::path::{Path, PathBuf};

use serde_json::Value;
use steward_schema::jsonc;
use steward_schema::resource::{LspServer, McpServer, WorkspaceStatus};
use steward_schema::validate::SchemaValidator;
use steward_tests::harness::Env;

const STALE: &str =
    "crds-like-specs is stale: run `cargo run -p steward -- schema all --out crds-like-specs`";

fn specs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../crds-like-specs")
}

#[test]
fn committed_schemas_are_up_to_date() {
    let sb = Env::new();
    let fresh = sb.root.path().join("generated");
    let run = sb.run(&["schema", "all", "--out", fresh.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);

    let schema_files = |dir: &Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{STALE} ({}: {e})", dir.display()))
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".schema.json"))
            .collect();
        names.sort();
        names
    };
    assert_eq!(schema_files(&specs_dir()), schema_files(&fresh), "{STALE}");
    for name in schema_files(&fresh) {
        let want = std::fs::read_to_string(fresh.join(&name)).unwrap();
        let have = std::fs::read_to_string(specs_dir().join(&name)).unwrap_or_default();
        assert!(have == want, "{STALE} ({name} differs)");
    }
}

/// The schema file for an example's `kind`.
fn schema_for_kind(kind: &str) -> &'static str {
    match kind {
        "McpServer" => "mcp-server.schema.json",
        "LspServer" => "lsp-server.schema.json",
        "WorkspaceStatus" => "workspace-status.schema.json",
        other => panic!("an example of unknown kind {other}"),
    }
}

#[test]
fn examples_validate_against_their_schemas() {
    let dir = specs_dir().join("examples");
    let mut examples: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    examples.sort();
    let kinds: Vec<String> = examples
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).unwrap();
            let value: Value =
                yaml_serde::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let kind = value["kind"]
                .as_str()
                .expect("examples say their kind")
                .to_owned();

            let schema_path = specs_dir().join(schema_for_kind(&kind));
            let schema: Value =
                serde_json::from_str(&std::fs::read_to_string(&schema_path).unwrap()).unwrap();
            let validator = SchemaValidator::new(&schema).unwrap();
            let doc = jsonc::parse(&serde_json::to_string_pretty(&value).unwrap()).unwrap();
            let problems: Vec<String> = validator
                .check(&doc)
                .into_iter()
                .map(|v| v.into_diagnostic(path).to_string())
                .collect();
            assert!(
                problems.is_empty(),
                "{}:\n{}",
                path.display(),
                problems.join("\n")
            );

            // And they read back as the contract types.
            let typed = match kind.as_str() {
                "McpServer" => serde_json::from_value::<McpServer>(value.clone()).map(drop),
                "LspServer" => serde_json::from_value::<LspServer>(value.clone()).map(drop),
                _ => serde_json::from_value::<WorkspaceStatus>(value.clone()).map(drop),
            };
            typed.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            kind
        })
        .collect();
    for kind in ["McpServer", "LspServer", "WorkspaceStatus"] {
        assert!(kinds.iter().any(|k| k == kind), "no example of {kind}");
    }
}

/// `check-jsonschema` (PyPI, pinned in `.ci/run`): never skipped — a
/// missing validator fails the test.
fn check_jsonschema() -> PathBuf {
    let peers = match std::env::var_os("STEWARD_PEERS_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../.peers"),
    };
    let bin = peers.join("venv/bin/check-jsonschema");
    assert!(
        bin.is_file(),
        "check-jsonschema is missing: {} does not exist (run .ci/run to install it)",
        bin.display()
    );
    bin
}

/// The editor schemas are strict: a third-party validator accepts good
/// files and rejects typos, `null`s, entries with no way to reach the
/// server, and MCP servers in `.lsp.json` — which the loaders accept with
/// a warning, as Qwen Code does.
#[test]
fn editor_schemas_catch_typos_with_a_third_party_validator() {
    let bin = check_jsonschema();
    let dir = tempfile::tempdir().unwrap();
    let check = |schema: &str, name: &str, text: &str| -> bool {
        let file = dir.path().join(name);
        std::fs::write(&file, text).unwrap();
        let out = std::process::Command::new(&bin)
            .arg("--schemafile")
            .arg(specs_dir().join(schema))
            .arg(&file)
            .output()
            .expect("run check-jsonschema");
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "check-jsonschema failed to run: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out.status.success()
    };
    let good = [
        (
            "mcp-json.schema.json",
            r#"{"mcpServers": {"a": {"command": "x", "args": ["1"], "env": {"K": "v"}},
                "b": {"type": "http", "url": "https://h/mcp", "headers": {"A": "b"}},
                "c": {"httpUrl": "https://h", "discoveryTimeoutMs": 1000, "authProviderType": "google_credentials"}}}"#,
        ),
        (
            "lsp-json.schema.json",
            r#"{"ts": {"command": "tsls", "args": ["--stdio"], "extensionToLanguage": {".ts": "typescript"}},
                "go": {"transport": "tcp", "socket": {"host": "h", "port": 7}},
                "zig": {"transport": "socket", "socketPath": "/run/zls.sock"}}"#,
        ),
        (
            "settings.schema.json",
            r#"{"mcpServers": {"a": {"command": "x"}}, "mcp": {"allowed": ["a"]}, "theme": "dark"}"#,
        ),
    ];
    for (i, (schema, text)) in good.iter().enumerate() {
        assert!(
            check(schema, &format!("good{i}.json"), text),
            "{schema} rejects {text}"
        );
    }
    let bad = [
        (
            "mcp-json.schema.json",
            r#"{"mcpServers": {"a": {"comand": "x"}}}"#,
        ),
        (
            "mcp-json.schema.json",
            r#"{"mcpServers": {"a": {"command": "x", "cwd": null}}}"#,
        ),
        (
            "mcp-json.schema.json",
            r#"{"mcpServers": {"a": {"args": ["x"]}}}"#,
        ),
        (
            "lsp-json.schema.json",
            r#"{"mcpServers": {"a": {"command": "x"}}}"#,
        ),
        (
            "lsp-json.schema.json",
            r#"{"ts": {"command": "tsls", "extensionToLanguge": {}}}"#,
        ),
        (
            "lsp-json.schema.json",
            r#"{"go": {"command": "gopls", "socket": {"host": "h", "prot": 7}}}"#,
        ),
        (
            "settings.schema.json",
            r#"{"mcpServers": {"a": {"command": "x", "evn": {}}}}"#,
        ),
        (
            "extension.schema.json",
            r#"{"name": "e", "mcpServers": {"a": {"commmand": "x"}}}"#,
        ),
    ];
    for (i, (schema, text)) in bad.iter().enumerate() {
        assert!(
            !check(schema, &format!("bad{i}.json"), text),
            "{schema} accepts {text}"
        );
    }
}

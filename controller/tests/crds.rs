//! `crds-like-specs/`: the committed schemas must be what `steward schema
//! all --out` generates, and every example resource must validate against
//! its schema (and read back as the Rust type).

mod common;

use std::path::{Path, PathBuf};

use serde_json::Value;
use steward_schema::jsonc;
use steward_schema::resource::{LspServer, McpServer, WorkspaceStatus};
use steward_schema::validate::SchemaValidator;

const STALE: &str =
    "crds-like-specs is stale: run `cargo run -p steward -- schema all --out crds-like-specs`";

fn specs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../crds-like-specs")
}

#[test]
fn committed_schemas_are_up_to_date() {
    let sb = common::Sandbox::new();
    let fresh = sb.root.join("generated");
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

//! Secrets in status: `status` (every format, offline here; the
//! live controller in the envtests), `describe` and `validate` show env,
//! headers, URLs and args as written in the files, credentials written
//! literally as `<redacted>`, and never an expanded value — unless
//! `--show-secrets`.

use steward_tests::harness::{Env, item};

/// Every secret value the fixture holds, expanded or literal.
const SECRETS: &[&str] = &[
    "s3cr3t-from-env",
    "sk-arg",
    "sk-env",
    "sk-query",
    "sk-header",
    "pw-in-url",
];

fn sandbox() -> Env {
    let sb = Env::new();
    sb.set_var("FIXTURE_TOKEN", "s3cr3t-from-env");
    sb.write_home(
        "settings.json",
        r#"{ "mcpServers": {
  "lit": {
    "command": "lit-mcp",
    "args": ["--api-key", "sk-arg", "--token=${FIXTURE_TOKEN}", "--verbose"],
    "env": { "API_KEY": "sk-env", "GH_TOKEN": "${FIXTURE_TOKEN}", "MODE": "fast",
             "DATABASE_URL": "postgres://app:pw-in-url@db/app" }
  },
  "remote": {
    "httpUrl": "https://mcp.example/mcp?key=sk-query&team=${FIXTURE_TOKEN}",
    "headers": { "Authorization": "Bearer sk-header", "X-Token": "${FIXTURE_TOKEN}" }
  }
} }"#,
    );
    sb.write(
        ".lsp.json",
        r#"{ "py": { "command": "pylsp", "env": { "SECRET": "sk-env" } } }"#,
    );
    sb
}

fn assert_no_secret(what: &str, text: &str) {
    for secret in SECRETS {
        assert!(!text.contains(secret), "{what} shows {secret}:\n{text}");
    }
}

#[test]
fn status_never_prints_expanded_or_literal_secrets() {
    let sb = sandbox();
    for format in ["json", "yaml", "table", "wide"] {
        let run = sb.run(&["status", "--offline", "-o", format]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_no_secret(&format!("status -o {format}"), &run.stdout);
        assert_no_secret(&format!("status -o {format} (stderr)"), &run.stderr);
    }
    let v = sb.status_json(&[]);
    let lit = &item(&v, "McpServer", "lit")["spec"];
    assert_eq!(
        lit["args"],
        serde_json::json!([
            "--api-key",
            "<redacted>",
            "--token=${FIXTURE_TOKEN}",
            "--verbose"
        ])
    );
    assert_eq!(
        lit["env"],
        serde_json::json!({
            "API_KEY": "<redacted>",
            "DATABASE_URL": "postgres://app:<redacted>@db/app",
            "GH_TOKEN": "${FIXTURE_TOKEN}",
            "MODE": "fast"
        })
    );
    let remote = &item(&v, "McpServer", "remote")["spec"];
    assert_eq!(
        remote["httpUrl"],
        "https://mcp.example/mcp?key=<redacted>&team=${FIXTURE_TOKEN}"
    );
    assert_eq!(
        remote["headers"],
        serde_json::json!({"Authorization": "<redacted>", "X-Token": "${FIXTURE_TOKEN}"})
    );
    assert_eq!(
        item(&v, "LspServer", "py")["spec"]["env"]["SECRET"],
        "<redacted>"
    );
}

#[test]
fn show_secrets_prints_what_the_servers_get() {
    let sb = sandbox();
    let run = sb.run(&["status", "--offline", "-o", "json", "--show-secrets"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for secret in SECRETS {
        assert!(
            run.stdout.contains(secret),
            "{secret} missing:\n{}",
            run.stdout
        );
    }
}

#[test]
fn redaction_changes_values_never_field_names() {
    let sb = sandbox();
    let keys = |v: &serde_json::Value| -> Vec<String> {
        let mut out = Vec::new();
        for i in v["items"].as_array().unwrap() {
            for (k, field) in i["spec"].as_object().unwrap() {
                out.push(k.clone());
                if let Some(o) = field.as_object() {
                    out.extend(o.keys().map(|inner| format!("{k}.{inner}")));
                }
            }
        }
        out
    };
    let shown = sb.status_json(&[]);
    let full = sb.status_json(&["--show-secrets"]);
    assert_eq!(keys(&shown), keys(&full));
    assert_eq!(shown["items"].as_array().unwrap().len(), 3);
    // Hashes are of the expanded values either way.
    assert_eq!(
        item(&shown, "McpServer", "lit")["spec"]["configHash"],
        item(&full, "McpServer", "lit")["spec"]["configHash"]
    );
}

#[test]
fn describe_without_a_controller_redacts_too() {
    let sb = sandbox();
    for name in ["lit", "remote", "py"] {
        let run = sb.run(&["describe", name]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_no_secret(&format!("describe {name}"), &run.stdout);
        assert!(
            run.stderr.contains("no controller is running"),
            "{}",
            run.stderr
        );
    }
    let run = sb.run(&["describe", "lit", "--show-secrets"]);
    assert!(run.stdout.contains("sk-env"), "{}", run.stdout);
}

#[test]
fn validate_shows_a_bad_url_as_written_not_expanded() {
    let sb = Env::new();
    sb.set_var("BAD_URL", "ftp://user:pw-in-url@h/x?token=sk-query");
    let file = sb.write(
        ".mcp.json",
        r#"{ "mcpServers": { "bad": { "httpUrl": "${BAD_URL}" } } }"#,
    );
    let run = sb.run(&["validate", file.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_no_secret("validate", &run.stdout);
    assert!(
        run.stdout.contains(r#"found \"${BAD_URL}\""#)
            || run.stdout.contains(r#"found "${BAD_URL}""#),
        "{}",
        run.stdout
    );
    // The source error in status says the same.
    let status = sb.run(&["status", "--offline", "-o", "json"]);
    assert_no_secret("status sources", &status.stdout);
}

#[test]
fn the_controller_redacts_each_spec_once_not_per_document() {
    use std::sync::Arc;
    use steward_schema::resource::Item;

    let sb = sandbox();
    let env: std::collections::BTreeMap<String, String> = [
        ("QWEN_HOME", sb.home.to_str().unwrap()),
        ("HOME", sb.home.to_str().unwrap()),
        ("FIXTURE_TOKEN", "s3cr3t-from-env"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let paths = steward::support::paths::Paths::resolve(&sb.ws, &env).unwrap();
    let store = steward::desired::snapshot::DesiredStore::cold_start(
        paths,
        env,
        steward_schema::desired::CliOptions {
            lsp_enabled: true,
            ..Default::default()
        },
        Vec::new(),
    );
    let status = steward::observe::status::StatusStore::new(Default::default());
    let snap = store.snapshot();
    let first = status.workspace_status_shown(&snap, false);
    let second = status.workspace_status_shown(&snap, false);
    let text = serde_json::to_string(&first).unwrap();
    assert_no_secret("the controller's document", &text);
    for (a, b) in first.items.iter().zip(&second.items) {
        let same = match (a, b) {
            (Item::McpServer(a), Item::McpServer(b)) => Arc::ptr_eq(&a.spec, &b.spec),
            (Item::LspServer(a), Item::LspServer(b)) => Arc::ptr_eq(&a.spec, &b.spec),
            _ => false,
        };
        assert!(same, "{} was redacted again", a.name());
    }
    let full = serde_json::to_string(&status.workspace_status_shown(&snap, true)).unwrap();
    assert!(full.contains("sk-env"), "{full}");
}

//! `steward status --offline`: snapshots of one rich workspace in all three
//! formats, and the trust rules (untrusted workspace, the LSP trust key and
//! who may set it).

use steward_tests::harness::{Env, Run, item, reasons, write_atomic};

use crate::common;
use serde_json::Value;

/// Arguments every rich-fixture status run takes: a CLI allow-list bound
/// that leaves `not-listed` out, and an inline `--mcp-config`.
const RICH_ARGS: &[&str] = &[
    "--allowed-mcp-server-names",
    "alpha,beta,gamma,delta,claude-http,ext-*",
    "--allowed-mcp-server-names=legacy-search,remote,shadowed,sleepy,user-notes,ws-db",
    "--mcp-config",
    r#"{"mcpServers": {"remote": {"httpUrl": "https://remote.example/mcp", "headers": {"X-Team": "${TEAM:-core}"}}}}"#,
];

/// Every kind of source, every gate. `trusted`: whether a trust rule for the
/// workspace exists (folder trust is enabled in user settings either way).
fn rich(trusted: bool) -> Env {
    let sb = Env::new();
    sb.set_var("FIXTURE_TOKEN", "s3cr3t");
    write_atomic(
        &sb.system_defaults,
        r#"{ "lsp": { "excluded": ["cobol"] }, "ui": { "theme": "ignored" } }"#,
    );
    sb.write_home(
        "settings.json",
        r#"{
  // user layer: turns folder trust on, excludes legacy-* servers
  "security": { "folderTrust": { "enabled": true } },
  "mcp": { "excluded": ["legacy-*"] },
  "mcpServers": {
    "user-notes": { "command": "notes-mcp", "env": { "TOKEN": "${FIXTURE_TOKEN}" } },
    "legacy-search": { "url": "https://search.example/sse" },
    "sleepy": { "command": "sleepy-mcp", "disabled": true },
    "shadowed": { "command": "user-version" }
  }
}"#,
    );
    sb.write(
        ".qwen/settings.json",
        r#"{
  "mcpServers": {
    "ws-db": { "command": "db-mcp", "args": ["--readonly"] },
    "shadowed": { "command": "workspace-version" }
  },
  // ignored: a workspace cannot turn folder trust off for itself
  "security": { "folderTrust": { "enabled": false } }
}"#,
    );
    sb.write(
        ".mcp.json",
        r#"{
  "mcpServers": {
    "alpha": { "command": "alpha-mcp", "args": ["--stdio"] },
    "beta": { "command": "beta-mcp" },
    "gamma": { "command": "gamma-mcp", "args": ["--v2"] },
    "delta": { "command": "delta-mcp", "description": "never decided" },
    "claude-http": { "type": "http", "url": "https://claude.example/mcp" },
    "not-listed": { "command": "outside-the-cli-bound" }
  }
}"#,
    );
    sb.write(
        ".lsp.json",
        r#"{
  "typescript": {
    "command": "typescript-language-server",
    "args": ["--stdio"],
    "extensionToLanguage": { ".ts": "typescript", ".TSX": "typescriptreact" },
    "trustRequired": false
  },
  "python": { "command": "pylsp", "workspaceFolder": "backend", "restartOnCrash": true },
  "broken": { "transport": "tcp" }
}"#,
    );
    sb.write_home(
        "extensions/tools/qwen-extension.json",
        r#"{
  "name": "tools",
  "version": "1.2.0",
  "mcpServers": { "ext-fmt": { "command": "${extensionPath}/bin/fmt-mcp", "args": ["--root", "${workspacePath}"] } },
  "lspServers": "lsp.json"
}"#,
    );
    sb.write_home(
        "extensions/tools/lsp.json",
        r#"{ "rust": { "command": "rust-analyzer", "trustRequired": false } }"#,
    );
    if trusted {
        sb.write_home(
            "trustedFolders.json",
            &format!(r#"{{ "{}": "TRUST_FOLDER" }}"#, sb.ws.display()),
        );
    }

    // Approvals bound to the hashes the files produce now: alpha approved,
    // beta rejected, gamma approved for an older version of its entry.
    let status = sb.status_json(RICH_ARGS);
    let hash = |name: &str| {
        item(&status, "McpServer", name)["spec"]["approvalHash"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let approvals = serde_json::json!({
        sb.ws.to_str().unwrap(): {
            "alpha": {"hash": hash("alpha"), "status": "approved"},
            "beta": {"hash": hash("beta"), "status": "rejected"},
            "gamma": {"hash": "0".repeat(64), "status": "approved"},
        },
        "/some/other/project": {"alpha": {"hash": "1".repeat(64), "status": "rejected"}},
    });
    write_atomic(
        &sb.approvals_path(),
        &serde_json::to_string_pretty(&approvals).unwrap(),
    );
    sb
}

/// Labels for the hashes that depend on the temp paths (their spec
/// holds a path under the sandbox), so snapshots are stable across runs.
/// Every other hash is shown as it is.
fn path_dependent_hashes(sb: &Env, status: &Value) -> Vec<(String, String)> {
    let root = sb.root.path().to_str().unwrap();
    status["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["spec"].to_string().contains(root))
        .flat_map(|i| {
            let name = i["metadata"]["name"].as_str().unwrap();
            // An extension's approval hash covers its expanded paths too.
            [
                ("configHash", "CONFIG-HASH"),
                ("approvalHash", "APPROVAL-HASH"),
            ]
            .into_iter()
            .filter_map(move |(field, label)| {
                Some((
                    i["spec"][field].as_str()?.to_owned(),
                    format!("[{label} {name}]"),
                ))
            })
        })
        .collect()
}

fn snapshot_settings(sb: &Env) -> insta::Settings {
    let mut settings = common::insta_settings(sb);
    for (hash, label) in path_dependent_hashes(sb, &sb.status_json(RICH_ARGS)) {
        settings.add_filter(&hash, label);
    }
    settings
}

fn status_run(sb: &Env, format: &str) -> Run {
    let mut args = vec!["status", "--offline", "-o", format];
    args.extend_from_slice(RICH_ARGS);
    let run = sb.run(&args);
    assert_eq!(run.code, 0, "status -o {format} failed: {}", run.stderr);
    run
}

#[test]
fn status_offline_table_snapshot() {
    let sb = rich(true);
    let run = status_run(&sb, "table");
    snapshot_settings(&sb).bind(|| {
        insta::assert_snapshot!(
            "status_offline_table",
            format!("--- stdout\n{}--- stderr\n{}", run.stdout, run.stderr)
        );
    });
}

#[test]
fn status_offline_json_snapshot() {
    let sb = rich(true);
    let run = status_run(&sb, "json");
    // Contract checks that hold whatever the snapshot says.
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["apiVersion"], "steward.dev/v1alpha1");
    assert_eq!(v["kind"], "WorkspaceStatus");
    assert_eq!(v["controller"]["running"], false);
    assert_eq!(v["controller"]["pid"], Value::Null);
    assert_eq!(v["controller"]["trusted"], true);
    assert_eq!(v["removed"], serde_json::json!([]));
    assert!(run.stderr.is_empty(), "{}", run.stderr);
    snapshot_settings(&sb).bind(|| insta::assert_snapshot!("status_offline_json", run.stdout));
}

#[test]
fn status_offline_yaml_snapshot() {
    let sb = rich(true);
    let run = status_run(&sb, "yaml");
    // The YAML is the same object as the JSON.
    let yaml: Value = yaml_serde::from_str(&run.stdout).unwrap();
    let json: Value = serde_json::from_str(&status_run(&sb, "json").stdout).unwrap();
    assert_eq!(yaml, json);
    snapshot_settings(&sb).bind(|| insta::assert_snapshot!("status_offline_yaml", run.stdout));
}

#[test]
fn every_gate_sets_its_reason() {
    let sb = rich(true);
    let v = sb.status_json(RICH_ARGS);
    let got = reasons(&v);
    let want: Vec<(String, String)> = [
        ("McpServer/alpha", "-"),
        ("McpServer/beta", "Rejected"),
        ("McpServer/claude-http", "PendingApproval"),
        ("McpServer/delta", "PendingApproval"),
        ("McpServer/ext-fmt", "-"),
        ("McpServer/gamma", "PendingApproval"),
        ("McpServer/legacy-search", "Excluded"),
        ("McpServer/not-listed", "NotAllowed"),
        ("McpServer/remote", "-"),
        ("McpServer/shadowed", "PendingApproval"),
        ("McpServer/sleepy", "Disabled"),
        ("McpServer/user-notes", "-"),
        ("McpServer/ws-db", "PendingApproval"),
        // An entry that cannot be built keeps a row.
        ("LspServer/broken", "InvalidSpec"),
        ("LspServer/python", "-"),
        ("LspServer/rust", "-"),
        ("LspServer/typescript", "-"),
    ]
    .iter()
    .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
    .collect();
    assert_eq!(got, want);
    // The workspace settings entry wins over the user's; the .lsp.json entry
    // is trustRequired whatever it says; the invalid LSP entry is Failed
    // with reason InvalidSpec and its source reported Invalid.
    assert_eq!(
        item(&v, "McpServer", "shadowed")["spec"]["scope"],
        "workspace"
    );
    assert_eq!(
        item(&v, "LspServer", "typescript")["spec"]["trustRequired"],
        true
    );
    let lsp_source = v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == "LspJson")
        .unwrap();
    assert_eq!(lsp_source["state"], "Invalid");
    let broken = item(&v, "LspServer", "broken");
    assert_eq!(broken["status"]["phase"], "Failed");
    let message = broken["status"]["message"].as_str().unwrap();
    assert!(
        message.contains(".lsp.json:9:13: transport \"tcp\" needs"),
        "{message}"
    );
}

#[test]
fn no_lsp_leaves_language_servers_out() {
    let sb = rich(true);
    let mut args = RICH_ARGS.to_vec();
    args.push("--no-lsp");
    let v = sb.status_json(&args);
    assert_eq!(v["controller"]["lspEnabled"], false);
    assert!(reasons(&v).iter().all(|(k, _)| k.starts_with("McpServer/")));
}

#[test]
fn empty_allow_list_flag_denies_every_mcp_server() {
    let sb = rich(true);
    let v = sb.status_json(&["--allowed-mcp-server-names="]);
    for (key, reason) in reasons(&v) {
        if key.starts_with("McpServer/") && key != "McpServer/sleepy" {
            assert_eq!(reason, "NotAllowed", "{key}");
        }
    }
}

#[test]
fn untrusted_workspace_blocks_every_server() {
    let sb = rich(false);
    let v = sb.status_json(RICH_ARGS);
    assert_eq!(v["controller"]["trusted"], false);
    for (key, reason) in reasons(&v) {
        if key != "LspServer/broken" {
            assert_eq!(reason, "UntrustedWorkspace", "{key}");
        }
    }
}

#[test]
fn lsp_trust_key_from_user_settings_holds_back_only_trust_required_servers() {
    let sb = rich(false);
    let user = sb.home.join("settings.json");
    let text = std::fs::read_to_string(&user).unwrap().replacen(
        "\"mcp\":",
        "\"lsp\": { \"requireTrustedWorkspace\": false },\n  \"mcp\":",
        1,
    );
    write_atomic(&user, &text);
    let v = sb.status_json(RICH_ARGS);
    let got: Vec<(String, String)> = reasons(&v)
        .into_iter()
        .filter(|(k, _)| k.starts_with("LspServer/"))
        .collect();
    assert_eq!(
        got,
        vec![
            ("LspServer/broken".to_owned(), "InvalidSpec".to_owned()),
            ("LspServer/python".to_owned(), "TrustRequired".to_owned()),
            // The extension's server says trustRequired: false and may run.
            ("LspServer/rust".to_owned(), "-".to_owned()),
            // .lsp.json entries are trustRequired whatever they say.
            (
                "LspServer/typescript".to_owned(),
                "TrustRequired".to_owned()
            ),
        ]
    );
    for (key, reason) in reasons(&v) {
        if key.starts_with("McpServer/") {
            assert_eq!(reason, "UntrustedWorkspace", "{key}");
        }
    }
}

#[test]
fn workspace_settings_cannot_relax_lsp_trust() {
    let sb = rich(false);
    sb.write(
        ".qwen/settings.json",
        r#"{ "lsp": { "requireTrustedWorkspace": false }, "security": { "folderTrust": { "enabled": false } } }"#,
    );
    let v = sb.status_json(RICH_ARGS);
    assert_eq!(v["controller"]["trusted"], false);
    for (key, reason) in reasons(&v) {
        if key != "LspServer/broken" {
            assert_eq!(reason, "UntrustedWorkspace", "{key}");
        }
    }
}

#[test]
fn without_offline_says_no_controller_runs() {
    let sb = Env::new();
    let run = sb.run(&["status"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "no controller is running for {}; showing the offline view",
            sb.ws.display()
        )),
        "{}",
        run.stderr
    );
}

#[test]
fn status_never_writes_into_the_workspace() {
    let sb = rich(true);
    let before = tree(&sb.ws);
    for format in ["table", "json", "yaml"] {
        status_run(&sb, format);
    }
    assert_eq!(tree(&sb.ws), before);
}

fn tree(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p.clone());
            }
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn describe_offline_snapshot() {
    let sb = rich(true);
    let mut args = vec!["describe", "user-notes"];
    args.extend_from_slice(RICH_ARGS);
    let run = sb.run(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stdout.contains("s3cr3t"), "{}", run.stdout);
    snapshot_settings(&sb).bind(|| {
        insta::assert_snapshot!(
            "describe_offline",
            format!("--- stdout\n{}--- stderr\n{}", run.stdout, run.stderr)
        );
    });
}

//! `steward approve` / `steward reject`: decisions bound to the approvalHash,
//! keyed by the canonical workspace root, written so that concurrent
//! writers lose nothing and an invalid file is never overwritten.

use serde_json::Value;
use steward_tests::harness::{Env, item, write_atomic};

const MCP_JSON: &str = r#"{
  "mcpServers": {
    "alpha": { "command": "alpha-mcp", "args": ["--stdio"] },
    "beta": { "command": "beta-mcp" },
    "gamma": { "url": "https://gamma.example/sse" }
  }
}"#;

fn sandbox() -> Env {
    let sb = Env::new();
    sb.write(".mcp.json", MCP_JSON);
    sb.write(
        ".qwen/settings.json",
        r#"{ "mcpServers": { "ws-tool": { "command": "ws-tool" } } }"#,
    );
    sb.write_home(
        "settings.json",
        r#"{ "mcpServers": { "mine": { "command": "mine" } } }"#,
    );
    sb.write(".lsp.json", r#"{ "rust": { "command": "rust-analyzer" } }"#);
    sb
}

fn reason(sb: &Env, name: &str) -> String {
    let v = sb.status_json(&[]);
    item(&v, "McpServer", name)["status"]["reason"]
        .as_str()
        .unwrap_or("-")
        .to_owned()
}

fn phase(sb: &Env, name: &str) -> String {
    let v = sb.status_json(&[]);
    item(&v, "McpServer", name)["status"]["phase"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn approvals(sb: &Env) -> Value {
    serde_json::from_str(&std::fs::read_to_string(sb.approvals_path()).unwrap()).unwrap()
}

#[test]
fn approve_admits_and_reject_blocks() {
    let sb = sandbox();
    assert_eq!(reason(&sb, "alpha"), "PendingApproval");

    let run = sb.run(&["approve", "alpha"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let hash = item(&sb.status_json(&[]), "McpServer", "alpha")["spec"]["approvalHash"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        run.stdout,
        format!("approved alpha (hash {}…)\n", &hash[..8])
    );
    assert_eq!(
        (phase(&sb, "alpha").as_str(), reason(&sb, "alpha").as_str()),
        ("Pending", "-")
    );
    assert_eq!(
        approvals(&sb)[sb.ws.to_str().unwrap()]["alpha"],
        serde_json::json!({"hash": hash, "status": "approved"})
    );

    let run = sb.run(&["reject", "beta"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.starts_with("rejected beta (hash "),
        "{}",
        run.stdout
    );
    assert_eq!(reason(&sb, "beta"), "Rejected");
    // Rejecting an approved server takes its approval away.
    assert_eq!(sb.run(&["reject", "alpha"]).code, 0);
    assert_eq!(reason(&sb, "alpha"), "Rejected");
}

#[test]
fn approvals_file_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let sb = sandbox();
    assert_eq!(sb.run(&["approve", "alpha"]).code, 0);
    let mode = std::fs::metadata(sb.approvals_path())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn editing_the_entry_asks_again_and_readding_it_keeps_the_decision() {
    let sb = sandbox();
    assert_eq!(sb.run(&["approve", "alpha"]).code, 0);
    assert_eq!(reason(&sb, "alpha"), "-");

    // Edit: a new hash, pending again (with a message saying it changed).
    sb.write(".mcp.json", &MCP_JSON.replace("--stdio", "--verbose"));
    assert_eq!(reason(&sb, "alpha"), "PendingApproval");
    let v = sb.status_json(&[]);
    let message = item(&v, "McpServer", "alpha")["status"]["message"]
        .as_str()
        .unwrap();
    assert!(message.contains("changed"), "{message}");

    // Remove it, then re-add the identical original entry: approved again.
    sb.write(
        ".mcp.json",
        r#"{ "mcpServers": { "beta": { "command": "beta-mcp" } } }"#,
    );
    assert!(
        approvals(&sb)[sb.ws.to_str().unwrap()]
            .get("alpha")
            .is_some(),
        "records of servers that are gone are kept"
    );
    sb.write(".mcp.json", MCP_JSON);
    assert_eq!(reason(&sb, "alpha"), "-");

    // Formatting and key order do not matter to the hash.
    sb.write(
        ".mcp.json",
        r#"{"mcpServers":{"alpha":{"args":["--stdio"],"command":"alpha-mcp"},"beta":{"command":"beta-mcp"}}}"#,
    );
    assert_eq!(reason(&sb, "alpha"), "-");
}

#[test]
fn a_decision_survives_removing_the_server_and_approving_others() {
    let sb = sandbox();
    assert_eq!(sb.run(&["reject", "gamma"]).code, 0);
    sb.write(
        ".mcp.json",
        &MCP_JSON.replace(
            r#""gamma": { "url": "https://gamma.example/sse" }"#,
            r#""zeta": { "command": "z" }"#,
        ),
    );
    assert_eq!(sb.run(&["approve", "zeta"]).code, 0);
    let records = &approvals(&sb)[sb.ws.to_str().unwrap()];
    assert_eq!(records["gamma"]["status"], "rejected");
    assert_eq!(records["zeta"]["status"], "approved");
}

#[test]
fn unknown_name_is_a_usage_error_listing_the_gated_names() {
    let sb = sandbox();
    let run = sb.run(&["approve", "alpha", "nope"]);
    // Usage error (exit 2), as the help says of an unknown name.
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.starts_with(&format!(
            "error: approve nope: no MCP server of that name is configured for {}; the servers that need approval are: alpha, beta, gamma, ws-tool\n",
            sb.ws.display()
        )),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("Usage: steward approve"),
        "{}",
        run.stderr
    );
    // Nothing was written, not even the valid name's decision.
    assert!(!sb.approvals_path().exists());
}

#[test]
fn non_gated_name_is_an_error_saying_its_scope() {
    let sb = sandbox();
    let run = sb.run(&["approve", "mine"]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr,
        "steward: failed to approve mine: it comes from UserSettings (scope user) and needs no approval; only servers from .mcp.json (scope project) and .qwen/settings.json (scope workspace) do\n"
    );
    let run = sb.run(&["reject", "rust"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("it is a language server"),
        "{}",
        run.stderr
    );
    assert!(!sb.approvals_path().exists());
}

#[test]
fn approve_all_and_reject_all() {
    let sb = sandbox();
    // reject --all: only what is undecided.
    assert_eq!(sb.run(&["approve", "alpha"]).code, 0);
    let run = sb.run(&["reject", "--all"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let rejected: Vec<&str> = run
        .stdout
        .lines()
        .map(|l| l.split(' ').nth(1).unwrap())
        .collect();
    assert_eq!(rejected, ["beta", "gamma", "ws-tool"]);
    assert_eq!(reason(&sb, "alpha"), "-");

    // approve --all: everything not approved for its current hash.
    let run = sb.run(&["approve", "--all"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let approved: Vec<&str> = run
        .stdout
        .lines()
        .map(|l| l.split(' ').nth(1).unwrap())
        .collect();
    assert_eq!(approved, ["beta", "gamma", "ws-tool"]);
    for name in ["alpha", "beta", "gamma", "ws-tool"] {
        assert_eq!(reason(&sb, name), "-", "{name}");
    }

    let run = sb.run(&["approve", "--all"]);
    assert_eq!((run.code, run.stdout.as_str()), (0, ""));
    assert!(
        run.stderr.starts_with("nothing to approve"),
        "{}",
        run.stderr
    );
}

#[test]
fn approving_a_server_blocked_by_another_gate_says_so() {
    let sb = sandbox();
    sb.write_home(
        "settings.json",
        r#"{ "mcp": { "excluded": ["gam*"] }, "mcpServers": { "mine": { "command": "mine" } } }"#,
    );
    let run = sb.run(&["approve", "gamma"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("note: gamma is still blocked (Excluded)"),
        "{}",
        run.stderr
    );
    assert_eq!(reason(&sb, "gamma"), "Excluded");
}

#[test]
fn decisions_are_keyed_by_the_canonical_workspace_root() {
    let sb = sandbox();
    let link = sb.root.path().join("link-to-ws");
    std::os::unix::fs::symlink(&sb.ws, &link).unwrap();
    let run = sb.run(&["approve", "alpha", "--workspace", link.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let file = approvals(&sb);
    let keys: Vec<&String> = file.as_object().unwrap().keys().collect();
    assert_eq!(keys, [&sb.ws.to_str().unwrap().to_owned()]);
    assert_eq!(reason(&sb, "alpha"), "-");
}

#[test]
fn invalid_approvals_file_is_never_overwritten() {
    let sb = sandbox();
    for bad in [
        "{ \"/x\": { \"a\": { \"hash\": \"h\", \"status\": \"approved\" } ",
        r#"{ "/x": { "a": { "hash": "h", "status": "maybe" } } }"#,
        "[]",
    ] {
        write_atomic(&sb.approvals_path(), bad);
        let run = sb.run(&["approve", "alpha"]);
        assert_eq!(run.code, 1, "{bad}");
        assert!(
            run.stderr.starts_with(&format!(
                "steward: failed to update {}: it is not a valid approvals file, so nothing was written",
                sb.approvals_path().display()
            )),
            "{}",
            run.stderr
        );
        assert_eq!(std::fs::read_to_string(sb.approvals_path()).unwrap(), bad);
    }
}

#[test]
fn other_records_and_unknown_keys_survive_a_write() {
    let sb = sandbox();
    let before = serde_json::json!({
        "$schema": "https://steward.dev/schemas/v1alpha1/approvals.schema.json",
        "/another/project": {"alpha": {"hash": "abc", "status": "rejected"}},
        sb.ws.to_str().unwrap(): {"removed-long-ago": {"hash": "def", "status": "approved"}},
    });
    write_atomic(&sb.approvals_path(), &before.to_string());
    assert_eq!(sb.run(&["approve", "alpha"]).code, 0);
    let after = approvals(&sb);
    assert_eq!(after["$schema"], before["$schema"]);
    assert_eq!(after["/another/project"], before["/another/project"]);
    let ws = &after[sb.ws.to_str().unwrap()];
    assert_eq!(
        ws["removed-long-ago"],
        before[sb.ws.to_str().unwrap()]["removed-long-ago"]
    );
    assert_eq!(ws["alpha"]["status"], "approved");
}

/// Two writers at once, many rounds: every decision lands (no lost update).
#[test]
fn concurrent_writers_lose_nothing() {
    let sb = sandbox();
    const ROUNDS: usize = 25;
    for round in 0..ROUNDS {
        let _ = std::fs::remove_file(sb.approvals_path());
        let (a, b) = if round % 2 == 0 {
            (["approve", "alpha"], ["reject", "beta"])
        } else {
            (["reject", "alpha"], ["approve", "beta"])
        };
        let first = sb.spawn(&a);
        let second = sb.spawn(&b);
        for child in [first, second] {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let records = approvals(&sb)[sb.ws.to_str().unwrap()].clone();
        let words = [a[0], b[0]].map(|v| {
            if v == "approve" {
                "approved"
            } else {
                "rejected"
            }
        });
        assert_eq!(
            records["alpha"]["status"], words[0],
            "round {round}: {records}"
        );
        assert_eq!(
            records["beta"]["status"], words[1],
            "round {round}: {records}"
        );
    }
    // No temp file is left behind.
    let leftovers: Vec<_> = std::fs::read_dir(&sb.home)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains(".tmp."))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// Many writers on a shared file, each adding its own server: all present.
#[test]
fn many_concurrent_writers_all_land() {
    let sb = Env::new();
    let servers: Vec<String> = (0..8).map(|i| format!("s{i}")).collect();
    let entries: Vec<String> = servers
        .iter()
        .map(|s| format!(r#""{s}": {{ "command": "{s}" }}"#))
        .collect();
    sb.write(
        ".mcp.json",
        &format!(r#"{{ "mcpServers": {{ {} }} }}"#, entries.join(", ")),
    );
    let children: Vec<_> = servers.iter().map(|s| sb.spawn(&["approve", s])).collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let records = approvals(&sb)[sb.ws.to_str().unwrap()].clone();
    for s in &servers {
        assert_eq!(records[s]["status"], "approved", "{s} lost: {records}");
    }
}

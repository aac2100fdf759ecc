//! The README's demo walkthrough, step by step, on a copy of
//! `examples/demo`: approving the gated servers starts them; an `.lsp.json`
//! edit restarts only that language server; a `.mcp.json` edit asks for
//! approval again (the decision is bound to the entry as written, as in
//! Qwen Code) and, approved, restarts only that server.

use std::path::Path;

use steward_schema::resource::{Phase, Reason};
use steward_tests::harness::{Env, bin, lsp_pid, lsp_ready, mcp, pid_of, ready, wait_until};

/// `examples/demo/<rel>` with its fake servers pointed at this build.
fn demo_file(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/demo")
        .join(rel);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .replace(
            "../../target/debug/fake-mcp-server",
            &bin("fake-mcp-server").to_string_lossy(),
        )
        .replace(
            "../../target/debug/fake-lsp-server",
            &bin("fake-lsp-server").to_string_lossy(),
        )
        .replace(
            "../../crds-like-specs/",
            &format!("{}/../crds-like-specs/", env!("CARGO_MANIFEST_DIR")),
        )
}

#[test]
fn readme_demo_edits_restart_or_ask_again_as_documented() {
    let env = Env::new();
    for rel in [".mcp.json", ".lsp.json", ".qwen/settings.json"] {
        env.write(rel, &demo_file(rel));
    }
    let c = env.start(&[]);
    let s = c.wait_for("fake Ready, clock and notes pending", |s| {
        lsp_ready(s, "fake")
            && mcp(s, "clock").is_some_and(|m| m.status.reason == Some(Reason::PendingApproval))
    });
    assert_eq!(
        mcp(&s, "legacy-search").unwrap().status.reason,
        Some(Reason::Excluded)
    );
    // The log says what the user must do, naming the servers and the command.
    wait_until("the log names the servers waiting for approval", || {
        c.log_text().lines().any(|l| {
            l.contains(
                "2 servers wait for approval: clock, notes — run: steward approve clock notes",
            )
        })
    });

    // Step: approve the gated servers.
    let out = env.steward(&["approve", "--all"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = c.wait_for("clock and notes Ready", |s| {
        ready(s, "clock") && ready(s, "notes")
    });
    let (clock, notes, fake) = (
        pid_of(&s, "clock"),
        pid_of(&s, "notes"),
        lsp_pid(&s, "fake"),
    );

    // Step: edit .lsp.json — only the language server restarts.
    let lsp = demo_file(".lsp.json").replace("\"hello\"", "\"bonjour\"");
    env.write(".lsp.json", &lsp);
    let s = c.wait_for("fake restarted", |s| {
        lsp_ready(s, "fake") && lsp_pid(s, "fake") != fake
    });
    assert_eq!((pid_of(&s, "clock"), pid_of(&s, "notes")), (clock, notes));
    let fake = lsp_pid(&s, "fake");

    // Step: edit .mcp.json — clock asks again; approved, it restarts alone.
    let mcp_json = demo_file(".mcp.json").replace(r#"\"today\"]"#, r#"\"today\",\"tomorrow\"]"#);
    assert_ne!(
        mcp_json,
        demo_file(".mcp.json"),
        "the edit applies to the demo file"
    );
    env.write(".mcp.json", &mcp_json);
    let s = c.wait_for("clock pending approval again", |s| {
        mcp(s, "clock").is_some_and(|m| m.status.reason == Some(Reason::PendingApproval))
    });
    assert_eq!(mcp(&s, "clock").unwrap().status.phase, Phase::Blocked);
    wait_until("the log says clock waits for approval again", || {
        c.log_text()
            .lines()
            .any(|l| l.contains("1 server waits for approval: clock — run: steward approve clock"))
    });
    assert_eq!(pid_of(&s, "notes"), notes);
    let out = env.steward(&["approve", "clock"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = c.wait_for("clock Ready with its new tool", |s| {
        ready(s, "clock")
            && mcp(s, "clock")
                .and_then(|m| m.status.tools.clone())
                .is_some_and(|t| t.iter().any(|n| n == "tomorrow"))
    });
    assert_ne!(pid_of(&s, "clock"), clock);
    assert_eq!(pid_of(&s, "notes"), notes);
    assert_eq!(
        lsp_pid(&s, "fake"),
        fake,
        "the language server keeps its process"
    );
}

//! Envtest, regression tests for the issue 10 defects in what the
//! controller reports and keeps: an unreadable approvals source keeps the
//! approvals in force; status that tells the truth about crashes, reverted
//! edits, retries, reloads and rejected edits; backoff that only a change
//! of the server's own spec (or a valid save) resets; no per-server state
//! left behind by removed servers.
//!
//! Every wait is a condition with a deadline; every test stops the
//! controller and waits until no server it started is alive.

use std::path::Path;

use steward_schema::resource::{Reason, SourceKind, SourceState, WorkspaceStatus};
use steward_tests::fake_mcp::read_record;
use steward_tests::harness::{
    Controller, Env, alive, fake_tools as tools, mcp, mcp_servers, pid_of, ready, recorded_pids,
    wait_until,
};

fn reason_is(s: &WorkspaceStatus, name: &str, reason: Reason) -> bool {
    mcp(s, name).is_some_and(|m| m.status.reason == Some(reason))
}

fn starts(record: &Path) -> usize {
    read_record(record)
        .map(|events| events.iter().filter(|e| e.event == "start").count())
        .unwrap_or(0)
}

fn approve(env: &Env, names: &[&str]) {
    let mut args = vec!["approve"];
    args.extend_from_slice(names);
    let out = env.steward(&args);
    assert!(
        out.status.success(),
        "steward approve {names:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// SIGTERM the controller (exit 0), then wait until every server it
/// started is gone.
fn finish(mut c: Controller, env: &Env) {
    let status = c.terminate().expect("the controller was running");
    assert!(
        status.success(),
        "steward run exited with {status}\n{}",
        c.log_text()
    );
    let pids = recorded_pids(&env.records());
    wait_until("every server the controller started exits", || {
        pids.iter().all(|p| !alive(*p))
    });
}

// ---- issue 10 (21): an unreadable approvals source ------------------------------

/// An approvals path replaced by a directory is rejected like a corrupt
/// file: the approved server keeps running, and the approvals source
/// reports the error.
#[test]
fn an_approvals_path_that_is_a_directory_keeps_approved_servers_running() {
    let env = Env::new();
    env.write(
        ".mcp.json",
        &mcp_servers(&[("proj", env.fake_mcp("proj", tools(&["p"])))]),
    );
    let c = env.start(&[]);
    c.wait_for("proj PendingApproval", |s| {
        reason_is(s, "proj", Reason::PendingApproval)
    });
    approve(&env, &["proj"]);
    let s = c.wait_for("proj Ready", |s| ready(s, "proj"));
    let pid = pid_of(&s, "proj").unwrap();

    let approvals = env.paths().approvals;
    std::fs::remove_file(&approvals).unwrap();
    std::fs::create_dir(&approvals).unwrap();
    let s = c.wait_for("the approvals source reported invalid", |s| {
        s.sources.iter().any(|src| {
            src.kind == SourceKind::Approvals
                && src.state == SourceState::Invalid
                && src.error.is_some()
        })
    });
    assert!(ready(&s, "proj"), "{:?}", mcp(&s, "proj"));
    assert_eq!(pid_of(&s, "proj"), Some(pid));
    // A resync (steward reload) reads it again: still kept.
    let out = env.steward(&["reload"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = c.status();
    assert_eq!(pid_of(&s, "proj"), Some(pid), "{:?}", mcp(&s, "proj"));
    assert!(alive(pid));
    assert_eq!(starts(&env.record("proj")), 1);
    finish(c, &env);
}

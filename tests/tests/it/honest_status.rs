//! Envtest, regression tests for what the controller reports and keeps: an
//! unreadable approvals source keeps the approvals in force; status that
//! tells the truth about crashes, reverted edits, retries, reloads and
//! rejected edits; backoff that only a change of the server's own spec (or a
//! valid save) resets; no per-server state left behind by removed servers.
//!
//! Every wait is a condition with a deadline; every test stops the
//! controller and waits until no server it started is alive.

use std::path::Path;

use steward_schema::resource::{
    Condition, ConditionStatus, Phase, Reason, SourceKind, SourceState, WorkspaceStatus,
};
use steward_tests::fake_mcp::{FakeMcpConfig, read_record};
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

// ---- an unreadable approvals source ------------------------------------------------

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

// ---- status that tells the truth ---------------------------------------------------

fn condition(s: &WorkspaceStatus, type_: &str) -> Option<Condition> {
    s.controller
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .cloned()
}

fn condition_is(s: &WorkspaceStatus, type_: &str, status: ConditionStatus) -> bool {
    condition(s, type_).is_some_and(|c| c.status == status)
}

/// A crashed MCP server no longer lists the tools of the process that died.
#[test]
fn a_crashed_mcp_server_lists_no_tools() {
    let env = Env::new();
    let config = FakeMcpConfig {
        crash_after_listed_ms: Some(400),
        ..tools(&["t1", "t2"])
    };
    env.user_mcp_servers(&[("flaky", env.fake_mcp("flaky", config))]);
    let c = env.start(&[]);
    let s = c.wait_for("flaky Ready with its tools", |s| ready(s, "flaky"));
    assert_eq!(
        mcp(&s, "flaky")
            .unwrap()
            .status
            .tools
            .as_ref()
            .map(Vec::len),
        Some(2)
    );
    // Crashes repeat, and from the second one on it waits before restarting.
    let s = c.wait_for("flaky Failed after a crash", |s| {
        mcp(s, "flaky").is_some_and(|m| {
            m.status.phase == Phase::Failed
                && matches!(
                    m.status.reason,
                    Some(Reason::Crashed | Reason::CrashLoopBackOff)
                )
        })
    });
    let m = mcp(&s, "flaky").unwrap();
    assert_eq!(m.status.tools, None, "a crashed server lists tools: {m:?}");
    assert_eq!(m.status.pid, None);
    finish(c, &env);
}

/// `RestartRequired` (an edit of `mcp.serverCommand`) clears when the edit
/// is reverted.
#[test]
fn restart_required_clears_when_the_server_command_edit_is_reverted() {
    let env = Env::new();
    let original = r#"{"mcp": {"serverCommand": "node server.js"}}"#;
    env.write_home("settings.json", original);
    let c = env.start(&[]);
    let s = c.status();
    assert!(
        !condition_is(&s, "RestartRequired", ConditionStatus::True),
        "{:?}",
        condition(&s, "RestartRequired")
    );
    env.write_home(
        "settings.json",
        r#"{"mcp": {"serverCommand": "node other.js"}}"#,
    );
    c.wait_for("RestartRequired True", |s| {
        condition_is(s, "RestartRequired", ConditionStatus::True)
    });
    env.write_home("settings.json", original);
    let s = c.wait_for("RestartRequired False after the revert", |s| {
        condition_is(s, "RestartRequired", ConditionStatus::False)
    });
    assert_eq!(
        condition(&s, "RestartRequired").unwrap().reason.as_deref(),
        Some("ServerCommandUnchanged")
    );
    finish(c, &env);
}

/// A server that fails to start and is retried counts every retry in
/// `restarts`, while it is still failing.
#[test]
fn restarts_count_every_retry_of_a_server_that_fails_to_start() {
    let env = Env::new();
    // Exits at once: the handshake never completes (a start failure).
    let config = FakeMcpConfig {
        crash_after_ms: Some(0),
        ..tools(&["t"])
    };
    env.user_mcp_servers(&[("broken", env.fake_mcp("broken", config))]);
    let c = env.start(&[]);
    let s = c.wait_for("broken retried at least twice", |s| {
        mcp(s, "broken").is_some_and(|m| m.status.restarts >= 2)
    });
    let m = mcp(&s, "broken").unwrap();
    assert_ne!(m.status.phase, Phase::Ready, "{m:?}");
    assert!(
        starts(&env.record("broken")) >= 2,
        "retries are real attempts"
    );
    finish(c, &env);
}

/// After an invalid edit the `SourcesValid` condition is False and names
/// the file; a valid save sets it True again.
#[test]
fn sources_valid_condition_names_a_rejected_edit_until_it_is_fixed() {
    let env = Env::new();
    let entry = env.fake_mcp("alpha", tools(&["a"]));
    env.user_mcp_servers(&[("alpha", entry.clone())]);
    let c = env.start(&[]);
    c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    let settings = env.home.join("settings.json");
    env.write_home("settings.json", "{ \"mcpServers\": ");
    let s = c.wait_for("SourcesValid False", |s| {
        condition_is(s, "SourcesValid", ConditionStatus::False)
    });
    let cond = condition(&s, "SourcesValid").unwrap();
    let message = cond.message.unwrap_or_default();
    assert!(
        message.contains(&settings.display().to_string()),
        "the condition does not name the file: {message}"
    );
    assert!(ready(&s, "alpha"), "the previous content stays in force");

    env.user_mcp_servers(&[("alpha", entry)]);
    c.wait_for("SourcesValid True after the fix", |s| {
        condition_is(s, "SourcesValid", ConditionStatus::True)
    });
    finish(c, &env);
}

// ---- nothing dropped silently ------------------------------------------------------

/// At cold start an entry with a wrong type or a typo, and a `--mcp-config`
/// file that does not exist, are never silent: each dropped entry keeps a
/// `Failed`/`InvalidSpec` row whose message has file:line:col, the missing
/// file is an `Invalid` source, and each is a WARN line in the log. The
/// valid entry beside them runs.
#[test]
fn cold_start_drops_keep_a_row_and_a_warning() {
    let env = Env::new();
    let good = env.fake_mcp("good", tools(&["g"]));
    let settings = format!(
        "{{\n  \"mcpServers\": {{\n    \"good\": {good},\n    \"wrongtype\": {{\"command\": 5}},\n    \"typo\": {{\"comand\": \"x\"}}\n  }}\n}}\n"
    );
    env.write_home("settings.json", &settings);
    let c = env.start(&["--mcp-config", "nope.json"]);
    let s = c.wait_for("good Ready beside the dropped entries", |s| {
        ready(s, "good")
    });
    let path = env.home.join("settings.json").display().to_string();
    for (name, line) in [("wrongtype", 4), ("typo", 5)] {
        let row = mcp(&s, name).unwrap_or_else(|| panic!("no status row for {name}"));
        assert_eq!(row.status.phase, Phase::Failed, "{name}");
        assert_eq!(row.status.reason, Some(Reason::InvalidSpec), "{name}");
        let message = row.status.message.clone().unwrap_or_default();
        assert!(
            message.starts_with(&format!("{path}:{line}:")),
            "{name}: the message has no file:line:col: {message}"
        );
    }
    let missing = env.ws.join("nope.json");
    let source = s
        .sources
        .iter()
        .find(|src| src.kind == SourceKind::CliMcpConfig)
        .expect("the --mcp-config source is listed");
    assert_eq!(source.path, missing.display().to_string());
    assert_eq!(source.state, SourceState::Invalid);
    wait_until("a WARN line for each drop and for the missing file", || {
        let log = c.log_text();
        let warned = |what: &str| {
            log.lines().any(|l| {
                l.contains("WARN") && l.contains("entry dropped (InvalidSpec)") && l.contains(what)
            })
        };
        warned("server=wrongtype")
            && warned("server=typo")
            && log
                .lines()
                .any(|l| l.contains("WARN") && l.contains(&missing.display().to_string()))
    });
    finish(c, &env);
}

// ---- backoff reset only by the server's own change or a valid save -----------------

/// The status message of `name`, when it is Failed.
fn failed_message(s: &WorkspaceStatus, name: &str) -> Option<String> {
    mcp(s, name)
        .filter(|m| m.status.phase == Phase::Failed)
        .and_then(|m| m.status.message.clone())
}

fn restarts(s: &WorkspaceStatus, name: &str) -> u32 {
    mcp(s, name).map_or(0, |m| m.status.restarts)
}

/// A crash-looping server's backoff ladder (1 s base: restart at once,
/// then 1 s, 2 s, 4 s, …, shown as "restarting in …") is not reset by a
/// save of its file that is rejected as invalid; a valid save retries it
/// from the start of the ladder.
#[test]
fn an_invalid_save_does_not_reset_a_crash_loop_but_a_valid_one_does() {
    let env = Env::new();
    let config = FakeMcpConfig {
        crash_after_listed_ms: Some(300),
        ..tools(&["t"])
    };
    let settings = mcp_servers(&[("flaky", env.fake_mcp("flaky", config))]);
    env.write_home("settings.json", &settings);
    let c = env.start(&["--crash-backoff-ms", "1000"]);
    let s = c.wait_for("flaky waits 2s after its third crash", |s| {
        failed_message(s, "flaky").is_some_and(|m| m.contains("restarting in 2s"))
    });
    let before = restarts(&s, "flaky");

    env.write_home("settings.json", "{ \"mcpServers\": ");
    c.wait_for("the invalid save rejected", |s| {
        condition_is(s, "SourcesValid", ConditionStatus::False)
    });
    let s = c.wait_for("the next crash", |s| {
        restarts(s, "flaky") > before && failed_message(s, "flaky").is_some()
    });
    let message = failed_message(&s, "flaky").unwrap();
    assert!(
        message.contains("restarting in 4s"),
        "the rejected save reset the backoff: {message}"
    );
    let before = restarts(&s, "flaky");

    env.write_home("settings.json", &settings);
    let s = c.wait_for("the crash after the valid save's retry", |s| {
        restarts(s, "flaky") > before && failed_message(s, "flaky").is_some()
    });
    // From the bottom of the ladder: at once (a state too brief to be sure
    // to see), then 1 s; continuing the ladder would say 8 s.
    let message = failed_message(&s, "flaky").unwrap();
    assert!(
        message.contains("restarting now") || message.contains("restarting in 1s"),
        "the valid save did not reset the backoff: {message}"
    );
    finish(c, &env);
}

// ---- no per-server state left behind -----------------------------------------------

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Adding and removing 200 servers (in rounds of 20, each a new name, half
/// of them failing to start so they hold a backoff) leaves no item in the
/// status, no process alive, and no descriptor open in the controller: its
/// per-server state does not grow with servers that are gone.
#[test]
fn adding_and_removing_200_servers_leaves_no_state_behind() {
    const ROUNDS: usize = 10;
    const PER_ROUND: usize = 20;
    let env = Env::new();
    env.write_home("settings.json", "{}");
    let c = env.start(&[]);
    c.wait_for("the cold start settled", |s| {
        s.controller.last_reload.is_some()
    });
    let baseline = open_fds(c.pid());
    for round in 0..ROUNDS {
        let names: Vec<String> = (0..PER_ROUND).map(|i| format!("r{round}-s{i}")).collect();
        let entries: Vec<(&str, serde_json::Value)> = names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let entry = if i % 2 == 0 {
                    env.fake_mcp(name, tools(&["t"]))
                } else {
                    serde_json::json!({ "command": "/nonexistent/steward-no-such-server" })
                };
                (name.as_str(), entry)
            })
            .collect();
        env.write_home("settings.json", &mcp_servers(&entries));
        c.wait_for("the round's servers Ready or Failed", |s| {
            names.iter().enumerate().all(|(i, name)| {
                mcp(s, name).is_some_and(|m| {
                    m.status.phase
                        == if i % 2 == 0 {
                            Phase::Ready
                        } else {
                            Phase::Failed
                        }
                })
            })
        });
        env.write_home("settings.json", "{}");
        let s = c.wait_for("every server of the round removed", |s| s.items.is_empty());
        assert!(s.items.is_empty());
        // A removed server still stopping is listed under `removed`, not
        // `items`: its process goes a moment later.
        let pids = recorded_pids(&env.records());
        wait_until("the round's servers exit", || {
            pids.iter().all(|p| !alive(*p))
        });
        // Handles of the last processes are closed a moment after they are
        // reaped: flat means back to where it started, not at this instant.
        wait_until("the controller's descriptors back to the baseline", || {
            open_fds(c.pid()) <= baseline + 2
        });
    }
    let pids = recorded_pids(&env.records());
    assert_eq!(
        pids.len(),
        ROUNDS * PER_ROUND / 2,
        "one process per started server"
    );
    wait_until("every removed server exits", || {
        pids.iter().all(|p| !alive(*p))
    });
    finish(c, &env);
}

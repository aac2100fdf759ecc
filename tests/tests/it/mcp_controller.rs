//! Envtest: the real `steward run` against fake MCP servers. One test per
//! behaviour of the controller; every wait is a status condition with a
//! deadline.

use std::collections::BTreeSet;

use serde_json::json;
use steward_schema::resource::{ConditionStatus, Phase, Reason, SourceState};
use steward_tests::fake_mcp::{FakeMcpConfig, ListChangedStorm, read_record};
use steward_tests::harness::{
    Env, alive, fake_tools as tools, mcp, mcp_servers, pid_of, ready, recorded_pids, wait_until,
    with_version as edited,
};

#[test]
fn servers_start_and_an_args_edit_restarts_only_that_server() {
    let env = Env::new();
    let a = env.fake_mcp("alpha", tools(&["a1", "a2"]));
    let b = env.fake_mcp("beta", tools(&["b1"]));
    env.user_mcp_servers(&[("alpha", a.clone()), ("beta", b.clone())]);
    let c = env.start(&[]);
    let s = c.wait_for("alpha and beta Ready", |s| {
        ready(s, "alpha") && ready(s, "beta")
    });
    assert_eq!(
        mcp(&s, "alpha").unwrap().status.tools.as_deref(),
        Some(&["a1".to_owned(), "a2".to_owned()][..])
    );
    let (pa, pb) = (pid_of(&s, "alpha").unwrap(), pid_of(&s, "beta").unwrap());

    let a2 = edited(&a, "1");
    env.user_mcp_servers(&[("alpha", a2), ("beta", b)]);
    let s = c.wait_for("alpha restarted and the reload recorded", |s| {
        ready(s, "alpha")
            && pid_of(s, "alpha") != Some(pa)
            && s.controller
                .last_reload
                .as_ref()
                .is_some_and(|r| r.restarted.contains(&"alpha".to_owned()))
    });
    assert_eq!(pid_of(&s, "beta"), Some(pb), "beta must keep its pid");
    assert!(!alive(pa), "the old alpha process is gone");
    assert_eq!(mcp(&s, "alpha").unwrap().metadata.generation, 2);
    let last = s.controller.last_reload.clone().unwrap();
    assert_eq!(last.restarted, vec!["alpha".to_owned()], "{last:?}");
}

#[test]
fn formatting_and_ignored_keys_restart_nothing_and_an_invalid_edit_changes_nothing() {
    let env = Env::new();
    let a = env.fake_mcp("alpha", tools(&["a1"]));
    let b = env.fake_mcp("beta", tools(&["b1"]));
    env.user_mcp_servers(&[("alpha", a.clone()), ("beta", b.clone())]);
    let c = env.start(&[]);
    let s = c.wait_for("both Ready", |s| ready(s, "alpha") && ready(s, "beta"));
    let pids = (pid_of(&s, "alpha"), pid_of(&s, "beta"));

    // Key order, whitespace, comments and an ignored key.
    let reordered = format!(
        "// reformatted\n{{ \"theme\": \"dark\",\n  \"mcpServers\": {{ \"beta\": {}, \"alpha\": {} }} }}",
        serde_json::to_string(&b).unwrap(),
        serde_json::to_string(&a).unwrap()
    );
    env.write_home("settings.json", &reordered);
    // An invalid edit: reported, nothing changes.
    env.write_home("settings.json", "{ \"mcpServers\": { \"alpha\": ");
    let s = c.wait_for("user settings Invalid", |s| {
        s.sources.iter().any(|src| {
            src.path.ends_with("home/settings.json") && src.state == SourceState::Invalid
        })
    });
    assert_eq!((pid_of(&s, "alpha"), pid_of(&s, "beta")), pids);
    let err = s
        .sources
        .iter()
        .find(|src| src.state == SourceState::Invalid)
        .and_then(|src| src.error.clone())
        .unwrap();
    assert!(
        err.contains("settings.json:1:"),
        "error names file and line: {err}"
    );

    // Fixing it with the same content again changes nothing either.
    env.write_home("settings.json", &reordered);
    let s = c.wait_for("user settings Valid again", |s| {
        s.sources
            .iter()
            .all(|src| src.state != SourceState::Invalid)
    });
    assert_eq!((pid_of(&s, "alpha"), pid_of(&s, "beta")), pids);
    for name in ["alpha", "beta"] {
        let starts = read_record(&env.record(name))
            .unwrap()
            .iter()
            .filter(|e| e.event == "start")
            .count();
        assert_eq!(starts, 1, "{name} was started {starts} times");
    }
}

#[test]
fn remove_and_add_servers_including_empty_and_back() {
    let env = Env::new();
    let a = env.fake_mcp("alpha", tools(&["a1"]));
    let c = env.start(&[]);
    // 0 → 1
    env.user_mcp_servers(&[("alpha", a.clone())]);
    let s = c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    let pa = pid_of(&s, "alpha").unwrap();
    // 1 → 0
    env.user_mcp_servers(&[]);
    let s = c.wait_for("alpha gone", |s| mcp(s, "alpha").is_none());
    assert!(
        s.removed.iter().any(|r| r.name == "alpha"),
        "{:?}",
        s.removed
    );
    wait_until("alpha process exits", || !alive(pa));
    // 0 → 1 again: a new process.
    env.user_mcp_servers(&[("alpha", a)]);
    let s = c.wait_for("alpha Ready again", |s| ready(s, "alpha"));
    assert_ne!(pid_of(&s, "alpha"), Some(pa));
    assert!(s.removed.iter().all(|r| r.name != "alpha"));
}

#[test]
fn exclusion_toggle_stops_and_restarts_only_that_server() {
    let env = Env::new();
    let a = env.fake_mcp("alpha", tools(&["a1"]));
    let b = env.fake_mcp("beta", tools(&["b1"]));
    let with = |excluded: &[&str]| {
        serde_json::to_string(&json!({
            "mcp": {"excluded": excluded},
            "mcpServers": {"alpha": a, "beta": b},
        }))
        .unwrap()
    };
    env.write_home("settings.json", &with(&[]));
    let c = env.start(&[]);
    let s = c.wait_for("both Ready", |s| ready(s, "alpha") && ready(s, "beta"));
    let (pa, pb) = (pid_of(&s, "alpha").unwrap(), pid_of(&s, "beta").unwrap());
    env.write_home("settings.json", &with(&["alp*"]));
    let s = c.wait_for("alpha Excluded", |s| {
        mcp(s, "alpha").is_some_and(|m| m.status.reason == Some(Reason::Excluded))
    });
    assert_eq!(mcp(&s, "alpha").unwrap().status.tools, None);
    wait_until("alpha process exits", || !alive(pa));
    assert_eq!(pid_of(&s, "beta"), Some(pb));
    env.write_home("settings.json", &with(&[]));
    let s = c.wait_for("alpha Ready again", |s| ready(s, "alpha"));
    assert_eq!(pid_of(&s, "beta"), Some(pb));
}

#[test]
fn untrusted_workspace_connects_nothing() {
    let env = Env::new();
    let a = env.fake_mcp("alpha", tools(&["a1"]));
    env.write_home(
        "settings.json",
        &serde_json::to_string(&json!({
            "security": {"folderTrust": {"enabled": true}},
            "mcpServers": {"alpha": a},
        }))
        .unwrap(),
    );
    let c = env.start(&[]);
    let s = c.wait_for("alpha Blocked", |s| {
        mcp(s, "alpha").is_some_and(|m| m.status.reason == Some(Reason::UntrustedWorkspace))
    });
    assert!(!s.controller.trusted);
    // Trusting the folder starts it; nothing was spawned before.
    assert!(
        !env.record("alpha").exists(),
        "an untrusted server was spawned"
    );
    env.write_home(
        "trustedFolders.json",
        &serde_json::to_string(&json!({ env.ws.to_string_lossy(): "TRUST_FOLDER" })).unwrap(),
    );
    c.wait_for("alpha Ready once trusted", |s| ready(s, "alpha"));
}

#[test]
fn gated_server_waits_for_approval_and_an_edit_asks_again() {
    let env = Env::new();
    let a = env.fake_mcp("proj", tools(&["p1"]));
    env.write(".mcp.json", &mcp_servers(&[("proj", a.clone())]));
    let c = env.start(&[]);
    c.wait_for("proj PendingApproval", |s| {
        mcp(s, "proj").is_some_and(|m| m.status.reason == Some(Reason::PendingApproval))
    });
    assert!(!env.record("proj").exists(), "a pending server was spawned");

    let out = env.steward(&["approve", "proj"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = c.wait_for("proj Ready after approve", |s| ready(s, "proj"));
    let pid = pid_of(&s, "proj").unwrap();

    // An edit changes the approval hash: stopped, asked again.
    env.write(".mcp.json", &mcp_servers(&[("proj", edited(&a, "2"))]));
    c.wait_for("proj PendingApproval after edit", |s| {
        mcp(s, "proj").is_some_and(|m| m.status.reason == Some(Reason::PendingApproval))
    });
    wait_until("old proj process exits", || !alive(pid));

    // Reject keeps it down, with a reason distinct from failures.
    let out = env.steward(&["reject", "proj"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = c.wait_for("proj Rejected", |s| {
        mcp(s, "proj").is_some_and(|m| m.status.reason == Some(Reason::Rejected))
    });
    assert_eq!(mcp(&s, "proj").unwrap().status.phase, Phase::Blocked);

    // Restoring the approved entry is approved again (record kept by hash? no:
    // the approval record was replaced by the rejection) — an identical re-add
    // keeps the latest decision.
    env.write(".mcp.json", "{}");
    c.wait_for("proj gone", |s| mcp(s, "proj").is_none());
    env.write(".mcp.json", &mcp_servers(&[("proj", edited(&a, "2"))]));
    c.wait_for("proj still Rejected after identical re-add", |s| {
        mcp(s, "proj").is_some_and(|m| m.status.reason == Some(Reason::Rejected))
    });
}

#[test]
fn a_crashed_server_is_restarted_with_backoff() {
    let env = Env::new();
    let a = env.fake_mcp(
        "flaky",
        FakeMcpConfig {
            crash_after_listed_ms: Some(300),
            ..tools(&["f1"])
        },
    );
    env.user_mcp_servers(&[("flaky", a)]);
    let c = env.start(&[]);
    let s = c.wait_for("flaky restarted at least twice", |s| {
        mcp(s, "flaky").is_some_and(|m| m.status.restarts >= 2)
    });
    let m = mcp(&s, "flaky").unwrap();
    assert!(
        matches!(
            m.status.reason,
            None | Some(Reason::Crashed) | Some(Reason::CrashLoopBackOff)
        ),
        "{:?}",
        m.status
    );
    wait_until("a third start of flaky", || {
        read_record(&env.record("flaky"))
            .unwrap()
            .iter()
            .filter(|e| e.event == "start")
            .count()
            >= 3
    });
}

#[test]
fn nothing_outlives_sigterm_of_the_controller() {
    let env = Env::new();
    let servers: Vec<(String, serde_json::Value)> = (0..3)
        .map(|i| {
            let name = format!("s{i}");
            let cfg = FakeMcpConfig {
                ignore_sigterm: i == 0,
                spawn_grandchild: (i == 1)
                    .then_some(steward_tests::fake_mcp::GrandchildMode::Group),
                ..tools(&["t"])
            };
            (name.clone(), env.fake_mcp(&name, cfg))
        })
        .collect();
    let refs: Vec<(&str, serde_json::Value)> = servers
        .iter()
        .map(|(n, v)| (n.as_str(), v.clone()))
        .collect();
    env.user_mcp_servers(&refs);
    let mut c = env.start(&[]);
    c.wait_for("all Ready", |s| (0..3).all(|i| ready(s, &format!("s{i}"))));
    let pids = recorded_pids(&env.records());
    assert!(pids.len() >= 4, "servers + grandchild: {pids:?}");
    let status = c.terminate().unwrap();
    assert!(status.success(), "controller exit: {status:?}");
    for pid in pids {
        assert!(!alive(pid), "pid {pid} outlived the controller");
    }
}

#[test]
fn nothing_outlives_sigkill_of_the_controller() {
    let env = Env::new();
    let a = env.fake_mcp("alpha", tools(&["a1"]));
    env.user_mcp_servers(&[("alpha", a)]);
    let mut c = env.start(&[]);
    c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    let pids = recorded_pids(&env.records());
    c.kill();
    for pid in pids {
        wait_until(&format!("pid {pid} dies with the controller"), || {
            !alive(pid)
        });
    }
}

#[test]
fn a_second_controller_on_the_same_workspace_is_refused() {
    let env = Env::new();
    let c = env.start(&[]);
    let out = env.steward(&["run"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("pid {}", c.pid())), "{err}");
}

#[test]
fn a_burst_of_saves_coalesces() {
    let env = Env::new();
    let a = env.fake_mcp("alpha", tools(&["a1"]));
    let b = env.fake_mcp("beta", tools(&["b1"]));
    env.user_mcp_servers(&[("alpha", a.clone()), ("beta", b.clone())]);
    let c = env.start(&[]);
    c.wait_for("Ready", |s| ready(s, "alpha") && ready(s, "beta"));
    for i in 0..200 {
        env.user_mcp_servers(&[("alpha", edited(&a, &i.to_string())), ("beta", b.clone())]);
    }
    let s = c.wait_for("alpha at the last version", |s| {
        mcp(s, "alpha").is_some_and(|m| {
            m.status.phase == Phase::Ready
                && m.spec
                    .env
                    .as_ref()
                    .and_then(|e| e.get("VERSION"))
                    .map(String::as_str)
                    == Some("199")
                && m.status.observed_hash.as_deref() == Some(m.spec.config_hash.as_str())
        })
    });
    let starts = read_record(&env.record("alpha"))
        .unwrap()
        .iter()
        .filter(|e| e.event == "start")
        .count();
    assert!(starts <= 3, "200 saves caused {} restarts", starts - 1);
    let betas = read_record(&env.record("beta"))
        .unwrap()
        .iter()
        .filter(|e| e.event == "start")
        .count();
    assert_eq!(betas, 1);
    assert!(ready(&s, "beta"));
}

#[test]
fn stop_and_start_persist_across_controller_restarts() {
    let env = Env::new();
    let a = env.fake_mcp("alpha", tools(&["a1"]));
    env.user_mcp_servers(&[("alpha", a)]);
    let mut c = env.start(&[]);
    let s = c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    let pid = pid_of(&s, "alpha").unwrap();
    let out = env.steward(&["stop", "alpha"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    c.wait_for("alpha StoppedByUser", |s| {
        mcp(s, "alpha").is_some_and(|m| m.status.reason == Some(Reason::StoppedByUser))
    });
    wait_until("alpha exits", || !alive(pid));
    c.terminate();
    let c = env.start(&[]);
    c.wait_for("alpha still StoppedByUser after restart", |s| {
        mcp(s, "alpha").is_some_and(|m| m.status.reason == Some(Reason::StoppedByUser))
    });
    let out = env.steward(&["start", "alpha"]);
    assert!(out.status.success());
    c.wait_for("alpha Ready after start", |s| ready(s, "alpha"));
}

#[test]
fn tool_list_changes_show_up_in_status() {
    let env = Env::new();
    let a = env.fake_mcp(
        "alpha",
        FakeMcpConfig {
            list_changed_after_ms: Some(300),
            tools_after_change: Some(vec!["new1".into(), "new2".into()]),
            ..tools(&["old"])
        },
    );
    let mut entry = a;
    entry["excludeTools"] = json!(["new2"]);
    env.user_mcp_servers(&[("alpha", entry)]);
    // Unpinned: pinned, tools added without a configuration change are
    // quarantined (tests/tests/it/pins.rs).
    let c = env.start(&["--pin-tools", "off"]);
    let s = c.wait_for("new tools listed", |s| {
        mcp(s, "alpha").is_some_and(|m| m.status.tools.as_deref() == Some(&["new1".to_owned()][..]))
    });
    let ready_cond = mcp(&s, "alpha")
        .unwrap()
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .cloned()
        .unwrap();
    assert_eq!(ready_cond.status, ConditionStatus::True);
}

/// A storm costs nothing (issue 16): a server announcing
/// `tools/list_changed` 1000 times a second is re-listed at most once every
/// 250 ms, and the list it settles on is the one shown.
#[test]
fn a_list_changed_storm_is_coalesced_and_its_last_list_is_shown() {
    let env = Env::new();
    let record = env.record("alpha");
    let a = env.fake_mcp(
        "alpha",
        FakeMcpConfig {
            list_changed_storm: Some(ListChangedStorm {
                per_second: 1000,
                duration_ms: 2500,
                after_ms: 300,
                tools_at_end: Some(vec!["t1".into(), "t2".into(), "new".into()]),
            }),
            ..tools(&["t1", "t2"])
        },
    );
    env.user_mcp_servers(&[("alpha", a)]);
    // Unpinned: a tool added without a configuration change is quarantined.
    let c = env.start(&["--pin-tools", "off"]);
    let last = ["t1", "t2", "new"].map(str::to_owned);
    c.wait_for("the last list shown", |s| {
        mcp(s, "alpha").is_some_and(|m| m.status.tools.as_deref() == Some(&last[..]))
    });
    let storm = |phase: &str| {
        read_record(&record)
            .unwrap()
            .into_iter()
            .find(|e| e.event == "storm" && e.message["phase"] == phase)
    };
    wait_until("the storm's end recorded", || storm("end").is_some());
    assert_eq!(storm("end").unwrap().message["sent"], 2501);
    let begin = storm("begin").unwrap().t;
    let relists = read_record(&record)
        .unwrap()
        .iter()
        .filter(|e| e.t >= begin && e.event == "recv" && e.method() == Some("tools/list"))
        .count();
    // One every 250 ms over 2.5 s and the trailing one: about 11.
    assert!(
        (1..=50).contains(&relists),
        "{relists} re-lists for 2501 notifications"
    );
    let s = c.status();
    assert!(ready(&s, "alpha"), "the storm changed nothing else");
}

#[test]
fn include_and_exclude_edits_refilter_without_restart() {
    let env = Env::new();
    let a = env.fake_mcp("alpha", tools(&["t1", "t2", "t3"]));
    env.user_mcp_servers(&[("alpha", a.clone())]);
    let c = env.start(&[]);
    let s = c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    let pid = pid_of(&s, "alpha");
    let mut filtered = a;
    filtered["includeTools"] = json!(["t1", "t3"]);
    filtered["excludeTools"] = json!(["t3"]);
    filtered["description"] = json!("now described");
    env.user_mcp_servers(&[("alpha", filtered)]);
    let s = c.wait_for("tools re-filtered", |s| {
        mcp(s, "alpha").is_some_and(|m| m.status.tools.as_deref() == Some(&["t1".to_owned()][..]))
    });
    assert_eq!(pid_of(&s, "alpha"), pid, "a filter edit must not restart");
}

#[test]
fn failed_start_is_reported_and_a_save_retries_it() {
    let env = Env::new();
    env.user_mcp_servers(&[("ghost", json!({"command": "definitely-not-a-command-xyz"}))]);
    let c = env.start(&["--start-backoff-ms", "60000"]);
    let s = c.wait_for("ghost CommandNotFound", |s| {
        mcp(s, "ghost").is_some_and(|m| m.status.reason == Some(Reason::CommandNotFound))
    });
    let m = mcp(&s, "ghost").unwrap();
    assert_eq!(m.status.phase, Phase::Failed);
    assert!(m.status.next_retry_at.is_some());
    assert_eq!(
        m.status.observed_hash, None,
        "a failed start records no hash"
    );
    // The same content saved again retries at once (not after 60 s).
    let a = env.fake_mcp("ghost", tools(&["g"]));
    env.user_mcp_servers(&[("ghost", a)]);
    c.wait_for("ghost Ready after the fix", |s| ready(s, "ghost"));
}

#[test]
fn server_command_edits_require_a_restart() {
    let env = Env::new();
    env.write_home("settings.json", r#"{"mcp": {"serverCommand": "a"}}"#);
    let c = env.start(&[]);
    env.write_home("settings.json", r#"{"mcp": {"serverCommand": "b"}}"#);
    c.wait_for("RestartRequired condition", |s| {
        s.controller
            .conditions
            .iter()
            .any(|c| c.type_ == "RestartRequired" && c.status == ConditionStatus::True)
    });
}

#[test]
fn allow_list_bound_cannot_be_widened_by_settings() {
    let env = Env::new();
    let servers: Vec<(String, serde_json::Value)> = ["a", "b", "c"]
        .iter()
        .map(|n| ((*n).to_owned(), env.fake_mcp(n, tools(&["t"]))))
        .collect();
    let doc = |allowed: &[&str]| {
        let map: serde_json::Map<String, serde_json::Value> = servers.iter().cloned().collect();
        serde_json::to_string(&json!({"mcp": {"allowed": allowed}, "mcpServers": map})).unwrap()
    };
    env.write_home("settings.json", &doc(&["a", "b", "c"]));
    let c = env.start(&["--allowed-mcp-server-names", "a,b"]);
    let s = c.wait_for("a and b Ready, c NotAllowed", |s| {
        ready(s, "a")
            && ready(s, "b")
            && mcp(s, "c").is_some_and(|m| m.status.reason == Some(Reason::NotAllowed))
    });
    let pb = pid_of(&s, "b").unwrap();
    env.write_home("settings.json", &doc(&["a"]));
    c.wait_for("b NotAllowed after narrowing", |s| {
        mcp(s, "b").is_some_and(|m| m.status.reason == Some(Reason::NotAllowed))
    });
    wait_until("b exits", || !alive(pb));
    let names: BTreeSet<u32> = recorded_pids(&env.records()).into_iter().collect();
    assert!(!env.record("c").exists(), "c was spawned: {names:?}");
}

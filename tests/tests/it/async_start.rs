//! Envtest: readiness is observed, not awaited. A reconcile
//! launches a server and returns; its handshake runs in the server's own
//! task. So hung handshakes hold no worker, a removal or an edit during a
//! handshake acts at once, and a gate closes while other servers start.

use serde_json::Value;
use steward_schema::resource::{Phase, Reason};
use steward_tests::fake_mcp::{FakeMcpConfig, read_record};
use steward_tests::harness::{
    Env, alive, fake_tools as tools, mcp, mcp_servers, pid_of, ready, wait_until,
    with_version as edited,
};

fn hanging(name: &str) -> FakeMcpConfig {
    FakeMcpConfig {
        name: name.into(),
        hang_in_initialize: true,
        ..tools(&["t"])
    }
}

/// The pid a fake server recorded at start (before any handshake).
fn started_pid(env: &Env, name: &str) -> Option<u32> {
    read_record(&env.record(name))
        .ok()?
        .into_iter()
        .find(|e| e.event == "start")
        .map(|e| e.pid)
}

#[test]
fn a_server_hung_in_initialize_shows_its_pid_while_starting() {
    let env = Env::new();
    env.user_mcp_servers(&[("slow", env.fake_mcp("slow", hanging("slow")))]);
    let c = env.start(&[]);
    wait_until("the server process started", || {
        started_pid(&env, "slow").is_some()
    });
    let pid = started_pid(&env, "slow").unwrap();
    c.wait_for("Starting with its pid", |s| {
        mcp(s, "slow")
            .is_some_and(|m| m.status.phase == Phase::Starting && m.status.pid == Some(pid))
    });
}

#[test]
fn removing_a_server_hung_in_initialize_kills_it_at_once() {
    let env = Env::new();
    env.user_mcp_servers(&[
        ("slow", env.fake_mcp("slow", hanging("slow"))),
        ("other", env.fake_mcp("other", tools(&["o"]))),
    ]);
    let c = env.start(&[]);
    wait_until("the hung server started", || {
        started_pid(&env, "slow").is_some()
    });
    let pid = started_pid(&env, "slow").unwrap();
    c.wait_for("other Ready", |s| ready(s, "other"));
    env.user_mcp_servers(&[("other", env.fake_mcp("other", tools(&["o"])))]);
    // The default deadline (20 s) is below the 30 s handshake timeout: the
    // process must go because it was removed, not because it timed out.
    wait_until("the hung server's process is gone", || !alive(pid));
    c.wait_for("slow forgotten", |s| mcp(s, "slow").is_none());
}

#[test]
fn an_edit_during_a_handshake_starts_the_new_spec_and_the_old_process_is_gone() {
    let env = Env::new();
    let slow = env.fake_mcp("slow", hanging("slow"));
    env.user_mcp_servers(&[("slow", slow)]);
    let c = env.start(&[]);
    wait_until("the hung server started", || {
        started_pid(&env, "slow").is_some()
    });
    let old = started_pid(&env, "slow").unwrap();
    // The new spec answers at once.
    let mut fixed = tools(&["t"]);
    fixed.name = "slow".into();
    env.user_mcp_servers(&[("slow", env.fake_mcp("slow", fixed))]);
    let s = c.wait_for("slow Ready with the new spec", |s| ready(s, "slow"));
    assert_ne!(pid_of(&s, "slow"), Some(old));
    assert!(!alive(old), "the hung process was killed, not left beside");
}

#[test]
fn an_exclusion_applies_while_eight_servers_hang_in_initialize() {
    let env = Env::new();
    let mut servers: Vec<(String, Value)> = (0..8)
        .map(|i| {
            let name = format!("hung{i}");
            let entry = env.fake_mcp(&name, hanging(&name));
            (name, entry)
        })
        .collect();
    servers.push(("healthy".into(), env.fake_mcp("healthy", tools(&["h"]))));
    let entries: Vec<(&str, Value)> = servers
        .iter()
        .map(|(n, v)| (n.as_str(), v.clone()))
        .collect();
    env.user_mcp_servers(&entries);
    // Four workers, eight hung handshakes: before, nothing else ran for 30 s.
    let c = env.start(&["--workers", "4"]);
    let s = c.wait_for("healthy Ready beside eight hung servers", |s| {
        ready(s, "healthy")
    });
    let pid = pid_of(&s, "healthy").unwrap();
    let system = env.root.path().join("etc/settings.json");
    steward_tests::harness::write_atomic(&system, r#"{"mcp": {"excluded": ["healthy"]}}"#);
    c.wait_for("healthy excluded", |s| {
        mcp(s, "healthy").is_some_and(|m| m.status.reason == Some(Reason::Excluded))
    });
    wait_until("the excluded server's process is gone", || !alive(pid));
    let s = c.status();
    for i in 0..8 {
        assert_eq!(
            mcp(&s, &format!("hung{i}")).unwrap().status.phase,
            Phase::Starting,
            "the hung servers are still starting"
        );
    }
}

#[test]
fn an_args_edit_restarts_one_server_without_waiting_for_hung_ones() {
    let env = Env::new();
    let healthy = env.fake_mcp("healthy", tools(&["h"]));
    let mut servers: Vec<(String, Value)> = (0..6)
        .map(|i| {
            let name = format!("hung{i}");
            let entry = env.fake_mcp(&name, hanging(&name));
            (name, entry)
        })
        .collect();
    servers.push(("healthy".into(), healthy.clone()));
    let entries: Vec<(&str, Value)> = servers
        .iter()
        .map(|(n, v)| (n.as_str(), v.clone()))
        .collect();
    env.user_mcp_servers(&entries);
    let c = env.start(&["--workers", "2"]);
    let s = c.wait_for("healthy Ready", |s| ready(s, "healthy"));
    let first = pid_of(&s, "healthy").unwrap();
    servers.last_mut().unwrap().1 = edited(&healthy, "2");
    let entries: Vec<(&str, Value)> = servers
        .iter()
        .map(|(n, v)| (n.as_str(), v.clone()))
        .collect();
    env.write_home("settings.json", &mcp_servers(&entries));
    c.wait_for("healthy restarted", |s| {
        ready(s, "healthy") && pid_of(s, "healthy").is_some_and(|p| p != first)
    });
}

//! Envtest: a tool call is never sent twice. A call in flight when its
//! server is restarted (`steward restart`), crashes or is SIGKILLed reaches
//! the servers exactly once: a graceful restart lets it finish on the old
//! process; a process that dies under it answers it with a tool error that
//! says the tool may or may not have run — it is never sent to the next
//! process.

use std::sync::Arc;

use serde_json::json;
use steward_tests::fake_mcp::read_record;
use steward_tests::harness::{
    Env, alive, fake_tools as tools, pid_of, ready, signal, wait_until_async,
};

use crate::gateway::{Agent, attach, call, runtime, text};

/// The `tools/call` requests the servers of `name` received whose
/// arguments carry `marker`, and the pids that received them.
fn calls_seen(env: &Env, name: &str, marker: &str) -> Vec<u32> {
    read_record(&env.record(name))
        .unwrap()
        .iter()
        .filter(|e| e.event == "recv" && e.method() == Some("tools/call"))
        .filter(|e| {
            e.message
                .pointer(&format!("/params/arguments/{marker}"))
                .is_some()
        })
        .map(|e| e.pid)
        .collect()
}

/// Starts `alpha`, calls `alpha__t1` with `arguments` (which carry
/// `marker`), runs `meanwhile(old pid)` once the server received the call,
/// and returns the call's result, the old pid and the controller.
fn call_across(
    env: &Env,
    arguments: serde_json::Value,
    marker: &str,
    meanwhile: impl FnOnce(u32),
) -> (
    rmcp::model::CallToolResult,
    u32,
    steward_tests::harness::Controller,
) {
    let a = env.fake_mcp("alpha", tools(&["t1"]));
    env.user_mcp_servers(&[("alpha", a)]);
    let c = env.start(&[]);
    let s = c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    let old = pid_of(&s, "alpha").unwrap();
    let result = runtime().block_on(async {
        let client = Arc::new(attach(env, Agent::default()).await);
        let slow = {
            let client = client.clone();
            tokio::spawn(async move { call(&client, "alpha__t1", arguments).await })
        };
        wait_until_async("the call reached the server", async || {
            !calls_seen(env, "alpha", marker).is_empty()
        })
        .await;
        tokio::task::block_in_place(|| meanwhile(old));
        slow.await.unwrap()
    });
    (result, old, c)
}

#[test]
fn a_call_in_flight_across_steward_restart_finishes_on_the_old_process_and_is_sent_once() {
    let env = Env::new();
    let restart = std::cell::RefCell::new(None);
    let (result, old, c) = call_across(
        &env,
        json!({"sleepMs": 3000, "reportPid": true}),
        "sleepMs",
        |_| *restart.borrow_mut() = Some(env.spawn(&["restart", "alpha"])),
    );
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    assert_eq!(
        result.structured_content,
        Some(json!({"pid": old})),
        "the call finished on the process that received it"
    );
    let out = restart.into_inner().unwrap().wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "steward restart: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = c.wait_for("alpha restarted", |s| {
        ready(s, "alpha") && pid_of(s, "alpha").is_some_and(|p| p != old)
    });
    assert!(!alive(old), "the old process stopped after its call");
    assert_eq!(calls_seen(&env, "alpha", "sleepMs"), [old], "sent once");
    assert_eq!(s.items.len(), 1);
}

#[test]
fn a_call_in_flight_when_its_server_crashes_is_answered_once_with_an_error() {
    let env = Env::new();
    let (result, old, c) = call_across(&env, json!({"exitMs": 300}), "exitMs", |_| {});
    assert_eq!(result.is_error, Some(true), "{}", text(&result));
    assert!(
        text(&result).contains("may or may not have run"),
        "{}",
        text(&result)
    );
    // The crash restarts the server; the call never reaches the new one.
    c.wait_for("alpha back", |s| {
        ready(s, "alpha") && pid_of(s, "alpha").is_some_and(|p| p != old)
    });
    assert_eq!(calls_seen(&env, "alpha", "exitMs"), [old], "sent once");
}

#[test]
fn a_call_in_flight_when_its_server_is_sigkilled_is_answered_once_with_an_error() {
    let env = Env::new();
    let (result, old, c) = call_across(&env, json!({"sleepMs": 3000}), "sleepMs", |old| {
        assert!(signal(old as i32, libc::SIGKILL));
    });
    assert_eq!(result.is_error, Some(true), "{}", text(&result));
    assert!(
        text(&result).contains("may or may not have run"),
        "{}",
        text(&result)
    );
    c.wait_for("alpha back", |s| {
        ready(s, "alpha") && pid_of(s, "alpha").is_some_and(|p| p != old)
    });
    assert_eq!(calls_seen(&env, "alpha", "sleepMs"), [old], "sent once");
}

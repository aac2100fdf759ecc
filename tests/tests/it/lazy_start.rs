//! Envtest: lazy start and idle stop (`--start lazy`, `--idle-stop`). A
//! server whose catalog is cached is listed without running (phase `Idle`,
//! `NotStarted`) until a call needs it; a server no call used for the idle
//! time is stopped (`Idle`, `IdleStopped`), its tools still listed, and the
//! next call starts it again. Whether a fake server's process started shows
//! in its record file; the agent is the PyPI SDK client through
//! `steward mcp`. What lazy start saves is measured by `steward-bench --only
//! lazy`.

use serde_json::json;
use steward_schema::resource::{CatalogSource, Phase, Reason, WorkspaceStatus};
use steward_tests::fake_mcp::read_record;
use steward_tests::harness::{Env, fake_tools, mcp, wait_until, with_version};

use crate::catalog_cache::{fake, fill_cache, overlay, settings, sorted, status_now};
use crate::real_clients::{PyClient, steward_mcp_argv, text_of};

/// How many processes of the fake `name` started (its record's `start`s).
fn starts(env: &Env, name: &str) -> usize {
    read_record(&env.record(name))
        .unwrap_or_default()
        .iter()
        .filter(|e| e.event == "start")
        .count()
}

fn forget_starts(env: &Env, names: &[&str]) {
    for name in names {
        let _ = std::fs::remove_file(env.record(name));
    }
}

/// `(phase, reason)` of McpServer `name`.
fn phase(s: &WorkspaceStatus, name: &str) -> (Phase, Option<Reason>) {
    let m = mcp(s, name).unwrap_or_else(|| panic!("no McpServer {name}"));
    (m.status.phase, m.status.reason)
}

fn idle(s: &WorkspaceStatus, name: &str, reason: Reason) -> bool {
    mcp(s, name).is_some_and(|m| {
        m.status.phase == Phase::Idle && m.status.reason == Some(reason) && m.status.pid.is_none()
    })
}

/// Poll the status of whichever controller serves the workspace until
/// `pred` holds.
fn wait_status(env: &Env, what: &str, pred: impl Fn(&WorkspaceStatus) -> bool) -> WorkspaceStatus {
    wait_until(what, || pred(&status_now(env)));
    status_now(env)
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim()
            .starts_with('Z')
    })
}

#[test]
fn lazy_start_spawns_nothing_until_the_first_call_and_lists_from_the_cache() {
    let env = Env::new();
    let servers = [
        ("a", fake(&env, "a", &["ta", "ta2"])),
        ("b", fake(&env, "b", &["tb"])),
    ];
    settings(&env, &servers, &[]);
    fill_cache(&env, &["a", "b"]);
    forget_starts(&env, &["a", "b"]);

    // `steward mcp --start lazy` becomes the controller, as an agent runs it.
    let mut argv = steward_mcp_argv(&env);
    argv.extend(["--start".to_owned(), "lazy".to_owned()]);
    let mut client = PyClient::stdio(&env, &argv);
    assert_eq!(
        sorted(client.tool_names()),
        ["a__ta", "a__ta2", "b__tb"],
        "listed before anything started"
    );
    let s = wait_status(&env, "both Idle, the start settled", |s| {
        idle(s, "a", Reason::NotStarted)
            && idle(s, "b", Reason::NotStarted)
            && s.controller.last_reload.is_some()
    });
    for name in ["a", "b"] {
        let m = mcp(&s, name).unwrap();
        assert_eq!(
            m.status.catalog.map(|c| c.source),
            Some(CatalogSource::Cached)
        );
        assert_eq!(starts(&env, name), 0, "{name} started before a call");
    }
    assert_eq!(
        mcp(&s, "a").unwrap().status.tools.as_deref(),
        Some(&["ta".to_owned(), "ta2".to_owned()][..])
    );
    // An idle server is settled, not failed.
    let reload = s.controller.last_reload.clone().expect("the start settled");
    assert!(reload.failed.is_empty(), "{reload:?}");
    let table = env.steward(&["status"]);
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains("Idle") && table.contains("NotStarted"),
        "{table}"
    );
    let describe = env.steward(&["describe", "a"]);
    let describe = String::from_utf8_lossy(&describe.stdout);
    assert!(
        describe.contains("Idle") && describe.contains("first call starts it"),
        "{describe}"
    );

    // The first call starts a (only a), waits for it and succeeds.
    let (result, _) = client.call("a__ta", json!({"x": 1}));
    assert_ne!(result["isError"], json!(true), "{result}");
    assert!(text_of(&result).contains("\"x\":1"), "{result}");
    assert_eq!(starts(&env, "a"), 1);
    let s = status_now(&env);
    assert_eq!(phase(&s, "a"), (Phase::Ready, None));
    assert_eq!(phase(&s, "b"), (Phase::Idle, Some(Reason::NotStarted)));
    assert_eq!(starts(&env, "b"), 0);
    // Nothing changed for the agent.
    assert_eq!(sorted(client.tool_names()), ["a__ta", "a__ta2", "b__tb"]);
    let notified: Vec<String> = client
        .notifications()
        .into_iter()
        .filter(|n| n.ends_with("list_changed"))
        .collect();
    assert!(notified.is_empty(), "{notified:?}");
}

#[test]
fn a_server_without_a_cached_catalog_starts_at_once_under_lazy() {
    let env = Env::new();
    settings(&env, &[("a", fake(&env, "a", &["ta"]))], &[]);
    let c = env.start(&["--start", "lazy"]);
    c.wait_for("a Ready (it must run once to be known)", |s| {
        phase(s, "a") == (Phase::Ready, None)
    });
    assert_eq!(starts(&env, "a"), 1);
}

#[test]
fn idle_stop_stops_an_unused_server_keeps_its_tools_listed_and_the_next_call_wakes_it() {
    let env = Env::new();
    let (entry_a, entry_b) = (fake(&env, "a", &["ta"]), fake(&env, "b", &["tb"]));
    settings(&env, &[("a", entry_a.clone()), ("b", entry_b.clone())], &[]);
    let c = env.start(&["--idle-stop", "1s"]);
    // Its pid from its record: a Ready that lasts a second may fall
    // between two looks at the status on a loaded machine.
    wait_until("a started", || starts(&env, "a") == 1);
    let pid = read_record(&env.record("a"))
        .unwrap_or_default()
        .iter()
        .find(|e| e.event == "start")
        .map(|e| e.pid)
        .expect("a started");
    let s = c.wait_for("both IdleStopped", |s| {
        idle(s, "a", Reason::IdleStopped) && idle(s, "b", Reason::IdleStopped)
    });
    let a = mcp(&s, "a").unwrap();
    assert_eq!(
        a.status.catalog.map(|c| c.source),
        Some(CatalogSource::Cached)
    );
    assert!(
        a.status
            .message
            .as_deref()
            .unwrap_or("")
            .contains("without a call"),
        "{:?}",
        a.status.message
    );
    assert!(!alive(pid), "a's process {pid} still runs");
    let events = env.steward(&["events"]);
    let events = String::from_utf8_lossy(&events.stdout);
    assert!(events.contains("IdleStopped"), "{events}");

    let mut client = PyClient::stdio(&env, &steward_mcp_argv(&env));
    assert_eq!(sorted(client.tool_names()), ["a__ta", "b__tb"]);
    let (result, _) = client.call("a__ta", json!({}));
    assert_ne!(result["isError"], json!(true), "{result}");
    assert_eq!(starts(&env, "a"), 2, "woken by the call");
    let s = status_now(&env);
    assert_eq!(phase(&s, "a").0, Phase::Ready);
    assert_eq!(phase(&s, "b"), (Phase::Idle, Some(Reason::IdleStopped)));
    assert_eq!(starts(&env, "b"), 1);
    // Unused again: stopped again, still listed.
    c.wait_for("a IdleStopped again", |s| idle(s, "a", Reason::IdleStopped));
    assert_eq!(sorted(client.tool_names()), ["a__ta", "b__tb"]);

    // An edit of the idle b updates its spec without starting it.
    let old = mcp(&status_now(&env), "b")
        .unwrap()
        .spec
        .config_hash
        .clone();
    settings(
        &env,
        &[("a", entry_a), ("b", with_version(&entry_b, "2"))],
        &[],
    );
    c.wait_for("b IdleStopped under its new configuration", |s| {
        idle(s, "b", Reason::IdleStopped) && mcp(s, "b").is_some_and(|m| m.spec.config_hash != old)
    });
    assert_eq!(starts(&env, "b"), 1, "the edit started b");
    assert_eq!(sorted(client.tool_names()), ["a__ta", "b__tb"]);
}

#[test]
fn an_excluded_idle_server_is_blocked_and_never_listed_or_started() {
    let env = Env::new();
    let servers = [
        ("a", fake(&env, "a", &["ta"])),
        ("b", fake(&env, "b", &["tb"])),
    ];
    settings(&env, &servers, &[]);
    fill_cache(&env, &["a", "b"]);
    forget_starts(&env, &["a", "b"]);
    let c = env.start(&["--start", "lazy"]);
    c.wait_for("both Idle", |s| {
        idle(s, "a", Reason::NotStarted) && idle(s, "b", Reason::NotStarted)
    });
    let mut client = PyClient::stdio(&env, &steward_mcp_argv(&env));
    assert_eq!(sorted(client.tool_names()), ["a__ta", "b__tb"]);

    settings(&env, &servers, &["b"]);
    c.wait_for("b Blocked", |s| {
        phase(s, "b") == (Phase::Blocked, Some(Reason::Excluded))
    });
    client.wait_notification("notifications/tools/list_changed", 1);
    assert_eq!(client.tool_names(), ["a__ta"]);
    let (result, _) = client.call("b__tb", json!({}));
    assert_eq!(result["isError"], json!(true), "{result}");
    assert!(text_of(&result).contains("excluded"), "{result}");
    assert_eq!(starts(&env, "b"), 0);
    assert_eq!(
        phase(&status_now(&env), "a"),
        (Phase::Idle, Some(Reason::NotStarted))
    );
}

/// A config edit of an idle server updates its spec without starting it:
/// until a call needs it, the catalog of the configuration it last ran stays
/// listed (its status says so); that call starts it under the new
/// configuration, and the agent hears of what the new one offers.
#[test]
fn a_config_edit_of_an_idle_server_updates_its_spec_without_starting_it() {
    let env = Env::new();
    let entry = fake(&env, "a", &["ta"]);
    settings(&env, &[("a", entry.clone())], &[]);
    fill_cache(&env, &["a"]);
    forget_starts(&env, &["a"]);
    let mut argv = steward_mcp_argv(&env);
    argv.extend(["--start".to_owned(), "lazy".to_owned()]);
    let mut client = PyClient::stdio(&env, &argv);
    assert_eq!(client.tool_names(), ["a__ta"]);
    let s = wait_status(&env, "a Idle", |s| {
        idle(s, "a", Reason::NotStarted) && s.controller.last_reload.is_some()
    });
    let old = mcp(&s, "a").unwrap().spec.config_hash.clone();

    // The edit; what the new configuration offers (a second tool) is
    // unknown until it runs.
    let tools = serde_json::to_value(fake_tools(&["ta", "tb"])).unwrap();
    overlay(&env, "a", json!({"tools": tools["tools"]}));
    settings(&env, &[("a", with_version(&entry, "2"))], &[]);
    let s = wait_status(&env, "a Idle under the new configuration", |s| {
        idle(s, "a", Reason::NotStarted) && mcp(s, "a").is_some_and(|m| m.spec.config_hash != old)
    });
    let a = mcp(&s, "a").unwrap();
    assert_eq!(
        a.status.catalog.as_ref().map(|c| c.source),
        Some(CatalogSource::Cached)
    );
    let message = a.status.message.clone().unwrap_or_default();
    assert!(message.contains("before the last edit"), "{message}");
    assert_eq!(starts(&env, "a"), 0, "the edit started it");
    assert_eq!(client.tool_names(), ["a__ta"]);

    // The first call starts it under the new configuration.
    let (result, _) = client.call("a__ta", json!({"x": 1}));
    assert_ne!(result["isError"], json!(true), "{result}");
    assert_eq!(starts(&env, "a"), 1);
    client.wait_notification("notifications/tools/list_changed", 1);
    assert_eq!(sorted(client.tool_names()), ["a__ta", "a__tb"]);
    let s = status_now(&env);
    let a = mcp(&s, "a").unwrap();
    assert_eq!((a.status.phase, a.status.reason), (Phase::Ready, None));
    assert_ne!(a.spec.config_hash, old);
    assert_eq!(
        a.status.catalog.map(|c| c.source),
        Some(CatalogSource::Live)
    );
    // The edit itself never withdrew the listed catalog: the agent heard of
    // one change, the new configuration's.
    let told = client.notifications();
    let told = told
        .iter()
        .filter(|m| *m == "notifications/tools/list_changed");
    assert_eq!(told.count(), 1);
}

#[test]
fn a_prompt_get_wakes_a_lazy_server_too() {
    let env = Env::new();
    let entry = env.fake_mcp(
        "a",
        steward_tests::fake_mcp::FakeMcpConfig {
            prompts: vec!["greet".to_owned()],
            ..steward_tests::harness::fake_tools(&["ta"])
        },
    );
    settings(&env, &[("a", entry)], &[]);
    fill_cache(&env, &["a"]);
    forget_starts(&env, &["a"]);
    let c = env.start(&["--start", "lazy"]);
    c.wait_for("a Idle", |s| idle(s, "a", Reason::NotStarted));
    let mut client = PyClient::stdio(&env, &steward_mcp_argv(&env));
    let prompts = client.list("list_prompts");
    assert!(
        prompts.iter().any(|p| p["name"] == "a__greet"),
        "{prompts:?}"
    );
    assert_eq!(starts(&env, "a"), 0);
    let got = client.run(json!({"op": "get_prompt", "name": "a__greet"}));
    assert!(got.get("messages").is_some(), "{got}");
    assert_eq!(starts(&env, "a"), 1);
    c.wait_for("a Ready", |s| phase(s, "a") == (Phase::Ready, None));
}

//! Envtest: an agent's session outlives the controller. A PyPI-SDK client
//! runs `steward mcp` attached to a `steward run`; the controller is
//! restarted (SIGTERM, as an upgrade does) or killed (SIGKILL) and the same
//! client session goes on: a call in flight during a graceful stop is
//! answered, calls after the restart are served, the client never sees its
//! connection close, and after a kill its call in flight is answered with
//! an error at once and it hears `list_changed` when the lists differ. Over HTTP the next controller accepts the session id.

use serde_json::json;
use steward_tests::fake_mcp::read_record;
use steward_tests::harness::{Env, fake_tools, ready, wait_until};

use crate::catalog_cache::status_now;
use crate::real_clients::{ModernClient, PyClient, steward_mcp_argv, text_of};

/// Whether `name`'s fake received a `tools/call`.
fn called(env: &Env, name: &str) -> bool {
    read_record(&env.record(name))
        .unwrap_or_default()
        .iter()
        .any(|e| e.event == "recv" && e.method() == Some("tools/call"))
}

#[test]
fn a_stdio_session_goes_on_across_a_graceful_restart_with_its_call_in_flight_answered() {
    let env = Env::new();
    env.user_mcp_servers(&[("a", env.fake_mcp("a", fake_tools(&["t"])))]);
    let c = env.start(&[]);
    c.wait_for("a Ready", |s| ready(s, "a"));
    let mut client = PyClient::stdio(&env, &steward_mcp_argv(&env));
    assert_eq!(client.tool_names(), ["a__t"]);

    // SIGTERM while a call is in flight; the next controller starts at once.
    let (result, next) = std::thread::scope(|scope| {
        let restart = scope.spawn(|| {
            let mut c = c;
            wait_until("the call reached the server", || called(&env, "a"));
            let status = c.terminate().expect("the controller exits");
            assert!(status.success(), "{status:?}\n{}", c.log_text());
            let log = c.log_text();
            (env.start(&[]), log)
        });
        let (result, _) = client.call("a__t", json!({"sleepMs": 1500}));
        (result, restart.join().unwrap())
    });
    assert_eq!(result["isError"], json!(false), "{result}");
    let (c2, old_log) = next;
    assert!(
        old_log.contains("handing the agents' sessions back"),
        "the stopping controller handed the session back:\n{old_log}"
    );
    c2.wait_for("a Ready again", |s| ready(s, "a"));

    // The same session, served by the next controller without a second
    // handshake.
    let (result, _) = client.call("a__t", json!({}));
    assert_eq!(result["isError"], json!(false), "{result}");
    assert_eq!(client.tool_names(), ["a__t"]);
    let log = c2.log_text();
    assert!(
        log.contains("an agent's session resumed from the last controller"),
        "{log}"
    );
    let stderr = client.close();
    assert!(!stderr.contains("Connection closed"), "{stderr}");
}

#[test]
fn a_stdio_session_goes_on_after_the_controller_is_killed_and_hears_of_the_change() {
    let env = Env::new();
    env.user_mcp_servers(&[("a", env.fake_mcp("a", fake_tools(&["t"])))]);
    let mut c = env.start(&[]);
    c.wait_for("a Ready", |s| ready(s, "a"));
    let mut client = PyClient::stdio(&env, &steward_mcp_argv(&env));
    assert_eq!(client.tool_names(), ["a__t"]);

    // Killed while a call is in flight: `steward mcp` answers it (the
    // controller said it was serving it) instead of leaving the client
    // waiting until its timeout; the server's sleep outlasts the client's
    // deadline, so nobody else could have answered.
    let result = std::thread::scope(|scope| {
        let killer = scope.spawn(|| {
            wait_until("the call reached the server", || called(&env, "a"));
            c.kill();
        });
        let (result, _) = client.call("a__t", json!({"sleepMs": 120_000}));
        killer.join().unwrap();
        result
    });
    assert_eq!(result["isError"], json!(true), "{result}");
    assert!(
        text_of(&result).contains("controller was killed while serving this request"),
        "{result}"
    );

    // While no controller runs, a server is added.
    env.user_mcp_servers(&[
        ("a", env.fake_mcp("a", fake_tools(&["t"]))),
        ("b", env.fake_mcp("b", fake_tools(&["u"]))),
    ]);
    let c2 = env.start(&[]);
    c2.wait_for("a and b Ready", |s| ready(s, "a") && ready(s, "b"));

    // The client lists what it was told changed, and its calls are served.
    client.wait_notification("notifications/tools/list_changed", 1);
    assert_eq!(client.tool_names(), ["a__t", "b__u"]);
    let (result, _) = client.call("b__u", json!({}));
    assert_eq!(result["isError"], json!(false), "{result}");
    let stderr = client.close();
    assert!(!stderr.contains("Connection closed"), "{stderr}");
}

/// A 2026-07-28 client hears of list changes on its `subscriptions/listen`
/// request only: the next controller goes on serving that request. After a
/// graceful stop the client hears of an edit made once the next controller
/// runs; after a kill, of an edit made while none ran.
#[test]
fn a_2026_07_28_clients_listen_request_goes_on_under_the_next_controller() {
    for kill in [false, true] {
        let env = Env::new();
        // Slow to start: the next controller lists it from the catalog
        // cache while the session resumes.
        let slow = steward_tests::fake_mcp::FakeMcpConfig {
            initialize_delay_ms: 500,
            ..fake_tools(&["t"])
        };
        let a = env.fake_mcp("a", slow);
        env.user_mcp_servers(&[("a", a.clone())]);
        let mut c = env.start(&[]);
        c.wait_for("a Ready", |s| ready(s, "a"));
        let client = ModernClient::spawn(&env, "a__t", &json!({}));
        assert_eq!(client.next("first list")["version"], "2026-07-28");
        client.next("call");
        assert_eq!(client.next("listen")["listening"], true);

        let edit = || {
            env.user_mcp_servers(&[
                ("a", a.clone()),
                ("b", env.fake_mcp("b", fake_tools(&["u"]))),
            ]);
        };
        if kill {
            c.kill();
            edit();
        } else {
            assert!(c.terminate().expect("exit").success(), "{}", c.log_text());
        }
        let c2 = env.start(&[]);
        c2.wait_for("a Ready again", |s| ready(s, "a"));
        wait_until("the session resumed", || {
            c2.log_text()
                .contains("an agent's session resumed from the last controller")
        });
        if !kill {
            edit();
        }
        let changed = client.next("the change heard on the listen request");
        assert_eq!(
            changed["changed"],
            json!(["a__t", "b__u"]),
            "kill: {kill}\n{}",
            c2.log_text()
        );
        // The edit's event; one more is tolerated: once (of 60 runs) the
        // next controller also told the resumed client of a change while
        // it moved that left the tool names as they were.
        let events = changed["events"].as_u64().unwrap();
        assert!(
            (1..=2).contains(&events),
            "kill: {kill}, {events} events\n{}",
            c2.log_text()
        );
        let (ok, stderr) = client.finish();
        assert!(ok, "kill: {kill}\n{stderr}");
    }
}

#[test]
fn an_http_session_id_is_accepted_by_the_next_controller() {
    let env = Env::new();
    env.user_mcp_servers(&[("a", env.fake_mcp("a", fake_tools(&["t"])))]);
    // A fixed port, so that the next controller is at the same URL.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let c = env.start(&["--mcp-listen", &listen]);
    c.wait_for("a Ready", |s| ready(s, "a"));
    let url = format!("http://{listen}/mcp");
    let mut client = PyClient::http(&env, &url, &[]);
    let (result, _) = client.call("a__t", json!({}));
    assert_eq!(result["isError"], json!(false), "{result}");

    let mut c = c;
    assert!(c.terminate().expect("exit").success());
    let sessions = std::fs::read_to_string(env.paths().http_sessions_file()).unwrap();
    assert!(sessions.contains("initialize"), "{sessions}");
    let c2 = env.start(&["--mcp-listen", &listen]);
    c2.wait_for("a Ready again", |s| ready(s, "a"));

    let (result, _) = client.call("a__t", json!({}));
    assert_eq!(result["isError"], json!(false), "{result}");
    // Logged as the request is served: it may land just after the answer.
    steward_tests::harness::wait_until("the resumed session is logged", || {
        c2.log_text()
            .contains("an HTTP session resumed from the last controller")
    });
    let stderr = client.close();
    assert!(!stderr.contains("404"), "{stderr}");
}

#[test]
fn when_no_controller_comes_back_steward_mcp_becomes_it_and_the_session_goes_on() {
    let env = Env::new();
    env.user_mcp_servers(&[("a", env.fake_mcp("a", fake_tools(&["t"])))]);
    let mut c = env.start(&[]);
    c.wait_for("a Ready", |s| ready(s, "a"));
    let mut client = PyClient::stdio(&env, &steward_mcp_argv(&env));
    let (result, _) = client.call("a__t", json!({}));
    assert_eq!(result["isError"], json!(false), "{result}");
    let old = u64::from(c.pid());
    assert!(c.terminate().expect("exit").success());

    // The call waits while `steward mcp` takes over and starts the server.
    let (result, _) = client.call("a__t", json!({}));
    assert_eq!(result["isError"], json!(false), "{result}");
    let pid = status_now(&env).controller.pid;
    assert!(
        pid.is_some_and(|pid| u64::from(pid) != old),
        "{pid:?}\n{}",
        client.stderr_text()
    );
    let stderr = client.close();
    assert!(!stderr.contains("Connection closed"), "{stderr}");
}

//! Envtest, more language-server behaviour under the real controller with the
//! fake language server: tcp and unix-socket transports (started by Steward,
//! and an external daemon Steward only connects to), stopping servers that
//! ignore `shutdown`, server→client requests with unusual ids, `.lsp.json`
//! appearing and disappearing, formatting-only saves, document tracking
//! across restarts (edit, crash), removals and failures, rapid consecutive
//! saves, `lastReload` and the `ReloadFailed` condition, and SIGTERM during a
//! slow `initialize`.
//!
//! Every test ends by stopping the controller (exit 0) and waiting until no
//! fake server it started is alive.

use std::cell::Cell;
use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use steward_schema::resource::{ConditionStatus, Phase, Reason, SourceState, WorkspaceStatus};
use steward_tests::fake_lsp::{
    CONFIG_ENV, Config, Event, IdStyle, Record, RegistrationStorm, Transport, read_records,
};
use steward_tests::harness::{
    Controller, DEADLINE, Env, alive, bin, eventually, lsp, lsp_json, lsp_pid as pid, lsp_ready,
    signal, wait_until,
};

// ---- helpers ----

fn phase(s: &WorkspaceStatus, name: &str) -> Option<Phase> {
    lsp(s, name).map(|l| l.status.phase)
}

/// `steward lsp hover FILE:1:1` → the hover text.
fn hover(env: &Env, rel: &str) -> String {
    let loc = format!("{}:1:1", env.ws.join(rel).display());
    let h = env.lsp_cli(&["hover", &loc]);
    h["contents"]["value"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn records(env: &Env, name: &str) -> Vec<Record> {
    read_records(&env.record(name))
}

/// Pids of every process that recorded a start for `name`.
fn starts(env: &Env, name: &str) -> Vec<u32> {
    records(env, name)
        .iter()
        .filter(|r| r.event == Event::Start)
        .map(|r| r.pid)
        .collect()
}

/// Messages process `pid` of `name` received with `method`.
fn received(env: &Env, name: &str, pid: u32, method: &str) -> Vec<Value> {
    records(env, name)
        .into_iter()
        .filter(|r| r.pid == pid && r.event == Event::Recv && r.message["method"] == json!(method))
        .map(|r| r.message)
        .collect()
}

/// URIs process `pid` of `name` got `didOpen` for, in order.
fn opened(env: &Env, name: &str, pid: u32) -> Vec<String> {
    received(env, name, pid, "textDocument/didOpen")
        .iter()
        .map(|m| {
            m["params"]["textDocument"]["uri"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

fn uri(env: &Env, rel: &str) -> String {
    format!("file://{}", env.ws.join(rel).display())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Every fake server process recorded under the test's records directory.
fn all_recorded_pids(env: &Env) -> BTreeSet<u32> {
    let mut pids = BTreeSet::new();
    for entry in std::fs::read_dir(env.records())
        .into_iter()
        .flatten()
        .flatten()
    {
        for r in read_records(&entry.path()) {
            if r.event == Event::Start {
                pids.insert(r.pid);
            }
        }
    }
    pids
}

/// SIGTERM the controller (exit 0), then wait until every fake server it
/// started is gone (`keep`: processes the test started itself).
fn finish(mut c: Controller, env: &Env, keep: &[u32]) {
    let status = c.terminate().expect("the controller was running");
    assert!(
        status.success(),
        "steward run exited with {status}\n{}",
        c.log_text()
    );
    no_fake_left(env, keep);
}

/// Wait until no recorded fake server (but those in `keep`) is alive.
fn no_fake_left(env: &Env, keep: &[u32]) {
    let pids: Vec<u32> = all_recorded_pids(env)
        .into_iter()
        .filter(|p| !keep.contains(p))
        .collect();
    wait_until("every fake server the controller started exits", || {
        pids.iter().all(|p| !alive(*p))
    });
}

/// An entry whose command does not exist.
fn broken(entry: &Value) -> Value {
    let mut e = entry.clone();
    e["command"] = json!("/nonexistent/steward-no-such-language-server");
    e
}

/// The controller condition `type_`, if set.
fn controller_condition(
    s: &WorkspaceStatus,
    type_: &str,
) -> Option<steward_schema::resource::Condition> {
    s.controller
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .cloned()
}

/// A fake server the test starts itself (an external daemon); killed on drop.
struct Daemon {
    child: Child,
}

impl Daemon {
    fn start(config: &Config) -> Daemon {
        let child = Command::new(bin("fake-lsp-server"))
            .env(CONFIG_ENV, config.to_json())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the fake daemon");
        Daemon { child }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---- transports ----

/// A tcp server Steward starts with `command` is connected once it
/// listens: the connection is retried while it comes up (here it only
/// listens after a second), without a second process; removing it sends
/// `shutdown`/`exit` and the process ends.
#[test]
fn tcp_server_with_command_is_retried_until_it_listens() {
    let env = Env::new();
    let port = free_port();
    let cfg = Config {
        transport: Transport::Tcp,
        port,
        ..Config::default()
    };
    let mut a = env.fake_lsp("tcpsrv", cfg, &[".tt"]);
    // Slow to come up: listen only after a second (the same process, exec'd).
    let fake = a["command"].clone();
    a["command"] = json!("/bin/sh");
    a["args"] = json!(["-c", "sleep 1 && exec \"$0\"", fake]);
    a["transport"] = json!("tcp");
    a["socket"] = json!({"host": "127.0.0.1", "port": port});
    env.write(".lsp.json", &lsp_json(&[("tcpsrv", a)]));
    env.write("x.tt", "fn tcp\n");
    let c = env.start(&[]);
    let s = c.wait_for("tcpsrv Ready over tcp, start reported", |s| {
        lsp_ready(s, "tcpsrv") && s.controller.last_reload.is_some()
    });
    let p = pid(&s, "tcpsrv").expect("Steward owns the process");
    assert_eq!(
        starts(&env, "tcpsrv"),
        vec![p],
        "one process, connected late"
    );
    let l = lsp(&s, "tcpsrv").unwrap();
    assert_eq!(l.status.restarts, 0);
    let last = s.controller.last_reload.clone().unwrap();
    assert_eq!(last.added, ["tcpsrv"], "{last:?}");
    assert!(last.failed.is_empty(), "{last:?}");
    let text = hover(&env, "x.tt");
    assert!(text.contains("fake-hover tcpsrv"), "{text}");
    assert!(
        records(&env, "tcpsrv")
            .iter()
            .any(|r| r.event == Event::Connect && r.message["connection"] == json!(1))
    );

    // Removed: the connection ends with shutdown + exit, the process exits.
    env.write(".lsp.json", "{}");
    c.wait_for("tcpsrv gone", |s| lsp(s, "tcpsrv").is_none());
    wait_until("the tcp server exits", || !alive(p));
    assert_eq!(received(&env, "tcpsrv", p, "exit").len(), 1);
    let exit = records(&env, "tcpsrv")
        .into_iter()
        .find(|r| r.event == Event::Exit)
        .expect("an exit record");
    assert_eq!(exit.message["code"], json!(0), "{exit:?}");
    finish(c, &env, &[]);
}

/// The unix `socket` transport (a path string): Ready, usable, and the
/// process and its socket file are gone after removal.
#[test]
fn unix_socket_server_with_command_serves_and_stops() {
    let env = Env::new();
    let sock = env.records().join("fake.sock");
    let cfg = Config {
        transport: Transport::Socket,
        socket_path: Some(sock.clone()),
        ..Config::default()
    };
    let mut a = env.fake_lsp("socksrv", cfg, &[".ss"]);
    a["transport"] = json!("socket");
    a["socket"] = json!(sock.to_string_lossy());
    env.write(".lsp.json", &lsp_json(&[("socksrv", a)]));
    env.write("x.ss", "fn sock\n");
    let c = env.start(&[]);
    let s = c.wait_for("socksrv Ready over a unix socket", |s| {
        lsp_ready(s, "socksrv")
    });
    let p = pid(&s, "socksrv").unwrap();
    let text = hover(&env, "x.ss");
    assert!(text.contains("fake-hover socksrv"), "{text}");
    assert!(
        records(&env, "socksrv")
            .iter()
            .any(|r| r.event == Event::Listening
                && r.message["path"] == json!(sock.to_string_lossy()))
    );
    assert!(sock.exists());

    std::fs::remove_file(env.ws.join(".lsp.json")).unwrap();
    c.wait_for("socksrv gone", |s| lsp(s, "socksrv").is_none());
    wait_until("the socket server exits", || !alive(p));
    wait_until("its socket file is removed", || !sock.exists());
    finish(c, &env, &[]);
}

/// A tcp server without `command` is an external daemon: Steward connects
/// (no pid of its own), and removing the server closes the connection
/// (`shutdown`, never `exit`, never a signal) while the daemon lives on and
/// accepts the next connection when the server is added again.
#[test]
fn external_tcp_daemon_is_disconnected_not_stopped() {
    let env = Env::new();
    let port_file = env.root.path().join("daemon.port");
    let cfg = Config {
        name: "daemon".to_owned(),
        record: Some(env.record("daemon")),
        transport: Transport::Tcp,
        port: 0,
        port_file: Some(port_file.clone()),
        ..Config::default()
    };
    let mut daemon = Daemon::start(&cfg);
    wait_until("the daemon listens", || port_file.exists());
    let port: u16 = std::fs::read_to_string(&port_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let entry = json!({
        "transport": "tcp",
        "socket": {"host": "127.0.0.1", "port": port},
        "extensionToLanguage": {".dd": "daemon"},
    });
    env.write(".lsp.json", &lsp_json(&[("daemon", entry.clone())]));
    env.write("x.dd", "fn daemon\n");
    let c = env.start(&[]);
    let s = c.wait_for("daemon Ready", |s| lsp_ready(s, "daemon"));
    assert_eq!(pid(&s, "daemon"), None, "Steward does not own the daemon");
    let text = hover(&env, "x.dd");
    assert!(text.contains("fake-hover daemon"), "{text}");

    // Removed: connection 1 ends; the daemon stays up.
    env.write(".lsp.json", "{}");
    let s = c.wait_for("daemon removed", |s| {
        lsp(s, "daemon").is_none()
            && s.controller
                .last_reload
                .as_ref()
                .is_some_and(|l| l.trigger.contains(".lsp.json"))
    });
    let last = s.controller.last_reload.clone().unwrap();
    assert_eq!(last.removed, ["daemon"], "{last:?}");
    wait_until("the daemon records the disconnect", || {
        records(&env, "daemon")
            .iter()
            .any(|r| r.event == Event::Disconnect && r.message["connection"] == json!(1))
    });
    assert!(daemon.running(), "the external daemon must stay alive");
    let dp = daemon.pid();
    assert_eq!(received(&env, "daemon", dp, "shutdown").len(), 1);
    assert!(
        received(&env, "daemon", dp, "exit").is_empty(),
        "exit was sent to a daemon Steward does not own"
    );
    assert!(
        !records(&env, "daemon")
            .iter()
            .any(|r| r.event == Event::Signal || r.event == Event::Exit),
        "the daemon was signalled or ended"
    );

    // Added again: a fresh connection to the same daemon.
    env.write(".lsp.json", &lsp_json(&[("daemon", entry)]));
    c.wait_for("daemon Ready again", |s| lsp_ready(s, "daemon"));
    assert!(
        records(&env, "daemon")
            .iter()
            .any(|r| r.event == Event::Connect && r.message["connection"] == json!(2))
    );
    let text = hover(&env, "x.dd");
    assert!(text.contains("fake-hover daemon"), "{text}");
    finish(c, &env, &[dp]);
    assert!(
        daemon.running(),
        "stopping the controller left the daemon up"
    );
}

// ---- stopping ----

/// Removed servers that ignore `shutdown` (one also ignores SIGTERM) are
/// gone within shutdownTimeout + the SIGTERM grace (3 s), not hung.
#[test]
fn servers_ignoring_shutdown_are_gone_within_shutdown_timeout_plus_grace() {
    const SHUTDOWN_TIMEOUT_MS: u64 = 1000;
    const GRACE_MS: u64 = 3000;
    let env = Env::new();
    // Neither exits when its stdin closes: only signals end them.
    let deaf = Config {
        ignore_shutdown: true,
        exit_on_stdin_close: false,
        ..Config::default()
    };
    let stubborn = Config {
        ignore_shutdown: true,
        ignore_sigterm: true,
        exit_on_stdin_close: false,
        ..Config::default()
    };
    let mut a = env.fake_lsp("deaf", deaf, &[".da"]);
    let mut b = env.fake_lsp("stubborn", stubborn, &[".sb"]);
    a["shutdownTimeout"] = json!(SHUTDOWN_TIMEOUT_MS);
    b["shutdownTimeout"] = json!(SHUTDOWN_TIMEOUT_MS);
    let keep = env.fake_lsp("keep", Config::default(), &[".kk"]);
    env.write(
        ".lsp.json",
        &lsp_json(&[("deaf", a), ("stubborn", b), ("keep", keep.clone())]),
    );
    let c = env.start(&[]);
    let s = c.wait_for("all Ready", |s| {
        ["deaf", "stubborn", "keep"].iter().all(|n| lsp_ready(s, n))
    });
    let (pa, pb, pk) = (
        pid(&s, "deaf").unwrap(),
        pid(&s, "stubborn").unwrap(),
        pid(&s, "keep").unwrap(),
    );

    let t0 = Instant::now();
    env.write(".lsp.json", &lsp_json(&[("keep", keep)]));
    let (gone_a, gone_b) = (Cell::new(None), Cell::new(None));
    wait_until("both removed servers exit", || {
        if gone_a.get().is_none() && !alive(pa) {
            gone_a.set(Some(t0.elapsed()));
        }
        if gone_b.get().is_none() && !alive(pb) {
            gone_b.set(Some(t0.elapsed()));
        }
        gone_a.get().is_some() && gone_b.get().is_some()
    });
    let (gone_a, gone_b) = (gone_a.get().unwrap(), gone_b.get().unwrap());
    eprintln!("removed: deaf gone after {gone_a:?}, stubborn after {gone_b:?}");
    // The bound, plus slack for the file event and a loaded machine.
    let bound = Duration::from_millis(SHUTDOWN_TIMEOUT_MS + GRACE_MS + 2500);
    assert!(gone_a < bound, "deaf took {gone_a:?}");
    assert!(gone_b < bound, "stubborn took {gone_b:?}");
    // It waited for shutdown, then escalated.
    assert!(
        gone_a >= Duration::from_millis(SHUTDOWN_TIMEOUT_MS),
        "deaf was killed before its shutdownTimeout: {gone_a:?}"
    );
    assert_eq!(received(&env, "deaf", pa, "shutdown").len(), 1);
    let deaf_signals: Vec<Value> = records(&env, "deaf")
        .into_iter()
        .filter(|r| r.event == Event::Signal)
        .map(|r| r.message)
        .collect();
    assert_eq!(
        deaf_signals,
        [json!({"signal": "SIGTERM", "ignored": false})]
    );
    let stubborn_records = records(&env, "stubborn");
    assert!(
        stubborn_records
            .iter()
            .any(|r| r.event == Event::Signal && r.message["ignored"] == json!(true)),
        "stubborn got SIGTERM"
    );
    assert!(
        !stubborn_records.iter().any(|r| r.event == Event::Exit),
        "stubborn can only have been SIGKILLed: {stubborn_records:?}"
    );
    assert!(
        gone_b >= Duration::from_millis(SHUTDOWN_TIMEOUT_MS + GRACE_MS),
        "stubborn was SIGKILLed before shutdownTimeout + grace: {gone_b:?}"
    );
    let s = c.wait_for("both gone from status", |s| {
        lsp(s, "deaf").is_none() && lsp(s, "stubborn").is_none()
    });
    assert_eq!(pid(&s, "keep"), Some(pk), "keep is untouched");
    finish(c, &env, &[]);
}

// ---- server→client requests ----

/// Servers that number their own requests from 0, or use string ids, and
/// send `window/workDoneProgress/create`, `client/registerCapability` and
/// `workspace/configuration` right after `initialized`: all answered (the
/// configuration from `settings`), and the servers stay usable.
#[test]
fn server_requests_with_zero_and_string_ids_are_answered_from_settings() {
    let env = Env::new();
    let servers = [("zero", IdStyle::Zero), ("strid", IdStyle::String)];
    let mut entries = Vec::new();
    for (name, style) in servers {
        let cfg = Config {
            server_requests: true,
            id_style: style,
            ..Config::default()
        };
        let ext = format!(".{name}");
        let mut e = env.fake_lsp(name, cfg, &[ext.as_str()]);
        e["settings"] = json!({"fake": {"mode": name, "level": 3}, "other": true});
        entries.push((name, e));
        env.write(&format!("x.{name}"), "fn request\n");
    }
    env.write(".lsp.json", &lsp_json(&entries));
    let c = env.start(&[]);
    let s = c.wait_for("zero and strid Ready", |s| {
        lsp_ready(s, "zero") && lsp_ready(s, "strid")
    });
    for (name, style) in servers {
        let p = pid(&s, name).unwrap();
        let answer_to = |method: &str| answer_to(&env, name, p, method);
        let (id, answer) = answer_to("window/workDoneProgress/create");
        match style {
            IdStyle::Zero => assert_eq!(id, json!(0), "{name}"),
            IdStyle::String => assert_eq!(id, json!("fake-1"), "{name}"),
            IdStyle::Number => unreachable!(),
        }
        assert!(answer.get("error").is_none(), "{name}: {answer}");
        let (_, answer) = answer_to("client/registerCapability");
        assert!(answer.get("error").is_none(), "{name}: {answer}");
        let (_, answer) = answer_to("workspace/configuration");
        assert_eq!(
            answer["result"],
            json!([{"mode": name, "level": 3}]),
            "{name}: the section \"fake\" of settings"
        );
        // The server's own view, through `steward lsp request` (an
        // extension method): every answer it waited for, and the settings
        // pushed with didChangeConfiguration.
        let state = env.lsp_cli(&["request", "--server", name, "fake/state"]);
        let answers = &state["serverRequestAnswers"];
        assert_eq!(
            answers["workspace/configuration"],
            json!({"result": [{"mode": name, "level": 3}]}),
            "{name}: {state}"
        );
        for method in [
            "window/workDoneProgress/create",
            "client/registerCapability",
        ] {
            assert_eq!(answers[method], json!({"result": null}), "{name}: {state}");
        }
        assert_eq!(
            state["settings"],
            json!({"fake": {"mode": name, "level": 3}, "other": true}),
            "{name}: {state}"
        );
        assert_eq!(state["pid"], json!(p), "{name}: {state}");
        let text = hover(&env, &format!("x.{name}"));
        assert!(text.contains(&format!("fake-hover {name}")), "{text}");
    }
    finish(c, &env, &[]);
}

/// A server flooding its client with `client/registerCapability` (500 a
/// second for 4 s) gets every request answered and is served meanwhile:
/// its output is read in pauses while the burst lasts, nothing is dropped.
#[test]
fn a_registration_storm_is_answered_whole_and_the_server_is_served_meanwhile() {
    let env = Env::new();
    let report = env.records().join("storm.json");
    let cfg = Config {
        registration_storm: Some(RegistrationStorm {
            per_second: 500,
            duration_ms: 4000,
            after_ms: 0,
            report: report.clone(),
        }),
        ..Config::default()
    };
    let e = env.fake_lsp("storm", cfg, &[".st"]);
    env.write(".lsp.json", &lsp_json(&[("storm", e)]));
    env.write("x.st", "fn storm\n");
    let c = env.start(&[]);
    c.wait_for("storm Ready", |s| lsp_ready(s, "storm"));
    let phase = || -> Option<Value> {
        let text = std::fs::read_to_string(&report).ok()?;
        serde_json::from_str(&text).ok()
    };
    wait_until("the storm begins", || phase().is_some());
    let text = hover(&env, "x.st");
    assert!(text.contains("fake-hover storm"), "{text}");
    assert_eq!(
        phase().unwrap()["phase"],
        "begin",
        "the hover came after the storm, not during it"
    );
    let end = eventually(
        "the storm's end",
        DEADLINE,
        Duration::from_millis(50),
        || phase().filter(|v| v["phase"] == "end").ok_or("not yet"),
    );
    assert!(end["sent"].as_u64().unwrap() >= 1800, "{end}");
    assert_eq!(end["answered"], end["sent"], "{end}");
    assert!(lsp_ready(&c.status(), "storm"));
    finish(c, &env, &[]);
}

/// The request `method` process `pid` of `name` sent to the client (its
/// id) and the answer it recorded for that id. Polled: the server asks
/// after `initialized`, which may come after Ready is published.
fn answer_to(env: &Env, name: &str, pid: u32, method: &str) -> (Value, Value) {
    let find = || {
        let recs = records(env, name);
        let sent = recs.iter().find(|r| {
            r.pid == pid && r.event == Event::Send && r.message["method"] == json!(method)
        })?;
        let id = sent.message["id"].clone();
        let answer = recs.iter().find(|r| {
            r.pid == pid
                && r.event == Event::Recv
                && r.message.get("method").is_none()
                && r.message["id"] == id
        })?;
        Some((id, answer.message.clone()))
    };
    eventually(
        &format!("{name}: an answer recorded to its {method} request"),
        DEADLINE,
        Duration::from_millis(20),
        || find().ok_or(""),
    )
}

// ---- the .lsp.json file itself ----

/// `.lsp.json` created after the controller started adds its servers;
/// deleting it removes them (an absent file is an empty, valid source).
#[test]
fn lsp_json_created_after_start_and_then_deleted() {
    let env = Env::new();
    let c = env.start(&[]);
    let lsp_source = |s: &WorkspaceStatus| {
        s.sources
            .iter()
            .find(|src| src.path.ends_with(".lsp.json"))
            .map(|src| src.state)
    };
    let s = c.status();
    assert!(
        matches!(lsp_source(&s), None | Some(SourceState::Absent)),
        "{:?}",
        s.sources
    );
    let a = env.fake_lsp("alpha", Config::default(), &[".aa"]);
    env.write(".lsp.json", &lsp_json(&[("alpha", a)]));
    let s = c.wait_for("alpha added and Ready", |s| lsp_ready(s, "alpha"));
    let p = pid(&s, "alpha").unwrap();
    let s = c.wait_for("the reload is reported", |s| {
        s.controller
            .last_reload
            .as_ref()
            .is_some_and(|l| l.added == ["alpha"])
    });
    let last = s.controller.last_reload.clone().unwrap();
    assert!(last.trigger.contains(".lsp.json"), "{last:?}");
    assert_eq!(lsp_source(&s), Some(SourceState::Valid));

    std::fs::remove_file(env.ws.join(".lsp.json")).unwrap();
    let s = c.wait_for("alpha removed", |s| {
        lsp(s, "alpha").is_none()
            && s.controller
                .last_reload
                .as_ref()
                .is_some_and(|l| l.removed == ["alpha"])
    });
    assert!(
        s.removed.iter().any(|r| r.name == "alpha"),
        "{:?}",
        s.removed
    );
    assert!(matches!(lsp_source(&s), None | Some(SourceState::Absent)));
    wait_until("alpha exits", || !alive(p));
    finish(c, &env, &[]);
}

/// Whether the controller's JSON log has a `source changed` line for
/// `.lsp.json` that changed no server.
fn logged_no_op_change(c: &Controller) -> bool {
    c.log_text().lines().any(|line| {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            return false;
        };
        let f = &v["fields"];
        f["message"] == json!("source changed")
            && f["source"]
                .as_str()
                .is_some_and(|s| s.ends_with(".lsp.json"))
            && (f["changed"] == json!(0) || f["changed"] == json!("0"))
    })
}

/// Reordered keys, other whitespace and a comment: the same canonical
/// content restarts nothing and reports no reload; a real edit after it
/// restarts only the edited server.
#[test]
fn formatting_only_edit_of_lsp_json_restarts_nothing() {
    let env = Env::new();
    let a = env.fake_lsp("alpha", Config::default(), &[".aa"]);
    let b = env.fake_lsp("beta", Config::default(), &[".bb"]);
    env.write(
        ".lsp.json",
        &lsp_json(&[("alpha", a.clone()), ("beta", b.clone())]),
    );
    let c = env.start(&["--log-format", "json"]);
    let s = c.wait_for("alpha and beta Ready, start reported", |s| {
        lsp_ready(s, "alpha") && lsp_ready(s, "beta") && s.controller.last_reload.is_some()
    });
    let (pa, pb) = (pid(&s, "alpha").unwrap(), pid(&s, "beta").unwrap());
    let before = s.controller.last_reload.clone().unwrap();

    let reformatted = format!(
        "// the same servers, reformatted\n{{\"beta\":{},\n\n   \"alpha\" :\t{}}}\n",
        serde_json::to_string(&b).unwrap(),
        serde_json::to_string(&a).unwrap()
    );
    env.write(".lsp.json", &reformatted);
    wait_until("the controller judged the save", || logged_no_op_change(&c));
    let s = c.status();
    assert_eq!(pid(&s, "alpha"), Some(pa));
    assert_eq!(pid(&s, "beta"), Some(pb));
    assert_eq!(starts(&env, "alpha"), vec![pa]);
    assert_eq!(starts(&env, "beta"), vec![pb]);
    assert_eq!(
        s.controller.last_reload.as_ref(),
        Some(&before),
        "a formatting-only save is no reload"
    );
    assert_eq!(lsp(&s, "alpha").unwrap().metadata.generation, 1);

    // Positive control: a real edit of beta restarts beta alone.
    let mut b2 = b.clone();
    b2["args"] = json!(["--edited"]);
    env.write(".lsp.json", &lsp_json(&[("alpha", a), ("beta", b2)]));
    let s = c.wait_for("beta restarted", |s| {
        lsp_ready(s, "beta") && pid(s, "beta").is_some_and(|p| p != pb)
    });
    assert_eq!(pid(&s, "alpha"), Some(pa));
    assert_eq!(starts(&env, "alpha"), vec![pa], "alpha started once");
    let last = s.controller.last_reload.clone().unwrap();
    assert_eq!(last.restarted, ["beta"], "{last:?}");
    assert_eq!(last.unchanged, ["alpha"], "{last:?}");
    finish(c, &env, &[]);
}

// ---- documents across restarts, removals and failures ----

/// A document opened while its server restarts (the new one is slow to
/// initialize) ends up open on the new server, as does the document opened
/// before the restart (replayed), each exactly once.
#[test]
fn document_opened_during_a_restart_reaches_the_new_server() {
    let env = Env::new();
    let a = env.fake_lsp("alpha", Config::default(), &[".aa"]);
    env.write(".lsp.json", &lsp_json(&[("alpha", a)]));
    env.write("one.aa", "fn one\n");
    env.write("two.aa", "fn two\n");
    let c = env.start(&[]);
    let s = c.wait_for("alpha Ready", |s| lsp_ready(s, "alpha"));
    let old = pid(&s, "alpha").unwrap();
    env.lsp_cli(&["open", env.ws.join("one.aa").to_str().unwrap()]);

    let slow = Config {
        initialize_delay_ms: 2000,
        ..Config::default()
    };
    let a2 = env.fake_lsp("alpha", slow, &[".aa"]);
    env.write(".lsp.json", &lsp_json(&[("alpha", a2)]));
    c.wait_for("the new alpha is starting", |s| {
        phase(s, "alpha") == Some(Phase::Starting)
    });
    let asked_at = now_ms();
    let answer = env.lsp_cli(&["open", env.ws.join("two.aa").to_str().unwrap()]);
    assert_eq!(answer["version"], json!(1), "{answer}");

    let s = c.wait_for("the new alpha Ready", |s| {
        lsp_ready(s, "alpha") && pid(s, "alpha").is_some_and(|p| p != old)
    });
    let new = pid(&s, "alpha").unwrap();
    // The open was asked before the new server had answered initialize.
    let init_answered = records(&env, "alpha")
        .into_iter()
        .find(|r| {
            r.pid == new
                && r.event == Event::Send
                && r.message["result"]["capabilities"].is_object()
        })
        .expect("the new alpha answered initialize")
        .t;
    assert!(
        asked_at < init_answered,
        "the open was not issued during the restart ({asked_at} >= {init_answered})"
    );
    let mut got = opened(&env, "alpha", new);
    got.sort();
    assert_eq!(got, [uri(&env, "one.aa"), uri(&env, "two.aa")]);
    assert_eq!(opened(&env, "alpha", old), [uri(&env, "one.aa")]);
    let text = hover(&env, "two.aa");
    assert!(text.contains("word=fn"), "{text}");
    finish(c, &env, &[]);
}

/// Removing a server forgets its documents: added back, it gets none.
#[test]
fn removing_a_server_forgets_its_documents() {
    let env = Env::new();
    let a = env.fake_lsp("alpha", Config::default(), &[".aa"]);
    let b = env.fake_lsp("beta", Config::default(), &[".bb"]);
    env.write(
        ".lsp.json",
        &lsp_json(&[("alpha", a.clone()), ("beta", b.clone())]),
    );
    env.write("doc.aa", "fn doc\n");
    let c = env.start(&[]);
    let s = c.wait_for("alpha Ready", |s| lsp_ready(s, "alpha"));
    let old = pid(&s, "alpha").unwrap();
    env.lsp_cli(&["open", env.ws.join("doc.aa").to_str().unwrap()]);
    assert_eq!(opened(&env, "alpha", old), [uri(&env, "doc.aa")]);

    env.write(".lsp.json", &lsp_json(&[("beta", b.clone())]));
    c.wait_for("alpha removed", |s| lsp(s, "alpha").is_none());
    wait_until("the old alpha exits", || !alive(old));
    env.write(".lsp.json", &lsp_json(&[("alpha", a), ("beta", b)]));
    let s = c.wait_for("alpha back", |s| {
        lsp_ready(s, "alpha") && pid(s, "alpha").is_some_and(|p| p != old)
    });
    let new = pid(&s, "alpha").unwrap();
    assert!(
        opened(&env, "alpha", new).is_empty(),
        "a re-added server got the removed one's documents: {:?}",
        opened(&env, "alpha", new)
    );
    finish(c, &env, &[]);
}

/// A server that fails (bad command) keeps its tracked documents: once the
/// command is fixed, the new server gets them replayed before Ready.
#[test]
fn a_failed_server_keeps_its_documents_for_the_fixed_one() {
    let env = Env::new();
    let a = env.fake_lsp("alpha", Config::default(), &[".aa"]);
    env.write(".lsp.json", &lsp_json(&[("alpha", a.clone())]));
    env.write("doc.aa", "fn doc\n");
    let c = env.start(&[]);
    let s = c.wait_for("alpha Ready", |s| lsp_ready(s, "alpha"));
    let old = pid(&s, "alpha").unwrap();
    env.lsp_cli(&["open", env.ws.join("doc.aa").to_str().unwrap()]);

    env.write(".lsp.json", &lsp_json(&[("alpha", broken(&a))]));
    c.wait_for("alpha Failed", |s| {
        lsp(s, "alpha").is_some_and(|l| {
            l.status.phase == Phase::Failed && l.status.reason == Some(Reason::CommandNotFound)
        })
    });
    wait_until("the old alpha exits", || !alive(old));

    env.write(".lsp.json", &lsp_json(&[("alpha", a)]));
    let s = c.wait_for("alpha fixed and Ready", |s| {
        lsp_ready(s, "alpha") && pid(s, "alpha").is_some_and(|p| p != old)
    });
    let new = pid(&s, "alpha").unwrap();
    assert_eq!(
        opened(&env, "alpha", new),
        [uri(&env, "doc.aa")],
        "the tracked document is replayed to the fixed server"
    );
    let text = hover(&env, "doc.aa");
    assert!(text.contains("fake-hover alpha"), "{text}");
    assert_eq!(opened(&env, "alpha", new).len(), 1, "not opened twice");
    finish(c, &env, &[]);
}

/// A server killed behind Steward's back and restarted (`restartOnCrash`)
/// gets its tracked documents replayed too.
#[test]
fn a_server_restarted_after_a_crash_gets_its_documents_replayed() {
    let env = Env::new();
    let mut a = env.fake_lsp("alpha", Config::default(), &[".aa"]);
    a["restartOnCrash"] = json!(true);
    env.write(".lsp.json", &lsp_json(&[("alpha", a)]));
    env.write("doc.aa", "fn doc\n");
    let c = env.start(&[]);
    let s = c.wait_for("alpha Ready", |s| lsp_ready(s, "alpha"));
    let old = pid(&s, "alpha").unwrap();
    env.lsp_cli(&["open", env.ws.join("doc.aa").to_str().unwrap()]);

    assert!(signal(old as i32, libc::SIGKILL));
    let s = c.wait_for("alpha restarted after the crash", |s| {
        lsp_ready(s, "alpha") && pid(s, "alpha").is_some_and(|p| p != old)
    });
    assert_eq!(lsp(&s, "alpha").unwrap().status.restarts, 1);
    let new = pid(&s, "alpha").unwrap();
    assert_eq!(opened(&env, "alpha", new), [uri(&env, "doc.aa")]);
    let text = hover(&env, "doc.aa");
    assert!(text.contains("fake-hover alpha"), "{text}");
    finish(c, &env, &[]);
}

/// Several saves in a row, without waiting: the server settles on the last
/// configuration, every intermediate process is gone, and the other server
/// was never touched.
#[test]
fn rapid_consecutive_edits_settle_on_the_last_config() {
    let env = Env::new();
    let a = env.fake_lsp("alpha", Config::default(), &[".aa"]);
    let b = env.fake_lsp("beta", Config::default(), &[".bb"]);
    env.write(
        ".lsp.json",
        &lsp_json(&[("alpha", a.clone()), ("beta", b.clone())]),
    );
    let c = env.start(&[]);
    let s = c.wait_for("alpha and beta Ready", |s| {
        lsp_ready(s, "alpha") && lsp_ready(s, "beta")
    });
    let pb = pid(&s, "beta").unwrap();
    for n in 1..=6 {
        let mut a2 = a.clone();
        a2["args"] = json!([format!("--edit-{n}")]);
        env.write(
            ".lsp.json",
            &lsp_json(&[("alpha", a2), ("beta", b.clone())]),
        );
    }
    let s = c.wait_for("alpha runs the last config", |s| {
        lsp(s, "alpha").is_some_and(|l| {
            l.status.phase == Phase::Ready
                && l.status.observed_hash.as_deref() == Some(l.spec.config_hash.as_str())
                && l.spec.args == ["--edit-6"]
        })
    });
    let last = pid(&s, "alpha").unwrap();
    let start = records(&env, "alpha")
        .into_iter()
        .find(|r| r.pid == last && r.event == Event::Start)
        .expect("the running alpha recorded its start");
    assert_eq!(start.message["args"], json!(["--edit-6"]), "{start:?}");
    let others: Vec<u32> = starts(&env, "alpha")
        .into_iter()
        .filter(|p| *p != last)
        .collect();
    assert!(!others.is_empty(), "alpha never restarted");
    wait_until("every earlier alpha exits", || {
        others.iter().all(|p| !alive(*p))
    });
    assert_eq!(pid(&s, "beta"), Some(pb), "beta is untouched");
    assert_eq!(starts(&env, "beta"), vec![pb]);
    finish(c, &env, &[]);
}

// ---- lastReload and ReloadFailed ----

/// One edit that adds, removes, restarts, keeps and fails a server each:
/// `status.controller.lastReload` lists every one in its place.
#[test]
fn last_reload_lists_added_removed_restarted_unchanged_failed() {
    let env = Env::new();
    let fake = |name: &str| env.fake_lsp(name, Config::default(), &[]);
    env.write(
        ".lsp.json",
        &lsp_json(&[
            ("alpha", fake("alpha")),
            ("beta", fake("beta")),
            ("gamma", fake("gamma")),
        ]),
    );
    let c = env.start(&[]);
    let s = c.wait_for("alpha, beta, gamma Ready", |s| {
        ["alpha", "beta", "gamma"].iter().all(|n| lsp_ready(s, n))
    });
    let (pa, pb, pg) = (
        pid(&s, "alpha").unwrap(),
        pid(&s, "beta").unwrap(),
        pid(&s, "gamma").unwrap(),
    );
    let mut gamma2 = fake("gamma");
    gamma2["args"] = json!(["--v2"]);
    env.write(
        ".lsp.json",
        &lsp_json(&[
            ("alpha", fake("alpha")),
            ("gamma", gamma2),
            ("delta", broken(&fake("delta"))),
            ("epsilon", fake("epsilon")),
        ]),
    );
    let s = c.wait_for("the edit's reload is reported", |s| {
        s.controller
            .last_reload
            .as_ref()
            .is_some_and(|l| l.trigger.contains(".lsp.json"))
    });
    let last = s.controller.last_reload.clone().unwrap();
    assert_eq!(last.added, ["epsilon"], "{last:?}");
    assert_eq!(last.removed, ["beta"], "{last:?}");
    assert_eq!(last.restarted, ["gamma"], "{last:?}");
    assert_eq!(last.unchanged, ["alpha"], "{last:?}");
    assert_eq!(last.failed, ["delta"], "{last:?}");
    assert!(last.skipped.is_empty(), "{last:?}");
    assert_eq!(pid(&s, "alpha"), Some(pa));
    assert!(lsp_ready(&s, "epsilon"));
    assert!(pid(&s, "gamma").is_some_and(|p| p != pg));
    assert_eq!(phase(&s, "delta"), Some(Phase::Failed));
    wait_until("beta and the old gamma exit", || !alive(pb) && !alive(pg));
    finish(c, &env, &[]);
}

/// A reload where one server restarts fine and another fails to start sets
/// the controller's `ReloadFailed` condition True; it stays True across a
/// reload that still fails, and a fully successful reload sets it False.
#[test]
fn partial_failure_sets_reload_failed_until_a_fully_successful_reload() {
    let env = Env::new();
    let a = env.fake_lsp("alpha", Config::default(), &[".aa"]);
    let b = env.fake_lsp("beta", Config::default(), &[".bb"]);
    env.write(
        ".lsp.json",
        &lsp_json(&[("alpha", a.clone()), ("beta", b.clone())]),
    );
    let c = env.start(&[]);
    let s = c.wait_for("alpha and beta Ready", |s| {
        lsp_ready(s, "alpha") && lsp_ready(s, "beta")
    });
    let pa = pid(&s, "alpha").unwrap();
    let initial = controller_condition(&s, "ReloadFailed");
    assert!(
        initial
            .as_ref()
            .is_none_or(|c| c.status == ConditionStatus::False),
        "{initial:?}"
    );

    // alpha restarts fine, beta fails to start.
    let mut a2 = a.clone();
    a2["args"] = json!(["--v2"]);
    env.write(
        ".lsp.json",
        &lsp_json(&[("alpha", a2), ("beta", broken(&b))]),
    );
    let s = c.wait_for("ReloadFailed True", |s| {
        controller_condition(s, "ReloadFailed").is_some_and(|c| c.status == ConditionStatus::True)
    });
    let cond = controller_condition(&s, "ReloadFailed").unwrap();
    assert_eq!(cond.reason.as_deref(), Some("ServersFailed"), "{cond:?}");
    assert!(
        cond.message.as_deref().unwrap_or("").contains("beta"),
        "{cond:?}"
    );
    let last = s.controller.last_reload.clone().unwrap();
    assert_eq!(last.restarted, ["alpha"], "{last:?}");
    assert_eq!(last.failed, ["beta"], "{last:?}");
    let s = c.wait_for("the new alpha Ready", |s| {
        lsp_ready(s, "alpha") && pid(s, "alpha").is_some_and(|p| p != pa)
    });
    let pa2 = pid(&s, "alpha").unwrap();
    let since = cond.last_transition_time.clone();

    // Another edit of alpha alone: beta is still broken and is retried by
    // the save, so the condition stays True.
    let mut a3 = a.clone();
    a3["args"] = json!(["--v3"]);
    env.write(
        ".lsp.json",
        &lsp_json(&[("alpha", a3.clone()), ("beta", broken(&b))]),
    );
    let s = c.wait_for("alpha restarted again", |s| {
        lsp_ready(s, "alpha")
            && pid(s, "alpha").is_some_and(|p| p != pa2)
            && s.controller
                .last_reload
                .as_ref()
                .is_some_and(|l| l.restarted == ["alpha"] && l.failed == ["beta"])
    });
    let cond = controller_condition(&s, "ReloadFailed").unwrap();
    assert_eq!(cond.status, ConditionStatus::True, "{cond:?}");
    assert_eq!(cond.last_transition_time, since, "no transition: {cond:?}");

    // beta fixed: a fully successful reload clears it.
    env.write(".lsp.json", &lsp_json(&[("alpha", a3), ("beta", b)]));
    let s = c.wait_for("ReloadFailed False", |s| {
        controller_condition(s, "ReloadFailed").is_some_and(|c| c.status == ConditionStatus::False)
    });
    let cond = controller_condition(&s, "ReloadFailed").unwrap();
    assert_eq!(cond.reason.as_deref(), Some("ReloadSucceeded"), "{cond:?}");
    let last = s.controller.last_reload.clone().unwrap();
    assert!(last.failed.is_empty(), "{last:?}");
    assert!(
        last.added == ["beta"] || last.restarted == ["beta"],
        "{last:?}"
    );
    assert!(lsp_ready(&s, "beta"));
    finish(c, &env, &[]);
}

// ---- shutdown ----

/// SIGTERM while a server is still in a slow `initialize` (5 s): the
/// controller exits 0 well before that answer would come, and the server
/// process is gone.
#[test]
fn sigterm_during_a_slow_initialize_exits_promptly_and_leaves_nothing() {
    let env = Env::new();
    let slow = Config {
        initialize_delay_ms: 5000,
        ..Config::default()
    };
    let mut a = env.fake_lsp("alpha", slow, &[".aa"]);
    a["startupTimeout"] = json!(30_000);
    env.write(".lsp.json", &lsp_json(&[("alpha", a)]));
    let mut c = env.start(&[]);
    wait_until("alpha received initialize", || {
        records(&env, "alpha")
            .iter()
            .any(|r| r.event == Event::Recv && r.message["method"] == json!("initialize"))
    });
    let p = starts(&env, "alpha")[0];
    assert_eq!(phase(&c.status(), "alpha"), Some(Phase::Starting));

    let t0 = Instant::now();
    let status = c.terminate().expect("the controller was running");
    let took = t0.elapsed();
    eprintln!("steward run exited {took:?} after SIGTERM");
    assert!(status.success(), "exit status {status}\n{}", c.log_text());
    assert!(
        took < Duration::from_millis(4000),
        "the controller took {took:?} to exit during a 5 s initialize"
    );
    wait_until("the initializing server is gone", || !alive(p));
    assert!(
        !records(&env, "alpha")
            .iter()
            .any(|r| r.event == Event::Send && r.message["result"]["capabilities"].is_object()),
        "the server was not interrupted: it answered initialize"
    );
    no_fake_left(&env, &[]);
}

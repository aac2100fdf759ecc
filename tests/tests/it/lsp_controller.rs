//! Envtest: `.lsp.json` hot reload under the real controller with the fake
//! language server — warm servers stay warm, restarted ones get their
//! documents replayed, `steward lsp` answers. The cases cover the server
//! manager, the server processes, the configuration and the file watcher.

use serde_json::json;
use steward_schema::resource::{Phase, Reason, SourceState};
use steward_tests::fake_lsp::{Config, Event, read_records};
use steward_tests::harness::{Env, alive, lsp, lsp_json, lsp_pid as pid, lsp_ready, wait_until};

#[test]
fn edit_restarts_only_that_server_and_replays_documents() {
    let env = Env::new();
    let a = env.fake_lsp("alpha", Config::default(), &[".aa"]);
    let b = env.fake_lsp("beta", Config::default(), &[".bb"]);
    env.write(
        ".lsp.json",
        &lsp_json(&[("alpha", a.clone()), ("beta", b.clone())]),
    );
    env.write("doc.aa", "fn main\nERROR here\n");
    let c = env.start(&[]);
    let s = c.wait_for("alpha and beta Ready", |s| {
        lsp_ready(s, "alpha") && lsp_ready(s, "beta")
    });
    let caps = lsp(&s, "alpha")
        .unwrap()
        .status
        .capabilities
        .clone()
        .unwrap();
    assert_eq!(caps["hoverProvider"], json!(true), "{caps}");
    let (pa, pb) = (pid(&s, "alpha").unwrap(), pid(&s, "beta").unwrap());

    // Open a document through Steward, then restart alpha by an edit.
    let doc = env.ws.join("doc.aa");
    let opened = env.lsp_cli(&["open", doc.to_str().unwrap()]);
    assert_eq!(opened["version"], json!(1));
    let mut a2 = a.clone();
    a2["args"] = json!(["--stdio"]);
    env.write(".lsp.json", &lsp_json(&[("alpha", a2), ("beta", b)]));
    let s = c.wait_for("alpha restarted and the reload recorded", |s| {
        lsp_ready(s, "alpha")
            && pid(s, "alpha") != Some(pa)
            && s.controller
                .last_reload
                .as_ref()
                .is_some_and(|r| r.restarted.contains(&"alpha".to_owned()))
    });
    assert_eq!(pid(&s, "beta"), Some(pb), "beta keeps its pid");
    wait_until("old alpha exits", || !alive(pa));
    let last = s.controller.last_reload.clone().unwrap();
    assert_eq!(last.restarted, vec!["alpha".to_owned()], "{last:?}");

    // The new alpha got didOpen for doc.aa before the reload was done.
    let new_pid = pid(&s, "alpha").unwrap();
    let opens: Vec<_> = read_records(&env.record("alpha"))
        .into_iter()
        .filter(|r| {
            r.pid == new_pid
                && r.event == Event::Recv
                && r.message["method"] == json!("textDocument/didOpen")
        })
        .collect();
    assert_eq!(opens.len(), 1, "replayed didOpen: {opens:?}");
    // And a hover works right after.
    let hover = env.lsp_cli(&["hover", &format!("{}:1:2", doc.display())]);
    let text = hover["contents"]["value"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(text.contains("fake-hover alpha"), "{hover}");
    assert!(text.contains("word=fn"), "{hover}");
}

#[test]
fn steward_lsp_answers_hover_definition_references_symbols_diagnostics() {
    let env = Env::new();
    let a = env.fake_lsp("alpha", Config::default(), &[".aa"]);
    env.write(".lsp.json", &lsp_json(&[("alpha", a)]));
    env.write("x.aa", "fn alpha\nalpha ERROR\n");
    let c = env.start(&[]);
    c.wait_for("alpha Ready", |s| lsp_ready(s, "alpha"));
    let file = env.ws.join("x.aa");
    let f = file.to_str().unwrap();
    let diags = env.lsp_cli(&["diagnostics", f]);
    assert_eq!(diags.as_array().map(Vec::len), Some(1), "{diags}");
    assert_eq!(diags[0]["range"]["start"]["line"], json!(1));
    let defs = env.lsp_cli(&["definition", &format!("{f}:2:1")]);
    assert!(defs.to_string().contains("x.aa"), "{defs}");
    let refs = env.lsp_cli(&["references", &format!("{f}:1:4")]);
    assert_eq!(refs.as_array().map(Vec::len), Some(2), "{refs}");
    let symbols = env.lsp_cli(&["symbols", f]);
    assert!(symbols.to_string().contains("alpha"), "{symbols}");
    // Text output reads like compiler output.
    let out = env.steward(&["lsp", "diagnostics", f]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("2:7: error: fake error"), "{text}");
    // A changed file is sent as didChange on the next use.
    std::fs::write(&file, "fn alpha\nclean now\n").unwrap();
    let diags = env.lsp_cli(&["diagnostics", f]);
    assert_eq!(diags, json!([]), "{diags}");
    // A file no server handles is a clear error.
    env.write("y.zz", "nothing");
    let out = env.steward(&[
        "lsp",
        "hover",
        &format!("{}:1:1", env.ws.join("y.zz").display()),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no server handles"));
}

#[test]
fn invalid_lsp_json_keeps_servers_and_deletion_stops_them() {
    let env = Env::new();
    let a = env.fake_lsp("alpha", Config::default(), &[".aa"]);
    env.write(".lsp.json", &lsp_json(&[("alpha", a.clone())]));
    let c = env.start(&[]);
    let s = c.wait_for("alpha Ready", |s| lsp_ready(s, "alpha"));
    let pa = pid(&s, "alpha").unwrap();
    // Invalid JSON: Invalid source, nothing changes.
    env.write(".lsp.json", "{ \"alpha\": ");
    let s = c.wait_for(".lsp.json Invalid", |s| {
        s.sources
            .iter()
            .any(|src| src.path.ends_with(".lsp.json") && src.state == SourceState::Invalid)
    });
    assert_eq!(pid(&s, "alpha"), Some(pa));
    // An entry that cannot be built rejects the whole file (strict).
    env.write(
        ".lsp.json",
        &lsp_json(&[
            ("alpha", a.clone()),
            ("broken", json!({"transport": "tcp"})),
        ]),
    );
    let s = c.wait_for(".lsp.json still Invalid with the entry error", |s| {
        s.sources.iter().any(|src| {
            src.path.ends_with(".lsp.json") && src.error.as_deref().unwrap_or("").contains("tcp")
        })
    });
    assert!(lsp(&s, "broken").is_none());
    assert_eq!(pid(&s, "alpha"), Some(pa));
    // Deleting the file = empty config: every workspace server stopped.
    std::fs::remove_file(env.ws.join(".lsp.json")).unwrap();
    c.wait_for("alpha gone", |s| lsp(s, "alpha").is_none());
    wait_until("alpha exits", || !alive(pa));
}

#[test]
fn untrusted_workspace_runs_no_language_server() {
    let env = Env::new();
    env.write_home(
        "settings.json",
        r#"{"security": {"folderTrust": {"enabled": true}}}"#,
    );
    let a = env.fake_lsp("alpha", Config::default(), &[".aa"]);
    env.write(".lsp.json", &lsp_json(&[("alpha", a)]));
    let c = env.start(&[]);
    c.wait_for("alpha UntrustedWorkspace", |s| {
        lsp(s, "alpha").is_some_and(|l| l.status.reason == Some(Reason::UntrustedWorkspace))
    });
    assert!(
        !env.record("alpha").exists(),
        "an untrusted server was spawned"
    );
    // requireTrustedWorkspace false: workspace servers still need trust.
    env.write_home(
        "settings.json",
        r#"{"security": {"folderTrust": {"enabled": true}}, "lsp": {"requireTrustedWorkspace": false}}"#,
    );
    c.wait_for("alpha TrustRequired", |s| {
        lsp(s, "alpha").is_some_and(|l| l.status.reason == Some(Reason::TrustRequired))
    });
    assert!(!env.record("alpha").exists());
}

#[test]
fn crash_without_restart_on_crash_stays_failed_until_saved() {
    let env = Env::new();
    let cfg = Config {
        crash_after_ms: Some(300),
        ..Config::default()
    };
    let a = env.fake_lsp("alpha", cfg, &[".aa"]);
    env.write(".lsp.json", &lsp_json(&[("alpha", a.clone())]));
    let c = env.start(&["--resync-secs", "1"]);
    let s = c.wait_for("alpha Crashed", |s| {
        lsp(s, "alpha").is_some_and(|l| {
            l.status.phase == Phase::Failed && l.status.reason == Some(Reason::Crashed)
        })
    });
    let message = lsp(&s, "alpha")
        .unwrap()
        .status
        .message
        .clone()
        .unwrap_or_default();
    assert!(message.contains("restartOnCrash is false"), "{message}");
    // Resyncs do not restart it (1 s resync): still exactly one start after a
    // positive control — the controller answered a status after 2 resyncs.
    let starts = || {
        read_records(&env.record("alpha"))
            .iter()
            .filter(|r| r.event == Event::Start)
            .count()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(2500);
    while std::time::Instant::now() < deadline {
        assert_eq!(starts(), 1, "restarted without restartOnCrash");
        let _ = c.status();
    }
    // Saving the same file again retries.
    env.write(".lsp.json", &lsp_json(&[("alpha", a)]));
    wait_until("a second start after the save", || starts() >= 2);
}

#[test]
fn restart_on_crash_gives_up_after_max_restarts() {
    let env = Env::new();
    let cfg = Config {
        crash_after_ms: Some(200),
        ..Config::default()
    };
    let mut a = env.fake_lsp("alpha", cfg, &[".aa"]);
    a["restartOnCrash"] = json!(true);
    a["maxRestarts"] = json!(2);
    env.write(".lsp.json", &lsp_json(&[("alpha", a)]));
    let c = env.start(&[]);
    let s = c.wait_for("alpha MaxRestartsExceeded", |s| {
        lsp(s, "alpha").is_some_and(|l| l.status.reason == Some(Reason::MaxRestartsExceeded))
    });
    assert_eq!(lsp(&s, "alpha").unwrap().status.restarts, 2);
    let starts = read_records(&env.record("alpha"))
        .iter()
        .filter(|r| r.event == Event::Start)
        .count();
    assert_eq!(starts, 3, "1 start + 2 restarts");
}

#[test]
fn no_lsp_flag_runs_no_language_server() {
    let env = Env::new();
    let a = env.fake_lsp("alpha", Config::default(), &[".aa"]);
    env.write(".lsp.json", &lsp_json(&[("alpha", a)]));
    let c = env.start(&["--no-lsp"]);
    let s = c.status();
    assert!(!s.controller.lsp_enabled);
    assert!(lsp(&s, "alpha").is_none());
    assert!(!env.record("alpha").exists());
}

#[test]
fn a_hung_initialize_is_a_startup_timeout_and_nothing_is_left() {
    let env = Env::new();
    let cfg = Config {
        hang_in_initialize: true,
        ..Config::default()
    };
    let mut a = env.fake_lsp("alpha", cfg, &[".aa"]);
    a["startupTimeout"] = json!(500);
    env.write(".lsp.json", &lsp_json(&[("alpha", a)]));
    let c = env.start(&["--start-backoff-ms", "60000"]);
    c.wait_for("alpha StartupTimeout", |s| {
        lsp(s, "alpha").is_some_and(|l| l.status.reason == Some(Reason::StartupTimeout))
    });
    let pids: Vec<u32> = read_records(&env.record("alpha"))
        .iter()
        .filter(|r| r.event == Event::Start)
        .map(|r| r.pid)
        .collect();
    assert!(!pids.is_empty());
    for p in pids {
        wait_until("the hung server is gone", || !alive(p));
    }
}

//! Envtest, continued: the MCP behaviours `mcp_controller.rs` does not cover —
//! `status --watch` and the offline fallback, streamable HTTP, the approval
//! gate under hot reload, `steward reload` and extensions,
//! `lastReload`, sources created after start, hung / stubborn / forking
//! servers, a minute of idleness, shutdown by signal, deny-all, and the env
//! denylist. Each test is named after what it guards; every wait is a
//! condition with a deadline.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::CliChild;
use serde_json::{Value, json};
use steward_schema::resource::{
    McpTransport, Phase, Reason, ReloadSummary, SourceKind, WorkspaceStatus,
};
use steward_tests::fake_mcp::{CONFIG_ENV, FakeMcpConfig, GrandchildMode, HttpConfig, read_record};
use steward_tests::harness::{
    DEADLINE, Env, alive, bin, eventually, fake_tools as tools, mcp, mcp_servers, pid_of,
    process_tree, ready, recorded_pids, signal, wait_all_gone, wait_until, with_version as edited,
};

fn reason_is(s: &WorkspaceStatus, name: &str, reason: Reason) -> bool {
    mcp(s, name).is_some_and(|m| m.status.reason == Some(reason))
}

fn starts(record: &Path) -> usize {
    read_record(record)
        .unwrap()
        .iter()
        .filter(|e| e.event == "start")
        .count()
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

fn skipped_for(last: &ReloadSummary, name: &str, reason: Reason) -> bool {
    last.skipped
        .iter()
        .any(|s| s.name == name && s.reason == reason)
}

/// Every path under `dir`, relative, sorted.
fn tree(dir: &Path) -> BTreeSet<String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            out.insert(
                path.strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned(),
            );
            if entry.file_type().unwrap().is_dir() {
                walk(root, &path, out);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(dir, dir, &mut out);
    out
}

/// A command line that runs a fake MCP server with one tool, `s`, under
/// `sh`, ignoring SIGTERM, and that does not exit when its stdin closes: the
/// fake exits on the close, then the shell becomes `sleep 300` with SIGTERM
/// still ignored. Only SIGKILL stops it.
fn stubborn_server(env: &Env, name: &str) -> Value {
    let mut entry = env.fake_mcp(
        name,
        FakeMcpConfig {
            ignore_sigterm: true,
            ..tools(&["s"])
        },
    );
    let fake = entry["command"].clone();
    entry["command"] = json!("/bin/sh");
    entry["args"] = json!(["-c", "trap '' TERM; \"$0\"; exec sleep 300", fake]);
    entry
}

/// Whether `pid` ignores SIGTERM (its `SigIgn` mask has signal 15).
fn ignores_sigterm(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (libc::SIGTERM - 1)) != 0)
}

// ---- status --watch and the offline fallback --------------------------------

#[test]
fn status_watch_json_prints_a_new_document_when_a_server_changes_phase() {
    let env = Env::new();
    let a = env.fake_mcp("alpha", tools(&["a1"]));
    env.user_mcp_servers(&[("alpha", a.clone())]);
    let c = env.start(&[]);
    c.wait_for("alpha Ready", |s| ready(s, "alpha"));

    let watch = CliChild::spawn(&env, &["status", "--watch", "-o", "json"]);
    let parse = |line: &str| -> WorkspaceStatus {
        serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not one WorkspaceStatus per line ({e}): {line}"))
    };
    let first = parse(&watch.next_line("the first document"));
    assert!(ready(&first, "alpha"), "{first:?}");
    assert!(mcp(&first, "beta").is_none());

    // A new server: documents follow it to Ready.
    let b = env.fake_mcp(
        "beta",
        FakeMcpConfig {
            initialize_delay_ms: 300,
            ..tools(&["b1"])
        },
    );
    env.user_mcp_servers(&[("alpha", a.clone()), ("beta", b.clone())]);
    let lines = watch.read_until("a document with beta Ready", |l| ready(&parse(l), "beta"));
    let docs: Vec<WorkspaceStatus> = lines.iter().map(|l| parse(l)).collect();
    assert!(
        docs.iter().all(|d| ready(d, "alpha")),
        "alpha stays Ready in every document"
    );
    let beta_phases: Vec<Option<Phase>> = docs
        .iter()
        .map(|d| mcp(d, "beta").map(|m| m.status.phase))
        .collect();
    assert!(
        beta_phases.len() >= 2,
        "beta's phase changes show up as new documents: {beta_phases:?}"
    );

    // Stopping it: a document with beta Blocked.
    let out = env.steward(&["stop", "beta"]);
    assert!(out.status.success());
    watch.read_until("a document with beta Blocked/StoppedByUser", |l| {
        reason_is(&parse(l), "beta", Reason::StoppedByUser)
    });
}

#[test]
fn status_watch_table_prints_the_header_then_only_changed_rows() {
    let env = Env::new();
    let a = env.fake_mcp("alpha", tools(&["a1"]));
    let b = env.fake_mcp("beta", tools(&["b1"]));
    env.user_mcp_servers(&[("alpha", a.clone()), ("beta", b.clone())]);
    let c = env.start(&[]);
    let s = c.wait_for("both Ready", |s| ready(s, "alpha") && ready(s, "beta"));
    let pb = pid_of(&s, "beta").unwrap();

    let watch = CliChild::spawn(&env, &["status", "--watch"]);
    let header = watch.next_line("the header");
    for col in [
        "KIND", "NAME", "SOURCE", "PHASE", "REASON", "PID", "RESTARTS", "AGE",
    ] {
        assert!(header.contains(col), "header lacks {col}: {header}");
    }
    let rows = [watch.next_line("row 1"), watch.next_line("row 2")];
    assert!(
        rows.iter()
            .any(|r| r.contains("alpha") && r.contains("Ready")),
        "{rows:?}"
    );
    assert!(
        rows.iter()
            .any(|r| r.contains("beta") && r.contains(&pb.to_string())),
        "{rows:?}"
    );

    env.user_mcp_servers(&[("alpha", a), ("beta", edited(&b, "2"))]);
    let s = c.wait_for("beta restarted", |s| {
        ready(s, "beta") && pid_of(s, "beta").is_some_and(|p| p != pb)
    });
    let pb2 = pid_of(&s, "beta").unwrap().to_string();
    let mut later = watch.read_until("beta's new row", |l| {
        l.contains("beta") && l.contains("Ready") && l.split_whitespace().any(|w| w == pb2)
    });
    later.extend(watch.drain());
    for line in &later {
        assert!(
            !line.contains("KIND"),
            "the header is printed once: {later:?}"
        );
        assert!(
            line.contains("beta"),
            "only changed rows are printed (alpha did not change): {later:?}"
        );
    }
}

#[test]
fn status_without_a_controller_falls_back_to_the_offline_view_and_says_so() {
    let env = Env::new();
    env.user_mcp_servers(&[("alpha", env.fake_mcp("alpha", tools(&["a1"])))]);
    for args in [
        &["status"][..],
        &["status", "-o", "json"][..],
        &["status", "--watch", "-o", "json"][..],
    ] {
        let out = env.steward(args);
        assert!(out.status.success(), "{args:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("no controller is running") && stderr.contains("offline view"),
            "{args:?} says it fell back on stderr: {stderr}"
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("alpha"), "{args:?}: {stdout}");
        if args.contains(&"json") {
            let doc: WorkspaceStatus = serde_json::from_str(stdout.trim()).unwrap();
            assert!(!doc.controller.running, "{:?}", doc.controller);
            let m = mcp(&doc, "alpha").unwrap();
            assert_eq!(m.status.pid, None);
            assert_ne!(m.status.phase, Phase::Ready);
        }
    }
    assert!(
        !env.record("alpha").exists(),
        "the offline view spawned a server"
    );
}

// ---- streamable HTTP ----------------------------------------------------------

/// A fake MCP server in streamable-HTTP mode, started by the test (killed on drop).
struct HttpFake {
    child: Child,
    port: u16,
    record: PathBuf,
}

impl HttpFake {
    fn start(env: &Env, name: &str, mut config: FakeMcpConfig) -> HttpFake {
        let port_file = env.root.path().join(format!("{name}.port"));
        let record = env.record(name);
        config.name = name.to_owned();
        config.record = Some(record.clone());
        config.http = Some(HttpConfig {
            port_file: port_file.clone(),
        });
        let child = Command::new(bin("fake-mcp-server"))
            .env(CONFIG_ENV, config.to_json())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn the fake http server");
        let mut fake = HttpFake {
            child,
            port: 0,
            record,
        };
        wait_until(&format!("{name} writes its port"), || port_file.exists());
        fake.port = std::fs::read_to_string(&port_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        fake
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// `initialize` requests received so far (one per connection).
    fn initializes(&self) -> usize {
        read_record(&self.record)
            .unwrap()
            .iter()
            .filter(|e| e.event == "recv" && e.method() == Some("initialize"))
            .count()
    }

    fn requests(&self) -> usize {
        read_record(&self.record)
            .unwrap()
            .iter()
            .filter(|e| e.event == "recv")
            .count()
    }
}

impl Drop for HttpFake {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn streamable_http_and_sse_servers_connect_and_a_header_edit_reconnects_only_its_server() {
    let env = Env::new();
    let h1 = HttpFake::start(&env, "h1", tools(&["h1a", "h1b"]));
    let h2 = HttpFake::start(&env, "h2", tools(&["h2a"]));
    let sse = HttpFake::start(&env, "sse", tools(&["s1"]));
    let h1_entry = |token: &str| json!({"httpUrl": h1.url("/mcp"), "headers": {"X-Token": token}});
    let sse_entry = json!({"url": sse.url("/sse")});
    env.user_mcp_servers(&[("h1", h1_entry("one")), ("sse", sse_entry.clone())]);
    // Claude Code's format, in .mcp.json (gated: approved below).
    env.write(
        ".mcp.json",
        &mcp_servers(&[("h2", json!({"type": "http", "url": h2.url("/mcp")}))]),
    );
    let c = env.start(&[]);
    c.wait_for("h2 PendingApproval", |s| {
        reason_is(s, "h2", Reason::PendingApproval)
    });
    assert_eq!(h2.requests(), 0, "a pending http server was contacted");
    approve(&env, &["h2"]);
    let s = c.wait_for("h1, h2 and sse Ready", |s| {
        ready(s, "h1") && ready(s, "h2") && ready(s, "sse")
    });
    let m1 = mcp(&s, "h1").unwrap();
    assert_eq!(m1.spec.transport, McpTransport::Http);
    assert_eq!(
        m1.status.tools.as_deref(),
        Some(&["h1a".to_owned(), "h1b".to_owned()][..])
    );
    let m2 = mcp(&s, "h2").unwrap();
    assert_eq!(m2.spec.transport, McpTransport::Http);
    assert_eq!(
        m2.spec.http_url.as_deref(),
        Some(h2.url("/mcp").as_str()),
        "type http + url normalizes to httpUrl"
    );
    assert_eq!(m2.status.tools.as_deref(), Some(&["h2a".to_owned()][..]));
    let ms = mcp(&s, "sse").unwrap();
    assert_eq!(ms.spec.transport, McpTransport::Sse);
    assert_eq!(ms.status.tools.as_deref(), Some(&["s1".to_owned()][..]));
    assert_eq!(
        (h1.initializes(), h2.initializes(), sse.initializes()),
        (1, 1, 1)
    );

    // A header edit of h1: a new connection (a second initialize); h2 untouched.
    let gen1 = m1.metadata.generation;
    env.user_mcp_servers(&[("h1", h1_entry("two")), ("sse", sse_entry)]);
    let s = c.wait_for("h1 reconnected with the new headers", |s| {
        mcp(s, "h1").is_some_and(|m| {
            m.status.phase == Phase::Ready
                && m.metadata.generation == gen1 + 1
                && m.status.observed_hash.as_deref() == Some(m.spec.config_hash.as_str())
        }) && s
            .controller
            .last_reload
            .as_ref()
            .is_some_and(|l| l.trigger.contains("settings.json"))
    });
    assert_eq!(h1.initializes(), 2, "the header edit reconnected h1");
    assert_eq!(h2.initializes(), 1, "h2 was not reconnected");
    assert_eq!(sse.initializes(), 1, "sse was not reconnected");
    let last = s.controller.last_reload.clone().unwrap();
    assert_eq!(last.restarted, vec!["h1".to_owned()], "{last:?}");
}

// ---- approvals ---------------------------------------------------------------------

#[test]
fn a_pending_server_is_never_spawned_not_even_the_hot_reloaded_edit_of_an_approved_one() {
    let env = Env::new();
    let v1 = env.fake_mcp("proj-v1", tools(&["p"]));
    let v2 = env.fake_mcp("proj-v2", tools(&["p"]));
    env.write(".mcp.json", &mcp_servers(&[("proj", v1.clone())]));
    env.write(
        ".qwen/settings.json",
        &mcp_servers(&[("wsrv", env.fake_mcp("wsrv", tools(&["w"])))]),
    );
    let c = env.start(&[]);
    // lastReload lists the skip once the reconcile of the key has run.
    c.wait_for("the cold start skipped proj and wsrv", |s| {
        s.controller.last_reload.as_ref().is_some_and(|l| {
            skipped_for(l, "proj", Reason::PendingApproval)
                && skipped_for(l, "wsrv", Reason::PendingApproval)
        })
    });
    assert!(!env.record("proj-v1").exists(), "pending proj was spawned");
    assert!(!env.record("wsrv").exists(), "pending wsrv was spawned");

    // A gated server added by a hot reload is not spawned either.
    let late = env.fake_mcp("late", tools(&["l"]));
    env.write(
        ".mcp.json",
        &mcp_servers(&[("proj", v1.clone()), ("late", late.clone())]),
    );
    c.wait_for("the reload skipped late", |s| {
        s.controller
            .last_reload
            .as_ref()
            .is_some_and(|l| skipped_for(l, "late", Reason::PendingApproval))
    });
    assert!(!env.record("late").exists(), "pending late was spawned");

    approve(&env, &["proj"]);
    let s = c.wait_for("proj Ready", |s| ready(s, "proj"));
    let p1 = pid_of(&s, "proj").unwrap();

    // A hot-reload edit of the approved server: the old one stops, the
    // edited one waits for a new approval and never runs before it.
    env.write(".mcp.json", &mcp_servers(&[("proj", v2), ("late", late)]));
    let s = c.wait_for("proj PendingApproval after the edit", |s| {
        reason_is(s, "proj", Reason::PendingApproval)
    });
    let m = mcp(&s, "proj").unwrap();
    assert_eq!(m.status.phase, Phase::Blocked);
    assert_eq!(m.status.pid, None);
    assert_eq!(m.status.tools, None, "its tools are dropped");
    wait_until("the approved version exits", || !alive(p1));
    assert!(
        !env.record("proj-v2").exists(),
        "the edited version ran before re-approval"
    );

    approve(&env, &["proj"]);
    c.wait_for("the edited proj Ready after re-approval", |s| {
        ready(s, "proj")
    });
    assert_eq!(starts(&env.record("proj-v2")), 1);
    assert_eq!(starts(&env.record("proj-v1")), 1);
    let s = c.status();
    assert!(reason_is(&s, "late", Reason::PendingApproval));
    assert!(reason_is(&s, "wsrv", Reason::PendingApproval));
    assert!(!env.record("late").exists());
    assert!(!env.record("wsrv").exists());
}

#[test]
fn an_approval_survives_remove_and_identical_re_add() {
    let env = Env::new();
    let p = env.fake_mcp("proj", tools(&["p"]));
    env.write(".mcp.json", &mcp_servers(&[("proj", p.clone())]));
    let c = env.start(&[]);
    c.wait_for("proj PendingApproval", |s| {
        reason_is(s, "proj", Reason::PendingApproval)
    });
    approve(&env, &["proj"]);
    let s = c.wait_for("proj Ready", |s| ready(s, "proj"));
    let p1 = pid_of(&s, "proj").unwrap();
    let approvals = std::fs::read_to_string(&env.paths().approvals).unwrap();

    env.write(".mcp.json", "{}");
    c.wait_for("proj gone", |s| mcp(s, "proj").is_none());
    wait_until("proj exits", || !alive(p1));

    env.write(".mcp.json", &mcp_servers(&[("proj", p)]));
    let s = c.wait_for("proj Ready again without a new approval", |s| {
        ready(s, "proj")
    });
    assert_ne!(pid_of(&s, "proj"), Some(p1));
    assert_eq!(
        std::fs::read_to_string(&env.paths().approvals).unwrap(),
        approvals,
        "no new decision was needed or written"
    );
    assert_eq!(starts(&env.record("proj")), 2);
}

// ---- steward reload, lastReload, sources created later ---------------------------

#[test]
fn steward_reload_picks_up_added_and_removed_extensions() {
    let env = Env::new();
    let c = env.start(&[]);
    let ext_dir = env.home.join("extensions").join("myext");
    let ext = env.fake_mcp("extsrv", tools(&["e1"]));
    env.write_home(
        "extensions/myext/qwen-extension.json",
        &serde_json::to_string_pretty(
            &json!({"name": "myext", "version": "1.0.0", "mcpServers": {"extsrv": ext}}),
        )
        .unwrap(),
    );
    // Extensions are not watched: a later watched change is applied, the
    // extension still is not.
    env.user_mcp_servers(&[("marker", env.fake_mcp("marker", tools(&["m"])))]);
    let s = c.wait_for("marker Ready", |s| ready(s, "marker"));
    assert!(
        mcp(&s, "extsrv").is_none(),
        "the watcher picked up an extension"
    );
    assert!(!env.record("extsrv").exists());

    let out = env.steward(&["reload"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("added:") && l.contains("extsrv")),
        "{stdout}"
    );
    let s = c.wait_for("extsrv Ready", |s| ready(s, "extsrv"));
    let m = mcp(&s, "extsrv").unwrap();
    assert_eq!(m.metadata.source, SourceKind::Extension);
    let last = s.controller.last_reload.clone().unwrap();
    assert_eq!(last.added, vec!["extsrv".to_owned()], "{last:?}");
    assert!(last.trigger.contains("steward reload"), "{last:?}");
    assert!(last.unchanged.contains(&"marker".to_owned()), "{last:?}");
    let pe = pid_of(&s, "extsrv").unwrap();

    std::fs::remove_dir_all(&ext_dir).unwrap();
    let out = env.steward(&["reload"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("removed:") && l.contains("extsrv")),
        "{stdout}"
    );
    let s = c.wait_for("extsrv gone", |s| mcp(s, "extsrv").is_none());
    let last = s.controller.last_reload.clone().unwrap();
    assert_eq!(last.removed, vec!["extsrv".to_owned()], "{last:?}");
    wait_until("extsrv exits", || !alive(pe));
    assert!(ready(&s, "marker"));
}

#[test]
fn last_reload_reports_added_removed_restarted_and_unchanged_for_a_mixed_edit() {
    let env = Env::new();
    let [a, b, cc, d] = ["a", "b", "c", "d"].map(|n| env.fake_mcp(n, tools(&["t"])));
    env.user_mcp_servers(&[("a", a.clone()), ("b", b.clone()), ("c", cc.clone())]);
    let c = env.start(&[]);
    let s = c.wait_for("a, b, c Ready and the start reload done", |s| {
        ["a", "b", "c"].iter().all(|n| ready(s, n))
            && s.controller
                .last_reload
                .as_ref()
                .is_some_and(|l| l.trigger == "start" && l.added.len() == 3)
    });
    let pc = pid_of(&s, "c").unwrap();
    let pa = pid_of(&s, "a").unwrap();

    // Add d, remove a, edit b, leave c.
    env.user_mcp_servers(&[("b", edited(&b, "2")), ("c", cc), ("d", d)]);
    let s = c.wait_for("the mixed edit's reload summary", |s| {
        s.controller
            .last_reload
            .as_ref()
            .is_some_and(|l| l.trigger.contains("settings.json"))
    });
    let last = s.controller.last_reload.clone().unwrap();
    assert_eq!(last.added, vec!["d".to_owned()], "{last:?}");
    assert_eq!(last.removed, vec!["a".to_owned()], "{last:?}");
    assert_eq!(last.restarted, vec!["b".to_owned()], "{last:?}");
    assert_eq!(last.unchanged, vec!["c".to_owned()], "{last:?}");
    assert!(
        last.failed.is_empty() && last.skipped.is_empty(),
        "{last:?}"
    );
    assert!(ready(&s, "b") && ready(&s, "d"));
    assert_eq!(pid_of(&s, "c"), Some(pc), "c untouched");
    wait_until("a exits", || !alive(pa));
}

#[test]
fn mcp_json_and_qwen_settings_created_after_start_are_picked_up_and_nothing_is_created_in_the_workspace()
 {
    let env = Env::new();
    let before = tree(&env.ws);
    assert!(before.is_empty(), "{before:?}");
    let c = env.start(&[]);
    c.wait_for("the start reload done", |s| {
        s.controller.last_reload.is_some()
    });
    assert_eq!(tree(&env.ws), before, "the controller created something");

    env.write(
        ".mcp.json",
        &mcp_servers(&[("proj", env.fake_mcp("proj", tools(&["p"])))]),
    );
    c.wait_for("proj from the new .mcp.json", |s| {
        mcp(s, "proj").is_some_and(|m| m.metadata.source == SourceKind::ProjectMcpJson)
    });
    // `.qwen` did not exist when the controller started.
    env.write(
        ".qwen/settings.json",
        &mcp_servers(&[("wsrv", env.fake_mcp("wsrv", tools(&["w"])))]),
    );
    c.wait_for("wsrv from the new .qwen/settings.json", |s| {
        mcp(s, "wsrv").is_some_and(|m| m.metadata.source == SourceKind::WorkspaceSettings)
    });
    approve(&env, &["proj", "wsrv"]);
    c.wait_for("both Ready", |s| ready(s, "proj") && ready(s, "wsrv"));

    let expected: BTreeSet<String> = [".mcp.json", ".qwen", ".qwen/settings.json"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    // The fakes' own record files aside (the test's, not Steward's).
    let steward_made = |ws: &std::path::Path| -> BTreeSet<String> {
        tree(ws)
            .into_iter()
            .filter(|p| !p.starts_with(".records"))
            .collect()
    };
    assert_eq!(
        steward_made(&env.ws),
        expected,
        "only the files the test wrote"
    );
    drop(c);
    assert_eq!(
        steward_made(&env.ws),
        expected,
        "nothing left behind at shutdown"
    );
}

// ---- hung, stubborn and forking servers --------------------------------------------

#[test]
fn a_hung_server_is_detected_as_crashed_and_restarted() {
    let env = Env::new();
    let h = env.fake_mcp(
        "hung",
        FakeMcpConfig {
            stop_answering_after_ms: Some(1500),
            ..tools(&["h"])
        },
    );
    let ok = env.fake_mcp("ok", tools(&["o"]));
    env.user_mcp_servers(&[("hung", h), ("ok", ok)]);
    let c = env.start(&["--ping-interval-ms", "100"]);
    let s = c.wait_for("hung and ok Ready", |s| ready(s, "hung") && ready(s, "ok"));
    let (ph, po) = (pid_of(&s, "hung").unwrap(), pid_of(&s, "ok").unwrap());
    // Two pings time out (5 s each) before it counts as dead.
    let long = Duration::from_secs(60);
    let s = c.wait_for_within("hung Crashed or already restarted", long, |s| {
        reason_is(s, "hung", Reason::Crashed)
            || mcp(s, "hung").is_some_and(|m| m.status.restarts >= 1)
    });
    let m = mcp(&s, "hung").unwrap();
    if m.status.reason == Some(Reason::Crashed) {
        assert_eq!(m.status.phase, Phase::Failed);
        let msg = m.status.message.clone().unwrap_or_default();
        assert!(msg.contains("stopped answering"), "{msg}");
    }
    let s = c.wait_for_within("hung restarted and Ready", long, |s| {
        ready(s, "hung")
            && pid_of(s, "hung").is_some_and(|p| p != ph)
            && mcp(s, "hung").is_some_and(|m| m.status.restarts >= 1)
    });
    wait_until("the hung process is gone", || !alive(ph));
    assert_eq!(pid_of(&s, "ok"), Some(po), "a healthy server keeps its pid");
    assert_eq!(mcp(&s, "ok").unwrap().status.restarts, 0);
    assert!(
        c.log_text().contains("stopped answering"),
        "the log says why it was restarted"
    );
}

#[test]
fn a_server_ignoring_sigterm_is_still_stopped_on_removal_within_the_grace() {
    let env = Env::new();
    let stubborn = stubborn_server(&env, "stubborn");
    let ok = env.fake_mcp("ok", tools(&["o"]));
    env.user_mcp_servers(&[("stubborn", stubborn), ("ok", ok.clone())]);
    let c = env.start(&[]);
    let s = c.wait_for("both Ready", |s| ready(s, "stubborn") && ready(s, "ok"));
    let ps = pid_of(&s, "stubborn").unwrap();
    assert!(
        ignores_sigterm(ps),
        "the wrapper must really ignore SIGTERM"
    );
    let pids: Vec<u32> = process_tree(ps)
        .into_iter()
        .chain(recorded_pids(&env.records()))
        .filter(|p| Some(*p) != pid_of(&s, "ok"))
        .collect();

    let removed_at = Instant::now();
    env.user_mcp_servers(&[("ok", ok)]);
    // While it is being stopped, status says so: removed, Stopping, its pid.
    let stopping = |s: &WorkspaceStatus| {
        s.removed
            .iter()
            .find(|r| r.name == "stubborn")
            .map(|r| (r.phase, r.pid))
    };
    c.wait_for("stubborn removed and Stopping with its pid", |s| {
        mcp(s, "stubborn").is_none() && stopping(s) == Some((Some(Phase::Stopping), Some(ps)))
    });
    wait_all_gone("the stubborn server and its children", &pids);
    let took = removed_at.elapsed();
    // Close (2 s) + SIGTERM grace (3 s) + SIGKILL, plus the debounce and a
    // loaded machine's slack.
    assert!(
        took < Duration::from_secs(12),
        "stopping took {took:?}, beyond the bounded grace"
    );
    c.wait_for("stubborn removed, nothing of it running", |s| {
        mcp(s, "stubborn").is_none() && stopping(s) == Some((None, None))
    });
}

#[test]
fn a_server_spawning_a_grandchild_leaves_nothing_behind_on_removal() {
    for mode in [GrandchildMode::Group, GrandchildMode::Setsid] {
        let env = Env::new();
        let g = env.fake_mcp(
            "forker",
            FakeMcpConfig {
                spawn_grandchild: Some(mode),
                ..tools(&["g"])
            },
        );
        let ok = env.fake_mcp("ok", tools(&["o"]));
        env.user_mcp_servers(&[("forker", g), ("ok", ok.clone())]);
        let c = env.start(&[]);
        let s = c.wait_for("both Ready", |s| ready(s, "forker") && ready(s, "ok"));
        let pf = pid_of(&s, "forker").unwrap();
        let po = pid_of(&s, "ok").unwrap();
        wait_until("the grandchild is recorded", || {
            read_record(&env.record("forker"))
                .unwrap()
                .iter()
                .any(|e| e.event == "grandchild")
        });
        let grandchild = read_record(&env.record("forker"))
            .unwrap()
            .iter()
            .find(|e| e.event == "grandchild")
            .and_then(|e| e.message.get("pid").and_then(Value::as_u64))
            .unwrap() as u32;
        assert!(alive(grandchild), "{mode:?}: the grandchild runs");
        let mut pids = process_tree(pf);
        pids.push(grandchild);

        env.user_mcp_servers(&[("ok", ok)]);
        c.wait_for("forker gone", |s| mcp(s, "forker").is_none());
        wait_all_gone(
            &format!("{mode:?}: the forker and its grandchild exit"),
            &pids,
        );
        assert!(alive(po), "ok keeps running");
    }
}

#[test]
fn a_server_survives_a_minute_of_controller_idleness() {
    let env = Env::new();
    let a = env.fake_mcp("alpha", tools(&["a1"]));
    env.user_mcp_servers(&[("alpha", a)]);
    let c = env.start(&[]);
    let s = c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    let pid = pid_of(&s, "alpha").unwrap();

    // Deliberately a duration, not a wait for a condition: PR_SET_PDEATHSIG
    // fires when the thread that forked the child exits, and idle runtime
    // threads retire after about 10 s. A minute of nothing must kill nothing.
    std::thread::sleep(Duration::from_secs(65));

    assert!(alive(pid), "alpha died during the controller's idleness");
    let s = c.status();
    assert!(ready(&s, "alpha"), "{:?}", mcp(&s, "alpha"));
    assert_eq!(pid_of(&s, "alpha"), Some(pid), "alpha was restarted");
    assert_eq!(mcp(&s, "alpha").unwrap().status.restarts, 0);
    assert_eq!(starts(&env.record("alpha")), 1);
    // It still answers: the controller's pings (every 15 s) got answers late
    // in the minute (after 40 s: a margin of one ping slot for a loaded
    // machine, where this once found none after 50 s).
    let events = read_record(&env.record("alpha")).unwrap();
    let late_ping = events
        .iter()
        .filter(|e| e.event == "recv" && e.method() == Some("ping") && e.t >= 40_000)
        .find_map(|e| e.message.get("id").cloned())
        .expect("a ping after 40 s");
    assert!(
        events
            .iter()
            .any(|e| e.event == "send" && e.message.get("id") == Some(&late_ping)),
        "the late ping was answered"
    );
}

// ---- shutdown by signal ------------------------------------------------------------

#[test]
fn sigint_stops_every_server_exits_0_and_removes_the_socket() {
    let env = Env::new();
    let servers: Vec<(String, Value)> = (0..3)
        .map(|i| {
            let name = format!("s{i}");
            let entry = env.fake_mcp(&name, tools(&["t"]));
            (name, entry)
        })
        .collect();
    let refs: Vec<(&str, Value)> = servers
        .iter()
        .map(|(n, v)| (n.as_str(), v.clone()))
        .collect();
    env.user_mcp_servers(&refs);
    let mut c = env.start(&[]);
    c.wait_for("all Ready", |s| (0..3).all(|i| ready(s, &format!("s{i}"))));
    let socket = env.paths().socket_path();
    assert!(socket.exists());
    let pids = recorded_pids(&env.records());
    assert_eq!(pids.len(), 3, "{pids:?}");

    assert!(signal(c.pid() as i32, libc::SIGINT));
    let status = c.exit_status(DEADLINE);
    assert_eq!(status.code(), Some(0), "{status:?}");
    for pid in &pids {
        assert!(!alive(*pid), "server {pid} outlived the controller");
    }
    assert!(!socket.exists(), "the socket file was left behind");
    for i in 0..3 {
        let events = read_record(&env.record(&format!("s{i}"))).unwrap();
        assert!(
            events.iter().any(|e| e.event == "exit"),
            "s{i} was stopped in order, not killed: {:?}",
            events.last()
        );
    }
}

#[test]
fn a_second_signal_during_a_slow_shutdown_exits_at_once_and_no_server_survives() {
    let env = Env::new();
    let stubborn = stubborn_server(&env, "stubborn");
    let ok = env.fake_mcp("ok", tools(&["o"]));
    env.user_mcp_servers(&[("stubborn", stubborn), ("ok", ok)]);
    let mut c = env.start(&[]);
    let s = c.wait_for("both Ready", |s| ready(s, "stubborn") && ready(s, "ok"));
    let mut pids = process_tree(pid_of(&s, "stubborn").unwrap());
    pids.extend(process_tree(pid_of(&s, "ok").unwrap()));
    pids.extend(recorded_pids(&env.records()));

    assert!(signal(c.pid() as i32, libc::SIGINT));
    // The stubborn server holds the shutdown for close + grace (about 5 s).
    wait_until("the controller begins its shutdown", || {
        c.log_text().contains("signal received")
    });
    let second = Instant::now();
    assert!(signal(c.pid() as i32, libc::SIGINT));
    let status = c.exit_status(DEADLINE);
    let took = second.elapsed();
    assert_eq!(status.code(), Some(130), "{status:?}");
    assert!(
        took < Duration::from_millis(2500),
        "the second signal exited after {took:?}, not at once"
    );
    wait_all_gone("every server process dies with the controller", &pids);
}

#[test]
fn a_run_started_while_the_last_one_stops_waits_for_it_then_takes_over() {
    let env = Env::new();
    let stubborn = stubborn_server(&env, "stubborn");
    env.user_mcp_servers(&[("stubborn", stubborn)]);
    let mut first = env.start(&[]);
    let s = first.wait_for("Ready", |s| ready(s, "stubborn"));
    let old = pid_of(&s, "stubborn").unwrap();

    // A restart as a user types it: SIGTERM, then a new run at once, while
    // the stubborn server holds the first one's shutdown (about 5 s).
    assert!(signal(first.pid() as i32, libc::SIGTERM));
    wait_until("the first controller begins its shutdown", || {
        first.log_text().contains("controller stopping")
    });
    let log = env.root.path().join("second.log");
    let mut second =
        env.spawn_controller(&[], std::fs::File::create(&log).unwrap().into(), &[], log);
    wait_until("the second run says it waits", || {
        second
            .log_text()
            .contains("the previous controller is stopping; waiting for it to exit")
    });
    assert_eq!(first.exit_status(DEADLINE).code(), Some(0));
    second.wait_ready();
    second.wait_for("Ready under the second controller", |s| {
        ready(s, "stubborn") && pid_of(s, "stubborn").is_some_and(|p| p != old)
    });
    assert!(
        !second.log_text().contains("already running"),
        "{}",
        second.log_text()
    );
    let status = second.terminate().expect("the second controller runs");
    assert_eq!(status.code(), Some(0), "{status:?}");
}

// ---- admission and the process environment -----------------------------------------

#[test]
fn allowed_empty_list_denies_every_server_and_removing_the_key_restores_them() {
    let env = Env::new();
    let a = env.fake_mcp("a", tools(&["t"]));
    let b = env.fake_mcp("b", tools(&["t"]));
    let doc = |allowed: Option<Value>| {
        let mut doc = json!({"mcpServers": {"a": a, "b": b}});
        if let Some(allowed) = allowed {
            doc["mcp"] = json!({"allowed": allowed});
        }
        serde_json::to_string(&doc).unwrap()
    };
    env.write_home("settings.json", &doc(None));
    let c = env.start(&[]);
    let s = c.wait_for("both Ready", |s| ready(s, "a") && ready(s, "b"));
    let (pa, pb) = (pid_of(&s, "a").unwrap(), pid_of(&s, "b").unwrap());

    env.write_home("settings.json", &doc(Some(json!([]))));
    let s = c.wait_for("both NotAllowed", |s| {
        reason_is(s, "a", Reason::NotAllowed) && reason_is(s, "b", Reason::NotAllowed)
    });
    for name in ["a", "b"] {
        let m = mcp(&s, name).unwrap();
        assert_eq!(m.status.phase, Phase::Blocked);
        assert_eq!((m.status.pid, &m.status.tools), (None, &None));
    }
    wait_all_gone("both servers stop", &[pa, pb]);

    env.write_home("settings.json", &doc(None));
    let s = c.wait_for("both Ready again", |s| ready(s, "a") && ready(s, "b"));
    assert!(pid_of(&s, "a").is_some_and(|p| p != pa));
    assert!(pid_of(&s, "b").is_some_and(|p| p != pb));
}

#[test]
fn denylisted_env_keys_never_reach_the_server_and_config_path_does_not_pick_the_binary() {
    let env = Env::new();
    // A decoy `sh` (and `env`) in the directory the config's PATH names.
    let decoy = env.root.path().join("decoy-bin");
    let marker = env.root.path().join("decoy-ran");
    std::fs::create_dir_all(&decoy).unwrap();
    for name in ["sh", "env"] {
        let path = decoy.join(name);
        std::fs::write(
            &path,
            format!("#!/bin/sh\ntouch '{}'\nexit 1\n", marker.display()),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // Where the sandboxed server may write: the workspace.
    let dump = env.records().join("env-dump.txt");
    let mut entry = env.fake_mcp("envy", tools(&["e"]));
    let fake = entry["command"].clone();
    // Bare `sh`: resolved with the controller's PATH, not the config's. The
    // wrapper dumps its environment with a builtin, then becomes the fake.
    entry["command"] = json!("sh");
    entry["args"] = json!(["-c", "export -p > \"$0\"; exec \"$1\"", dump, fake]);
    entry["env"]["LD_PRELOAD"] = json!("x");
    entry["env"]["node_options"] = json!("y");
    entry["env"]["PATH"] = json!(decoy.to_string_lossy());
    env.user_mcp_servers(&[("envy", entry)]);
    let c = env.start(&[]);
    let s = c.wait_for("envy Ready", |s| ready(s, "envy"));
    assert!(!marker.exists(), "the config's PATH chose the binary");
    // The loader drops them: not in the spec, a warning in
    // the source's status says so.
    let m = mcp(&s, "envy").unwrap();
    assert_eq!(
        m.spec
            .env
            .as_ref()
            .and_then(|e| e.get("LD_PRELOAD"))
            .map(String::as_str),
        None,
        "the spec holds no denylisted key"
    );
    assert!(
        s.sources
            .iter()
            .flat_map(|src| &src.warnings)
            .any(|w| w.message.contains("\"LD_PRELOAD\"") && w.message.contains("dropped")),
        "{:?}",
        s.sources
    );
    let dumped = std::fs::read_to_string(&dump).unwrap();
    assert!(dumped.contains(CONFIG_ENV), "the dump works: {dumped}");
    let lower = dumped.to_lowercase();
    for key in ["ld_preload", "node_options"] {
        assert!(!lower.contains(key), "{key} reached the server:\n{dumped}");
    }
    assert!(
        c.log_text().contains("node_options"),
        "the controller logs the dropped keys"
    );
}

#[test]
fn steward_reload_with_nothing_changed_answers_at_once() {
    let env = Env::new();
    env.user_mcp_servers(&[("alpha", env.fake_mcp("alpha", tools(&["a1"])))]);
    let c = env.start(&[]);
    let s = c.wait_for("alpha Ready and the start reload done", |s| {
        ready(s, "alpha") && s.controller.last_reload.is_some()
    });
    let pid = pid_of(&s, "alpha");
    for round in 0..2 {
        let mut reload = CliChild::spawn(&env, &["reload"]);
        let code = eventually(
            &format!("round {round}: `steward reload` with nothing to do to answer"),
            DEADLINE,
            Duration::from_millis(20),
            || reload.child.try_wait().unwrap().ok_or(""),
        );
        assert!(code.success(), "round {round}: {}", reload.stderr_text());
        let out = reload.next_line("what the reload did");
        assert!(
            out.contains("nothing to reconcile") || out.starts_with("added:"),
            "round {round}: {out}"
        );
    }
    assert_eq!(pid_of(&c.status(), "alpha"), pid, "nothing restarted");
}

#[test]
fn status_watch_table_started_on_an_empty_workspace_prints_the_header_with_the_first_rows() {
    let env = Env::new();
    let c = env.start(&[]);
    c.wait_for("the start reload done", |s| {
        s.controller.last_reload.is_some()
    });
    let watch = CliChild::spawn(&env, &["status", "--watch"]);
    env.user_mcp_servers(&[("alpha", env.fake_mcp("alpha", tools(&["a1"])))]);
    c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    let lines = watch.read_until("alpha's row", |l| l.contains("alpha"));
    let lines: Vec<&String> = lines.iter().filter(|l| !l.trim().is_empty()).collect();
    assert!(
        lines
            .first()
            .is_some_and(|l| l.contains("KIND") && l.contains("PHASE")),
        "the header comes before the first row: {lines:?}"
    );
}

#[test]
fn status_watch_ends_cleanly_when_the_controller_stops() {
    let env = Env::new();
    env.user_mcp_servers(&[("alpha", env.fake_mcp("alpha", tools(&["a1"])))]);
    let mut c = env.start(&[]);
    c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    let mut watch = CliChild::spawn(&env, &["status", "--watch", "-o", "json"]);
    watch.next_line("the first document");
    let status = c.terminate().unwrap();
    assert!(status.success(), "{status:?}");
    let code = eventually(
        "the watch to end with the controller",
        DEADLINE,
        Duration::from_millis(20),
        || watch.child.try_wait().unwrap().ok_or(""),
    );
    assert!(code.success(), "{code:?}: {}", watch.stderr_text());
    assert!(
        watch.stderr_text().contains("the controller stopped"),
        "{}",
        watch.stderr_text()
    );
}

#[test]
fn a_crashed_servers_escaped_grandchild_does_not_leak() {
    for mode in [GrandchildMode::Group, GrandchildMode::Setsid] {
        let env = Env::new();
        let g = env.fake_mcp(
            "crasher",
            FakeMcpConfig {
                spawn_grandchild: Some(mode),
                crash_after_ms: Some(1000),
                ..tools(&["g"])
            },
        );
        env.user_mcp_servers(&[("crasher", g)]);
        let c = env.start(&[]);
        c.wait_for("crasher restarted after its first crash", |s| {
            mcp(s, "crasher").is_some_and(|m| m.status.restarts >= 1)
        });
        let events = read_record(&env.record("crasher")).unwrap();
        let first = events.iter().find(|e| e.event == "start").unwrap().pid;
        let grandchild = events
            .iter()
            .find(|e| e.event == "grandchild" && e.pid == first)
            .and_then(|e| e.message.get("pid").and_then(Value::as_u64))
            .unwrap() as u32;
        wait_all_gone(
            &format!("{mode:?}: the first crasher and its grandchild are gone"),
            &[first, grandchild],
        );
    }
}

#[test]
fn sigint_during_a_slow_start_exits_0_promptly_and_kills_the_starting_server() {
    let env = Env::new();
    let slow = env.fake_mcp(
        "slow",
        FakeMcpConfig {
            hang_in_initialize: true,
            ..tools(&["s"])
        },
    );
    env.user_mcp_servers(&[("slow", slow)]);
    let mut c = env.start(&[]);
    c.wait_for("slow Starting", |s| {
        mcp(s, "slow").is_some_and(|m| m.status.phase == Phase::Starting)
    });
    wait_until("slow spawned", || starts(&env.record("slow")) == 1);
    let pids = recorded_pids(&env.records());
    let sent = Instant::now();
    assert!(signal(c.pid() as i32, libc::SIGINT));
    let status = c.exit_status(DEADLINE);
    let took = sent.elapsed();
    assert_eq!(status.code(), Some(0), "{status:?}");
    // The handshake deadline is 30 s: an in-flight start must be abandoned.
    assert!(
        took < Duration::from_secs(10),
        "shutdown waited {took:?} for a start in flight"
    );
    wait_all_gone("the starting server is gone", &pids);
}

#[test]
fn deleted_sources_are_empty_and_a_recreated_qwen_dir_is_followed_again() {
    let env = Env::new();
    let proj = env.fake_mcp("proj", tools(&["p"]));
    let wsrv = env.fake_mcp("wsrv", tools(&["w"]));
    env.write(".mcp.json", &mcp_servers(&[("proj", proj.clone())]));
    env.write(
        ".qwen/settings.json",
        &mcp_servers(&[("wsrv", wsrv.clone())]),
    );
    let c = env.start(&[]);
    approve(&env, &["proj", "wsrv"]);
    let s = c.wait_for("both Ready", |s| ready(s, "proj") && ready(s, "wsrv"));
    let (pp, pw) = (pid_of(&s, "proj").unwrap(), pid_of(&s, "wsrv").unwrap());

    // A deleted file is an empty, valid source.
    std::fs::remove_file(env.ws.join(".mcp.json")).unwrap();
    c.wait_for("proj gone", |s| mcp(s, "proj").is_none());
    wait_until("proj exits", || !alive(pp));
    // The whole directory of a source goes away (a branch switch), then
    // comes back: the watch follows it down again.
    std::fs::remove_dir_all(env.ws.join(".qwen")).unwrap();
    let s = c.wait_for("wsrv gone", |s| mcp(s, "wsrv").is_none());
    assert!(
        s.sources
            .iter()
            .filter(|src| src.kind == SourceKind::WorkspaceSettings
                || src.kind == SourceKind::ProjectMcpJson)
            .all(|src| src.state == steward_schema::resource::SourceState::Absent),
        "{:?}",
        s.sources
    );
    wait_until("wsrv exits", || !alive(pw));
    env.write(".qwen/settings.json", &mcp_servers(&[("wsrv", wsrv)]));
    env.write(".mcp.json", &mcp_servers(&[("proj", proj)]));
    // Identical re-adds keep their approvals.
    c.wait_for("both Ready again", |s| ready(s, "proj") && ready(s, "wsrv"));
}

#[test]
fn a_server_that_cannot_be_executed_fails_with_the_reason_and_others_run() {
    let env = Env::new();
    // Passes the up-front checks (exists, executable) but its interpreter
    // does not exist: the exec itself fails.
    let script = env.ws.join("broken.sh");
    std::fs::write(&script, "#!/nonexistent/interpreter\necho hi\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ok = env.fake_mcp("ok", tools(&["o"]));
    env.user_mcp_servers(&[
        ("broken", json!({"command": script.to_string_lossy()})),
        ("ok", ok),
    ]);
    let c = env.start(&[]);
    let s = c.wait_for("broken Failed, ok Ready", |s| {
        ready(s, "ok") && mcp(s, "broken").is_some_and(|m| m.status.phase == Phase::Failed)
    });
    let msg = mcp(&s, "broken")
        .unwrap()
        .status
        .message
        .clone()
        .unwrap_or_default();
    assert!(
        msg.contains(&format!("cannot execute {}", script.display())) && msg.contains("127"),
        "the status says what could not be executed: {msg}"
    );
}

//! Envtest: kubectl habits — what `steward run` logs, `describe`, `logs`,
//! `events`, `restart`, the status table and secrets in status, against the
//! real controller and fake servers. Every wait is a condition with a
//! deadline.

use crate::common;

use steward_tests::harness::{Env, fake_tools, pid_of, ready};

#[test]
fn controller_log_has_no_colour_off_a_terminal_and_plain_pids() {
    let env = Env::new();
    env.user_mcp_servers(&[("alpha", env.fake_mcp("alpha", fake_tools(&["a1"])))]);
    let c = env.start(&[]);
    let s = c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    let pid = pid_of(&s, "alpha").unwrap();
    let log = c.log_text();
    assert!(!log.contains('\x1b'), "ANSI escapes in a log file:\n{log}");
    assert!(
        log.lines()
            .any(|l| l.contains("ready") && l.contains(&format!("pid={pid}"))),
        "no `pid={pid}` on the ready line:\n{log}"
    );
    assert!(
        !log.contains("Some("),
        "Option debug output in the log:\n{log}"
    );
}

/// Start offset of every column of a table header (words separated by
/// three or more spaces; no header word holds a space).
fn column_starts(header: &str) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut prev = ' ';
    for (i, c) in header.char_indices() {
        if c != ' ' && prev == ' ' {
            starts.push(i);
        }
        prev = c;
    }
    starts
}

/// Whether every cell of `row` starts at a column start of the header.
fn aligned(starts: &[usize], row: &str) -> bool {
    let bytes = row.as_bytes();
    starts
        .iter()
        .skip(1)
        .all(|&s| s >= bytes.len() || (bytes[s - 1] == b' ' && bytes[s] != b' '))
}

#[test]
fn status_watch_rows_stay_aligned_under_the_first_header() {
    let env = Env::new();
    // A short name, then a crash loop: REASON grows from "-" to
    // "CrashLoopBackOff" and PID from "-" to a number after the header
    // was printed.
    let flaky = env.fake_mcp(
        "f",
        steward_tests::fake_mcp::FakeMcpConfig {
            crash_after_listed_ms: Some(200),
            ..fake_tools(&["t"])
        },
    );
    env.user_mcp_servers(&[("f", flaky)]);
    let c = env.start(&[]);
    let watch = common::CliChild::spawn(&env, &["status", "--watch"]);
    let header = watch.next_line("the header");
    assert!(header.starts_with("KIND"), "{header}");
    let starts = column_starts(&header);
    assert_eq!(starts.len(), 8, "{header}");
    let lines = watch.read_until("a CrashLoopBackOff row", |l| l.contains("CrashLoopBackOff"));
    for line in &lines {
        assert!(
            aligned(&starts, line),
            "misaligned row under the header:\n{header}\n{line}\nall rows:\n{}",
            lines.join("\n")
        );
    }
    drop(c);
}

#[test]
fn status_wide_adds_the_first_line_of_the_message() {
    let env = Env::new();
    env.user_mcp_servers(&[(
        "ghost",
        serde_json::json!({"command": "/nonexistent/steward-test-ghost"}),
    )]);
    let c = env.start(&[]);
    c.wait_for("ghost Failed", |s| {
        steward_tests::harness::mcp(s, "ghost")
            .is_some_and(|m| m.status.phase == steward_schema::resource::Phase::Failed)
    });
    let out = env.steward(&["status", "-o", "wide"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    assert!(header.ends_with("AGE   SANDBOX   MESSAGE"), "{text}");
    let row = lines.next().unwrap();
    let message_at = header.find("MESSAGE").unwrap();
    assert!(row[message_at..].contains("command not found"), "{text}");
    assert_eq!(lines.next(), None, "one line per server:\n{text}");
    // The plain table has no MESSAGE column.
    let plain = String::from_utf8(env.steward(&["status"]).stdout).unwrap();
    assert!(plain.lines().next().unwrap().ends_with("AGE"), "{plain}");
}

/// The stdout of a successful `steward ARGS` (panics with stderr otherwise).
fn stdout_of(env: &Env, args: &[&str]) -> String {
    let out = env.steward(args);
    assert!(
        out.status.success(),
        "steward {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A fake MCP server that writes `lines` on stderr when it starts.
fn chatty(env: &Env, name: &str, lines: &[&str]) -> serde_json::Value {
    env.fake_mcp(
        name,
        steward_tests::fake_mcp::FakeMcpConfig {
            stderr_lines: lines.iter().map(|s| (*s).to_owned()).collect(),
            ..fake_tools(&["t"])
        },
    )
}

#[test]
fn live_status_and_watch_redact_secrets_unless_asked() {
    let env = Env::new();
    let mut entry = env.fake_mcp("alpha", fake_tools(&["a1"]));
    entry["env"]["API_KEY"] = serde_json::json!("sk-live-secret");
    entry["env"]["HOME_AGAIN"] = serde_json::json!("${HOME}");
    entry["args"] = serde_json::json!(["--token=sk-arg-secret"]);
    // The fake rejects arguments: keep them for status only by not starting it.
    entry["disabled"] = serde_json::json!(true);
    env.user_mcp_servers(&[("alpha", entry)]);
    let c = env.start(&[]);
    c.wait_for("alpha Blocked", |s| {
        steward_tests::harness::mcp(s, "alpha")
            .is_some_and(|m| m.status.phase == steward_schema::resource::Phase::Blocked)
    });
    for format in ["json", "yaml", "wide"] {
        let text = stdout_of(&env, &["status", "-o", format]);
        assert!(!text.contains("sk-live-secret"), "-o {format}:\n{text}");
        assert!(!text.contains("sk-arg-secret"), "-o {format}:\n{text}");
    }
    let text = stdout_of(&env, &["status", "-o", "json"]);
    assert!(
        text.contains("${HOME}"),
        "references are shown as written:\n{text}"
    );
    let text = stdout_of(&env, &["status", "-o", "json", "--show-secrets"]);
    assert!(
        text.contains("sk-live-secret") && text.contains("sk-arg-secret"),
        "{text}"
    );
    assert!(
        !text.contains("${HOME}"),
        "--show-secrets shows expanded values:\n{text}"
    );

    let watch = common::CliChild::spawn(&env, &["status", "--watch", "-o", "json"]);
    let first = watch.next_line("the first watched document");
    assert!(first.contains("<redacted>"), "{first}");
    assert!(!first.contains("sk-live-secret"), "{first}");
    let watch =
        common::CliChild::spawn(&env, &["status", "--watch", "-o", "json", "--show-secrets"]);
    let first = watch.next_line("the first watched document");
    assert!(first.contains("sk-live-secret"), "{first}");
    drop(c);
}

#[test]
fn logs_show_the_current_and_the_previous_process() {
    let env = Env::new();
    env.user_mcp_servers(&[("alpha", chatty(&env, "alpha", &["first life"]))]);
    let c = env.start(&[]);
    let s = c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    let first_pid = pid_of(&s, "alpha").unwrap();
    assert_eq!(stdout_of(&env, &["logs", "alpha"]), "first life\n");
    let out = env.steward(&["logs", "alpha", "--previous"]);
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no previous process"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A config change starts a second process; the first one's lines stay
    // available as --previous.
    let edited = chatty(&env, "alpha", &["second life", "more"]);
    env.user_mcp_servers(&[("alpha", edited)]);
    c.wait_for("alpha restarted", |s| {
        ready(s, "alpha") && pid_of(s, "alpha") != Some(first_pid)
    });
    assert_eq!(stdout_of(&env, &["logs", "alpha"]), "second life\nmore\n");
    assert_eq!(stdout_of(&env, &["logs", "alpha", "--tail", "1"]), "more\n");
    assert_eq!(stdout_of(&env, &["logs", "alpha", "-p"]), "first life\n");

    let out = env.steward(&["logs", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no such server"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn logs_follow_across_a_restart() {
    let env = Env::new();
    env.user_mcp_servers(&[("alpha", chatty(&env, "alpha", &["one"]))]);
    let c = env.start(&[]);
    c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    let follow = common::CliChild::spawn(&env, &["logs", "alpha", "-f"]);
    assert_eq!(follow.next_line("the kept line"), "one");
    env.user_mcp_servers(&[("alpha", chatty(&env, "alpha", &["two"]))]);
    assert_eq!(follow.next_line("the new process's line"), "two");
    common::wait_until_text(
        "the restart noted on stderr",
        || follow.stderr_text(),
        "a new process started",
    );
    // Removing the server ends the follow, saying why.
    env.user_mcp_servers(&[]);
    let mut follow = follow;
    let pid = follow.child.id();
    steward_tests::harness::wait_until("logs -f exits", || !steward_tests::harness::alive(pid));
    assert!(follow.child.wait().unwrap().success());
    let stderr = follow.stderr_text();
    assert!(stderr.contains("left the configuration"), "{stderr}");
    assert!(!stderr.contains("the controller stopped"), "{stderr}");
    drop(c);
}

#[test]
fn events_record_starts_crashes_and_reloads_and_watch_streams_them() {
    let env = Env::new();
    env.user_mcp_servers(&[("alpha", env.fake_mcp("alpha", fake_tools(&["a1"])))]);
    let c = env.start(&[]);
    c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    let table = stdout_of(&env, &["events"]);
    let header = table.lines().next().unwrap();
    assert!(header.starts_with("LAST SEEN"), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.contains("Started") && l.contains("mcpserver/alpha")),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.contains("Reloaded") && l.contains("start: added alpha")),
        "{table}"
    );

    let watch = common::CliChild::spawn(&env, &["events", "-w", "-o", "json"]);
    // Every kept event first, then the new ones as they happen.
    watch.read_until("the kept Started event", |l| l.contains("\"Started\""));
    let flaky = env.fake_mcp(
        "flaky",
        steward_tests::fake_mcp::FakeMcpConfig {
            crash_after_listed_ms: Some(200),
            ..fake_tools(&["f"])
        },
    );
    env.user_mcp_servers(&[
        ("alpha", env.fake_mcp("alpha", fake_tools(&["a1"]))),
        ("flaky", flaky),
    ]);
    let lines = watch.read_until("a Crashed event for flaky", |l| {
        l.contains("\"Crashed\"") && l.contains("\"flaky\"")
    });
    let events: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let crashed = events.last().unwrap();
    assert_eq!(crashed["type"], "Warning");
    assert_eq!(crashed["involvedObject"]["kind"], "McpServer");
    assert!(
        crashed["message"].as_str().unwrap().contains("exited"),
        "{crashed}"
    );
    // A crash loop counts up instead of repeating itself.
    c.wait_for("flaky crashed twice", |s| {
        steward_tests::harness::mcp(s, "flaky").is_some_and(|m| m.status.restarts >= 3)
    });
    let listed: serde_json::Value =
        serde_json::from_str(&stdout_of(&env, &["events", "-o", "json"])).unwrap();
    assert_eq!(listed["kind"], "EventList");
    let starting: Vec<&serde_json::Value> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["involvedObject"]["name"] == "flaky" && e["reason"] == "Starting")
        .collect();
    assert_eq!(starting.len(), 1, "{listed:#}");
    assert!(starting[0]["count"].as_u64().unwrap() >= 3, "{listed:#}");
}

#[test]
fn describe_shows_status_stderr_and_events_of_one_server() {
    let env = Env::new();
    env.user_mcp_servers(&[("alpha", chatty(&env, "alpha", &["alpha is up"]))]);
    let c = env.start(&[]);
    let s = c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    let pid = pid_of(&s, "alpha").unwrap();
    let text = stdout_of(&env, &["describe", "alpha"]);
    for want in [
        "Name:                   alpha".to_owned(),
        "Kind:                   McpServer".to_owned(),
        "  Phase:                Ready".to_owned(),
        format!("  PID:                  {pid}"),
        "  Tools:                t".to_owned(),
        format!("Last Stderr Lines (pid {pid}):\n  alpha is up"),
    ] {
        assert!(text.contains(&want), "missing {want:?} in:\n{text}");
    }
    let events = text.split_once("Events:\n").map_or("", |(_, e)| e);
    assert!(
        events.lines().any(|l| l.contains("Normal")
            && l.contains("Started")
            && l.ends_with(&format!("ready (pid {pid}, 1 tools)"))),
        "no Started event in:\n{text}"
    );
    let out = env.steward(&["describe", "ghost"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn restart_stops_and_starts_once_and_keeps_the_server_desired() {
    let env = Env::new();
    env.user_mcp_servers(&[
        ("alpha", env.fake_mcp("alpha", fake_tools(&["a1"]))),
        ("beta", env.fake_mcp("beta", fake_tools(&["b1"]))),
    ]);
    let c = env.start(&[]);
    let s = c.wait_for("both Ready", |s| ready(s, "alpha") && ready(s, "beta"));
    let (alpha, beta) = (pid_of(&s, "alpha").unwrap(), pid_of(&s, "beta").unwrap());
    let out = stdout_of(&env, &["restart", "alpha"]);
    let s = c.status();
    let new = pid_of(&s, "alpha").unwrap();
    assert_ne!(new, alpha);
    assert_eq!(
        out,
        format!("restarted McpServer alpha (pid {alpha} -> {new})\n")
    );
    assert!(ready(&s, "alpha"));
    assert!(
        !steward_tests::harness::alive(alpha),
        "the old process is gone"
    );
    assert_eq!(pid_of(&s, "beta"), Some(beta), "beta is untouched");
    let m = steward_tests::harness::mcp(&s, "alpha").unwrap();
    assert_eq!(m.metadata.generation, 1, "a restart is not a config change");

    // Nothing is persisted: a controller restart runs it as usual.
    assert!(
        !env.paths().stopped_file().exists()
            || !std::fs::read_to_string(env.paths().stopped_file())
                .unwrap()
                .contains("alpha")
    );

    // A stopped server has nothing to restart.
    stdout_of(&env, &["stop", "beta"]);
    let out = env.steward(&["restart", "beta"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("steward start beta"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_language_server_keeps_its_stderr_too() {
    let env = Env::new();
    let mut entry = env.fake_lsp("py", steward_tests::fake_lsp::Config::default(), &[".py"]);
    let fake = entry["command"].as_str().unwrap().to_owned();
    entry["command"] = serde_json::json!("sh");
    entry["args"] = serde_json::json!(["-c", format!("echo lsp says hi >&2; exec '{fake}'")]);
    env.write(
        ".lsp.json",
        &steward_tests::harness::lsp_json(&[("py", entry)]),
    );
    let c = env.start(&[]);
    c.wait_for("py Ready", |s| steward_tests::harness::lsp_ready(s, "py"));
    // The wrapper's line, then the fake's own ("started (pid …)"): one process.
    let logs = stdout_of(&env, &["logs", "py"]);
    let lines: Vec<&str> = logs.lines().collect();
    assert_eq!(lines.first(), Some(&"lsp says hi"), "{logs}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("fake-lsp-server py: started")),
        "{logs}"
    );
    assert_eq!(stdout_of(&env, &["logs", "py", "--kind", "lsp"]), logs);
    let out = env.steward(&["logs", "py", "--kind", "mcp"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn approval_shows_up_as_events() {
    let env = Env::new();
    let proj = env.fake_mcp("proj", fake_tools(&["p1"]));
    env.write(
        ".mcp.json",
        &steward_tests::harness::mcp_servers(&[("proj", proj)]),
    );
    let c = env.start(&[]);
    c.wait_for("proj PendingApproval", |s| {
        steward_tests::harness::mcp(s, "proj").is_some_and(|m| {
            m.status.reason == Some(steward_schema::resource::Reason::PendingApproval)
        })
    });
    stdout_of(&env, &["approve", "proj"]);
    c.wait_for("proj Ready", |s| ready(s, "proj"));
    let listed: serde_json::Value =
        serde_json::from_str(&stdout_of(&env, &["events", "-o", "json"])).unwrap();
    let of_proj: Vec<(String, String)> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["involvedObject"]["name"] == "proj")
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_owned(),
                e["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("Warning", "PendingApproval"),
        ("Normal", "Admitted"),
        ("Normal", "Started"),
    ]
    .iter()
    .map(|(t, r)| ((*t).to_owned(), (*r).to_owned()))
    .collect();
    assert_eq!(of_proj, expected, "{listed:#}");
}

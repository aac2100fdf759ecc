//! Envtest: kubectl habits — what `steward run` logs, `describe`, `logs`,
//! `events`, `restart`, the status table and secrets in status, against the
//! real controller and fake servers. Every wait is a condition with a
//! deadline.

mod common;

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
            crash_after_ms: Some(200),
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
    assert!(header.ends_with("AGE   MESSAGE"), "{text}");
    let row = lines.next().unwrap();
    let message_at = header.find("MESSAGE").unwrap();
    assert!(row[message_at..].contains("command not found"), "{text}");
    assert_eq!(lines.next(), None, "one line per server:\n{text}");
    // The plain table has no MESSAGE column.
    let plain = String::from_utf8(env.steward(&["status"]).stdout).unwrap();
    assert!(plain.lines().next().unwrap().ends_with("AGE"), "{plain}");
}

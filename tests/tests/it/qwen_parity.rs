//! Differential tests against the real Qwen Code (`@qwen-code/qwen-code`,
//! pinned in `.ci/run`): the same files, the same HOME_DIR, the same
//! environment, and the two tools must agree on approvals — a decision made
//! by one is honoured by the other, and the hashes they write are
//! byte-identical.
//!
//! Qwen Code runs with HOME and QWEN_HOME in the test's temp dir (it never
//! sees the real ~/.qwen); `qwen mcp approve|reject|list` need no model or
//! API key. The servers are unreachable on purpose (a missing command,
//! port 9): `qwen mcp list` tries to connect the approved ones and fails
//! fast. This tier is never skipped: a missing Qwen Code fails the test.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output};

use crate::common::peer;
use serde_json::{Value, json};
use steward_tests::harness::Env;

/// Every server the corpus has in gated scopes (`.mcp.json`, workspace
/// settings), by name, with the entry as written.
fn mcp_json_corpus() -> Vec<(&'static str, Value)> {
    vec![
        (
            "plain-stdio",
            json!({"command": "steward-parity-missing", "args": ["--flag", "$HOME"]}),
        ),
        (
            "claude-stdio",
            json!({"type": "stdio", "command": "steward-parity-missing", "args": []}),
        ),
        (
            "claude-http",
            json!({"type": "http", "url": "http://127.0.0.1:9/mcp"}),
        ),
        (
            "claude-sse",
            json!({"type": "sse", "url": "http://127.0.0.1:9/sse"}),
        ),
        (
            "bare-url",
            json!({"url": "http://127.0.0.1:9/sse", "headers": {"Authorization": "Bearer ${PARITY_TOKEN}"}}),
        ),
        (
            "http-url",
            json!({"httpUrl": "http://127.0.0.1:9/mcp", "headers": {"X-Key": "$PARITY_UNSET"}}),
        ),
        (
            "vars",
            json!({"command": "steward-parity-missing", "env": {
                "TOKEN": "${PARITY_TOKEN}", "GONE": "$PARITY_UNSET", "DEF": "${PARITY_UNSET:-x}"
            }}),
        ),
        (
            "nulls",
            json!({"command": "steward-parity-missing", "cwd": null, "env": null, "description": null}),
        ),
        (
            "numbers",
            json!({"command": "steward-parity-missing", "timeout": 30000.0, "discoveryTimeoutMs": 1500,
                   "trust": true, "includeTools": ["a(x)", "b"]}),
        ),
        (
            "unicode",
            json!({"command": "steward-parity-missing",
                   "env": {"b": "1", "A": "2", "é": "3", "😀": "4", "～": "5"},
                   "description": "ünïcødé \" \\ \n"}),
        ),
        (
            "type-vs-fields",
            json!({"type": "sse", "command": "steward-parity-missing", "url": "http://127.0.0.1:9/sse"}),
        ),
        (
            "extras",
            json!({"httpUrl": "http://127.0.0.1:9/mcp", "authProviderType": "dynamic_discovery",
                   "oauth": {"enabled": false, "scopes": ["b", "a"]},
                   "unknownField": {"z": 1, "a": [1, {"y": null}]}}),
        ),
        (
            "numeric-env",
            json!({"command": "steward-parity-missing", "env": {"PORT": 8080, "DEBUG": true}}),
        ),
        ("shadowed", json!({"command": "steward-parity-missing"})),
        // `dev` (VS Code's form, with its `debug`; mcp-hub's, with
        // `enabled`): an unknown key to Qwen Code, held and hashed with the
        // entry as written, so the decision covers it in both tools.
        (
            "dev-vscode",
            json!({"command": "steward-parity-missing", "args": ["server.py"],
                   "dev": {"watch": ["src/**/*.py"], "build": "make", "debug": {"type": "python"}}}),
        ),
        (
            "dev-hub",
            json!({"command": "steward-parity-missing",
                   "dev": {"enabled": true, "watch": "src/**", "cwd": "$HOME/srv"}}),
        ),
        // Steward's `sandbox` key, narrower than the default: Qwen Code
        // loads the entry (and hashes the key as written), and an approval
        // made by either tool admits it in both.
        (
            "sandbox-named",
            json!({"command": "steward-parity-missing", "sandbox": "none"}),
        ),
        (
            "sandbox-inline",
            json!({"command": "steward-parity-missing", "sandbox": {
                "read": ["./data"], "write": ["./out"],
                "network": {"outbound": {"allow_host": ["api.github.com"], "allow_port": [443]}}
            }}),
        ),
    ]
}

fn workspace_settings_corpus() -> Vec<(&'static str, Value)> {
    vec![
        (
            "ws-vars",
            json!({"command": "steward-parity-missing",
                   "args": ["${PARITY_TOKEN}", "$PARITY_UNSET", "${PARITY_UNSET:-d}"],
                   "env": {"HOME_IS": "$HOME"}}),
        ),
        (
            "ws-claude",
            json!({"type": "http", "url": "http://127.0.0.1:9/mcp"}),
        ),
        (
            "ws-null",
            json!({"httpUrl": "http://127.0.0.1:9/mcp", "headers": null, "timeout": null}),
        ),
        (
            "ws-dev",
            json!({"command": "steward-parity-missing", "dev": {"watch": "lib/*.js", "build": "npm run build"}}),
        ),
        // Also in .mcp.json: the workspace settings entry wins.
        (
            "shadowed",
            json!({"command": "steward-parity-missing", "args": ["from-settings"]}),
        ),
    ]
}

struct Parity {
    env: Env,
    vars: BTreeMap<String, String>,
}

impl Parity {
    fn new() -> Self {
        let env = Env::new();
        let servers = |list: Vec<(&str, Value)>| {
            Value::Object(list.into_iter().map(|(n, v)| (n.to_owned(), v)).collect())
        };
        env.write(
            ".mcp.json",
            &serde_json::to_string_pretty(&json!({"mcpServers": servers(mcp_json_corpus())}))
                .unwrap(),
        );
        env.write(
            ".qwen/settings.json",
            &serde_json::to_string_pretty(
                &json!({"mcpServers": servers(workspace_settings_corpus())}),
            )
            .unwrap(),
        );
        // Scopes that need no approval, in both tools.
        // `steward.sandbox` is Steward's own key: Qwen Code loads the file.
        env.write_home(
            "settings.json",
            r#"{"mcpServers": {"user-srv": {"command": "steward-parity-missing"}},
                "steward": {"sandbox": {"default": "standard", "profiles": {"gh": {"read": ["."]}}}}}"#,
        );
        env.write_home(
            "extensions/ext1/qwen-extension.json",
            r#"{"name": "ext1", "version": "1.0.0", "mcpServers": {"ext-srv": {"command": "steward-parity-missing"}}}"#,
        );
        let mut vars = env.vars();
        vars.insert("PARITY_TOKEN".into(), "s3cr3t".into());
        Parity { env, vars }
    }

    fn gated() -> Vec<&'static str> {
        let mut names: Vec<&str> = mcp_json_corpus()
            .into_iter()
            .chain(workspace_settings_corpus())
            .map(|(n, _)| n)
            .collect();
        names.sort();
        names.dedup();
        names
    }

    fn qwen(&self, args: &[&str]) -> Output {
        let bin = peer("@qwen-code/qwen-code", "node_modules/.bin/qwen");
        let out = Command::new(bin)
            .args(args)
            .current_dir(&self.env.ws)
            .env_clear()
            .envs(std::env::var("PATH").map(|p| ("PATH".to_owned(), p)))
            .envs(&self.vars)
            .env("NO_COLOR", "1")
            .output()
            .expect("run qwen");
        assert!(
            out.status.success(),
            "qwen {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn steward(&self, args: &[&str]) -> Output {
        Command::new(steward_tests::harness::bin("steward"))
            .arg("--workspace")
            .arg(&self.env.ws)
            .args(args)
            .env_clear()
            .envs(std::env::var("PATH").map(|p| ("PATH".to_owned(), p)))
            .envs(&self.vars)
            .output()
            .expect("run steward")
    }

    fn steward_ok(&self, args: &[&str]) -> Output {
        let out = self.steward(args);
        assert!(
            out.status.success(),
            "steward {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn approvals_file(&self) -> PathBuf {
        self.env.home.join("mcpApprovals.json")
    }

    fn forget_decisions(&self) {
        let _ = std::fs::remove_file(self.approvals_file());
    }

    /// name → (hash, status) recorded for this workspace.
    fn decisions(&self) -> BTreeMap<String, (String, String)> {
        let text = std::fs::read_to_string(self.approvals_file()).expect("approvals file");
        let v: Value = serde_json::from_str(&text).unwrap();
        let ws = self.env.ws.to_string_lossy().into_owned();
        v[&ws]
            .as_object()
            .unwrap_or_else(|| panic!("no decisions for {ws}: {text}"))
            .iter()
            .map(|(name, r)| {
                (
                    name.clone(),
                    (
                        r["hash"].as_str().unwrap().to_owned(),
                        r["status"].as_str().unwrap().to_owned(),
                    ),
                )
            })
            .collect()
    }

    /// name → (reason or "-", approvalHash) from `steward status --offline`.
    fn steward_view(&self) -> BTreeMap<String, (String, String)> {
        let out = self.steward_ok(&["status", "--offline", "-o", "json"]);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["kind"] == "McpServer")
            .map(|i| {
                (
                    i["metadata"]["name"].as_str().unwrap().to_owned(),
                    (
                        i["status"]["reason"].as_str().unwrap_or("-").to_owned(),
                        i["spec"]["approvalHash"].as_str().unwrap().to_owned(),
                    ),
                )
            })
            .collect()
    }

    /// name → what `qwen mcp list` says after the dash (`Pending approval`,
    /// `Rejected`, `Disconnected`…).
    fn qwen_view(&self) -> BTreeMap<String, String> {
        let out = self.qwen(&["mcp", "list"]);
        let text = strip_ansi(&String::from_utf8_lossy(&out.stdout));
        text.lines()
            .filter_map(|line| {
                let line = line.trim_start_matches(['●', '✓', '✗', '…', ' ']);
                let (name, rest) = line.split_once(": ")?;
                let (_, state) = rest.rsplit_once(" - ")?;
                Some((name.to_owned(), state.trim().to_owned()))
            })
            .collect()
    }
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn approvals_made_by_either_tool_are_honoured_by_the_other_with_identical_hashes() {
    let p = Parity::new();
    let gated = Parity::gated();

    // Nothing decided: both see every gated server as pending.
    let before = p.steward_view();
    let qwen_before = p.qwen_view();
    for name in &gated {
        assert_eq!(before[*name].0, "PendingApproval", "{name}");
        assert_eq!(qwen_before[*name], "Pending approval", "{name}");
    }

    // 1. `qwen mcp approve NAME` → Steward admits it, and its approvalHash is
    //    the hash Qwen Code wrote.
    for name in &gated {
        p.qwen(&["mcp", "approve", name]);
    }
    let by_qwen = p.decisions();
    let view = p.steward_view();
    for name in &gated {
        let (hash, status) = &by_qwen[*name];
        assert_eq!(status, "approved");
        assert_eq!(
            &view[*name].1, hash,
            "{name}: approvalHash differs from Qwen Code's"
        );
        assert_eq!(
            view[*name].0, "-",
            "{name} is not admitted after qwen mcp approve"
        );
    }

    // 2. `steward approve NAME…` → Qwen Code no longer lists it pending, and
    //    the hashes written are byte-identical to Qwen Code's.
    p.forget_decisions();
    let mut args = vec!["approve"];
    args.extend(gated.iter().copied());
    p.steward_ok(&args);
    let by_steward = p.decisions();
    assert_eq!(by_steward, by_qwen, "the two tools wrote different records");
    let listed = p.qwen_view();
    for name in &gated {
        assert!(
            !["Pending approval", "Rejected"].contains(&listed[*name].as_str()),
            "{name}: qwen mcp list says {} after steward approve",
            listed[*name]
        );
    }

    // 3. Rejections, both ways.
    p.forget_decisions();
    p.qwen(&["mcp", "reject", "--all"]);
    let rejected_by_qwen = p.decisions();
    let view = p.steward_view();
    for name in &gated {
        assert_eq!(view[*name].0, "Rejected", "{name} after qwen mcp reject");
        assert_eq!(rejected_by_qwen[*name].0, by_qwen[*name].0, "{name}");
    }
    p.forget_decisions();
    let mut args = vec!["reject"];
    args.extend(gated.iter().copied());
    p.steward_ok(&args);
    assert_eq!(p.decisions(), rejected_by_qwen);
    let listed = p.qwen_view();
    for name in &gated {
        assert_eq!(listed[*name], "Rejected", "{name} after steward reject");
    }
}

#[test]
fn servers_outside_gated_scopes_need_no_approval_in_either_tool() {
    let p = Parity::new();
    for name in ["user-srv", "ext-srv"] {
        let out = p.steward(&["approve", name]);
        assert_eq!(out.status.code(), Some(1), "steward approve {name}");
        let out = p.qwen(&["mcp", "approve", name]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("not found"),
            "qwen mcp approve {name}: {text}"
        );
        assert!(!p.approvals_file().exists() || !p.decisions().contains_key(name));
    }
    let view = p.steward_view();
    assert_eq!(view["user-srv"].0, "-");
}

/// A settings entry is hashed after `$VAR` expansion (as Qwen Code holds
/// it): rotating the secret asks again, in both tools; a `.mcp.json` entry
/// is hashed as written, so it does not.
#[test]
fn a_rotated_secret_asks_again_in_both_tools() {
    let mut p = Parity::new();
    p.steward_ok(&["approve", "ws-vars", "vars"]);
    assert_eq!(p.steward_view()["ws-vars"].0, "-");
    p.vars.insert("PARITY_TOKEN".into(), "rotated".into());
    let view = p.steward_view();
    assert_eq!(view["ws-vars"].0, "PendingApproval");
    assert_eq!(view["vars"].0, "-", ".mcp.json entries are not expanded");
    let listed = p.qwen_view();
    assert_eq!(listed["ws-vars"], "Pending approval");
    assert_ne!(listed["vars"], "Pending approval");
}

/// Content Qwen Code accepts (with or without its own warning) that Steward
/// used to refuse: it loads, the oddities are warnings, entries Qwen Code
/// cannot connect either keep an `InvalidSpec` row — and a later edit to
/// another server of the same file applies live (it used to be rejected).
#[test]
fn qwen_accepted_odd_files_load_with_warnings_and_later_edits_apply_live() {
    use steward_schema::resource::{Phase, Reason, SourceKind, SourceState};
    use steward_tests::fake_lsp::Config as LspConfig;
    use steward_tests::harness::{
        fake_tools, lsp, lsp_json, lsp_pid, lsp_ready, mcp, pid_of, ready, with_version,
    };

    let p = Parity::new();
    let env = &p.env;
    let mut alpha = env.fake_mcp("alpha", fake_tools(&["a1"]));
    alpha["env"]["PORT"] = json!(8080);
    alpha["env"]["TOKEN"] = json!("${PARITY_UNSET}");
    alpha["timeout"] = json!(0);
    let beta = env.fake_mcp("beta", fake_tools(&["b1"]));
    let settings = |beta: &Value| {
        serde_json::to_string_pretty(&json!({"mcpServers": {
            "alpha": alpha,
            "beta": beta,
            "sdk-one": {"type": "sdk", "command": "steward-parity-missing"},
            "tcp-one": {"tcp": "ws://127.0.0.1:9"},
            "typo": {"comand": "steward-parity-missing"},
        }}))
        .unwrap()
    };
    env.write_home("settings.json", &settings(&beta));
    let mut one = env.fake_lsp("one", LspConfig::default(), &[".one"]);
    one["transport"] = json!("STDIO");
    one["startupTimeout"] = json!(0);
    one["shutdownTimeout"] = json!(-5);
    one["env"]["LEVEL"] = json!(3);
    one["socketPath"] = json!("ignored-for-stdio.sock");
    let two = env.fake_lsp("two", LspConfig::default(), &[".two"]);
    env.write(
        ".lsp.json",
        &lsp_json(&[("one", one.clone()), ("two", two.clone())]),
    );

    // Qwen Code loads every entry of this settings file (it lists them all).
    let listed = p.qwen_view();
    for name in ["alpha", "beta", "sdk-one", "tcp-one", "typo"] {
        assert!(
            listed.contains_key(name),
            "qwen mcp list lacks {name}: {listed:?}"
        );
    }

    let c = env.start(&[]);
    let s = c.wait_for("alpha, beta, one and two Ready", |s| {
        ready(s, "alpha") && ready(s, "beta") && lsp_ready(s, "one") && lsp_ready(s, "two")
    });
    let user = s
        .sources
        .iter()
        .find(|src| src.kind == SourceKind::UserSettings)
        .unwrap();
    assert_eq!(user.state, SourceState::Valid, "{:?}", user.error);
    let warned = |needle: &str| {
        s.sources
            .iter()
            .flat_map(|src| &src.warnings)
            .any(|w| w.message.contains(needle) && w.line.is_some())
    };
    for needle in [
        "env value 8080 is not a string",
        "${PARITY_UNSET} is not set",
        "timeout 0 is not positive",
        "type \"sdk\"",
        "\"tcp\" (WebSocket)",
        "did you mean \"command\"",
        "transport \"STDIO\"",
        "startupTimeout 0",
        "env value 3 is not a string",
    ] {
        assert!(
            warned(needle),
            "no warning with {needle:?}: {:#?}",
            s.sources
        );
    }
    for name in ["sdk-one", "tcp-one", "typo"] {
        let row = mcp(&s, name).unwrap_or_else(|| panic!("{name} has no row"));
        assert_eq!(row.status.phase, Phase::Failed, "{name}");
        assert_eq!(row.status.reason, Some(Reason::InvalidSpec), "{name}");
        assert!(
            row.status
                .message
                .as_deref()
                .unwrap_or("")
                .contains("settings.json:"),
            "{name}: {:?}",
            row.status.message
        );
    }
    let one_spec = &lsp(&s, "one").unwrap().spec;
    assert_eq!(one_spec.startup_timeout, 10_000);
    assert_eq!(one_spec.env["LEVEL"], "3");
    let alpha_spec = &mcp(&s, "alpha").unwrap().spec;
    assert_eq!(alpha_spec.env.as_ref().unwrap()["PORT"], "8080");

    // Edit another server of each odd file: applied live, only it restarts.
    let (pa, pb) = (pid_of(&s, "alpha"), pid_of(&s, "beta"));
    let (p1, p2) = (lsp_pid(&s, "one"), lsp_pid(&s, "two"));
    env.write_home("settings.json", &settings(&with_version(&beta, "2")));
    env.write(
        ".lsp.json",
        &lsp_json(&[("one", one), ("two", with_version(&two, "2"))]),
    );
    let s = c.wait_for("beta and two restarted by the edit", |s| {
        ready(s, "beta")
            && pid_of(s, "beta") != pb
            && lsp_ready(s, "two")
            && lsp_pid(s, "two") != p2
    });
    assert_eq!(pid_of(&s, "alpha"), pa, "alpha must keep its process");
    assert_eq!(lsp_pid(&s, "one"), p1, "one must keep its process");
    assert!(
        s.sources
            .iter()
            .all(|src| src.state != SourceState::Invalid)
    );
    let log = c.log_text();
    assert!(log.contains("entry dropped (InvalidSpec)"), "{log}");
}

impl Parity {
    /// An empty workspace: no corpus.
    fn bare() -> Self {
        let env = Env::new();
        let vars = env.vars();
        Parity { env, vars }
    }

    /// name → Qwen Code's verdict from `qwen mcp reconnect --all`:
    /// `connect` (it tried), or the reason it skipped the server.
    fn qwen_verdicts(&self) -> BTreeMap<String, String> {
        let bin = peer("@qwen-code/qwen-code", "node_modules/.bin/qwen");
        let out = Command::new(bin)
            .args(["mcp", "reconnect", "--all"])
            .current_dir(&self.env.ws)
            .env_clear()
            .envs(std::env::var("PATH").map(|p| ("PATH".to_owned(), p)))
            .envs(&self.vars)
            .env("NO_COLOR", "1")
            .output()
            .expect("run qwen");
        let text = strip_ansi(&String::from_utf8_lossy(&out.stdout));
        text.lines()
            .filter_map(|line| {
                let line = line.trim_start_matches(['✓', '✗', '-', ' ']);
                let (name, rest) = line.split_once(": ")?;
                let verdict = if let Some(reason) = rest.strip_prefix("Skipped - ") {
                    if reason.contains("excluded") {
                        "Excluded"
                    } else if reason.contains("allowed") {
                        "NotAllowed"
                    } else if reason.contains("pending approval") {
                        "PendingApproval"
                    } else if reason.contains("not trusted") {
                        "UntrustedWorkspace"
                    } else {
                        reason
                    }
                } else if rest.starts_with("Failed") || rest.starts_with("Reconnected") {
                    "-"
                } else {
                    return None;
                };
                Some((name.to_owned(), verdict.to_owned()))
            })
            .collect()
    }

    /// name → reason (or "-") from `steward status --offline`.
    fn steward_verdicts(&self) -> BTreeMap<String, String> {
        self.steward_view()
            .into_iter()
            .map(|(name, (reason, _))| (name, reason))
            .collect()
    }
}

/// Settings semantics, compared with Qwen Code's own verdicts: the system
/// defaults file beside the system settings, `mcp.allowed` concatenated
/// across layers, version-1 keys migrated, an untrusted workspace's layer
/// dropped whole, a relative trust rule, `QWEN_HOME` with `~`.
#[test]
fn settings_layers_merge_as_in_qwen_code() {
    let missing = json!({"command": "steward-parity-missing"});
    // 1. Defaults beside the system settings; allowed lists concatenate;
    //    v1 keys in the user file; the workspace widens `allowed`.
    let mut p = Parity::bare();
    p.vars.remove("QWEN_CODE_SYSTEM_DEFAULTS_PATH");
    let etc = PathBuf::from(&p.vars["QWEN_CODE_SYSTEM_SETTINGS_PATH"])
        .parent()
        .unwrap()
        .to_path_buf();
    std::fs::create_dir_all(&etc).unwrap();
    std::fs::write(
        etc.join("system-defaults.json"),
        json!({"mcp": {"allowed": ["a"]}, "mcpServers": {"a": missing, "b": missing, "c": missing}})
            .to_string(),
    )
    .unwrap();
    p.env.write_home(
        "settings.json",
        &json!({"allowMCPServers": ["b", "c"], "excludeMCPServers": ["c"], "mcpServers": {"d": missing}})
            .to_string(),
    );
    p.env.write(
        ".qwen/settings.json",
        &json!({"mcp": {"allowed": ["w"]}, "mcpServers": {"w": missing}}).to_string(),
    );
    p.steward_ok(&["approve", "w"]);
    let qwen = p.qwen_verdicts();
    let steward = p.steward_verdicts();
    let want: BTreeMap<String, String> = [
        ("a", "-"),
        ("b", "-"),
        ("c", "Excluded"),
        ("d", "NotAllowed"),
        ("w", "-"),
    ]
    .into_iter()
    .map(|(n, r)| (n.to_owned(), r.to_owned()))
    .collect();
    assert_eq!(qwen, want, "Qwen Code's verdicts");
    assert_eq!(steward, want, "Steward's verdicts");

    // 2. An untrusted workspace: its settings layer (servers, lists) is
    //    dropped whole by both.
    let p = Parity::bare();
    p.env.write_home(
        "settings.json",
        &json!({"security": {"folderTrust": {"enabled": true}}, "mcpServers": {"u": missing}})
            .to_string(),
    );
    p.env.write_home(
        "trustedFolders.json",
        &json!({p.env.ws.to_string_lossy(): "DO_NOT_TRUST"}).to_string(),
    );
    p.env.write(
        ".qwen/settings.json",
        &json!({"mcpServers": {"w2": missing}}).to_string(),
    );
    let listed = p.qwen_view();
    assert!(
        listed.contains_key("u") && !listed.contains_key("w2"),
        "{listed:?}"
    );
    let steward = p.steward_verdicts();
    assert_eq!(
        steward.keys().collect::<Vec<_>>(),
        ["u"],
        "the untrusted workspace layer is dropped"
    );
    assert_eq!(p.qwen_verdicts()["u"], "UntrustedWorkspace");
    assert_eq!(steward["u"], "UntrustedWorkspace");

    // 3. QWEN_HOME written with `~`, and a relative trust rule (resolved
    //    against the workspace, where Qwen Code runs).
    let mut p = Parity::bare();
    p.vars.insert("QWEN_HOME".into(), "~/.qwen-alt".into());
    p.env.write_home(
        ".qwen-alt/settings.json",
        &json!({"security": {"folderTrust": {"enabled": true}}, "mcpServers": {"u": missing}})
            .to_string(),
    );
    p.env
        .write_home(".qwen-alt/trustedFolders.json", r#"{".": "TRUST_FOLDER"}"#);
    p.env.write(
        ".qwen/settings.json",
        &json!({"mcpServers": {"w3": missing}}).to_string(),
    );
    let listed = p.qwen_view();
    assert!(
        listed.contains_key("u") && listed.contains_key("w3"),
        "{listed:?}"
    );
    let out = p.steward_ok(&["status", "--offline", "-o", "json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["controller"]["trusted"], true);
    let steward = p.steward_verdicts();
    assert_eq!(steward.keys().collect::<Vec<_>>(), ["u", "w3"]);
    assert_eq!(steward["u"], "-");
    assert_eq!(p.qwen_verdicts()["u"], "-");
}

/// An extension disabled with Qwen Code itself (`qwen extensions disable`,
/// which writes its store and `extension-enablement.json`) contributes no
/// server: never spawned. Re-enabled in the enablement file, it starts on
/// `steward reload`. A server disabled for its extension
/// (`extension-preferences.json`) is `Disabled`, as Qwen Code skips it.
#[test]
fn extensions_follow_qwen_codes_enablement_and_disabled_servers() {
    use steward_schema::resource::{Phase, Reason};
    use steward_tests::fake_mcp::read_record;
    use steward_tests::harness::{fake_tools, mcp, ready};

    let p = Parity::bare();
    let env = &p.env;
    let ext_srv = env.fake_mcp("ext-srv", fake_tools(&["e1"]));
    let ext_two = env.fake_mcp("ext-two", fake_tools(&["e2"]));
    let user = env.fake_mcp("user-srv", fake_tools(&["u1"]));
    env.write_home(
        "extensions/ext1/qwen-extension.json",
        &json!({"name": "ext1", "version": "1.0.0",
                "mcpServers": {"ext-srv": ext_srv, "ext-two": ext_two}})
        .to_string(),
    );
    env.write_home(
        "settings.json",
        &json!({"mcpServers": {"user-srv": user}}).to_string(),
    );
    p.qwen(&["extensions", "disable", "ext1", "--scope", "workspace"]);
    let listed = p.qwen_view();
    assert!(!listed.contains_key("ext-srv"), "{listed:?}");

    let c = env.start(&[]);
    let s = c.wait_for("user-srv Ready", |s| ready(s, "user-srv"));
    assert!(mcp(&s, "ext-srv").is_none() && mcp(&s, "ext-two").is_none());
    let started = |name: &str| {
        read_record(&env.record(name))
            .map(|r| r.iter().any(|e| e.event == "start"))
            .unwrap_or(false)
    };
    assert!(
        !started("ext-srv"),
        "a disabled extension's server was spawned"
    );

    // Re-enabled in the enablement file (the rule opposite to Qwen Code's),
    // with one of its servers disabled in the preferences.
    let ws = env.ws.to_string_lossy().into_owned();
    env.write_home(
        "extensions/extension-enablement.json",
        &json!({"ext1": {"overrides": [format!("{ws}/")]}}).to_string(),
    );
    env.write_home(
        "extensions/extension-preferences.json",
        &json!({"favorites": [], "scopes": {}, "disabledMcpServers": {"ext1": ["ext-two"]}})
            .to_string(),
    );
    let out = env.steward(&["reload"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = c.wait_for("ext-srv Ready after reload", |s| ready(s, "ext-srv"));
    let two = mcp(&s, "ext-two").expect("ext-two has a row");
    assert_eq!(two.status.phase, Phase::Blocked);
    assert_eq!(two.status.reason, Some(Reason::Disabled));
    assert!(!started("ext-two"));
    // Qwen Code agrees the extension is enabled again. (Its `mcp reconnect`
    // counts extension servers as configured servers, so it cannot show the
    // per-server preference a session honours.)
    let verdicts = p.qwen_verdicts();
    assert_eq!(
        verdicts.get("ext-srv").map(String::as_str),
        Some("-"),
        "{verdicts:?}"
    );
    assert!(p.qwen_view().contains_key("ext-srv"));
}

/// The other manifest kinds, as Qwen Code 0.24 loads them: an Agent Plugins
/// v1 `plugin.json` + `mcp.json` is an extension (its `stdio` and
/// `streamable-http` servers; legacy SSE skipped), and a directory with only
/// `gemini-extension.json` is not (Qwen Code converts those at install).
#[test]
fn agent_plugins_load_and_bare_gemini_extensions_do_not_as_in_qwen_code() {
    let p = Parity::bare();
    let env = &p.env;
    env.write_home(
        "extensions/plug/plugin.json",
        r#"{"$schema": "https://agent-plugins.org/schemas/1.0.0/plugin.schema.json", "name": "plug", "version": "1.0.0"}"#,
    );
    env.write_home(
        "extensions/plug/mcp.json",
        r#"{"$schema": "https://agent-plugins.org/schemas/1.0.0/mcp.schema.json", "mcpServers": {
            "plug-srv": {"type": "stdio", "command": "steward-parity-missing", "args": ["${PLUGIN_ROOT}/x"], "cwd": "${PLUGIN_DATA}"},
            "plug-http": {"type": "streamable-http", "url": "http://127.0.0.1:9/mcp", "headers": {"X-A": "1"}},
            "plug-sse": {"type": "sse", "url": "http://127.0.0.1:9/sse"}
        }}"#,
    );
    env.write_home(
        "extensions/gem/gemini-extension.json",
        r#"{"name": "gem", "version": "1.0.0", "mcpServers": {"gem-srv": {"command": "steward-parity-missing"}}}"#,
    );
    let listed = p.qwen_view();
    let mut qwen_names: Vec<&str> = listed.keys().map(String::as_str).collect();
    qwen_names.sort();
    assert_eq!(qwen_names, ["plug-http", "plug-srv"], "{listed:?}");

    let out = p.steward_ok(&["status", "--offline", "--show-secrets", "-o", "json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let item = |name: &str| {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["metadata"]["name"] == name)
            .cloned()
    };
    assert!(item("gem-srv").is_none());
    let srv = item("plug-srv").expect("plug-srv");
    let root = env
        .home
        .join("extensions/plug")
        .to_string_lossy()
        .into_owned();
    assert_eq!(srv["spec"]["args"], json!([format!("{root}/x")]));
    assert_eq!(srv["spec"]["env"]["PLUGIN_ROOT"], root.as_str());
    assert_eq!(srv["spec"]["extensionName"], "plug");
    // Qwen Code made the plugin's data directory: the same PLUGIN_DATA.
    let data = PathBuf::from(srv["spec"]["env"]["PLUGIN_DATA"].as_str().unwrap());
    assert!(
        data.is_dir(),
        "{} is not Qwen Code's data directory",
        data.display()
    );
    assert_eq!(srv["spec"]["cwd"], data.to_string_lossy().as_ref());
    let http = item("plug-http").expect("plug-http");
    assert_eq!(http["spec"]["httpUrl"], "http://127.0.0.1:9/mcp");
    assert_eq!(http["spec"]["headers"], json!({"X-A": "1"}));
    let sse = item("plug-sse").expect("plug-sse keeps a row");
    assert_eq!(sse["status"]["reason"], "InvalidSpec");
}

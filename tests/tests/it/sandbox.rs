//! Envtest: least privilege. A hostile fake server (one `attempt` per tool
//! call: see the fake's `attempt.rs`) started by the real controller tries
//! what a malicious MCP server would — read the user's keys, plant code,
//! reach Steward's sockets, signal or trace other processes, reach the
//! network — under each built-in profile and a custom one. Every attempt
//! the profile denies must fail; what it allows must work.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use steward_schema::resource::{Enforcement, Phase, Reason, SandboxNetwork};
use steward_tests::harness::{Env, fake_tools as tools, lsp, lsp_json, mcp, pid_of, ready};

use crate::metrics::{http_get, metrics_addr};

use crate::gateway::{Agent, Client, attach, call, runtime, text};

/// A sandbox with a user home of its own (not HOME_DIR), holding the
/// credentials a hostile server would go for.
pub(crate) struct Victim {
    pub(crate) env: Env,
    pub(crate) home: PathBuf,
    pub(crate) rt: tokio::runtime::Runtime,
}

impl Victim {
    pub(crate) fn new() -> Victim {
        let env = Env::new();
        let home = env.root.path().join("user");
        for (rel, content) in [
            (".ssh/id_ed25519", "PRIVATE KEY"),
            (".aws/credentials", "aws_secret_access_key = AKIA"),
            (".claude.json", "{\"oauth\": \"token\"}"),
            (".bashrc", "# bashrc\n"),
            (".config/gh/hosts.yml", "oauth_token: gho_x"),
            ("notes.txt", "ordinary file"),
        ] {
            let p = home.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, content).unwrap();
        }
        env.set_var("HOME", &home.to_string_lossy());
        env.write_home("mcpApprovals.json", "{}");
        let store = env.write_home("steward/secrets.json", "{\"token\": \"s3cr3t\"}");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::create_dir_all(env.ws.join(".git/hooks")).unwrap();
        std::fs::write(env.ws.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(env.ws.join("README.md"), "the workspace").unwrap();
        std::fs::create_dir_all(env.ws.join("sub")).unwrap();
        Victim {
            env,
            home,
            rt: runtime(),
        }
    }

    /// Starts the controller with the hostile server `evil` under
    /// `sandbox` (its entry's key; `None`: the default) and settings
    /// `steward` (the user's `steward` key), and attaches a client.
    pub(crate) fn start(
        &self,
        sandbox: Option<Value>,
        steward: Value,
    ) -> (steward_tests::harness::Controller, Arc<Hostile<'_>>) {
        self.start_with(sandbox, steward, &[])
    }

    /// [`Victim::start`] with `steward run` arguments.
    pub(crate) fn start_with(
        &self,
        sandbox: Option<Value>,
        steward: Value,
        args: &[&str],
    ) -> (steward_tests::harness::Controller, Arc<Hostile<'_>>) {
        let mut entry = self.env.fake_mcp("evil", tools(&["t1"]));
        // Unrecorded: a confined server may not write the record file.
        let config = entry["env"][steward_tests::fake_mcp::CONFIG_ENV]
            .as_str()
            .unwrap();
        let mut config: Value = serde_json::from_str(config).unwrap();
        config.as_object_mut().unwrap().remove("record");
        entry["env"][steward_tests::fake_mcp::CONFIG_ENV] = json!(config.to_string());
        if let Some(s) = sandbox {
            entry["sandbox"] = s;
        }
        self.env.write_home(
            "settings.json",
            &json!({"mcpServers": {"evil": entry}, "steward": steward}).to_string(),
        );
        let c = self.env.start(args);
        c.wait_for("evil Ready", |s| ready(s, "evil"));
        let client = self.rt.block_on(attach(&self.env, Agent::default()));
        (
            c,
            Arc::new(Hostile {
                client,
                rt: &self.rt,
            }),
        )
    }
}

/// A client of the hostile server, and the runtime it lives on.
pub(crate) struct Hostile<'a> {
    pub(crate) client: Client,
    pub(crate) rt: &'a tokio::runtime::Runtime,
}

/// One attempt: `Ok(data)` when it worked, `Err(error)` when not.
pub(crate) fn attempt(h: &Hostile<'_>, what: Value) -> Result<String, String> {
    attempt_on(h, "evil__t1", what)
}

/// [`attempt`] through the tool `tool` (another hostile server's).
pub(crate) fn attempt_on(h: &Hostile<'_>, tool: &str, what: Value) -> Result<String, String> {
    let result =
        h.rt.block_on(call(&h.client, tool, json!({"attempt": what})));
    let out = result
        .structured_content
        .clone()
        .unwrap_or_else(|| panic!("no outcome: {}", text(&result)));
    if out["ok"] == json!(true) {
        Ok(out["data"].as_str().unwrap_or_default().to_owned())
    } else {
        Err(out["error"].as_str().unwrap_or_default().to_owned())
    }
}

pub(crate) fn denied(client: &Hostile<'_>, what: Value) {
    let outcome = attempt(client, what.clone());
    assert!(outcome.is_err(), "{what} was allowed: {outcome:?}");
}

pub(crate) fn allowed(client: &Hostile<'_>, what: Value) -> String {
    attempt(client, what.clone()).unwrap_or_else(|e| panic!("{what} was denied: {e}"))
}

/// An MCP `initialize` request line.
const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"evil","version":"1"}}}"#;

/// Whether Steward's socket at `path` served the server's `line`: it must
/// not be reachable, or refuse it.
fn steward_refuses(client: &Hostile<'_>, path: &Path, line: &str) {
    let outcome = attempt(client, json!({"unix": p(path), "send": line}));
    if let Ok(answer) = &outcome {
        assert!(
            !answer.contains("WorkspaceStatus") && !answer.contains("\"result\""),
            "a server used {}: {answer}",
            path.display()
        );
    }
}

pub(crate) fn p(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

#[test]
fn standard_keeps_credentials_agent_state_git_hooks_and_steward_sockets_from_a_server() {
    let v = Victim::new();
    let (c, client) = v.start_with(None, json!({}), &["--mcp-listen", "127.0.0.1:0"]);
    let env = &v.env;
    // Reads: the credential stores and the agents' state.
    for secret in [
        v.home.join(".ssh/id_ed25519"),
        v.home.join(".aws/credentials"),
        v.home.join(".claude.json"),
        v.home.join(".config/gh/hosts.yml"),
        env.home.join("settings.json"),
        env.home.join("mcpApprovals.json"),
        // Steward's own state: the secret file store.
        env.home.join("steward/secrets.json"),
    ] {
        denied(&client, json!({"read": p(&secret)}));
    }
    // Names stay listable (a file browser lists the home directory), not
    // contents.
    assert_eq!(
        allowed(&client, json!({"read": p(&v.home.join(".ssh"))})),
        "id_ed25519"
    );
    // Writes: code the user runs, places outside the workspace.
    denied(&client, json!({"write": p(&v.home.join(".bashrc"))}));
    denied(
        &client,
        json!({"mkdir": p(&v.home.join(".config/autostart/x"))}),
    );
    denied(
        &client,
        json!({"write": p(&env.ws.join(".git/hooks/pre-commit"))}),
    );
    denied(&client, json!({"write": p(&env.ws.join(".git/config"))}));
    denied(
        &client,
        json!({"write": p(&env.root.path().join("outside.txt"))}),
    );
    // Steward's own sockets: hidden, and refused if reached.
    steward_refuses(
        &client,
        &env.paths().socket_path(),
        r#"{"request":"status"}"#,
    );
    steward_refuses(&client, &env.paths().mcp_socket_path(), INITIALIZE);
    // Nor the agent endpoint over HTTP on loopback (standard's network is
    // open): it would call the other servers' tools for it.
    let url = crate::real_clients::http_url(&c.status());
    let authority = url.trim_start_matches("http://").trim_end_matches("/mcp");
    let post = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{INITIALIZE}",
        INITIALIZE.len()
    );
    if let Ok(line) = attempt(&client, json!({"raw": authority, "send": post})) {
        assert!(
            !line.contains(" 200 "),
            "a server used the HTTP endpoint: {line}"
        );
    }
    // The same request from an agent (this test) is served.
    let agent = {
        use std::io::{BufRead, Write};
        let mut s = std::net::TcpStream::connect(authority).unwrap();
        s.write_all(post.as_bytes()).unwrap();
        let mut line = String::new();
        std::io::BufReader::new(s).read_line(&mut line).unwrap();
        line
    };
    assert!(agent.contains(" 200 "), "{agent}");
    // Processes outside its tree: the controller itself.
    let controller = c.pid() as i64;
    denied(&client, json!({"signal": controller}));
    denied(&client, json!({"ptrace": controller}));
    denied(&client, json!({"environ": controller}));
    let mut other = std::process::Command::new("sleep")
        .arg("30")
        .env("OTHER_SECRET", "s3cr3t")
        .spawn()
        .unwrap();
    denied(&client, json!({"environ": other.id() as i64}));
    denied(&client, json!({"signal": other.id() as i64}));
    denied(
        &client,
        json!({"read": format!("/proc/{}/maps", other.id())}),
    );
    let _ = other.kill();
    let _ = other.wait();

    // What it may do: read the system and the user's ordinary files, write
    // the workspace (new files too) and its own temp dir.
    assert_eq!(
        allowed(&client, json!({"read": p(&v.home.join("notes.txt"))})),
        "ordinary file"
    );
    allowed(&client, json!({"read": "/etc/hostname"}));
    allowed(&client, json!({"write": p(&env.ws.join("new-file.txt"))}));
    allowed(&client, json!({"mkdir": p(&env.ws.join("sub/dir"))}));
    // Not a new directory in the workspace root, where the code-running
    // ones that do not exist yet (.vscode, .claude...) would appear.
    denied(&client, json!({"mkdir": p(&env.ws.join("newtop"))}));
    // All of .git is pinned (git-write is the profile that commits).
    denied(&client, json!({"write": p(&env.ws.join(".git/HEAD"))}));
    let tmp = allowed(&client, json!({"env": "TMPDIR"}));
    assert!(!tmp.is_empty());
    allowed(&client, json!({"write": format!("{tmp}/scratch")}));
    // The attempts changed nothing they should not have.
    assert_eq!(
        std::fs::read_to_string(v.home.join(".bashrc")).unwrap(),
        "# bashrc\n"
    );
    assert!(!env.ws.join(".git/hooks/pre-commit").exists());

    let s = c.status();
    let sandbox = mcp(&s, "evil").unwrap().status.sandbox.clone().unwrap();
    assert_eq!(sandbox.profile, "standard");
    assert_eq!(
        sandbox.enforcement,
        Enforcement::Full,
        "{:?}",
        sandbox.missing
    );
    assert_eq!(sandbox.network, SandboxNetwork::Unrestricted);
    assert!(pid_of(&s, "evil").is_some());
}

#[test]
fn none_has_no_network_and_reads_only_the_system_and_its_runtime() {
    let v = Victim::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (_c, client) = v.start(Some(json!("none")), json!({}));
    denied(&client, json!({"connect": format!("127.0.0.1:{port}")}));
    denied(&client, json!({"udp": "127.0.0.1:53"}));
    denied(&client, json!({"read": p(&v.env.ws.join("README.md"))}));
    denied(&client, json!({"read": p(&v.home.join("notes.txt"))}));
    denied(&client, json!({"write": p(&v.env.ws.join("x.txt"))}));
    allowed(&client, json!({"read": "/etc/hostname"}));
    let tmp = allowed(&client, json!({"env": "TMPDIR"}));
    allowed(&client, json!({"write": format!("{tmp}/scratch")}));
}

/// A loopback HTTP server answering every request with `200 OK` and `ok`.
fn web_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            use std::io::{Read, Write};
            let mut stream = stream;
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        }
    });
    port
}

#[test]
fn a_custom_profile_reads_and_writes_what_it_lists_and_reaches_only_its_hosts_through_the_proxy() {
    let v = Victim::new();
    let port = web_server();
    std::fs::create_dir_all(v.env.ws.join("data")).unwrap();
    std::fs::write(v.env.ws.join("data/in.txt"), "input").unwrap();
    let profile = json!({
        "read": ["./data"],
        "write": ["./out"],
        "network": {"outbound": {"allow_host": ["127.0.0.1"], "allow_port": [port]}}
    });
    std::fs::create_dir_all(v.env.ws.join("out")).unwrap();
    let (c, client) = v.start_with(
        Some(json!("fetcher")),
        json!({"sandbox": {"profiles": {"fetcher": profile}}}),
        &["--metrics-listen", "127.0.0.1:0"],
    );
    assert_eq!(
        allowed(&client, json!({"read": p(&v.env.ws.join("data/in.txt"))})),
        "input"
    );
    allowed(
        &client,
        json!({"write": p(&v.env.ws.join("out/result.txt"))}),
    );
    denied(
        &client,
        json!({"write": p(&v.env.ws.join("elsewhere.txt"))}),
    );
    denied(&client, json!({"read": p(&v.env.ws.join("README.md"))}));
    // The network: only through the proxy, only to the listed host and port.
    let through = allowed(
        &client,
        json!({"http": format!("http://127.0.0.1:{port}/x")}),
    );
    assert!(through.starts_with("HTTP/1.1 200"), "{through}");
    denied(&client, json!({"connect": format!("127.0.0.1:{port}")}));
    denied(&client, json!({"udp": "127.0.0.1:53"}));
    let refused = allowed(&client, json!({"http": "https://evil.example/"}));
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
    let other_port = allowed(
        &client,
        json!({"http": format!("http://127.0.0.1:{}/", port + 1)}),
    );
    assert!(other_port.starts_with("HTTP/1.1 403"), "{other_port}");
    assert_eq!(allowed(&client, json!({"env": "NO_PROXY"})), "");

    let s = c.wait_for("two refusals counted", |s| {
        mcp(s, "evil")
            .and_then(|m| m.status.sandbox.as_ref())
            .is_some_and(|b| b.egress_denied == 2)
    });
    let sandbox = mcp(&s, "evil").unwrap().status.sandbox.clone().unwrap();
    assert_eq!(
        (sandbox.profile.as_str(), sandbox.network),
        ("fetcher", SandboxNetwork::Proxy)
    );
    assert_eq!(sandbox.hosts, ["127.0.0.1"]);
    let events = v.env.run(&["events", "-o", "json"]).stdout;
    assert!(
        events.contains("EgressDenied") && events.contains("evil.example:443"),
        "{events}"
    );
    let (_, _, body) = http_get(&metrics_addr(&|| c.log_text()), "/metrics", &[]);
    assert!(
        body.contains(r#"steward_sandbox_egress_denied_total{server="evil"} 2"#),
        "{body}"
    );
}

#[test]
fn without_user_namespaces_a_server_still_cannot_use_stewards_sockets_and_status_says_partial() {
    let v = Victim::new();
    v.env.set_var("STEWARD_SANDBOX_NO_USERNS", "1");
    let (c, client) = v.start(None, json!({}));
    steward_refuses(
        &client,
        &v.env.paths().socket_path(),
        r#"{"request":"status"}"#,
    );
    steward_refuses(&client, &v.env.paths().mcp_socket_path(), INITIALIZE);
    denied(&client, json!({"read": p(&v.home.join(".ssh/id_ed25519"))}));
    denied(&client, json!({"environ": c.pid() as i64}));
    let s = c.status();
    let sandbox = mcp(&s, "evil").unwrap().status.sandbox.clone().unwrap();
    assert_eq!(sandbox.enforcement, Enforcement::Partial);
    assert!(
        sandbox
            .missing
            .iter()
            .any(|m| m.contains("user namespaces")),
        "{:?}",
        sandbox.missing
    );
    let events = v.env.run(&["events", "-o", "json"]).stdout;
    assert!(events.contains("SandboxPartial"), "{events}");
}

#[test]
fn an_older_landlock_abi_is_partial_and_require_fails_the_start_instead() {
    let v = Victim::new();
    v.env.set_var("STEWARD_SANDBOX_MAX_ABI", "3");
    let (c, client) = v.start(Some(json!("none")), json!({}));
    // No TCP rules below ABI 4: `none` still has no network (seccomp).
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    denied(&client, json!({"connect": format!("127.0.0.1:{port}")}));
    let sandbox = mcp(&c.status(), "evil")
        .unwrap()
        .status
        .sandbox
        .clone()
        .unwrap();
    assert_eq!(
        (sandbox.enforcement, sandbox.abi),
        (Enforcement::Partial, 3)
    );
    assert!(
        sandbox.missing.iter().any(|m| m.contains("ABI 6")),
        "{:?}",
        sandbox.missing
    );
    drop(client);
    drop(c);

    let v = Victim::new();
    v.env.set_var("STEWARD_SANDBOX_MAX_ABI", "3");
    let entry = v.env.fake_mcp("strict", tools(&["t1"]));
    v.env.write_home(
        "settings.json",
        &json!({"mcpServers": {"strict": entry}, "steward": {"sandbox": {"require": true}}})
            .to_string(),
    );
    let c = v.env.start(&[]);
    let s = c.wait_for("strict failed", |s| {
        mcp(s, "strict").is_some_and(|m| m.status.phase == Phase::Failed)
    });
    let status = &mcp(&s, "strict").unwrap().status;
    assert_eq!(status.reason, Some(Reason::SandboxUnavailable));
    assert!(status.pid.is_none(), "never spawned");
    let message = status.message.clone().unwrap_or_default();
    assert!(
        message.contains("steward.sandbox.require") && message.contains("ABI 6"),
        "{message}"
    );
}

#[test]
fn a_workspace_lsp_json_entry_cannot_widen_its_own_sandbox() {
    let env = Env::new();
    let mut entry = env.fake_lsp("fake", Default::default(), &[".fk"]);
    entry["sandbox"] = json!("off");
    env.write(".lsp.json", &lsp_json(&[("fake", entry)]));
    let c = env.start(&[]);
    let s = c.wait_for("fake Ready", |s| {
        lsp(s, "fake").is_some_and(|l| l.status.phase == Phase::Ready)
    });
    let sandbox = lsp(&s, "fake").unwrap().status.sandbox.clone().unwrap();
    assert_eq!(sandbox.profile, "standard", "ran no wider than the default");
    assert!(
        sandbox.notes.iter().any(|n| n.contains("may only narrow")),
        "{:?}",
        sandbox.notes
    );
    // The process is confined (Landlock sets no_new_privs).
    let pid = lsp(&s, "fake").unwrap().status.pid.unwrap();
    let proc_status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(proc_status.contains("NoNewPrivs:\t1"), "{proc_status}");
}

#[test]
fn a_setuid_program_gains_nothing() {
    let v = Victim::new();
    // A set-user-ID copy of `id` owned by another user: run unconfined it
    // would take that user's identity.
    let id = v.env.ws.join("setuid-id");
    std::fs::copy("/usr/bin/id", &id).unwrap();
    let euid = unsafe_free_euid();
    let other = if euid == 0 { 65534 } else { euid };
    std::os::unix::fs::chown(&id, Some(other), None).ok();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&id, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let (_c, client) = v.start(None, json!({}));
    let out = allowed(&client, json!({"exec": [p(&id), "-u"]}));
    assert_eq!(
        out.trim(),
        euid.to_string(),
        "the set-user-ID bit was ignored"
    );
    // And asking for root directly gains nothing either.
    match attempt(&client, json!({"setuid": 0})) {
        Ok(now) => assert_eq!(now, euid.to_string()),
        Err(_) => assert_ne!(euid, 0),
    }
}

/// This process's effective uid (from /proc: no unsafe code in tests).
fn unsafe_free_euid() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    line.split_whitespace().nth(2).unwrap().parse().unwrap()
}

/// `entry` (a fake MCP server's) without its record file: a confined
/// server may not write it.
pub(crate) fn unrecorded(mut entry: Value) -> Value {
    let key = steward_tests::fake_mcp::CONFIG_ENV;
    let mut config: Value = serde_json::from_str(entry["env"][key].as_str().unwrap()).unwrap();
    config.as_object_mut().unwrap().remove("record");
    entry["env"][key] = json!(config.to_string());
    entry
}

fn reason_of(s: &steward_schema::resource::WorkspaceStatus, name: &str) -> Option<Reason> {
    mcp(s, name).and_then(|m| m.status.reason)
}

#[test]
fn widening_the_sandbox_of_an_approved_server_asks_again_and_narrowing_does_not() {
    let env = Env::new();
    let srv = unrecorded(env.fake_mcp("srv", tools(&["t1"])));
    env.write(
        ".mcp.json",
        &json!({"mcpServers": {"srv": srv}}).to_string(),
    );
    let user = |default: &str, mine: Value| {
        env.write_home(
            "settings.json",
            &json!({"steward": {"sandbox": {"default": default, "profiles": {"mine": mine}}}})
                .to_string(),
        );
    };
    user("network", json!({"read": ["./data"]}));
    let c = env.start(&[]);
    c.wait_for("srv pending approval", |s| {
        reason_of(s, "srv") == Some(Reason::PendingApproval)
    });
    assert_eq!(env.run(&["approve", "srv"]).code, 0);
    let s = c.wait_for("srv Ready under network", |s| ready(s, "srv"));
    assert_eq!(
        mcp(&s, "srv")
            .unwrap()
            .status
            .sandbox
            .as_ref()
            .unwrap()
            .profile,
        "network"
    );
    let bound = std::fs::read_to_string(env.home.join("steward/sandbox-approvals.json")).unwrap();
    assert!(bound.contains("\"network\""), "{bound}");
    assert!(
        !std::fs::read_to_string(env.home.join("mcpApprovals.json"))
            .unwrap()
            .contains("sandbox"),
        "never in Qwen Code's file"
    );

    // Narrower default: it restarts under `none`, still approved.
    let pid = pid_of(&s, "srv").unwrap();
    user("none", json!({"read": ["./data"]}));
    let s = c.wait_for("srv Ready under none", |s| {
        ready(s, "srv") && pid_of(s, "srv").is_some_and(|p| p != pid)
    });
    assert_eq!(
        mcp(&s, "srv")
            .unwrap()
            .status
            .sandbox
            .as_ref()
            .unwrap()
            .profile,
        "none"
    );

    // Wider than what was approved: asked again, saying what widened.
    user("standard", json!({"read": ["./data"]}));
    let s = c.wait_for("srv pending again", |s| {
        reason_of(s, "srv") == Some(Reason::PendingApproval)
    });
    let message = mcp(&s, "srv").unwrap().status.message.clone().unwrap();
    assert!(
        message.contains("wider than what was approved") && message.contains("standard"),
        "{message}"
    );
    assert_eq!(env.run(&["approve", "--all"]).code, 0);
    c.wait_for("srv Ready under standard", |s| ready(s, "srv"));

    // A named profile the entry uses, edited wider: asked again.
    let named = unrecorded(env.fake_mcp("srv", tools(&["t1"])));
    let mut named = named;
    named["sandbox"] = json!("mine");
    env.write(
        ".mcp.json",
        &json!({"mcpServers": {"srv": named}}).to_string(),
    );
    c.wait_for("the edited entry pending", |s| {
        reason_of(s, "srv") == Some(Reason::PendingApproval)
    });
    assert_eq!(env.run(&["approve", "srv"]).code, 0);
    c.wait_for("srv Ready under mine", |s| ready(s, "srv"));
    user("standard", json!({"read": ["./data"], "write": ["./out"]}));
    let s = c.wait_for("srv pending for the wider profile", |s| {
        reason_of(s, "srv") == Some(Reason::PendingApproval)
    });
    let message = mcp(&s, "srv").unwrap().status.message.clone().unwrap();
    assert!(message.contains("writes ./out"), "{message}");
    // Narrowed back below what was approved: runs again without asking.
    user("standard", json!({}));
    c.wait_for("srv Ready under the narrowed profile", |s| ready(s, "srv"));
}

#[test]
fn no_sandboxed_server_outlives_a_sigkilled_or_stopped_controller() {
    // The shim arms the parent-death signal after it enters the server's
    // namespace (which would clear it): both ways of losing the controller
    // take every sandboxed server along.
    for (profile, kill) in [("none", true), ("standard", true), ("none", false)] {
        let v = Victim::new();
        let (mut c, client) = v.start(Some(json!(profile)), json!({}));
        drop(client);
        let s = c.status();
        let pid = pid_of(&s, "evil").unwrap();
        let tree = steward_tests::harness::process_tree(pid);
        if kill {
            c.kill();
        } else {
            assert!(c.terminate().expect("running").success());
        }
        steward_tests::harness::wait_all_gone(
            &format!(
                "the {profile} server after the controller {}",
                if kill { "was killed" } else { "stopped" }
            ),
            &tree,
        );
    }
}

#[test]
fn a_package_runner_without_network_reaches_only_its_registry_through_the_proxy() {
    let v = Victim::new();
    // The fake, started as `npx` (a package runner by its name).
    let bin = v.env.root.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let npx = bin.join("npx");
    std::os::unix::fs::symlink(steward_tests::harness::bin("fake-mcp-server"), &npx).unwrap();
    let mut entry = unrecorded(v.env.fake_mcp("evil", tools(&["t1"])));
    entry["command"] = json!(p(&npx));
    entry["sandbox"] = json!("none");
    v.env.write_home(
        "settings.json",
        &json!({"mcpServers": {"evil": entry}}).to_string(),
    );
    let c = v.env.start(&[]);
    let s = c.wait_for("evil Ready", |s| ready(s, "evil"));
    let sandbox = mcp(&s, "evil").unwrap().status.sandbox.clone().unwrap();
    assert_eq!(sandbox.network, SandboxNetwork::Proxy);
    assert_eq!(sandbox.hosts, ["registry.npmjs.org"]);
    assert!(
        sandbox
            .notes
            .iter()
            .any(|n| n.contains("npx may reach its registry")),
        "{:?}",
        sandbox.notes
    );
    let client = Hostile {
        client: v.rt.block_on(attach(&v.env, Agent::default())),
        rt: &v.rt,
    };
    // The registry passes the proxy (whatever the network then says);
    // anything else is refused there.
    let registry = allowed(&client, json!({"http": "https://registry.npmjs.org/"}));
    assert!(!registry.contains(" 403 "), "{registry}");
    let other = allowed(&client, json!({"http": "https://evil.example/"}));
    assert!(other.starts_with("HTTP/1.1 403"), "{other}");
    denied(&client, json!({"udp": "127.0.0.1:53"}));
}

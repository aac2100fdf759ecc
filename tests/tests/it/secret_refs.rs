//! Envtests of `${secret:NAME}` (issue 26): a server started by the real
//! controller gets its secrets — from Steward's file store when no Secret
//! Service is on the session bus (these tests' sandbox has no bus), from a
//! real GNOME Keyring on a private D-Bus session otherwise — and a known
//! value never shows up anywhere Steward writes or answers; rotation
//! restarts exactly the servers that use a secret; a missing one blocks
//! with the command; `steward secret move` rewrites one value of a file
//! with comments and keeps the running server and its approval.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use steward_schema::resource::{Phase, Reason, WorkspaceStatus};
use steward_tests::fake_mcp::{CONFIG_ENV, FakeMcpConfig, HttpConfig};
use steward_tests::harness::{
    DEADLINE, Env, Run, bin, eventually, fake_tools as tools, lsp_json, lsp_pid, lsp_ready, mcp,
    pid_of, ready, wait_until,
};

/// The value of `${secret:tok}` in these tests: grepped for everywhere.
const VALUE: &str = "sv-7f3e9c1d-known-value";
/// The bearer token a remote server takes, from `${secret:hdr}`.
const HEADER_VALUE: &str = "hv-51aa0e2b-bearer";

/// `steward secret set NAME` with `value` on stdin.
pub fn set_secret(env: &Env, name: &str, value: &str) -> Run {
    let mut child = env
        .cli(&["secret", "set", name])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn steward secret set");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{value}\n").as_bytes())
        .unwrap();
    Run::from(child.wait_with_output().unwrap())
}

/// The environment of process `pid`, one `KEY=value` per entry.
pub(crate) fn environ(pid: u32) -> Vec<String> {
    let bytes = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    bytes
        .split(|b| *b == 0)
        .map(|e| String::from_utf8_lossy(e).into_owned())
        .collect()
}

pub(crate) fn assert_absent(what: &str, text: &str, values: &[&str]) {
    for value in values {
        assert!(!text.contains(value), "{what} shows {value}:\n{text}");
    }
}

/// Every file under `dir` (recursively) but `except` (a file or a
/// directory), as text.
pub(crate) fn files_under(dir: &Path, except: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path == except {
            continue;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            out.extend(files_under(&path, except));
        } else if kind.is_file() && path != except {
            let text =
                String::from_utf8_lossy(&std::fs::read(&path).unwrap_or_default()).into_owned();
            out.push((path, text));
        }
    }
    out
}

/// A fake MCP server in HTTP mode started by the test (killed on drop).
struct RemoteFake(Child, u16);

impl RemoteFake {
    fn start(env: &Env, name: &str, mut config: FakeMcpConfig) -> RemoteFake {
        let port_file = env.root.path().join(format!("{name}.port"));
        config.name = name.to_owned();
        config.record = Some(env.record(name));
        config.http = Some(HttpConfig {
            port_file: port_file.clone(),
        });
        let child = Command::new(bin("fake-mcp-server"))
            .env(CONFIG_ENV, config.to_json())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn the fake http server");
        wait_until(&format!("{name} writes its port"), || port_file.exists());
        let port = std::fs::read_to_string(&port_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        RemoteFake(child, port)
    }
}

impl Drop for RemoteFake {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An entry of the fake server with `env` added to its environment.
fn fake_with_env(env: &Env, name: &str, extra: &[(&str, &str)]) -> Value {
    let mut entry = env.fake_mcp(name, tools(&["t"]));
    for (k, v) in extra {
        entry["env"][*k] = json!(v);
    }
    entry
}

/// `GET /metrics` of the endpoint the controller's log names.
pub(crate) fn scrape(log: &str) -> String {
    let addr = log
        .lines()
        .filter(|l| l.contains("metrics endpoint listening"))
        .find_map(|l| l.split("url=http://").nth(1))
        .and_then(|rest| rest.split("/metrics").next())
        .expect("the metrics address in the log")
        .to_owned();
    let mut stream = TcpStream::connect(&addr).unwrap();
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut body = String::new();
    stream.read_to_string(&mut body).unwrap();
    assert!(body.contains("steward_"), "{body}");
    body
}

/// An OTLP/HTTP receiver keeping the raw bodies it was sent.
pub(crate) fn otlp_receiver() -> (String, std::sync::Arc<std::sync::Mutex<Vec<u8>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let got: std::sync::Arc<std::sync::Mutex<Vec<u8>>> = Default::default();
    let sink = got.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let sink = sink.clone();
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 1 << 16];
                let mut all = Vec::new();
                let _ = stream.set_read_timeout(Some(Duration::from_millis(300)));
                while let Ok(n) = stream.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    all.extend_from_slice(&buf[..n]);
                    // One request per connection is enough to answer.
                    if all.windows(4).any(|w| w == b"\r\n\r\n") {
                        let _ = stream.write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n",
                        );
                    }
                }
                sink.lock().unwrap().extend_from_slice(&all);
            });
        }
    });
    (url, got)
}

#[test]
fn a_server_gets_its_secret_and_no_output_of_steward_ever_holds_the_value() {
    let env = Env::new();
    let set = set_secret(&env, "tok", VALUE);
    assert_eq!(set.code, 0, "{}", set.stderr);
    let store = env.home.join("steward").join("secrets.json");
    assert!(
        set.stdout.contains(&store.display().to_string()),
        "{}",
        set.stdout
    );
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&store).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the file store is private");
    assert_eq!(set_secret(&env, "hdr", HEADER_VALUE).code, 0);

    let remote = RemoteFake::start(
        &env,
        "remote",
        FakeMcpConfig {
            bearer_tokens: Some(vec![HEADER_VALUE.to_owned()]),
            ..tools(&["r"])
        },
    );
    // A port nobody listens on: the failed connect's message names the URL.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    env.user_mcp_servers(&[
        (
            "alpha",
            fake_with_env(&env, "alpha", &[("TOKEN", "${secret:tok}")]),
        ),
        ("plain", env.fake_mcp("plain", tools(&["p"]))),
        (
            "remote",
            json!({
                "httpUrl": format!("http://127.0.0.1:{}/mcp", remote.1),
                "headers": {"Authorization": "Bearer ${secret:hdr}"},
            }),
        ),
        (
            "broken",
            json!({"httpUrl": format!("http://127.0.0.1:{closed}/${{secret:tok}}/mcp")}),
        ),
    ]);
    let (otlp, spans) = otlp_receiver();
    let log = env.root.path().join("controller.log");
    let c = env.start_logging_to(
        &["--metrics-listen", "127.0.0.1:0"],
        std::fs::File::create(&log).unwrap().into(),
        &[
            ("RUST_LOG", "trace"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp),
        ],
        log.clone(),
    );
    let s = c.wait_for("alpha, plain, remote Ready; broken Failed", |s| {
        ready(s, "alpha")
            && ready(s, "plain")
            && ready(s, "remote")
            && mcp(s, "broken").is_some_and(|m| m.status.phase == Phase::Failed)
    });

    // The server that uses it has it; nobody else does.
    let alpha = pid_of(&s, "alpha").unwrap();
    assert!(
        environ(alpha).contains(&format!("TOKEN={VALUE}")),
        "alpha's environment lacks TOKEN"
    );
    let plain = pid_of(&s, "plain").unwrap();
    assert_absent("plain's environment", &environ(plain).join("\n"), &[VALUE]);
    assert_absent(
        "the controller's environment",
        &environ(c.pid()).join("\n"),
        &[VALUE, HEADER_VALUE],
    );

    // Every channel Steward answers or writes on.
    let values = [VALUE, HEADER_VALUE];
    for args in [
        &["status", "-o", "json"][..],
        &["status", "-o", "yaml"],
        &["status", "-o", "wide"],
        &["status", "-o", "json", "--show-secrets"],
        &["status", "-o", "yaml", "--show-secrets"],
        &["status", "--offline", "-o", "json", "--show-secrets"],
        &["describe", "alpha"],
        &["describe", "broken"],
        &["describe", "remote"],
        &["events"],
        &["logs", "alpha"],
        &["secret", "list", "-o", "json"],
        &["secret", "list"],
        &["export", "--format", "toolhive"],
    ] {
        let out = env.steward(args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_absent(&format!("steward {args:?}"), &text, &values);
    }
    let shown = env.steward(&["status", "-o", "json", "--show-secrets"]);
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    let alpha_item = shown["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["metadata"]["name"] == "alpha")
        .unwrap();
    assert_eq!(alpha_item["spec"]["env"]["TOKEN"], "${secret:tok}");
    let broken = mcp(&s, "broken").unwrap();
    let message = broken.status.message.clone().unwrap_or_default();
    // The URL is named, with the reference in place of the value.
    assert!(message.contains("/${secret:tok}/mcp"), "{message}");

    let metrics = scrape(&c.log_text());
    assert_absent("the metrics", &metrics, &values);
    eventually(
        "spans exported",
        DEADLINE,
        Duration::from_millis(100),
        || {
            if spans.lock().unwrap().is_empty() {
                Err("no span yet")
            } else {
                Ok(())
            }
        },
    );
    let sent = String::from_utf8_lossy(&spans.lock().unwrap()).into_owned();
    assert_absent("the OTLP spans", &sent, &values);
    // Files Steward persists (catalog cache, pins, the instance record...).
    wait_until("the catalog cache is written", || {
        files_under(&env.home, &store)
            .iter()
            .any(|(p, _)| p.ends_with("catalogCache.json"))
    });
    drop(c);
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(log_text.contains("TRACE"), "the log runs at trace level");
    assert_absent("the controller's log at trace", &log_text, &values);
    // Every file Steward could write; the fakes' own record files (the
    // servers' data, in the workspace where their sandbox lets them write)
    // aside.
    for (path, text) in files_under(&env.home, &store)
        .into_iter()
        .chain(files_under(&env.ws, &env.records()))
    {
        assert_absent(&path.display().to_string(), &text, &values);
    }
}

/// The pids of `names` in `s`.
fn pids(s: &WorkspaceStatus, names: &[&str]) -> Vec<Option<u32>> {
    names.iter().map(|n| pid_of(s, n)).collect()
}

#[test]
fn rotation_restarts_exactly_the_servers_that_use_the_secret_and_a_missing_one_blocks() {
    let env = Env::new();
    assert_eq!(set_secret(&env, "a", "value-a-1").code, 0);
    assert_eq!(set_secret(&env, "b", "value-b-1").code, 0);
    env.user_mcp_servers(&[
        ("a1", fake_with_env(&env, "a1", &[("T", "${secret:a}")])),
        (
            "a2",
            fake_with_env(&env, "a2", &[("T", "x-${secret:a}-${secret:b}")]),
        ),
        ("b1", fake_with_env(&env, "b1", &[("T", "${secret:b}")])),
        ("none", env.fake_mcp("none", tools(&["n"]))),
        ("c1", fake_with_env(&env, "c1", &[("T", "${secret:c}")])),
    ]);
    // A language server takes references too.
    let mut py = env.fake_lsp("py", Default::default(), &[".py"]);
    py["env"]["T"] = json!("${secret:a}");
    env.write(".lsp.json", &lsp_json(&[("py", py)]));
    let c = env.start(&[]);
    let s = c.wait_for("all but c1 Ready, c1 blocked", |s| {
        ["a1", "a2", "b1", "none"].iter().all(|n| ready(s, n))
            && lsp_ready(s, "py")
            && mcp(s, "c1").is_some_and(|m| m.status.reason == Some(Reason::SecretMissing))
    });
    let py_pid = lsp_pid(&s, "py").unwrap();
    assert!(environ(py_pid).contains(&"T=value-a-1".to_owned()));
    let c1 = mcp(&s, "c1").unwrap();
    assert_eq!(c1.status.phase, Phase::Blocked);
    assert!(
        c1.status
            .message
            .as_deref()
            .unwrap()
            .contains("steward secret set c"),
        "{:?}",
        c1.status.message
    );
    wait_until("the start-up line names the missing secret", || {
        c.log_text().contains("server c1 waits for its secrets")
    });
    let before = pids(&s, &["a1", "a2", "b1", "none"]);

    // Rotating `a` restarts a1 and a2, nothing else.
    let run = set_secret(&env, "a", "value-a-2");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("restarting"), "{}", run.stdout);
    let s = c.wait_for("a1, a2 and py restarted", |s| {
        ["a1", "a2"]
            .iter()
            .enumerate()
            .all(|(i, n)| ready(s, n) && pid_of(s, n) != before[i])
            && lsp_ready(s, "py")
            && lsp_pid(s, "py") != Some(py_pid)
    });
    assert!(environ(lsp_pid(&s, "py").unwrap()).contains(&"T=value-a-2".to_owned()));
    assert_eq!(pids(&s, &["b1", "none"]), before[2..].to_vec());
    assert!(environ(pid_of(&s, "a2").unwrap()).contains(&"T=x-value-a-2-value-b-1".to_owned()));

    // Removing `b` blocks its users with the command.
    assert_eq!(env.run(&["secret", "rm", "b"]).code, 0);
    let s = c.wait_for("b1 and a2 blocked", |s| {
        ["a2", "b1"]
            .iter()
            .all(|n| mcp(s, n).is_some_and(|m| m.status.reason == Some(Reason::SecretMissing)))
    });
    assert!(ready(&s, "a1") && ready(&s, "none"));
    // A change made outside Steward (the file store edited by hand) is
    // seen at `steward reload`.
    let store = env.home.join("steward").join("secrets.json");
    let mut file: Value = serde_json::from_str(&std::fs::read_to_string(&store).unwrap()).unwrap();
    file["secrets"]["b"] = json!("value-b-2");
    file["secrets"]["c"] = json!("value-c-1");
    std::fs::write(&store, file.to_string()).unwrap();
    let run = env.steward(&["reload"]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let s = c.wait_for("every server Ready again", |s| {
        ["a1", "a2", "b1", "none", "c1"].iter().all(|n| ready(s, n))
    });
    assert!(environ(pid_of(&s, "b1").unwrap()).contains(&"T=value-b-2".to_owned()));
    assert_eq!(
        pid_of(&s, "none"),
        before[3],
        "an unrelated server never restarts"
    );
}

/// A file with comments, a literal credential, and formatting to keep.
const MCP_JSON: &str = r#"// Team servers (keep this comment)
{
  "mcpServers": {
    /* the API server */
    "api": {
      "command": "@CMD@",
      "env": {
        "FAKE_MCP_CONFIG":   @CONFIG@,
        "API_KEY": "sk-literal-0a1b2c3d"   // rotate monthly
      }
    }
  }
}
"#;

#[test]
fn move_rewrites_one_value_of_a_commented_file_and_keeps_the_server_and_its_approval() {
    let env = Env::new();
    let config = serde_json::to_string(
        &FakeMcpConfig {
            name: "api".to_owned(),
            record: Some(env.record("api")),
            ..tools(&["t"])
        }
        .to_json(),
    )
    .unwrap();
    let text = MCP_JSON
        .replace("@CMD@", &bin("fake-mcp-server").to_string_lossy())
        .replace("@CONFIG@", &config);
    let file = env.write(".mcp.json", &text);
    // `validate` says what to run for the literal credential.
    let validate = env.run(&["validate"]);
    let command = format!("steward secret move {} api env.API_KEY", file.display());
    assert!(
        validate.stdout.contains(&command) || validate.stderr.contains(&command),
        "{validate:?}"
    );
    assert_eq!(env.run(&["approve", "api"]).code, 0);
    let c = env.start(&[]);
    let s = c.wait_for("api Ready", |s| ready(s, "api"));
    let pid = pid_of(&s, "api").unwrap();
    let old_hash = mcp(&s, "api").unwrap().spec.config_hash.clone();

    let run = env.run(&[
        "secret",
        "move",
        ".mcp.json",
        "api",
        "env.API_KEY",
        "--name",
        "api-key",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("approval was renewed"),
        "{}",
        run.stdout
    );
    let moved = std::fs::read_to_string(&file).unwrap();
    assert_eq!(
        moved,
        text.replace("\"sk-literal-0a1b2c3d\"", "\"${secret:api-key}\""),
        "only the one value changes, byte for byte"
    );
    let s = c.wait_for("the new spec observed", |s| {
        mcp(s, "api").is_some_and(|m| {
            m.spec.config_hash != old_hash
                && m.status.observed_hash.as_deref() == Some(m.spec.config_hash.as_str())
        })
    });
    assert_eq!(pid_of(&s, "api"), Some(pid), "the server never restarted");
    assert!(ready(&s, "api"), "and never waited for approval");
    let validate = env.run(&["validate"]);
    assert!(!validate.stdout.contains("secret move"), "{validate:?}");

    // Without a controller, the CLI rewrites the file itself.
    drop(c);
    env.user_mcp_servers(&[(
        "gh",
        json!({"command": "gh-mcp", "headers": {}, "env": {"GITHUB_TOKEN": "ghp_literal_123"}}),
    )]);
    let settings = env.home.join("settings.json");
    let run = env.run(&[
        "secret",
        "move",
        settings.to_str().unwrap(),
        "gh",
        "env.GITHUB_TOKEN",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let after = std::fs::read_to_string(&settings).unwrap();
    assert!(
        after.contains("\"${secret:gh.env.GITHUB_TOKEN}\""),
        "{after}"
    );
    let list = env.run(&["secret", "list", "-o", "json"]);
    let list: Value = serde_json::from_str(&list.stdout).unwrap();
    assert_eq!(list["backend"], "file");
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["api-key", "gh.env.GITHUB_TOKEN"]);
    assert_eq!(list["items"][1]["usedBy"], json!(["McpServer/gh"]));
}

#[test]
fn require_references_makes_a_literal_credential_invalid() {
    let env = Env::new();
    env.write(
        ".mcp.json",
        r#"{"mcpServers": {"api": {"command": "srv", "env": {"API_KEY": "sk-1"}},
                           "ok": {"command": "srv", "env": {"API_KEY": "${secret:k}"}}}}"#,
    );
    env.write_home(
        "settings.json",
        r#"{"steward": {"secrets": {"requireReferences": true}}}"#,
    );
    let status = env.status_json(&[]);
    let api = steward_tests::harness::item(&status, "McpServer", "api");
    assert_eq!(api["status"]["reason"], "InvalidSpec");
    assert!(
        api["status"]["message"]
            .as_str()
            .unwrap()
            .contains("steward secret move"),
        "{api}"
    );
    let ok = steward_tests::harness::item(&status, "McpServer", "ok");
    assert_eq!(ok["status"]["reason"], "PendingApproval");
}

#[test]
fn export_writes_one_secret_stub_per_secret_and_reads_its_value_from_the_keyring() {
    let env = Env::new();
    env.user_mcp_servers(&[
        (
            "remote",
            json!({"httpUrl": "https://mcp.example.com/mcp",
                   "headers": {"Authorization": "Bearer ${secret:hdr}", "X-Team": "${secret:team}"}}),
        ),
        (
            "github",
            json!({"command": "docker",
                   "args": ["run", "-i", "--rm", "-e", "GITHUB_TOKEN", "ghcr.io/github/github-mcp-server:v1.0.0"],
                   "env": {"GITHUB_TOKEN": "${secret:gh}"}}),
        ),
    ]);
    let out = env.run(&["export", "--format", "toolhive", "--anonymous"]);
    assert_eq!(out.code, 0, "{out:?}");
    for (stub, line) in [
        (
            "name: hdr-token",
            "secret-tool lookup service steward name hdr)",
        ),
        (
            "name: team",
            "secret-tool lookup service steward name team)",
        ),
        ("name: gh", "secret-tool lookup service steward name gh)"),
    ] {
        assert!(out.stdout.contains(stub), "{stub}:\n{}", out.stdout);
        assert!(out.stdout.contains(line), "{line}:\n{}", out.stdout);
    }
    let check = env
        .cli(&["export", "--format", "toolhive", "--check", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut check = check;
    check
        .stdin
        .take()
        .unwrap()
        .write_all(out.stdout.as_bytes())
        .unwrap();
    let checked = check.wait_with_output().unwrap();
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stdout)
    );
}

/// A private D-Bus session (no service activation) with a real GNOME
/// Keyring on it, its login keyring unlocked; both killed on drop.
pub(crate) struct Keyring {
    dbus: Child,
    daemon: Child,
    pub(crate) address: String,
    /// HOME of the keyring daemon and of `secret-tool`.
    home: PathBuf,
}

const BUS_CONFIG: &str = r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=@SOCKET@</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"#;

impl Keyring {
    pub(crate) fn start(env: &Env) -> Keyring {
        use crate::metrics::on_path;
        let dbus_daemon = on_path("dbus-daemon", "dbus");
        let keyring_daemon = on_path("gnome-keyring-daemon", "gnome-keyring");
        on_path("secret-tool", "libsecret-tools");
        on_path("dbus-send", "dbus");
        let dir = env.root.path().join("keyring");
        let home = dir.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let socket = dir.join("bus");
        let config = dir.join("bus.conf");
        std::fs::write(
            &config,
            BUS_CONFIG.replace("@SOCKET@", &socket.to_string_lossy()),
        )
        .unwrap();
        let dbus = Command::new(dbus_daemon)
            .arg(format!("--config-file={}", config.display()))
            .arg("--nofork")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start dbus-daemon");
        wait_until("the session bus listens", || socket.exists());
        let address = format!("unix:path={}", socket.display());
        let mut daemon = Command::new(keyring_daemon)
            .args(["--unlock", "--components=secrets", "--foreground"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("DBUS_SESSION_BUS_ADDRESS", &address)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start gnome-keyring-daemon");
        // The login keyring's password, then EOF: created and unlocked.
        drop(
            daemon
                .stdin
                .take()
                .map(|mut s| s.write_all(b"test-password")),
        );
        let keyring = Keyring {
            dbus,
            daemon,
            address,
            home,
        };
        wait_until("the Secret Service is on the bus", || {
            keyring
                .secret_tool(&["search", "service", "steward-probe"], None)
                .status
                .code()
                .is_some_and(|c| c == 0 || c == 1)
                && keyring
                    .tool(
                        "dbus-send",
                        &[
                            "--session",
                            "--print-reply",
                            "--dest=org.freedesktop.DBus",
                            "/",
                            "org.freedesktop.DBus.NameHasOwner",
                            "string:org.freedesktop.secrets",
                        ],
                    )
                    .contains("boolean true")
        });
        keyring
    }

    fn tool(&self, name: &str, args: &[&str]) -> String {
        let out = Command::new(name)
            .args(args)
            .env("HOME", &self.home)
            .env("DBUS_SESSION_BUS_ADDRESS", &self.address)
            .output()
            .expect("run a D-Bus tool");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `secret-tool ARGS` on this session, `stdin` given as its input.
    pub(crate) fn secret_tool(&self, args: &[&str], stdin: Option<&str>) -> std::process::Output {
        let mut child = Command::new("secret-tool")
            .args(args)
            .env("HOME", &self.home)
            .env("DBUS_SESSION_BUS_ADDRESS", &self.address)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run secret-tool");
        let input = child.stdin.take().unwrap();
        if let Some(text) = stdin {
            let mut input = input;
            input.write_all(text.as_bytes()).unwrap();
        }
        child.wait_with_output().unwrap()
    }
}

impl Drop for Keyring {
    fn drop(&mut self) {
        for child in [&mut self.daemon, &mut self.dbus] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn a_secret_stored_with_secret_tool_in_a_real_gnome_keyring_reaches_the_server() {
    let env = Env::new();
    let keyring = Keyring::start(&env);
    env.set_var("DBUS_SESSION_BUS_ADDRESS", &keyring.address);
    let stored = keyring.secret_tool(
        &[
            "store",
            "--label=GitHub token",
            "service",
            "steward",
            "name",
            "gh-token",
        ],
        Some("kv-1-from-secret-tool"),
    );
    assert!(stored.status.success(), "{stored:?}");
    env.user_mcp_servers(&[(
        "srv",
        fake_with_env(&env, "srv", &[("GH", "${secret:gh-token}")]),
    )]);
    let c = env.start(&[]);
    let s = c.wait_for("srv Ready", |s| ready(s, "srv"));
    let pid = pid_of(&s, "srv").unwrap();
    assert!(environ(pid).contains(&"GH=kv-1-from-secret-tool".to_owned()));

    let list = env.run(&["secret", "list", "-o", "json"]);
    let list: Value = serde_json::from_str(&list.stdout).unwrap();
    assert_eq!(list["backend"], "secret-service", "{list}");
    assert_eq!(
        list["items"],
        json!([{"name": "gh-token", "set": true, "usedBy": ["McpServer/srv"]}])
    );
    // `steward secret set` stores where secret-tool finds it; no file store.
    let run = set_secret(&env, "other", "kv-other");
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("Secret Service"), "{}", run.stdout);
    let lookup = keyring.secret_tool(&["lookup", "service", "steward", "name", "other"], None);
    assert_eq!(String::from_utf8_lossy(&lookup.stdout), "kv-other");
    let store = env.home.join("steward").join("secrets.json");
    assert!(
        !store.exists(),
        "the file store is not used beside a keyring"
    );

    // Rotated with secret-tool (outside Steward): seen at `steward reload`.
    let stored = keyring.secret_tool(
        &[
            "store",
            "--label=GitHub token",
            "service",
            "steward",
            "name",
            "gh-token",
        ],
        Some("kv-2-from-secret-tool"),
    );
    assert!(stored.status.success());
    assert!(env.steward(&["reload"]).status.success());
    let s = c.wait_for("srv restarted", |s| {
        ready(s, "srv") && pid_of(s, "srv").is_some_and(|p| p != pid)
    });
    assert!(environ(pid_of(&s, "srv").unwrap()).contains(&"GH=kv-2-from-secret-tool".to_owned()));

    // Locked: SecretUnavailable, and never the file store's value instead.
    std::fs::create_dir_all(store.parent().unwrap()).unwrap();
    std::fs::write(
        &store,
        r#"{"version":1,"secrets":{"gh-token":"from-the-file"}}"#,
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o600)).unwrap();
    // (`secret-tool lock` crashes in libsecret 0.21; the D-Bus call is the same.)
    let locked = keyring.tool(
        "dbus-send",
        &[
            "--session",
            "--print-reply",
            "--dest=org.freedesktop.secrets",
            "/org/freedesktop/secrets",
            "org.freedesktop.Secret.Service.Lock",
            "array:objpath:/org/freedesktop/secrets/collection/login",
        ],
    );
    assert!(locked.contains("collection/login"), "{locked}");
    assert!(env.steward(&["reload"]).status.success());
    let s = c.wait_for("srv blocked: the keyring is locked", |s| {
        mcp(s, "srv").is_some_and(|m| m.status.reason == Some(Reason::SecretUnavailable))
    });
    let srv = mcp(&s, "srv").unwrap();
    assert_eq!(srv.status.phase, Phase::Blocked);
    assert!(
        srv.status.message.as_deref().unwrap().contains("locked"),
        "{:?}",
        srv.status.message
    );
    assert_eq!(srv.status.pid, None);
}

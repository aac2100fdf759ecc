//! Envtest: remote MCP servers through the real `steward run` — HTTPS with a
//! private CA named by `SSL_CERT_FILE`, the legacy SSE transport, OAuth with
//! Qwen Code's token store (read while valid, never refreshed nor written;
//! else `AuthRequired`), a remote server that restarts, and real peers
//! (`@modelcontextprotocol/server-everything` in its `sse` and
//! `streamableHttp` modes). Every wait is a condition with a deadline.

use crate::common;

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::peer;
use serde_json::{Value, json};
use steward_schema::resource::{McpTransport, Phase, Reason, WorkspaceStatus};
use steward_tests::fake_mcp::{
    CONFIG_ENV, FakeMcpConfig, HttpConfig, RecordEvent, TlsConfig, TokenEndpoint, read_record,
};
use steward_tests::harness::{Env, bin, eventually, fake_tools as tools, mcp, ready, wait_until};

/// Node starts slowly on a loaded 2-core machine.
const PEER_DEADLINE: Duration = Duration::from_secs(60);

/// A fake MCP server in HTTP mode, started by the test (killed on drop).
struct RemoteFake {
    child: Child,
    port: u16,
    record: PathBuf,
    scheme: &'static str,
}

impl RemoteFake {
    /// Starts the fake as `name`; `port` 0 picks a free one.
    fn start(env: &Env, name: &str, mut config: FakeMcpConfig, port: u16) -> RemoteFake {
        let port_file = env.root.path().join(format!("{name}.port"));
        let _ = std::fs::remove_file(&port_file);
        config.name = name.to_owned();
        config.record = Some(env.record(name));
        config.http = Some(HttpConfig {
            port_file: port_file.clone(),
        });
        config.http_port = (port != 0).then_some(port);
        let scheme = if config.tls.is_some() {
            "https"
        } else {
            "http"
        };
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
        RemoteFake {
            child,
            port,
            record: env.record(name),
            scheme,
        }
    }

    fn url(&self, host: &str, path: &str) -> String {
        format!("{}://{host}:{}{path}", self.scheme, self.port)
    }

    fn events(&self, kind: &str) -> Vec<RecordEvent> {
        read_record(&self.record)
            .unwrap()
            .into_iter()
            .filter(|e| e.event == kind)
            .collect()
    }

    fn initializes(&self) -> usize {
        self.events("recv")
            .iter()
            .filter(|e| e.method() == Some("initialize"))
            .count()
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RemoteFake {
    fn drop(&mut self) {
        self.kill();
    }
}

fn phase_of(s: &WorkspaceStatus, name: &str) -> Option<Phase> {
    mcp(s, name).map(|m| m.status.phase)
}

fn tools_of(s: &WorkspaceStatus, name: &str) -> Vec<String> {
    mcp(s, name)
        .and_then(|m| m.status.tools.clone())
        .unwrap_or_default()
}

#[test]
fn https_streamable_http_and_sse_servers_are_ready_with_the_ca_from_ssl_cert_file() {
    let env = Env::new();
    let ca = env.root.path().join("fake-ca.pem");
    let fake = RemoteFake::start(
        &env,
        "secure",
        FakeMcpConfig {
            tls: Some(TlsConfig {
                ca_file: ca.clone(),
            }),
            ..tools(&["t1", "t2"])
        },
        0,
    );
    env.set_var("SSL_CERT_FILE", &ca.to_string_lossy());
    env.user_mcp_servers(&[
        (
            "streamable",
            json!({"httpUrl": fake.url("127.0.0.1", "/mcp"), "headers": {"X-Api": "k"}}),
        ),
        // The certificate names localhost too.
        ("legacy", json!({"url": fake.url("localhost", "/sse")})),
    ]);
    let c = env.start(&[]);
    let s = c.wait_for("both https servers Ready", |s| {
        ready(s, "streamable") && ready(s, "legacy")
    });
    for name in ["streamable", "legacy"] {
        assert_eq!(tools_of(&s, name), ["t1", "t2"], "{name}");
    }
    assert_eq!(mcp(&s, "legacy").unwrap().spec.transport, McpTransport::Sse);
    assert_eq!(fake.initializes(), 2);
    assert!(
        fake.events("tls-error").is_empty(),
        "a TLS handshake failed"
    );
}

/// `expiresAt` in milliseconds since the epoch, `offset` from now.
fn expires_in(offset_ms: i64) -> i64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    now + offset_ms
}

/// A token store entry as Qwen Code writes it.
fn stored(server: &str, access: &str, expires_at: i64, token_url: &str) -> Value {
    json!({
        "serverName": server,
        "token": {
            "accessToken": access, "tokenType": "Bearer",
            "refreshToken": "refresh-7c1e", "expiresAt": expires_at,
        },
        "clientId": "qwen-client",
        "tokenUrl": token_url,
        "mcpServerUrl": "http://127.0.0.1/mcp",
        "updatedAt": 1_700_000_000_000i64,
    })
}

#[test]
fn qwen_codes_valid_tokens_are_used_expired_ones_never_refreshed_nor_written_and_none_is_auth_required()
 {
    let env = Env::new();
    let fake = RemoteFake::start(
        &env,
        "oauth",
        FakeMcpConfig {
            bearer_tokens: Some(vec!["stored-token-5b2d".to_owned()]),
            token_endpoint: Some(TokenEndpoint {
                client_id: "qwen-client".to_owned(),
                client_secret: None,
                refresh_token: "refresh-7c1e".to_owned(),
                access_token: "fresh-token-9a4f".to_owned(),
                expires_in: Some(3600),
                new_refresh_token: Some("rotated-3e8b".to_owned()),
            }),
            ..tools(&["private"])
        },
        0,
    );
    let token_url = fake.url("127.0.0.1", "/token");
    let tokens = env.home.join("mcp-oauth-tokens.json");
    let write_tokens = |entries: &[Value]| {
        steward_tests::harness::write_atomic(
            &tokens,
            &serde_json::to_string_pretty(entries).unwrap(),
        );
    };
    write_tokens(&[
        stored(
            "valid",
            "stored-token-5b2d",
            expires_in(3_600_000),
            &token_url,
        ),
        stored("expired", "old-token-0d17", expires_in(-1000), &token_url),
    ]);
    let written = std::fs::read(&tokens).unwrap();
    let oauth = json!({"enabled": true, "clientId": "qwen-client"});
    let entry =
        |path: &str, key: &str| json!({ key: fake.url("127.0.0.1", path), "oauth": oauth.clone() });
    env.user_mcp_servers(&[
        ("valid", entry("/mcp", "httpUrl")),
        ("expired", entry("/sse", "url")),
        ("missing", entry("/mcp", "httpUrl")),
    ]);
    // A server waiting for a sign-in is looked at again every 2 s here
    // (a minute by default).
    let c = env.start(&["--auth-recheck-ms", "2000"]);
    let auth_required = |s: &WorkspaceStatus, name: &str| {
        mcp(s, name).is_some_and(|m| m.status.reason == Some(Reason::AuthRequired))
    };
    let s = c.wait_for("valid Ready, expired and missing AuthRequired", |s| {
        ready(s, "valid") && auth_required(s, "expired") && auth_required(s, "missing")
    });
    assert_eq!(tools_of(&s, "valid"), ["private"]);
    for (name, path, what) in [
        (
            "missing",
            "/mcp",
            "the server needs OAuth and no one has signed in to it",
        ),
        (
            "expired",
            "/sse",
            "the server needs OAuth and no one has signed in to it",
        ),
    ] {
        let status = &mcp(&s, name).unwrap().status;
        assert_eq!(status.phase, Phase::Failed);
        let message = status.message.clone().unwrap_or_default();
        assert_eq!(
            message,
            format!(
                "connect to {}: {what}; sign in with `steward auth login {name}`",
                fake.url("127.0.0.1", path)
            ),
        );
    }
    // Qwen Code's file is Qwen Code's: never refreshed, never written.
    assert!(
        fake.events("token").is_empty(),
        "a Qwen Code token was refreshed"
    );
    assert_eq!(std::fs::read(&tokens).unwrap(), written);
    // Every MCP request carried an accepted token, or none.
    assert!(
        fake.events("auth")
            .iter()
            .all(|e| e.message["accepted"] == true || e.message["token"].is_null()),
    );

    // Qwen Code signs in (writes its store): seen at the next look, with
    // no restart loop meanwhile (one look every recheck).
    let mut entries: Vec<Value> = serde_json::from_slice(&written).unwrap();
    entries.push(stored(
        "missing",
        "stored-token-5b2d",
        expires_in(3_600_000),
        &token_url,
    ));
    write_tokens(&entries);
    let s = c.wait_for("missing Ready after Qwen Code's sign-in", |s| {
        ready(s, "missing")
    });
    assert_eq!(
        mcp(&s, "missing").unwrap().status.restarts,
        0,
        "counted as restarts"
    );

    let log = c.log_text();
    for secret in [
        "stored-token-5b2d",
        "old-token-0d17",
        "fresh-token-9a4f",
        "refresh-7c1e",
    ] {
        assert!(!log.contains(secret), "the log shows {secret}");
    }
}

/// A remote server that went away and came back (and so lost every
/// session) is Ready again soon, not after two failed pings 15 s apart and
/// then a crash backoff (~50 s): the lost session is noticed by the
/// transport (SSE stream end, the streamable-HTTP stream's reconnect) and
/// reported as an exit at once.
#[test]
fn a_remote_server_that_restarted_is_ready_again_within_seconds() {
    let env = Env::new();
    let mut fake = RemoteFake::start(&env, "remote-v1", tools(&["v1"]), 0);
    let port = fake.port;
    env.user_mcp_servers(&[
        ("h", json!({"httpUrl": fake.url("127.0.0.1", "/mcp")})),
        ("s", json!({"url": fake.url("127.0.0.1", "/sse")})),
    ]);
    // Pings as in production: detection must not wait for them. Unpinned:
    // the new server's tool, behind the same URL, would be quarantined
    // (tests/tests/it/pins.rs); here it only tells the servers apart.
    let c = env.start(&["--ping-interval-ms", "15000", "--pin-tools", "off"]);
    c.wait_for("h and s Ready", |s| ready(s, "h") && ready(s, "s"));

    fake.kill();
    let down = Instant::now();
    let s = c.wait_for("both noticed the server is gone", |s| {
        phase_of(s, "h") == Some(Phase::Failed) && phase_of(s, "s") == Some(Phase::Failed)
    });
    let noticed = down.elapsed();
    for name in ["h", "s"] {
        let message = mcp(&s, name)
            .and_then(|m| m.status.message.clone())
            .unwrap_or_default();
        assert!(
            message.contains("lost the session") || message.contains("connect to"),
            "{name}: {message}"
        );
    }
    let fake = RemoteFake::start(&env, "remote-v2", tools(&["v2"]), port);
    let up = Instant::now();
    c.wait_for("h and s Ready on the new server", |s| {
        tools_of(s, "h") == ["v2"] && tools_of(s, "s") == ["v2"]
    });
    let back = up.elapsed();
    println!("noticed the loss after {noticed:?}; Ready again {back:?} after the server came back");
    assert!(noticed < Duration::from_secs(5), "{noticed:?}");
    assert!(back < Duration::from_secs(10), "{back:?}");
    assert_eq!(fake.initializes(), 2);
}

/// A free TCP port on 127.0.0.1 (for a peer that takes its port from `PORT`).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A real peer server listening on a port (killed on drop).
pub(crate) struct PeerServer(Child);

impl Drop for PeerServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn everything(mode: &str, port: u16, env: &Env) -> PeerServer {
    let bin = peer(
        "@modelcontextprotocol/server-everything",
        "node_modules/.bin/mcp-server-everything",
    );
    let log =
        std::fs::File::create(env.root.path().join(format!("everything-{mode}.log"))).unwrap();
    let child = Command::new(bin)
        .arg(mode)
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn server-everything");
    let server = PeerServer(child);
    eventually(
        &format!("server-everything {mode} to listen on {port}"),
        PEER_DEADLINE,
        Duration::from_millis(50),
        || TcpStream::connect(("127.0.0.1", port)),
    );
    server
}

#[test]
fn real_server_everything_over_sse_and_streamable_http_is_ready_with_its_tools() {
    let env = Env::new();
    let (sse_port, http_port) = (free_port(), free_port());
    let _sse = everything("sse", sse_port, &env);
    let _http = everything("streamableHttp", http_port, &env);
    env.user_mcp_servers(&[
        (
            "ev-sse",
            json!({"url": format!("http://127.0.0.1:{sse_port}/sse")}),
        ),
        (
            "ev-http",
            json!({"httpUrl": format!("http://127.0.0.1:{http_port}/mcp")}),
        ),
    ]);
    let c = env.start(&[]);
    let s = c.wait_for_within("both Ready", PEER_DEADLINE, |s| {
        ready(s, "ev-sse") && ready(s, "ev-http")
    });
    for name in ["ev-sse", "ev-http"] {
        let tools = tools_of(&s, name);
        for t in ["echo", "get-sum"] {
            assert!(tools.iter().any(|x| x == t), "{name} lacks {t}: {tools:?}");
        }
        assert_eq!(phase_of(&s, name), Some(Phase::Ready));
        assert_eq!(mcp(&s, name).unwrap().status.restarts, 0, "{name}");
    }
}

#[test]
fn url_queries_and_header_values_reach_neither_the_log_nor_status_messages() {
    let env = Env::new();
    let mut fake = RemoteFake::start(&env, "vault", tools(&["t"]), 0);
    let headers = json!({"X-Api-Key": "header-secret-61d0"});
    env.user_mcp_servers(&[
        (
            "h",
            json!({"httpUrl": fake.url("127.0.0.1", "/mcp?key=query-secret-2b7a"), "headers": headers}),
        ),
        (
            "s",
            json!({"url": fake.url("127.0.0.1", "/sse?key=query-secret-2b7a"), "headers": headers}),
        ),
    ]);
    let c = env.start(&[]);
    c.wait_for("h and s Ready", |s| ready(s, "h") && ready(s, "s"));
    // Failures are where URLs end up in messages (ours and rmcp's logs).
    fake.kill();
    let s = c.wait_for("h and s failed to reconnect", |s| {
        ["h", "s"].iter().all(|name| {
            mcp(s, name).is_some_and(|m| {
                m.status.phase == Phase::Failed
                    && m.status
                        .message
                        .as_deref()
                        .is_some_and(|msg| msg.contains("connect to"))
            })
        })
    });
    for name in ["h", "s"] {
        let message = mcp(&s, name).unwrap().status.message.clone().unwrap();
        assert!(
            message.starts_with(&format!("connect to {}", fake.url("127.0.0.1", ""))),
            "{message}"
        );
        assert!(!message.contains("-secret-"), "{name}: {message}");
    }
    let log = c.log_text();
    assert!(
        log.contains("lost the session"),
        "no loss in the log:\n{log}"
    );
    assert!(!log.contains("-secret-"), "a secret in the log:\n{log}");
}

/// Qwen Code's own token-store code (`MCPOAuthTokenStorage`,
/// `MCPOAuthProvider` of the real `@qwen-code/qwen-code`), run by node with
/// `QWEN_HOME` set: `save NAME CREDENTIAL_JSON` stores a token as Qwen Code
/// does after authenticating; `get NAME OAUTH_CONFIG_JSON` prints the token
/// Qwen Code would connect with (refreshing an expired one).
const QWEN_OAUTH_JS: &str = r#"
const m = await import(process.env.QWEN_CHUNK);
const [action, server, arg] = process.argv.slice(1);
const storage = new m.MCPOAuthTokenStorage();
if (action === 'save') {
  const c = JSON.parse(arg);
  await storage.saveToken(server, c.token, c.clientId, c.tokenUrl, c.mcpServerUrl);
} else {
  const token = await new m.MCPOAuthProvider(storage).getValidToken(server, JSON.parse(arg));
  process.stdout.write(JSON.stringify({ token }));
}
"#;

/// Runs [`QWEN_OAUTH_JS`] against the token store of `home`.
fn qwen_oauth(home: &std::path::Path, action: &str, server: &str, arg: &Value) -> Value {
    let chunks = common::peers_dir().join("node_modules/@qwen-code/qwen-code/chunks");
    peer(
        "@qwen-code/qwen-code",
        "node_modules/@qwen-code/qwen-code/cli.js",
    );
    // The bundle's chunk names are content hashes: find the token store's.
    let chunk = std::fs::read_dir(&chunks)
        .unwrap()
        .flatten()
        .map(|entry| entry.path())
        .find(|path| {
            std::fs::read_to_string(path)
                .is_ok_and(|text| text.contains("var MCPOAuthTokenStorage = class"))
        })
        .expect("a Qwen Code chunk defines MCPOAuthTokenStorage");
    let out = Command::new("node")
        .args(["--input-type=module", "-e", QWEN_OAUTH_JS, action, server])
        .arg(arg.to_string())
        .env("QWEN_CHUNK", &chunk)
        .env("QWEN_HOME", home)
        .env("HOME", home)
        .output()
        .expect("run node");
    assert!(
        out.status.success(),
        "qwen {action}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    if action == "save" {
        return Value::Null;
    }
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Differential test against the real Qwen Code: a token Qwen Code stored
/// with its own storage code is the one Steward connects with, and the
/// file is byte for byte what Qwen Code wrote afterwards.
#[test]
fn steward_connects_with_the_token_qwen_code_stored_and_leaves_its_file_alone() {
    let env = Env::new();
    let fake = RemoteFake::start(
        &env,
        "shared",
        FakeMcpConfig {
            bearer_tokens: Some(vec!["qwen-token-61c0".to_owned()]),
            ..tools(&["t"])
        },
        0,
    );
    let server_url = fake.url("127.0.0.1", "/mcp");
    let oauth = json!({"enabled": true, "clientId": "qwen-client"});
    let token = json!({
        "token": {
            "accessToken": "qwen-token-61c0", "tokenType": "Bearer",
            "refreshToken": "refresh-7c1e", "expiresAt": expires_in(3_600_000),
        },
        "clientId": "qwen-client",
        "tokenUrl": fake.url("127.0.0.1", "/token"),
        "mcpServerUrl": server_url,
    });
    qwen_oauth(&env.home, "save", "shared", &token);
    let store = env.home.join("mcp-oauth-tokens.json");
    let written = std::fs::read(&store).unwrap();
    env.user_mcp_servers(&[(
        "shared",
        json!({"httpUrl": server_url, "oauth": oauth.clone()}),
    )]);
    let c = env.start(&[]);
    c.wait_for("shared Ready", |s| ready(s, "shared"));
    assert!(
        fake.events("auth")
            .iter()
            .any(|e| e.message["token"] == "qwen-token-61c0" && e.message["accepted"] == true)
    );
    drop(c);
    assert_eq!(
        std::fs::read(&store).unwrap(),
        written,
        "Steward wrote Qwen Code's file"
    );
    // Qwen Code still reads its own token.
    let qwen = qwen_oauth(&env.home, "get", "shared", &oauth);
    assert_eq!(qwen["token"], "qwen-token-61c0");
}

/// Numbers, not a pass/fail test: a remote server is down
/// for 2 s (killed, then a new one on the same port); how long after it is
/// back is its McpServer Ready with the new server's tools, at production
/// timings (pings every 15 s, crash backoff 10 s, start backoff 500 ms)?
/// `cargo test -p steward-tests --test it mcp_remote::measure -- --ignored --nocapture`
#[test]
#[ignore = "measurement"]
fn measure_ready_again_after_a_two_second_outage() {
    for (transport, key, path) in [("http", "httpUrl", "/mcp"), ("sse", "url", "/sse")] {
        let env = Env::new();
        let mut fake = RemoteFake::start(&env, &format!("{transport}-v1"), tools(&["v1"]), 0);
        let port = fake.port;
        env.user_mcp_servers(&[("r", json!({ key: fake.url("127.0.0.1", path) }))]);
        let c = env.start(&[
            "--ping-interval-ms",
            "15000",
            "--crash-backoff-ms",
            "10000",
            "--start-backoff-ms",
            "500",
            "--pin-tools",
            "off",
        ]);
        c.wait_for("r Ready", |s| ready(s, "r"));
        fake.kill();
        // The outage itself, not a wait for a condition.
        std::thread::sleep(Duration::from_secs(2));
        let _fake = RemoteFake::start(&env, &format!("{transport}-v2"), tools(&["v2"]), port);
        let back = Instant::now();
        c.wait_for_within("r Ready on the new server", Duration::from_secs(90), |s| {
            tools_of(s, "r") == ["v2"]
        });
        println!(
            "{transport}: Ready with the new server's tools {:?} after it came back",
            back.elapsed()
        );
    }
}

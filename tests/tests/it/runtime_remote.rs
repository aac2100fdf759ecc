//! Remote MCP servers against the fake MCP server in HTTP mode: the SSE
//! and streamable-HTTP transports, lost sessions, authentication failures,
//! TLS roots, and refreshing an expired OAuth token at the fake's token
//! endpoint. (HTTPS through `SSL_CERT_FILE` is an envtest: the shared client
//! reads the process environment.)

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use steward::runtime::StartError;
use steward::runtime::mcp::remote::tls::{RootSources, build_client, load_roots};
use steward::runtime::mcp::{McpConnection, McpEvent, McpEventHandler, McpExit, McpTimeouts};
use steward::runtime::process::{ManagedProcess, ProcessSpec};
use steward_schema::resource::{McpServerSpec, McpTransport, Reason};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::runtime_common::{
    FAKE_MCP_SERVER, SOON, eventually, list_tools_through, received, record, spawner,
};

fn spec(transport: McpTransport, url: &str) -> McpServerSpec {
    McpServerSpec {
        transport,
        url: (transport == McpTransport::Sse).then(|| url.to_owned()),
        http_url: (transport == McpTransport::Http).then(|| url.to_owned()),
        headers: Some(BTreeMap::from([(
            "X-Steward-Test".to_owned(),
            "header-value".to_owned(),
        )])),
        ..Default::default()
    }
}

fn timeouts() -> McpTimeouts {
    McpTimeouts {
        stdio_handshake: SOON,
        remote_handshake: SOON,
        // Pings off unless a test wants them: events come from the transport.
        ping_interval: Duration::ZERO,
        ping_timeout: Duration::from_secs(2),
    }
}

/// The fake in HTTP mode with `config`; `port` 0 picks a free one.
struct Fake {
    process: ManagedProcess,
    port: u16,
    record: std::path::PathBuf,
}

impl Fake {
    async fn start(dir: &Path, name: &str, mut config: Value, port: u16) -> Fake {
        let port_file = dir.join(format!("{name}.port"));
        let _ = std::fs::remove_file(&port_file);
        let record = dir.join(format!("{name}.jsonl"));
        config["http"] = json!({ "portFile": port_file });
        config["record"] = json!(record);
        if port != 0 {
            config["httpPort"] = json!(port);
        }
        let process = spawner()
            .spawn(&ProcessSpec {
                program: FAKE_MCP_SERVER.to_owned(),
                env: BTreeMap::from([("FAKE_MCP_CONFIG".to_owned(), config.to_string())]),
                cwd: Some(dir.to_owned()),
                ..ProcessSpec::default()
            })
            .await
            .unwrap();
        eventually("the fake listens", || port_file.exists()).await;
        let port = std::fs::read_to_string(&port_file)
            .unwrap()
            .parse()
            .unwrap();
        Fake {
            process,
            port,
            record,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    async fn stop(mut self) {
        self.process.stop(Duration::from_secs(5)).await;
    }
}

fn events() -> (McpEventHandler, mpsc::UnboundedReceiver<McpEvent>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (
        Arc::new(move |event| {
            let _ = tx.send(event);
        }),
        rx,
    )
}

async fn connect(
    spec: &McpServerSpec,
    timeouts: McpTimeouts,
) -> (
    Result<McpConnection, StartError>,
    mpsc::UnboundedReceiver<McpEvent>,
) {
    let (on_event, rx) = events();
    let spawner = spawner();
    let result =
        McpConnection::connect(&spawner, "remote", spec, Path::new("/"), timeouts, on_event).await;
    (result, rx)
}

async fn next_event(rx: &mut mpsc::UnboundedReceiver<McpEvent>) -> McpEvent {
    tokio::time::timeout(SOON, rx.recv())
        .await
        .expect("no event within the deadline")
        .expect("the event channel closed")
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| (*item).to_owned()).collect()
}

/// A loss reported as an exit, with the message the controller will show.
fn lost(event: &McpEvent) -> &str {
    match event {
        McpEvent::Exited(McpExit::Closed(message)) => message,
        other => panic!("expected a lost session, got {other:?}"),
    }
}

/// An error and its causes, `: `-separated.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let part = cause.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = cause.source();
    }
    text
}

#[tokio::test]
async fn sse_connect_lists_pings_and_follows_list_changes() {
    let dir = tempfile::tempdir().unwrap();
    let fake = Fake::start(
        dir.path(),
        "sse",
        json!({
            "tools": ["t1", "t2", "t3"], "prompts": ["p1"], "pageSize": 2,
            "listChangedAfterMs": 300, "toolsAfterChange": ["t4"],
        }),
        0,
    )
    .await;
    let timeouts = McpTimeouts {
        ping_interval: Duration::from_millis(50),
        ..timeouts()
    };
    let (result, mut rx) = connect(&spec(McpTransport::Sse, &fake.url("/sse")), timeouts).await;
    let connection = result.unwrap();
    assert_eq!(connection.pid(), None);
    assert_eq!(connection.tools(), strings(&["t1", "t2", "t3"]));
    assert_eq!(connection.prompts(), strings(&["p1"]));
    // The notification arrives as a `message` event on the stream.
    assert_eq!(next_event(&mut rx).await, McpEvent::ListsChanged);
    assert_eq!(connection.tools(), strings(&["t4"]));
    eventually("pings reach the server", || {
        received(&fake.record, "ping").len() >= 2
    })
    .await;
    let initialize = &received(&fake.record, "initialize")[0];
    assert_eq!(initialize["params"]["protocolVersion"], "2025-11-25");
    connection.stop(SOON, SOON).await;
    assert!(rx.try_recv().is_err(), "an event after stop");
    fake.stop().await;
}

#[tokio::test]
async fn an_sse_server_going_away_is_an_exit_at_once_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let fake = Fake::start(dir.path(), "sse", json!({}), 0).await;
    // No pings: the end of the event stream alone tells.
    let (result, mut rx) = connect(&spec(McpTransport::Sse, &fake.url("/sse")), timeouts()).await;
    let connection = result.unwrap();
    fake.stop().await;
    let event = next_event(&mut rx).await;
    let message = lost(&event);
    assert!(
        message.starts_with("lost the session: the event stream broke")
            || message == "lost the session: the server closed the event stream",
        "{message}"
    );
    connection.stop(SOON, SOON).await;
    assert!(rx.try_recv().is_err(), "the loss was reported twice");
}

/// A streamable-HTTP server that restarted (and so forgot our session) is a
/// lost session at the next request — not after two failed pings, and not
/// silently re-initialized by rmcp with stale lists.
#[tokio::test]
async fn a_restarted_http_server_is_a_lost_session_on_the_next_request() {
    let dir = tempfile::tempdir().unwrap();
    let fake = Fake::start(dir.path(), "h1", json!({ "tools": ["old"] }), 0).await;
    let port = fake.port;
    let url = fake.url("/mcp");
    let (result, mut rx) = connect(&spec(McpTransport::Http, &url), timeouts()).await;
    let connection = result.unwrap();
    fake.stop().await;
    let fake = Fake::start(dir.path(), "h2", json!({ "tools": ["new"] }), port).await;
    // Whichever request comes first — the background stream's reconnect or
    // this call — meets the new server, which does not know the session.
    let _ = list_tools_through(&connection).await;
    let started = Instant::now();
    let event = next_event(&mut rx).await;
    let message = lost(&event);
    assert!(
        message.starts_with("lost the session: the server answered HTTP 404")
            || message.starts_with("lost the session: the server is unreachable"),
        "{message}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(
        received(&fake.record, "initialize").is_empty(),
        "the session was re-initialized behind the controller's back"
    );
    connection.stop(SOON, SOON).await;
    fake.stop().await;
}

#[tokio::test]
async fn an_http_server_that_is_down_is_a_lost_session_at_the_first_failed_ping() {
    let dir = tempfile::tempdir().unwrap();
    let fake = Fake::start(dir.path(), "down", json!({}), 0).await;
    let timeouts = McpTimeouts {
        ping_interval: Duration::from_millis(100),
        ..timeouts()
    };
    let (result, mut rx) = connect(&spec(McpTransport::Http, &fake.url("/mcp")), timeouts).await;
    let connection = result.unwrap();
    fake.stop().await;
    let event = next_event(&mut rx).await;
    assert!(
        lost(&event).starts_with("lost the session: the server is unreachable: "),
        "{event:?}"
    );
    connection.stop(SOON, SOON).await;
    assert!(rx.try_recv().is_err(), "an Unresponsive event followed");
}

#[tokio::test]
async fn a_401_without_a_challenge_is_auth_required_too() {
    let dir = tempfile::tempdir().unwrap();
    let fake = Fake::start(
        dir.path(),
        "auth",
        json!({ "bearerTokens": ["t"], "bearerWithoutChallenge": true }),
        0,
    )
    .await;
    for (transport, path) in [(McpTransport::Sse, "/sse"), (McpTransport::Http, "/mcp")] {
        let (result, _rx) = connect(&spec(transport, &fake.url(path)), timeouts()).await;
        let error = result.unwrap_err();
        assert_eq!(error.reason, Reason::AuthRequired, "{transport:?}: {error}");
    }
    fake.stop().await;
}

#[tokio::test]
async fn remote_connect_errors_say_what_failed_without_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let fake = Fake::start(
        dir.path(),
        "auth",
        json!({ "bearerTokens": ["the-right-token"] }),
        0,
    )
    .await;
    // A path the server does not serve.
    let url = fake.url("/nope?key=secret");
    let (result, _rx) = connect(&spec(McpTransport::Sse, &url), timeouts()).await;
    let error = result.unwrap_err();
    assert_eq!(error.reason, Reason::StartFailed, "{error}");
    assert_eq!(
        error.message,
        format!(
            "connect to {}: the event stream request got HTTP 404 Not Found",
            fake.url("/nope")
        )
    );
    // 401 on either transport: AuthRequired, saying how to sign in.
    for (transport, path) in [(McpTransport::Sse, "/sse"), (McpTransport::Http, "/mcp")] {
        let mut spec = spec(transport, &fake.url(path));
        spec.headers = Some(BTreeMap::from([(
            "Authorization".to_owned(),
            "Bearer a-wrong-token".to_owned(),
        )]));
        let (result, _rx) = connect(&spec, timeouts()).await;
        let error = result.unwrap_err();
        assert_eq!(error.reason, Reason::AuthRequired, "{transport:?}: {error}");
        assert!(
            error.message.starts_with(&format!(
                "connect to {}: the server asks for a sign-in (HTTP 401); sign in with `steward auth login remote`",
                fake.url(path)
            )),
            "{error}"
        );
        assert!(!error.message.contains("a-wrong-token"), "{error}");
    }
    // The configured header was sent as it is.
    let auth: Vec<Value> = record(&fake.record)
        .into_iter()
        .filter(|e| e["event"] == "auth")
        .collect();
    assert!(
        auth.iter()
            .any(|e| e["message"]["token"] == "a-wrong-token"),
        "{auth:?}"
    );
    fake.stop().await;
}

/// The fake serving HTTPS; its made-up CA's certificate is `dir/<name>-ca.pem`.
async fn https_fake(dir: &Path, name: &str) -> (Fake, std::path::PathBuf) {
    let ca_file = dir.join(format!("{name}-ca.pem"));
    let fake = Fake::start(dir, name, json!({ "tls": { "caFile": ca_file } }), 0).await;
    (fake, ca_file)
}

#[tokio::test]
async fn an_untrusted_certificate_is_a_start_failure_naming_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let (fake, _ca) = https_fake(dir.path(), "tls").await;
    let url = format!("https://127.0.0.1:{}/mcp", fake.port);
    let (result, _rx) = connect(&spec(McpTransport::Http, &url), timeouts()).await;
    let error = result.unwrap_err();
    assert_eq!(error.reason, Reason::StartFailed, "{error}");
    assert!(
        error.message.starts_with(&format!("connect to {url}: ")),
        "{error}"
    );
    assert!(error.message.contains("UnknownIssuer"), "{error}");
    fake.stop().await;
}

#[tokio::test]
async fn an_extra_ca_file_adds_to_the_system_roots_and_https_works_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let (fake, ca_file) = https_fake(dir.path(), "tls").await;
    let system = RootSources {
        system: true,
        ..RootSources::default()
    };
    let with_ca = RootSources {
        file: Some(ca_file.clone()),
        ..system.clone()
    };
    let (system_roots, _) = load_roots(&system);
    let (roots, errors) = load_roots(&with_ca);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(roots.len(), system_roots.len() + 1);
    let client = build_client(&with_ca).unwrap();
    for host in ["127.0.0.1", "localhost"] {
        let response = client
            .get(format!("https://{host}:{}/nothing-here", fake.port))
            .send()
            .await
            .unwrap_or_else(|error| panic!("{host}: {}", error_chain(&error)));
        assert_eq!(response.status(), reqwest::StatusCode::NOT_FOUND, "{host}");
    }
    let error = build_client(&system)
        .unwrap()
        .get(format!("https://127.0.0.1:{}/", fake.port))
        .send()
        .await
        .unwrap_err();
    assert!(error_chain(&error).contains("UnknownIssuer"), "{error:?}");
    fake.stop().await;
}

/// Numbers, not a pass/fail test:
/// `cargo test -p steward-tests --test it runtime_remote::measure -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement"]
async fn measure_remote_connect_latency_and_root_loading() {
    let started = Instant::now();
    let (roots, _) = load_roots(&RootSources::from_env());
    let load = started.elapsed();
    let started = Instant::now();
    build_client(&RootSources::from_env()).unwrap();
    println!(
        "{} roots: load {load:?}, client with them {:?}",
        roots.len(),
        started.elapsed()
    );
    let dir = tempfile::tempdir().unwrap();
    let fake = Fake::start(dir.path(), "m", json!({ "tools": ["a", "b", "c"] }), 0).await;
    for (transport, path) in [(McpTransport::Http, "/mcp"), (McpTransport::Sse, "/sse")] {
        let spec = spec(transport, &fake.url(path));
        let mut latencies = Vec::new();
        for _ in 0..30 {
            let started = Instant::now();
            let (result, _rx) = connect(&spec, timeouts()).await;
            latencies.push(started.elapsed());
            result.unwrap().stop(SOON, SOON).await;
        }
        latencies.sort();
        println!(
            "{transport:?} connect p50 {:?} p95 {:?}",
            latencies[latencies.len() / 2],
            latencies[latencies.len() * 95 / 100]
        );
    }
    fake.stop().await;
}

//! The agent endpoint over streamable HTTP (`steward run --mcp-listen`)
//! with the PyPI `mcp` SDK's client, and the transport's
//! guards: Origin/Host (DNS rebinding), the token rule for non-loopback
//! addresses, bearer tokens. Traffic stays on the loopback interface.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt as _;
use std::time::Duration;

use crate::real_clients::{PyClient, http_url, inspector, text_of};
use serde_json::json;
use steward_tests::harness::{Env, fake_tools as tools, ready, wait_until};

/// The `host:port` of an `http://host:port/mcp` URL.
fn authority(url: &str) -> &str {
    url.trim_start_matches("http://").split('/').next().unwrap()
}

/// POST an `initialize` to `/mcp` at `addr` with `headers` (`Name: value`
/// lines, `Host` included) and return the response status code.
fn initialize_status(addr: &str, headers: &[String]) -> u16 {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "1"}},
    })
    .to_string();
    let mut request = String::from("POST /mcp HTTP/1.1\r\n");
    for h in headers {
        request.push_str(h);
        request.push_str("\r\n");
    }
    request.push_str(&format!(
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    let mut stream = TcpStream::connect(addr).expect("connect to the endpoint");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    // The status line is all we need (an accepted initialize streams on).
    let mut head = Vec::new();
    let mut buf = [0u8; 512];
    while !head.windows(2).any(|w| w == b"\r\n") {
        let n = stream.read(&mut buf).expect("read the response");
        assert!(n > 0, "the endpoint closed without answering");
        head.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&head);
    line.split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {line}"))
}

#[test]
fn python_sdk_clients_share_the_http_endpoint_and_get_list_changed_on_their_get_stream() {
    let env = Env::new();
    let alpha = env.fake_mcp("alpha", tools(&["t1"]));
    env.user_mcp_servers(&[("alpha", alpha.clone())]);
    let c = env.start(&["--mcp-listen", "127.0.0.1:0"]);
    let s = c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    let url = http_url(&s);
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{url}"
    );
    let mut one = PyClient::http(&env, &url, &[]);
    let mut two = PyClient::http(&env, &url, &[]);
    for client in [&mut one, &mut two] {
        assert_eq!(client.tool_names(), ["alpha__t1"]);
        let (result, progress) = client.call("alpha__t1", json!({"sleepMs": 300, "progress": 2}));
        assert_eq!(result["isError"], json!(false), "{result}");
        assert_eq!(progress.len(), 2, "progress over HTTP: {progress:?}");
    }
    let gateway = c.status().controller.gateway.unwrap();
    assert_eq!(gateway.clients.get("http"), Some(&2), "{gateway:?}");
    assert_eq!(gateway.listen.as_deref(), Some(url.as_str()));

    // An edit reaches both sessions through their GET streams.
    let mut config = tools(&["t1", "t2"]);
    config.name = "alpha".into();
    config.record = Some(env.record("alpha"));
    env.user_mcp_servers(&[("alpha", env.fake_mcp("alpha", config))]);
    for client in [&mut one, &mut two] {
        client.wait_notification("notifications/tools/list_changed", 1);
        assert_eq!(client.tool_names(), ["alpha__t1", "alpha__t2"]);
    }

    // Closing ends the session (DELETE), and the SDK is content with the
    // answer.
    for client in [one, two] {
        let stderr = client.close();
        assert!(
            !stderr.contains("Session termination failed"),
            "DELETE answered as the SDK expects:\n{stderr}"
        );
    }
    wait_until("both sessions are gone", || {
        c.status().controller.gateway.unwrap().clients.is_empty()
    });
}

#[test]
fn a_foreign_origin_or_host_is_refused_and_a_local_one_is_served() {
    let env = Env::new();
    env.user_mcp_servers(&[("alpha", env.fake_mcp("alpha", tools(&["t1"])))]);
    let c = env.start(&["--mcp-listen", "127.0.0.1:0"]);
    let url = http_url(&c.status());
    let addr = authority(&url).to_owned();
    let host = format!("Host: {addr}");
    // A page on another site (DNS rebinding, or a plain cross-origin fetch).
    assert_eq!(
        initialize_status(&addr, &[host.clone(), "Origin: http://evil.example".into()]),
        403
    );
    assert_eq!(
        initialize_status(&addr, &["Host: evil.example".into()]),
        403,
        "a rebound name"
    );
    // Local tools (no Origin, or a loopback one) are served.
    assert_eq!(initialize_status(&addr, std::slice::from_ref(&host)), 200);
    assert_eq!(
        initialize_status(
            &addr,
            &[
                host,
                format!(
                    "Origin: http://localhost:{}",
                    addr.rsplit(':').next().unwrap()
                )
            ]
        ),
        200
    );
}

#[test]
fn a_non_loopback_listen_without_a_private_token_file_refuses_to_start() {
    let env = Env::new();
    let out = env.steward(&["run", "--mcp-listen", "0.0.0.0:0"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--mcp-token-file"), "{stderr}");
    let token = env.root.path().join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = env.steward(&[
        "run",
        "--mcp-listen",
        "0.0.0.0:0",
        "--mcp-token-file",
        token.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("chmod 600"), "{stderr}");
    assert!(!env.paths().socket_path().exists(), "no controller started");
}

#[test]
fn with_a_token_a_wrong_or_missing_bearer_gets_401_and_the_right_one_is_served() {
    let env = Env::new();
    env.user_mcp_servers(&[("alpha", env.fake_mcp("alpha", tools(&["t1"])))]);
    let token = env.root.path().join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    // Any interface (the token is what protects it); the test talks to it
    // through the loopback interface only.
    let c = env.start(&[
        "--mcp-listen",
        "0.0.0.0:0",
        "--mcp-token-file",
        token.to_str().unwrap(),
    ]);
    let s = c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    let port = http_url(&s)
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches("/mcp")
        .to_owned();
    let addr = format!("127.0.0.1:{port}");
    let host = format!("Host: {addr}");
    assert_eq!(initialize_status(&addr, std::slice::from_ref(&host)), 401);
    assert_eq!(
        initialize_status(&addr, &[host.clone(), "Authorization: Bearer wrong".into()]),
        401
    );
    assert_eq!(
        initialize_status(&addr, &[host, "Authorization: Bearer s3cret".into()]),
        200
    );
    let url = format!("http://{addr}/mcp");
    let mut client = PyClient::http(&env, &url, &["Authorization: Bearer s3cret"]);
    assert_eq!(client.tool_names(), ["alpha__t1"]);
    client.close();
}

#[test]
fn an_idle_http_agent_keeps_its_session_while_connected_and_one_that_left_is_closed() {
    let env = Env::new();
    env.user_mcp_servers(&[("alpha", env.fake_mcp("alpha", tools(&["t1"])))]);
    let c = env.start(&["--mcp-listen", "127.0.0.1:0", "--mcp-http-idle-ms", "1500"]);
    let url = http_url(&c.wait_for("alpha Ready", |s| ready(s, "alpha")));
    let http_clients = |s: &steward_schema::resource::WorkspaceStatus| {
        s.controller
            .gateway
            .clone()
            .unwrap()
            .clients
            .get("http")
            .copied()
    };
    // An agent that stays connected (its GET stream open) but goes quiet.
    let mut quiet = PyClient::http(&env, &url, &[]);
    let (result, _) = quiet.call("alpha__t1", json!({"n": 1}));
    assert_eq!(text_of(&result), r#"{"n":1}"#);
    // An agent that leaves without a DELETE (the Inspector CLI does).
    let listed = inspector(
        &env,
        std::slice::from_ref(&url),
        &["--method", "tools/list"],
    );
    assert_eq!(listed["tools"][0]["name"], "alpha__t1", "{listed}");
    c.wait_for("the session whose client left is closed", |s| {
        http_clients(s) == Some(1)
    });
    // The quiet one has been idle longer than the one closed, yet is served.
    let (result, _) = quiet.call("alpha__t1", json!({"n": 2}));
    assert_eq!(text_of(&result), r#"{"n":2}"#, "{}", quiet.stderr_text());
    quiet.close();
    wait_until("no HTTP session is left", || {
        http_clients(&c.status()).is_none()
    });
}

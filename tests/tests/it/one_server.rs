//! The one-server view (`steward mcp --server NAME`, `/mcp?server=NAME`):
//! one server under its own names, beside the union, with real clients; an
//! unknown or not admitted name refused with the reason (HTTP 404; on stdio
//! the first request's error).

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use steward_tests::harness::{Env, fake_tools as tools, mcp_servers, ready};

use crate::real_clients::{PyClient, http_url, steward_mcp_argv, text_of};

/// POST `body` to `url` (an `http://127.0.0.1:PORT/...` URL) and return the
/// status code and the body (the connection closes after the answer).
pub fn post(url: &str, body: &Value) -> (u16, String) {
    post_with(url, &[], body)
}

/// [`post`] with more `headers` (`Name: value`).
pub fn post_with(url: &str, headers: &[String], body: &Value) -> (u16, String) {
    let rest = url.trim_start_matches("http://");
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let body = body.to_string();
    let more: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\n{more}Content-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = TcpStream::connect(authority).expect("connect to the endpoint");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {response}"));
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

fn initialize() -> Value {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "1"}},
    })
}

/// `steward mcp --server NAME`'s argv.
fn one_server_argv(env: &Env, server: &str) -> Vec<String> {
    let mut argv = steward_mcp_argv(env);
    argv.extend(["--server".to_owned(), server.to_owned()]);
    argv
}

#[test]
fn one_server_is_served_under_its_own_names_over_stdio_and_http() {
    let env = Env::new();
    let mut alpha = tools(&["t1", "t2"]);
    alpha.prompts = vec!["greet".into()];
    env.user_mcp_servers(&[
        ("alpha", env.fake_mcp("alpha", alpha)),
        ("beta", env.fake_mcp("beta", tools(&["t1"]))),
    ]);
    let c = env.start(&["--mcp-listen", "127.0.0.1:0"]);
    let s = c.wait_for("alpha and beta Ready", |s| {
        ready(s, "alpha") && ready(s, "beta")
    });
    let url = http_url(&s);

    // stdio: the agent registers `steward mcp --server alpha`.
    let mut over_stdio = PyClient::stdio(&env, &one_server_argv(&env, "alpha"));
    assert_eq!(over_stdio.tool_names(), ["t1", "t2"]);
    let prompts: Vec<Value> = over_stdio.list("list_prompts");
    assert_eq!(prompts[0]["name"], "greet", "{prompts:?}");
    let (result, _) = over_stdio.call("t2", json!({"x": 1}));
    assert_eq!(result["isError"], json!(false), "{result}");
    assert!(text_of(&result).contains("\"x\""), "{result}");
    // Names of the union, and Steward's own tools, are not this view's.
    let unknown = over_stdio
        .try_run(json!({"op": "call_tool", "name": "alpha__t1", "arguments": {}}))
        .map(|answer| answer["result"].clone());
    assert!(
        matches!(&unknown, Err(e) if e.contains("server \"alpha\" does not offer it"))
            || matches!(&unknown, Ok(r) if r["isError"] == json!(true)),
        "{unknown:?}"
    );
    let session = over_stdio.run(json!({"op": "session"}));
    assert_eq!(
        session["serverInfo"]["name"], "alpha",
        "the view says what the server says of itself: {session}"
    );

    // HTTP: `/mcp?server=beta`, beside the union on the same endpoint.
    let mut over_http = PyClient::http(&env, &format!("{url}?server=beta"), &[]);
    assert_eq!(over_http.tool_names(), ["t1"]);
    let (result, _) = over_http.call("t1", json!({"y": 2}));
    assert_eq!(result["isError"], json!(false), "{result}");
    let mut union = PyClient::http(&env, &url, &[]);
    assert_eq!(union.tool_names(), ["alpha__t1", "alpha__t2", "beta__t1"]);

    let gateway = c.status().controller.gateway.unwrap();
    let mut views: Vec<Option<String>> =
        gateway.sessions.iter().map(|s| s.server.clone()).collect();
    views.sort();
    assert_eq!(
        views,
        [None, Some("alpha".to_owned()), Some("beta".to_owned())],
        "{gateway:?}"
    );
    // The calls count as the server's, as in the union.
    let calls = c.status();
    let alpha_calls = calls
        .items
        .iter()
        .find_map(|item| match item {
            steward_schema::resource::Item::McpServer(s) if s.metadata.name == "alpha" => {
                s.status.calls
            }
            _ => None,
        })
        .expect("alpha's calls are counted");
    assert!(alpha_calls.total >= 1, "{alpha_calls:?}");
}

#[test]
fn an_unknown_or_unadmitted_server_is_refused_with_the_reason() {
    let env = Env::new();
    env.user_mcp_servers(&[("alpha", env.fake_mcp("alpha", tools(&["t1"])))]);
    // A server of the workspace's own file waits for approval.
    env.write(
        ".mcp.json",
        &mcp_servers(&[("pending", env.fake_mcp("pending", tools(&["p"])))]),
    );
    let c = env.start(&["--mcp-listen", "127.0.0.1:0"]);
    let s = c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    let url = http_url(&s);

    let (status, body) = post(&format!("{url}?server=nope"), &initialize());
    assert_eq!(status, 404, "{body}");
    assert!(
        body.contains("\"nope\" is not configured in this workspace") && body.contains("alpha"),
        "{body}"
    );
    let (status, body) = post(&format!("{url}?server=pending"), &initialize());
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("steward approve pending"), "{body}");
    let (status, body) = post(&format!("{url}?server=alpha&expose=search"), &initialize());
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("expose and maxNameLen do not apply"),
        "{body}"
    );

    // stdio: the first request's error says why and what to run.
    let mut child = env
        .command(&["mcp", "--server", "pending"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{}", initialize()).unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    drop(stdin);
    let answer: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("pending approval") && message.contains("steward approve pending"),
        "{answer}"
    );
    let _ = child.wait();
}

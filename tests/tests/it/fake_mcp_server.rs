//! Self-test of the fake MCP server (`src/bin/fake-mcp-server/`).
//!
//! The first group drives it with the rmcp client, over stdio and streamable
//! HTTP, to prove it is a real MCP peer. The second speaks raw JSON lines to
//! prove each injected fault does what the config says. Every spawned server
//! gets its own process group, killed when the test ends; waits are
//! conditions with a deadline, never fixed sleeps.

use std::{
    os::unix::process::ExitStatusExt as _,
    path::{Path, PathBuf},
    process::{ExitStatus, Stdio},
    time::Duration,
};

use rmcp::{
    ClientHandler, RoleClient, ServiceExt as _,
    model::CallToolRequestParams,
    service::NotificationContext,
    transport::{StreamableHttpClientTransport, TokioChildProcess},
};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, Lines},
    process::{Child, ChildStderr, ChildStdin, ChildStdout, Command},
    sync::mpsc,
};

use steward_tests::fake_mcp::{
    CONFIG_ENV, FakeMcpConfig, GarbageWhen, GrandchildMode, HttpConfig, ListChangedStorm,
    RecordEvent, read_record,
};
use steward_tests::harness::{ProcStat, eventually_async};

const BIN: &str = env!("CARGO_BIN_EXE_fake-mcp-server");
const DEADLINE: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(10);

// ---------------------------------------------------------------- helpers

#[allow(unsafe_code)]
fn signal(pid: i32, sig: i32) -> bool {
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    unsafe { libc::kill(pid, sig) == 0 }
}

/// SIGKILLs, on drop, the process groups and lone pids a test started, so a
/// failing test leaks nothing (grandchildren included).
#[derive(Default)]
struct Reaper {
    groups: Vec<i32>,
    pids: Vec<i32>,
}

impl Drop for Reaper {
    fn drop(&mut self) {
        for &group in &self.groups {
            signal(-group, libc::SIGKILL);
        }
        for &pid in &self.pids {
            signal(pid, libc::SIGKILL);
        }
    }
}

/// A command for the fake with `config`, as leader of its own process group.
fn fake_command(config: &FakeMcpConfig) -> Command {
    let mut command = Command::new(BIN);
    command
        .env(CONFIG_ENV, config.to_json())
        .process_group(0)
        .kill_on_drop(true);
    command
}

/// Polls the record file until an event satisfies `pred`.
async fn wait_for_record(
    path: &Path,
    what: &str,
    pred: impl Fn(&RecordEvent) -> bool,
) -> RecordEvent {
    eventually_async(
        &format!("{what} in the record"),
        DEADLINE,
        POLL,
        async || {
            let record = read_record(path).expect("read record");
            match record.iter().find(|e| pred(e)) {
                Some(event) => Ok(event.clone()),
                None => Err(format!("record: {record:#?}")),
            }
        },
    )
    .await
}

fn is_recv_of(event: &RecordEvent, id: &Value) -> bool {
    event.event == "recv" && event.message.get("id") == Some(id)
}

fn is_send_of(event: &RecordEvent, id: &Value) -> bool {
    event.event == "send" && event.message.get("id") == Some(id)
}

async fn wait_exit(child: &mut Child) -> ExitStatus {
    tokio::time::timeout(DEADLINE, child.wait())
        .await
        .expect("server did not exit in time")
        .expect("wait for server")
}

/// `(pgid, sid)` of a live process, from /proc.
fn pgid_and_sid(pid: i32) -> (i32, i32) {
    let stat = ProcStat::read(pid).expect("read /proc stat");
    (stat.pgid, stat.session)
}

fn initialize(id: Value, version: &str) -> Value {
    json!({
        "jsonrpc": "2.0", "id": id, "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": { "name": "self-test", "version": "0" },
        },
    })
}

fn request(id: Value, method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}

/// The fake on raw stdio pipes, recording into a temp dir.
struct RawServer {
    child: Child,
    pid: i32,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    stderr: Option<ChildStderr>,
    record: PathBuf,
    reaper: Reaper,
    _dir: tempfile::TempDir,
}

impl RawServer {
    fn spawn(mut config: FakeMcpConfig) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let record = dir.path().join("record.jsonl");
        config.record = Some(record.clone());
        let mut child = fake_command(&config)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn fake-mcp-server");
        let pid = child.id().expect("pid") as i32;
        Self {
            stdin: child.stdin.take(),
            stdout: BufReader::new(child.stdout.take().unwrap()).lines(),
            stderr: child.stderr.take(),
            child,
            pid,
            record,
            reaper: Reaper {
                groups: vec![pid],
                pids: Vec::new(),
            },
            _dir: dir,
        }
    }

    async fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        let line = format!("{message}\n");
        stdin.write_all(line.as_bytes()).await.expect("write stdin");
        stdin.flush().await.expect("flush stdin");
    }

    /// The next stdout line; `None` at EOF.
    async fn line(&mut self) -> Option<String> {
        tokio::time::timeout(DEADLINE, self.stdout.next_line())
            .await
            .expect("no stdout line in time")
            .expect("read stdout")
    }

    async fn recv(&mut self) -> Value {
        let line = self.line().await.expect("stdout closed");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// Sends a request and returns its response (the next line).
    async fn call(&mut self, message: Value) -> Value {
        self.send(&message).await;
        let response = self.recv().await;
        assert_eq!(response["id"], message["id"], "response out of order");
        response
    }

    async fn wait_record(&self, what: &str, pred: impl Fn(&RecordEvent) -> bool) -> RecordEvent {
        wait_for_record(&self.record, what, pred).await
    }

    /// Closes stdin and returns every stdout line up to EOF, and the exit.
    async fn close_and_drain(&mut self) -> (Vec<String>, ExitStatus) {
        self.stdin = None;
        let mut lines = Vec::new();
        while let Some(line) = self.line().await {
            lines.push(line);
        }
        (lines, wait_exit(&mut self.child).await)
    }
}

/// Client handler that reports list_changed notifications on a channel.
#[derive(Clone)]
struct Watcher(mpsc::UnboundedSender<&'static str>);

impl ClientHandler for Watcher {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.0.send("tools");
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.0.send("prompts");
    }
}

fn watcher() -> (Watcher, mpsc::UnboundedReceiver<&'static str>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Watcher(tx), rx)
}

async fn next_notification(rx: &mut mpsc::UnboundedReceiver<&'static str>) -> &'static str {
    tokio::time::timeout(DEADLINE, rx.recv())
        .await
        .expect("no list_changed notification in time")
        .expect("client handler gone")
}

fn names<T: serde::Serialize>(items: &[T]) -> Vec<String> {
    items
        .iter()
        .map(|item| {
            serde_json::to_value(item).unwrap()["name"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Waits for the HTTP-mode fake to publish its port.
async fn wait_for_port(port_file: &Path) -> u16 {
    let text = eventually_async("the port file", DEADLINE, POLL, async || {
        std::fs::read_to_string(port_file)
    })
    .await;
    text.trim().parse().expect("port file holds a port")
}

// ------------------------------------------------------- rmcp client tests

#[tokio::test]
async fn rmcp_stdio_client_pages_through_tools_and_prompts_and_calls_a_tool() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("record.jsonl");
    let config = FakeMcpConfig {
        name: "alpha".into(),
        tools: strings(&["t1", "t2", "t3"]),
        prompts: strings(&["p1", "p2"]),
        page_size: Some(1),
        record: Some(record.clone()),
        ..FakeMcpConfig::default()
    };
    let transport = TokioChildProcess::new(fake_command(&config)).expect("spawn");
    let pid = transport.id().expect("pid");
    let _reaper = Reaper {
        groups: vec![pid as i32],
        pids: Vec::new(),
    };

    let client = ().serve(transport).await.expect("initialize");
    let info = serde_json::to_value(&*client.peer_info().expect("peer info")).unwrap();
    assert_eq!(info["serverInfo"]["name"], "alpha");
    // rmcp asks for a newer version than the fake knows: it answers its newest.
    assert_eq!(info["protocolVersion"], "2025-06-18");
    assert_eq!(info["capabilities"]["tools"]["listChanged"], true);

    let first = client.list_tools(None).await.expect("tools/list");
    assert_eq!(names(&first.tools), ["t1"]);
    assert!(first.next_cursor.is_some(), "pageSize 1 must paginate");
    let tools = client.list_all_tools().await.expect("all tools");
    assert_eq!(names(&tools), ["t1", "t2", "t3"]);
    let prompts = client.list_all_prompts().await.expect("all prompts");
    assert_eq!(names(&prompts), ["p1", "p2"]);

    let arguments = json!({ "text": "hi", "n": 2 });
    let result = client
        .call_tool(
            CallToolRequestParams::new("t2").with_arguments(arguments.as_object().unwrap().clone()),
        )
        .await
        .expect("tools/call");
    let result = serde_json::to_value(&result).unwrap();
    let text = result["content"][0]["text"].as_str().expect("text content");
    assert_eq!(serde_json::from_str::<Value>(text).unwrap(), arguments);
    assert!(
        client
            .call_tool(CallToolRequestParams::new("nope"))
            .await
            .is_err(),
        "unknown tool must be an error"
    );

    client.cancel().await.expect("close client");
    wait_for_record(&record, "exit", |e| e.event == "exit").await;
    let events = read_record(&record).unwrap();
    assert_eq!(events[0].event, "start");
    assert!(
        events.iter().all(|e| e.pid == pid),
        "every event carries the pid"
    );
    let received_methods: Vec<_> = events
        .iter()
        .filter(|e| e.event == "recv")
        .filter_map(|e| e.method())
        .collect();
    for method in [
        "initialize",
        "notifications/initialized",
        "tools/list",
        "tools/call",
    ] {
        assert!(
            received_methods.contains(&method),
            "{method} not recorded: {received_methods:?}"
        );
    }
    // One single-page call plus three pages from list_all_tools.
    assert_eq!(
        received_methods
            .iter()
            .filter(|m| **m == "tools/list")
            .count(),
        4
    );
    let initialize_id = &events
        .iter()
        .find(|e| e.method() == Some("initialize"))
        .unwrap()
        .message["id"];
    assert!(events.iter().any(|e| is_send_of(e, initialize_id)));
    assert_eq!(events.last().unwrap().message["reason"], "stdin closed");
}

#[tokio::test]
async fn rmcp_client_receives_list_changed_and_then_sees_the_new_lists() {
    let config = FakeMcpConfig {
        tools: strings(&["t1", "t2"]),
        prompts: strings(&["p1"]),
        list_changed_after_ms: Some(0),
        tools_after_change: Some(strings(&["t3"])),
        prompts_after_change: Some(strings(&["q1", "q2"])),
        ..FakeMcpConfig::default()
    };
    let transport = TokioChildProcess::new(fake_command(&config)).expect("spawn");
    let _reaper = Reaper {
        groups: vec![transport.id().unwrap() as i32],
        pids: Vec::new(),
    };
    let (handler, mut notifications) = watcher();
    let client = handler.serve(transport).await.expect("initialize");

    let mut seen = vec![
        next_notification(&mut notifications).await,
        next_notification(&mut notifications).await,
    ];
    seen.sort();
    assert_eq!(seen, ["prompts", "tools"]);
    assert_eq!(names(&client.list_all_tools().await.unwrap()), ["t3"]);
    assert_eq!(
        names(&client.list_all_prompts().await.unwrap()),
        ["q1", "q2"]
    );
    client.cancel().await.expect("close client");
}

/// Spawns the fake in HTTP mode and connects rmcp's streamable HTTP client.
async fn http_client(
    mut config: FakeMcpConfig,
    dir: &Path,
) -> (
    rmcp::service::RunningService<RoleClient, Watcher>,
    mpsc::UnboundedReceiver<&'static str>,
    Child,
    Reaper,
) {
    let port_file = dir.join("port");
    config.http = Some(HttpConfig {
        port_file: port_file.clone(),
    });
    let child = fake_command(&config)
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn fake-mcp-server");
    let reaper = Reaper {
        groups: vec![child.id().unwrap() as i32],
        pids: Vec::new(),
    };
    let port = wait_for_port(&port_file).await;
    // reqwest is built without a default crypto provider (see the workspace
    // Cargo.toml); a plain `Client::new()` needs one installed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let transport = StreamableHttpClientTransport::from_uri(format!("http://127.0.0.1:{port}/mcp"));
    let (handler, notifications) = watcher();
    let client = handler
        .serve(transport)
        .await
        .expect("initialize over HTTP");
    (client, notifications, child, reaper)
}

#[tokio::test]
async fn rmcp_streamable_http_client_works_against_http_mode() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("record.jsonl");
    let config = FakeMcpConfig {
        name: "web".into(),
        tools: strings(&["a", "b", "c"]),
        prompts: strings(&["p"]),
        page_size: Some(2),
        record: Some(record.clone()),
        ..FakeMcpConfig::default()
    };
    let (client, _notifications, mut child, _reaper) = http_client(config, dir.path()).await;

    let info = serde_json::to_value(&*client.peer_info().unwrap()).unwrap();
    assert_eq!(info["serverInfo"]["name"], "web");
    assert_eq!(
        names(&client.list_all_tools().await.unwrap()),
        ["a", "b", "c"]
    );
    assert_eq!(names(&client.list_all_prompts().await.unwrap()), ["p"]);
    let result = client
        .call_tool(
            CallToolRequestParams::new("b")
                .with_arguments(json!({"k": "v"}).as_object().unwrap().clone()),
        )
        .await
        .expect("tools/call over HTTP");
    assert_eq!(
        serde_json::to_value(&result).unwrap()["content"][0]["text"],
        r#"{"k":"v"}"#
    );
    client.cancel().await.expect("close client");

    let events = read_record(&record).unwrap();
    assert_eq!(events[0].message["mode"], "http");
    assert!(
        events
            .iter()
            .any(|e| e.event == "recv" && e.method() == Some("tools/call"))
    );
    assert!(signal(child.id().unwrap() as i32, libc::SIGTERM));
    assert_eq!(wait_exit(&mut child).await.code(), Some(0));
}

#[tokio::test]
async fn http_mode_delivers_list_changed_over_sse() {
    let dir = tempfile::tempdir().unwrap();
    let config = FakeMcpConfig {
        tools: strings(&["a"]),
        list_changed_after_ms: Some(0),
        tools_after_change: Some(strings(&["z"])),
        ..FakeMcpConfig::default()
    };
    let (client, mut notifications, _child, _reaper) = http_client(config, dir.path()).await;
    assert_eq!(next_notification(&mut notifications).await, "tools");
    assert_eq!(names(&client.list_all_tools().await.unwrap()), ["z"]);
    client.cancel().await.expect("close client");
}

#[tokio::test]
async fn http_mode_requires_the_session_it_issued() {
    let dir = tempfile::tempdir().unwrap();
    let port_file = dir.path().join("port");
    let config = FakeMcpConfig {
        http: Some(HttpConfig {
            port_file: port_file.clone(),
        }),
        ..FakeMcpConfig::default()
    };
    let child = fake_command(&config).stdin(Stdio::null()).spawn().unwrap();
    let _reaper = Reaper {
        groups: vec![child.id().unwrap() as i32],
        pids: Vec::new(),
    };
    let port = wait_for_port(&port_file).await;
    let ping = request(json!(1), "ping", json!({}));
    let (status, _) = http_post(port, &ping, None).await;
    assert_eq!(status, 400, "no session id");
    let (status, _) = http_post(port, &ping, Some("made-up")).await;
    assert_eq!(status, 404, "unknown session id");
    let (status, response) = http_post(port, &initialize(json!(0), "2025-03-26"), None).await;
    assert_eq!(status, 200);
    let session = header(&response, "mcp-session-id").expect("Mcp-Session-Id header");
    let (status, response) = http_post(port, &ping, Some(&session)).await;
    assert_eq!(status, 200);
    assert!(
        response.ends_with(r#"{"id":1,"jsonrpc":"2.0","result":{}}"#),
        "{response}"
    );
}

/// The value of header `name` (lower case) in a raw HTTP response.
fn header(response: &str, name: &str) -> Option<String> {
    response.lines().find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
    })
}

/// One POST on a fresh connection; returns the status and the raw response.
async fn http_post(port: u16, body: &Value, session: Option<&str>) -> (u16, String) {
    use tokio::io::AsyncReadExt as _;
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let body = body.to_string();
    let session = session
        .map(|s| format!("Mcp-Session-Id: {s}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{session}\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    // The fake keeps connections alive: read the head, then Content-Length bytes.
    let mut response = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(DEADLINE, stream.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        response.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&response).into_owned();
        if let Some(head_end) = text.find("\r\n\r\n") {
            let length: usize =
                header(&text[..head_end], "content-length").map_or(0, |v| v.parse().unwrap());
            if response.len() >= head_end + 4 + length || n == 0 {
                let status = text[9..12].parse().unwrap();
                return (status, text);
            }
        }
        assert!(n > 0, "connection closed early: {text}");
    }
}

// ------------------------------------------------------------ raw stdio

#[tokio::test]
async fn raw_protocol_negotiates_versions_and_answers_edge_cases() {
    let mut server = RawServer::spawn(FakeMcpConfig {
        tools: strings(&["t1", "t2", "t3"]),
        page_size: Some(2),
        ..FakeMcpConfig::default()
    });
    let response = server.call(initialize(json!(1), "2024-11-05")).await;
    assert_eq!(
        response["result"]["protocolVersion"], "2024-11-05",
        "supported: echoed"
    );
    let response = server.call(initialize(json!("init"), "2099-01-01")).await;
    assert_eq!(
        response["result"]["protocolVersion"], "2025-06-18",
        "unknown: newest"
    );
    server
        .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;

    let response = server.call(request(json!("abc"), "ping", json!({}))).await;
    assert_eq!(
        response,
        json!({"jsonrpc": "2.0", "id": "abc", "result": {}})
    );
    let response = server
        .call(request(json!(0), "resources/list", json!({})))
        .await;
    assert_eq!(response["error"]["code"], -32601);
    let response = server
        .call(request(json!(2), "tools/list", json!({})))
        .await;
    assert_eq!(response["result"]["nextCursor"], "2");
    let cursor = response["result"]["nextCursor"].clone();
    let response = server
        .call(request(json!(3), "tools/list", json!({"cursor": cursor})))
        .await;
    assert_eq!(response["result"]["tools"][0]["name"], "t3");
    assert!(response["result"].get("nextCursor").is_none(), "last page");
    let response = server
        .call(request(json!(4), "tools/list", json!({"cursor": "x"})))
        .await;
    assert_eq!(response["error"]["code"], -32602);
    let response = server
        .call(request(json!(5), "tools/call", json!({"name": "zz"})))
        .await;
    assert_eq!(response["error"]["code"], -32602);
    server
        .stdin
        .as_mut()
        .unwrap()
        .write_all(b"not json\n")
        .await
        .unwrap();
    let response = server.recv().await;
    assert_eq!(response["error"]["code"], -32700);
    assert_eq!(response["id"], Value::Null);

    let (rest, status) = server.close_and_drain().await;
    assert!(rest.is_empty(), "{rest:?}");
    assert_eq!(status.code(), Some(0), "stdin close exits 0");
}

#[tokio::test]
async fn config_argument_wins_over_the_environment_and_bad_config_exits_2() {
    let mut command = fake_command(&FakeMcpConfig {
        name: "from-env".into(),
        ..FakeMcpConfig::default()
    });
    command
        .arg("--config")
        .arg(r#"{"name":"from-arg"}"#)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let _reaper = Reaper {
        groups: vec![child.id().unwrap() as i32],
        pids: Vec::new(),
    };
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    stdin
        .write_all(format!("{}\n", initialize(json!(1), "2025-06-18")).as_bytes())
        .await
        .unwrap();
    let line = tokio::time::timeout(DEADLINE, stdout.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let response: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(response["result"]["serverInfo"]["name"], "from-arg");
    drop(stdin);
    assert_eq!(wait_exit(&mut child).await.code(), Some(0));

    let output = Command::new(BIN)
        .env(CONFIG_ENV, r#"{"tolls": ["typo"]}"#)
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("unknown field `tolls`"));
}

#[tokio::test]
async fn stderr_lines_are_written_at_start() {
    let mut server = RawServer::spawn(FakeMcpConfig {
        stderr_lines: strings(&["starting fake server", "second line"]),
        ..FakeMcpConfig::default()
    });
    let mut stderr = BufReader::new(server.stderr.take().unwrap()).lines();
    for expected in ["starting fake server", "second line"] {
        let line = tokio::time::timeout(DEADLINE, stderr.next_line())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(line.as_deref(), Some(expected));
    }
}

#[tokio::test]
async fn hang_in_initialize_answers_everything_but_initialize() {
    let mut server = RawServer::spawn(FakeMcpConfig {
        hang_in_initialize: true,
        ..FakeMcpConfig::default()
    });
    server.send(&initialize(json!(1), "2025-06-18")).await;
    // Had initialize been answered, its reply would come before the ping's.
    let response = server.call(request(json!(2), "ping", json!({}))).await;
    assert_eq!(response["result"], json!({}));
    let (rest, status) = server.close_and_drain().await;
    assert!(
        rest.is_empty(),
        "initialize must never be answered: {rest:?}"
    );
    assert_eq!(status.code(), Some(0));
    assert!(
        !read_record(&server.record)
            .unwrap()
            .iter()
            .any(|e| is_send_of(e, &json!(1)))
    );
}

#[tokio::test]
async fn initialize_delay_delays_only_the_initialize_answer() {
    let mut server = RawServer::spawn(FakeMcpConfig {
        initialize_delay_ms: 300,
        ..FakeMcpConfig::default()
    });
    server.send(&initialize(json!(1), "2025-06-18")).await;
    server.send(&request(json!(2), "ping", json!({}))).await;
    assert_eq!(
        server.recv().await["id"],
        2,
        "ping overtakes the delayed initialize"
    );
    assert_eq!(server.recv().await["id"], 1);
    let record = read_record(&server.record).unwrap();
    let received = record.iter().find(|e| is_recv_of(e, &json!(1))).unwrap().t;
    let answered = record.iter().find(|e| is_send_of(e, &json!(1))).unwrap().t;
    assert!(
        answered - received >= 300,
        "answered after {}ms",
        answered - received
    );
}

#[tokio::test]
async fn start_cpu_is_burnt_before_the_first_answer() {
    let mut server = RawServer::spawn(FakeMcpConfig {
        start_cpu_ms: 200,
        ..FakeMcpConfig::default()
    });
    server.call(initialize(json!(1), "2025-06-18")).await;
    // utime + stime (fields 14 and 15 of /proc/<pid>/stat, after the comm).
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", server.pid)).unwrap();
    let fields: Vec<u64> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .skip(11)
        .take(2)
        .map(|f| f.parse().unwrap())
        .collect();
    #[allow(unsafe_code)]
    // SAFETY: sysconf takes an integer and touches no memory of ours.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    let cpu_ms = (fields[0] + fields[1]) * 1000 / tick;
    // One tick of rounding.
    assert!(
        cpu_ms + 1000 / tick >= 200,
        "the fake used {cpu_ms} ms of CPU before answering"
    );
}

#[tokio::test]
async fn garbage_before_initialize_is_the_first_stdout_line() {
    let mut server = RawServer::spawn(FakeMcpConfig {
        garbage_on_stdout: Some(GarbageWhen::BeforeInitialize),
        ..FakeMcpConfig::default()
    });
    let garbage = server.line().await.unwrap();
    assert!(
        serde_json::from_str::<Value>(&garbage).is_err(),
        "{garbage}"
    );
    let response = server.call(initialize(json!(1), "2025-06-18")).await;
    assert!(response["result"]["serverInfo"].is_object());
}

#[tokio::test]
async fn garbage_after_initialize_follows_the_initialize_answer() {
    let mut server = RawServer::spawn(FakeMcpConfig {
        garbage_on_stdout: Some(GarbageWhen::AfterInitialize),
        ..FakeMcpConfig::default()
    });
    server.call(initialize(json!(1), "2025-06-18")).await;
    let garbage = server.line().await.unwrap();
    assert!(
        serde_json::from_str::<Value>(&garbage).is_err(),
        "{garbage}"
    );
    let response = server.call(request(json!(2), "ping", json!({}))).await;
    assert_eq!(
        response["result"],
        json!({}),
        "still answers after the garbage"
    );
}

#[tokio::test]
async fn a_list_changed_storm_sends_at_its_rate_then_changes_the_list() {
    let mut server = RawServer::spawn(FakeMcpConfig {
        tools: strings(&["a"]),
        list_changed_storm: Some(ListChangedStorm {
            per_second: 200,
            duration_ms: 300,
            after_ms: 0,
            tools_at_end: Some(strings(&["a", "z"])),
        }),
        ..FakeMcpConfig::default()
    });
    server.call(initialize(json!(0), "2025-06-18")).await;
    server
        .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    let end = server
        .wait_record("the end of the storm", |e| {
            e.event == "storm" && e.message["phase"] == "end"
        })
        .await;
    // 200/s for 300 ms, and the last one that announces the change.
    assert_eq!(end.message["sent"], 61);
    for _ in 0..61 {
        assert_eq!(
            server.recv().await["method"],
            "notifications/tools/list_changed"
        );
    }
    let record = read_record(&server.record).unwrap();
    let begin = record
        .iter()
        .find(|e| e.event == "storm" && e.message["phase"] == "begin")
        .expect("begin recorded");
    assert!(
        end.t - begin.t >= 300,
        "spread over the duration: {begin:?} .. {end:?}"
    );
    let response = server
        .call(request(json!(1), "tools/list", json!({})))
        .await;
    assert_eq!(
        names(response["result"]["tools"].as_array().unwrap()),
        ["a", "z"]
    );
    let (rest, _) = server.close_and_drain().await;
    assert!(rest.is_empty(), "nothing after the storm: {rest:?}");
}

#[tokio::test]
async fn stop_answering_goes_silent_but_stays_alive() {
    const SILENT_AFTER_MS: u64 = 1000;
    let mut server = RawServer::spawn(FakeMcpConfig {
        stop_answering_after_ms: Some(SILENT_AFTER_MS),
        ..FakeMcpConfig::default()
    });
    server.call(initialize(json!(0), "2025-06-18")).await;
    // Ping until the server's own clock (the record's `t`) passes the limit:
    // pings received before it are answered, the first one after is not.
    let mut answered = 0;
    let silent_id = loop {
        let id = json!(answered + 1);
        server.send(&request(id.clone(), "ping", json!({}))).await;
        let received = server
            .wait_record("recv of ping", |e| is_recv_of(e, &id))
            .await;
        if received.t >= SILENT_AFTER_MS {
            break id;
        }
        assert_eq!(server.recv().await["id"], id);
        answered += 1;
    };
    assert!(answered > 0, "no ping was answered before the limit");
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "a hung server stays alive"
    );
    // A request after the ping is not answered either (no overtaking).
    server
        .send(&request(json!("after"), "tools/list", json!({})))
        .await;
    server
        .wait_record("recv of tools/list", |e| is_recv_of(e, &json!("after")))
        .await;
    assert!(server.child.try_wait().unwrap().is_none());

    let (rest, status) = server.close_and_drain().await;
    assert!(
        rest.is_empty(),
        "silent server answered {silent_id}: {rest:?}"
    );
    assert_eq!(status.code(), Some(0));
}

#[tokio::test]
async fn crash_after_ms_exits_with_the_configured_code() {
    let mut server = RawServer::spawn(FakeMcpConfig {
        crash_after_ms: Some(50),
        exit_code: 7,
        ..FakeMcpConfig::default()
    });
    let status = wait_exit(&mut server.child).await;
    assert_eq!(status.code(), Some(7));
    let exit = server.wait_record("exit", |e| e.event == "exit").await;
    assert!(exit.t >= 50);
    assert_eq!(exit.message, json!({"code": 7, "reason": "crashAfterMs"}));
}

#[tokio::test]
async fn crash_after_listed_ms_counts_from_the_first_tools_list() {
    let mut server = RawServer::spawn(FakeMcpConfig {
        crash_after_listed_ms: Some(100),
        exit_code: 5,
        ..FakeMcpConfig::default()
    });
    let answer = server.call(initialize(json!(1), "2025-06-18")).await;
    assert!(answer.get("result").is_some(), "{answer}");
    // However long before the list, the server stays up until it is asked.
    let ping = server.call(request(json!(2), "ping", json!({}))).await;
    assert_eq!(ping["result"], json!({}));
    let listed = server
        .call(request(json!(3), "tools/list", json!({})))
        .await;
    let at = server
        .wait_record("the list answered", |e| {
            e.event == "send" && e.message["id"] == 3
        })
        .await
        .t;
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    assert_eq!(wait_exit(&mut server.child).await.code(), Some(5));
    let exit = server.wait_record("exit", |e| e.event == "exit").await;
    assert!(
        exit.t >= at + 100,
        "exited at {} ms, listed at {at} ms",
        exit.t
    );
    assert_eq!(
        exit.message,
        json!({"code": 5, "reason": "crashAfterListedMs"})
    );
}

#[tokio::test]
async fn sigterm_exits_zero_and_is_recorded() {
    let mut server = RawServer::spawn(FakeMcpConfig::default());
    // "start" is recorded after the SIGTERM handler is installed.
    server.wait_record("start", |e| e.event == "start").await;
    assert!(signal(server.pid, libc::SIGTERM));
    assert_eq!(wait_exit(&mut server.child).await.code(), Some(0));
    let record = read_record(&server.record).unwrap();
    let events: Vec<_> = record.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(events, ["start", "signal", "exit"]);
    assert_eq!(record[1].message, "SIGTERM");
}

#[tokio::test]
async fn ignore_sigterm_survives_sigterm_until_sigkill() {
    let mut server = RawServer::spawn(FakeMcpConfig {
        ignore_sigterm: true,
        ..FakeMcpConfig::default()
    });
    server.wait_record("start", |e| e.event == "start").await;
    assert!(signal(server.pid, libc::SIGTERM));
    server.wait_record("signal", |e| e.event == "signal").await;
    // Still serving after it handled the signal.
    let response = server.call(request(json!(1), "ping", json!({}))).await;
    assert_eq!(response["result"], json!({}));
    assert!(signal(server.pid, libc::SIGKILL));
    assert_eq!(
        wait_exit(&mut server.child).await.signal(),
        Some(libc::SIGKILL)
    );
}

/// Returns the grandchild's pid once the server recorded it.
async fn grandchild_of(server: &mut RawServer) -> i32 {
    let event = server
        .wait_record("grandchild", |e| e.event == "grandchild")
        .await;
    let pid = event.message["pid"].as_i64().unwrap() as i32;
    server.reaper.pids.push(pid);
    pid
}

#[tokio::test]
async fn grandchild_in_group_shares_the_process_group_and_outlives_the_server() {
    let mut server = RawServer::spawn(FakeMcpConfig {
        spawn_grandchild: Some(GrandchildMode::Group),
        ..FakeMcpConfig::default()
    });
    let grandchild = grandchild_of(&mut server).await;
    assert_eq!(
        pgid_and_sid(grandchild).0,
        server.pid,
        "in the server's group"
    );
    // The server exits on stdin close; the grandchild is left behind.
    server.stdin = None;
    assert_eq!(wait_exit(&mut server.child).await.code(), Some(0));
    assert!(signal(grandchild, 0), "grandchild still alive");
    // Killing the group takes it down (the reaper does the same on failure).
    assert!(signal(-server.pid, libc::SIGKILL));
}

#[tokio::test]
async fn grandchild_with_setsid_escapes_the_process_group() {
    let mut server = RawServer::spawn(FakeMcpConfig {
        spawn_grandchild: Some(GrandchildMode::Setsid),
        ..FakeMcpConfig::default()
    });
    let grandchild = grandchild_of(&mut server).await;
    // The server records the pid after spawn returned, i.e. after exec, so
    // setsid (run just before exec) has taken effect.
    assert_eq!(pgid_and_sid(grandchild), (grandchild, grandchild));
    assert_ne!(pgid_and_sid(grandchild).0, server.pid);
}

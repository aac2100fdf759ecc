//! Self-test of the fake LSP server (`src/bin/fake-lsp-server/`): drives
//! the built binary with a small raw LSP client (the framing lives here, on
//! purpose independent of the server's) over stdio, TCP and a unix socket,
//! and checks each fault a test can choose.
//!
//! Every server is killed and reaped by a drop guard; every wait is a read
//! with a timeout or a poll with a deadline, never a fixed sleep.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use steward_tests::harness::eventually;

const BIN: &str = env!("CARGO_BIN_EXE_fake-lsp-server");
/// Generous: the machine is shared and small.
const TIMEOUT: Duration = Duration::from_secs(15);
const POLL: Duration = Duration::from_millis(10);

const DOC: &str = "file:///ws/a.rs";
const DOC_TEXT: &str = "fn main() {\n    helper(); // ERROR\n}\ndef helper():\n    ERROR ERROR\n";

/// A running fake server; killed and reaped on drop, however the test ends.
struct Server {
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start(config: Value) -> Self {
        Self::start_with(config, &[])
    }

    fn start_with(config: Value, args: &[&str]) -> Self {
        let child = Command::new(BIN)
            .args(args)
            .env("FAKE_LSP_CONFIG", config.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn fake-lsp-server");
        Self { child }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The LSP connection over the child's stdin/stdout.
    fn stdio(&mut self) -> Conn {
        let stdin = self.child.stdin.take().expect("stdin");
        let stdout = self.child.stdout.take().expect("stdout");
        Conn::new(stdout, stdin)
    }

    fn wait_exit(&mut self) -> ExitStatus {
        let what = format!("server {} to exit", self.pid());
        eventually(&what, TIMEOUT, POLL, || {
            self.child.try_wait().expect("try_wait").ok_or("")
        })
    }

    fn assert_running(&mut self) {
        let status = self.child.try_wait().expect("try_wait");
        assert!(status.is_none(), "server exited: {status:?}");
    }

    fn sigterm(&self) {
        let pid = libc::pid_t::try_from(self.pid()).expect("pid fits pid_t");
        send_sigterm(pid);
    }
}

#[allow(unsafe_code)]
fn send_sigterm(pid: libc::pid_t) {
    // SAFETY: kill(2) takes plain integers; the pid is our own unreaped child,
    // so it cannot have been recycled for another process.
    let rc = unsafe { libc::kill(pid, libc::SIGTERM) };
    assert_eq!(rc, 0, "kill: {}", std::io::Error::last_os_error());
}

/// A raw LSP client connection. A reader thread parses frames into a
/// channel; `recv_where` takes the first message matching a predicate and
/// keeps the others for later, and `log` keeps them all in arrival order.
struct Conn {
    writer: Option<Box<dyn Write + Send>>,
    /// Shuts a socket down for both halves (the reader thread holds a clone,
    /// so dropping the writer alone would not disconnect).
    disconnect: Option<Box<dyn FnOnce() + Send>>,
    rx: Receiver<Value>,
    backlog: VecDeque<Value>,
    log: Vec<Value>,
    next_id: i64,
}

impl Conn {
    fn new(reader: impl Read + Send + 'static, writer: impl Write + Send + 'static) -> Self {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(reader);
            while let Some(message) = read_frame(&mut reader) {
                if tx.send(message).is_err() {
                    break;
                }
            }
        });
        Self {
            writer: Some(Box::new(writer)),
            disconnect: None,
            rx,
            backlog: VecDeque::new(),
            log: Vec::new(),
            next_id: 1,
        }
    }

    fn tcp(port: u16) -> Self {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect tcp");
        let mut conn = Self::new(
            stream.try_clone().expect("clone stream"),
            stream.try_clone().expect("clone stream"),
        );
        conn.disconnect = Some(Box::new(move || {
            let _ = stream.shutdown(Shutdown::Both);
        }));
        conn
    }

    fn unix(path: &Path) -> Self {
        let stream = UnixStream::connect(path).expect("connect unix socket");
        let mut conn = Self::new(
            stream.try_clone().expect("clone stream"),
            stream.try_clone().expect("clone stream"),
        );
        conn.disconnect = Some(Box::new(move || {
            let _ = stream.shutdown(Shutdown::Both);
        }));
        conn
    }

    fn send(&mut self, message: Value) {
        let body = message.to_string();
        let writer = self.writer.as_mut().expect("connection closed");
        write!(writer, "Content-Length: {}\r\n\r\n{body}", body.len()).expect("write frame");
        writer.flush().expect("flush frame");
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({ "jsonrpc": "2.0", "method": method, "params": params }));
    }

    /// Sends a request without waiting; returns its id.
    fn send_request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        id
    }

    /// Sends a request and returns the whole response message.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        self.response(id)
    }

    fn response(&mut self, id: i64) -> Value {
        self.recv_where(&format!("response {id}"), |m| {
            m.get("method").is_none() && m["id"] == id
        })
    }

    /// The result of a request that must succeed.
    fn call(&mut self, method: &str, params: Value) -> Value {
        let response = self.request(method, params);
        assert!(
            response.get("error").is_none(),
            "{method} failed: {response}"
        );
        response["result"].clone()
    }

    /// The next message with this method (a notification or a server request).
    fn recv_method(&mut self, method: &str) -> Value {
        self.recv_where(method, |m| m["method"] == method)
    }

    fn recv_where(&mut self, what: &str, matches: impl Fn(&Value) -> bool) -> Value {
        if let Some(index) = self.backlog.iter().position(&matches) {
            return self.backlog.remove(index).expect("index in range");
        }
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(message) => {
                    self.log.push(message.clone());
                    if matches(&message) {
                        return message;
                    }
                    self.backlog.push_back(message);
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!(
                        "timed out waiting for {what}; unclaimed: {:?}",
                        self.backlog
                    )
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!(
                        "stream closed waiting for {what}; unclaimed: {:?}",
                        self.backlog
                    )
                }
            }
        }
    }

    /// Position in arrival order of the first logged message matching.
    fn log_position(&self, matches: impl Fn(&Value) -> bool) -> usize {
        self.log.iter().position(matches).expect("message in log")
    }

    fn respond(&mut self, id: &Value, result: Value) {
        self.send(json!({ "jsonrpc": "2.0", "id": id, "result": result }));
    }

    /// Closes the connection: stdin EOF for stdio, a disconnect otherwise.
    fn close(&mut self) {
        self.writer = None;
        if let Some(disconnect) = self.disconnect.take() {
            disconnect();
        }
    }

    fn initialize(&mut self) -> Value {
        let result = self.call(
            "initialize",
            json!({
                "processId": std::process::id(),
                "rootUri": "file:///ws",
                "workspaceFolders": [{ "uri": "file:///ws", "name": "ws" }],
                "initializationOptions": { "flavour": "test" },
                "capabilities": {},
            }),
        );
        self.notify("initialized", json!({}));
        result
    }

    fn open(&mut self, uri: &str, version: i64, text: &str) {
        self.notify(
            "textDocument/didOpen",
            json!({ "textDocument": { "uri": uri, "languageId": "rust", "version": version, "text": text } }),
        );
    }

    fn shutdown_and_exit(&mut self) {
        assert_eq!(self.call("shutdown", Value::Null), Value::Null);
        self.notify("exit", Value::Null);
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.close();
    }
}

/// Reads one `Content-Length` frame; `None` at end of stream.
fn read_frame(reader: &mut impl BufRead) -> Option<Value> {
    let mut length = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(value) = line.strip_prefix("Content-Length:") {
            length = Some(value.trim().parse().expect("numeric Content-Length"));
        }
    }
    let mut body = vec![0; length.expect("Content-Length header")];
    reader.read_exact(&mut body).ok()?;
    Some(serde_json::from_slice(&body).expect("server sent JSON"))
}

fn position(uri: &str, line: u32, character: u32) -> Value {
    json!({ "textDocument": { "uri": uri }, "position": { "line": line, "character": character } })
}

fn range(start_line: u32, start: u32, end_line: u32, end: u32) -> Value {
    json!({ "start": { "line": start_line, "character": start },
            "end": { "line": end_line, "character": end } })
}

fn lines_of(locations: &Value) -> Vec<u64> {
    let locations = locations.as_array().expect("array");
    locations
        .iter()
        .map(|l| l["range"]["start"]["line"].as_u64().unwrap())
        .collect()
}

/// Every complete line of the record file so far.
fn records(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// Polls the record file until `done` holds, returning the records then.
fn wait_records(path: &Path, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    eventually(what, TIMEOUT, POLL, || {
        let records = records(path);
        if done(&records) {
            Ok(records)
        } else {
            Err(format!("records: {records:#?}"))
        }
    })
}

fn has_event(records: &[Value], event: &str) -> bool {
    records.iter().any(|r| r["event"] == event)
}

fn events<'a>(records: &'a [Value], event: &'a str) -> impl Iterator<Item = &'a Value> {
    records
        .iter()
        .filter(move |r| r["event"] == event)
        .map(|r| &r["message"])
}

fn wait_file(path: &Path) -> String {
    eventually(&path.display().to_string(), TIMEOUT, POLL, || {
        std::fs::read_to_string(path)
    })
}

fn record_path(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("lsp.jsonl")
}

/// The toy language: `fn`/`def` define, `impl` implements, other
/// occurrences call; across every open document.
const TOY_A: &str = "fn main\n    helper ERROR\nfn helper\n    leaf\nfn leaf\n";
const TOY_B: &str = "impl helper\nfn other\n    helper\n";
const DOC_B: &str = "file:///ws/b.rs";

#[test]
fn the_toy_language_serves_implementation_workspace_symbols_call_hierarchy_and_code_actions() {
    let mut server = Server::start(json!({ "name": "toy", "pullDiagnostics": true }));
    let mut conn = server.stdio();
    let caps = conn.initialize()["capabilities"].clone();
    for provider in [
        "implementationProvider",
        "workspaceSymbolProvider",
        "callHierarchyProvider",
    ] {
        assert_eq!(caps[provider], true, "{provider}");
    }
    assert_eq!(caps["diagnosticProvider"]["workspaceDiagnostics"], true);
    conn.open(DOC, 1, TOY_A);
    conn.open(DOC_B, 1, TOY_B);

    let definition = conn.call("textDocument/definition", position(DOC_B, 2, 5));
    assert_eq!(
        (definition["uri"].clone(), definition["range"].clone()),
        (json!(DOC), range(2, 3, 2, 9))
    );
    let implementation = conn.call("textDocument/implementation", position(DOC, 2, 4));
    assert_eq!(
        implementation,
        json!([{ "uri": DOC_B, "range": range(0, 5, 0, 11) }])
    );
    let symbols = conn.call("workspace/symbol", json!({ "query": "HEL" }));
    assert_eq!(symbols.as_array().map(Vec::len), Some(1), "{symbols}");
    assert_eq!(symbols[0]["location"]["range"], range(2, 3, 2, 9));

    let items = conn.call("textDocument/prepareCallHierarchy", position(DOC, 1, 6));
    let helper = items[0].clone();
    assert_eq!(helper["name"], "helper");
    assert_eq!(
        helper["range"],
        range(2, 0, 3, 8),
        "the body runs to the next fn"
    );
    let incoming = conn.call("callHierarchy/incomingCalls", json!({ "item": helper }));
    let callers: Vec<(&str, &Value)> = incoming
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["from"]["name"].as_str().unwrap(), &c["fromRanges"][0]))
        .collect();
    assert_eq!(
        callers,
        [
            ("main", &range(1, 4, 1, 10)),
            ("other", &range(2, 4, 2, 10))
        ]
    );
    let outgoing = conn.call("callHierarchy/outgoingCalls", json!({ "item": helper }));
    assert_eq!(outgoing[0]["to"]["name"], "leaf", "{outgoing}");
    assert_eq!(outgoing[0]["fromRanges"], json!([range(3, 4, 3, 8)]));

    let diagnostic = conn.call(
        "textDocument/diagnostic",
        json!({ "textDocument": { "uri": DOC } }),
    )["items"][0]
        .clone();
    assert_eq!(diagnostic["range"], range(1, 11, 1, 16));
    let actions = conn.call(
        "textDocument/codeAction",
        json!({ "textDocument": { "uri": DOC }, "range": range(1, 11, 1, 16),
                "context": { "diagnostics": [diagnostic] } }),
    );
    assert_eq!(actions[0]["kind"], "quickfix");
    assert_eq!(
        actions[0]["edit"]["changes"][DOC][0]["newText"], "OK",
        "{actions}"
    );
    assert_eq!(actions[1]["kind"], "refactor.rewrite");
    let only = conn.call(
        "textDocument/codeAction",
        json!({ "textDocument": { "uri": DOC }, "range": range(1, 11, 1, 16),
                "context": { "diagnostics": [diagnostic], "only": ["refactor"] } }),
    );
    assert_eq!(only.as_array().map(Vec::len), Some(1), "{only}");
    let workspace = conn.call("workspace/diagnostic", json!({ "previousResultIds": [] }));
    assert_eq!(workspace["items"].as_array().map(Vec::len), Some(2));
    conn.shutdown_and_exit();
    assert_eq!(server.wait_exit().code(), Some(0));
}

#[test]
fn stdio_session_serves_documents_and_exits_0_after_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let rec = record_path(&dir);
    let mut server = Server::start(json!({
        "name": "alpha",
        "record": rec,
        "recordEnv": ["HOME", "FAKE_LSP_SURELY_UNSET"],
    }));
    let mut conn = server.stdio();

    let early = conn.request("textDocument/hover", position(DOC, 0, 0));
    assert_eq!(
        early["error"]["code"], -32002,
        "requests before initialize: {early}"
    );

    let init = conn.initialize();
    let caps = &init["capabilities"];
    assert_eq!(
        caps["textDocumentSync"],
        json!({ "openClose": true, "change": 1 })
    );
    for provider in [
        "hoverProvider",
        "definitionProvider",
        "referencesProvider",
        "documentSymbolProvider",
    ] {
        assert_eq!(caps[provider], true, "{provider}");
    }
    assert_eq!(init["serverInfo"]["name"], "alpha");

    conn.notify(
        "workspace/didChangeConfiguration",
        json!({ "settings": { "fake": { "level": 2 } } }),
    );
    conn.open(DOC, 1, DOC_TEXT);
    let diagnostics = conn.recv_method("textDocument/publishDiagnostics")["params"].clone();
    assert_eq!(diagnostics["uri"], DOC);
    assert_eq!(diagnostics["version"], 1);
    let diagnostics = diagnostics["diagnostics"].as_array().unwrap().clone();
    assert_eq!(
        diagnostics.len(),
        2,
        "one per line containing ERROR: {diagnostics:?}"
    );
    assert_eq!(lines_of(&json!(diagnostics)), [1, 4]);
    assert_eq!(diagnostics[0]["range"]["start"]["character"], 17);
    assert_eq!(diagnostics[0]["severity"], 1);
    assert_eq!(diagnostics[0]["message"], "fake error");

    let hover = conn.call("textDocument/hover", position(DOC, 1, 6));
    assert_eq!(hover["contents"]["kind"], "markdown");
    assert_eq!(
        hover["contents"]["value"],
        format!("fake-hover alpha {DOC} 1:6 v1 word=helper")
    );

    // `helper` is defined by `def helper` on line 3.
    let definition = conn.call("textDocument/definition", position(DOC, 1, 6));
    assert_eq!(definition["uri"], DOC);
    assert_eq!(definition["range"], range(3, 4, 3, 10), "{definition}");

    let references = conn.call(
        "textDocument/references",
        json!({ "textDocument": { "uri": DOC }, "position": { "line": 3, "character": 5 },
                "context": { "includeDeclaration": true } }),
    );
    assert_eq!(lines_of(&references), [1, 3], "{references}");

    let symbols = conn.call(
        "textDocument/documentSymbol",
        json!({ "textDocument": { "uri": DOC } }),
    );
    let names: Vec<&str> = symbols
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["main", "helper"]);

    conn.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": DOC, "version": 2 }, "contentChanges": [{ "text": "fn only() {}\n" }] }),
    );
    let diagnostics = conn.recv_method("textDocument/publishDiagnostics")["params"].clone();
    assert_eq!(
        (
            diagnostics["version"].clone(),
            diagnostics["diagnostics"].clone()
        ),
        (json!(2), json!([]))
    );
    let hover = conn.call("textDocument/hover", position(DOC, 0, 4));
    assert_eq!(
        hover["contents"]["value"],
        format!("fake-hover alpha {DOC} 0:4 v2 word=only")
    );

    let unknown = conn.request("fake/noSuchMethod", json!({}));
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    conn.notify("fake/noSuchNotification", json!({}));

    let state = conn.call("fake/state", Value::Null);
    assert_eq!(state["pid"], server.pid());
    assert_eq!(state["openDocuments"], json!([DOC]));
    assert_eq!(state["documents"][0]["version"], 2);
    assert_eq!(state["documents"][0]["text"], "fn only() {}\n");
    assert_eq!(state["settings"], json!({ "fake": { "level": 2 } }));
    assert_eq!(state["initializationOptions"], json!({ "flavour": "test" }));
    assert_eq!(state["rootUri"], "file:///ws");
    assert_eq!(state["workspaceFolders"][0]["name"], "ws");

    conn.notify(
        "textDocument/didClose",
        json!({ "textDocument": { "uri": DOC } }),
    );
    assert_eq!(
        conn.call("fake/state", Value::Null)["openDocuments"],
        json!([])
    );

    assert_eq!(conn.call("shutdown", Value::Null), Value::Null);
    let late = conn.request("textDocument/hover", position(DOC, 0, 0));
    assert_eq!(
        late["error"]["code"], -32600,
        "requests after shutdown: {late}"
    );
    conn.notify("exit", Value::Null);
    assert_eq!(server.wait_exit().code(), Some(0));

    let records = records(&rec);
    assert_eq!(records[0]["event"], "start");
    let start = &records[0]["message"];
    assert_eq!(start["config"]["name"], "alpha");
    assert_eq!(start["env"]["HOME"], std::env::var("HOME").unwrap());
    assert_eq!(start["env"]["FAKE_LSP_SURELY_UNSET"], Value::Null);
    assert!(
        records
            .iter()
            .all(|r| r["pid"] == server.pid() && r["t"].is_u64())
    );
    assert!(events(&records, "recv").any(|m| m["method"] == "initialize"));
    assert!(
        events(&records, "send").any(|m| m["id"] == 2 && m["result"]["serverInfo"].is_object())
    );
    let last = records.last().unwrap();
    assert_eq!(last["event"], "exit");
    assert_eq!(last["message"]["code"], 0);
}

#[test]
fn exit_without_shutdown_exits_1() {
    let mut server = Server::start(json!({}));
    let mut conn = server.stdio();
    conn.initialize();
    conn.notify("exit", Value::Null);
    assert_eq!(server.wait_exit().code(), Some(1));
}

#[test]
fn stdin_close_exits_1_or_the_configured_code() {
    for (config, expected) in [(json!({}), 1), (json!({ "exitCodeOnStdinClose": 7 }), 7)] {
        let mut server = Server::start(config);
        let mut conn = server.stdio();
        conn.initialize();
        conn.close();
        assert_eq!(server.wait_exit().code(), Some(expected));
    }
}

#[test]
fn stdin_close_is_survived_when_configured() {
    let dir = tempfile::tempdir().unwrap();
    let rec = record_path(&dir);
    let mut server = Server::start(json!({ "exitOnStdinClose": false, "record": rec }));
    let mut conn = server.stdio();
    conn.initialize();
    conn.close();
    wait_records(&rec, "disconnect", |r| has_event(r, "disconnect"));
    server.sigterm();
    assert_eq!(server.wait_exit().signal(), Some(libc::SIGTERM));
    // It lived on after stdin closed until SIGTERM ended it.
    let records = records(&rec);
    let tail: Vec<&Value> = records
        .iter()
        .rev()
        .take(3)
        .rev()
        .map(|r| &r["event"])
        .collect();
    assert_eq!(tail, ["disconnect", "signal", "exit"]);
}

#[test]
fn sigterm_ends_the_server_unless_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("default.jsonl");
    let mut server = Server::start(json!({ "record": rec }));
    // The SIGTERM handler is installed before the start event is written.
    wait_records(&rec, "start", |r| has_event(r, "start"));
    server.sigterm();
    assert_eq!(server.wait_exit().signal(), Some(libc::SIGTERM));
    let records = records(&rec);
    assert_eq!(events(&records, "signal").next().unwrap()["ignored"], false);
    assert_eq!(records.last().unwrap()["event"], "exit");

    let rec = dir.path().join("ignored.jsonl");
    let mut server = Server::start(json!({ "record": rec, "ignoreSigterm": true }));
    let mut conn = server.stdio();
    conn.initialize();
    server.sigterm();
    let records = wait_records(&rec, "signal", |r| has_event(r, "signal"));
    assert_eq!(events(&records, "signal").next().unwrap()["ignored"], true);
    // Still serving after the signal was handled.
    assert_eq!(conn.call("fake/state", Value::Null)["pid"], server.pid());
    server.assert_running();
}

#[test]
fn crash_after_ms_exits_with_the_configured_code() {
    let dir = tempfile::tempdir().unwrap();
    let rec = record_path(&dir);
    let started = Instant::now();
    let mut server = Server::start(json!({ "record": rec, "crashAfterMs": 100, "exitCode": 3 }));
    assert_eq!(server.wait_exit().code(), Some(3));
    assert!(started.elapsed() >= Duration::from_millis(100));
    let records = records(&rec);
    let exit = records.last().unwrap();
    assert_eq!(exit["event"], "exit");
    assert_eq!(exit["message"], json!({ "code": 3, "reason": "crash" }));
}

#[test]
fn hang_in_initialize_never_answers() {
    let dir = tempfile::tempdir().unwrap();
    let rec = record_path(&dir);
    let mut server = Server::start(json!({ "record": rec, "hangInInitialize": true }));
    let mut conn = server.stdio();
    conn.send_request("initialize", json!({ "capabilities": {} }));
    let probe = conn.send_request("fake/state", Value::Null);
    // Messages are handled in order, so once the probe has been read any
    // answer to initialize would already have been sent (and recorded).
    let records = wait_records(&rec, "the probe", |r| {
        events(r, "recv").any(|m| m["id"] == probe)
    });
    assert_eq!(events(&records, "send").count(), 0, "{records:#?}");
    server.assert_running();
}

#[test]
fn initialize_and_diagnostics_can_be_delayed() {
    let mut server = Server::start(json!({ "initializeDelayMs": 300, "diagnosticsDelayMs": 1000 }));
    let mut conn = server.stdio();
    let started = Instant::now();
    conn.initialize();
    assert!(started.elapsed() >= Duration::from_millis(300));

    let opened = Instant::now();
    conn.open(DOC, 1, DOC_TEXT);
    let hover_id = conn.send_request("textDocument/hover", position(DOC, 0, 4));
    conn.recv_method("textDocument/publishDiagnostics");
    assert!(opened.elapsed() >= Duration::from_millis(1000));
    // The server kept serving while the diagnostics were pending.
    let hover_at = conn.log_position(|m| m["id"] == hover_id);
    let diagnostics_at = conn.log_position(|m| m["method"] == "textDocument/publishDiagnostics");
    assert!(hover_at < diagnostics_at, "{:#?}", conn.log);
}

#[test]
fn ignore_shutdown_leaves_shutdown_and_exit_unanswered() {
    let mut server = Server::start(json!({ "ignoreShutdown": true }));
    let mut conn = server.stdio();
    conn.initialize();
    let shutdown = conn.send_request("shutdown", Value::Null);
    // In-order handling: a later request answered means shutdown was skipped.
    conn.call("fake/state", Value::Null);
    assert!(
        conn.log.iter().all(|m| m["id"] != shutdown),
        "{:#?}",
        conn.log
    );
    conn.notify("exit", Value::Null);
    assert_eq!(conn.call("fake/state", Value::Null)["shutdown"], false);
    server.assert_running();
}

#[test]
fn server_requests_are_sent_and_awaited_with_each_id_style() {
    for style in ["number", "zero", "string"] {
        let dir = tempfile::tempdir().unwrap();
        let rec = record_path(&dir);
        let mut server =
            Server::start(json!({ "record": rec, "serverRequests": true, "idStyle": style }));
        let mut conn = server.stdio();
        conn.initialize();
        let log_at = conn.log_position(|m| m["method"] == "window/logMessage");
        let init_at = conn.log_position(|m| m["id"] == 1 && m.get("result").is_some());
        assert!(
            log_at < init_at,
            "{style}: a notification precedes the initialize response"
        );

        conn.notify(
            "workspace/didChangeConfiguration",
            json!({ "settings": { "fake": { "answer": 42 } } }),
        );
        // Sent before we answer anything: handled only after the answers.
        conn.open(DOC, 1, DOC_TEXT);

        let create = conn.recv_method("window/workDoneProgress/create");
        let first_id = create["id"].clone();
        match style {
            "number" => assert_eq!(first_id, 1),
            "zero" => assert_eq!(first_id, 0),
            _ => assert!(first_id.is_string(), "{first_id}"),
        }
        let token = create["params"]["token"].clone();
        conn.respond(&first_id, Value::Null);
        let begin = conn.recv_method("$/progress");
        assert_eq!(
            (
                begin["params"]["token"].clone(),
                begin["params"]["value"]["kind"].clone()
            ),
            (token, json!("begin"))
        );

        let register = conn.recv_method("client/registerCapability");
        let method = &register["params"]["registrations"][0]["method"];
        assert_eq!(method, "workspace/didChangeWatchedFiles");
        if style != "string" {
            assert_eq!(register["id"], first_id.as_u64().unwrap() + 1);
        }
        conn.respond(&register["id"].clone(), Value::Null);

        let configuration = conn.recv_method("workspace/configuration");
        assert_eq!(
            configuration["params"]["items"],
            json!([{ "section": "fake" }])
        );
        conn.respond(&configuration["id"].clone(), json!([{ "answer": 42 }]));

        let end = conn.recv_method("$/progress");
        assert_eq!(end["params"]["value"]["kind"], "end");
        conn.recv_where("ready log", |m| m["params"]["message"] == "fake: ready");
        conn.recv_method("textDocument/publishDiagnostics");
        let asked_at = conn.log_position(|m| m["method"] == "workspace/configuration");
        let published_at = conn.log_position(|m| m["method"] == "textDocument/publishDiagnostics");
        assert!(
            asked_at < published_at,
            "{style}: didOpen waited for the answers"
        );

        let state = conn.call("fake/state", Value::Null);
        let answers = &state["serverRequestAnswers"];
        assert_eq!(
            answers["window/workDoneProgress/create"],
            json!({ "result": null })
        );
        assert_eq!(
            answers["client/registerCapability"],
            json!({ "result": null })
        );
        assert_eq!(
            answers["workspace/configuration"],
            json!({ "result": [{ "answer": 42 }] })
        );
        assert_eq!(state["openDocuments"], json!([DOC]));

        conn.shutdown_and_exit();
        assert_eq!(server.wait_exit().code(), Some(0), "{style}");
        let records = records(&rec);
        let answered = |id: &Value| {
            events(&records, "recv").any(|m| m["id"] == *id && m.get("result").is_some())
        };
        for id in [&first_id, &register["id"], &configuration["id"]] {
            assert!(answered(id), "{style}: answer to {id} recorded");
        }
    }
}

#[test]
fn tcp_serves_one_session_per_connection_and_keeps_listening() {
    let dir = tempfile::tempdir().unwrap();
    let rec = record_path(&dir);
    let port_file = dir.path().join("port");
    let mut server = Server::start(
        json!({ "transport": "tcp", "port": 0, "portFile": port_file, "record": rec }),
    );
    let port: u16 = wait_file(&port_file).trim().parse().expect("port number");

    let mut conn = Conn::tcp(port);
    conn.initialize();
    conn.open(DOC, 1, DOC_TEXT);
    conn.recv_method("textDocument/publishDiagnostics");
    let hover = conn.call("textDocument/hover", position(DOC, 3, 5));
    assert_eq!(
        hover["contents"]["value"],
        format!("fake-hover fake {DOC} 3:5 v1 word=helper")
    );
    assert_eq!(conn.call("fake/state", Value::Null)["connection"], 1);
    drop(conn);

    // A new connection is a fresh session of the same process.
    let mut conn = Conn::tcp(port);
    let state = conn.call("fake/state", Value::Null);
    assert_eq!(
        (state["connection"].clone(), state["openDocuments"].clone()),
        (json!(2), json!([]))
    );
    assert_eq!(state["pid"], server.pid());
    conn.initialize();
    conn.shutdown_and_exit();
    assert_eq!(server.wait_exit().code(), Some(0));

    let records = records(&rec);
    assert_eq!(events(&records, "listening").next().unwrap()["port"], port);
    assert_eq!(events(&records, "connect").count(), 2);
    assert_eq!(events(&records, "disconnect").count(), 1);
}

#[test]
fn tcp_can_exit_on_disconnect() {
    let dir = tempfile::tempdir().unwrap();
    let port_file = dir.path().join("port");
    let mut server = Server::start(json!({
        "transport": "tcp", "portFile": port_file, "exitOnDisconnect": true, "exitCodeOnStdinClose": 5,
    }));
    let port: u16 = wait_file(&port_file).trim().parse().expect("port number");
    let mut conn = Conn::tcp(port);
    conn.initialize();
    drop(conn);
    assert_eq!(server.wait_exit().code(), Some(5));
}

#[test]
fn unix_socket_session_replaces_a_stale_socket_file() {
    let dir = tempfile::tempdir().unwrap();
    let rec = record_path(&dir);
    let socket = dir.path().join("lsp.sock");
    std::fs::write(&socket, "left behind by a killed server").unwrap();
    let mut server =
        Server::start(json!({ "transport": "socket", "socketPath": socket, "record": rec }));
    wait_records(&rec, "listening", |r| has_event(r, "listening"));

    let mut conn = Conn::unix(&socket);
    conn.initialize();
    conn.open(DOC, 1, DOC_TEXT);
    let symbols = conn.call(
        "textDocument/documentSymbol",
        json!({ "textDocument": { "uri": DOC } }),
    );
    assert_eq!(symbols.as_array().unwrap().len(), 2);
    conn.shutdown_and_exit();
    assert_eq!(server.wait_exit().code(), Some(0));
    assert!(!socket.exists(), "the socket file is removed on exit");
}

#[test]
fn config_flag_wins_over_env_and_bad_configs_fail_fast() {
    let mut server = Server::start_with(
        json!({ "name": "from-env" }),
        &["--stdio", "--config", r#"{"name":"from-flag"}"#],
    );
    let mut conn = server.stdio();
    assert_eq!(conn.initialize()["serverInfo"]["name"], "from-flag");
    drop(server);

    for (config, complaint) in [
        (json!({ "hangInInitialise": true }), "hangInInitialise"),
        (json!({ "transport": "socket" }), "socketPath"),
    ] {
        let output = Command::new(BIN)
            .env("FAKE_LSP_CONFIG", config.to_string())
            .stdin(Stdio::null())
            .output()
            .expect("run fake-lsp-server");
        assert_eq!(output.status.code(), Some(2), "{config}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(complaint), "{config}: {stderr}");
    }
}

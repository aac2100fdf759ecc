//! A registry of our own for the tests: one loopback HTTP server that
//! serves the MCP Registry API (`/v0.1/servers`, search, cursors of
//! [`RegistryFixture::set_page_size`] servers, `/v0.1/servers/{name}/
//! versions/{version|latest}`, deleted versions hidden unless
//! `include_deleted`), versions published and statuses changed while a
//! test runs, fault knobs for the API (an error status, a slow answer, a
//! malformed body), and any other file put at a path — an npm packument
//! and tarball, a PEP 503 index and its wheel, an MCP bundle.
//!
//! Plain HTTP/1.1, one thread per connection, `Connection: close`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

/// What the API does wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    None,
    /// Answer this status with an error body.
    Status(u16),
    /// Answer only after this long.
    Slow(Duration),
    /// Answer 200 with a body that is not JSON.
    Malformed,
}

#[derive(Default)]
struct State {
    /// Published versions in publication order: (name, version, status,
    /// the server.json).
    versions: Vec<(String, String, String, Value)>,
    files: BTreeMap<String, (String, Vec<u8>)>,
    page_size: usize,
    fault: Option<Fault>,
    requests: Vec<String>,
}

/// The running fixture; stops when dropped.
pub struct RegistryFixture {
    port: u16,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    accept: Option<std::thread::JoinHandle<()>>,
}

impl Drop for RegistryFixture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let woken = TcpStream::connect(("127.0.0.1", self.port)).is_ok();
        // Once dropped, the port refuses connections (the listener is gone).
        if let Some(accept) = self.accept.take().filter(|_| woken) {
            let _ = accept.join();
        }
    }
}

impl Default for RegistryFixture {
    fn default() -> Self {
        Self::start()
    }
}

impl RegistryFixture {
    /// Listens on a free loopback port.
    pub fn start() -> RegistryFixture {
        let listener = TcpListener::bind(("127.0.0.1", 0)).expect("bind the fixture registry");
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State {
            page_size: 30,
            ..State::default()
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (state.clone(), stop.clone());
        let accept = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if sp.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let st = st.clone();
                std::thread::spawn(move || {
                    let _ = serve(conn, &st);
                });
            }
        });
        RegistryFixture {
            port,
            state,
            stop,
            accept: Some(accept),
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publishes `server` (a server.json) as the latest version of its
    /// name, with `status` (`active`, `deprecated`, `deleted`).
    pub fn publish(&self, server: Value, status: &str) {
        let name = server["name"].as_str().expect("a name").to_owned();
        let version = server["version"].as_str().expect("a version").to_owned();
        self.lock()
            .versions
            .push((name, version, status.to_owned(), server));
    }

    /// Sets the status of one version.
    pub fn set_status(&self, name: &str, version: &str, status: &str) {
        for v in &mut self.lock().versions {
            if v.0 == name && v.1 == version {
                v.2 = status.to_owned();
            }
        }
    }

    /// Servers per page of `/v0.1/servers`.
    pub fn set_page_size(&self, n: usize) {
        self.lock().page_size = n.max(1);
    }

    /// What the API does wrong from now on.
    pub fn set_fault(&self, fault: Fault) {
        self.lock().fault = Some(fault);
    }

    /// Serves `bytes` at `path` (any path outside `/v0.1`).
    pub fn put_file(&self, path: &str, content_type: &str, bytes: Vec<u8>) {
        self.lock()
            .files
            .insert(path.to_owned(), (content_type.to_owned(), bytes));
    }

    /// The request targets served so far.
    pub fn requests(&self) -> Vec<String> {
        self.lock().requests.clone()
    }
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(v);
            i += 3;
        } else {
            out.push(if b[i] == b'+' { b' ' } else { b[i] });
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn query(q: &str) -> BTreeMap<String, String> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// The `ServerResponse` of one version, `latest` telling whether it is.
fn response(v: &(String, String, String, Value), latest: bool) -> Value {
    json!({"server": v.3, "_meta": {"io.modelcontextprotocol.registry/official": {
        "status": v.2, "isLatest": latest, "publishedAt": "2026-01-01T00:00:00Z"}}})
}

fn latest_of(versions: &[(String, String, String, Value)], name: &str) -> Option<usize> {
    versions.iter().rposition(|v| v.0 == name)
}

/// `(status, content type, body)` of one API request.
fn api(state: &State, path: &str, q: &BTreeMap<String, String>) -> (u16, String, Vec<u8>) {
    let json_of = |status: u16, v: Value| {
        (
            status,
            "application/json".to_owned(),
            v.to_string().into_bytes(),
        )
    };
    let include_deleted = q.get("include_deleted").is_some_and(|v| v == "true");
    let visible = |v: &(String, String, String, Value)| include_deleted || v.2 != "deleted";
    if path == "/v0.1/servers" {
        let search = q
            .get("search")
            .map(|s| s.to_lowercase())
            .unwrap_or_default();
        let only_latest = q.get("version").is_some_and(|v| v == "latest");
        let limit = q
            .get("limit")
            .and_then(|l| l.parse::<usize>().ok())
            .unwrap_or(30)
            .min(state.page_size);
        let start = q
            .get("cursor")
            .and_then(|c| c.parse::<usize>().ok())
            .unwrap_or(0);
        let all: Vec<Value> = state
            .versions
            .iter()
            .enumerate()
            .filter(|(_, v)| v.0.to_lowercase().contains(&search) && visible(v))
            .filter(|(i, v)| !only_latest || latest_of(&state.versions, &v.0) == Some(*i))
            .map(|(i, v)| response(v, latest_of(&state.versions, &v.0) == Some(i)))
            .collect();
        let page: Vec<Value> = all.iter().skip(start).take(limit).cloned().collect();
        let next = (start + page.len() < all.len()).then(|| (start + page.len()).to_string());
        return json_of(
            200,
            json!({"servers": page, "metadata": {"nextCursor": next, "count": page.len()}}),
        );
    }
    let rest = path.strip_prefix("/v0.1/servers/").unwrap_or("");
    if let Some((name, version)) = rest.split_once("/versions/") {
        let (name, version) = (decode(name), decode(version));
        let found = if version == "latest" {
            latest_of(&state.versions, &name)
        } else {
            state
                .versions
                .iter()
                .rposition(|v| v.0 == name && v.1 == version)
        };
        if let Some(i) = found.filter(|i| visible(&state.versions[*i])) {
            let latest = latest_of(&state.versions, &name) == Some(i);
            return json_of(200, response(&state.versions[i], latest));
        }
    }
    json_of(404, json!({"error": "Server not found"}))
}

fn serve(conn: TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
    }
    let target = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let head_only = line.starts_with("HEAD ");
    let (path, q) = target.split_once('?').unwrap_or((&target, ""));
    let (status, content_type, body, delay) = {
        let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
        st.requests.push(target.clone());
        if path.starts_with("/v0.1/") {
            match st.fault.unwrap_or(Fault::None) {
                Fault::Status(code) => (
                    code,
                    "application/json".to_owned(),
                    b"{\"error\":\"fault\"}".to_vec(),
                    None,
                ),
                Fault::Malformed => (
                    200,
                    "application/json".to_owned(),
                    b"<html>oops".to_vec(),
                    None,
                ),
                Fault::Slow(d) => {
                    let (s, c, b) = api(&st, path, &query(q));
                    (s, c, b, Some(d))
                }
                Fault::None => {
                    let (s, c, b) = api(&st, path, &query(q));
                    (s, c, b, None)
                }
            }
        } else {
            match st.files.get(path) {
                Some((c, b)) => (200, c.clone(), b.clone(), None),
                None => (404, "text/plain".to_owned(), b"not found".to_vec(), None),
            }
        }
    };
    if let Some(d) = delay {
        std::thread::sleep(d);
    }
    let mut conn = conn;
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        _ => "Error",
    };
    write!(
        conn,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    if !head_only {
        conn.write_all(&body)?;
    }
    conn.flush()
}

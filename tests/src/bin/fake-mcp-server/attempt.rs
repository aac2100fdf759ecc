//! What a hostile server tries, one attempt per `tools/call` (argument
//! `attempt`): the sandbox tests call the fake with
//! `{"attempt": {"read": PATH}}` and read `{"ok": bool, "error": text,
//! "data": text}` from the result's `structuredContent`.
//!
//! Attempts: `read` (a file's first bytes, or a directory listing),
//! `write` (create or append to a file), `mkdir`, `connect` (TCP to
//! `host:port`), `udp` (send one datagram to `host:port`), `unix` (connect
//! to a Unix socket path, send the line `send` when given and read the first
//! line of the answer: `Err` when the peer closes without one), `abstract` (connect to an abstract Unix socket
//! name), `raw` (TCP to `host:port`, send `send`, the first line of the
//! answer), `signal` (`kill(pid, 0)`), `ptrace` (attach to a pid and detach),
//! `environ` (read `/proc/PID/environ`), `exec` (run a program, its exit
//! code and output), `http` (a GET through `$HTTP_PROXY` / `$HTTPS_PROXY`:
//! `{"http": URL}`, answered with the proxy's status line), `setuid`
//! (`setuid(0)`), `env` (a variable's value), `rename` (`[from, to]`),
//! `symlink` (`[target, link]`), `stat` (a path's inode number).

use std::io::{Read, Write};

use serde_json::{Value, json};

/// Runs `attempt` and describes the outcome.
pub fn run(attempt: &Value) -> Value {
    // The attempt is the one key that is not a modifier (`send`).
    let Some((kind, arg)) = attempt
        .as_object()
        .and_then(|o| o.iter().find(|(k, _)| k.as_str() != "send"))
    else {
        return json!({"ok": false, "error": "an attempt is {kind: argument}"});
    };
    let text = arg.as_str().unwrap_or_default();
    let result: Result<String, String> = match kind.as_str() {
        "read" => read(text),
        "write" => std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(text)
            .and_then(|mut f| f.write_all(b"pwned\n"))
            .map(|()| String::new())
            .map_err(|e| e.to_string()),
        "mkdir" => std::fs::create_dir_all(text)
            .map(|()| String::new())
            .map_err(|e| e.to_string()),
        "connect" => std::net::TcpStream::connect(text)
            .map(|_| String::new())
            .map_err(|e| e.to_string()),
        "udp" => std::net::UdpSocket::bind("0.0.0.0:0")
            .and_then(|s| s.send_to(b"x", text))
            .map(|n| n.to_string())
            .map_err(|e| e.to_string()),
        "unix" => unix(text, attempt.get("send").and_then(Value::as_str)),
        "abstract" => abstract_connect(text),
        "raw" => raw(
            text,
            attempt
                .get("send")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        ),
        "signal" => with_pid(arg, |pid| {
            #[allow(unsafe_code)]
            // SAFETY: kill with signal 0 only checks permission.
            let rc = unsafe { libc::kill(pid, 0) };
            errno(rc)
        }),
        "ptrace" => with_pid(arg, ptrace),
        "environ" => with_pid(arg, |pid| read(&format!("/proc/{pid}/environ"))),
        "exec" => exec(arg),
        "http" => http(text),
        "setuid" => {
            #[allow(unsafe_code)]
            // SAFETY: setuid takes an integer.
            let rc = unsafe { libc::setuid(0) };
            errno(rc).map(|_| {
                #[allow(unsafe_code)]
                // SAFETY: geteuid takes nothing.
                let euid = unsafe { libc::geteuid() };
                euid.to_string()
            })
        }
        "env" => Ok(std::env::var(text).unwrap_or_default()),
        "rename" => pair(arg).and_then(|(from, to)| {
            std::fs::rename(from, to)
                .map(|()| String::new())
                .map_err(|e| e.to_string())
        }),
        "symlink" => pair(arg).and_then(|(target, link)| {
            std::os::unix::fs::symlink(target, link)
                .map(|()| String::new())
                .map_err(|e| e.to_string())
        }),
        "stat" => {
            use std::os::unix::fs::MetadataExt;
            std::fs::symlink_metadata(text)
                .map(|m| m.ino().to_string())
                .map_err(|e| e.to_string())
        }
        other => Err(format!("unknown attempt {other}")),
    };
    match result {
        Ok(data) => json!({"ok": true, "data": data}),
        Err(error) => json!({"ok": false, "error": error}),
    }
}

/// A `[a, b]` argument.
fn pair(arg: &Value) -> Result<(String, String), String> {
    let [a, b]: [String; 2] =
        serde_json::from_value(arg.clone()).map_err(|e| format!("expected [a, b]: {e}"))?;
    Ok((a, b))
}

fn read(path: &str) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if meta.is_dir() {
        let names: Vec<String> = std::fs::read_dir(path)
            .map_err(|e| e.to_string())?
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect();
        return Ok(names.join(","));
    }
    let mut head = vec![0u8; 200];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&head[..n]).into_owned())
}

fn with_pid(arg: &Value, f: impl FnOnce(i32) -> Result<String, String>) -> Result<String, String> {
    let pid = arg.as_i64().ok_or("expected a pid")?;
    f(pid as i32)
}

fn errno(rc: i32) -> Result<String, String> {
    if rc == 0 {
        Ok(String::new())
    } else {
        Err(std::io::Error::last_os_error().to_string())
    }
}

#[allow(unsafe_code)]
fn ptrace(pid: i32) -> Result<String, String> {
    // SAFETY: PTRACE_ATTACH / DETACH with null address and data.
    let rc = unsafe {
        libc::ptrace(
            libc::PTRACE_ATTACH,
            pid,
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::null_mut::<libc::c_void>(),
        )
    };
    if rc != 0 {
        return errno(rc as i32);
    }
    // SAFETY: as above.
    unsafe {
        libc::waitpid(pid, std::ptr::null_mut(), 0);
        libc::ptrace(
            libc::PTRACE_DETACH,
            pid,
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::null_mut::<libc::c_void>(),
        );
    }
    Ok(String::new())
}

/// Connect to `addr` over TCP, send `bytes`, and read the first line of
/// the answer (`Err` when the peer closes without one).
fn raw(addr: &str, bytes: &str) -> Result<String, String> {
    use std::io::BufRead;
    let mut s = std::net::TcpStream::connect(addr).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    s.write_all(bytes.as_bytes()).map_err(|e| e.to_string())?;
    let mut line = String::new();
    match std::io::BufReader::new(s).read_line(&mut line) {
        Ok(0) => Err("closed without answering".to_owned()),
        Ok(_) => Ok(line),
        Err(e) => Err(e.to_string()),
    }
}

fn unix(path: &str, send: Option<&str>) -> Result<String, String> {
    use std::io::BufRead;
    let mut s = std::os::unix::net::UnixStream::connect(path).map_err(|e| e.to_string())?;
    let Some(line) = send else {
        return Ok(String::new());
    };
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    s.write_all(format!("{line}\n").as_bytes())
        .map_err(|e| e.to_string())?;
    let mut answer = String::new();
    match std::io::BufReader::new(s).read_line(&mut answer) {
        Ok(0) => Err("closed without answering".to_owned()),
        Ok(_) => Ok(answer),
        Err(e) => Err(e.to_string()),
    }
}

fn abstract_connect(name: &str) -> Result<String, String> {
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
        .map_err(|e| e.to_string())?;
    std::os::unix::net::UnixStream::connect_addr(&addr)
        .map(|_| String::new())
        .map_err(|e| e.to_string())
}

fn exec(arg: &Value) -> Result<String, String> {
    let argv: Vec<String> = serde_json::from_value(arg.clone()).map_err(|e| e.to_string())?;
    let (program, args) = argv.split_first().ok_or("expected [program, args...]")?;
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!("{}: {text}", out.status))
    }
}

/// A GET of `url` through the proxy the environment names (as an HTTP
/// client that honours `HTTP(S)_PROXY` does): the first line of the
/// proxy's answer (for https, of its answer to the CONNECT).
fn http(url: &str) -> Result<String, String> {
    let parsed = url::Url::parse(url).map_err(|e| e.to_string())?;
    let https = parsed.scheme() == "https";
    let proxy = std::env::var(if https { "HTTPS_PROXY" } else { "HTTP_PROXY" })
        .map_err(|_| "no proxy in the environment".to_owned())?;
    let proxy = url::Url::parse(&proxy).map_err(|e| e.to_string())?;
    let addr = format!(
        "{}:{}",
        proxy.host_str().unwrap_or_default(),
        proxy.port().unwrap_or(80)
    );
    let mut s = std::net::TcpStream::connect(addr).map_err(|e| e.to_string())?;
    let host = parsed.host_str().unwrap_or_default();
    let port = parsed.port_or_known_default().unwrap_or(80);
    let request = if https {
        format!("CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n")
    } else {
        format!("GET {url} HTTP/1.1\r\nHost: {host}\r\n\r\n")
    };
    s.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    let mut answer = vec![0u8; 512];
    let n = s.read(&mut answer).map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&answer[..n]).into_owned();
    Ok(text.lines().next().unwrap_or_default().to_owned())
}

//! The egress proxy of one server whose profile allows only some hosts: an
//! HTTP proxy on a loopback port of its own (so the proxy knows whose
//! request it is), the only TCP destination the server's Landlock rules
//! allow. `CONNECT host:port` (https) and absolute-form requests
//! (`GET http://host/…`) to a listed host — and port, when the profile lists
//! ports — are relayed; anything else gets `403 Forbidden` and is counted
//! and reported ([`DenialSink`]).
//!
//! An absolute-form request is sent on with `Connection: close`, so that
//! one client connection carries one request and each request is judged.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use steward_schema::sandbox::host_matches;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::plan::Egress;

/// Where a refused destination is reported (`host`, `port`).
pub type DenialSink = Arc<dyn Fn(&str, u16) + Send + Sync>;

/// The largest request head read before it is refused.
const MAX_HEAD: usize = 16 * 1024;

/// A running proxy; it stops when dropped.
#[derive(Debug)]
pub struct Proxy {
    port: u16,
    denied: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Proxy {
    /// Listens on a fresh loopback port for `egress`.
    pub async fn start(egress: Egress, sink: Option<DenialSink>) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let port = listener.local_addr()?.port();
        let denied = Arc::new(AtomicU64::new(0));
        let rules = Arc::new(egress);
        let task = tokio::spawn({
            let denied = denied.clone();
            async move {
                loop {
                    let Ok((client, _)) = listener.accept().await else {
                        continue;
                    };
                    let (rules, denied, sink) = (rules.clone(), denied.clone(), sink.clone());
                    tokio::spawn(async move {
                        let _ = serve(client, &rules, &denied, sink.as_ref()).await;
                    });
                }
            }
        });
        Ok(Proxy { port, denied, task })
    }

    /// The loopback port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Requests refused so far.
    pub fn denied(&self) -> u64 {
        self.denied.load(Ordering::Relaxed)
    }
}

/// Whether `egress` allows `host:port`.
pub fn allows(egress: &Egress, host: &str, port: u16) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    egress.hosts.iter().any(|h| host_matches(h, host))
        && (egress.ports.is_empty() || egress.ports.contains(&port))
}

async fn serve(
    mut client: TcpStream,
    egress: &Egress,
    denied: &AtomicU64,
    sink: Option<&DenialSink>,
) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let head_len = loop {
        let mut chunk = [0u8; 2048];
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        if buf.len() > MAX_HEAD {
            return reply(&mut client, 431, "Request Header Fields Too Large").await;
        }
    };
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut request = httparse::Request::new(&mut headers);
    if !matches!(
        request.parse(&buf[..head_len]),
        Ok(httparse::Status::Complete(_))
    ) {
        return reply(&mut client, 400, "Bad Request").await;
    }
    let method = request.method.unwrap_or_default().to_owned();
    let target = request.path.unwrap_or_default().to_owned();
    let (host, port, origin_form) = if method.eq_ignore_ascii_case("CONNECT") {
        match split_authority(&target, 443) {
            Some((h, p)) => (h, p, None),
            None => return reply(&mut client, 400, "Bad Request").await,
        }
    } else {
        match url::Url::parse(&target) {
            Ok(u) if u.scheme() == "http" && u.host_str().is_some() => {
                let path = match u.query() {
                    Some(q) => format!("{}?{q}", u.path()),
                    None => u.path().to_owned(),
                };
                (
                    u.host_str().unwrap_or_default().to_owned(),
                    u.port_or_known_default().unwrap_or(80),
                    Some(path),
                )
            }
            _ => return reply(&mut client, 400, "Bad Request").await,
        }
    };
    if !allows(egress, &host, port) {
        denied.fetch_add(1, Ordering::Relaxed);
        if let Some(sink) = sink {
            sink(&host, port);
        }
        return reply(&mut client, 403, "Forbidden").await;
    }
    let connect_to = host.trim_start_matches('[').trim_end_matches(']');
    let mut upstream = match TcpStream::connect((connect_to, port)).await {
        Ok(s) => s,
        Err(_) => return reply(&mut client, 502, "Bad Gateway").await,
    };
    match origin_form {
        None => {
            client
                .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                .await?;
            // Bytes the client sent after the CONNECT head (a TLS hello).
            upstream.write_all(&buf[head_len..]).await?;
        }
        Some(path) => {
            let mut head = format!(
                "{method} {path} HTTP/1.{}\r\n",
                request.version.unwrap_or(1)
            );
            for h in request.headers.iter() {
                let name = h.name.to_ascii_lowercase();
                if name.starts_with("proxy-") || name == "connection" || name == "keep-alive" {
                    continue;
                }
                head.push_str(h.name);
                head.push_str(": ");
                head.push_str(&String::from_utf8_lossy(h.value));
                head.push_str("\r\n");
            }
            head.push_str("Connection: close\r\n\r\n");
            upstream.write_all(head.as_bytes()).await?;
            upstream.write_all(&buf[head_len..]).await?;
        }
    }
    // Large buffers: a download through the proxy is a copy of big reads.
    tokio::io::copy_bidirectional_with_sizes(&mut client, &mut upstream, 64 << 10, 64 << 10)
        .await?;
    Ok(())
}

/// `host:port` (or `[v6]:port`), the port defaulting to `default`.
fn split_authority(authority: &str, default: u16) -> Option<(String, u16)> {
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None => default,
        };
        return Some((format!("[{host}]"), port));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => Some((host.to_owned(), port.parse().ok()?)),
        None => Some((authority.to_owned(), default)),
    }
}

async fn reply(client: &mut TcpStream, code: u16, text: &str) -> std::io::Result<()> {
    let body = format!("steward egress proxy: {code} {text}\n");
    let message = format!(
        "HTTP/1.1 {code} {text}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(message.as_bytes()).await?;
    client.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn egress(hosts: &[&str], ports: &[u16]) -> Egress {
        Egress {
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            ports: ports.to_vec(),
        }
    }

    #[test]
    fn hosts_and_ports_are_judged_as_the_profile_says() {
        let e = egress(&["api.github.com", "*.example.com"], &[443]);
        assert!(allows(&e, "api.github.com", 443));
        assert!(allows(&e, "API.GitHub.com", 443));
        assert!(!allows(&e, "api.github.com", 80));
        assert!(allows(&e, "a.example.com", 443));
        assert!(!allows(&e, "example.com", 443));
        assert!(!allows(&e, "evil.com", 443));
        assert!(allows(&egress(&["::1"], &[]), "[::1]", 8080));
        assert_eq!(split_authority("h:8443", 443), Some(("h".into(), 8443)));
        assert_eq!(split_authority("[::1]:1", 443), Some(("[::1]".into(), 1)));
        assert_eq!(split_authority("h", 443), Some(("h".into(), 443)));
    }

    #[tokio::test]
    async fn a_listed_host_is_relayed_and_another_is_refused_and_counted() {
        // An upstream on loopback that answers one request.
        let upstream = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let up_port = upstream.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut s, _) = upstream.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let n = s.read(&mut buf).await.unwrap();
            let got = String::from_utf8_lossy(&buf[..n]).to_string();
            assert!(got.starts_with("GET /x?y=1 HTTP/1.1\r\n"), "{got}");
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .await
                .unwrap();
        });
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink: DenialSink = {
            let seen = seen.clone();
            Arc::new(move |h: &str, p: u16| seen.lock().unwrap().push(format!("{h}:{p}")))
        };
        let proxy = Proxy::start(egress(&["127.0.0.1"], &[]), Some(sink))
            .await
            .unwrap();
        let port = proxy.port();
        let ask = |req: String| async move {
            let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            s.write_all(req.as_bytes()).await.unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).await.unwrap();
            out
        };
        let ok = ask(format!(
            "GET http://127.0.0.1:{up_port}/x?y=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nProxy-Connection: keep-alive\r\n\r\n"
        ))
        .await;
        assert!(ok.ends_with("ok"), "{ok}");
        let no =
            ask("CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n".into()).await;
        assert!(no.starts_with("HTTP/1.1 403"), "{no}");
        assert_eq!(proxy.denied(), 1);
        assert_eq!(*seen.lock().unwrap(), ["evil.example:443"]);
    }
}

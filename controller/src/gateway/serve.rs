//! The agent endpoint's transports: one MCP session per stream (stdio, a
//! Unix socket connection), and streamable HTTP at `/mcp` for many clients.
//!
//! HTTP is loopback by default; any other address needs a bearer token read
//! from a file only its owner can read. `Host` and `Origin` are validated
//! against DNS rebinding (rmcp's checks), and every request but the ones
//! with the right `Authorization: Bearer` is answered 401 when a token is
//! set.
//!
//! An HTTP session lasts while its client is connected (`Liveness`):
//! rmcp alone would end it after five minutes without a request, even while
//! the client holds its GET stream open to hear from the server.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rmcp::ServiceExt as _;
use rmcp::transport::streamable_http_server::session::SessionManager as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::UnixListener;
use tokio_util::sync::CancellationToken;

use super::Gateway;
use super::profile::Profile;
use super::session::Session;
use crate::support::listen::{self, Guarded};

/// The HTTP path of the endpoint.
pub const HTTP_PATH: &str = "/mcp";

/// Why the HTTP endpoint cannot start (the rules of [`crate::support::listen`]).
pub use crate::support::listen::ListenError;

/// A bound HTTP endpoint, ready to serve.
#[derive(Debug)]
pub struct HttpEndpoint {
    guarded: Guarded,
}

impl HttpEndpoint {
    /// Bind `address`, checking the token rules first.
    pub async fn bind(address: &str, token_file: Option<&Path>) -> Result<Self, ListenError> {
        let guarded = listen::bind(address, token_file, "--mcp-token-file").await?;
        Ok(HttpEndpoint { guarded })
    }

    /// The bound address (the port is known even when 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.guarded.local_addr()
    }

    /// Serve until `cancel`.
    pub async fn serve(self, gateway: Arc<Gateway>, cancel: CancellationToken) {
        let addr = self.local_addr();
        let mut config = StreamableHttpServerConfig::default()
            .with_cancellation_token(cancel.child_token())
            .with_allowed_origins([
                "http://localhost:*",
                "http://127.0.0.1:*",
                "http://[::1]:*",
                "https://localhost:*",
            ])
            .enforce_origin_validation();
        config = if self.guarded.loopback {
            config.with_allowed_hosts(["localhost", "127.0.0.1", "::1", "[::1]"])
        } else if addr.ip().is_unspecified() {
            // Any interface: the bearer token is what protects it.
            config.disable_allowed_hosts()
        } else {
            config.with_allowed_hosts(["localhost".to_owned(), addr.ip().to_string()])
        };
        let factory_gateway = gateway.clone();
        // Sessions end on DELETE or when their client is gone (Liveness),
        // never on rmcp's idle timer.
        let mut sessions = LocalSessionManager::default();
        sessions.session_config.keep_alive = None;
        let sessions = Arc::new(sessions);
        let service = StreamableHttpService::new(
            // The profile comes with the client's initialize request.
            move || Ok(Session::new(&factory_gateway, "http", Profile::default())),
            sessions.clone(),
            config,
        );
        let live = Arc::new(Liveness::default());
        tokio::spawn(
            live.clone()
                .reap(sessions, gateway.config.http_idle, cancel.clone()),
        );
        let Guarded {
            listener, token, ..
        } = self.guarded;
        loop {
            let (stream, peer) = tokio::select! {
                () = cancel.cancelled() => return,
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept an HTTP client");
                        // EMFILE and friends: back off instead of spinning.
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            let service = service.clone();
            let token = token.clone();
            let live = live.clone();
            let cancel = cancel.clone();
            tokio::spawn(async move {
                let handler = hyper::service::service_fn(move |request| {
                    let service = service.clone();
                    let token = token.clone();
                    let live = live.clone();
                    async move {
                        Ok::<_, std::convert::Infallible>(
                            route(service, token, &live, request).await,
                        )
                    }
                });
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), handler);
                tokio::select! {
                    result = connection => if let Err(e) = result {
                        tracing::debug!(%peer, error = %e, "http connection ended");
                    },
                    () = cancel.cancelled() => {}
                }
            });
        }
    }
}

type Response =
    http::Response<http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>>;

fn plain(status: http::StatusCode, text: &str) -> Response {
    let mut response = http::Response::new(Full::new(Bytes::from(text.to_owned())).boxed());
    *response.status_mut() = status;
    response
}

async fn route(
    service: StreamableHttpService<Session, LocalSessionManager>,
    token: Option<Arc<str>>,
    live: &Arc<Liveness>,
    request: http::Request<Incoming>,
) -> Response {
    if request.uri().path() != HTTP_PATH {
        return plain(
            http::StatusCode::NOT_FOUND,
            "not found: the MCP endpoint is /mcp\n",
        );
    }
    if !listen::authorized(request.headers(), token.as_deref()) {
        let mut response = plain(http::StatusCode::UNAUTHORIZED, "unauthorized\n");
        response.headers_mut().insert(
            http::header::WWW_AUTHENTICATE,
            http::HeaderValue::from_static("Bearer"),
        );
        return response;
    }
    // The client's view (`?expose=search&maxNameLen=50`): a typo is refused
    // here, not read as the default.
    if let Err(e) = Profile::from_query(request.uri().query()) {
        return plain(
            http::StatusCode::BAD_REQUEST,
            &format!("bad request: {e} (e.g. /mcp?expose=search&maxNameLen=50)\n"),
        );
    }
    let delete = request.method() == http::Method::DELETE;
    let asked = session_id(request.headers());
    let mut response = service.handle(request).await;
    // rmcp answers a session's DELETE with 202; the MCP SDKs expect 200 or
    // 204 (the Python SDK logs "Session termination failed: 202" on every
    // clean close), as the reference servers answer.
    if delete && response.status() == http::StatusCode::ACCEPTED {
        *response.status_mut() = http::StatusCode::OK;
    }
    // The session this exchange belongs to (an initialize's answer names it).
    let Some(id) = asked.or_else(|| session_id(response.headers())) else {
        return response;
    };
    if delete || response.status() == http::StatusCode::NOT_FOUND {
        live.forget(&id);
        return response;
    }
    if !response.status().is_success() {
        return response;
    }
    let open = live.open(id);
    response.map(|body| Tracked { body, _open: open }.boxed())
}

fn session_id(headers: &http::HeaderMap) -> Option<String> {
    headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// When each HTTP session was last heard from, and how many of its
/// responses are still open (its GET stream, a call's event stream).
#[derive(Debug, Default)]
struct Liveness {
    sessions: Mutex<HashMap<String, Seen>>,
}

#[derive(Debug)]
struct Seen {
    open: usize,
    last: Instant,
}

impl Liveness {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Seen>> {
        crate::support::sync::lock(&self.sessions)
    }

    /// A response of session `id` is open until the guard drops.
    fn open(self: &Arc<Self>, id: String) -> OpenResponse {
        let mut sessions = self.lock();
        let seen = sessions.entry(id.clone()).or_insert(Seen {
            open: 0,
            last: Instant::now(),
        });
        seen.open += 1;
        seen.last = Instant::now();
        OpenResponse {
            live: self.clone(),
            id,
        }
    }

    fn forget(&self, id: &str) {
        self.lock().remove(id);
    }

    /// Close, every so often, the sessions with no open response and no
    /// request for `idle`: clients that left without a DELETE.
    async fn reap(
        self: Arc<Self>,
        manager: Arc<LocalSessionManager>,
        idle: Duration,
        cancel: CancellationToken,
    ) {
        let mut tick = tokio::time::interval(
            (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(60)),
        );
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = tick.tick() => {}
            }
            let gone: Vec<String> = {
                let mut sessions = self.lock();
                let gone: Vec<String> = sessions
                    .iter()
                    .filter(|(_, s)| s.open == 0 && s.last.elapsed() >= idle)
                    .map(|(id, _)| id.clone())
                    .collect();
                for id in &gone {
                    sessions.remove(id);
                }
                gone
            };
            for id in gone {
                tracing::info!(session = %id, "closing an HTTP session whose client is gone");
                let _ = manager.close_session(&id.into()).await;
            }
        }
    }
}

/// One open response of a session (see [`Liveness`]).
#[derive(Debug)]
struct OpenResponse {
    live: Arc<Liveness>,
    id: String,
}

impl Drop for OpenResponse {
    fn drop(&mut self) {
        if let Some(seen) = self.live.lock().get_mut(&self.id) {
            seen.open -= 1;
            seen.last = Instant::now();
        }
    }
}

/// A response body that keeps its session's [`OpenResponse`] until it is
/// done or dropped (the client hung up).
struct Tracked {
    body: http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>,
    _open: OpenResponse,
}

impl hyper::body::Body for Tracked {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// Serve one client, seeing the workspace through `profile`, over a byte
/// stream until it hangs up (or `cancel`).
pub async fn serve_stream<R, W>(
    gateway: Arc<Gateway>,
    transport: &'static str,
    profile: Profile,
    read: R,
    write: W,
    cancel: CancellationToken,
) where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let session = Session::new(&gateway, transport, profile);
    // A child token: rmcp cancels the token it is given when the session
    // ends, and that must not end every other session (nor the listeners).
    match session
        .serve_with_ct((read, write), cancel.child_token())
        .await
    {
        Ok(running) => {
            let _ = running.waiting().await;
        }
        Err(e) => tracing::warn!(transport, error = %e, "an agent client failed to initialize"),
    }
}

/// Accept agent clients on the Unix socket (each `steward mcp` that
/// attaches) until `cancel`.
pub async fn serve_unix(gateway: Arc<Gateway>, listener: UnixListener, cancel: CancellationToken) {
    loop {
        let stream = tokio::select! {
            () = cancel.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "accept an agent client");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        if !crate::support::socket::peer_is_same_user(&stream) {
            tracing::warn!("refused an agent connection from another user");
            continue;
        }
        tokio::spawn(serve_attached(gateway.clone(), stream, cancel.clone()));
    }
}

/// One attached client: the agent's own stdio when `steward mcp` hands it
/// over ([`super::handover`]), else MCP over the socket itself.
async fn serve_attached(
    gateway: Arc<Gateway>,
    stream: tokio::net::UnixStream,
    cancel: CancellationToken,
) {
    use std::os::fd::AsFd as _;
    let first = loop {
        if stream.readable().await.is_err() {
            return;
        }
        match stream.try_io(tokio::io::Interest::READABLE, || {
            super::handover::recv(stream.as_fd())
        }) {
            Ok(first) => break first,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => {
                tracing::debug!(error = %e, "read from an agent client");
                return;
            }
        }
    };
    let (mut bytes, mut fds) = first;
    if bytes.first() == Some(&super::handover::MARK) && fds.len() == 2 {
        let profile = read_profile(&bytes[1..]);
        let output = fds.pop().expect("two descriptors");
        let input = fds.pop().expect("two descriptors");
        let (Some(read), Some(write)) = (
            super::handover::reader(input),
            super::handover::writer(output),
        ) else {
            tracing::warn!("an agent's stdio handed over is neither a pipe nor a socket");
            return;
        };
        // The bridge process lives as long as the session: when it goes
        // (the agent killed it), so does the session; when the session
        // ends, dropping the socket lets the bridge exit.
        let session = cancel.child_token();
        let watch = {
            let session = session.clone();
            async move {
                let mut byte = [0u8; 1];
                loop {
                    if stream.readable().await.is_err() {
                        break;
                    }
                    match stream.try_read(&mut byte) {
                        Ok(_) => break,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                        Err(_) => break,
                    }
                }
                session.cancel();
                stream
            }
        };
        let served = serve_stream(gateway, "unix", profile, read, write, session.clone());
        tokio::pin!(watch);
        tokio::select! {
            () = served => {}
            _ = &mut watch => {}
        }
        return;
    }
    drop(fds);
    let (mut read, write) = stream.into_split();
    let mut profile = Profile::default();
    if bytes.first() == Some(&super::handover::HELLO) {
        // The profile line, then the agent's bytes.
        while !bytes.contains(&b'\n') {
            let mut more = [0u8; 1024];
            match tokio::io::AsyncReadExt::read(&mut read, &mut more).await {
                Ok(0) | Err(_) => return,
                Ok(n) => bytes.extend_from_slice(&more[..n]),
            }
        }
        let end = bytes.iter().position(|b| *b == b'\n').expect("a line end");
        profile = read_profile(&bytes[1..end]);
        bytes.drain(..=end);
    }
    let read = tokio::io::AsyncReadExt::chain(std::io::Cursor::new(bytes), read);
    serve_stream(gateway, "unix", profile, read, write, cancel).await;
}

/// The profile `steward mcp` sent; a profile this controller cannot read
/// (another version's) is logged and served as the default.
fn read_profile(bytes: &[u8]) -> Profile {
    Profile::decode(bytes).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "an attached agent client's view; serving it the default one");
        Profile::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_non_loopback_address_needs_a_token_file() {
        let error = HttpEndpoint::bind("0.0.0.0:0", None).await.unwrap_err();
        assert!(matches!(error, ListenError::NeedsToken { .. }), "{error}");
        assert!(error.to_string().contains("--mcp-token-file"));
    }
}

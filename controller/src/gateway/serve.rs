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
//! the client holds its GET stream open to hear from the server. It also
//! outlives the controller ([`super::http_sessions`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_server::session::SessionManager as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServiceExt as _};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::UnixListener;
use tokio_util::sync::CancellationToken;

use super::Gateway;
use super::agent_wire::{self, Egress, Ingress};
use super::http_sessions::HttpSessions;
use super::profile::Profile;
use super::resume::{
    Attach, Back, Gate, HANDBACK_WAIT, Handback, Ledger, Resume, frame, read_frame,
};
use super::session::Session;
use crate::support::listen::{self, Guarded};

/// The HTTP path of the endpoint.
pub const HTTP_PATH: &str = "/mcp";

tokio::task_local! {
    /// The view (query string) of the HTTP request being handled.
    static VIEW: Profile;
}

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
        // Sessions outlive this controller: the next one accepts their ids.
        let kept = Arc::new(HttpSessions::load(
            gateway.store.paths().http_sessions_file(),
            gateway.config.http_idle,
        ));
        if !kept.is_empty() {
            tracing::info!(
                sessions = kept.len(),
                "HTTP sessions of the last controller can go on"
            );
        }
        config.session_store = Some(kept.clone());
        let factory_gateway = gateway.clone();
        // Sessions end on DELETE or when their client is gone (Liveness),
        // never on rmcp's idle timer.
        let mut sessions = LocalSessionManager::default();
        sessions.session_config.keep_alive = None;
        let sessions = Arc::new(sessions);
        let service = StreamableHttpService::new(
            // The view of the request being handled (its query string).
            move || {
                let profile = VIEW.try_with(Profile::clone).unwrap_or_default();
                Ok(Session::new(&factory_gateway, "http", profile))
            },
            sessions.clone(),
            config,
        );
        let live = Arc::new(Liveness::default());
        tokio::spawn(
            live.clone()
                .reap(sessions, kept, gateway.config.http_idle, cancel.clone()),
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
            let gateway = gateway.clone();
            tokio::spawn(async move {
                // A server Steward runs never reaches the endpoint (it could
                // call other servers' tools outside its sandbox).
                if let Ok(local) = stream.local_addr() {
                    let own = tokio::task::spawn_blocking(move || {
                        crate::support::socket::tcp_peer_is_own_server(local, peer)
                    })
                    .await
                    .unwrap_or(false);
                    if own {
                        tracing::warn!(%peer, "refused an HTTP agent connection from a server Steward runs");
                        return;
                    }
                }
                let handler = hyper::service::service_fn(move |request| {
                    let service = service.clone();
                    let token = token.clone();
                    let live = live.clone();
                    let gateway = gateway.clone();
                    async move {
                        Ok::<_, std::convert::Infallible>(
                            route(&gateway, service, token, &live, request).await,
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
    gateway: &Gateway,
    service: StreamableHttpService<Session, LocalSessionManager>,
    token: Option<Arc<str>>,
    live: &Arc<Liveness>,
    request: http::Request<Incoming>,
) -> Response {
    // The client's view (`?expose=search&maxNameLen=50`, `?server=NAME`,
    // `/mcp/NAME`): a typo is refused here, not read as the default.
    let Some(viewed) = Profile::from_request(request.uri().path(), request.uri().query()) else {
        return plain(
            http::StatusCode::NOT_FOUND,
            "not found: the MCP endpoint is /mcp (one server alone: /mcp/NAME)\n",
        );
    };
    if !listen::authorized(request.headers(), token.as_deref()) {
        let mut response = plain(http::StatusCode::UNAUTHORIZED, "unauthorized\n");
        response.headers_mut().insert(
            http::header::WWW_AUTHENTICATE,
            http::HeaderValue::from_static("Bearer"),
        );
        return response;
    }
    let profile = match viewed {
        Ok(profile) => profile,
        Err(e) => {
            return plain(
                http::StatusCode::BAD_REQUEST,
                &format!(
                    "bad request: {e} (e.g. /mcp?expose=search&maxNameLen=50 or /mcp?server=NAME)\n"
                ),
            );
        }
    };
    // A one-server view of a name that cannot be served: not found, why.
    if let Some(why) = profile
        .server
        .as_deref()
        .and_then(|server| gateway.view_refusal(server))
    {
        return plain(http::StatusCode::NOT_FOUND, &format!("not found: {why}\n"));
    }
    let delete = request.method() == http::Method::DELETE;
    let asked = session_id(request.headers());
    // A session made while this request is handled sees its view from the
    // start (a request of 2026-07-28 has no session of its own).
    // What rmcp's types would drop rides private keys through it.
    let request = match with_wire_body(request).await {
        Ok(request) => request,
        Err(response) => return response,
    };
    let mut response = VIEW
        .scope(profile, service.handle(request))
        .await
        .map(|body| {
            body.map_frame(|frame| frame.map_data(agent_wire::response_frame))
                .boxed()
        });
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

/// `request` with its body as rmcp can read it whole
/// ([`agent_wire::request_body`]); a body that cannot be read is refused.
async fn with_wire_body(
    request: http::Request<Incoming>,
) -> Result<http::Request<Full<Bytes>>, Response> {
    let (parts, body) = request.into_parts();
    let body = match body.collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) => {
            return Err(plain(
                http::StatusCode::BAD_REQUEST,
                &format!("bad request: reading the body: {e}\n"),
            ));
        }
    };
    let version = parts
        .headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok());
    let body = if parts.method == http::Method::POST {
        agent_wire::request_body(body, version)
    } else {
        body
    };
    Ok(http::Request::from_parts(parts, Full::new(body)))
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
    /// request for `idle`: clients that left without a DELETE. The kept
    /// sessions learn when each was last heard from (and, at the end, that
    /// the ones with an open response were heard from now).
    async fn reap(
        self: Arc<Self>,
        manager: Arc<LocalSessionManager>,
        kept: Arc<HttpSessions>,
        idle: Duration,
        cancel: CancellationToken,
    ) {
        let mut tick = tokio::time::interval(
            (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(60)),
        );
        loop {
            tokio::select! {
                () = cancel.cancelled() => {
                    kept.update(&self.last_seen(), &[]);
                    kept.flush();
                    return;
                }
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
            kept.update(&self.last_seen(), &gone);
            for id in gone {
                tracing::info!(session = %id, "closing an HTTP session whose client is gone");
                let _ = manager.close_session(&id.into()).await;
            }
        }
    }

    /// When each session was last heard from (now, for one with an open
    /// response).
    fn last_seen(&self) -> Vec<(String, SystemTime)> {
        let now = SystemTime::now();
        self.lock()
            .iter()
            .map(|(id, s)| {
                let at = if s.open > 0 {
                    now
                } else {
                    now - s.last.elapsed()
                };
                (id.clone(), at)
            })
            .collect()
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
/// stream until it hangs up (or `cancel`); a `resume`d one goes on where
/// another controller left it.
pub async fn serve_stream<R, W>(
    gateway: Arc<Gateway>,
    transport: &'static str,
    profile: Profile,
    resume: Option<Resume>,
    read: R,
    write: W,
    cancel: CancellationToken,
) where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    // A child token: rmcp cancels the token it is given when the session
    // ends, and that must not end every other session (nor the listeners).
    let session = Session::new(&gateway, transport, profile);
    if let Some(running) = start(session, resume, read, write, cancel.child_token()).await {
        let _ = running.waiting().await;
    }
}

/// Run `session` over `read`/`write`: with the `initialize` handshake, or
/// as already initialized when it is `resume`d (its pending input first).
async fn start<R, W>(
    session: Session,
    resume: Option<Resume>,
    read: R,
    write: W,
    cancel: CancellationToken,
) -> Option<RunningService<RoleServer, Session>>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    match resume {
        Some(resume) => {
            // The client's open listens first, as if it sent them again.
            let mut input = Vec::new();
            for line in &resume.listens {
                input.extend_from_slice(line.as_bytes());
                input.push(b'\n');
            }
            input.extend_from_slice(&resume.pending);
            let read = tokio::io::AsyncReadExt::chain(std::io::Cursor::new(input), read);
            let legacy = resume
                .initialize
                .as_ref()
                .is_some_and(|init| agent_wire::legacy(init.protocol_version.as_str()));
            let (read, write) = (Ingress::new(read, legacy), Egress::new(write));
            let initialized = resume.initialize.is_some();
            let running = rmcp::service::serve_directly_with_ct(
                session,
                (read, write),
                resume.initialize,
                cancel,
            );
            let peer = initialized.then(|| running.peer().clone());
            running.service().resumed(peer, resume.seen);
            tracing::info!("an agent's session resumed from the last controller");
            Some(running)
        }
        None => match session
            .serve_with_ct((Ingress::new(read, false), Egress::new(write)), cancel)
            .await
        {
            Ok(running) => Some(running),
            Err(e) => {
                tracing::warn!(error = %e, "an agent client failed to initialize");
                None
            }
        },
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
        if let Err(why) = crate::support::socket::admit_peer(&stream) {
            tracing::warn!(peer = ?stream.peer_cred().ok(), ?why, "refused an agent connection");
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
    if bytes.is_empty() && fds.is_empty() {
        // Connected and gone: a `steward mcp` checking that a controller
        // serves here.
        return;
    }
    if bytes.first() == Some(&super::handover::MARK) && fds.len() == 2 {
        bytes.remove(0);
        let output = fds.pop().expect("two descriptors");
        let input = fds.pop().expect("two descriptors");
        serve_handed_over(gateway, stream, bytes, input, output, cancel).await;
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
    serve_stream(gateway, "unix", profile, None, read, write, cancel).await;
}

/// A session on the agent's own stdio, handed over by `steward mcp` with an
/// [`Attach`] frame (`first` holds what was read of it). The bridge hears
/// the session's state as it changes, and at the end whether the agent
/// left or the session goes back to it for the next controller
/// ([`super::resume`]).
async fn serve_handed_over(
    gateway: Arc<Gateway>,
    stream: tokio::net::UnixStream,
    mut first: Vec<u8>,
    input: std::os::fd::OwnedFd,
    output: std::os::fd::OwnedFd,
    cancel: CancellationToken,
) {
    use tokio::io::AsyncWriteExt as _;
    let (mut from_bridge, mut to_bridge) = stream.into_split();
    let (attach, pending) =
        match read_frame::<Attach, _>(&mut from_bridge, &mut first, |a| a.pending).await {
            Ok(Some(frame)) => frame,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "read an agent's handover");
                return;
            }
        };
    let profile = read_profile(attach.profile.as_bytes());
    let resume = attach.resume.map(|resume| Resume { pending, ..resume });
    let (Some(read), Some(write)) = (
        super::handover::reader(input),
        super::handover::writer(output),
    ) else {
        tracing::warn!("an agent's stdio handed over is neither a pipe nor a socket");
        return;
    };
    let _handing = gateway.handing();
    let (handback, mut state) = tokio::sync::watch::channel(Handback::default());
    // Where the bridge reads the requests in flight if this controller is
    // killed: passed with the first state.
    let mut ledger = match Ledger::create() {
        Ok(ledger) => Some(Arc::new(ledger)),
        Err(error) => {
            tracing::debug!(%error, "make the ledger of an agent's requests in flight");
            None
        }
    };
    let gate = Gate::reporting(handback.clone(), ledger.clone());
    let session = Session::reporting(&gateway, "unix", profile, Some(handback));
    let ended = cancel.child_token();
    let Some(running) = start(
        session,
        resume,
        gate.reader(read),
        gate.writer(write),
        ended.clone(),
    )
    .await
    else {
        let _ = to_bridge.write_all(&frame(&Back::Ended, &[])).await;
        return;
    };
    // The bridge process lives as long as the session: when it goes (the
    // agent killed it), so does the session.
    let bridge_gone = async move {
        let mut byte = [0u8; 64];
        loop {
            match tokio::io::AsyncReadExt::read(&mut from_bridge, &mut byte).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    let waiting = running.waiting();
    tokio::pin!(bridge_gone, waiting);
    let mut draining = gateway.draining();
    loop {
        tokio::select! {
            _ = &mut waiting => {
                // The agent hung up (or the session failed): the bridge may
                // go. Not when the controller stops without handing back:
                // the bridge then takes it as a crash and resumes.
                if !cancel.is_cancelled() {
                    let _ = to_bridge.write_all(&frame(&Back::Ended, &[])).await;
                }
                return;
            }
            () = &mut bridge_gone => {
                ended.cancel();
                let _ = waiting.await;
                return;
            }
            Ok(()) = state.changed() => {
                let line = frame(&state.borrow_and_update().back(), &[]);
                if send_state(&mut to_bridge, &line, ledger.take()).await.is_err() {
                    ended.cancel();
                    return;
                }
            }
            // Also when the stop began before this session did.
            () = async { let _ = draining.wait_for(|stopping| *stopping).await; } => break,
        }
    }
    // The controller stops: let the requests read be answered, then hand
    // the session back with what was read past them.
    let deadline = tokio::time::Instant::now() + HANDBACK_WAIT;
    let (pending, unanswered) = gate.drain(deadline).await;
    ended.cancel();
    let _ = waiting.await;
    if unanswered > 0 {
        tracing::warn!(
            unanswered,
            "an agent's requests were not answered before the controller stopped; they are lost"
        );
    }
    let state = state.borrow().back();
    let mut out = frame(&state, &[]);
    out.extend(frame(
        &Back::Drained {
            pending: pending.len(),
        },
        &pending,
    ));
    let _ = to_bridge.write_all(&out).await;
    let _ = to_bridge.shutdown().await;
}

/// Write a [`Back`] frame to the bridge, with the session's `ledger` the
/// first time (a bridge of an earlier version drops the descriptor).
async fn send_state(
    to_bridge: &mut tokio::net::unix::OwnedWriteHalf,
    line: &[u8],
    ledger: Option<Arc<Ledger>>,
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd as _;
    use tokio::io::AsyncWriteExt as _;
    match ledger {
        Some(ledger) => {
            let fds = [ledger.as_fd().as_raw_fd()];
            super::handover::send_all(to_bridge.as_ref(), &fds, line).await
        }
        None => to_bridge.write_all(line).await,
    }
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

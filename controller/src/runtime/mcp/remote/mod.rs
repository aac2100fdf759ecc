//! Remote MCP servers: what it takes to reach a server over the network,
//! for both transports Qwen Code speaks — streamable HTTP (`httpUrl`) and
//! the legacy HTTP+SSE transport (`url`).
//!
//! This module owns the endpoint (URL, configured headers, the OAuth token
//! source — [`oauth`]: signing in, the token store, refreshes), the one
//! HTTP client with its TLS roots ([`tls`]), the SSE client transport
//! ([`sse`]), and the judgement of when an established session is lost
//! ([`SessionWatch`]). [`super`] runs the protocol over the transports
//! built here.
//!
//! - **A lost session is reported at once, with its reason.** A remote
//!   server that restarted forgets our session (HTTP 404), one that is down
//!   refuses the connection, a token refused even after a refresh gets HTTP
//!   401, an SSE stream ends: the first request (or stream read) that sees
//!   it reports it through
//!   [`SessionWatch`] as an `Exited` event, so the controller reconnects
//!   instead of waiting for two failed pings. rmcp's own silent session
//!   re-initialization is off: a reconnect goes through the controller, which
//!   lists tools again.
//! - **Secrets never reach a message or a log**: header values and tokens
//!   are never formatted; reqwest's errors lose their URL before rmcp (which
//!   logs them) or we see them; other messages name URLs only through the
//!   caller's redaction (`mcp::redact_urls`).

pub mod oauth;
pub mod sse;
mod streamable;
pub mod tls;

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt as _;
use futures::future::Either;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use rmcp::RoleClient;
use rmcp::model::{ClientJsonRpcMessage, RequestId, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransportConfig, StreamableHttpError,
};
use rmcp::transport::{StreamableHttpClientTransport, Transport};
use steward_schema::resource::{McpServerSpec, McpTransport, Reason};
use tokio::time::Instant;

use self::oauth::source::TokenSource;
use self::sse::{SseError, SseTransport};
use self::streamable::WatchedClient;
use crate::runtime::mcp::session::Refused;
use crate::runtime::start::StartError;

/// Headers the transports set themselves: configuring one is an error.
const RESERVED_HEADERS: [&str; 3] = ["accept", "mcp-session-id", "last-event-id"];

/// Everything needed to open a session with one remote server.
struct Endpoint {
    /// The URL as configured (its query may carry a secret: never shown).
    url: String,
    /// The configured headers, validated (no `Authorization` when an OAuth
    /// token replaces it).
    headers: HeaderMap,
    /// Where the OAuth access token comes from (`Authorization: Bearer`).
    source: Arc<TokenSource>,
    /// The shared HTTP client.
    client: reqwest::Client,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("headers", &self.headers.len())
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// The configured headers plus `Authorization: Bearer <token>` when
    /// there is a token (for transports that set every header themselves).
    fn all_headers(&self, bearer: Option<&str>) -> HeaderMap {
        let mut headers = self.headers.clone();
        if let Some(token) = bearer
            && let Ok(mut value) = HeaderValue::from_str(&format!("Bearer {token}"))
        {
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        headers
    }
}

fn start_failed(message: impl Into<String>) -> StartError {
    StartError::failed(message)
}

/// The URL a remote spec connects to: `httpUrl` (streamable HTTP) or `url` (SSE).
pub fn url_of(spec: &McpServerSpec) -> Result<&str, StartError> {
    let (url, key) = match spec.transport {
        McpTransport::Sse => (spec.url.as_deref(), "url"),
        _ => (spec.http_url.as_deref(), "httpUrl"),
    };
    url.filter(|url| !url.is_empty()).ok_or_else(|| {
        let transport = match spec.transport {
            McpTransport::Sse => "sse",
            _ => "http",
        };
        start_failed(format!("connect: the {transport} transport needs a {key}"))
    })
}

/// Builds the endpoint of `name`: checks the URL's scheme and the headers,
/// gets the shared client, and the OAuth token source (a stored token,
/// refreshed when it is about to expire). Messages start without the URL:
/// the caller prefixes `connect to <redacted url>: `.
async fn endpoint(name: &str, spec: &McpServerSpec) -> Result<Endpoint, StartError> {
    let url = url_of(spec)?;
    let scheme = url
        .split_once("://")
        .map(|(scheme, _)| scheme.to_ascii_lowercase());
    if !matches!(scheme.as_deref(), Some("http" | "https")) {
        return Err(start_failed("not an http:// or https:// URL"));
    }
    let headers = headers(spec)?;
    let client = tls::shared_client()
        .await
        .map_err(|error| start_failed(error.to_string()))?;
    let source = Arc::new(TokenSource::open(name, url, spec).await?);
    let mut endpoint = Endpoint {
        url: url.to_owned(),
        headers,
        source,
        client,
    };
    if endpoint.source.has_token().await {
        // Qwen Code: the token wins over a configured Authorization header.
        endpoint.headers.remove(AUTHORIZATION);
    }
    Ok(endpoint)
}

/// Opens the transport to `name` — endpoint, OAuth token, TLS and, for SSE,
/// the event stream up to its `endpoint` event — by `deadline` (the
/// handshake's; `timeout` is its length, for the message). `watch` gets the
/// transport's lost-session reports.
pub async fn connect(
    name: &str,
    spec: &McpServerSpec,
    watch: &SessionWatch,
    deadline: Instant,
    timeout: Duration,
) -> Result<RemoteTransport, StartError> {
    let timed_out = |what: &str| {
        StartError::new(
            Reason::StartupTimeout,
            format!(
                "complete the MCP handshake within {}: {what}",
                humantime::format_duration(timeout)
            ),
        )
    };
    let endpoint = tokio::time::timeout_at(deadline, endpoint(name, spec))
        .await
        .map_err(|_| timed_out("no answer from the OAuth token endpoint"))??;
    watch.set_source(endpoint.source.clone());
    let bearer = endpoint.source.bearer().await;
    tracing::debug!(server = %name, transport = ?spec.transport, headers = endpoint.headers.len(), oauth = bearer.is_some(), "connecting to mcp server");
    if spec.transport == McpTransport::Sse {
        let connecting = async {
            let headers = endpoint.all_headers(bearer.as_deref());
            let first = SseTransport::connect(
                endpoint.client.clone(),
                &endpoint.url,
                headers,
                watch.clone(),
            )
            .await;
            // Refused: once more with a token another process stored or a
            // refreshed one, if there is one.
            match first {
                Err(SseError::Status(status)) if status == reqwest::StatusCode::UNAUTHORIZED => {
                    match endpoint.source.unauthorized(bearer.as_deref(), None).await {
                        Some(token) => {
                            let headers = endpoint.all_headers(Some(&token));
                            SseTransport::connect(
                                endpoint.client.clone(),
                                &endpoint.url,
                                headers,
                                watch.clone(),
                            )
                            .await
                        }
                        None => first,
                    }
                }
                other => other,
            }
        };
        return match tokio::time::timeout_at(deadline, connecting).await {
            Ok(Ok(transport)) => Ok(RemoteTransport::Sse(
                transport.with_source(endpoint.source.clone()),
            )),
            Ok(Err(error)) => Err(watch
                .auth_required(name)
                .unwrap_or_else(|| start_failed(error_chain(&error)))),
            Err(_) => Err(timed_out("no endpoint event on the event stream")),
        };
    }
    // A lost session is the controller's to reconnect (and relist), not
    // rmcp's to re-initialize behind its back.
    let mut config = StreamableHttpClientTransportConfig::with_uri(endpoint.url.as_str())
        .reinit_on_expired_session(false);
    config.custom_headers = endpoint
        .headers
        .iter()
        .map(|(header, value)| (header.clone(), value.clone()))
        .collect();
    // Every request's token comes from the source (see `streamable`).
    let http = WatchedClient::new(endpoint.client, watch.clone(), Some(endpoint.source));
    Ok(RemoteTransport::Streamable(
        StreamableHttpClientTransport::with_client(http, config),
    ))
}

/// The transport of one remote session.
pub enum RemoteTransport {
    /// `httpUrl`: rmcp's streamable-HTTP client over `WatchedClient`.
    Streamable(StreamableHttpClientTransport<WatchedClient>),
    /// `url`: the legacy HTTP+SSE transport.
    Sse(SseTransport),
}

impl std::fmt::Debug for RemoteTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RemoteTransport::Streamable(_) => "RemoteTransport::Streamable",
            RemoteTransport::Sse(_) => "RemoteTransport::Sse",
        })
    }
}

/// An error of either remote transport.
#[derive(Debug, thiserror::Error)]
pub enum RemoteTransportError {
    #[error(transparent)]
    Streamable(StreamableHttpError<reqwest::Error>),
    #[error(transparent)]
    Sse(SseError),
}

/// What a request refused for its credentials needs from the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignInNeed {
    /// The server refused the token (or wants one): HTTP 401.
    SignIn,
    /// The token lacks scope (HTTP 403 `insufficient_scope`); the scope
    /// the server named, if any.
    MoreScope(Option<String>),
}

impl std::fmt::Display for SignInNeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SignInNeed::SignIn => f.write_str("the server refused the credentials (HTTP 401)"),
            SignInNeed::MoreScope(Some(scope)) => {
                write!(f, "the server asks for more scope ({scope})")
            }
            SignInNeed::MoreScope(None) => f.write_str("the server asks for more scope (HTTP 403)"),
        }
    }
}

/// Whether `error` (a remote transport's, anywhere in its chain) is a
/// refusal of the request's credentials, and what it needs.
pub fn sign_in_need(error: &(dyn std::error::Error + 'static)) -> Option<SignInNeed> {
    let mut current = Some(error);
    while let Some(error) = current {
        // The legacy SSE transport's post refused (HTTP 401).
        let sse = match error.downcast_ref::<RemoteTransportError>() {
            Some(RemoteTransportError::Sse(e)) => Some(e),
            _ => error.downcast_ref::<SseError>(),
        };
        match sse {
            Some(SseError::PostStatus(status)) if *status == reqwest::StatusCode::UNAUTHORIZED => {
                return Some(SignInNeed::SignIn);
            }
            Some(SseError::InsufficientScope(scope)) => {
                return Some(SignInNeed::MoreScope(scope.clone()));
            }
            _ => {}
        }
        let streamable = match error.downcast_ref::<RemoteTransportError>() {
            Some(RemoteTransportError::Streamable(e)) => Some(e),
            _ => error.downcast_ref::<StreamableHttpError<reqwest::Error>>(),
        };
        match streamable {
            Some(StreamableHttpError::AuthRequired(_)) => return Some(SignInNeed::SignIn),
            Some(StreamableHttpError::UnexpectedServerResponse(text))
                if text.starts_with("HTTP 401") =>
            {
                return Some(SignInNeed::SignIn);
            }
            Some(StreamableHttpError::InsufficientScope(e)) => {
                return Some(SignInNeed::MoreScope(e.required_scope.clone()));
            }
            _ => {}
        }
        current = error.source();
    }
    None
}

/// Finds the cause rmcp's streamable-HTTP error keeps out of `source()`
/// (its `Client` variant wraps reqwest's error without exposing it).
pub fn dig<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a (dyn std::error::Error + 'static)> {
    let streamable = match error.downcast_ref::<RemoteTransportError>() {
        Some(RemoteTransportError::Streamable(error)) => error,
        _ => error.downcast_ref::<StreamableHttpError<reqwest::Error>>()?,
    };
    match streamable {
        StreamableHttpError::Client(inner) => Some(inner),
        _ => None,
    }
}

impl Transport<RoleClient> for RemoteTransport {
    type Error = RemoteTransportError;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), RemoteTransportError>> + Send + 'static {
        match self {
            RemoteTransport::Streamable(transport) => Either::Left(
                transport
                    .send(item)
                    .map(|result| result.map_err(RemoteTransportError::Streamable)),
            ),
            RemoteTransport::Sse(transport) => Either::Right(
                transport
                    .send(item)
                    .map(|result| result.map_err(RemoteTransportError::Sse)),
            ),
        }
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        match self {
            RemoteTransport::Streamable(transport) => transport.receive().await,
            RemoteTransport::Sse(transport) => transport.receive().await,
        }
    }

    async fn close(&mut self) -> Result<(), RemoteTransportError> {
        match self {
            RemoteTransport::Streamable(transport) => transport
                .close()
                .await
                .map_err(RemoteTransportError::Streamable),
            RemoteTransport::Sse(transport) => {
                transport.close().await.map_err(RemoteTransportError::Sse)
            }
        }
    }
}

/// The configured headers as a header map. Values are never shown: a parse
/// error could echo a secret.
fn headers(spec: &McpServerSpec) -> Result<HeaderMap, StartError> {
    let mut map = HeaderMap::new();
    for (header, value) in spec.headers.iter().flatten() {
        if RESERVED_HEADERS
            .iter()
            .any(|reserved| header.eq_ignore_ascii_case(reserved))
        {
            return Err(start_failed(format!(
                "header {header} is set by the MCP transport and cannot be configured"
            )));
        }
        let Ok(name) = HeaderName::from_bytes(header.as_bytes()) else {
            return Err(start_failed(format!(
                "{header:?} is not a valid header name"
            )));
        };
        let Ok(mut value) = HeaderValue::from_str(value) else {
            return Err(start_failed(format!(
                "the value of header {header} is not a valid header value"
            )));
        };
        value.set_sensitive(true);
        map.insert(name, value);
    }
    Ok(map)
}

/// What an established remote session's requests and streams observed.
///
/// The transports call [`SessionWatch::lost`] when a failure means the
/// session is gone; once [`armed`](SessionWatch::arm) (the session is
/// established), the first such report is handed to the `report` callback
/// and later ones are dropped. Before that, a failure is the handshake's
/// error, and [`SessionWatch::unauthorized`] tells the caller whether it was
/// an authorization refusal.
#[derive(Clone)]
pub struct SessionWatch {
    inner: Arc<WatchInner>,
}

/// Receives the message of a lost session.
type Report = Box<dyn FnOnce(String) + Send>;

struct WatchInner {
    armed: AtomicBool,
    fired: AtomicBool,
    unauthorized: AtomicBool,
    /// A request was refused for lack of scope.
    forbidden: AtomicBool,
    report: Mutex<Option<Report>>,
    /// The session's token source: it knows why a sign-in is needed.
    source: Mutex<Option<Arc<TokenSource>>>,
    /// Where the requests the server refused are noted.
    refused: Mutex<Option<Refused>>,
}

impl std::fmt::Debug for SessionWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionWatch")
            .field("armed", &self.inner.armed.load(Ordering::SeqCst))
            .field("fired", &self.inner.fired.load(Ordering::SeqCst))
            .finish_non_exhaustive()
    }
}

/// Why a request or stream failed, as far as the session is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Loss {
    /// The server answered 404 for our session: it no longer knows it.
    SessionUnknown,
    /// The server answered 401: the credentials are no longer accepted.
    Unauthorized,
    /// The server could not be reached; the text says how.
    Unreachable(String),
    /// The SSE stream ended or broke; the text says how.
    StreamEnded(String),
}

impl std::fmt::Display for Loss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Reads after "the server": the reconcile says "the server exited (…)".
        match self {
            Loss::SessionUnknown => f.write_str(
                "lost the session: the server answered HTTP 404 for it (it probably restarted)",
            ),
            Loss::Unauthorized => {
                f.write_str("lost the session: the server refused the credentials (HTTP 401)")
            }
            Loss::Unreachable(how) => {
                write!(f, "lost the session: the server is unreachable: {how}")
            }
            Loss::StreamEnded(how) => write!(f, "lost the session: {how}"),
        }
    }
}

impl SessionWatch {
    /// A watch that calls `report` with the first loss after [`arm`](Self::arm).
    pub fn new(report: impl FnOnce(String) + Send + 'static) -> SessionWatch {
        SessionWatch {
            inner: Arc::new(WatchInner {
                armed: AtomicBool::new(false),
                fired: AtomicBool::new(false),
                unauthorized: AtomicBool::new(false),
                forbidden: AtomicBool::new(false),
                report: Mutex::new(Some(Box::new(report))),
                source: Mutex::new(None),
                refused: Mutex::new(None),
            }),
        }
    }

    /// The token source of the session.
    pub fn set_source(&self, source: Arc<TokenSource>) {
        *crate::support::sync::lock(&self.inner.source) = Some(source);
    }

    /// Where the session's refused requests are noted.
    pub(crate) fn set_refused(&self, refused: Refused) {
        *crate::support::sync::lock(&self.inner.refused) = Some(refused);
    }

    /// The server refused request `id` (HTTP 401) before acting on it:
    /// noted before the loss it brings is reported.
    pub fn refused(&self, id: RequestId, transient: Option<String>) {
        if let Some(refused) = &*crate::support::sync::lock(&self.inner.refused) {
            refused.note(id, transient);
        }
    }

    /// The session is established: losses are reported from now on.
    pub fn arm(&self) {
        self.inner.armed.store(true, Ordering::SeqCst);
    }

    /// Records a failure that means the session is gone. Returns whether the
    /// session counts as lost (armed); only the first loss is reported.
    pub fn lost(&self, loss: Loss) -> bool {
        if loss == Loss::Unauthorized {
            self.inner.unauthorized.store(true, Ordering::SeqCst);
        }
        if !self.inner.armed.load(Ordering::SeqCst) {
            return false;
        }
        if !self.inner.fired.swap(true, Ordering::SeqCst) {
            // Not the message: it may hold an unredacted URL (the report's
            // receiver redacts and logs it).
            tracing::debug!("remote mcp session lost");
            let report = crate::support::sync::lock(&self.inner.report).take();
            if let Some(report) = report {
                report(loss.to_string());
            }
        }
        true
    }

    /// Whether the server answered 401 to any request so far.
    pub fn unauthorized(&self) -> bool {
        self.inner.unauthorized.load(Ordering::SeqCst)
    }

    /// `AuthRequired` for `name` when the server answered 401 so far: what
    /// a failed handshake really means then (why, as the token source
    /// knows it, and the command that signs in).
    pub fn auth_required(&self, name: &str) -> Option<StartError> {
        let refused = self.unauthorized() || self.inner.forbidden.load(Ordering::SeqCst);
        refused.then(|| {
            let source = crate::support::sync::lock(&self.inner.source).clone();
            let message = match source.and_then(|s| s.problem()) {
                Some(problem) if !problem.sign_in_helps => problem.what,
                Some(problem) => oauth::auth_required_message(name, &problem.what),
                None => {
                    oauth::auth_required_message(name, "the server asks for a sign-in (HTTP 401)")
                }
            };
            StartError::new(Reason::AuthRequired, message)
        })
    }

    /// A request was refused for lack of scope (HTTP 403), even after
    /// another token was tried.
    pub fn forbidden(&self) {
        self.inner.forbidden.store(true, Ordering::SeqCst);
    }
}

/// An error and its causes, `: `-separated (URLs not redacted: the caller does).
pub(crate) fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
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

#[cfg(test)]
mod unit_tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn a_loss_is_reported_once_and_only_once_armed() {
        let (tx, rx) = std::sync::mpsc::channel();
        let watch = SessionWatch::new(move |message| tx.send(message).unwrap());
        assert!(!watch.lost(Loss::SessionUnknown), "not armed yet");
        assert!(rx.try_recv().is_err());
        watch.arm();
        assert!(watch.lost(Loss::Unreachable("connection refused".into())));
        assert!(watch.lost(Loss::SessionUnknown), "already reported");
        assert_eq!(
            rx.try_recv().unwrap(),
            "lost the session: the server is unreachable: connection refused"
        );
        assert!(rx.try_recv().is_err(), "reported twice");
    }

    #[test]
    fn a_401_before_the_session_is_remembered() {
        let watch = SessionWatch::new(|_| {});
        assert!(!watch.unauthorized());
        watch.lost(Loss::Unauthorized);
        assert!(watch.unauthorized());
    }

    fn remote_spec(headers: &[(&str, &str)]) -> McpServerSpec {
        McpServerSpec {
            transport: McpTransport::Http,
            http_url: Some("http://127.0.0.1:1/mcp".into()),
            headers: Some(
                headers
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn header_errors_never_show_the_value() {
        let error = headers(&remote_spec(&[("X-Key", "secret\nvalue")])).unwrap_err();
        assert_eq!(
            error.message,
            "the value of header X-Key is not a valid header value"
        );
        let error = headers(&remote_spec(&[("Mcp-Session-Id", "x")])).unwrap_err();
        assert!(
            error.message.contains("set by the MCP transport"),
            "{error}"
        );
        let map = headers(&remote_spec(&[("Authorization", "Bearer secret")])).unwrap();
        assert!(map[AUTHORIZATION].is_sensitive());
        assert!(!format!("{map:?}").contains("secret"));
    }
}
